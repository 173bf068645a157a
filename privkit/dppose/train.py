"""Trainers for the DP pose paper (paper 2, §2.2): non-private, DP-SGD, projected DP-SGD,
feature DP and feature-projective DP.

All private methods share one private part, computed once per step:

    g_priv = ( sum_{i in B_t} clip_C(grad l(w, x_i, y_i)) + N(0, sigma^2 C^2 I) ) / B

with Poisson sampling at rate ``q = B / n`` (a seeded generator), **one clip
per record** (norm over all trainable parameters jointly, factor
``min(1, C / (||g|| + 1e-6))``), the divisor the *expected* batch size ``B``
and the noise multiplier ``sigma`` solved by the accountant for the target
epsilon at ``delta`` over the planned steps.  The reported guarantee is
recomputed from the accountant's record of the steps actually run.

``projected``
    ``g = V V^T g_priv``: ``V`` spans the top-``k`` eigenvectors of the gradient
    second moment of ``m`` per-sample gradients of a DISJOINT public set,
    refreshed every ``refresh`` steps at the current weights (post-processing).
``feature``
    ``g = w_pub * g_pub + g_priv``, ``g_pub`` the clean (unclipped, un-noised)
    mean gradient of the loss on the public view ``psi(x)`` (Gaussian blur) of
    an **independently** Poisson-sampled batch (the paper's Algorithm 1; the
    public code reuses the private batch, which would reveal which records the
    private batch holds and void the subsampling amplification).  The private
    part clips the raw-image gradient only, once per record (the public code
    clips twice).
``feature_projective``
    ``g = w_pub * g_pub + V V^T g_priv`` (default ``w_pub = 1``; the public code
    uses 0.1).

The input model is copied; it is not modified.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from dp_accounting import GaussianDpEvent, NonPrivateDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from torch import nn

from .._validate import all_finite, check_choice, check_delta, check_epsilon, check_int, check_positive, check_real
from ..data.types import PoseSet
from ..device import resolve_device
from ..errors import InsufficientDataError, InvalidArgumentError, MissingResourceError, ShapeError, UnknownNameError
from ..transforms import gaussian_blur
from ..privacy.accounting import ACCOUNTANTS, accountant_for, epsilon_from_history, noise_multiplier_for
from ..privacy.guarantee import Neighbouring, PrivacyGuarantee
from ..privacy.samplers import make_generator, poisson_subset
from .features import CachedFeatures, first_trainable_layer
from .grads import (ClippedSum, add_gaussian_noise, check_per_record_model, clipped_grad_sum, flatten_grads,
                    per_sample_grads, trainable_parameters, unflatten_grads)
from .metrics import PCKhResult, pckh
from .model import build_pose_model, simcc_kl_loss
from .subspace import PublicSubspace, public_subspace

__all__ = ["METHODS", "GaussianBlur", "TrainResult", "pose_loss", "pose_batch", "evaluate_pckh", "private_clipped_sum",
           "neighbouring_for", "DPSpec", "PublicSpec", "Schedule", "PrivateTrainer", "make_private", "train"]

Method = Literal["nonprivate", "dpsgd", "projected", "feature", "feature_projective"]

#: Valid values of ``method`` in :func:`train`.
METHODS: tuple[str, ...] = ("nonprivate", "dpsgd", "projected", "feature", "feature_projective")
_PRIVATE = ("dpsgd", "projected", "feature", "feature_projective")
_PROJECTED = ("projected", "feature_projective")
_FEATURE = ("feature", "feature_projective")


# ---------------------------------------------------------------------------------------------- blur (psi)
@dataclass(frozen=True)
class GaussianBlur:
    """The public feature map ``psi``: a Gaussian blur of the whole image.

    The paper blurs 256x192 crops with a 25x25 kernel and sigma 10;
    :meth:`for_size` scales both to another image height.
    """

    kernel_size: int = 7
    sigma: float = 2.5

    def __post_init__(self) -> None:
        ks = check_int("kernel_size", self.kernel_size, minimum=1)
        if ks % 2 == 0:
            raise InvalidArgumentError(f"kernel_size must be odd, got {ks}")
        check_positive("sigma", self.sigma)

    @classmethod
    def for_size(cls, height: int) -> "GaussianBlur":
        """The paper's blur (25x25, sigma 10 at height 256) scaled to ``height``."""
        h = check_int("height", height, minimum=1)
        ks = max(1, int(round(25 * h / 256)))
        ks += 1 - ks % 2
        return cls(kernel_size=ks, sigma=10.0 * h / 256)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        if self.kernel_size == 1:
            return images.clone()
        return gaussian_blur(images, self.sigma, radius=self.kernel_size // 2, kernel_dtype=torch.float64)

    def describe(self) -> str:
        return f"Gaussian blur {self.kernel_size}x{self.kernel_size}, sigma={self.sigma:g} px"


# ---------------------------------------------------------------------------------------------- helpers
def pose_loss(output: tuple[torch.Tensor, torch.Tensor], target_x: torch.Tensor, target_y: torch.Tensor,
              weight: torch.Tensor) -> torch.Tensor:
    """Mean SimCC KL loss over the batch: the ``loss_fn`` of the trainers (batch = (images, tx, ty, w))."""
    return simcc_kl_loss(output, target_x, target_y, weight, reduction="mean")


def pose_batch(model: nn.Module, data: PoseSet, index: torch.Tensor | None = None, *,
               device: torch.device | None = None, transform=None) -> tuple[torch.Tensor, ...]:
    """``(images, target_x, target_y, weight)`` for rows ``index`` of ``data`` (all rows if None).

    For :class:`~privkit.dppose.features.CachedFeatures` the first element holds the cached features.
    """
    images = data.images if index is None else data.images[index]
    kp = data.keypoints if index is None else data.keypoints[index]
    vis = data.visible if index is None else data.visible[index]
    if device is not None:
        images, kp, vis = images.to(device), kp.to(device), vis.to(device)
    if transform is not None:
        images = transform(images)
    tx, ty, w = model.targets(kp, vis)
    return images, tx, ty, w


def private_clipped_sum(model: nn.Module, batch: tuple[torch.Tensor, ...], *, method: Method, clip: float,
                        per_sample_method: Literal["auto", "vmap", "hooks"] = "auto",
                        input_grams: dict[nn.Module, torch.Tensor] | None = None) -> ClippedSum:
    """The private part of one step of ``method``: ``sum_i clip_C(grad l(w, x_i, y_i))`` on the RAW images.

    It is the same for every private method: one clip per record; the
    projection (``projected``, ``feature_projective``) acts after the noise and
    the public-view gradient (``feature``, ``feature_projective``) is computed
    separately, unclipped, from ``psi(x)`` -- the raw and blurred gradients of a
    record never share the clipped sum (the public code puts both in it, which
    doubles the sensitivity).

    Args:
        model: The pose network.
        batch: ``(images, target_x, target_y, weight)`` (see :func:`pose_batch`).
        method: A private method of :data:`METHODS`.
        clip: Clipping norm ``C > 0``.
        per_sample_method: See :func:`~privkit.dppose.grads.clipped_grad_sum`.
        input_grams: See :func:`~privkit.dppose.grads.clipped_grad_sum` (cached patch Grams of the first
            trainable layer's input, for a batch of cached features).

    Returns:
        The :class:`~privkit.dppose.grads.ClippedSum`; its add/remove
        sensitivity is ``C`` and its replace-one sensitivity ``2C``.
    """
    check_choice("method", method, _PRIVATE)
    return clipped_grad_sum(model, pose_loss, batch, clip=clip, method=per_sample_method, input_grams=input_grams)


def evaluate_pckh(model: nn.Module, data: PoseSet, *, alpha: float = 0.5, batch_size: int = 256) -> PCKhResult:
    """PCKh@alpha of ``model``'s arg-max predictions on ``data`` (images, or :class:`CachedFeatures`)."""
    _check_poseset("data", data, model)
    pred = model.predict(data.images, batch_size=batch_size, features=isinstance(data, CachedFeatures))
    return pckh(pred, data.keypoints, data.visible, data.head_box, alpha=alpha)


def _check_poseset(name: str, data: Any, model: nn.Module | None = None, *, finite: bool = True) -> None:
    if not isinstance(data, PoseSet):
        raise InvalidArgumentError(f"{name} must be a privkit.data.types.PoseSet, got {type(data).__name__}")
    cached = isinstance(data, CachedFeatures)
    if cached and data.images.ndim != 4:
        raise ShapeError(f"{name}.images (cached features) must have shape (N, C, h, w), got {tuple(data.images.shape)}")
    if not cached and (data.images.ndim != 4 or data.images.shape[1] != 3):
        raise ShapeError(f"{name}.images must have shape (N, 3, H, W), got {tuple(data.images.shape)}")
    # A non-finite record must stop training before it starts: inside DP-SGD a NaN that surfaces only when its
    # record is Poisson-sampled would reveal that record's membership without noise.
    for field_name in ("images", "keypoints", "head_box") if finite else ():
        t = getattr(data, field_name)
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not all_finite(t):
            bad = (~torch.isfinite(t.reshape(t.shape[0], -1))).any(1).nonzero().squeeze(1)
            raise InvalidArgumentError(f"{name}.{field_name} contains NaN or inf values in {bad.numel()} record(s) "
                                       f"(first at index {int(bad[0])}); every value must be finite")
    if model is not None and cached:
        if getattr(model, "frozen", None) is None:
            raise InvalidArgumentError(f"{name} holds cached features, but the model has no frozen part")
        if tuple(data.images.shape[1:]) != tuple(model.feature_shape) or tuple(data.input_size) != tuple(model.input_size):
            raise ShapeError(
                f"{name} holds features of shape {tuple(data.images.shape[1:])} from {tuple(data.input_size)} images; "
                f"the model's frozen part gives {tuple(model.feature_shape)} from {tuple(model.input_size)} images")
    elif model is not None and tuple(data.images.shape[-2:]) != tuple(model.input_size):
        raise ShapeError(f"{name} has {tuple(data.images.shape[-2:])} images but the model expects "
                         f"{tuple(model.input_size)}")


def _load_warm_start(model: nn.Module, warm_start: Any) -> None:
    if isinstance(warm_start, (str, Path)):
        path = Path(warm_start)
        if not path.is_file():
            raise MissingResourceError(
                "warm-start weights", expected_at=str(path),
                how_to_get="Save a pose model's state_dict there (safetensors or torch.save) or pass a state dict.")
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(str(path), map_location="cpu", weights_only=True)
    elif isinstance(warm_start, Mapping):
        state = warm_start
    elif isinstance(warm_start, nn.Module):
        state = warm_start.state_dict()
    else:
        raise InvalidArgumentError(
            f"warm_start must be None, a state dict, an nn.Module or a path, got {type(warm_start).__name__}")
    try:
        model.load_state_dict(dict(state), strict=True)
    except RuntimeError as exc:
        raise InvalidArgumentError(f"warm_start does not fit the model: {exc}") from None


def _check_disjoint(private_set: PoseSet, public_set: PoseSet) -> None:
    priv_id = {int(i) for i in private_set.identity.tolist() if int(i) >= 0}
    pub_id = {int(i) for i in public_set.identity.tolist() if int(i) >= 0}
    shared = priv_id & pub_id
    if shared:
        raise InvalidArgumentError(
            f"public_set must be disjoint from private_set, but they share identities {sorted(shared)[:5]}"
            f"{' ...' if len(shared) > 5 else ''}; draw the public set from other people (the public code's "
            "'public' set was the first training images, which is not public)")
    def rows(t: torch.Tensor, index: torch.Tensor | None = None):
        # in chunks: bounded memory even for a memory-mapped feature cache of MPII's size
        n = t.shape[0] if index is None else index.numel()
        for i in range(0, n, 1024):
            part = t[i:i + 1024] if index is None else t[index[i:i + 1024]]
            yield part.detach().to("cpu", torch.float32).reshape(part.shape[0], -1).contiguous()

    def digest(row: np.ndarray) -> bytes:
        return hashlib.blake2b(row.tobytes(), digest_size=16).digest()

    def fingerprints(t: torch.Tensor) -> list[bytes]:
        # the bytes of 256 fixed entries of each row: identical rows always share them, so only rows whose
        # fingerprints collide need the full comparison below (reading 256 entries instead of the whole row)
        d = int(np.prod(t.shape[1:]))
        cols = torch.linspace(0, d - 1, min(d, 256)).round().long()
        return [digest(r) for part in rows(t) for r in part[:, cols].numpy()]

    def full_keys(t: torch.Tensor, index: list[int]) -> set[bytes]:
        return {digest(r) for part in rows(t, torch.tensor(index, dtype=torch.long)) for r in part.numpy()}

    fp_priv, fp_pub = fingerprints(private_set.images), fingerprints(public_set.images)
    common = set(fp_priv) & set(fp_pub)
    if common and full_keys(private_set.images, [i for i, f in enumerate(fp_priv) if f in common]) & full_keys(
            public_set.images, [i for i, f in enumerate(fp_pub) if f in common]):
        raise InvalidArgumentError("public_set must be disjoint from private_set, but they share identical images")


class _FromFeatures(nn.Module):
    """The trainable part of a PoseNet with a frozen front, fed cached features (same parameters, same names)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.backbone = net.backbone
        self.head = net.head

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head(self.backbone(features))


def _seeds(seed: int, n: int) -> list[int]:
    return [int(s.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
            for s in np.random.SeedSequence(seed).spawn(n)]


@dataclass
class TrainResult:
    """Result of :func:`train`.

    Attributes:
        model: The trained model (a copy of the input model).
        guarantee: The privacy guarantee that holds (from the accountant's
            record of the steps actually run); ``epsilon = inf`` for ``nonprivate``.
        history: One dict per logged step: ``step``, ``epoch``, ``loss``
            (mean private-batch loss since the previous entry), ``eps_so_far``,
            ``batch_size`` (mean realised batch size), ``clipped_fraction``,
            and per method ``public_loss`` / ``subspace_rank``.  **The losses,
            batch sizes and clipped fractions are computed on private data and
            are NOT covered by the guarantee**; they are diagnostics.
        steps: Number of optimiser steps run.
        sample_rate: Poisson sampling rate ``q`` (``B / n``).
        noise_multiplier: ``sigma`` (noise std / clip); None for ``nonprivate``.
        method: The method.
        config: The hyper-parameters used.
    """

    model: nn.Module
    guarantee: PrivacyGuarantee
    history: list[dict[str, Any]]
    steps: int
    sample_rate: float
    noise_multiplier: float | None
    method: str
    config: dict[str, Any] = field(default_factory=dict)


def neighbouring_for(method: str) -> str:
    """The neighbouring relation a private ``method`` is accounted under: ``"substitution"`` for the feature
    methods (a record keeps ψ(x) and its labels and changes the rest: replace-one, the clipped sum moves by up to
    2C), ``"add_remove"`` for the others."""
    check_choice("method", method, _PRIVATE)
    return "substitution" if method in _FEATURE else "add_remove"


#: privkit's accountant name -> the PrivacyGuarantee accountant kind.
_ACCOUNTANT_KINDS = {"rdp": "opacus-rdp", "prv": "opacus-prv", "pld": "dp-accounting-pld"}
_RECORD_UNIT = "one private training record (image and its keypoint labels)"
#: The neighbouring relation -> the PrivacyGuarantee's name for it.
_RELATIONS = {"substitution": "replace-one", "add_remove": "add-remove-one"}


def _guarantee(method: str, *, epsilon_req: float | None, delta: float, eps: float, sigma: float, clip: float, q: float,
               steps: int, accountant: str, blur: GaussianBlur | None, k: int | None, public_weight: float,
               refresh: int | None) -> PrivacyGuarantee:
    eps_value = eps if eps > 0 else math.inf  # only a run of zero steps spends nothing; never report 0
    relation = neighbouring_for(method)
    # DP-SGD: `steps` compositions of the Poisson-sampled Gaussian mechanism, noise multiplier sigma relative
    # to the clip C (dp_accounting's convention; replace-one moves the clipped sum by up to 2C, add/remove by C).
    event = SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), steps)
    processing = [f"DP-SGD on per-record clipped gradients (clip C={clip:g})"]
    notes = ["epsilon is computed from the accountant's history of the steps actually run.",
             "One clip per record; the divisor is the expected batch size.",
             "The number of private records n is treated as public (as in DP-SGD practice): the sampling rate q = B/n "
             "and the number of steps are computed from it."]
    if math.isfinite(eps_value) and relation == "add_remove":
        notes.append(f"Replacing one record (instead of adding/removing it) is covered by group privacy: "
                     f"(ε={2 * eps_value:.3g}, δ={(1 + math.exp(eps_value)) * delta:.3g}).")
    notes.append("history[*]['loss'], batch sizes and clipped fractions are computed on private data and are "
                 "not covered by this guarantee.")
    if method in _PROJECTED:
        processing.append(f"update projected on a rank-{k} public-gradient subspace (refreshed every {refresh} steps)")
        notes.append("The projection acts on the noisy gradient and the subspace comes from a disjoint public set: "
                     "post-processing, the guarantee is unchanged.")
    if method in _FEATURE and blur is not None:
        processing.append(f"plus the clean gradient of the public view ψ = {blur.describe()} "
                          f"(weight {public_weight:g})")
        neighbours = Neighbouring(
            relation="replace-one", unit="one private image's content beyond its public view ψ(x)", bound=2.0 * clip,
            norm="l2", detail=f"feature-level DP relative to ψ = {blur.describe()}: neighbouring datasets have "
            "identical public features ψ(x) and identical keypoint labels and differ only in what ψ removes from one "
            "record (the record stays, so its clipped raw-image gradient can move by 2C)")
        protects = ("the information in one private image that the blur removes; NOT the blurred image ψ(x) "
                    "and NOT the keypoint labels, which are treated as public")
        notes.append("f-FDP after Leemann et al. (2024): ψ(x) and the labels are public by assumption; the public "
                     "gradient uses the private labels, so the labels must be public for this claim to hold.")
        notes.append("The public-view batch is Poisson-sampled independently of the private batch (Algorithm 1 "
                     "of the paper; reusing the private batch would reveal its membership).")
    else:
        neighbours = Neighbouring(relation=_RELATIONS[relation], unit=_RECORD_UNIT,
                                  bound=2.0 * clip if relation == "substitution" else clip, norm="l2")
        protects = "one private training record (image and keypoint labels)"
    return PrivacyGuarantee(epsilon=eps_value, delta=delta, neighbours=neighbours, protects=protects, event=event,
                            requested_epsilon=epsilon_req, requested_delta=delta, notes=tuple(notes),
                            processing=tuple(processing), accountant=_ACCOUNTANT_KINDS[accountant])


# ---------------------------------------------------------------------------------------------- the trainer
@dataclass(frozen=True)
class DPSpec:
    """What makes a training step private (every method but ``"nonprivate"``).

    Attributes:
        epsilon: target ε ``> 0``; the noise multiplier is calibrated to it over the planned steps.
        delta: target δ in ``(0, 1)``.
        clip: per-record clipping norm ``C > 0`` (one clip per record, over all trainable parameters jointly).
        noise_multiplier: use this σ instead of calibrating it (``epsilon`` may then be None); the guarantee is
            computed from the steps run either way and flags a requested ε that is not met. ``0`` runs the method's
            clipping, projection and public view *without noise*: a diagnostic control that is NOT private (its
            guarantee says ``epsilon = inf``); ``epsilon`` must then be None.
        accountant: ``"prv"`` (default), ``"rdp"`` or ``"pld"`` for the add/remove methods; the feature methods are
            accounted under substitution (replace-one), which only ``"pld"`` covers, so they always use it
            (``TrainResult.config["accountant"]`` says which ran).
        max_noise_multiplier: the largest σ the calibration may use.
        per_sample_method: per-sample gradients by ``"auto"``, ``"vmap"`` or ``"hooks"`` (:mod:`privkit.dppose.grads`).
        secure: draw the Poisson sampling and the noise from generators seeded with the operating system's entropy
            instead of the seed (what a deployment needs; the seed then only initialises the model). The samplers
            are still not hardened against floating-point attacks.
    """

    epsilon: float | None = None
    delta: float | None = None
    clip: float | None = None
    noise_multiplier: float | None = None
    accountant: Literal["prv", "rdp", "pld"] = "prv"
    max_noise_multiplier: float = 1e4
    per_sample_method: Literal["auto", "vmap", "hooks"] = "auto"
    secure: bool = False

    def __post_init__(self) -> None:
        check_choice("accountant", self.accountant, ACCOUNTANTS)
        check_choice("per_sample_method", self.per_sample_method, ("auto", "vmap", "hooks"))
        if not isinstance(self.secure, bool):
            raise InvalidArgumentError(f"secure must be a bool, got {self.secure!r}")


@dataclass(frozen=True, eq=False)
class PublicSpec:
    """The public data the projected and feature methods use.

    Attributes:
        public_set: public data DISJOINT from the private set (no shared identity, no shared image); needed by the
            projected methods.
        k: subspace rank ``1 <= k <= m`` (projected methods).
        refresh: recompute the subspace every ``refresh`` steps (default 50, as the paper's public code).
        n_public: public gradients per subspace estimate ``m`` (default all of ``public_set``; otherwise a fresh
            seeded sample of ``m`` at each refresh).
        blur: ψ of the feature methods: a :class:`GaussianBlur` or ``(kernel_size, sigma)``; default the paper's blur
            scaled to the image height (:meth:`GaussianBlur.for_size`).
        blurred_set: ψ(x) of every private record, precomputed row for row (same keypoints); required by the feature
            methods when the private set holds cached features (``cache_features(model, images, transform=psi)``),
            and then ``blur`` only describes it.
        public_weight: weight of the public-view gradient (feature methods).
    """

    public_set: PoseSet | None = None
    k: int | None = None
    refresh: int | None = None
    n_public: int | None = None
    blur: GaussianBlur | tuple[int, float] | None = None
    blurred_set: PoseSet | None = None
    public_weight: float = 1.0


@dataclass(frozen=True)
class Schedule:
    """The optimisation schedule.

    Attributes:
        epochs: epochs ``>= 1``; the planned number of steps is ``epochs * round(n / batch_size)``.
        batch_size: expected (Poisson) batch size ``B``, ``1 <= B <= n``; ``q = B / n``.
        lr: learning rate ``> 0``.
        optimizer: ``"adamw"`` (the paper's public code) or ``"sgd"`` (momentum 0.9).
        weight_decay: weight decay ``>= 0``.
        log_every: a history entry every this many steps (default once per epoch) and at the last step.
        micro_batch: records per forward/backward pass (default: the whole batch in one pass). A step's batch is
            then processed in parts of at most this many records and their sums added: the same step (clipping is
            per record, so the clipped sum of a batch is the sum over its parts; the non-private and public-view
            gradients are the batch means, recombined with the parts' sizes), in bounded memory. Only the rounding
            of the sums can differ. On a CPU, one large pass through a whole backbone can also be slower per image
            than several small ones (full fine-tuning).
    """

    epochs: int = 1
    batch_size: int = 32
    lr: float = 1e-3
    optimizer: Literal["adamw", "sgd"] = "adamw"
    weight_decay: float = 0.0
    log_every: int | None = None
    micro_batch: int | None = None

    def __post_init__(self) -> None:
        check_int("epochs", self.epochs, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_positive("lr", self.lr)
        check_choice("optimizer", self.optimizer, ("adamw", "sgd"))
        if check_real("weight_decay", self.weight_decay) < 0:
            raise InvalidArgumentError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.log_every is not None:
            check_int("log_every", self.log_every, minimum=1)
        if self.micro_batch is not None:
            check_int("micro_batch", self.micro_batch, minimum=1)


def _new_window() -> dict[str, float]:
    return {"loss": 0.0, "bs": 0.0, "clipped": 0.0, "clipped_n": 0, "public_loss": 0.0, "n": 0}


class PrivateTrainer:
    """A pose network's training loop, private or not: what :func:`make_private` returns and :meth:`run` runs.

    The constructor validates everything, copies the model (the input is not modified), calibrates the noise to the
    planned steps and seeds the generators; :meth:`run` trains and returns a :class:`TrainResult` whose guarantee is
    recomputed from the accountant's record of the steps actually run.
    """

    def __init__(self, model: nn.Module | None, private_set: PoseSet, *, method: Method, dp: DPSpec | None,
                 public: PublicSpec | None, schedule: Schedule | None, seed: int, device: str | torch.device,
                 warm_start: Any) -> None:
        check_choice("method", method, METHODS)
        for name, value, kind in (("dp", dp, DPSpec), ("public", public, PublicSpec), ("schedule", schedule, Schedule)):
            if value is not None and not isinstance(value, kind):
                raise InvalidArgumentError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
            setattr(self, name, kind() if value is None else value)  # self.dp, self.public, self.schedule
        self.method = method
        _check_poseset("private_set", private_set)
        self.n = len(private_set)
        if self.n == 0:
            raise InsufficientDataError("private_set is empty; need at least 1 record")
        self.private_set = private_set
        self.bsz = check_int("batch_size", self.schedule.batch_size, minimum=1, maximum=self.n)
        self.seed = check_int("seed", seed, minimum=0)
        self.pub_w = check_real("public_weight", self.public.public_weight)
        self.dev = resolve_device(device)
        self.private = method in _PRIVATE
        self.cached = isinstance(private_set, CachedFeatures)
        self._check_private_settings()
        self._check_public_settings()
        self.net = self._prepare_model(model, warm_start)
        self.params = trainable_parameters(self.net)
        self.fwd: nn.Module = _FromFeatures(self.net) if self.cached else self.net  # what a step differentiates
        self.gram_layer = self._gram_layer()
        if not self.params:
            raise InvalidArgumentError("model has no trainable parameters")
        self.steps_per_epoch = max(1, int(round(self.n / self.bsz)))
        self.total = self.schedule.epochs * self.steps_per_epoch
        self.q = self.bsz / self.n
        self.relation = neighbouring_for(method) if self.private else "add_remove"
        self.acct = accountant_for(self.relation, self.dp.accountant)
        self._calibrate_noise()
        self._seed_generators()
        values = list(self.params.values())
        s = self.schedule
        if s.optimizer == "adamw":
            self.opt = torch.optim.AdamW(values, lr=s.lr, weight_decay=s.weight_decay)
        else:
            self.opt = torch.optim.SGD(values, lr=s.lr, momentum=0.9, weight_decay=s.weight_decay)
        self.log_every = self.steps_per_epoch if s.log_every is None else s.log_every
        self._spent = False  # set by probe_seconds: its steps are not accounted, so run() refuses the trainer

    def _gram_layer(self) -> nn.Module | None:
        """The layer whose cached patch Grams the private set carries (None: the set carries none, or vmap)."""
        grams = getattr(self.private_set, "grams", None)
        if not self.private or grams is None or self.dp.per_sample_method == "vmap":
            return None
        if grams.ndim != 3 or grams.shape[0] != self.n or grams.shape[1] != grams.shape[2]:
            raise ShapeError(f"private_set.grams must have shape ({self.n}, T, T), got {tuple(grams.shape)}")
        try:
            layer = self.net.get_submodule(self.private_set.grams_for)
        except AttributeError as exc:
            raise InvalidArgumentError(f"private_set.grams_for names {self.private_set.grams_for!r}, which is not a "
                                       "layer of the model (cache_input_grams(model, features) sets it)") from exc
        name, first = first_trainable_layer(self.net)
        if first is not layer:
            raise InvalidArgumentError(f"private_set.grams are for {self.private_set.grams_for!r}, but the layer that "
                                       f"receives the features is {name!r}")
        return layer

    def _check_private_settings(self) -> None:
        dp = self.dp
        self.eps_req = self.dlt = self.c_norm = None
        if self.private:
            if (dp.epsilon is None and dp.noise_multiplier is None) or dp.delta is None or dp.clip is None:
                raise InvalidArgumentError(f"method={self.method!r} needs epsilon (or noise_multiplier), delta and clip")
            self.eps_req = None if dp.epsilon is None else check_epsilon(dp.epsilon)
            self.dlt = check_delta(dp.delta)
            self.c_norm = check_positive("clip", dp.clip)

    def _check_public_settings(self) -> None:
        method, pub, private_set, n = self.method, self.public, self.private_set, self.n
        public_set, blurred_set = pub.public_set, pub.blurred_set
        self.sub_k = self.sub_refresh = self.m_pub = None
        if method in _PROJECTED:
            if public_set is None:
                raise InsufficientDataError(f"method={method!r} needs a public_set (disjoint from private_set)")
            _check_poseset("public_set", public_set)
            if len(public_set) == 0:
                raise InsufficientDataError("public_set is empty; the projected methods need m >= k public samples")
            self.m_pub = len(public_set) if pub.n_public is None else check_int(
                "n_public", pub.n_public, minimum=1, maximum=len(public_set))
            if pub.k is None:
                raise InvalidArgumentError(f"method={method!r} needs the subspace rank k")
            self.sub_k = check_int("k", pub.k, minimum=1, maximum=self.m_pub)
            self.sub_refresh = 50 if pub.refresh is None else check_int("refresh", pub.refresh, minimum=1)
            _check_disjoint(private_set, public_set)
        if self.cached and method in _PROJECTED and not isinstance(public_set, CachedFeatures):
            raise InvalidArgumentError("private_set holds cached features, so public_set must be CachedFeatures of "
                                       "the same frozen part")
        if method in _FEATURE and blurred_set is not None:
            _check_poseset("blurred_set", blurred_set)
            if len(blurred_set) != n or not torch.equal(blurred_set.keypoints, private_set.keypoints):
                raise InvalidArgumentError("blurred_set must hold psi(x) of every private record, row for row (same "
                                           f"length {n} and keypoints as private_set)")
            if isinstance(blurred_set, CachedFeatures) != self.cached:
                raise InvalidArgumentError("blurred_set and private_set must both be images or both be cached "
                                           "features")
        elif method in _FEATURE and self.cached:
            raise InvalidArgumentError(f"method={method!r} on cached features needs blurred_set: the cached features "
                                       "of psi(x) for every private record (cache_features(..., transform=psi))")
        self.psi: GaussianBlur | None = None
        if method in _FEATURE:
            if pub.blur is None:
                height = private_set.input_size[0] if self.cached else int(private_set.images.shape[-2])
                self.psi = GaussianBlur.for_size(int(height))
            elif isinstance(pub.blur, GaussianBlur):
                self.psi = pub.blur
            elif isinstance(pub.blur, (tuple, list)) and len(pub.blur) == 2:
                self.psi = GaussianBlur(kernel_size=pub.blur[0], sigma=pub.blur[1])
            else:
                raise InvalidArgumentError(f"blur must be a GaussianBlur or (kernel_size, sigma), got {pub.blur!r}")
            if blurred_set is not None:
                self._check_blurred_is_psi(blurred_set)

    def _check_blurred_is_psi(self, blurred_set: PoseSet) -> None:
        """The guarantee treats blurred_set as psi(x) (public); anything else (raw images, another blur) would enter
        the update as a clean, un-noised gradient of private data, so check it: cached features by their recorded
        transform, images by recomputing psi on a few rows."""
        private_set, psi = self.private_set, self.psi
        if self.cached:
            expected = f"{private_set.feature_of} after {psi!r}"
            if blurred_set.feature_of != expected:
                raise InvalidArgumentError(
                    f"blurred_set must be the cached features of psi(x) for the private records ({expected!r}), got "
                    f"features of {blurred_set.feature_of!r}: use cache_features(model, private images, transform=psi) "
                    "with the blur of this run")
            return
        rows = torch.arange(min(4, self.n))
        want = psi(private_set.images[rows].to(torch.float32))
        got = blurred_set.images[rows].to(want.device, torch.float32)
        if not torch.allclose(got, want, atol=1e-4, rtol=1e-4):
            raise InvalidArgumentError(
                f"blurred_set must hold psi(x) = {psi.describe()} of every private image, row for row; its first rows "
                "differ from psi(private images) (raw images, or another blur?)")

    def _prepare_model(self, model: nn.Module | None, warm_start: Any) -> nn.Module:
        if model is None:
            if self.cached:
                raise InvalidArgumentError("private_set holds cached features; pass the model they were computed with")
            net: nn.Module = build_pose_model(tuple(self.private_set.images.shape[-2:]), seed=self.seed)
        else:
            if not isinstance(model, nn.Module) or not all(hasattr(model, a)
                                                           for a in ("targets", "input_size", "predict")):
                raise InvalidArgumentError("model must be a privkit PoseNet (or None for the default network)")
            net = copy.deepcopy(model)
        if warm_start is not None:
            _load_warm_start(net, warm_start)
        net = net.to(self.dev).train()
        _check_poseset("private_set", self.private_set, net, finite=False)  # values were checked; now the shape
        if self.public.public_set is not None and self.method in _PROJECTED:
            _check_poseset("public_set", self.public.public_set, net, finite=False)
        if self.public.blurred_set is not None and self.method in _FEATURE:
            _check_poseset("blurred_set", self.public.blurred_set, net, finite=False)
        check_per_record_model(net)
        return net

    def _calibrate_noise(self) -> None:
        dp = self.dp
        self.sigma = None
        self.no_noise = self.private and dp.noise_multiplier is not None and \
            check_real("noise_multiplier", dp.noise_multiplier) == 0.0
        if self.no_noise and dp.epsilon is not None:
            raise InvalidArgumentError("noise_multiplier=0 (the no-noise control) is not private; pass epsilon=None")
        if self.no_noise:
            self.sigma = 0.0
        elif self.private and dp.noise_multiplier is not None:
            self.sigma = check_positive("noise_multiplier", dp.noise_multiplier)
        elif self.private:
            self.sigma = noise_multiplier_for(target_epsilon=self.eps_req, delta=self.dlt, sample_rate=self.q,
                                              steps=self.total, accountant=self.acct,
                                              max_noise_multiplier=dp.max_noise_multiplier, neighbouring=self.relation)

    def _seed_generators(self) -> None:
        if self.dp.secure:
            self.g_sample, self.g_public, self.g_feature = (make_generator(secure=True) for _ in range(3))
            self.g_noise = make_generator(secure=True, device=self.dev)
        else:
            s_sample, s_noise, s_public, s_feature = _seeds(self.seed, 4)
            self.g_sample, self.g_public, self.g_feature = (torch.Generator().manual_seed(s)
                                                            for s in (s_sample, s_public, s_feature))
            self.g_noise = torch.Generator(device=self.dev).manual_seed(s_noise)

    # -- the steps ---------------------------------------------------------------------------------------------
    def _nonprivate_step(self, perm: torch.Tensor, j: int, window: dict[str, float]) -> None:
        bsz = self.bsz
        idx = perm[j * bsz:(j + 1) * bsz] if j < self.steps_per_epoch - 1 else perm[j * bsz:]
        if idx.numel() == 0:
            idx = perm[:bsz]
        total = 0.0
        for part in self._parts(idx):  # the batch mean, as a size-weighted sum of part means
            batch = pose_batch(self.net, self.private_set, part, device=self.dev)
            loss = pose_loss(self.fwd(batch[0]), *batch[1:]) * (part.numel() / idx.numel())
            loss.backward()
            total += float(loss.detach())
        window["loss"] += total
        window["bs"] += idx.numel()

    def _parts(self, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``idx`` in consecutive parts of at most ``schedule.micro_batch`` records (one part by default)."""
        m = self.schedule.micro_batch
        return (idx,) if m is None or idx.numel() <= m else idx.split(m)

    def _refresh_subspace(self) -> None:
        public_set = self.public.public_set
        if self.m_pub == len(public_set):
            pidx = torch.arange(self.m_pub)
        else:
            pidx = torch.randperm(len(public_set), generator=self.g_public)[: self.m_pub]
        # the per-sample public gradients at the current weights (in parts, see Schedule.micro_batch), then the
        # top-k subspace: what public_subspace_from_model computes for one part
        batches = (pose_batch(self.net, public_set, part, device=self.dev) for part in self._parts(pidx))
        rows = [flatten_grads(per_sample_grads(self.fwd, pose_loss, batch, method=self.dp.per_sample_method),
                              batched=True).detach() for batch in batches]
        self.subspace = public_subspace(torch.cat(rows), k=self.sub_k, allow_lower_rank=True)

    def _public_view_gradient(self, window: dict[str, float]) -> torch.Tensor | None:
        """The clean gradient of the public view ψ(x) on an independently Poisson-sampled batch (None if empty)."""
        fidx = poisson_subset(self.n, self.q, generator=self.g_feature)
        if fidx.numel() == 0:
            return None
        flat, total = None, 0.0
        for part in self._parts(fidx):  # the batch mean, as a size-weighted sum of part means
            if self.public.blurred_set is not None:
                fb = pose_batch(self.net, self.public.blurred_set, part, device=self.dev)
            else:
                fb = pose_batch(self.net, self.private_set, part, device=self.dev, transform=self.psi)
            ploss = pose_loss(self.fwd(fb[0]), *fb[1:]) * (part.numel() / fidx.numel())
            gp = torch.autograd.grad(ploss, list(self.params.values()), allow_unused=True)
            total += float(ploss.detach())
            g = torch.cat([(torch.zeros_like(p) if t is None else t).reshape(-1)
                           for p, t in zip(self.params.values(), gp)]).detach()
            flat = g if flat is None else flat + g
        window["public_loss"] += total
        return flat

    def _private_step(self, step: int, window: dict[str, float]) -> None:
        if self.method in _PROJECTED and (self.subspace is None or step % self.sub_refresh == 0):
            self._refresh_subspace()
        idx = poisson_subset(self.n, self.q, generator=self.g_sample)
        parts = []
        for part in self._parts(idx):  # one clip per record: the batch's clipped sum is the sum over its parts
            batch = pose_batch(self.net, self.private_set, part, device=self.dev)
            grams = None if self.gram_layer is None else {self.gram_layer: self.private_set.grams[part].to(self.dev)}
            parts.append(private_clipped_sum(self.fwd, batch, method=self.method, clip=self.c_norm,
                                             per_sample_method=self.dp.per_sample_method, input_grams=grams))
        cs = parts[0] if len(parts) == 1 else ClippedSum.combine(parts)
        g = (cs.flat() if self.no_noise else
             add_gaussian_noise(cs.flat(), clip=self.c_norm, noise_multiplier=self.sigma, generator=self.g_noise)) / self.bsz
        self.acc_steps += 1
        if self.subspace is not None:
            g = self.subspace.project(g)
        if self.method in _FEATURE:
            gp = self._public_view_gradient(window)
            if gp is not None:
                g = g + self.pub_w * gp
        for p, gg in zip(self.params.values(), unflatten_grads(g, self.params).values()):
            p.grad = gg.clone()
        window["loss"] += float(cs.loss)
        window["bs"] += cs.batch_size
        if cs.batch_size:
            window["clipped"] += float((cs.norms > self.c_norm).sum())
            window["clipped_n"] += cs.batch_size

    def _optimiser_step(self, perm: torch.Tensor | None, j: int, step: int, window: dict[str, float]) -> None:
        """One optimiser step: private step ``step`` of the method, or the ``j``-th non-private batch of ``perm``."""
        self.opt.zero_grad(set_to_none=True)
        if self.private:
            self._private_step(step, window)
        else:
            self._nonprivate_step(perm, j, window)
        self.opt.step()

    def _log_entry(self, step: int, epoch: int, window: dict[str, float]) -> dict[str, Any]:
        entry: dict[str, Any] = {"step": step, "epoch": epoch + 1, "loss": window["loss"] / window["n"],
                                 "batch_size": window["bs"] / window["n"], "eps_so_far": math.inf}
        if self.private and not self.no_noise:
            entry["eps_so_far"] = self._epsilon_spent()
        if self.private:
            entry["clipped_fraction"] = window["clipped"] / window["clipped_n"] if window["clipped_n"] else float("nan")
        if self.method in _FEATURE:
            entry["public_loss"] = window["public_loss"] / window["n"]
        if self.subspace is not None:
            entry["subspace_rank"] = self.subspace.rank
        return entry

    # -- planning ------------------------------------------------------------------------------------------------
    def probe_seconds(self, steps: int = 2) -> dict[str, float]:
        """Time this method's optimisation step (and subspace refresh) for planning a long run.

        Runs one untimed warm-up step, then ``steps`` timed steps (CUDA synchronised), on this trainer: its model
        and optimiser advance by steps that no accountant records, so the trainer is spent afterwards (:meth:`run`
        refuses it; make a new one). Probe on stand-in data of the planned shape, not on the private records.
        Projected methods also time one refresh of the public subspace (its ``n_public`` per-sample gradients and
        SVD), which a run repeats every ``refresh`` steps.

        Returns:
            ``{"step": seconds per step, "refresh": seconds per subspace refresh (0 for other methods)}``.
        """
        steps = check_int("steps", steps, minimum=1)
        self._spent = True

        def sync() -> None:
            if self.dev.type == "cuda":
                torch.cuda.synchronize(self.dev)

        self.subspace, self.acc_steps, window = None, 0, _new_window()
        perm = torch.randperm(self.n, generator=self.g_sample)
        refresh = 0.0
        if self.method in _PROJECTED:
            sync()
            t0 = time.perf_counter()
            self._refresh_subspace()
            sync()
            refresh = time.perf_counter() - t0

        # an untimed warm-up step, then the timed ones (step 1: no refresh unless the run refreshes at every step)
        self._optimiser_step(perm, 0, 1, window)
        sync()
        t0 = time.perf_counter()
        for _ in range(steps):
            self._optimiser_step(perm, 0, 1, window)
        sync()
        self.opt.zero_grad(set_to_none=True)
        return {"step": (time.perf_counter() - t0) / steps, "refresh": refresh}

    # -- the loop ----------------------------------------------------------------------------------------------
    def run(self, *, progress: bool = False, checkpoint: str | Path | None = None) -> TrainResult:
        """Train for the planned steps and return the result with the guarantee of the steps actually run.

        Args:
            progress: show a progress bar.
            checkpoint: a folder: the trainer's whole state is written there at every epoch boundary, and a run that
                finds a checkpoint there resumes from it (:mod:`privkit.dppose.checkpoint`): its final weights, its
                noise and its accounted steps equal those of the uninterrupted run.

        Raises:
            InvalidArgumentError: the trainer is spent (:meth:`probe_seconds` took unaccounted steps on its model), or
                ``checkpoint`` holds a checkpoint of another run.
        """
        from .checkpoint import load_checkpoint, save_checkpoint

        if self._spent:
            raise InvalidArgumentError("this trainer ran probe_seconds, so its model took steps no accountant "
                                       "recorded; make a new trainer with make_private(...) to train")
        self.subspace: PublicSubspace | None = None
        self.acc_steps = 0
        history: list[dict[str, Any]] = []
        window = _new_window()
        step = start = 0
        resumed = None if checkpoint is None else load_checkpoint(checkpoint, self)
        if resumed is not None:
            start, step, history, window = resumed["epoch"], resumed["step"], resumed["history"], resumed["window"]
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=self.total, initial=step, desc=f"train[{self.method}]")
        for epoch in range(start, self.schedule.epochs):
            perm = torch.randperm(self.n, generator=self.g_sample) if self.method == "nonprivate" else None
            for j in range(self.steps_per_epoch):
                self._optimiser_step(perm, j, step, window)
                step += 1
                window["n"] += 1
                if bar is not None:
                    bar.update(1)
                if step % self.log_every == 0 or step == self.total:
                    history.append(self._log_entry(step, epoch, window))
                    window = _new_window()
            if checkpoint is not None and epoch + 1 < self.schedule.epochs:
                save_checkpoint(checkpoint, self, epoch=epoch + 1, step=step, history=history, window=window)
        if bar is not None:
            bar.close()
        self.opt.zero_grad(set_to_none=True)
        return TrainResult(model=self.net, guarantee=self._guarantee(), history=history, steps=step,
                           sample_rate=self.q, noise_multiplier=self.sigma, method=self.method, config=self._config())

    def _config(self) -> dict[str, Any]:
        dp, s = self.dp, self.schedule
        return {"method": self.method, "epsilon": self.eps_req, "delta": self.dlt, "clip": self.c_norm,
                "epochs": s.epochs, "batch_size": self.bsz, "k": self.sub_k, "refresh": self.sub_refresh,
                "n_public": self.m_pub, "blur": None if self.psi is None else self.psi.describe(), "lr": float(s.lr),
                "seed": self.seed, "accountant": self.acct, "neighbouring": self.relation,
                "public_weight": self.pub_w if self.method in _FEATURE else None, "optimizer": s.optimizer,
                "weight_decay": float(s.weight_decay), "n_private": self.n, "device": str(self.dev),
                "secure": dp.secure, "cached_features": self.cached, "input_grams": self.gram_layer is not None,
                "micro_batch": s.micro_batch}

    def _epsilon_spent(self) -> float:
        """The accountant's epsilon for the steps run so far."""
        return epsilon_from_history([(self.sigma, self.q, self.acc_steps)], delta=self.dlt, accountant=self.acct,
                                    neighbouring=self.relation)

    def _guarantee(self) -> PrivacyGuarantee:
        if self.private and not self.no_noise:
            return _guarantee(self.method, epsilon_req=self.eps_req, delta=self.dlt, eps=self._epsilon_spent(),
                              sigma=self.sigma, clip=self.c_norm, q=self.q, steps=self.acc_steps, accountant=self.acct,
                              blur=self.psi, k=self.sub_k, public_weight=self.pub_w, refresh=self.sub_refresh)
        if self.no_noise:
            detail, protects = "no noise", "nothing: a no-noise control (noise_multiplier=0), for diagnosis only"
            processing = (f"{self.method} with clipping (C={self.c_norm:g}) and everything else of the method, "
                          "but no noise")
        else:
            detail, protects = "non-private training", "nothing: non-private training"
            processing = "non-private minibatch training (no clipping, no noise)"
        return PrivacyGuarantee(
            epsilon=math.inf, delta=1.0, protects=protects, event=NonPrivateDpEvent(), processing=(processing,),
            neighbours=Neighbouring(relation=_RELATIONS[self.relation], unit=_RECORD_UNIT,
                                    detail=f"{detail}: no relation is protected"))


def make_private(model: nn.Module | None, private_set: PoseSet, *, method: Method, dp: DPSpec | None = None,
                 public: PublicSpec | None = None, schedule: Schedule | None = None, seed: int = 0,
                 device: str | torch.device = "auto", warm_start: Any = None) -> PrivateTrainer:
    """The user's model and data in, a (private) training loop out — call ``.run()`` on it.

    Args:
        model: a :class:`~privkit.dppose.model.PoseNet` (copied, not modified), or None for
            :func:`build_pose_model` at the data's image size (initialised with ``seed``).
        private_set: the private training data: images, or :class:`~privkit.dppose.features.CachedFeatures` of the
            model's frozen part (frozen fine-tuning: a step then runs only the trainable part; the public and blurred
            sets must be cached features too).
        method: ``"nonprivate"``, ``"dpsgd"``, ``"projected"``, ``"feature"`` or ``"feature_projective"`` (module
            docstring).
        dp: a :class:`DPSpec` (required by the private methods: ε or a noise multiplier, δ and the clip).
        public: a :class:`PublicSpec` (the projected and feature methods).
        schedule: a :class:`Schedule` (default: 1 epoch, batch 32, AdamW at 1e-3).
        seed: seed of the model initialisation, the sampling and the noise.
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` or a ``torch.device``.
        warm_start: initial weights: a state dict, a model, or a path (``.safetensors`` or a ``torch.save`` file,
            loaded with ``weights_only=True``).

    Raises:
        UnknownNameError: unknown ``method``, accountant or optimizer.
        InvalidArgumentError: out-of-range settings (``epsilon <= 0``, ``delta`` outside (0, 1), ``clip <= 0``,
            ``k > m``, ...), a public set that is not disjoint, a spec of the wrong type.
        InsufficientDataError: an empty private or public set.
        PrivacyBudgetError: the target epsilon cannot be reached.
    """
    return PrivateTrainer(model, private_set, method=method, dp=dp, public=public, schedule=schedule, seed=seed,
                          device=device, warm_start=warm_start)


def train(model: nn.Module | None, private_set: PoseSet, *, progress: bool = False,
          checkpoint: str | Path | None = None, **settings: Any) -> TrainResult:
    """Train a pose network, privately or not: ``make_private(model, private_set, **settings).run(...)``.

    ``settings`` are :func:`make_private`'s keyword arguments (``method``, ``dp``, ``public``, ``schedule``, ``seed``,
    ``device``, ``warm_start``); ``progress`` shows a progress bar; ``checkpoint`` is a folder for epoch-boundary
    checkpoints, resumed from when it holds one (:meth:`PrivateTrainer.run`).

    Raises:
        UnknownNameError: a setting :func:`make_private` does not take.
    """
    for name in settings:
        if name not in _MAKE_PRIVATE_SETTINGS:
            raise UnknownNameError("setting", name, _MAKE_PRIVATE_SETTINGS)
    return make_private(model, private_set, **settings).run(progress=progress, checkpoint=checkpoint)


#: The keyword arguments of :func:`make_private` (what :func:`train` forwards).
_MAKE_PRIVATE_SETTINGS = tuple(inspect.signature(make_private).parameters)[2:]
