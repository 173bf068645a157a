"""Rehearsal data root, part 2: MPII and MovieLens in their official on-disk formats, and rehearsal weights for
every paper-scale model, so that the notebooks' paper branches can run end to end without the real data.

Nothing here is real data or a real model. The files have the exact layouts and formats the paper-scale loaders
read (:mod:`privkit.data.paper`, :mod:`privkit.encoders.paper_scale`, :func:`privkit.dppose.model.build_pose_model`,
:func:`privkit.synthesisnet.load_inception`), their content comes from privkit's own generators, and every folder
written carries a ``REHEARSAL.txt`` marker (plus a metadata entry where the file format has one). Results computed
on a rehearsal root are meaningless; it exists to exercise the code paths.

Written under ``root``:

====================================  ============================================================================
path                                  content
====================================  ============================================================================
``mpii/images/*.jpg``                 procedural figures of :func:`privkit.data.pose.load_synthpose` (private
                                      split, one person per photograph)
``mpii/annot/{train,valid,            HRNet's JSON conversion (``image``, ``center``, ``scale``, ``joints``,
trainval}.json``                      ``joints_vis``; 1-based pixels) of the renderer's exact keypoints
``mpii/annot/gt_valid.mat``           ``headboxes_src`` (the renderer's head boxes), ``pos_gt_src``,
                                      ``jnt_missing``, ``dataset_joints`` in the validation order
``ml-100k/u.data``, ``u.info``,       ratings 1..5 of a seeded low-rank model; the official split files
``u1.base`` .. ``u5.test``,           (five disjoint 20 % test folds; ``ua``/``ub``: 10 test ratings per user,
``ua.*``, ``ub.*``                    disjoint)
``weights/clip-vit-b16/``             open_clip folder: ``open_clip_config.json`` + ``open_clip_model.safetensors``
                                      (a CLIP of tiny widths with the real 512-D output, 224 px, patch 16)
``weights/dinov2-vits14/``,           ``dinov2_vit{s,b}14_pretrain.pth`` state dicts with DINOv2's parameter names
``weights/dinov2-vitb14/``            and widths (384 / 768), one transformer block
``weights/dinov2/hubconf.py``         privkit's stand-in for the facebookresearch/dinov2 checkout (see below)
``weights/sscd/``                     ``sscd_disc_mixup.torchscript.pt``: a small scripted CNN with SSCD's contract
``weights/tiny_vit_5m/``              ``model.safetensors``: timm ``tiny_vit_5m_224``, real architecture, random init
``weights/inception-v3/``             ``inception_v3.pth``: torchvision Inception-v3, real architecture (see below)
====================================  ============================================================================

Two formats fix their architecture, so the rehearsal keeps it:

- TinyViT-5M (the DP-pose backbone) is the real timm network (5.4 M parameters) with timm's random initialisation,
  stored in float16 (the loader copies it into the float32 network).
- Inception-v3 (the SynthesisNet FID/IS network) is torchvision's architecture, loaded strictly and *assigned*
  (the file's dtype is kept, so it must be float32). Its 94 convolution kernels are windows at random offsets
  into one shared pool of standard-normal values (``torch.save`` stores a storage once, so the file holds 15 MB
  instead of 95 MB); each BatchNorm's running variance is ``fan_in / 2``, which makes every convolution a
  He-initialised one, so activations stay of order 1 through the 94 layers; the classifier is its own N(0, 1/2048)
  matrix. The loaded parameters share memory; that is harmless for a frozen feature extractor in eval mode.

The DINOv2 loader builds its network with the local checkout's ``hubconf.py``, so the rehearsal writes a
*stand-in checkout*: one ``hubconf.py`` of privkit's own code (no code of the dinov2 repository) that exposes the
same hub entry points ``dinov2_vits14`` / ``dinov2_vitb14`` and builds a class-token vision transformer with DINOv2's
parameter names and shapes (patch 14, a 37 x 37 position grid for 518 px plus the class token, LayerScale, a final
LayerNorm, output width 384 / 768) but a single block instead of twelve. It only loads the rehearsal weights; a real
checkout must replace it for real runs. Existing folders are never overwritten unless they carry the rehearsal
marker.

Sizes and times with the defaults of :func:`write_model_rehearsal_root` (each summary reports its own): 50 MiB of
weights (CLIP 3.4, DINOv2 ViT-S/14 4.8, ViT-B/14 16.4, SSCD 0.2, TinyViT-5M 10.3, Inception-v3 15.1), MPII 0.9 MiB,
MovieLens 0.9 MiB; 4 to 9 s to write on two CPU cores, most of it rendering the figures.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from privkit._validate import check_choice, check_int
from privkit.errors import InvalidArgumentError
from privkit.data.types import MPII_JOINTS

__all__ = [
    "MARKER",
    "REHEARSAL_MODELS",
    "write_clip_rehearsal",
    "write_dinov2_rehearsal",
    "write_inception_rehearsal",
    "write_model_rehearsal_root",
    "write_movielens",
    "write_mpii",
    "write_rehearsal_weights",
    "write_sscd_rehearsal",
    "write_tiny_vit_rehearsal",
]

#: First line of every ``REHEARSAL.txt`` this module writes (and the key of its metadata entries).
MARKER = "privkit-rehearsal"

#: The weight folders :func:`write_rehearsal_weights` writes, in order (``dinov2`` is the stand-in checkout,
#: written with either DINOv2 size).
REHEARSAL_MODELS: tuple[str, ...] = (
    "clip-vit-b16", "dinov2-vits14", "dinov2-vitb14", "sscd", "tiny_vit_5m", "inception-v3",
)

# MPII joint abbreviations of the evaluation files (gt_valid.mat's dataset_joints), in MPII_JOINTS order.
_MPII_ABBREV = {
    "r_ankle": "rank", "r_knee": "rkne", "r_hip": "rhip", "l_hip": "lhip", "l_knee": "lkne", "l_ankle": "lank",
    "pelvis": "pelv", "thorax": "thor", "upper_neck": "neck", "head_top": "head", "r_wrist": "rwri",
    "r_elbow": "relb", "r_shoulder": "rsho", "l_shoulder": "lsho", "l_elbow": "lelb", "l_wrist": "lwri",
}
# ML-100K's rating histogram (fractions of 1..5 stars), used as the target marginal of the synthetic ratings.
_ML_RATING_FRACTIONS = (0.0611, 0.1137, 0.2715, 0.3417, 0.2120)
_ML_TIME_RANGE = (874_724_710, 893_286_638)  # ML-100K's first and last timestamps
_ML_MIN_PER_USER = 20  # as in ML-100K: every user has >= 20 ratings (ua/ub take 10 + 10 of them)
_DINOV2_DEPTH = 1
_CLIP_CFG = {
    "embed_dim": 512,
    "quick_gelu": True,
    "vision_cfg": {"image_size": 224, "layers": 1, "width": 64, "head_width": 32, "patch_size": 16},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 32, "heads": 1, "layers": 1},
}
_OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
_OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


# ------------------------------------------------------------------------------------------------- helpers
def _sub_seed(seed: int, name: str) -> int:
    """A 31-bit seed for one component, derived from the root seed and the component's name."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:4], "little") & 0x7FFFFFFF


def _root(root: Any) -> Path:
    if not isinstance(root, (str, os.PathLike)) or not str(root):
        raise InvalidArgumentError(f"root must be a non-empty path (str or os.PathLike), got {root!r}")
    return Path(root).expanduser()


def _is_marked(folder: Path) -> bool:
    marker = folder / "REHEARSAL.txt"
    if not marker.is_file():
        return False
    try:
        return marker.read_text(encoding="utf-8").splitlines()[:1] == [MARKER]
    except (OSError, UnicodeDecodeError):
        return False


def _fresh_folder(folder: Path) -> Path:
    """An empty ``folder``: created, or emptied when it holds an earlier rehearsal; never touches other files."""
    if folder.exists():
        if not folder.is_dir():
            raise InvalidArgumentError(f"{folder} exists and is not a folder; refusing to write rehearsal data there")
        if any(folder.iterdir()):
            if not _is_marked(folder):
                raise InvalidArgumentError(
                    f"{folder} holds files that are not privkit rehearsal data (no REHEARSAL.txt starting with "
                    f"{MARKER!r}); refusing to overwrite them. Write the rehearsal root into an empty folder."
                )
            shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _write_marker(folder: Path, what: str, lines: list[str], *, seed: int) -> None:
    from privkit import __version__

    text = [
        MARKER,
        "",
        f"REHEARSAL {what}: NOT the real thing.",
        f"Written by privkit {__version__} (tools/rehearsal/models.py), seed {seed}.",
        *lines,
        "Results computed from these files are meaningless; they exist so that privkit's paper-scale code paths",
        "can be rehearsed end to end. Replace this folder with the real files for a real run.",
        "",
    ]
    (folder / "REHEARSAL.txt").write_text("\n".join(text), encoding="utf-8")


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _files(folder: Path, root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


def _rehearsal_note(what: str, seed: int) -> str:
    return f"{MARKER}: {what}; random initialisation (seed {seed}), not the published weights"


# ---------------------------------------------------------------------------------------------------- MPII
def write_mpii(root: str | Path, *, n_train: int = 64, n_valid: int = 32, size: int = 128, seed: int = 0) -> dict:
    """Write ``mpii/images/*.jpg`` and HRNet's ``mpii/annot/{train,valid,trainval}.json`` + ``gt_valid.mat``.

    The photographs are the first ``n_train + n_valid`` figures of ``load_synthpose(split="private", seed=seed,
    size=size)`` (one person each, ``size`` x ``size`` JPEG, quality 95); the first ``n_train`` form the training
    split. Annotations follow the conventions :func:`privkit.data.paper.mpii.load_mpii` reads:

    - ``joints``: the renderer's exact keypoints (0-based pixel centres) plus 1 (MATLAB's 1-based pixels), all 16
      in MPII order, also for joints that are not visible (MPII annotates occluded joints);
    - ``joints_vis``: the renderer's visibility (in the frame, not occluded, not behind a nearer body part);
    - ``scale``: 1.1 x the larger side of the keypoints' bounding box / 200, and ``center`` the box centre
      (1-based) raised by ``15 * scale``, so that the loader's crop (centre lowered by ``15 * scale``, side
      ``200 * 1.25 * scale``) is centred on the figure and contains every keypoint;
    - ``gt_valid.mat``: ``headboxes_src`` (2 x 2 x N: corner, coordinate, person; 1-based) from the renderer's head
      boxes, ``pos_gt_src`` (16 x 2 x N, 1-based), ``jnt_missing`` (16 x N, 1 = not visible) and
      ``dataset_joints`` (1 x 16 cell of MPII's abbreviations), in the order of ``valid.json``.

    Args:
        root: the rehearsal data root (``mpii/`` is created in it; an existing non-rehearsal ``mpii/`` is refused).
        n_train: training photographs (>= 1).
        n_valid: validation photographs (>= 1).
        size: photograph side in pixels, 32..1024.
        seed: synthpose seed (>= 0).

    Returns:
        A summary: counts, ``bytes`` on disk, ``seconds`` to write, visible-joint fraction and file list size.

    Raises:
        InvalidArgumentError: bad arguments, or ``root/mpii`` holds files that are not rehearsal data.
    """
    from PIL import Image
    from scipy.io import savemat

    from privkit.data.pose import MAX_SIZE, MIN_SIZE, load_synthpose

    t0 = time.perf_counter()
    root = _root(root)
    n_train = check_int("n_train", n_train, minimum=1)
    n_valid = check_int("n_valid", n_valid, minimum=1)
    size = check_int("size", size, minimum=MIN_SIZE, maximum=MAX_SIZE)
    seed = check_int("seed", seed, minimum=0)
    base = _fresh_folder(root / "mpii")
    (base / "images").mkdir()
    (base / "annot").mkdir()
    n = n_train + n_valid
    pose = load_synthpose(split="private", n=n, seed=seed, size=size, device="cpu")
    pixels = (pose.images.clamp(0, 1) * 255.0).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()
    kp = pose.keypoints.to(torch.float64)  # 0-based pixel centres
    vis = pose.visible
    head = pose.head_box.to(torch.float64)  # 0-based xyxy
    entries = []
    for i in range(n):
        name = f"{i + 1:09d}.jpg"
        Image.fromarray(pixels[i]).save(base / "images" / name, quality=95)
        lo, hi = kp[i].min(dim=0).values, kp[i].max(dim=0).values
        extent = max(float((hi - lo).max()), 8.0)
        scale = round(1.1 * extent / 200.0, 6)
        centre = (lo + hi) / 2.0 + 1.0  # 1-based
        entries.append({
            "joints_vis": [int(v) for v in vis[i].tolist()],
            "joints": [[round(float(x) + 1.0, 4), round(float(y) + 1.0, 4)] for x, y in kp[i].tolist()],
            "image": name,
            "scale": scale,
            "center": [round(float(centre[0]), 4), round(float(centre[1]) - 15.0 * scale, 4)],
        })
    annot = base / "annot"
    (annot / "train.json").write_text(json.dumps(entries[:n_train]), encoding="utf-8")
    (annot / "valid.json").write_text(json.dumps(entries[n_train:]), encoding="utf-8")
    (annot / "trainval.json").write_text(json.dumps(entries), encoding="utf-8")
    valid = slice(n_train, n)
    hb = head[valid].numpy() + 1.0
    headboxes = np.stack([hb[:, 0:2].T, hb[:, 2:4].T])  # (corner, coordinate, person)
    joints_names = np.empty((1, len(MPII_JOINTS)), dtype=object)
    joints_names[0, :] = [_MPII_ABBREV[j] for j in MPII_JOINTS]
    savemat(annot / "gt_valid.mat", {
        "dataset_joints": joints_names,
        "jnt_missing": (~vis[valid]).numpy().T.astype(np.float64),
        "pos_gt_src": (kp[valid].numpy() + 1.0).transpose(1, 2, 0),
        "headboxes_src": headboxes,
    })
    _write_marker(base, "MPII Human Pose", [
        f"{n} procedural figures of privkit.data.pose.load_synthpose(split='private', seed={seed}, size={size}),",
        f"images 000000001.jpg .. {n:09d}.jpg; the first {n_train} are train.json, the other {n_valid} valid.json.",
        "Annotations: HRNet's JSON conversion and gt_valid.mat, with the renderer's exact keypoints (1-based).",
    ], seed=seed)
    return {
        "path": str(base), "n_train": n_train, "n_valid": n_valid, "size": size,
        "visible_fraction": float(vis.float().mean()), "bytes": _folder_bytes(base),
        "seconds": time.perf_counter() - t0,
    }


# ----------------------------------------------------------------------------------------------- MovieLens
def _user_counts(rng: np.random.Generator, n_users: int, n_items: int, n_ratings: int) -> np.ndarray:
    """Ratings per user: at least 20 each, the rest heavy-tailed (log-normal activity), capped at ``n_items``."""
    counts = np.full(n_users, _ML_MIN_PER_USER, dtype=np.int64)
    weights = rng.lognormal(0.0, 1.0, size=n_users)
    left = n_ratings - counts.sum()
    while left > 0:
        room = n_items - counts
        w = np.where(room > 0, weights, 0.0)
        add = np.minimum(rng.multinomial(left, w / w.sum()), room)
        counts += add
        left = n_ratings - counts.sum()
    return counts


def _fold_lines(triples: np.ndarray) -> str:
    order = np.lexsort((triples[:, 1], triples[:, 0]))
    return "".join(f"{u}\t{i}\t{r}\t{t}\n" for u, i, r, t in triples[order].tolist())


def write_movielens(
    root: str | Path, *, n_users: int = 120, n_items: int = 300, n_ratings: int = 6000, seed: int = 0
) -> dict:
    """Write ``ml-100k/`` as :func:`privkit.data.paper.movielens.load_movielens_100k` reads it.

    Ratings come from a seeded rank-5 model: ``score = user bias + item bias + <u, v> / sqrt(5) + 0.5 noise``, cut
    into 1..5 stars at the quantiles of ML-100K's rating histogram. Which items a user rates: every user rates at
    least 20 items (as in ML-100K), the remaining ratings are spread over users by a log-normal activity, and items
    are drawn without replacement with log-normal popularity. Timestamps are uniform over ML-100K's period.

    Files: ``u.data`` (tab-separated ``user item rating timestamp``, shuffled), ``u.info`` (``N users``,
    ``N items``, ``N ratings``), ``u1.base`` .. ``u5.test`` (five disjoint test folds covering every rating, 20 %
    each; base = the rest) and ``ua``/``ub`` (exactly 10 test ratings per user, the two test sets disjoint); split
    files are sorted by user and item as the official ones are.

    Args:
        root: the rehearsal data root (``ml-100k/`` is created in it).
        n_users: users (>= 1); n_items: items (>= 20).
        n_ratings: ratings, between ``20 * n_users`` and ``n_users * n_items``.
        seed: seed (>= 0).

    Returns:
        A summary with ``bytes``, ``seconds`` and the rating histogram.

    Raises:
        InvalidArgumentError: bad arguments, or ``root/ml-100k`` holds files that are not rehearsal data.
    """
    t0 = time.perf_counter()
    root = _root(root)
    n_users = check_int("n_users", n_users, minimum=1)
    n_items = check_int("n_items", n_items, minimum=_ML_MIN_PER_USER)
    n_ratings = check_int("n_ratings", n_ratings, minimum=_ML_MIN_PER_USER * n_users, maximum=n_users * n_items)
    seed = check_int("seed", seed, minimum=0)
    base = _fresh_folder(root / "ml-100k")
    rng = np.random.default_rng(_sub_seed(seed, "movielens"))
    rank = 5
    u = rng.standard_normal((n_users, rank))
    v = rng.standard_normal((n_items, rank))
    score = (rng.normal(0.0, 0.5, (n_users, 1)) + rng.normal(0.0, 0.7, (1, n_items)) + u @ v.T / math.sqrt(rank)
             + rng.normal(0.0, 0.5, (n_users, n_items)))
    counts = _user_counts(rng, n_users, n_items, n_ratings)
    popularity = np.log(rng.lognormal(0.0, 1.2, size=n_items))
    keys = popularity[None, :] + rng.gumbel(size=(n_users, n_items))  # Gumbel top-k: sampling without replacement
    ranked = np.argsort(-keys, axis=1)
    users = np.repeat(np.arange(n_users), counts)
    items = np.concatenate([ranked[k, : counts[k]] for k in range(n_users)])
    s = score[users, items]
    cuts = np.quantile(s, np.cumsum(_ML_RATING_FRACTIONS)[:-1])
    ratings = 1 + np.searchsorted(cuts, s, side="right")
    times = rng.integers(_ML_TIME_RANGE[0], _ML_TIME_RANGE[1] + 1, size=n_ratings)
    triples = np.stack([users + 1, items + 1, ratings, times], axis=1).astype(np.int64)
    shuffled = triples[rng.permutation(n_ratings)]
    (base / "u.data").write_text("".join(f"{a}\t{b}\t{c}\t{d}\n" for a, b, c, d in shuffled.tolist()))
    (base / "u.info").write_text(f"{n_users} users\n{n_items} items\n{n_ratings} ratings\n")
    fold = np.empty(n_ratings, dtype=np.int64)
    fold[rng.permutation(n_ratings)] = np.arange(n_ratings) % 5
    for k in range(5):
        (base / f"u{k + 1}.base").write_text(_fold_lines(triples[fold != k]))
        (base / f"u{k + 1}.test").write_text(_fold_lines(triples[fold == k]))
    # ua / ub: 10 test ratings per user each, disjoint (every user has >= 20 ratings)
    which = np.zeros(n_ratings, dtype=np.int64)  # 0 = in both bases, 1 = ua.test, 2 = ub.test
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for k in range(n_users):
        pick = start[k] + rng.permutation(counts[k])[:20]
        which[pick[:10]] = 1
        which[pick[10:]] = 2
    for name, code in (("ua", 1), ("ub", 2)):
        (base / f"{name}.base").write_text(_fold_lines(triples[which != code]))
        (base / f"{name}.test").write_text(_fold_lines(triples[which == code]))
    _write_marker(base, "MovieLens-100K", [
        f"{n_ratings} synthetic ratings of {n_users} users x {n_items} items from a seeded rank-{rank} model,",
        "cut to 1..5 stars at the quantiles of ML-100K's histogram; official split layout (u1..u5, ua, ub).",
    ], seed=seed)
    hist = np.bincount(ratings, minlength=6)[1:]
    return {
        "path": str(base), "n_users": n_users, "n_items": n_items, "n_ratings": n_ratings, "rank": rank,
        "rating_counts": {str(k + 1): int(c) for k, c in enumerate(hist)},
        "bytes": _folder_bytes(base), "seconds": time.perf_counter() - t0,
    }


# --------------------------------------------------------------------------------------------- CLIP (open_clip)
def write_clip_rehearsal(root: str | Path, *, seed: int = 0) -> dict:
    """``weights/clip-vit-b16/``: an open_clip folder (the Hugging Face layout the loader reads).

    ``open_clip_config.json`` holds ``model_cfg`` (the loader builds what it says) and OpenAI's ``preprocess_cfg``;
    the model is a CLIP with the real interface (224-px input, patch 16, QuickGELU, 512-D embedding, the 49,408-token
    vocabulary and 77-token context) but tiny widths (image tower: width 64, one block; text tower: width 32, one
    block), randomly initialised by open_clip (seeded), stored in float16 safetensors with a ``privkit-rehearsal``
    metadata entry; the config carries a ``privkit_rehearsal`` entry too (open_clip reads only ``model_cfg`` and
    ``preprocess_cfg``).
    """
    import open_clip
    from safetensors.torch import save_file

    t0 = time.perf_counter()
    root = _root(root)
    seed = check_int("seed", seed, minimum=0)
    folder = _fresh_folder(root / "weights" / "clip-vit-b16")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_sub_seed(seed, "clip-vit-b16"))
        model = open_clip.CLIP(**json.loads(json.dumps(_CLIP_CFG)))
    state = {k: v.detach().to(torch.float16 if v.is_floating_point() else v.dtype).contiguous()
             for k, v in model.state_dict().items()}
    note = _rehearsal_note("CLIP of tiny widths with ViT-B/16's interface (224 px, patch 16, 512-D)", seed)
    save_file(state, str(folder / "open_clip_model.safetensors"), metadata={"format": "pt", MARKER: note})
    config = {"model_cfg": _CLIP_CFG, "preprocess_cfg": {"mean": list(_OPENAI_MEAN), "std": list(_OPENAI_STD)},
              "privkit_rehearsal": note}
    (folder / "open_clip_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    n_params = sum(v.numel() for v in state.values())
    _write_marker(folder, "OpenAI CLIP ViT-B/16 (open_clip)", [
        f"open_clip CLIP with model_cfg {json.dumps(_CLIP_CFG)}",
        f"({n_params:,} parameters, float16): the real output width (512) and input (224 px, patch 16), tiny widths.",
    ], seed=seed)
    return {"path": str(folder), "files": _files(folder, root), "parameters": n_params,
            "bytes": _folder_bytes(folder), "seconds": time.perf_counter() - t0,
            "format": "open_clip folder (config + safetensors), tiny widths"}


# ------------------------------------------------------------------------------------------------- DINOv2
_DINOV2_HUBCONF = '''\
"""privkit REHEARSAL stand-in for a facebookresearch/dinov2 checkout. This is NOT DINOv2.

Written by privkit's rehearsal tool (tools/rehearsal/models.py) so that privkit's paper-scale DINOv2 loader
(torch.hub.load(<this folder>, "dinov2_vits14" or "dinov2_vitb14", source="local", pretrained=False), then a
strict load of dinov2_<arch>_pretrain.pth) can be rehearsed without the real checkout and weights. The code is
privkit's own: a class-token vision transformer with the same hub entry points and DINOv2's parameter names and
shapes (patch 14, a 37 x 37 position grid for 518-px inputs plus the class token, LayerScale, a final LayerNorm,
output width 384 / 768), but only @DEPTH@ block(s) instead of 12. It has no pretrained weights, downloads nothing
and only fits the rehearsal weights written beside it. Replace this folder with a clone of
https://github.com/facebookresearch/dinov2 for real runs.
"""

import torch
import torch.nn.functional as F
from torch import nn

dependencies = ["torch"]

REHEARSAL = True
DEPTH = @DEPTH@
PATCH = 14
GRID = 37  # position grid of the 518-px training resolution
WIDTHS = {"vits14": (384, 6), "vitb14": (768, 12)}  # width, heads


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(b, n, d))


class Mlp(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class LayerScale(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * self.gamma


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.ls1 = LayerScale(dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim)
        self.ls2 = LayerScale(dim)

    def forward(self, x):
        x = x + self.ls1(self.attn(self.norm1(x)))
        return x + self.ls2(self.mlp(self.norm2(x)))


class PatchEmbed(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, PATCH, stride=PATCH)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class RehearsalVisionTransformer(nn.Module):
    """Class-token ViT with DINOv2's parameter names; forward returns the normalised class token."""

    def __init__(self, dim, heads, depth=DEPTH):
        super().__init__()
        self.embed_dim = dim
        self.num_features = dim
        self.patch_size = PATCH
        self.rehearsal = True
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + GRID * GRID, dim))
        self.mask_token = nn.Parameter(torch.zeros(1, dim))
        self.patch_embed = PatchEmbed(dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Identity()

    def positions(self, h, w):
        grid = self.pos_embed[:, 1:]
        if (h, w) != (GRID, GRID):
            grid = grid.reshape(1, GRID, GRID, -1).permute(0, 3, 1, 2)
            grid = F.interpolate(grid, size=(h, w), mode="bicubic", align_corners=False)
            grid = grid.permute(0, 2, 3, 1).reshape(1, h * w, -1)
        return torch.cat((self.pos_embed[:, :1], grid), dim=1)

    def forward_features(self, x):
        h, w = x.shape[-2] // PATCH, x.shape[-1] // PATCH
        t = self.patch_embed(x)
        t = torch.cat((self.cls_token.expand(t.shape[0], -1, -1), t), dim=1) + self.positions(h, w)
        for block in self.blocks:
            t = block(t)
        t = self.norm(t)
        return {"x_norm_clstoken": t[:, 0], "x_norm_patchtokens": t[:, 1:]}

    def forward(self, x):
        return self.head(self.forward_features(x)["x_norm_clstoken"])


def _build(arch, pretrained, kwargs):
    if pretrained:
        raise RuntimeError(
            "privkit's rehearsal stand-in for the dinov2 checkout has no pretrained weights and downloads "
            "nothing: call it with pretrained=False and load dinov2_" + arch + "_pretrain.pth"
        )
    if kwargs:
        raise TypeError("the rehearsal stand-in takes only pretrained=, got " + ", ".join(sorted(kwargs)))
    dim, heads = WIDTHS[arch]
    return RehearsalVisionTransformer(dim, heads)


def dinov2_vits14(*, pretrained=True, **kwargs):
    """Rehearsal stand-in of DINOv2 ViT-S/14: width 384, DEPTH block(s)."""
    return _build("vits14", pretrained, kwargs)


def dinov2_vitb14(*, pretrained=True, **kwargs):
    """Rehearsal stand-in of DINOv2 ViT-B/14: width 768, DEPTH block(s)."""
    return _build("vitb14", pretrained, kwargs)
'''


def _write_dinov2_checkout(root: Path, seed: int) -> Path:
    checkout = root / "weights" / "dinov2"
    hubconf = _DINOV2_HUBCONF.replace("@DEPTH@", str(_DINOV2_DEPTH))
    if checkout.is_dir() and _is_marked(checkout) and (checkout / "hubconf.py").is_file():
        if (checkout / "hubconf.py").read_text(encoding="utf-8") == hubconf:
            return checkout  # the other DINOv2 size already wrote it
    checkout = _fresh_folder(checkout)
    (checkout / "hubconf.py").write_text(hubconf, encoding="utf-8")
    _write_marker(checkout, "facebookresearch/dinov2 checkout", [
        "hubconf.py is privkit's stand-in (privkit's own code, no code of the dinov2 repository): the hub entry",
        f"points dinov2_vits14 / dinov2_vitb14 build a {_DINOV2_DEPTH}-block class-token ViT with DINOv2's parameter",
        "names and widths; it only loads the rehearsal weights in ../dinov2-vits14 and ../dinov2-vitb14.",
    ], seed=seed)
    return checkout


def _hub_module(hubconf: Path) -> Any:
    """Import a hubconf.py as torch.hub does (a fresh module, not registered in sys.modules)."""
    spec = importlib.util.spec_from_file_location("privkit_rehearsal_dinov2_hubconf", hubconf)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def write_dinov2_rehearsal(root: str | Path, *, arch: str = "vitb14", seed: int = 0) -> dict:
    """``weights/dinov2-<arch>/dinov2_<arch>_pretrain.pth`` and the stand-in checkout ``weights/dinov2/``.

    The state dict has DINOv2's parameter names and shapes at the real width (384 for ``vits14``, 768 for
    ``vitb14``: the embedding keeps its real dimension) with one block, drawn like a fresh ViT (weights N(0, 0.02),
    biases 0, norms and LayerScale 1), stored in float16 with ``torch.save`` (a plain dict of tensors, as the
    official files). The network is built by the stand-in checkout written beside it (module docstring).
    """
    t0 = time.perf_counter()
    root = _root(root)
    arch = check_choice("arch", arch, ("vits14", "vitb14"))
    seed = check_int("seed", seed, minimum=0)
    name = f"dinov2-{arch}"
    checkout = _write_dinov2_checkout(root, seed)
    folder = _fresh_folder(root / "weights" / name)
    model = getattr(_hub_module(checkout / "hubconf.py"), f"dinov2_{arch}")(pretrained=False)
    gen = torch.Generator().manual_seed(_sub_seed(seed, name))
    state = {}
    for key, ref in model.state_dict().items():
        if key.endswith(".gamma") or (key.endswith(".weight") and ".norm" in f".{key}"):
            value = torch.ones(ref.shape)
        elif key.endswith(".bias") or key == "mask_token":
            value = torch.zeros(ref.shape)
        else:
            value = torch.randn(ref.shape, generator=gen) * 0.02
        state[key] = value.to(torch.float16)
    torch.save(state, folder / f"dinov2_{arch}_pretrain.pth")
    n_params = sum(v.numel() for v in state.values())
    _write_marker(folder, f"DINOv2 {arch} weights", [
        f"dinov2_{arch}_pretrain.pth: {n_params:,} parameters (float16) with DINOv2's names and width, "
        f"{_DINOV2_DEPTH} block(s);",
        "built by the stand-in checkout ../dinov2/hubconf.py (privkit's code), not by the real dinov2 repository.",
    ], seed=seed)
    return {"path": str(folder), "files": {**_files(folder, root), **_files(checkout, root)},
            "parameters": n_params, "bytes": _folder_bytes(folder), "checkout_bytes": _folder_bytes(checkout),
            "seconds": time.perf_counter() - t0,
            "format": f"torch.save state dict + stand-in hubconf.py, width {model.embed_dim}, depth {_DINOV2_DEPTH}"}


# --------------------------------------------------------------------------------------------------- SSCD
class _RehearsalSSCD(nn.Module):
    """SSCD's contract with a small CNN: ImageNet-normalised (B, 3, H, W) -> L2-normalised (B, 512) descriptors.

    Like ``sscd_disc_mixup`` (a ResNet-50 trunk, GeM pooling with p = 3, a linear map to 512, L2 normalisation)
    but with a three-convolution trunk of 16 / 32 / 64 channels.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 7, stride=4, padding=3)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(32, 64, 3, stride=2, padding=1)
        self.embeddings = nn.Linear(64, 512)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv1(x))
        y = F.relu(self.conv2(y))
        y = F.relu(self.conv3(y))
        y = y.clamp(min=1e-6).pow(3.0).mean(dim=[2, 3]).pow(1.0 / 3.0)  # GeM, p = 3
        return F.normalize(self.embeddings(y), dim=1)


def write_sscd_rehearsal(root: str | Path, *, seed: int = 0) -> dict:
    """``weights/sscd/sscd_disc_mixup.torchscript.pt``: a scripted small CNN with SSCD's input/output contract.

    TorchScript archive (``torch.jit.save``) of :class:`_RehearsalSSCD` with PyTorch's default initialisation
    (seeded); the archive carries an extra file ``privkit-rehearsal.txt``.
    """
    import warnings

    t0 = time.perf_counter()
    root = _root(root)
    seed = check_int("seed", seed, minimum=0)
    folder = _fresh_folder(root / "weights" / "sscd")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_sub_seed(seed, "sscd"))
        model = _RehearsalSSCD().eval()
    note = _rehearsal_note("small GeM CNN with sscd_disc_mixup's contract ((B,3,H,W) -> unit (B,512))", seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        scripted = torch.jit.script(model)
        torch.jit.save(scripted, str(folder / "sscd_disc_mixup.torchscript.pt"),
                       _extra_files={f"{MARKER}.txt": note})
    n_params = sum(p.numel() for p in model.parameters())
    _write_marker(folder, "SSCD sscd_disc_mixup", [
        f"TorchScript module, {n_params:,} parameters: 3 convolutions (16/32/64 channels), GeM (p=3), linear to 512,",
        "L2 normalisation; the real model is a ResNet-50 with the same contract.",
    ], seed=seed)
    return {"path": str(folder), "files": _files(folder, root), "parameters": n_params,
            "bytes": _folder_bytes(folder), "seconds": time.perf_counter() - t0,
            "format": "TorchScript, small CNN, 512-D unit output"}


# ----------------------------------------------------------------------------------------------- TinyViT-5M
def write_tiny_vit_rehearsal(root: str | Path, *, seed: int = 0) -> dict:
    """``weights/tiny_vit_5m/model.safetensors``: timm's ``tiny_vit_5m_224`` (with its 1000-class head, as the
    published checkpoint), timm's random initialisation (seeded), float16, with a ``privkit-rehearsal`` metadata
    entry; plus a ``config.json`` naming the architecture (as on the Hugging Face hub)."""
    import timm
    from safetensors.torch import save_file

    t0 = time.perf_counter()
    root = _root(root)
    seed = check_int("seed", seed, minimum=0)
    folder = _fresh_folder(root / "weights" / "tiny_vit_5m")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_sub_seed(seed, "tiny_vit_5m"))
        net = timm.create_model("tiny_vit_5m_224", pretrained=False, num_classes=1000)  # the in1k checkpoint's head
    state = {k: v.detach().to(torch.float16 if v.is_floating_point() else v.dtype).contiguous()
             for k, v in net.state_dict().items()}
    note = _rehearsal_note("timm tiny_vit_5m_224, real architecture", seed)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt", MARKER: note})
    (folder / "config.json").write_text(json.dumps({
        "architecture": "tiny_vit_5m_224", "num_classes": 1000, "num_features": 320, "privkit_rehearsal": note,
    }, indent=2), encoding="utf-8")
    n_params = sum(v.numel() for v in state.values() if v.is_floating_point())
    _write_marker(folder, "TinyViT-5M ImageNet weights (timm tiny_vit_5m_224)", [
        f"model.safetensors: the real timm architecture, {n_params:,} values (float16), timm's random init.",
    ], seed=seed)
    return {"path": str(folder), "files": _files(folder, root), "parameters": n_params,
            "bytes": _folder_bytes(folder), "seconds": time.perf_counter() - t0,
            "format": "safetensors, real architecture, float16"}


# ---------------------------------------------------------------------------------------------- Inception-v3
def write_inception_rehearsal(root: str | Path, *, seed: int = 0) -> dict:
    """``weights/inception-v3/inception_v3.pth``: torchvision's Inception-v3 (no auxiliary head), float32.

    The loader assigns the state dict to the architecture strictly, so every tensor has the real name and shape.
    Convolution kernels are windows at random offsets into one shared standard-normal pool (stored once by
    ``torch.save``); each BatchNorm has weight 1, bias 0, running mean 0 and running variance ``fan_in / 2`` of its
    convolution (a He-initialised convolution in effect); the classifier is N(0, 1/2048), its bias 0.
    """
    from torchvision.models import inception_v3

    t0 = time.perf_counter()
    root = _root(root)
    seed = check_int("seed", seed, minimum=0)
    folder = _fresh_folder(root / "weights" / "inception-v3")
    with torch.device("meta"):
        ref = inception_v3(weights=None, aux_logits=False, init_weights=False).state_dict()
    convs = {k[: -len(".conv.weight")]: v.shape for k, v in ref.items() if k.endswith(".conv.weight")}
    largest = max(math.prod(s) for s in convs.values())
    gen = torch.Generator().manual_seed(_sub_seed(seed, "inception-v3"))
    pool = torch.randn(largest + 2**18, generator=gen)
    state: dict[str, torch.Tensor] = {}
    for key, value in ref.items():
        prefix, _, leaf = key.rpartition(".")
        if key.endswith(".conv.weight"):
            n = math.prod(value.shape)
            offset = int(torch.randint(0, pool.numel() - n + 1, (1,), generator=gen))
            state[key] = pool[offset: offset + n].view(value.shape)
        elif prefix.endswith(".bn") and prefix[: -len(".bn")] in convs:
            shape = convs[prefix[: -len(".bn")]]
            fan_in = shape[1] * shape[2] * shape[3]
            fill = {"weight": 1.0, "bias": 0.0, "running_mean": 0.0, "running_var": fan_in / 2.0}.get(leaf)
            if leaf == "num_batches_tracked":
                state[key] = torch.zeros((), dtype=torch.long)
            elif fill is None:
                raise InvalidArgumentError(f"torchvision's Inception-v3 has an unexpected BatchNorm entry {key}")
            else:
                state[key] = torch.full(tuple(value.shape), fill)
        elif key == "fc.weight":
            state[key] = torch.randn(tuple(value.shape), generator=gen) / math.sqrt(value.shape[1])
        elif key == "fc.bias":
            state[key] = torch.zeros(tuple(value.shape))
        else:
            raise InvalidArgumentError(f"torchvision's Inception-v3 has an unexpected entry {key}")
    torch.save(state, folder / "inception_v3.pth")
    n_params = sum(v.numel() for v in state.values() if v.is_floating_point())
    _write_marker(folder, "Inception-v3 ImageNet weights (torchvision)", [
        f"inception_v3.pth: torchvision's architecture without the auxiliary head, {n_params:,} values (float32);",
        f"the convolution kernels are windows into one shared pool of {pool.numel():,} N(0,1) values (stored once),",
        "BatchNorm running variance fan_in/2 (He scaling), classifier N(0, 1/2048).",
    ], seed=seed)
    return {"path": str(folder), "files": _files(folder, root), "parameters": n_params,
            "bytes": _folder_bytes(folder), "seconds": time.perf_counter() - t0,
            "format": "torch.save state dict, real architecture, float32, kernels share one random pool"}


# ------------------------------------------------------------------------------------------------- together
def write_rehearsal_weights(root: str | Path, *, seed: int = 0, models: tuple[str, ...] | None = None) -> dict:
    """Write the rehearsal weights of ``models`` (default: all of :data:`REHEARSAL_MODELS`) under ``root/weights``.

    Returns:
        ``{model: summary}`` (each with ``files``, ``bytes`` and ``seconds``).
    """
    root = _root(root)
    chosen = REHEARSAL_MODELS if models is None else tuple(check_choice("models", m, REHEARSAL_MODELS) for m in models)
    writers = {
        "clip-vit-b16": lambda: write_clip_rehearsal(root, seed=seed),
        "dinov2-vits14": lambda: write_dinov2_rehearsal(root, arch="vits14", seed=seed),
        "dinov2-vitb14": lambda: write_dinov2_rehearsal(root, arch="vitb14", seed=seed),
        "sscd": lambda: write_sscd_rehearsal(root, seed=seed),
        "tiny_vit_5m": lambda: write_tiny_vit_rehearsal(root, seed=seed),
        "inception-v3": lambda: write_inception_rehearsal(root, seed=seed),
    }
    return {m: writers[m]() for m in chosen}


def write_model_rehearsal_root(root: str | Path, *, seed: int = 0) -> dict:
    """Write MPII (64 train + 32 valid photographs of 128 px), MovieLens (120 users x 300 items, 6,000 ratings) and
    every rehearsal weight folder into ``root``.

    Returns:
        ``{"root", "mpii", "movielens", "weights": {model: summary}, "bytes", "weights_bytes", "seconds"}``.

    Raises:
        InvalidArgumentError: a target folder already holds files that are not rehearsal data.
    """
    t0 = time.perf_counter()
    root = _root(root)
    seed = check_int("seed", seed, minimum=0)
    mpii = write_mpii(root, n_train=64, n_valid=32, size=128, seed=seed)
    movielens = write_movielens(root, n_users=120, n_items=300, n_ratings=6000, seed=seed)
    weights = write_rehearsal_weights(root, seed=seed)
    weights_bytes = _folder_bytes(root / "weights")
    return {
        "root": str(root), "mpii": mpii, "movielens": movielens, "weights": weights,
        "weights_bytes": weights_bytes, "bytes": mpii["bytes"] + movielens["bytes"] + weights_bytes,
        "seconds": time.perf_counter() - t0,
    }
