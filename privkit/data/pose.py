"""``synthpose``: procedural articulated human figures with MPII keypoints.

MPII and every other pose dataset with keypoint labels is a download, and
privkit never downloads at run time.  The DP pose notebook therefore trains on
figures generated here, with exact ground truth.  Each figure is a 3-D
kinematic tree with the 16 MPII joints (pelvis -> hips -> knees -> ankles;
pelvis -> thorax -> upper neck -> head top; thorax -> shoulders -> elbows ->
wrists) plus hands, feet, a head with hair and a simple face.  Joint angles are
sampled per pose family (standing, walking, arms raised, sitting, bending,
dynamic) and clamped to anatomical limits; the figure is then turned about the
vertical axis, projected orthographically, rotated in the image plane, scaled
and shifted, so that some joints leave the frame.

Identity = a fixed body shape (limb lengths, shoulder/hip widths, girth, head
size) and appearance (skin, hair, clothing colours and patterns, sleeve and
trouser length, beard, face layout).  Identity traits are a deterministic
function of the identity number and the style, so the same person looks the
same in every image.

Rendering is batched torch code (runs on CPU or CUDA): every body part is a
union of soft tapered capsules (smooth signed distance), composited back to
front by the depth of the part (painter's order), over a background.  Two
styles exist:

- ``"photo"`` (the default of ``split="private"``): crops of real photographs
  shipped with scikit-image as backgrounds, natural/muted clothing palette,
  cylindrical shading, soft edges, sensor noise.
- ``"cartoon"`` (the default of ``split="public"``): procedural textured
  backgrounds (value noise, gratings, checkers, gradients), saturated palette
  and bold clothing patterns, flat cel shading with dark outlines, no noise.

The ``public`` split uses identities, seeds and a style disjoint from the
``private`` split: the DP pose paper's public code drew its "public" data from
the private training set (docs/dppose.md §5); privkit's public set shares no
identity and no random stream with the private one.

A joint is *visible* when it is in the frame (``0 <= x, y <= size - 1``; pixel
``(row i, column j)`` has its centre at ``x = j, y = i``), is not covered by an
occluder object and is not hidden behind a nearer body part; keypoints always
carry the true projected position, visible or not (as MPII annotates occluded
joints).  Depth order is per part (painter's algorithm), not per pixel, so two
parts that interpenetrate are drawn one wholly over the other.  ``head_box`` is
the axis-aligned box of the head rectangle (length = 3-D head segment
upper_neck -> head_top, width 0.8 of it) around the projected head segment,
used as the PCKh normaliser (MPII: 0.6 x its diagonal).

Sample ``i`` of a split depends only on ``(split, seed, i, n_identities)``:
parameters are drawn in blocks of :data:`BLOCK_SIZE` samples, each block from
its own generator, so any slice of a large virtual dataset can be generated
without the rest (``start=``).
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass, fields, replace
from typing import Literal

import torch
import torch.nn.functional as F

from .._validate import check_choice, check_int
from ..device import resolve_device
from ..errors import InvalidArgumentError, ShapeError
from ..transforms import resize
from .types import MPII_JOINTS, PoseSet

__all__ = [
    "load_synthpose", "render_pose", "sample_pose_params", "synthpose_params", "identity_traits", "PoseParams",
    "STYLES", "SPLIT_STYLE", "POSE_CLASSES", "ANGLE_NAMES", "ANGLE_LIMITS", "BACKGROUND_PHOTOS",
    "PUBLIC_IDENTITY_OFFSET", "BLOCK_SIZE", "MIN_SIZE", "MAX_SIZE",
]

Style = Literal["photo", "cartoon"]
Split = Literal["private", "public"]

#: Rendering styles.
STYLES: tuple[str, ...] = ("photo", "cartoon")
#: Default style of each split.
SPLIT_STYLE: dict[str, str] = {"private": "photo", "public": "cartoon"}
#: Public identities are numbered from here, so they never collide with private ones.
PUBLIC_IDENTITY_OFFSET = 1_000_000
#: Samples per parameter block (one generator per block).
BLOCK_SIZE = 512
#: Smallest and largest image side accepted by the renderer.
MIN_SIZE = 32
MAX_SIZE = 1024
#: Default identities per split.
DEFAULT_N_IDENTITIES = 256
_IDENTITY_BLOCK = 256  # identities whose traits are drawn from one generator

#: scikit-image sample photos used as private-style backgrounds (none shows a person).
BACKGROUND_PHOTOS: tuple[str, ...] = (
    "coffee", "chelsea", "rocket", "coins", "brick", "grass", "gravel", "clock", "moon", "hubble_deep_field",
)

#: Pose families and their sampling probabilities.
POSE_CLASSES: tuple[str, ...] = ("standing", "walking", "arms_raised", "sitting", "bending", "dynamic")
_POSE_CLASS_PROBS = (0.22, 0.20, 0.16, 0.14, 0.10, 0.18)

#: Joint angles (radians).  Flexion is forward, abduction outward, knee flexion backward,
#: elbow flexion towards the front of the (twisted) upper arm, arm twist > 0 turns the
#: elbow bend towards the body's midline.  ``yaw`` 0 faces the camera.
ANGLE_NAMES: tuple[str, ...] = (
    "yaw", "torso_bend", "torso_lean", "torso_twist", "neck_pitch", "neck_roll", "head_yaw",
    "r_hip_flex", "l_hip_flex", "r_hip_abduct", "l_hip_abduct", "r_knee", "l_knee",
    "r_shoulder_flex", "l_shoulder_flex", "r_shoulder_abduct", "l_shoulder_abduct",
    "r_elbow", "l_elbow", "r_arm_twist", "l_arm_twist",
)
#: Anatomical limits (low, high) per angle, same order as :data:`ANGLE_NAMES`.
ANGLE_LIMITS: tuple[tuple[float, float], ...] = (
    (-math.pi, math.pi), (-0.35, 1.5), (-0.4, 0.4), (-0.6, 0.6), (-0.6, 0.7), (-0.4, 0.4), (-1.2, 1.2),
    (-0.5, 2.2), (-0.5, 2.2), (-0.2, 0.9), (-0.2, 0.9), (0.0, 2.5), (0.0, 2.5),
    (-0.9, 3.1), (-0.9, 3.1), (-0.2, 3.0), (-0.2, 3.0),
    (0.0, 2.6), (0.0, 2.6), (-1.2, 1.5), (-1.2, 1.5),
)

BODY_FIELDS: tuple[str, ...] = (
    "shin", "thigh", "torso", "neck", "head", "hip_width", "shoulder_width", "upper_arm", "forearm", "hand",
    "foot", "girth", "head_width", "eye_spacing", "mouth_width", "eye_size",
)
COLOR_FIELDS: tuple[str, ...] = (
    "skin", "hair", "shirt", "shirt_pattern", "trousers", "trousers_pattern", "shoes", "eyes", "lips",
)
CLOTHING_FIELDS: tuple[str, ...] = (
    "shirt_pattern", "shirt_period", "trousers_pattern", "trousers_period", "long_sleeves", "shorts",
    "hair_style", "hair_volume", "beard",
)
VIEW_FIELDS: tuple[str, ...] = ("roll", "scale", "shift_x", "shift_y", "anchor_mix")
BACKGROUND_FIELDS: tuple[str, ...] = (
    "kind", "photo", "crop", "crop_x", "crop_y", "flip", "gain_r", "gain_g", "gain_b", "brightness",
    "contrast", "frequency", "angle", "phase", "noise", "post_gain", "post_contrast",
)
OCCLUDER_FIELDS: tuple[str, ...] = (
    "present", "anchor", "dx", "dy", "half_w", "half_h", "angle", "rounding", "striped", "period",
    "r1", "g1", "b1", "r2", "g2", "b2",
)
N_OCCLUDERS = 2
_GRID = 6  # procedural background noise grid

_A = {name: i for i, name in enumerate(ANGLE_NAMES)}
_B = {name: i for i, name in enumerate(BODY_FIELDS)}
_C = {name: i for i, name in enumerate(COLOR_FIELDS)}
_K = {name: i for i, name in enumerate(CLOTHING_FIELDS)}
_V = {name: i for i, name in enumerate(VIEW_FIELDS)}
_G = {name: i for i, name in enumerate(BACKGROUND_FIELDS)}
_O = {name: i for i, name in enumerate(OCCLUDER_FIELDS)}
_J = {name: i for i, name in enumerate(MPII_JOINTS)}


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoseParams:
    """Everything that determines a batch of figures (one row per sample).

    Column meanings are given by the ``*_FIELDS`` / :data:`ANGLE_NAMES` tuples of this module.
    Lengths are in body units (standing height, ankle to head top, is about 1).

    Attributes:
        style: palette the identities were drawn from (``"photo"`` or ``"cartoon"``); the default
            rendering style.
        identity: (n,) int64 identity number; -1 for anonymous figures drawn without an identity.
        body: (n, 16) body shape (lengths, widths, face layout), ``BODY_FIELDS``.
        colors: (n, 9, 3) RGB in [0, 1], ``COLOR_FIELDS``.
        clothing: (n, 9) pattern kinds and periods, sleeve/trouser length, hair, ``CLOTHING_FIELDS``.
        pose_class: (n,) int64 index into :data:`POSE_CLASSES`.
        angles: (n, 21) joint angles in radians, :data:`ANGLE_NAMES`, within :data:`ANGLE_LIMITS`.
        view: (n, 5) image-plane roll, scale (standing height / image side), shift, anchor mix.
        background: (n, 17) background choice and jitter, ``BACKGROUND_FIELDS``.
        background_colors: (n, 2, 3) colours of procedural backgrounds.
        background_grid: (n, 3, 6, 6) value-noise grid of procedural backgrounds.
        occluders: (n, 2, 16) occluder objects, ``OCCLUDER_FIELDS``.
        noise_seed: (n,) int64 seed of the per-pixel sensor noise (photo style).
    """

    style: str
    identity: torch.Tensor
    body: torch.Tensor
    colors: torch.Tensor
    clothing: torch.Tensor
    pose_class: torch.Tensor
    angles: torch.Tensor
    view: torch.Tensor
    background: torch.Tensor
    background_colors: torch.Tensor
    background_grid: torch.Tensor
    occluders: torch.Tensor
    noise_seed: torch.Tensor

    def __len__(self) -> int:
        return int(self.identity.shape[0])

    def _tensor_fields(self) -> list[str]:
        return [f.name for f in fields(self) if f.name != "style"]

    def to(self, device: str | torch.device) -> "PoseParams":
        """A copy with every tensor on ``device``."""
        return replace(self, **{k: getattr(self, k).to(device) for k in self._tensor_fields()})

    def __getitem__(self, index: slice | torch.Tensor) -> "PoseParams":
        """Rows selected by a slice, an index tensor or a boolean mask."""
        return replace(self, **{k: getattr(self, k)[index] for k in self._tensor_fields()})

    @staticmethod
    def cat(parts: list["PoseParams"]) -> "PoseParams":
        """Concatenate parameter batches of one style."""
        if not parts:
            raise InvalidArgumentError("parts must hold at least one PoseParams")
        styles = {p.style for p in parts}
        if len(styles) != 1:
            raise InvalidArgumentError(f"parts must share one style, got {sorted(styles)}")
        names = parts[0]._tensor_fields()
        return PoseParams(style=parts[0].style, **{k: torch.cat([getattr(p, k) for p in parts]) for k in names})


def _derive_seed(*parts: object) -> int:
    """A 63-bit seed that depends on ``parts`` only (stable across runs and platforms)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def _u(g: torch.Generator, lo: float, hi: float, *shape: int) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(*shape, generator=g)


def _nrm(g: torch.Generator, mu: float, sd: float, *shape: int) -> torch.Tensor:
    return mu + sd * torch.randn(*shape, generator=g)


def _bern(g: torch.Generator, p: float, *shape: int) -> torch.Tensor:
    return (torch.rand(*shape, generator=g) < p).float()


def _int(g: torch.Generator, k: int, n: int) -> torch.Tensor:
    return torch.randint(0, k, (n,), generator=g).float()


def _cat(g: torch.Generator, probs: tuple[float, ...], n: int) -> torch.Tensor:
    return torch.multinomial(torch.tensor(probs), n, replacement=True, generator=g).float()


_DRAWS = {"u": _u, "n": _nrm, "b": _bern, "i": _int, "c": _cat}


def _draw_columns(g: torch.Generator, n: int, spec: tuple[tuple, ...]) -> torch.Tensor:
    """(n, len(spec)): one column per ``(kind, *args)`` of ``spec``, drawn in order; kinds: ``"u"`` uniform
    (lo, hi), ``"n"`` normal (mean, sd), ``"b"`` Bernoulli (p), ``"i"`` integer in [0, k), ``"c"`` categorical
    (probabilities)."""
    return torch.stack([_DRAWS[kind](g, *args, n) for kind, *args in spec], dim=1)


def _hsv(h: torch.Tensor, s: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """HSV (each (...,), h in [0, 1) cyclic) -> RGB (..., 3)."""
    h = torch.remainder(h, 1.0)
    out = []
    for n in (5.0, 3.0, 1.0):
        k = torch.remainder(n + 6.0 * h, 6.0)
        out.append(v - v * s * torch.clamp(torch.minimum(k, 4.0 - k), 0.0, 1.0))
    return torch.stack(out, dim=-1)


def _pick(index: torch.Tensor, options: torch.Tensor) -> torch.Tensor:
    """Per-row choice: options (n, k, ...) indexed by index (n,) -> (n, ...)."""
    shape = (index.shape[0], 1) + tuple(options.shape[2:])
    return options.gather(1, index.view(-1, *([1] * (options.ndim - 1))).expand(shape)).squeeze(1)


_HAIR_PALETTE = torch.tensor([
    [0.07, 0.06, 0.05], [0.22, 0.14, 0.09], [0.42, 0.28, 0.17], [0.78, 0.65, 0.42], [0.52, 0.24, 0.11],
    [0.62, 0.62, 0.60],
])


def _draw_traits(n: int, g: torch.Generator, style: str) -> dict[str, torch.Tensor]:
    """Body shape and appearance of ``n`` people (identity traits), drawn from ``g``."""
    cartoon = style == "cartoon"
    leg = 0.25 * torch.exp(_nrm(g, 0.0, 0.05, n))
    # shin, thigh, torso, neck, head, hip_width (half), shoulder_width (half), upper_arm, forearm, hand, foot:
    # (typical length, sd of its log-normal spread)
    lengths = ((leg, 0.03), (leg, 0.03), (0.30, 0.05), (0.065, 0.15), (0.14 if cartoon else 0.13, 0.06), (0.075, 0.10),
               (0.115, 0.08), (0.165, 0.05), (0.145, 0.05), (0.055, 0.08), (0.075, 0.08))
    body = [k * torch.exp(_nrm(g, 0.0, sd, n)) for k, sd in lengths]
    # girth, head_width, eye_spacing, mouth_width, eye_size
    body += [_u(g, lo, hi, n) for lo, hi in ((0.8, 1.35), (0.9, 1.1), (0.11, 0.17), (0.05, 0.11), (0.8, 1.25))]
    body[-1] = body[-1] * (1.3 if cartoon else 1.0)
    body = torch.stack(body, dim=1)

    # skin (the fantasy and bright-hair coin flips are drawn in both styles: same stream layout)
    t = _u(g, 0.0, 1.0, n)[:, None]
    if cartoon:
        light, dark = torch.tensor([1.0, 0.84, 0.68]), torch.tensor([0.58, 0.36, 0.22])
    else:
        light, dark = torch.tensor([0.95, 0.79, 0.68]), torch.tensor([0.34, 0.22, 0.16])
    skin = light + (dark - light) * t + _nrm(g, 0.0, 0.02, n, 3)
    fantasy = _hsv(_u(g, 0, 1, n), torch.full((n,), 0.5), torch.full((n,), 0.9))
    skin = torch.where((_bern(g, 0.12, n)[:, None] > 0) & cartoon, fantasy, skin)
    # hair
    hair = _pick(torch.randint(0, len(_HAIR_PALETTE), (n,), generator=g), _HAIR_PALETTE.expand(n, -1, -1))
    hair = hair + _nrm(g, 0.0, 0.03, n, 3)
    bright_hair = _hsv(_u(g, 0, 1, n), _u(g, 0.7, 1.0, n), _u(g, 0.7, 1.0, n))
    hair = torch.where((_bern(g, 0.35, n)[:, None] > 0) & cartoon, bright_hair, hair)
    # shirt and its pattern colour
    hue = _u(g, 0, 1, n)
    if cartoon:
        shirt = _hsv(hue, _u(g, 0.7, 1.0, n), _u(g, 0.75, 1.0, n))
        white = torch.full((n, 3), 0.96)
        compl = _hsv(hue + 0.5, _u(g, 0.7, 1.0, n), _u(g, 0.8, 1.0, n))
        shirt2 = torch.where(_bern(g, 0.5, n)[:, None] > 0, white, compl)
    else:
        shirt = _hsv(hue, _u(g, 0.1, 0.6, n), _u(g, 0.2, 0.9, n))
        darker = shirt * _u(g, 0.45, 0.75, n)[:, None]
        other = _hsv(_u(g, 0, 1, n), _u(g, 0.1, 0.5, n), _u(g, 0.3, 0.9, n))
        shirt2 = torch.where(_bern(g, 0.5, n)[:, None] > 0, darker, other)
    # trousers
    if cartoon:
        th = _u(g, 0, 1, n)
        trousers = _hsv(th, _u(g, 0.65, 1.0, n), _u(g, 0.55, 0.95, n))
        trousers2 = _hsv(th + _u(g, 0.25, 0.75, n), _u(g, 0.6, 1.0, n), _u(g, 0.8, 1.0, n))
    else:
        kinds = torch.stack([
            _hsv(_u(g, 0.57, 0.63, n), _u(g, 0.35, 0.6, n), _u(g, 0.25, 0.55, n)),   # denim
            _hsv(_u(g, 0, 1, n), _u(g, 0.0, 0.1, n), _u(g, 0.08, 0.28, n)),         # black
            _hsv(_u(g, 0.09, 0.13, n), _u(g, 0.3, 0.45, n), _u(g, 0.55, 0.75, n)),  # khaki
            _hsv(_u(g, 0, 1, n), _u(g, 0.0, 0.08, n), _u(g, 0.35, 0.6, n)),         # grey
        ], dim=1)
        trousers = _pick(torch.randint(0, 4, (n,), generator=g), kinds)
        trousers2 = trousers * _u(g, 0.55, 0.8, n)[:, None]
    # shoes, eyes, lips
    if cartoon:
        shoes = _hsv(_u(g, 0, 1, n), _u(g, 0.6, 1.0, n), _u(g, 0.5, 0.9, n))
        eyes = _hsv(_u(g, 0, 1, n), _u(g, 0.0, 0.3, n), _u(g, 0.03, 0.12, n))
        lips = _hsv(_u(g, 0.95, 1.0, n), _u(g, 0.6, 0.8, n), _u(g, 0.65, 0.85, n))
    else:
        dark_shoe = _hsv(_u(g, 0, 1, n), _u(g, 0.0, 0.3, n), _u(g, 0.08, 0.35, n))
        light_shoe = _hsv(_u(g, 0, 1, n), _u(g, 0.0, 0.1, n), _u(g, 0.8, 0.95, n))
        shoes = torch.where(_bern(g, 0.2, n)[:, None] > 0, light_shoe, dark_shoe)
        eyes = _hsv(_u(g, 0.05, 0.65, n), _u(g, 0.3, 0.7, n), _u(g, 0.08, 0.35, n))
        lips = skin * torch.tensor([0.85, 0.55, 0.55]) + _nrm(g, 0.0, 0.02, n, 3)
    colors = torch.stack([skin, hair, shirt, shirt2, trousers, trousers2, shoes, eyes, lips], dim=1).clamp(0, 1)

    period = ("u", 0.04, 0.09) if cartoon else ("u", 0.025, 0.06)
    clothing = _draw_columns(g, n, (
        ("c", (0.2, 0.3, 0.2, 0.3) if cartoon else (0.55, 0.2, 0.1, 0.15)), period,
        ("c", (0.5, 0.2, 0.1, 0.2) if cartoon else (0.9, 0.02, 0.05, 0.03)), period,
        ("b", 0.55), ("b", 0.2), ("c", (0.08, 0.6, 0.32)), ("u", 0.97, 1.12), ("b", 0.15),
    ))
    return {"body": body, "colors": colors, "clothing": clothing}


def identity_traits(identity: torch.Tensor, *, style: Style) -> dict[str, torch.Tensor]:
    """Body shape and appearance of each identity number (deterministic in ``(identity, style)``).

    Args:
        identity: (n,) int64 identity numbers (>= 0).
        style: palette, ``"photo"`` or ``"cartoon"``.

    Returns:
        ``{"body": (n, 16), "colors": (n, 9, 3), "clothing": (n, 9)}`` float32 CPU tensors.
    """
    check_choice("style", style, STYLES)
    if not isinstance(identity, torch.Tensor) or identity.ndim != 1 or identity.is_floating_point():
        raise ShapeError("identity must be a 1-D integer tensor of identity numbers")
    if identity.numel() and int(identity.min()) < 0:
        raise InvalidArgumentError("identity numbers must be >= 0 (allowed range: [0, inf))")
    ids = identity.detach().cpu().long()
    out = {"body": torch.zeros(ids.numel(), len(BODY_FIELDS)),
           "colors": torch.zeros(ids.numel(), len(COLOR_FIELDS), 3),
           "clothing": torch.zeros(ids.numel(), len(CLOTHING_FIELDS))}
    blocks = torch.div(ids, _IDENTITY_BLOCK, rounding_mode="floor")
    for blk in torch.unique(blocks).tolist():
        sel = (blocks == blk).nonzero().flatten()
        g = torch.Generator().manual_seed(_derive_seed("synthpose-identity", style, blk))
        table = _draw_traits(_IDENTITY_BLOCK, g, style)
        rows = ids[sel] - blk * _IDENTITY_BLOCK
        for k, v in table.items():
            out[k][sel] = v[rows]
    return out


def _draw_angles(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Pose family and joint angles (n, 21), clamped to :data:`ANGLE_LIMITS`."""
    pose_class = torch.multinomial(torch.tensor(_POSE_CLASS_PROBS), n, replacement=True, generator=g)
    # Angles shared by all families.
    base = torch.zeros(n, len(ANGLE_NAMES))
    m = _u(g, 0, 1, n)
    yaw = torch.where(m < 0.45, _nrm(g, 0.0, 0.45, n), torch.where(m < 0.65, math.pi + _nrm(g, 0.0, 0.45, n),
                                                                     _u(g, -math.pi, math.pi, n)))
    base[:, _A["yaw"]] = torch.remainder(yaw + math.pi, 2 * math.pi) - math.pi
    for name, mu, sd in (("torso_bend", 0.05, 0.08), ("torso_lean", 0.0, 0.07), ("torso_twist", 0.0, 0.15),
                         ("neck_pitch", 0.05, 0.15), ("neck_roll", 0.0, 0.1), ("head_yaw", 0.0, 0.35)):
        base[:, _A[name]] = _nrm(g, mu, sd, n)

    def per_side(a: torch.Tensor, **draws) -> None:
        """Set ``r_<name>`` then ``l_<name>``, each draw in the given order: a uniform range ``(lo, hi)`` or a
        function that draws the angle."""
        for s in ("r", "l"):
            for name, d in draws.items():
                a[:, _A[f"{s}_{name}"]] = d() if callable(d) else _u(g, *d, n)

    def legs_standing(a: torch.Tensor) -> None:
        per_side(a, hip_flex=lambda: _nrm(g, 0.03, 0.08, n), hip_abduct=(0.0, 0.25), knee=(0.0, 0.25))

    def arms_relaxed(a: torch.Tensor) -> None:
        for s in ("r", "l"):
            hip_hand = _bern(g, 0.25, n)
            a[:, _A[f"{s}_shoulder_flex"]] = _nrm(g, 0.1, 0.25, n) * (1 - hip_hand)
            a[:, _A[f"{s}_shoulder_abduct"]] = torch.where(hip_hand > 0, _u(g, 0.5, 0.8, n), _u(g, 0.05, 0.45, n))
            a[:, _A[f"{s}_elbow"]] = torch.where(hip_hand > 0, _u(g, 1.5, 2.1, n), _u(g, 0.0, 0.9, n))
            a[:, _A[f"{s}_arm_twist"]] = torch.where(hip_hand > 0, _u(g, 0.9, 1.4, n), _u(g, -0.3, 0.8, n))

    proposals: list[torch.Tensor] = []

    def family() -> torch.Tensor:
        """A new proposal, a copy of the shared angles (one per pose family, in POSE_CLASSES order)."""
        proposals.append(base.clone())
        return proposals[-1]

    # 0 standing
    a = family()
    legs_standing(a)
    arms_relaxed(a)
    # 1 walking / running
    a = family()
    phase, amp = _u(g, 0, 2 * math.pi, n), _u(g, 0.25, 0.8, n)
    a[:, _A["r_hip_flex"]] = amp * torch.sin(phase)
    a[:, _A["l_hip_flex"]] = -amp * torch.sin(phase)
    a[:, _A["r_knee"]] = 0.1 + 0.7 * amp * (1 + torch.cos(phase))
    a[:, _A["l_knee"]] = 0.1 + 0.7 * amp * (1 - torch.cos(phase))
    per_side(a, hip_abduct=(0.0, 0.12))
    a[:, _A["r_shoulder_flex"]] = -0.9 * amp * torch.sin(phase)
    a[:, _A["l_shoulder_flex"]] = 0.9 * amp * torch.sin(phase)
    per_side(a, shoulder_abduct=(0.05, 0.25), elbow=lambda: _u(g, 0.2, 1.0, n) + amp * _u(g, 0.0, 1.0, n),
             arm_twist=(-0.2, 0.4))
    a[:, _A["torso_bend"]] = _nrm(g, 0.1, 0.08, n)
    # 2 arms raised (both up, one up, T / waving, V)
    a = family()
    legs_standing(a)
    mode = torch.randint(0, 4, (n,), generator=g)
    up_r, up_l = _u(g, 2.3, 3.0, n), _u(g, 2.3, 3.0, n)
    low_r, low_l = _u(g, 0.1, 0.5, n), _u(g, 0.1, 0.5, n)
    t_r, t_l = _u(g, 1.2, 1.8, n), _u(g, 1.2, 1.8, n)
    v_r, v_l = _u(g, 1.9, 2.4, n), _u(g, 1.9, 2.4, n)
    one_side = _bern(g, 0.5, n) > 0
    a[:, _A["r_shoulder_abduct"]] = _pick(mode, torch.stack([up_r, torch.where(one_side, up_r, low_r), t_r, v_r], 1))
    a[:, _A["l_shoulder_abduct"]] = _pick(mode, torch.stack([up_l, torch.where(one_side, low_l, up_l), t_l, v_l], 1))
    per_side(a, shoulder_flex=lambda: _nrm(g, 0.15, 0.3, n),
             elbow=lambda: torch.where(mode == 2, _u(g, 0.0, 2.0, n), _u(g, 0.0, 0.7, n)), arm_twist=(-0.6, 0.3))
    # 3 sitting-ish (chair sitting or squatting)
    a = family()
    squat = _bern(g, 0.3, n) > 0
    per_side(a, hip_flex=lambda: torch.where(squat, _u(g, 1.8, 2.15, n), _u(g, 1.2, 1.75, n)),
             knee=lambda: torch.where(squat, _u(g, 2.0, 2.45, n), _u(g, 1.2, 1.9, n)), hip_abduct=(0.0, 0.35),
             shoulder_flex=(0.0, 0.9), shoulder_abduct=(0.05, 0.35), elbow=(0.3, 1.8), arm_twist=(0.0, 0.8))
    a[:, _A["torso_bend"]] = torch.where(squat, _u(g, 0.3, 0.7, n), _nrm(g, 0.05, 0.12, n))
    # 4 bending forward
    a = family()
    bend = _u(g, 0.6, 1.4, n)
    a[:, _A["torso_bend"]] = bend
    a[:, _A["neck_pitch"]] = _u(g, -0.6, -0.1, n)
    per_side(a, hip_flex=(-0.05, 0.3), knee=(0.0, 0.4), hip_abduct=(0.0, 0.2),
             shoulder_flex=lambda: bend + _nrm(g, 0.0, 0.3, n), shoulder_abduct=(0.0, 0.3), elbow=(0.0, 0.6),
             arm_twist=(-0.3, 0.5))
    # 5 dynamic (sports, dance): broad ranges within the limits
    a = family()
    per_side(a, hip_flex=(-0.4, 1.9), hip_abduct=(-0.1, 0.8), knee=(0.0, 2.2), shoulder_flex=(-0.7, 3.0),
             shoulder_abduct=(0.0, 2.9), elbow=(0.0, 2.4), arm_twist=(-0.8, 1.3))
    a[:, _A["torso_bend"]] = _u(g, -0.2, 0.8, n)
    a[:, _A["torso_lean"]] = _nrm(g, 0.0, 0.18, n)

    angles = _pick(pose_class, torch.stack(proposals, dim=1))
    limits = torch.tensor(ANGLE_LIMITS)
    angles = torch.maximum(torch.minimum(angles, limits[:, 1]), limits[:, 0])
    return pose_class, angles


def _draw_scene(n: int, g: torch.Generator, style: str) -> dict[str, torch.Tensor]:
    """Pose, camera, background, occluders and noise seed of ``n`` samples."""
    cartoon = style == "cartoon"
    pose_class, angles = _draw_angles(n, g)
    closeup = _bern(g, 0.15, n)
    big_roll = _bern(g, 0.06, n)
    view = torch.stack([  # the columns of VIEW_FIELDS
        torch.where(big_roll > 0, _u(g, -0.9, 0.9, n), _nrm(g, 0.0, 0.15, n)),
        torch.where(closeup > 0, _u(g, 0.95, 1.4, n), _u(g, 0.55, 0.9, n)),
        _nrm(g, 0.0, 0.05, n), _nrm(g, 0.0, 0.05, n), closeup * _u(g, 0.5, 1.0, n),
    ], dim=1)
    background = _draw_columns(g, n, (  # the columns of BACKGROUND_FIELDS
        ("i", 4), ("i", len(BACKGROUND_PHOTOS)), ("u", 0.35, 1.0), ("u", 0.0, 1.0), ("u", 0.0, 1.0), ("b", 0.5),
        ("n", 1.0, 0.12), ("n", 1.0, 0.12), ("n", 1.0, 0.12), ("u", 0.75, 1.15), ("u", 0.7, 1.1), ("u", 2.0, 10.0),
        ("u", 0.0, math.pi), ("u", 0.0, 2 * math.pi), ("u", 0.004, 0.03), ("u", 0.92, 1.08), ("u", 0.9, 1.1),
    ))
    h1 = _u(g, 0, 1, n)
    sat, val1, val2 = ((0.25, 0.75), (0.6, 1.0), (0.55, 1.0)) if cartoon else ((0.05, 0.4), (0.3, 0.8), (0.3, 0.8))
    bg_colors = torch.stack([_hsv(h1, _u(g, *sat, n), _u(g, *val1, n)),
                             _hsv(h1 + _u(g, 0.15, 0.85, n), _u(g, *sat, n), _u(g, *val2, n))], 1)
    grid = torch.rand(n, 3, _GRID, _GRID, generator=g)
    occ = []
    for p in (0.25, 0.1):
        if cartoon:
            c1 = _hsv(_u(g, 0, 1, n), _u(g, 0.6, 1.0, n), _u(g, 0.6, 1.0, n))
            c2 = _hsv(_u(g, 0, 1, n), _u(g, 0.0, 0.4, n), _u(g, 0.85, 1.0, n))
        else:
            c1 = _hsv(_u(g, 0.0, 0.2, n), _u(g, 0.1, 0.6, n), _u(g, 0.2, 0.8, n))
            c2 = c1 * _u(g, 0.5, 0.8, n)[:, None]
        occ.append(torch.cat([_draw_columns(g, n, (  # OCCLUDER_FIELDS up to "period", then the two colours
            ("b", p), ("i", len(MPII_JOINTS)), ("n", 0.0, 0.08), ("n", 0.0, 0.08), ("u", 0.04, 0.2), ("u", 0.04, 0.25),
            ("n", 0.0, 0.3), ("u", 0.0, 1.0), ("b", 0.7 if cartoon else 0.35), ("u", 0.03, 0.08),
        )), c1, c2], dim=1))
    occluders = torch.stack(occ, dim=1)
    noise_seed = torch.randint(0, 2**31 - 1, (n,), generator=g)
    return {"pose_class": pose_class, "angles": angles, "view": view, "background": background,
            "background_colors": bg_colors.clamp(0, 1), "background_grid": grid, "occluders": occluders,
            "noise_seed": noise_seed}


def sample_pose_params(n: int, *, generator: torch.Generator, style: Style,
                       identity: torch.Tensor | None = None) -> PoseParams:
    """Draw parameters of ``n`` figures.

    Args:
        n: number of samples (>= 1).
        generator: a CPU ``torch.Generator``; the only source of randomness.
        style: palette of the appearance (``"photo"`` or ``"cartoon"``), also the default
            rendering style of the result.
        identity: optional (n,) int64 identity numbers.  Given, body shape and appearance come
            from :func:`identity_traits` (the same person in every sample); omitted, every
            sample gets a fresh random person drawn from ``generator`` and identity -1.

    Returns:
        :class:`PoseParams` on the CPU.
    """
    n = check_int("n", n, minimum=1)
    check_choice("style", style, STYLES)
    if not isinstance(generator, torch.Generator):
        raise InvalidArgumentError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    if generator.device.type != "cpu":
        raise InvalidArgumentError("generator must live on the CPU (parameters are drawn on the CPU)")
    if identity is not None:
        if not isinstance(identity, torch.Tensor) or identity.shape != (n,):
            raise ShapeError(f"identity must be a tensor of shape ({n},)")
        traits = identity_traits(identity, style=style)
        ident = identity.detach().cpu().long()
    else:
        traits = _draw_traits(n, generator, style)
        ident = torch.full((n,), -1, dtype=torch.long)
    scene = _draw_scene(n, generator, style)
    return PoseParams(style=style, identity=ident, **traits, **scene)


def synthpose_params(*, split: Split = "private", n: int = 2048, seed: int = 0, start: int = 0,
                     n_identities: int | None = None) -> PoseParams:
    """Parameters of samples ``start .. start + n - 1`` of a synthpose split, without rendering.

    Sample ``i`` depends only on ``(split, seed, i, n_identities)``.  Identities are assigned
    round-robin (``i mod n_identities``); public identity numbers start at
    :data:`PUBLIC_IDENTITY_OFFSET`.

    Args:
        split: ``"private"`` (photo style) or ``"public"`` (cartoon style; disjoint identities and
            random streams).
        n: number of samples (>= 1).
        seed: dataset seed (>= 0).
        start: index of the first sample (>= 0).
        n_identities: people in the split (default 256).

    Returns:
        :class:`PoseParams` on the CPU.
    """
    check_choice("split", split, tuple(SPLIT_STYLE))
    n = check_int("n", n, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    start = check_int("start", start, minimum=0)
    n_id = DEFAULT_N_IDENTITIES if n_identities is None else check_int(
        "n_identities", n_identities, minimum=1, maximum=PUBLIC_IDENTITY_OFFSET)
    style = SPLIT_STYLE[split]
    first, last = start // BLOCK_SIZE, (start + n - 1) // BLOCK_SIZE
    scenes = []
    for b in range(first, last + 1):
        g = torch.Generator().manual_seed(_derive_seed("synthpose", split, seed, "block", b))
        scenes.append(_draw_scene(BLOCK_SIZE, g, style))
    offset = start - first * BLOCK_SIZE
    scene = {k: torch.cat([s[k] for s in scenes])[offset:offset + n] for k in scenes[0]}
    offset_id = PUBLIC_IDENTITY_OFFSET if split == "public" else 0
    identity = torch.arange(start, start + n, dtype=torch.long) % n_id + offset_id
    return PoseParams(style=style, identity=identity, **identity_traits(identity, style=style), **scene)


# --------------------------------------------------------------------------------------------
# Kinematics
# --------------------------------------------------------------------------------------------
# Extra points after the 16 MPII joints.
_EXTRA = ("r_toe", "l_toe", "r_hand", "l_hand", "head_a", "head_b", "hair_a", "hair_b", "beard_a", "beard_b",
          "r_eye", "l_eye", "mouth_a", "mouth_b")
_PT = {**_J, **{name: 16 + i for i, name in enumerate(_EXTRA)}}


def _rot(axis: str, a: torch.Tensor) -> torch.Tensor:
    c, s = torch.cos(a), torch.sin(a)
    o, i = torch.zeros_like(a), torch.ones_like(a)
    if axis == "x":
        m = [i, o, o, o, c, -s, o, s, c]
    elif axis == "y":
        m = [c, o, s, o, i, o, -s, o, c]
    else:
        m = [c, -s, o, s, c, o, o, o, i]
    return torch.stack(m, dim=-1).view(*a.shape, 3, 3)


def _pair(centre: torch.Tensor, offset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The two points ``centre -+ offset`` (right/first, left/second)."""
    return centre - offset, centre + offset


def _skeleton(body: torch.Tensor, clothing: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """3-D points (n, 30, 3) in body units: x = image right, y = up, z = towards the camera."""
    b = {k: body[:, i, None] for k, i in _B.items()}
    ang = {k: angles[:, i] for k, i in _A.items()}
    n = body.shape[0]
    pts: dict[str, torch.Tensor] = {}
    pts["pelvis"] = pelvis = torch.zeros(n, 3, dtype=body.dtype, device=body.device)
    P = _rot("y", ang["yaw"])
    pts["r_hip"], pts["l_hip"] = _pair(pelvis, b["hip_width"] * P[..., 0])
    T = P @ _rot("y", ang["torso_twist"]) @ _rot("x", ang["torso_bend"]) @ _rot("z", ang["torso_lean"])
    pts["thorax"] = thorax = pelvis + b["torso"] * T[..., 1]
    pts["r_shoulder"], pts["l_shoulder"] = _pair(thorax, b["shoulder_width"] * T[..., 0])
    N = T @ _rot("x", ang["neck_pitch"]) @ _rot("z", ang["neck_roll"])
    pts["upper_neck"] = neck = thorax + b["neck"] * N[..., 1]
    H = N @ _rot("y", ang["head_yaw"])
    up, fwd, side = H[..., 1], H[..., 2], H[..., 0]
    h = b["head"]
    pts["head_top"] = neck + h * up
    hc = neck + 0.5 * h * up + 0.06 * h * fwd
    pts["head_a"], pts["head_b"] = _pair(hc, 0.1 * h * up)
    long_hair = (clothing[:, _K["hair_style"]] == 2).to(body.dtype)[:, None]
    pts["hair_a"] = hc + 0.12 * h * up - 0.13 * h * fwd
    pts["hair_b"] = pts["hair_a"] + long_hair * (-0.75 * h * up - 0.12 * h * fwd)
    pts["beard_a"], pts["beard_b"] = _pair(hc - 0.24 * h * up + 0.16 * h * fwd, 0.13 * h * side)
    pts["r_eye"], pts["l_eye"] = _pair(hc + 0.05 * h * up + 0.33 * h * fwd, b["eye_spacing"] * h * side)
    pts["mouth_a"], pts["mouth_b"] = _pair(hc - 0.2 * h * up + 0.31 * h * fwd, b["mouth_width"] * h * side)
    for s, sign in (("r", -1.0), ("l", 1.0)):
        TH = P @ _rot("z", sign * ang[f"{s}_hip_abduct"]) @ _rot("x", -ang[f"{s}_hip_flex"])
        pts[f"{s}_knee"] = knee = pts[f"{s}_hip"] - b["thigh"] * TH[..., 1]
        SH = TH @ _rot("x", ang[f"{s}_knee"])
        pts[f"{s}_ankle"] = ankle = knee - b["shin"] * SH[..., 1]
        pts[f"{s}_toe"] = ankle + b["foot"] * F.normalize(SH[..., 2] - 0.3 * SH[..., 1], dim=-1)
        AR = (T @ _rot("z", sign * ang[f"{s}_shoulder_abduct"]) @ _rot("x", -ang[f"{s}_shoulder_flex"])
              @ _rot("y", -sign * ang[f"{s}_arm_twist"]))
        pts[f"{s}_elbow"] = elbow = pts[f"{s}_shoulder"] - b["upper_arm"] * AR[..., 1]
        FA = AR @ _rot("x", -ang[f"{s}_elbow"])
        pts[f"{s}_wrist"] = wrist = elbow - b["forearm"] * FA[..., 1]
        pts[f"{s}_hand"] = wrist - b["hand"] * FA[..., 1]
    return torch.stack([pts[k] for k in sorted(_PT, key=_PT.get)], dim=1)


# Capsules: (point a, point b, radius a, radius b, scale), in body units the radii are multiplied by the scale:
# "girth", "none" (1), "head", "head_width" (head * head_width), "hair" (head * hair_volume), "eye" (head * eye_size).
_CAPSULES: tuple[tuple[str, str, float, float, str], ...] = (
    # torso (part 0): spine first (main capsule), flanks, shoulder girdle
    ("pelvis", "thorax", 0.075, 0.085, "girth"),
    ("r_shoulder", "r_hip", 0.045, 0.05, "girth"), ("l_shoulder", "l_hip", 0.045, 0.05, "girth"),
    ("r_shoulder", "l_shoulder", 0.045, 0.045, "girth"),
    # hips (part 1)
    ("r_hip", "l_hip", 0.065, 0.065, "girth"),
    ("r_hip", "r_knee", 0.06, 0.045, "girth"), ("l_hip", "l_knee", 0.06, 0.045, "girth"),
    ("r_knee", "r_ankle", 0.043, 0.03, "girth"), ("l_knee", "l_ankle", 0.043, 0.03, "girth"),
    ("r_ankle", "r_toe", 0.028, 0.024, "none"), ("l_ankle", "l_toe", 0.028, 0.024, "none"),
    ("r_shoulder", "r_elbow", 0.038, 0.032, "girth"), ("l_shoulder", "l_elbow", 0.038, 0.032, "girth"),
    ("r_elbow", "r_wrist", 0.031, 0.024, "girth"), ("l_elbow", "l_wrist", 0.031, 0.024, "girth"),
    ("r_wrist", "r_hand", 0.026, 0.023, "none"), ("l_wrist", "l_hand", 0.026, 0.023, "none"),
    ("thorax", "upper_neck", 0.032, 0.03, "girth"), ("head_a", "head_b", 0.40, 0.40, "head_width"),
    ("hair_a", "hair_b", 0.42, 0.30, "hair"), ("beard_a", "beard_b", 0.16, 0.16, "head"),
    ("r_eye", "r_eye", 0.055, 0.055, "eye"), ("l_eye", "l_eye", 0.055, 0.055, "eye"),
    ("mouth_a", "mouth_b", 0.03, 0.03, "head"),
)
#: Parts: (name, capsule indices (first = main), colour field, clothing pattern ("shirt"/"trousers"/""),
#: painter's depth bias in body units).
_PARTS: tuple[tuple[str, tuple[int, ...], str, str, float], ...] = (
    ("torso", (0, 1, 2, 3), "shirt", "shirt", 0.005),
    ("hips", (4,), "trousers", "trousers", -0.01),
    ("r_thigh", (5,), "trousers", "trousers", -0.005), ("l_thigh", (6,), "trousers", "trousers", -0.005),
    ("r_shin", (7,), "trousers", "trousers", 0.0), ("l_shin", (8,), "trousers", "trousers", 0.0),
    ("r_foot", (9,), "shoes", "", 0.0), ("l_foot", (10,), "shoes", "", 0.0),
    ("r_upper_arm", (11,), "shirt", "shirt", 0.01), ("l_upper_arm", (12,), "shirt", "shirt", 0.01),
    ("r_forearm", (13,), "shirt", "shirt", 0.01), ("l_forearm", (14,), "shirt", "shirt", 0.01),
    ("r_hand", (15,), "skin", "", 0.015), ("l_hand", (16,), "skin", "", 0.015),
    ("neck", (17,), "skin", "", -0.03), ("head", (18,), "skin", "", 0.0),
    ("hair", (19,), "hair", "", 0.0), ("beard", (20,), "hair", "", 0.0),
    ("r_eye", (21,), "eyes", "", 0.0), ("l_eye", (22,), "eyes", "", 0.0), ("mouth", (23,), "lips", "", 0.0),
)
_PART = {p[0]: i for i, p in enumerate(_PARTS)}
_CAP_A = torch.tensor([_PT[c[0]] for c in _CAPSULES])
_CAP_B = torch.tensor([_PT[c[1]] for c in _CAPSULES])
_CAP_PART = torch.tensor([next(i for i, prt in enumerate(_PARTS) if c in prt[1]) for c in range(len(_CAPSULES))])
_NO_OUTLINE = ("r_eye", "l_eye", "mouth", "beard")


def _capsule_radii(body: torch.Tensor, clothing: torch.Tensor) -> torch.Tensor:
    """(n, n_capsules, 2) radii in body units."""
    b = {k: body[:, i] for k, i in _B.items()}
    factor = {"girth": b["girth"], "none": torch.ones_like(b["girth"]), "head_width": b["head"] * b["head_width"],
              "hair": b["head"] * clothing[:, _K["hair_volume"]], "eye": b["head"] * b["eye_size"], "head": b["head"]}
    return torch.stack([torch.stack([ra * factor[k], rb * factor[k]], dim=-1) for _, _, ra, rb, k in _CAPSULES], dim=1)


def _joint_exclusions() -> torch.Tensor:
    """(16, n_capsules) True where a capsule may not hide a joint (its own limb, head parts)."""
    ex = torch.zeros(16, len(_CAPSULES), dtype=torch.bool)
    for c, (a, b, *_rest) in enumerate(_CAPSULES):
        for p in (a, b):
            if p in _J:
                ex[_J[p], c] = True
    head_caps = [c for part in ("neck", "head", "hair", "beard", "r_eye", "l_eye", "mouth")
                 for c in _PARTS[_PART[part]][1]]
    for j in ("upper_neck", "head_top", "thorax"):
        ex[_J[j], head_caps] = True
    for c in _PARTS[_PART["torso"]][1] + _PARTS[_PART["hips"]][1]:
        for j in ("pelvis", "thorax", "r_hip", "l_hip", "r_shoulder", "l_shoulder"):
            ex[_J[j], c] = True
    for part in ("r_eye", "l_eye", "mouth"):
        ex[:, list(_PARTS[_PART[part]][1])] = True
    return ex


_JOINT_EXCLUDE = _joint_exclusions()


# --------------------------------------------------------------------------------------------
# Backgrounds
# --------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _photo_cpu(name: str) -> tuple[torch.Tensor, bool]:
    """A scikit-image sample photo as (C, H, W) float32 in [0, 1] and whether it is greyscale."""
    from skimage import data as skdata

    img = torch.as_tensor(getattr(skdata, name)()).float()
    if img.max() > 1.0:
        img = img / 255.0
    if img.ndim == 2:
        return img[None], True
    return img[..., :3].permute(2, 0, 1).contiguous(), False


@functools.lru_cache(maxsize=32)
def _photo_pool(short_side: int, device: str) -> tuple[tuple[torch.Tensor, ...], tuple[bool, ...]]:
    """Every background photo resized to ``short_side`` on ``device`` (cached)."""
    imgs, grey = [], []
    for name in BACKGROUND_PHOTOS:
        img, is_grey = _photo_cpu(name)
        h, w = img.shape[-2:]
        s = min(1.0, short_side / min(h, w))
        if s < 1.0:
            img = resize(img[None], (max(1, round(h * s)), max(1, round(w * s))))[0]
        imgs.append(img.to(device))
        grey.append(is_grey)
    return tuple(imgs), tuple(grey)


def _photo_backgrounds(bg: torch.Tensor, size: int) -> torch.Tensor:
    """Crops of the background photos, (n, 3, size, size)."""
    n, device = bg.shape[0], bg.device
    pool, grey = _photo_pool(2 * size, str(device))
    out = torch.empty(n, 3, size, size, device=device)
    photo = bg[:, _G["photo"]].long()
    for k, img in enumerate(pool):
        sel = (photo == k).nonzero().flatten()
        if sel.numel() == 0:
            continue
        p = bg[sel]
        h, w = img.shape[-2:]
        side = p[:, _G["crop"]] * min(h, w)
        x0 = p[:, _G["crop_x"]] * (w - side)
        y0 = p[:, _G["crop_y"]] * (h - side)
        flip = 1.0 - 2.0 * p[:, _G["flip"]]
        theta = torch.zeros(sel.numel(), 2, 3, device=device)
        theta[:, 0, 0] = side / w * flip
        theta[:, 0, 2] = (x0 + side / 2) / w * 2 - 1
        theta[:, 1, 1] = side / h
        theta[:, 1, 2] = (y0 + side / 2) / h * 2 - 1
        grid = F.affine_grid(theta, [sel.numel(), img.shape[0], size, size], align_corners=False)
        crop = F.grid_sample(img[None].expand(sel.numel(), -1, -1, -1), grid, mode="bilinear",
                             padding_mode="border", align_corners=False)
        if crop.shape[1] == 1:
            crop = crop.expand(-1, 3, -1, -1)
        strength = 1.0 if grey[k] else 0.35  # of the colour jitter
        gains = 1.0 + strength * (p[:, _G["gain_r"]:_G["gain_b"] + 1] - 1.0)
        gains = gains / gains.mean(dim=1, keepdim=True)
        out[sel] = crop * gains[:, :, None, None]
    mean = out.mean(dim=(1, 2, 3), keepdim=True)
    out = (out - mean) * bg[:, _G["contrast"], None, None, None] + mean
    return (out * bg[:, _G["brightness"], None, None, None]).clamp(0, 1)


def _procedural_backgrounds(bg: torch.Tensor, colors: torch.Tensor, grid: torch.Tensor, size: int) -> torch.Tensor:
    """Value noise / grating / checker / gradient textures, (n, 3, size, size)."""
    device = bg.device
    noise = F.interpolate(grid, size=(size, size), mode="bicubic", align_corners=False).clamp(0, 1)
    coord = (torch.arange(size, device=device, dtype=torch.float32) + 0.5) / size - 0.5
    ang = bg[:, _G["angle"], None, None]
    xx, yy = coord[None, None, :], coord[None, :, None]
    u = xx * torch.cos(ang) + yy * torch.sin(ang)
    v = -xx * torch.sin(ang) + yy * torch.cos(ang)
    f = 2 * math.pi * bg[:, _G["frequency"], None, None]
    ph = bg[:, _G["phase"], None, None]
    mix = torch.stack([
        noise[:, 0],
        torch.sigmoid(6 * torch.sin(f * u + ph)),
        torch.sigmoid(6 * torch.sin(f * u + ph) * torch.sin(f * v + ph)),
        (u + 0.5 + 0.3 * (noise[:, 0] - 0.5)).clamp(0, 1),
    ], dim=1)
    kind = F.one_hot(bg[:, _G["kind"]].long(), 4).float()
    m = (mix * kind[:, :, None, None]).sum(1, keepdim=True)
    c1, c2 = colors[:, 0, :, None, None], colors[:, 1, :, None, None]
    out = c1 + (c2 - c1) * m + 0.12 * (noise - 0.5)
    return out.clamp(0, 1)


def _hash_uniform(key: torch.Tensor) -> torch.Tensor:
    """Integer hash of int64 keys -> sum of two uniforms minus 1 (triangular on (-1, 1)); device independent."""
    mask = 0xFFFFFFFF
    x = (key ^ (key >> 32)) & mask
    x = (((x >> 16) ^ x) * 0x45D9F3B) & mask
    x = (((x >> 16) ^ x) * 0x45D9F3B) & mask
    x = (x >> 16) ^ x
    lo = (x & 0xFFFF).float() / 65536.0
    hi = (x >> 16).float() / 65536.0
    return lo + hi - 1.0


@functools.lru_cache(maxsize=16)
def _noise_tile(size: int, device: str) -> torch.Tensor:
    """A fixed (3, 2 size, 2 size) unit-variance noise tile; samples read shifted windows of it."""
    side = 2 * size
    c = torch.arange(3, device=device).view(3, 1, 1)
    y = torch.arange(side, device=device).view(1, side, 1)
    x = torch.arange(side, device=device).view(1, 1, side)
    key = (c * side + y) * side + x + 0x9E3779B9
    return _hash_uniform(key) / math.sqrt(1.0 / 6.0)


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------
_OUTLINE_RGB = (0.08, 0.06, 0.1)


def _box_sdf(x: torch.Tensor, y: torch.Tensor, occ: torch.Tensor, ppu: torch.Tensor, centre: torch.Tensor):
    """Signed distance (px) of rounded boxes and box-frame coordinates; x, y broadcast against (n, ...)."""
    shape = (-1,) + (1,) * (max(x.ndim, y.ndim) - 1)
    cx, cy = centre[:, 0].view(shape), centre[:, 1].view(shape)
    a = occ[:, _O["angle"]].view(shape)
    hw = (occ[:, _O["half_w"]] * ppu).view(shape)
    hh = (occ[:, _O["half_h"]] * ppu).view(shape)
    rnd = occ[:, _O["rounding"]].view(shape) * torch.minimum(hw, hh)
    dx, dy = x - cx, y - cy
    lu = torch.cos(a) * dx + torch.sin(a) * dy
    lv = -torch.sin(a) * dx + torch.cos(a) * dy
    qx, qy = lu.abs() - (hw - rnd), lv.abs() - (hh - rnd)
    outside = torch.sqrt(qx.clamp_min(0) ** 2 + qy.clamp_min(0) ** 2)
    return outside + torch.maximum(qx, qy).clamp_max(0) - rnd, lu, lv


def _window(lo: torch.Tensor, hi: torch.Tensor, size: int) -> tuple[torch.Tensor, ...]:
    """Pixel window per row covering the boxes [lo, hi] (n, 2), clipped to the image: its origin (x0, y0) and
    its pixel coordinates xs (n, wx), ys (n, wy) as float32.

    The window size is shared by the batch (its largest box); the origin is per row.
    """
    lo_f = torch.floor(lo)
    ext = (torch.ceil(hi) - lo_f + 1).amax(0).clamp(1, size)
    wx, wy = int(ext[0]), int(ext[1])
    x0 = lo_f[:, 0].clamp(0, size - wx).long()
    y0 = lo_f[:, 1].clamp(0, size - wy).long()
    ar = torch.arange(max(wx, wy), device=lo.device)
    return x0, y0, (x0[:, None] + ar[:wx]).to(torch.float32), (y0[:, None] + ar[:wy]).to(torch.float32)


def _blend(img: torch.Tensor, sel: torch.Tensor, x0: torch.Tensor, y0: torch.Tensor,
           premul: torch.Tensor, alpha: torch.Tensor) -> None:
    """In place ``img = img * (1 - alpha) + premul`` on per-row windows of ``img`` (rows ``sel``)."""
    wy, wx = alpha.shape[-2:]
    _, _, h, w = img.shape
    dev = img.device
    rows = (y0[:, None] + torch.arange(wy, device=dev))[:, None, :, None]
    cols = (x0[:, None] + torch.arange(wx, device=dev))[:, None, None, :]
    chan = torch.arange(3, device=dev)[None, :, None, None]
    flat = (((sel[:, None, None, None] * 3 + chan) * h + rows) * w + cols).reshape(-1)
    view = img.view(-1)
    win = view.index_select(0, flat).view(premul.shape)
    view.index_copy_(0, flat, (win * (1 - alpha[:, None]) + premul).reshape(-1))


def _box_mask(xs: torch.Tensor, ys: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """(n, wy, wx) float mask of the pixels inside each row's box; makes a row's result independent of
    the window size its batch imposes."""
    mx = (xs >= lo[:, :1]) & (xs <= hi[:, :1])
    my = (ys >= lo[:, 1:]) & (ys <= hi[:, 1:])
    return (my[:, :, None] & mx[:, None, :]).to(xs.dtype)


@dataclass
class _Figures:
    """A chunk of figures projected into the image, with the drawing settings every layer shares."""

    p: PoseParams
    size: int
    cartoon: bool
    pts2: torch.Tensor     # (n, 30, 2) projected points, px
    depth: torch.Tensor    # (n, 30) body units, larger = nearer
    ppu: torch.Tensor      # (n,) pixels per body unit
    radii: torch.Tensor    # (n, C, 2) capsule end radii, px
    a2: torch.Tensor       # (n, C, 2) capsule start points, px
    b2: torch.Tensor       # (n, C, 2) capsule end points, px
    enabled: torch.Tensor  # (n, P) 1 where the body part is drawn (hair, beard are optional)
    soft: float            # edge softness, px
    line: float            # outline width, px (0: no outline)
    dark: torch.Tensor     # (1, 3, 1, 1) outline colour


def _project_figures(p: PoseParams, size: int, style: str) -> _Figures:
    """Pose the skeletons and project them: orthographic camera, image-plane roll, scale, shift."""
    device = p.identity.device
    n, dtype = len(p), torch.float32
    cartoon = style == "cartoon"
    pts3 = _skeleton(p.body, p.clothing, p.angles)                      # (n, 30, 3) body units
    xy = torch.stack([pts3[..., 0], -pts3[..., 1]], dim=-1)
    j2 = xy[:, :16]
    centre = 0.5 * (j2.amin(1) + j2.amax(1))
    mix = p.view[:, _V["anchor_mix"], None]
    anchor = (1 - mix) * centre + mix * xy[:, _J["thorax"]]
    height = p.body[:, [_B["shin"], _B["thigh"], _B["torso"], _B["neck"], _B["head"]]].sum(1)
    ppu = p.view[:, _V["scale"]] * size / height                           # pixels per body unit
    roll = p.view[:, _V["roll"]]
    rot = torch.stack([torch.cos(roll), -torch.sin(roll), torch.sin(roll), torch.cos(roll)], -1).view(n, 2, 2)
    target = (size - 1) / 2 + size * p.view[:, _V["shift_x"]:_V["shift_y"] + 1]
    pts2 = torch.einsum("nij,npj->npi", rot, xy - anchor[:, None]) * ppu[:, None, None] + target[:, None]
    radii = _capsule_radii(p.body, p.clothing) * ppu[:, None, None]        # px
    enabled = torch.ones(n, len(_PARTS), device=device, dtype=dtype)
    enabled[:, _PART["hair"]] = (p.clothing[:, _K["hair_style"]] > 0).to(dtype)
    enabled[:, _PART["beard"]] = p.clothing[:, _K["beard"]]
    return _Figures(
        p=p, size=size, cartoon=cartoon, pts2=pts2, depth=pts3[..., 2], ppu=ppu, radii=radii,
        a2=pts2[:, _CAP_A.to(device)], b2=pts2[:, _CAP_B.to(device)], enabled=enabled,
        soft=0.35 if cartoon else 0.45, line=max(0.6, 0.9 * size / 64) if cartoon else 0.0,
        dark=torch.tensor(_OUTLINE_RGB, device=device, dtype=dtype).view(1, 3, 1, 1),
    )


def _clothing_pattern(f: _Figures, name: str, pattern: str, t: torch.Tensor, len2: torch.Tensor, px: torch.Tensor,
                      py: torch.Tensor, bax: torch.Tensor, bay: torch.Tensor) -> torch.Tensor:
    """(n, wy, wx) weight of the pattern colour on a part's first capsule (stripes along/across, or checks)."""
    p, n, dtype = f.p, len(f.p), torch.float32
    length = len2.sqrt()
    along = t * length / f.ppu[:, None, None]
    across = (px * bay - py * bax) / length / f.ppu[:, None, None]
    w = (2 * math.pi / p.clothing[:, _K[f"{pattern}_period"]]).view(n, 1, 1)
    s1, s2 = torch.sin(w * along), torch.sin(w * across)
    sharp = 6.0 if f.cartoon else 3.0
    kind = F.one_hot(p.clothing[:, _K[f"{pattern}_pattern"]].long(), 4).to(dtype)[:, :, None, None]
    pat = (kind[:, 1] * torch.sigmoid(sharp * s1) + kind[:, 2] * torch.sigmoid(sharp * s2)
           + kind[:, 3] * torch.sigmoid(2 * sharp * s1 * s2))
    if name.endswith("forearm"):
        pat = pat * (p.clothing[:, _K["long_sleeves"], None] > 0).to(dtype).view(n, 1, 1)
    if name.endswith("shin"):
        pat = pat * (~(p.clothing[:, _K["shorts"], None] > 0)).to(dtype).view(n, 1, 1)
    return pat


def _part_layer(f: _Figures, pi: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Body part ``pi`` drawn on a window around it: (x0, y0, premultiplied colour, coverage)."""
    name, caps, field, pattern, _bias = _PARTS[pi]
    p = f.p
    ow = 0.0 if name in _NO_OUTLINE else f.line
    ca, cb, r = f.a2[:, list(caps)], f.b2[:, list(caps)], f.radii[:, list(caps)]      # (n, k, 2)
    rmax = r.amax(-1, keepdim=True)
    margin = ow + 8 * f.soft + 0.5
    lo = (torch.minimum(ca, cb) - rmax).amin(1) - margin
    hi = (torch.maximum(ca, cb) + rmax).amax(1) + margin
    x0, y0, xs, ys = _window(lo, hi, f.size)
    ax, ay = ca[..., 0, None, None], ca[..., 1, None, None]
    bax, bay = cb[..., 0, None, None] - ax, cb[..., 1, None, None] - ay
    len2 = (bax * bax + bay * bay).clamp_min(1e-6)
    px = xs[:, None, None, :] - ax                                   # (n, k, 1, wx)
    py = ys[:, None, :, None] - ay                                   # (n, k, wy, 1)
    dot = px * bax + py * bay
    t = (dot / len2).clamp_(0.0, 1.0)
    dist = t * len2
    dist.add_(dot, alpha=-2.0).mul_(t).add_(px * px + py * py).clamp_min_(0.0).sqrt_()
    r_at = t * (r[..., 1, None, None] - r[..., 0, None, None]) + r[..., 0, None, None]
    sdf_k = dist - r_at
    sdf = sdf_k.amin(1) if len(caps) > 1 else sdf_k[:, 0]            # (n, wy, wx)
    on = f.enabled[:, pi, None, None] * _box_mask(xs, ys, lo, hi)
    fill = torch.sigmoid(sdf / -f.soft) * on
    cover = torch.sigmoid((sdf - ow) / -f.soft) * on if ow > 0 else fill
    q = (-sdf / r_at[:, 0].clamp_min(1e-3)).clamp_(0.0, 1.0)
    if f.cartoon:
        shade = 0.8 + 0.2 * torch.sigmoid((q - 0.35) * 20.0)
    else:
        shade = 0.55 + 0.45 * torch.sqrt(q * (2.0 - q))
    col = {k: p.colors[:, i] for k, i in _C.items()}
    c1 = col[field]
    if name.endswith("forearm"):
        c1 = torch.where(p.clothing[:, _K["long_sleeves"], None] > 0, c1, col["skin"])
    if name.endswith("shin"):
        c1 = torch.where(p.clothing[:, _K["shorts"], None] > 0, col["skin"], c1)
    if name == "beard" and not f.cartoon:
        c1 = c1 * 0.9
    colour = c1[:, :, None, None]
    if pattern:
        pat = _clothing_pattern(f, name, pattern, t[:, 0], len2[:, 0], px[:, 0], py[:, 0], bax[:, 0], bay[:, 0])
        colour = colour + (col[f"{pattern}_pattern"] - c1)[:, :, None, None] * pat[:, None]
    premul = (fill * shade)[:, None] * colour
    if ow > 0:
        premul = premul + (cover - fill)[:, None] * f.dark
    return x0, y0, premul, cover


def _paint_parts(img: torch.Tensor, f: _Figures) -> None:
    """Draw the body parts onto ``img`` in place, back to front (painter's order) per figure."""
    device = img.device
    layers = [_part_layer(f, pi) for pi in range(len(_PARTS))]
    cap_a, cap_b = _CAP_A.to(device), _CAP_B.to(device)
    mid_depth = 0.5 * (f.depth[:, cap_a] + f.depth[:, cap_b])             # (n, C)
    part_depth = torch.stack([mid_depth[:, list(caps)].mean(1) + bias for _n, caps, _f, _p, bias in _PARTS], 1)
    order = part_depth.argsort(dim=1).cpu()
    for k in range(len(_PARTS)):
        ranked = order[:, k]
        for pi in torch.unique(ranked).tolist():
            sel = (ranked == pi).nonzero().flatten().to(device)
            x0, y0, premul, cover = layers[pi]
            _blend(img, sel, x0[sel], y0[sel], premul[sel], cover[sel])


def _paint_occluders(img: torch.Tensor, f: _Figures, kp: torch.Tensor) -> torch.Tensor:
    """Draw the occluder objects (always in front of the figure) in place; returns (n, 16) joints they cover."""
    p, n, device = f.p, len(f.p), img.device
    soft, line, ppu = f.soft, f.line, f.ppu
    occluded = torch.zeros(n, 16, dtype=torch.bool, device=device)
    for k in range(N_OCCLUDERS):
        occ = p.occluders[:, k]
        anchor_pt = kp.gather(1, occ[:, _O["anchor"]].long().view(n, 1, 1).expand(n, 1, 2))[:, 0]
        centre_px = anchor_pt + occ[:, _O["dx"]:_O["dy"] + 1] * ppu[:, None]
        jsdf, _, _ = _box_sdf(kp[..., 0], kp[..., 1], occ, ppu, centre_px)
        occluded |= (jsdf < 0) & (occ[:, _O["present"], None] > 0)
        sel = (occ[:, _O["present"]] > 0).nonzero().flatten()
        if sel.numel() == 0:
            continue
        o, c_px, s_ppu = occ[sel], centre_px[sel], ppu[sel]
        reach = torch.hypot(o[:, _O["half_w"]], o[:, _O["half_h"]]) * s_ppu + line + 8 * soft + 0.5
        x0, y0, xs, ys = _window(c_px - reach[:, None], c_px + reach[:, None], f.size)
        osdf, lu, lv = _box_sdf(xs[:, None, :], ys[:, :, None], o, s_ppu, c_px)
        inside = _box_mask(xs, ys, c_px - reach[:, None], c_px + reach[:, None])
        ofill = torch.sigmoid(osdf / -soft) * inside
        ocover = torch.sigmoid((osdf - line) / -soft) * inside if line > 0 else ofill
        period = (o[:, _O["period"]] * s_ppu).view(-1, 1, 1)
        stripes = torch.sigmoid(4.0 * torch.sin(2 * math.pi * lu / period)) * o[:, _O["striped"], None, None]
        oc1, oc2 = o[:, _O["r1"]:_O["b1"] + 1, None, None], o[:, _O["r2"]:_O["b2"] + 1, None, None]
        ocol = oc1 + (oc2 - oc1) * stripes[:, None]
        if not f.cartoon:
            hh = (o[:, _O["half_h"]] * s_ppu).view(-1, 1, 1)
            ocol = ocol * (0.85 - 0.15 * (lv / hh).clamp(-1, 1))[:, None]
        premul = ofill[:, None] * ocol + (ocover - ofill)[:, None] * f.dark
        _blend(img, sel, x0, y0, premul, ocover)
    return occluded


def _photo_finish(img: torch.Tensor, p: PoseParams, size: int) -> torch.Tensor:
    """Photo style: global contrast and gain jitter, then sensor noise read from the fixed noise tile."""
    n, device = len(p), img.device
    mean = img.mean(dim=(1, 2, 3), keepdim=True)
    img = (img - mean) * p.background[:, _G["post_contrast"], None, None, None] + mean
    img = img * p.background[:, _G["post_gain"], None, None, None]
    tile = _noise_tile(size, str(device))
    ox = (p.noise_seed % size).view(n, 1, 1, 1)
    oy = (torch.div(p.noise_seed, size, rounding_mode="floor") % size).view(n, 1, 1, 1)
    ar = torch.arange(size, device=device)
    noise = tile[torch.arange(3, device=device).view(1, 3, 1, 1), oy + ar.view(1, 1, size, 1),
                 ox + ar.view(1, 1, 1, size)]
    return img + noise * p.background[:, _G["noise"]].view(n, 1, 1, 1)


def _joint_visibility(f: _Figures, kp: torch.Tensor, occluded: torch.Tensor) -> torch.Tensor:
    """(n, 16) bool: joint in frame, not under an occluder, not behind a nearer body part."""
    device = kp.device
    in_frame = ((kp >= 0) & (kp <= f.size - 1)).all(-1)
    jz = f.depth[:, :16]
    ja, jb, jp = f.a2[:, None], f.b2[:, None], kp[:, :, None]             # (n,1,C,2), (n,16,1,2)
    seg = jb - ja
    tt = (((jp - ja) * seg).sum(-1) / (seg * seg).sum(-1).clamp_min(1e-6)).clamp(0, 1)   # (n, 16, C)
    dd = (jp - (ja + tt[..., None] * seg)).norm(dim=-1)
    rr = f.radii[:, None, :, 0] + tt * (f.radii[:, None, :, 1] - f.radii[:, None, :, 0])
    za, zb = f.depth[:, _CAP_A.to(device)][:, None], f.depth[:, _CAP_B.to(device)][:, None]
    zc = za + tt * (zb - za)
    cap_on = f.enabled[:, _CAP_PART.to(device)]
    hidden = (dd < 0.8 * rr) & (zc > jz[..., None] + 0.02) & ~_JOINT_EXCLUDE.to(device)[None] & (cap_on[:, None] > 0)
    return in_frame & ~occluded & ~hidden.any(-1)


def _head_boxes(f: _Figures, kp: torch.Tensor) -> torch.Tensor:
    """(n, 4) xyxy: the axis-aligned box of the head rectangle around the projected head segment."""
    neck2, top2 = kp[:, _J["upper_neck"]], kp[:, _J["head_top"]]
    seg2 = top2 - neck2
    seg_len = seg2.norm(dim=-1, keepdim=True)
    up2 = torch.tensor([0.0, -1.0], device=kp.device, dtype=torch.float32)
    u_dir = torch.where(seg_len > 1e-6, seg2 / seg_len.clamp_min(1e-6), up2)
    head_len = 1.02 * f.p.body[:, _B["head"]] * f.ppu
    half_l, half_w = head_len / 2, 0.4 * head_len
    ext_x = u_dir[:, 0].abs() * half_l + u_dir[:, 1].abs() * half_w
    ext_y = u_dir[:, 1].abs() * half_l + u_dir[:, 0].abs() * half_w
    mid = 0.5 * (neck2 + top2)
    return torch.stack([mid[:, 0] - ext_x, mid[:, 1] - ext_y, mid[:, 0] + ext_x, mid[:, 1] + ext_y], dim=-1)


def _render_chunk(p: PoseParams, size: int, style: str) -> tuple[torch.Tensor, ...]:
    f = _project_figures(p, size, style)
    if f.cartoon:
        img = _procedural_backgrounds(p.background, p.background_colors, p.background_grid, size)
    else:
        img = _photo_backgrounds(p.background, size)
    _paint_parts(img, f)
    kp = f.pts2[:, :16]
    occluded = _paint_occluders(img, f, kp)
    if not f.cartoon:
        img = _photo_finish(img, p, size)
    img = img.clamp_(0.0, 1.0)
    return img, kp.contiguous(), _joint_visibility(f, kp, occluded), _head_boxes(f, kp)


def _chunk_size(size: int, device: torch.device) -> int:
    budget = 128 * 128 * 128 if device.type == "cpu" else 4096 * 128 * 128
    return max(1, budget // (size * size))


def render_pose(params: PoseParams, *, size: int = 64, device: str | torch.device | None = None,
                style: Style | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Render figures as images with keypoints, visibility flags and head boxes.

    Args:
        params: :class:`PoseParams` (any device).
        size: image side in pixels, in [:data:`MIN_SIZE`, :data:`MAX_SIZE`].
        device: where to render (``None``/``"auto"``: CUDA when available).
        style: ``"photo"`` or ``"cartoon"``; ``None`` uses ``params.style``.

    Returns:
        ``images`` (n, 3, size, size) float32 in [0, 1]; ``keypoints`` (n, 16, 2) float32 (x, y) pixels
        in MPII order (pixel centres at integer coordinates); ``visible`` (n, 16) bool; ``head_box``
        (n, 4) float32 xyxy.  All on ``device``.
    """
    if not isinstance(params, PoseParams):
        raise InvalidArgumentError(f"params must be PoseParams, got {type(params).__name__}")
    size = check_int("size", size, minimum=MIN_SIZE, maximum=MAX_SIZE)
    style = params.style if style is None else check_choice("style", style, STYLES)
    dev = resolve_device(device)
    params = params.to(dev)
    step = _chunk_size(size, dev)
    # Chunks of similar figure scale keep the shared part windows tight; every row's result is
    # independent of its chunk, so the order only affects speed.
    height = params.body[:, [_B["shin"], _B["thigh"], _B["torso"], _B["neck"], _B["head"]]].sum(1)
    by_scale = torch.argsort(params.view[:, _V["scale"]] / height)
    outs = [_render_chunk(params[by_scale[i:i + step]], size, style) for i in range(0, len(params), step)]
    inverse = torch.argsort(by_scale)  # the inverse permutation
    return tuple(torch.cat([o[k] for o in outs])[inverse] for k in range(4))  # type: ignore[return-value]


def load_synthpose(*, split: Split = "private", n: int = 2048, seed: int = 0, size: int = 64,
                   device: str | torch.device | None = None, n_identities: int | None = None,
                   start: int = 0) -> PoseSet:
    """Procedural pose dataset with exact MPII keypoints (privkit's stand-in for MPII).

    Args:
        split: ``"private"`` (photo backgrounds, natural clothing, shaded) or ``"public"``
            (procedural backgrounds, saturated patterned clothing, outlined cel shading).  The two
            splits share no identity and no random stream.
        n: number of images (>= 1).
        seed: dataset seed (>= 0).
        size: image side in pixels (default 64).
        device: where to render and return tensors (``None``: CUDA when available).
        n_identities: people in the split (default 256); identity ``i mod n_identities`` (public:
            plus :data:`PUBLIC_IDENTITY_OFFSET`).
        start: index of the first sample; ``load_synthpose(n=a+b)`` equals the concatenation of
            ``n=a`` and ``n=b, start=a``.

    Returns:
        :class:`~privkit.data.types.PoseSet` named ``"synthpose-<split>"``.
    """
    check_choice("split", split, tuple(SPLIT_STYLE))
    size = check_int("size", size, minimum=MIN_SIZE, maximum=MAX_SIZE)
    dev = resolve_device(device)
    params = synthpose_params(split=split, n=n, seed=seed, start=start, n_identities=n_identities)
    style = SPLIT_STYLE[split]
    images, keypoints, visible, head_box = render_pose(params, size=size, device=dev, style=style)
    counts = torch.bincount(params.pose_class, minlength=len(POSE_CLASSES)).tolist()
    meta = {
        "generator": "privkit.data.pose.load_synthpose", "split": split, "style": style, "seed": seed, "start": start,
        "size": size, "n_identities": DEFAULT_N_IDENTITIES if n_identities is None else int(n_identities),
        "identity_offset": PUBLIC_IDENTITY_OFFSET if split == "public" else 0,
        "pose_class_counts": dict(zip(POSE_CLASSES, counts)), "visible_fraction": float(visible.float().mean()),
        "joints": MPII_JOINTS, "backgrounds": BACKGROUND_PHOTOS if style == "photo" else "procedural",
        "note": "procedural figures; keypoints exact; not MPII data",
    }
    return PoseSet(images=images, keypoints=keypoints, visible=visible, head_box=head_box,
                   identity=params.identity.to(dev), name=f"synthpose-{split}", meta=meta)
