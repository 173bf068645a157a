"""Decisions on privatised scores (ScoreShield regime i, docs/scoreshield.md §3).

A verifier accepts a pair when its score exceeds a threshold τ.  After the Gaussian
mechanism a released score is ŝ = clip_[−1,1](S + W), W ~ N(0, σ²).  With Q = 1 − Φ:

* for τ ∈ (−1, 1) clipping never changes the decision: 1{ŝ > τ} = 1{S + W > τ};
* flip probability given S = s: Q(|s − τ|/σ) (:func:`flip_probability`);
* private false-match rate FMR_priv(τ) = E[Q((τ − S)/σ)] over impostor scores
  (:func:`fmr_private`), continuous and strictly decreasing on (−1, 1), with left limit
  L(σ) = E[Q((1 − S)/σ)] > 0 at τ → 1 and FMR_priv(1) = 0 under the strict ">" rule
  (:func:`fmr_floor`).  A target α is attainable below τ = 1 only if α ≥ L(σ); the paper's
  tables print TAR 0 otherwise.
* recalibration: the threshold that restores the target FPR on privatised impostor scores
  (:func:`recalibrate_threshold`, empirical) or on the clean impostor distribution plus the
  known σ (:func:`recalibration_offset`, the paper's root-finding formulation); for
  Gaussian impostors N(0, s²) the offset is τ₀(√(1 + σ²/s²) − 1) (:func:`gaussian_offset`).
* ROC/AUC/EER on scores, identity-level bootstrap confidence intervals, the ROC shift bound
  η = Lσ√(2/π) and the paper's four synthetic score families.

Scores are torch tensors; statistics are computed in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import brentq

from .._validate import check_int, check_nonnegative, check_positive, check_probability, check_real
from ..errors import InsufficientDataError, InvalidArgumentError
from ..metrics import _scores, smallest_resolvable_far

__all__ = ["ThresholdRecalibration", "RecalibrationOffset", "ScoreFamily", "fmr_private", "fmr_floor",
           "recalibrate_threshold", "recalibration_offset", "flip_probability", "flip_probability_bound",
           "flip_probability_mc", "acceptance_rate", "gaussian_offset", "roc_shift_bound", "synthetic_score_families",
           "SCORE_FAMILIES"]


#: Scores may exceed 1 in magnitude by float rounding of a cosine; beyond this they are rejected.
_SCORE_SLACK = 1e-6




def _q(x: torch.Tensor) -> torch.Tensor:
    """Gaussian upper tail Q(x) = 1 − Φ(x), accurate in both tails."""
    return torch.special.ndtr(-x)


# ------------------------------------------------------------------------------------------
# private false-match rate and its floor
# ------------------------------------------------------------------------------------------


def fmr_private(tau: float | torch.Tensor, impostor_clean: torch.Tensor, sigma: float) -> torch.Tensor:
    """Expected false-match rate after noise: FMR_priv(τ) = E[Q((τ − S)/σ)] over impostor scores S.

    The decision rule is strict, ŝ > τ, on the clipped release ŝ = clip(S + W): for τ in
    [−1, 1) this equals Pr[S + W > τ]; for τ ≥ 1 it is 0 (no clipped score exceeds 1) and
    for τ < −1 it is 1.  ``sigma = 0`` gives the clean empirical FMR (fraction of S > τ).

    Args:
        tau: threshold(s), a float or a tensor of any shape.
        impostor_clean: clean impostor scores, shape ``(N,)``.
        sigma: noise standard deviation, >= 0.

    Returns:
        A float64 tensor shaped like ``tau``.
    """
    S = _scores("impostor_clean", impostor_clean)
    sig = check_nonnegative("sigma", sigma)
    t = torch.as_tensor(tau, dtype=torch.float64, device=S.device)
    if not bool(torch.isfinite(t).all()):
        raise InvalidArgumentError("tau must be finite")
    flat = t.reshape(-1, 1)
    if sig == 0.0:
        vals = (S.unsqueeze(0) > flat).double().mean(dim=1)
    else:
        vals = torch.empty(flat.shape[0], dtype=torch.float64, device=S.device)
        for i in range(0, flat.shape[0], 256):  # bound memory: 256 thresholds at a time
            vals[i : i + 256] = _q((flat[i : i + 256] - S.unsqueeze(0)) / sig).mean(dim=1)
    vals = torch.where(flat[:, 0] >= 1.0, torch.zeros_like(vals), vals)
    vals = torch.where(flat[:, 0] < -1.0, torch.ones_like(vals), vals)
    return vals.reshape(t.shape)


def fmr_floor(impostor_clean: torch.Tensor, sigma: float) -> float:
    """L(σ) = E[Q((1 − S)/σ)]: the smallest FMR reachable with a threshold below 1 (strict rule).

    It is the expected mass of privatised impostor scores clipped to exactly +1; targets
    α < L(σ) are attainable only by τ = 1, which rejects everything (TAR 0).
    """
    S = _scores("impostor_clean", impostor_clean)
    sig = check_positive("sigma", sigma)
    return float(_q((1.0 - S) / sig).mean())


# ------------------------------------------------------------------------------------------
# recalibration
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThresholdRecalibration:
    """Threshold that restores a target FPR on privatised impostor scores.

    Attributes:
        threshold: the chosen τ (accept when score > τ, or >= τ with ``strict=False``).
        target_fpr: the requested α.
        achieved_fpr: empirical FPR of the impostor scores at ``threshold``.
        attainable: False when no threshold below 1 reaches α because at least a fraction
            ``floor`` > α of the impostor scores sits at the clip value +1; then ``threshold`` is
            1.0 (strict: nothing is accepted, so TAR = 0, as the paper's tables print).
        floor: empirical L(σ): the fraction of impostor scores >= 1 (clipped to the top).
        resolvable: False when α < 10/N (:func:`privkit.metrics.smallest_resolvable_far`): N impostor scores
            cannot resolve such a small FPR and no TAR at this FPR should be reported.
        n_impostors: N.
    """

    threshold: float
    target_fpr: float
    achieved_fpr: float
    attainable: bool
    floor: float
    resolvable: bool
    n_impostors: int
    strict: bool = True

    def accept(self, scores: torch.Tensor) -> torch.Tensor:
        """Boolean decisions of this threshold on ``scores``."""
        return scores > self.threshold if self.strict else scores >= self.threshold


def acceptance_rate(scores: torch.Tensor, threshold: float, *, strict: bool = True) -> float:
    """Fraction of ``scores`` accepted at ``threshold`` (TAR on genuine scores, FAR on impostors)."""
    s = _scores("scores", scores)
    t = check_real("threshold", threshold)
    return float(((s > t) if strict else (s >= t)).double().mean())


def recalibrate_threshold(impostor_private: torch.Tensor, *, target_fpr: float,
                          strict: bool = True) -> ThresholdRecalibration:
    """The smallest threshold whose empirical FPR on privatised impostor scores is <= ``target_fpr``.

    With N impostor scores and k = ⌊αN⌋ allowed false matches, the strict rule picks the
    (k+1)-th largest score (ties can only lower the FPR).  If that score is the clip value +1
    the target cannot be reached below τ = 1 (α < the empirical L(σ)): the result says
    ``attainable=False`` and uses τ = 1 (strict: FPR = TAR = 0).

    Args:
        impostor_private: privatised (released, clipped) impostor scores, shape ``(N,)``.
        target_fpr: α in (0, 1).
        strict: accept when score > τ (the paper's tables) or, if False, score >= τ.

    Returns:
        A :class:`ThresholdRecalibration`.
    """
    x = _scores("impostor_private", impostor_private)
    if float(x.abs().max()) > 1.0 + _SCORE_SLACK:
        raise InvalidArgumentError("impostor_private must hold released (clipped) scores in [-1, 1]; got values up to "
                                   f"{float(x.abs().max()):.4g}. Pass ScoreRelease.scores, not .unclipped")
    x = x.clamp(-1.0, 1.0)
    alpha = check_probability("target_fpr", target_fpr)
    N = x.numel()
    k = int(math.floor(alpha * N + 1e-9))
    desc = torch.sort(x, descending=True).values
    floor = float((x >= 1.0).double().mean())
    if k >= N:
        tau = float(desc[-1]) - 1.0  # everything accepted
    else:
        tau = float(desc[k])
        if not strict:
            tau = math.nextafter(tau, math.inf)  # smallest representable value above the (k+1)-th largest score
    attainable = not (tau >= 1.0 and floor > alpha)
    if not attainable:
        tau = 1.0 if strict else math.nextafter(1.0, 2.0)
    achieved = float(((x > tau) if strict else (x >= tau)).double().mean())
    return ThresholdRecalibration(threshold=tau, target_fpr=alpha, achieved_fpr=achieved, attainable=attainable,
                                  floor=floor, resolvable=alpha >= smallest_resolvable_far(N) * (1 - 1e-12),
                                  n_impostors=N, strict=strict)


@dataclass(frozen=True)
class RecalibrationOffset:
    """Model-based recalibration (docs/scoreshield.md §3): FMR_priv(τ_α + Δτ) = α.

    Attributes:
        tau_clean: τ_α, the clean threshold with empirical FMR α (strict rule).
        tau_private: τ_α + Δτ, the threshold with FMR_priv = α (1.0 when not attainable).
        offset: Δτ.
        floor: L(σ) = E[Q((1 − S)/σ)].
        fmr_at_clean_threshold: FMR_priv(τ_α), the false-match rate if nothing is recalibrated.
        attainable: α ∈ [L(σ), FMR_priv(−1)].
        target_fpr: α.
        sigma: σ.
    """

    tau_clean: float
    tau_private: float
    offset: float
    floor: float
    fmr_at_clean_threshold: float
    attainable: bool
    target_fpr: float
    sigma: float


def recalibration_offset(impostor_clean: torch.Tensor, *, sigma: float, target_fpr: float) -> RecalibrationOffset:
    """Solve FMR_priv(τ_α + Δτ) = α by 1-D root finding on the empirical clean impostor scores.

    Args:
        impostor_clean: clean impostor scores, shape ``(N,)``.
        sigma: noise standard deviation, > 0.
        target_fpr: α in (0, 1).

    Returns:
        A :class:`RecalibrationOffset`; ``attainable=False`` (and τ = 1) when α < L(σ).
    """
    S = _scores("impostor_clean", impostor_clean)
    sig = check_positive("sigma", sigma)
    alpha = check_probability("target_fpr", target_fpr)
    tau0 = recalibrate_threshold(S, target_fpr=alpha).threshold
    floor = fmr_floor(S, sig)
    fmr0 = float(fmr_private(tau0, S, sig))
    top = float(fmr_private(-1.0, S, sig))

    def f(t: float) -> float:
        return float(_q((t - S) / sig).mean()) - alpha

    if alpha < floor or alpha > top:
        tau = 1.0 if alpha < floor else -1.0
        return RecalibrationOffset(tau0, tau, tau - tau0, floor, fmr0, False, alpha, sig)
    hi = 1.0 - 1e-15
    tau = brentq(f, -1.0, hi, xtol=1e-14, rtol=1e-14, maxiter=500) if f(hi) < 0 else hi
    return RecalibrationOffset(tau0, float(tau), float(tau) - tau0, floor, fmr0, True, alpha, sig)


def gaussian_offset(tau0: float, sigma: float, s: float = 1.0) -> float:
    """Recalibration offset for Gaussian impostors N(0, s²): Δτ = τ₀(√(1 + σ²/s²) − 1).

    Pr[S + W > τ] = Q(τ/√(s² + σ²)), so the threshold keeping the FMR of τ₀ is τ₀√(1 + σ²/s²).
    (s = 1 is the paper's statement; general s is privkit's [I] extension.)
    """
    t0 = check_real("tau0", tau0)
    sig = check_nonnegative("sigma", sigma)
    sd = check_positive("s", s)
    return t0 * (math.sqrt(1.0 + (sig / sd) ** 2) - 1.0)


def roc_shift_bound(L: float, sigma: float) -> float:
    """η = Lσ√(2/π): bound on the shift of every TPR/FPR (and the ROC's ℓ∞ Hausdorff distance)
    for L-Lipschitz genuine/impostor CDFs; |ΔAUC| ≤ 2η and |ΔEER| ≤ η."""
    lip = check_nonnegative("L", L)
    sig = check_nonnegative("sigma", sigma)
    return lip * sig * math.sqrt(2.0 / math.pi)


# ------------------------------------------------------------------------------------------
# flips
# ------------------------------------------------------------------------------------------


def _broadcast_s(s: float | torch.Tensor) -> torch.Tensor:
    t = torch.as_tensor(s, dtype=torch.float64)
    if not bool(torch.isfinite(t).all()):
        raise InvalidArgumentError("s must be finite")
    return t


def flip_probability(s: float | torch.Tensor, tau: float, sigma: float) -> torch.Tensor:
    """Probability that noise flips the decision 1{s > τ}: Q(|s − τ|/σ) (exact; τ ∈ (−1, 1)).

    Args:
        s: clean score(s), float or tensor.
        tau: threshold in (−1, 1) (there clipping cannot change a decision).
        sigma: noise standard deviation, > 0.
    """
    t = check_real("tau", tau)
    if not -1.0 < t < 1.0:
        raise InvalidArgumentError(f"tau must lie in (-1, 1), got {t}")
    sig = check_positive("sigma", sigma)
    x = _broadcast_s(s)
    return _q((x - t).abs() / sig)


def flip_probability_bound(s: float | torch.Tensor, tau: float, sigma: float) -> torch.Tensor:
    """The Gaussian tail bound exp(−k²/2)/(k√(2π)), k = |s − τ|/σ (inf at k = 0)."""
    t = check_real("tau", tau)
    sig = check_positive("sigma", sigma)
    k = (_broadcast_s(s) - t).abs() / sig
    return torch.exp(-0.5 * k * k) / (k * math.sqrt(2.0 * math.pi))


def flip_probability_mc(s: float | torch.Tensor, tau: float, sigma: float, *, n_samples: int = 100_000,
                        generator: torch.Generator | None = None) -> torch.Tensor:
    """Monte-Carlo flip rate: draws ŝ = clip(s + W, −1, 1) and counts 1{ŝ > τ} ≠ 1{s > τ}.

    Args:
        s: clean score(s).
        tau: threshold in (−1, 1).
        sigma: noise standard deviation, > 0.
        n_samples: noise draws per score, >= 1.
        generator: ``torch.Generator`` (CPU); ``None`` uses a fresh OS-seeded one.
    """
    from ..privacy import make_generator, sample_gaussian

    t = check_real("tau", tau)
    if not -1.0 < t < 1.0:
        raise InvalidArgumentError(f"tau must lie in (-1, 1), got {t}")
    sig = check_positive("sigma", sigma)
    m = check_int("n_samples", n_samples, minimum=1)
    x = _broadcast_s(s)
    flat = x.reshape(-1)
    gen = make_generator(secure=True) if generator is None else generator
    counts = torch.zeros(flat.shape[0], dtype=torch.float64)
    chunk = max(1, (1 << 22) // max(1, flat.shape[0]))
    done = 0
    clean = flat > t
    while done < m:
        k = min(chunk, m - done)
        w = sample_gaussian((k, flat.shape[0]), sigma=sig, generator=gen, dtype=torch.float64)
        noisy = (flat.unsqueeze(0) + w).clamp(-1.0, 1.0) > t
        counts += (noisy != clean.unsqueeze(0)).double().sum(dim=0)
        done += k
    return (counts / m).reshape(x.shape)


# ------------------------------------------------------------------------------------------
# ROC, AUC, EER, bootstrap
# ------------------------------------------------------------------------------------------














# ------------------------------------------------------------------------------------------
# synthetic score families (docs/scoreshield.md §4)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScoreFamily:
    """Genuine and impostor scores of one synthetic family, truncated to (−1, 1)."""

    name: str
    genuine: torch.Tensor
    impostor: torch.Tensor
    description: str


#: Names of the paper's four synthetic families, in its order.
SCORE_FAMILIES: tuple[str, ...] = ("gaussian", "beta", "mixture", "student_t")

_GENUINE_GAUSSIAN = (0.65, 0.20)


def _truncated(draw: Callable[[int], np.ndarray], n: int) -> np.ndarray:
    """n draws of ``draw`` restricted to the open interval (−1, 1) by rejection."""
    out = np.empty(0)
    for _ in range(1000):
        x = draw(max(16, 2 * (n - out.size)))
        x = x[(x > -1.0) & (x < 1.0)]
        out = np.concatenate([out, x])
        if out.size >= n:
            return out[:n]
    raise InsufficientDataError("could not draw enough scores inside (-1, 1)")  # pragma: no cover


def synthetic_score_families(n: int, *, seed: int = 0) -> dict[str, ScoreFamily]:
    """The four synthetic score families of ScoreShield's operating-point study (docs/scoreshield.md §4).

    Each has ``n`` genuine and ``n`` impostor scores (the paper uses 200,000 per side),
    truncated to (−1, 1) by rejection:

    * ``"gaussian"``: impostors N(0, 0.20²), genuine N(0.65, 0.20²);
    * ``"beta"``: impostors 2·Beta(5, 5) − 1, genuine 2·Beta(9, 2) − 1;
    * ``"mixture"``: impostors 0.9·N(0, 0.25²) + 0.1·N(0.30, 0.20²);
    * ``"student_t"``: impostors Student-t with ν = 10 scaled to sd 0.25.

    [I] The paper gives only the impostor parameters of the mixture and Student-t families
    (and does not say that the Beta genuine scores are mapped by 2z − 1, nor the mean of
    the mixture's main component); privkit maps both Beta families by 2z − 1, centres the
    main mixture component at 0, and uses the Gaussian family's genuine N(0.65, 0.20²) for the
    mixture and Student-t families.

    Args:
        n: scores per side, >= 1.
        seed: seed of a private ``numpy.random.Generator``.

    Returns:
        ``{name: ScoreFamily}`` with float64 tensors, in :data:`SCORE_FAMILIES` order.
    """
    n = check_int("n", n, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    rng = np.random.default_rng(seed)
    mu_g, sd_g = _GENUINE_GAUSSIAN

    def gauss(mu, sd):
        return lambda k: rng.normal(mu, sd, k)

    def beta(a, b):
        return lambda k: 2.0 * rng.beta(a, b, k) - 1.0

    def mixture(k):
        comp = rng.random(k) < 0.10
        return np.where(comp, rng.normal(0.30, 0.20, k), rng.normal(0.0, 0.25, k))

    nu = 10.0
    t_scale = 0.25 / math.sqrt(nu / (nu - 2.0))

    def student(k):
        return t_scale * rng.standard_t(nu, k)

    spec = {
        "gaussian": (gauss(mu_g, sd_g), gauss(0.0, 0.20), "impostor N(0, 0.20²), genuine N(0.65, 0.20²)"),
        "beta": (beta(9, 2), beta(5, 5), "impostor 2·Beta(5,5)−1, genuine 2·Beta(9,2)−1"),
        "mixture": (gauss(mu_g, sd_g), mixture,
                    "impostor 0.9·N(0, 0.25²) + 0.1·N(0.30, 0.20²), genuine N(0.65, 0.20²) [I]"),
        "student_t": (gauss(mu_g, sd_g), student, "impostor t(ν=10) with sd 0.25, genuine N(0.65, 0.20²) [I]"),
    }
    out = {}
    for name in SCORE_FAMILIES:
        g_draw, i_draw, desc = spec[name]
        gen = torch.from_numpy(_truncated(g_draw, n))
        imp = torch.from_numpy(_truncated(i_draw, n))
        out[name] = ScoreFamily(name=name, genuine=gen, impostor=imp, description=desc)
    return out
