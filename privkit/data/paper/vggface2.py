"""VGGFace2: ``VGGFace2/{train,test}/n000001/0001_01.jpg``, optional ``VGGFace2/bb_landmark/loose_bb_{train,test}.csv``
and ``VGGFace2/identity_meta.csv`` (also looked for under ``VGGFace2/meta/``)."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Literal

import torch

from ..._validate import check_choice
from ...errors import MissingResourceError
from ..types import FaceSet
from .common import CropMode, PathLike, _as_root, _first_existing, _format_error
from .identity_folders import IdentitySelection, _check_face_args, _load_selected_folders, _scan_identity_folders

__all__ = ["load_vggface2"]

_HOW_VGGFACE2 = (
    "VGGFace2 (Cao et al., FG 2018) was distributed at http://www.robots.ox.ac.uk/~vgg/data/vgg_face2/ as "
    "vggface2_train.tar.gz and vggface2_test.tar.gz (plus bb_landmark.tar.gz and identity_meta.csv); the authors "
    "have withdrawn it from public download, so use a copy you are licensed to hold. Extract it so that "
    "DATA_ROOT/VGGFace2/test/n000001/0001_01.jpg exists, with DATA_ROOT/VGGFace2/bb_landmark/loose_bb_test.csv "
    "and DATA_ROOT/VGGFace2/identity_meta.csv optional."
)


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


def load_vggface2(data_root: PathLike, *, split: Literal["train", "test"] = "test", size: int = 64,
                  crop: CropMode = "center", margin: float = 0.25, use_boxes: bool = True,
                  selection: IdentitySelection | None = None, max_images: int | None = None,
                  seed: int | torch.Generator = 0, num_workers: int = 0, progress: bool = False) -> FaceSet:
    """Load VGGFace2 (``VGGFace2/{train,test}/<class id>/<image>.jpg``).

    VGGFace2-20 as privkit defines it [I]: ``IdentitySelection(min_images=20, images_per_identity=20)`` (and
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
        selection, seed: identity selection (:class:`IdentitySelection`; ``None``: all images) and its seed.
        max_images: decode at most this many images (default: :func:`default_max_images`).
        num_workers, progress: decoding threads and progress bar.

    Raises:
        MissingResourceError: ``VGGFace2/<split>/`` is missing (the message says where to get it).
    """
    root = _as_root(data_root)
    split = check_choice("split", split, ("train", "test"))
    size, crop, margin, selection, num_workers, cap = _check_face_args(size, crop, margin, selection, num_workers,
                                                                      max_images)
    base = _vggface2_root(root)
    image_root = None if base is None else base / split
    if image_root is None or not image_root.is_dir():
        raise MissingResourceError(f"VGGFace2's {split} images (VGGFace2/{split}/n000001/0001_01.jpg, ...)",
                                   expected_at=str(root / "VGGFace2" / split), how_to_get=_HOW_VGGFACE2)
    rels, owners = _scan_identity_folders(image_root, f"VGGFace2's {split} images", _HOW_VGGFACE2)
    boxes = None
    meta: dict[str, Any] = {"split": split}
    if use_boxes:
        bb = _first_existing(d / "bb_landmark" / f"loose_bb_{split}.csv" for d in (base, base / "meta"))
        if bb is not None:
            boxes = _read_vggface2_boxes(bb)
            meta["box_file"] = str(bb)
    attrs = None
    im = _first_existing([base / "identity_meta.csv", base / "meta" / "identity_meta.csv"])
    if im is not None:
        attrs = _read_vggface2_meta(im)
        meta["identity_meta"] = str(im)
    return _load_selected_folders(image_root, rels, owners, size=size, crop=crop, margin=margin, boxes=boxes,
                                  selection=selection, cap=cap, seed=seed, name=f"vggface2-{split}",
                                  num_workers=num_workers, progress=progress, meta=meta, attributes_by_owner=attrs)
