"""The committed figures can be traced to a commit: each paper's run.json names a clean commit of this repository (no
``-dirty`` suffix: a run from an uncommitted tree cannot be reproduced from the history), ran at the default scale and
lists the files beside it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAPERS = ("isp", "dppose", "scoreshield", "synthesisnet")


def _in_history(commit: str) -> bool | None:
    """Whether ``commit`` is in this checkout's history (None: not a git checkout, or a shallow one)."""
    try:
        shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True,
                                 text=True, timeout=30)
        if shallow.returncode != 0 or shallow.stdout.strip() == "true":
            return None
        out = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.returncode == 0


@pytest.mark.parametrize("paper", PAPERS)
def test_committed_figures_come_from_a_clean_commit(paper):
    manifest = json.loads((ROOT / "figures" / paper / "run.json").read_text(encoding="utf-8"))
    commit = str(manifest.get("git_commit"))
    assert not commit.endswith("-dirty"), (
        f"figures/{paper}/run.json was written from an uncommitted tree ({commit}): regenerate the figures from a "
        "clean checkout (make figures) before committing them")
    assert re.fullmatch(r"[0-9a-f]{40}", commit), f"figures/{paper}/run.json names no commit: {commit!r}"
    assert manifest["parameters"]["scale"] == "default" and manifest["paper"] == paper
    known = _in_history(commit)
    assert known in (True, None), f"figures/{paper}/run.json names {commit[:12]}, which is not in this history"
