"""Raw pixels as a baseline "encoder" (``pixels``).

Each image is resized to 16×16 with area averaging (``torch.nn.functional.interpolate(mode="area")``), kept in
RGB (768 values; for a greyscale image stored in three equal channels this gives exactly the cosine
similarities of the greyscale vector, so RGB loses nothing), standardised per image to zero mean and unit
variance over its 768 values, and flattened. Pure torch: runs on the encoder's device. Face boxes are ignored
(the whole image is the representation; crop first to embed faces only).

A constant image (e.g. blank) has no structure after centring; it is mapped to the constant unit vector
1/√768, which has cosine similarity 0 with every non-constant image (their standardised vectors have zero
mean) instead of an undefined direction.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .base import Encoder

__all__ = ["PixelsEncoder", "load_pixels", "PIXELS_SIDE"]

PIXELS_SIDE = 16
_STD_FLOOR = 1e-6


class PixelsEncoder(Encoder):
    """16×16 RGB area-downsampled pixels, standardised per image: 768-D."""

    name = "pixels"
    dim = 3 * PIXELS_SIDE * PIXELS_SIDE
    input_size = (PIXELS_SIDE, PIXELS_SIDE)
    kind = "pixels"
    description = "16x16 RGB area-downsampled pixels, per-image standardised (768-D)"

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        x = F.interpolate(images, size=(PIXELS_SIDE, PIXELS_SIDE), mode="area").flatten(1)
        x = x - x.mean(dim=1, keepdim=True)
        std = x.pow(2).mean(dim=1, keepdim=True).sqrt()
        flat = std.squeeze(1) < _STD_FLOOR
        out = x / std.clamp_min(_STD_FLOOR)
        if bool(flat.any()):
            out[flat] = 1.0
        return out


def load_pixels(*, device: torch.device | str = "cpu") -> PixelsEncoder:
    """Build the ``pixels`` encoder."""
    return PixelsEncoder().to(device)
