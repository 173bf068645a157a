"""Figures of the DP pose notebook: each function draws one figure from the runs table and returns it.

The notebook saves the figure with its data (``save_figure``) and shows it; nothing here writes files.
"""

from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from privkit.errors import InvalidArgumentError
from privkit.studies.dppose.experiments import PAPER_MPII_PCKH, PAPER_NONPRIVATE_MPII

__all__ = ["METHOD_NAMES", "PRIVATE_METHODS", "method_palette", "paper_mpii_table", "plot_pckh_vs_epsilon",
           "plot_projection_diagnostics"]

#: Display name of each trainer, in the notebook's order.
METHOD_NAMES = {"nonprivate": "non-private", "dpsgd": "DP-SGD", "projected": "projected DP-SGD",
                "feature": "feature DP", "feature_projective": "feature-projective DP"}

#: The four private trainers, in the order they are drawn.
PRIVATE_METHODS = ("dpsgd", "projected", "feature", "feature_projective")


def method_palette() -> dict[str, Any]:
    """One colour-blind-safe colour per trainer (keys of :data:`METHOD_NAMES`)."""
    return dict(zip(METHOD_NAMES, sns.color_palette("colorblind", len(METHOD_NAMES))))


def paper_mpii_table() -> pd.DataFrame:
    """The paper's MPII PCKh@0.5 (C = 0.01) as rows ``method, epsilon, pckh, source``."""
    return pd.DataFrame([{"method": m, "epsilon": e, "pckh": v, "source": "paper MPII (C = 0.01)"}
                         for (m, e), v in PAPER_MPII_PCKH.items()])


def plot_pckh_vs_epsilon(df: pd.DataFrame, base: pd.DataFrame, spread: pd.DataFrame, np_runs: pd.Series, *,
                         warm_test: float, eps_max: float, clip: float, delta: float,
                         subtitle: str) -> tuple[Any, pd.DataFrame]:
    """PCKh@0.5 against ε: ours (left; seed sd as error bars at the largest ε, the non-private band, the warm
    start and the non-private baseline on blurred images) and the paper's MPII numbers (right).

    Args:
        df: every run; base: the main runs of one seed; spread: :func:`seed_spread`; np_runs: the non-private
            reference runs' PCKh.
        warm_test: PCKh of the warm start; eps_max, clip, delta: the largest ε, the main C and δ.
        subtitle: the left panel's description of our setting.

    Returns:
        ``(figure, its data: our curves, the non-private runs and the paper's numbers)``.
    """
    if len(np_runs) == 0:
        raise InvalidArgumentError("np_runs must hold at least one non-private run")
    palette = method_palette()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    ax = axes[0]
    ax.axhline(np_runs.mean(), color=palette["nonprivate"], ls="--", label=METHOD_NAMES["nonprivate"])
    if len(np_runs) > 1:
        ax.axhspan(np_runs.mean() - np_runs.std(), np_runs.mean() + np_runs.std(), color=palette["nonprivate"],
                   alpha=0.15)
    ax.axhline(warm_test, color="grey", ls=":", label="warm start (public only)")
    plotted = []
    for m in PRIVATE_METHODS:
        d = base[base.method == m].sort_values("epsilon")
        ax.plot(d.epsilon, d.pckh, "o-", color=palette[m], label=METHOD_NAMES[m])
        sp = spread[(spread.method == m) & (spread.epsilon == eps_max) & (spread.clip_norm == clip)]
        if len(sp) and sp.n_seeds.iloc[0] > 1:
            ax.errorbar([eps_max], sp["mean"], yerr=sp["sd"], color=palette[m], capsize=3, fmt="none")
        plotted.append(d.assign(source="ours"))
    bl = df[df.view == "blurred"].pckh
    if len(bl):
        ax.axhline(float(bl.mean()), color=palette["nonprivate"], ls="-.", lw=0.8, label="non-private on blurred ψ(x)")
    ax.set(xlabel="ε (δ = %g)" % delta, ylabel="PCKh@0.5 (%)", title=subtitle)
    ax.legend(fontsize=6, loc="best")
    ax = axes[1]
    paper_df = paper_mpii_table()
    for m in PRIVATE_METHODS:
        d = paper_df[paper_df.method == m].sort_values("epsilon")
        ax.plot(d.epsilon, d.pckh, "o-", color=palette[m], label=METHOD_NAMES[m])
    ax.axhline(PAPER_NONPRIVATE_MPII, color=palette["nonprivate"], ls="--", label="non-private")
    ax.set(xlabel="ε", title="paper: MPII, frozen fine-tuning, C = 0.01")
    ax.legend(fontsize=6)
    data = pd.concat(plotted + [np_runs.to_frame().assign(method="nonprivate", source="ours"), paper_df],
                     ignore_index=True)
    return fig, data


def plot_projection_diagnostics(diag: pd.DataFrame, controls: pd.DataFrame, *, sigma: float, clip: float,
                                batch_size: int, epsilon: float) -> Any:
    """What projected DP-SGD depends on: (a) the private gradient's energy kept by the public subspace against k,
    (b) the per-step SNR gain of projecting, (c) DP-SGD and projected DP-SGD with and without noise."""
    palette = method_palette()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
    n_models = diag.model.nunique()
    for (label, d), color in zip(diag.groupby("model", sort=False), sns.color_palette("dark", n_models)):
        axes[0].plot(d.k, d.energy_fraction, "o-", color=color, label=label)
        axes[1].plot(d.k, d.snr_gain, "o-", color=color, label=label)
    d0 = diag[diag.model == "warm start"]
    axes[0].plot(d0.k, d0.random_fraction, "k:", label="random subspace (k/p)")
    axes[0].set(xscale="log", yscale="log", xlabel="k (rank of the public subspace V_k)",
                ylabel="share of the private gradient's energy in V_k")
    axes[0].set_title("(a) private gradient kept by the public subspace", fontsize=9)
    axes[1].axhline(1.0, color="k", lw=0.8, ls="--", label="projection neither helps nor hurts")
    axes[1].set(xscale="log", yscale="log", xlabel="k", ylabel="SNR projected / SNR unprojected")
    axes[1].set_title(f"(b) per-step SNR gain of projecting (σ = {sigma:.2f}, C = {clip:g}, B = {batch_size})",
                      fontsize=9)
    sns.barplot(data=controls.assign(name=controls.method.map(METHOD_NAMES)), x="noise", y="pckh", hue="name",
                ax=axes[2], palette={METHOD_NAMES[m]: palette[m] for m in ("dpsgd", "projected")})
    axes[2].set(xlabel="", ylabel="PCKh@0.5 (%)")
    axes[2].set_title(f"(c) noise or projection? ε = {epsilon:g}; no-noise runs are not private", fontsize=9)
    for ax in axes:
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig
