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

The first trainable layer then always sees the same input for a record, so the Gram matrix of that input's
patches can be cached as well (:func:`cache_input_grams`, :func:`privkit.dppose.grads.patch_gram`): a private
step then gets that layer's per-sample gradient norms from a ``T x T`` product per record (``T`` output
positions) instead of forming its per-sample weight gradients, and its clipped sum from one ordinary
weight-gradient convolution.  Same clipped sum up to rounding (tested); ``N T^2`` floats of memory (1 GiB per
4,096 records at ``T = 256``, i.e. 128 px images at stride 8).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
import os
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

from .._validate import check_int, check_positive
from ..data.types import PoseSet
from ..errors import InvalidArgumentError, ShapeError
from .grads import _gram_layer_ok, patch_gram

__all__ = ["CachedFeatures", "cache_features", "cache_input_grams", "first_trainable_layer"]


@dataclass
class CachedFeatures(PoseSet):
    """A :class:`~privkit.data.types.PoseSet` whose ``images`` hold the frozen part's output, not pixels.

    Attributes:
        images: (N, C, h, w) float32 features (:attr:`PoseNet.feature_shape`); a memory-mapped tensor when
            the cache was written to disk.
        input_size: ``(H, W)`` of the images the features were computed from (keypoints are in their pixels).
        feature_of: a description of the frozen part and of the transform applied before it.
        grams: None, or (N, T, T) float32: the :func:`~privkit.dppose.grads.patch_gram` of each record's features
            for the model's first trainable layer (:func:`cache_input_grams`), row for row with ``images``.
        grams_for: the name of that layer in the model (``model.get_submodule(grams_for)``).
    """

    input_size: tuple[int, int] = (0, 0)
    feature_of: str = ""
    grams: torch.Tensor | None = None
    grams_for: str = ""

    def subset(self, index: torch.Tensor) -> "CachedFeatures":
        return CachedFeatures(**vars(super().subset(index)), input_size=self.input_size, feature_of=self.feature_of,
                              grams=None if self.grams is None else self.grams[index], grams_for=self.grams_for)


def cache_features(model: nn.Module, data: PoseSet, *, transform: Callable[[torch.Tensor], torch.Tensor] | None = None,
                   batch_size: int = 128, path: str | Path | None = None) -> CachedFeatures:
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
    pose = {f.name: getattr(data, f.name) for f in fields(PoseSet)} | {"images": feats, "meta": dict(data.meta)}
    return CachedFeatures(**pose, input_size=tuple(model.input_size), feature_of=what)


def first_trainable_layer(model: nn.Module) -> tuple[str, nn.Conv2d]:
    """``(name, layer)``: the layer of ``model``'s trainable part that receives the frozen features unchanged.

    Found by running the trainable part (``model.forward_features``) on one zero feature map and watching which
    trainable ``nn.Conv2d`` is called on that very tensor.

    Raises:
        InvalidArgumentError: ``model`` has no frozen part, or the features do not go straight into a plain
            ``nn.Conv2d`` (groups 1, numeric zero padding) with a trainable weight.
    """
    if getattr(model, "frozen", None) is None or not hasattr(model, "forward_features"):
        raise InvalidArgumentError("model must be a PoseNet with a frozen part (build_pose_model(..., "
                                   "backbone='efficientnet_lite0', freeze_backbone=True))")
    p = next((q for q in model.parameters() if q.requires_grad), None)
    if p is None:
        raise InvalidArgumentError("model has no trainable parameters")
    probe = torch.zeros((1, *model.feature_shape), dtype=p.dtype, device=p.device)
    names = {id(m): n for n, m in model.named_modules()}
    hit: list[nn.Module] = []

    def hook(module, inputs, output):
        if inputs and inputs[0] is probe:
            hit.append(module)

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, nn.Module) and m is not model and getattr(m, "weight", None) is not None]
    try:
        with torch.no_grad():
            model.forward_features(probe)
    finally:
        for h in handles:
            h.remove()
    if len(hit) != 1 or not _gram_layer_ok(hit[0]) or not hit[0].weight.requires_grad:
        what = ", ".join(type(m).__name__ for m in hit) or "no layer with weights"
        raise InvalidArgumentError(
            f"the frozen features must go straight into one plain nn.Conv2d with a trainable weight (groups 1, "
            f"numeric zero padding) for cache_input_grams; they go into: {what}")
    return names[id(hit[0])], hit[0]


def cache_input_grams(model: nn.Module, features: CachedFeatures, *, batch_size: int = 256,
                      max_gib: float = 6.0) -> CachedFeatures:
    """``features`` with the Gram matrices of their patches for ``model``'s first trainable layer attached.

    Each record's Gram (:func:`~privkit.dppose.grads.patch_gram`, ``T x T`` for ``T`` output positions of the
    layer) depends on its features only, which never change in frozen fine-tuning, so it is computed once here and
    reused at every private step of every run (:func:`privkit.dppose.train.train` uses it when the private set
    carries it).  Exact: the clipped sums equal those without the Grams up to rounding.

    Args:
        model: the PoseNet the features were cached with.
        features: its :class:`CachedFeatures` (e.g. the private set).
        batch_size: records per chunk.
        max_gib: refuse to allocate more than this many GiB (``N T^2`` float32); at MPII's 256 x 256 input the
            layer has ``T = 1024`` positions, 4 MiB per record, and training without Grams is the better choice.

    Returns:
        A new :class:`CachedFeatures` sharing ``features``' tensors, with ``grams`` and ``grams_for`` set.

    Raises:
        InvalidArgumentError: ``features`` is not a CachedFeatures, the model's first trainable layer is not a
            plain convolution (:func:`first_trainable_layer`), or the Grams would exceed ``max_gib``.
        ShapeError: features of another shape than the model's frozen part gives.
    """
    if not isinstance(features, CachedFeatures):
        raise InvalidArgumentError(
            f"features must be CachedFeatures (cache_features(...)), got {type(features).__name__}")
    bs = check_int("batch_size", batch_size, minimum=1)
    limit = check_positive("max_gib", max_gib)
    name, layer = first_trainable_layer(model)
    if tuple(features.images.shape[1:]) != tuple(model.feature_shape):
        raise ShapeError(f"features.images must have shape (N, {', '.join(map(str, model.feature_shape))}), "
                         f"got {tuple(features.images.shape)}")
    n = len(features)
    dev = layer.weight.device
    t = patch_gram(layer, torch.zeros((1, *model.feature_shape), device=dev)).shape[-1]
    need = n * t * t * 4 / 2**30
    if need > limit:
        raise InvalidArgumentError(
            f"the input Grams of {n} records at T = {t} output positions need {need:.2f} GiB, more than "
            f"max_gib = {limit:g}; raise max_gib or train without them (same result, a slower private step)")
    grams = torch.empty((n, t, t), dtype=torch.float32)
    with torch.no_grad():
        for i in range(0, n, bs):
            x = torch.as_tensor(features.images[i:i + bs]).to(dev, torch.float32)
            grams[i:i + bs] = patch_gram(layer, x).to("cpu", torch.float32)
    return replace(features, meta=dict(features.meta), grams=grams, grams_for=name)
