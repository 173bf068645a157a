"""Black-box statistical auditing of a DP mechanism on one pair of neighbours.

:func:`audit` runs a mechanism many times on two neighbouring inputs ``d0`` and
``d1`` and turns the success of the best distinguishing test it can find into
a **lower bound on epsilon** that holds with probability ``confidence``.  A
mechanism whose audited lower bound exceeds its claimed epsilon is caught
violating its claim; a lower bound below the claim proves nothing (the auditor
may simply not have found the worst-case test), so it "passes" only in that
weak sense.

Method (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021 use the same
reasoning).  If ``M`` is (epsilon, delta)-DP then every test with false
positive rate ``FPR = P[M(d0) in R]`` and false negative rate ``FNR = P[M(d1)
not in R]`` satisfies ``FPR + e^eps FNR >= 1 - delta`` and ``FNR + e^eps FPR >=
1 - delta``, so

    eps >= max( ln((1 - delta - FNR)/FPR), ln((1 - delta - FPR)/FNR) ).

1. ``n_samples`` outputs are drawn from each of ``M(d0)`` and ``M(d1)`` and
   flattened to vectors.  The first half of each is used to *fit*: a 1-D
   statistic (the identity for scalar outputs; the direction of the mean
   difference, optionally whitened, for vectors; or a user callable), then the
   threshold and side of the test ``statistic >= t`` (or ``<= t``) that
   maximises the epsilon bound computed on that first half.
2. On the held-out second half the test's FPR and FNR are counted and replaced
   by one-sided Clopper-Pearson upper bounds, each at level
   ``1 - (1 - confidence)/2`` (Bonferroni), so that both hold together with
   probability ``>= confidence``; the formula above then gives
   ``epsilon_lower``.  Because the test is fixed before the held-out half is
   drawn, ``epsilon_lower`` is a valid lower bound on the mechanism's true
   epsilon (at ``delta``) with probability at least ``confidence``.

Mechanism contract
------------------
``mechanism(data, n, generator) -> torch.Tensor`` of shape ``(n, *out_shape)``:
``n`` **independent** runs of the mechanism on ``data``, each with fresh noise
drawn *only* from ``generator`` (a ``torch.Generator`` on the audit's device).
``data`` is passed through untouched (``d0`` or ``d1``: tensors, tuples, a
model and a batch, ...).  ``out_shape`` must be the same on every call; any
real dtype is accepted (outputs are analysed in float64).  The auditor calls
the mechanism in chunks of at most ``batch_size`` rows, so memory stays
bounded for Gram matrices or gradient vectors.  Wrap a one-output-per-call
function with :func:`batch_mechanism`.  Examples::

    def gaussian(data, n, generator):           # a noisy scalar/vector release
        noise = sample_gaussian((n, *data.shape), sigma=s, generator=generator)
        return data + noise

    def gram(E, n, generator):                  # (n, k, k) noisy Gram matrices
        ...

If the mechanism draws only from ``generator``, the audit is reproducible from
``seed``; for large outputs the first half is redrawn from a saved generator
state instead of being held in memory (see ``max_cached_bytes``), which is
exact for such mechanisms and still valid (just different draws) for others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from .._validate import check_delta, check_int, check_positive, check_probability
from ..device import resolve_device
from ..errors import InvalidArgumentError, ShapeError, UnknownNameError
from ..metrics import clopper_pearson_upper

__all__ = ["AuditResult", "audit", "batch_mechanism", "epsilon_lower_bound"]

Mechanism = Callable[[Any, int, torch.Generator], torch.Tensor]
StatisticName = Literal["auto", "identity", "mean_difference", "whitened"]
STATISTICS: tuple[str, ...] = ("auto", "identity", "mean_difference", "whitened")

#: Elements (float64) per mechanism call unless ``batch_size`` is given.
_CHUNK_ELEMENTS = 1 << 22
#: Largest output dimension for the whitened statistic (a D x D covariance).
_MAX_WHITEN_DIM = 4096
#: Number of geometrically spaced order statistics taken from each tail.
_N_TAIL_CANDIDATES = 400


# --------------------------------------------------------------------------- statistics helpers


def epsilon_lower_bound(fpr_upper: np.ndarray | float, fnr_upper: np.ndarray | float,
                        delta: float) -> np.ndarray | float:
    """``max(0, ln((1-delta-FNR)/FPR), ln((1-delta-FPR)/FNR))`` from upper bounds on the two rates.

    Args:
        fpr_upper: Upper bound(s) on the false positive rate, in ``(0, 1]``.
        fnr_upper: Upper bound(s) on the false negative rate, in ``(0, 1]``.
        delta: The delta at which epsilon is bounded, in ``[0, 1)``.

    Returns:
        The epsilon lower bound(s), ``>= 0``.
    """
    fp = np.asarray(fpr_upper, dtype=np.float64)
    fn = np.asarray(fnr_upper, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = np.where(1.0 - delta - fn > 0, np.log((1.0 - delta - fn) / fp), -np.inf)
        e2 = np.where(1.0 - delta - fp > 0, np.log((1.0 - delta - fp) / fn), -np.inf)
    out = np.maximum(0.0, np.maximum(np.nan_to_num(e1, nan=-np.inf), np.nan_to_num(e2, nan=-np.inf)))
    return float(out) if out.ndim == 0 else out


def _candidate_thresholds(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Order statistics of both samples, dense in the tails (geometric ranks) and sparse in the bulk."""
    picks = []
    for x in (a, b):
        n = x.size
        ranks = np.unique(np.round(np.geomspace(1, n, num=min(n, _N_TAIL_CANDIDATES))).astype(np.int64)) - 1
        picks.append(x[ranks])
        picks.append(x[n - 1 - ranks])
        picks.append(x[np.linspace(0, n - 1, num=min(n, 200)).astype(np.int64)])
    return np.unique(np.concatenate(picks))


def _rates(a_sorted: np.ndarray, b_sorted: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts of the test "guess d1 iff score >= t": false positives (from d0) and false negatives (from d1)."""
    fp = a_sorted.size - np.searchsorted(a_sorted, t, side="left")
    fn = np.searchsorted(b_sorted, t, side="left")
    return fp, fn


# --------------------------------------------------------------------------- result
@dataclass(frozen=True)
class AuditResult:
    """Outcome of :func:`audit`.

    Attributes:
        epsilon_lower: Lower bound on the mechanism's epsilon at ``delta``, valid
            with probability ``>= confidence``; ``>= 0``.
        threshold: Threshold of the chosen test on the 1-D statistic.
        side: ``">="`` (guess d1 when statistic >= threshold) or ``"<="``.
        fpr: Held-out empirical false positive rate P[test says d1 | d0].
        fnr: Held-out empirical false negative rate P[test says d0 | d1].
        fpr_upper: Clopper-Pearson upper bound on the FPR.
        fnr_upper: Clopper-Pearson upper bound on the FNR.
        n_samples: Outputs drawn per input (half to fit, half held out).
        n_heldout: Held-out outputs per input.
        confidence: Joint confidence of the two rate bounds.
        delta: The delta at which epsilon is bounded.
        claimed_epsilon: The epsilon the mechanism claims, if given.
        statistic: Name of the 1-D statistic used.
        epsilon_fit: The (candidate-corrected) bound the chosen test reached on
            the fitting half; a diagnostic, not the reported bound.
    """

    epsilon_lower: float
    threshold: float
    side: str
    fpr: float
    fnr: float
    fpr_upper: float
    fnr_upper: float
    n_samples: int
    n_heldout: int
    confidence: float
    delta: float
    claimed_epsilon: float | None
    statistic: str
    epsilon_fit: float

    @property
    def passed(self) -> bool | None:
        """``epsilon_lower <= claimed_epsilon``; ``None`` without a claim.

        ``False`` means the claim is refuted at the audit's confidence level;
        ``True`` means only that this audit found no violation.
        """
        if self.claimed_epsilon is None:
            return None
        return bool(self.epsilon_lower <= self.claimed_epsilon)

    def to_dict(self) -> dict[str, Any]:
        """All fields plus ``passed``."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["passed"] = self.passed
        return d

    def __str__(self) -> str:
        head = (f"audit: ε ≥ {self.epsilon_lower:.3f} at δ={self.delta:.3g} with {self.confidence:.0%} confidence "
                f"(test: {self.statistic} {self.side} {self.threshold:.4g}; held-out FPR={self.fpr:.3g} "
                f"[≤{self.fpr_upper:.3g}], FNR={self.fnr:.3g} [≤{self.fnr_upper:.3g}]; "
                f"{self.n_samples} samples per input, {self.n_heldout} held out)")
        if self.claimed_epsilon is None:
            return head
        if self.passed:
            verdict = (f"PASSED: no violation of the claimed ε={self.claimed_epsilon:.3g} found "
                       "(a lower bound below the claim does not prove the claim)")
        else:
            verdict = (f"FAILED: the claimed ε={self.claimed_epsilon:.3g} is violated "
                       f"(ε ≥ {self.epsilon_lower:.3f} > {self.claimed_epsilon:.3g})")
        return f"{head} | {verdict}"


# --------------------------------------------------------------------------- mechanism helpers
def batch_mechanism(single: Callable[[Any, torch.Generator], torch.Tensor]) -> Mechanism:
    """Wrap a one-output-per-call mechanism ``single(data, generator)`` into the batched contract.

    The wrapper calls ``single`` ``n`` times and stacks the outputs; prefer a
    natively batched mechanism when speed matters.
    """
    if not callable(single):
        raise InvalidArgumentError(f"single must be callable, got {type(single).__name__}")

    def batched(data: Any, n: int, generator: torch.Generator) -> torch.Tensor:
        return torch.stack([torch.as_tensor(single(data, generator)) for _ in range(n)])

    batched.__name__ = f"batched_{getattr(single, '__name__', 'mechanism')}"
    return batched


class _Sampler:
    """Draws and validates mechanism outputs in chunks, flattened to float64 (n, D)."""

    def __init__(self, mechanism: Mechanism, generator: torch.Generator, batch_size: int | None):
        self.mechanism = mechanism
        self.generator = generator
        self.batch_size = batch_size
        self.out_shape: tuple[int, ...] | None = None

    def _call(self, data: Any, n: int) -> torch.Tensor:
        out = self.mechanism(data, n, self.generator)
        if not isinstance(out, torch.Tensor):
            raise InvalidArgumentError(f"mechanism must return a torch.Tensor of shape (n, ...), "
                                       f"got {type(out).__name__}")
        if out.ndim == 0 or out.shape[0] != n:
            raise ShapeError(f"mechanism(data, n={n}, generator) must return a tensor with first dimension n={n} "
                             f"(one row per independent run), got shape {tuple(out.shape)}")
        if out.is_complex() or out.dtype == torch.bool:
            raise InvalidArgumentError(f"mechanism outputs must be real numbers, got dtype {out.dtype}")
        shape = tuple(out.shape[1:])
        if self.out_shape is None:
            self.out_shape = shape
        elif shape != self.out_shape:
            raise ShapeError(f"mechanism output shape changed between calls: {self.out_shape} then {shape}")
        flat = out.detach().reshape(n, -1).to(torch.float64)
        if not bool(torch.isfinite(flat).all()):
            raise InvalidArgumentError("mechanism returned NaN or inf values; outputs must be finite")
        return flat

    @property
    def dim(self) -> int:
        return int(math.prod(self.out_shape)) if self.out_shape is not None else 0

    def probe(self, data: Any) -> None:
        self._call(data, 1)

    def chunk_size(self, n: int) -> int:
        if self.batch_size is not None:
            return self.batch_size
        return max(1, min(n, _CHUNK_ELEMENTS // max(1, self.dim)))

    def stream(self, data: Any, n: int) -> Iterator[torch.Tensor]:
        size = self.chunk_size(n)
        done = 0
        while done < n:
            m = min(size, n - done)
            yield self._call(data, m)
            done += m


def _fit_direction(stats0, stats1, whiten: bool) -> torch.Tensor:
    """Mean-difference direction, optionally premultiplied by the inverse pooled covariance."""
    n0, s0, q0, shift0 = stats0
    n1, s1, q1, shift1 = stats1
    m0 = shift0 + s0 / n0
    m1 = shift1 + s1 / n1
    w = m1 - m0
    if whiten:
        # Pooled within-class covariance from shifted sums of squares.
        c0 = q0 - torch.outer(s0, s0) / n0
        c1 = q1 - torch.outer(s1, s1) / n1
        cov = (c0 + c1) / max(1, n0 + n1 - 2)
        d = cov.shape[0]
        scale = float(torch.trace(cov)) / d
        if scale > 0:  # noise-free outputs have nothing to whiten
            cov = cov + 1e-6 * scale * torch.eye(d, dtype=cov.dtype, device=cov.device)
            w_white = torch.linalg.solve(cov, w)
            if bool(torch.isfinite(w_white).all()):
                w = w_white
    peak = w.abs().max()
    if not bool(peak > 0):
        # No mean difference at all: any fixed direction is as good as another.
        w = torch.zeros_like(w)
        w[0] = 1.0
        return w
    w = w / peak  # rescale before the norm so that it cannot overflow
    return w / torch.linalg.vector_norm(w)


def _shifted_moments(chunks: Iterable[torch.Tensor], whiten: bool, keep: bool):
    """``((count, sum, sum of outer products or None, shift), kept chunks)`` of the rows of ``chunks``.

    Sums are taken about the first chunk's mean (for accuracy); outer products only with ``whiten``; the chunks are
    kept (for scoring) only with ``keep``.
    """
    kept = []
    n_seen, shift, s_sum, q_sum = 0, None, None, None
    for x in chunks:
        if shift is None:
            shift = x.mean(dim=0)
            s_sum = torch.zeros_like(shift)
            q_sum = torch.zeros(x.shape[1], x.shape[1], dtype=x.dtype, device=x.device) if whiten else None
        xc = x - shift
        s_sum += xc.sum(dim=0)
        if whiten:
            q_sum += xc.T @ xc
        n_seen += x.shape[0]
        if keep:
            kept.append(x)
    return (n_seen, s_sum, q_sum, shift), kept


def _fit_direction_scores(sampler: _Sampler, inputs: tuple[Any, Any], n_fit: int, whiten: bool, cache_ok: bool,
                          scores_of: Callable[[torch.Tensor, torch.Tensor | None], np.ndarray]):
    """Fit the (optionally whitened) mean-difference direction on the fitting half of both inputs, then score that
    half along it: ``(direction, [scores of inputs[0], scores of inputs[1]])``.

    The half is kept in memory when ``cache_ok``, else redrawn from the generator state saved before each input; the
    generator is left where the fitting draws ended.
    """
    generator = sampler.generator
    states, cached, stats = [], [], []
    for data in inputs:
        states.append(generator.get_state())
        moments, chunks = _shifted_moments(sampler.stream(data, n_fit), whiten, cache_ok)
        stats.append(moments)
        cached.append(chunks)
    after = generator.get_state()
    w = _fit_direction(stats[0], stats[1], whiten)
    fit_scores = []
    for data, state, chunks in zip(inputs, states, cached):
        if not cache_ok:
            generator.set_state(state)
            chunks = sampler.stream(data, n_fit)
        fit_scores.append(np.concatenate([scores_of(x, w) for x in chunks]))
    generator.set_state(after)
    return w, fit_scores


def _statistic(statistic: Any) -> tuple[Callable[[torch.Tensor], torch.Tensor] | None, str]:
    """``(the user's callable or None, the statistic's name)``; an unknown name raises UnknownNameError."""
    if callable(statistic):
        return statistic, getattr(statistic, "__name__", "custom statistic")
    if isinstance(statistic, str) and statistic in STATISTICS:
        return None, statistic
    raise UnknownNameError("statistic", statistic, list(STATISTICS) + ["<callable>"])


def _choose_test(a: np.ndarray, b: np.ndarray, delta: float, alpha: float) -> tuple[float, str, float]:
    """Threshold and side maximising the epsilon bound on the fitting half.

    The rates of every candidate test are bounded with Clopper-Pearson at
    ``alpha / (number of candidates)`` (simultaneous over all candidates).
    Without this correction the maximum over thousands of thresholds picks
    extreme tails whose few counts were lucky (a winner's curse that then
    costs power on the held-out half).
    """
    sides = []
    for side, sa, sb in ((">=", a, b), ("<=", -a, -b)):
        a_s = np.sort(sa)
        b_s = np.sort(sb)
        sides.append((side, a_s, b_s, _candidate_thresholds(a_s, b_s)))
    alpha_fit = alpha / sum(c[3].size for c in sides)
    best = (-math.inf, 0.0, ">=")
    for side, a_s, b_s, t in sides:
        fp, fn = _rates(a_s, b_s, t)
        fpr_u = clopper_pearson_upper(fp, a_s.size, alpha_fit)
        fnr_u = clopper_pearson_upper(fn, b_s.size, alpha_fit)
        eps = np.atleast_1d(epsilon_lower_bound(fpr_u, fnr_u, delta))
        i = int(np.argmax(eps))
        if eps[i] > best[0]:
            thr = float(t[i]) if side == ">=" else float(-t[i])
            best = (float(eps[i]), thr, side)
    eps_fit, threshold, side = best
    return threshold, side, max(0.0, eps_fit)


def audit(mechanism: Mechanism, d0: Any, d1: Any, *, n_samples: int, delta: float = 0.0, confidence: float = 0.95,
          seed: int = 0, claimed_epsilon: float | None = None,
          statistic: StatisticName | Callable[[torch.Tensor], torch.Tensor] = "auto", batch_size: int | None = None,
          device: str | torch.device | None = None, max_cached_bytes: int = 1 << 28) -> AuditResult:
    """Audit ``mechanism`` on the neighbouring inputs ``d0``, ``d1``: a high-confidence lower bound on epsilon.

    See the module docstring for the method and the mechanism contract
    (``mechanism(data, n, generator) -> (n, ...)`` independent outputs).

    Args:
        mechanism: The batched mechanism.
        d0: First input (passed to ``mechanism`` untouched).
        d1: A neighbour of ``d0``.
        n_samples: Outputs drawn per input, ``>= 20``; the first half fits the
            test, the second half is held out.
        delta: The delta at which epsilon is bounded, in ``[0, 1)``.
        confidence: Probability that ``epsilon_lower`` is a valid bound, in
            ``(0, 1)``; split equally between the FPR and FNR bounds.
        seed: Seed of the generator handed to the mechanism.
        claimed_epsilon: The epsilon the mechanism claims; sets
            ``AuditResult.passed``.
        statistic: ``"auto"`` (identity for scalar outputs, else
            ``"mean_difference"``), ``"identity"`` (scalar outputs only),
            ``"mean_difference"`` (project on the fitted mean difference),
            ``"whitened"`` (project on the inverse-covariance-weighted mean
            difference; output dimension <= 4096), or a callable mapping a
            ``(m, *out_shape)`` float64 tensor of outputs to ``(m,)`` scores
            (it must not look at ``d0``/``d1`` or the held-out draws).
        batch_size: Rows per mechanism call; default about 4M output elements
            per call.
        device: Device of the generator; default the device of ``d0`` when it
            is a tensor, else the CPU.
        max_cached_bytes: The fitting half is kept in memory when it needs no
            more than this (float64); otherwise it is redrawn from the saved
            generator state after the direction is fitted.

    Returns:
        An :class:`AuditResult`.

    Raises:
        InvalidArgumentError, ShapeError, UnknownNameError: bad arguments or a
            mechanism that breaks the contract.
    """
    if not callable(mechanism):
        raise InvalidArgumentError(f"mechanism must be callable, got {type(mechanism).__name__}")
    n_samples = check_int("n_samples", n_samples, minimum=20)
    delta = check_delta(delta, allow_zero=True)
    confidence = check_probability("confidence", confidence)
    seed = check_int("seed", seed, minimum=0, maximum=2**64 - 1)
    claim = None if claimed_epsilon is None else check_positive("claimed_epsilon", claimed_epsilon)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, minimum=1)
    max_cached_bytes = check_int("max_cached_bytes", max_cached_bytes, minimum=0)
    stat_fn, stat_name = _statistic(statistic)

    if device is not None:
        dev = resolve_device(device)
    elif isinstance(d0, torch.Tensor):
        dev = d0.device
    else:
        dev = torch.device("cpu")
    generator = torch.Generator(device=dev)
    generator.manual_seed(seed)
    sampler = _Sampler(mechanism, generator, batch_size)
    sampler.probe(d0)
    dim = sampler.dim
    if dim == 0:
        raise ShapeError(f"mechanism outputs are empty (shape {sampler.out_shape})")

    if stat_fn is None:
        if stat_name == "auto":
            stat_name = "identity" if dim == 1 else "mean_difference"
        if stat_name == "identity" and dim != 1:
            raise InvalidArgumentError(f"statistic='identity' needs scalar outputs, got output shape "
                                       f"{sampler.out_shape}; use 'mean_difference', 'whitened' or a callable")
        if stat_name == "whitened" and dim > _MAX_WHITEN_DIM:
            raise InvalidArgumentError(f"statistic='whitened' allows outputs of at most {_MAX_WHITEN_DIM} elements, "
                                       f"got {dim}; use 'mean_difference' or a callable")

    n_fit = n_samples // 2
    n_held = n_samples - n_fit
    alpha = (1.0 - confidence) / 2.0

    def scores_of(x: torch.Tensor, w: torch.Tensor | None) -> np.ndarray:
        if stat_fn is not None:
            s = stat_fn(x.reshape(x.shape[0], *sampler.out_shape))
            if not isinstance(s, torch.Tensor) or s.shape != (x.shape[0],):
                raise ShapeError(f"statistic must map m outputs to a tensor of shape (m,), got "
                                 f"{type(s).__name__} {tuple(getattr(s, 'shape', ()))}")
            s = s.detach().to(torch.float64)
            if not bool(torch.isfinite(s).all()):
                raise InvalidArgumentError("statistic returned NaN or inf values")
        elif w is None:
            s = x[:, 0]
        else:
            s = x @ w
        return s.cpu().numpy()

    # ---- fitting half: the direction (for the mean-difference statistics), then the threshold and side of the test
    if stat_fn is None and stat_name in ("mean_difference", "whitened"):
        cache_ok = 2 * n_fit * dim * 8 <= max_cached_bytes
        w, fit_scores = _fit_direction_scores(sampler, (d0, d1), n_fit, stat_name == "whitened", cache_ok, scores_of)
    else:
        w = None
        fit_scores = [np.concatenate([scores_of(x, None) for x in sampler.stream(data, n_fit)]) for data in (d0, d1)]

    threshold, side, eps_fit = _choose_test(fit_scores[0], fit_scores[1], delta, alpha)

    # ---- held-out half: count errors of the fixed test
    def count(data: Any, predict_one: bool) -> int:
        k = 0
        for x in sampler.stream(data, n_held):
            s = scores_of(x, w)
            says_one = s >= threshold if side == ">=" else s <= threshold
            k += int(np.count_nonzero(says_one if predict_one else ~says_one))
        return k

    fp = count(d0, True)
    fn = count(d1, False)
    fpr_u = float(clopper_pearson_upper(fp, n_held, alpha))
    fnr_u = float(clopper_pearson_upper(fn, n_held, alpha))
    return AuditResult(epsilon_lower=float(epsilon_lower_bound(fpr_u, fnr_u, delta)), threshold=float(threshold),
                       side=side, fpr=fp / n_held, fnr=fn / n_held, fpr_upper=fpr_u, fnr_upper=fnr_u,
                       n_samples=n_samples, n_heldout=n_held, confidence=confidence, delta=delta,
                       claimed_epsilon=claim, statistic=stat_name, epsilon_fit=eps_fit)
