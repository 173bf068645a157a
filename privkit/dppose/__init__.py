"""Paper 2: differentially private 2D human pose estimation (Sivangi, Henderson, Deligianni, CVPR 2026).

* :mod:`~privkit.dppose.model`: pose networks with the paper's SimCC
  coordinate-classification head, Gaussian soft labels, the KL loss and
  arg-max decoding: ImageNet EfficientNet-Lite0 frozen up to stride 16 with a
  trainable neck (the default scale), a compact GroupNorm conv net, and the
  paper's TinyViT-5M backbone when its weights are given;
* :mod:`~privkit.dppose.features`: the frozen-feature cache of frozen fine-tuning (and its patch Grams);
* :mod:`~privkit.dppose.metrics`: PCKh (MPII conventions);
* :mod:`~privkit.dppose.grads`: per-sample gradients (torch.func or layer hooks),
  per-record clipping and the fast clipped sum;
* :mod:`~privkit.dppose.subspace`: the public gradient subspace (m x m Gram trick);
* :mod:`~privkit.dppose.train`: non-private, DP-SGD, projected DP-SGD, feature-DP
  and feature-projective DP trainers, each returning a privacy guarantee.
"""

from __future__ import annotations

from .features import CachedFeatures, cache_features, cache_input_grams
from .grads import (ClippedSum, add_gaussian_noise, clip_factors, clip_per_sample, clipped_grad_sum, flatten_grads,
                    patch_gram, per_sample_grads, per_sample_norms, trainable_parameters, unflatten_grads)
from .metrics import PCKhResult, pckh
from .model import (BACKBONES, NUM_JOINTS, ConvNeck, EfficientNetPyramid, PoseNet, build_pose_model, count_parameters,
                    decode_simcc, full_finetuning_state, simcc_kl_loss, simcc_targets)
from .subspace import PublicSubspace, public_subspace, public_subspace_from_model
from .train import (METHODS, DPSpec, GaussianBlur, PrivateTrainer, PublicSpec, Schedule, TrainResult, make_private,
                    evaluate_pckh, pose_batch, pose_loss, private_clipped_sum, train)

__all__ = ["BACKBONES", "CachedFeatures", "ConvNeck", "EfficientNetPyramid", "METHODS", "NUM_JOINTS", "ClippedSum",
           "GaussianBlur", "PCKhResult", "PoseNet", "PublicSubspace", "TrainResult", "add_gaussian_noise",
           "build_pose_model", "cache_features", "cache_input_grams", "clip_factors", "clip_per_sample",
           "clipped_grad_sum", "count_parameters", "decode_simcc", "evaluate_pckh", "flatten_grads",
           "full_finetuning_state", "patch_gram", "per_sample_grads", "per_sample_norms", "pckh", "pose_batch",
           "pose_loss", "private_clipped_sum", "public_subspace", "public_subspace_from_model", "simcc_kl_loss",
           "simcc_targets", "train", "make_private", "PrivateTrainer", "DPSpec", "PublicSpec", "Schedule",
           "trainable_parameters", "unflatten_grads"]
