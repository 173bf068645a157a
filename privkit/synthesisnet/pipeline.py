"""The SynthesisNet pipeline: train the autoencoder and the GAN, encode, publish with metric-DP identity noise.

Design (after the SynthesisNet paper's summary; everything marked *privkit* is privkit's choice where the paper,
whose full text could not be obtained, is silent — see ``docs/synthesisnet.md`` §1, §9):

1. **Autoencoder** (pre-training). ``Enc_id`` and ``Enc_att`` split a face ``x`` (scaled to ``[-1, 1]``) into an
   identity latent ``z_id`` and an attribute latent ``z_att``; ``Dec`` reconstructs ``x``. Loss (privkit weights)::

       L_AE = lambda_ae_rec |x - Dec(z_id, z_att)|_1 + lambda_id CE(identity | z_id)
              + lambda_att mean_a CE(attribute_a | z_att) + lambda_adv CE(identity | GRL(z_att))

   The last term is an identity adversary on ``z_att`` behind a gradient-reversal layer: the adversary learns to
   read identity from ``z_att`` and the encoder learns to defeat it, keeping identity out of ``z_att``.
   [I] The adversary only sees the *training* identities: once it is at chance (in privkit's default runs within
   a few epochs) it stops pushing, while a nearest-neighbour attacker on unseen faces can still find identity in a
   large ``z_att``. What bounds that leak in practice is the size of ``z_att`` (``att_dim``, 8 at the default
   scale, where the attributes are a few discrete labels); measure it with
   :func:`privkit.studies.synthesisnet.experiments.latent_identity_leakage` on faces outside the training set.
2. **Metric-DP noise** (:mod:`privkit.synthesisnet.privatize`) on ``z_id`` at publishing time only (*privkit*: the
   paper's summary does not say whether noise is also used in training). ``z_id`` lies on the sphere of radius
   ``clip_norm`` (so clipping is a no-op for encoder outputs); after the noise it is projected back onto that
   sphere (``project_noisy``, *privkit*; post-processing, so the guarantee is unchanged), which keeps the
   generator's input on the manifold it was trained on.
3. **GAN**: a DCGAN generator ``G(z~_id, z_att)`` (initialised from ``Dec``, *privkit*) and a discriminator whose
   trunk is shared with an auxiliary attribute classifier (separate last layers), spectrally normalised by default
   (*privkit*, see ``discriminator_norm``). Losses (defaults of ``docs/synthesisnet.md`` §5)::

       L_D = BCE(D(x), 1) + BCE(D(G), 0) + lambda_cls CE(C(x), a) + lambda_cls_fake CE(C(G), a)
       L_G = BCE(D(G), 1) + lambda_rec |x - G|_1 + lambda_cls CE(C(G), a)

   with ``lambda_cls = 1``, ``lambda_rec = 10`` and ``lambda_cls_fake = 0`` (``docs/synthesisnet.md`` §5:
   the classifier learns from real images only; ACGAN also trains it on generated images, ``lambda_cls_fake > 0``).
   With probability ``swap_prob`` a sample's ``z_id`` is taken from another image of the batch (the summary's "randomly
   pick two faces and combine their identity and attributes"); such samples get no reconstruction term. Published
   latents are never the training latents, so this teaches ``G`` to render unseen identity/attribute pairs. With
   probability ``noise_prob`` a sample's latent is privatised as at publishing time (ε log-uniform in
   ``train_epsilons``, *privkit*), again without a reconstruction term: the generator must then turn a noisy
   identity latent — at small ε a nearly random point of the sphere — into a realistic face that keeps the
   attributes, which is what the auxiliary classifier is for.

Ablations (options of :class:`SynthesisNetConfig`): ``noise="none"`` (no DP noise; the guarantee says so),
``auxiliary_classifier=False`` (a FaceDCGAN-like discriminator without classifier), ``noise="whole"`` (the noise
goes on the concatenated ``(z_id, z_att)``, clipped to ``sqrt(clip_norm^2 + att_radius^2)``).

What the guarantee covers: the identity latent, for a fixed attribute latent (``noise="identity"``). The attribute
latent is published without noise; whatever identity it still carries is not covered. The networks are trained
without DP: publish faces that were not in the training set (identity-disjoint split), since the weights may
memorise training faces.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from dp_accounting import NonPrivateDpEvent
from torch import nn
from torch.nn import functional as F

from .._validate import (check_choice, check_epsilon, check_int, check_nonnegative, check_positive, check_probability,
                         check_tensor)
from ..data.types import FaceSet
from ..device import resolve_device
from ..errors import InsufficientDataError, InvalidArgumentError, PrivkitError, ShapeError, UnknownNameError
from ..privacy import Neighbouring, PrivacyGuarantee
from .models import (DISCRIMINATOR_NORMS, UPSAMPLE_MODES, AttributeEncoder, CosineClassifier, Decoder, Discriminator,
                     Generator, IdentityAdversary, IdentityEncoder, MultiHeadClassifier, check_image_size, grad_reverse,
                     identity_attribute_directions, init_weights, project_to_sphere)
from .losses import PERCEPTUAL_NETWORKS, make_perceptual_loss
from .privatize import CLIP_NORM_PER_DIM, privatize_latent

__all__ = ["NOISE_MODES", "SynthesisNetConfig", "SynthesisNet", "FORMAT"]

#: The networks trained in the autoencoder phase (copied by ``fit(..., autoencoder_from=...)``).
_AUTOENCODER_MODULES = ("id_encoder", "att_encoder", "decoder", "id_classifier", "att_classifier", "id_adversary")

NoiseMode = Literal["identity", "none", "whole"]
NOISE_MODES: tuple[str, ...] = ("identity", "none", "whole")
FORMAT = "privkit.synthesisnet/1"
_WEIGHTS = "model.safetensors"
#: Pixels are clamped to this magnitude before ``atanh`` in the linear path's least-squares start.
_ATANH_CLAMP = 0.95
_META = "config.json"


@dataclass(frozen=True)
class SynthesisNetConfig:
    """Architecture, privacy and training settings of :class:`SynthesisNet` (frozen).

    Attributes:
        image_size: input/output side, a power of two (64 default; 128 the paper's scale).
        width: channels of the first encoder/discriminator layer and last generator layer (64 at paper scale;
            32 or 16 keep CPU training at 64x64 to minutes).
        id_dim: identity latent size ``d_id`` (privkit: 16).
        att_dim: attribute latent size (privkit: 32). [I] ``z_att`` is published without noise and is not covered
            by the guarantee, so keep it just large enough for the attributes: at the default scale (a few discrete
            labels) privkit uses 8, because larger attribute latents carried identity of unseen faces past the
            adversary (see ``att_dim`` in :mod:`privkit.studies.synthesisnet.presets`).
        clip_norm: radius of the identity latents = clip norm of the metric-DP mechanism; ``None`` means
            ``10 * id_dim`` (puts the kept/hidden transition at ε ≈ 0.1, see :mod:`~privkit.synthesisnet.privatize`).
        att_radius: radius of the attribute latents; ``None`` means ``10 * att_dim``.
        noise: ``"identity"`` (the method), ``"none"`` (ablation: no noise) or ``"whole"`` (ablation: noise on the
            concatenated latent).
        auxiliary_classifier: whether the discriminator has the auxiliary attribute classifier (False: the
            FaceDCGAN-like ablation).
        discriminator_norm: ``"spectral"`` (privkit's default: spectrally normalised convolutions without
            InstanceNorm) or ``"instance"`` (InstanceNorm from layer 2, the paper-literal reading). In privkit's
            CPU-scale trials on synthfaces (64x64, width 16, 720 training images, 10 GAN epochs) the InstanceNorm
            discriminator won quickly (93-99 % of fakes rejected) and the generator drifted from the decoder into
            colour speckle textures, also with lambda_rec = 50 or lr = 5e-5; with spectral normalisation the
            game stayed more balanced (82-89 % rejected, 62 % of reals accepted) and the images stayed close to
            the decoder's, with fewer artefacts.
        project_noisy: project noisy latents back onto their spheres before the generator (post-processing).
        attributes: attribute names (keys of ``FaceSet.attributes``) the attribute latent and the auxiliary
            classifier predict; ``None`` means all of the training set's attributes, sorted.
        swap_prob: probability that a GAN training sample gets another image's identity latent.
        noise_prob: probability that a GAN training sample's identity latent is replaced by a privatised one, as
            at publishing time (``config.noise``'s mechanism, projected onto the sphere), at an ε drawn
            log-uniformly from ``train_epsilons`` per batch [I]. Such samples get no reconstruction term, only the
            adversarial and auxiliary-classifier terms, so ``G`` learns to render a realistic face that keeps the
            attributes for *any* point of the identity sphere — at small ε the noisy latent is a nearly random
            direction, far from every training latent, and a generator trained only on encoder outputs renders
            it as colour noise. 0 (the default) trains on encoder outputs only. Noise in training is not a
            privacy mechanism (the training faces get no guarantee either way).
        train_epsilons: ``(low, high)`` range of the training-time ε (default the paper's sweep, 0.01 .. 1).
        lr, beta1, beta2: Adam settings of the GAN phase (2e-4, 0.5, 0.999: DCGAN's).
        lr_ae: Adam learning rate of the autoencoder phase (privkit: 1e-3, same betas; a plain autoencoder
            tolerates a larger step than a GAN, which matters for CPU-scale training).
        lambda_ae_rec, lambda_id, lambda_att, lambda_adv: autoencoder loss weights (L1 reconstruction, identity
            CE on ``z_id``, attribute CE on ``z_att``, reversed-gradient identity adversary on ``z_att``).
        lambda_rec, lambda_cls, lambda_cls_fake: GAN loss weights (generator L1 reconstruction, attribute
            classification of generated images for G and of real images for the classifier, classifier loss on
            generated images).
        id_logit_scale: scale of the cosine identity classifier's logits.
        init_generator_from_decoder: start G from the trained decoder's weights.
        upsample: upsampling of the decoder and the generator: ``"resize"`` (privkit's default: nearest x2 +
            ``Conv 3x3``, no checkerboard artefacts) or ``"transpose"`` (DCGAN's ``ConvTranspose 4x4 / 2``; in
            privkit's runs it printed a strong checkerboard on every generated face), see
            :mod:`~privkit.synthesisnet.models`.
        perceptual: network of the perceptual reconstruction term added to the L1 term of both phases:
            ``"onet"`` (MTCNN ONet's trunk, a face network never trained on identities; see
            :mod:`~privkit.synthesisnet.losses`) or ``"none"``.
        lambda_perceptual: weight of the perceptual term (relative to the L1 term, inside ``lambda_ae_rec`` and
            ``lambda_rec``).
        linear_path: give ``Enc_id`` a linear map of the pixels and the decoder / generator a linear map of
            ``z_id`` to the pixels (before the ``tanh``), both fitted in closed form at the start of :meth:`fit` and
            then kept fixed [I]: ``Enc_id``'s map projects onto the leading between-identity principal directions of
            the training faces, orthogonal to the ``att_dim`` leading within-identity ones (what changes between
            images of one person), whitened (each coordinate divided by its spread over the training faces, so that
            isotropic noise is spread like the faces' codes); the decoder's is the ridge least-squares decoding of
            the resulting ``z_id``, and the decoder's convolutional output starts at zero
            (:func:`~privkit.synthesisnet.models.identity_attribute_directions`). The network then starts from the
            best linear identity code and its convolutions learn the rest (the attributes included: ``Enc_att`` and
            the way ``z_att`` reaches the image stay convolutional, so ``z_att`` keeps the adversary's training).
            Every path still runs through the two latents, so the guarantee is unchanged. Fitted on at most
            ``linear_init_images`` training images.
        linear_init_images: most training images the closed-form fit of the linear path uses (evenly spaced rows).
    """

    image_size: int = 64
    width: int = 32
    id_dim: int = 16
    att_dim: int = 32
    clip_norm: float | None = None
    att_radius: float | None = None
    noise: NoiseMode = "identity"
    auxiliary_classifier: bool = True
    discriminator_norm: str = "spectral"
    project_noisy: bool = True
    attributes: tuple[str, ...] | None = None
    swap_prob: float = 0.25
    noise_prob: float = 0.0
    train_epsilons: tuple[float, float] = (0.01, 1.0)
    lr: float = 2e-4
    lr_ae: float = 1e-3
    beta1: float = 0.5
    beta2: float = 0.999
    lambda_ae_rec: float = 1.0
    lambda_id: float = 1.0
    lambda_att: float = 1.0
    lambda_adv: float = 1.0
    lambda_rec: float = 10.0
    lambda_cls: float = 1.0
    lambda_cls_fake: float = 0.0
    id_logit_scale: float = 16.0
    init_generator_from_decoder: bool = True
    upsample: str = "resize"
    perceptual: str = "onet"
    lambda_perceptual: float = 1.0
    linear_path: bool = False
    linear_init_images: int = 4096

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        set_("image_size", check_image_size(self.image_size))
        set_("width", check_int("width", self.width, minimum=1, maximum=1024))
        set_("id_dim", check_int("id_dim", self.id_dim, minimum=1))
        set_("att_dim", check_int("att_dim", self.att_dim, minimum=1))
        # None stays None (automatic, follows id_dim/att_dim also through dataclasses.replace); the values in use
        # are effective_clip_norm and effective_att_radius.
        for name in ("clip_norm", "att_radius"):
            if getattr(self, name) is not None:
                set_(name, check_positive(name, getattr(self, name)))
        for name, choices in (("noise", NOISE_MODES), ("discriminator_norm", DISCRIMINATOR_NORMS),
                              ("upsample", UPSAMPLE_MODES), ("perceptual", PERCEPTUAL_NETWORKS)):
            check_choice(name, getattr(self, name), choices)
        set_("linear_init_images", check_int("linear_init_images", self.linear_init_images, minimum=2))
        for name in ("auxiliary_classifier", "project_noisy", "init_generator_from_decoder", "linear_path"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidArgumentError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.attributes is not None:
            attrs = (self.attributes,) if isinstance(self.attributes, str) else tuple(self.attributes)
            if not all(isinstance(a, str) and a for a in attrs):
                raise InvalidArgumentError(f"attributes must be a sequence of names, got {self.attributes!r}")
            if len(set(attrs)) != len(attrs):
                raise InvalidArgumentError(f"attributes must not repeat names, got {attrs}")
            set_("attributes", attrs)
        set_("swap_prob", check_probability("swap_prob", self.swap_prob, open_low=False, open_high=True))
        set_("noise_prob", check_probability("noise_prob", self.noise_prob, open_low=False, open_high=False))
        te = tuple(self.train_epsilons) if isinstance(self.train_epsilons, (tuple, list)) else ()
        if len(te) != 2 or not all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in te) \
                or te[0] > te[1]:
            raise InvalidArgumentError(
                f"train_epsilons must be (low, high) with 0 < low <= high, got {self.train_epsilons!r}")
        set_("train_epsilons", (float(te[0]), float(te[1])))
        set_("lr", check_positive("lr", self.lr))
        set_("lr_ae", check_positive("lr_ae", self.lr_ae))
        set_("beta1", check_probability("beta1", self.beta1, open_low=False))
        set_("beta2", check_probability("beta2", self.beta2, open_low=False))
        for name in ("lambda_ae_rec", "lambda_id", "lambda_att", "lambda_adv", "lambda_rec", "lambda_cls",
                     "lambda_cls_fake", "lambda_perceptual"):
            set_(name, check_nonnegative(name, getattr(self, name)))
        set_("id_logit_scale", check_positive("id_logit_scale", self.id_logit_scale))

    @property
    def effective_clip_norm(self) -> float:
        """The identity latents' radius = the metric-DP clip norm: ``clip_norm``, or ``10 * id_dim`` when None."""
        return CLIP_NORM_PER_DIM * self.id_dim if self.clip_norm is None else float(self.clip_norm)

    @property
    def effective_att_radius(self) -> float:
        """The attribute latents' radius: ``att_radius``, or ``10 * att_dim`` when None."""
        return CLIP_NORM_PER_DIM * self.att_dim if self.att_radius is None else float(self.att_radius)

    @property
    def whole_clip_norm(self) -> float:
        """Clip norm of the concatenated latent (``noise="whole"``): ``sqrt(clip_norm^2 + att_radius^2)``."""
        return math.hypot(self.effective_clip_norm, self.effective_att_radius)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["attributes"] = None if self.attributes is None else list(self.attributes)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SynthesisNetConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise UnknownNameError("config key", sorted(unknown)[0], names)
        d = dict(data)
        if d.get("attributes") is not None:
            d["attributes"] = tuple(d["attributes"])
        return cls(**d)


def _check_images(images: Any, size: int, name: str = "images") -> torch.Tensor:
    check_tensor(name, images, ndim=4, floating=True)
    if tuple(images.shape[1:]) != (3, size, size):
        raise ShapeError(f"{name} must have shape (N, 3, {size}, {size}) (the model's image_size), "
                         f"got {tuple(images.shape)}")
    if images.numel() and (float(images.min()) < 0.0 or float(images.max()) > 1.0):
        raise InvalidArgumentError(f"{name} must have values in [0, 1]")
    return images


def _attribute_loss(logits: list[torch.Tensor], labels: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Mean over attributes of the CE (labels < 0 ignored) and the mean accuracy over known labels."""
    losses, correct, known = [], 0, 0
    for j, lg in enumerate(logits):
        y = labels[:, j]
        keep = y >= 0
        if not bool(keep.any()):
            continue
        losses.append(F.cross_entropy(lg[keep], y[keep]))
        correct += int((lg[keep].argmax(dim=1) == y[keep]).sum())
        known += int(keep.sum())
    if not losses:
        return logits[0].new_zeros(()) if logits else torch.zeros(()), float("nan")
    return torch.stack(losses).mean(), correct / max(1, known)


class _Meter:
    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, n: int, **values: float) -> None:
        for k, v in values.items():
            if isinstance(v, torch.Tensor):
                v = float(v.detach())
            if v is None or math.isnan(v):
                continue
            self.sums[k] = self.sums.get(k, 0.0) + float(v) * n
            self.counts[k] = self.counts.get(k, 0) + n

    def means(self) -> dict[str, float]:
        return {k: self.sums[k] / self.counts[k] for k in self.sums}


class SynthesisNet:
    """Face publishing in the spirit of SynthesisNet: disentangling autoencoder, metric-DP identity noise, DCGAN
    with an auxiliary attribute classifier.

    >>> net = SynthesisNet(image_size=64, width=16)                         # doctest: +SKIP
    >>> net.fit(train_faces, epochs_ae=20, epochs_gan=20, seed=0)          # doctest: +SKIP
    >>> published, guarantee = net.publish(test_faces.images, epsilon=0.1,
    ...                                    generator=make_generator(0))    # doctest: +SKIP
    >>> print(guarantee)                                                     # doctest: +SKIP

    Args:
        config: a :class:`SynthesisNetConfig`; keyword ``overrides`` replace single fields (or build one).

    Attributes:
        history: per-epoch training losses/accuracies of both phases and the training throughput (images/s).
    """

    def __init__(self, config: SynthesisNetConfig | None = None, **overrides: Any):
        if config is None:
            config = SynthesisNetConfig(**overrides)
        elif not isinstance(config, SynthesisNetConfig):
            raise InvalidArgumentError(f"config must be a SynthesisNetConfig, got {type(config).__name__}")
        elif overrides:
            config = dataclasses.replace(config, **overrides)
        self.config: SynthesisNetConfig = config
        self.history: dict[str, Any] = {"ae": [], "gan": [], "throughput": {}}
        self.n_identities: int | None = None
        self.attribute_names: tuple[str, ...] = ()
        self.attribute_classes: tuple[int, ...] = ()
        self._modules: dict[str, nn.Module] = {}
        self._device = torch.device("cpu")
        self._perceptual: nn.Module | None = None

    # ------------------------------------------------------------------------------------------ structure
    @property
    def is_fitted(self) -> bool:
        return bool(self._modules)

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def modules(self) -> dict[str, nn.Module]:
        """The networks by name: ``id_encoder``, ``att_encoder``, ``decoder``, ``generator``, ``discriminator``,
        ``id_classifier``, ``att_classifier``, ``id_adversary``."""
        self._require_fitted()
        return dict(self._modules)

    def _require_fitted(self) -> None:
        if not self._modules:
            raise PrivkitError("this SynthesisNet is not fitted: call fit(faceset) or SynthesisNet.load(path) first")

    def _build(self, n_identities: int, attribute_classes: tuple[int, ...], device: torch.device,
               generator: torch.Generator | None) -> None:
        c = self.config
        common = dict(image_size=c.image_size, width=c.width)
        dec_kw = dict(common, id_dim=c.id_dim, att_dim=c.att_dim, id_radius=c.effective_clip_norm,
                      att_radius=c.effective_att_radius, upsample=c.upsample, linear=c.linear_path)
        att_scale = c.effective_att_radius / math.sqrt(c.att_dim)
        # Module constructors run PyTorch's default initialisation on the global RNG; fork it so that building a
        # model leaves the caller's global RNG state untouched (weights are then re-drawn from ``generator``).
        with torch.random.fork_rng(devices=[]):
            mods: dict[str, nn.Module] = {
                "id_encoder": IdentityEncoder(**common, dim=c.id_dim, radius=c.effective_clip_norm,
                                              linear=c.linear_path),
                "att_encoder": AttributeEncoder(**common, dim=c.att_dim, radius=c.effective_att_radius),
                "decoder": Decoder(**dec_kw),
                "generator": Generator(**dec_kw),
                "discriminator": Discriminator(**common, n_classes=attribute_classes if c.auxiliary_classifier
                                               else (), norm=c.discriminator_norm),
                "id_classifier": CosineClassifier(c.id_dim, n_identities, scale=c.id_logit_scale),
                "att_classifier": MultiHeadClassifier(c.att_dim, attribute_classes, input_scale=att_scale),
                "id_adversary": IdentityAdversary(c.att_dim, n_identities, input_scale=att_scale),
            }
        if generator is not None:
            for m in mods.values():
                init_weights(m, generator)
        for name in ("id_encoder", "decoder", "generator"):  # the linear path keeps its closed-form fit
            if mods[name].linear_path is not None:
                mods[name].linear_path.requires_grad_(False)
        self._modules = {k: m.to(device) for k, m in mods.items()}
        self._device = device
        self.n_identities = int(n_identities)
        self.attribute_classes = tuple(int(k) for k in attribute_classes)

    def to(self, device: str | torch.device) -> "SynthesisNet":
        """Move the networks to ``device``; returns ``self``."""
        dev = resolve_device(device)
        for m in self._modules.values():
            m.to(dev)
        self._device = dev
        return self

    # ------------------------------------------------------------------------------------------ training
    def _prepare(self, faceset: FaceSet) -> tuple[torch.Tensor, torch.Tensor, tuple[str, ...], tuple[int, ...]]:
        if not isinstance(faceset, FaceSet):
            raise InvalidArgumentError(f"faceset must be a privkit FaceSet, got {type(faceset).__name__}")
        _check_images(faceset.images, self.config.image_size, "faceset.images")
        n = len(faceset)
        if n < 2:
            raise InsufficientDataError(f"faceset: need at least 2 images to train, got {n}")
        check_tensor("faceset.identity", faceset.identity, shape=(n,))
        _, id_labels = torch.unique(faceset.identity.detach().cpu(), return_inverse=True)
        if int(id_labels.max()) + 1 < 2:
            raise InsufficientDataError("faceset: need at least 2 identities to train the identity classifier")
        names = self.config.attributes if self.config.attributes is not None else tuple(sorted(faceset.attributes))
        for a in names:
            if a not in faceset.attributes:
                raise UnknownNameError("attributes", a, faceset.attributes)
        if self.config.auxiliary_classifier and not names:
            raise InsufficientDataError("the auxiliary classifier needs attribute labels but the faceset has none; "
                                        "use a faceset with attributes or auxiliary_classifier=False")
        cols, classes = [], []
        for a in names:
            v = faceset.attributes[a]
            check_tensor(f"faceset.attributes[{a!r}]", v, shape=(n,))
            if v.is_floating_point():
                raise InvalidArgumentError(f"faceset.attributes[{a!r}] must hold integer labels")
            v = v.detach().cpu().long()
            if not bool((v >= 0).any()):
                raise InsufficientDataError(f"faceset.attributes[{a!r}] has no known (>= 0) label")
            cols.append(v)
            classes.append(max(2, int(v.max()) + 1))
        attr = torch.stack(cols, dim=1) if cols else torch.zeros(n, 0, dtype=torch.long)
        return id_labels, attr, tuple(names), tuple(classes)

    def fit(self, faceset: FaceSet, *, epochs_ae: int = 10, epochs_gan: int = 10, batch_size: int = 64, seed: int = 0,
            device: str | torch.device = "auto", progress: bool = False,
            autoencoder_from: "SynthesisNet | None" = None) -> "SynthesisNet":
        """Train the autoencoder, then the GAN, on ``faceset`` (from scratch; a refit discards earlier weights).

        Args:
            faceset: training faces ``(N, 3, S, S)`` with ``S = config.image_size``, identity labels and (unless the
                auxiliary classifier is disabled) attribute labels. Use identities disjoint from those you publish.
            epochs_ae: autoencoder epochs, ``>= 0``.
            epochs_gan: GAN epochs, ``>= 0``.
            batch_size: images per step (the last, smaller batch of an epoch is kept).
            seed: seed of the weight initialisation, the shuffling and the identity swaps.
            device: ``"auto"``, ``"cpu"``, ``"cuda"`` or a ``torch.device``.
            progress: show ``tqdm`` progress bars.
            autoencoder_from: a fitted :class:`SynthesisNet` of the same architecture (``image_size``, ``width``,
                latent sizes and radii, ``upsample``) fitted on the same identities and attributes: its trained
                autoencoder (encoders, decoder and their heads) is copied instead of training one, and
                ``epochs_ae`` must be 0. Used for ablations that change only the GAN (e.g. no auxiliary
                classifier), so both models share the same encoders.

        Returns:
            ``self``; :attr:`history` holds per-epoch losses and ``history["throughput"]`` the images/s of both
            phases.
        """
        epochs_ae = check_int("epochs_ae", epochs_ae, minimum=0)
        epochs_gan = check_int("epochs_gan", epochs_gan, minimum=0)
        batch_size = check_int("batch_size", batch_size, minimum=1)
        seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
        if not isinstance(progress, bool):
            raise InvalidArgumentError(f"progress must be a bool, got {progress!r}")
        dev = resolve_device(device)
        id_labels, attr, names, classes = self._prepare(faceset)
        if autoencoder_from is not None:
            self._check_autoencoder_source(autoencoder_from, int(id_labels.max()) + 1, names, classes, epochs_ae)
        g = torch.Generator().manual_seed(seed)
        self.attribute_names = names
        self._build(int(id_labels.max()) + 1, classes, dev, g)
        self.history = {"ae": [], "gan": [], "throughput": {"device": str(dev)},
                        "fit": {"epochs_ae": epochs_ae, "epochs_gan": epochs_gan, "batch_size": batch_size,
                                "seed": seed, "n_images": len(faceset), "n_identities": self.n_identities,
                                "attributes": list(names)}}
        images = faceset.images
        self._perceptual = (make_perceptual_loss(self.config.perceptual, device=dev)  # type: ignore[arg-type]
                            if self.config.lambda_perceptual > 0 and (epochs_ae or epochs_gan) else None)
        if autoencoder_from is None:
            if self.config.linear_path:
                self._init_linear_path(images, id_labels)
            self._train_autoencoder(images, id_labels, attr, epochs_ae, batch_size, g, progress)
        else:
            for name in _AUTOENCODER_MODULES:
                self._modules[name].load_state_dict(autoencoder_from._modules[name].state_dict())
            self.history["ae"] = [dict(e) for e in autoencoder_from.history.get("ae", [])]
            tp = autoencoder_from.history.get("throughput", {})
            self.history["throughput"].update({k: tp[k] for k in ("ae_images_per_s", "ae_seconds") if k in tp})
            self.history["fit"]["autoencoder_from"] = "copied from another fitted SynthesisNet"
        self._train_gan(images, attr, epochs_gan, batch_size, g, progress)
        self._perceptual = None
        return self

    def _check_autoencoder_source(self, other: Any, n_identities: int, names: tuple[str, ...],
                                  classes: tuple[int, ...], epochs_ae: int) -> None:
        if not isinstance(other, SynthesisNet) or not other.is_fitted:
            raise InvalidArgumentError(f"autoencoder_from must be a fitted SynthesisNet, got {type(other).__name__}")
        if epochs_ae != 0:
            raise InvalidArgumentError(f"epochs_ae must be 0 when autoencoder_from is given, got {epochs_ae}")
        a, b = self.config, other.config
        for f in ("image_size", "width", "id_dim", "att_dim", "effective_clip_norm", "effective_att_radius",
                  "upsample"):
            if getattr(a, f) != getattr(b, f):
                raise InvalidArgumentError(f"autoencoder_from has {f}={getattr(b, f)!r}, this model "
                                           f"{getattr(a, f)!r}: the architectures must match")
        if (other.n_identities, other.attribute_names, other.attribute_classes) != (n_identities, names, classes):
            raise InvalidArgumentError("autoencoder_from was fitted on other identities or attributes "
                                       f"({other.n_identities} identities, attributes {other.attribute_names}); "
                                       f"this faceset has {n_identities} identities, attributes {names}")

    @torch.no_grad()
    def _init_linear_path(self, images: torch.Tensor, id_labels: torch.Tensor) -> None:
        """Closed-form start of the identity's linear path (``config.linear_path``): ``Enc_id``'s linear map
        projects onto the between-identity principal directions of (at most ``linear_init_images``) training
        images, each coordinate divided by its standard deviation over them (whitened), scaled so that its codes
        have the latent radius on average; the decoder's linear map is the ridge least-squares decoding of the
        resulting ``z_id`` into ``atanh`` of the pixels, and its last convolution is zeroed, so that the decoder
        starts as ``tanh(linear(z_id))``."""
        c, m = self.config, self._modules
        n = images.shape[0]
        rows = torch.linspace(0, n - 1, min(n, c.linear_init_images)).round().long().unique()
        x = images[rows.to(images.device)].detach().to("cpu", torch.float64).flatten(1) * 2.0 - 1.0
        mean, id_dirs, _ = identity_attribute_directions(x, id_labels[rows], id_dim=c.id_dim, att_dim=c.att_dim)
        # whitened: every direction's coordinate has the same spread over the training faces, so that the isotropic
        # metric-DP noise (and a random point of the sphere, its small-ε limit) is spread like the faces' codes
        sd = ((x - mean) @ id_dirs.T).std(0)
        id_dirs = id_dirs / sd.clamp_min(1e-3 * float(sd.max()) + 1e-300)[:, None]
        codes = (x - mean) @ id_dirs.T
        scale = c.effective_clip_norm / float(torch.linalg.vector_norm(codes, dim=1).mean().clamp_min(1e-12))
        lin = m["id_encoder"].linear_path
        lin.weight.copy_((id_dirs * scale).to(lin.weight))
        lin.bias.copy_((-(id_dirs @ mean) * scale).to(lin.bias))
        dec = m["decoder"]
        dec.last_layer.weight.zero_()
        dec.last_layer.bias.zero_()  # the decoder's last layer always has a bias
        z_id, _ = self.encode(x.to(self._device, torch.float32).view(-1, 3, c.image_size, c.image_size) * 0.5 + 0.5)
        z64 = z_id.to("cpu", torch.float64) / dec.id_scale
        u = torch.cat([z64, torch.ones(z64.shape[0], 1, dtype=torch.float64)], 1)
        gram = u.T @ u
        ridge = 1e-3 * float(torch.diagonal(gram).mean()) * torch.eye(gram.shape[0], dtype=torch.float64)
        beta = torch.linalg.solve(gram + ridge, u.T @ torch.atanh(x.clamp(-_ATANH_CLAMP, _ATANH_CLAMP)))
        dec.linear_path.weight.copy_(beta[:-1].T.to(dec.linear_path.weight))
        dec.linear_path.bias.copy_(beta[-1].to(dec.linear_path.bias))

    def _reconstruction_loss(self, output: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(L1 + lambda_perceptual * perceptual, L1)`` between images in ``[-1, 1]``."""
        l1 = (output - target).abs().mean()
        if self._perceptual is None:
            return l1, l1
        return l1 + self.config.lambda_perceptual * self._perceptual(output, target), l1

    def _epochs(self, phase: str, images: torch.Tensor, attr: torch.Tensor, epochs: int, batch_size: int,
                g: torch.Generator, progress: bool):
        """Yield ``(idx, x, a, meter)`` for every shuffled batch of ``epochs`` epochs (a new permutation from ``g``
        per epoch): the rows, their images in ``[-1, 1]`` and attribute labels on the model's device, and the
        epoch's :class:`_Meter`. Records the meter's means in ``history[phase]`` after every epoch, and the phase's
        images/s and seconds in ``history["throughput"]`` at the end."""
        from tqdm.auto import tqdm

        n, dev = images.shape[0], self._device
        seen, t0 = 0, time.perf_counter()
        bar = tqdm(total=epochs * math.ceil(n / batch_size), disable=not progress,
                   desc="SynthesisNet autoencoder" if phase == "ae" else "SynthesisNet GAN")
        for epoch in range(epochs):
            meter = _Meter()
            for idx in torch.split(torch.randperm(n, generator=g), batch_size):
                yield idx, images[idx.to(images.device)].to(dev, torch.float32) * 2.0 - 1.0, attr[idx].to(dev), meter
                seen += idx.numel()
                bar.update(1)
            self.history[phase].append({"epoch": epoch + 1, **meter.means()})
        bar.close()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        dt = time.perf_counter() - t0
        self.history["throughput"][f"{phase}_images_per_s"] = seen / dt if seen and dt > 0 else None
        self.history["throughput"][f"{phase}_seconds"] = dt

    def _train_autoencoder(self, images, id_labels, attr, epochs, batch_size, g, progress) -> None:
        c, m, dev = self.config, self._modules, self._device
        nets = [m[k] for k in _AUTOENCODER_MODULES]
        opt = torch.optim.Adam([p for net in nets for p in net.parameters()], lr=c.lr_ae, betas=(c.beta1, c.beta2))
        for net in nets:
            net.train()
        for idx, x, a, meter in self._epochs("ae", images, attr, epochs, batch_size, g, progress):
            y = id_labels[idx].to(dev)
            z_id = m["id_encoder"](x)
            z_att = m["att_encoder"](x)
            l_rec, l1 = self._reconstruction_loss(m["decoder"](z_id, z_att), x)
            id_logits = m["id_classifier"](z_id)
            l_id = F.cross_entropy(id_logits, y)
            l_att, att_acc = _attribute_loss(m["att_classifier"](z_att), a)
            adv_logits = m["id_adversary"](grad_reverse(z_att, 1.0))
            l_adv = F.cross_entropy(adv_logits, y)
            loss = c.lambda_ae_rec * l_rec + c.lambda_id * l_id + c.lambda_att * l_att.to(dev) + c.lambda_adv * l_adv
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            meter.add(x.shape[0], loss=loss, rec_l1=l1, rec=l_rec, id_ce=l_id,
                      id_acc=float((id_logits.argmax(1) == y).float().mean()),
                      att_ce=l_att if a.shape[1] > 0 else float("nan"), att_acc=att_acc,
                      adv_ce=l_adv, adv_acc=float((adv_logits.argmax(1) == y).float().mean()))

    def _train_gan(self, images, attr, epochs, batch_size, g, progress) -> None:
        c, m, dev = self.config, self._modules, self._device
        G, D = m["generator"], m["discriminator"]
        if c.init_generator_from_decoder:
            G.load_state_dict(m["decoder"].state_dict())
        for net in (m["id_encoder"], m["att_encoder"]):
            net.eval()
        G.train()
        D.train()
        opt_g = torch.optim.Adam(G.parameters(), lr=c.lr, betas=(c.beta1, c.beta2))
        opt_d = torch.optim.Adam(D.parameters(), lr=c.lr, betas=(c.beta1, c.beta2))
        aux = D.has_classifier
        for _, x, a, meter in self._epochs("gan", images, attr, epochs, batch_size, g, progress):
            b = x.shape[0]
            with torch.no_grad():
                z_id = m["id_encoder"](x)
                z_att = m["att_encoder"](x)
            swap = ((torch.rand(b, generator=g) < c.swap_prob) if b > 1 else torch.zeros(b, dtype=torch.bool)).to(dev)
            z_id = torch.where(swap[:, None], z_id.roll(1, dims=0), z_id)  # the previous image's identity
            noised = torch.zeros(b, dtype=torch.bool, device=dev)
            if c.noise_prob > 0 and c.noise != "none":
                pick = torch.rand(b, generator=g) < c.noise_prob
                if bool(pick.any()):
                    lo, hi = (math.log(v) for v in c.train_epsilons)
                    eps = math.exp(lo + (hi - lo) * float(torch.rand((), generator=g)))
                    noised = pick.to(dev)
                    nid, natt, _ = self.privatize(z_id[noised].cpu(), z_att[noised].cpu(), epsilon=eps, generator=g)
                    z_id[noised] = nid.to(dev, z_id.dtype)
                    z_att[noised] = natt.to(dev, z_att.dtype)

            # discriminator (and auxiliary classifier) step
            fake = G(z_id, z_att)
            real_logit, real_cls = D(x)
            fake_logit, fake_cls = D(fake.detach())
            l_d = F.binary_cross_entropy_with_logits(real_logit, torch.ones_like(real_logit)) + \
                F.binary_cross_entropy_with_logits(fake_logit, torch.zeros_like(fake_logit))
            cls_real_acc = cls_fake_acc = float("nan")
            if aux:
                l_cr, cls_real_acc = _attribute_loss(real_cls, a)
                l_cf, cls_fake_acc = _attribute_loss(fake_cls, a)
                l_d = l_d + c.lambda_cls * l_cr + c.lambda_cls_fake * l_cf
            opt_d.zero_grad(set_to_none=True)
            l_d.backward()
            opt_d.step()

            # generator step (D frozen)
            D.requires_grad_(False)
            logit, cls = D(fake)
            l_gadv = F.binary_cross_entropy_with_logits(logit, torch.ones_like(logit))
            keep = ~swap & ~noised
            rec = bool(keep.any())  # False when every sample was swapped or noised: no reconstruction term
            l_rec, l1 = self._reconstruction_loss(fake[keep], x[keep]) if rec else (fake.new_zeros(()),) * 2
            l_g = l_gadv + c.lambda_rec * l_rec
            l_gcls = None
            if aux:
                l_gcls, _ = _attribute_loss(cls, a)
                l_g = l_g + c.lambda_cls * l_gcls
            opt_g.zero_grad(set_to_none=True)
            l_g.backward()
            opt_g.step()
            D.requires_grad_(True)
            meter.add(b, d_loss=l_d, g_loss=l_g, g_adv=l_gadv, g_rec_l1=l1 if rec else None,
                      g_rec=l_rec if rec else None, g_cls=l_gcls,
                      d_real_acc=float((real_logit > 0).float().mean()),
                      d_fake_acc=float((fake_logit < 0).float().mean()),
                      cls_real_acc=cls_real_acc, cls_fake_acc=cls_fake_acc,
                      swap_rate=float(swap.float().mean()), noise_rate=float(noised.float().mean()))
        G.eval()
        D.eval()

    # ------------------------------------------------------------------------------------------ inference
    @torch.no_grad()
    def encode(self, images: torch.Tensor, *, batch_size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
        """``(z_id, z_att)`` of ``images`` ``(N, 3, S, S)`` in ``[0, 1]``: float32 on the model's device; ``z_id``
        has norm ``config.effective_clip_norm`` and ``z_att`` norm ``config.effective_att_radius``."""
        self._require_fitted()
        _check_images(images, self.config.image_size)
        batch_size = check_int("batch_size", batch_size, minimum=1)
        enc_id, enc_att = self._modules["id_encoder"].eval(), self._modules["att_encoder"].eval()
        zi, za = [], []
        for i in range(0, images.shape[0], batch_size):
            x = images[i : i + batch_size].to(self._device, torch.float32) * 2.0 - 1.0
            zi.append(enc_id(x))
            za.append(enc_att(x))
        if not zi:
            return (torch.empty(0, self.config.id_dim, device=self._device),
                    torch.empty(0, self.config.att_dim, device=self._device))
        return torch.cat(zi), torch.cat(za)

    @torch.no_grad()
    def synthesize(self, z_id: torch.Tensor, z_att: torch.Tensor, *, batch_size: int = 256,
                   network: Literal["generator", "decoder"] = "generator") -> torch.Tensor:
        """Images in ``[0, 1]`` from latents with the GAN generator (or the autoencoder's decoder)."""
        self._require_fitted()
        check_choice("network", network, ("generator", "decoder"))
        c = self.config
        check_tensor("z_id", z_id, shape=(None, c.id_dim), floating=True)
        check_tensor("z_att", z_att, shape=(z_id.shape[0], c.att_dim), floating=True)
        batch_size = check_int("batch_size", batch_size, minimum=1)
        net = self._modules[network].eval()
        out = [net(z_id[i : i + batch_size].to(self._device, torch.float32),
                   z_att[i : i + batch_size].to(self._device, torch.float32))
               for i in range(0, z_id.shape[0], batch_size)]
        if not out:
            return torch.empty(0, 3, c.image_size, c.image_size, device=self._device)
        return ((torch.cat(out) + 1.0) / 2.0).clamp(0.0, 1.0)

    def reconstruct(self, images: torch.Tensor, *, batch_size: int = 256) -> torch.Tensor:
        """The autoencoder's reconstruction ``Dec(Enc_id(x), Enc_att(x))`` in ``[0, 1]`` (no noise)."""
        z_id, z_att = self.encode(images, batch_size=batch_size)
        return self.synthesize(z_id, z_att, batch_size=batch_size, network="decoder")

    def privatize(self, z_id: torch.Tensor, z_att: torch.Tensor, *, epsilon: float | None,
                  generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, PrivacyGuarantee]:
        """Apply the configured noise (``config.noise``) to latents; returns ``(z_id~, z_att~, guarantee)``.

        ``noise="identity"``: metric-DP noise on ``z_id`` (clip norm ``clip_norm``), ``z_att`` unchanged.
        ``noise="whole"``: metric-DP noise on the concatenation (clip norm ``whole_clip_norm``).
        ``noise="none"``: no noise; the guarantee is ε = ∞ (and says that a requested ``epsilon`` is not met).
        With ``project_noisy`` the noisy latents are projected back onto their spheres (post-processing).
        """
        c = self.config
        check_tensor("z_id", z_id, shape=(None, c.id_dim), floating=True)
        check_tensor("z_att", z_att, shape=(z_id.shape[0], c.att_dim), floating=True)
        if c.noise == "none":
            req = None if epsilon is None else check_epsilon(epsilon)
            return z_id, z_att, PrivacyGuarantee(
                epsilon=math.inf, delta=1.0, neighbours=Neighbouring(
                    relation="replace-one", unit="one published face",
                    detail="ablation without noise: no relation is protected"),
                protects="nothing", event=NonPrivateDpEvent(), requested_epsilon=req,
                processing=("SynthesisNet ablation: the latents are used without DP noise",),
                notes=("the identity latent is used as is: published faces keep their identity",))
        if epsilon is None:
            raise InvalidArgumentError(f"epsilon is required (> 0) when noise={c.noise!r}")
        eps = check_epsilon(epsilon)
        last_notes = ("the noisy latent is projected back onto the latent sphere(s) before the generator "
                      "(post-processing: the guarantee is unchanged)",) if c.project_noisy else ()
        last_notes += ("the networks are trained without DP: publish faces outside the training set",)
        if c.noise == "identity":
            notes = ("published image = G(noisy identity latent, attribute latent): for a fixed attribute latent it "
                     "is post-processing of the noisy identity latent; the attribute latent is released WITHOUT "
                     "noise, so identity information it still carries is not covered",
                     "NOT covered: the attribute latent z_att (an attacker who holds the model can read what identity "
                     "it carries: privkit measures this leak, it does not bound it), the image regions and cues the "
                     "generator renders from z_att (pose, lighting, occlusion, skin tone), and the training faces",
                     *last_notes)
            noisy, guarantee = privatize_latent(z_id, epsilon=eps, clip_norm=c.effective_clip_norm, generator=generator,
                                                latent="identity latent", extra_notes=notes)
            if c.project_noisy:
                noisy = project_to_sphere(noisy, c.effective_clip_norm)
            return noisy, z_att, guarantee
        notes = ("ablation: noise on the whole latent (identity and attribute); the published image is "
                 "post-processing of the noisy latent, so the guarantee covers the whole image release", *last_notes)
        z = torch.cat([z_id, z_att.to(z_id.device, z_id.dtype)], dim=1)
        noisy, guarantee = privatize_latent(z, epsilon=eps, clip_norm=c.whole_clip_norm, generator=generator,
                                            latent="whole latent (identity and attribute)", extra_notes=notes)
        nid, natt = noisy[:, : c.id_dim], noisy[:, c.id_dim :]
        if c.project_noisy:
            nid = project_to_sphere(nid, c.effective_clip_norm)
            natt = project_to_sphere(natt, c.effective_att_radius)
        return nid, natt, guarantee

    def publish(self, images: torch.Tensor, *, epsilon: float | None, generator: torch.Generator | None = None,
                batch_size: int = 256) -> tuple[torch.Tensor, PrivacyGuarantee]:
        """Publish synthetic replacements of ``images``: encode, add metric-DP identity noise, re-synthesise.

        Args:
            images: ``(N, 3, S, S)`` in ``[0, 1]`` with ``S = config.image_size``.
            epsilon: metric-DP parameter per unit of latent distance, ``> 0`` (the paper sweeps 0.01 .. 1);
                optional only for the ``noise="none"`` ablation.
            generator: source of the noise (one independent draw per image); ``None`` seeds from OS entropy.
            batch_size: images per forward pass.

        Returns:
            ``(published images (N, 3, S, S) in [0, 1] on the model's device, PrivacyGuarantee)``.
        """
        z_id, z_att = self.encode(images, batch_size=batch_size)
        nid, natt, guarantee = self.privatize(z_id, z_att, epsilon=epsilon, generator=generator)
        return self.synthesize(nid, natt, batch_size=batch_size), guarantee

    # ------------------------------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write ``model.safetensors`` (all weights) and ``config.json`` (config, labels, history) into the folder
        ``path`` (created if needed). No pickle. Returns the folder."""
        from safetensors.torch import save_file

        self._require_fitted()
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        tensors = {f"{name}.{k}": v.detach().to("cpu").contiguous().clone()
                   for name, mod in self._modules.items() for k, v in mod.state_dict().items()}
        save_file(tensors, str(folder / _WEIGHTS), metadata={"format": FORMAT})
        meta = {"format": FORMAT, "config": self.config.to_dict(), "n_identities": self.n_identities,
                "attribute_names": list(self.attribute_names), "attribute_classes": list(self.attribute_classes),
                "history": self.history}
        (folder / _META).write_text(json.dumps(meta, indent=1, allow_nan=True))
        return folder

    @classmethod
    def load(cls, path: str | Path, *, device: str | torch.device = "cpu") -> "SynthesisNet":
        """Load a model written by :meth:`save` (safetensors + JSON; nothing is unpickled)."""
        from safetensors.torch import load_file

        from ..errors import MissingResourceError

        folder = Path(path)
        for f in (_WEIGHTS, _META):
            if not (folder / f).is_file():
                raise MissingResourceError(f"SynthesisNet file {f}", expected_at=str(folder / f),
                                           how_to_get="Write it with SynthesisNet.save(path).")
        meta = json.loads((folder / _META).read_text())
        if meta.get("format") != FORMAT:
            raise InvalidArgumentError(f"{folder / _META} is not a {FORMAT} file (format={meta.get('format')!r})")
        net = cls(SynthesisNetConfig.from_dict(meta["config"]))
        net.attribute_names = tuple(meta["attribute_names"])
        net._build(int(meta["n_identities"]), tuple(meta["attribute_classes"]), resolve_device(device), None)
        tensors = load_file(str(folder / _WEIGHTS))
        for name, mod in net._modules.items():
            prefix = f"{name}."
            state = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
            mod.load_state_dict(state, strict=True)
            mod.eval()
        net.history = meta.get("history", {"ae": [], "gan": [], "throughput": {}})
        return net

    def __repr__(self) -> str:
        c = self.config
        state = f"fitted on {self.n_identities} identities" if self.is_fitted else "not fitted"
        return (f"SynthesisNet(image_size={c.image_size}, width={c.width}, id_dim={c.id_dim}, att_dim={c.att_dim}, "
                f"clip_norm={c.effective_clip_norm:g}, noise={c.noise!r}, "
                f"auxiliary_classifier={c.auxiliary_classifier}; {state})")
