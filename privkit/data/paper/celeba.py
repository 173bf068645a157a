"""CelebA: face images with identities, boxes and the 40 binary attributes.

Files under ``data_root``: ``celeba/`` (flat, the torchvision layout) **or** ``CelebA/Img``, ``CelebA/Anno``,
``CelebA/Eval`` (the official Google-Drive layout): ``img_align_celeba/`` (or ``img_celeba/`` for in-the-wild
images), ``identity_CelebA.txt``, ``list_attr_celeba.txt``, ``list_bbox_celeba.txt``, ``list_eval_partition.txt``,
``list_landmarks_align_celeba.txt``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from ..._validate import check_choice
from ...errors import InsufficientDataError, InvalidArgumentError, MissingResourceError
from ..types import FaceSet
from .common import (CropMode, PathLike, _as_root, _build_faceset, _check_budget, _first_existing, _format_error,
                     _landmark_boxes)
from .identity_folders import IdentitySelection, _check_face_args

__all__ = ["CelebAIndex", "read_celeba_index", "load_celeba"]

_HOW_CELEBA = (
    "Download CelebA from its official page https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html (Google Drive or "
    "Baidu links): Img/img_align_celeba.zip (aligned images; or Img/img_celeba.7z for in-the-wild images), "
    "Anno/identity_CelebA.txt, Anno/list_attr_celeba.txt, Anno/list_bbox_celeba.txt, "
    "Anno/list_landmarks_align_celeba.txt and Eval/list_eval_partition.txt. Unzip so that either "
    "DATA_ROOT/celeba/img_align_celeba/000001.jpg and DATA_ROOT/celeba/identity_CelebA.txt exist (flat layout), "
    "or keep the Drive layout DATA_ROOT/CelebA/Img/img_align_celeba/, DATA_ROOT/CelebA/Anno/, DATA_ROOT/CelebA/Eval/."
)


@dataclass(frozen=True)
class CelebAIndex:
    """CelebA's annotation files, aligned row by row with ``identity_CelebA.txt``.

    Attributes:
        image_dir: the image folder (``img_align_celeba`` or ``img_celeba``).
        filenames: image file names (``"000001.jpg"``).
        identity: (N,) int64 CelebA identity numbers (1 .. 10,177 in the full release).
        partition: (N,) int64 official split (0 train, 1 valid, 2 test), or ``None`` without
            ``list_eval_partition.txt``.
        attributes: attribute name -> (N,) int64 in {0, 1} (the file's -1 is 0), empty without
            ``list_attr_celeba.txt``.
        bbox: (N, 4) float32 xyxy boxes of the in-the-wild images (``list_bbox_celeba.txt``), or ``None``.
        landmarks: (N, 5, 2) float32 aligned-image landmarks (left eye, right eye, nose, left and right mouth
            corner; ``list_landmarks_align_celeba.txt``), or ``None``.
        aligned: whether ``image_dir`` holds the aligned images.
    """

    image_dir: Path
    filenames: tuple[str, ...]
    identity: torch.Tensor
    partition: torch.Tensor | None
    attributes: dict[str, torch.Tensor]
    bbox: torch.Tensor | None
    landmarks: torch.Tensor | None
    aligned: bool

    def __len__(self) -> int:
        return len(self.filenames)


_CELEBA_SPLITS = {"train": 0, "valid": 1, "test": 2}


def _celeba_dirs(root: Path) -> list[Path]:
    return [root / "celeba", root / "CelebA", root / "CelebA" / "Anno", root / "CelebA" / "Eval",
            root / "celeba" / "Anno", root / "celeba" / "Eval"]


def _find_celeba_file(root: Path, filename: str) -> Path | None:
    return _first_existing(d / filename for d in _celeba_dirs(root))


def _missing_celeba_file(root: Path, what: str, filename: str, drive_dir: str) -> MissingResourceError:
    """``filename`` is missing: where it goes in the flat layout (or in the Drive layout's ``drive_dir``)."""
    return MissingResourceError(what, expected_at=f"{root / 'celeba' / filename} (or {root / 'CelebA' / drive_dir}/)",
                                how_to_get=_HOW_CELEBA)


def _read_celeba_table(path: Path, n_values: int | None, *, header: bool) -> tuple[list[str], list[str], np.ndarray]:
    """Parse a CelebA list file. Returns (column names, file names, (rows, n_values) int64 values).

    ``header=True``: first line is the row count, second the column names (attr/bbox/landmark files).
    ``header=False``: rows only (identity and partition files). Parsed with pandas' C reader (the attribute
    file has 8 million values).
    """
    import pandas as pd

    columns: list[str] = []
    skip = 0
    count = None
    if header:
        try:
            with path.open(encoding="utf-8") as fh:
                first_line, second_line = fh.readline(), fh.readline()
        except UnicodeDecodeError as exc:
            raise _format_error(path, None, f"not a text file ({exc})") from None
        try:
            count = int(first_line.split()[0])
        except (ValueError, IndexError):
            raise _format_error(path, 1, f"expected the number of rows, got {first_line.strip()!r}") from None
        columns = second_line.split()
        # bbox headers start with "image_id"; the attribute and landmark headers list value names only
        if columns and columns[0] == "image_id":
            columns = columns[1:]
        if not columns:
            raise _format_error(path, 2, "expected a line of column names")
        n_values = len(columns) if n_values is None else n_values
        skip = 2
    n_cols = int(n_values or 0)
    try:
        df = pd.read_csv(path, sep=r"\s+", header=None, skiprows=skip, dtype={0: str}, engine="c", encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise _format_error(path, None, "holds no rows") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise _format_error(path, None, f"expected a file name and {n_cols} values per row ({exc})") from None
    if df.shape[1] != 1 + n_cols:
        raise _format_error(path, None, f"expected a file name and {n_cols} values per row, got {df.shape[1] - 1}")
    if count is not None and count != len(df):
        raise _format_error(path, 1, f"the file announces {count} rows but holds {len(df)} (truncated?)")
    values = df.iloc[:, 1:]
    bad_rows = values.isna().any(axis=1).to_numpy().copy()
    if not all(pd.api.types.is_integer_dtype(dt) for dt in values.dtypes):
        numeric = values.apply(pd.to_numeric, errors="coerce")
        bad_rows |= (numeric.isna() | (numeric % 1 != 0)).any(axis=1).to_numpy()
    if bad_rows.any():
        k = int(np.flatnonzero(bad_rows)[0])
        raise _format_error(path, skip + k + 1, f"expected a file name and {n_cols} integers, got "
                                                f"{' '.join(str(v) for v in df.iloc[k].tolist())!r}")
    return columns, df[0].tolist(), values.to_numpy(dtype=np.int64)


def _align(path: Path, names: list[str], values: np.ndarray, order: Sequence[str]) -> np.ndarray:
    """Rows of ``values`` (keyed by ``names``) in the order of ``order`` (identity_CelebA.txt's file names)."""
    import pandas as pd

    index = pd.Index(names)
    if not index.is_unique:
        raise _format_error(path, None, "lists some image more than once")
    pos = index.get_indexer(pd.Index(order))
    if (pos < 0).any():
        first = int(np.flatnonzero(pos < 0)[0])
        raise _format_error(path, None, f"has no row for {int((pos < 0).sum())} images of identity_CelebA.txt "
                                        f"(first: {order[first]})")
    return values[pos]


def read_celeba_index(data_root: PathLike, *, aligned: bool = True) -> CelebAIndex:
    """Read CelebA's annotation files (no images are decoded).

    ``identity_CelebA.txt`` and the image folder are required; the attribute, box, landmark and partition
    files are read when present.

    Args:
        data_root: folder holding ``celeba/`` or ``CelebA/`` (see the module docstring).
        aligned: use ``img_align_celeba/`` (``True``) or the in-the-wild ``img_celeba/`` (``False``).

    Raises:
        MissingResourceError: the identity file or the image folder is missing.
        InvalidArgumentError: a file is malformed (the message names the file and line).
    """
    root = _as_root(data_root)
    ident_path = _find_celeba_file(root, "identity_CelebA.txt")
    if ident_path is None:
        raise _missing_celeba_file(root, "CelebA's identity file identity_CelebA.txt", "identity_CelebA.txt", "Anno")
    folder = "img_align_celeba" if aligned else "img_celeba"
    image_dir = _first_existing([root / "celeba" / folder, root / "CelebA" / "Img" / folder, root / "CelebA" / folder,
                                 root / "celeba" / "Img" / folder], want_dir=True)
    if image_dir is None:
        raise MissingResourceError(f"CelebA's image folder {folder}/", how_to_get=_HOW_CELEBA,
                                   expected_at=f"{root / 'celeba' / folder} (or {root / 'CelebA' / 'Img' / folder})")
    _, filenames, ident = _read_celeba_table(ident_path, 1, header=False)
    n = len(filenames)
    if n == 0:
        raise _format_error(ident_path, None, "holds no rows")
    order = filenames
    if len(set(order)) != n:
        raise _format_error(ident_path, None, "lists some image more than once")

    partition = None
    p = _find_celeba_file(root, "list_eval_partition.txt")
    if p is not None:
        _, pn, pv = _read_celeba_table(p, 1, header=False)
        partition = torch.from_numpy(_align(p, pn, pv, order)[:, 0].copy())
        bad = ~torch.isin(partition, torch.tensor([0, 1, 2]))
        if bool(bad.any()):
            raise _format_error(p, None, "partition values must be 0 (train), 1 (valid) or 2 (test)")

    attributes: dict[str, torch.Tensor] = {}
    p = _find_celeba_file(root, "list_attr_celeba.txt")
    if p is not None:
        cols, an, av = _read_celeba_table(p, None, header=True)
        vals = _align(p, an, av, order)
        if not np.isin(vals, (-1, 1)).all():
            raise _format_error(p, None, "attribute values must be -1 or 1")
        attributes = {c: torch.from_numpy((vals[:, j] > 0).astype(np.int64)) for j, c in enumerate(cols)}

    bbox = None
    p = _find_celeba_file(root, "list_bbox_celeba.txt")
    if p is not None:
        _, bn, bv = _read_celeba_table(p, 4, header=True)
        xywh = torch.from_numpy(_align(p, bn, bv, order)).to(torch.float32)
        bbox = torch.cat((xywh[:, :2], xywh[:, :2] + xywh[:, 2:]), dim=1)

    landmarks = None
    p = _find_celeba_file(root, "list_landmarks_align_celeba.txt")
    if p is not None:
        _, ln_, lv = _read_celeba_table(p, 10, header=True)
        landmarks = torch.from_numpy(_align(p, ln_, lv, order)).to(torch.float32).reshape(n, 5, 2)

    return CelebAIndex(image_dir=image_dir, filenames=tuple(filenames), identity=torch.from_numpy(ident[:, 0].copy()),
                       partition=partition, attributes=attributes, bbox=bbox, landmarks=landmarks, aligned=aligned)


def load_celeba(data_root: PathLike, *, split: Literal["all", "train", "valid", "test"] = "all", aligned: bool = True,
                size: int = 64, crop: CropMode | None = None, margin: float = 0.25,
                selection: IdentitySelection | None = None, indices: torch.Tensor | Sequence[int] | None = None,
                max_images: int | None = None, seed: int | torch.Generator = 0, num_workers: int = 0,
                progress: bool = False) -> FaceSet:
    """Load CelebA face images with identities, boxes and the 40 binary attributes.

    Example (CelebA-20 as privkit defines it: 480 identities with >= 20 images, 20 images each)::

        selection = IdentitySelection(min_images=20, n_identities=480, images_per_identity=20)
        faces = load_celeba(root, selection=selection, seed=0)

    Boxes: aligned images (``img_align_celeba``) have no official face box (``list_bbox_celeba.txt``
    describes the in-the-wild images). If ``list_landmarks_align_celeba.txt`` is present, the box is
    privkit's [I] landmark box (see ``_landmark_boxes``: inter-ocular distance d; 0.6 d beyond the outer
    landmarks, 1.0 d above the eyes, 0.8 d below the mouth); otherwise it is the whole image. In-the-wild
    images (``aligned=False``) use ``list_bbox_celeba.txt``, which is then required. ``meta["box_source"]``
    records the rule. Masks are the boxes; context is -1 (unknown).

    Args:
        data_root: folder holding ``celeba/`` or ``CelebA/``.
        split: official partition to keep (needs ``list_eval_partition.txt`` unless ``"all"``).
        aligned: aligned (``img_align_celeba``) or in-the-wild (``img_celeba``) images.
        size: output side in pixels, in [8, 4096].
        crop: ``"center"``, ``"full"`` or ``"box"``; default ``"center"`` for aligned images (the central
            178 x 178 square) and ``"box"`` for in-the-wild images.
        margin: box enlargement per side for ``crop="box"``, >= 0.
        selection: identity selection within ``split`` (:class:`IdentitySelection`); ``None``: all rows of the
            split.
        indices: explicit rows of :func:`read_celeba_index` to load instead (then ``split`` must be
            ``"all"`` and ``selection`` ``None``).
        max_images: refuse to decode more images than this (default: :func:`default_max_images`).
        seed: seed of the selection draws.
        num_workers: image-decoding threads; progress: show a progress bar.

    Returns:
        FaceSet with identities 0..k-1 (``meta["identity_names"]`` holds the CelebA identity numbers),
        ``attributes`` holding the 40 attributes as 0/1 int64, and ``meta["files"]`` the image names.

    Raises:
        MissingResourceError: a required file is missing (the message says which and where to get it).
        InvalidArgumentError, InsufficientDataError: bad arguments, malformed files, too many images.
    """
    root = _as_root(data_root)
    split = check_choice("split", split, ("all", *_CELEBA_SPLITS))
    if crop is None:
        crop = "center" if aligned else "box"
    size, crop, margin, selection, num_workers, cap = _check_face_args(size, crop, margin, selection, num_workers,
                                                                      max_images)
    index = read_celeba_index(root, aligned=aligned)
    n = len(index)

    if indices is not None:
        if split != "all" or selection.active:
            raise InvalidArgumentError("indices cannot be combined with split or selection; select rows with "
                                       "select_identities(read_celeba_index(...).identity, ...) instead")
        rows = torch.as_tensor(indices, dtype=torch.int64).flatten()
        if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= n):
            raise InvalidArgumentError(f"indices must lie in [0, {n - 1}] (rows of the CelebA index)")
    else:
        if split == "all":
            rows = torch.arange(n)
        else:
            if index.partition is None:
                raise _missing_celeba_file(root, "CelebA's split file list_eval_partition.txt (needed for split != "
                                           "'all')", "list_eval_partition.txt", "Eval")
            rows = torch.nonzero(index.partition == _CELEBA_SPLITS[split]).flatten()
        if selection.active:
            rows = rows[selection.rows(index.identity[rows], seed=seed)]
    _check_budget(int(rows.numel()), cap, f"CelebA (split={split})")
    if rows.numel() == 0:
        raise InsufficientDataError(f"CelebA: need at least 1 image in split={split!r}, got 0")

    r = rows.tolist()
    if aligned:
        if index.landmarks is not None:
            src_boxes = _landmark_boxes(index.landmarks[rows])
            box_source = "privkit [I] box from list_landmarks_align_celeba.txt"
        else:
            src_boxes = None
            box_source = "whole image (aligned images have no official box)"
    else:
        if index.bbox is None:
            raise _missing_celeba_file(root, "CelebA's box file list_bbox_celeba.txt (needed for in-the-wild images)",
                                       "list_bbox_celeba.txt", "Anno")
        src_boxes = index.bbox[rows]
        box_source = "list_bbox_celeba.txt"
    box_list = [None] * len(r) if src_boxes is None else src_boxes.tolist()
    paths = [_celeba_image_path(index.image_dir, index.filenames[i]) for i in r]
    meta = {"source": str(index.image_dir), "files": [index.filenames[i] for i in r], "rows": r, "split": split,
            "aligned": aligned, "box_source": box_source, "seed": seed if isinstance(seed, int) else None,
            "selection": selection.as_dict()}
    if index.partition is not None:
        meta["partition"] = index.partition[rows].tolist()
    return _build_faceset(paths, index.identity[rows].tolist(), box_list, size=size, crop=crop, margin=margin,
                          name="celeba", meta=meta, num_workers=num_workers, progress=progress,
                          attributes={k: v[rows] for k, v in index.attributes.items()})


def _celeba_image_path(image_dir: Path, filename: str) -> Path:
    p = image_dir / filename
    if not p.is_file():
        alt = p.with_suffix(".png")  # the img_align_celeba_png release
        if alt.is_file():
            return alt
        raise MissingResourceError(f"CelebA image {filename}", expected_at=str(p), how_to_get=_HOW_CELEBA)
    return p
