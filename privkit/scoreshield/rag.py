"""DP retrieval for retrieval-augmented generation: the retrieval stage of ScoreShield's DP-RAG (regime i).

A question's cosine scores against a private collection of text chunks are released with
:func:`~privkit.scoreshield.release_scores` (Gaussian noise at Δ = 2, then clipping to [−1, 1]), and the
paper's retrieval rule is applied to the released scores (docs/scoreshield.md §6):

* keep the chunks whose released score is ≥ τ;
* of those, take the k with the highest scores;
* break ties by index (the lower chunk index first).

The rule reads nothing but the released scores, so the retrieved *indices* are post-processing and carry the
release's guarantee unchanged. The *text* of the retrieved chunks, once handed to a generator, is the private
records themselves: the guarantee does not cover it, and :func:`private_retrieve` says so in its guarantee's notes.

The paper's three settings are :data:`PAPER_RETRIEVAL_SETTINGS`: (τ, k) = (0.35, 20), (0.25, 50), (0.25, 10).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from .._validate import check_int, check_real, check_tensor
from ..errors import InvalidArgumentError, ShapeError
from ..privacy import PrivacyGuarantee
from .release import ScoreRelease, release_scores

__all__ = ["PAPER_RETRIEVAL_SETTINGS", "RETRIEVAL_NOT_COVERED", "PrivateRetrieval", "retrieve", "gold_mask",
           "retrieval_recall", "retrieved_count", "private_retrieve", "random_retrieval_recall"]

#: The paper's (τ, k) retrieval settings: its default (0.35, 20), and (0.25, 50), (0.25, 10).
PAPER_RETRIEVAL_SETTINGS: tuple[tuple[float, int], ...] = ((0.35, 20), (0.25, 50), (0.25, 10))

#: What the retrieval guarantee does not cover (added to the notes of :func:`private_retrieve`'s guarantee).
RETRIEVAL_NOT_COVERED = (
    "the retrieved chunk indices are post-processing of the released scores and carry this guarantee; "
    "the TEXT of the retrieved chunks, if given to a generator, is the private records themselves and is NOT "
    "covered by it"
)


def retrieve(scores: torch.Tensor, *, tau: float, k: int) -> torch.Tensor:
    """The paper's retrieval rule: scores ≥ ``tau``, the top ``k`` of them, ties broken by the lower index.

    Args:
        scores: released (or clean) scores, shape ``(n,)`` for one query or ``(m, n)`` for m queries; finite
            floating-point values (cosine scores lie in [−1, 1], but any finite value is accepted).
        tau: the score threshold τ, a real number in [−1, 1]; a chunk is kept when its score is ≥ τ.
        k: the most chunks returned per query, an integer ≥ 1.

    Returns:
        int64 indices of shape ``(k,)`` or ``(m, k)``, on the scores' device: the retrieved chunks in rank order
        (highest score first, equal scores in increasing index order), padded with ``-1`` where fewer than ``k``
        chunks reach τ.

    Raises:
        InvalidArgumentError: non-tensor or non-finite scores, τ outside [−1, 1], k not an integer ≥ 1.
        ShapeError: scores of rank other than 1 or 2, or with no chunk.
    """
    check_tensor("scores", scores, ndim=(1, 2), floating=True)
    t = check_real("tau", tau)
    if not -1.0 <= t <= 1.0:
        raise InvalidArgumentError(f"tau must lie in [-1, 1] (a cosine-score threshold), got {t}")
    k = check_int("k", k, minimum=1)
    if scores.shape[-1] < 1:
        raise ShapeError(f"scores must hold at least one chunk score per query, got shape {tuple(scores.shape)}")
    single = scores.ndim == 1
    s = scores.unsqueeze(0) if single else scores
    m, n = s.shape
    # A stable descending sort keeps equal scores in their original (increasing index) order: ties go to the
    # lower index, whatever the platform's sort kernel.
    order = torch.sort(s, dim=1, descending=True, stable=True).indices
    kk = min(k, n)
    top = order[:, :kk]
    passes = torch.gather(s, 1, top) >= t
    out = torch.full((m, k), -1, dtype=torch.int64, device=s.device)
    out[:, :kk] = torch.where(passes, top, torch.full_like(top, -1))
    return out[0] if single else out


def gold_mask(gold: Sequence[Sequence[int]], n: int) -> torch.Tensor:
    """A ``(m, n)`` bool mask from one sequence of gold chunk indices per query.

    Raises:
        InvalidArgumentError: a query without gold chunks, or an index outside [0, n − 1].
    """
    n = check_int("n", n, minimum=1)
    if isinstance(gold, (str, bytes)) or not isinstance(gold, Sequence) or len(gold) == 0:
        raise InvalidArgumentError("gold must be a non-empty sequence with one sequence of chunk indices per query")
    mask = torch.zeros(len(gold), n, dtype=torch.bool)
    for q, g in enumerate(gold):
        if isinstance(g, (str, bytes)) or not isinstance(g, Sequence) or len(g) == 0:
            raise InvalidArgumentError(f"gold[{q}] must be a non-empty sequence of chunk indices, got {g!r}")
        for j in g:
            if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < n:
                raise InvalidArgumentError(f"gold[{q}] holds {j!r}; chunk indices must be integers in [0, {n - 1}]")
            mask[q, j] = True
    return mask


def _check_retrieved(retrieved: torch.Tensor) -> torch.Tensor:
    check_tensor("retrieved", retrieved, ndim=(1, 2))
    if retrieved.is_floating_point() or retrieved.dtype == torch.bool:
        raise InvalidArgumentError(f"retrieved must hold integer chunk indices (-1 = none), got dtype {retrieved.dtype}")
    return retrieved.unsqueeze(0) if retrieved.ndim == 1 else retrieved


def retrieval_recall(retrieved: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """Recall of the gold chunks per query: |retrieved ∩ gold| / |gold|.

    Args:
        retrieved: the output of :func:`retrieve`, ``(k,)`` or ``(m, k)`` int64 indices, ``-1`` for none.
        gold: ``(n,)`` or ``(m, n)`` bool mask of each query's gold chunks (:func:`gold_mask`); every query
            needs at least one gold chunk.

    Returns:
        float64 recall in [0, 1], shape ``(m,)`` (``(1,)`` for a single query).

    Raises:
        InvalidArgumentError, ShapeError: mismatched shapes, a query without gold chunks, indices outside
            [−1, n − 1].
    """
    r = _check_retrieved(retrieved)
    check_tensor("gold", gold, ndim=(1, 2))
    if gold.dtype != torch.bool:
        raise InvalidArgumentError(f"gold must be a bool mask (see gold_mask), got dtype {gold.dtype}")
    g = gold.unsqueeze(0) if gold.ndim == 1 else gold
    if g.shape[0] != r.shape[0]:
        raise ShapeError(f"retrieved has {r.shape[0]} queries but gold has {g.shape[0]}")
    n = g.shape[1]
    if r.numel() and (int(r.min()) < -1 or int(r.max()) >= n):
        raise InvalidArgumentError(f"retrieved indices must lie in [-1, {n - 1}] (-1 = no chunk)")
    n_gold = g.sum(1)
    if bool((n_gold == 0).any()):
        q = int(torch.nonzero(n_gold == 0)[0])
        raise InvalidArgumentError(f"gold row {q} has no gold chunk; recall is undefined for it")
    # mark the retrieved chunks (column 0 collects the -1 padding and is dropped); a chunk listed twice counts once
    selected = torch.zeros(r.shape[0], n + 1, dtype=torch.bool, device=r.device)
    selected.scatter_(1, r + 1, True)
    hits = (selected[:, 1:] & g.to(r.device)).sum(1)
    return hits.double() / n_gold.to(r.device).double()


def retrieved_count(retrieved: torch.Tensor) -> torch.Tensor:
    """How many chunks were retrieved per query (entries other than ``-1``), int64 of shape ``(m,)``."""
    r = _check_retrieved(retrieved)
    return (r >= 0).sum(1)


@dataclass(frozen=True)
class PrivateRetrieval:
    """Result of :func:`private_retrieve`.

    Attributes:
        indices: the retrieved chunks, ``(k,)`` or ``(m, k)`` int64, ``-1`` padded (see :func:`retrieve`).
        release: the DP release of the score vectors the rule was applied to.
        guarantee: the release's guarantee, with a note on what it does not cover
            (:data:`RETRIEVAL_NOT_COVERED`).
        tau, k: the rule's parameters.
    """

    indices: torch.Tensor
    release: ScoreRelease
    guarantee: PrivacyGuarantee
    tau: float
    k: int


def private_retrieve(queries: torch.Tensor, chunks: torch.Tensor, *, tau: float, k: int, epsilon: float, delta: float,
                     calibration: Literal["scoreshield", "analytic"] = "analytic",
                     accounting: Literal["joint", "per_query"] = "joint",
                     generator: torch.Generator | None = None) -> PrivateRetrieval:
    """Release each query's chunk scores with :func:`release_scores`, then apply :func:`retrieve`.

    Args:
        queries: public unit query embeddings, ``(d,)`` or ``(m, d)``.
        chunks: the private collection's unit chunk embeddings, ``(n, d)``; one chunk is one record.
        tau, k: the retrieval rule (see :func:`retrieve`).
        epsilon, delta, calibration, generator: passed to :func:`release_scores` (``"analytic"``, the default,
            meets the request; ``"scoreshield"`` reproduces the paper's σ, and the guarantee then reports the δ that
            truly holds).
        accounting: ``"joint"`` (default, as :func:`release_scores`: one guarantee for all m questions, which is
            what this call returns) or ``"per_query"`` (the paper's reading, each question its own release: the
            headline guarantee is per question and its notes give the δ of all m together).

    Returns:
        A :class:`PrivateRetrieval` whose guarantee is the release's, with :data:`RETRIEVAL_NOT_COVERED` added to
        its notes.
    """
    release = release_scores(queries, chunks, epsilon=epsilon, delta=delta, calibration=calibration,
                             generator=generator, accounting=accounting)
    indices = retrieve(release.scores, tau=tau, k=k)
    guarantee = dataclasses.replace(release.guarantee, notes=release.guarantee.notes + (RETRIEVAL_NOT_COVERED,))
    return PrivateRetrieval(indices=indices, release=release, guarantee=guarantee, tau=float(tau), k=int(k))


def random_retrieval_recall(n: int, k: int) -> float:
    """Expected recall of k chunks drawn uniformly at random from n (k/n, at most 1): the no-information floor."""
    n = check_int("n", n, minimum=1)
    k = check_int("k", k, minimum=1)
    return min(1.0, k / n)
