"""Open-set few-shot verification at low false-accept rates (paper 1, docs/isp.md §3).

Scores are cosine similarities of unit-norm (probe-mapped) embeddings; a pair is **accepted when its score is
strictly greater than the threshold τ**.

Thresholds (privkit's rule). For a target FAR α and n impostor pairs, K = ⌊α n⌋ impostors may be accepted, and τ is
the (K+1)-th largest impostor score, so that exactly K impostor scores exceed τ (fewer with ties): the realised FAR
on the calibration set is the largest achievable value ≤ α. Impostor scores are computed for **all** pairs, in chunks
on the embeddings' device, keeping only the K+1 largest (``torch.topk`` per chunk, merged) — never a full sort.

Resolution (privkit's rule, :func:`smallest_resolvable_far`). A FAR α is resolvable from n impostor pairs only if
it allows at least ``min_false_accepts`` = 10 false accepts, α ≥ 10 / n. With K ≈ 10 the threshold is the 11th
largest of n scores: the false-accept count it implies is Poisson-like with relative standard deviation 1/√K ≈ 32%,
so the realised FAR is known within a factor ≈ 2 at 95%; with fewer it is essentially a single extreme order
statistic and a reported TAR would be noise. (The paper's 1,600-image test set gives ≈1.26 M impostor pairs: 1e-4 is
resolvable, 1e-5 marginal at 12.6 expected false accepts, 1e-6 not.) Unresolvable FARs get NaN, ``resolvable=False``,
never a number.

Pairs (privkit's definition of the two readings of k, docs/isp.md §3 [I]):

* ``enrol_shots = 1``: every image is its own template and all image pairs i < j are scored (genuine: same identity,
  impostor: different identities).
* ``enrol_shots = e > 1``: per identity, e random images form a template (the re-normalised mean of their
  unit-norm embeddings); the remaining images are probes. Template–probe pairs are scored.

The protocol (:func:`privkit.isp.protocol.evaluate_verification`) fits the probe on the probe-fit identities, selects its hyperparameters
and fixes τ on the validation identities, and only then scores the test identities; it reports the realised test
FAR and bootstrap confidence intervals that resample **test identities** (the threshold stays fixed: the intervals
describe test sampling, conditional on the validation threshold).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from .._validate import check_int, check_probability, check_tensor, check_unit_norm
from ..errors import InsufficientDataError, InvalidArgumentError, ShapeError
from ..metrics import (DEFAULT_FARS, DEFAULT_MIN_FALSE_ACCEPTS, _allowed_false_accepts, _check_fars, _topk_desc,
                       smallest_resolvable_far, thresholds_at_far)

__all__ = ["VerificationPairs", "ImpostorScan", "scan_pairs", "pairwise_tar_at_far", "validation_tar", "pair_threshold"]

#: Score-matrix elements per chunk (rows × columns) when ``chunk_size`` is not given: 16 MiB of float32.
_CHUNK_ELEMENTS = 1 << 22














# ---------------------------------------------------------------------------------------------------------------------
# Pair construction and the chunked scan
# ---------------------------------------------------------------------------------------------------------------------
def _shuffled_groups(name: str, labels: torch.Tensor, counts: torch.Tensor, need: int, requirement: str,
                     generator: torch.Generator | None) -> list[torch.Tensor]:
    """The image indices of each identity (identity index order), each shuffled by ``generator``.

    ``labels`` are identity indices 0 … n − 1 and ``counts`` their (n,) image counts. Raises InsufficientDataError,
    worded with ``requirement``, when an identity has fewer than ``need`` images.
    """
    short = int((counts < need).sum())
    if short:
        raise InsufficientDataError(f"{name}: {requirement} {short} of {counts.numel()} identities have fewer "
                                    f"(minimum {int(counts.min())})")
    order = torch.argsort(labels, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    return [order[starts[i] : starts[i] + counts[i]][torch.randperm(int(counts[i]), generator=generator)]
            for i in range(counts.numel())]


@dataclass(frozen=True, eq=False)
class VerificationPairs:
    """Which pairs of a labelled embedding set are scored (independent of the embeddings themselves).

    Build it once with :meth:`create`, then :meth:`build` it on raw or probe-mapped embeddings of the same images, so
    that every probe is compared on the same templates.

    Attributes:
        labels: (N,) identity index in 0 … n_identities − 1 of every image.
        enrol_shots: images per template (1: all image pairs i < j).
        template_members: (n_identities, e) image indices of each template (e > 1), else None.
        probe_index: (P,) image indices used as probes (e > 1), else None.
        n_identities: number of identities.
    """

    labels: torch.Tensor
    enrol_shots: int
    template_members: torch.Tensor | None
    probe_index: torch.Tensor | None
    n_identities: int

    @classmethod
    def create(cls, identities: torch.Tensor, *, enrol_shots: int = 1, generator: torch.Generator | None = None,
               name: str = "identities") -> "VerificationPairs":
        """Plan the pairs for images labelled ``identities``.

        Raises:
            InsufficientDataError: fewer than 2 identities, or (e > 1) an identity with fewer than e + 1 images.
        """
        check_tensor(name, identities, ndim=1)
        if identities.is_floating_point():
            raise InvalidArgumentError(f"{name} must be an integer tensor, got dtype {identities.dtype}")
        e = check_int("enrol_shots", enrol_shots, minimum=1)
        uniq, labels = torch.unique(identities.cpu(), return_inverse=True)
        n_id = int(uniq.numel())
        if n_id < 2:
            raise InsufficientDataError(f"{name}: need at least 2 identities for impostor pairs, got {n_id}")
        counts = torch.bincount(labels, minlength=n_id)
        if e == 1:
            if int((counts * (counts - 1)).sum()) == 0:
                raise InsufficientDataError(f"{name}: need an identity with at least 2 images for genuine pairs")
            return cls(labels, 1, None, None, n_id)
        requirement = f"enrol_shots={e} needs at least {e + 1} images per identity (e for the template, >= 1 probe);"
        groups = _shuffled_groups(name, labels, counts, e + 1, requirement, generator)
        return cls(labels, e, torch.stack([g[:e] for g in groups]), torch.cat([g[e:] for g in groups]), n_id)

    @property
    def symmetric(self) -> bool:
        return self.template_members is None

    @property
    def n_impostor_pairs(self) -> int:
        if not self.symmetric:  # every probe against the n_identities - 1 other templates
            return (self.n_identities - 1) * int(self.probe_index.numel())
        counts = torch.bincount(self.labels, minlength=self.n_identities).to(torch.int64)
        n = int(counts.sum())
        return (n * n - int((counts * counts).sum())) // 2

    @property
    def n_genuine_pairs(self) -> int:
        counts = torch.bincount(self.labels, minlength=self.n_identities).to(torch.int64)
        if self.symmetric:
            return int((counts * (counts - 1)).sum()) // 2
        return int(self.probe_index.numel())

    def build(self, embeddings: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """(queries, query_labels, gallery, gallery_labels) on ``embeddings``'s device; gallery None when symmetric."""
        n = self.labels.numel()
        if embeddings.ndim != 2 or embeddings.shape[0] != n:
            raise ShapeError(
                f"embeddings must have shape ({n}, d) to match the planned pairs, got {tuple(embeddings.shape)}")
        dev = embeddings.device
        labels = self.labels.to(dev)
        if self.symmetric:
            return embeddings, labels, None, None
        templates = torch.nn.functional.normalize(embeddings[self.template_members.to(dev)].mean(1), dim=1)
        probes = self.probe_index.to(dev)
        return templates, torch.arange(self.n_identities, device=dev), embeddings[probes], labels[probes]


@dataclass(frozen=True, eq=False)
class ImpostorScan:
    """What one chunked pass over all pairs returns.

    Attributes:
        n_impostor_pairs: exact number of impostor pairs.
        top_scores: the largest impostor scores, descending (as many as requested).
        genuine_scores: all genuine scores (float64).
        genuine_labels: identity index of each genuine pair.
        exceed: (T, n_id, n_id) counts of impostor pairs (query identity a, gallery identity b) scoring above each
            threshold, or None when no thresholds were given.
        pair_totals: (n_id, n_id) number of impostor pairs per (a, b) (zero diagonal), same orientation as
            ``exceed``.
    """

    n_impostor_pairs: int
    top_scores: torch.Tensor
    genuine_scores: torch.Tensor
    genuine_labels: torch.Tensor
    exceed: torch.Tensor | None
    pair_totals: torch.Tensor


@torch.no_grad()
def scan_pairs(pairs: VerificationPairs, embeddings: torch.Tensor, *, top_k: int = 0,
               thresholds: torch.Tensor | None = None, chunk_size: int | None = None) -> ImpostorScan:
    """Score all planned pairs in row chunks on ``embeddings``'s device.

    Keeps the ``top_k`` largest impostor scores (per-chunk ``torch.topk``, merged), every genuine score, and, if
    ``thresholds`` are given, per-identity-pair counts of impostor scores above each threshold (for the identity
    bootstrap). Memory is O(chunk_size · N + top_k + n_id² · T).
    """
    check_tensor("embeddings", embeddings, ndim=2, floating=True)
    q, ql, g, gl = pairs.build(embeddings)
    sym = g is None
    if sym:
        g, gl = q, ql
    nq, ng = q.shape[0], g.shape[0]
    n_id = pairs.n_identities
    dev = q.device
    if chunk_size is None:
        chunk_size = max(1, _CHUNK_ELEMENTS // max(ng, 1))
    chunk_size = check_int("chunk_size", chunk_size, minimum=1)
    taus = None
    if thresholds is not None:
        taus = thresholds.to(dev, q.dtype)
        valid_t = ~torch.isnan(taus)
        exceed = torch.zeros(taus.numel(), n_id, n_id, dtype=torch.float64, device=dev)
        count_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32  # exact for counts < 2**24
        onehot_g = torch.nn.functional.one_hot(gl, n_id).to(count_dtype)
    top = q.new_empty(0)
    gen_s, gen_l = [], []
    for s in range(0, nq, chunk_size):
        e = min(s + chunk_size, nq)
        if sym:
            cols = slice(s, ng)
            scores = q[s:e] @ g[s:].T
            upper = torch.arange(s, ng, device=dev)[None, :] > torch.arange(s, e, device=dev)[:, None]
        else:
            cols = slice(0, ng)
            scores = q[s:e] @ g.T
            upper = None
        same = ql[s:e, None] == gl[None, cols]
        gen = same if upper is None else same & upper
        imp = ~same if upper is None else ~same & upper
        gen_s.append(scores[gen].double())
        gen_l.append(ql[s:e, None].expand_as(scores)[gen])
        if top_k > 0:
            cand = _topk_desc(scores.masked_fill(~imp, -math.inf).flatten(), top_k)
            top = _topk_desc(torch.cat([top, cand]), top_k)
        if taus is not None:
            oh_q = torch.nn.functional.one_hot(ql[s:e], n_id).to(count_dtype).T  # (n_id, c)
            for t in range(taus.numel()):
                if bool(valid_t[t]):
                    acc = ((scores > taus[t]) & imp).to(count_dtype)
                    exceed[t] += (oh_q @ (acc @ onehot_g[cols])).double()
    n_imp = pairs.n_impostor_pairs
    top = top[: min(top_k, n_imp)].double()
    totals = torch.outer(torch.bincount(ql, minlength=n_id).double(), torch.bincount(gl, minlength=n_id).double())
    totals.fill_diagonal_(0)
    if sym:
        totals = totals / 2  # unordered pairs, split evenly over (a, b) and (b, a)
    return ImpostorScan(n_impostor_pairs=n_imp, top_scores=top,
                        genuine_scores=torch.cat(gen_s) if gen_s else torch.empty(0, dtype=torch.float64, device=dev),
                        genuine_labels=torch.cat(gen_l) if gen_l else torch.empty(0, dtype=torch.int64, device=dev),
                        exceed=None if taus is None else exceed, pair_totals=totals)


def _needed_top_k(fars: Sequence[float], n_imp: int, min_false_accepts: int) -> int:
    floor = smallest_resolvable_far(n_imp, min_false_accepts=min_false_accepts)
    ks = [_allowed_false_accepts(f, n_imp) for f in fars if f >= floor * (1 - 1e-12)]
    return max(ks) + 1 if ks else 0


def pair_threshold(pairs: VerificationPairs, embeddings: torch.Tensor, *, far: float,
                   min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS, chunk_size: int | None = None,
                   argument: str = "embeddings") -> tuple[float, ImpostorScan]:
    """The cosine threshold at ``far`` from all impostor pairs of ``pairs`` (top-k scan, no full sort).

    Returns:
        ``(threshold, scan)``; the scan also holds the genuine scores.

    Raises:
        InsufficientDataError: too few impostor pairs to resolve ``far`` (the message names ``argument`` and how
            many pairs ``far`` needs: ``min_false_accepts / far``).
    """
    far = check_probability("far", far)
    n_imp = pairs.n_impostor_pairs
    floor = smallest_resolvable_far(n_imp, min_false_accepts=min_false_accepts)
    if far < floor * (1 - 1e-12):
        raise InsufficientDataError(
            f"{argument}: {n_imp} impostor pairs resolve FARs down to {floor:.3g} only; FAR {far:g} needs at least "
            f"{math.ceil(min_false_accepts / far)} pairs (min_false_accepts={min_false_accepts})")
    scan = scan_pairs(pairs, embeddings, top_k=_needed_top_k([far], n_imp, min_false_accepts), chunk_size=chunk_size)
    return float(thresholds_at_far(scan.top_scores.cpu(), n_imp, [far], min_false_accepts=min_false_accepts)[0]), scan


def validation_tar(pairs: VerificationPairs, embeddings: torch.Tensor, *, far: float = 1e-4,
                   min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS, chunk_size: int | None = None) -> float:
    """TAR at ``far`` with the threshold set on the same (validation) impostor pairs: the model-selection score.

    Raises:
        InsufficientDataError: ``far`` is below the smallest FAR the planned pairs resolve.
    """
    tau, scan = pair_threshold(pairs, embeddings, far=far, min_false_accepts=min_false_accepts,
                               chunk_size=chunk_size, argument="validation pairs")
    return float((scan.genuine_scores > tau).double().mean())


def _bootstrap(scan: ImpostorScan, taus: torch.Tensor, *, n_identities: int, n_boot: int, ci: float,
               generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Percentile intervals of TAR and FAR over identity resamples: two (T, 2) tensors."""
    dev = scan.genuine_scores.device
    T = taus.numel()
    tar_ci = torch.full((T, 2), math.nan, dtype=torch.float64)
    far_ci = torch.full((T, 2), math.nan, dtype=torch.float64)
    if n_boot == 0:
        return tar_ci, far_ci
    draws = torch.randint(n_identities, (n_boot, n_identities), generator=generator)
    w = torch.zeros(n_boot, n_identities, dtype=torch.float64).scatter_add_(
        1, draws, torch.ones(n_boot, n_identities, dtype=torch.float64)).to(dev)
    den_g = w @ torch.bincount(scan.genuine_labels, minlength=n_identities).double()
    den_i = ((w @ scan.pair_totals) * w).sum(1)
    levels = torch.tensor([(1 - ci) / 2, (1 + ci) / 2], dtype=torch.float64)
    for t in range(T):
        tau = float(taus[t])
        if math.isnan(tau):
            continue
        acc = (scan.genuine_scores > tau).double()
        g_acc = torch.zeros(n_identities, dtype=torch.float64, device=dev).index_add_(0, scan.genuine_labels, acc)
        tar_b = (w @ g_acc) / den_g
        far_b = ((w @ scan.exceed[t]) * w).sum(1) / den_i
        for out, b, ok in ((tar_ci, tar_b, den_g > 0), (far_ci, far_b, den_i > 0)):
            if bool(ok.any()):
                out[t] = torch.quantile(b[ok].cpu(), levels)
    return tar_ci, far_ci


def pairwise_tar_at_far(embeddings: torch.Tensor, identities: torch.Tensor, *,
                        fars: float | Sequence[float] = DEFAULT_FARS,
                        calibration: tuple[torch.Tensor, torch.Tensor] | None = None, enrol_shots: int = 1,
                        min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS, n_boot: int = 0, ci: float = 0.95,
                        seed: int = 0, chunk_size: int | None = None) -> pd.DataFrame:
    """TAR at FAR over all pairs of a labelled set of unit-norm embeddings.

    Args:
        embeddings: (N, d) unit-norm embeddings (already probe-mapped if a probe is used).
        identities: (N,) integer identity labels.
        fars: target FAR(s).
        calibration: optional (embeddings, identities) of *other* identities on which the thresholds are set (the
            validation split). Without it the thresholds are set on ``embeddings`` itself (in-sample).
        enrol_shots: images per template (1: all image pairs).
        min_false_accepts: resolution rule. A FAR is resolvable only if both the calibration and the evaluated
            impostor pairs resolve it.
        n_boot: identity-bootstrap resamples for the confidence intervals (0: none).
        ci: confidence level of the percentile intervals.
        seed: seeds template draws and the bootstrap.
        chunk_size: rows per scoring chunk (default: about 4 M scores per chunk).

    Returns:
        DataFrame, one row per FAR: far, threshold, tar, tar_low, tar_high, realised_far, realised_far_low,
        realised_far_high, resolvable, smallest_resolvable_far, n_genuine, n_impostor, n_impostor_calibration,
        n_identities.
    """
    fars = _check_fars(fars)
    check_tensor("embeddings", embeddings, ndim=2, floating=True)
    check_unit_norm("embeddings", embeddings)
    if identities.ndim != 1 or identities.shape[0] != embeddings.shape[0]:
        raise ShapeError(f"identities must have shape ({embeddings.shape[0]},), got {tuple(identities.shape)}")
    n_boot = check_int("n_boot", n_boot, minimum=0)
    ci = check_probability("ci", ci)
    gen = torch.Generator().manual_seed(int(seed))
    pairs = VerificationPairs.create(identities, enrol_shots=enrol_shots, generator=gen)
    if calibration is not None:
        cal_emb, cal_id = calibration
        check_tensor("calibration embeddings", cal_emb, ndim=2, floating=True)
        check_unit_norm("calibration embeddings", cal_emb)
        if cal_emb.shape[1] != embeddings.shape[1]:
            raise ShapeError(f"calibration embeddings must have {embeddings.shape[1]} columns, got {cal_emb.shape[1]}")
        cal_pairs = VerificationPairs.create(cal_id, enrol_shots=enrol_shots, generator=gen,
                                             name="calibration identities")
    else:
        cal_emb, cal_pairs = embeddings, pairs
    return _evaluate_with_calibration(pairs, embeddings, cal_pairs, cal_emb.to(embeddings.device), fars=fars,
                                      min_false_accepts=min_false_accepts, n_boot=n_boot, ci=ci, generator=gen,
                                      chunk_size=chunk_size)


def _evaluate_with_calibration(pairs: VerificationPairs, embeddings: torch.Tensor, cal_pairs: VerificationPairs,
                               cal_embeddings: torch.Tensor, *, fars: tuple[float, ...], min_false_accepts: int,
                               n_boot: int, ci: float, generator: torch.Generator,
                               chunk_size: int | None) -> pd.DataFrame:
    n_cal, n_imp = cal_pairs.n_impostor_pairs, pairs.n_impostor_pairs
    cal_scan = scan_pairs(cal_pairs, cal_embeddings, top_k=_needed_top_k(fars, n_cal, min_false_accepts),
                          chunk_size=chunk_size)
    taus = thresholds_at_far(cal_scan.top_scores.cpu(), n_cal, fars, min_false_accepts=min_false_accepts)
    floor = max(smallest_resolvable_far(n, min_false_accepts=min_false_accepts) for n in (n_cal, n_imp))
    taus = torch.where(torch.tensor([f >= floor * (1 - 1e-12) for f in fars]), taus, torch.full_like(taus, math.nan))
    scan = scan_pairs(pairs, embeddings, thresholds=taus, chunk_size=chunk_size)
    tar_ci, far_ci = _bootstrap(scan, taus, n_identities=pairs.n_identities, n_boot=n_boot, ci=ci, generator=generator)
    rows = []
    for i, far in enumerate(fars):
        tau = float(taus[i])
        ok = not math.isnan(tau)
        rows.append({"far": far, "threshold": tau,
                     "tar": float((scan.genuine_scores > tau).double().mean()) if ok else math.nan,
                     "tar_low": float(tar_ci[i, 0]), "tar_high": float(tar_ci[i, 1]),
                     "realised_far": float(scan.exceed[i].sum()) / n_imp if ok else math.nan,
                     "realised_far_low": float(far_ci[i, 0]), "realised_far_high": float(far_ci[i, 1]),
                     "resolvable": ok, "smallest_resolvable_far": floor, "n_genuine": int(scan.genuine_scores.numel()),
                     "n_impostor": n_imp, "n_impostor_calibration": n_cal, "n_identities": pairs.n_identities})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------------------
# The open-set protocol
# ---------------------------------------------------------------------------------------------------------------------
