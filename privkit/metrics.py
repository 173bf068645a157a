"""Verification metrics and intervals shared by every paper: one implementation each, used by all four wings.

Scores are similarities, and a pair is *accepted* when its score exceeds a threshold.

* **TAR at FAR** (:func:`tar_at_far`, :func:`thresholds_at_far`). For a target FAR α over n impostor pairs,
  K = ⌊α n⌋ impostors may be accepted and the threshold τ is the (K+1)-th largest impostor score; a pair is accepted
  when its score is strictly greater than τ, so at most K impostors pass and the realised FAR is the largest
  achievable value ≤ α.
* **One resolvable-FAR rule** (:func:`smallest_resolvable_far`, :func:`resolvable_far`). A FAR α is resolvable from
  n impostor pairs only if it leaves room for at least ``min_false_accepts`` = 10 false accepts, α ≥ 10 / n. With
  K ≈ 10 the false-accept count behind τ has a relative standard deviation near 1/√10 ≈ 32 % (Poisson), so the
  realised FAR is known within about a factor of two; with fewer, τ is a single extreme order statistic and a TAR
  read at it is noise. Unresolvable FARs are reported as NaN (or raised to the floor, where a caller asks for
  that), never as a number.
* **ROC, AUC, EER** (:func:`roc_curve`, :func:`auc`, :func:`eer`): exact over every distinct score, ties included.
* **Bootstrap by identity** (:func:`bootstrap_ci`): pairs of one identity are dependent, so identities are
  resampled with all their scores.
* **Binomial intervals**: the two-sided Wilson score interval (:func:`wilson_interval`) and the one-sided
  Clopper–Pearson upper bound (:func:`clopper_pearson_upper`).

Statistics are computed in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy.special import betaincinv

from ._validate import check_int, check_probability, check_tensor
from .errors import InsufficientDataError, InvalidArgumentError, ShapeError

__all__ = ["DEFAULT_FARS", "DEFAULT_MIN_FALSE_ACCEPTS", "smallest_resolvable_far", "resolvable_far",
           "thresholds_at_far", "tar_at_far", "ROCCurve", "roc_curve", "auc", "eer", "pair_auc", "BootstrapCI", "bootstrap_ci",
           "wilson_interval", "clopper_pearson_upper"]


# ---------------------------------------------------------------------------------------------------------------------
# TAR at FAR and the resolvable-FAR rule
# ---------------------------------------------------------------------------------------------------------------------
#: FARs reported by default.
DEFAULT_FARS: tuple[float, ...] = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6)
#: Minimum expected number of false accepts for a FAR to count as resolvable (see the module docstring).
DEFAULT_MIN_FALSE_ACCEPTS = 10


def smallest_resolvable_far(n_impostor_pairs: int, *, min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS) -> float:
    """The smallest FAR that ``n_impostor_pairs`` can resolve: ``min_false_accepts / n_impostor_pairs``.

    privkit's rule: a FAR is reported only if at least ``min_false_accepts`` (default 10) false accepts are expected
    at it, i.e. the threshold is set by at least 10 impostor scores. With ~10 false accepts the count has a relative
    standard deviation near 1/√10 ≈ 32% (Poisson), so the realised FAR is known within about a factor of two; below
    that the threshold is a single extreme order statistic. Returns ``inf`` for zero pairs.
    """
    n = check_int("n_impostor_pairs", n_impostor_pairs, minimum=0)
    k = check_int("min_false_accepts", min_false_accepts, minimum=1)
    return math.inf if n == 0 else k / n


def resolvable_far(far: float, n_impostor_pairs: int, *, min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS) -> float:
    """``far``, raised to :func:`smallest_resolvable_far` of ``n_impostor_pairs`` when it lies below it.

    Raises:
        InsufficientDataError: fewer impostor pairs than ``min_false_accepts`` (no FAR below 1 is resolvable).
    """
    far = check_probability("far", far)
    n = check_int("n_impostor_pairs", n_impostor_pairs, minimum=0)
    k = check_int("min_false_accepts", min_false_accepts, minimum=1)
    if n < k:
        raise InsufficientDataError(
            f"n_impostor_pairs: need at least min_false_accepts={k} impostor pairs to resolve any FAR, got {n}")
    return max(far, smallest_resolvable_far(n, min_false_accepts=min_false_accepts))


def _check_fars(fars: float | Sequence[float]) -> tuple[float, ...]:
    if isinstance(fars, (int, float)) and not isinstance(fars, bool):
        fars = (fars,)
    out = tuple(check_probability("fars", f) for f in fars)
    if not out:
        raise InvalidArgumentError("fars must contain at least one FAR in (0, 1)")
    return out


def _allowed_false_accepts(far: float, n: int) -> int:
    """K = ⌊far · n⌋, robust to the float rounding of far · n (e.g. 1e-4 · 30000)."""
    return int(math.floor(far * n * (1 + 1e-12)))


def thresholds_at_far(top_scores: torch.Tensor, n_impostor_pairs: int, fars: float | Sequence[float], *,
                      min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS) -> torch.Tensor:
    """Thresholds τ(α) from the largest impostor scores (accept when score > τ).

    Args:
        top_scores: the largest impostor scores, sorted descending (at least ⌊α_max n⌋ + 1 of them, or all).
        n_impostor_pairs: total number n of impostor pairs those scores were taken from.
        fars: target FAR(s) α in (0, 1).
        min_false_accepts: resolution rule (:func:`smallest_resolvable_far`).

    Returns:
        float64 tensor of thresholds, one per FAR; NaN where α < ``smallest_resolvable_far(n)``.
    """
    fars = _check_fars(fars)
    check_tensor("top_scores", top_scores, ndim=1)
    floor = smallest_resolvable_far(n_impostor_pairs, min_false_accepts=min_false_accepts)
    out = torch.full((len(fars),), math.nan, dtype=torch.float64)
    for i, far in enumerate(fars):
        if far < floor * (1 - 1e-12):
            continue
        k = _allowed_false_accepts(far, n_impostor_pairs)
        if k >= n_impostor_pairs:
            continue
        if k >= top_scores.numel():
            raise InsufficientDataError(
                f"top_scores: need the {k + 1} largest impostor scores for FAR {far:g} over {n_impostor_pairs} pairs, "
                f"got {top_scores.numel()}"
            )
        out[i] = float(top_scores[k])
    return out


def _topk_desc(x: torch.Tensor, k: int) -> torch.Tensor:
    k = min(k, x.numel())
    return torch.topk(x, k, largest=True, sorted=True).values


def tar_at_far(genuine_scores: torch.Tensor, impostor_scores: torch.Tensor, *,
               fars: float | Sequence[float] = DEFAULT_FARS, min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS) -> pd.DataFrame:
    """TAR at FAR from explicit score vectors, with the threshold set on these impostor scores.

    The threshold uses ``torch.topk`` on the impostor scores (no full sort). For embeddings use
    :func:`pairwise_tar_at_far`, which scores all pairs in chunks without materialising them.

    Args:
        genuine_scores: (G,) scores of genuine (same-identity) pairs.
        impostor_scores: (I,) scores of impostor pairs.
        fars: target FAR(s).
        min_false_accepts: resolution rule; FARs below ``min_false_accepts / I`` get NaN.

    Returns:
        DataFrame with columns far, threshold, tar, realised_far, resolvable, smallest_resolvable_far, n_genuine,
        n_impostor.
    """
    fars = _check_fars(fars)
    check_tensor("genuine_scores", genuine_scores, ndim=1, floating=True)
    check_tensor("impostor_scores", impostor_scores, ndim=1, floating=True)
    if genuine_scores.numel() == 0:
        raise InsufficientDataError("genuine_scores: need at least 1 genuine score, got 0")
    n_imp = int(impostor_scores.numel())
    floor = smallest_resolvable_far(n_imp, min_false_accepts=min_false_accepts)
    ks = [_allowed_false_accepts(f, n_imp) for f in fars if f >= floor * (1 - 1e-12)]
    top = _topk_desc(impostor_scores, max(ks) + 1) if ks else impostor_scores.new_empty(0)
    taus = thresholds_at_far(top, n_imp, fars, min_false_accepts=min_false_accepts)
    rows = []
    g = genuine_scores.double()
    for far, tau in zip(fars, taus.tolist()):
        ok = not math.isnan(tau)
        rows.append({"far": far, "threshold": tau, "tar": float((g > tau).double().mean()) if ok else math.nan,
                     "realised_far": float((impostor_scores.double() > tau).double().mean()) if ok else math.nan,
                     "resolvable": ok, "smallest_resolvable_far": floor, "n_genuine": int(genuine_scores.numel()),
                     "n_impostor": n_imp})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------------------
# ROC, AUC, EER and the identity bootstrap
# ---------------------------------------------------------------------------------------------------------------------
def _scores(name: str, x: Any, *, min_count: int = 1) -> torch.Tensor:
    check_tensor(name, x, ndim=1, floating=True)
    if x.numel() < min_count:
        raise InsufficientDataError(f"{name}: need at least {min_count} scores, got {x.numel()}")
    return x.detach().to(torch.float64)


@dataclass(frozen=True)
class ROCCurve:
    """ROC points for the rule "accept when score >= threshold", thresholds decreasing.

    ``fpr[0] = tpr[0] = 0`` at threshold +inf; the last point is (1, 1).
    """

    fpr: torch.Tensor
    tpr: torch.Tensor
    thresholds: torch.Tensor


def roc_curve(genuine: torch.Tensor, impostor: torch.Tensor) -> ROCCurve:
    """Full ROC curve (every distinct score is a threshold; ties handled exactly)."""
    g = _scores("genuine", genuine)
    i = _scores("impostor", impostor)
    scores = torch.cat([g, i])
    labels = torch.cat([torch.ones_like(g), torch.zeros_like(i)])
    order = torch.argsort(scores, descending=True, stable=True)
    s_sorted = scores[order]
    l_sorted = labels[order]
    tp = torch.cumsum(l_sorted, 0)
    fp = torch.cumsum(1.0 - l_sorted, 0)
    # keep the last position of each run of equal scores
    last = torch.ones_like(s_sorted, dtype=torch.bool)
    last[:-1] = s_sorted[1:] != s_sorted[:-1]
    zero = torch.zeros(1, dtype=torch.float64)
    tpr = torch.cat([zero, tp[last] / g.numel()])
    fpr = torch.cat([zero, fp[last] / i.numel()])
    thr = torch.cat([torch.tensor([math.inf], dtype=torch.float64), s_sorted[last]])
    return ROCCurve(fpr=fpr, tpr=tpr, thresholds=thr)


def auc(genuine: torch.Tensor, impostor: torch.Tensor) -> float:
    """Area under the ROC curve = Pr[G > I] + ½ Pr[G = I] (exact trapezoid over all thresholds)."""
    r = roc_curve(genuine, impostor)
    return float(torch.trapezoid(r.tpr, r.fpr))


def eer(genuine: torch.Tensor, impostor: torch.Tensor) -> float:
    """Equal error rate: where FPR = FNR = 1 − TPR on the piecewise-linear ROC."""
    r = roc_curve(genuine, impostor)
    fnr = 1.0 - r.tpr
    diff = r.fpr - fnr  # increases from -1 to +1 along the curve
    j = int(torch.nonzero(diff >= 0)[0])  # >= 1, since diff[0] = -1
    if diff[j] == 0:
        return float(r.fpr[j])
    d0, d1 = float(diff[j - 1]), float(diff[j])
    w = d0 / (d0 - d1)  # in (0, 1): where the segment crosses FPR = FNR
    return float(r.fpr[j - 1] + w * (r.fpr[j] - r.fpr[j - 1]))


def pair_auc(similarity: torch.Tensor, labels: torch.Tensor) -> float:
    """AUC of the pairs ``i < j`` of a square similarity matrix, same-label pairs genuine, others impostor.

    Raises:
        ShapeError: ``similarity`` is not square, or ``labels`` does not have one entry per row.
        InsufficientDataError: no genuine or no impostor pair.
    """
    check_tensor("similarity", similarity, ndim=2)
    n = similarity.shape[0]
    if similarity.shape[1] != n:
        raise ShapeError(f"similarity must be square, got {tuple(similarity.shape)}")
    check_tensor("labels", labels, ndim=1)
    if labels.numel() != n:
        raise ShapeError(f"labels must have one entry per row of similarity ({n}), got {labels.numel()}")
    i, j = torch.triu_indices(n, n, offset=1)
    s = similarity.double().cpu()[i, j]
    y = labels.cpu()
    same = y[i] == y[j]
    if not bool(same.any()) or bool(same.all()):
        raise InsufficientDataError("labels: need both genuine (same-label) and impostor pairs")
    return auc(s[same], s[~same])


@dataclass(frozen=True)
class BootstrapCI:
    """Percentile bootstrap confidence interval.

    Attributes:
        estimate: the metric on the full data.
        low, high: the interval's ends.
        confidence: its nominal level.
        n_boot: number of bootstrap replicates.
        samples: the replicates (float64 tensor, for plots).
        unit: ``"identity"`` (identities resampled with all their pairs) or ``"score"``.
    """

    estimate: float
    low: float
    high: float
    confidence: float
    n_boot: int
    samples: torch.Tensor
    unit: str


def bootstrap_ci(metric_fn: Callable[[torch.Tensor, torch.Tensor], float], genuine: torch.Tensor,
                 impostor: torch.Tensor, *, groups: tuple[torch.Tensor, torch.Tensor] | None = None,
                 n_boot: int = 1000, seed: int = 0, confidence: float = 0.95) -> BootstrapCI:
    """Bootstrap a metric of (genuine, impostor) scores, resampling identities.

    Pairs of the same identity are dependent, so resampling single scores understates the
    uncertainty.  With ``groups = (genuine_ids, impostor_ids)`` (one integer identity label per
    score, e.g. the probe's identity for an impostor pair) each replicate draws identities with
    replacement and keeps every score of each drawn identity, as many times as it was drawn.
    Without ``groups`` genuine and impostor scores are resampled independently.

    Args:
        metric_fn: ``metric_fn(genuine, impostor) -> float`` (e.g. :func:`auc`, :func:`eer`).
        genuine: genuine scores ``(Ng,)``.
        impostor: impostor scores ``(Ni,)``.
        groups: optional identity labels for the two arrays (integer tensors of the same lengths).
        n_boot: replicates, >= 10.
        seed: seed of the resampling (a private ``numpy.random.Generator``).
        confidence: interval level in (0, 1).

    Returns:
        A :class:`BootstrapCI`.  Replicates missing genuine or impostor scores are redrawn.
    """
    if not callable(metric_fn):
        raise InvalidArgumentError("metric_fn must be callable as metric_fn(genuine, impostor) -> float")
    g = _scores("genuine", genuine)
    i = _scores("impostor", impostor)
    n_boot = check_int("n_boot", n_boot, minimum=10)
    seed = check_int("seed", seed, minimum=0)
    conf = check_probability("confidence", confidence)
    rng = np.random.default_rng(seed)
    estimate = float(metric_fn(g, i))
    samples = np.empty(n_boot)
    if groups is None:
        for b in range(n_boot):
            gi = torch.from_numpy(rng.integers(0, g.numel(), g.numel()))
            ii = torch.from_numpy(rng.integers(0, i.numel(), i.numel()))
            samples[b] = float(metric_fn(g[gi], i[ii]))
        unit = "score"
    else:
        if not isinstance(groups, (tuple, list)) or len(groups) != 2:
            raise InvalidArgumentError("groups must be a pair (genuine_groups, impostor_groups) of label tensors")
        gg, ig = groups
        for name, lab, ref in (("groups[0]", gg, g), ("groups[1]", ig, i)):
            check_tensor(name, lab, ndim=1)
            if lab.is_floating_point() or lab.dtype == torch.bool:
                raise InvalidArgumentError(f"{name} must hold integer identity labels, got dtype {lab.dtype}")
            if lab.numel() != ref.numel():
                raise ShapeError(f"{name} must have one label per score: {lab.numel()} labels for {ref.numel()} scores")
        ids, inv = torch.unique(torch.cat([gg, ig]).cpu(), return_inverse=True)
        K = ids.numel()

        def by_identity(scores, lab):
            """``(scores sorted by identity, start of each identity's run, run lengths)``."""
            cnt = torch.bincount(lab, minlength=K)
            return scores[torch.argsort(lab).to(scores.device)], torch.cumsum(cnt, 0) - cnt, cnt

        g_runs, i_runs = by_identity(g, inv[: gg.numel()]), by_identity(i, inv[gg.numel():])

        def take(sorted_scores, start, cnt, draw):
            c = cnt[draw]
            keep = c > 0
            draw, c = draw[keep], c[keep]
            if c.numel() == 0:
                return sorted_scores[:0]
            offsets = torch.repeat_interleave(start[draw], c)
            within = torch.arange(int(c.sum())) - torch.repeat_interleave(torch.cumsum(c, 0) - c, c)
            return sorted_scores[(offsets + within).to(sorted_scores.device)]

        b = 0
        tries = 0
        while b < n_boot:
            tries += 1
            if tries > 20 * n_boot:
                raise InsufficientDataError("bootstrap: too many replicates without both genuine and impostor scores")
            draw = torch.from_numpy(rng.integers(0, K, K))
            gb = take(*g_runs, draw)
            ib = take(*i_runs, draw)
            if gb.numel() == 0 or ib.numel() == 0:
                continue
            samples[b] = float(metric_fn(gb, ib))
            b += 1
        unit = "identity"
    a = (1.0 - conf) / 2.0
    low, high = np.quantile(samples, [a, 1.0 - a])
    return BootstrapCI(estimate=estimate, low=float(low), high=float(high), confidence=conf, n_boot=n_boot,
                       samples=torch.from_numpy(samples), unit=unit)


# ---------------------------------------------------------------------------------------------------------------------
# Binomial intervals
# ---------------------------------------------------------------------------------------------------------------------
def wilson_interval(successes: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    from statistics import NormalDist

    if n <= 0:
        return (math.nan, math.nan)
    zq = NormalDist().inv_cdf(0.5 + check_probability("level", level) / 2)
    p = successes / n
    den = 1 + zq * zq / n
    centre = (p + zq * zq / (2 * n)) / den
    half = zq * math.sqrt(p * (1 - p) / n + zq * zq / (4 * n * n)) / den
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (lo, hi)


def clopper_pearson_upper(k: np.ndarray | int, n: int, alpha: float) -> np.ndarray | float:
    """One-sided Clopper-Pearson upper confidence bound on a binomial rate.

    ``P[p <= upper] >= 1 - alpha`` for ``k ~ Binomial(n, p)``.

    Args:
        k: Observed count(s), ``0 <= k <= n``.
        n: Number of trials, ``>= 1``.
        alpha: Error probability in ``(0, 1)``.

    Returns:
        The upper bound(s), in ``(0, 1]``.
    """
    n = check_int("n", n, minimum=1)
    alpha = check_probability("alpha", alpha)
    k_arr = np.asarray(k, dtype=np.float64)
    if np.any(k_arr < 0) or np.any(k_arr > n) or np.any(k_arr != np.round(k_arr)):
        raise InvalidArgumentError(f"k must contain integers in [0, {n}], got {k!r}")
    full = k_arr >= n
    b = np.where(full, 1.0, n - k_arr)
    # the (1 - alpha) quantile of Beta(k + 1, n - k)
    upper = np.where(full, 1.0, betaincinv(k_arr + 1.0, b, 1.0 - alpha))
    return float(upper) if upper.ndim == 0 else upper
