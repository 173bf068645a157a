"""Tables of the DP pose notebook built from the runs table: the main runs, the backbone ablation, the projection
controls, and the texts the notebook prints under them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import torch

from privkit._validate import check_int, check_real
from privkit.data.types import PoseSet
from privkit.dppose.train import DPSpec, PublicSpec, Schedule, evaluate_pckh, train
from privkit.errors import InsufficientDataError, InvalidArgumentError
from privkit.studies.dppose import experiments as X
from privkit.studies.dppose.plots import METHOD_NAMES

__all__ = ["main_runs", "ablation_rows", "zero_shot_rows", "ablation_text", "diagnostic_models", "CONTROL_METHODS",
           "control_run", "noise_controls",
           "projection_text"]


def main_runs(df: pd.DataFrame, *, clip: float, k: int) -> pd.DataFrame:
    """The runs of the main comparison: warm start, raw images, the main C (or none) and rank k (or none)."""
    return df[(df.init == "warm") & (df.view == "raw") & ((df.clip_norm == clip) | df.clip_norm.isna())
              & ((df.k == k) | df.k.isna())]


def ablation_rows(df: pd.DataFrame, outcomes: Sequence[X.RunOutcome], *, seed: int, warm_imagenet: float,
                  warm_pose: float) -> list[dict[str, Any]]:
    """The backbone ablation: each pose-pretrained run beside the mean of the main (ImageNet) runs with the same
    settings, with a verdict from :func:`X.verdict` under the main runs' pooled seed spread.

    Args:
        df: the main runs table; outcomes: the ablation runs (one seed each).
        seed: their seed (dropped from the run label); warm_imagenet, warm_pose: PCKh of the two warm starts.

    Returns:
        Rows ``run, imagenet, pose_pretrained, n_main[, difference, margin, verdict]``, the warm starts first.
    """
    sd = X.pooled_seed_sd(df)
    rows: list[dict[str, Any]] = [{"run": "warm start (public split only)", "imagenet": warm_imagenet,
                                   "pose_pretrained": warm_pose, "n_main": 1}]
    for o in outcomes:
        sp = o.spec
        same = df[(df.method == sp.method) & (df.init == "warm") & (df.view == "raw") & df.k.isna()
                  & ((df.epsilon == sp.epsilon) if sp.epsilon is not None else df.epsilon.isna())
                  & ((df.clip_norm == sp.clip) if sp.clip is not None else df.clip_norm.isna())]
        v = X.verdict([o.pckh.mean], same.pckh.tolist(), sd=sd)
        rows.append({"run": sp.label.replace(f" seed={seed}", ""), "imagenet": v["mean_b"],
                     "pose_pretrained": o.pckh.mean, "n_main": len(same), "difference": v["diff"],
                     "margin": v["margin"], "verdict": v["verdict"]})
    return rows


def zero_shot_rows(test: PoseSet, names: Sequence[str], *, device: Any = "cpu") -> list[dict[str, Any]]:
    """Zero-shot PCKh@0.5 of pretrained pose models (their own COCO heads, no training here) on the test images."""
    from privkit.dppose.metrics import pckh
    from privkit.encoders import load_pose_model

    rows = []
    for name in names:
        pred = load_pose_model(name, device=device).predict(test.images.to(device)).to_mpii()
        z = pckh(pred.keypoints.cpu(), test.keypoints, test.visible, test.head_box).mean
        rows.append({"run": f"{name} zero-shot (its own COCO head, no training here)", "pose_pretrained": z})
    return rows


def ablation_text(abl: pd.DataFrame, *, ablation_backbone: str, backbone: str) -> str:
    """The printed ablation table and one verdict line per compared run."""
    lines = [f"PCKh@0.5 on the private-style test set ({ablation_backbone} vs {backbone}; imagenet column = "
             f"mean of the main runs with the same settings, n_main of them):",
             abl.to_string(index=False, na_rep="—", float_format="{:.2f}".format)]
    for r in abl.dropna(subset=["verdict"]).itertuples():
        lines.append(f"- pose pretraining beats ImageNet, {r.run}: {r.verdict.upper()} ({r.pose_pretrained:.2f} vs "
                     f"{r.imagenet:.2f}, difference {r.difference:+.2f}, margin {r.margin:.2f})")
    return "\n".join(lines)


def diagnostic_models(outcomes: Sequence[X.RunOutcome], warm_model: torch.nn.Module, *, seed: int, epsilon: float,
                      clip: float, k: int) -> tuple[dict[str, torch.nn.Module], float]:
    """The models the projection diagnostics measure (the warm start, DP-SGD and projected DP-SGD at ``epsilon``)
    and the noise multiplier they use (projected DP-SGD's, else the last run's).

    Raises:
        InvalidArgumentError: no outcomes.
    """
    if not outcomes:
        raise InvalidArgumentError("outcomes must not be empty")
    at_max = {o.spec.method: o for o in outcomes if o.spec.init == "warm" and o.spec.view == "raw"
              and o.spec.seed == seed and o.spec.epsilon == epsilon and o.spec.clip == clip
              and o.spec.k in (None, k) and o.model is not None}
    models = {"warm start": warm_model}
    for m in ("dpsgd", "projected"):
        if m in at_max:
            models[f"after {METHOD_NAMES[m]} (ε = {epsilon:g})"] = at_max[m].model
    sigma = at_max["projected"].noise_multiplier if "projected" in at_max else outcomes[-1].noise_multiplier
    return models, sigma


#: The methods the no-noise controls retrain.
CONTROL_METHODS = ("dpsgd", "projected")


def control_run(method: str, data: X.DesignData, settings: X.DesignSettings, *, clip: float, k: int, seed: int,
                device: Any) -> float:
    """PCKh@0.5 of one no-noise control: ``method`` (DP-SGD or projected DP-SGD) retrained from the warm start with
    the same clipping, sampling, subspace and steps but noise multiplier 0 (not private: a diagnosis only).

    Args:
        data: the design's private, test and public sets; its ``warm_state``, loaded into ``data.make_model(seed)``,
            is the start.
    """
    if method not in CONTROL_METHODS:
        raise InvalidArgumentError(f"method must be one of {CONTROL_METHODS}, got {method!r}")
    private, test, public = data.private_set, data.test_set, data.public_set
    if public is None:
        raise InsufficientDataError("data.public_set: the projected control needs the public set")
    if data.warm_state is None:
        raise InvalidArgumentError("control_run needs the warm start: data.warm_state")
    n_public = min(check_int("n_public_grads", settings.n_public_grads, minimum=1), len(public))
    schedule = Schedule(epochs=settings.epochs, batch_size=settings.batch_size, lr=settings.lr)
    pub = PublicSpec(public_set=public, k=min(k, n_public), n_public=n_public, refresh=settings.refresh) \
        if method == "projected" else None
    ctrl = train(data.make_model(seed), private, method=method,
                 dp=DPSpec(noise_multiplier=0.0, delta=settings.delta, clip=clip), public=pub, schedule=schedule,
                 seed=seed, device=device, warm_start=data.warm_state)
    return evaluate_pckh(ctrl.model, test).mean


def noise_controls(df: pd.DataFrame, no_noise: dict[str, float], *, epsilon: float, clip: float,
                   k: int) -> pd.DataFrame:
    """DP-SGD and projected DP-SGD with noise (the trained runs of ``df`` at ``epsilon``) beside their no-noise
    controls (``no_noise``: method -> PCKh of :func:`control_run`).

    Returns:
        Rows ``model, method, noise, pckh``.
    """
    check_real("epsilon", epsilon)
    rows = []
    for m in CONTROL_METHODS:
        noisy = float(df[(df.method == m) & (df.init == "warm") & (df.view == "raw") & (df.epsilon == epsilon)
                         & (df.clip_norm == clip) & ((df.k == k) | df.k.isna())].pckh.mean())
        for noise, pck in (("with noise", noisy), ("no noise", no_noise[m])):
            rows.append({"model": f"{METHOD_NAMES[m]}, {noise}", "method": m, "noise": noise, "pckh": pck})
    return pd.DataFrame(rows)


def projection_text(diag: pd.DataFrame, controls: pd.DataFrame, *, k: int) -> str:
    """The printed diagnostics and controls, what the public subspace holds at rank k, and what limits projection."""
    lines = [diag.round(4).to_string(index=False), controls.round(2).to_string(index=False)]
    for _, r in diag[diag.k == k].iterrows():
        lines.append(f"{r.model}: the public top-{k} subspace holds {100 * r.energy_fraction:.1f}% of the clean "
                     f"private gradient's energy (a random {k}-dimensional subspace: {100 * r.random_fraction:.3f}%); "
                     f"per-step SNR {r.snr_unprojected:.2e} unprojected vs {r.snr_projected:.2e} projected "
                     f"({r.snr_gain:.0f}x)")
    cv = controls.set_index("model").pckh
    nn_gap = cv[f"{METHOD_NAMES['projected']}, no noise"] - cv[f"{METHOD_NAMES['dpsgd']}, no noise"]
    n_gap = cv[f"{METHOD_NAMES['projected']}, with noise"] - cv[f"{METHOD_NAMES['dpsgd']}, with noise"]
    lines.append(f"projected minus DP-SGD: {n_gap:+.2f} points with noise, {nn_gap:+.2f} without noise: "
                 + ("the projection itself costs accuracy here (the discarded part of the gradient), the noise is "
                    "not what limits it" if nn_gap < -X.MACHINE_DRIFT else
                    "without noise the projection costs nothing, so its effect comes through the noise"))
    return "\n".join(lines)
