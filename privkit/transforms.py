"""Image transforms shared by every paper: one Gaussian blur, one resize and one square face frame.

Images are ``(N, C, H, W)`` floating-point tensors; both transforms keep dtype and device.

* :func:`gaussian_blur` — separable Gaussian blur. The kernel is ``exp(-(t/σ)² / 2)`` over ``t = -r … r``, computed in
  the images' dtype (or ``kernel_dtype``), normalised to sum 1; the radius ``r`` is ``⌈3σ⌉`` unless given (a kernel of
  odd side ``k`` has ``r = k // 2``). Borders are mirrored (``"reflect"``, OpenCV's ``BORDER_REFLECT_101``, the
  default) or repeat the edge pixel (``"replicate"``). Reflection needs ``r`` below the image side; ``clip_radius``
  caps ``r`` there instead of raising.
* :func:`resize` — bilinear resampling to a given size (``align_corners=False``), antialiased (a wider filter when
  shrinking, so a reduction does not alias).
* :func:`square_frames` — the square crop around each face box that every face crop in privkit takes: centred on
  the box, side = the box's longer side × (1 + 2·margin). How the square is then sampled is the caller's (each model
  keeps the resampling it was trained with: integer crop and bilinear resize for the npm face models, area
  interpolation for MTCNN's ONet, differentiable bilinear sampling for the inversion attacks and SynthesisNet).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ._validate import check_choice, check_int, check_nonnegative
from .errors import InvalidArgumentError, ShapeError

__all__ = ["BLUR_PADDINGS", "gaussian_blur", "resize", "square_frames"]

#: Border modes of :func:`gaussian_blur`.
BLUR_PADDINGS: tuple[str, ...] = ("reflect", "replicate")


def _check_images(images: torch.Tensor, name: str) -> None:
    if not isinstance(images, torch.Tensor) or images.ndim != 4 or not images.is_floating_point():
        got = f"{tuple(images.shape)} {images.dtype}" if isinstance(images, torch.Tensor) else type(images).__name__
        raise ShapeError(f"{name} must be a floating-point tensor of shape (N, C, H, W), got {got}")


def _pad_edge(x: torch.Tensor, pad: int, dim: int) -> torch.Tensor:
    """Replicate padding of any width along ``dim`` (``F.pad`` needs the pad below the side)."""
    reps = [1] * x.ndim
    reps[dim] = pad
    first = x.narrow(dim, 0, 1).repeat(reps)
    last = x.narrow(dim, x.shape[dim] - 1, 1).repeat(reps)
    return torch.cat([first, x, last], dim=dim)


def _pad(x: torch.Tensor, r: int, dim: int, padding: str) -> torch.Tensor:
    if padding == "replicate" and r >= x.shape[dim]:
        return _pad_edge(x, r, dim)
    spec = (r, r, 0, 0) if dim == -1 else (0, 0, r, r)
    return F.pad(x, spec, mode=padding)


def gaussian_blur(images: torch.Tensor, sigma: float, *, radius: int | None = None, padding: str = "reflect",
                  clip_radius: bool = False, kernel_dtype: torch.dtype | None = None,
                  name: str = "images") -> torch.Tensor:
    """Separable Gaussian blur of ``(N, C, H, W)`` images (module docstring); ``sigma = 0`` returns a copy.

    Args:
        images: ``(N, C, H, W)`` floating point.
        sigma: standard deviation in pixels, ``>= 0``.
        radius: kernel radius ``>= 1`` (default ``max(1, ⌈3σ⌉)``).
        padding: ``"reflect"`` or ``"replicate"``.
        clip_radius: with reflect padding, cap the radius at ``min(H, W) - 1`` instead of raising.
        kernel_dtype: the dtype the kernel is computed and normalised in before it is cast to the images' dtype
            (default: the images' dtype).
        name: the argument's name in error messages.

    Raises:
        ShapeError: ``images`` is not a 4-D floating-point tensor.
        InvalidArgumentError: negative ``sigma``, ``radius < 1``, unknown ``padding``, or a reflect radius not below
            the image side (without ``clip_radius``).
    """
    _check_images(images, name)
    sigma = check_nonnegative("sigma", sigma)
    check_choice("padding", padding, BLUR_PADDINGS)
    if sigma == 0 or images.shape[0] == 0:
        return images.clone()
    r = max(1, math.ceil(3.0 * sigma)) if radius is None else check_int("radius", radius, minimum=1)
    h, w = images.shape[-2:]
    if padding == "reflect" and r >= min(h, w):
        if not clip_radius:
            raise InvalidArgumentError(
                f"radius={r} is too large for {h}x{w} {name} with reflect padding (need radius < min(H, W) = "
                f"{min(h, w)}); use a smaller sigma or radius")
        r = min(h, w) - 1
        if r < 1:
            return images.clone()
    t = torch.arange(-r, r + 1, dtype=images.dtype if kernel_dtype is None else kernel_dtype, device=images.device)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    k = (k / k.sum()).to(images.dtype)
    c = images.shape[1]
    out = F.conv2d(_pad(images, r, -1, padding), k.view(1, 1, 1, -1).expand(c, 1, 1, -1), groups=c)
    return F.conv2d(_pad(out, r, -2, padding), k.view(1, 1, -1, 1).expand(c, 1, -1, 1), groups=c)


def resize(images: torch.Tensor, size: int | Sequence[int], *, name: str = "images") -> torch.Tensor:
    """Bilinear, antialiased resampling of ``(N, C, H, W)`` images to ``size`` (an int for a square, or ``(h, w)``).

    Raises:
        ShapeError: ``images`` is not a 4-D floating-point tensor.
        InvalidArgumentError: a target side below 1.
    """
    _check_images(images, name)
    if isinstance(size, int) and not isinstance(size, bool):
        size = (size, size)
    hw = tuple(check_int("size", s, minimum=1) for s in size)
    if len(hw) != 2:
        raise InvalidArgumentError(f"size must be an int or a pair (h, w), got {size!r}")
    return F.interpolate(images, size=hw, mode="bilinear", align_corners=False, antialias=True)


def square_frames(boxes: torch.Tensor, margin: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Centre ``x``, centre ``y`` and side of the square around each ``(N, 4)`` xyxy box (module docstring), each
    ``(N,)`` in the boxes' dtype: side = longer box side × (1 + 2·``margin``).

    Raises:
        ShapeError: ``boxes`` is not an ``(N, 4)`` tensor.
        InvalidArgumentError: negative ``margin``.
    """
    if not isinstance(boxes, torch.Tensor) or boxes.ndim != 2 or boxes.shape[1] != 4:
        got = tuple(boxes.shape) if isinstance(boxes, torch.Tensor) else type(boxes).__name__
        raise ShapeError(f"boxes must be an (N, 4) xyxy tensor, got {got}")
    margin = check_nonnegative("margin", margin)
    cx = (boxes[:, 0] + boxes[:, 2]) / 2
    cy = (boxes[:, 1] + boxes[:, 3]) / 2
    side = torch.maximum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]) * (1 + 2 * margin)
    return cx, cy, side
