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
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._validate import check_choice, check_delta, check_epsilon, check_int, check_positive, check_real
from ..data.types import PoseSet
from ..device import resolve_device
from ..errors import InsufficientDataError, InvalidArgumentError, MissingResourceError, ShapeError
from ..privacy.accounting import ACCOUNTANTS, accountant_for, epsilon_from_history, noise_multiplier_for
from ..privacy.guarantee import PrivacyGuarantee
from ..privacy.samplers import make_generator
from .features import CachedFeatures
from .grads import (
    ClippedSum,
    add_gaussian_noise,
    check_per_record_model,
    clipped_grad_sum,
    trainable_parameters,
    unflatten_grads,
)
from .metrics import PCKhResult, pckh
from .model import build_pose_model, simcc_kl_loss
from .subspace import PublicSubspace, public_subspace_from_model

__all__ = [
    "METHODS",
    "GaussianBlur",
    "gaussian_blur",
    "TrainResult",
    "pose_loss",
    "pose_batch",
    "evaluate_pckh",
    "private_clipped_sum",
    "neighbouring_for",
    "train",
]

Method = Literal["nonprivate", "dpsgd", "projected", "feature", "feature_projective"]

#: Valid values of ``method`` in :func:`train`.
METHODS: tuple[str, ...] = ("nonprivate", "dpsgd", "projected", "feature", "feature_projective")
_PRIVATE = ("dpsgd", "projected", "feature", "feature_projective")
_PROJECTED = ("projected", "feature_projective")
_FEATURE = ("feature", "feature_projective")


# ---------------------------------------------------------------------------------------------- blur (psi)
def gaussian_blur(images: torch.Tensor, *, kernel_size: int, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur with reflect padding (OpenCV's default ``BORDER_REFLECT_101``).

    Args:
        images: (N, C, H, W) floating point.
        kernel_size: Odd kernel side ``>= 1``, smaller than ``2 * min(H, W)``.
        sigma: Standard deviation in pixels, ``> 0``.

    Returns:
        The blurred images (same shape, dtype, device).
    """
    ks = check_int("kernel_size", kernel_size, minimum=1)
    if ks % 2 == 0:
        raise InvalidArgumentError(f"kernel_size must be odd, got {ks}")
    s = check_positive("sigma", sigma)
    if not isinstance(images, torch.Tensor) or images.ndim != 4 or not images.is_floating_point():
        raise ShapeError("images must be a floating-point tensor of shape (N, C, H, W)")
    n, c, h, w = images.shape
    pad = ks // 2
    if pad >= min(h, w):
        raise InvalidArgumentError(f"kernel_size={ks} is too large for {h}x{w} images (need kernel_size < 2*min(H, W))")
    if ks == 1:
        return images.clone()
    t = torch.arange(ks, device=images.device, dtype=torch.float64) - pad
    k1 = torch.exp(-t * t / (2 * s * s))
    k1 = (k1 / k1.sum()).to(images.dtype)
    x = images.reshape(n * c, 1, h, w)
    x = F.conv2d(F.pad(x, (pad, pad, 0, 0), mode="reflect"), k1.view(1, 1, 1, ks))
    x = F.conv2d(F.pad(x, (0, 0, pad, pad), mode="reflect"), k1.view(1, 1, ks, 1))
    return x.reshape(n, c, h, w)


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
        return gaussian_blur(images, kernel_size=self.kernel_size, sigma=self.sigma)

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


def private_clipped_sum(
    model: nn.Module,
    batch: tuple[torch.Tensor, ...],
    *,
    method: Method,
    clip: float,
    per_sample_method: Literal["auto", "vmap", "hooks"] = "auto",
) -> ClippedSum:
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

    Returns:
        The :class:`~privkit.dppose.grads.ClippedSum`; its add/remove
        sensitivity is ``C`` and its replace-one sensitivity ``2C``.
    """
    check_choice("method", method, _PRIVATE)
    return clipped_grad_sum(model, pose_loss, batch, clip=clip, method=per_sample_method)


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
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all()):
            bad = (~torch.isfinite(t.reshape(t.shape[0], -1))).any(1).nonzero().squeeze(1)
            raise InvalidArgumentError(
                f"{name}.{field_name} contains NaN or inf values in {bad.numel()} record(s) (first at index "
                f"{int(bad[0])}); every value must be finite"
            )
    if model is not None and cached:
        if getattr(model, "frozen", None) is None:
            raise InvalidArgumentError(f"{name} holds cached features, but the model has no frozen part")
        if tuple(data.images.shape[1:]) != tuple(model.feature_shape) or tuple(data.input_size) != tuple(model.input_size):
            raise ShapeError(
                f"{name} holds features of shape {tuple(data.images.shape[1:])} from {tuple(data.input_size)} images; "
                f"the model's frozen part gives {tuple(model.feature_shape)} from {tuple(model.input_size)} images"
            )
    elif model is not None and tuple(data.images.shape[-2:]) != tuple(model.input_size):
        raise ShapeError(
            f"{name} has {tuple(data.images.shape[-2:])} images but the model expects {tuple(model.input_size)}"
        )


def _load_warm_start(model: nn.Module, warm_start: Any) -> None:
    if isinstance(warm_start, (str, Path)):
        path = Path(warm_start)
        if not path.is_file():
            raise MissingResourceError(
                "warm-start weights", expected_at=str(path),
                how_to_get="Save a pose model's state_dict there (safetensors or torch.save) or pass a state dict.",
            )
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
            f"warm_start must be None, a state dict, an nn.Module or a path, got {type(warm_start).__name__}"
        )
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
            "'public' set was the first training images, which is not public)"
        )
    def keys(t: torch.Tensor) -> set[bytes]:
        # a 128-bit digest per row, in chunks: bounded memory even for a memory-mapped feature cache of MPII's size
        out: set[bytes] = set()
        for i in range(0, t.shape[0], 1024):
            rows = t[i:i + 1024].detach().to("cpu", torch.float32).reshape(min(1024, t.shape[0] - i), -1).contiguous()
            out.update(hashlib.blake2b(r.tobytes(), digest_size=16).digest() for r in rows.numpy())
        return out
    if keys(private_set.images) & keys(public_set.images):
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


_ACCOUNTANT_NAMES = {"rdp": "opacus RDP", "prv": "opacus PRV", "pld": "dp-accounting PLD"}


def _guarantee(method: str, *, epsilon_req: float | None, delta: float, eps: float, sigma: float, clip: float, q: float,
               steps: int, accountant: str, blur: GaussianBlur | None, k: int | None, public_weight: float,
               refresh: int | None) -> PrivacyGuarantee:
    eps_value = eps if eps > 0 else math.inf  # only a run of zero steps spends nothing; never report 0
    relation = neighbouring_for(method)
    acc_text = f"{_ACCOUNTANT_NAMES[accountant]} accountant, " + (
        "replace-one" if relation == "substitution" else "add/remove")
    mech = (f"DP-SGD: Poisson-subsampled Gaussian mechanism on per-record clipped gradients "
            f"(noise multiplier {sigma:.4g}, clip C={clip:g}, q={q:.4g}, {steps} steps; {acc_text})")
    notes = [
        "epsilon is computed from the accountant's history of the steps actually run.",
        "One clip per record; the divisor is the expected batch size.",
    ]
    if math.isfinite(eps_value) and relation == "add_remove":
        notes.append(
            f"Replacing one record (instead of adding/removing it) is covered by group privacy: "
            f"(ε={2 * eps_value:.3g}, δ={(1 + math.exp(eps_value)) * delta:.3g})."
        )
    notes.append("history[*]['loss'], batch sizes and clipped fractions are computed on private data and are "
                 "not covered by this guarantee.")
    if method in _PROJECTED:
        mech += f"; update projected on a rank-{k} public-gradient subspace (refreshed every {refresh} steps)"
        notes.append("The projection acts on the noisy gradient and the subspace comes from a disjoint public set: "
                     "post-processing, the guarantee is unchanged.")
    if method in _FEATURE and blur is not None:
        mech += f"; plus the clean gradient of the public view ψ = {blur.describe()} (weight {public_weight:g})"
        neighbouring = (
            f"feature-level DP relative to ψ = {blur.describe()}: neighbouring datasets have identical public "
            "features ψ(x) and identical keypoint labels and differ only in what ψ removes from one record "
            "(substitution: the record stays, so its clipped raw-image gradient can move by 2C; accounted with "
            "the replace-one relation)"
        )
        protects = ("the information in one private image that the blur removes; NOT the blurred image ψ(x) "
                    "and NOT the keypoint labels, which are treated as public")
        notes.append("f-FDP after Leemann et al. (2024): ψ(x) and the labels are public by assumption; the public "
                     "gradient uses the private labels, so the labels must be public for this claim to hold.")
        notes.append("The public-view batch is Poisson-sampled independently of the private batch (Algorithm 1 "
                     "of the paper; reusing the private batch would reveal its membership).")
    else:
        neighbouring = "add/remove one record (image and its keypoints) of the private set"
        protects = "one private training record (image and keypoint labels)"
    return PrivacyGuarantee(
        epsilon=eps_value, delta=delta, neighbouring=neighbouring, protects=protects, mechanism=mech,
        requested_epsilon=epsilon_req, requested_delta=delta, notes=tuple(notes),
    )


# ---------------------------------------------------------------------------------------------- the trainer
def train(
    model: nn.Module | None,
    private_set: PoseSet,
    *,
    method: Method,
    epsilon: float | None = None,
    delta: float | None = None,
    clip: float | None = None,
    epochs: int = 1,
    batch_size: int = 32,
    public_set: PoseSet | None = None,
    k: int | None = None,
    refresh: int | None = None,
    blur: GaussianBlur | tuple[int, float] | None = None,
    lr: float = 1e-3,
    seed: int = 0,
    device: str | torch.device = "auto",
    accountant: Literal["prv", "rdp", "pld"] = "prv",
    warm_start: Any = None,
    progress: bool = False,
    public_weight: float = 1.0,
    n_public: int | None = None,
    optimizer: Literal["adamw", "sgd"] = "adamw",
    weight_decay: float = 0.0,
    log_every: int | None = None,
    per_sample_method: Literal["auto", "vmap", "hooks"] = "auto",
    max_noise_multiplier: float = 1e4,
    noise_multiplier: float | None = None,
    secure: bool = False,
    blurred_set: PoseSet | None = None,
) -> TrainResult:
    """Train a pose network, privately or not.

    Args:
        model: A :class:`~privkit.dppose.model.PoseNet` (copied, not
            modified), or None for :func:`build_pose_model` at the data's
            image size (initialised with ``seed``).
        private_set: The private training data: images, or
            :class:`~privkit.dppose.features.CachedFeatures` of the model's
            frozen part (frozen fine-tuning: a step then runs only the
            trainable part; ``public_set`` and ``blurred_set`` must be cached
            features too).
        method: ``"nonprivate"``, ``"dpsgd"``, ``"projected"``, ``"feature"``
            or ``"feature_projective"`` (see the module docstring).
        epsilon: Target epsilon ``> 0`` (private methods).
        delta: Target delta in ``(0, 1)`` (private methods).
        clip: Clipping norm ``C > 0`` (private methods).
        epochs: Number of epochs ``>= 1``; the planned number of steps is
            ``epochs * round(n / batch_size)``.
        batch_size: Expected (Poisson) batch size ``B``, ``1 <= B <= n``; ``q = B / n``.
        public_set: Public data DISJOINT from ``private_set`` (no shared
            identity, no shared image); needed by the projected methods.
        k: Subspace rank, ``1 <= k <= m`` (projected methods).
        refresh: Recompute the subspace every ``refresh`` steps (default 50,
            as the public code).
        blur: ``psi`` for the feature methods: a :class:`GaussianBlur` or
            ``(kernel_size, sigma)``; default the paper's blur scaled to the
            image height (:meth:`GaussianBlur.for_size`).
        blurred_set: The public view ``psi(x)`` of every private record,
            precomputed, row for row (same keypoints); required by the feature
            methods when ``private_set`` holds cached features (cache it with
            ``cache_features(model, private_set_images, transform=psi)``),
            and then ``blur`` only describes it.
        lr: Learning rate ``> 0``.
        seed: Seed of the model initialisation, the sampling and the noise.
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` or a ``torch.device``.
        accountant: ``"prv"`` (default), ``"rdp"`` or ``"pld"``, for the add/remove methods (DP-SGD, projected).
            The feature methods are accounted under substitution (replace-one), which only ``"pld"``
            (dp-accounting) covers, so they always use it; ``TrainResult.config["accountant"]`` says which ran.
        warm_start: Initial weights: a state dict, a model, or a path
            (``.safetensors`` or a ``torch.save`` file, loaded with
            ``weights_only=True``).
        progress: Show a tqdm progress bar.
        public_weight: Weight of the public-view gradient (feature methods; default 1).
        n_public: Public gradients per subspace estimate ``m`` (default all of
            ``public_set``; a fresh seeded sample of ``m`` at each refresh otherwise).
        optimizer: ``"adamw"`` (the public code's) or ``"sgd"`` (momentum 0.9).
        weight_decay: Weight decay of the optimiser.
        log_every: Log a history entry every this many steps (default: once
            per epoch) and at the last step.
        per_sample_method: ``"auto"``, ``"hooks"`` or ``"vmap"`` (see :mod:`privkit.dppose.grads`).
        max_noise_multiplier: Largest noise multiplier the calibration may use.
        noise_multiplier: Use this ``sigma`` instead of calibrating it to
            ``epsilon`` (e.g. to reproduce a paper's noise level); ``epsilon`` may
            then be None.  The guarantee is computed from the steps run either way
            and flags a requested ``epsilon`` that is not met.  ``0`` runs the
            method's clipping, projection and public view *without noise*: a
            diagnostic control that is NOT private (its guarantee says
            ``epsilon = inf``); ``epsilon`` must then be None.
        secure: Draw the Poisson sampling and the noise from generators seeded
            with the operating system's entropy instead of ``seed`` (what a
            deployment needs; ``seed`` then only initialises the model).  The
            samplers are still not hardened against floating-point attacks.

    Returns:
        A :class:`TrainResult`.

    Raises:
        UnknownNameError: unknown ``method``, ``accountant`` or ``optimizer``.
        InvalidArgumentError: out-of-range arguments (``epsilon <= 0``,
            ``delta`` outside (0, 1), ``clip <= 0``, ``k > m``, ...), a public
            set that is not disjoint.
        InsufficientDataError: an empty private or public set.
        PrivacyBudgetError: the target epsilon cannot be reached.
    """
    check_choice("method", method, METHODS)
    check_choice("accountant", accountant, ACCOUNTANTS)
    check_choice("optimizer", optimizer, ("adamw", "sgd"))
    check_choice("per_sample_method", per_sample_method, ("auto", "vmap", "hooks"))
    _check_poseset("private_set", private_set)
    n = len(private_set)
    if n == 0:
        raise InsufficientDataError("private_set is empty; need at least 1 record")
    epochs = check_int("epochs", epochs, minimum=1)
    bsz = check_int("batch_size", batch_size, minimum=1, maximum=n)
    lr_v = check_positive("lr", lr)
    seed = check_int("seed", seed, minimum=0)
    wd = check_real("weight_decay", weight_decay)
    if wd < 0:
        raise InvalidArgumentError(f"weight_decay must be >= 0, got {wd}")
    pub_w = check_real("public_weight", public_weight)
    dev = resolve_device(device)

    private = method in _PRIVATE
    eps_req = dlt = c_norm = None
    if private:
        if (epsilon is None and noise_multiplier is None) or delta is None or clip is None:
            raise InvalidArgumentError(f"method={method!r} needs epsilon (or noise_multiplier), delta and clip")
        eps_req = None if epsilon is None else check_epsilon(epsilon)
        dlt = check_delta(delta)
        c_norm = check_positive("clip", clip)
    sub_k = sub_refresh = m_pub = None
    if method in _PROJECTED:
        if public_set is None:
            raise InsufficientDataError(f"method={method!r} needs a public_set (disjoint from private_set)")
        _check_poseset("public_set", public_set)
        if len(public_set) == 0:
            raise InsufficientDataError("public_set is empty; the projected methods need m >= k public samples")
        m_pub = len(public_set) if n_public is None else check_int("n_public", n_public, minimum=1,
                                                                     maximum=len(public_set))
        if k is None:
            raise InvalidArgumentError(f"method={method!r} needs the subspace rank k")
        sub_k = check_int("k", k, minimum=1, maximum=m_pub)
        sub_refresh = 50 if refresh is None else check_int("refresh", refresh, minimum=1)
        _check_disjoint(private_set, public_set)
    cached = isinstance(private_set, CachedFeatures)
    if cached and method in _PROJECTED and not isinstance(public_set, CachedFeatures):
        raise InvalidArgumentError("private_set holds cached features, so public_set must be CachedFeatures of the "
                                   "same frozen part")
    if method in _FEATURE and blurred_set is not None:
        _check_poseset("blurred_set", blurred_set)
        if len(blurred_set) != n or not torch.equal(blurred_set.keypoints, private_set.keypoints):
            raise InvalidArgumentError("blurred_set must hold psi(x) of every private record, row for row (same "
                                       f"length {n} and keypoints as private_set)")
        if isinstance(blurred_set, CachedFeatures) != cached:
            raise InvalidArgumentError("blurred_set and private_set must both be images or both be cached features")
    elif method in _FEATURE and cached:
        raise InvalidArgumentError(f"method={method!r} on cached features needs blurred_set: the cached features of "
                                   "psi(x) for every private record (cache_features(..., transform=psi))")
    psi: GaussianBlur | None = None
    if method in _FEATURE:
        if blur is None:
            height = private_set.input_size[0] if cached else int(private_set.images.shape[-2])
            psi = GaussianBlur.for_size(int(height))
        elif isinstance(blur, GaussianBlur):
            psi = blur
        elif isinstance(blur, (tuple, list)) and len(blur) == 2:
            psi = GaussianBlur(kernel_size=blur[0], sigma=blur[1])
        else:
            raise InvalidArgumentError(f"blur must be a GaussianBlur or (kernel_size, sigma), got {blur!r}")

    # model
    if model is None:
        if cached:
            raise InvalidArgumentError("private_set holds cached features; pass the model they were computed with")
        hw = tuple(private_set.images.shape[-2:])
        net: nn.Module = build_pose_model(hw, seed=seed)
    else:
        if not isinstance(model, nn.Module) or not all(hasattr(model, a) for a in ("targets", "input_size", "predict")):
            raise InvalidArgumentError("model must be a privkit PoseNet (or None for the default network)")
        net = copy.deepcopy(model)
    if warm_start is not None:
        _load_warm_start(net, warm_start)
    net = net.to(dev).train()
    _check_poseset("private_set", private_set, net, finite=False)  # values were checked above; now the shape
    if public_set is not None and method in _PROJECTED:
        _check_poseset("public_set", public_set, net, finite=False)
    if blurred_set is not None and method in _FEATURE:
        _check_poseset("blurred_set", blurred_set, net, finite=False)
    check_per_record_model(net)
    params = trainable_parameters(net)
    fwd: nn.Module = _FromFeatures(net) if cached else net  # what a step differentiates
    if not params:
        raise InvalidArgumentError("model has no trainable parameters")

    steps_per_epoch = max(1, int(round(n / bsz)))
    total = epochs * steps_per_epoch
    q = bsz / n
    sigma = None
    relation = neighbouring_for(method) if private else "add_remove"
    acct = accountant_for(relation, accountant)
    no_noise = private and noise_multiplier is not None and check_real("noise_multiplier", noise_multiplier) == 0.0
    if no_noise and epsilon is not None:
        raise InvalidArgumentError("noise_multiplier=0 (the no-noise control) is not private; pass epsilon=None")
    if no_noise:
        sigma = 0.0
    elif private and noise_multiplier is not None:
        sigma = check_positive("noise_multiplier", noise_multiplier)
    elif private:
        sigma = noise_multiplier_for(target_epsilon=eps_req, delta=dlt, sample_rate=q, steps=total,
                                     accountant=acct, max_noise_multiplier=max_noise_multiplier,
                                     neighbouring=relation)
    if not isinstance(secure, bool):
        raise InvalidArgumentError(f"secure must be a bool, got {secure!r}")
    if secure:
        g_sample, g_public, g_feature = (make_generator(secure=True) for _ in range(3))
        g_noise = make_generator(secure=True, device=dev)
    else:
        s_sample, s_noise, s_public, s_feature = _seeds(seed, 4)
        g_sample = torch.Generator().manual_seed(s_sample)
        g_public = torch.Generator().manual_seed(s_public)
        g_feature = torch.Generator().manual_seed(s_feature)
        g_noise = torch.Generator(device=dev).manual_seed(s_noise)

    if optimizer == "adamw":
        opt = torch.optim.AdamW(list(params.values()), lr=lr_v, weight_decay=wd)
    else:
        opt = torch.optim.SGD(list(params.values()), lr=lr_v, momentum=0.9, weight_decay=wd)
    log_every_v = steps_per_epoch if log_every is None else check_int("log_every", log_every, minimum=1)

    history: list[dict[str, Any]] = []
    subspace: PublicSubspace | None = None
    acc_steps = 0
    window = {"loss": 0.0, "bs": 0.0, "clipped": 0.0, "clipped_n": 0, "public_loss": 0.0, "n": 0}
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=f"train[{method}]")
    perm = None
    step = 0
    for epoch in range(epochs):
        if method == "nonprivate":
            perm = torch.randperm(n, generator=g_sample)
        for j in range(steps_per_epoch):
            opt.zero_grad(set_to_none=True)
            if method == "nonprivate":
                idx = perm[j * bsz:(j + 1) * bsz] if j < steps_per_epoch - 1 else perm[j * bsz:]
                if idx.numel() == 0:
                    idx = perm[:bsz]
                batch = pose_batch(net, private_set, idx, device=dev)
                loss = pose_loss(fwd(batch[0]), *batch[1:])
                loss.backward()
                window["loss"] += float(loss.detach())
                window["bs"] += idx.numel()
            else:
                if method in _PROJECTED and (subspace is None or step % sub_refresh == 0):
                    if m_pub == len(public_set):
                        pidx = torch.arange(m_pub)
                    else:
                        pidx = torch.randperm(len(public_set), generator=g_public)[:m_pub]
                    pub = pose_batch(net, public_set, pidx, device=dev)
                    subspace = public_subspace_from_model(fwd, pose_loss, pub, k=sub_k, method=per_sample_method,
                                                          allow_lower_rank=True)
                mask = torch.rand(n, generator=g_sample) < q
                idx = mask.nonzero().squeeze(1)
                batch = pose_batch(net, private_set, idx, device=dev)
                cs = private_clipped_sum(fwd, batch, method=method, clip=c_norm, per_sample_method=per_sample_method)
                g = (cs.flat() if no_noise else
                     add_gaussian_noise(cs.flat(), clip=c_norm, noise_multiplier=sigma, generator=g_noise)) / bsz
                acc_steps += 1
                if subspace is not None:
                    g = subspace.project(g)
                if method in _FEATURE:
                    fmask = torch.rand(n, generator=g_feature) < q
                    fidx = fmask.nonzero().squeeze(1)
                    if fidx.numel() > 0:
                        if blurred_set is not None:
                            fb = pose_batch(net, blurred_set, fidx, device=dev)
                        else:
                            fb = pose_batch(net, private_set, fidx, device=dev, transform=psi)
                        ploss = pose_loss(fwd(fb[0]), *fb[1:])
                        gp = torch.autograd.grad(ploss, list(params.values()), allow_unused=True)
                        gp_flat = torch.cat([(torch.zeros_like(p) if t is None else t).reshape(-1)
                                             for p, t in zip(params.values(), gp)])
                        g = g + pub_w * gp_flat.detach()
                        window["public_loss"] += float(ploss.detach())
                for p, gg in zip(params.values(), unflatten_grads(g, params).values()):
                    p.grad = gg.clone()
                window["loss"] += float(cs.loss)
                window["bs"] += cs.batch_size
                if cs.batch_size:
                    window["clipped"] += float((cs.norms > c_norm).sum())
                    window["clipped_n"] += cs.batch_size
            opt.step()
            step += 1
            window["n"] += 1
            if bar is not None:
                bar.update(1)
            if step % log_every_v == 0 or step == total:
                entry: dict[str, Any] = {
                    "step": step, "epoch": epoch + 1,
                    "loss": window["loss"] / window["n"], "batch_size": window["bs"] / window["n"],
                }
                if private:
                    entry["eps_so_far"] = math.inf if no_noise else epsilon_from_history(
                        [(sigma, q, acc_steps)], delta=dlt, accountant=acct, neighbouring=relation)
                    entry["clipped_fraction"] = (window["clipped"] / window["clipped_n"]
                                                 if window["clipped_n"] else float("nan"))
                else:
                    entry["eps_so_far"] = math.inf
                if method in _FEATURE:
                    entry["public_loss"] = window["public_loss"] / window["n"]
                if subspace is not None:
                    entry["subspace_rank"] = subspace.rank
                history.append(entry)
                window = {"loss": 0.0, "bs": 0.0, "clipped": 0.0, "clipped_n": 0, "public_loss": 0.0, "n": 0}
    if bar is not None:
        bar.close()
    opt.zero_grad(set_to_none=True)

    config = {
        "method": method, "epsilon": eps_req, "delta": dlt, "clip": c_norm, "epochs": epochs, "batch_size": bsz,
        "k": sub_k, "refresh": sub_refresh, "n_public": m_pub, "blur": None if psi is None else psi.describe(),
        "lr": lr_v, "seed": seed, "accountant": acct, "neighbouring": relation, "public_weight": pub_w if method in _FEATURE else None,
        "optimizer": optimizer, "weight_decay": wd, "n_private": n, "device": str(dev), "secure": secure, "cached_features": cached,
    }
    if no_noise:
        guarantee = PrivacyGuarantee(
            epsilon=math.inf, delta=1.0, neighbouring="any change of the training data",
            protects="nothing: a no-noise control (noise_multiplier=0), for diagnosis only",
            mechanism=f"{method} with clipping (C={c_norm:g}) and everything else of the method, but no noise",
        )
    elif private:
        eps = epsilon_from_history([(sigma, q, acc_steps)], delta=dlt, accountant=acct, neighbouring=relation)
        guarantee = _guarantee(method, epsilon_req=eps_req, delta=dlt, eps=eps, sigma=sigma, clip=c_norm, q=q,
                               steps=acc_steps, accountant=acct, blur=psi, k=sub_k, public_weight=pub_w,
                               refresh=sub_refresh)
    else:
        guarantee = PrivacyGuarantee(
            epsilon=math.inf, delta=1.0, neighbouring="any change of the training data",
            protects="nothing: non-private training", mechanism="non-private minibatch training (no clipping, no noise)",
        )
    return TrainResult(model=net, guarantee=guarantee, history=history, steps=step, sample_rate=q,
                       noise_multiplier=sigma, method=method, config=config)
