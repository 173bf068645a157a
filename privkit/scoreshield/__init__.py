"""ScoreShield (paper 3): differentially private release of similarity scores.

Razeghi & Rahimi, "ScoreShield: Differentially Private Release of Similarity Scores"
(arXiv 2607.25041); the facts relied on are restated in ``docs/scoreshield.md``.

- :mod:`~privkit.scoreshield.release`: :func:`release_scores` (regime i, a query against a
  private gallery) and :func:`release_gram` (regime ii, the full cosine Gram), each returning
  its data with the :class:`~privkit.privacy.PrivacyGuarantee` that truly holds.
- :mod:`~privkit.scoreshield.projection`: :func:`nearest_correlation` (Qi–Sun Newton,
  Higham–Dykstra, the paper's AAP) and the one-eigendecomposition :func:`clip_to_correlation`.
- :mod:`~privkit.scoreshield.recalibration`: decisions on noisy scores — private FMR,
  threshold recalibration and its attainability floor, flip probabilities, ROC/AUC/EER,
  identity-level bootstrap, the paper's synthetic score families.
- :mod:`~privkit.scoreshield.rag`: DP retrieval for RAG — the paper's rule (score ≥ τ, top k,
  ties by index) on released score vectors (:func:`retrieve`, :func:`private_retrieve`) and
  gold-chunk recall.
"""

from __future__ import annotations

from .projection import (NearestCorrelationDiagnostics, clip_to_correlation, correlation_residuals, nearest_correlation,
                         symmetric_from_upper)
from .rag import PAPER_RETRIEVAL_SETTINGS, PrivateRetrieval, private_retrieve, retrieval_recall, retrieve
from .recalibration import (SCORE_FAMILIES, RecalibrationOffset, ScoreFamily, ThresholdRecalibration, acceptance_rate,
                            flip_probability, flip_probability_bound, flip_probability_mc, fmr_floor, fmr_private,
                            gaussian_offset, recalibrate_threshold, recalibration_offset, roc_shift_bound,
                            synthetic_score_families)
from .release import GramRelease, ScoreRelease, record_sensitivity, release_gram, release_scores

__all__ = ["release_scores", "release_gram", "record_sensitivity", "ScoreRelease", "GramRelease", "nearest_correlation",
           "symmetric_from_upper", "clip_to_correlation", "correlation_residuals", "NearestCorrelationDiagnostics",
           "fmr_private", "fmr_floor", "recalibrate_threshold", "recalibration_offset", "ThresholdRecalibration",
           "RecalibrationOffset", "gaussian_offset", "roc_shift_bound", "flip_probability", "flip_probability_bound",
           "flip_probability_mc", "acceptance_rate", "synthetic_score_families", "ScoreFamily", "SCORE_FAMILIES",
           "retrieve", "private_retrieve", "retrieval_recall", "PrivateRetrieval", "PAPER_RETRIEVAL_SETTINGS"]
