"""Perceptual hashes as ±1 vectors: ``pdq`` (Meta's PDQ, 256 bits) and ``phash`` (DCT hash, 16×16 = 256 bits).

These are the integrity/near-duplicate hashes real content-moderation systems match against; privkit treats
them as (non-learned) image encoders. Each bit b ∈ {0, 1} becomes 2b − 1 ∈ {−1, +1}, so the cosine similarity
of two hash vectors is 1 − 2·Hamming/256 (after :meth:`~privkit.encoders.base.Encoder.embed` divides by
√256). Both run on the CPU (numpy/PIL); outputs are returned on the encoder's device. Face boxes are ignored:
the hash describes the whole image.
"""

from __future__ import annotations

import numpy as np
import torch

from .base import Encoder
from .dlib_fr import to_uint8_hwc

__all__ = ["PDQEncoder", "PHashEncoder", "load_pdq", "load_phash"]

HASH_BITS = 256


def _signs(hashes: list[np.ndarray], device: torch.device) -> torch.Tensor:
    """(N, 256) float32 rows of +-1 (bit b -> 2b - 1) of N hashes' bit arrays, on ``device``."""
    rows = [np.where(np.asarray(bits).reshape(-1) > 0, 1.0, -1.0).astype(np.float32) for bits in hashes]
    return torch.from_numpy(np.stack(rows)).to(device)


class PDQEncoder(Encoder):
    """PDQ hash (``pdqhash`` package) of the uint8 RGB image, as a ±1 256-vector."""

    name = "pdq"
    dim = HASH_BITS
    input_size = (64, 64)  # PDQ downsamples any input to 64×64 luminance internally
    kind = "hash"
    description = "PDQ perceptual hash (256 bits as +-1), whole image"

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        import pdqhash

        return _signs([pdqhash.compute(img)[0] for img in to_uint8_hwc(images)], self.device)


class PHashEncoder(Encoder):
    """DCT perceptual hash (``imagehash.phash``, hash_size 16: 256 bits) as a ±1 256-vector.

    ``imagehash`` converts to greyscale, resizes to 64×64 (Lanczos), takes the 16×16 lowest DCT frequencies and
    thresholds them at their median.
    """

    name = "phash"
    dim = HASH_BITS
    input_size = (64, 64)
    kind = "hash"
    description = "imagehash pHash, hash_size=16 (256 bits as +-1), whole image"

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        import imagehash
        from PIL import Image

        hashes = [imagehash.phash(Image.fromarray(img), hash_size=16).hash for img in to_uint8_hwc(images)]
        return _signs(hashes, self.device)


def load_pdq(*, device: torch.device | str = "cpu") -> PDQEncoder:
    """Build the ``pdq`` encoder."""
    import pdqhash  # noqa: F401  (fail early with ImportError if missing)

    return PDQEncoder().to(device)


def load_phash(*, device: torch.device | str = "cpu") -> PHashEncoder:
    """Build the ``phash`` encoder."""
    import imagehash  # noqa: F401

    return PHashEncoder().to(device)
