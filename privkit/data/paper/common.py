"""What the paper-scale loaders share: path checks, file-format errors, the image budget, image decoding,
face-box geometry and the assembly of a :class:`~privkit.data.types.FaceSet`.

Missing files raise :class:`~privkit.errors.MissingResourceError` (what, where it was looked for, and how to get
it: each dataset module holds its own download instructions); malformed files raise
:class:`~privkit.errors.InvalidArgumentError` naming the file and line (:func:`_format_error`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from ..._validate import check_int
from ...errors import InvalidArgumentError, MissingResourceError
from ..types import FaceSet

__all__ = ["DEFAULT_IMAGE_BUDGET_BYTES", "IMAGE_EXTENSIONS", "default_max_images"]

CropMode = Literal["center", "full", "box"]
_CROPS = ("center", "full", "box")

#: Memory the decoded images of one default-sized load may take (images plus masks).
DEFAULT_IMAGE_BUDGET_BYTES = 512 * 2**20

#: File name endings treated as images in folder-per-identity layouts.
IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".webp")

PathLike = str | os.PathLike


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


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise _format_error(path, None, f"not a text file ({exc})") from None
    return [ln for ln in text.splitlines() if ln.strip()]


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
        raise InvalidArgumentError(f"{what} selects {n} images but max_images={max_images} (the default is what fits "
                                   f"in {DEFAULT_IMAGE_BUDGET_BYTES // 2**20} MiB at this size). Select fewer "
                                   "(n_identities, images_per_identity, n_samples, folds) or pass a larger max_images.")


def _generator(seed: int | torch.Generator) -> torch.Generator:
    if isinstance(seed, torch.Generator):
        return seed
    return torch.Generator().manual_seed(check_int("seed", seed))


def _check_size(size: int) -> int:
    return check_int("size", size, minimum=8, maximum=4096)


def _check_workers(num_workers: int) -> int:
    return check_int("num_workers", num_workers, minimum=0, maximum=256)


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


#: Leading bytes of the image formats Pillow decodes here, with the fewest bytes a complete file of that format
#: can have (a baseline JPEG needs its quantisation, frame, Huffman and scan headers: over 100 bytes).
_IMAGE_SIGNATURES: tuple[tuple[str, tuple[bytes, ...], int], ...] = (
    ("JPEG", (b"\xff\xd8\xff",), 100),
    ("PNG", (b"\x89PNG\r\n\x1a\n",), 60),
    ("BMP", (b"BM",), 30),
    ("GIF", (b"GIF87a", b"GIF89a"), 26),
    ("TIFF", (b"II*\x00", b"MM\x00*"), 30),
    ("WebP", (b"RIFF",), 26),
    ("PPM/PGM/PBM", (b"P1", b"P2", b"P3", b"P4", b"P5", b"P6"), 8),
)


def _check_image_files(paths: Sequence[Path], what: str, how_to_get: str = "Re-extract the dataset archive.") -> None:
    """Cheap checks of every image file before any is decoded: it exists, starts like an image and is not cut short.

    Reads 16 bytes per file (no decoding), so a missing, empty or truncated file is reported before the heavy work
    (a file cut inside its compressed data is still caught when it is decoded).

    Raises:
        MissingResourceError: a file is missing (the message names it and counts the others).
        InvalidArgumentError: a file is not an image or is too short to be a complete one (named, with its size).
    """
    missing = [p for p in paths if not p.is_file()]
    if missing:
        more = f" ({len(missing) - 1} more of the {len(paths)} images are missing too)" if len(missing) > 1 else ""
        raise MissingResourceError(f"{what} image {missing[0].name}{more}", expected_at=str(missing[0]),
                                   how_to_get=how_to_get)
    formats = ", ".join(name for name, _, _ in _IMAGE_SIGNATURES)
    for p in paths:
        try:
            n_bytes = p.stat().st_size
            with p.open("rb") as fh:
                head = fh.read(16)
        except OSError as exc:
            raise InvalidArgumentError(f"{what} image {p}: cannot be read ({exc})") from None
        kind = next(((name, least) for name, sigs, least in _IMAGE_SIGNATURES if head.startswith(sigs)), None)
        if kind is None:
            raise InvalidArgumentError(f"{what} image {p}: expected an image file ({formats}), but its {n_bytes} bytes "
                                       f"start with {head[:8]!r} (truncated, corrupt or not an image)")
        if n_bytes < kind[1]:
            raise InvalidArgumentError(f"{what} image {p}: a complete {kind[0]} file has at least {kind[1]} bytes, "
                                       f"this one has {n_bytes} (truncated?)")


def _decode(path: Path, window_fn: Callable[[int, int], Window], size: int
            ) -> tuple[np.ndarray, Window, tuple[int, int]]:
    """Decode ``path``, crop ``window_fn(w, h)`` (black padding outside the image), resize to size x size."""
    from PIL import Image, UnidentifiedImageError

    if not path.is_file():
        raise MissingResourceError(f"Image {path.name}", expected_at=str(path),
                                   how_to_get="Re-extract the dataset archive.")
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
        raise InvalidArgumentError(f"cannot decode image {path}: expected a complete image file that Pillow can read, "
                                   f"got: {exc} (truncated or corrupt file?)") from None
    return arr, win, (w, h)


def _decode_many(paths: Sequence[Path], window_fns: Sequence[Callable[[int, int], Window]], size: int, *,
                 num_workers: int, progress: bool, desc: str
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


def _map_points(points: torch.Tensor, windows: Sequence[Window], size: int, *,
                pixel_index: bool = False) -> torch.Tensor:
    """Map (N, K, 2) source points into the same coordinates of the resized crops.

    ``pixel_index=False``: continuous image coordinates (pixel ``i`` spans ``[i, i + 1)``, as box edges), scaled as
    they are. ``pixel_index=True``: the pixel-index convention (pixel ``i`` has its centre at ``i``, as MPII's 0-based
    joints and privkit's pose sets). A crop keeps pixel indices (``j = p - x0``) and Pillow's resize maps pixel
    *centres* (``q + 0.5 = (j + 0.5) s``), so ``q = (p - x0 + 0.5) s - 0.5``; scaling the index alone would put
    every point ``0.5 (1 - s)`` output pixels off the image content.
    """
    c = 0.5 if pixel_index else 0.0
    w = torch.tensor(windows, dtype=torch.float64).reshape(-1, 4)
    x0, y0 = w[:, 0:1], w[:, 1:2]
    sx = size / (w[:, 2:3] - w[:, 0:1])
    sy = size / (w[:, 3:4] - w[:, 1:2])
    p = points.to(torch.float64)
    out = torch.stack(((p[..., 0] - x0 + c) * sx - c, (p[..., 1] - y0 + c) * sy - c), dim=-1)
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


def _build_faceset(paths: Sequence[Path], identity_keys: Sequence[Any], boxes: Sequence[Sequence[float] | None], *,
                   size: int, crop: str, margin: float, name: str, meta: dict, num_workers: int, progress: bool,
                   attributes: Mapping[str, torch.Tensor] | None = None) -> FaceSet:
    if crop == "box":
        missing = [str(p) for p, b in zip(paths, boxes) if b is None]
        if missing:
            raise InvalidArgumentError(f"crop='box' needs a face box for every image; {len(missing)} have none "
                                       f"(first: {missing[0]}). Use crop='center' or 'full', or provide the dataset's "
                                       "box file.")

    def make_fn(b):
        return lambda w, h: _face_window(w, h, crop, b, margin)

    _check_image_files(paths, name)
    images, windows, sizes = _decode_many(paths, [make_fn(b) for b in boxes], size, num_workers=num_workers,
                                          progress=progress, desc=name)
    src = torch.tensor([list(b) if b is not None else [0.0, 0.0, float(w), float(h)]
                        for b, (w, h) in zip(boxes, sizes)], dtype=torch.float64).reshape(-1, 4)
    box = _map_boxes(src, windows, size)
    ident, names = _contiguous_ids(identity_keys)
    meta = dict(meta)
    meta.setdefault("identity_names", [str(n) for n in names])
    meta.update(size=size, crop=crop, margin=margin, source_sizes=[list(s) for s in sizes])
    return FaceSet(images=images, identity=ident, box=box, mask=_box_masks(box, size),
                   context=torch.full((len(paths),), -1, dtype=torch.int64), attributes=dict(attributes or {}),
                   name=name, meta=meta)
