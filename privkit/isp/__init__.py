"""Paper 1: identity leakage in image encoders and the Identity Sanitization Projection (ISP).

George, Yeh, Lee, Zhang, "From Measurement to Mitigation: Quantifying and Reducing Identity Leakage in Image
Representation Encoders with Linear Subspace Removal", CVPR 2026 (arXiv:2604.05296); specification in
``docs/isp.md``. Where the paper is silent, privkit's own definitions are used and their docstrings say so.

Modules:
    projection: :class:`IdentitySanitizer` → :class:`IdentityProjector` (ISP), LEACE and INLP baselines,
        :func:`principal_angles`.
    verification: open-set few-shot verification, TAR at low FAR from chunked all-pairs impostor scores,
        identity bootstrap (:func:`evaluate_verification`, :func:`pairwise_tar_at_far`; the shared TAR-at-FAR rule
        is :mod:`privkit.metrics`).
    probes: raw, ridge and MLP attacker probes.
    attribution: FCR, FII, CPI(σ), B*.
    inversion: regression (Vec2Face-like) and optimisation (ALSUV-like) template inversion.
    utility: kNN retention and copy-detection Recall@1 / mAP.
"""

from .attribution import (BStarResult, background_dominance, context_preference_curve, equal_area_context_regions,
                          face_coverage_ratio, face_importance_index, perturb_region, summarise_by_fcr)
from .inversion import (ConvDecoder, InversionResult, RidgeDecoder, face_crops, inversion_audit, inversion_success,
                        optimisation_attack, paste_crops, reference_threshold, ridge_predict, train_regression_inverter,
                        train_ridge_inverter)
from .probes import (DEFAULT_RIDGE_LAMBDAS, MLPOptions, MLPProbe, RawProbe, RidgeProbe, fit_mlp_probe, fit_ridge_probe,
                     select_ridge_probe)
from .projection import (RANK_RULES, IdentityProjector, IdentitySanitizer, INLPFitter, LeaceEraser, LeaceFitter,
                         principal_angles)
from .utility import Retention, copy_detection_eval, copy_detection_metrics, knn_accuracy, knn_retention, simple_augment
from .protocol import EmbeddingSplits, VerificationProtocol, VerificationResult, evaluate_verification, subsample_shots
from .verification import (ImpostorScan, VerificationPairs, pairwise_tar_at_far, scan_pairs, pair_threshold,
                           validation_tar)

__all__ = [
    # projection
    "IdentitySanitizer", "IdentityProjector", "LeaceFitter", "LeaceEraser", "INLPFitter", "principal_angles",
    "RANK_RULES",
    # verification
    "pairwise_tar_at_far", "VerificationPairs", "ImpostorScan", "scan_pairs", "validation_tar", "pair_threshold",
    "subsample_shots", "VerificationResult", "evaluate_verification", "EmbeddingSplits", "VerificationProtocol",
    # probes
    "DEFAULT_RIDGE_LAMBDAS", "RawProbe", "RidgeProbe", "fit_ridge_probe", "select_ridge_probe", "MLPProbe",
    "fit_mlp_probe", "MLPOptions",
    # attribution
    "face_coverage_ratio", "perturb_region", "equal_area_context_regions", "face_importance_index", "summarise_by_fcr",
    "context_preference_curve", "BStarResult", "background_dominance",
    # inversion
    "ConvDecoder", "train_regression_inverter", "RidgeDecoder", "ridge_predict", "train_ridge_inverter", "face_crops",
    "paste_crops", "optimisation_attack", "reference_threshold", "InversionResult", "inversion_success",
    "inversion_audit",
    # utility
    "knn_accuracy", "Retention", "knn_retention", "simple_augment", "copy_detection_metrics", "copy_detection_eval",
]
