"""ScoreShield releases: noisy query-to-gallery scores (regime i) and noisy cosine Gram matrices (regime ii).

Both are Gaussian mechanisms on unit embeddings (docs/scoreshield.md §2):

* :func:`release_scores` — ŝ = clip_[−1,1](E q + w), w ~ N(0, σ² I).  Replacing one
  gallery record changes one coordinate by |(e_i − e'_i)ᵀ q| ≤ 2, so Δ = 2; a smaller Δ is
  enforced by clamping the clean scores into [1 − Δ, 1] first.
* :func:`release_gram` — Ŝ = Π(E Eᵀ + ½(W + Wᵀ)), W_ij ~ N(0, σ²) i.i.d., with the Frobenius
  sensitivity Δ = 2√(2(n−1)) under record-level replacement, or an analyst-chosen radius
  Δ_G under Gram/output-space adjacency, followed by a projection Π onto the correlation
  matrices (:mod:`privkit.scoreshield.projection`).  Symmetrising and projecting are
  post-processing.

Honest guarantees.  The default, ``calibration="analytic"``, uses the smallest σ that meets
the requested (ε, δ) (Balle & Wang 2018).  ``calibration="scoreshield"`` reproduces the paper's
noise σ = Δ√(2 ln(2/δ))/ε exactly (the notebooks pass it explicitly), but that rule is a valid
(ε, δ) calibration only for ε < 1.  The returned :class:`~privkit.privacy.PrivacyGuarantee` therefore states the
(ε, δ) that truly holds for the σ used: the requested ε and the exact δ of the
Gaussian mechanism at that σ (Balle & Wang 2018, :func:`~privkit.privacy.analytic_gaussian_delta`),
with ``requested_delta`` and a note when the requested δ is not met (ε = 20, δ = 1e-4
really gives δ ≈ 8.6e-3).

Embeddings must have unit L2 norm within :data:`privkit._validate.UNIT_NORM_TOL`
(1e-4); they are then re-normalised exactly, so that the sensitivity bounds hold for the
values actually used.  Computation is in float64; results come back in the input's
dtype on the input's device.  Without a ``generator`` the noise is seeded from the
operating system's entropy (``make_generator(secure=True)``); pass a seeded generator
for reproducible notebooks (see the warning on floating-point samplers in
:mod:`privkit.privacy.samplers`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

import torch
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent

from .._validate import check_choice, check_delta, check_epsilon, check_positive, check_tensor, check_unit_norm
from ..errors import InvalidArgumentError, ShapeError
from ..privacy import (Neighbouring, PrivacyGuarantee, analytic_gaussian_delta, analytic_gaussian_epsilon,
                       gaussian_sigma, make_generator, sample_gaussian)
from .projection import (NearestCorrelationDiagnostics, clip_to_correlation, correlation_residuals, nearest_correlation,
                         symmetric_from_upper)

__all__ = ["ScoreRelease", "GramRelease", "release_scores", "release_gram", "record_sensitivity", "QUERY_SENSITIVITY",
           "SCORE_NEIGHBOURING", "SCORE_PROTECTS"]

Calibration = Literal["scoreshield", "analytic"]
CALIBRATIONS: tuple[str, ...] = ("scoreshield", "analytic")
ACCOUNTINGS: tuple[str, ...] = ("joint", "per_query")
ADJACENCIES: tuple[str, ...] = ("record", "gram")
PROJECTIONS: tuple[str, ...] = ("nearest", "aap", "clip", "none")
SOLVERS: tuple[str, ...] = ("newton", "dykstra")

#: ℓ2 sensitivity of one query's score vector under record replacement (docs/scoreshield.md §2).
QUERY_SENSITIVITY = 2.0
#: Record-level replacement of one gallery embedding, at the default sensitivity Δ = 2 per query row.
SCORE_NEIGHBOURING = Neighbouring(relation="replace-one", unit="one gallery embedding (unit sphere)",
                                  bound=QUERY_SENSITIVITY, norm="l2")
SCORE_PROTECTS = "each gallery record's embedding"
GRAM_RECORD_UNIT = "one embedding (unit sphere)"
GRAM_RECORD_PROTECTS = "each record's embedding"


def record_sensitivity(n: int) -> float:
    """Frobenius sensitivity 2√(2(n−1)) of the n×n cosine Gram under record replacement."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise InvalidArgumentError(f"n must be an integer >= 2, got {n!r}")
    return 2.0 * math.sqrt(2.0 * (n - 1))


@dataclass(frozen=True)
class ScoreRelease:
    """Result of :func:`release_scores`.

    Attributes:
        scores: the released scores clip(E q + w) in [−1, 1], shape ``(n,)`` or ``(m, n)``.
        unclipped: clamp(E q) + w before clipping, the clean scores clamped into
            [max(−1, 1 − Δ), 1] (the Gaussian mechanism's own output; clipping is
            post-processing, so it carries the same guarantee).
        guarantee: the (ε, δ) that truly holds for the noise used.
        sigma: noise standard deviation per score.
        sensitivity: ℓ2 sensitivity per query row (2 for unit embeddings).
        calibration: ``"scoreshield"`` or ``"analytic"``.
        accounting: ``"joint"`` (the guarantee covers all m rows together) or ``"per_query"``.
    """

    scores: torch.Tensor
    unclipped: torch.Tensor
    guarantee: PrivacyGuarantee
    sigma: float
    sensitivity: float
    calibration: str
    accounting: str


@dataclass(frozen=True)
class GramRelease:
    """Result of :func:`release_gram`.

    Attributes:
        matrix: the released matrix Π(S + G), shape ``(n, n)`` or ``(B, n, n)``.
        noisy: the symmetric noisy Gram S + G before projection (itself a DP release).
        guarantee: the (ε, δ) that truly holds, per collection.
        sigma: standard deviation of W (diagonal noise σ, off-diagonal σ/√2).
        sensitivity: Frobenius sensitivity used (2√(2(n−1)) or Δ_G).
        adjacency: ``"record"`` or ``"gram"``.
        projection: ``"nearest"``, ``"aap"``, ``"clip"`` or ``"none"``.
        diagnostics: solver, iterations, eigendecompositions, feasibility residuals and the
            distance moved from ``noisy`` (functions of the noisy release only).
    """

    matrix: torch.Tensor
    noisy: torch.Tensor
    guarantee: PrivacyGuarantee
    sigma: float
    sensitivity: float
    adjacency: str
    projection: str
    diagnostics: NearestCorrelationDiagnostics


# ------------------------------------------------------------------------------------------
# shared helpers
# ------------------------------------------------------------------------------------------


def _unit_rows(name: str, x: torch.Tensor) -> torch.Tensor:
    check_unit_norm(name, x)
    x64 = x.detach().to(torch.float64)
    return x64 / torch.linalg.vector_norm(x64, dim=-1, keepdim=True)


def _generator(generator: torch.Generator | None, device: torch.device) -> torch.Generator:
    if generator is None:
        return make_generator(secure=True, device=device)
    if not isinstance(generator, torch.Generator):
        raise InvalidArgumentError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    return generator


def _gaussian_guarantee(*, epsilon: float, delta: float, sigma: float, sensitivity: float, calibration: str,
                        neighbours: Neighbouring, protects: str, event: GaussianDpEvent | SelfComposedDpEvent,
                        processing: tuple[str, ...], extra_notes: tuple[str, ...] = ()) -> PrivacyGuarantee:
    """The exact (ε, δ_true) of a Gaussian mechanism with this σ and Δ, next to the request.

    ``sensitivity`` is the ℓ2/Frobenius sensitivity of everything ``event`` releases together; ``event``'s
    noise multipliers are relative to ``neighbours.scale``.
    """
    true_delta = analytic_gaussian_delta(epsilon, sigma, sensitivity=sensitivity)
    notes = list(extra_notes)
    if calibration == "scoreshield":
        notes.append("σ follows the ScoreShield rule σ = Δ·sqrt(2 ln(2/δ))/ε, a valid (ε, δ) calibration only for "
                     "ε < 1; the δ stated is the exact one for this σ (analytic Gaussian mechanism, Balle & Wang 2018)")
    else:
        notes.append("σ is the smallest that meets the request (analytic Gaussian mechanism, Balle & Wang 2018)")
    if true_delta > delta * (1 + 1e-9):
        eps_at_delta = analytic_gaussian_epsilon(sigma, delta, sensitivity=sensitivity)
        notes.append(f"the requested δ={delta:.3g} is NOT met at ε={epsilon:g}: the exact δ is {true_delta:.3g}; "
                     f"at δ={delta:.3g} the ε that holds is {eps_at_delta:.4g}")
    return PrivacyGuarantee(epsilon=epsilon, delta=true_delta, neighbours=neighbours, protects=protects, event=event,
                            requested_epsilon=epsilon, requested_delta=delta, notes=tuple(notes),
                            processing=(f"{calibration} calibration of σ", *processing), accountant="analytic-gaussian")


# ------------------------------------------------------------------------------------------
# regime (i): score vectors
# ------------------------------------------------------------------------------------------


def release_scores(query: torch.Tensor, gallery: torch.Tensor, *, epsilon: float, delta: float,
                   calibration: Calibration = "analytic", generator: torch.Generator | None = None,
                   sensitivity: float = QUERY_SENSITIVITY,
                   accounting: Literal["joint", "per_query"] = "joint") -> ScoreRelease:
    """Release the cosine scores of public queries against a private gallery (ScoreShield Algorithm 1).

    ŝ = clip_[−1, 1](E q + w), w ~ N(0, σ² I), with σ from ``calibration`` at the ℓ2
    sensitivity Δ = 2 of one query's score vector under replacement of one gallery record.

    Args:
        query: public unit query, shape ``(d,)``, or ``m`` queries ``(m, d)``.
        gallery: private unit embeddings E, shape ``(n, d)`` (one row per record).
        epsilon: privacy parameter, > 0.
        delta: privacy parameter in (0, 1).
        calibration: ``"analytic"`` (default: the smallest σ that meets the request) or
            ``"scoreshield"`` (the paper's σ = Δ√(2 ln(2/δ))/ε, reproduced exactly; at ε ≥ 1 it
            can miss the requested δ, and the guarantee then reports the δ that truly holds).
        generator: ``torch.Generator`` on the gallery's device; ``None`` seeds from OS entropy.
        sensitivity: Δ per query row, > 0.  2 is the bound for unit embeddings.  A smaller value
            (the paper's domain-restricted 1.5) is enforced: the clean scores are clamped into the
            domain [1 − Δ, 1] that Δ implies before the noise is added, and the guarantee says so.
        accounting: for ``m > 1`` queries, ``"joint"`` calibrates σ so that the whole (m, n)
            release meets the request (Gaussian composition: sensitivity Δ√m), ``"per_query"``
            calibrates each row on its own, as the paper does; the guarantee is then per row and
            its notes state the exact δ of the m rows together.

    Returns:
        A :class:`ScoreRelease` (scores in the gallery's dtype and device).

    Raises:
        NotUnitNormError: rows off the unit sphere by more than ``UNIT_NORM_TOL``.
        ShapeError: wrong ranks, or query/gallery dimensions that differ.
        InvalidArgumentError: non-finite values, bad ε/δ/sensitivity, mismatched devices.
        UnknownNameError: unknown ``calibration`` or ``accounting``.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    check_choice("calibration", calibration, CALIBRATIONS)
    check_choice("accounting", accounting, ACCOUNTINGS)
    sens = check_positive("sensitivity", sensitivity)
    check_tensor("gallery", gallery, ndim=2, floating=True)
    check_tensor("query", query, ndim=(1, 2), floating=True)
    if query.shape[-1] != gallery.shape[-1]:
        raise ShapeError(f"query and gallery must have the same embedding dimension, got {query.shape[-1]} and "
                         f"{gallery.shape[-1]}")
    if gallery.shape[0] < 1:
        raise ShapeError("gallery must hold at least one record")
    if query.device != gallery.device:
        raise InvalidArgumentError(f"query is on {query.device} but gallery is on {gallery.device}; use one device")
    E = _unit_rows("gallery", gallery)
    q = _unit_rows("query", query)
    single = q.ndim == 1
    Q = q.unsqueeze(0) if single else q
    m, n = Q.shape[0], E.shape[0]
    joint_sens = sens * math.sqrt(m) if accounting == "joint" else sens
    sigma = gaussian_sigma(eps, dlt, sensitivity=joint_sens, method=calibration)
    gen = _generator(generator, gallery.device)
    # The domain that Δ implies, enforced: a cosine lies in [-1, 1]; a Δ < 2 bounds the change of a
    # score only if every score lies in [1 − Δ, 1], so the clean scores are clamped there before the
    # noise (a public, data-independent map; scores below 1 − Δ are released as if they were 1 − Δ).
    lower = max(-1.0, 1.0 - sens)
    s = (Q @ E.T).clamp(lower, 1.0)
    noise = sample_gaussian((m, n), sigma=sigma, generator=gen, device=gallery.device, dtype=torch.float64)
    unclipped = s + noise
    released = unclipped.clamp(-1.0, 1.0)

    notes: list[str] = []
    neighbours = dataclasses.replace(SCORE_NEIGHBOURING, bound=sens)
    # One query row: a Gaussian mechanism at Δ = sens under replacement (noise multiplier σ / (Δ/2), relative to
    # the per-record bound Δ/2 as dp_accounting's replace-one relation counts it); m rows released jointly are m
    # such mechanisms composed (the same as one Gaussian at sensitivity Δ√m).
    row_event = GaussianDpEvent(noise_multiplier=sigma / neighbours.scale)
    event = SelfComposedDpEvent(row_event, m) if accounting == "joint" and m > 1 else row_event
    if accounting == "per_query" and m > 1:
        neighbours = dataclasses.replace(neighbours, detail="the guarantee holds for each query row separately")
        joint_delta = analytic_gaussian_delta(eps, sigma, sensitivity=sens * math.sqrt(m))
        notes.append(f"the {m} query rows released together are (ε={eps:g}, δ={joint_delta:.3g})-DP "
                     f"(Gaussian composition, sensitivity Δ√m = {sens * math.sqrt(m):.4g})")
    elif m > 1:
        notes.append(f"one guarantee for all {m} query rows together (sensitivity Δ√m = {joint_sens:.4g})")
    if sens < QUERY_SENSITIVITY:
        notes.append(f"Δ={sens:g} < 2 (ScoreShield's domain-restricted sensitivity): the clean scores were clamped "
                     f"into [{lower:g}, 1] before the noise, so a score below {lower:g} is released as if it were "
                     f"{lower:g}")
    guarantee = _gaussian_guarantee(
        epsilon=eps, delta=dlt, sigma=sigma, sensitivity=joint_sens, calibration=calibration, neighbours=neighbours,
        protects=SCORE_PROTECTS, event=event, extra_notes=tuple(notes),
        processing=(f"on the clean cosine scores, clamped into [{lower:g}, 1] first (Δ = {sens:g} per query row)",
                    "then clipping to [-1, 1] (post-processing)"))
    if single:
        released, unclipped = released[0], unclipped[0]
    return ScoreRelease(scores=released.to(gallery.dtype), unclipped=unclipped.to(gallery.dtype), guarantee=guarantee,
                        sigma=sigma, sensitivity=sens, calibration=calibration, accounting=accounting)


# ------------------------------------------------------------------------------------------
# regime (ii): Gram matrices
# ------------------------------------------------------------------------------------------


def release_gram(embeddings: torch.Tensor, *, epsilon: float, delta: float,
                 adjacency: Literal["record", "gram"] = "record", delta_g: float | None = None,
                 projection: Literal["nearest", "aap", "clip", "none"] = "nearest",
                 calibration: Calibration = "analytic", generator: torch.Generator | None = None,
                 solver: Literal["newton", "dykstra"] = "newton", tol: float = 1e-7, max_iter: int | None = None,
                 verify: bool = True) -> GramRelease:
    """Release a private cosine Gram matrix (ScoreShield Algorithms 2, 3, 5, 6).

    S' = E Eᵀ + ½(W + Wᵀ), W_ij ~ N(0, σ²) i.i.d. (so G_ii ~ N(0, σ²), G_ij ~ N(0, σ²/2)),
    then a projection onto the correlation matrices.

    Args:
        embeddings: private unit embeddings E, shape ``(n, d)`` with n >= 2, or a batch
            ``(B, n, d)`` of independent collections (each released with independent noise and
            the same per-collection guarantee).
        epsilon: privacy parameter, > 0.
        delta: privacy parameter in (0, 1).
        adjacency: ``"record"`` (replacement of one embedding; Δ = 2√(2(n−1))) or ``"gram"``
            (Gram/output-space adjacency ‖S − S'‖_F ≤ Δ_G; ``delta_g`` required).  The paper's
            regime-(ii) experiments (Δ ∈ {0.5, 1, 2}) are Gram adjacency, not record-level privacy.
        delta_g: the radius Δ_G > 0 for ``adjacency="gram"`` (must be None for ``"record"``).
        projection: ``"nearest"`` (exact nearest correlation matrix, by ``solver``), ``"aap"``
            (the paper's Algorithm 3, at most ``max_iter`` = 500 sweeps, feasible but not nearest),
            ``"clip"`` (one eigendecomposition: clip negative eigenvalues and rescale the
            diagonal — AAP's final step alone) or ``"none"`` (the symmetric noisy matrix).
        calibration: ``"analytic"`` (default: the smallest σ that meets the request) or
            ``"scoreshield"`` (the paper's σ; the δ that truly holds is reported).
        generator: ``torch.Generator`` on the embeddings' device; ``None`` seeds from OS entropy.
        solver: ``"newton"`` (Qi–Sun, default) or ``"dykstra"`` for ``projection="nearest"``.
        tol: solver tolerance (see :func:`~privkit.scoreshield.nearest_correlation`).
        max_iter: solver iteration limit (default per method; 500 for AAP as in the paper).
        verify: compute the released matrix's minimum eigenvalue for the diagnostics (one extra
            ``eigvalsh`` per matrix); ``False`` leaves ``diagnostics.min_eigenvalue`` as None.

    Returns:
        A :class:`GramRelease`.  ``projection="aap"`` returns its feasible output even when the
        iteration cap is reached first (as the paper does; ``diagnostics.converged`` says so);
        the nearest-point solvers raise :class:`~privkit.errors.ConvergenceError` instead.

    Raises:
        NotUnitNormError, ShapeError, InvalidArgumentError, UnknownNameError: bad inputs.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    check_choice("adjacency", adjacency, ADJACENCIES)
    check_choice("projection", projection, PROJECTIONS)
    check_choice("calibration", calibration, CALIBRATIONS)
    check_choice("solver", solver, SOLVERS)
    check_tensor("embeddings", embeddings, ndim=(2, 3), floating=True)
    n = embeddings.shape[-2]
    if n < 2:
        raise ShapeError(f"embeddings must hold at least 2 records (shape (..., n, d) with n >= 2), got {n}")
    E = _unit_rows("embeddings", embeddings)
    single = E.ndim == 2
    if single:
        E = E.unsqueeze(0)
    B = E.shape[0]

    d_record = record_sensitivity(n)
    if adjacency == "record":
        if delta_g is not None:
            raise InvalidArgumentError("delta_g is only used with adjacency='gram'; leave it None for 'record'")
        sens = d_record
        neighbours = Neighbouring(relation="replace-one", unit=GRAM_RECORD_UNIT, bound=sens, norm="frobenius")
        protects = GRAM_RECORD_PROTECTS
        notes: tuple[str, ...] = (f"Frobenius sensitivity 2·sqrt(2(n−1)) = {d_record:.4g} for n = {n}",)
    else:
        if delta_g is None:
            raise InvalidArgumentError("adjacency='gram' needs delta_g, the Gram adjacency radius Δ_G > 0")
        sens = check_positive("delta_g", delta_g)
        covers = sens >= d_record * (1 - 1e-12)
        scope = (f"this radius is ≥ 2√(2(n−1)) = {d_record:.4g}, so it also covers record-level replacement" if covers
                 else f"NOT record-level privacy unless Δ_G ≥ 2√(2(n−1)) = {d_record:.4g}")
        neighbours = Neighbouring(relation="bounded-change", unit="the cosine Gram matrix S", bound=sens,
                                  norm="frobenius",
                                  detail=f"Gram/output-space adjacency ||S − S'||_F ≤ Δ_G = {sens:g} — {scope}")
        protects = GRAM_RECORD_PROTECTS if covers else f"Gram matrices within Frobenius distance {sens:g} of each other"
        notes = () if covers else (f"Δ_G = {sens:g} < {d_record:.4g}: replacing one record can move the Gram matrix "
                                   "further than Δ_G, so single records are NOT protected at the stated (ε, δ)",)

    sigma = gaussian_sigma(eps, dlt, sensitivity=sens, method=calibration)
    gen = _generator(generator, embeddings.device)
    # Symmetric by construction: the Gram is built from its upper triangle (with the exact unit
    # diagonal of unit rows), the noise likewise, so no entry of the release is computed twice
    # by paths that could round differently (a noise-free asymmetry would leak the rows).
    S = symmetric_from_upper(E @ E.transpose(-1, -2))
    S.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    W = sample_gaussian((B, n, n), sigma=sigma, generator=gen, device=embeddings.device, dtype=torch.float64)
    noisy = symmetric_from_upper(S + 0.5 * (W + W.transpose(-1, -2)))

    if projection == "none":
        X = noisy
        diagnostics = NearestCorrelationDiagnostics(
            method="none", converged=True, iterations=0, eigendecompositions=0,
            max_diag_error=float((torch.diagonal(noisy, dim1=-2, dim2=-1) - 1).abs().max()),
            min_eigenvalue=correlation_residuals(noisy)["min_eigenvalue"] if verify else None, distance=0.0,
            batch_size=B)
    elif projection == "clip":
        X, diagnostics = clip_to_correlation(noisy, return_diagnostics=True, verify=verify)
    else:
        X, diagnostics = nearest_correlation(noisy, method=solver if projection == "nearest" else "aap", tol=tol,
                                             max_iter=max_iter, return_diagnostics=True,
                                             raise_on_max_iter=(projection == "nearest"), verify=verify)

    proj_text = {"nearest": f"nearest correlation matrix ({solver})",
                 "aap": "averaged alternating projections (ScoreShield Algorithm 3)",
                 "clip": "eigenvalue clipping + unit-diagonal rescale", "none": "no projection"}[projection]
    guarantee = _gaussian_guarantee(
        epsilon=eps, delta=dlt, sigma=sigma, sensitivity=sens, calibration=calibration, neighbours=neighbours,
        protects=protects, event=GaussianDpEvent(noise_multiplier=sigma / neighbours.scale),
        processing=(f"symmetric noise ½(W + Wᵀ) on the cosine Gram (Frobenius Δ = {sens:.4g})",
                    f"then {proj_text} (post-processing)"),
        extra_notes=notes + ((f"{B} collections, each with independent noise; the guarantee is per collection",)
                             if B > 1 else ()))
    if single:
        X, noisy = X[0], noisy[0]
    return GramRelease(matrix=X.to(embeddings.dtype), noisy=noisy.to(embeddings.dtype), guarantee=guarantee,
                       sigma=sigma, sensitivity=sens, adjacency=adjacency, projection=projection,
                       diagnostics=diagnostics)
