"""SynthesisNet (paper 4): face publishing with metric-DP identity latents and a DCGAN with an auxiliary classifier.

Shen, Wang, Tian, Cui — a Chinese journal paper on privacy-preserving face-image publishing. Its full text could
not be obtained; privkit follows the design described in its summary (see ``docs/synthesisnet.md``,
§1-§9): a convolutional autoencoder splits a face into identity and attribute latents, metric-DP (multivariate
Laplace) noise perturbs the identity latent, and a DCGAN generator whose discriminator carries an auxiliary
attribute classifier re-synthesises the face. Every quantitative choice (latent sizes, clip norm, loss weights,
training schedule) is privkit's, marked as such in the docstrings; no paper numbers exist to compare with.

- :mod:`~privkit.synthesisnet.models`: ``Enc_id``/``Enc_att``/``Dec`` (:class:`IdentityEncoder`,
  :class:`AttributeEncoder`, :class:`Decoder`), :class:`Generator`, :class:`Discriminator`.
- :mod:`~privkit.synthesisnet.privatize`: :func:`privatize_identity` (clip + one multivariate-Laplace draw per row)
  and its :class:`~privkit.privacy.PrivacyGuarantee`.
- :mod:`~privkit.synthesisnet.pipeline`: :class:`SynthesisNet` (``fit``, ``encode``, ``publish``, ``save``/``load``)
  and :class:`SynthesisNetConfig` (with the ablations: no noise, no auxiliary classifier, noise on the whole
  latent).
- :mod:`~privkit.synthesisnet.data`: :func:`aligned_faces` (CelebA-style aligned face crops of any face set).
- :mod:`~privkit.synthesisnet.losses`: :class:`ONetPerceptualLoss` (the perceptual reconstruction term).
- :mod:`~privkit.synthesisnet.baselines`: :func:`anonymize` (blur, pixelate, mask).
- :mod:`~privkit.synthesisnet.metrics`: :func:`fid`, :func:`inception_score`, :func:`identity_distance`,
  :func:`reidentification_rate`, :func:`attribute_preservation`, :func:`features_for_fid`, :func:`load_inception`,
  :func:`frechet_distance_from_samples`.
- :mod:`~privkit.studies.synthesisnet.experiments`: the notebook's protocol (splits, judges: ``faceres`` with its
  gender/age heads, dlib, the model's own encoder; FID/IS in ``efficientnet-lite0`` space; closing checks).
"""

from __future__ import annotations

from .baselines import BASELINES, DEFAULT_STRENGTH, anonymize
from .data import aligned_faces, square_crop_boxes
from .losses import PERCEPTUAL_NETWORKS, ONetPerceptualLoss
from .metrics import (AttributePreservationResult, FIDResult, IdentityDistanceResult, InceptionScoreResult,
                      InceptionV3Features, ReidentificationResult, attribute_preservation, features_for_fid, fid,
                      frechet_distance, frechet_distance_from_samples, identity_distance,
                      identity_distance_from_embeddings, inception_score, load_inception,
                      reidentification_from_embeddings, reidentification_rate)
from .models import AttributeEncoder, Dec, Decoder, Discriminator, Enc_att, Enc_id, Generator, IdentityEncoder
from .pipeline import NOISE_MODES, SynthesisNet, SynthesisNetConfig
from .privatize import (angle_after_noise, clip_rows, default_clip_norm, metric_guarantee, noise_radius_mean,
                        privatize_identity, privatize_latent)

__all__ = ["SynthesisNet", "SynthesisNetConfig", "aligned_faces", "square_crop_boxes", "ONetPerceptualLoss",
           "PERCEPTUAL_NETWORKS", "NOISE_MODES", "IdentityEncoder", "AttributeEncoder", "Decoder", "Generator",
           "Discriminator", "Enc_id", "Enc_att", "Dec", "privatize_identity", "privatize_latent", "metric_guarantee",
           "clip_rows", "default_clip_norm", "noise_radius_mean", "angle_after_noise", "BASELINES", "DEFAULT_STRENGTH",
           "anonymize", "fid", "frechet_distance", "frechet_distance_from_samples", "inception_score",
           "features_for_fid", "load_inception", "InceptionV3Features", "identity_distance",
           "identity_distance_from_embeddings", "reidentification_rate", "reidentification_from_embeddings",
           "attribute_preservation", "FIDResult", "InceptionScoreResult", "IdentityDistanceResult",
           "ReidentificationResult", "AttributePreservationResult"]
