"""What a sanitising projection keeps (paper 1, docs/isp.md §6): kNN retention and copy-detection retrieval.

* :func:`knn_accuracy` / :func:`knn_retention` — cosine k-nearest-neighbour accuracy on *non-identity* labels (the
  paper uses ImageNet classes) before and after a transform, reported as a percentage of the raw encoder
  (raw = 100).
* :func:`copy_detection_metrics` / :func:`copy_detection_eval` — copy detection in the spirit of DISC21: augmented
  copies of reference images are the queries, the originals the database; Recall@1 (the top-ranked reference is the
  source) and mean average precision (per query, the mean of precision at the rank of each relevant reference; with
  one source per query this is the reciprocal rank). The paper gives no copy-detection numbers; the augmentation,
  :func:`simple_augment`, is privkit's (a caller may pass their own).

* :func:`linear_probe_accuracy` / :func:`linear_probe_retention` — the paper's linear probe on a non-identity label:
  multinomial logistic regression fitted on a labelled bank, top-1 accuracy on queries, raw vs. transformed.
* :func:`imagenet_top1_retention` — a label-free ImageNet retention measure for ``efficientnet-lite0``: how often the
  model's own ImageNet top-1 class survives sanitising its pooled features; :func:`imagenet_photo_views` builds
  seeded augmented views of scikit-image's colour photos to run it on (offline, no ImageNet labels needed).

The subspace comparison (:func:`~privkit.isp.projection.principal_angles`) lives with the projectors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import pandas as pd
import torch

from .._validate import check_choice, check_int, check_positive, check_probability, check_tensor
from ..errors import InsufficientDataError, InvalidArgumentError, MissingResourceError, ShapeError
from ..encoders.base import embed_images
from ..transforms import resize
from .attribution import EncoderLike, _check_images, _check_labels

__all__ = ["knn_accuracy", "Retention", "knn_retention", "simple_augment", "copy_detection_metrics",
           "copy_detection_eval", "linear_probe_accuracy", "linear_probe_retention", "imagenet_top1_retention",
           "imagenet_photo_views", "IMAGENET_PHOTO_NAMES", "LINEAR_PROBE_L2_GRID"]

Transform = Callable[[torch.Tensor], torch.Tensor]


def _check_same_width(name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    if a.shape[1] != b.shape[1]:
        raise ShapeError(f"{name_a} and {name_b} must have the same width, got {a.shape[1]} and {b.shape[1]}")


def _check_labelled(name: str, emb: torch.Tensor, labels: torch.Tensor) -> None:
    check_tensor(f"{name}_emb", emb, ndim=2, floating=True)
    _check_labels(f"{name}_labels", labels, emb.shape[0])
    if emb.shape[0] == 0:
        raise InsufficientDataError(f"{name}_emb: need at least 1 row, got 0")


@torch.no_grad()
def knn_accuracy(train_emb: torch.Tensor, train_labels: torch.Tensor, test_emb: torch.Tensor, test_labels: torch.Tensor,
                 *, k: int = 20, weighting: Literal["uniform", "similarity"] = "uniform", temperature: float = 0.07,
                 chunk_size: int = 1024) -> float:
    """Cosine kNN top-1 accuracy of ``test`` against the labelled ``train`` bank.

    Rows are L2-normalised here. ``weighting="uniform"`` is a majority vote of the k neighbours;
    ``"similarity"`` weights each vote by exp(cos / ``temperature``) (the DINO kNN protocol). Vote ties go to the
    smallest label value.
    """
    _check_labelled("train", train_emb, train_labels)
    _check_labelled("test", test_emb, test_labels)
    _check_same_width("train_emb", train_emb, "test_emb", test_emb)
    k = check_int("k", k, minimum=1, maximum=train_emb.shape[0])
    weighting = check_choice("weighting", weighting, ("uniform", "similarity"))
    temperature = check_positive("temperature", temperature)
    chunk_size = check_int("chunk_size", chunk_size, minimum=1)
    dev = train_emb.device
    a = torch.nn.functional.normalize(train_emb, dim=1)
    b = torch.nn.functional.normalize(test_emb.to(dev, a.dtype), dim=1)
    classes, tr = torch.unique(train_labels.to(dev), return_inverse=True)
    correct = 0
    te = test_labels.to(dev)
    for s in range(0, b.shape[0], chunk_size):
        sims, idx = torch.topk(b[s : s + chunk_size] @ a.T, k, dim=1)
        w = torch.ones_like(sims) if weighting == "uniform" else torch.exp((sims - 1) / temperature)
        votes = torch.zeros(sims.shape[0], classes.numel(), dtype=w.dtype, device=dev).scatter_add_(1, tr[idx], w)
        correct += int((classes[votes.argmax(1)] == te[s : s + chunk_size]).sum())
    return correct / b.shape[0]


@dataclass(frozen=True)
class Retention:
    """A utility metric before and after a transform; ``retention_pct`` = 100 · transformed / raw."""

    metric: str
    raw: float
    transformed: float
    retention_pct: float


def _retention_pct(raw: float, transformed: float) -> float:
    return 100.0 * transformed / raw if raw > 0 else math.nan


def _retention(metric: str, accuracy: Callable[..., float], transform: Transform, bank: torch.Tensor,
               bank_labels: torch.Tensor, query: torch.Tensor, query_labels: torch.Tensor, **options) -> Retention:
    """``accuracy(bank, bank_labels, query, query_labels, **options)`` before and after ``transform`` (of both)."""
    raw = accuracy(bank, bank_labels, query, query_labels, **options)
    with torch.no_grad():
        tb, tq = transform(bank), transform(query)
    new = accuracy(tb, bank_labels, tq, query_labels, **options)
    return Retention(metric, raw, new, _retention_pct(raw, new))


def knn_retention(train_emb: torch.Tensor, train_labels: torch.Tensor, test_emb: torch.Tensor,
                  test_labels: torch.Tensor, *, transform: Transform, k: int = 20,
                  weighting: Literal["uniform", "similarity"] = "uniform", temperature: float = 0.07) -> Retention:
    """kNN accuracy on non-identity labels with and without ``transform`` (e.g. an :class:`IdentityProjector`).

    The transform is applied to both the bank and the queries. The paper reports ImageNet kNN retention of 85–100%
    of raw for ISP.
    """
    return _retention(f"knn@{k}", knn_accuracy, transform, train_emb, train_labels, test_emb, test_labels, k=k,
                      weighting=weighting, temperature=temperature)


def simple_augment(images: torch.Tensor, *, generator: torch.Generator | None = None,
                   strength: float = 1.0) -> torch.Tensor:
    """A light copy-detection augmentation (privkit's): random resized crop, flip, colour jitter, noise.

    Per image: a square crop covering 60–100% of the shorter side (scaled by ``strength``) at a random position,
    resized back bilinearly; a horizontal flip with probability ½; brightness ±0.1 and contrast ×[0.8, 1.2]; Gaussian
    pixel noise of standard deviation 0.02; clamped to [0, 1]. All randomness comes from ``generator``.
    """
    _check_images(images)
    strength = check_positive("strength", strength)
    n, _, h, w = images.shape
    out = torch.empty_like(images)
    u = torch.rand(n, 7, generator=generator)
    for i in range(n):
        frac = 1.0 - strength * 0.4 * float(u[i, 0])
        size = max(2, int(round(min(h, w) * max(frac, 0.2))))
        y0 = int(float(u[i, 1]) * (h - size + 1))
        x0 = int(float(u[i, 2]) * (w - size + 1))
        crop = images[i : i + 1, :, y0 : y0 + size, x0 : x0 + size]
        img = torch.nn.functional.interpolate(crop, size=(h, w), mode="bilinear", align_corners=False)[0]
        if float(u[i, 3]) < 0.5:
            img = img.flip(-1)
        contrast = 1.0 + strength * 0.2 * (2 * float(u[i, 4]) - 1)
        bright = strength * 0.1 * (2 * float(u[i, 5]) - 1)
        mean = img.mean()
        out[i] = (img - mean) * contrast + mean + bright
    noise = torch.randn(images.shape, generator=generator).to(images.device, images.dtype) * (0.02 * strength)
    return (out + noise).clamp_(0, 1)


@torch.no_grad()
def copy_detection_metrics(query_emb: torch.Tensor, query_source: torch.Tensor, reference_emb: torch.Tensor, *,
                           reference_ids: torch.Tensor | None = None) -> dict[str, float]:
    """Recall@1 and mAP of copy detection by cosine similarity.

    Args:
        query_emb: (Q, D) query (copy) embeddings.
        query_source: (Q,) id of each query's source; a reference is relevant when its id equals it.
        reference_emb: (R, D) reference (database) embeddings.
        reference_ids: (R,) ids of the references (default: 0 … R − 1, i.e. ``query_source`` indexes them).

    Returns:
        {"recall_at_1": …, "map": …, "n_queries": Q}. Queries without any relevant reference are an error.
    """
    check_tensor("query_emb", query_emb, ndim=2, floating=True)
    check_tensor("reference_emb", reference_emb, ndim=2, floating=True)
    q, r = query_emb.shape[0], reference_emb.shape[0]
    if q == 0 or r == 0:
        raise InsufficientDataError("query_emb and reference_emb need at least 1 row each")
    _check_same_width("query_emb", query_emb, "reference_emb", reference_emb)
    check_tensor("query_source", query_source, shape=(q,))
    dev = reference_emb.device
    ref_ids = torch.arange(r, device=dev) if reference_ids is None else reference_ids.to(dev)
    check_tensor("reference_ids", ref_ids, shape=(r,))
    src = query_source.to(dev)
    a = torch.nn.functional.normalize(query_emb.to(dev, reference_emb.dtype), dim=1)
    b = torch.nn.functional.normalize(reference_emb, dim=1)
    order = torch.argsort(a @ b.T, dim=1, descending=True, stable=True)
    relevant = ref_ids[order] == src[:, None]  # (Q, R) relevance in ranked order
    n_rel = relevant.sum(1)
    if bool((n_rel == 0).any()):
        raise InvalidArgumentError("query_source has ids with no matching reference in reference_ids")
    hits = relevant.double().cumsum(1)
    ranks = torch.arange(1, r + 1, device=dev, dtype=torch.float64)
    ap = ((hits / ranks) * relevant.double()).sum(1) / n_rel.double()
    return {"recall_at_1": float(relevant[:, 0].double().mean()), "map": float(ap.mean()), "n_queries": q}


@torch.no_grad()
def copy_detection_eval(encoder: EncoderLike, references: torch.Tensor, *, transform: Transform | None = None,
                        augment: Callable[..., torch.Tensor] | None = None, n_copies: int = 1, seed: int = 0,
                        batch_size: int = 64) -> pd.DataFrame:
    """Copy detection with augmented copies of ``references`` as queries, raw and (optionally) after ``transform``.

    Args:
        encoder: encoder-like object.
        references: (R, 3, H, W) database images.
        transform: e.g. an :class:`~privkit.isp.projection.IdentityProjector`, applied to queries and references.
        augment: ``augment(images, generator=...)`` making one copy per image (default :func:`simple_augment`).
        n_copies: copies per reference.
        seed: seeds the augmentation.

    Returns:
        DataFrame with rows "raw" (and "transformed"), columns embedding, recall_at_1, map, n_queries, and for the
        transformed row the retention percentages recall_at_1_retention_pct and map_retention_pct.
    """
    _check_images(references, "references")
    n_copies = check_int("n_copies", n_copies, minimum=1)
    aug = simple_augment if augment is None else augment
    gen = torch.Generator().manual_seed(int(seed))
    copies = torch.cat([aug(references, generator=gen) for _ in range(n_copies)])
    src = torch.arange(references.shape[0]).repeat(n_copies)
    z_ref = embed_images(encoder, references, batch_size=batch_size)
    z_q = embed_images(encoder, copies, batch_size=batch_size)
    rows = [{"embedding": "raw", **copy_detection_metrics(z_q, src, z_ref)}]
    if transform is not None:
        row = {"embedding": "transformed", **copy_detection_metrics(transform(z_q), src, transform(z_ref))}
        for key in ("recall_at_1", "map"):
            row[f"{key}_retention_pct"] = _retention_pct(rows[0][key], row[key])
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------------------
# Linear probe (multinomial logistic regression) on a non-identity label
# ---------------------------------------------------------------------------------------------------------------------
#: l2 values tried by :func:`linear_probe_accuracy` when ``l2=None``.
LINEAR_PROBE_L2_GRID: tuple[float, ...] = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


def _probe_features(bank: torch.Tensor, *others: torch.Tensor) -> list[torch.Tensor]:
    """float64 rows, L2-normalised, centred on the bank mean and scaled so the bank's rows have unit RMS norm."""
    b = torch.nn.functional.normalize(bank.detach().double(), dim=1, eps=1e-12)
    mean = b.mean(0, keepdim=True)
    b = b - mean
    rms = float(b.pow(2).sum(1).mean().sqrt())
    scale = 1.0 / rms if rms > 1e-12 else 1.0
    others = [torch.nn.functional.normalize(o.detach().to(b.device, torch.float64), dim=1, eps=1e-12) for o in others]
    return [b * scale] + [(o - mean) * scale for o in others]


def _fit_softmax(x: torch.Tensor, y: torch.Tensor, n_cls: int, l2: float,
                 max_iter: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Minimise mean cross-entropy + (l2 / 2)·||W||²_F (bias not penalised) by L-BFGS from zero; float64."""
    w = torch.zeros(x.shape[1], n_cls, dtype=torch.float64, device=x.device, requires_grad=True)
    b = torch.zeros(n_cls, dtype=torch.float64, device=x.device, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=max_iter, history_size=20, line_search_fn="strong_wolfe",
                            tolerance_grad=1e-10, tolerance_change=1e-14)

    def closure() -> torch.Tensor:
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(x @ w + b, y) + 0.5 * l2 * (w * w).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        opt.step(closure)
    return w.detach(), b.detach()


def _probe_split(y: torch.Tensor, val_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stratified split of bank rows: per class of >= 2 rows, round(val_fraction·count) (>= 1, <= count − 1) held out."""
    gen = torch.Generator().manual_seed(int(seed))
    y_cpu = y.cpu()
    train, val = [], []
    for c in torch.unique(y_cpu):
        idx = torch.nonzero(y_cpu == c).flatten()
        idx = idx[torch.randperm(idx.numel(), generator=gen)]
        n_val = 0 if idx.numel() < 2 else min(idx.numel() - 1, max(1, round(val_fraction * idx.numel())))
        val.append(idx[:n_val])
        train.append(idx[n_val:])
    return torch.cat(train).sort().values, torch.cat(val).sort().values


def linear_probe_accuracy(bank_emb: torch.Tensor, bank_labels: torch.Tensor, query_emb: torch.Tensor,
                          query_labels: torch.Tensor, *, l2: float | None = 1e-2,
                          l2_grid: tuple[float, ...] = LINEAR_PROBE_L2_GRID, val_fraction: float = 0.2,
                          max_iter: int = 200, seed: int = 0) -> float:
    """Top-1 accuracy of a multinomial logistic-regression probe fitted on the bank and scored on the queries.

    The paper's linear probe on a non-identity label (privkit's implementation [I]). Rows are L2-normalised (as in
    :func:`knn_accuracy`), centred on the bank's mean and scaled by one number so that the bank's centred rows have
    unit root-mean-square norm, which makes ``l2`` comparable across encoders and transforms. The probe minimises
    mean cross-entropy + (``l2`` / 2)·‖W‖²_F (bias unpenalised) by full-batch L-BFGS (strong Wolfe line search) from
    zero in float64: deterministic for given inputs and device. Queries whose label is absent from the bank count as
    errors.

    Args:
        bank_emb: (N, D) training embeddings.
        bank_labels: (N,) integer labels (any values); at least 2 distinct.
        query_emb: (Q, D) test embeddings.
        query_labels: (Q,) integer labels.
        l2: ridge strength > 0; ``None`` chooses it from ``l2_grid`` by accuracy on a seeded, stratified held-out
            ``val_fraction`` of the bank (ties go to the larger value), then refits on the whole bank.
        l2_grid: candidates when ``l2`` is None (each > 0).
        val_fraction: held-out share of each bank class (of at least 2 rows) when ``l2`` is None, in (0, 1).
        max_iter: L-BFGS iterations (>= 1).
        seed: seeds the held-out split (``l2=None`` only).

    Returns:
        Accuracy in [0, 1].

    Raises:
        ShapeError: wrong ranks, label lengths or different widths.
        InvalidArgumentError: NaN/inf, non-integer labels, bad ``l2``/``l2_grid``/``val_fraction``/``max_iter``.
        InsufficientDataError: empty inputs, fewer than 2 bank classes, or (``l2=None``) no bank class with 2 rows.
    """
    _check_labelled("bank", bank_emb, bank_labels)
    _check_labelled("query", query_emb, query_labels)
    _check_same_width("bank_emb", bank_emb, "query_emb", query_emb)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    if l2 is not None:
        l2 = check_positive("l2", l2)
    else:
        if isinstance(l2_grid, (str, bytes)) or not hasattr(l2_grid, "__iter__") or len(tuple(l2_grid)) == 0:
            raise InvalidArgumentError(f"l2_grid must be a non-empty sequence of numbers > 0, got {l2_grid!r}")
        l2_grid = tuple(check_positive("l2_grid", v) for v in l2_grid)
        val_fraction = check_probability("val_fraction", val_fraction)
    dev = bank_emb.device
    classes, y = torch.unique(bank_labels.to(dev), return_inverse=True)
    if classes.numel() < 2:
        raise InsufficientDataError(f"bank_labels: need at least 2 distinct classes, got {classes.numel()}")
    if l2 is None:
        tr, va = _probe_split(y, val_fraction, seed)
        if va.numel() == 0:
            raise InsufficientDataError("bank_labels: choosing l2 needs at least one class with 2 or more rows")
        tr, va = tr.to(dev), va.to(dev)
        x_tr, x_va = _probe_features(bank_emb[tr], bank_emb[va])
        best = (-1.0, 0.0)
        for cand in sorted(l2_grid):
            w, b = _fit_softmax(x_tr, y[tr], classes.numel(), cand, max_iter)
            acc = float(((x_va @ w + b).argmax(1) == y[va]).double().mean())
            if acc >= best[0]:
                best = (acc, cand)
        l2 = best[1]
    x_bank, x_query = _probe_features(bank_emb, query_emb)
    w, b = _fit_softmax(x_bank, y, classes.numel(), float(l2), max_iter)
    return float((classes[(x_query @ w + b).argmax(1)] == query_labels.to(dev)).double().mean())


def linear_probe_retention(bank_emb: torch.Tensor, bank_labels: torch.Tensor, query_emb: torch.Tensor,
                           query_labels: torch.Tensor, *, transform: Transform, l2: float | None = 1e-2,
                           l2_grid: tuple[float, ...] = LINEAR_PROBE_L2_GRID, val_fraction: float = 0.2,
                           max_iter: int = 200, seed: int = 0) -> Retention:
    """Linear-probe accuracy (:func:`linear_probe_accuracy`) with and without ``transform`` (applied to bank and
    queries); ``retention_pct`` = 100 · transformed / raw. With ``l2=None`` the ridge strength is chosen separately
    for the raw and the transformed embeddings (each probe tuned on its own features)."""
    if not callable(transform):
        raise InvalidArgumentError(
            f"transform must be callable (e.g. an IdentityProjector), got {type(transform).__name__}")
    return _retention("linear-probe", linear_probe_accuracy, transform, bank_emb, bank_labels, query_emb, query_labels,
                      l2=l2, l2_grid=l2_grid, val_fraction=val_fraction, max_iter=max_iter, seed=seed)


# ---------------------------------------------------------------------------------------------------------------------
# ImageNet top-1 retention of efficientnet-lite0 (label-free)
# ---------------------------------------------------------------------------------------------------------------------
def _imagenet_classifier(encoder: object) -> torch.nn.Module:
    if not (hasattr(encoder, "imagenet_logits") and hasattr(encoder, "pooled_features")):
        raise InvalidArgumentError(
            "encoder must be the efficientnet-lite0 encoder (an object with imagenet_logits and pooled_features, "
            f"e.g. load_encoder('efficientnet-lite0')), got {type(encoder).__name__}"
        )
    head = getattr(getattr(encoder, "model", None), "classifier", None)
    if not isinstance(head, torch.nn.Module):
        raise InvalidArgumentError(f"encoder must expose its ImageNet classifier as encoder.model.classifier "
                                   f"(efficientnet-lite0); {type(encoder).__name__} does not")
    return head


@torch.no_grad()
def imagenet_top1_retention(encoder: object, images: torch.Tensor, transform: Transform | None, *, top_k: int = 5,
                            batch_size: int = 64, pooled: torch.Tensor | None = None) -> dict[str, float | int]:
    """How often ``efficientnet-lite0``'s own ImageNet top-1 class survives ``transform`` (label-free retention).

    For each image the 1280-D pooled, un-normalised features f (the classifier's input,
    ``encoder.pooled_features``) are computed; the transform acts on the unit vector u = f/‖f‖ (sanitising
    projections are defined on unit-norm embeddings) and its output is multiplied by ‖f‖, so each row gets its
    original scale back: for a re-normalising transform (``IdentityProjector(renormalize=True)``, the paper's) the
    sanitised row has exactly the norm of f; for a non-re-normalising linear projector P it is P f. The model's
    final linear layer (``encoder.model.classifier``) then gives the sanitised logits, and they are compared with
    the raw logits of f.

    No ground-truth labels are used: on photos without ImageNet labels (e.g. :func:`imagenet_photo_views`) this is
    *agreement with the raw model's own prediction*, not accuracy. ``transform=None`` gives agreement exactly 1.

    Args:
        encoder: the ``efficientnet-lite0`` encoder (``load_encoder("efficientnet-lite0")``).
        images: (N, 3, H, W) float images in [0, 1] (resized as the encoder does: short side 224, centre crop).
        transform: a map of (B, 1280) unit rows to (B, 1280) rows, e.g. an
            :class:`~privkit.isp.projection.IdentityProjector` fitted on this encoder's embeddings; or ``None``.
        top_k: k of the top-k overlap, 1 to 1000.
        batch_size: images per forward pass.
        pooled: the (N, 1280) pooled features of ``images`` already computed (``encoder.pooled_features``), to
            compare many transforms without re-running the network; ``images`` may then be None.

    Returns:
        ``{"top1_agreement": share of images whose sanitised top-1 class is the raw top-1 class,
        "topk_overlap": share whose raw top-1 class is among the sanitised top-k, "top_k": k,
        "mean_raw_top1_prob": mean softmax probability of the raw top-1 class,
        "mean_transformed_top1_prob": mean softmax probability of the sanitised top-1 class, "n": N}``.

    Raises:
        InvalidArgumentError: ``encoder`` is not efficientnet-lite0-like; ``transform`` not callable or returning
            NaN/inf; bad images, ``top_k`` or ``batch_size``.
        ShapeError: bad image shape, or ``transform`` changes the shape of its input.
        InsufficientDataError: no images.
    """
    head = _imagenet_classifier(encoder)
    if pooled is None:
        _check_images(images)
        n = images.shape[0]
    else:
        dim = int(getattr(head, "in_features", pooled.shape[-1] if pooled.ndim == 2 else 0))
        pooled = check_tensor("pooled", pooled, shape=(None, dim), floating=True)
        n = pooled.shape[0]
        if images is not None and images.shape[0] != n:
            raise ShapeError(f"pooled has {n} rows but images has {images.shape[0]}")
    if n == 0:
        raise InsufficientDataError("images: need at least 1 image, got 0")
    if transform is not None and not callable(transform):
        raise InvalidArgumentError(f"transform must be None or callable (e.g. an IdentityProjector), got "
                                   f"{type(transform).__name__}")
    top_k = check_int("top_k", top_k, minimum=1, maximum=int(getattr(head, "out_features", 1000)))
    batch_size = check_int("batch_size", batch_size, minimum=1)
    agree = overlap = 0
    p_raw = p_new = 0.0
    for s in range(0, n, batch_size):
        if pooled is None:
            f = encoder.pooled_features(images[s : s + batch_size])  # type: ignore[attr-defined]
        else:
            f = pooled[s : s + batch_size]
        raw_logits = head(f).double()
        raw_top = raw_logits.argmax(1)
        raw_prob = raw_logits.softmax(1)
        p_raw += float(raw_prob.gather(1, raw_top[:, None]).sum())
        if transform is None:
            agree += raw_top.numel()
            overlap += raw_top.numel()
            p_new += float(raw_prob.gather(1, raw_top[:, None]).sum())
            continue
        norms = torch.linalg.vector_norm(f, dim=1, keepdim=True)
        u = f / norms.clamp(min=1e-12)
        t = transform(u)
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != tuple(u.shape):
            raise ShapeError(f"transform must map (B, {u.shape[1]}) rows to the same shape, got "
                             f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        if not bool(torch.isfinite(t).all()):
            raise InvalidArgumentError("transform returned NaN or inf values")
        new_logits = head(t.to(f.device, f.dtype) * norms).double()
        new_top = new_logits.topk(top_k, dim=1).indices
        agree += int((new_top[:, 0] == raw_top).sum())
        overlap += int((new_top == raw_top[:, None]).any(1).sum())
        p_new += float(new_logits.softmax(1).gather(1, new_top[:, :1]).sum())
    return {"top1_agreement": agree / n, "topk_overlap": overlap / n, "top_k": top_k, "mean_raw_top1_prob": p_raw / n,
            "mean_transformed_top1_prob": p_new / n, "n": n}


#: scikit-image colour photos used by :func:`imagenet_photo_views`, in order (``stereo_motorcycle``: its left view).
IMAGENET_PHOTO_NAMES: tuple[str, ...] = ("astronaut", "coffee", "chelsea", "rocket", "stereo_motorcycle",
                                          "hubble_deep_field", "immunohistochemistry", "retina")


def _load_photo(name: str) -> torch.Tensor | None:
    """(3, H, W) float32 in [0, 1], or None when scikit-image cannot give an RGB photo of that name offline."""
    try:
        import numpy as np
        from skimage import data

        arr = getattr(data, name)()
        if isinstance(arr, tuple):
            arr = arr[0]
        arr = np.asarray(arr)
    except (ImportError, AttributeError, OSError, ValueError, RuntimeError):
        return None
    if arr.ndim != 3 or arr.shape[-1] != 3 or arr.dtype != np.uint8:
        return None
    return torch.from_numpy(np.ascontiguousarray(arr)).permute(2, 0, 1).float().div(255.0)


def imagenet_photo_views(n_views: int = 20, size: int = 224, seed: int = 0, *,
                         return_names: bool = False) -> torch.Tensor | tuple[torch.Tensor, tuple[str, ...]]:
    """Seeded augmented views of scikit-image's colour photos, for :func:`imagenet_top1_retention` (offline).

    Each photo of :data:`IMAGENET_PHOTO_NAMES` that loads (others are skipped) is resized so its short side is
    ``size`` (bilinear, anti-aliased), centre-cropped to ``size`` × ``size``, then augmented ``n_views`` times with
    :func:`simple_augment` (random square crop of 60–100% of the side, flip, brightness/contrast jitter, light
    noise). Photo ``i`` of that list uses its own generator seeded with ``seed · 1000 + i``, so a photo's views do
    not depend on which other photos loaded. These photos carry **no ImageNet labels**: use them for agreement with
    the raw model's own top-1, not for accuracy.

    Args:
        n_views: views per photo, >= 1.
        size: side of the square output, >= 16.
        seed: seeds the augmentation.
        return_names: also return the source photo's name of each view.

    Returns:
        (P · n_views, 3, size, size) float32 tensor in [0, 1], photo-major (all views of the first photo first); with
        ``return_names`` also a tuple of P · n_views photo names.

    Raises:
        InvalidArgumentError: bad ``n_views``, ``size`` or ``seed``.
        MissingResourceError: scikit-image gives none of the photos.
    """
    n_views = check_int("n_views", n_views, minimum=1)
    size = check_int("size", size, minimum=16)
    seed = check_int("seed", seed, minimum=0)
    views, names = [], []
    for i, name in enumerate(IMAGENET_PHOTO_NAMES):
        photo = _load_photo(name)
        if photo is None:
            continue
        h, w = photo.shape[-2:]
        scale = size / min(h, w)
        nh, nw = max(size, round(h * scale)), max(size, round(w * scale))
        x = resize(photo[None], (nh, nw))
        top, left = (nh - size) // 2, (nw - size) // 2
        x = x[..., top : top + size, left : left + size].clamp(0.0, 1.0)
        gen = torch.Generator().manual_seed(seed * 1000 + i)
        views.append(simple_augment(x.expand(n_views, -1, -1, -1).contiguous(), generator=gen))
        names.extend([name] * n_views)
    if not views:
        raise MissingResourceError("scikit-image's colour photos (skimage.data.astronaut, coffee, ...)",
                                   expected_at="<site-packages>/skimage/data",
                                   how_to_get="Install scikit-image (`pip install scikit-image`).")
    out = torch.cat(views).float()
    return (out, tuple(names)) if return_names else out
