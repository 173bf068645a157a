"""Frozen-feature cache of the frozen fine-tuning regime (paper 2's frozen backbone stages).

In frozen fine-tuning the front of the network (:attr:`PoseNet.frozen <privkit.dppose.model.PoseNet>`) has no
trainable parameter and is deterministic, so its output for an image is the same at every step of every run.
:func:`cache_features` computes it once per image (in chunks; optionally into a memory-mapped ``.npy`` file for
sets the size of MPII) and returns a :class:`CachedFeatures` set, which :func:`privkit.dppose.train.train`,
:func:`~privkit.dppose.train.evaluate_pckh` and the per-sample gradient code accept wherever they accept a
:class:`~privkit.data.types.PoseSet`: a step then only runs the trainable part.  The gradients are the same as
recomputing the frozen part on the image (tested), so the privacy analysis is unchanged: a record is still one
image with its keypoints, clipped once per step.

For the feature-DP methods the blurred public view ``psi(x)`` of each private image must be cached too
(``cache_features(model, private_set, transform=psi)``): pass it to ``train(..., blurred_set=...)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .._validate import check_int
from ..data.types import PoseSet
from ..errors import InvalidArgumentError, ShapeError

__all__ = ["CachedFeatures", "cache_features"]


@dataclass
class CachedFeatures(PoseSet):
    """A :class:`~privkit.data.types.PoseSet` whose ``images`` hold the frozen part's output, not pixels.

    Attributes:
        images: (N, C, h, w) float32 features (:attr:`PoseNet.feature_shape`); a memory-mapped tensor when
            the cache was written to disk.
        input_size: ``(H, W)`` of the images the features were computed from (keypoints are in their pixels).
        feature_of: a description of the frozen part and of the transform applied before it.
    """

    input_size: tuple[int, int] = (0, 0)
    feature_of: str = ""

    def subset(self, index: torch.Tensor) -> "CachedFeatures":
        return CachedFeatures(
            images=self.images[index], keypoints=self.keypoints[index], visible=self.visible[index],
            head_box=self.head_box[index], identity=self.identity[index], name=self.name, meta=dict(self.meta),
            input_size=self.input_size, feature_of=self.feature_of,
        )


def cache_features(
    model: nn.Module,
    data: PoseSet,
    *,
    transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
    batch_size: int = 128,
    path: str | Path | None = None,
) -> CachedFeatures:
    """Run ``model``'s frozen part once over ``data`` (optionally ``transform``-ed first, e.g. the blur ``psi``).

    Args:
        model: a :class:`~privkit.dppose.model.PoseNet` with a frozen part (``freeze_backbone=True``).
        data: images (N, 3, H, W) in [0, 1] at the model's input size.
        transform: applied to each chunk of images before the frozen part (e.g. a
            :class:`~privkit.dppose.train.GaussianBlur`).
        batch_size: images per chunk (bounds the memory of the forward passes).
        path: if given, the features are written chunk by chunk into this ``.npy`` file (float32) and
            returned memory-mapped, so a set larger than memory can be cached; the file is replaced
            atomically when complete.

    Returns:
        The :class:`CachedFeatures` (same keypoints, visibility, head boxes and identities as ``data``).

    Raises:
        InvalidArgumentError: ``model`` has no frozen part, ``data`` is not a PoseSet, a bad ``batch_size``.
        ShapeError: images of another size than the model's input.
    """
    if not isinstance(data, PoseSet) or isinstance(data, CachedFeatures):
        raise InvalidArgumentError(f"data must be a PoseSet of images, got {type(data).__name__}")
    if getattr(model, "frozen", None) is None or not hasattr(model, "features"):
        raise InvalidArgumentError("model must be a PoseNet with a frozen part (build_pose_model(..., "
                                   "backbone='efficientnet_lite0', freeze_backbone=True))")
    bs = check_int("batch_size", batch_size, minimum=1)
    if data.images.ndim != 4 or data.images.shape[1] != 3 or tuple(data.images.shape[-2:]) != tuple(model.input_size):
        raise ShapeError(f"data.images must have shape (N, 3, {model.input_size[0]}, {model.input_size[1]}), "
                         f"got {tuple(data.images.shape)}")
    n = len(data)
    shape = tuple(model.feature_shape)
    was_training = model.training
    model.eval()
    try:
        def chunk(i: int) -> torch.Tensor:
            x = data.images[i:i + bs]
            if transform is not None:
                x = transform(x.to(model.mean.device))
            return model.features(x, batch_size=bs).to("cpu", torch.float32)

        if path is None:
            feats = torch.empty((n, *shape), dtype=torch.float32)
            for i in range(0, n, bs):
                feats[i:i + bs] = chunk(i)
        else:
            target = Path(path)
            if target.suffix != ".npy":
                raise InvalidArgumentError(f"path must end in .npy, got {str(target)!r}")
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            os.close(fd)
            try:
                mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, *shape))
                for i in range(0, n, bs):
                    mm[i:i + bs] = chunk(i).numpy()
                mm.flush()
                del mm
                os.replace(tmp, target)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
            feats = torch.from_numpy(np.load(str(target), mmap_mode="r+"))
    finally:
        model.train(was_training)
    what = type(model.frozen).__name__ + ("" if transform is None else f" after {transform!r}")
    return CachedFeatures(
        images=feats, keypoints=data.keypoints, visible=data.visible, head_box=data.head_box,
        identity=data.identity, name=data.name, meta=dict(data.meta), input_size=tuple(model.input_size),
        feature_of=what,
    )
