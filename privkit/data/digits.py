"""Handwritten digits from scikit-learn, as small RGB image tensors.

``sklearn.datasets.load_digits`` ships with scikit-learn (1,797 real 8x8 grey-level scans of handwritten
digits, UCI "Optical Recognition of Handwritten Digits", 16 grey levels), so it works offline. privkit uses it
as a small real image-classification set where the papers use CIFAR-scale data.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._validate import check_int

__all__ = ["load_digits_images", "DIGITS_N_CLASSES"]

#: The ten digit classes 0..9.
DIGITS_N_CLASSES = 10


def load_digits_images(*, size: int = 32, seed: int | None = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Load scikit-learn's handwritten digits as (N, 3, size, size) images.

    The 8x8 scans (integer ink levels 0..16, ink bright on a dark background) are divided by 16 to lie in
    [0, 1], upsampled with bilinear interpolation (``align_corners=False``, which never overshoots the input
    range) and repeated over three channels, so they can be fed to RGB encoders.

    Args:
        size: output height and width in pixels, in [8, 1024].
        seed: rows are returned in an order permuted by ``torch.Generator().manual_seed(seed)``, so that a
            prefix of any length is a random, roughly class-balanced sample. ``None`` keeps scikit-learn's
            order.

    Returns:
        ``(images, labels)``: images (N, 3, size, size) float32 in [0, 1] with N = 1797; labels (N,) int64
        digit classes 0..9.

    Raises:
        InvalidArgumentError: ``size`` outside [8, 1024] or ``seed`` not an integer.
    """
    size = check_int("size", size, minimum=8, maximum=1024)
    if seed is not None:
        seed = check_int("seed", seed)
    from sklearn.datasets import load_digits

    bunch = load_digits()
    raw = torch.as_tensor(bunch.images, dtype=torch.float32) / 16.0  # (N, 8, 8)
    labels = torch.as_tensor(bunch.target, dtype=torch.int64)
    x = raw.unsqueeze(1)
    if size != 8:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    images = x.clamp_(0.0, 1.0).expand(-1, 3, -1, -1).contiguous()
    if seed is not None:
        order = torch.randperm(images.shape[0], generator=torch.Generator().manual_seed(seed))
        images, labels = images[order], labels[order]
    return images, labels
