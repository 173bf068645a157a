"""Frozen image encoders behind one interface and one registry.

>>> from privkit.encoders import encoder_table, load_encoder
>>> print(encoder_table())                       # doctest: +SKIP
>>> enc = load_encoder("dlib-resnet-fr")          # doctest: +SKIP
>>> z = enc.embed(images)  # (N, 3, H, W) in [0, 1] -> (N, 128) unit rows   # doctest: +SKIP

Default scale (offline, from installed packages): ``dlib-resnet-fr``, ``faceres`` and ``mobileface`` (face
recognition, the biometric references), ``efficientnet-lite0`` (ImageNet, the general-purpose role), ``mtcnn-onet``
and ``age-gender`` (face-trained, no identity labels), ``pdq`` and ``phash`` (perceptual hashes), ``pixels`` and
``ssl-small`` (privkit's own small self-supervised encoder). Paper scale (weights supplied by the reader):
``clip-vit-b16``, ``dinov2-vits14``, ``dinov2-vitb14``, ``sscd``. Pretrained pose models (MoveNet, EfficientPose)
sit behind :func:`load_pose_model` (:mod:`privkit.encoders.pose_models`).

Encoder modules are imported lazily by :func:`load_encoder`, so ``import privkit.encoders`` is cheap.
"""

from __future__ import annotations

from .base import ENCODER_KINDS, Encoder, EncoderKind, embed_images
from .pose_models import PoseModel, PoseModelInfo, PosePrediction, list_pose_models, load_pose_model, pose_model_table
from .registry import SCALES, EncoderInfo, encoder_names, encoder_table, list_encoders, load_encoder

__all__ = ["embed_images", "ENCODER_KINDS", "SCALES", "Encoder", "EncoderInfo", "EncoderKind", "encoder_names",
           "encoder_table", "list_encoders", "load_encoder", "PoseModel", "PoseModelInfo", "PosePrediction",
           "list_pose_models", "load_pose_model", "pose_model_table"]
