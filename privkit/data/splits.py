"""Open-set identity splits.

The ISP protocol (docs/isp.md §3) is strictly open-set: probes are fitted on one set of identities, every
hyperparameter and threshold is fixed on a second, disjoint set, and results are reported on a third. privkit names
the three parts:

* ``"train"`` -- the probe-fit identities (the attacker's labelled data; 320 identities in the paper),
* ``"val"`` -- the validation identities (hyperparameters and the threshold tau; 80 in the paper),
* ``"test"`` -- the test identities (reported numbers; 80 in the paper).

``"all"`` means no split. Splits are made over *identities*, never over images, so no person appears in two parts,
and they are a seeded function of the set of identity ids only (not of their order or of the images).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .._validate import check_choice, check_int, check_real, check_tensor
from ..errors import InsufficientDataError, InvalidArgumentError
from .types import FaceSet

__all__ = ["SPLITS", "SPLIT_PARTS", "DEFAULT_FRACTIONS", "identity_splits", "split_faceset"]

#: The three disjoint parts, in order.
SPLIT_PARTS: tuple[str, ...] = ("train", "val", "test")
#: Every value the ``split=`` argument of the loaders accepts.
SPLITS: tuple[str, ...] = ("all",) + SPLIT_PARTS
#: Default identity fractions for (train, val, test).
DEFAULT_FRACTIONS: tuple[float, float, float] = (0.6, 0.2, 0.2)


def _part_counts(n: int, fractions: Sequence[float] | None, counts: Sequence[int] | None) -> tuple[int, int, int]:
    """Number of identities in train/val/test."""
    if fractions is not None and counts is not None:
        raise InvalidArgumentError("give either fractions or counts, not both")
    if counts is not None:
        if isinstance(counts, (str, bytes)) or not isinstance(counts, Sequence) or len(counts) != 3:
            raise InvalidArgumentError(f"counts must be a sequence of 3 integers (train, val, test), got {counts!r}")
        c = tuple(check_int(f"counts[{i}]", v, minimum=0) for i, v in enumerate(counts))
        if sum(c) > n:
            raise InsufficientDataError(
                f"counts: the three parts need {sum(c)} identities in all, but only {n} distinct identities exist"
            )
        if sum(c) == 0:
            raise InvalidArgumentError("counts must not all be 0")
        return c  # type: ignore[return-value]
    fr = DEFAULT_FRACTIONS if fractions is None else fractions
    if isinstance(fr, (str, bytes)) or not isinstance(fr, Sequence) or len(fr) != 3:
        raise InvalidArgumentError(f"fractions must be a sequence of 3 numbers (train, val, test), got {fr!r}")
    f = [check_real(f"fractions[{i}]", v) for i, v in enumerate(fr)]
    if any(v < 0 for v in f):
        raise InvalidArgumentError(f"fractions must be >= 0 (allowed range: [0, 1]), got {tuple(f)}")
    if abs(sum(f) - 1.0) > 1e-6:
        raise InvalidArgumentError(f"fractions must sum to 1, got {tuple(f)} (sum {sum(f):.6g})")
    # Largest-remainder rounding: the counts sum to n exactly.
    raw = [v * n for v in f]
    c = [math.floor(r) for r in raw]
    order = sorted(range(3), key=lambda i: (-(raw[i] - c[i]), i))
    for i in order[: n - sum(c)]:
        c[i] += 1
    for name, v, k in zip(SPLIT_PARTS, f, c):
        if v > 0 and k == 0:
            raise InsufficientDataError(
                f"fractions: the {name!r} part (fraction {v:g}) gets no identity out of {n}; "
                "use more identities or larger fractions")
    return c[0], c[1], c[2]


def identity_splits(identity: torch.Tensor, *, fractions: Sequence[float] | None = None,
                    counts: Sequence[int] | None = None, seed: int = 0) -> dict[str, torch.Tensor]:
    """Split the distinct identities into disjoint train / val / test sets.

    Args:
        identity: (N,) integer tensor of identity labels (one per image, repeats allowed) or of distinct ids.
        fractions: fractions of identities in (train, val, test), each >= 0, summing to 1. Default (0.6, 0.2, 0.2).
            Counts are rounded by largest remainder so that every identity is assigned to exactly one part.
        counts: exact numbers of identities (train, val, test), e.g. (320, 80, 80) for the ISP protocol; they may
            sum to fewer than the number of identities, in which case the rest belong to no part.
        seed: seed of the permutation. The result depends only on the *set* of ids and the seed.

    Returns:
        ``{"train": ids, "val": ids, "test": ids}``: sorted int64 tensors of identity ids on ``identity``'s device,
        pairwise disjoint.

    Raises:
        InvalidArgumentError: bad fractions/counts or a non-integer identity tensor.
        InsufficientDataError: too few identities for the requested parts.
    """
    check_tensor("identity", identity, ndim=1)
    if identity.is_floating_point() or identity.is_complex() or identity.dtype == torch.bool:
        raise InvalidArgumentError(f"identity must be an integer tensor, got dtype {identity.dtype}")
    seed = check_int("seed", seed)
    ids = torch.unique(identity.detach().to("cpu", torch.int64))  # sorted
    n = int(ids.numel())
    if n == 0:
        raise InsufficientDataError("identity: need at least 1 identity, got 0")
    c = _part_counts(n, fractions, counts)
    g = torch.Generator().manual_seed(seed)
    perm = ids[torch.randperm(n, generator=g)]
    out: dict[str, torch.Tensor] = {}
    start = 0
    for name, k in zip(SPLIT_PARTS, c):
        out[name] = perm[start : start + k].sort().values.to(identity.device)
        start += k
    return out


def split_faceset(faceset: FaceSet, split: str, *, seed: int = 0, fractions: Sequence[float] | None = None,
                  counts: Sequence[int] | None = None, relabel: bool = False) -> FaceSet:
    """The images of one identity split of a :class:`FaceSet`.

    Args:
        faceset: the set to split.
        split: ``"all"`` (returns the set unchanged, with ``meta["split"] = "all"``), ``"train"``, ``"val"`` or
            ``"test"``.
        seed: split seed (see :func:`identity_splits`).
        fractions: identity fractions (train, val, test); see :func:`identity_splits`.
        counts: identity counts (train, val, test); see :func:`identity_splits`.
        relabel: keep the original identity ids (``False``, the default, so ids stay comparable across the three
            parts) or map them to 0..m-1 (``True``); the original ids are then kept, in order, in
            ``meta["identity_names"]``.

    Returns:
        A new :class:`FaceSet` with the rows whose identity belongs to ``split``; ``meta`` gains ``"split"``,
        ``"split_seed"`` and ``"split_identities"`` (the ids of the part, as a list).
    """
    if not isinstance(faceset, FaceSet):
        raise InvalidArgumentError(f"faceset must be a FaceSet, got {type(faceset).__name__}")
    check_choice("split", split, SPLITS)
    if split == "all":
        out = faceset.subset(torch.arange(len(faceset), device=faceset.identity.device))
        out.meta["split"] = "all"
        return out
    parts = identity_splits(faceset.identity, fractions=fractions, counts=counts, seed=seed)
    keep_ids = parts[split]
    rows = torch.isin(faceset.identity, keep_ids)
    out = faceset.subset(rows)
    out.meta.update(split=split, split_seed=int(seed), split_identities=keep_ids.tolist())
    if relabel:
        names, inverse = torch.unique(out.identity, return_inverse=True)
        out.identity = inverse.to(torch.int64)
        out.meta["identity_names"] = names.tolist()
    return out
