"""The experiments of the ISP notebook (``notebooks/isp.py``), as tested library functions.

Each function runs one study of paper 1 (docs/isp.md) on embeddings or images the caller provides and returns a
tidy ``pandas.DataFrame`` that the notebook tabulates and plots. Where the paper is silent, the docstring says what
privkit does and marks it [I].

* :func:`embed_faces` — cached embeddings of a face set, whole image or face box.
* :func:`fit_eraser` / :func:`truncate_eraser` — ISP, LEACE and INLP fitted once and cut to any rank.
* :func:`verification_table` — the open-set protocol for several probes × sanitising transforms × k.
* :func:`paired_tar_difference` / :func:`paired_comparison` — identity-bootstrap interval of a TAR difference on
  the same test identities (from raw scores, or from two cells of :func:`verification_table`).
* :func:`utility_table` — kNN retention on non-identity attributes and copy-detection retention.
* :func:`subspace_angles` — principal-angle cosines between fitted identity subspaces.
* :func:`attribution_tables` — FII by FCR, CPI(σ), B* for one encoder.
* :class:`ProjectedEncoder`, :func:`reference_threshold_from_embeddings`, :func:`inversion_study` — template
  inversion to aligned face crops before and after a projection, judged by a reference face encoder (verification
  at its FAR threshold, rank-1 identification among the targets, margin over mismatched reconstructions).
* :func:`rises_with_rank` — the monotonicity check of TAR against rank, with interval slack.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import combinations
from typing import Any, Literal

import pandas as pd
import torch

from privkit._validate import check_choice, check_int, check_probability, check_tensor, check_unit_norm
from privkit.data.cache import DEFAULT_CACHE_DIR, cached_embeddings
from privkit.data.types import FaceSet
from privkit.errors import InsufficientDataError, InvalidArgumentError, ShapeError, UnknownNameError
from privkit.isp.attribution import (background_dominance, context_preference_curve, face_importance_index,
                                     summarise_by_fcr)
from privkit.isp.inversion import (face_crops, optimisation_attack, paste_crops, ridge_predict,
                                   train_regression_inverter, train_ridge_inverter, wilson_interval)
from privkit.isp.projection import IdentityProjector, IdentitySanitizer, INLPFitter, LeaceEraser, LeaceFitter, principal_angles
from privkit.metrics import DEFAULT_MIN_FALSE_ACCEPTS
from privkit.isp.utility import copy_detection_metrics, knn_accuracy, linear_probe_accuracy
from privkit.isp.probes import MLPOptions
from privkit.isp.protocol import EmbeddingSplits, VerificationProtocol, evaluate_verification
from privkit.isp.verification import VerificationPairs, pair_threshold, scan_pairs

__all__ = [
    "INPUT_MODES", "ERASERS", "PAPER_RIDGE_TAR", "PAPER_UTILITY", "embed_faces", "state_fingerprint", "fit_eraser",
    "truncate_eraser", "verification_table", "paired_tar_difference", "paired_comparison", "utility_table",
    "subspace_angles", "attribution_tables", "ProjectedEncoder", "reference_threshold_from_embeddings", "INVERSION_ATTACKS",
    "inversion_study", "AttackedEncoder", "InversionTargets", "InversionSettings", "rises_with_rank",
]

#: How an encoder sees a face image: the whole image (face and context) or only the face box.
INPUT_MODES: tuple[str, ...] = ("image", "box")
#: Linear erasure methods :func:`fit_eraser` knows.
ERASERS: tuple[str, ...] = ("isp", "leace", "inlp")

#: The paper's ridge-probe TAR (%) at FAR = 1e-4 on CelebA-20 (docs/isp.md §7, from a secondary source):
#: encoder -> {column: value}; columns "k1_raw", "k1_ispw", "k16_raw", "k16_ispw", "k16_ispx" (None: not given).
PAPER_RIDGE_TAR: dict[str, dict[str, float | None]] = {
    "DINOv2": {"k1_raw": 4.5, "k1_ispw": 3.5, "k16_raw": 5.7, "k16_ispw": 4.4, "k16_ispx": 4.2},
    "DINOv3": {"k1_raw": 4.5, "k1_ispw": 2.1, "k16_raw": 6.8, "k16_ispw": 2.8, "k16_ispx": 2.5},
    "CLIP": {"k1_raw": 16.4, "k1_ispw": 11.9, "k16_raw": 19.8, "k16_ispw": 13.0, "k16_ispx": 10.2},
    "SSCD": {"k1_raw": 6.6, "k1_ispw": 3.6, "k16_raw": 9.8, "k16_ispw": 4.4, "k16_ispx": 4.5},
    "ArcFace (FR)": {"k1_raw": 93.7, "k1_ispw": None, "k16_raw": 94.0, "k16_ispw": None, "k16_ispx": None},
}

#: The paper's ImageNet utility after projection, % of raw (docs/isp.md §7): encoder -> {column: value}; columns
#: "knn_isp", "knn_leace", "linear_isp", "linear_leace".
PAPER_UTILITY: dict[str, dict[str, float]] = {
    "DINOv2": {"knn_isp": 100.1, "knn_leace": 100.0, "linear_isp": 99.2, "linear_leace": 99.3},
    "DINOv3": {"knn_isp": 97.3, "knn_leace": 97.4, "linear_isp": 93.5, "linear_leace": 93.4},
    "CLIP": {"knn_isp": 98.3, "knn_leace": 98.5, "linear_isp": 100.7, "linear_leace": 105.6},
    "SSCD": {"knn_isp": 85.4, "knn_leace": 85.7, "linear_isp": 83.3, "linear_leace": 82.6},
}

Transform = Callable[[torch.Tensor], torch.Tensor]
Split = tuple[torch.Tensor, torch.Tensor]


# ---------------------------------------------------------------------------------------------------------------------
# Embeddings
# ---------------------------------------------------------------------------------------------------------------------
def embed_faces(encoder: torch.nn.Module, faces: FaceSet, *, input: Literal["image", "box"] = "image", seed: int = 0,
                cache: bool = True, cache_dir: str = DEFAULT_CACHE_DIR, batch_size: int = 64) -> torch.Tensor:
    """Unit-norm embeddings of every image of ``faces``, cached on disk (biometric templates: owner-only files).

    Args:
        encoder: a privkit :class:`~privkit.encoders.base.Encoder`.
        faces: the face set (its ``name`` and ``meta`` enter the cache key).
        input: ``"image"`` embeds the whole image (face and context, as the paper's general encoders see it);
            ``"box"`` passes the exact face boxes (face-crop encoders: the biometric reference, age-gender).
        seed: the seed the face set was generated with (part of the cache key).
        cache: read/write the cache in ``cache_dir`` (False: always compute).
        cache_dir: cache folder (default ``build/cache``).
        batch_size: images per forward pass.

    Returns:
        (N, D) float32 CPU tensor of unit rows.
    """
    input = check_choice("input", input, INPUT_MODES)
    batch_size = check_int("batch_size", batch_size, minimum=1)

    def compute() -> torch.Tensor:
        boxes = faces.box if input == "box" else None
        return encoder.embed(faces.images, boxes=boxes, batch_size=batch_size).float().cpu()

    if not cache:
        return compute()
    meta = faces.meta
    extra = {"purpose": "isp", "weights_sha256": state_fingerprint(encoder), "input": input, "n": len(faces),
             "n_identities": faces.n_identities, "images_per_identity": meta.get("images_per_identity"),
             "size": int(faces.images.shape[-1]), "context_leakage": meta.get("context_leakage"),
             "nuisance_strength": meta.get("nuisance_strength")}
    return cached_embeddings(compute, encoder=encoder.name, dataset=faces.name or "faces",
                             split=str(meta.get("split", "all")), seed=int(seed), extra=extra, cache_dir=cache_dir,
                             inputs=(faces.images, faces.box))


def state_fingerprint(module: torch.nn.Module) -> str:
    """sha256 of a module's parameters and buffers (so retrained weights never hit a stale cache entry)."""
    import hashlib

    h = hashlib.sha256()
    for key, value in sorted(module.state_dict().items()):
        h.update(key.encode("utf-8"))
        h.update(value.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------------------------
# Erasers
# ---------------------------------------------------------------------------------------------------------------------
def fit_eraser(method: Literal["isp", "leace", "inlp"], embeddings: torch.Tensor, identities: torch.Tensor, *,
               rank: int | None) -> IdentityProjector | LeaceEraser:
    """Fit ISP, LEACE (rank-truncated) or INLP (one direction per iteration) removing ``rank`` directions.

    Fit once at the largest rank needed and cut with :func:`truncate_eraser`: all three are nested in the rank (ISP
    and LEACE keep the top singular directions; INLP's first t iterations do not depend on later ones).

    Args:
        method: ``"isp"``, ``"leace"`` or ``"inlp"``.
        embeddings: (N, d) unit-norm fitting embeddings.
        identities: (N,) integer identity labels.
        rank: directions to remove, 1 ≤ rank ≤ min(d, m − 1); ISP only: None removes the full numerical rank of
            the centred class-mean matrix (every direction it has, which can be fewer than min(d, m − 1) when the
            encoder's embeddings span fewer dimensions).
    """
    method = check_choice("method", method, ERASERS)
    if rank is None:
        if method != "isp":
            raise InvalidArgumentError(f"rank=None (the full numerical rank) is offered for ISP only, not {method!r}")
        return IdentitySanitizer(rank=None, rank_rule="full").update(embeddings, identities).projector
    rank = check_int("rank", rank, minimum=1)
    if method == "isp":
        return IdentitySanitizer(rank=rank).update(embeddings, identities).projector
    if method == "leace":
        return LeaceFitter(rank=rank).update(embeddings, identities).eraser
    return INLPFitter(n_iterations=rank, directions_per_iteration=1).update(embeddings, identities).projector


def truncate_eraser(eraser: IdentityProjector | LeaceEraser, rank: int) -> IdentityProjector | LeaceEraser:
    """The same eraser keeping only its first ``rank`` removed directions (1 ≤ rank ≤ eraser.rank)."""
    rank = check_int("rank", rank, minimum=1, maximum=eraser.rank)
    if isinstance(eraser, LeaceEraser):
        info = {**eraser.info, "rank": rank}
        return LeaceEraser(eraser.mean, eraser.right[:, :rank].contiguous(), eraser.left[:rank].contiguous(),
                           renormalize=eraser.renormalize, info=info)
    if isinstance(eraser, IdentityProjector):
        return IdentityProjector(eraser.basis[:, :rank].contiguous(), renormalize=eraser.renormalize,
                                 method=eraser.method, spectrum=eraser.spectrum, info=dict(eraser.info))
    raise InvalidArgumentError(f"eraser must be an IdentityProjector or LeaceEraser, got {type(eraser).__name__}")


# ---------------------------------------------------------------------------------------------------------------------
# Verification
# ---------------------------------------------------------------------------------------------------------------------
def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def verification_table(splits: Mapping[str, Split], transforms: Mapping[str, Transform | None], *,
                       probes: Sequence[str] = ("raw", "ridge"), ks: Sequence[int] = (16,),
                       fars: Sequence[float] = (1e-2, 1e-3, 1e-4), n_boot: int = 200, seed: int = 0,
                       mlp_options: MLPOptions | None = None, ridge_lambdas: Sequence[float] | None = None,
                       keep_results: bool = False) -> tuple[pd.DataFrame, dict]:
    """The open-set protocol (:func:`evaluate_verification`) for every transform × probe × k.

    Each transform (e.g. ``{"raw": None, "ISP-W": projector}``) is applied to the probe-fit, validation and test
    embeddings alike (the attacker sees only sanitised embeddings), then each probe is fitted, selected and
    thresholded as the protocol says. ``k`` is read as probe-fit shots (``k_mode="probe-shots"``, single-image
    templates); the raw cosine probe fits nothing, so it is evaluated once per transform (k reported as 0).

    Args:
        splits: ``{"train": (emb, ids), "val": (emb, ids), "test": (emb, ids)}`` with disjoint identities.
        transforms: name -> callable on (N, d) embeddings (None: identity).
        probes: subset of ``("raw", "ridge", "mlp")``.
        ks: probe-fit shots per identity.
        fars: FARs to report (those the data cannot resolve get NaN TAR).
        n_boot: identity-bootstrap resamples for the intervals.
        seed: protocol seed (the same for every cell, so the bootstrap draws are paired across cells).
        mlp_options: the MLP probe's training set-up (:class:`~privkit.isp.probes.MLPOptions`).
        ridge_lambdas: λ grid of the ridge probe (None: the library default, 13 values from 1e-3 to 1e3).
        keep_results: also return every :class:`VerificationResult` (keyed by (transform, probe, k)).

    Returns:
        (tidy DataFrame with columns transform, probe, k, far, tar, tar_low, tar_high, realised_far, resolvable,
        smallest_resolvable_far, n_genuine, n_impostor, threshold, selected; results dict, empty unless kept).
    """
    for key in ("train", "val", "test"):
        if key not in splits:
            raise InvalidArgumentError(f"splits must hold 'train', 'val' and 'test', missing {key!r}")
    for p in probes:
        check_choice("probes", p, ("raw", "ridge", "mlp"))
    ks = [check_int("ks", k, minimum=1) for k in ks]
    if not ks or not probes or not transforms:
        raise InvalidArgumentError("probes, ks and transforms must be non-empty")
    frames, results = [], {}
    for tname, fn in transforms.items():
        fn = _identity if fn is None else fn
        with torch.no_grad():
            mapped = {key: (fn(splits[key][0]), splits[key][1]) for key in ("train", "val", "test")}
        for probe in probes:
            for k in ([ks[0]] if probe == "raw" else ks):
                res = evaluate_verification(
                    EmbeddingSplits(*mapped["train"], *mapped["val"], *mapped["test"]), probe=probe,
                    protocol=VerificationProtocol(k=k, fars=fars, n_boot=n_boot), seed=seed,
                    mlp_options=mlp_options if probe == "mlp" else None, ridge_lambdas=ridge_lambdas)
                t = res.table.copy()
                t["k"] = 0 if probe == "raw" else k
                t.insert(0, "transform", tname)
                t["selected"] = ""
                if probe == "ridge":
                    t["selected"] = f"lambda={res.probe.lam:g}"
                elif probe == "mlp":
                    t["selected"] = f"epoch={int(res.selection.loc[res.selection.selected, 'epoch'].iloc[0])}"
                frames.append(t)
                if keep_results:
                    results[(tname, probe, int(t["k"].iloc[0]))] = (res, mapped["test"])
    table = pd.concat(frames, ignore_index=True)
    keep = ["transform", "probe", "k", "far", "tar", "tar_low", "tar_high", "realised_far", "resolvable",
            "smallest_resolvable_far", "n_genuine", "n_impostor", "threshold", "selected"]
    return table[keep], results


def paired_tar_difference(test_identities: torch.Tensor, mapped_a: torch.Tensor, threshold_a: float,
                          mapped_b: torch.Tensor, threshold_b: float, *, n_boot: int = 1000, ci: float = 0.95,
                          seed: int = 0) -> dict[str, float]:
    """TAR(a) − TAR(b) on the same test identities, with a paired identity-bootstrap percentile interval.

    Both sides score all genuine image pairs of the test identities (single-image templates) with their own fixed
    (validation) thresholds; each bootstrap resample draws test identities with replacement and weights both sides'
    genuine accepts by the same draw, so the interval describes the *difference* (much tighter than comparing two
    separate intervals when the two sides move together).

    Args:
        test_identities: (N,) labels of the test images.
        mapped_a, mapped_b: (N, d_a), (N, d_b) unit-norm probe-mapped test embeddings.
        threshold_a, threshold_b: the thresholds (accept when cos > threshold).
        n_boot: bootstrap resamples; ci: interval level; seed: seeds the resampling.

    Returns:
        {"tar_a", "tar_b", "difference", "low", "high"}.
    """
    n_boot = check_int("n_boot", n_boot, minimum=1)
    ci = check_probability("ci", ci)
    for name, m in (("mapped_a", mapped_a), ("mapped_b", mapped_b)):
        check_tensor(name, m, ndim=2, floating=True)
        if m.shape[0] != test_identities.shape[0]:
            raise ShapeError(f"{name} must have {test_identities.shape[0]} rows, got {m.shape[0]}")
    if math.isnan(threshold_a) or math.isnan(threshold_b):
        raise InvalidArgumentError("threshold_a and threshold_b must be finite (a resolvable FAR)")
    pairs = VerificationPairs.create(test_identities, enrol_shots=1, name="test_identities")
    n_id = pairs.n_identities
    per_id = []
    for m, tau in ((mapped_a, threshold_a), (mapped_b, threshold_b)):
        scan = scan_pairs(pairs, m.float())
        acc = (scan.genuine_scores > tau).double().cpu()
        labels = scan.genuine_labels.cpu()
        per_id.append(torch.zeros(n_id, dtype=torch.float64).index_add_(0, labels, acc))
        counts = torch.bincount(labels, minlength=n_id).double()
    gen = torch.Generator().manual_seed(int(seed))
    draws = torch.randint(n_id, (n_boot, n_id), generator=gen)
    w = torch.zeros(n_boot, n_id, dtype=torch.float64).scatter_add_(1, draws, torch.ones(n_boot, n_id, dtype=torch.float64))
    den = w @ counts
    ok = den > 0
    diff_b = ((w @ per_id[0]) - (w @ per_id[1]))[ok] / den[ok]
    lo, hi = torch.quantile(diff_b, torch.tensor([(1 - ci) / 2, (1 + ci) / 2], dtype=torch.float64)).tolist()
    tar_a, tar_b = float(per_id[0].sum() / counts.sum()), float(per_id[1].sum() / counts.sum())
    return {"tar_a": tar_a, "tar_b": tar_b, "difference": tar_a - tar_b, "low": lo, "high": hi}


def paired_comparison(results: Mapping[tuple[str, str, int], tuple[Any, Split]], a: tuple[str, str, int],
                      b: tuple[str, str, int], *, far: float, n_boot: int = 1000, ci: float = 0.95,
                      seed: int = 0) -> dict[str, float]:
    """:func:`paired_tar_difference` of two cells of :func:`verification_table` (``keep_results=True``).

    Args:
        results: the results dict, keyed by (transform, probe, k).
        a, b: the two cells, e.g. ``("raw", "ridge", 12)`` and ``("ISP-W", "ridge", 12)``.
        far: the FAR whose (validation) thresholds are used; must be resolvable for both cells.

    Returns:
        {"tar_a", "tar_b", "difference", "low", "high"} (difference = TAR(a) − TAR(b)).
    """
    out = []
    for key in (a, b):
        if key not in results:
            raise InvalidArgumentError(f"cell {key} is not in results (have {sorted(results)})")
        res, (test_emb, test_id) = results[key]
        row = res.table[(res.table["far"] - far).abs() <= 1e-12 * far]
        if row.empty or not bool(row["resolvable"].iloc[0]):
            raise InvalidArgumentError(f"far={far:g} is not a resolvable FAR of cell {key}")
        with torch.no_grad():
            mapped = res.probe(test_emb)
        out.append((test_id, mapped, float(row["threshold"].iloc[0])))
    if not torch.equal(out[0][0].cpu(), out[1][0].cpu()):
        raise InvalidArgumentError("the two cells were evaluated on different test identities")
    return paired_tar_difference(out[0][0], out[0][1], out[0][2], out[1][1], out[1][2], n_boot=n_boot, ci=ci, seed=seed)


def rises_with_rank(table: pd.DataFrame, *, rank_col: str = "rank") -> list[str]:
    """Where TAR rises with rank beyond the intervals: a list of messages (empty: it never does).

    privkit's reading of "TAR does not rise with rank, allowing CI slack": for every pair of ranks r < r', the
    interval at r' must not lie entirely above the interval at r (``tar_low(r') > tar_high(r)`` is a violation).
    Non-overlapping 95% intervals are a conservative test (about the 0.5% level), so a flat curve near chance does
    not raise false alarms, while a real rise (e.g. 10% → 20% with tight intervals) does. NaN rows (unresolvable
    FARs) are skipped.

    Args:
        table: rows of one curve, with columns ``rank_col``, tar, tar_low, tar_high.
    """
    for col in (rank_col, "tar", "tar_low", "tar_high"):
        if col not in table.columns:
            raise InvalidArgumentError(f"table must have a {col!r} column (has {list(table.columns)})")
    rows = table.dropna(subset=["tar"]).sort_values(rank_col).itertuples(index=False)
    return [f"TAR interval at rank {getattr(b, rank_col)} [{b.tar_low:.3f}, {b.tar_high:.3f}] lies above the one at "
            f"rank {getattr(a, rank_col)} [{a.tar_low:.3f}, {a.tar_high:.3f}]"
            for a, b in combinations(rows, 2) if b.tar_low > a.tar_high + 1e-12]


# ---------------------------------------------------------------------------------------------------------------------
# Utility
# ---------------------------------------------------------------------------------------------------------------------
def utility_table(transforms: Mapping[str, Transform], *,
                  knn: tuple[torch.Tensor, Mapping[str, torch.Tensor], torch.Tensor, Mapping[str, torch.Tensor]]
                  | None = None, copy: tuple[torch.Tensor, torch.Tensor] | None = None, k: int = 20,
                  min_gain_se: float = 3.0, linear: bool | Sequence[str] = False) -> pd.DataFrame:
    """What a transform keeps: kNN and linear-probe accuracy on non-identity attributes and copy detection, % of raw.

    kNN (paper §1.6, ImageNet kNN there): a labelled bank (e.g. images of the probe-fit and validation identities)
    classifies queries of *other* identities, so identity cannot stand in for the attribute. An attribute counts as
    **informative** only when the raw encoder beats the majority-class rate of the queries by more than
    ``min_gain_se`` binomial standard errors ([I]: retention of a near-chance accuracy is a ratio of two noise
    terms). Copy detection: augmented copies are the queries, their sources the database (Recall@1, mAP).

    Args:
        transforms: name -> callable on (N, d) embeddings.
        knn: (bank_emb, {attribute: bank_labels}, query_emb, {attribute: query_labels}) or None.
        copy: (reference_emb, copy_emb), copy i made from reference i, or None.
        k: neighbours.
        min_gain_se: informativeness margin in binomial standard errors.
        linear: also the paper's linear probe (:func:`~privkit.isp.utility.linear_probe_accuracy`, metrics
            ``linear:<attribute>``) on the ``knn`` data: True for every transform, or the names of the transforms to
            probe (a probe is a full L-BFGS fit, so a sweep may limit it to its main ranks).

    Returns:
        DataFrame with transform, metric, raw, transformed, retention_pct, chance, informative, n_queries.
    """
    if knn is None and copy is None:
        raise InvalidArgumentError("give knn=... and/or copy=...")
    if isinstance(linear, bool):
        linear_names = set(transforms) if linear else set()
    elif isinstance(linear, (str, bytes)) or not hasattr(linear, "__iter__"):
        raise InvalidArgumentError(f"linear must be a bool or a sequence of transform names, got {linear!r}")
    else:
        linear_names = set(linear)
        unknown = linear_names - set(transforms)
        if unknown:
            raise UnknownNameError("linear", sorted(unknown), transforms)
    if linear_names and knn is None:
        raise InvalidArgumentError("linear probes need the knn=... data (bank and queries with attribute labels)")
    rows = []

    def add(tname: str, metric: str, raw: float, acc: float, chance: float, informative: Any, n: int) -> None:
        rows.append({"transform": tname, "metric": metric, "raw": raw, "transformed": acc,
                     "retention_pct": 100 * acc / raw if raw > 0 else math.nan, "chance": chance,
                     "informative": bool(informative), "n_queries": n})

    if knn is not None:
        bank, bank_lab, query, query_lab = knn
        for attr, yb in bank_lab.items():
            yq = query_lab[attr]
            maj = float(torch.bincount(yq - yq.min()).max()) / yq.numel()
            se = math.sqrt(max(maj * (1 - maj), 1e-12) / yq.numel())
            probes = [("knn", partial(knn_accuracy, k=k), list(transforms))]
            # no linear probe without two classes in the bank (a constant attribute tells nothing)
            if linear_names and torch.unique(yb).numel() >= 2:
                probes.append(("linear", linear_probe_accuracy, [t for t in transforms if t in linear_names]))
            for family, accuracy, names in probes:
                raw = accuracy(bank, yb, query, yq)
                for tname in names:
                    with torch.no_grad():
                        acc = accuracy(transforms[tname](bank), yb, transforms[tname](query), yq)
                    add(tname, f"{family}:{attr}", raw, acc, maj, raw > maj + min_gain_se * se, int(yq.numel()))
    if copy is not None:
        ref, cop = copy
        if ref.shape != cop.shape:
            raise ShapeError(f"copy embeddings must match the references' shape {tuple(ref.shape)}, got {tuple(cop.shape)}")
        src = torch.arange(ref.shape[0])
        base = copy_detection_metrics(cop, src, ref)
        for tname, fn in transforms.items():
            with torch.no_grad():
                m = copy_detection_metrics(fn(cop), src, fn(ref))
            for key, label in (("recall_at_1", "copy:recall@1"), ("map", "copy:mAP")):
                add(tname, label, base[key], m[key], 1.0 / ref.shape[0], True, int(ref.shape[0]))
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------------------
# Subspaces
# ---------------------------------------------------------------------------------------------------------------------
def subspace_angles(projectors: Mapping[str, IdentityProjector], *, rank: int | None = None) -> pd.DataFrame:
    """Principal-angle cosines between every pair of fitted identity subspaces (their top ``rank`` directions).

    Returns:
        DataFrame with a, b, rank, mean_cos, min_cos, max_cos, and chance_mean_cos — the expected mean cosine
        between two *random* r-dimensional subspaces of ℝ^d, ≈ √(r/d) for r ≪ d ([I]: the reference that tells
        alignment from coincidence; estimated from 20 seeded random draws).
    """
    names = list(projectors)
    if len(names) < 2:
        raise InvalidArgumentError("projectors must hold at least two fitted subspaces")
    rows = []
    gen = torch.Generator().manual_seed(0)

    def random_basis(d: int, r: int) -> torch.Tensor:
        return torch.linalg.qr(torch.randn(d, r, generator=gen, dtype=torch.float64))[0]

    for a, b in combinations(names, 2):
        pa, pb = projectors[a], projectors[b]
        r_max = min(pa.rank, pb.rank)
        r = r_max if rank is None else check_int("rank", rank, minimum=1, maximum=r_max)
        ua, ub = pa.basis[:, :r], pb.basis[:, :r]
        cos = principal_angles(ua, ub)
        d = ua.shape[0]
        rand = [float(principal_angles(random_basis(d, r), random_basis(d, r)).mean()) for _ in range(20)]
        rows.append({"a": a, "b": b, "rank": r, "mean_cos": float(cos.mean()), "min_cos": float(cos.min()),
                     "max_cos": float(cos.max()), "chance_mean_cos": sum(rand) / len(rand)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------------------
# Attribution
# ---------------------------------------------------------------------------------------------------------------------
def attribution_tables(encoder: Any, faces: FaceSet, *, fii_images: int = 120, sigma: float = 4.0,
                       n_context_regions: int = 4, fcr_bins: int = 4,
                       cpi_sigmas: Sequence[float] = (0.0, 1.0, 2.0, 4.0, 8.0), cpi_queries: int = 200,
                       bstar_pairs: int = 100, bstar_betas: Sequence[float] | None = None,
                       seed: int = 0) -> dict[str, Any]:
    """FII (per image and by FCR bin), CPI(σ) and B* of one whole-image encoder on ``faces`` (privkit's definitions).

    The FII images are a seeded random subset of ``fii_images`` images. See :mod:`privkit.isp.attribution` for the
    definitions (equal-area, equal-strength blur of face and context; all marked [I] in docs/isp.md §4).

    Returns:
        {"fii": per-image DataFrame, "fii_by_fcr": binned summary, "cpi": DataFrame (None when the set has no
        context labels, ``cpi_sigmas`` is empty or no query has both kinds of candidate), "cpi_note": why CPI is
        None (else ""), "bstar": BStarResult}.
    """
    n = len(faces)
    m = check_int("fii_images", fii_images, minimum=2)
    gen = torch.Generator().manual_seed(int(seed))
    idx = torch.sort(torch.randperm(n, generator=gen)[: min(m, n)]).values
    fii = face_importance_index(encoder, faces.images[idx], faces.mask[idx], sigma=sigma,
                                n_context_regions=n_context_regions, seed=seed)
    by_fcr = summarise_by_fcr(fii, bins=fcr_bins)
    cpi, note = None, ""
    if not len(cpi_sigmas):
        note = "no blur strengths given"
    elif not bool((faces.context >= 0).any()):
        note = "the face set has no context labels"
    else:
        try:
            cpi = context_preference_curve(encoder, faces.images, faces.mask, faces.identity, faces.context,
                                           sigmas=cpi_sigmas, max_queries=cpi_queries, seed=seed)
        except InsufficientDataError as err:
            note = str(err)
    bstar = background_dominance(encoder, faces.images, faces.mask, faces.identity, betas=bstar_betas,
                                 n_pairs=bstar_pairs, seed=seed)
    return {"fii": fii, "fii_by_fcr": by_fcr, "cpi": cpi, "cpi_note": note, "bstar": bstar}


# ---------------------------------------------------------------------------------------------------------------------
# Inversion
# ---------------------------------------------------------------------------------------------------------------------
class ProjectedEncoder(torch.nn.Module):
    """An encoder followed by an orthogonal projection and re-normalisation: the sanitised embedding, differentiably.

    ``_embed_batch`` (what the inversion attacks differentiate through) computes
    normalise(z − (z U) Uᵀ) with z = normalise(f(x)); ``embed`` does the same without gradients. The projector's own
    ``__call__`` re-normalises in place and is not meant for autograd, hence this module.

    Args:
        encoder: a privkit Encoder (differentiable ``_embed_batch`` for the optimisation attack).
        projector: an :class:`IdentityProjector` (None: no projection, the raw encoder).
    """

    def __init__(self, encoder: torch.nn.Module, projector: IdentityProjector | None) -> None:
        super().__init__()
        self.encoder = encoder
        self.name = f"{getattr(encoder, 'name', 'encoder')}" + ("" if projector is None else f"+{projector.method}")
        basis = torch.zeros(getattr(encoder, "dim", 0), 0) if projector is None else projector.basis.float()
        self.register_buffer("basis", basis)

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None = None) -> torch.Tensor:
        f = self.encoder._embed_batch(images, boxes) if hasattr(self.encoder, "_embed_batch") else self.encoder(images)
        z = torch.nn.functional.normalize(f.float(), dim=1)
        if self.basis.shape[1]:
            u = self.basis.to(z.device)
            z = z - (z @ u) @ u.T
        return torch.nn.functional.normalize(z, dim=1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self._embed_batch(images, None)

    @torch.no_grad()
    def embed(self, images: torch.Tensor, *, boxes: torch.Tensor | None = None, batch_size: int = 64) -> torch.Tensor:
        outs = [self._embed_batch(images[s : s + batch_size], None if boxes is None else boxes[s : s + batch_size])
                for s in range(0, images.shape[0], batch_size)]
        return torch.cat(outs) if outs else images.new_empty(0, self.basis.shape[0])


@torch.no_grad()
def reference_threshold_from_embeddings(embeddings: torch.Tensor, identities: torch.Tensor, *, far: float = 1e-3,
                                        min_false_accepts: int = DEFAULT_MIN_FALSE_ACCEPTS) -> float:
    """The reference encoder's threshold at ``far`` from all impostor pairs of held-out, already-embedded images.

    Raises:
        InsufficientDataError: too few impostor pairs to resolve ``far`` (at least ``min_false_accepts / far``).
    """
    check_unit_norm("embeddings", embeddings)
    pairs = VerificationPairs.create(identities, enrol_shots=1)
    return pair_threshold(pairs, embeddings, far=far, min_false_accepts=min_false_accepts)[0]


#: The inversion attacks :func:`inversion_study` runs, and the family of the paper's four attacks each stands for.
INVERSION_ATTACKS: dict[str, str] = {
    "ridge": "regression (closed-form linear decoder; Vec2Face family)",
    "conv": "regression (convolutional decoder; Vec2Face family)",
    "optimisation": "optimisation (latent search of the conv decoder; ALSUV family)",
}


class _CropView(torch.nn.Module):
    """What a module sees of a reconstructed face crop, in the module's own input convention (for the latent search).

    ``input="box"``: the crop itself with its face box (``boxes`` in crop pixels). ``input="image"``: the crop pasted
    into a whole image — ``canvas`` (the attacker's estimate of the scene) at ``boxes`` (the attacker's estimate of
    the face box, canvas pixels) — which the module then embeds like any whole image.
    """

    def __init__(self, module: torch.nn.Module, input: str, boxes: torch.Tensor, margin: float,
                 canvas: torch.Tensor | None = None) -> None:
        super().__init__()
        self.module, self.input, self.margin = module, input, margin
        self.register_buffer("boxes", boxes.float())
        self.register_buffer("canvas", canvas if canvas is not None else torch.zeros(0))

    def _embed_batch(self, crops: torch.Tensor, boxes: torch.Tensor | None = None) -> torch.Tensor:
        if self.input == "box":
            x, b = crops, self.boxes
        else:
            x, b = paste_crops(self.canvas, crops, self.boxes, margin=self.margin), None
        f = self.module._embed_batch(x, b) if hasattr(self.module, "_embed_batch") else self.module(x)
        return torch.nn.functional.normalize(f.float(), dim=1)

    def forward(self, crops: torch.Tensor) -> torch.Tensor:
        return self._embed_batch(crops)


@dataclass(frozen=True, eq=False)
class AttackedEncoder:
    """One leaked embedding :func:`inversion_study` inverts.

    Attributes:
        module: a differentiable module mapping images to the leaked embedding (enables the optimisation attack), or
            None.
        aux_embeddings: (N, d) leaked embeddings of the auxiliary images.
        target_embeddings: (T, d) leaked embeddings of the targets.
        view: how the module sees images: ``"image"`` (the whole image) or ``"box"`` (a face crop).
    """

    module: Any
    aux_embeddings: torch.Tensor
    target_embeddings: torch.Tensor
    view: str = "image"


@dataclass(frozen=True, eq=False)
class InversionTargets:
    """The attacker's auxiliary images and the targets whose faces are reconstructed.

    Attributes:
        aux_images, aux_boxes, aux_identities: (N, 3, H, W) auxiliary images (identities disjoint from the targets),
            their (N, 4) xyxy face boxes and (N,) identities (for the CV folds).
        target_images, target_boxes: (T, 3, H, W) targets and their (T, 4) face boxes.
        target_identities: (T,) identities of the targets (None: all different).
    """

    aux_images: torch.Tensor
    aux_boxes: torch.Tensor
    aux_identities: torch.Tensor
    target_images: torch.Tensor
    target_boxes: torch.Tensor
    target_identities: torch.Tensor | None = None


@dataclass(frozen=True)
class InversionSettings:
    """The attacks' set-up: crops (side ``crop_size`` px, margin ``crop_margin``), which attacks, the ridge penalties,
    the conv decoder (``epochs``, ``channels``) and the latent search (``steps`` Adam steps)."""

    crop_size: int = 32
    crop_margin: float = 0.2
    attacks: Sequence[str] = ("ridge", "conv", "optimisation")
    ridge_lambdas: Sequence[float] = (1e-3, 1e-2, 1e-1, 1.0, 10.0)
    epochs: int = 30
    steps: int = 40
    channels: int = 32

    def __post_init__(self) -> None:
        for a in self.attacks:
            check_choice("attacks", a, tuple(INVERSION_ATTACKS))
        check_int("crop_size", self.crop_size, minimum=8)


def inversion_study(attacked: Mapping[str, AttackedEncoder], data: InversionTargets, reference_encoder: Any,
                    threshold: float | Mapping[str, float], *, settings: InversionSettings | None = None,
                    seed: int = 0) -> tuple[pd.DataFrame, dict[str, torch.Tensor]]:
    """Template inversion of leaked (possibly sanitised) embeddings to aligned face crops, judged by a reference encoder.

    **Targets of the reconstruction** [I]: square face crops (:func:`~privkit.isp.inversion.face_crops`, side =
    longer box side × (1 + 2·``crop_margin``), resized to ``crop_size``) — template-inversion attacks (Vec2Face,
    ALSUV) rebuild aligned faces, not scenes. The *leaked embeddings* are whatever the encoder normally produces (the
    whole image for whole-image encoders).

    **Attacks**, per attacked embedding (``INVERSION_ATTACKS``): ``ridge`` — a closed-form ridge decoder embedding →
    crop pixels (:func:`~privkit.isp.inversion.train_ridge_inverter`, λ by identity-grouped 5-fold CV on the auxiliary
    set, 5 folds or one per identity when fewer); ``conv`` — a :class:`~privkit.isp.inversion.ConvDecoder` trained for ``epochs`` (pixel MSE); both are the
    regression (Vec2Face) family. ``optimisation`` (ALSUV family, differentiable modules only): the conv decoder's
    latent is searched (``steps`` Adam steps from the target embedding) so that the module's embedding of the
    reconstruction matches the leaked one. The module sees the reconstruction in its own input convention
    (:class:`_CropView`): a ``box`` module sees the crop with the auxiliary set's median crop face box; an ``image``
    module sees the crop pasted into the attacker's estimate of the whole image at the attacker's estimate of the face
    box, both predicted from the leaked embedding by ridge regressions fitted on the auxiliary set — no target image
    or box is used.

    **Evaluation** (the reference encoder is never used by the attacks): every reconstruction is embedded with its
    target's crop face box and compared with every target's real crop (the T × T matrix S of reference cosines).
    *Success*: S[i, i] > ``threshold`` (e.g. the reference's FAR 1e-3 threshold), Wilson 95% interval. *Rank-1*
    (identification view; weaker and more sensitive): the real crop nearest to reconstruction i is of target i's
    identity; chance = mean over targets of (targets sharing the identity) / T (1/T when all differ). *Control*:
    reconstructions decoded from the *other* identities' embeddings compared with target i (S[j, i], id j ≠ id i):
    ``control_rate`` is their success rate and ``margin`` the mean over targets of S[i, i] − mean_j S[j, i], with a
    95% normal interval — the identity evidence in the reconstructions even when none passes the threshold.

    Args:
        attacked: name -> :class:`AttackedEncoder` (module or None, auxiliary and target embeddings, view).
        data: the auxiliary images and the targets (:class:`InversionTargets`).
        reference_encoder: privkit Encoder accepting ``boxes=`` (dlib-resnet-fr), not used by the attacks; or a
            mapping judge name -> such an encoder, to judge the same reconstructions with several references (one
            row per judge; ``threshold`` is then a mapping with the same keys).
        threshold: the reference threshold (e.g. :func:`reference_threshold_from_embeddings` at FAR 1e-3), or one
            per judge.
        settings: crops, attacks and their budgets (:class:`InversionSettings`; "optimisation" needs "conv"'s
            decoder and is skipped for rows without a module).
        seed: seeds the decoders, the CV folds and the search.

    Returns:
        (DataFrame with encoder, attack, family, judge (the reference's name, or its ``name`` attribute), success_rate, ci_low, ci_high, n_targets, threshold, mean_score,
        control_rate, rank1, rank1_low, rank1_high, rank1_chance, margin, margin_low, margin_high, ridge_lambda;
        {f"{encoder}/{attack}": reconstructed crops}).
    """
    settings = InversionSettings() if settings is None else settings
    if not isinstance(settings, InversionSettings) or not isinstance(data, InversionTargets):
        raise InvalidArgumentError("data must be an InversionTargets and settings an InversionSettings, got "
                                   f"{type(data).__name__} and {type(settings).__name__}")
    attacks, ridge_lambdas, epochs, steps = settings.attacks, settings.ridge_lambdas, settings.epochs, settings.steps
    channels, crop_margin, crop_size = settings.channels, settings.crop_margin, settings.crop_size
    aux_images, aux_boxes, aux_identities = data.aux_images, data.aux_boxes, data.aux_identities
    t = data.target_images.shape[0]
    if t < 2:
        raise InsufficientDataError(f"target_images: need at least 2 targets, got {t}")
    n_aux = aux_images.shape[0]
    check_tensor("aux_identities", aux_identities, shape=(n_aux,))
    tid = torch.arange(t) if data.target_identities is None else data.target_identities.reshape(-1).cpu()
    check_tensor("target_identities", tid, shape=(t,))
    n_groups = int(torch.unique(aux_identities).numel())
    if n_groups < 2:
        raise InsufficientDataError(f"aux_identities: need at least 2 auxiliary identities, got {n_groups}")
    folds = min(5, n_groups)
    aux_crops, aux_cbox = face_crops(aux_images, aux_boxes, size=crop_size, margin=crop_margin)
    tgt_crops, tgt_cbox = face_crops(data.target_images, data.target_boxes, size=crop_size, margin=crop_margin)
    h, w = aux_images.shape[-2:]
    canvas_scale = crop_size / max(h, w)
    canvas_size = (max(1, round(h * canvas_scale)), max(1, round(w * canvas_scale)))
    aux_canvas = torch.nn.functional.interpolate(aux_images.float(), size=canvas_size, mode="area")
    if isinstance(reference_encoder, Mapping):
        if not isinstance(threshold, Mapping) or set(threshold) != set(reference_encoder):
            raise InvalidArgumentError("threshold: with several reference encoders (a mapping), threshold must be a "
                                       f"mapping with the same keys {sorted(reference_encoder)}")
        if not reference_encoder:
            raise InvalidArgumentError("reference_encoder: the mapping of judges is empty")
        judges = {str(k): (v, float(threshold[k])) for k, v in reference_encoder.items()}
    else:
        if isinstance(threshold, Mapping):
            raise InvalidArgumentError("threshold: a mapping needs a mapping of reference encoders")
        judges = {str(getattr(reference_encoder, "name", "reference")): (reference_encoder, float(threshold))}
    for jn, (_, thr) in judges.items():
        if not math.isfinite(thr) or not -1.0 <= thr <= 1.0:
            raise InvalidArgumentError(f"threshold[{jn!r}]: must be a finite cosine in [-1, 1], got {thr}")
    ref_ts = {jn: enc.embed(tgt_crops, boxes=tgt_cbox).float().cpu() for jn, (enc, _) in judges.items()}
    same = tid[:, None] == tid[None, :]
    chance = float(same.float().sum(1).mean()) / t

    def evaluate(rec: torch.Tensor, judge: str) -> dict:
        reference, thr = judges[judge]
        z = reference.embed(rec.clamp(0, 1).detach(), boxes=tgt_cbox).float().cpu()
        s = z @ ref_ts[judge].T  # s[i, j] = cos(reconstruction i, real target j)
        own = s.diagonal()
        k = int((own > thr).sum())
        lo, hi = wilson_interval(k, t)
        other = ~same  # control for target j: reconstructions i of other identities, s[i, j]
        ctl_mean = (s * other).sum(0) / other.sum(0).clamp_min(1)
        ctl_rate = float(((s > thr) & other).sum()) / max(int(other.sum()), 1)
        r1 = int(same[torch.arange(t), s.argmax(1)].sum())  # the nearest real crop is of the same identity
        r_lo, r_hi = wilson_interval(r1, t)
        diff = own - ctl_mean
        half = 1.96 * float(diff.std()) / math.sqrt(t)
        m = float(diff.mean())
        return {"judge": judge, "success_rate": k / t, "ci_low": lo, "ci_high": hi, "n_targets": t, "threshold": thr,
                "mean_score": float(own.mean()), "control_rate": ctl_rate, "rank1": r1 / t, "rank1_low": r_lo,
                "rank1_high": r_hi, "rank1_chance": chance, "margin": m, "margin_low": m - half, "margin_high": m + half}

    rows, recs = [], {}
    for name, spec in attacked.items():
        if not isinstance(spec, AttackedEncoder):
            raise InvalidArgumentError(f"attacked[{name!r}] must be an AttackedEncoder, got {type(spec).__name__}")
        module, z_aux, z_t = spec.module, spec.aux_embeddings, spec.target_embeddings
        mode = check_choice(f"attacked[{name!r}] view", spec.view, INPUT_MODES)
        check_tensor(f"attacked[{name!r}] aux embeddings", z_aux, shape=(n_aux, None), floating=True)
        check_tensor(f"attacked[{name!r}] target embeddings", z_t, shape=(t, z_aux.shape[1]), floating=True)
        z_aux, z_t = z_aux.float().to(aux_crops.device), z_t.float().to(aux_crops.device)
        ridge, cv = train_ridge_inverter(z_aux, aux_crops, groups=aux_identities, lambdas=ridge_lambdas, folds=folds,
                                         seed=seed)
        found: list[tuple[str, torch.Tensor]] = []
        with torch.no_grad():
            if "ridge" in attacks:
                found.append(("ridge", ridge(z_t)))
        if "conv" in attacks or ("optimisation" in attacks and module is not None):
            conv, _ = train_regression_inverter(None, aux_crops, aux_embeddings=z_aux, epochs=epochs, channels=channels,
                                                seed=seed)
            if "conv" in attacks:
                with torch.no_grad():
                    found.append(("conv", conv(z_t)))
        if "optimisation" in attacks and module is not None:
            if mode == "box":
                view = _CropView(module, "box", aux_cbox.median(0).values.expand(t, 4), crop_margin)
            else:  # the attacker's estimates of the scene and of the face box, from the leaked embedding
                scene, _ = train_ridge_inverter(z_aux, aux_canvas, groups=aux_identities, lambdas=(ridge.lam,), folds=2,
                                                seed=seed)
                bx = ridge_predict(z_aux, aux_boxes.float().to(z_aux.device) * canvas_scale, z_t, lam=ridge.lam)
                bx = torch.stack([bx[:, 0], bx[:, 1], torch.maximum(bx[:, 2], bx[:, 0] + 1),
                                  torch.maximum(bx[:, 3], bx[:, 1] + 1)], 1)
                with torch.no_grad():
                    view = _CropView(module, "image", bx, crop_margin, canvas=scene(z_t))
            rec, _ = optimisation_attack(view, z_t, decoder=conv, steps=steps, seed=seed)
            found.append(("optimisation", rec))
        for attack, rec in found:
            recs[f"{name}/{attack}"] = rec.detach()
            for judge in judges:
                rows.append({"encoder": name, "attack": attack, "family": INVERSION_ATTACKS[attack].split(" ")[0],
                             **evaluate(rec, judge), "ridge_lambda": ridge.lam})
    return pd.DataFrame(rows), recs
