"""Training tool for ``ssl-small`` (see :mod:`privkit.encoders.ssl_small`): data, augmentations, NT-Xent, CLI.

This is the one-off tool that trained the weights bundled in ``privkit/assets/ssl_small.safetensors``; it lives
outside the library (run it from the repository root with privkit installed).

Data (all offline, all unlabelled for training; no identity labels anywhere):

* photos bundled with scikit-image (:data:`TRAIN_PHOTOS`), each resized so its shorter side is at most
  192 px; a training *instance* is a random square region covering 25-75 % of the shorter side;
* scikit-image's ``lfw_subset`` (200 images of 25 x 25: 100 real LFW face crops followed by 100 non-face
  crops), used as unlabelled images;
* scikit-learn's 8 x 8 digits (the training split of :func:`digits_split` only), rendered as RGB images
  with random ink and paper colours.

Each training step draws ``batch_size`` instances (source mixture :attr:`SSLAugmentConfig.source_weights`),
makes two 64 x 64 views of each (random resized crop composed with the instance crop in a single
``grid_sample``, horizontal flip except for digits, colour jitter, random grayscale, Gaussian blur) and
minimises SimCLR's NT-Xent loss between the projected views. All randomness flows from private
``torch.Generator`` objects derived from ``seed`` (weights: ``seed``; data stream: ``seed + 1``): on the CPU, the same seed and thread count give bit-identical
weights (checked across processes); a different thread count changes the floating-point reduction order,
and Adam amplifies those rounding differences, so the weights differ measurably (about 5e-3 after three
steps) although the training is statistically the same. The committed weights were trained with one thread.

Probes (labels used for evaluation only): k-NN accuracy on the held-out digits split (black on white and
with random colours), face vs non-face on
``lfw_subset`` (leave-one-out) and texture classification on photos never seen in training
(:data:`PROBE_TEXTURES`).

CLI: ``python tools/train_ssl_small.py --out privkit/assets/ssl_small.safetensors`` (whose defaults are
the settings of the committed run: seed 0, 220 steps of 128 instances, one thread) reproduces the committed
weights bit for bit on the same PyTorch build; ``privkit/assets/ssl_small.json`` records the exact command.
It took 813 s on a shared 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from privkit import __version__
from privkit._validate import check_int, check_positive, check_probability, check_real, check_tensor
from privkit.encoders.ssl_small import (
    SSL_SMALL_INPUT_SIZE,
    SSLSmallBackbone,
    SSLSmallConfig,
    SSLSmallEncoder,
    SSLSmallNet,
    build_ssl_small_net,
    sha256_file,
    standardize_images,
)
from privkit.errors import InvalidArgumentError, UnknownNameError

__all__ = [
    "TRAIN_PHOTOS",
    "PROBE_TEXTURES",
    "SSLAugmentConfig",
    "SSLData",
    "SSLTrainResult",
    "load_photo",
    "load_ssl_data",
    "digits_split",
    "render_digits",
    "random_resized_boxes",
    "crop_views",
    "color_jitter",
    "random_grayscale",
    "gaussian_blur",
    "make_views",
    "nt_xent_loss",
    "knn_accuracy",
    "evaluate_probes",
    "train_ssl_small",
    "save_ssl_small",
    "main",
]

#: scikit-image photos used for training (all bundled with the wheel; no download).
#: ``motorcycle_left`` is the left image of ``skimage.data.stereo_motorcycle()``.
TRAIN_PHOTOS: tuple[str, ...] = (
    "astronaut",
    "coffee",
    "chelsea",
    "rocket",
    "hubble_deep_field",
    "immunohistochemistry",
    "retina",
    "motorcycle_left",
    "camera",
    "coins",
    "moon",
    "page",
    "text",
    "clock",
    "cell",
    "microaneurysms",
    "horse",
)
#: Texture photos held out of training and used only by the texture probe.
PROBE_TEXTURES: tuple[str, ...] = ("brick", "grass", "gravel")
_ALL_PHOTOS = TRAIN_PHOTOS + PROBE_TEXTURES

_OUT = SSL_SMALL_INPUT_SIZE[0]


# ----------------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------------
def load_photo(name: str, *, max_side: int = 192) -> torch.Tensor:
    """One scikit-image photo as a (3, H, W) float32 tensor in [0, 1].

    Grayscale and binary images are replicated to three channels; the image is downscaled (bilinear with
    anti-aliasing) so that its shorter side is at most ``max_side`` pixels.
    """
    from skimage import data as skdata

    if name not in _ALL_PHOTOS:
        raise UnknownNameError("name", name, _ALL_PHOTOS)
    max_side = check_int("max_side", max_side, minimum=8)
    arr = skdata.stereo_motorcycle()[0] if name == "motorcycle_left" else getattr(skdata, name)()
    arr = np.asarray(arr)
    if arr.dtype == bool:
        arr = arr.astype(np.float32)
    elif arr.dtype == np.uint8:
        arr = arr.astype(np.float32) / 255.0
    else:
        arr = arr.astype(np.float32)
    x = torch.from_numpy(np.ascontiguousarray(arr))
    x = x[None].expand(3, -1, -1) if x.ndim == 2 else x[..., :3].permute(2, 0, 1)
    x = x.clamp(0, 1).contiguous()
    h, w = x.shape[-2:]
    scale = max_side / min(h, w)
    if scale < 1:
        size = (max(1, round(h * scale)), max(1, round(w * scale)))
        x = F.interpolate(x[None], size=size, mode="bilinear", align_corners=False, antialias=True)[0]
    return x.clamp(0, 1).contiguous()


def digits_split(*, test_fraction: float = 0.3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed train/test split of scikit-learn's 1797 digits: (train_idx, test_idx), int64, sorted.

    Training of ``ssl-small`` sees (unlabelled) only the training split; the digits probe classifies
    the test split from the training split's labels.
    """
    from sklearn.datasets import load_digits

    test_fraction = check_probability("test_fraction", test_fraction)
    seed = check_int("seed", seed, minimum=0)
    n = len(load_digits().target)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_test = int(round(n * test_fraction))
    return perm[n_test:].sort().values, perm[:n_test].sort().values


def _digits_arrays() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    d = load_digits()
    ink = torch.from_numpy(d.images.astype(np.float32) / 16.0)[:, None]  # (N, 1, 8, 8), 1 = ink
    return ink, torch.from_numpy(d.target.astype(np.int64))


def render_digits(
    ink: torch.Tensor,
    *,
    size: int = _OUT,
    ink_color: torch.Tensor | None = None,
    paper_color: torch.Tensor | None = None,
) -> torch.Tensor:
    """Render 8 x 8 digit ink maps (N, 1, 8, 8) in [0, 1] as (N, 3, size, size) RGB images.

    Args:
        ink: ink density, 1 = full ink.
        size: output side (bilinear upsampling).
        ink_color: (N, 3) or (3,) RGB in [0, 1]; default black.
        paper_color: (N, 3) or (3,) RGB in [0, 1]; default white.
    """
    check_tensor("ink", ink, ndim=4, floating=True)
    size = check_int("size", size, minimum=1)
    n = ink.shape[0]
    fg = torch.zeros(3) if ink_color is None else ink_color
    bg = torch.ones(3) if paper_color is None else paper_color
    fg = fg.to(ink).reshape(-1, 3, 1, 1).expand(n, 3, 1, 1)
    bg = bg.to(ink).reshape(-1, 3, 1, 1).expand(n, 3, 1, 1)
    up = F.interpolate(ink, size=(size, size), mode="bilinear", align_corners=False).clamp(0, 1)
    return bg * (1 - up) + fg * up


@dataclass(frozen=True)
class SSLData:
    """The unlabelled training images of ``ssl-small``.

    Attributes:
        photos: one (3, H, W) tensor per name in ``photo_names``.
        photo_names: the scikit-image names.
        images: (N, 3, 25, 25) lfw_subset images (faces and non-faces, unlabelled).
        digits: (M, 1, 8, 8) ink maps of the digits training split (unlabelled).
        meta: provenance (counts, split, sizes).
    """

    photos: tuple[torch.Tensor, ...]
    photo_names: tuple[str, ...]
    images: torch.Tensor
    digits: torch.Tensor
    meta: dict = field(default_factory=dict)


def load_ssl_data(
    *,
    photo_names: Sequence[str] = TRAIN_PHOTOS,
    max_side: int = 192,
    digits_test_fraction: float = 0.3,
    digits_split_seed: int = 0,
) -> SSLData:
    """Load the training data (see the module docstring); everything comes from installed packages."""
    from skimage import data as skdata

    photo_names = tuple(photo_names)
    for n in photo_names:
        if n in PROBE_TEXTURES:
            raise InvalidArgumentError(f"photo_names must not contain the held-out probe textures {PROBE_TEXTURES}, got {n!r}")
    photos = tuple(load_photo(n, max_side=max_side) for n in photo_names)
    lfw = torch.from_numpy(np.asarray(skdata.lfw_subset(), dtype=np.float32))[:, None].clamp(0, 1)
    lfw = lfw.expand(-1, 3, -1, -1).contiguous()
    train_idx, _ = digits_split(test_fraction=digits_test_fraction, seed=digits_split_seed)
    ink, _ = _digits_arrays()
    digits = ink[train_idx].contiguous()
    meta = {
        "photos": {n: list(p.shape[-2:]) for n, p in zip(photo_names, photos)},
        "photo_max_side": max_side,
        "lfw_subset": {"count": int(lfw.shape[0]), "size": [25, 25], "labels_used": False},
        "digits": {
            "count": int(digits.shape[0]),
            "split": "train",
            "test_fraction": digits_test_fraction,
            "split_seed": digits_split_seed,
            "labels_used": False,
        },
        "held_out_probe_textures": list(PROBE_TEXTURES),
    }
    return SSLData(photos=photos, photo_names=photo_names, images=lfw, digits=digits, meta=meta)


# ----------------------------------------------------------------------------------------------------
# augmentations
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SSLAugmentConfig:
    """Augmentation parameters (SimCLR-style, adapted to 64 x 64).

    Attributes:
        source_weights: sampling weights of (photos, lfw_subset images, digits).
        instance_side: range of a photo instance's side, as a fraction of the photo's shorter side.
        crop_scale: area fraction range of a view's crop within its instance, per source (photos, images, digits).
        crop_ratio: aspect-ratio range of the crop (sampled log-uniformly).
        flip_p: horizontal-flip probability (not applied to digits).
        jitter_p: probability of colour jitter.
        brightness, contrast, saturation: jitter strengths (factor drawn from [1 - s, 1 + s]).
        hue: hue rotation strength (angle drawn from [-hue, hue] turns).
        gray_p: probability of converting a view to grayscale.
        blur_p: probability of Gaussian blur.
        blur_sigma: range of the blur's standard deviation in pixels (kernel 7 x 7).
    """

    source_weights: tuple[float, float, float] = (0.5, 0.2, 0.3)
    instance_side: tuple[float, float] = (0.25, 0.75)
    crop_scale: tuple[tuple[float, float], tuple[float, float], tuple[float, float]] = (
        (0.2, 1.0),
        (0.3, 1.0),
        (0.5, 1.0),
    )
    crop_ratio: tuple[float, float] = (3 / 4, 4 / 3)
    flip_p: float = 0.5
    jitter_p: float = 0.8
    brightness: float = 0.4
    contrast: float = 0.4
    saturation: float = 0.4
    hue: float = 0.1
    gray_p: float = 0.2
    blur_p: float = 0.5
    blur_sigma: tuple[float, float] = (0.1, 1.5)

    def __post_init__(self) -> None:
        if len(self.source_weights) != 3 or any(check_real("source_weights[i]", w) < 0 for w in self.source_weights):
            raise InvalidArgumentError(f"source_weights must be 3 non-negative numbers, got {self.source_weights!r}")
        if sum(self.source_weights) <= 0:
            raise InvalidArgumentError("source_weights must not all be zero")
        _check_range("instance_side", self.instance_side, 0.0, 1.0)
        for i, r in enumerate(self.crop_scale):
            _check_range(f"crop_scale[{i}]", r, 0.0, 1.0)
        _check_range("crop_ratio", self.crop_ratio, 0.0, math.inf)
        for n in ("flip_p", "jitter_p", "gray_p", "blur_p"):
            check_probability(n, getattr(self, n), open_low=False, open_high=False)
        for n in ("brightness", "contrast", "saturation"):
            v = check_real(n, getattr(self, n))
            if not 0 <= v < 1:
                raise InvalidArgumentError(f"{n} must lie in [0, 1), got {v}")
        h = check_real("hue", self.hue)
        if not 0 <= h <= 0.5:
            raise InvalidArgumentError(f"hue must lie in [0, 0.5], got {h}")
        _check_range("blur_sigma", self.blur_sigma, 0.0, math.inf)

    def to_dict(self) -> dict:
        return json.loads(json.dumps(asdict(self)))


def _check_range(name: str, r: Sequence[float], lo: float, hi: float) -> None:
    if len(r) != 2:
        raise InvalidArgumentError(f"{name} must be a pair (low, high), got {r!r}")
    a, b = check_real(f"{name}[0]", r[0]), check_real(f"{name}[1]", r[1])
    if not (lo < a <= b <= hi):
        raise InvalidArgumentError(f"{name} must satisfy {lo} < low <= high <= {hi}, got {r!r}")


def _uniform(n: int, lo: float, hi: float, generator: torch.Generator) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(n, generator=generator)


def random_resized_boxes(
    n: int,
    *,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    generator: torch.Generator,
) -> torch.Tensor:
    """``n`` random crop boxes (x0, y0, x1, y1) in unit coordinates of their parent, (n, 4) float32.

    The area fraction is uniform in ``scale`` and the aspect ratio (width / height) log-uniform in
    ``ratio``; sides are clipped to the parent and the position is uniform among those that fit.
    """
    n = check_int("n", n, minimum=0)
    _check_range("scale", scale, 0.0, 1.0)
    _check_range("ratio", ratio, 0.0, math.inf)
    area = _uniform(n, scale[0], scale[1], generator)
    log_r = _uniform(n, math.log(ratio[0]), math.log(ratio[1]), generator)
    r = log_r.exp()
    w = (area * r).sqrt().clamp(max=1.0)
    h = (area / r).sqrt().clamp(max=1.0)
    x0 = torch.rand(n, generator=generator) * (1 - w)
    y0 = torch.rand(n, generator=generator) * (1 - h)
    return torch.stack([x0, y0, x0 + w, y0 + h], dim=1)


def _compose(parent: torch.Tensor, child: torch.Tensor) -> torch.Tensor:
    """Boxes ``child`` (unit coords of ``parent``) expressed in the parent's own frame."""
    pw = parent[:, 2] - parent[:, 0]
    ph = parent[:, 3] - parent[:, 1]
    return torch.stack(
        [
            parent[:, 0] + child[:, 0] * pw,
            parent[:, 1] + child[:, 1] * ph,
            parent[:, 0] + child[:, 2] * pw,
            parent[:, 1] + child[:, 3] * ph,
        ],
        dim=1,
    )


def crop_views(
    image: torch.Tensor,
    boxes: torch.Tensor,
    *,
    flip: torch.Tensor | None = None,
    size: int = _OUT,
) -> torch.Tensor:
    """Resample boxes of images to (n, C, size, size) with bilinear interpolation.

    Args:
        image: (C, H, W) one image shared by all boxes, or (n, C, H, W) one image per box.
        boxes: (n, 4) x0, y0, x1, y1 in unit coordinates of the image (0 = left/top edge, 1 = right/bottom).
        flip: optional (n,) bool, mirror the crop horizontally.
        size: output side.
    """
    check_tensor("boxes", boxes, ndim=2, shape=(None, 4), floating=True)
    n = boxes.shape[0]
    if image.ndim == 3:
        image = image[None].expand(n, -1, -1, -1)
    check_tensor("image", image, ndim=4, shape=(n, None, None, None), floating=True)
    sx = boxes[:, 2] - boxes[:, 0]
    sy = boxes[:, 3] - boxes[:, 1]
    if flip is not None:
        sx = torch.where(flip, -sx, sx)
    theta = torch.zeros(n, 2, 3, dtype=image.dtype)
    theta[:, 0, 0] = sx
    theta[:, 0, 2] = boxes[:, 0] + boxes[:, 2] - 1
    theta[:, 1, 1] = sy
    theta[:, 1, 2] = boxes[:, 1] + boxes[:, 3] - 1
    grid = F.affine_grid(theta, [n, image.shape[1], size, size], align_corners=False)
    return F.grid_sample(image, grid, mode="bilinear", padding_mode="border", align_corners=False)


_RGB2YIQ = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]])
_YIQ2RGB = torch.linalg.inv(_RGB2YIQ)
_LUMA = torch.tensor([0.299, 0.587, 0.114])


def _gray(x: torch.Tensor) -> torch.Tensor:
    return (x * _LUMA.to(x).view(1, 3, 1, 1)).sum(dim=1, keepdim=True)


def color_jitter(
    x: torch.Tensor,
    *,
    brightness: float,
    contrast: float,
    saturation: float,
    hue: float,
    p: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """Random brightness, contrast, saturation and hue (YIQ rotation) per image, applied with probability ``p``.

    ``x`` is (B, 3, H, W) in [0, 1]; the result is clipped to [0, 1].
    """
    check_tensor("x", x, ndim=4, shape=(None, 3, None, None), floating=True)
    b = x.shape[0]
    apply = torch.rand(b, generator=generator) < p
    fb = _uniform(b, 1 - brightness, 1 + brightness, generator).view(b, 1, 1, 1)
    fc = _uniform(b, 1 - contrast, 1 + contrast, generator).view(b, 1, 1, 1)
    fs = _uniform(b, 1 - saturation, 1 + saturation, generator).view(b, 1, 1, 1)
    ang = _uniform(b, -hue, hue, generator) * (2 * math.pi)
    y = (x * fb).clamp(0, 1)
    m = _gray(y).mean(dim=(2, 3), keepdim=True)
    y = ((y - m) * fc + m).clamp(0, 1)
    g = _gray(y)
    y = ((y - g) * fs + g).clamp(0, 1)
    cos, sin = ang.cos(), ang.sin()
    rot = torch.zeros(b, 3, 3)
    rot[:, 0, 0] = 1
    rot[:, 1, 1], rot[:, 1, 2], rot[:, 2, 1], rot[:, 2, 2] = cos, -sin, sin, cos
    mat = (_YIQ2RGB @ rot @ _RGB2YIQ).to(x)  # (B, 3, 3)
    y = torch.einsum("bij,bjhw->bihw", mat, y).clamp(0, 1)
    return torch.where(apply.view(b, 1, 1, 1), y, x)


def random_grayscale(x: torch.Tensor, *, p: float, generator: torch.Generator) -> torch.Tensor:
    """Replace each image by its luma (replicated to 3 channels) with probability ``p``."""
    check_tensor("x", x, ndim=4, shape=(None, 3, None, None), floating=True)
    apply = (torch.rand(x.shape[0], generator=generator) < p).view(-1, 1, 1, 1)
    return torch.where(apply, _gray(x).expand_as(x), x)


def gaussian_blur(
    x: torch.Tensor,
    *,
    sigma: tuple[float, float],
    p: float,
    generator: torch.Generator,
    kernel_size: int = 7,
) -> torch.Tensor:
    """Separable Gaussian blur with a per-image sigma uniform in ``sigma``, applied with probability ``p``."""
    check_tensor("x", x, ndim=4, floating=True)
    kernel_size = check_int("kernel_size", kernel_size, minimum=1)
    if kernel_size % 2 == 0:
        raise InvalidArgumentError(f"kernel_size must be odd, got {kernel_size}")
    b, c, h, w = x.shape
    apply = torch.rand(b, generator=generator) < p
    s = _uniform(b, sigma[0], sigma[1], generator)
    r = kernel_size // 2
    t = torch.arange(-r, r + 1, dtype=torch.float32)
    k = torch.exp(-0.5 * (t[None] / s[:, None]) ** 2)
    k = (k / k.sum(dim=1, keepdim=True)).to(x)  # (B, K)
    k = k.repeat_interleave(c, dim=0)  # (B*C, K)
    y = F.pad(x.reshape(1, b * c, h, w), (r, r, r, r), mode="reflect")
    y = F.conv2d(y, k.view(b * c, 1, 1, kernel_size), groups=b * c)
    y = F.conv2d(y, k.view(b * c, 1, kernel_size, 1), groups=b * c)
    y = y.view(b, c, h, w)
    return torch.where(apply.view(b, 1, 1, 1), y, x)


def _photometric(x: torch.Tensor, aug: SSLAugmentConfig, g: torch.Generator) -> torch.Tensor:
    x = color_jitter(
        x,
        brightness=aug.brightness,
        contrast=aug.contrast,
        saturation=aug.saturation,
        hue=aug.hue,
        p=aug.jitter_p,
        generator=g,
    )
    x = random_grayscale(x, p=aug.gray_p, generator=g)
    return gaussian_blur(x, sigma=aug.blur_sigma, p=aug.blur_p, generator=g).clamp(0, 1)


def _random_colors(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Ink and paper colours with a luma contrast of at least 0.3."""
    paper = torch.rand(n, 3, generator=g)
    ink = torch.rand(n, 3, generator=g)
    low = ((ink - paper) @ _LUMA).abs() < 0.3
    ink = torch.where(low[:, None], 1 - paper, ink)
    low = ((ink - paper) @ _LUMA).abs() < 0.3  # paper near mid-grey: fall back to black on white
    ink = torch.where(low[:, None], torch.zeros_like(ink), ink)
    paper = torch.where(low[:, None], torch.ones_like(paper), paper)
    return ink, paper


def make_views(
    data: SSLData,
    batch_size: int,
    *,
    generator: torch.Generator,
    augment: SSLAugmentConfig = SSLAugmentConfig(),
) -> tuple[torch.Tensor, torch.Tensor]:
    """Draw ``batch_size`` instances and return two augmented views of each.

    Returns:
        ``(view_a, view_b)``, each (batch_size, 3, 64, 64) float32 in [0, 1]; row i of both comes from the
        same instance.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    g = generator
    w = torch.tensor(augment.source_weights, dtype=torch.float64)
    src = torch.multinomial(w / w.sum(), batch_size, replacement=True, generator=g)
    counts = [int((src == k).sum()) for k in range(3)]
    views_a: list[torch.Tensor] = []
    views_b: list[torch.Tensor] = []
    ratio = augment.crop_ratio

    # photos: instance square inside the photo, then a random resized crop inside the instance
    n = counts[0]
    if n and data.photos:
        which = torch.randint(len(data.photos), (n,), generator=g)
        side = _uniform(n, *augment.instance_side, g)
        for k in range(len(data.photos)):
            idx = (which == k).nonzero().flatten()
            if idx.numel() == 0:
                continue
            img = data.photos[k]
            h, wd = img.shape[-2:]
            m = idx.numel()
            sw = side[idx] * min(h, wd) / wd
            sh = side[idx] * min(h, wd) / h
            x0 = torch.rand(m, generator=g) * (1 - sw)
            y0 = torch.rand(m, generator=g) * (1 - sh)
            inst = torch.stack([x0, y0, x0 + sw, y0 + sh], dim=1)
            for out in (views_a, views_b):
                boxes = _compose(inst, random_resized_boxes(m, scale=augment.crop_scale[0], ratio=ratio, generator=g))
                flip = torch.rand(m, generator=g) < augment.flip_p
                out.append(crop_views(img, boxes, flip=flip))
    elif n:
        counts[1] += n

    # lfw_subset images: the whole image is the instance
    n = counts[1]
    if n:
        pick = data.images[torch.randint(data.images.shape[0], (n,), generator=g)]
        for out in (views_a, views_b):
            boxes = random_resized_boxes(n, scale=augment.crop_scale[1], ratio=ratio, generator=g)
            flip = torch.rand(n, generator=g) < augment.flip_p
            out.append(crop_views(pick, boxes, flip=flip))

    # digits: new ink/paper colours per view, no flip
    n = counts[2]
    if n:
        pick = data.digits[torch.randint(data.digits.shape[0], (n,), generator=g)]
        for out in (views_a, views_b):
            boxes = random_resized_boxes(n, scale=augment.crop_scale[2], ratio=ratio, generator=g)
            ink = crop_views(pick, boxes)
            fg, bg = _random_colors(n, g)
            out.append(render_digits(ink, ink_color=fg, paper_color=bg))

    a = _photometric(torch.cat(views_a), augment, g)
    b = _photometric(torch.cat(views_b), augment, g)
    return a, b


# ----------------------------------------------------------------------------------------------------
# objective
# ----------------------------------------------------------------------------------------------------
def nt_xent_loss(z_a: torch.Tensor, z_b: torch.Tensor, *, temperature: float = 0.2) -> torch.Tensor:
    """SimCLR's normalised-temperature cross-entropy over 2B views.

    Each view's positive is the other view of its instance; the other 2B - 2 views are negatives.

    Args:
        z_a, z_b: (B, D) projections of the two views (normalised inside).
        temperature: softmax temperature (> 0).

    Returns:
        Scalar mean loss over the 2B views.
    """
    check_tensor("z_a", z_a, ndim=2, floating=True)
    check_tensor("z_b", z_b, shape=tuple(z_a.shape), floating=True)
    temperature = check_positive("temperature", temperature)
    b = z_a.shape[0]
    if b < 2:
        raise InvalidArgumentError(f"nt_xent_loss needs at least 2 instances per batch, got {b}")
    z = F.normalize(torch.cat([z_a, z_b]), dim=1)
    logits = (z @ z.T) / temperature
    logits = logits.masked_fill(torch.eye(2 * b, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(b, 2 * b), torch.arange(0, b)]).to(z.device)
    return F.cross_entropy(logits, target)


# ----------------------------------------------------------------------------------------------------
# probes
# ----------------------------------------------------------------------------------------------------
def knn_accuracy(
    reference: torch.Tensor,
    reference_labels: torch.Tensor,
    query: torch.Tensor,
    query_labels: torch.Tensor,
    *,
    k: int = 5,
    exclude_self: bool = False,
) -> float:
    """Accuracy of cosine k-NN (similarity-weighted vote) classification of ``query``.

    With ``exclude_self`` (leave-one-out, ``query`` is ``reference``) each row's own entry is ignored.
    """
    check_tensor("reference", reference, ndim=2, floating=True)
    check_tensor("query", query, shape=(None, reference.shape[1]), floating=True)
    check_tensor("reference_labels", reference_labels, shape=(reference.shape[0],))
    check_tensor("query_labels", query_labels, shape=(query.shape[0],))
    k = check_int("k", k, minimum=1, maximum=reference.shape[0] - int(exclude_self))
    r = F.normalize(reference.double(), dim=1)
    q = F.normalize(query.double(), dim=1)
    sim = q @ r.T
    if exclude_self:
        if query.shape[0] != reference.shape[0]:
            raise InvalidArgumentError("exclude_self requires query to be the reference set itself")
        sim.fill_diagonal_(float("-inf"))
    top, idx = sim.topk(k, dim=1)
    labels = reference_labels.to(torch.int64)
    n_cls = int(max(labels.max(), query_labels.max())) + 1
    votes = torch.zeros(query.shape[0], n_cls, dtype=torch.float64)
    votes.scatter_add_(1, labels[idx], top.clamp(min=0) + 1e-6)
    pred = votes.argmax(dim=1)
    return float((pred == query_labels.to(torch.int64)).double().mean())


def _texture_probe_images(per_class: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Crops of the held-out textures: reference from the left half, queries from the right half."""
    refs, ref_y, qs, q_y = [], [], [], []
    for label, name in enumerate(PROBE_TEXTURES):
        img = load_photo(name, max_side=192)
        for half, (out, ys) in enumerate(((refs, ref_y), (qs, q_y))):
            side = _uniform(per_class, 0.2, 0.45, generator)  # fraction of the side
            sh = side
            sw = side * img.shape[-2] / img.shape[-1]
            x0 = 0.5 * half + torch.rand(per_class, generator=generator) * (0.5 - sw)
            y0 = torch.rand(per_class, generator=generator) * (1 - sh)
            boxes = torch.stack([x0, y0, x0 + sw, y0 + sh], dim=1)
            out.append(crop_views(img, boxes))
            ys.append(torch.full((per_class,), label))
    return torch.cat(refs), torch.cat(ref_y), torch.cat(qs), torch.cat(q_y)


@torch.no_grad()
def evaluate_probes(
    encoder: SSLSmallEncoder,
    *,
    k: int = 5,
    max_digits: int | None = None,
    texture_per_class: int = 40,
    seed: int = 0,
) -> dict[str, float]:
    """k-NN probes of a frozen encoder on non-identity tasks (labels used for evaluation only).

    * ``digits_knn``: classify the held-out digits split from the training split's labels (digits drawn
      black on white). ``max_digits`` caps both splits (first rows) to save time.
    * ``digits_color_knn``: the same with random ink and paper colours (contrast >= 0.3) on every image.
    * ``lfw_face_vs_nonface_knn``: leave-one-out face vs non-face on the 200 ``lfw_subset`` images.
    * ``texture_knn``: brick / grass / gravel (never trained on) crops, right-half queries against
      left-half references.

    Returns:
        probe name -> accuracy in [0, 1].
    """
    from skimage import data as skdata

    g = torch.Generator().manual_seed(check_int("seed", seed, minimum=0))
    ink, target = _digits_arrays()
    tr, te = digits_split()
    if max_digits is not None:
        max_digits = check_int("max_digits", max_digits, minimum=k + 1)
        tr, te = tr[:max_digits], te[:max_digits]
    e_tr = encoder.embed(render_digits(ink[tr])).cpu()
    e_te = encoder.embed(render_digits(ink[te])).cpu()
    out = {"digits_knn": knn_accuracy(e_tr, target[tr], e_te, target[te], k=k)}
    fg, bg = _random_colors(len(tr), g)
    e_tr = encoder.embed(render_digits(ink[tr], ink_color=fg, paper_color=bg)).cpu()
    fg, bg = _random_colors(len(te), g)
    e_te = encoder.embed(render_digits(ink[te], ink_color=fg, paper_color=bg)).cpu()
    out["digits_color_knn"] = knn_accuracy(e_tr, target[tr], e_te, target[te], k=k)

    lfw = torch.from_numpy(np.asarray(skdata.lfw_subset(), dtype=np.float32))[:, None].expand(-1, 3, -1, -1)
    is_face = torch.cat([torch.ones(100, dtype=torch.int64), torch.zeros(lfw.shape[0] - 100, dtype=torch.int64)])
    e = encoder.embed(lfw.clamp(0, 1).contiguous()).cpu()
    out["lfw_face_vs_nonface_knn"] = knn_accuracy(e, is_face, e, is_face, k=k, exclude_self=True)

    texture_per_class = check_int("texture_per_class", texture_per_class, minimum=k)
    r, ry, q, qy = _texture_probe_images(texture_per_class, g)
    out["texture_knn"] = knn_accuracy(encoder.embed(r).cpu(), ry, encoder.embed(q).cpu(), qy, k=k)
    return out


# ----------------------------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------------------------
@dataclass
class SSLTrainResult:
    """What :func:`train_ssl_small` returns.

    Attributes:
        net: the trained network (backbone + projection head), on the CPU, in eval mode.
        losses: NT-Xent loss of every step.
        metadata: the metadata written next to the weights (also filled when nothing is written).
        out_path: the safetensors file written, or ``None``.
    """

    net: SSLSmallNet
    losses: list[float]
    metadata: dict
    out_path: Path | None = None

    def encoder(self, *, device: str | torch.device = "cpu") -> SSLSmallEncoder:
        """A frozen encoder sharing a copy of the trained backbone."""
        import copy

        return SSLSmallEncoder(copy.deepcopy(self.net.backbone), metadata=self.metadata, device=device)


def _lr_at(step: int, steps: int, lr: float, warmup: int) -> float:
    if step < warmup:
        return lr * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return lr * 0.5 * (1 + math.cos(math.pi * t))


def _loss_summary(losses: Sequence[float], windows: int = 20) -> dict:
    arr = np.asarray(losses, dtype=np.float64)
    chunks = np.array_split(arr, min(windows, len(arr)))
    ends = np.cumsum([len(c) for c in chunks]).tolist()
    return {
        "first": round(float(arr[0]), 4),
        "last": round(float(arr[-1]), 4),
        "min": round(float(arr.min()), 4),
        "window_end_steps": ends,
        "window_means": [round(float(c.mean()), 4) for c in chunks],
    }


def _command(
    out_path: Path | None, seed: int, steps: int, batch_size: int, lr: float, temperature: float,
    weight_decay: float, threads: int,
) -> str:
    parts = ["python", "tools/train_ssl_small.py", "--out", str(out_path) if out_path else "OUT.safetensors",
             "--seed", str(seed), "--steps", str(steps), "--batch-size", str(batch_size), "--lr", repr(lr),
             "--temperature", repr(temperature), "--weight-decay", repr(weight_decay), "--threads", str(threads)]
    return shlex.join(parts)


def train_ssl_small(
    *,
    seed: int = 0,
    steps: int = 220,
    batch_size: int = 128,
    out_path: str | Path | None = None,
    lr: float = 2e-3,
    temperature: float = 0.2,
    weight_decay: float = 1e-4,
    warmup_steps: int | None = None,
    config: SSLSmallConfig = SSLSmallConfig(),
    augment: SSLAugmentConfig = SSLAugmentConfig(),
    data: SSLData | None = None,
    probe: bool = False,
    log_every: int = 0,
    log: Callable[[str], None] | None = None,
) -> SSLTrainResult:
    """Train ``ssl-small`` with SimCLR (NT-Xent) on unlabelled embedded images, on the CPU.

    Args:
        seed: seeds both the weight initialisation and the data/augmentation stream.
        steps: optimiser steps.
        batch_size: instances per step (2 * batch_size views).
        out_path: where to write the backbone weights (safetensors) and, next to them, the JSON metadata;
            ``None`` writes nothing.
        lr: peak AdamW learning rate (linear warm-up, then cosine decay to 0).
        temperature: NT-Xent temperature.
        weight_decay: AdamW decoupled weight decay.
        warmup_steps: warm-up length (default: 5 % of ``steps``, at least 1).
        config: architecture.
        augment: augmentation parameters.
        data: training images (default :func:`load_ssl_data`).
        probe: also run :func:`evaluate_probes` on the trained and on the randomly initialised network and
            record both in the metadata (about 10-20 s on two CPU cores).
        log_every: print a progress line every this many steps (0: never).
        log: where progress lines go (default ``print`` with flush).

    Returns:
        An :class:`SSLTrainResult`.

    Note:
        The result is a deterministic function of the arguments for a fixed PyTorch build and thread count;
        other thread counts change the reduction order and give measurably different weights.
    """
    seed = check_int("seed", seed, minimum=0)
    steps = check_int("steps", steps, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=2)
    lr = check_positive("lr", lr)
    temperature = check_positive("temperature", temperature)
    weight_decay = check_real("weight_decay", weight_decay)
    if weight_decay < 0:
        raise InvalidArgumentError(f"weight_decay must be >= 0, got {weight_decay}")
    warmup = max(1, steps // 20) if warmup_steps is None else check_int("warmup_steps", warmup_steps, minimum=1)
    log_every = check_int("log_every", log_every, minimum=0)
    emit = log or (lambda s: print(s, flush=True))
    out = Path(out_path) if out_path is not None else None
    if out is not None and out.suffix != ".safetensors":
        raise InvalidArgumentError(f"out_path must end in .safetensors, got {str(out)!r}")

    data = load_ssl_data() if data is None else data
    net = build_ssl_small_net(config=config, seed=seed)
    random_backbone = build_ssl_small_net(config=config, seed=seed).backbone if probe else None
    net = net.to(memory_format=torch.channels_last)  # about 25 % faster convolutions on the CPU
    net.train()
    decay = [p for n, p in net.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in net.named_parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.99),
    )
    gen = torch.Generator().manual_seed(seed + 1)  # data stream; weights use ``seed`` itself
    losses: list[float] = []
    t0 = time.perf_counter()
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, steps, lr, warmup)
        va, vb = make_views(data, batch_size, generator=gen, augment=augment)
        z = net(standardize_images(torch.cat([va, vb])).contiguous(memory_format=torch.channels_last))
        loss = nt_xent_loss(z[:batch_size], z[batch_size:], temperature=temperature)
        if not torch.isfinite(loss):
            raise InvalidArgumentError(f"training diverged at step {step} (loss {float(loss)}); lower lr={lr}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if log_every and ((step + 1) % log_every == 0 or step + 1 == steps):
            recent = float(np.mean(losses[-log_every:]))
            emit(f"step {step + 1}/{steps}  loss {recent:.4f}  lr {opt.param_groups[0]['lr']:.2e}  "
                 f"{time.perf_counter() - t0:.0f}s")
    wall = time.perf_counter() - t0
    net = net.to(memory_format=torch.contiguous_format)
    net.eval()

    threads = torch.get_num_threads()
    meta: dict = {
        "name": "ssl-small",
        "format": "safetensors backbone state_dict (projection head dropped), float32",
        "command": _command(out, seed, steps, batch_size, lr, temperature, weight_decay, threads),
        "seed": seed,
        "steps": steps,
        "batch_size": batch_size,
        "objective": f"SimCLR NT-Xent, temperature {temperature}, 2 views per instance",
        "optimizer": {"name": "AdamW", "lr": lr, "betas": [0.9, 0.99], "weight_decay": weight_decay,
                      "schedule": f"linear warm-up {warmup} steps, cosine to 0"},
        "input_resolution": list(SSL_SMALL_INPUT_SIZE),
        "input_standardisation": "(x - 0.5) / 0.25 on [0, 1] RGB",
        "architecture": config.to_dict(),
        "parameters_backbone": sum(p.numel() for p in net.backbone.parameters()),
        "embedding_dim": config.dim,
        "dim": config.dim,
        "augment": augment.to_dict(),
        "data": {**data.meta, "identity_labels_used": False},
        "loss": _loss_summary(losses),
        "train_wall_seconds": round(wall, 1),
        "threads": threads,
        "determinism": "bit-identical for the same seed, PyTorch build and thread count on CPU; "
                       "other thread counts change the floating-point reduction order and give measurably "
                       "different (statistically equivalent) weights",
        "privkit_version": __version__,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
    }
    if probe:
        import copy

        trained_enc = SSLSmallEncoder(copy.deepcopy(net.backbone), device="cpu")
        random_enc = SSLSmallEncoder(random_backbone, device="cpu")  # type: ignore[arg-type]
        meta["probes"] = {
            "trained": {k: round(v, 4) for k, v in evaluate_probes(trained_enc).items()},
            "random_init": {k: round(v, 4) for k, v in evaluate_probes(random_enc).items()},
            "protocol": "cosine 5-NN, similarity-weighted vote; see tools/train_ssl_small.py, evaluate_probes",
        }
    result = SSLTrainResult(net=net, losses=losses, metadata=meta, out_path=None)
    if out is not None:
        save_ssl_small(net.backbone, out, metadata=meta)
        result.out_path = out
    return result


def save_ssl_small(backbone: SSLSmallBackbone, out_path: str | Path, *, metadata: dict) -> dict:
    """Write ``backbone``'s weights (safetensors) and ``metadata`` plus their sha256 (JSON next to them).

    Returns:
        The metadata as written (with ``sha256`` and ``weights_file`` filled in).
    """
    from safetensors.torch import save_file

    if not isinstance(backbone, SSLSmallBackbone):
        raise InvalidArgumentError(f"backbone must be an SSLSmallBackbone, got {type(backbone).__name__}")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in backbone.state_dict().items()}
    save_file(state, str(out))
    meta = dict(metadata)
    meta["weights_file"] = out.name
    meta["weights_bytes"] = out.stat().st_size
    meta["sha256"] = sha256_file(out)
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


# ----------------------------------------------------------------------------------------------------
# CLI
# ----------------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """``python tools/train_ssl_small.py --out PATH [...]``: train and write weights + metadata."""
    p = argparse.ArgumentParser(prog="python tools/train_ssl_small.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output .safetensors path (metadata goes to the same stem .json)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=220)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--temperature", type=float, default=0.2)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for this process (weights are bit-reproducible for a fixed thread count)")
    p.add_argument("--no-probe", action="store_true", help="skip the k-NN probes recorded in the metadata")
    p.add_argument("--log-every", type=int, default=25)
    args = p.parse_args(argv)
    torch.set_num_threads(check_int("threads", args.threads, minimum=1))
    res = train_ssl_small(
        seed=args.seed,
        steps=args.steps,
        batch_size=args.batch_size,
        out_path=args.out,
        lr=args.lr,
        temperature=args.temperature,
        weight_decay=args.weight_decay,
        probe=not args.no_probe,
        log_every=args.log_every,
    )
    meta = json.loads(Path(args.out).with_suffix(".json").read_text())
    print(json.dumps({k: meta[k] for k in ("sha256", "loss", "train_wall_seconds") if k in meta}, indent=2))
    if "probes" in meta:
        print(json.dumps(meta["probes"], indent=2))
    del res
    return 0


if __name__ == "__main__":
    sys.exit(main())
