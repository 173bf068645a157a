"""MPII Human Pose: ``mpii/images/*.jpg`` and the HRNet JSON conversion ``mpii/annot/{train,valid}.json``
(+ ``mpii/annot/gt_valid.mat``), or the same files as mmpose names them: ``mpii/annotations/mpii_{train,val}.json``
(+ ``mpii_gt_val.mat``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from ..._validate import check_choice, check_int
from ...errors import InsufficientDataError, InvalidArgumentError, MissingResourceError
from ..types import MPII_JOINTS, PoseSet
from .common import (PathLike, _as_root, _check_budget, _check_size, _check_workers, _contiguous_ids, _decode_many,
                     _first_existing, _format_error, _generator, _map_points, _resolve_max_images, _square_around)

__all__ = ["load_mpii"]

_HOW_MPII = (
    "Download the images (mpii_human_pose_v1.tar.gz) from the official MPII Human Pose page "
    "http://human-pose.mpi-inf.mpg.de/#download and extract them to DATA_ROOT/mpii/images/. The annotations are "
    "the widely used JSON conversion of MPII's .mat file published with HRNet "
    "(https://github.com/leoxiaobin/deep-high-resolution-net.pytorch, 'annot' folder: train.json, valid.json, "
    "gt_valid.mat) -> DATA_ROOT/mpii/annot/; mmpose's copies (mpii_train.json, mpii_val.json, mpii_gt_val.mat, "
    "https://mmpose.readthedocs.io dataset page) may go to DATA_ROOT/mpii/annotations/ instead."
)

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
        if (np.asarray(e["joints"], dtype=np.float64).shape != (16, 2)
                or np.asarray(e["joints_vis"]).reshape(-1).size != 16):
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


def load_mpii(data_root: PathLike, *, split: Literal["train", "valid", "trainval"] = "valid", size: int = 64,
              head_boxes: Literal["auto", "json", "mat", "joints"] = "auto", n_samples: int | None = None,
              max_images: int | None = None, seed: int | torch.Generator = 0, num_workers: int = 0,
              progress: bool = False) -> PoseSet:
    """Load MPII Human Pose person crops with their 16 keypoints and head boxes.

    Annotation format: the JSON conversion of MPII's MATLAB annotation that HRNet and mmpose use: a list of
    person entries ``{"image": "015601864.jpg", "center": [x, y], "scale": s, "joints": [[x, y] x 16],
    "joints_vis": [0/1 x 16]}`` in MPII joint order (:data:`privkit.data.types.MPII_JOINTS`), with
    MATLAB's 1-based pixel coordinates and ``scale`` = person height / 200 px. Like HRNet, privkit shifts the
    centre down by 15 * s, enlarges the scale by 1.25 and converts to 0-based pixels; the crop is the square
    of side 200 * 1.25 * s around that centre (black padding outside the photo), resized to ``size``. Joints and
    head boxes keep the pixel-index convention (pixel ``i`` has its centre at ``i``, as privkit's pose sets) through
    the crop and the resize; the resize maps pixel centres, so each joint stays on the image content it marks.

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
        raise MissingResourceError(f"MPII's {split} annotations ({' or '.join(_MPII_ANNOT[split])})",
                                   expected_at=str(base / _MPII_ANNOT[split][0]), how_to_get=_HOW_MPII)
    image_dir = base / "images"
    if not image_dir.is_dir():
        raise MissingResourceError("MPII's image folder images/", expected_at=str(image_dir), how_to_get=_HOW_MPII)
    entries = _mpii_entries(ann_path)
    if not entries:
        raise InsufficientDataError(f"MPII: need at least 1 annotated person in {ann_path}, got 0")
    n_all = len(entries)

    joints = torch.tensor([e["joints"] for e in entries], dtype=torch.float64).reshape(n_all, 16, 2) - 1.0
    vis = torch.tensor([np.asarray(e["joints_vis"]).reshape(-1).tolist() for e in entries], dtype=torch.float64) > 0
    centers = torch.tensor([np.asarray(e["center"], dtype=np.float64).reshape(2).tolist() for e in entries],
                           dtype=torch.float64)
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
            raise InvalidArgumentError(f"head_boxes='json' needs a 'head_box' field on every entry; {missing} of "
                                       f"{n_all} entries in {ann_path} have none (or an invalid one). Use "
                                       "head_boxes='mat' or 'joints'.")
        hb = torch.tensor(json_boxes, dtype=torch.float64) - 1.0
        source_text = f"'head_box' fields of {ann_path.name}"
    elif source == "mat":
        if gt_path is None:
            raise MissingResourceError("MPII's validation ground truth with head boxes (gt_valid.mat / "
                                       "mpii_gt_val.mat; split='valid' only)", expected_at=str(base / _MPII_GT[0]),
                                       how_to_get=_HOW_MPII)
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

    images, wins, _ = _decode_many(paths, [make_fn(w) for w in windows], size, num_workers=num_workers,
                                   progress=progress, desc=f"mpii-{split}")
    kp = _map_points(joints[rows], wins, size, pixel_index=True)
    visible = vis[rows]
    kp[~visible] = 0.0
    head = _map_points(hb[rows].reshape(-1, 2, 2), wins, size, pixel_index=True).reshape(-1, 4)
    ident, names = _contiguous_ids(image_names)
    return PoseSet(
        images=images, keypoints=kp, visible=visible, head_box=head, identity=ident, name=f"mpii-{split}",
        meta={"source": str(image_dir), "annotation": str(ann_path), "files": image_names, "entries": r,
              "identity_names": [str(n) for n in names], "identity_is": "source photograph",
              "head_box_source": source_text, "dropped_no_head_box": dropped, "windows": [list(w) for w in wins],
              "size": size, "seed": seed if isinstance(seed, int) else None},
    )
