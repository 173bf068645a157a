"""The open-set few-shot verification protocol of the ISP paper (docs/isp.md §3): fit an attacker's probe on the
probe-fit identities, select it and fix the thresholds on the validation identities, score the test identities once.

The pairs, the chunked impostor scan and the thresholds are :mod:`privkit.isp.verification`; the probes are
:mod:`privkit.isp.probes`; this module puts them together (it imports both, so neither imports the other).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd
import torch

from .._validate import check_choice, check_int, check_probability, check_tensor, check_unit_norm
from ..device import resolve_device
from ..errors import InvalidArgumentError, ShapeError
from ..metrics import DEFAULT_FARS, DEFAULT_MIN_FALSE_ACCEPTS, _check_fars, smallest_resolvable_far
from . import probes as _probes
from .verification import VerificationPairs, _evaluate_with_calibration, _shuffled_groups

__all__ = ["EmbeddingSplits", "VerificationProtocol", "VerificationResult", "evaluate_verification", "subsample_shots"]


@dataclass(eq=False)
class VerificationResult:
    """Result of :func:`evaluate_verification`.

    Attributes:
        table: tidy DataFrame, one row per FAR (columns of :func:`pairwise_tar_at_far` plus probe, k, k_mode,
            probe_shots, enrol_shots).
        probe: the fitted probe (a callable mapping unit embeddings to unit embeddings).
        selection: DataFrame of the validation model-selection curve (ridge: one row per λ; MLP: one row per
            epoch; raw: empty).
        settings: the protocol's settings, including the FAR actually used for selection.
    """

    table: pd.DataFrame
    probe: Any
    selection: pd.DataFrame
    settings: dict = field(default_factory=dict)

    def tar(self, far: float) -> float:
        """The test TAR at ``far`` (NaN if unresolvable)."""
        row = self.table[(self.table["far"] - far).abs() <= 1e-12 * far]
        if row.empty:
            raise InvalidArgumentError(f"far={far:g} was not evaluated; evaluated: {list(self.table['far'])}")
        return float(row["tar"].iloc[0])


def _check_split(name: str, emb: torch.Tensor, ids: torch.Tensor, d: int | None) -> None:
    check_tensor(f"{name}_emb", emb, ndim=2, floating=True)
    check_unit_norm(f"{name}_emb", emb)
    check_tensor(f"{name}_id", ids, ndim=1)
    if ids.is_floating_point():
        raise InvalidArgumentError(f"{name}_id must be an integer tensor, got dtype {ids.dtype}")
    if ids.shape[0] != emb.shape[0]:
        raise ShapeError(f"{name}_id must have shape ({emb.shape[0]},) to match {name}_emb, got {tuple(ids.shape)}")
    if d is not None and emb.shape[1] != d:
        raise ShapeError(f"{name}_emb must have {d} columns like train_emb, got {emb.shape[1]}")


def subsample_shots(identities: torch.Tensor, k: int, *, generator: torch.Generator | None = None,
                    name: str = "train_id") -> torch.Tensor:
    """Indices of ``k`` random images per identity (sorted). Raises if any identity has fewer than ``k``."""
    k = check_int("k", k, minimum=1)
    uniq, labels = torch.unique(identities.cpu(), return_inverse=True)
    counts = torch.bincount(labels, minlength=uniq.numel())
    groups = _shuffled_groups(name, labels, counts, k, f"k={k} shots per identity requested but", generator)
    return torch.sort(torch.cat([g[:k] for g in groups])).values


@dataclass(frozen=True, eq=False)
class EmbeddingSplits:
    """The three identity-disjoint splits of an open-set protocol: unit-norm embeddings (N, d) and identities (N,).

    ``train`` fits the attacker's probe (the probe-fit identities), ``val`` selects its hyperparameters and fixes the
    thresholds, ``test`` is scored once. :func:`evaluate_verification` checks shapes, unit norm and disjointness.
    """

    train_emb: torch.Tensor
    train_id: torch.Tensor
    val_emb: torch.Tensor
    val_id: torch.Tensor
    test_emb: torch.Tensor
    test_id: torch.Tensor

    def map(self, fn: Any) -> "EmbeddingSplits":
        """The same splits with ``fn`` applied to every embedding matrix (e.g. a sanitiser)."""
        return EmbeddingSplits(fn(self.train_emb), self.train_id, fn(self.val_emb), self.val_id, fn(self.test_emb),
                               self.test_id)


@dataclass(frozen=True)
class VerificationProtocol:
    """How :func:`evaluate_verification` reads k, which FARs it reports and how it bootstraps.

    Attributes:
        k: shots, read according to ``k_mode``.
        k_mode: ``"probe-shots"`` (k labelled images per probe-fit identity train the probe; templates use
            ``enrol_shots`` images) or ``"enrol-shots"`` (k images per validation/test identity form each template;
            the probe trains on ``probe_shots`` images per probe-fit identity, None: all).
        probe_shots: probe-fit shots when ``k_mode="enrol-shots"``.
        enrol_shots: template shots when ``k_mode="probe-shots"``.
        fars: FARs to report.
        select_far: FAR of the model-selection criterion (raised to the smallest FAR the validation pairs resolve if
            it is below it; the value used is in ``settings``).
        min_false_accepts: the resolution rule (:func:`privkit.metrics.smallest_resolvable_far`).
        n_boot: identity-bootstrap resamples of the test identities (0: no intervals).
        ci: interval level.
    """

    k: int = 16
    k_mode: Literal["probe-shots", "enrol-shots"] = "probe-shots"
    probe_shots: int | None = None
    enrol_shots: int = 1
    fars: float | Sequence[float] = DEFAULT_FARS
    select_far: float = 1e-4
    min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS
    n_boot: int = 200
    ci: float = 0.95

    def __post_init__(self) -> None:
        check_int("k", self.k, minimum=1)
        check_choice("k_mode", self.k_mode, ("probe-shots", "enrol-shots"))
        object.__setattr__(self, "fars", _check_fars(self.fars))
        check_probability("select_far", self.select_far)
        check_int("min_false_accepts", self.min_false_accepts, minimum=1)
        check_int("enrol_shots", self.enrol_shots, minimum=1)
        if self.probe_shots is not None:
            check_int("probe_shots", self.probe_shots, minimum=1)
        check_int("n_boot", self.n_boot, minimum=0)
        check_probability("ci", self.ci)


def evaluate_verification(splits: EmbeddingSplits, *, probe: Literal["raw", "ridge", "mlp"] = "raw",
                          protocol: VerificationProtocol | None = None, ridge_lambdas: Sequence[float] | None = None,
                          mlp_options: Any = None, seed: int = 0, chunk_size: int | None = None,
                          device: str | torch.device | None = None) -> VerificationResult:
    """Open-set few-shot verification of an attacker's probe (docs/isp.md §3).

    1. The probe is fitted on the probe-fit identities (``train_*``): ``"raw"`` (cosine, no probe), ``"ridge"``
       (λ chosen on validation TAR from a log grid) or ``"mlp"`` (early-stopped on validation TAR).
    2. Hyperparameters and the thresholds τ(α) are fixed on the validation identities (``val_*``), from all their
       impostor pairs, before the test identities are touched.
    3. The test identities (``test_*``) give the TAR, the realised test FAR and identity-bootstrap intervals.

    The two readings of k (privkit exposes both; the paper's is not known):

    * ``k_mode="probe-shots"`` — k labelled images per probe-fit identity train the probe; templates use
      ``enrol_shots`` images (default 1: single-image templates, all image pairs);
    * ``k_mode="enrol-shots"`` — k images per validation/test identity form each template; the probe is trained on
      ``probe_shots`` images per probe-fit identity (default: all).

    Args:
        splits: the probe-fit, validation and test splits (:class:`EmbeddingSplits`).
        probe: ``"raw"``, ``"ridge"`` or ``"mlp"``.
        protocol: k, its reading, FARs, selection FAR and bootstrap (:class:`VerificationProtocol`; default k = 16).
        ridge_lambdas: λ grid for the ridge probe (default 13 values, 1e-3 … 1e3).
        mlp_options: :class:`privkit.isp.probes.MLPOptions` for the MLP probe.
        seed: seeds shot subsampling, template draws, the MLP and the bootstrap.
        chunk_size: rows per scoring chunk.
        device: where to compute (default: the device of ``splits.train_emb``).

    Returns:
        A :class:`VerificationResult`.
    """
    probe = check_choice("probe", probe, ("raw", "ridge", "mlp"))
    if not isinstance(splits, EmbeddingSplits):
        raise InvalidArgumentError(f"splits must be an EmbeddingSplits, got {type(splits).__name__}")
    protocol = VerificationProtocol() if protocol is None else protocol
    if not isinstance(protocol, VerificationProtocol):
        raise InvalidArgumentError(f"protocol must be a VerificationProtocol, got {type(protocol).__name__}")
    k, k_mode, fars, select_far = protocol.k, protocol.k_mode, protocol.fars, protocol.select_far
    min_false_accepts = protocol.min_false_accepts
    train_emb, train_id, val_emb, val_id = splits.train_emb, splits.train_id, splits.val_emb, splits.val_id
    test_emb, test_id = splits.test_emb, splits.test_id
    _check_split("train", train_emb, train_id, None)
    d = train_emb.shape[1]
    _check_split("val", val_emb, val_id, d)
    _check_split("test", test_emb, test_id, d)
    for (na, a), (nb, b) in combinations((("train", train_id), ("val", val_id), ("test", test_id)), 2):
        shared = torch.isin(torch.unique(a.cpu()), torch.unique(b.cpu()))
        if bool(shared.any()):
            raise InvalidArgumentError(f"{na}_id and {nb}_id share {int(shared.sum())} identities; the protocol is "
                                       "open-set and needs disjoint identity splits")
    dev = resolve_device(device) if device is not None else train_emb.device
    train_emb, val_emb, test_emb = train_emb.to(dev), val_emb.to(dev), test_emb.to(dev)
    p_shots, e_shots = (k, protocol.enrol_shots) if k_mode == "probe-shots" else (protocol.probe_shots, k)

    seeds = [int(x) for x in torch.randint(0, 2**62, (4,), generator=torch.Generator().manual_seed(int(seed)))]
    g_shots, g_pairs, g_boot = (torch.Generator().manual_seed(seeds[i]) for i in (0, 1, 3))
    seed_probe = seeds[2]

    if probe == "raw":  # nothing is fitted: the probe-fit identities are not used
        p_shots = 0
    if p_shots:
        keep = subsample_shots(train_id, p_shots, generator=g_shots).to(dev)
        fit_emb, fit_id = train_emb[keep], train_id.to(dev)[keep]
    else:
        fit_emb, fit_id = train_emb, train_id.to(dev)
    val_pairs = VerificationPairs.create(val_id, enrol_shots=e_shots, generator=g_pairs, name="val_id")
    test_pairs = VerificationPairs.create(test_id, enrol_shots=e_shots, generator=g_pairs, name="test_id")
    sel_far = max(select_far, smallest_resolvable_far(val_pairs.n_impostor_pairs, min_false_accepts=min_false_accepts))

    if probe == "raw":
        fitted, selection = _probes.RawProbe(), pd.DataFrame()
    elif probe == "ridge":
        fitted, selection = _probes.select_ridge_probe(fit_emb, fit_id, val_emb, val_pairs, lambdas=ridge_lambdas,
                                                       far=sel_far, min_false_accepts=min_false_accepts,
                                                       chunk_size=chunk_size)
    else:
        fitted, selection = _probes.fit_mlp_probe(fit_emb, fit_id, val_emb, val_pairs, options=mlp_options, far=sel_far,
                                                  min_false_accepts=min_false_accepts, seed=seed_probe,
                                                  chunk_size=chunk_size)
    with torch.no_grad():
        val_m, test_m = fitted(val_emb), fitted(test_emb)
    table = _evaluate_with_calibration(test_pairs, test_m, val_pairs, val_m, fars=fars,
                                       min_false_accepts=min_false_accepts, n_boot=protocol.n_boot, ci=protocol.ci,
                                       generator=g_boot, chunk_size=chunk_size)
    n_fit_per_id = torch.bincount(torch.unique(fit_id.cpu(), return_inverse=True)[1])
    table.insert(0, "probe", probe)
    table.insert(1, "k", k)
    table.insert(2, "k_mode", k_mode)
    table.insert(3, "probe_shots", int(n_fit_per_id.min()) if p_shots is None else p_shots)  # 0: raw, no probe
    table.insert(4, "enrol_shots", e_shots)
    settings = {"probe": probe, "k": k, "k_mode": k_mode, "probe_shots": p_shots, "enrol_shots": e_shots,
                "select_far_requested": select_far, "select_far_used": sel_far, "min_false_accepts": min_false_accepts,
                "n_boot": protocol.n_boot, "ci": protocol.ci, "seed": seed,
                "n_probe_fit_identities": int(n_fit_per_id.numel()), "n_val_identities": val_pairs.n_identities,
                "n_test_identities": test_pairs.n_identities, "device": str(dev)}
    return VerificationResult(table=table, probe=fitted, selection=selection, settings=settings)
