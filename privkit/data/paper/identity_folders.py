"""Folder-per-identity face sets (``root/<identity>/<image>``, the layout of VGGFace2 and LFW) and the identity
selection of "X-20"-style protocols (:class:`IdentitySelection`, :func:`select_identities`)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..._validate import check_choice, check_int, check_nonnegative, check_tensor
from ...errors import InsufficientDataError, InvalidArgumentError, MissingResourceError
from ..types import FaceSet
from .common import (_CROPS, IMAGE_EXTENSIONS, CropMode, PathLike, _as_root, _build_faceset, _check_budget, _check_size,
                     _check_workers, _contiguous_ids, _generator, _resolve_max_images)

__all__ = ["IdentitySelection", "select_identities", "load_identity_folders"]


@dataclass(frozen=True, kw_only=True)
class IdentitySelection:
    """Which identities and images a face loader keeps: an "X-20"-style protocol (see :func:`select_identities`).

    CelebA-20 as privkit defines it [I] is ``IdentitySelection(min_images=20, n_identities=480,
    images_per_identity=20)``. With all three fields ``None`` (the default) a loader keeps every image; otherwise
    a missing ``min_images`` means 1. The values are checked when the selection is drawn.

    Attributes:
        min_images: minimum images per eligible identity.
        n_identities: number of identities to draw, or ``None`` for all eligible ones.
        images_per_identity: images to draw per kept identity, or ``None`` for all.
    """

    min_images: int | None = None
    n_identities: int | None = None
    images_per_identity: int | None = None

    @property
    def active(self) -> bool:
        """Whether any field is set (otherwise the loader keeps every image)."""
        return self.min_images is not None or self.n_identities is not None or self.images_per_identity is not None

    def rows(self, identity: torch.Tensor, *, seed: int | torch.Generator,
             names: Sequence[str] | None = None) -> torch.Tensor:
        """The sorted rows of ``identity`` this selection keeps (drawn by :func:`select_identities`; ``names``
        only names identities in its error messages)."""
        return select_identities(identity, min_images=self.min_images or 1, n_identities=self.n_identities,
                                 images_per_identity=self.images_per_identity, seed=seed, names=names)

    def as_dict(self) -> dict[str, int | None]:
        """The three fields, as recorded in a loaded set's ``meta["selection"]``."""
        return asdict(self)


def select_identities(identity: torch.Tensor, *, min_images: int = 20, n_identities: int | None = None,
                      images_per_identity: int | None = None, seed: int | torch.Generator,
                      names: Sequence[str] | None = None) -> torch.Tensor:
    """Choose rows for an "X-20"-style protocol (e.g. CelebA-20: identities with at least 20 images).

    Identities with at least ``max(min_images, images_per_identity)`` rows are eligible. If ``n_identities``
    is given, that many eligible identities are drawn at random (otherwise all are kept); if
    ``images_per_identity`` is given, that many rows of each kept identity are drawn at random (otherwise all
    are kept). CelebA-20 as privkit defines it [I] is ``min_images=20, images_per_identity=20``
    with ``n_identities=480`` for the paper's 320/80/80 identity split.

    Args:
        identity: (N,) integer identity labels (any values).
        min_images: minimum rows per eligible identity, >= 1.
        n_identities: number of identities to draw, or ``None`` for all eligible.
        images_per_identity: rows to draw per identity, or ``None`` for all.
        seed: integer seed or a ``torch.Generator`` (CPU) used for both draws.
        names: optional name of each label value ``0 .. len(names)-1`` (e.g. folder names), used only to name the
            identities that fall short in error messages; without it they are named by their label.

    Returns:
        (M,) int64 indices into ``identity``, sorted ascending.

    Raises:
        InvalidArgumentError: bad arguments.
        InsufficientDataError: fewer eligible identities than ``n_identities`` (or none at all).
    """
    check_tensor("identity", identity, ndim=1)
    if identity.is_floating_point() or identity.is_complex() or identity.dtype == torch.bool:
        raise InvalidArgumentError(f"identity must hold integer labels, got dtype {identity.dtype}")
    min_images = check_int("min_images", min_images, minimum=1)
    if n_identities is not None:
        n_identities = check_int("n_identities", n_identities, minimum=1)
    if images_per_identity is not None:
        images_per_identity = check_int("images_per_identity", images_per_identity, minimum=1)
    gen = _generator(seed)
    ids = identity.detach().to("cpu", torch.int64)
    threshold = max(min_images, images_per_identity or 0)
    order = torch.sort(ids, stable=True).indices
    uniq, counts = torch.unique_consecutive(ids[order], return_counts=True)
    starts = torch.cumsum(counts, 0) - counts
    eligible = torch.nonzero(counts >= threshold).flatten()

    def short_of_threshold() -> str:
        # the identities closest to qualifying (most images first), named, so the message says which ones fall short
        n_rows, values = counts.tolist(), uniq.tolist()
        short = [g for g in torch.argsort(counts, descending=True, stable=True).tolist() if n_rows[g] < threshold]
        if not short:
            return ""

        def label(g: int) -> str:
            v = values[g]
            return repr(str(names[v])) if names is not None and 0 <= v < len(names) else str(v)

        listed = ", ".join(f"identity {label(g)} has {n_rows[g]}" for g in short[:5])
        more = f" and {len(short) - 5} more" if len(short) > 5 else ""
        return f"; short of {threshold}: {listed}{more}"

    if eligible.numel() == 0:
        raise InsufficientDataError(
            f"select_identities: need at least 1 identity with >= {threshold} images; the largest has "
            f"{int(counts.max()) if counts.numel() else 0}{short_of_threshold()}"
        )
    if n_identities is not None:
        if eligible.numel() < n_identities:
            raise InsufficientDataError(
                f"select_identities: need at least {n_identities} identities with >= {threshold} images "
                f"(n_identities), got {eligible.numel()}{short_of_threshold()}"
            )
        pick = torch.randperm(eligible.numel(), generator=gen)[:n_identities]
        eligible = eligible[pick].sort().values
    chosen: list[torch.Tensor] = []
    for g in eligible.tolist():
        rows = order[int(starts[g]) : int(starts[g]) + int(counts[g])]
        if images_per_identity is not None:
            rows = rows[torch.randperm(rows.numel(), generator=gen)[:images_per_identity]]
        chosen.append(rows)
    return torch.cat(chosen).sort().values


def _check_selection(selection: Any) -> IdentitySelection:
    if selection is None:
        return IdentitySelection()
    if not isinstance(selection, IdentitySelection):
        raise InvalidArgumentError(f"selection must be an IdentitySelection or None, got {type(selection).__name__}")
    return selection


def _check_face_args(size: Any, crop: Any, margin: Any, selection: Any, num_workers: Any, max_images: Any
                     ) -> tuple[int, str, float, IdentitySelection, int, int]:
    """The arguments the folder-per-identity and CelebA loaders share, checked in this order; the last value returned
    is the image cap (``max_images`` or its default)."""
    size = _check_size(size)
    return (size, check_choice("crop", crop, _CROPS), check_nonnegative("margin", margin), _check_selection(selection),
            _check_workers(num_workers), _resolve_max_images(max_images, size))


def _scan_identity_folders(root: Path, what: str, how_to_get: str) -> tuple[list[str], list[str]]:
    """(relative image paths, identity folder of each), both sorted; a MissingResourceError(``what``, ``how_to_get``)
    if there are none."""
    rels: list[str] = []
    owners: list[str] = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for f in sorted(d.iterdir()):
            if f.is_file() and f.suffix.lower() in IMAGE_EXTENSIONS and not f.name.startswith("."):
                rels.append(f"{d.name}/{f.name}")
                owners.append(d.name)
    if not rels:
        raise MissingResourceError(what, expected_at=str(root), how_to_get=how_to_get)
    return rels, owners


def load_identity_folders(root: PathLike, *, size: int = 64, crop: CropMode = "center", margin: float = 0.25,
                          boxes: Mapping[str, Sequence[float]] | None = None,
                          selection: IdentitySelection | None = None, max_images: int | None = None,
                          seed: int | torch.Generator = 0, name: str | None = None, num_workers: int = 0,
                          progress: bool = False) -> FaceSet:
    """Load a "folder per identity" image tree (``root/<identity>/<image>``), as used by VGGFace2 and LFW.

    Args:
        root: the folder holding one sub-folder per identity.
        size: output image side in pixels, in [8, 4096].
        crop: ``"center"``, ``"full"`` or ``"box"`` (see :mod:`privkit.data.paper`).
        margin: for ``crop="box"``, the fraction of the box side added on each side, >= 0.
        boxes: optional face boxes, xyxy in source pixels, keyed by ``"<identity>/<file stem>"`` (e.g.
            ``"n000001/0001_01"``). Images without a box get the whole source image as their box.
        selection: which identities and images to keep (:class:`IdentitySelection`); ``None`` loads all
            images.
        max_images: refuse to decode more images than this (default: :func:`default_max_images`).
        seed: seed of the selection draws.
        name: dataset name for the FaceSet (default: the folder name).
        num_workers: threads decoding images (0: decode in this thread).
        progress: show a tqdm progress bar.

    Returns:
        A FaceSet; identity ids are 0..k-1 in sorted folder-name order, ``meta["identity_names"]`` gives
        the folder name of each id and ``meta["files"]`` the relative path of each row.

    Raises:
        MissingResourceError: ``root`` does not exist or holds no images.
        InvalidArgumentError, InsufficientDataError: bad arguments, too many images, too few identities.
    """
    root = _as_root(root)
    size, crop, margin, selection, num_workers, cap = _check_face_args(size, crop, margin, selection, num_workers,
                                                                      max_images)
    if not root.is_dir():
        raise MissingResourceError("An image folder with one sub-folder per identity", expected_at=str(root),
                                   how_to_get="Point root at a folder laid out as root/<identity>/<image>.jpg.")
    rels, owners = _scan_identity_folders(root, f"Images ({', '.join(IMAGE_EXTENSIONS)}) in per-identity sub-folders",
                                          "Check that the archive was fully extracted.")
    return _load_selected_folders(root, rels, owners, size=size, crop=crop, margin=margin, boxes=boxes,
                                  selection=selection, cap=cap, seed=seed, name=name or root.name,
                                  num_workers=num_workers, progress=progress, meta={}, attributes_by_owner=None)


def _load_selected_folders(root: Path, rels: list[str], owners: list[str], *, size: int, crop: str, margin: float,
                           boxes: Mapping[str, Sequence[float]] | None, selection: IdentitySelection, cap: int,
                           seed: int | torch.Generator, name: str, num_workers: int, progress: bool, meta: dict,
                           attributes_by_owner: Mapping[str, Mapping[str, int]] | None) -> FaceSet:
    if selection.active:
        owner_ids, owner_names = _contiguous_ids(owners)
        rows = selection.rows(owner_ids, seed=seed, names=owner_names).tolist()
    else:
        rows = list(range(len(rels)))
    _check_budget(len(rows), cap, name)
    sel_rels = [rels[i] for i in rows]
    sel_owners = [owners[i] for i in rows]
    box_list: list[Sequence[float] | None] = [None] * len(rows)
    if boxes is not None:
        if not isinstance(boxes, Mapping):
            raise InvalidArgumentError(f"boxes must map '<identity>/<file stem>' to xyxy boxes, got "
                                       f"{type(boxes).__name__}")
        for k, r in enumerate(sel_rels):
            b = boxes.get(os.path.splitext(r)[0])
            if b is None:
                continue
            v = np.asarray(b, dtype=np.float64).reshape(-1)
            if v.size != 4 or not np.isfinite(v).all() or v[2] <= v[0] or v[3] <= v[1]:
                raise InvalidArgumentError(f"boxes[{os.path.splitext(r)[0]!r}] must be 4 finite numbers x0 < x1, "
                                           f"y0 < y1, got {b!r}")
            box_list[k] = v.tolist()
    n_boxed = sum(b is not None for b in box_list)
    attributes: dict[str, torch.Tensor] = {}
    for k in sorted({k for v in (attributes_by_owner or {}).values() for k in v}):
        vals = [attributes_by_owner.get(o, {}).get(k, -1) for o in sel_owners]
        attributes[k] = torch.tensor(vals, dtype=torch.int64)
    meta = dict(meta)
    meta.update(
        source=str(root),
        files=sel_rels,
        seed=seed if isinstance(seed, int) else None,
        selection=selection.as_dict(),
        box_source=(
            "dataset boxes" if n_boxed == len(rows) else
            "whole source image (no boxes)" if n_boxed == 0 else
            f"dataset boxes for {n_boxed} images, whole source image for {len(rows) - n_boxed}"
        ),
    )
    return _build_faceset([root / r for r in sel_rels], sel_owners, box_list, size=size, crop=crop, margin=margin,
                          name=name, meta=meta, num_workers=num_workers, progress=progress, attributes=attributes)
