"""``lfw-subset-views``: real LFW face crops, seeded synthetic views, real photo backgrounds.

Source. ``skimage.data.lfw_subset()`` ships 200 greyscale 25x25 crops from LFW: the first 100 are faces, the last 100
are non-face background patches (scikit-image documentation). The subset carries **no identity labels**, so privkit
treats each of the 100 face photos as its own identity (identity ``i`` = face photo ``i``). LFW is known to hold many
photos of a few people, so two of these "identities" may in fact be the same person; nothing in the subset says
which. The views of an identity are synthetic transforms of its single photo, not other photographs of that person:
this set tests what an encoder keeps of a face under pose, lighting, scale, blur, noise, occlusion and background
change, and it is much easier than real re-identification. Notebooks must say so.

Per view (all seeded, drawn independently per image):

* pose: a homography = horizontal flip (p = 0.5), roll in [-12, 12] degrees, perspective "yaw"/"pitch" terms in
  [-0.2, 0.2] / [-0.1, 0.1], anisotropy in [-6 %, 6 %];
* scale and position: the face's area is drawn so that the face-coverage ratio (FCR) is roughly uniform on
  [0.08, 0.55] (perspective moves it a little); the centre keeps most of the face in frame;
* crop jitter: the face texture is zoomed by [0.94, 1.08] and shifted by up to 0.75 px inside the face ellipse;
* colour and lighting: each identity gets a fixed, plausible skin chroma (the source is greyscale; luminance is
  kept), each view a directional light gradient (strength [0, 0.35]), gamma [0.75, 1.35], gain [0.65, 1.35] on the
  face, and a white-balance cast of +-8 % per channel on the whole image;
* occluder (p = 0.25): a dark bar across the eyes or a coloured patch on the face, clipped to the face;
* blur level 0 / 1 / 2 (p = 0.5 / 0.3 / 0.2): Gaussian sigma 0 / 0.7 / 1.4 px (at 64 px, scaled with size);
* noise: Gaussian, std uniform in [0, 0.04].

The face is composited with an elliptical, soft-edged alpha (the soft edge lies inside the ellipse) onto a crop of
a real photo from ``skimage.data`` (no photo with a human face). The context label is the background *scene*: one
of :data:`N_SCENES` fixed crops (4 per photo, with a fixed tint for greyscale photos), jittered per image. With
probability ``context_leakage`` an image uses its identity's own scene, otherwise a uniformly random one, so the
context carries identity information that is tunable from none (0) to a function of identity (1).

``mask`` is exact: it is the set of pixels where the face layer has non-zero alpha (the face ellipse, including any
hair, glasses or occluder that falls inside it); before the camera effects (white balance, blur, noise) every pixel
outside it is pure background, and blur levels 1-2 spread face pixels by at most 3 sigma (5 px at 64 px) beyond it.
``box`` is the bounding box of ``mask`` (xyxy, pixel edges: ``x1 = last column + 1``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from .._validate import check_choice, check_int, check_probability
from ..device import resolve_device
from ..errors import MissingResourceError
from ..transforms import gaussian_blur
from .splits import SPLITS, identity_splits
from .types import FaceSet

__all__ = [
    "LFW_N_FACES", "BACKGROUND_PHOTOS", "SCENES_PER_PHOTO", "N_SCENES", "MIN_SIZE", "MAX_SIZE", "load_lfw_subset_views",
    "render_backgrounds", "boxes_from_masks", "blur_by_level", "keyed_gaussian_noise", "assign_scenes",
]

#: Number of face crops in ``skimage.data.lfw_subset()`` (the first 100 of its 200 images).
LFW_N_FACES = 100
#: ``skimage.data`` photos used as backgrounds (none shows a human face; ``motorcycle_left`` is the left image of
#: ``stereo_motorcycle``).
BACKGROUND_PHOTOS: tuple[str, ...] = (
    "coffee", "chelsea", "rocket", "hubble_deep_field", "motorcycle_left", "immunohistochemistry", "retina",
    "coins", "page", "text", "brick", "grass", "gravel", "moon", "clock", "cell",
)
#: Fixed crops per background photo.
SCENES_PER_PHOTO = 4
#: Number of background scenes (context labels 0 .. N_SCENES-1); scene ``k`` uses photo ``k // SCENES_PER_PHOTO``.
N_SCENES = len(BACKGROUND_PHOTOS) * SCENES_PER_PHOTO
#: Smallest and largest image side the loaders accept.
MIN_SIZE = 32
MAX_SIZE = 1024

_SCENE_SEED = 0x5CE7E  # fixed: scene k means the same background in every set, split and seed
_ATLAS_COLS = 4
_BLUR_SIGMA_64 = (0.0, 0.7, 1.4)  # blur levels, in pixels at 64 px
_LFW_ELLIPSE = (0.80, 0.96, 0.02)  # face ellipse in the 25x25 crop's normalised coords: semi-axes x, y; centre y


# ---------------------------------------------------------------------------------------------------------------
# Shared rendering helpers (also used by synthfaces)
# ---------------------------------------------------------------------------------------------------------------
def boxes_from_masks(mask: torch.Tensor) -> torch.Tensor:
    """Bounding boxes of boolean masks.

    Args:
        mask: (N, 1, H, W) or (N, H, W) bool.

    Returns:
        (N, 4) float32 xyxy boxes in pixel-edge coordinates (``x1`` = last set column + 1), on ``mask``'s device.
        An empty mask gives ``(0, 0, 0, 0)``.
    """
    m = mask.reshape(mask.shape[0], mask.shape[-2], mask.shape[-1]).bool()
    h, w = m.shape[-2:]
    cols = m.any(dim=1).to(torch.uint8)  # (N, W)
    rows = m.any(dim=2).to(torch.uint8)  # (N, H)
    x0 = cols.argmax(dim=1)
    x1 = w - cols.flip(1).argmax(dim=1)
    y0 = rows.argmax(dim=1)
    y1 = h - rows.flip(1).argmax(dim=1)
    box = torch.stack([x0, y0, x1, y1], dim=1).to(torch.float32)
    empty = ~cols.bool().any(dim=1)
    return torch.where(empty[:, None], torch.zeros_like(box), box)


def blur_by_level(images: torch.Tensor, level: torch.Tensor, *, size: int) -> torch.Tensor:
    """Blur each image by its discrete level (0 none, 1 light, 2 strong; sigma scales with ``size``/64)."""
    out = images.clone()
    for lv in range(1, len(_BLUR_SIGMA_64)):
        sel = (level == lv).nonzero().flatten()
        if sel.numel():
            out[sel] = gaussian_blur(images[sel], _BLUR_SIGMA_64[lv] * size / 64.0)
    return out


_NOISE_SEED = 0x4E015E


@functools.lru_cache(maxsize=4)
def _noise_bank(shape: tuple[int, ...]) -> torch.Tensor:
    """A fixed bank of standard normal fields of ``shape`` (CPU, cached, read-only); at most ~2**22 values."""
    n_fields = int(min(64, max(4, (1 << 22) // math.prod(shape))))
    g = torch.Generator().manual_seed(_NOISE_SEED)
    return torch.randn(n_fields, *shape, generator=g)


def keyed_gaussian_noise(keys: torch.Tensor, shape: tuple[int, int, int], *, device: torch.device) -> torch.Tensor:
    """Standard normal noise of shape (C, H, W) per row that depends only on that row's key.

    Unlike a stateful generator, the noise of an image does not depend on which other images are rendered with it,
    so a split or a chunk reproduces exactly the pixels of the full set, on any device. The key selects one field of
    a fixed bank of i.i.d. normal fields (:func:`_noise_bank`), a cyclic shift in both axes, a transpose (square
    images) and a sign, so two images share the same noise with probability about 1 / (4 * fields * H * W).

    Args:
        keys: (N,) int64 keys in [0, 2**31).
        shape: per-row shape (C, H, W).
        device: where to return the noise.

    Returns:
        (N, C, H, W) float32 standard normal samples.
    """
    c, h, w = shape
    bank = _noise_bank((c, h, w)).to(device)
    k = keys.to(device=device, dtype=torch.int64)
    nb = bank.shape[0]
    field = k % nb
    rest = k // nb
    dy, rest = rest % h, rest // h
    dx, rest = rest % w, rest // w
    sign = 1.0 - 2.0 * (rest % 2).to(torch.float32)
    transpose = ((rest // 2) % 2 == 1) & (h == w)
    rows = (torch.arange(h, device=device)[None, :] + dy[:, None]) % h  # (N, H)
    cols = (torch.arange(w, device=device)[None, :] + dx[:, None]) % w  # (N, W)
    ch = torch.arange(c, device=device)
    r_idx = rows[:, None, :, None].expand(-1, 1, h, w)
    c_idx = cols[:, None, None, :].expand(-1, 1, h, w)
    # transposed variant: read (col, row) instead of (row, col)
    r_sel = torch.where(transpose[:, None, None, None], c_idx, r_idx)
    c_sel = torch.where(transpose[:, None, None, None], r_idx, c_idx)
    z = bank[field[:, None, None, None], ch[None, :, None, None], r_sel, c_sel]
    return z * sign[:, None, None, None]


def _load_photo(name: str) -> tuple[np.ndarray, bool]:
    """One skimage.data photo as (H, W, 3) float in [0, 1] and whether it is greyscale."""
    import skimage.data as skd

    try:
        if name == "motorcycle_left":
            img = skd.stereo_motorcycle()[0]
        else:
            img = getattr(skd, name)()
    except Exception as exc:  # pooch-only files, missing installs
        raise MissingResourceError(
            f"skimage.data.{name}", expected_at="the scikit-image package data directory",
            how_to_get=f"Reinstall scikit-image>=0.26 (the photo ships with the package); error: {exc}.",
        ) from exc
    img = np.asarray(img, dtype=np.float64)
    if img.max() > 1.0:
        img = img / 255.0
    grey = img.ndim == 2
    if grey:
        img = np.repeat(img[:, :, None], 3, axis=2)
    return img[:, :, :3], grey


@functools.lru_cache(maxsize=4)
def _photo_atlas(res: int) -> tuple[torch.Tensor, torch.Tensor]:
    """All background photos, centre-cropped square and resized to ``res``, tiled into one CPU atlas.

    Returns (3, rows*res, cols*res) float32 and a (P,) bool "greyscale" flag. Cached; treat as read-only.
    """
    from skimage.transform import resize

    n = len(BACKGROUND_PHOTOS)
    rows = math.ceil(n / _ATLAS_COLS)
    atlas = np.zeros((rows * res, _ATLAS_COLS * res, 3), dtype=np.float32)
    grey = torch.zeros(n, dtype=torch.bool)
    for p, name in enumerate(BACKGROUND_PHOTOS):
        img, g = _load_photo(name)
        h, w = img.shape[:2]
        s = min(h, w)
        y0, x0 = (h - s) // 2, (w - s) // 2
        tile = resize(img[y0 : y0 + s, x0 : x0 + s], (res, res), anti_aliasing=True, preserve_range=True)
        r, c = divmod(p, _ATLAS_COLS)
        atlas[r * res : (r + 1) * res, c * res : (c + 1) * res] = tile
        grey[p] = g
    return torch.from_numpy(atlas).permute(2, 0, 1).contiguous(), grey


@functools.lru_cache(maxsize=1)
def _scene_table() -> dict[str, torch.Tensor]:
    """The fixed background scenes: photo, crop centre and half-size (photo-normalised), flip, tint, brightness."""
    g = torch.Generator().manual_seed(_SCENE_SEED)
    n = N_SCENES
    photo = torch.arange(n) // SCENES_PER_PHOTO
    half = 0.35 + 0.25 * torch.rand(n, generator=g, dtype=torch.float64)
    centre = (torch.rand(n, 2, generator=g, dtype=torch.float64) * 2 - 1) * (1 - half[:, None])
    flip = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0).double()
    # Muted tints for greyscale photos (max channel 1); colour photos keep their colours.
    tint = 0.55 + 0.45 * torch.rand(n, 3, generator=g, dtype=torch.float64)
    tint = tint / tint.max(dim=1, keepdim=True).values
    bright = 0.75 + 0.35 * torch.rand(n, generator=g, dtype=torch.float64)
    return {"photo": photo, "half": half, "centre": centre, "flip": flip, "tint": tint, "bright": bright}


def render_backgrounds(scene: torch.Tensor, jitter: torch.Tensor, *, size: int,
                       device: torch.device | str | None = None) -> torch.Tensor:
    """Background images: crops of the fixed photo scenes, jittered per image.

    Args:
        scene: (N,) int64 scene ids in [0, N_SCENES).
        jitter: (N, 3) float: x and y shift in units of the crop half-size, and log zoom.
        size: output side in pixels.
        device: where to render (default: ``scene``'s device).

    Returns:
        (N, 3, size, size) float32 in [0, 1].
    """
    dev = scene.device if device is None else resolve_device(device)
    res = int(min(max(2 * size, 128), 2048))
    atlas, grey = _photo_atlas(res)
    tab = _scene_table()
    sc = scene.to("cpu", torch.int64)
    jit = jitter.to("cpu", torch.float64)
    photo = tab["photo"][sc]
    half = (tab["half"][sc] * torch.exp(jit[:, 2])).clamp(max=0.95)
    centre = tab["centre"][sc] + jit[:, :2] * half[:, None]
    centre = torch.maximum(torch.minimum(centre, (1 - half)[:, None]), -(1 - half)[:, None])
    flip = tab["flip"][sc]
    tint = torch.where(grey[photo][:, None], tab["tint"][sc], torch.ones(len(sc), 3, dtype=torch.float64))
    gain = (tint * tab["bright"][sc][:, None]).to(dev, torch.float32)

    n = sc.shape[0]
    lin = (torch.arange(size, device=dev, dtype=torch.float32) * 2 + 1) / size - 1
    yy, xx = torch.meshgrid(lin, lin, indexing="ij")
    half_d = half.to(dev, torch.float32)[:, None, None]
    lim = 1.0 - 1.0 / res  # stay half a pixel inside the tile: no bleeding from neighbours
    flip_d = flip.to(dev, torch.float32)[:, None, None]
    u = (centre[:, 0].to(dev, torch.float32)[:, None, None] + flip_d * half_d * xx).clamp(-lim, lim)
    v = (centre[:, 1].to(dev, torch.float32)[:, None, None] + half_d * yy).clamp(-lim, lim)
    rows = math.ceil(len(BACKGROUND_PHOTOS) / _ATLAS_COLS)
    r, c = photo // _ATLAS_COLS, photo % _ATLAS_COLS
    gx = (c.to(dev, torch.float32)[:, None, None] + (u + 1) / 2) / _ATLAS_COLS * 2 - 1
    gy = (r.to(dev, torch.float32)[:, None, None] + (v + 1) / 2) / rows * 2 - 1
    grid = torch.stack([gx, gy], dim=-1).reshape(1, n * size, size, 2)
    out = F.grid_sample(atlas.to(dev)[None], grid, mode="bilinear", padding_mode="border", align_corners=False)
    out = out[0].reshape(3, n, size, size).permute(1, 0, 2, 3)
    return (out * gain[:, :, None, None]).clamp(0, 1).contiguous()


def _smoothstep(x: torch.Tensor) -> torch.Tensor:
    x = x.clamp(0, 1)
    return x * x * (3 - 2 * x)


def _check_common(split: str, seed: int, images_per_identity: int, size: int, context_leakage: float) -> None:
    check_choice("split", split, SPLITS)
    check_int("seed", seed, minimum=0)
    check_int("images_per_identity", images_per_identity, minimum=1)
    check_int("size", size, minimum=MIN_SIZE, maximum=MAX_SIZE)
    check_probability("context_leakage", context_leakage, open_low=False, open_high=False)


def assign_scenes(identity: torch.Tensor, n_identities: int, context_leakage: float, *,
                  generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Identity-correlated background scenes.

    Each identity gets an own scene (uniform over :data:`N_SCENES`); each image uses it with probability
    ``context_leakage`` and a uniformly random scene otherwise.

    Returns:
        (scene per image (N,), own scene per identity (n_identities,)), int64 on the CPU.
    """
    own = torch.randint(N_SCENES, (n_identities,), generator=generator)
    use_own = torch.rand(identity.shape[0], generator=generator, dtype=torch.float64) < context_leakage
    other = torch.randint(N_SCENES, (identity.shape[0],), generator=generator)
    return torch.where(use_own, own[identity], other), own


def _selected_rows(identity: torch.Tensor, n_identities: int, split: str,
                   seed: int) -> tuple[torch.Tensor, list[int] | None]:
    if split == "all":
        return torch.arange(identity.shape[0]), None
    part = identity_splits(torch.arange(n_identities), seed=seed)[split]
    return torch.isin(identity, part).nonzero().flatten(), part.tolist()


# ---------------------------------------------------------------------------------------------------------------
# lfw-subset-views
# ---------------------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _lfw_faces() -> torch.Tensor:
    """The 100 LFW face crops, (100, 25, 25) float32 in [0, 1] (CPU, cached, read-only)."""
    import skimage.data as skd

    try:
        arr = np.asarray(skd.lfw_subset(), dtype=np.float64)
    except Exception as exc:
        raise MissingResourceError(
            "skimage.data.lfw_subset", expected_at="the scikit-image package data directory (lfw_subset.npy)",
            how_to_get=f"Reinstall scikit-image>=0.26, which ships the file; error: {exc}.",
        ) from exc
    if arr.max() > 1.0:
        arr = arr / 255.0
    return torch.from_numpy(arr[:LFW_N_FACES]).to(torch.float32)


def _sample_view_params(n: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Per-view transform parameters (CPU, float64 / int64)."""
    def u(lo: float, hi: float, *shape: int) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(n, *shape, generator=g, dtype=torch.float64)

    return {  # drawn in this order: pose, scale and position, crop jitter, light and colour, occluder, camera
        "flip": (torch.rand(n, generator=g) < 0.5).long(), "roll": u(-math.radians(12), math.radians(12)),
        "yaw": u(-0.2, 0.2), "pitch": u(-0.1, 0.1), "aniso": u(-0.06, 0.06),
        "fcr": u(0.08, 0.55), "pos": u(-1.0, 1.0, 2),
        "zoom": u(0.94, 1.08), "shift": u(-0.06, 0.06, 2),
        "light_dir": u(0.0, 2 * math.pi), "light_k": u(0.0, 0.35),
        "gamma": torch.exp(u(math.log(0.75), math.log(1.35))), "gain": u(0.65, 1.35), "cast": u(-0.08, 0.08, 3),
        "occluded": (torch.rand(n, generator=g) < 0.25).long(),
        "occ_kind": (torch.rand(n, generator=g) < 0.5).long(),  # 0 bar across the eyes, 1 patch
        "occ_pos": u(-0.45, 0.45, 2), "occ_size": u(0.3, 0.55, 2), "occ_angle": u(-0.3, 0.3),
        "occ_rgb": u(0.05, 0.9, 3),
        "blur": torch.multinomial(torch.tensor([0.5, 0.3, 0.2]), n, replacement=True, generator=g),
        "noise_std": u(0.0, 0.04), "noise_key": torch.randint(0, 2**31 - 1, (n,), generator=g),
        "bg_jitter": torch.cat([u(-0.15, 0.15, 2), u(-0.1, 0.1, 1)], dim=1),
    }


def _render_lfw_views(faces_rgb: torch.Tensor, p: dict[str, torch.Tensor], scene: torch.Tensor, *, size: int,
                      dev: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Render one chunk of views. ``faces_rgb``: (n, 3, 25, 25) per image. Returns images and masks."""
    n = faces_rgb.shape[0]
    ax, ay, ey = _LFW_ELLIPSE
    s = torch.sqrt(p["fcr"] * 4.0 / (math.pi * ax * ay))  # src -> output scale (output half-size = 1)
    # centre: keep >= ~75 % of the face ellipse inside the frame
    tx = p["pos"][:, 0] * (1 - 0.5 * ax * s).clamp(min=0.0)
    ty = p["pos"][:, 1] * (1 - 0.5 * ay * s).clamp(min=0.0) - ey * s
    cr, sr = torch.cos(p["roll"]), torch.sin(p["roll"])
    eye = torch.eye(3, dtype=torch.float64).expand(n, 3, 3)
    T = eye.clone()
    T[:, 0, 2], T[:, 1, 2] = tx, ty
    R = eye.clone()
    R[:, 0, 0], R[:, 0, 1], R[:, 1, 0], R[:, 1, 1] = cr, -sr, sr, cr
    Sm = eye.clone()
    Sm[:, 0, 0], Sm[:, 1, 1] = s * (1 + p["aniso"]), s * (1 - p["aniso"])
    P = eye.clone()
    P[:, 2, 0], P[:, 2, 1] = p["yaw"], p["pitch"]
    Hinv = torch.linalg.inv(T @ R @ Sm @ P).to(dev, torch.float32)  # output -> source

    lin = (torch.arange(size, device=dev, dtype=torch.float32) * 2 + 1) / size - 1
    yy, xx = torch.meshgrid(lin, lin, indexing="ij")
    q = torch.stack([xx, yy, torch.ones_like(xx)], dim=-1).reshape(1, -1, 3)
    src = q @ Hinv.transpose(1, 2)  # (n, S*S, 3)
    w = src[..., 2]
    bad = w < 0.05  # beyond the perspective horizon: far from the face
    sx = torch.where(bad, torch.full_like(w, 1e3), src[..., 0] / w.clamp(min=0.05)).view(n, size, size)
    sy = torch.where(bad, torch.full_like(w, 1e3), src[..., 1] / w.clamp(min=0.05)).view(n, size, size)

    # Face ellipse (source coords); the soft edge lies inside it, so the mask (alpha > 0) is the ellipse itself.
    e = torch.sqrt((sx / ax) ** 2 + ((sy - ey) / ay) ** 2)
    sdf = (e - 1.0) * min(ax, ay)
    feather = (1.5 * 2.0 / size / s).to(dev, torch.float32)[:, None, None]  # 1.5 output px, in source units
    alpha = _smoothstep(-sdf / feather)
    mask = sdf < 0

    # Texture lookup with flip and crop jitter.
    f = lambda k: p[k].to(dev, torch.float32)  # noqa: E731
    flip = torch.where(f("flip") > 0, -1.0, 1.0)[:, None, None]
    zoom = f("zoom")[:, None, None]
    shift = f("shift")
    grid = torch.stack([flip * sx / zoom + shift[:, 0, None, None], sy / zoom + shift[:, 1, None, None]], dim=-1)
    face = F.grid_sample(faces_rgb, grid, mode="bicubic", padding_mode="border", align_corners=False).clamp(0, 1)

    # Lighting on the face: directional gradient, gamma, gain.
    ld = f("light_dir")
    grad = 1 + f("light_k")[:, None, None] * (sx * torch.cos(ld)[:, None, None] + sy * torch.sin(ld)[:, None, None])
    face = (face * grad[:, None]).clamp(0, 1) ** f("gamma")[:, None, None, None] * f("gain")[:, None, None, None]

    # Occluder, clipped to the face (it moves with the pose).
    ang = f("occ_angle")[:, None, None]
    kind = f("occ_kind")[:, None, None]
    ox = torch.where(kind > 0, f("occ_pos")[:, 0, None, None], torch.zeros_like(ang))
    oy = torch.where(kind > 0, f("occ_pos")[:, 1, None, None], torch.full_like(ang, -0.22))
    hw = torch.where(kind > 0, f("occ_size")[:, 0, None, None], torch.full_like(ang, 1.0))
    hh = torch.where(kind > 0, f("occ_size")[:, 1, None, None], 0.3 * f("occ_size")[:, 1, None, None])
    dx, dy = sx - ox, sy - oy
    rx = torch.cos(ang) * dx + torch.sin(ang) * dy
    ry = -torch.sin(ang) * dx + torch.cos(ang) * dy
    rect = torch.maximum(rx.abs() - hw, ry.abs() - hh)
    occ_a = _smoothstep(0.5 - rect / feather) * f("occluded")[:, None, None]
    occ_rgb = torch.where(kind[:, None] > 0, f("occ_rgb")[:, :, None, None], 0.12 * f("occ_rgb")[:, :, None, None])
    face = face * (1 - occ_a[:, None]) + occ_rgb * occ_a[:, None]

    bg = render_backgrounds(scene.to(dev), p["bg_jitter"], size=size, device=dev)
    img = bg * (1 - alpha[:, None]) + face * alpha[:, None]
    img = img * (1 + f("cast"))[:, :, None, None]
    img = blur_by_level(img, p["blur"].to(dev), size=size)
    img = img + f("noise_std")[:, None, None, None] * keyed_gaussian_noise(p["noise_key"], (3, size, size), device=dev)
    return img.clamp(0, 1), mask[:, None]


def load_lfw_subset_views(*, split: str = "all", seed: int = 0, n_identities: int | None = None,
                          images_per_identity: int = 12, size: int = 64, context_leakage: float = 0.5,
                          device: str | torch.device | None = None) -> FaceSet:
    """Load ``lfw-subset-views``: seeded synthetic views of the 100 real LFW face crops in scikit-image.

    See the module docstring for what the views are (and are not). Identity ``i`` is LFW-subset face photo ``i``.

    Args:
        split: ``"all"``, or one of the disjoint identity parts ``"train"``, ``"val"``, ``"test"`` (0.6 / 0.2 / 0.2
            of the identities, chosen by :func:`privkit.data.splits.identity_splits` with ``seed``). A split holds
            exactly the rows of the full set whose identity is in it (same pixels). Identity ids are not relabelled.
        seed: seed of every random choice (views, scenes, split).
        n_identities: use face photos 0 .. n_identities-1; ``None`` means all 100. Range [1, 100].
        images_per_identity: views per identity, >= 1.
        size: image side in pixels, in [32, 1024].
        context_leakage: probability in [0, 1] that a view's background is its identity's own scene.
        device: ``"auto"``/``None`` (CUDA if present), ``"cpu"``, ``"cuda"`` or a ``torch.device``.

    Returns:
        A :class:`FaceSet` with ``name="lfw-subset-views"``, ``context`` = background scene id in [0, 64), and
        int64 ``attributes`` (all per image): ``lighting`` (0 dark, 1 normal, 2 bright: face gain < 0.9, <= 1.1,
        > 1.1), ``occluded`` (0/1), ``blur`` (0/1/2), ``pose`` (0/1/2: perspective yaw term < -0.07, within, > 0.07),
        ``flipped`` (0/1) and ``background`` (= context). ``meta`` records the seed, split, source, the own scene of
        every identity (``identity_scene``) and the transform ranges.

    Raises:
        InvalidArgumentError: an argument out of range (the message gives the range).
        UnknownNameError: an unknown ``split``.
        InsufficientDataError: too few identities for a split.
        MissingResourceError: scikit-image's bundled data is missing.
    """
    _check_common(split, seed, images_per_identity, size, context_leakage)
    n_id = LFW_N_FACES if n_identities is None else check_int(
        "n_identities", n_identities, minimum=1, maximum=LFW_N_FACES)
    k = int(images_per_identity)
    dev = resolve_device(device)
    g = torch.Generator().manual_seed(int(seed))

    grey = _lfw_faces()[:n_id].double()
    # Plausible skin chroma per identity (luminance preserved): warm, varied in hue and saturation.
    sat = 0.35 + 0.5 * torch.rand(n_id, 1, generator=g, dtype=torch.float64)
    hue = torch.rand(n_id, 1, generator=g, dtype=torch.float64)
    chroma = torch.cat([torch.ones_like(sat), 1 - sat * (0.22 + 0.08 * hue), 1 - sat * (0.42 - 0.1 * hue)], dim=1)
    chroma = chroma / (chroma @ torch.tensor([0.299, 0.587, 0.114], dtype=torch.float64))[:, None]
    faces_rgb = (grey[:, None] * chroma[:, :, None, None]).clamp(0, 1).to(torch.float32)

    identity = torch.arange(n_id).repeat_interleave(k)
    scene, own = assign_scenes(identity, n_id, float(context_leakage), generator=g)
    params = _sample_view_params(n_id * k, g)
    rows, part = _selected_rows(identity, n_id, split, int(seed))

    faces_dev = faces_rgb.to(dev)
    imgs, masks = [], []
    chunk = 256
    for start in range(0, rows.numel(), chunk):  # rows is never empty (identity_splits raises first)
        r = rows[start : start + chunk]
        p = {key: v[r] for key, v in params.items()}
        im, m = _render_lfw_views(faces_dev[identity[r].to(dev)], p, scene[r], size=size, dev=dev)
        imgs.append(im)
        masks.append(m)
    images, mask = torch.cat(imgs), torch.cat(masks)

    meta = {
        "seed": int(seed), "split": split, "split_identities": part,
        "source": "skimage.data.lfw_subset(): first 100 of 200 images are faces; one photo = one identity",
        "identity_note": "no identity labels exist in the subset; views are synthetic transforms of one photo",
        "n_identities_total": n_id, "images_per_identity": k, "size": int(size),
        "context_leakage": float(context_leakage),
    }
    return _views_faceset("lfw-subset-views", images, mask, identity, scene, own, params, rows, dev, meta)


def _views_faceset(name: str, images: torch.Tensor, mask: torch.Tensor, identity: torch.Tensor, scene: torch.Tensor,
                   own: torch.Tensor, params: dict[str, torch.Tensor], rows: torch.Tensor, dev: torch.device,
                   meta: dict, tail: dict | None = None) -> FaceSet:
    """The :class:`FaceSet` of views rendered for rows ``rows`` of the full set (``lfw-subset-views`` and
    ``portraits-views``): the per-image attributes of the view parameters, and ``meta`` followed by the scene and
    attribute entries, ``tail`` and the mask note."""
    sel = {key: v[rows] for key, v in params.items()}
    gain = sel["gain"]
    attributes = {
        "lighting": torch.where(gain < 0.9, 0, torch.where(gain <= 1.1, 1, 2)).long(),
        "occluded": sel["occluded"].long(), "blur": sel["blur"].long(),
        "pose": torch.where(sel["yaw"] < -0.07, 0, torch.where(sel["yaw"] <= 0.07, 1, 2)).long(),
        "flipped": sel["flip"].long(), "background": scene[rows].long(),
    }
    meta = {
        **meta, "n_scenes": N_SCENES, "background_photos": list(BACKGROUND_PHOTOS), "identity_scene": own.tolist(),
        "attributes_per_image": ["lighting", "occluded", "blur", "pose", "flipped", "background"],
        "attributes_per_identity": [], **(tail or {}), "mask": "face ellipse composited (alpha > 0); exact",
    }
    return FaceSet(images=images, identity=identity[rows].to(dev), box=boxes_from_masks(mask), mask=mask,
                   context=scene[rows].to(dev), attributes={key: v.to(dev) for key, v in attributes.items()},
                   name=name, meta=meta)
