"""Reconstruction losses of SynthesisNet: L1 in pixel space plus a perceptual term on a frozen face network.

A plain L1 (or L2) reconstruction loss makes autoencoders and GAN generators average over what they cannot
predict, which blurs faces. A perceptual term compares images in the feature space of a fixed, pretrained network
instead (Johnson, Alahi & Fei-Fei 2016). privkit's choice for that network is the convolutional trunk of MTCNN's
ONet (``privkit.encoders.load_encoder("mtcnn-onet")``; weights from ``facenet-pytorch``): a real face network,
differentiable in torch, trained for face detection and landmarks, never on identities, and independent of both
judges. It is deliberately **not** ``ssl-small`` (the FID stand-in's feature space: training on it would bias FID)
and **not** dlib (the identity judge; not differentiable anyway).

:class:`ONetPerceptualLoss` resizes both images to ONet's 48 x 48 input (area interpolation), runs the first three
convolution blocks and returns the mean over blocks of the mean absolute feature difference, each block's
difference divided by the mean absolute activation of the target images in that block (so the three blocks weigh
alike).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from .._validate import check_choice, check_tensor
from ..errors import ShapeError

__all__ = ["PERCEPTUAL_NETWORKS", "ONetPerceptualLoss", "make_perceptual_loss"]

#: Perceptual loss networks: ``"onet"`` (MTCNN ONet's trunk) or ``"none"`` (pixel L1 only).
PERCEPTUAL_NETWORKS: tuple[str, ...] = ("onet", "none")
_ONET_SIZE = 48


class ONetPerceptualLoss(nn.Module):
    """Feature-space L1 between two image batches in ``[-1, 1]`` under MTCNN ONet's first three conv blocks.

    The ONet weights are frozen (no gradient to them); gradients flow to the first argument.

    Args:
        device: where to put the network.

    Raises:
        MissingResourceError: ``facenet-pytorch``'s ONet weights are not installed.
    """

    def __init__(self, *, device: torch.device | str = "cpu"):
        super().__init__()
        from ..encoders import load_encoder

        # Module constructors draw default initialisations from the global RNG (then overwritten by the loaded
        # weights): fork it so that building the loss leaves the caller's global RNG state untouched.
        with torch.random.fork_rng(devices=[]):
            trunk = load_encoder("mtcnn-onet", device="cpu").trunk
        self.blocks = nn.ModuleList([
            nn.Sequential(trunk.conv1, trunk.prelu1),
            nn.Sequential(nn.MaxPool2d(3, 2, ceil_mode=True), trunk.conv2, trunk.prelu2),
            nn.Sequential(nn.MaxPool2d(3, 2, ceil_mode=True), trunk.conv3, trunk.prelu3),
        ])
        self.requires_grad_(False)
        self.eval()
        self.to(device)

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """ONet block activations of ``x`` ``(N, 3, H, W)`` in ``[-1, 1]``."""
        check_tensor("x", x, ndim=4, floating=True)
        if x.shape[1] != 3:
            raise ShapeError(f"x must have 3 channels, got shape {tuple(x.shape)}")
        # ONet's input scaling (255 x - 127.5) / 128 of [0, 1] images is ~ the [-1, 1] range; the Caffe network
        # was trained on transposed images, hence the transpose.
        h = F.interpolate(x, size=(_ONET_SIZE, _ONET_SIZE), mode="area").transpose(2, 3) * (127.5 / 128.0)
        out = []
        for block in self.blocks:
            h = block(h)
            out.append(h)
        return out

    def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """Mean over blocks of ``mean |f(output) - f(target)| / mean |f(target)|`` (a scalar)."""
        if output.shape != target.shape:
            raise ShapeError(f"output and target must have the same shape, got {tuple(output.shape)} and "
                             f"{tuple(target.shape)}")
        fo = self.features(output)
        with torch.no_grad():
            ft = self.features(target)
        terms = [(a - b).abs().mean() / b.abs().mean().clamp_min(1e-6) for a, b in zip(fo, ft)]
        return torch.stack(terms).mean()


def make_perceptual_loss(name: Literal["onet", "none"], *, device: torch.device | str = "cpu") -> nn.Module | None:
    """The perceptual loss network ``name`` on ``device`` (``None`` for ``"none"``)."""
    check_choice("perceptual", name, PERCEPTUAL_NETWORKS)
    return None if name == "none" else ONetPerceptualLoss(device=device)
