"""Experiment helpers of the DP pose notebook (``notebooks/dppose.py``).

* :func:`design_runs` turns a scale preset into the list of training runs the notebook trains: the full
  epsilon grid for DP-SGD and feature-projective DP, a shorter grid for projected and feature DP, the other
  clipping norms, extra seeds, training from scratch and the effect of the subspace rank ``k`` -- each run
  trained once even when it serves several purposes;
* :func:`run_design` trains them (one call of :func:`~privkit.dppose.train.train` each) and evaluates
  PCKh@0.5 on held-out data;
* :func:`gap_recovered`, :func:`gap_table`, :func:`seed_spread`, :func:`per_joint_table`,
  :func:`paper_comparison`, :func:`claims_table`, :func:`check_guarantees` and :func:`compare_within_spread`
  summarise them;
* :func:`draw_pose` draws a skeleton on an image.

The paper's numbers (docs/dppose.md §4) are in :data:`PAPER_MPII_PCKH`, :data:`PAPER_NONPRIVATE_MPII` and
:data:`PAPER_HUMANART_AP`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from privkit._validate import check_choice, check_int, check_real
from privkit.data.types import MPII_JOINTS, PoseSet
from privkit.errors import InsufficientDataError, InvalidArgumentError
from privkit.privacy.guarantee import PrivacyGuarantee
from privkit.dppose.features import CachedFeatures
from privkit.dppose.metrics import PCKhResult
from privkit.dppose.model import build_pose_model
from privkit.dppose.train import METHODS, DPSpec, PublicSpec, Schedule, evaluate_pckh, train

__all__ = ["PAPER_MPII_PCKH", "PAPER_MPII_PCKH_BY_CLIP", "PAPER_CLIP_CLAIMS", "PAPER_NONPRIVATE_MPII", "PAPER_HUMANART_AP", "PAPER_GAP_FORMULA", "MPII_SKELETON",
           "RunSpec", "RunOutcome", "pose_model", "design_runs", "run_design", "train_run", "DesignData", "DesignSettings",
           "gap_recovered", "gap_table", "seed_spread", "per_joint_table", "paper_comparison", "claims_table",
           "pooled_seed_sd", "step_cost", "verdict", "MACHINE_DRIFT", "check_guarantees", "compare_within_spread",
           "draw_pose", "projection_diagnostics"]

#: MPII PCKh@0.5 (%) of the paper, frozen-backbone fine-tuning, C = 0.01: ``(method, epsilon) -> PCKh``.
PAPER_MPII_PCKH: dict[tuple[str, float], float] = {
    ("dpsgd", 0.2): 63.85, ("dpsgd", 0.8): 78.17, ("projected", 0.2): 78.48, ("projected", 0.8): 80.63,
    ("feature", 0.2): 75.46, ("feature", 0.8): 80.40, ("feature_projective", 0.8): 82.61}

#: The paper's MPII PCKh@0.5 (%) at other clipping norms: ``(method, epsilon, C) -> PCKh``. Its DP-SGD at C = 0.1 and
#: 1.0 (epsilon = 0.2) and, at C = 1.0, DP-SGD against feature-projective DP (epsilon not stated; probably 0.8 [I]).
PAPER_MPII_PCKH_BY_CLIP: dict[tuple[str, float, float], float] = {
    ("dpsgd", 0.2, 0.1): 28.46, ("dpsgd", 0.2, 1.0): 5.94, ("dpsgd", 0.8, 1.0): 12.53,
    ("feature_projective", 0.8, 1.0): 71.66}

#: The paper's text for "feature-projective DP > DP-SGD" at each clipping norm (what the claims table prints).
PAPER_CLIP_CLAIMS: dict[float, str] = {
    0.01: "82.61 vs 78.17 (eps=0.8, C=0.01)",
    0.1: "not given at C=0.1 (the paper's DP-SGD there: 28.46 at eps=0.2)",
    1.0: "71.66 vs 12.53 (C=1.0, eps probably 0.8)"}

#: The paper's non-private MPII PCKh@0.5 used in its "73% of the gap" headline (secondary source A, full fine-tune).
PAPER_NONPRIVATE_MPII = 89.36

#: HumanArt AP at epsilon = 0.8, C = 0.01, fine-tuning (paper: feature-projective; secondary source: DP-SGD).
PAPER_HUMANART_AP: dict[str, float] = {"feature_projective": 51.6, "dpsgd": 39.0}

#: The formula behind the paper's headline: (82.61 - 63.85) / (89.36 - 63.85) = 0.735.
PAPER_GAP_FORMULA = (
    "gap recovered = (PCKh(method, eps) - PCKh(DP-SGD, eps_min)) / (PCKh(non-private) - PCKh(DP-SGD, eps_min))"
)

#: Limbs of the MPII skeleton as joint-index pairs (MPII order, :data:`privkit.data.types.MPII_JOINTS`).
MPII_SKELETON: tuple[tuple[int, int], ...] = (
    (0, 1), (1, 2), (2, 6), (3, 6), (3, 4), (4, 5),      # legs to the pelvis
    (6, 7), (7, 8), (8, 9),                              # spine, neck, head
    (7, 12), (12, 11), (11, 10), (7, 13), (13, 14), (14, 15),  # arms
)

_PRIVATE = tuple(m for m in METHODS if m != "nonprivate")
_PROJECTED = ("projected", "feature_projective")
_INITS = ("warm", "scratch")


# ---------------------------------------------------------------------------------------------- the network
def pose_model(cfg: Any, seed: int, *, pretrained: bool = False, data_root: str | Path | None = None) -> nn.Module:
    """A fresh pose network of the preset ``cfg`` (its ``backbone``, ``image_size`` and ``width``).

    ``"efficientnet_lite0"``: the frozen ImageNet pyramid (installed weights) with a neck of width ``cfg.width``;
    ``"tiny_vit_5m"``: the paper's backbone, random unless ``pretrained`` (then its ImageNet weights from
    ``data_root/weights/tiny_vit_5m/model.safetensors``, never downloaded); ``"convnet"``: privkit's conv net.
    A fresh network is the "scratch" start; warm runs load the public-data pretraining over it.
    """
    if cfg.backbone == "tiny_vit_5m":
        weights: str | Path | None = "random"
        if pretrained:
            weights = Path(data_root) / "weights" / "tiny_vit_5m" / "model.safetensors" if data_root else None
        return build_pose_model(cfg.image_size, backbone="tiny_vit_5m", weights=weights, seed=seed)
    if cfg.backbone == "efficientnet_lite0":
        return build_pose_model(cfg.image_size, backbone="efficientnet_lite0", neck_width=cfg.width, seed=seed)
    return build_pose_model(cfg.image_size, width=cfg.width, seed=seed)


# ---------------------------------------------------------------------------------------------- design
@dataclass(frozen=True)
class RunSpec:
    """One training run of the notebook.

    Attributes:
        method: one of :data:`~privkit.dppose.train.METHODS`.
        init: ``"warm"`` (from the public-data pretraining) or ``"scratch"``.
        epsilon: target epsilon (None for ``nonprivate``).
        clip: clipping norm C (None for ``nonprivate``).
        k: subspace rank (projected methods only, else None).
        seed: seed of the run (initialisation, sampling, noise).
        purposes: what the run is used for: ``"grid"``, ``"clip"``, ``"seeds"``, ``"init"``, ``"k"``,
            ``"reference"`` (the non-private reference), ``"blurred"`` (the non-private baseline on blurred
            images).
        view: the training images: ``"raw"``, or ``"blurred"`` (psi(x) only: the paper's non-private
            baseline on blurred images; non-private runs only).
    """

    method: str
    init: str
    epsilon: float | None
    clip: float | None
    k: int | None
    seed: int
    purposes: tuple[str, ...] = ()
    view: str = "raw"

    @property
    def key(self) -> tuple[Any, ...]:
        """Identity of the run (everything but its purposes)."""
        return (self.method, self.init, self.epsilon, self.clip, self.k, self.seed, self.view)

    @property
    def label(self) -> str:
        """Short readable name, e.g. ``dpsgd warm eps=0.8 C=0.01 seed=0``."""
        parts = [self.method, self.init]
        if self.epsilon is not None:
            parts += [f"eps={self.epsilon:g}", f"C={self.clip:g}"]
        if self.k is not None:
            parts.append(f"k={self.k}")
        parts.append(f"seed={self.seed}")
        if self.view != "raw":
            parts.append(f"on {self.view} images")
        return " ".join(parts)


def design_runs(cfg: Any, *, seed: int = 0) -> list[RunSpec]:
    """The runs a scale preset asks for, each trained once (purposes merged), in a fixed order.

    With ``eps_max = max(cfg.epsilons + cfg.epsilons_other)`` and ``C1 = cfg.clips[0]`` (warm start, seed
    ``seed``, rank ``cfg.k`` unless said otherwise):

    * ``reference``/``seeds``: non-private, ``cfg.seeds`` seeds;
    * ``blurred``: non-private on the blurred images psi(x) (the paper's baseline), when ``cfg.blurred_baseline``;
    * ``grid``: DP-SGD and feature-projective at every ``cfg.epsilons``; projected and feature at every
      ``cfg.epsilons_other`` (C1);
    * ``clip``: the methods of ``cfg.other_clip_methods`` at ``eps_max`` with every clipping norm of ``cfg.clips``;
    * ``seeds``: the methods of ``cfg.seed_methods`` at ``eps_max``, and DP-SGD and feature-projective DP (the
      paper's headline pair) at the smallest epsilon, C1, ``cfg.seeds`` seeds (the spread behind every verdict);
    * ``init``: every method of ``cfg.scratch_methods`` from scratch at ``eps_max``, C1, and its warm twin;
    * ``k``: feature-projective at ``eps_max``, C1, with every rank of ``cfg.k_grid`` and ``cfg.k``.

    Args:
        cfg: a :class:`~privkit.studies.dppose.presets.DPPoseConfig` (or any object with its fields).
        seed: base seed; run seeds are ``seed, seed + 1, ...``.

    Returns:
        The list of :class:`RunSpec`.
    """
    seed = check_int("seed", seed, minimum=0)
    eps_all = tuple(cfg.epsilons) + tuple(cfg.epsilons_other)
    if not eps_all or not cfg.clips:
        raise InvalidArgumentError(f"cfg.epsilons + cfg.epsilons_other and cfg.clips must each hold at least one "
                                   f"value, got {eps_all!r} and {tuple(cfg.clips)!r}")
    n_seeds = check_int("cfg.seeds", cfg.seeds, minimum=1)
    k0 = check_int("cfg.k", cfg.k, minimum=1)
    for m in cfg.scratch_methods:
        check_choice("cfg.scratch_methods", m, METHODS)
    eps_max = max(float(e) for e in eps_all)
    c1 = float(cfg.clips[0])
    runs: dict[tuple[Any, ...], RunSpec] = {}

    def add(method: str, purpose: str, *, epsilon: float | None = None, clip: float | None = None,
            init: str = "warm", k: int | None = None, s: int = 0, view: str = "raw") -> None:
        private = method != "nonprivate"
        spec = RunSpec(method=method, init=init, seed=seed + s, view=view,
                       epsilon=float(epsilon if epsilon is not None else eps_max) if private else None,
                       clip=float(clip if clip is not None else c1) if private else None,
                       k=(k if k is not None else k0) if method in _PROJECTED else None)
        old = runs.get(spec.key)
        purposes = (old.purposes if old else ()) + ((purpose,) if not old or purpose not in old.purposes else ())
        runs[spec.key] = replace(spec, purposes=purposes)

    for s in range(n_seeds):
        add("nonprivate", "reference" if s == 0 else "seeds", s=s)
    add("nonprivate", "seeds")
    if getattr(cfg, "blurred_baseline", False):
        add("nonprivate", "blurred", view="blurred")
    for grid, methods in ((cfg.epsilons, ("dpsgd", "feature_projective")),
                          (cfg.epsilons_other, ("projected", "feature"))):
        for e in grid:
            for m in methods:
                add(m, "grid", epsilon=float(e))
    clip_methods = tuple(getattr(cfg, "other_clip_methods", _PRIVATE))
    for m in clip_methods:
        check_choice("cfg.other_clip_methods", m, _PRIVATE)
    for c in cfg.clips[1:]:
        for m in clip_methods:
            add(m, "clip", clip=float(c))
    for m in clip_methods if len(cfg.clips) > 1 else ():
        add(m, "clip")
    seed_methods = tuple(getattr(cfg, "seed_methods", ("dpsgd", "feature_projective")))
    for m in seed_methods:
        check_choice("cfg.seed_methods", m, _PRIVATE)
    eps_min = min(float(e) for e in eps_all)
    for s in range(n_seeds):
        for m in seed_methods:
            add(m, "seeds", s=s)
        for m in ("dpsgd", "feature_projective") if eps_min != eps_max else ():
            if m in seed_methods:
                add(m, "seeds", epsilon=eps_min, s=s)
    for m in cfg.scratch_methods:
        add(m, "init", init="scratch")
        add(m, "init")
    for kk in tuple(cfg.k_grid) + (k0,):
        add("feature_projective", "k", k=int(kk))
    return list(runs.values())


# ---------------------------------------------------------------------------------------------- running
@dataclass
class RunOutcome:
    """A trained and evaluated run.

    Attributes:
        spec: the run.
        pckh: PCKh@0.5 on the test set.
        guarantee: the privacy guarantee that holds (``epsilon = inf`` for non-private runs).
        steps: optimiser steps; sample_rate: Poisson rate q; noise_multiplier: sigma (None if non-private).
        history: the training history (diagnostics on private data, not covered by the guarantee).
        predictions: (n_show, J, 2) predicted keypoints of the first ``n_show`` test images.
        cpu_seconds, wall_seconds: cost of the training run (process CPU time, all threads).
        config: the trainer's settings (:attr:`TrainResult.config`).
        model: the trained model, for the runs ``run_design(keep_model=...)`` selects (None otherwise).
    """

    spec: RunSpec
    pckh: PCKhResult
    guarantee: PrivacyGuarantee
    steps: int
    sample_rate: float
    noise_multiplier: float | None
    history: list[dict[str, Any]]
    predictions: torch.Tensor
    cpu_seconds: float
    wall_seconds: float
    config: dict[str, Any] = field(default_factory=dict)
    model: nn.Module | None = None

    def row(self) -> dict[str, Any]:
        """One flat row for a results table."""
        s, g = self.spec, self.guarantee
        last = self.history[-1] if self.history else {}
        return {"method": s.method, "init": s.init, "view": s.view, "epsilon": s.epsilon, "clip_norm": s.clip,
                "k": s.k, "seed": s.seed, "purposes": "+".join(s.purposes), "pckh": self.pckh.mean,
                "epsilon_reported": g.epsilon, "delta": g.delta if s.epsilon is not None else float("nan"),
                "neighbouring": self.config.get("neighbouring", "") if s.epsilon is not None else "",
                "accountant": self.config.get("accountant", "") if s.epsilon is not None else "",
                "noise_multiplier": self.noise_multiplier, "sample_rate": self.sample_rate, "steps": self.steps,
                "final_loss": last.get("loss", float("nan")),
                "clipped_fraction": last.get("clipped_fraction", float("nan")),
                "cpu_s": self.cpu_seconds, "wall_s": self.wall_seconds}


@dataclass(frozen=True, eq=False)
class DesignData:
    """The data and models every run of a design shares.

    Attributes:
        private_set: private training data.
        test_set: held-out evaluation data (PCKh@0.5).
        make_model: ``seed -> fresh model`` (its initialisation is the "scratch" start).
        warm_state: state dict of the public-data pretraining (needed by ``init="warm"`` runs).
        public_set: public data disjoint from ``private_set`` (needed by the projected methods).
        blurred_set: ψ(x) of every private record, row for row: the public view of the feature methods and the
            training set of ``view="blurred"`` runs; required when ``private_set`` holds cached features (see
            :func:`~privkit.dppose.features.cache_features`), computed by the trainer from the images otherwise.
    """

    private_set: PoseSet
    test_set: PoseSet
    make_model: Callable[[int], nn.Module]
    warm_state: dict[str, torch.Tensor] | None = None
    public_set: PoseSet | None = None
    blurred_set: PoseSet | None = None


@dataclass(frozen=True)
class DesignSettings:
    """The training settings every run of a design shares (AdamW).

    Attributes:
        delta: target δ of the private runs.
        epochs, batch_size, lr: the schedule (``nonprivate_epochs``: epochs of the non-private runs, default
            ``epochs``).
        n_public_grads: public per-sample gradients per subspace estimate (capped at the public set size).
        refresh: subspace refresh interval.
        accountant: ``"prv"``, ``"rdp"`` or ``"pld"`` for the add/remove methods; the feature methods are accounted
            under substitution with ``"pld"`` whatever this says (see :class:`privkit.dppose.DPSpec`).
        micro_batch: records per forward/backward pass (:class:`privkit.dppose.Schedule`; None: whole batches).
    """

    delta: float
    epochs: int
    batch_size: int
    lr: float
    n_public_grads: int
    refresh: int
    accountant: str = "prv"
    nonprivate_epochs: int | None = None
    micro_batch: int | None = None


def run_design(runs: Sequence[RunSpec], data: DesignData, settings: DesignSettings, *, n_show: int = 4,
               device: str | torch.device = "cpu", progress: bool = False,
               on_result: Callable[[RunOutcome], None] | None = None,
               keep_model: Callable[[RunSpec], bool] | None = None) -> list[RunOutcome]:
    """Train and evaluate every run of a design.

    Args:
        runs: the runs (see :func:`design_runs`).
        data: the data and models the runs share (:class:`DesignData`).
        settings: the training settings the runs share (:class:`DesignSettings`).
        n_show: how many test images keep their predictions (qualitative figure).
        device: training device.
        progress: show a progress bar over the runs (tqdm.auto).
        on_result: called with each outcome as soon as it is ready (e.g. to print its guarantee).
        keep_model: which runs keep their trained model in :attr:`RunOutcome.model` (default: none).

    Returns:
        One :class:`RunOutcome` per run, in order.
    """
    if not isinstance(data, DesignData) or not isinstance(settings, DesignSettings):
        raise InvalidArgumentError("data must be a DesignData and settings a DesignSettings, got "
                                   f"{type(data).__name__} and {type(settings).__name__}")
    n_show = check_int("n_show", n_show, minimum=0)
    outcomes: list[RunOutcome] = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(runs), desc="runs")
    for spec in runs:
        out = train_run(spec, data, settings, n_show=n_show, device=device,
                        keep_model=keep_model is not None and keep_model(spec))
        outcomes.append(out)
        if bar is not None:
            bar.update(1)
        if on_result is not None:
            on_result(out)
    if bar is not None:
        bar.close()
    return outcomes


def train_run(spec: RunSpec, data: DesignData, settings: DesignSettings, *, n_show: int = 4,
              device: str | torch.device = "cpu", keep_model: bool = False,
              checkpoint: str | Path | None = None) -> RunOutcome:
    """Train and evaluate one run of a design (what :func:`run_design` does for each run, and a
    ``dppose.train`` job for one; ``checkpoint``: a folder for the trainer's epoch-boundary checkpoints)."""
    if not isinstance(spec, RunSpec):
        raise InvalidArgumentError(f"runs must hold RunSpec objects, got {type(spec).__name__}")
    warm_state, public_set, blurred_set, test_set = data.warm_state, data.public_set, data.blurred_set, data.test_set
    nonprivate_epochs = settings.nonprivate_epochs
    check_choice("init", spec.init, _INITS)
    if spec.init == "warm" and warm_state is None:
        raise InvalidArgumentError(f"run {spec.label!r} needs warm_state (the public-data pretraining)")
    dp = public = None
    if spec.method != "nonprivate":
        dp = DPSpec(epsilon=spec.epsilon, delta=settings.delta, clip=spec.clip, accountant=settings.accountant)
    if spec.method in _PROJECTED:
        if public_set is None:
            raise InsufficientDataError(f"run {spec.label!r} needs a public_set")
        m = min(int(settings.n_public_grads), len(public_set))
        public = PublicSpec(public_set=public_set, k=min(int(spec.k), m), n_public=m, refresh=settings.refresh)
    if spec.method in ("feature", "feature_projective") and blurred_set is not None:
        public = PublicSpec(blurred_set=blurred_set) if public is None else replace(public, blurred_set=blurred_set)
    train_set = data.private_set
    if spec.view == "blurred":
        if spec.method != "nonprivate":
            raise InvalidArgumentError(f"run {spec.label!r}: only non-private runs train on blurred images")
        if blurred_set is None:
            raise InsufficientDataError(f"run {spec.label!r} needs blurred_set")
        train_set = blurred_set
    elif spec.view != "raw":
        raise InvalidArgumentError(f"run {spec.label!r}: view must be 'raw' or 'blurred', got {spec.view!r}")
    t0, c0 = time.perf_counter(), time.process_time()
    epochs = settings.epochs if spec.method != "nonprivate" or nonprivate_epochs is None else nonprivate_epochs
    schedule = Schedule(epochs=epochs, batch_size=settings.batch_size, lr=settings.lr, micro_batch=settings.micro_batch)
    res = train(data.make_model(spec.seed), train_set, method=spec.method, dp=dp, public=public, schedule=schedule,
                seed=spec.seed, device=device, warm_start=warm_state if spec.init == "warm" else None,
                checkpoint=checkpoint)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    score = evaluate_pckh(res.model, test_set)
    pred = (res.model.predict(test_set.images[:n_show], features=isinstance(test_set, CachedFeatures)).cpu()
            if n_show else torch.empty(0, 16, 2))
    return RunOutcome(spec=spec, pckh=score, guarantee=res.guarantee, steps=res.steps, sample_rate=res.sample_rate,
                      noise_multiplier=res.noise_multiplier, history=res.history, predictions=pred, cpu_seconds=cpu,
                      wall_seconds=wall, config=res.config, model=res.model if keep_model else None)


# ---------------------------------------------------------------------------------------------- diagnostics
def projection_diagnostics(models: dict[str, nn.Module], *, private_set: PoseSet, public_set: PoseSet,
                           ks: Sequence[int], clip: float, noise_multiplier: float, batch_size: int,
                           n_private: int = 256, n_public: int = 256) -> pd.DataFrame:
    """What projected DP-SGD depends on, measured at given weights.

    At each model's weights: the clean mean clipped gradient ``g`` of ``n_private`` private records (one clip
    per record at ``clip``, no noise -- a diagnostic on private data, NOT covered by any guarantee), and the
    top-``k`` subspace ``V_k`` of ``n_public`` public per-sample gradients (as the trainer builds it).  For each
    ``k``: the fraction of ``g``'s energy inside the subspace ``||V_k^T g||^2 / ||g||^2``, and the signal-to-noise
    ratio of one step's noisy mean gradient, unprojected ``||g||^2 / (p s^2)`` and projected
    ``||V_k^T g||^2 / (k s^2)``, with ``s = noise_multiplier * clip / batch_size`` the noise standard deviation
    per coordinate and ``p`` the number of trainable parameters.  Projection helps when the projected ratio is
    the larger: the subspace must hold more than ``k / p`` of the energy.

    Args:
        models: label -> model (e.g. the warm start and the trained models), each with a ``targets`` method.
        private_set, public_set: images or cached features (:class:`~privkit.dppose.features.CachedFeatures`).
        ks: subspace ranks, each ``1 <= k <= n_public``.
        clip, noise_multiplier, batch_size: the private runs' C, sigma and expected batch size B.
        n_private, n_public: records used (the first ones of each set).

    Returns:
        One row per (model, k): ``model, k, p, energy_fraction, random_fraction (k / p), snr_unprojected,
        snr_projected, snr_gain``.
    """
    from privkit.dppose.grads import clipped_grad_sum, trainable_parameters
    from privkit.dppose.subspace import public_subspace_from_model
    from privkit.dppose.train import _FromFeatures, pose_batch, pose_loss

    ks = sorted({check_int("ks", int(k), minimum=1) for k in ks})
    if not ks:
        raise InvalidArgumentError("ks must hold at least one rank")
    n_priv = min(check_int("n_private", n_private, minimum=1), len(private_set))
    m = min(check_int("n_public", n_public, minimum=1), len(public_set))
    if ks[-1] > m:
        raise InvalidArgumentError(f"every k must be <= n_public = {m}, got {ks[-1]}")
    c = check_real("clip", clip)
    sig = check_real("noise_multiplier", noise_multiplier)
    b = check_int("batch_size", batch_size, minimum=1)
    if c <= 0 or sig <= 0:
        raise InvalidArgumentError(f"clip and noise_multiplier must be > 0, got {c} and {sig}")
    s = sig * c / b
    rows = []
    for label, model in models.items():
        fwd = _FromFeatures(model) if isinstance(private_set, CachedFeatures) else model
        p = sum(t.numel() for t in trainable_parameters(model).values())
        pb = pose_batch(model, private_set, torch.arange(n_priv))
        g = clipped_grad_sum(fwd, pose_loss, pb, clip=c).flat() / n_priv
        pub = pose_batch(model, public_set, torch.arange(m))
        sub = public_subspace_from_model(fwd, pose_loss, pub, k=ks[-1], allow_lower_rank=True)
        coef = sub.basis.T.to(g.dtype) @ g  # coordinates in the eigenbasis, descending eigenvalues
        g2 = float(g @ g)
        for k in ks:
            kk = min(k, sub.rank)
            e = float((coef[:kk] ** 2).sum())
            rows.append({"model": label, "k": k, "p": p, "energy_fraction": e / g2 if g2 > 0 else float("nan"),
                         "random_fraction": kk / p, "snr_unprojected": g2 / (p * s * s),
                         "snr_projected": e / (kk * s * s), "snr_gain": (e / kk) / (g2 / p) if g2 > 0 else float("nan")})
    return pd.DataFrame(rows)


def step_cost(make_model: Callable[[int], nn.Module], data: PoseSet, *, batch_size: int, clip: float, delta: float,
              lr: float, device: str | torch.device = "cpu", rounds: int = 5, steps: int = 2) -> dict[str, Any]:
    """Seconds per optimiser step of non-private training and of DP-SGD on the same network and data, interleaved.

    ``rounds`` times, a fresh non-private and a fresh DP-SGD trainer each time ``steps`` steps
    (:meth:`~privkit.dppose.train.PrivateTrainer.probe_seconds`: one untimed warm-up step first, then the timed
    ones; no step is accounted and the models are thrown away). The medians and their ratio are returned. Time it
    on stand-in data of the private set's shape (e.g. the public split), never on the private records. When
    ``data`` holds cached features, their patch Grams are attached first (as the notebook does for the private
    set), so the DP step is the one the runs take.

    Returns:
        ``{"nonprivate_s", "dpsgd_s", "ratio", "grams", "rounds", "steps", "batch_size"}``.
    """
    from statistics import median

    from privkit.dppose.features import cache_input_grams
    from privkit.dppose.train import make_private

    rounds = check_int("rounds", rounds, minimum=1)
    steps = check_int("steps", steps, minimum=1)
    grams = False
    if isinstance(data, CachedFeatures) and data.grams is None:
        try:
            data = cache_input_grams(make_model(0), data)
            grams = True
        except InvalidArgumentError:  # a first layer that is not a plain convolution, or too many records
            pass
    times: dict[str, list[float]] = {"nonprivate": [], "dpsgd": []}
    schedule = Schedule(epochs=1, batch_size=batch_size, lr=lr)
    for r in range(rounds):
        for method in times:
            dp = None if method == "nonprivate" else DPSpec(noise_multiplier=1.0, delta=delta, clip=clip)
            trainer = make_private(make_model(r), data, method=method, dp=dp, schedule=schedule, seed=r, device=device)
            times[method].append(trainer.probe_seconds(steps)["step"])
    a, b = median(times["nonprivate"]), median(times["dpsgd"])
    return {"nonprivate_s": a, "dpsgd_s": b, "ratio": b / a, "grams": grams, "rounds": rounds, "steps": steps,
            "batch_size": batch_size}


# ---------------------------------------------------------------------------------------------- summaries
def gap_recovered(value: float, *, low: float, high: float) -> float:
    """Fraction of the privacy gap recovered: ``(value - low) / (high - low)``.

    Args:
        value: the method's score (e.g. PCKh of feature-projective DP at epsilon = 0.8).
        low: the private baseline (the paper: DP-SGD at epsilon = 0.2).
        high: the non-private score.

    Returns:
        The fraction (1 = the non-private score, 0 = the baseline; may leave [0, 1]).
    """
    v, lo, hi = (check_real(n, x) for n, x in (("value", value), ("low", low), ("high", high)))
    if hi == lo:
        raise InvalidArgumentError(f"high must differ from low to define a gap, both are {lo}")
    return (v - lo) / (hi - lo)


def _select(df: pd.DataFrame, *, init: str = "warm", clip: float | None = None, k: int | None = None,
            seed: int | None = None) -> pd.DataFrame:
    d = _raw(df)
    d = d[d.init == init]
    if clip is not None:
        d = d[(d.clip_norm == clip) | d.clip_norm.isna()]
    if k is not None:
        d = d[(d.k == k) | d.k.isna()]
    if seed is not None:
        d = d[d.seed == seed]
    return d


def gap_table(df: pd.DataFrame, *, clip: float, k: int, seed: int) -> pd.DataFrame:
    """Fraction of the privacy gap recovered by every private method at every epsilon (warm start).

    Two low ends: ``"paper"`` is DP-SGD at the smallest epsilon of the grid (the paper's formula,
    :data:`PAPER_GAP_FORMULA`); ``"same_eps"`` is DP-SGD at the same epsilon.  The high end is the
    non-private run of the same seed.

    Args:
        df: the results table (rows of :meth:`RunOutcome.row`).
        clip, k, seed: which runs (clipping norm, rank of the projected methods, seed).

    Returns:
        Columns ``method, epsilon, pckh, nonprivate, dpsgd_low, gap_paper, dpsgd_same_eps, gap_same_eps``.
    """
    d = _select(df, clip=clip, k=k, seed=seed)
    nonpriv = d[d.method == "nonprivate"].pckh
    dp = d[d.method == "dpsgd"].set_index("epsilon").pckh
    if nonpriv.empty or dp.empty:
        raise InsufficientDataError("gap_table needs a non-private run and DP-SGD runs with these settings")
    high = float(nonpriv.iloc[0])
    eps_min = float(dp.index.min())
    rows = []
    for _, r in d[d.method != "nonprivate"].sort_values(["method", "epsilon"]).iterrows():
        same = float(dp[r.epsilon]) if r.epsilon in dp.index else float("nan")
        gap_same = gap_recovered(r.pckh, low=same, high=high) if same == same and same != high else float("nan")
        rows.append({"method": r.method, "epsilon": r.epsilon, "pckh": r.pckh, "nonprivate": high,
                     "dpsgd_low": float(dp[eps_min]), "eps_low": eps_min,
                     "gap_paper": gap_recovered(r.pckh, low=float(dp[eps_min]), high=high),
                     "dpsgd_same_eps": same, "gap_same_eps": gap_same})
    return pd.DataFrame(rows)


def seed_spread(df: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation (ddof = 1), min and max of PCKh over the runs tagged ``"seeds"``.

    Returns:
        One row per (method, epsilon, clip_norm) with ``n_seeds, mean, sd, min, max``.
    """
    d = df[df.purposes.str.contains("seeds|reference")]
    if d.empty:
        raise InsufficientDataError("no runs are tagged 'seeds'")
    g = d.groupby(["method", "epsilon", "clip_norm"], dropna=False).pckh
    out = g.agg(n_seeds="count", mean="mean", sd="std", min="min", max="max").reset_index()
    return out


def per_joint_table(outcomes: Sequence[RunOutcome], *, epsilon: float, clip: float, k: int, seed: int) -> pd.DataFrame:
    """PCKh@0.5 per joint of every method (warm start) at ``epsilon`` (and the non-private run).

    Returns:
        One row per method: ``method, mean`` and one column per MPII joint (pelvis and thorax are shown but
        are not part of the mean, as in the MPII protocol).
    """
    rows = []
    for o in outcomes:
        s = o.spec
        if s.init != "warm" or s.seed != seed or s.view != "raw":
            continue
        if s.method != "nonprivate" and (s.epsilon != epsilon or s.clip != clip or (s.k is not None and s.k != k)):
            continue
        rows.append({"method": s.method, **o.pckh.as_dict()})
    if not rows:
        raise InsufficientDataError(f"no warm-start runs at epsilon={epsilon}, clip={clip}, seed={seed}")
    order = {m: i for i, m in enumerate(METHODS)}
    return pd.DataFrame(rows).sort_values("method", key=lambda s: s.map(order)).reset_index(drop=True)


def paper_comparison(df: pd.DataFrame, *, clip: float, k: int, seed: int) -> pd.DataFrame:
    """The paper's MPII PCKh@0.5 (and HumanArt AP) beside ours, warm start, at the main clipping norm.

    Returns:
        Columns ``method, epsilon, clip (ours), paper_mpii_pckh (the paper's main table, C=0.01),
        paper_mpii_pckh_same_clip (the paper at our clipping norm, where it gives one), ours_pckh,
        paper_humanart_ap``; ours is NaN where the run does not exist at this scale.
    """
    d = _select(df, clip=clip, k=k, seed=seed).set_index(["method", "epsilon"]).pckh

    def same_clip(m: str, e: float) -> float:
        if math.isclose(clip, 0.01, rel_tol=1e-9):
            return PAPER_MPII_PCKH.get((m, e), float("nan"))
        return next((v for (pm, pe, pc), v in PAPER_MPII_PCKH_BY_CLIP.items()
                     if pm == m and pe == e and math.isclose(pc, clip, rel_tol=1e-9)), float("nan"))

    rows = [{"method": "nonprivate", "epsilon": float("inf"), "clip": float("nan"),
             "paper_mpii_pckh": PAPER_NONPRIVATE_MPII, "paper_mpii_pckh_same_clip": PAPER_NONPRIVATE_MPII,
             "ours_pckh": _nonprivate(df, seed), "paper_humanart_ap": float("nan")}]
    for m in _PRIVATE:
        for e in (0.2, 0.4, 0.6, 0.8):
            paper = PAPER_MPII_PCKH.get((m, e), float("nan"))
            ours = float(d[(m, e)]) if (m, e) in d.index else float("nan")
            ha = PAPER_HUMANART_AP.get(m, float("nan")) if e == 0.8 else float("nan")
            if math.isnan(paper) and math.isnan(ours):
                continue
            rows.append({"method": m, "epsilon": e, "clip": float(clip), "paper_mpii_pckh": paper,
                         "paper_mpii_pckh_same_clip": same_clip(m, e), "ours_pckh": ours, "paper_humanart_ap": ha})
    return pd.DataFrame(rows)


def _raw(df: pd.DataFrame) -> pd.DataFrame:
    """The runs trained on the raw images (drops the non-private baseline on blurred images)."""
    return df[df.view == "raw"] if "view" in df.columns else df


def _nonprivate(df: pd.DataFrame, seed: int) -> float:
    df = _raw(df)
    d = df[(df.method == "nonprivate") & (df.init == "warm") & (df.seed == seed)].pckh
    return float(d.iloc[0]) if len(d) else float("nan")


#: Smallest difference (PCKh points) a verdict may rest on, whatever the seed spread: trained results move by
#: about one point from one CPU (or BLAS kernel) to another, like a change of seed.
MACHINE_DRIFT = 1.0


def pooled_seed_sd(df: pd.DataFrame) -> float:
    """Run-to-run standard deviation of PCKh, pooled over every cell trained with several seeds.

    Returns NaN when no cell has two seeds.
    """
    d = _raw(df)
    d = d[d.purposes.str.contains("seeds|reference")]
    g = d.groupby(["method", "init", "epsilon", "clip_norm", "k"], dropna=False).pckh
    var = g.var(ddof=1)
    n = g.count()
    ok = n > 1
    if not bool(ok.any()):
        return float("nan")
    return float(math.sqrt(float((var[ok] * (n[ok] - 1)).sum()) / float((n[ok] - 1).sum())))


def _cell(df: pd.DataFrame, method: str, *, epsilon: float | None, clip: float | None, k: int | None,
          init: str = "warm", view: str = "raw") -> pd.Series:
    d = df[(df.method == method) & (df.init == init)]
    if "view" in d.columns:
        d = d[d.view == view]
    if method != "nonprivate":
        d = d[(d.epsilon == epsilon) & (d.clip_norm == clip)]
        if method in _PROJECTED:
            d = d[d.k == k]
    return d.pckh


def verdict(a: Sequence[float], b: Sequence[float], *, sd: float, floor: float = MACHINE_DRIFT) -> dict[str, Any]:
    """Is the mean of runs ``a`` above the mean of runs ``b`` by more than the noise of the comparison?

    The margin is ``max(2 * sd * sqrt(1/n_a + 1/n_b), floor)``: about a 95 % interval of the difference of the
    two means under the pooled run-to-run spread ``sd``, never below ``floor`` (the drift of a trained result
    across machines).  The verdict is :func:`privkit.studies.claims.judge_claim` on the difference with the
    interval ``[diff - margin, diff + margin]`` against 0 (kind ``"above"``): ``"holds"`` when the difference
    exceeds the margin, ``"does not hold"`` when it is at or below minus the margin, ``"not resolvable"`` in
    between, or when a run is missing or ``sd`` is unknown.

    Returns:
        ``{"mean_a", "mean_b", "diff", "margin", "n_a", "n_b", "verdict"}``.
    """
    xa = [float(v) for v in a]
    xb = [float(v) for v in b]
    if not xa or not xb:
        return {"mean_a": float("nan"), "mean_b": float("nan"), "diff": float("nan"), "margin": float("nan"),
                "n_a": len(xa), "n_b": len(xb), "verdict": "not resolvable: not run at this scale"}
    ma, mb = sum(xa) / len(xa), sum(xb) / len(xb)
    diff = ma - mb
    if not math.isfinite(sd):
        return {"mean_a": ma, "mean_b": mb, "diff": diff, "margin": float("nan"), "n_a": len(xa), "n_b": len(xb),
                "verdict": "not resolvable: no seed spread at this scale"}
    from privkit.studies.claims import judge_claim

    margin = max(2.0 * sd * math.sqrt(1.0 / len(xa) + 1.0 / len(xb)), float(floor))
    # the difference with its interval [diff - margin, diff + margin], judged against 0 like every claims table
    v = judge_claim(diff, diff - margin, diff + margin, threshold=0.0, kind="above")
    return {"mean_a": ma, "mean_b": mb, "diff": diff, "margin": margin, "n_a": len(xa), "n_b": len(xb), "verdict": v}


#: What else stands between a method's claims and a verdict here (the claims table's cause column).
_CAUSES = {
    "projected": "the public subspace comes from the cartoon-style public split (domain-shifted public data)",
    "feature": "feature DP is accounted under substitution (privkit's guarantee), which needs more noise at the same "
               "epsilon than the add/remove accounting of the paper's code",
    "feature_projective": "both: substitution accounting and a domain-shifted public subspace"}


def _paper_at_clip(clip: float) -> str:
    """The paper's text for feature-projective DP against DP-SGD at clipping norm ``clip``."""
    for c, text in PAPER_CLIP_CLAIMS.items():
        if math.isclose(c, clip, rel_tol=1e-9):
            return text
    return f"not given at C={clip:g}"


def claims_table(df: pd.DataFrame, *, epsilons: Sequence[float], clip: float, other_clips: Sequence[float], k: int,
                 seed: int | None = None) -> pd.DataFrame:
    """The paper's claims as orderings of two cells, its numbers and ours, with a verdict from the data.

    Each cell is the mean over the seeds trained for it (warm start unless stated); the verdict comes from
    :func:`verdict` with the pooled run-to-run spread (:func:`pooled_seed_sd`).

    Args:
        df: the results table (rows of :meth:`RunOutcome.row`).
        epsilons: the epsilon grid (the claims use its smallest and largest value).
        clip: the main clipping norm; other_clips: the others.
        k: rank of the projected methods.
        seed: unused (kept for callers of the single-seed version); every seed of a cell is used.

    Returns:
        Columns ``claim, paper, ours, n_runs, difference, margin, verdict, cause`` (why a "not resolvable" claim
        could not be decided; empty otherwise).
    """
    eps = sorted(float(e) for e in epsilons)
    if not eps:
        raise InvalidArgumentError("epsilons must not be empty")
    lo, hi = eps[0], eps[-1]
    sd = pooled_seed_sd(df)

    def c(method: str, e: float | None = None, cl: float | None = None, init: str = "warm",
          view: str = "raw") -> pd.Series:
        return _cell(df, method, epsilon=e, clip=clip if cl is None else cl, k=k, init=init, view=view)

    rows: list[dict[str, Any]] = []

    def add(claim: str, paper: str, a: pd.Series, b: pd.Series, what: str, hint: str = "") -> None:
        r = verdict(a, b, sd=sd)
        ours = (f"{what}: {r['mean_a']:.2f} vs {r['mean_b']:.2f}" if r["n_a"] and r["n_b"]
                else "not run at this scale")
        if r["verdict"] == "not resolvable":
            cause = (f"difference {r['diff']:.2f} within the margin {r['margin']:.2f} (seed spread and machine drift): "
                     "more seeds would narrow it" + (f"; {hint}" if hint else ""))
        elif r["verdict"] == "not resolvable: not run at this scale":
            cause = "needs the paper scale: not run at this scale"
        elif r["verdict"].startswith("not resolvable"):
            cause = r["verdict"].split(": ", 1)[1] + ": more seeds would give one"
        else:
            cause = ""
        rows.append({"claim": claim, "paper": paper, "ours": ours, "n_runs": f"{r['n_a']} vs {r['n_b']}",
                     "difference": r["diff"], "margin": r["margin"], "verdict": r["verdict"], "cause": cause})

    for m, claim, paper in (
            ("feature_projective", "feature-projective DP >", "82.61 vs 78.17 at eps=0.8, C=0.01"),
            ("projected", "projected DP-SGD >=", "78.48 vs 63.85 (eps=0.2), 80.63 vs 78.17 (eps=0.8)"),
            ("feature", "feature DP >", "75.46 vs 63.85 (eps=0.2), 80.40 vs 78.17 (eps=0.8)")):
        for e in sorted({lo, hi}):
            add(f"{claim} DP-SGD at eps={e:g}", paper, c(m, e), c("dpsgd", e), f"eps={e:g}", _CAUSES.get(m, ""))
    add("feature-projective DP > feature DP (the projection helps)", "82.61 vs 80.40 at eps=0.8",
        c("feature_projective", hi), c("feature", hi), f"eps={hi:g}", _CAUSES["projected"])
    add(f"DP-SGD improves with epsilon ({lo:g} -> {hi:g})", "63.85 (eps=0.2) -> 78.17 (eps=0.8)",
        c("dpsgd", hi), c("dpsgd", lo), f"eps={hi:g} vs {lo:g}")
    add("non-private > DP-SGD (privacy costs accuracy)", "89.36 vs 78.17 (eps=0.8)",
        c("nonprivate"), c("dpsgd", hi), f"non-private vs eps={hi:g}")
    for cl in other_clips:
        add(f"feature-projective DP > DP-SGD at C={cl:g}", _paper_at_clip(cl),
            c("feature_projective", hi, cl), c("dpsgd", hi, cl), f"eps={hi:g}", _CAUSES["feature_projective"])
    add("non-private on raw > non-private on blurred images", "frozen: 87.79 vs 87.64 (source A), 89.36 vs 83.61 (B)",
        c("nonprivate"), c("nonprivate", view="blurred"), "raw vs blurred")
    add("feature-projective DP > DP-SGD from scratch", "33.48 vs 6.85 (scratch, C=0.1, eps=0.8)",
        c("feature_projective", hi, init="scratch"), c("dpsgd", hi, init="scratch"), f"eps={hi:g}")
    add("feature DP > DP-SGD from scratch", "11.22 vs 6.85 (scratch, C=0.1, eps=0.8)",
        c("feature", hi, init="scratch"), c("dpsgd", hi, init="scratch"), f"eps={hi:g}")
    scratch = sorted(set(df[df.init == "scratch"].method), key=list(METHODS).index)
    for m in scratch:
        e = None if m == "nonprivate" else hi
        add(f"public-data warm start > from scratch ({m})", "fine-tuning >> scratch (e.g. DP-SGD 78.17 vs 6.85)",
            c(m, e, init="warm"), c(m, e, init="scratch"), "warm vs scratch")
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------- checks
def check_guarantees(outcomes: Sequence[RunOutcome], *, rtol: float = 1e-9) -> list[str]:
    """Violations of "every private run's reported epsilon <= its target" (an empty list when none).

    Also flags a private run whose guarantee is not finite or whose delta exceeds the target delta.
    """
    failures = []
    for o in outcomes:
        s, g = o.spec, o.guarantee
        if s.epsilon is None:
            continue
        target_delta = o.config.get("delta")
        if not math.isfinite(g.epsilon) or g.epsilon > s.epsilon * (1 + rtol):
            failures.append(f"{s.label}: reported epsilon {g.epsilon:.6g} exceeds the target {s.epsilon:g}")
        if target_delta is not None and g.delta > target_delta * (1 + rtol):
            failures.append(f"{s.label}: reported delta {g.delta:.3g} exceeds the target {target_delta:.3g}")
    return failures


def compare_within_spread(df: pd.DataFrame, *, better: str, worse: str, epsilon: float, clip: float,
                          k: int | None = None) -> dict[str, Any]:
    """Is ``better`` >= ``worse`` within the run-to-run spread (warm start, runs tagged ``"seeds"``)?

    The spread is the standard deviation of a difference of two single runs,
    ``sqrt(sd_better^2 + sd_worse^2)`` (sample standard deviations over seeds; 0 with a single seed).
    The claim holds when ``mean_better >= mean_worse - spread``.

    Returns:
        ``{"mean_better", "mean_worse", "diff", "spread", "n_better", "n_worse", "holds", "clearly_better"}``
        (``clearly_better``: ``diff > spread``).
    """
    d = df[(df.init == "warm") & (df.epsilon == epsilon) & (df.clip_norm == clip) & df.purposes.str.contains("seeds")]
    a = d[d.method == better]
    if k is not None and better in _PROJECTED:
        a = a[a.k == k]
    b = d[d.method == worse]
    if a.empty or b.empty:
        raise InsufficientDataError(f"need seed runs of {better!r} and {worse!r} at epsilon={epsilon}, C={clip}")
    sd_a = float(a.pckh.std()) if len(a) > 1 else 0.0
    sd_b = float(b.pckh.std()) if len(b) > 1 else 0.0
    spread = math.sqrt(sd_a**2 + sd_b**2)
    diff = float(a.pckh.mean() - b.pckh.mean())
    return {"mean_better": float(a.pckh.mean()), "mean_worse": float(b.pckh.mean()), "diff": diff,
            "spread": spread, "n_better": len(a), "n_worse": len(b), "holds": diff >= -spread,
            "clearly_better": diff > spread}


# ---------------------------------------------------------------------------------------------- drawing
def draw_pose(ax: Any, keypoints: torch.Tensor, visible: torch.Tensor | None = None, *, color: str = "tab:red",
              lw: float = 1.2, ms: float = 8.0, label: str | None = None, image: torch.Tensor | None = None) -> None:
    """Draw an MPII skeleton (limbs between visible joints, a dot per visible joint) on a matplotlib axis.

    Args:
        ax: matplotlib axes.
        keypoints: (16, 2) pixel coordinates ``(x, y)``.
        visible: (16,) bool; None draws every joint.
        color, lw, ms: colour, line width and marker size.
        label: legend label (attached to the joints).
        image: optional (3, H, W) image in [0, 1] to show underneath (axes turned off).
    """
    kp = keypoints.detach().cpu().float()
    if kp.shape != (len(MPII_JOINTS), 2):
        raise InvalidArgumentError(f"keypoints must have shape (16, 2), got {tuple(kp.shape)}")
    vis = torch.ones(len(MPII_JOINTS), dtype=torch.bool) if visible is None else visible.detach().cpu().bool()
    if image is not None:
        ax.imshow(image.detach().cpu().permute(1, 2, 0).clamp(0, 1).numpy(), interpolation="nearest")
        ax.set_axis_off()
    for a, b in MPII_SKELETON:
        if vis[a] and vis[b]:
            ax.plot([kp[a, 0], kp[b, 0]], [kp[a, 1], kp[b, 1]], "-", color=color, lw=lw)
    ax.scatter(kp[vis, 0], kp[vis, 1], s=ms, color=color, label=label, zorder=3, edgecolors="none")

