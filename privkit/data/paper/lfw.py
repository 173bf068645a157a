"""LFW: ``lfw/<Name>/<Name>_0001.jpg`` and the verification pairs ``lfw/pairs.txt`` (or ``pairs.txt`` beside
``lfw/``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from ..._validate import check_choice, check_int
from ...errors import InvalidArgumentError, MissingResourceError
from ..types import FaceSet
from .common import (PathLike, _as_root, _build_faceset, _check_budget, _check_size, _check_workers, _first_existing,
                     _format_error, _read_lines, _resolve_max_images)

__all__ = ["LFWPairs", "LFWPair", "read_lfw_pairs", "load_lfw"]

_HOW_LFW = (
    "Download lfw.tgz and pairs.txt from the official LFW page http://vis-www.cs.umass.edu/lfw/ "
    "(mirrored at https://www.kaggle.com/datasets/jessicali9530/lfw-dataset). Extract lfw.tgz into DATA_ROOT so "
    "that DATA_ROOT/lfw/Aaron_Eckhart/Aaron_Eckhart_0001.jpg exists, and put pairs.txt at DATA_ROOT/lfw/pairs.txt."
)


@dataclass
class LFWPairs:
    """LFW faces with the official verification pairs.

    Attributes:
        faces: the images that occur in the selected pairs (one row per distinct image).
        pairs: (P, 2) int64 row indices into ``faces``.
        same: (P,) bool, True for matched (same-person) pairs.
        fold: (P,) int64 fold of each pair (0..9 for ``pairs.txt``).
    """

    faces: FaceSet
    pairs: torch.Tensor
    same: torch.Tensor
    fold: torch.Tensor

    def __len__(self) -> int:
        return int(self.pairs.shape[0])


@dataclass(frozen=True)
class LFWPair:
    """One line of an LFW pair file: ``a`` and ``b`` are (name, image number); ``fold`` counts from 0."""

    a: tuple[str, int]
    b: tuple[str, int]
    same: bool
    fold: int


def read_lfw_pairs(path: PathLike) -> list[LFWPair]:
    """Parse LFW's ``pairs.txt`` (or ``pairsDevTrain.txt`` / ``pairsDevTest.txt``).

    ``pairs.txt`` starts with ``"<folds> <n>"`` (``10 300``) followed, for each fold, by ``n`` matched lines
    ``name i j`` and then ``n`` mismatched lines ``name1 i name2 j``. The View-1 files start with a single
    number ``n`` and hold one block (fold 0) of ``n`` matched then ``n`` mismatched pairs.

    Returns:
        One record per pair with ``a``/``b`` = (name, image number), ``same`` and ``fold``.

    Raises:
        MissingResourceError: the file does not exist.
        InvalidArgumentError: the file does not follow the format (the message names the line), including a
            matched pair naming one image twice or a mismatched pair naming one person twice.
    """
    p = Path(path)
    if not p.is_file():
        raise MissingResourceError("LFW's pairs.txt", expected_at=str(p), how_to_get=_HOW_LFW)
    lines = _read_lines(p)
    if not lines:
        raise _format_error(p, None, "is empty")
    head = lines[0].split()
    try:
        nums = [int(x) for x in head]
    except ValueError:
        raise _format_error(p, 1, f"expected '<folds> <pairs per class>' or '<pairs per class>', "
                                  f"got {lines[0]!r}") from None
    if len(nums) == 2:
        n_folds, n_per = nums
    elif len(nums) == 1:
        n_folds, n_per = 1, nums[0]
    else:
        raise _format_error(p, 1, f"expected one or two integers, got {lines[0]!r}")
    if n_folds < 1 or n_per < 1:
        raise _format_error(p, 1, "fold and pair counts must be >= 1")
    body = lines[1:]
    expected = n_folds * 2 * n_per
    if len(body) != expected:
        raise _format_error(p, None, f"the header announces {expected} pairs but the file holds {len(body)}")
    out: list[LFWPair] = []
    for k, line in enumerate(body):
        fold, pos = divmod(k, 2 * n_per)
        parts = line.split()
        matched = pos < n_per
        try:
            if matched and len(parts) == 3:
                rec = LFWPair((parts[0], int(parts[1])), (parts[0], int(parts[2])), True, fold)
            elif not matched and len(parts) == 4:
                rec = LFWPair((parts[0], int(parts[1])), (parts[2], int(parts[3])), False, fold)
            else:
                want = "'name i j' (matched)" if matched else "'name1 i name2 j' (mismatched)"
                raise _format_error(p, k + 2, f"expected {want}, got {line!r}")
        except ValueError as exc:
            if isinstance(exc, InvalidArgumentError):
                raise
            raise _format_error(p, k + 2, f"image numbers must be integers, got {line!r}") from None
        if rec.a[1] < 1 or rec.b[1] < 1:
            raise _format_error(p, k + 2, f"image numbers start at 1, got {line!r}")
        if matched and rec.a[1] == rec.b[1]:
            raise _format_error(p, k + 2, f"a matched pair must name two different images of one person, "
                                          f"got {line!r}")
        if not matched and rec.a[0] == rec.b[0]:
            raise _format_error(p, k + 2, f"a mismatched pair must name two different people, got {line!r}")
        out.append(rec)
    return out


def load_lfw(data_root: PathLike, *, image_dir: str = "lfw", pairs_file: str = "pairs.txt",
             folds: Sequence[int] | None = None, size: int = 64, crop: Literal["center", "full"] = "center",
             max_images: int | None = None, num_workers: int = 0, progress: bool = False) -> LFWPairs:
    """Load LFW's verification pairs and the images they use.

    Images are ``data_root/<image_dir>/<Name>/<Name>_<nnnn>.jpg`` (``image_dir`` may be ``"lfw"``,
    ``"lfw-deepfunneled"`` or ``"lfw_funneled"``); the pair file is looked for in ``data_root/<image_dir>/``
    and then in ``data_root/``. LFW has no face boxes: the box is the whole image (the 250 x 250 images are
    centred on the detected face). To load all LFW images without pairs use
    ``load_identity_folders(data_root / "lfw")``.

    Args:
        data_root: folder holding ``lfw/`` and ``pairs.txt``.
        image_dir: image folder name under ``data_root``.
        pairs_file: ``pairs.txt`` (10 folds) or a View-1 file (``pairsDevTrain.txt``, ``pairsDevTest.txt``).
        folds: folds to keep (default all).
        size: output side in pixels, in [8, 4096].
        crop: ``"center"`` or ``"full"`` (identical for LFW's square images; there are no boxes to crop to).
        max_images: decode at most this many images (default: :func:`default_max_images`; the 6,000 pairs of
            ``pairs.txt`` use 7,701 images, which fit at 64 px).
        num_workers, progress: decoding threads and progress bar.

    Raises:
        MissingResourceError: the image folder, the pair file or a listed image is missing.
    """
    root = _as_root(data_root)
    size = _check_size(size)
    crop = check_choice("crop", crop, ("center", "full"))
    num_workers = _check_workers(num_workers)
    cap = _resolve_max_images(max_images, size)
    if not isinstance(image_dir, str) or not image_dir or "/" in image_dir or image_dir in (".", ".."):
        raise InvalidArgumentError(f"image_dir must be a folder name such as 'lfw', got {image_dir!r}")
    if not isinstance(pairs_file, str) or not pairs_file or "/" in pairs_file:
        raise InvalidArgumentError(f"pairs_file must be a file name such as 'pairs.txt', got {pairs_file!r}")
    img_root = root / image_dir
    if not img_root.is_dir():
        raise MissingResourceError(f"LFW's image folder {image_dir}/ (e.g. {image_dir}/Aaron_Eckhart/"
                                   "Aaron_Eckhart_0001.jpg)", expected_at=str(img_root), how_to_get=_HOW_LFW)
    pf = _first_existing([img_root / pairs_file, root / pairs_file])
    if pf is None:
        raise MissingResourceError(f"LFW's pair list {pairs_file}", how_to_get=_HOW_LFW,
                                   expected_at=f"{img_root / pairs_file} or {root / pairs_file}")
    records = read_lfw_pairs(pf)
    n_folds = max(r.fold for r in records) + 1
    if folds is not None:
        keep = {check_int("folds[]", f, minimum=0, maximum=n_folds - 1) for f in folds}
        if not keep:
            raise InvalidArgumentError("folds must name at least one fold")
        records = [r for r in records if r.fold in keep]
    keys = sorted({r.a for r in records} | {r.b for r in records})
    _check_budget(len(keys), cap, "LFW pairs")
    row_of = {k: i for i, k in enumerate(keys)}
    paths = [img_root / name / f"{name}_{num:04d}.jpg" for name, num in keys]
    for (name, num), path in zip(keys, paths):
        if not path.is_file():
            raise MissingResourceError(f"LFW image {name}_{num:04d}.jpg listed in {pf.name}", expected_at=str(path),
                                       how_to_get=_HOW_LFW)
    meta = {"source": str(img_root), "pairs_file": str(pf), "files": [f"{n}/{n}_{num:04d}.jpg" for n, num in keys],
            "folds": sorted({r.fold for r in records}), "box_source": "whole image (LFW has no face boxes)"}
    faces = _build_faceset(paths, [name for name, _ in keys], [None] * len(keys), size=size, crop=crop, margin=0.0,
                           name=f"lfw:{image_dir}", meta=meta, num_workers=num_workers, progress=progress)
    pairs = torch.tensor([[row_of[r.a], row_of[r.b]] for r in records], dtype=torch.int64).reshape(-1, 2)
    same = torch.tensor([r.same for r in records], dtype=torch.bool)
    fold = torch.tensor([r.fold for r in records], dtype=torch.int64)
    return LFWPairs(faces=faces, pairs=pairs, same=same, fold=fold)
