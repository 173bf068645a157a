"""Papers, their artefacts, and per-paper scale presets (smoke | default | paper).

Each paper's notebook calls ``cfg = privkit.config.load("<paper>", scale)`` and gets a frozen dataclass
of everything its scale decides (sample sizes, steps, grids).  A paper's presets live in its study,
``privkit/studies/<paper>/presets.py``, as ``PRESETS`` (one frozen dataclass per scale) and ``ARTEFACTS`` (the
figures and tables its notebook writes); this module imports the four of them explicitly, so the registry is
plain data and no study imports the runner.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from ._validate import check_choice
from .errors import PrivkitError, UnknownNameError
from .studies.dppose import presets as _dppose
from .studies.isp import presets as _isp
from .studies.scoreshield import presets as _scoreshield
from .studies.synthesisnet import presets as _synthesisnet

SCALES: tuple[str, ...] = ("smoke", "default", "paper", "rehearsal")

#: Scales that read the paper datasets and weights from ``--data-root`` (the notebooks' paper branches).
PAPER_DATA_SCALES: tuple[str, ...] = ("paper", "rehearsal")

#: Scales too small for the notebooks' data-dependent checks (they run the code, their numbers mean nothing).
SMALL_SCALES: tuple[str, ...] = ("smoke", "rehearsal")

SCALE_DESCRIPTIONS = {
    "smoke": "CI and nbval: tiny slices of the embedded data, few steps (<= 90 s per notebook on 2 CPU cores)",
    "default": "make figures: embedded real + procedural data, real offline models (<= 45 min for all four on 2 cores)",
    "paper": "the paper's datasets and weights from --data-root, GPU recommended (hours)",
    "rehearsal": "the paper path at smoke sizes on a miniature data root in the real formats (python -m privkit "
                 "rehearsal-root DIR): every paper branch, loader and encoder runs; the numbers mean nothing",
}


@dataclass(frozen=True)
class PaperInfo:
    """A paper privkit reproduces: citation, notebook and the artefacts (figures/tables) it regenerates."""

    name: str
    short_title: str
    citation: str

    @property
    def notebook(self) -> Path:
        return Path(__file__).resolve().parent.parent / "notebooks" / f"{self.name}.py"

    @property
    def has_notebook(self) -> bool:
        return self.notebook.is_file()


PAPERS: dict[str, PaperInfo] = {p.name: p for p in (
    PaperInfo("isp", "Identity leakage in image encoders and the Identity Sanitization Projection",
              "George, Yeh, Lee, Zhang. From Measurement to Mitigation: Quantifying and Reducing Identity Leakage "
              "in Image Representation Encoders with Linear Subspace Removal. CVPR 2026. arXiv:2604.05296."),
    PaperInfo("dppose", "Differentially private 2D human pose estimation",
              "Sivangi, Henderson, Deligianni. Differentially Private 2D Human Pose Estimation. CVPR 2026. "
              "arXiv:2504.10190."),
    PaperInfo("scoreshield", "ScoreShield: DP release of similarity scores",
              "Razeghi, Rahimi. ScoreShield: Differentially Private Release of Similarity Scores. "
              "arXiv:2607.25041v1, 2026."),
    PaperInfo("synthesisnet", "SynthesisNet: face publishing with metric-DP identity latents",
              "沈博 (Shen Bo), 王祥根 (Wang Xianggen), 田澍 (Tian Shu), 崔佳佳 (Cui Jiajia). Face-image privacy "
              "publishing with an identity/attribute autoencoder, metric differential privacy and a DCGAN with an "
              "auxiliary classifier (Chinese journal paper; full text not obtained, implemented from its summary)."),
)}


def check_presets(paper: str, presets: Mapping[str, Any]) -> dict[str, Any]:
    """Check that ``presets`` maps every scale to a frozen dataclass instance; returns a copy."""
    check_choice("paper", paper, PAPERS)
    missing = set(SCALES) - set(presets)
    if missing:
        raise PrivkitError(f"presets for {paper!r} must define every scale {SCALES}; missing {sorted(missing)}")
    for scale, cfg in presets.items():
        check_choice("scale", scale, SCALES)
        if not dataclasses.is_dataclass(cfg) or not type(cfg).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            raise PrivkitError(f"preset {paper}/{scale} must be a frozen dataclass instance")
    return dict(presets)


# The registry: each study's presets module, imported by name here (a study never imports the runner).
_STUDIES = {"isp": _isp, "dppose": _dppose, "scoreshield": _scoreshield, "synthesisnet": _synthesisnet}
_PRESETS: dict[str, dict[str, Any]] = {p: check_presets(p, m.PRESETS) for p, m in _STUDIES.items()}
_ARTEFACTS: dict[str, tuple[tuple[str, str], ...]] = {p: tuple(m.ARTEFACTS) for p, m in _STUDIES.items()}


def artefacts(paper: str) -> tuple[tuple[str, str], ...]:
    """``(file stem, description)`` of every figure (``figN_slug``) and table (``tableN_slug``) ``paper``'s notebook
    writes; ``make test`` checks the smoke run wrote each of them."""
    check_choice("paper", paper, PAPERS)
    return _ARTEFACTS.get(paper, ())


def load(paper: str, scale: str = "default", **overrides: Any) -> Any:
    """The frozen configuration of ``paper`` at ``scale``; keyword overrides replace single fields."""
    check_choice("paper", paper, PAPERS)
    check_choice("scale", scale, SCALES)
    if paper not in _PRESETS:
        raise PrivkitError(f"paper {paper!r} has no scale presets yet (its notebook has not been implemented)")
    cfg = _PRESETS[paper][scale]
    if overrides:
        fields = {f.name for f in dataclasses.fields(cfg)}
        unknown = set(overrides) - fields
        if unknown:
            raise UnknownNameError("override", sorted(unknown)[0], fields)
        cfg = dataclasses.replace(cfg, **overrides)
    return cfg
