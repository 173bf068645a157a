"""Aligned face crops for SynthesisNet: the face fills the frame, as in CelebA's "aligned & cropped" images.

The SynthesisNet paper trains on aligned face crops (CelebA aligned & cropped, MUCT, MORPH at 128x128), where the
face fills most of the image. privkit's embedded ``lfw-subset-views`` instead places a small face (face-coverage
ratio 0.08 - 0.55) anywhere on a real-photo background, which is the right test for encoders that must find a face
but wastes almost all of a small generator's capacity on backgrounds. :func:`aligned_faces` turns any
:class:`~privkit.data.types.FaceSet` with face boxes into aligned crops: a square around each face box, enlarged by
a fixed ``margin`` on every side, resampled to ``size x size`` pixels (bilinear, anti-aliased by 2x supersampling,
border pixels repeated where the square leaves the image). Identity, context and attribute labels are kept; boxes
and masks are mapped into the crop.

Render the source views at a larger size than ``size`` (e.g. 128 px for 64-px crops), so that a small face is not
upsampled twice. For ``lfw-subset-views`` the face texture itself comes from 25x25 LFW crops: aligned crops at
64 px are upsampled from that and look soft whatever the render size.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._validate import check_int, check_real, check_tensor
from ..data.types import FaceSet
from ..errors import InvalidArgumentError, ShapeError
from ..transforms import square_frames

__all__ = ["aligned_faces", "square_crop_boxes"]


def square_crop_boxes(box: torch.Tensor, *, margin: float) -> torch.Tensor:
    """Square crop windows ``(N, 4)`` xyxy (float32): centred on each face box, side = the box's longer side
    times ``1 + 2 * margin``.

    Args:
        box: ``(N, 4)`` xyxy face boxes with ``x1 > x0`` and ``y1 > y0``.
        margin: extra border on every side, as a fraction of the longer box side, in ``[0, 2]``.
    """
    check_tensor("box", box, ndim=2, shape=(None, 4), finite=True)
    margin = check_real("margin", margin)
    if not 0.0 <= margin <= 2.0:
        raise InvalidArgumentError(f"margin must lie in [0, 2] (fraction of the face box side), got {margin}")
    b = box.to(torch.float32)
    w, h = b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]
    if b.numel() and not bool(((w > 0) & (h > 0)).all()):
        raise InvalidArgumentError("box must be xyxy with x1 > x0 and y1 > y0 for every row (an empty face box "
                                   "cannot be aligned)")
    cx, cy, side = square_frames(b, margin)
    return torch.stack([cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2], dim=1)


def _crop_grid(window: torch.Tensor, height: int, width: int, out: int) -> torch.Tensor:
    """``grid_sample`` grid ``(N, out, out, 2)`` (align_corners=False) sampling ``window`` (xyxy pixel edges)."""
    t = (torch.arange(out, device=window.device, dtype=torch.float32) + 0.5) / out  # pixel centres in [0, 1]
    x = window[:, 0, None] + t[None] * (window[:, 2] - window[:, 0])[:, None]  # (N, out) pixel coordinates
    y = window[:, 1, None] + t[None] * (window[:, 3] - window[:, 1])[:, None]
    gx = 2.0 * x / width - 1.0
    gy = 2.0 * y / height - 1.0
    return torch.stack([gx[:, None, :].expand(-1, out, -1), gy[:, :, None].expand(-1, -1, out)], dim=-1)


def aligned_faces(faceset: FaceSet, *, size: int, margin: float = 0.1, batch_size: int = 256) -> FaceSet:
    """Aligned face crops of ``faceset``: a square around every face box, resampled to ``size x size``.

    Mirrors CelebA's aligned & cropped images (the face fills the frame) for sets whose faces are small and
    placed anywhere (``lfw-subset-views``, ``synthfaces``).

    Args:
        faceset: faces with ``box`` (xyxy pixels, non-empty) and ``mask``.
        size: output side in pixels, in ``[8, 1024]``.
        margin: border around the face box on every side, as a fraction of the box's longer side, in ``[0, 2]``
            (0.1: the crop is 1.2x the face box).
        batch_size: images resampled at a time.

    Returns:
        A new :class:`FaceSet` (same device and row order): ``images (N, 3, size, size)`` in ``[0, 1]``, ``mask``
        resampled into the crop (nearest-centre test of the bilinear mask > 0.5), ``box`` = the bounding box of the
        new mask, ``identity``/``context``/``attributes`` unchanged, ``name`` unchanged, and ``meta`` extended with
        ``aligned = {"size", "margin", "source_size"}``.

    Raises:
        InvalidArgumentError: ``size``/``margin`` out of range, or an empty face box.
        ShapeError: images, boxes or masks of inconsistent shapes.
    """
    from ..data.faces import boxes_from_masks

    if not isinstance(faceset, FaceSet):
        raise InvalidArgumentError(f"faceset must be a privkit FaceSet, got {type(faceset).__name__}")
    size = check_int("size", size, minimum=8, maximum=1024)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    check_tensor("faceset.images", faceset.images, ndim=4, floating=True)
    n, ch, height, width = faceset.images.shape
    if ch != 3:
        raise ShapeError(f"faceset.images must have 3 channels, got shape {tuple(faceset.images.shape)}")
    check_tensor("faceset.box", faceset.box, shape=(n, 4), finite=True)
    if tuple(faceset.mask.shape) != (n, 1, height, width):
        raise ShapeError(f"faceset.mask must have shape {(n, 1, height, width)}, got {tuple(faceset.mask.shape)}")
    window = square_crop_boxes(faceset.box, margin=margin).to(faceset.images.device)
    sup = 2  # 2x supersampling, then 2x2 average: a cheap anti-aliasing filter for downscaled crops
    imgs, masks = [], []
    for s in range(0, n, batch_size):
        w = window[s : s + batch_size]
        grid = _crop_grid(w, height, width, size * sup)
        x = faceset.images[s : s + batch_size].to(torch.float32)
        im = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
        imgs.append(F.avg_pool2d(im, sup).clamp(0.0, 1.0).to(faceset.images.dtype))
        m = F.grid_sample(faceset.mask[s : s + batch_size].to(torch.float32), _crop_grid(w, height, width, size),
                          mode="bilinear", padding_mode="zeros", align_corners=False)
        masks.append(m > 0.5)
    if imgs:
        images, mask = torch.cat(imgs), torch.cat(masks)
    else:
        images = faceset.images.new_zeros(0, 3, size, size)
        mask = torch.zeros(0, 1, size, size, dtype=torch.bool, device=faceset.images.device)
    meta = dict(faceset.meta)
    meta["aligned"] = {"size": size, "margin": float(margin), "source_size": [int(height), int(width)]}
    return FaceSet(images=images, identity=faceset.identity.clone(), box=boxes_from_masks(mask).to(faceset.box.dtype),
                   mask=mask, context=faceset.context.clone(),
                   attributes={k: v.clone() for k, v in faceset.attributes.items()}, name=faceset.name, meta=meta)

