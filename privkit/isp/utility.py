"""What a sanitising projection keeps (paper 1, docs/isp.md §6): kNN retention and copy-detection retrieval.

* :func:`knn_accuracy` / :func:`knn_retention` — cosine k-nearest-neighbour accuracy on *non-identity* labels (the
  paper uses ImageNet classes) before and after a transform, reported as a percentage of the raw encoder
  (raw = 100).
* :func:`copy_detection_metrics` / :func:`copy_detection_eval` — copy detection in the spirit of DISC21: augmented
  copies of reference images are the queries, the originals the database; Recall@1 (the top-ranked reference is the
  source) and mean average precision (per query, the mean of precision at the rank of each relevant reference; with
  one source per query this is the reciprocal rank). The paper gives no copy-detection numbers; the augmentation,
  :func:`simple_augment`, is privkit's (a caller may pass their own).

The subspace comparison (:func:`~privkit.isp.projection.principal_angles`) lives with the projectors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import pandas as pd
import torch

from .._validate import check_choice, check_int, check_positive, check_tensor
from ..errors import InsufficientDataError, InvalidArgumentError, ShapeError
from .attribution import EncoderLike, _check_images, embed_images

__all__ = [
    "knn_accuracy",
    "Retention",
    "knn_retention",
    "simple_augment",
    "copy_detection_metrics",
    "copy_detection_eval",
]

Transform = Callable[[torch.Tensor], torch.Tensor]


def _check_labelled(name: str, emb: torch.Tensor, labels: torch.Tensor) -> None:
    check_tensor(f"{name}_emb", emb, ndim=2, floating=True)
    check_tensor(f"{name}_labels", labels, shape=(emb.shape[0],))
    if labels.is_floating_point():
        raise InvalidArgumentError(f"{name}_labels must be an integer tensor, got dtype {labels.dtype}")
    if emb.shape[0] == 0:
        raise InsufficientDataError(f"{name}_emb: need at least 1 row, got 0")


@torch.no_grad()
def knn_accuracy(
    train_emb: torch.Tensor,
    train_labels: torch.Tensor,
    test_emb: torch.Tensor,
    test_labels: torch.Tensor,
    *,
    k: int = 20,
    weighting: Literal["uniform", "similarity"] = "uniform",
    temperature: float = 0.07,
    chunk_size: int = 1024,
) -> float:
    """Cosine kNN top-1 accuracy of ``test`` against the labelled ``train`` bank.

    Rows are L2-normalised here. ``weighting="uniform"`` is a majority vote of the k neighbours;
    ``"similarity"`` weights each vote by exp(cos / ``temperature``) (the DINO kNN protocol). Vote ties go to the
    smallest label value.
    """
    _check_labelled("train", train_emb, train_labels)
    _check_labelled("test", test_emb, test_labels)
    if train_emb.shape[1] != test_emb.shape[1]:
        raise ShapeError(f"train_emb and test_emb must have the same width, got {train_emb.shape[1]} and {test_emb.shape[1]}")
    k = check_int("k", k, minimum=1, maximum=train_emb.shape[0])
    weighting = check_choice("weighting", weighting, ("uniform", "similarity"))
    temperature = check_positive("temperature", temperature)
    chunk_size = check_int("chunk_size", chunk_size, minimum=1)
    dev = train_emb.device
    a = torch.nn.functional.normalize(train_emb, dim=1)
    b = torch.nn.functional.normalize(test_emb.to(dev, a.dtype), dim=1)
    classes, tr = torch.unique(train_labels.to(dev), return_inverse=True)
    n_cls = classes.numel()
    correct = 0
    te = test_labels.to(dev)
    for s in range(0, b.shape[0], chunk_size):
        sims, idx = torch.topk(b[s : s + chunk_size] @ a.T, k, dim=1)
        w = torch.ones_like(sims) if weighting == "uniform" else torch.exp((sims - 1) / temperature)
        votes = torch.zeros(sims.shape[0], n_cls, dtype=w.dtype, device=dev).scatter_add_(1, tr[idx], w)
        pred = classes[votes.argmax(1)]
        correct += int((pred == te[s : s + chunk_size]).sum())
    return correct / b.shape[0]


@dataclass(frozen=True)
class Retention:
    """A utility metric before and after a transform; ``retention_pct`` = 100 · transformed / raw."""

    metric: str
    raw: float
    transformed: float
    retention_pct: float


def _retention(metric: str, raw: float, transformed: float) -> Retention:
    pct = 100.0 * transformed / raw if raw > 0 else math.nan
    return Retention(metric, raw, transformed, pct)


def knn_retention(
    train_emb: torch.Tensor,
    train_labels: torch.Tensor,
    test_emb: torch.Tensor,
    test_labels: torch.Tensor,
    *,
    transform: Transform,
    k: int = 20,
    weighting: Literal["uniform", "similarity"] = "uniform",
    temperature: float = 0.07,
) -> Retention:
    """kNN accuracy on non-identity labels with and without ``transform`` (e.g. an :class:`IdentityProjector`).

    The transform is applied to both the bank and the queries. The paper reports ImageNet kNN retention of 85–100%
    of raw for ISP.
    """
    raw = knn_accuracy(train_emb, train_labels, test_emb, test_labels, k=k, weighting=weighting, temperature=temperature)
    with torch.no_grad():
        tr, te = transform(train_emb), transform(test_emb)
    new = knn_accuracy(tr, train_labels, te, test_labels, k=k, weighting=weighting, temperature=temperature)
    return _retention(f"knn@{k}", raw, new)


def simple_augment(images: torch.Tensor, *, generator: torch.Generator | None = None, strength: float = 1.0) -> torch.Tensor:
    """A light copy-detection augmentation (privkit's): random resized crop, flip, colour jitter, noise.

    Per image: a square crop covering 60–100% of the shorter side (scaled by ``strength``) at a random position,
    resized back bilinearly; a horizontal flip with probability ½; brightness ±0.1 and contrast ×[0.8, 1.2]; Gaussian
    pixel noise of standard deviation 0.02; clamped to [0, 1]. All randomness comes from ``generator``.
    """
    _check_images(images)
    strength = check_positive("strength", strength)
    n, _, h, w = images.shape
    dev = images.device
    out = torch.empty_like(images)
    side_min = min(h, w)
    u = torch.rand(n, 7, generator=generator)
    for i in range(n):
        frac = 1.0 - strength * 0.4 * float(u[i, 0])
        size = max(2, int(round(side_min * max(frac, 0.2))))
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
    noise = torch.randn(images.shape, generator=generator).to(dev, images.dtype) * (0.02 * strength)
    return (out + noise).clamp_(0, 1)


@torch.no_grad()
def copy_detection_metrics(
    query_emb: torch.Tensor,
    query_source: torch.Tensor,
    reference_emb: torch.Tensor,
    *,
    reference_ids: torch.Tensor | None = None,
) -> dict[str, float]:
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
    if query_emb.shape[1] != reference_emb.shape[1]:
        raise ShapeError(f"query_emb and reference_emb must have the same width, got {query_emb.shape[1]} and {reference_emb.shape[1]}")
    check_tensor("query_source", query_source, shape=(q,))
    dev = reference_emb.device
    ref_ids = torch.arange(r, device=dev) if reference_ids is None else reference_ids.to(dev)
    check_tensor("reference_ids", ref_ids, shape=(r,))
    src = query_source.to(dev)
    a = torch.nn.functional.normalize(query_emb.to(dev, reference_emb.dtype), dim=1)
    b = torch.nn.functional.normalize(reference_emb, dim=1)
    sims = a @ b.T
    order = torch.argsort(sims, dim=1, descending=True, stable=True)
    relevant = ref_ids[order] == src[:, None]  # (Q, R) relevance in ranked order
    n_rel = relevant.sum(1)
    if bool((n_rel == 0).any()):
        raise InvalidArgumentError("query_source has ids with no matching reference in reference_ids")
    hits = relevant.double().cumsum(1)
    ranks = torch.arange(1, r + 1, device=dev, dtype=torch.float64)
    ap = ((hits / ranks) * relevant.double()).sum(1) / n_rel.double()
    return {"recall_at_1": float(relevant[:, 0].double().mean()), "map": float(ap.mean()), "n_queries": q}


@torch.no_grad()
def copy_detection_eval(
    encoder: EncoderLike,
    references: torch.Tensor,
    *,
    transform: Transform | None = None,
    augment: Callable[..., torch.Tensor] | None = None,
    n_copies: int = 1,
    seed: int = 0,
    batch_size: int = 64,
) -> pd.DataFrame:
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
    r = references.shape[0]
    copies = torch.cat([aug(references, generator=gen) for _ in range(n_copies)])
    src = torch.arange(r).repeat(n_copies)
    z_ref = embed_images(encoder, references, batch_size=batch_size)
    z_q = embed_images(encoder, copies, batch_size=batch_size)
    rows = [{"embedding": "raw", **copy_detection_metrics(z_q, src, z_ref)}]
    if transform is not None:
        row = {"embedding": "transformed", **copy_detection_metrics(transform(z_q), src, transform(z_ref))}
        for key in ("recall_at_1", "map"):
            row[f"{key}_retention_pct"] = 100.0 * row[key] / rows[0][key] if rows[0][key] > 0 else math.nan
        rows.append(row)
    return pd.DataFrame(rows)
