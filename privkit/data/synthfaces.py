"""``synthfaces``: a procedural, batched face renderer with known identities, masks, boxes and context.

Every face is drawn from smooth signed-distance shapes (ellipses, arcs, rounded boxes) with antialiased edges and
Lambert shading on an ellipsoidal head, in pure tensor operations: a batch is rendered at once on any device, with
only a constant loop over blur levels. Nothing is learned and nothing is downloaded.

An **identity** is a fixed vector of geometry and appearance parameters (:func:`sample_identity_params`): face width
and jaw, eye position/spacing/size/shape/colour, brow position/length/thickness/arch/tilt, nose length/width, mouth
position/width/lip thickness/lip colour, skin tone, hair colour/style/hairline/parting, ear size, facial hair.

Each **image** draws nuisance parameters (:func:`sample_nuisance_params`): face size and position (so the face
coverage ratio varies), roll, yaw (approximated by rotating the features on a cylinder inside a fixed outline),
pitch, expression (smile, mouth opening, brow raise, gaze), directional light and ambient level, exposure and colour
cast, clothing colour, glasses (clear or sunglasses), hat, background scene (a crop of a real ``skimage.data`` photo,
shared with ``lfw-subset-views``; the context label), blur level and sensor noise. ``nuisance_strength`` in [0, 1]
scales all of it except the background (0: every image of an identity shows the same frontal, clean face).

Separability (measured with dlib's ResNet descriptor given the boxes, 40 identities x 4 images at 64 px, verification
ROC AUC over all pairs): 1.00 at strength 0, 0.90 at 0.5, 0.88 at 0.75, 0.80 at 1 (raw pixels: 0.87, 0.72, 0.66,
0.61). With 100 identities x 4 images at strength 1: AUC 0.79, TAR 0.10 at FAR 1e-3 (lfw-subset-views: 0.85,
0.25). Identities are recognisable, but not from pixels alone.

Attributes (int64 labels) fixed per identity: ``hair_colour`` (:data:`HAIR_COLOURS`), ``hair_style``
(:data:`HAIR_STYLES`), ``skin_tone_bucket`` (0 lightest .. 3 darkest), ``eye_colour`` (:data:`EYE_COLOURS`),
``facial_hair`` (:data:`FACIAL_HAIR`). Attributes drawn per image: ``glasses`` (0/1), ``hat`` (0/1), ``smiling``
(0/1), ``mouth_open`` (0/1), ``brows_raised`` (0/1), ``yaw`` (0 left / 1 frontal / 2 right), ``lighting`` (0 dark /
1 normal / 2 bright), ``blur`` (0/1/2) and ``background`` (= context).

``mask`` is the visible face: the face outline minus front hair and hat (eyes, brows, nose, mouth, facial hair and
glasses count as face; ears, neck and hair do not). Before camera blur, face pixels extend at most half a pixel beyond
it (antialiasing).
``box`` is the bounding box of ``mask`` (xyxy, pixel edges).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .._validate import check_int, check_probability, check_tensor
from ..device import resolve_device
from ..errors import InvalidArgumentError, ShapeError
from .faces import (
    MAX_SIZE,
    MIN_SIZE,
    N_SCENES,
    _check_common,
    _selected_rows,
    _smoothstep,
    assign_scenes,
    blur_by_level,
    boxes_from_masks,
    keyed_gaussian_noise,
    render_backgrounds,
)
from .types import FaceSet

__all__ = [
    "HAIR_COLOURS", "HAIR_STYLES", "EYE_COLOURS", "FACIAL_HAIR", "IDENTITY_PARAM_KEYS", "NUISANCE_PARAM_KEYS",
    "IDENTITY_ATTRIBUTES", "IMAGE_ATTRIBUTES", "sample_identity_params", "sample_nuisance_params", "index_params",
    "synthface_attributes", "render_synthfaces", "load_synthfaces",
]

HAIR_COLOURS: tuple[str, ...] = ("black", "dark_brown", "brown", "blond", "auburn", "grey")
_HAIR_RGB = ((0.07, 0.06, 0.06), (0.22, 0.14, 0.09), (0.42, 0.28, 0.16), (0.80, 0.66, 0.42), (0.58, 0.25, 0.12),
             (0.64, 0.63, 0.62))
_HAIR_P = (0.28, 0.25, 0.18, 0.12, 0.07, 0.10)
HAIR_STYLES: tuple[str, ...] = ("short", "medium", "long", "fringe", "receding")
_HAIRLINE = (-0.62, -0.58, -0.60, -0.40, -0.80)  # hairline height per style (face half-height = 1, y down)
_BACK_LEN = (-0.05, 0.45, 1.45, 0.25, 0.05)  # how far down the back hair falls
EYE_COLOURS: tuple[str, ...] = ("dark_brown", "brown", "blue", "green")
_EYE_RGB = ((0.18, 0.10, 0.06), (0.38, 0.23, 0.11), (0.30, 0.45, 0.66), (0.32, 0.46, 0.30))
_EYE_P = (0.45, 0.25, 0.18, 0.12)
FACIAL_HAIR: tuple[str, ...] = ("none", "moustache", "beard", "stubble")
_FACIAL_P = (0.62, 0.10, 0.16, 0.12)
_SKIN_RAMP = ((0.97, 0.85, 0.76), (0.91, 0.73, 0.60), (0.79, 0.58, 0.43), (0.58, 0.40, 0.28), (0.36, 0.24, 0.17))

IDENTITY_PARAM_KEYS: tuple[str, ...] = (
    "face_w", "jaw", "eye_y", "eye_dx", "eye_w", "eye_ratio", "iris_rgb", "eye_colour", "brow_h", "brow_len",
    "brow_thick", "brow_arch", "brow_tilt", "brow_dx", "nose_len", "nose_w", "mouth_dy", "mouth_w", "lip_thick",
    "lip_rgb", "skin_tone", "skin_rgb", "hair_colour", "hair_rgb", "hair_style", "hairline", "hair_curve",
    "hair_part", "hair_phase", "ear_size", "facial_hair", "cheek",
)
NUISANCE_PARAM_KEYS: tuple[str, ...] = (
    "face_fcr", "pos", "roll", "yaw", "pitch", "smile", "mouth_open", "brow_raise", "gaze", "light", "ambient",
    "light_gain", "exposure", "cast", "clothing_rgb", "glasses", "glasses_dark", "frame_rgb", "frame_thick",
    "lens_size", "hat", "hat_rgb", "scene", "bg_jitter", "blur", "noise_std", "noise_key",
)
IDENTITY_ATTRIBUTES: tuple[str, ...] = ("hair_colour", "hair_style", "skin_tone_bucket", "eye_colour", "facial_hair")
IMAGE_ATTRIBUTES: tuple[str, ...] = (
    "glasses", "hat", "smiling", "mouth_open", "brows_raised", "yaw", "lighting", "blur", "background",
)


def _uniform(g: torch.Generator, n: int, lo: float, hi: float, *shape: int) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(n, *shape, generator=g, dtype=torch.float64)


def _categorical(g: torch.Generator, n: int, probs: tuple[float, ...]) -> torch.Tensor:
    return torch.multinomial(torch.tensor(probs, dtype=torch.float64), n, replacement=True, generator=g)


def _draw_uniform(p: dict[str, torch.Tensor], u: Callable[..., torch.Tensor], **ranges: tuple) -> None:
    """Set ``p[key] = u(lo, hi, *shape)`` for each ``key=(lo, hi, *shape)``, drawn in the order given."""
    for key, rng in ranges.items():
        p[key] = u(*rng)


def _check_generator(generator: torch.Generator) -> None:
    if not isinstance(generator, torch.Generator):
        raise InvalidArgumentError(f"generator must be a torch.Generator, got {type(generator).__name__}")


def sample_identity_params(n: int, *, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Draw ``n`` identities.

    Args:
        n: number of identities, >= 1.
        generator: CPU ``torch.Generator``.

    Returns:
        Dict over :data:`IDENTITY_PARAM_KEYS` of CPU tensors with ``n`` rows: float64 (n,) or (n, 3) colours,
        int64 for the categorical ``eye_colour``, ``hair_colour``, ``hair_style``, ``facial_hair``. Lengths are in
        face units (face half-height = 1, y down).
    """
    n = check_int("n", n, minimum=1)
    _check_generator(generator)
    g = generator
    u = lambda lo, hi, *s: _uniform(g, n, lo, hi, *s)  # noqa: E731
    p: dict[str, torch.Tensor] = {}
    _draw_uniform(p, u, face_w=(0.64, 0.88), jaw=(0.0, 1.0), eye_y=(-0.2, -0.02))
    p["eye_dx"] = p["face_w"] * u(0.36, 0.52)
    _draw_uniform(p, u, eye_w=(0.09, 0.155), eye_ratio=(0.36, 0.66))
    p["eye_colour"] = _categorical(g, n, _EYE_P)
    p["iris_rgb"] = torch.tensor(_EYE_RGB, dtype=torch.float64)[p["eye_colour"]] * u(0.8, 1.2, 1)
    _draw_uniform(p, u, brow_h=(0.13, 0.21), brow_len=(0.12, 0.19), brow_thick=(0.015, 0.055), brow_arch=(0.0, 0.06),
                  brow_tilt=(-0.04, 0.05), brow_dx=(-0.02, 0.03), nose_len=(0.22, 0.40), nose_w=(0.06, 0.14),
                  mouth_dy=(0.14, 0.23), mouth_w=(0.15, 0.30), lip_thick=(0.025, 0.07), skin_tone=(0.0, 1.0))
    ramp = torch.tensor(_SKIN_RAMP, dtype=torch.float64)
    pos = p["skin_tone"] * (len(_SKIN_RAMP) - 1)
    lo = pos.floor().long().clamp(max=len(_SKIN_RAMP) - 2)
    frac = (pos - lo)[:, None]
    p["skin_rgb"] = ((1 - frac) * ramp[lo] + frac * ramp[lo + 1]) * u(0.96, 1.04, 3)
    p["lip_rgb"] = p["skin_rgb"] * torch.tensor([0.95, 0.62, 0.62], dtype=torch.float64) * u(0.8, 1.0, 1)
    p["hair_colour"] = _categorical(g, n, _HAIR_P)
    p["hair_rgb"] = (torch.tensor(_HAIR_RGB, dtype=torch.float64)[p["hair_colour"]] * u(0.85, 1.15, 1)).clamp(0, 1)
    p["hair_style"] = torch.randint(len(HAIR_STYLES), (n,), generator=g)
    p["hairline"] = torch.tensor(_HAIRLINE, dtype=torch.float64)[p["hair_style"]] + u(-0.05, 0.05)
    _draw_uniform(p, u, hair_curve=(0.1, 0.6), hair_part=(-0.25, 0.25), hair_phase=(0.0, 2 * math.pi),
                  ear_size=(0.8, 1.2))
    p["facial_hair"] = _categorical(g, n, _FACIAL_P)
    p["cheek"] = u(0.0, 0.2)
    return p


#: Neutral values the nuisance parameters shrink towards when ``strength`` < 1.
_NEUTRAL = {"face_fcr": 0.3, "smile": 0.2, "brow_raise": 0.1, "ambient": 0.5, "light_gain": 1.0, "exposure": 1.0}
_NEUTRAL_LIGHT = (0.0, -0.3, 0.95)


def sample_nuisance_params(n: int, *, generator: torch.Generator, scene: torch.Tensor | None = None,
                           strength: float = 1.0) -> dict[str, torch.Tensor]:
    """Draw per-image nuisance parameters.

    Args:
        n: number of images, >= 1.
        generator: CPU ``torch.Generator``.
        scene: optional (n,) int64 background scenes in [0, N_SCENES) (e.g. from identity-correlated assignment);
            uniform random scenes when ``None``.
        strength: nuisance strength in [0, 1]. 1 gives the full ranges below; smaller values shrink every continuous
            nuisance linearly towards a neutral value (frontal, centred, medium size, neutral expression, frontal
            light, no cast, no noise) and scale the probabilities of glasses, hat, open mouth and blur by
            ``strength``. Background scene and clothing colour are not affected. The random draws are the same
            for every strength, so sets that differ only in strength pair image by image.

    Returns:
        Dict over :data:`NUISANCE_PARAM_KEYS` of CPU tensors with ``n`` rows. Full ranges: face-ellipse coverage
        [0.08, 0.55], roll +-0.3 rad, yaw +-0.4 rad, pitch +-0.06, smile (p = 0.45) / mouth open (p = 0.3) / brow
        raise (p = 0.25), light direction and ambient [0.35, 0.65], light gain [0.7, 1.25], exposure [0.8, 1.2],
        cast +-8 %, glasses p = 0.2 (a quarter of them sunglasses), hat p = 0.1, blur levels 0/1/2 with p =
        0.6/0.28/0.12, noise std [0, 0.03].
    """
    n = check_int("n", n, minimum=1)
    _check_generator(generator)
    st = check_probability("strength", strength, open_low=False, open_high=False)
    g = generator
    u = lambda lo, hi, *s: _uniform(g, n, lo, hi, *s)  # noqa: E731
    bern = lambda pr: (torch.rand(n, generator=g, dtype=torch.float64) < pr * st).long()  # noqa: E731

    def shrink(x: torch.Tensor, neutral: float = 0.0) -> torch.Tensor:
        return neutral + st * (x - neutral)

    def shrunk_uniform(**ranges: tuple) -> None:
        """Like :func:`_draw_uniform`, each draw shrunk towards its neutral value (``_NEUTRAL``, else 0)."""
        for key, rng in ranges.items():
            p[key] = shrink(u(*rng), _NEUTRAL.get(key, 0.0))

    p: dict[str, torch.Tensor] = {}
    shrunk_uniform(face_fcr=(0.08, 0.55), pos=(-1.0, 1.0, 2), roll=(-0.3, 0.3), yaw=(-0.4, 0.4), pitch=(-0.06, 0.06))
    smiling = torch.rand(n, generator=g, dtype=torch.float64) < 0.45
    p["smile"] = shrink(torch.where(smiling, u(0.55, 1.0), u(0.0, 0.35)), _NEUTRAL["smile"])
    p["mouth_open"] = torch.where(bern(0.3) > 0, u(0.4, 1.0), torch.zeros(n, dtype=torch.float64))
    raised = torch.rand(n, generator=g, dtype=torch.float64) < 0.25
    p["brow_raise"] = shrink(torch.where(raised, u(0.55, 1.0), u(0.0, 0.25)), _NEUTRAL["brow_raise"])
    p["gaze"] = shrink(u(-1.0, 1.0))
    light = torch.stack([u(-0.9, 0.9), u(-0.8, 0.25), u(0.45, 1.0)], dim=1)
    light = light / light.norm(dim=1, keepdim=True)
    neutral_light = torch.tensor(_NEUTRAL_LIGHT, dtype=torch.float64)
    light = neutral_light + st * (light - neutral_light)
    p["light"] = light / light.norm(dim=1, keepdim=True)
    shrunk_uniform(ambient=(0.35, 0.65), light_gain=(0.7, 1.25), exposure=(0.8, 1.2), cast=(-0.08, 0.08, 3))
    p["clothing_rgb"] = u(0.05, 0.9, 3)
    p["glasses"] = bern(0.2)
    p["glasses_dark"] = (torch.rand(n, generator=g, dtype=torch.float64) < 0.25).long() * p["glasses"]
    _draw_uniform(p, u, frame_rgb=(0.02, 0.5, 3), frame_thick=(0.016, 0.03), lens_size=(0.9, 1.15))
    p["hat"] = bern(0.1)
    p["hat_rgb"] = u(0.05, 0.9, 3)
    if scene is None:
        p["scene"] = torch.randint(N_SCENES, (n,), generator=g)
    else:
        check_tensor("scene", scene, shape=(n,))
        if scene.is_floating_point() or int(scene.min()) < 0 or int(scene.max()) >= N_SCENES:
            raise InvalidArgumentError(f"scene must hold integer scene ids in [0, {N_SCENES})")
        p["scene"] = scene.to("cpu", torch.int64)
    p["bg_jitter"] = shrink(torch.cat([u(-0.15, 0.15, 2), u(-0.1, 0.1, 1)], dim=1))
    r = torch.rand(n, generator=g, dtype=torch.float64)
    p["blur"] = (r < 0.40 * st).long() + (r < 0.12 * st).long()  # P(level 1) = 0.28 st, P(level 2) = 0.12 st
    p["noise_std"] = shrink(u(0.0, 0.03))
    p["noise_key"] = torch.randint(0, 2**31 - 1, (n,), generator=g)
    return p


def index_params(params: dict[str, torch.Tensor], index: torch.Tensor) -> dict[str, torch.Tensor]:
    """Rows ``index`` of every parameter, e.g. ``index_params(identity_params, identity)`` gives per-image rows."""
    return {k: v[index] for k, v in params.items()}


def synthface_attributes(identity_params: dict[str, torch.Tensor],
                         nuisance_params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Integer attribute labels of rendered images (per-image rows of both parameter dicts).

    Returns:
        name -> (N,) int64: the identity-fixed :data:`IDENTITY_ATTRIBUTES` and per-image :data:`IMAGE_ATTRIBUTES`.
    """
    ip, np_ = identity_params, nuisance_params
    yaw = np_["yaw"]
    bright = np_["light_gain"] * np_["exposure"]
    return {
        "hair_colour": ip["hair_colour"].long(), "hair_style": ip["hair_style"].long(),
        "skin_tone_bucket": (ip["skin_tone"] * 4).floor().clamp(0, 3).long(),
        "eye_colour": ip["eye_colour"].long(), "facial_hair": ip["facial_hair"].long(),
        "glasses": np_["glasses"].long(), "hat": np_["hat"].long(), "smiling": (np_["smile"] > 0.5).long(),
        "mouth_open": (np_["mouth_open"] > 0).long(), "brows_raised": (np_["brow_raise"] > 0.5).long(),
        "yaw": torch.where(yaw < -0.17, 0, torch.where(yaw <= 0.17, 1, 2)).long(),
        "lighting": torch.where(bright < 0.8, 0, torch.where(bright <= 1.15, 1, 2)).long(),
        "blur": np_["blur"].long(),
        "background": np_["scene"].long(),
    }


# ---------------------------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------------------------
def _ellipse(x: torch.Tensor, y: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Approximate signed distance to an axis-aligned ellipse (negative inside)."""
    k0 = torch.sqrt((x / a) ** 2 + (y / b) ** 2)
    k1 = torch.sqrt((x / (a * a)) ** 2 + (y / (b * b)) ** 2).clamp(min=1e-6)
    return k0 * (k0 - 1) / k1


def _round_box(x: torch.Tensor, y: torch.Tensor, hw, hh, r) -> torch.Tensor:
    """Signed distance to a centred box of half-sizes (hw, hh) with corner radius r (negative inside)."""
    qx = x.abs() - (hw - r)
    qy = y.abs() - (hh - r)
    outside = torch.sqrt(qx.clamp(min=0) ** 2 + qy.clamp(min=0) ** 2)
    return outside + torch.maximum(qx, qy).clamp(max=0) - r


def _fill(sdf: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Antialiased coverage of ``sdf < 0``: 0.5 on the edge, compact support of +- w/2."""
    return _smoothstep(0.5 - sdf / w)


def _over(img: torch.Tensor, rgb: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """Composite colour ``rgb`` ((n, 3, 1, 1) or (n, 3, H, W)) with alpha ``a`` (n, H, W) over ``img``."""
    return img + a[:, None] * (rgb - img)


def _lambert(nx: torch.Tensor, ny: torch.Tensor, nz: torch.Tensor, light: torch.Tensor, amb: torch.Tensor):
    norm = torch.sqrt(nx * nx + ny * ny + nz * nz).clamp(min=1e-6)
    d = (nx * light[:, 0, None, None] + ny * light[:, 1, None, None] + nz * light[:, 2, None, None]) / norm
    return amb + (1 - amb) * d.clamp(min=0)


def _render_chunk(ip: dict[str, torch.Tensor], np_: dict[str, torch.Tensor], size: int, dev: torch.device):
    f32 = torch.float32
    P = {k: v.to(dev, f32) for k, v in ip.items()}
    Q = {k: v.to(dev, f32) for k, v in np_.items()}
    s1 = lambda t: t[:, None, None]  # noqa: E731  (n,) -> (n, 1, 1)
    c3 = lambda t: t[:, :, None, None]  # noqa: E731  (n, 3) -> (n, 3, 1, 1)

    fa = P["face_w"]
    s = torch.sqrt(Q["face_fcr"] * 4.0 / (math.pi * fa))  # head half-height in image units (image half-size = 1)
    cx = Q["pos"][:, 0] * (1 - 0.8 * fa * s).clamp(min=0)
    cy = Q["pos"][:, 1] * (1 - 0.9 * s).clamp(min=0) - 0.15 * (1 - s)
    lin = (torch.arange(size, device=dev, dtype=f32) * 2 + 1) / size - 1
    Y, X = torch.meshgrid(lin, lin, indexing="ij")
    x0, y0 = X[None] - s1(cx), Y[None] - s1(cy)
    cr, sr = s1(torch.cos(Q["roll"])), s1(torch.sin(Q["roll"]))
    u = (cr * x0 + sr * y0) / s1(s)
    v = (-sr * x0 + cr * y0) / s1(s)
    w = s1(2.0 / (size * s))  # one pixel in face units: the antialiasing width

    fa_ = s1(fa)
    yaw = s1(Q["yaw"])
    syaw = torch.sin(yaw)
    cyl = fa_ * 1.08
    ang = (torch.asin((u / cyl).clamp(-0.999, 0.999)) - yaw).clamp(-math.pi / 2, math.pi / 2)
    uf = cyl * torch.sin(ang)  # feature coordinates: the face turned back to frontal
    vf = v - s1(Q["pitch"])
    ua = uf.abs()  # mirrored: one formula for both eyes, brows, nostrils, lenses
    light, amb = Q["light"], s1(Q["ambient"])
    gain = s1(Q["light_gain"])[:, None]

    skin = c3(P["skin_rgb"])
    hair = c3(P["hair_rgb"])
    ey, ed, ew = s1(P["eye_y"]), s1(P["eye_dx"]), s1(P["eye_w"])

    # 1. background
    img = render_backgrounds(np_["scene"].long(), np_["bg_jitter"], size=size, device=dev)

    # 2. clothing / shoulders
    sh_cy, sh_a, sh_b = 1.62, fa_ * 2.4, 0.8
    sdf_sh = _ellipse(u, v - sh_cy, sh_a, torch.full_like(fa_, sh_b))
    sdf_sh = torch.minimum(sdf_sh, torch.maximum(u.abs() - sh_a * 0.97, sh_cy - v))  # the torso continues down
    nx, ny = u / sh_a, (v - sh_cy) / sh_b
    shade_sh = _lambert(nx, ny, torch.sqrt((1 - nx * nx - ny * ny).clamp(min=0.05)), light, amb)
    fold = 1 - 0.08 * torch.cos(9 * u / fa_) ** 2
    img = _over(img, (c3(Q["clothing_rgb"]) * (shade_sh * fold)[:, None] * gain).clamp(0, 1), _fill(sdf_sh, w))

    # 3. back hair (behind neck and face)
    style = s1(P["hair_style"])
    ph = s1(P["hair_phase"])
    hair_tex = 0.86 + 0.09 * torch.sin(38 * uf + 9 * v + ph) + 0.05 * torch.sin(23 * uf - 15 * v + 2 * ph)
    cap_cy, cap_a, cap_b = -0.1, fa_ * 1.16, 1.04
    sdf_cap = _ellipse(u, v - cap_cy, cap_a, torch.full_like(fa_, cap_b))
    back_len = torch.tensor(_BACK_LEN, device=dev, dtype=f32)[P["hair_style"].long()]
    sdf_back = torch.maximum(sdf_cap, v - s1(back_len))
    long_box = _round_box(u, v - 0.5, fa_ * (1.28 - 0.12 * (v - 0.5).clamp(min=0)), 0.95, 0.3)
    sdf_back = torch.where(style == 2, torch.minimum(sdf_back, long_box), sdf_back)
    hx, hy = u / cap_a, (v - cap_cy) / cap_b
    shade_h = _lambert(hx, hy, torch.sqrt((1 - hx * hx - hy * hy).clamp(min=0.05)), light, amb)
    hair_col = (hair * (hair_tex * shade_h)[:, None] * gain).clamp(0, 1)
    img = _over(img, hair_col * 0.8, _fill(sdf_back, w))

    # 4. neck (shadowed under the chin)
    sdf_neck = torch.maximum(u.abs() - fa_ * 0.45, (v - 0.75).abs() - 0.5)
    neck_shade = (0.55 + 0.3 * ((v - 0.5) / 0.7).clamp(0, 1)) * _lambert(
        u / (fa_ * 0.5), torch.zeros_like(v), torch.ones_like(v), light, amb)
    img = _over(img, (skin * neck_shade[:, None] * gain).clamp(0, 1), _fill(sdf_neck, w))

    # 5. ears
    es = s1(P["ear_size"])
    ear_x = fa_ * 0.97 + fa_ * 0.2 * syaw * torch.sign(u)
    sdf_ear = _ellipse(u.abs() - ear_x, v - (ey + 0.14), 0.1 * es, 0.19 * es)
    img = _over(img, (skin * 0.8 * _lambert(u / fa_, torch.zeros_like(v), torch.ones_like(v), light, amb)[:, None]
                      * gain).clamp(0, 1), _fill(sdf_ear, w))

    # 6. face: ellipsoid shading, jaw narrowing, eye sockets, cheeks
    aw = fa_ * (1 - s1(P["jaw"]) * 0.32 * v.clamp(0, 1) ** 2)
    sdf_face = _ellipse(u, v, aw, torch.ones_like(aw))
    q = (1 - (u / fa_) ** 2 - v * v).clamp(min=0)
    shade_f = _lambert(u / (fa_ * fa_), v, torch.sqrt(q) / (0.9 * fa_), light, amb)
    socket = 1 - 0.16 * torch.exp(-(((ua - ed) / (ew * 1.7)) ** 2 + ((vf - ey + 0.03) / (ew * 1.0)) ** 2))
    nose_b = ey + s1(P["nose_len"])
    under_nose = 1 - 0.2 * torch.exp(-((uf / 0.09) ** 2 + ((vf - nose_b - 0.05) / 0.035) ** 2))
    face_col = skin * (shade_f * socket * under_nose)[:, None]
    blush = s1(P["cheek"]) * torch.exp(-(((ua - fa_ * 0.5) / 0.14) ** 2 + ((vf - ey - 0.3) / 0.1) ** 2))
    rosy = torch.tensor([1.05, 0.75, 0.75], device=dev, dtype=f32)[None, :, None, None]
    face_col = face_col * (1 - blush[:, None]) + face_col * rosy * blush[:, None]
    a_face = _fill(sdf_face, w)
    img = _over(img, (face_col * gain).clamp(0, 1), a_face)
    fshade = (shade_f * gain[:, 0]).clamp(0, 1.4)  # reused for features (n, H, W)

    # 7. eyes: white, iris, pupil, catch-light, upper lid
    smile = s1(Q["smile"])
    raise_ = s1(Q["brow_raise"])
    eh = ew * s1(P["eye_ratio"]) * (1 - 0.25 * smile) * (1 + 0.15 * raise_)
    ex, eyv = ua - ed, vf - ey
    sdf_white = _ellipse(ex, eyv, ew, eh)
    white = torch.tensor([0.93, 0.91, 0.88], device=dev, dtype=f32)[None, :, None, None]
    img = _over(img, (white * fshade[:, None]).clamp(0, 1), _fill(sdf_white, w) * a_face)
    gx = s1(Q["gaze"]) * ew * 0.35 * torch.sign(uf)
    ri = ew * 0.5
    r_iris = torch.sqrt((ex - gx) ** 2 + eyv ** 2)
    a_iris = _fill(torch.maximum(r_iris - ri, sdf_white), w) * a_face
    img = _over(img, (c3(P["iris_rgb"]) * fshade[:, None]).clamp(0, 1), a_iris)
    img = _over(img, torch.zeros_like(white) + 0.03, _fill(torch.maximum(r_iris - 0.45 * ri, sdf_white), w) * a_face)
    r_glint = torch.sqrt((ex - gx + 0.3 * ri) ** 2 + (eyv + 0.3 * ri) ** 2)
    img = _over(img, torch.ones_like(white), 0.8 * _fill(torch.maximum(r_glint - 0.14 * ri, sdf_white), w) * a_face)
    lid_t = ew * 0.14
    sdf_lid = torch.maximum(sdf_white.abs() - lid_t, eyv - eh * 0.15)
    img = _over(img, skin * 0.25, 0.9 * _fill(sdf_lid, w) * a_face)

    # 8. brows
    bl = s1(P["brow_len"])
    du = (ua - ed - s1(P["brow_dx"])) / bl
    dc = du.clamp(-1, 1)
    yb = ey - s1(P["brow_h"]) - 0.06 * raise_
    yc = yb - s1(P["brow_arch"]) * (1 - dc * dc) - s1(P["brow_tilt"]) * dc
    thick = s1(P["brow_thick"]) * (1 - 0.45 * dc * dc)
    sdf_brow = torch.maximum((vf - yc).abs() - thick, (du.abs() - 1) * bl)
    brow_col = (hair * 0.65 + 0.03) * fshade[:, None]
    img = _over(img, brow_col.clamp(0, 1), 0.92 * _fill(sdf_brow, w) * a_face)

    # 9. nose: side shading, tip highlight, nostrils
    nw = s1(P["nose_w"])
    un = uf + 0.08 * syaw * ((vf - ey) / (nose_b - ey)).clamp(0, 1)  # the tip sticks out: it moves further
    sdf_nose = torch.maximum(un.abs() - nw * 0.8, (vf - (ey + nose_b) / 2).abs() - (nose_b - ey) / 2)
    side = 1 + 0.35 * (un / nw).clamp(-1, 1) * s1(light[:, 0])
    img = _over(img, (face_col * side[:, None] * gain).clamp(0, 1), 0.7 * _fill(sdf_nose, w * 3) * a_face)
    sdf_tip = _ellipse(un, vf - nose_b + 0.04, nw * 0.6, torch.full_like(nw, 0.05))
    img = _over(img, (face_col * 1.12 * gain).clamp(0, 1), 0.45 * _fill(sdf_tip, w * 2) * a_face)
    sdf_nostril = _ellipse(un.abs() - nw * 0.5, vf - nose_b, nw * 0.3, nw * 0.16)
    img = _over(img, skin * 0.3 * fshade[:, None], 0.85 * _fill(sdf_nostril, w) * a_face)

    # 10. facial hair (beard / stubble), then mouth, then moustache
    fh = s1(P["facial_hair"])
    my = nose_b + s1(P["mouth_dy"])
    beard_a = torch.where(fh == 2, 0.85, torch.where(fh == 3, 0.35, 0.0))
    sdf_beard = torch.maximum(sdf_face, (my - 0.1) - vf + 0.15 * (ua / fa_) ** 2)
    img = _over(img, (hair * hair_tex[:, None] * fshade[:, None]).clamp(0, 1), beard_a * _fill(sdf_beard, w * 2))
    mw = s1(P["mouth_w"])
    um = uf + 0.03 * syaw
    vm = vf - my + smile * 0.075 * (um / mw) ** 2 - smile * 0.02
    oh = s1(Q["mouth_open"]) * 0.1
    lt = s1(P["lip_thick"])
    sdf_lips = _ellipse(um, vm, mw, lt + oh / 2)
    img = _over(img, (c3(P["lip_rgb"]) * fshade[:, None]).clamp(0, 1), _fill(sdf_lips, w) * a_face)
    sdf_open = _ellipse(um, vm, mw * 0.86, oh / 2 + 0.006)
    img = _over(img, torch.tensor([0.22, 0.06, 0.06], device=dev, dtype=f32)[None, :, None, None],
                _fill(sdf_open, w) * a_face)
    sdf_teeth = torch.maximum(sdf_open, vm + oh / 2 - oh * 0.45)
    img = _over(img, (white * fshade[:, None]).clamp(0, 1), (oh > 0.01).float() * _fill(sdf_teeth, w) * a_face)
    moust_a = torch.where((fh == 1) | (fh == 2), 0.85, 0.0)
    sdf_moust = _ellipse(um, vf - (my - lt - 0.045), mw * 0.95, torch.full_like(mw, 0.035))
    img = _over(img, (hair * hair_tex[:, None] * fshade[:, None]).clamp(0, 1), moust_a * _fill(sdf_moust, w))

    # 11. front hair: inside the cap, above the hairline
    hairline = s1(P["hairline"]) + s1(P["hair_curve"]) * (uf / fa_) ** 2 + s1(P["hair_part"]) * uf / fa_
    sdf_hair = torch.maximum(sdf_cap, v - hairline)
    a_hair = _fill(sdf_hair, w)
    img = _over(img, hair_col, a_hair)

    # 12. glasses: lenses (clear or dark), frame, bridge, temples
    gl = s1(Q["glasses"])
    lw, lh = ew * 1.5 * s1(Q["lens_size"]), ew * 1.15 * s1(Q["lens_size"])
    sdf_lens = _ellipse(ex, vf - ey - 0.01, lw, lh)
    dark = s1(Q["glasses_dark"])
    lens_a = torch.where(dark > 0, 0.85, 0.12) * gl
    lens_rgb = torch.where(dark[:, None] > 0, 0.05, 0.75) * torch.ones_like(white)
    near_face = _fill(u.abs() - aw * 1.08, w)  # nothing of the glasses beyond the head outline
    img = _over(img, lens_rgb, lens_a * _fill(sdf_lens, w) * near_face)
    ft = s1(Q["frame_thick"])
    bar_y = (vf - ey + 0.02).abs() - ft * 0.8
    sdf_frame = torch.minimum(sdf_lens.abs() - ft, torch.maximum(ua - (ed - lw) - 0.01, bar_y))
    temple = torch.maximum(torch.maximum(ed + lw - ua, u.abs() - aw * 1.02), bar_y)
    sdf_frame = torch.minimum(sdf_frame, temple)
    img = _over(img, (c3(Q["frame_rgb"]) * fshade[:, None]).clamp(0, 1), gl * _fill(sdf_frame, w) * near_face)

    # 13. hat: crown and brim
    hat = s1(Q["hat"])
    sdf_crown = torch.maximum(_ellipse(u, v + 0.62, fa_ * 1.22, torch.full_like(fa_, 0.64)), v + 0.56)
    sdf_brim = _ellipse(u, v + 0.58, fa_ * 1.5, torch.full_like(fa_, 0.07))
    sdf_hat = torch.minimum(sdf_crown, sdf_brim)
    hat_shade = _lambert(u / (fa_ * 1.22), (v + 0.62) / 0.64, torch.ones_like(v) * 0.6, light, amb)
    a_hat = hat * _fill(sdf_hat, w)
    img = _over(img, (c3(Q["hat_rgb"]) * hat_shade[:, None] * gain).clamp(0, 1), a_hat)

    # 14. camera: exposure, white balance, blur, noise
    img = img * (s1(Q["exposure"])[:, None] * (1 + c3(Q["cast"])))
    img = blur_by_level(img, np_["blur"].to(dev), size=size)
    img = img + s1(Q["noise_std"])[:, None] * keyed_gaussian_noise(np_["noise_key"], (3, size, size), device=dev)
    mask = (sdf_face < 0) & ~(sdf_hair < 0) & ~((hat > 0) & (sdf_hat < 0))
    return img.clamp(0, 1), mask[:, None]


def _check_params(params: dict[str, torch.Tensor], keys: tuple[str, ...], name: str) -> int:
    if not isinstance(params, dict):
        raise InvalidArgumentError(f"{name} must be a dict of tensors, got {type(params).__name__}")
    missing = [k for k in keys if k not in params]
    if missing:
        raise InvalidArgumentError(f"{name} is missing keys {missing}; it needs all of {list(keys)}")
    n = None
    for k in keys:
        t = check_tensor(f"{name}[{k!r}]", params[k])
        if t.ndim == 0:
            raise ShapeError(f"{name}[{k!r}] must have one row per image, got a scalar")
        if n is None:
            n = int(t.shape[0])
        elif t.shape[0] != n:
            raise ShapeError(f"{name}[{k!r}] has {t.shape[0]} rows, expected {n} like the other parameters")
    return int(n or 0)


def render_synthfaces(identity_params: dict[str, torch.Tensor], nuisance_params: dict[str, torch.Tensor], *,
                      size: int = 64, device: str | torch.device | None = None,
                      batch_size: int = 32) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Render faces.

    Args:
        identity_params: per-image identity parameters (N rows each), e.g.
            ``index_params(sample_identity_params(m, generator=g), identity)``.
        nuisance_params: per-image nuisance parameters (N rows each), from :func:`sample_nuisance_params`.
        size: image side in pixels, in [32, 1024].
        device: where to render (``None``/``"auto"``: CUDA if present).
        batch_size: images rendered at once (memory bound; the result does not depend on it).

    Returns:
        ``(images, masks, boxes)``: (N, 3, size, size) float32 in [0, 1], (N, 1, size, size) bool visible-face
        masks, (N, 4) float32 xyxy bounding boxes of the masks, all on ``device``.
    """
    n = _check_params(identity_params, IDENTITY_PARAM_KEYS, "identity_params")
    m = _check_params(nuisance_params, NUISANCE_PARAM_KEYS, "nuisance_params")
    if n != m:
        raise ShapeError(f"identity_params have {n} rows but nuisance_params have {m}; give one row per image to both")
    size = check_int("size", size, minimum=MIN_SIZE, maximum=MAX_SIZE)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    dev = resolve_device(device)
    imgs, masks = [], []
    for start in range(0, n, batch_size):
        sl = slice(start, start + batch_size)
        im, mk = _render_chunk({k: v[sl] for k, v in identity_params.items() if k in IDENTITY_PARAM_KEYS},
                               {k: v[sl] for k, v in nuisance_params.items() if k in NUISANCE_PARAM_KEYS}, size, dev)
        imgs.append(im)
        masks.append(mk)
    if not imgs:
        empty = torch.zeros(0, 3, size, size, device=dev)
        return empty, torch.zeros(0, 1, size, size, dtype=torch.bool, device=dev), torch.zeros(0, 4, device=dev)
    images, mask = torch.cat(imgs), torch.cat(masks)
    return images, mask, boxes_from_masks(mask)


def load_synthfaces(*, split: str = "all", seed: int = 0, n_identities: int = 1000, images_per_identity: int = 8,
                    size: int = 64, context_leakage: float = 0.5, nuisance_strength: float = 1.0,
                    device: str | torch.device | None = None) -> FaceSet:
    """Generate ``synthfaces``: procedural faces with exact identities, masks, boxes, attributes and context.

    Args:
        split: ``"all"`` or a disjoint identity part ``"train"``, ``"val"``, ``"test"`` (0.6 / 0.2 / 0.2 of the
            identities by :func:`privkit.data.splits.identity_splits` with ``seed``). A split renders only its rows,
            which equal the same rows of the full set pixel for pixel. Identity ids are not relabelled.
        seed: seed of all parameters, scenes and the split.
        n_identities: number of identities, >= 1.
        images_per_identity: images per identity, >= 1.
        size: image side in pixels, in [32, 1024].
        context_leakage: probability in [0, 1] that an image's background scene is its identity's own scene
            (otherwise uniform over the 64 scenes).
        nuisance_strength: in [0, 1]; scales the per-image nuisance (pose, scale, expression, light, accessories,
            blur, noise) from none (0: every image of an identity is frontal and clean, only the background changes)
            to full (1); see :func:`sample_nuisance_params`.
        device: ``"auto"``/``None`` (CUDA if present), ``"cpu"``, ``"cuda"`` or a ``torch.device``.

    Returns:
        A :class:`FaceSet` named ``"synthfaces"``; ``context`` = background scene id; attributes as in the module
        docstring; ``meta`` holds the seed, split, ``identity_scene`` (each identity's own scene) and which
        attributes are fixed per identity.

    Raises:
        InvalidArgumentError, UnknownNameError, InsufficientDataError: bad arguments (messages give the ranges).
    """
    _check_common(split, seed, images_per_identity, size, context_leakage)
    n_id = check_int("n_identities", n_identities, minimum=1)
    check_probability("nuisance_strength", nuisance_strength, open_low=False, open_high=False)
    k = int(images_per_identity)
    dev = resolve_device(device)
    g = torch.Generator().manual_seed(int(seed))
    id_params = sample_identity_params(n_id, generator=g)
    identity = torch.arange(n_id).repeat_interleave(k)
    scene, own = assign_scenes(identity, n_id, float(context_leakage), generator=g)
    nui = sample_nuisance_params(n_id * k, generator=g, scene=scene, strength=nuisance_strength)
    rows, part = _selected_rows(identity, n_id, split, int(seed))
    ip_rows = index_params(id_params, identity[rows])
    np_rows = index_params(nui, rows)
    images, mask, box = render_synthfaces(ip_rows, np_rows, size=size, device=dev)
    attrs = synthface_attributes(ip_rows, np_rows)
    meta = {
        "seed": int(seed), "split": split, "split_identities": part,
        "source": "procedural renderer privkit.data.synthfaces (backgrounds: skimage.data photo crops)",
        "n_identities_total": n_id, "images_per_identity": k, "size": int(size),
        "context_leakage": float(context_leakage), "nuisance_strength": float(nuisance_strength), "n_scenes": N_SCENES,
        "identity_scene": own.tolist(), "attributes_per_identity": list(IDENTITY_ATTRIBUTES),
        "attributes_per_image": list(IMAGE_ATTRIBUTES),
        "mask": "visible face (outline minus front hair and hat); exact up to half a pixel of antialiasing",
    }
    return FaceSet(
        images=images, identity=identity[rows].to(dev), box=box, mask=mask, context=scene[rows].to(dev),
        attributes={name: v.to(dev) for name, v in attrs.items()}, name="synthfaces", meta=meta,
    )
