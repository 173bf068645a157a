"""Figures of the ScoreShield notebook: each function draws one figure from its study's table and returns it.

The notebook saves the figure with its data (``save_figure``) and shows it; nothing here writes files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import NullFormatter

from privkit.errors import InvalidArgumentError
from privkit.studies.scoreshield.tables import PROJECTED_RATES

__all__ = ["plot_error_scaling", "plot_table1", "plot_roc_shift", "plot_flip_probability", "plot_operating_points",
           "plot_dprag", "plot_gram_analytics", "plot_recommender"]

_PANELS = [("i: score vector", "record"), ("ii: Gram", "record"), ("ii: Gram", "gram")]


def _eps_ticks(ax: Any, ticks: Sequence[float], labels: Sequence[str], *, minor_off: bool = True) -> None:
    """One plain label per ε of the grid (log axes otherwise print crowded minor labels)."""
    ax.set_xticks(list(ticks), list(labels), fontsize=7)
    ax.xaxis.set_minor_formatter(NullFormatter())
    if minor_off:
        ax.minorticks_off()


def plot_error_scaling(scal: pd.DataFrame, long: pd.DataFrame, *, ns: Sequence[int], pool_name: str,
                       repeats: int) -> Any:
    """Paper Fig. 2: naive and projected MSE/c against n per panel, the naive theory and the paper's projected rate."""
    if not len(ns):
        raise InvalidArgumentError("ns must not be empty")
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.6))
    for ax, (reg, adj) in zip(axes, _PANELS):
        d = long[(long.regime == reg) & (long.adjacency == adj)]
        m = d.groupby(["release", "n"]).mse_over_c.agg(["mean", "std"]).reset_index()
        for rel, mk in (("naive", "o"), ("projected", "s")):
            mm = m[m.release == rel]
            ax.errorbar(mm.n, mm["mean"], yerr=mm["std"].fillna(0), marker=mk, label=f"{rel} (mean ± sd)", capsize=2)
        th = scal[(scal.regime == reg) & (scal.adjacency == adj)].groupby("n").theory_naive.mean()
        ax.plot(th.index, th.values, "k--", lw=0.8, label="naive theory")
        p = m[m.release == "projected"]
        ref = p["mean"].iloc[-1] * (p.n / p.n.iloc[-1]) ** PROJECTED_RATES[(reg, adj)]
        ax.plot(p.n, ref, "k:", lw=0.8, label="paper's projected rate")
        # one labelled tick per n (log axes otherwise crowd 2×10¹, 3×10¹ … minor labels together)
        ax.set(xscale="log", yscale="log", xlabel="collection size n",
               title=f"regime {reg.split(':')[0]}, {adj} adjacency\nprojected rate n^{PROJECTED_RATES[(reg, adj)]:g}")
        ax.set_xticks(list(ns), [str(n) for n in ns])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="x", labelsize=7)
    axes[0].set_ylabel("MSE / c   (c = 2 ln(2/δ)/ε²)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.suptitle(f"Naive vs projected release error, ε = 1, δ = 1e-5 (paper's σ); {pool_name}, "
                 f"{repeats} noise draw(s) per n", fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    return fig


def plot_table1(t1: pd.DataFrame, *, tar_panels: Sequence[float], x_of: Mapping[str, float],
                encoders: Sequence[str], face_sets: Sequence[str], title: str) -> Any:
    """Table 1 as a figure: our accuracy and template TAR against ε (colour: backbone, style: face set), the paper's
    two backbones as black markers (IR101 ◇, ViT-B △)."""
    panels = [("accuracy", "verification accuracy (%)", "Table 1, LFW column: accuracy (10-fold, noisy scores)")]
    panels += [(f"template TAR@{f:g}", f"TAR at FPR {f:g} after recalibration (%)",
                f"Table 1, IJB columns: template TAR@{f:g} (recalibrated)") for f in tar_panels]
    bb_col = dict(zip(encoders, sns.color_palette(n_colors=len(encoders))))
    set_style = dict(zip(face_sets, ("-", "--", ":", "-.")))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.8), squeeze=False)
    for ax, (panel, ylab, ptitle) in zip(axes[0], panels):
        d = t1[t1.panel == panel]
        for series, ss in d.sort_values("x").groupby("series", sort=False):
            r0 = ss.iloc[0]
            if r0.source == "paper":
                ax.plot(ss.x, ss.value, ls="none", marker="D" if r0.backbone == "IR101" else "^", ms=5, mfc="none",
                        mew=1.2, color="k", label=series)
            else:
                ax.errorbar(ss.x, ss.value, yerr=ss.sd.fillna(0), marker="o", ms=3.5, capsize=2, label=series,
                            color=bb_col[r0.backbone], ls=set_style.get(r0.face_set, "-"))
        ax.set_xscale("log")
        _eps_ticks(ax, list(x_of.values()), list(x_of))
        ax.set(xlabel="ε (δ = 1e-4, paper's σ)", ylabel=ylab)
        ax.set_title(ptitle, fontsize=8)
        ax.legend(fontsize=5.5)
    fig.suptitle(title, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return fig


def plot_roc_shift(roc_df: pd.DataFrame) -> Any:
    """The measured AUC and EER shifts against σ beside the bounds 2η and η (paper App. G)."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    axes[0].plot(roc_df.sigma, roc_df.delta_auc, "o-", label="measured |ΔAUC|")
    axes[0].plot(roc_df.sigma, roc_df.bound_2eta, "k--", label="bound 2η = 2Lσ√(2/π)")
    axes[0].set(xlabel="σ", ylabel="AUC loss", title="AUC shift")
    axes[0].legend(fontsize=7)
    axes[1].plot(roc_df.sigma, (roc_df.eer - roc_df.eer_clean).abs(), "o-", label="measured |ΔEER|")
    axes[1].plot(roc_df.sigma, roc_df.bound_eta, "k--", label="bound η")
    axes[1].set(xlabel="σ", title="EER shift")
    axes[1].legend(fontsize=7)
    return fig


def plot_flip_probability(flip_df: pd.DataFrame, *, title: str) -> Any:
    """The decision-flip probability against the clean score: closed form Q(|s − τ|/σ) and Monte Carlo."""
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot(flip_df.score, flip_df.theory, "k-", label="Q(|s−τ|/σ)")
    ax.plot(flip_df.score, flip_df.monte_carlo, "o", ms=3, label="Monte Carlo")
    ax.axvline(float(flip_df.tau.iloc[0]), color="grey", lw=0.6)
    ax.set(xlabel="clean score s", ylabel="flip probability", title=title)
    ax.legend(fontsize=7)
    return fig


def plot_operating_points(shown: pd.DataFrame, *, alphas: Sequence[float], epsilons: Sequence[float],
                          title: str) -> Any:
    """The operating-point study at one δ: (a) the FMR floor against α, (b) the false-match inflation of the kept
    clean threshold, then the TPR after recalibration for each α (× where α lies below the floor)."""
    if not len(alphas) or len(alphas) > 3:
        raise InvalidArgumentError(f"alphas must hold one to three target rates, got {tuple(alphas)}")
    fam_names = sorted(shown.family.unique())
    colours = dict(zip(fam_names, sns.color_palette(n_colors=len(fam_names))))
    alpha_styles = dict(zip(sorted(alphas, reverse=True), ("-", "--", ":")))
    n_panels = 2 + len(alphas)
    fig, axes = plt.subplots((n_panels + 1) // 2, 2, figsize=(9, 3.4 * ((n_panels + 1) // 2)), squeeze=False)
    axes = axes.ravel()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    axes = axes[:n_panels]
    ax = axes[0]
    floor = shown.drop_duplicates(["family", "epsilon"])
    for fam in fam_names:
        ff = floor[floor.family == fam]
        ax.plot(ff.epsilon, ff.fmr_floor, "o-", ms=3, color=colours[fam], label=fam)
    for alpha, ls in alpha_styles.items():
        ax.axhline(alpha, color="k", lw=0.8, ls=ls, label=f"target α = {alpha:g}")
    ax.set(xscale="log", yscale="log", xlabel="ε", ylabel="floor L(σ) = E[Q((1 − S)/σ)]",
           title="(a) FMR floor: α is attainable only above it")
    ax.legend(fontsize=6, loc="center left")
    ax = axes[1]
    for fam in fam_names:
        for alpha, ls in alpha_styles.items():
            ff = shown[(shown.family == fam) & (shown.alpha == alpha)]
            ax.plot(ff.epsilon, ff.fmr_inflation, marker="o", ms=3, ls=ls, color=colours[fam])
    ax.axhline(1.0, color="grey", lw=0.6)
    ax.set(xscale="log", yscale="log", xlabel="ε", ylabel="FMR(kept τ_α) / α",
           title="(b) false-match inflation if the clean τ_α is kept")
    ax.legend([plt.Line2D([], [], color="k", ls=ls) for ls in alpha_styles.values()],
              [f"α = {a:g}" for a in alpha_styles], fontsize=6)
    for j, (ax, alpha) in enumerate(zip(axes[2:], sorted(alphas, reverse=True))):
        for fam in fam_names:
            ff = shown[(shown.family == fam) & (shown.alpha == alpha)]
            ok = ff[ff.attainable]
            ax.plot(ff.epsilon, ff.tpr_recal, "-", lw=0.8, color=colours[fam])
            ax.plot(ok.epsilon, ok.tpr_recal, "o", ms=4, color=colours[fam])
            ax.plot(ff[~ff.attainable].epsilon, ff[~ff.attainable].tpr_recal, "x", ms=4, color=colours[fam])
            ax.axhline(float(ff.tpr_clean.iloc[0]), color=colours[fam], lw=0.6, ls="--")
        ax.set(xscale="log", ylim=(-0.03, 1.3), yticks=np.linspace(0, 1, 6), xlabel="ε", ylabel="TPR",
               title=f"({chr(ord('c') + j)}) TPR after recalibration, α = {alpha:g}")
        ax.legend([plt.Line2D([], [], color="k", ls="none", marker="o", ms=4),
                   plt.Line2D([], [], color="k", ls="none", marker="x", ms=4),
                   plt.Line2D([], [], color="k", lw=0.6, ls="--")],
                  ["attainable: TPR after recal.", "α < floor L(σ): TPR 0", "clean TPR"],
                  fontsize=6, loc="upper left", ncol=2)
    for ax in axes:
        _eps_ticks(ax, epsilons, [f"{e:g}" for e in epsilons])
    fig.suptitle(title, fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return fig


def _dprag_ours(ax: Any, g: pd.DataFrame, clean_row: pd.Series, col: str, lo: str, hi: str, *, tau: float, k: int,
                x_clean: float, n_chunks: int) -> list[dict[str, Any]]:
    """One panel of our retrieval results (both calibrations, the non-private value, random chunks); its points."""
    rows: list[dict[str, Any]] = []
    point = {"row": col, "source": "privkit", "tau": tau, "k": k}  # the keys every point shares
    for calib, ls in (("scoreshield", "-"), ("analytic", "--")):
        d = g[g.calibration == calib].sort_values("epsilon")
        label = "paper's σ" if calib == "scoreshield" else "analytic σ (meets ε, δ)"
        colour = "C0" if calib == "scoreshield" else "C1"
        ax.plot(d.epsilon, d[col], ls=ls, marker="o", ms=3, color=colour, label=label)
        ax.fill_between(d.epsilon, d[lo], d[hi], alpha=0.2, color=colour)
        rows += [{**point, "calibration": calib, "epsilon": r.epsilon, "delta": r.delta, "sigma": r.sigma,
                  "true_delta": r.true_delta, "value": r[col], "low": r[lo], "high": r[hi], "series": label}
                 for _, r in d.iterrows()]
    ax.axhline(clean_row[col], color="k", lw=0.8, ls=":", label="non-private")
    ax.errorbar([x_clean], [clean_row[col]], yerr=[[clean_row[col] - clean_row[lo]], [clean_row[hi] - clean_row[col]]],
                marker="*", ms=8, color="k", capsize=2)
    rows.append({**point, "calibration": "none", "epsilon": math.inf, "delta": 0.0, "sigma": 0.0, "true_delta": 0.0,
                 "value": clean_row[col], "low": clean_row[lo], "high": clean_row[hi], "series": "non-private"})
    if col == "recall":
        ax.axhline(clean_row.recall_random, color="grey", lw=0.8, ls="-.", label=f"random {k} of {n_chunks}")
        rows.append({**point, "calibration": "random", "epsilon": np.nan, "delta": np.nan, "sigma": np.nan,
                     "true_delta": np.nan, "value": clean_row.recall_random, "low": np.nan, "high": np.nan,
                     "series": f"random {k} of {n_chunks}"})
    return rows


def _dprag_paper(ax: Any, pr: pd.DataFrame, *, tau: float, k: int, x_clean: float, gen_col: Mapping[str, Any],
                 delta_mk: Mapping[float, str]) -> list[dict[str, Any]]:
    """One panel of the paper's accuracy gains over no retrieval (marker: its δ); its points."""
    rows: list[dict[str, Any]] = []
    for _, r in pr.iterrows():
        name = f"{r.generator} / {r.embedder}"
        x = x_clean if r.epsilon == math.inf else r.epsilon * (1.12 if r.delta >= 1e-3 else 1 / 1.12 if r.delta <= 1e-6 else 1.0)
        ax.plot([x], [r.rag_gain], ls="none", marker=delta_mk[r.delta], ms=5, color=gen_col[name], mfc="none", mew=1.2)
        rows.append({"row": "paper_rag_gain", "source": "paper", "tau": tau, "k": k, "calibration": "scoreshield",
                     "epsilon": r.epsilon, "delta": r.delta, "sigma": np.nan, "true_delta": np.nan,
                     "value": r.rag_gain, "low": np.nan, "high": np.nan, "series": f"paper: {name}"})
    ax.axhline(0, color="k", lw=0.8)
    ax.set(title=f"paper (FRAMES, LLM-judged): τ = {tau:g}, k = {k}", xlabel="ε")
    present = sorted({f"{g_} / {e_}" for g_, e_ in zip(pr.generator, pr.embedder)})
    ax.legend([plt.Line2D([], [], ls="none", marker="o", mfc="none", color=gen_col[n]) for n in present],
              [f"paper: {n}" for n in present], fontsize=5.5, loc="lower right")
    return rows


def plot_dprag(rag_grid: pd.DataFrame, paper_rag: pd.DataFrame, *, settings: Sequence[tuple[float, int]],
               epsilons: Sequence[float], delta: float, n_chunks: int, n_questions: int) -> tuple[Any, pd.DataFrame]:
    """DP-RAG's retrieval stage: our recall and chunks retrieved per (τ, k) against ε, over the paper's accuracy
    gain over no retrieval.

    Returns:
        ``(figure, its points)``: one row per drawn value (ours and the paper's).
    """
    if len(settings) != 3:
        raise InvalidArgumentError(f"the figure has one column per retrieval setting, three; got {len(settings)}")
    x_clean = max(epsilons) * 4
    fig, axes = plt.subplots(3, 3, figsize=(11, 9), sharex=True)
    gens = sorted(paper_rag.generator.astype(str) + " / " + paper_rag.embedder.astype(str))
    gen_col = dict(zip(sorted(set(gens)), sns.color_palette("tab10", n_colors=len(set(gens)))))
    delta_mk = {1e-6: "v", 1e-5: "o", 1e-3: "s", 1e-2: "D", 0.0: "*"}
    rows: list[dict[str, Any]] = []
    for j, (tau, k) in enumerate(settings):
        g = rag_grid[(rag_grid.tau == tau) & (rag_grid.k == k)]
        clean_row = g[g.calibration == "none"].iloc[0]
        for i, (col, lo, hi, ylab) in enumerate((("recall", "recall_low", "recall_high", "recall of the gold chunks"),
                                                 ("n_retrieved", "n_retrieved_low", "n_retrieved_high",
                                                  "chunks retrieved per question"))):
            ax = axes[i, j]
            rows += _dprag_ours(ax, g, clean_row, col, lo, hi, tau=tau, k=k, x_clean=x_clean, n_chunks=n_chunks)
            if col == "recall":
                ax.set(ylim=(0, 1.02), title=f"τ = {tau:g}, k = {k}: ours (δ = {delta:g})")
            else:
                ax.set(ylim=(0, k * 1.05))
            if j == 0:
                ax.set_ylabel(ylab)
            if j == 0 and i == 0:
                ax.legend(fontsize=6, loc="center left")
        pr = paper_rag[(paper_rag.tau == tau) & (paper_rag.k == k)]
        rows += _dprag_paper(axes[2, j], pr, tau=tau, k=k, x_clean=x_clean, gen_col=gen_col, delta_mk=delta_mk)
        if j == 0:
            axes[2, j].set_ylabel("paper: RAG − no-retrieval accuracy (points)")
    for ax in axes.flat:
        ax.set_xscale("log")
        _eps_ticks(ax, [e for e in epsilons] + [x_clean], [f"{e:g}" for e in epsilons] + ["clean"], minor_off=False)
    axes[2, 2].add_artist(axes[2, 2].get_legend())  # keep the generator legend beside the δ legend
    axes[2, 2].legend(handles=[plt.Line2D([], [], ls="none", marker=m, mfc="none", color="k") for m in delta_mk.values()],
                      labels=[("δ = " + f"{d_:g}") if d_ else "clean retrieval" for d_ in delta_mk],
                      fontsize=5.5, loc="upper left", title="paper's δ", title_fontsize=6)
    fig.suptitle(f"DP-RAG retrieval stage: privkit's benchmark ({n_chunks} chunks, {n_questions} questions, "
                 f"MiniLM) against the paper's accuracy gains (generators cannot run here)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return fig, pd.DataFrame(rows)


def plot_gram_analytics(priv: pd.DataFrame, clean: pd.Series, *, delta_g: float, delta: float) -> Any:
    """Downstream utility of the private Gram per metric and dataset against ε, one line per post-processing,
    the clean value dashed (paper Fig. 5)."""
    grid = sns.relplot(data=priv[priv.delta_g == delta_g], x="epsilon", y="value", hue="method", style="method",
                       row="metric", col="dataset", kind="line", marker="o", height=2.2, aspect=1.2,
                       facet_kws={"sharey": "row"}, errorbar="sd")
    grid.set_titles("{col_name}: {row_name}")
    for (metric, dataset), ax in grid.axes_dict.items():
        ax.axhline(clean[(dataset, metric)], color="k", lw=0.7, ls="--")
        ax.set_xscale("log")
    grid.figure.suptitle(f"Gram adjacency Δ_G = {delta_g:g}, δ = {delta:g} (dashed: clean)", y=1.02)
    return grid.figure


def plot_recommender(rec: pd.DataFrame, *, delta_gs: Sequence[float]) -> Any:
    """Recommendation RMSE against ε per Gram radius, with the clean Gram and user means as references."""
    clean_rmse = float(rec[rec.method == "clean"].rmse.iloc[0])
    mean_rmse = float(rec[rec.method == "user means"].rmse.iloc[0])
    fig, axes = plt.subplots(1, len(delta_gs), figsize=(4.2 * len(delta_gs), 3.2), squeeze=False)
    for ax, dg in zip(axes[0], delta_gs):
        sub = rec[(rec.delta_g == dg)]
        sns.lineplot(data=sub, x="epsilon", y="rmse", hue="method", style="method", marker="o", ax=ax, errorbar="sd")
        ax.axhline(clean_rmse, color="k", lw=0.7, ls="--", label="clean Gram")
        ax.axhline(mean_rmse, color="grey", lw=0.7, ls=":", label="user means")
        ax.legend(fontsize=7)
        ax.set(xscale="log", title=f"Δ_G = {dg:g}")
    return fig
