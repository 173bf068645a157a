"""Classical face anonymisation baselines: blur, pixelate, mask.

The SynthesisNet paper's summary contrasts its synthesis with the traditional image-processing methods (masking,
pixelation, blurring), which are cheap but destroy image quality. :func:`anonymize` implements the three, acting on
each image's face box when boxes are given and on the whole image otherwise. The learned baselines of the paper
(DeepPrivacy, FaceDCGAN, HybridGAN) are not reimplemented; the ablations of SynthesisNet itself (no noise, no
auxiliary classifier, noise on the whole latent) are options of :class:`~privkit.synthesisnet.SynthesisNetConfig`.

``strength`` means, per method (privkit's parameterisation, relative to the size of the region so that it does
not depend on the resolution):

* ``"blur"``: the Gaussian's standard deviation as a fraction of the region's shorter side (default 0.1);
* ``"pixelate"``: the block side as a fraction of the region's shorter side (default 0.125, i.e. 8 blocks across);
* ``"mask"``: the opacity of a black fill in ``(0, 1]`` (default 1, an opaque black box).

The methods carry no formal privacy guarantee: blurred and pixelated faces are known to remain recognisable to
machine matchers (e.g. McPherson, Shokri & Shmatikov 2016).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch.nn import functional as F

from .._validate import check_choice, check_image_batch, check_positive, check_tensor
from ..errors import InvalidArgumentError
from ..transforms import gaussian_blur

__all__ = ["BASELINES", "DEFAULT_STRENGTH", "anonymize"]

BaselineName = Literal["blur", "pixelate", "mask"]
BASELINES: tuple[str, ...] = ("blur", "pixelate", "mask")
DEFAULT_STRENGTH: dict[str, float] = {"blur": 0.1, "pixelate": 0.125, "mask": 1.0}


def _regions(boxes: torch.Tensor | None, n: int, h: int, w: int) -> list[tuple[int, int, int, int]]:
    """Integer ``(x0, y0, x1, y1)`` regions (pixel edges, outward-rounded and clamped to the image)."""
    if boxes is None:
        return [(0, 0, w, h)] * n
    check_tensor("boxes", boxes, shape=(n, 4))
    b = boxes.detach().to("cpu", torch.float64)
    out = []
    for i in range(n):
        x0, y0, x1, y1 = (float(v) for v in b[i])
        if not (x1 > x0 and y1 > y0):
            raise InvalidArgumentError(f"boxes[{i}] must be xyxy with x1 > x0 and y1 > y0, got {b[i].tolist()}")
        ix0, iy0 = max(0, math.floor(x0)), max(0, math.floor(y0))
        ix1, iy1 = min(w, math.ceil(x1)), min(h, math.ceil(y1))
        if ix1 <= ix0 or iy1 <= iy0:
            raise InvalidArgumentError(f"boxes[{i}] = {b[i].tolist()} does not overlap the {w}x{h} image")
        out.append((ix0, iy0, ix1, iy1))
    return out


def _pixelate(region: torch.Tensor, block: float) -> torch.Tensor:
    h, w = region.shape[-2:]
    gh, gw = max(1, round(h / block)), max(1, round(w / block))
    small = F.adaptive_avg_pool2d(region, (gh, gw))
    return F.interpolate(small, size=(h, w), mode="nearest")


def anonymize(images: torch.Tensor, method: BaselineName = "blur", *, boxes: torch.Tensor | None = None,
              strength: float | None = None) -> torch.Tensor:
    """Blur, pixelate or mask faces (the face box when ``boxes`` is given, else the whole image).

    Args:
        images: ``(N, 3, H, W)`` float in ``[0, 1]``; device and dtype are kept.
        method: ``"blur"``, ``"pixelate"`` or ``"mask"``.
        boxes: optional ``(N, 4)`` xyxy face boxes in pixels (e.g. ``FaceSet.box``).
        strength: see the module docstring; ``None`` uses :data:`DEFAULT_STRENGTH`.

    Returns:
        The anonymised images, same shape, dtype and device, in ``[0, 1]``.

    Raises:
        UnknownNameError: unknown ``method``.
        InvalidArgumentError, ShapeError: bad images, boxes or strength.
    """
    check_choice("method", method, BASELINES)
    check_image_batch("images", images)
    s = DEFAULT_STRENGTH[method] if strength is None else check_positive("strength", strength)
    if method == "mask" and s > 1.0:
        raise InvalidArgumentError(f"strength (the mask's opacity) must lie in (0, 1], got {s}")
    n, _, h, w = images.shape
    regions = _regions(boxes, n, h, w)
    out = images.clone()
    for i, (x0, y0, x1, y1) in enumerate(regions):
        region = images[i : i + 1, :, y0:y1, x0:x1]
        side = min(y1 - y0, x1 - x0)
        if method == "blur":
            new = gaussian_blur(region, s * side, padding="replicate")
        elif method == "pixelate":
            new = _pixelate(region, max(1.0, s * side))
        else:
            new = region * (1.0 - s)
        out[i : i + 1, :, y0:y1, x0:x1] = new.clamp(0.0, 1.0)
    return out
