"""Checks of the files the notebooks wrote at the smoke and rehearsal scales (run by `make test` after nbval executed
them).

Collected only when PRIVKIT_SMOKE_OUT points at the folder `python -m privkit prepare` wrote into;
PRIVKIT_OUT_SCALE names that run's scale (default ``smoke``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privkit.config import PAPERS, artefacts

SMOKE = os.environ.get("PRIVKIT_SMOKE_OUT")
SCALE = os.environ.get("PRIVKIT_OUT_SCALE", "smoke")
#: What only the paper branch of each notebook writes: the paper's datasets and models by name, as whole CSV cells
#: (the papers' own numbers are labelled with dataset names too, e.g. "paper MPII", so substrings would not do).
PAPER_BRANCH_CELLS = {"scoreshield": ("lfw", "IJBB", "IJBC"), "synthesisnet": ("Blurry", "Male")}
pytestmark = pytest.mark.skipif(not SMOKE, reason="set PRIVKIT_SMOKE_OUT (make test does) to check notebook outputs")

PAPERS_WITH_NOTEBOOKS = [p for p, info in PAPERS.items() if info.has_notebook]


@pytest.mark.parametrize("paper", PAPERS_WITH_NOTEBOOKS)
def test_declared_artefacts_were_written(paper):
    out = Path(SMOKE) / "figures" / paper
    declared = artefacts(paper)
    assert declared, f"{paper} declares no artefacts (privkit/{paper}/presets.py)"
    for name, _ in declared:
        csv = out / f"{name}.csv"
        assert csv.is_file(), f"{paper}: {csv} missing"
        df = pd.read_csv(csv)
        assert len(df) > 0, f"{csv} is empty"
        num = df.select_dtypes("number").to_numpy(dtype=float)
        if num.size:  # a table may be all text (e.g. a list of claims); inf marks "no privacy"
            assert np.isfinite(num).any(), f"{csv} has no finite numeric value"
        if name.startswith("fig"):
            assert (out / f"{name}.png").is_file() and (out / f"{name}.pdf").is_file()
        else:
            assert (out / f"{name}.tex").is_file()


@pytest.mark.parametrize("paper", PAPERS_WITH_NOTEBOOKS)
def test_run_manifest_written(paper):
    manifest = json.loads((Path(SMOKE) / "figures" / paper / "run.json").read_text())
    assert manifest["paper"] == paper
    assert manifest["parameters"]["scale"] == SCALE
    assert manifest["wall_seconds"]


@pytest.mark.parametrize("paper", PAPERS_WITH_NOTEBOOKS)
def test_rehearsal_ran_the_paper_branch(paper):
    """At the rehearsal scale every notebook read the paper's datasets and models from the data root: their names
    appear in what it wrote (at the smoke scale they must not)."""
    out = Path(SMOKE) / "figures" / paper
    manifest = json.loads((out / "run.json").read_text())
    extra = manifest.get("extra", {})
    if paper == "dppose":  # its tables name methods and ε, not data: the manifest records what was read
        read = {extra.get("dataset"), extra.get("backbone")}
        paper_data = {"mpii", "tiny_vit_5m"}
    elif paper == "isp":  # the manifest records the face sets read and the encoders that embedded them
        read = {extra.get("face_set"), str(extra.get("transfer_set")).split("-")[0],
                *(str(e).split(" [")[0] for e in extra.get("encoders", []))}
        paper_data = {"celeba", "vggface2", "clip-vit-b16", "dinov2-vitb14", "sscd"}
    else:
        read = set()
        for f in sorted(out.glob("*.csv")):
            for col in pd.read_csv(f, dtype=str, keep_default_na=False).itertuples(index=False):
                read.update(str(c).split(" [")[0] for c in col)  # "clip-vit-b16 [image]" names clip-vit-b16
        paper_data = set(PAPER_BRANCH_CELLS[paper])
    if SCALE == "rehearsal":
        assert paper_data <= read, f"{paper}: the paper branch left no trace of {sorted(paper_data - read)}"
        assert manifest["parameters"]["data_root"]
    else:
        assert not paper_data & read, f"{paper}: paper data {sorted(paper_data & read)} at scale {SCALE}"
