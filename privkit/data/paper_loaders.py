"""Loaders for the real datasets the four papers use, read from their official on-disk formats.

Nothing is downloaded: each loader reads ``data_root/<DatasetDir>/...`` and, when a file is absent, raises
:class:`~privkit.errors.MissingResourceError` naming the exact files, their official source and where to put
them. The expected layouts:

========================  =====================================================================================
dataset                   files under ``data_root``
========================  =====================================================================================
CelebA                    ``celeba/`` (flat, the torchvision layout) **or** ``CelebA/Img``, ``CelebA/Anno``,
                          ``CelebA/Eval`` (the official Google-Drive layout): ``img_align_celeba/``
                          (or ``img_celeba/`` for in-the-wild images), ``identity_CelebA.txt``,
                          ``list_attr_celeba.txt``, ``list_bbox_celeba.txt``, ``list_eval_partition.txt``,
                          ``list_landmarks_align_celeba.txt``
VGGFace2                  ``VGGFace2/{train,test}/n000001/0001_01.jpg``; optional
                          ``VGGFace2/bb_landmark/loose_bb_{train,test}.csv`` and ``VGGFace2/identity_meta.csv``
                          (also looked for under ``VGGFace2/meta/``)
LFW                       ``lfw/<Name>/<Name>_0001.jpg`` and ``lfw/pairs.txt`` (or ``pairs.txt`` beside ``lfw/``)
MPII                      ``mpii/images/*.jpg`` and the HRNet JSON conversion ``mpii/annot/{train,valid}.json``
                          (+ ``mpii/annot/gt_valid.mat``), or the same files as mmpose names them:
                          ``mpii/annotations/mpii_{train,val}.json`` (+ ``mpii_gt_val.mat``)
CIFAR-10 / CIFAR-100      ``cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``,
                          ``cifar-100-python/{train,test,meta}``
IJB-B / IJB-C             InsightFace's ``IJB_release`` layout: ``IJBC/loose_crop/*.jpg``,
                          ``IJBC/meta/ijbc_face_tid_mid.txt``, ``ijbc_template_pair_label.txt`` (+ optional
                          ``ijbc_name_5pts_score.txt``); ``IJBB/`` with the ``ijbb_`` prefix
MovieLens-100K            ``ml-100k/u.data``, ``ml-100k/u1.base`` ... ``u5.test``, ``ua.*``, ``ub.*``, ``u.info``
========================  =====================================================================================

Images are decoded with Pillow, cropped (see ``crop`` below), resized to ``size`` x ``size`` with bilinear
filtering (antialiased when shrinking) and returned as float32 in [0, 1]. Loaders hold everything in memory, so
each one first selects the rows it needs from the (cheap) annotation files and refuses to decode more than
``max_images`` images; by default ``max_images`` is what fits in :data:`DEFAULT_IMAGE_BUDGET_BYTES` (512 MiB)
at the requested size (about 10,000 images at 64 px, 3,300 at 112 px). Ask for a subset (``n_identities``,
``images_per_identity``, ``n_samples``, ``folds``) or raise ``max_images`` explicitly.

Face crops (``crop``):

- ``"center"``: the largest centred square of the image (aligned CelebA: the 178 x 178 centre of the
  178 x 218 image; LFW's 250 x 250 images are unchanged);
- ``"full"``: the whole image, squashed to a square if it is not one;
- ``"box"``: a square around the face box, enlarged by ``margin`` on each side, padded with black where it
  leaves the image.

Face boxes and masks: :class:`~privkit.data.types.FaceSet` boxes are in output pixels (xyxy), clipped to the
image; masks are the box (real datasets have no segmentation). Where a dataset has no box for an image the box
is the whole source image, and ``meta["box_source"]`` says which rule was used.
"""

from __future__ import annotations

import codecs
import csv
import json
import os
import pickle
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from .._validate import check_choice, check_int, check_nonnegative, check_tensor
from ..errors import InsufficientDataError, InvalidArgumentError, MissingResourceError
from .types import MPII_JOINTS, FaceSet, PoseSet

__all__ = [
    "DEFAULT_IMAGE_BUDGET_BYTES",
    "IMAGE_EXTENSIONS",
    "select_identities",
    "default_max_images",
    "load_identity_folders",
    "CelebAIndex",
    "read_celeba_index",
    "load_celeba",
    "load_vggface2",
    "LFWPairs",
    "LFWPair",
    "read_lfw_pairs",
    "load_lfw",
    "IJBProtocol",
    "load_ijb",
    "load_mpii",
    "LabelledImages",
    "load_cifar",
    "MovieLensRatings",
    "load_movielens_100k",
]

CropMode = Literal["center", "full", "box"]
_CROPS = ("center", "full", "box")

#: Memory the decoded images of one default-sized load may take (images plus masks).
DEFAULT_IMAGE_BUDGET_BYTES = 512 * 2**20

#: File name endings treated as images in folder-per-identity layouts.
IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".webp")

PathLike = str | os.PathLike

# --------------------------------------------------------------------------------------------------------------
# where to get the data (used in MissingResourceError messages)
# --------------------------------------------------------------------------------------------------------------
_HOW_CELEBA = (
    "Download CelebA from its official page https://mmlab.ie.cuhk.edu.hk/projects/CelebA.html (Google Drive or "
    "Baidu links): Img/img_align_celeba.zip (aligned images; or Img/img_celeba.7z for in-the-wild images), "
    "Anno/identity_CelebA.txt, Anno/list_attr_celeba.txt, Anno/list_bbox_celeba.txt, "
    "Anno/list_landmarks_align_celeba.txt and Eval/list_eval_partition.txt. Unzip so that either "
    "DATA_ROOT/celeba/img_align_celeba/000001.jpg and DATA_ROOT/celeba/identity_CelebA.txt exist (flat layout), "
    "or keep the Drive layout DATA_ROOT/CelebA/Img/img_align_celeba/, DATA_ROOT/CelebA/Anno/, DATA_ROOT/CelebA/Eval/."
)
_HOW_VGGFACE2 = (
    "VGGFace2 (Cao et al., FG 2018) was distributed at http://www.robots.ox.ac.uk/~vgg/data/vgg_face2/ as "
    "vggface2_train.tar.gz and vggface2_test.tar.gz (plus bb_landmark.tar.gz and identity_meta.csv); the authors "
    "have withdrawn it from public download, so use a copy you are licensed to hold. Extract it so that "
    "DATA_ROOT/VGGFace2/test/n000001/0001_01.jpg exists, with DATA_ROOT/VGGFace2/bb_landmark/loose_bb_test.csv "
    "and DATA_ROOT/VGGFace2/identity_meta.csv optional."
)
_HOW_LFW = (
    "Download lfw.tgz and pairs.txt from the official LFW page http://vis-www.cs.umass.edu/lfw/ "
    "(mirrored at https://www.kaggle.com/datasets/jessicali9530/lfw-dataset). Extract lfw.tgz into DATA_ROOT so "
    "that DATA_ROOT/lfw/Aaron_Eckhart/Aaron_Eckhart_0001.jpg exists, and put pairs.txt at DATA_ROOT/lfw/pairs.txt."
)
_HOW_MPII = (
    "Download the images (mpii_human_pose_v1.tar.gz) from the official MPII Human Pose page "
    "http://human-pose.mpi-inf.mpg.de/#download and extract them to DATA_ROOT/mpii/images/. The annotations are "
    "the widely used JSON conversion of MPII's .mat file published with HRNet "
    "(https://github.com/leoxiaobin/deep-high-resolution-net.pytorch, 'annot' folder: train.json, valid.json, "
    "gt_valid.mat) -> DATA_ROOT/mpii/annot/; mmpose's copies (mpii_train.json, mpii_val.json, mpii_gt_val.mat, "
    "https://mmpose.readthedocs.io dataset page) may go to DATA_ROOT/mpii/annotations/ instead."
)
_HOW_CIFAR = (
    "Download the 'CIFAR-10 python version' (cifar-10-python.tar.gz) or 'CIFAR-100 python version' "
    "(cifar-100-python.tar.gz) from https://www.cs.toronto.edu/~kriz/cifar.html and extract it into DATA_ROOT, "
    "giving DATA_ROOT/cifar-10-batches-py/ or DATA_ROOT/cifar-100-python/."
)
_HOW_MOVIELENS = (
    "Download ml-100k.zip from https://grouplens.org/datasets/movielens/100k/ and unzip it into DATA_ROOT, "
    "giving DATA_ROOT/ml-100k/u.data, u.info and the official splits u1.base/u1.test ... u5.test, ua.*, ub.*."
)


# --------------------------------------------------------------------------------------------------------------
# small shared helpers
# --------------------------------------------------------------------------------------------------------------
def _as_root(data_root: Any) -> Path:
    if not isinstance(data_root, (str, os.PathLike)) or not str(data_root):
        raise InvalidArgumentError(f"data_root must be a non-empty path (str or os.PathLike), got {data_root!r}")
    return Path(data_root).expanduser()


def _first_existing(candidates: Iterable[Path], *, want_dir: bool = False) -> Path | None:
    for c in candidates:
        if (c.is_dir() if want_dir else c.is_file()):
            return c
    return None


def _format_error(path: Path, line_no: int | None, message: str) -> InvalidArgumentError:
    where = f"{path}" if line_no is None else f"{path}, line {line_no}"
    return InvalidArgumentError(f"{where}: {message}")


def default_max_images(size: int) -> int:
    """How many ``size`` x ``size`` RGB float32 images (with their masks) fit in the default memory budget."""
    size = check_int("size", size, minimum=1)
    per_image = 3 * size * size * 4 + size * size  # float32 image + bool mask
    return max(1, DEFAULT_IMAGE_BUDGET_BYTES // per_image)


def _resolve_max_images(max_images: int | None, size: int) -> int:
    if max_images is None:
        return default_max_images(size)
    return check_int("max_images", max_images, minimum=1)


def _check_budget(n: int, max_images: int, what: str) -> None:
    if n > max_images:
        raise InvalidArgumentError(
            f"{what} selects {n} images but max_images={max_images} (the default is what fits in "
            f"{DEFAULT_IMAGE_BUDGET_BYTES // 2**20} MiB at this size). Select fewer (n_identities, "
            f"images_per_identity, n_samples, folds) or pass a larger max_images."
        )


def _generator(seed: int | torch.Generator) -> torch.Generator:
    if isinstance(seed, torch.Generator):
        return seed
    return torch.Generator().manual_seed(check_int("seed", seed))


def _check_size(size: int) -> int:
    return check_int("size", size, minimum=8, maximum=4096)


def _check_workers(num_workers: int) -> int:
    return check_int("num_workers", num_workers, minimum=0, maximum=256)


# --------------------------------------------------------------------------------------------------------------
# image decoding and geometry
# --------------------------------------------------------------------------------------------------------------
Window = tuple[int, int, int, int]  # x0, y0, x1, y1 in source pixels (may extend beyond the image)


def _square_around(cx: float, cy: float, side: float) -> Window:
    s = max(1, int(round(side)))
    x0 = int(round(cx - s / 2.0))
    y0 = int(round(cy - s / 2.0))
    return (x0, y0, x0 + s, y0 + s)


def _face_window(w: int, h: int, crop: str, box: Sequence[float] | None, margin: float) -> Window:
    if crop == "full":
        return (0, 0, w, h)
    if crop == "center":
        s = min(w, h)
        x0, y0 = (w - s) // 2, (h - s) // 2
        return (x0, y0, x0 + s, y0 + s)
    if box is None:  # caller checks; kept as a guard
        raise InvalidArgumentError("crop='box' needs a face box for every image")
    bx0, by0, bx1, by1 = (float(v) for v in box)
    side = max(bx1 - bx0, by1 - by0, 1.0) * (1.0 + 2.0 * margin)
    return _square_around((bx0 + bx1) / 2.0, (by0 + by1) / 2.0, side)


def _decode(path: Path, window_fn: Callable[[int, int], Window], size: int) -> tuple[np.ndarray, Window, tuple[int, int]]:
    """Decode ``path``, crop ``window_fn(w, h)`` (black padding outside the image), resize to size x size."""
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise MissingResourceError(f"Image {path.name}", expected_at=str(path), how_to_get="Re-extract the dataset archive.")
    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            w, h = im.size
            win = window_fn(w, h)
            if win != (0, 0, w, h):
                im = im.crop(win)
            if im.size != (size, size):
                im = im.resize((size, size), Image.Resampling.BILINEAR)
            arr = np.asarray(im, dtype=np.uint8).copy()
    except (UnidentifiedImageError, OSError) as exc:
        raise InvalidArgumentError(f"cannot decode image {path}: {exc}") from None
    return arr, win, (w, h)


def _decode_many(
    paths: Sequence[Path],
    window_fns: Sequence[Callable[[int, int], Window]],
    size: int,
    *,
    num_workers: int,
    progress: bool,
    desc: str,
) -> tuple[torch.Tensor, list[Window], list[tuple[int, int]]]:
    n = len(paths)
    images = torch.empty((n, 3, size, size), dtype=torch.float32)
    windows: list[Window] = [(0, 0, 0, 0)] * n
    sizes: list[tuple[int, int]] = [(0, 0)] * n

    def job(i: int):
        return _decode(paths[i], window_fns[i], size)

    if num_workers > 0 and n > 1:
        pool = ThreadPoolExecutor(max_workers=num_workers)
        results: Iterable = pool.map(job, range(n))
    else:
        pool = None
        results = map(job, range(n))
    if progress:
        from tqdm.auto import tqdm

        results = tqdm(results, total=n, desc=desc)
    try:
        for i, (arr, win, wh) in enumerate(results):
            images[i] = torch.from_numpy(arr).permute(2, 0, 1).to(torch.float32).div_(255.0)
            windows[i] = win
            sizes[i] = wh
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return images, windows, sizes


def _map_points(points: torch.Tensor, windows: Sequence[Window], size: int) -> torch.Tensor:
    """Map (N, K, 2) source-pixel points into output pixels of the resized crops."""
    w = torch.tensor(windows, dtype=torch.float64).reshape(-1, 4)
    x0, y0 = w[:, 0:1], w[:, 1:2]
    sx = size / (w[:, 2:3] - w[:, 0:1])
    sy = size / (w[:, 3:4] - w[:, 1:2])
    p = points.to(torch.float64)
    out = torch.stack(((p[..., 0] - x0) * sx, (p[..., 1] - y0) * sy), dim=-1)
    return out.to(torch.float32)


def _map_boxes(boxes: torch.Tensor, windows: Sequence[Window], size: int) -> torch.Tensor:
    """Map (N, 4) xyxy source boxes into output pixels, clipped to [0, size]."""
    corners = boxes.to(torch.float64).reshape(-1, 2, 2)
    mapped = _map_points(corners, windows, size).reshape(-1, 4)
    return mapped.clamp_(0.0, float(size))


def _box_masks(boxes: torch.Tensor, size: int) -> torch.Tensor:
    """(N, 1, size, size) bool: pixels whose centres lie inside the xyxy box."""
    c = torch.arange(size, dtype=torch.float32) + 0.5
    b = boxes.to(torch.float32)
    inx = (c[None, :] >= b[:, 0:1]) & (c[None, :] <= b[:, 2:3])  # (N, W)
    iny = (c[None, :] >= b[:, 1:2]) & (c[None, :] <= b[:, 3:4])  # (N, H)
    return (iny[:, :, None] & inx[:, None, :]).unsqueeze(1)


def _contiguous_ids(keys: Sequence[Any]) -> tuple[torch.Tensor, list[Any]]:
    """Map keys to ids 0..k-1 in order of first appearance after sorting the distinct keys."""
    distinct = sorted(set(keys))
    lookup = {k: i for i, k in enumerate(distinct)}
    return torch.tensor([lookup[k] for k in keys], dtype=torch.int64), distinct


# --------------------------------------------------------------------------------------------------------------
# identity selection
# --------------------------------------------------------------------------------------------------------------
def select_identities(
    identity: torch.Tensor,
    *,
    min_images: int = 20,
    n_identities: int | None = None,
    images_per_identity: int | None = None,
    seed: int | torch.Generator,
) -> torch.Tensor:
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
    if eligible.numel() == 0:
        raise InsufficientDataError(
            f"select_identities: need at least 1 identity with >= {threshold} images; the largest has "
            f"{int(counts.max()) if counts.numel() else 0}"
        )
    if n_identities is not None:
        if eligible.numel() < n_identities:
            raise InsufficientDataError(
                f"select_identities: need at least {n_identities} identities with >= {threshold} images "
                f"(n_identities), got {eligible.numel()}"
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


def _wants_selection(min_images: int | None, n_identities: int | None, images_per_identity: int | None) -> bool:
    return min_images is not None or n_identities is not None or images_per_identity is not None


# --------------------------------------------------------------------------------------------------------------
# generic face sets
# --------------------------------------------------------------------------------------------------------------
def _build_faceset(
    paths: Sequence[Path],
    identity_keys: Sequence[Any],
    boxes: Sequence[Sequence[float] | None],
    *,
    size: int,
    crop: str,
    margin: float,
    name: str,
    meta: dict,
    num_workers: int,
    progress: bool,
    attributes: Mapping[str, torch.Tensor] | None = None,
) -> FaceSet:
    if crop == "box":
        missing = [str(p) for p, b in zip(paths, boxes) if b is None]
        if missing:
            raise InvalidArgumentError(
                f"crop='box' needs a face box for every image; {len(missing)} have none (first: {missing[0]}). "
                "Use crop='center' or 'full', or provide the dataset's box file."
            )

    def make_fn(b):
        return lambda w, h: _face_window(w, h, crop, b, margin)

    images, windows, sizes = _decode_many(
        paths, [make_fn(b) for b in boxes], size, num_workers=num_workers, progress=progress, desc=name
    )
    src = torch.tensor(
        [list(b) if b is not None else [0.0, 0.0, float(w), float(h)] for b, (w, h) in zip(boxes, sizes)],
        dtype=torch.float64,
    ).reshape(-1, 4)
    box = _map_boxes(src, windows, size)
    ident, names = _contiguous_ids(identity_keys)
    meta = dict(meta)
    meta.setdefault("identity_names", [str(n) for n in names])
    meta["size"] = size
    meta["crop"] = crop
    meta["margin"] = margin
    meta["source_sizes"] = [list(s) for s in sizes]
    return FaceSet(
        images=images,
        identity=ident,
        box=box,
        mask=_box_masks(box, size),
        context=torch.full((len(paths),), -1, dtype=torch.int64),
        attributes=dict(attributes or {}),
        name=name,
        meta=meta,
    )


def _scan_identity_folders(root: Path) -> tuple[list[str], list[str]]:
    """(relative image paths, identity folder of each), both sorted."""
    rels: list[str] = []
    owners: list[str] = []
    for d in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for f in sorted(d.iterdir()):
            if f.is_file() and f.suffix.lower() in IMAGE_EXTENSIONS and not f.name.startswith("."):
                rels.append(f"{d.name}/{f.name}")
                owners.append(d.name)
    return rels, owners


def load_identity_folders(
    root: PathLike,
    *,
    size: int = 64,
    crop: CropMode = "center",
    margin: float = 0.25,
    boxes: Mapping[str, Sequence[float]] | None = None,
    min_images: int | None = None,
    n_identities: int | None = None,
    images_per_identity: int | None = None,
    max_images: int | None = None,
    seed: int | torch.Generator = 0,
    name: str | None = None,
    num_workers: int = 0,
    progress: bool = False,
) -> FaceSet:
    """Load a "folder per identity" image tree (``root/<identity>/<image>``), as used by VGGFace2 and LFW.

    Args:
        root: the folder holding one sub-folder per identity.
        size: output image side in pixels, in [8, 4096].
        crop: ``"center"``, ``"full"`` or ``"box"`` (see the module docstring).
        margin: for ``crop="box"``, the fraction of the box side added on each side, >= 0.
        boxes: optional face boxes, xyxy in source pixels, keyed by ``"<identity>/<file stem>"`` (e.g.
            ``"n000001/0001_01"``). Images without a box get the whole source image as their box.
        min_images, n_identities, images_per_identity: identity selection, see :func:`select_identities`
            (all images are loaded when all three are ``None``).
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
    size = _check_size(size)
    crop = check_choice("crop", crop, _CROPS)
    margin = check_nonnegative("margin", margin)
    num_workers = _check_workers(num_workers)
    cap = _resolve_max_images(max_images, size)
    if not root.is_dir():
        raise MissingResourceError(
            "An image folder with one sub-folder per identity",
            expected_at=str(root),
            how_to_get="Point root at a folder laid out as root/<identity>/<image>.jpg.",
        )
    rels, owners = _scan_identity_folders(root)
    if not rels:
        raise MissingResourceError(
            f"Images ({', '.join(IMAGE_EXTENSIONS)}) in per-identity sub-folders",
            expected_at=str(root),
            how_to_get="Check that the archive was fully extracted.",
        )
    return _load_selected_folders(
        root, rels, owners, size=size, crop=crop, margin=margin, boxes=boxes, min_images=min_images,
        n_identities=n_identities, images_per_identity=images_per_identity, cap=cap, seed=seed,
        name=name or root.name, num_workers=num_workers, progress=progress, meta={}, attributes_by_owner=None,
    )


def _load_selected_folders(
    root: Path,
    rels: list[str],
    owners: list[str],
    *,
    size: int,
    crop: str,
    margin: float,
    boxes: Mapping[str, Sequence[float]] | None,
    min_images: int | None,
    n_identities: int | None,
    images_per_identity: int | None,
    cap: int,
    seed: int | torch.Generator,
    name: str,
    num_workers: int,
    progress: bool,
    meta: dict,
    attributes_by_owner: Mapping[str, Mapping[str, int]] | None,
) -> FaceSet:
    if _wants_selection(min_images, n_identities, images_per_identity):
        owner_ids, _ = _contiguous_ids(owners)
        rows = select_identities(
            owner_ids, min_images=min_images or 1, n_identities=n_identities,
            images_per_identity=images_per_identity, seed=seed,
        ).tolist()
    else:
        rows = list(range(len(rels)))
    _check_budget(len(rows), cap, name)
    sel_rels = [rels[i] for i in rows]
    sel_owners = [owners[i] for i in rows]
    box_list: list[Sequence[float] | None] = [None] * len(rows)
    if boxes is not None:
        if not isinstance(boxes, Mapping):
            raise InvalidArgumentError(f"boxes must map '<identity>/<file stem>' to xyxy boxes, got {type(boxes).__name__}")
        for k, r in enumerate(sel_rels):
            b = boxes.get(os.path.splitext(r)[0])
            if b is None:
                continue
            v = np.asarray(b, dtype=np.float64).reshape(-1)
            if v.size != 4 or not np.isfinite(v).all() or v[2] <= v[0] or v[3] <= v[1]:
                raise InvalidArgumentError(
                    f"boxes[{os.path.splitext(r)[0]!r}] must be 4 finite numbers x0 < x1, y0 < y1, got {b!r}"
                )
            box_list[k] = v.tolist()
    n_boxed = sum(b is not None for b in box_list)
    attributes: dict[str, torch.Tensor] = {}
    if attributes_by_owner:
        keys = sorted({k for v in attributes_by_owner.values() for k in v})
        for k in keys:
            vals = [attributes_by_owner.get(o, {}).get(k, -1) for o in sel_owners]
            attributes[k] = torch.tensor(vals, dtype=torch.int64)
    meta = dict(meta)
    meta.update(
        source=str(root),
        files=sel_rels,
        seed=seed if isinstance(seed, int) else None,
        selection=dict(min_images=min_images, n_identities=n_identities, images_per_identity=images_per_identity),
        box_source=(
            "dataset boxes" if n_boxed == len(rows) else
            "whole source image (no boxes)" if n_boxed == 0 else
            f"dataset boxes for {n_boxed} images, whole source image for {len(rows) - n_boxed}"
        ),
    )
    return _build_faceset(
        [root / r for r in sel_rels], sel_owners, box_list, size=size, crop=crop, margin=margin, name=name,
        meta=meta, num_workers=num_workers, progress=progress, attributes=attributes,
    )


# --------------------------------------------------------------------------------------------------------------
# CelebA
# --------------------------------------------------------------------------------------------------------------
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


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise _format_error(path, None, f"not a text file ({exc})") from None
    return [ln for ln in text.splitlines() if ln.strip()]


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
        raise MissingResourceError(
            "CelebA's identity file identity_CelebA.txt",
            expected_at=f"{root / 'celeba' / 'identity_CelebA.txt'} (or {root / 'CelebA' / 'Anno'}/)",
            how_to_get=_HOW_CELEBA,
        )
    folder = "img_align_celeba" if aligned else "img_celeba"
    image_dir = _first_existing(
        [root / "celeba" / folder, root / "CelebA" / "Img" / folder, root / "CelebA" / folder, root / "celeba" / "Img" / folder],
        want_dir=True,
    )
    if image_dir is None:
        raise MissingResourceError(
            f"CelebA's image folder {folder}/",
            expected_at=f"{root / 'celeba' / folder} (or {root / 'CelebA' / 'Img' / folder})",
            how_to_get=_HOW_CELEBA,
        )
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

    return CelebAIndex(
        image_dir=image_dir,
        filenames=tuple(filenames),
        identity=torch.from_numpy(ident[:, 0].copy()),
        partition=partition,
        attributes=attributes,
        bbox=bbox,
        landmarks=landmarks,
        aligned=aligned,
    )


def _landmark_boxes(landmarks: torch.Tensor) -> torch.Tensor:
    """privkit's [I] face box from CelebA's five aligned landmarks.

    With d the inter-ocular distance: x from (leftmost landmark - 0.6 d) to (rightmost + 0.6 d), y from
    (eye line - 1.0 d) to (mouth line + 0.8 d), i.e. roughly forehead to chin and ear to ear.
    """
    eyes = landmarks[:, :2]
    d = (eyes[:, 1] - eyes[:, 0]).norm(dim=1).clamp_min(1.0)
    x0 = landmarks[:, :, 0].min(dim=1).values - 0.6 * d
    x1 = landmarks[:, :, 0].max(dim=1).values + 0.6 * d
    y0 = eyes[:, :, 1].mean(dim=1) - 1.0 * d
    y1 = landmarks[:, 3:, 1].mean(dim=1) + 0.8 * d
    return torch.stack((x0, y0, x1, y1), dim=1)


def load_celeba(
    data_root: PathLike,
    *,
    split: Literal["all", "train", "valid", "test"] = "all",
    aligned: bool = True,
    size: int = 64,
    crop: CropMode | None = None,
    margin: float = 0.25,
    min_images: int | None = None,
    n_identities: int | None = None,
    images_per_identity: int | None = None,
    indices: torch.Tensor | Sequence[int] | None = None,
    max_images: int | None = None,
    seed: int | torch.Generator = 0,
    num_workers: int = 0,
    progress: bool = False,
) -> FaceSet:
    """Load CelebA face images with identities, boxes and the 40 binary attributes.

    Example (CelebA-20 as privkit defines it: 480 identities with >= 20 images, 20 images each)::

        faces = load_celeba(root, min_images=20, n_identities=480, images_per_identity=20, seed=0)

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
        min_images, n_identities, images_per_identity: identity selection within ``split`` (see
            :func:`select_identities`); all rows of the split when all three are ``None``.
        indices: explicit rows of :func:`read_celeba_index` to load instead (then ``split`` must be
            ``"all"`` and the selection arguments ``None``).
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
    size = _check_size(size)
    crop = check_choice("crop", crop if crop is not None else ("center" if aligned else "box"), _CROPS)
    margin = check_nonnegative("margin", margin)
    num_workers = _check_workers(num_workers)
    cap = _resolve_max_images(max_images, size)
    index = read_celeba_index(root, aligned=aligned)
    n = len(index)

    if indices is not None:
        if split != "all" or _wants_selection(min_images, n_identities, images_per_identity):
            raise InvalidArgumentError(
                "indices cannot be combined with split or min_images/n_identities/images_per_identity; "
                "select rows with select_identities(read_celeba_index(...).identity, ...) instead"
            )
        rows = torch.as_tensor(indices, dtype=torch.int64).flatten()
        if rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= n):
            raise InvalidArgumentError(f"indices must lie in [0, {n - 1}] (rows of the CelebA index)")
    else:
        if split == "all":
            rows = torch.arange(n)
        else:
            if index.partition is None:
                raise MissingResourceError(
                    "CelebA's split file list_eval_partition.txt (needed for split != 'all')",
                    expected_at=f"{root / 'celeba' / 'list_eval_partition.txt'} (or {root / 'CelebA' / 'Eval'}/)",
                    how_to_get=_HOW_CELEBA,
                )
            rows = torch.nonzero(index.partition == _CELEBA_SPLITS[split]).flatten()
        if _wants_selection(min_images, n_identities, images_per_identity):
            rows = rows[
                select_identities(
                    index.identity[rows], min_images=min_images or 1, n_identities=n_identities,
                    images_per_identity=images_per_identity, seed=seed,
                )
            ]
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
            raise MissingResourceError(
                "CelebA's box file list_bbox_celeba.txt (needed for in-the-wild images)",
                expected_at=f"{root / 'celeba' / 'list_bbox_celeba.txt'} (or {root / 'CelebA' / 'Anno'}/)",
                how_to_get=_HOW_CELEBA,
            )
        src_boxes = index.bbox[rows]
        box_source = "list_bbox_celeba.txt"
    box_list = [None] * len(r) if src_boxes is None else src_boxes.tolist()
    paths = [_celeba_image_path(index.image_dir, index.filenames[i]) for i in r]
    meta = {
        "source": str(index.image_dir),
        "files": [index.filenames[i] for i in r],
        "rows": r,
        "split": split,
        "aligned": aligned,
        "box_source": box_source,
        "seed": seed if isinstance(seed, int) else None,
        "selection": dict(min_images=min_images, n_identities=n_identities, images_per_identity=images_per_identity),
    }
    if index.partition is not None:
        meta["partition"] = index.partition[rows].tolist()
    return _build_faceset(
        paths, index.identity[rows].tolist(), box_list, size=size, crop=crop, margin=margin,
        name="celeba", meta=meta, num_workers=num_workers, progress=progress,
        attributes={k: v[rows] for k, v in index.attributes.items()},
    )


def _celeba_image_path(image_dir: Path, filename: str) -> Path:
    p = image_dir / filename
    if not p.is_file():
        alt = p.with_suffix(".png")  # the img_align_celeba_png release
        if alt.is_file():
            return alt
        raise MissingResourceError(f"CelebA image {filename}", expected_at=str(p), how_to_get=_HOW_CELEBA)
    return p


# --------------------------------------------------------------------------------------------------------------
# VGGFace2
# --------------------------------------------------------------------------------------------------------------
def _vggface2_root(root: Path) -> Path | None:
    return _first_existing([root / "VGGFace2", root / "vggface2", root / "vgg_face2"], want_dir=True)


def _read_vggface2_boxes(path: Path) -> dict[str, tuple[float, float, float, float]]:
    out: dict[str, tuple[float, float, float, float]] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh, skipinitialspace=True)
        header = next(reader, None)
        if header is None or [h.strip().upper() for h in header[:5]] != ["NAME_ID", "X", "Y", "W", "H"]:
            raise _format_error(path, 1, f"expected the header NAME_ID,X,Y,W,H, got {header!r}")
        for k, row in enumerate(reader, start=2):
            if not row:
                continue
            try:
                x, y, w, h = (float(v) for v in row[1:5])
            except ValueError:
                raise _format_error(path, k, f"expected NAME_ID,X,Y,W,H numbers, got {row!r}") from None
            if len(row) < 5 or w <= 0 or h <= 0:
                raise _format_error(path, k, f"box width and height must be > 0, got {row!r}")
            out[row[0].strip()] = (x, y, x + w, y + h)
    return out


def _read_vggface2_meta(path: Path) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh, skipinitialspace=True)
        header = next(reader, None)
        cols = [h.strip().lower() for h in (header or [])]
        if "class_id" not in cols or "gender" not in cols:
            raise _format_error(path, 1, f"expected a header with Class_ID and Gender, got {header!r}")
        ci, gi = cols.index("class_id"), cols.index("gender")
        for k, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) <= max(ci, gi):
                raise _format_error(path, k, f"too few columns: {row!r}")
            g = row[gi].strip().lower()
            if g not in ("m", "f"):
                raise _format_error(path, k, f"gender must be 'm' or 'f', got {row[gi]!r}")
            out[row[ci].strip()] = {"male": int(g == "m")}
    return out


def load_vggface2(
    data_root: PathLike,
    *,
    split: Literal["train", "test"] = "test",
    size: int = 64,
    crop: CropMode = "center",
    margin: float = 0.25,
    use_boxes: bool = True,
    min_images: int | None = None,
    n_identities: int | None = None,
    images_per_identity: int | None = None,
    max_images: int | None = None,
    seed: int | torch.Generator = 0,
    num_workers: int = 0,
    progress: bool = False,
) -> FaceSet:
    """Load VGGFace2 (``VGGFace2/{train,test}/<class id>/<image>.jpg``).

    VGGFace2-20 as privkit defines it [I]: ``min_images=20, images_per_identity=20`` (and
    ``n_identities=480`` for the 320/80/80 split). With ``use_boxes`` and
    ``bb_landmark/loose_bb_<split>.csv`` present, boxes come from that file (X, Y, W, H in source pixels);
    otherwise the box is the whole image (VGGFace2 images are already loose face crops). If
    ``identity_meta.csv`` is present, ``attributes["male"]`` holds its gender column (1 = m, 0 = f, -1 = not
    listed).

    Args:
        data_root: folder holding ``VGGFace2/``.
        split: ``"train"`` or ``"test"``.
        size, crop, margin: see :func:`load_identity_folders`.
        use_boxes: read the loose-box CSV when present.
        min_images, n_identities, images_per_identity, seed: identity selection (:func:`select_identities`).
        max_images: decode at most this many images (default: :func:`default_max_images`).
        num_workers, progress: decoding threads and progress bar.

    Raises:
        MissingResourceError: ``VGGFace2/<split>/`` is missing (the message says where to get it).
    """
    root = _as_root(data_root)
    split = check_choice("split", split, ("train", "test"))
    size = _check_size(size)
    crop = check_choice("crop", crop, _CROPS)
    margin = check_nonnegative("margin", margin)
    num_workers = _check_workers(num_workers)
    cap = _resolve_max_images(max_images, size)
    base = _vggface2_root(root)
    image_root = None if base is None else base / split
    if image_root is None or not image_root.is_dir():
        raise MissingResourceError(
            f"VGGFace2's {split} images (VGGFace2/{split}/n000001/0001_01.jpg, ...)",
            expected_at=str(root / "VGGFace2" / split),
            how_to_get=_HOW_VGGFACE2,
        )
    rels, owners = _scan_identity_folders(image_root)
    if not rels:
        raise MissingResourceError(
            f"VGGFace2's {split} images", expected_at=str(image_root), how_to_get=_HOW_VGGFACE2
        )
    boxes = None
    meta: dict[str, Any] = {"split": split}
    if use_boxes:
        bb = _first_existing([base / "bb_landmark" / f"loose_bb_{split}.csv", base / "meta" / "bb_landmark" / f"loose_bb_{split}.csv"])
        if bb is not None:
            boxes = _read_vggface2_boxes(bb)
            meta["box_file"] = str(bb)
    attrs = None
    im = _first_existing([base / "identity_meta.csv", base / "meta" / "identity_meta.csv"])
    if im is not None:
        attrs = _read_vggface2_meta(im)
        meta["identity_meta"] = str(im)
    return _load_selected_folders(
        image_root, rels, owners, size=size, crop=crop, margin=margin, boxes=boxes, min_images=min_images,
        n_identities=n_identities, images_per_identity=images_per_identity, cap=cap, seed=seed,
        name=f"vggface2-{split}", num_workers=num_workers, progress=progress, meta=meta, attributes_by_owner=attrs,
    )


# --------------------------------------------------------------------------------------------------------------
# LFW
# --------------------------------------------------------------------------------------------------------------
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
        InvalidArgumentError: the file does not follow the format (the message names the line).
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
        raise _format_error(p, 1, f"expected '<folds> <pairs per class>' or '<pairs per class>', got {lines[0]!r}") from None
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
        out.append(rec)
    return out


def load_lfw(
    data_root: PathLike,
    *,
    image_dir: str = "lfw",
    pairs_file: str = "pairs.txt",
    folds: Sequence[int] | None = None,
    size: int = 64,
    crop: Literal["center", "full"] = "center",
    max_images: int | None = None,
    num_workers: int = 0,
    progress: bool = False,
) -> LFWPairs:
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
        raise MissingResourceError(
            f"LFW's image folder {image_dir}/ (e.g. {image_dir}/Aaron_Eckhart/Aaron_Eckhart_0001.jpg)",
            expected_at=str(img_root),
            how_to_get=_HOW_LFW,
        )
    pf = _first_existing([img_root / pairs_file, root / pairs_file])
    if pf is None:
        raise MissingResourceError(
            f"LFW's pair list {pairs_file}", expected_at=f"{img_root / pairs_file} or {root / pairs_file}",
            how_to_get=_HOW_LFW,
        )
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
            raise MissingResourceError(
                f"LFW image {name}_{num:04d}.jpg listed in {pf.name}", expected_at=str(path), how_to_get=_HOW_LFW
            )
    meta = {
        "source": str(img_root),
        "pairs_file": str(pf),
        "files": [f"{name}/{name}_{num:04d}.jpg" for name, num in keys],
        "folds": sorted({r.fold for r in records}),
        "box_source": "whole image (LFW has no face boxes)",
    }
    faces = _build_faceset(
        paths, [name for name, _ in keys], [None] * len(keys), size=size, crop=crop, margin=0.0,
        name=f"lfw:{image_dir}", meta=meta, num_workers=num_workers, progress=progress,
    )
    pairs = torch.tensor([[row_of[r.a], row_of[r.b]] for r in records], dtype=torch.int64).reshape(-1, 2)
    same = torch.tensor([r.same for r in records], dtype=torch.bool)
    fold = torch.tensor([r.fold for r in records], dtype=torch.int64)
    return LFWPairs(faces=faces, pairs=pairs, same=same, fold=fold)


# --------------------------------------------------------------------------------------------------------------
# MPII
# --------------------------------------------------------------------------------------------------------------
_MPII_ANNOT = {
    "train": ("annot/train.json", "annotations/mpii_train.json"),
    "valid": ("annot/valid.json", "annotations/mpii_val.json"),
    "trainval": ("annot/trainval.json", "annotations/mpii_trainval.json"),
}
_MPII_GT = ("annot/gt_valid.mat", "annotations/mpii_gt_val.mat")
_HEAD_TOP, _UPPER_NECK = MPII_JOINTS.index("head_top"), MPII_JOINTS.index("upper_neck")


def _parse_head_box(value: Any) -> list[float] | None:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.size != 4 or not np.isfinite(arr).all():
        return None
    x0, y0, x1, y1 = arr.tolist()
    return [min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1)]


def _mpii_entries(path: Path) -> list[dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _format_error(path, None, f"not valid JSON ({exc})") from None
    if not isinstance(data, list):
        raise _format_error(path, None, "expected a JSON list of person entries")
    for k, e in enumerate(data):
        if not isinstance(e, dict) or not {"image", "center", "scale", "joints", "joints_vis"} <= set(e):
            raise _format_error(path, None, f"entry {k} lacks one of image, center, scale, joints, joints_vis")
        if np.asarray(e["joints"], dtype=np.float64).shape != (16, 2) or np.asarray(e["joints_vis"]).reshape(-1).size != 16:
            raise _format_error(path, None, f"entry {k}: joints must be 16 x 2 and joints_vis 16 values (MPII order)")
        if np.asarray(e["center"], dtype=np.float64).reshape(-1).size != 2 or not float(e["scale"]) > 0:
            raise _format_error(path, None, f"entry {k}: center must be [x, y] and scale > 0")
    return data


def _mat_head_boxes(path: Path, n: int) -> np.ndarray:
    """(n, 4) xyxy head boxes (1-based, as stored) from HRNet's gt_valid.mat / mmpose's mpii_gt_val.mat."""
    from scipy.io import loadmat

    try:
        mat = loadmat(str(path))
    except Exception as exc:  # scipy raises several types for corrupt files
        raise _format_error(path, None, f"cannot read MATLAB file ({exc})") from None
    hb = mat.get("headboxes_src")
    if hb is None or hb.ndim != 3 or hb.shape[:2] != (2, 2):
        raise _format_error(path, None, "expected a 2 x 2 x N array 'headboxes_src'")
    if hb.shape[2] != n:
        raise _format_error(path, None, f"headboxes_src has {hb.shape[2]} boxes but the annotation has {n} entries")
    # headboxes_src[corner, coordinate, person]
    return np.stack([hb[0, 0], hb[0, 1], hb[1, 0], hb[1, 1]], axis=1).astype(np.float64)


def load_mpii(
    data_root: PathLike,
    *,
    split: Literal["train", "valid", "trainval"] = "valid",
    size: int = 64,
    head_boxes: Literal["auto", "json", "mat", "joints"] = "auto",
    n_samples: int | None = None,
    max_images: int | None = None,
    seed: int | torch.Generator = 0,
    num_workers: int = 0,
    progress: bool = False,
) -> PoseSet:
    """Load MPII Human Pose person crops with their 16 keypoints and head boxes.

    Annotation format: the JSON conversion of MPII's MATLAB annotation that HRNet and mmpose use: a list of
    person entries ``{"image": "015601864.jpg", "center": [x, y], "scale": s, "joints": [[x, y] x 16],
    "joints_vis": [0/1 x 16]}`` in MPII joint order (:data:`privkit.data.types.MPII_JOINTS`), with
    MATLAB's 1-based pixel coordinates and ``scale`` = person height / 200 px. Like HRNet, privkit shifts the
    centre down by 15 * s, enlarges the scale by 1.25 and converts to 0-based pixels; the crop is the square
    of side 200 * 1.25 * s around that centre (black padding outside the photo), resized to ``size``.

    Head boxes (the PCKh normaliser) are not in these JSON files. ``head_boxes`` chooses the source:

    - ``"json"``: an optional per-entry field ``"head_box"`` (or ``"headbox"`` / ``"headboxes"``):
      ``[x1, y1, x2, y2]`` or ``[[x1, y1], [x2, y2]]`` in the same 1-based coordinates as the joints;
    - ``"mat"``: ``headboxes_src`` (2 x 2 x N) from HRNet's ``annot/gt_valid.mat`` (mmpose:
      ``annotations/mpii_gt_val.mat``), in the order of the validation JSON (``split="valid"`` only);
    - ``"joints"``: privkit's [I] substitute: the axis-aligned square centred on the upper-neck-to-head-top
      segment with that segment's length as its side. Entries whose head top or upper neck is not
      annotated are dropped (counted in ``meta["dropped_no_head_box"]``);
    - ``"auto"``: ``"json"`` if every entry has the field, else ``"mat"`` for the validation split if the
      file exists, else ``"joints"``.

    The official ``mpii_human_pose_v1_u12_1.mat`` is not read (its nested MATLAB structs need a matching
    step between its people and the JSON entries); use the HRNet ``gt_valid.mat`` for official head boxes.

    Keypoints of joints that are not annotated (``joints_vis`` 0) are set to 0 and marked not visible.
    MPII has no person identities; ``identity`` is the id of the source photograph (people in the same
    photo share it), which is the unit a per-image privacy guarantee protects.

    Args:
        data_root: folder holding ``mpii/``.
        split: ``"train"``, ``"valid"`` or ``"trainval"`` (HRNet's files; ``"test"`` has no labels).
        size: output side in pixels, in [8, 4096].
        head_boxes: head-box source (above).
        n_samples: keep a random subset of this many entries (seeded), or ``None`` for all.
        max_images: decode at most this many crops (default: :func:`default_max_images`).
        seed: seed of the subset draw.
        num_workers, progress: decoding threads and progress bar.

    Returns:
        PoseSet with ``meta["head_box_source"]``, ``meta["files"]`` and the crop windows.

    Raises:
        MissingResourceError: the annotation file, the image folder, a listed image, or the requested head-box
            source is missing.
    """
    root = _as_root(data_root)
    split = check_choice("split", split, tuple(_MPII_ANNOT))
    size = _check_size(size)
    head_boxes = check_choice("head_boxes", head_boxes, ("auto", "json", "mat", "joints"))
    num_workers = _check_workers(num_workers)
    cap = _resolve_max_images(max_images, size)
    base = root / "mpii"
    ann_path = _first_existing(base / rel for rel in _MPII_ANNOT[split])
    if ann_path is None:
        raise MissingResourceError(
            f"MPII's {split} annotations ({' or '.join(_MPII_ANNOT[split])})",
            expected_at=str(base / _MPII_ANNOT[split][0]),
            how_to_get=_HOW_MPII,
        )
    image_dir = base / "images"
    if not image_dir.is_dir():
        raise MissingResourceError("MPII's image folder images/", expected_at=str(image_dir), how_to_get=_HOW_MPII)
    entries = _mpii_entries(ann_path)
    if not entries:
        raise InsufficientDataError(f"MPII: need at least 1 annotated person in {ann_path}, got 0")
    n_all = len(entries)

    joints = torch.tensor([e["joints"] for e in entries], dtype=torch.float64).reshape(n_all, 16, 2) - 1.0
    vis = torch.tensor([np.asarray(e["joints_vis"]).reshape(-1).tolist() for e in entries], dtype=torch.float64) > 0
    centers = torch.tensor([np.asarray(e["center"], dtype=np.float64).reshape(2).tolist() for e in entries], dtype=torch.float64)
    scales = torch.tensor([float(e["scale"]) for e in entries], dtype=torch.float64)

    json_keys = ("head_box", "headbox", "headboxes")
    json_boxes = []
    for e in entries:
        v = next((e[k] for k in json_keys if k in e), None)
        json_boxes.append(None if v is None else _parse_head_box(v))
    gt_path = _first_existing(base / rel for rel in _MPII_GT) if split == "valid" else None
    source = head_boxes
    if source == "auto":
        source = "json" if all(b is not None for b in json_boxes) else "mat" if gt_path is not None else "joints"
    keep = torch.ones(n_all, dtype=torch.bool)
    if source == "json":
        missing = sum(b is None for b in json_boxes)
        if missing:
            raise InvalidArgumentError(
                f"head_boxes='json' needs a 'head_box' field on every entry; {missing} of {n_all} entries in "
                f"{ann_path} have none (or an invalid one). Use head_boxes='mat' or 'joints'."
            )
        hb = torch.tensor(json_boxes, dtype=torch.float64) - 1.0
        source_text = f"'head_box' fields of {ann_path.name}"
    elif source == "mat":
        if gt_path is None:
            raise MissingResourceError(
                "MPII's validation ground truth with head boxes (gt_valid.mat / mpii_gt_val.mat; split='valid' only)",
                expected_at=str(base / _MPII_GT[0]),
                how_to_get=_HOW_MPII,
            )
        hb = torch.from_numpy(_mat_head_boxes(gt_path, n_all)) - 1.0
        source_text = f"headboxes_src of {gt_path.name}"
    else:
        top, neck = joints[:, _HEAD_TOP], joints[:, _UPPER_NECK]
        keep = vis[:, _HEAD_TOP] & vis[:, _UPPER_NECK]
        mid = (top + neck) / 2.0
        half = ((top - neck).norm(dim=1) / 2.0).clamp_min(0.5)[:, None]
        hb = torch.cat((mid - half, mid + half), dim=1)
        source_text = "privkit [I]: square on the upper-neck-to-head-top segment"
    rows = torch.nonzero(keep).flatten()
    dropped = n_all - int(rows.numel())
    if rows.numel() == 0:
        raise InsufficientDataError("MPII: need at least 1 entry with a head box, got 0")
    if n_samples is not None:
        n_samples = check_int("n_samples", n_samples, minimum=1, maximum=int(rows.numel()))
        rows = rows[torch.randperm(rows.numel(), generator=_generator(seed))[:n_samples]].sort().values
    _check_budget(int(rows.numel()), cap, f"MPII {split}")

    r = rows.tolist()
    c = centers[rows].clone()
    s = scales[rows].clone()
    has_c = c[:, 0] != -1
    c[has_c, 1] += 15.0 * s[has_c]
    s = s * 1.25
    c = c - 1.0
    sides = 200.0 * s
    windows = [_square_around(float(cx), float(cy), float(sd)) for (cx, cy), sd in zip(c.tolist(), sides.tolist())]
    image_names = [str(entries[i]["image"]) for i in r]
    for nm in image_names:
        if "/" in nm or "\\" in nm or nm.startswith("."):
            raise _format_error(ann_path, None, f"image names must be plain file names, got {nm!r}")
    paths = [image_dir / nm for nm in image_names]

    def make_fn(win):
        return lambda w, h: win

    images, wins, _ = _decode_many(
        paths, [make_fn(w) for w in windows], size, num_workers=num_workers, progress=progress, desc=f"mpii-{split}"
    )
    kp = _map_points(joints[rows], wins, size)
    visible = vis[rows]
    kp[~visible] = 0.0
    head = _map_points(hb[rows].reshape(-1, 2, 2), wins, size).reshape(-1, 4)
    ident, names = _contiguous_ids(image_names)
    return PoseSet(
        images=images,
        keypoints=kp,
        visible=visible,
        head_box=head,
        identity=ident,
        name=f"mpii-{split}",
        meta={
            "source": str(image_dir),
            "annotation": str(ann_path),
            "files": image_names,
            "entries": r,
            "identity_names": [str(n) for n in names],
            "identity_is": "source photograph",
            "head_box_source": source_text,
            "dropped_no_head_box": dropped,
            "windows": [list(w) for w in wins],
            "size": size,
            "seed": seed if isinstance(seed, int) else None,
        },
    )


# --------------------------------------------------------------------------------------------------------------
# CIFAR-10 / CIFAR-100 (python pickle batches, read with a restricted unpickler)
# --------------------------------------------------------------------------------------------------------------
def _numpy_reconstruct():
    try:
        from numpy._core.multiarray import _reconstruct, scalar
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _reconstruct, scalar  # type: ignore[no-redef]
    return _reconstruct, scalar


class _CifarUnpickler(pickle.Unpickler):
    """An unpickler that can rebuild only what the CIFAR batches contain.

    The CIFAR "python version" files are pickled dicts of bytes, lists of ints and numpy uint8 arrays. Plain
    ``pickle.load`` would execute any callable a crafted file names, so this unpickler resolves only numpy's
    array/dtype/scalar reconstructors and ``_codecs.encode`` (how Python 3 writes bytes at protocol 2); every
    other global is refused. Containers and strings need no globals.
    """

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        reconstruct, scalar = _numpy_reconstruct()
        allowed = {
            ("numpy.core.multiarray", "_reconstruct"): reconstruct,
            ("numpy._core.multiarray", "_reconstruct"): reconstruct,
            ("numpy.core.multiarray", "scalar"): scalar,
            ("numpy._core.multiarray", "scalar"): scalar,
            ("numpy", "ndarray"): np.ndarray,
            ("numpy", "dtype"): np.dtype,
            ("_codecs", "encode"): codecs.encode,
        }
        fn = allowed.get((module, name))
        if fn is None:
            raise pickle.UnpicklingError(f"global '{module}.{name}' is not allowed in a CIFAR batch")
        return fn


def _load_cifar_pickle(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            obj = _CifarUnpickler(fh, encoding="bytes").load()
    except pickle.UnpicklingError as exc:
        raise _format_error(path, None, f"refused or unreadable pickle ({exc}); privkit only reads genuine CIFAR batches") from None
    except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:
        raise _format_error(path, None, f"not a CIFAR batch ({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, dict):
        raise _format_error(path, None, f"expected a pickled dict, got {type(obj).__name__}")
    out: dict[str, Any] = {}
    for k, v in obj.items():
        key = k.decode("latin1") if isinstance(k, bytes) else str(k)
        if isinstance(v, np.ndarray) and v.dtype == object:
            raise _format_error(path, None, f"entry {key!r} is an object array, which CIFAR batches never hold")
        out[key] = v
    return out


def _names(path: Path, meta: Mapping[str, Any], key: str) -> tuple[str, ...]:
    v = meta.get(key)
    if not isinstance(v, (list, tuple)) or not v:
        raise _format_error(path, None, f"expected a list '{key}'")
    return tuple(x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in v)


@dataclass
class LabelledImages:
    """Class-labelled images (CIFAR).

    Attributes:
        images: (N, 3, H, W) float32 in [0, 1].
        labels: (N,) int64 class labels (CIFAR-100: the 100 fine labels).
        label_names: names of the classes, indexed by label.
        coarse_labels: CIFAR-100's (N,) int64 20 super-class labels, else ``None``.
        coarse_label_names: names of the super-classes (empty for CIFAR-10).
        name: dataset name; meta: provenance (files, rows, seed).
    """

    images: torch.Tensor
    labels: torch.Tensor
    label_names: tuple[str, ...]
    coarse_labels: torch.Tensor | None = None
    coarse_label_names: tuple[str, ...] = ()
    name: str = ""
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.images.shape[0])


def load_cifar(
    data_root: PathLike,
    *,
    dataset: Literal["cifar10", "cifar100"] = "cifar10",
    split: Literal["train", "test"] = "test",
    n_samples: int | None = None,
    max_images: int | None = None,
    seed: int | torch.Generator = 0,
) -> LabelledImages:
    """Load CIFAR-10 or CIFAR-100 from the official "python version" pickle batches.

    The batches are Python pickles, which is the official format; privkit reads them with a restricted
    unpickler that can only rebuild dicts, lists, bytes and numpy arrays (see ``_CifarUnpickler``), so a
    crafted file cannot run code. Each batch holds ``data`` (n x 3072 uint8, channel-major 32 x 32 planes)
    and ``labels`` (CIFAR-10) or ``fine_labels``/``coarse_labels`` (CIFAR-100).

    Args:
        data_root: folder holding ``cifar-10-batches-py/`` or ``cifar-100-python/``.
        dataset: ``"cifar10"`` or ``"cifar100"``.
        split: ``"train"`` (CIFAR-10: ``data_batch_1`` .. ``data_batch_5``) or ``"test"``.
        n_samples: keep a seeded random subset of this many images (sorted by position), ``None`` for all.
        max_images: decode at most this many images (default: :func:`default_max_images` at 32 px, about
            43,000, so the full 50,000-image training sets need a larger value or ``n_samples``).
        seed: seed of the subset draw.

    Returns:
        LabelledImages with (N, 3, 32, 32) float32 images in [0, 1].

    Raises:
        MissingResourceError: a batch or meta file is missing.
        InvalidArgumentError: a file is not a genuine CIFAR batch (including refused pickle globals).
    """
    root = _as_root(data_root)
    dataset = check_choice("dataset", dataset, ("cifar10", "cifar100"))
    split = check_choice("split", split, ("train", "test"))
    cap = _resolve_max_images(max_images, 32)
    if dataset == "cifar10":
        folder = root / "cifar-10-batches-py"
        files = [f"data_batch_{i}" for i in range(1, 6)] if split == "train" else ["test_batch"]
        meta_name, label_key = "batches.meta", "labels"
    else:
        folder = root / "cifar-100-python"
        files = [split]
        meta_name, label_key = "meta", "fine_labels"
    for f in [*files, meta_name]:
        if not (folder / f).is_file():
            raise MissingResourceError(f"{dataset.upper()} file {f}", expected_at=str(folder / f), how_to_get=_HOW_CIFAR)
    meta_obj = _load_cifar_pickle(folder / meta_name)
    if dataset == "cifar10":
        label_names = _names(folder / meta_name, meta_obj, "label_names")
        coarse_names: tuple[str, ...] = ()
    else:
        label_names = _names(folder / meta_name, meta_obj, "fine_label_names")
        coarse_names = _names(folder / meta_name, meta_obj, "coarse_label_names")

    datas, labels, coarse = [], [], []
    for f in files:
        path = folder / f
        b = _load_cifar_pickle(path)
        data = b.get("data")
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
            raise _format_error(path, None, "expected 'data' as an (n, 3072) uint8 array")
        lab = np.asarray(b.get(label_key, []), dtype=np.int64).reshape(-1)
        if lab.shape[0] != data.shape[0]:
            raise _format_error(path, None, f"'{label_key}' must have one label per image ({data.shape[0]})")
        if lab.size and (lab.min() < 0 or lab.max() >= len(label_names)):
            raise _format_error(path, None, f"labels must lie in [0, {len(label_names) - 1}]")
        datas.append(data)
        labels.append(lab)
        if dataset == "cifar100":
            cl = np.asarray(b.get("coarse_labels", []), dtype=np.int64).reshape(-1)
            if cl.shape[0] != data.shape[0] or (cl.size and (cl.min() < 0 or cl.max() >= len(coarse_names))):
                raise _format_error(path, None, "'coarse_labels' must hold one valid super-class per image")
            coarse.append(cl)
    data = np.concatenate(datas)
    lab = np.concatenate(labels)
    n = data.shape[0]
    if n_samples is not None:
        n_samples = check_int("n_samples", n_samples, minimum=1, maximum=n)
        rows = torch.randperm(n, generator=_generator(seed))[:n_samples].sort().values.numpy()
    else:
        rows = np.arange(n)
    _check_budget(len(rows), cap, f"{dataset} {split}")
    images = torch.from_numpy(data[rows].reshape(-1, 3, 32, 32).copy()).to(torch.float32).div_(255.0)
    return LabelledImages(
        images=images,
        labels=torch.from_numpy(lab[rows].copy()),
        label_names=label_names,
        coarse_labels=torch.from_numpy(np.concatenate(coarse)[rows].copy()) if dataset == "cifar100" else None,
        coarse_label_names=coarse_names,
        name=f"{dataset}-{split}",
        meta={"source": str(folder), "files": files, "rows": rows.tolist(), "seed": seed if isinstance(seed, int) else None},
    )


# --------------------------------------------------------------------------------------------------------------
# MovieLens-100K
# --------------------------------------------------------------------------------------------------------------
@dataclass
class MovieLensRatings:
    """MovieLens-100K ratings as dense user x item matrices (0 = not rated).

    Attributes:
        ratings: (users, items) float32, every rating in ``u.data``.
        train: (users, items) float32, the ratings of ``<fold>.base``.
        test: (users, items) float32, the ratings of ``<fold>.test``.
        fold: the official split used (``"u1"`` .. ``"u5"``, ``"ua"``, ``"ub"``).
        meta: provenance.

    Row ``u`` is user id ``u + 1`` and column ``i`` is item id ``i + 1``.
    """

    ratings: torch.Tensor
    train: torch.Tensor
    test: torch.Tensor
    fold: str
    meta: dict = field(default_factory=dict)

    @property
    def n_users(self) -> int:
        return int(self.ratings.shape[0])

    @property
    def n_items(self) -> int:
        return int(self.ratings.shape[1])


def _read_ratings(path: Path) -> np.ndarray:
    rows = []
    for k, line in enumerate(_read_lines(path), start=1):
        parts = line.split("\t")
        if len(parts) != 4:
            raise _format_error(path, k, f"expected 'user<TAB>item<TAB>rating<TAB>timestamp', got {line!r}")
        try:
            u, i, r, _ = (int(x) for x in parts)
        except ValueError:
            raise _format_error(path, k, f"expected four integers, got {line!r}") from None
        if u < 1 or i < 1 or not 1 <= r <= 5:
            raise _format_error(path, k, f"ids start at 1 and ratings lie in 1..5, got {line!r}")
        rows.append((u, i, r))
    if not rows:
        raise _format_error(path, None, "holds no ratings")
    return np.asarray(rows, dtype=np.int64)


def _dense(path: Path, triples: np.ndarray, n_users: int, n_items: int) -> torch.Tensor:
    if triples[:, 0].max() > n_users or triples[:, 1].max() > n_items:
        raise _format_error(path, None, f"user/item ids exceed the {n_users} users x {n_items} items of u.info / u.data")
    flat = (triples[:, 0] - 1) * n_items + (triples[:, 1] - 1)
    if np.unique(flat).size != flat.size:
        raise _format_error(path, None, "rates some (user, item) pair more than once")
    m = torch.zeros(n_users * n_items, dtype=torch.float32)
    m[torch.from_numpy(flat)] = torch.from_numpy(triples[:, 2].astype(np.float32))
    return m.reshape(n_users, n_items)


def load_movielens_100k(data_root: PathLike, *, fold: str = "u1") -> MovieLensRatings:
    """Load MovieLens-100K and one of its official train/test splits.

    Args:
        data_root: folder holding ``ml-100k/``.
        fold: ``"u1"`` .. ``"u5"`` (the 5-fold 80/20 splits) or ``"ua"``/``"ub"`` (10 test ratings per user).

    Returns:
        MovieLensRatings; matrix sizes come from ``u.info`` when present (943 x 1682), else from the largest
        ids in ``u.data``.

    Raises:
        MissingResourceError: ``u.data`` or the fold files are missing.
        InvalidArgumentError: malformed files, or a fold whose train and test ratings overlap or are not in
            ``u.data``.
    """
    root = _as_root(data_root)
    fold = check_choice("fold", fold, ("u1", "u2", "u3", "u4", "u5", "ua", "ub"))
    base = root / "ml-100k"
    for f in ("u.data", f"{fold}.base", f"{fold}.test"):
        if not (base / f).is_file():
            raise MissingResourceError(f"MovieLens-100K file {f}", expected_at=str(base / f), how_to_get=_HOW_MOVIELENS)
    allr = _read_ratings(base / "u.data")
    n_users, n_items = int(allr[:, 0].max()), int(allr[:, 1].max())
    info = base / "u.info"
    if info.is_file():
        counts = {}
        for line in _read_lines(info):
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit():
                counts[parts[1]] = int(parts[0])
        if "users" in counts and "items" in counts:
            n_users, n_items = counts["users"], counts["items"]
    ratings = _dense(base / "u.data", allr, n_users, n_items)
    train = _dense(base / f"{fold}.base", _read_ratings(base / f"{fold}.base"), n_users, n_items)
    test = _dense(base / f"{fold}.test", _read_ratings(base / f"{fold}.test"), n_users, n_items)
    if bool(((train > 0) & (test > 0)).any()):
        raise _format_error(base / f"{fold}.test", None, f"shares ratings with {fold}.base; the split must be disjoint")
    for name, part in ((f"{fold}.base", train), (f"{fold}.test", test)):
        if not bool((part[part > 0] == ratings[part > 0]).all()):
            raise _format_error(base / name, None, "holds ratings that differ from or are absent in u.data")
    return MovieLensRatings(
        ratings=ratings, train=train, test=test, fold=fold,
        meta={"source": str(base), "n_ratings": int(allr.shape[0]), "n_train": int((train > 0).sum()),
              "n_test": int((test > 0).sum())},
    )


# --------------------------------------------------------------------------------------------------------------
# IJB-B / IJB-C (1:1 template verification)
# --------------------------------------------------------------------------------------------------------------
_HOW_IJB = (
    "IJB-B and IJB-C are distributed by NIST (https://www.nist.gov/programs-projects/face-challenges) under a "
    "licence agreement. privkit reads the widely used evaluation package of InsightFace "
    "(https://github.com/deepinsight/insightface/tree/master/recognition/_evaluation_/ijb, 'IJB_release'): "
    "extract it so that DATA_ROOT/IJBC/loose_crop/1.jpg, DATA_ROOT/IJBC/meta/ijbc_face_tid_mid.txt, "
    "DATA_ROOT/IJBC/meta/ijbc_template_pair_label.txt and (optional, for face boxes) "
    "DATA_ROOT/IJBC/meta/ijbc_name_5pts_score.txt exist (IJBB/... with the ijbb_ prefix for IJB-B; an enclosing "
    "IJB_release/ folder is also accepted)."
)
_IJB_NAMES = ("IJBB", "IJBC")


@dataclass
class IJBProtocol:
    """The 1:1 verification protocol of IJB-B or IJB-C: images grouped into media and templates, template pairs.

    Images are not decoded here (IJB-C has 227,630 of them): :meth:`faces` decodes any subset of rows, and
    :meth:`iter_faces` walks all of them in batches, so a caller can embed the whole set in bounded memory.

    Attributes:
        name: ``"IJBB"`` or ``"IJBC"``.
        image_dir: the ``loose_crop`` folder.
        files: (N,) image file names in ``image_dir``.
        template: (N,) int64 template id of each image (the protocol's ids).
        media: (N,) int64 media id of each image (frames of one video share a media id).
        landmarks: (N, 5, 2) float32 five-point landmarks in source pixels, or ``None`` when the landmark file is
            absent (then the face box is the whole loose crop).
        detection_score: (N,) float32 detector confidence from the landmark file, or ``None``.
        pairs: (P, 2) int64 template ids of each verification pair.
        same: (P,) bool, True for genuine (same-subject) pairs.
        meta: provenance (files read, counts).
    """

    name: str
    image_dir: Path
    files: list[str]
    template: torch.Tensor
    media: torch.Tensor
    landmarks: torch.Tensor | None
    detection_score: torch.Tensor | None
    pairs: torch.Tensor
    same: torch.Tensor
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.files)

    def boxes(self) -> list[list[float] | None]:
        """Face boxes in source pixels from the five landmarks (``None`` per image without landmarks)."""
        if self.landmarks is None:
            return [None] * len(self.files)
        return _landmark_boxes(self.landmarks.to(torch.float64)).tolist()

    def faces(
        self, rows: torch.Tensor | Sequence[int] | None = None, *, size: int = 112, margin: float = 0.1,
        num_workers: int = 0, progress: bool = False,
    ) -> FaceSet:
        """Decode the images at ``rows`` (default: all; mind the memory) into a :class:`FaceSet`.

        The crop is a square around the landmark box enlarged by ``margin`` per side (``crop="box"``), or the whole
        loose crop when there are no landmarks. ``identity`` holds the templates (IJB subjects are not in the
        1:1 files) as contiguous labels; ``attributes["template"]`` and ``attributes["media"]`` hold the protocol's
        template and media ids.
        """
        size = _check_size(size)
        check_nonnegative("margin", margin)
        num_workers = _check_workers(num_workers)
        if rows is None:
            idx = list(range(len(self.files)))
        else:
            idx = [int(r) for r in torch.as_tensor(rows, dtype=torch.int64).reshape(-1).tolist()]
            bad = [r for r in idx if r < 0 or r >= len(self.files)]
            if bad:
                raise InvalidArgumentError(f"rows must lie in [0, {len(self.files) - 1}], got {bad[0]}")
        all_boxes = self.boxes()
        boxes = [all_boxes[r] for r in idx]
        crop = "box" if self.landmarks is not None else "full"
        paths = [self.image_dir / self.files[r] for r in idx]
        t = self.template[idx]
        faces = _build_faceset(
            paths, t.tolist(), boxes, size=size, crop=crop, margin=float(margin), name=f"{self.name.lower()}",
            meta={"source": str(self.image_dir), "files": [self.files[r] for r in idx],
                  "box_source": "five-point landmarks" if self.landmarks is not None else "whole loose crop"},
            num_workers=num_workers, progress=progress,
            attributes={"template": t.clone(), "media": self.media[idx].clone()},
        )
        return faces

    def iter_faces(self, *, batch_size: int = 1024, size: int = 112, margin: float = 0.1, num_workers: int = 0):
        """Yield ``(rows, FaceSet)`` over all images in order, ``batch_size`` at a time."""
        batch_size = check_int("batch_size", batch_size, minimum=1)
        for start in range(0, len(self.files), batch_size):
            rows = torch.arange(start, min(start + batch_size, len(self.files)))
            yield rows, self.faces(rows, size=size, margin=margin, num_workers=num_workers)


def _ijb_dir(root: Path, name: str) -> Path | None:
    return _first_existing([root / name, root / "IJB_release" / name], want_dir=True)


def load_ijb(data_root: PathLike, *, name: Literal["IJBB", "IJBC"] = "IJBC", max_pairs: int | None = None) -> IJBProtocol:
    """Read IJB-B's or IJB-C's 1:1 verification protocol in InsightFace's ``IJB_release`` format.

    Files (``p`` = ``ijbb`` or ``ijbc``): ``DATA_ROOT/<name>/meta/p_face_tid_mid.txt`` (``image template media``
    per line), ``DATA_ROOT/<name>/meta/p_template_pair_label.txt`` (``template1 template2 label``, label 1 =
    genuine), optional ``DATA_ROOT/<name>/meta/p_name_5pts_score.txt`` (``image x1 y1 ... x5 y5 score``) and the
    images ``DATA_ROOT/<name>/loose_crop/<image>``. Nothing is decoded: see :class:`IJBProtocol`.

    Args:
        data_root: folder holding ``IJBC/`` (or ``IJB_release/IJBC/``).
        name: ``"IJBB"`` or ``"IJBC"``.
        max_pairs: keep only the first ``max_pairs`` pairs of the pair file (default all; for quick looks).

    Raises:
        MissingResourceError: the folder or a required file is missing (the message says where to get them).
        InvalidArgumentError: a file does not follow the format (the message names the line), or a pair names a
            template that has no image.
    """
    root = _as_root(data_root)
    name = check_choice("name", name, _IJB_NAMES)
    if max_pairs is not None:
        max_pairs = check_int("max_pairs", max_pairs, minimum=1)
    base = _ijb_dir(root, name)
    if base is None:
        raise MissingResourceError(f"{name}'s evaluation folder", expected_at=f"{root / name} or {root / 'IJB_release' / name}",
                                   how_to_get=_HOW_IJB)
    p = name.lower()
    tid_file = base / "meta" / f"{p}_face_tid_mid.txt"
    pair_file = base / "meta" / f"{p}_template_pair_label.txt"
    lmk_file = base / "meta" / f"{p}_name_5pts_score.txt"
    image_dir = base / "loose_crop"
    for what, path, is_dir in ((f"{name} image-template-media list", tid_file, False),
                               (f"{name} template pair list", pair_file, False),
                               (f"{name} loose face crops", image_dir, True)):
        if not (path.is_dir() if is_dir else path.is_file()):
            raise MissingResourceError(what, expected_at=str(path), how_to_get=_HOW_IJB)

    files: list[str] = []
    tmpl: list[int] = []
    med: list[int] = []
    for k, line in enumerate(_read_lines(tid_file)):
        parts = line.split()
        if len(parts) != 3:
            raise _format_error(tid_file, k + 1, f"expected 'image template media', got {line!r}")
        try:
            tmpl.append(int(parts[1]))
            med.append(int(parts[2]))
        except ValueError:
            raise _format_error(tid_file, k + 1, f"template and media ids must be integers, got {line!r}") from None
        files.append(parts[0])
    if not files:
        raise _format_error(tid_file, None, "lists no image")

    pa: list[int] = []
    pb: list[int] = []
    lab: list[bool] = []
    for k, line in enumerate(_read_lines(pair_file)):
        if max_pairs is not None and len(pa) >= max_pairs:
            break
        parts = line.split()
        if len(parts) != 3:
            raise _format_error(pair_file, k + 1, f"expected 'template1 template2 label', got {line!r}")
        try:
            a, b, y = (int(v) for v in parts)
        except ValueError:
            raise _format_error(pair_file, k + 1, f"expected three integers, got {line!r}") from None
        if y not in (0, 1):
            raise _format_error(pair_file, k + 1, f"label must be 0 or 1, got {y}")
        pa.append(a)
        pb.append(b)
        lab.append(bool(y))
    if not pa:
        raise _format_error(pair_file, None, "lists no pair")
    known = set(tmpl)
    missing = sorted({t for t in pa + pb if t not in known})
    if missing:
        raise InvalidArgumentError(
            f"{pair_file}: {len(missing)} template(s) of the pair list have no image in {tid_file.name} "
            f"(first: {missing[0]})"
        )

    landmarks = score = None
    if lmk_file.is_file():
        by_name: dict[str, tuple[list[float], float]] = {}
        for k, line in enumerate(_read_lines(lmk_file)):
            parts = line.split()
            if len(parts) != 12:
                raise _format_error(lmk_file, k + 1, f"expected 'image x1 y1 ... x5 y5 score' (12 fields), got {line!r}")
            try:
                vals = [float(v) for v in parts[1:]]
            except ValueError:
                raise _format_error(lmk_file, k + 1, f"landmarks and score must be numbers, got {line!r}") from None
            if not all(np.isfinite(vals)):
                raise _format_error(lmk_file, k + 1, f"landmarks and score must be finite, got {line!r}")
            by_name[parts[0]] = (vals[:10], vals[10])
        absent = [f for f in files if f not in by_name]
        if absent:
            raise InvalidArgumentError(f"{lmk_file}: no landmarks for {len(absent)} image(s) (first: {absent[0]})")
        landmarks = torch.tensor([by_name[f][0] for f in files], dtype=torch.float32).reshape(-1, 5, 2)
        score = torch.tensor([by_name[f][1] for f in files], dtype=torch.float32)

    same = torch.tensor(lab, dtype=torch.bool)
    return IJBProtocol(
        name=name, image_dir=image_dir, files=files,
        template=torch.tensor(tmpl, dtype=torch.int64), media=torch.tensor(med, dtype=torch.int64),
        landmarks=landmarks, detection_score=score,
        pairs=torch.tensor([pa, pb], dtype=torch.int64).T.contiguous(), same=same,
        meta={"source": str(base), "n_images": len(files), "n_templates": len(known), "n_pairs": len(pa),
              "n_genuine": int(same.sum()), "landmarks": lmk_file.is_file()},
    )
