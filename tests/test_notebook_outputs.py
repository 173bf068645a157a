"""Checks of the files the smoke-scale notebooks wrote (run by `make test` after nbval executed them).

Collected only when PRIVKIT_SMOKE_OUT points at the folder `python -m privkit prepare` wrote into.
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
    assert manifest["parameters"]["scale"] == "smoke"
    assert manifest["wall_seconds"]
