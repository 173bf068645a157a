"""MTCNN's output network (ONet) as a face encoder that was never trained on identities (``mtcnn-onet``).

ONet is the third stage of the MTCNN face detector (Zhang et al., 2016): given a 48×48 face crop it predicts
face/non-face, a box correction and five landmarks. Its 256-D penultimate activations (after ``dense5`` and its
PReLU) are a real face-trained feature with no identity supervision, privkit's "face but not identity"
reference.

The weights are the ones shipped by ``facenet-pytorch`` 2.6.0 in ``facenet_pytorch/data/onet.pt`` (a plain
state dict). ``facenet-pytorch`` pins old torch/numpy versions in its metadata, so it is installed with
``pip install --no-deps facenet-pytorch==2.6.0``; privkit does not import it (its ``__init__`` pulls in
``requests`` and the InceptionResnetV1 downloader) but locates the weight file with
:func:`importlib.util.find_spec` and loads it into :class:`ONetTrunk`, a re-implementation of the ONet layers
up to the penultimate layer, with ``torch.load(..., weights_only=True)``.

Input handling (as MTCNN's third stage does it): each face box is made square around its centre (side = the
longer box side), clipped to the image, cropped and resized to 48×48 with area interpolation; without boxes
the whole image is resized to 48×48. Pixels are scaled as ``(255·x − 127.5) / 128``. Pure torch: runs on the
encoder's device (GPU when available). No detection runs, so ``failures_to_enrol`` stays 0.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

from ..errors import MissingResourceError
from ..transforms import square_frames
from .base import Encoder, package_file
from .dlib_fr import check_boxes

__all__ = ["ONetTrunk", "MtcnnONetEncoder", "onet_weights_path", "load_mtcnn_onet"]

ONET_SIZE = 48


class ONetTrunk(nn.Module):
    """MTCNN ONet up to its 256-D penultimate layer (parameter names match ``facenet-pytorch``'s ONet)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=3)
        self.prelu1 = nn.PReLU(32)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=3)
        self.prelu2 = nn.PReLU(64)
        self.conv3 = nn.Conv2d(64, 64, kernel_size=3)
        self.prelu3 = nn.PReLU(64)
        self.conv4 = nn.Conv2d(64, 128, kernel_size=2)
        self.prelu4 = nn.PReLU(128)
        self.dense5 = nn.Linear(128 * 3 * 3, 256)
        self.prelu5 = nn.PReLU(256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, 48, 48) normalised crops -> (B, 256) penultimate activations."""
        x = F.max_pool2d(self.prelu1(self.conv1(x)), 3, 2, ceil_mode=True)
        x = F.max_pool2d(self.prelu2(self.conv2(x)), 3, 2, ceil_mode=True)
        x = F.max_pool2d(self.prelu3(self.conv3(x)), 2, 2, ceil_mode=True)
        x = self.prelu4(self.conv4(x))
        # The original (Caffe) network was trained on transposed images: its dense layer reads the feature
        # map in (W, H, C) order, so the flattening must follow that order for the weights to be meaningful.
        x = x.permute(0, 3, 2, 1).reshape(x.shape[0], -1)
        return self.prelu5(self.dense5(x))


def onet_weights_path() -> Path | None:
    """Path of ``facenet_pytorch/data/onet.pt`` in the installed package (not imported), or ``None``."""
    return package_file("facenet_pytorch", "data", "onet.pt")


def square_crops(images: torch.Tensor, boxes: torch.Tensor | None, size: int) -> torch.Tensor:
    """Square the boxes around their centres, clip them to the image, crop and resize to ``size``².

    Args:
        images: (B, 3, H, W) float tensor.
        boxes: (B, 4) xyxy pixel boxes or ``None`` for the whole image.
        size: output side.

    Returns:
        (B, 3, size, size) tensor (area interpolation, as MTCNN's resampling).
    """
    if boxes is None:
        return F.interpolate(images, size=(size, size), mode="area")
    _, _, h, w = images.shape
    cx, cy, side = square_frames(boxes)
    x0 = (cx - side / 2).floor().clamp(0, w - 1).long().tolist()
    y0 = (cy - side / 2).floor().clamp(0, h - 1).long().tolist()
    x1 = (cx + side / 2).ceil().clamp(1, w).long().tolist()
    y1 = (cy + side / 2).ceil().clamp(1, h).long().tolist()
    crops = []
    for i in range(images.shape[0]):
        xa, xb = x0[i], max(x1[i], x0[i] + 1)
        ya, yb = y0[i], max(y1[i], y0[i] + 1)
        crops.append(F.interpolate(images[i : i + 1, :, ya:yb, xa:xb], size=(size, size), mode="area"))
    return torch.cat(crops)


class MtcnnONetEncoder(Encoder):
    """256-D penultimate features of MTCNN's ONet (face-trained, no identity labels)."""

    name = "mtcnn-onet"
    dim = 256
    input_size = (ONET_SIZE, ONET_SIZE)
    kind = "face-nonidentity"
    description = "MTCNN ONet penultimate 256-D features of the 48x48 face crop (detector net, no identity training)"

    def __init__(self, state_dict: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.trunk = ONetTrunk()
        trunk_keys = set(self.trunk.state_dict())
        missing = trunk_keys - set(state_dict)
        if missing:
            raise MissingResourceError(
                f"ONet weights with parameters {sorted(missing)}",
                expected_at="facenet_pytorch/data/onet.pt",
                how_to_get="Reinstall with `pip install --no-deps facenet-pytorch==2.6.0`.",
            )
        self.trunk.load_state_dict({k: v for k, v in state_dict.items() if k in trunk_keys})

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        if boxes is not None:
            check_boxes(boxes)
        crops = square_crops(images, boxes, ONET_SIZE)
        return self.trunk((crops * 255.0 - 127.5) / 128.0)


def load_mtcnn_onet(*, device: torch.device | str = "cpu") -> MtcnnONetEncoder:
    """Build ``mtcnn-onet`` from the weight file of the installed ``facenet-pytorch``.

    Raises:
        MissingResourceError: ``facenet-pytorch`` (or its ``data/onet.pt``) is not installed.
    """
    path = onet_weights_path()
    if path is None:
        raise MissingResourceError(
            "MTCNN ONet weights (facenet_pytorch/data/onet.pt)",
            expected_at="<site-packages>/facenet_pytorch/data/onet.pt",
            how_to_get="Install them with `pip install --no-deps facenet-pytorch==2.6.0` "
            "(--no-deps: its metadata pins torch<2.3 and numpy<2, which privkit does not need).",
        )
    state = torch.load(path, map_location="cpu", weights_only=True)
    return MtcnnONetEncoder(state).to(device)
