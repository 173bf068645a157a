"""The figures of the ISP notebook (``notebooks/isp.py``).

Each function draws one figure from the tables of :mod:`privkit.studies.isp.tables` and returns it with the data
it shows (what ``save_figure`` writes beside it); the notebook saves, shows and closes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from privkit._validate import check_columns
from privkit.errors import InsufficientDataError, InvalidArgumentError
from privkit.studies.isp import experiments as X

__all__ = ["plot_leakage", "plot_attribution", "plot_rank_sweep", "plot_inversion", "plot_reconstructions"]

TRANSFORMS = ("raw", "ISP-W", "ISP-X")
TRANSFORM_COLOURS = dict(zip(TRANSFORMS, ["#4c72b0", "#dd8452", "#55a868"]))
_PAPER_COLUMNS = ("k16_raw", "k16_ispw", "k16_ispx")  # the paper's TARs of TRANSFORMS in X.PAPER_RIDGE_TAR


def plot_leakage(lo: pd.DataFrame, leak: pd.DataFrame, labels: Sequence[str], *, probes: Sequence[str], k_max: int,
                 far: float, isp_rank: int, dataset: str, other_dataset: str) -> tuple[Any, pd.DataFrame]:
    """Figure 1: TAR at ``far`` per encoder, raw / ISP-W / ISP-X, one panel per probe (largest k; cosine needs no
    shots), and the paper's ridge numbers on the same axis scale.

    Returns:
        (figure, data): ``leak`` (source "privkit") and the paper's TARs in long form (source "paper").
    """
    import matplotlib.pyplot as plt

    check_columns("lo", lo, ["encoder", "probe", "k", "transform", "tar", "tar_low", "tar_high"])
    if not labels or not probes:
        raise InsufficientDataError("plot_leakage needs at least one encoder and one probe")
    n_p = len(probes)
    fig, axes = plt.subplots(1, n_p + 1, figsize=(4.4 * n_p + 3.6, 4.2), squeeze=False,
                             gridspec_kw={"width_ratios": [len(labels)] * n_p + [max(3, len(X.PAPER_RIDGE_TAR))]})
    for ax in axes[0][1:n_p]:
        ax.sharey(axes[0][0])
    plot_df = lo[(lo.k == k_max) | (lo.probe == "cosine")]
    for ax, probe in zip(axes[0][:n_p], ["cosine" if p == "raw" else p for p in probes]):
        sub = plot_df[plot_df.probe == probe]
        x = np.arange(len(labels))
        for j, t in enumerate(TRANSFORMS):
            s = sub[sub["transform"] == t].set_index("encoder").reindex(labels)
            ax.bar(x + (j - 1) * 0.27, 100 * s.tar, 0.27, color=TRANSFORM_COLOURS[t], label=t,
                   yerr=[100 * (s.tar - s.tar_low), 100 * (s.tar_high - s.tar)], capsize=2, error_kw={"lw": 0.7})
        ax.axhline(100 * far, color="k", ls=":", lw=0.8, label=f"chance (= FAR {far:g})")
        ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=8)
        ax.set(yscale="symlog", ylim=(0, 100),
               title=f"privkit: {probe} probe" + ("" if probe == "cosine" else f", k = {k_max}"))
    axes[0][0].set_ylabel(f"TAR (%) at FAR = {far:g}, {dataset}")
    axes[0][0].legend(fontsize=7, loc="upper right")
    # the paper's own numbers (ridge, CelebA-20, FAR 1e-4, k = 16), drawn on the same axis scale
    ax = axes[0][n_p]
    pap = list(X.PAPER_RIDGE_TAR.items())
    xp = np.arange(len(pap))
    for j, (t, col) in enumerate(zip(TRANSFORMS, _PAPER_COLUMNS)):
        vals = [np.nan if v.get(col) is None else v[col] for _, v in pap]
        ax.bar(xp + (j - 1) * 0.27, vals, 0.27, color=TRANSFORM_COLOURS[t], label=t, hatch="//", edgecolor="white")
    ax.axhline(100 * 1e-4, color="k", ls=":", lw=0.8)
    ax.set_xticks(xp, [e for e, _ in pap], rotation=60, ha="right", fontsize=8)
    ax.set(yscale="symlog", ylim=(0, 100), title="paper: ridge, k = 16, FAR 1e-4\n(CelebA-20; no intervals given)")
    fig.suptitle(f"Identity leakage before and after ISP (paper Table 1): TAR at FAR {far:g}, 95% identity-bootstrap "
                 f"CIs; ISP rank r = {isp_rank}; ISP-W fitted on {dataset}, ISP-X on {other_dataset}", fontsize=9)
    fig.tight_layout()
    paper_long = pd.DataFrame([{"encoder": e, "transform": t, "tar": (v.get(c) or np.nan) / 100, "source": "paper"}
                               for e, v in pap for t, c in zip(TRANSFORMS, _PAPER_COLUMNS)])
    return fig, pd.concat([leak.assign(source="privkit"), paper_long], ignore_index=True)


def plot_attribution(fii_df: pd.DataFrame, cpi_df: pd.DataFrame, bst_df: pd.DataFrame) -> tuple[Any, pd.DataFrame]:
    """Figure 2: FII_n by face-coverage bin, CPI against face blur and the B* stress curve, one line per encoder.

    Returns:
        (figure, data): the three tables stacked, with a ``panel`` column.
    """
    import matplotlib.pyplot as plt

    check_columns("fii_df", fii_df, ["encoder", "fcr_low", "fcr_high", "fii_normalised_mean", "fii_normalised_sem"])
    check_columns("cpi_df", cpi_df, ["encoder", "sigma", "cpi", "sem"])
    check_columns("bst_df", bst_df, ["encoder", "beta", "fraction_flipped"])
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for lab, g in fii_df.groupby("encoder", sort=False):
        xm = (g.fcr_low + g.fcr_high) / 2
        axes[0].errorbar(xm, g.fii_normalised_mean, yerr=g.fii_normalised_sem.fillna(0), marker="o", ms=3, capsize=2,
                         label=lab)
    axes[0].axhline(0, color="k", lw=0.6)
    axes[0].set(xlabel="face coverage ratio (bin centre)", ylabel="FII_n  (> 0: face matters more)", title="FII by FCR")
    for lab, g in cpi_df.groupby("encoder", sort=False):
        axes[1].errorbar(g.sigma, g.cpi, yerr=g["sem"], marker="o", ms=3, capsize=2, label=lab)
    axes[1].axhline(0.5, color="k", lw=0.6, ls=":")
    axes[1].set(xlabel="face blur σ (px)", ylabel="CPI (> 0.5: context-preferring)", title="CPI vs blur")
    for lab, g in bst_df.groupby("encoder", sort=False):
        axes[2].plot(g.beta, g.fraction_flipped, marker="o", ms=3, label=lab)
    axes[2].set(xlabel="revealed background fraction β", ylabel="pairs closer to the background's image",
                title="B* stress test")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    long_attr = pd.concat([fii_df.assign(panel="fii_by_fcr"), cpi_df.assign(panel="cpi"), bst_df.assign(panel="bstar")],
                          ignore_index=True)
    return fig, long_attr


def _rank_sweep_tar_panels(axes: Any, sweep: pd.DataFrame, leaking: Sequence[str], palette: Mapping[str, Any],
                           xpos: Any, pos: Mapping[Any, int], ranks_all: Sequence[Any], *, baseline_ranks: Sequence[int],
                           r_max: int, far: float, k_max: int) -> None:
    """Panels (a) ridge TAR against the ISP-W rank and (b) ISP vs LEACE vs INLP at equal rank."""
    ax = axes[0][0]
    for lab in leaking:
        g = sweep[(sweep.encoder == lab) & sweep.method.isin(["raw", "ISP-W"])].copy()
        g["x"] = [xpos(lab, r) for r in g["rank"]]
        g = g.sort_values("x")
        ax.plot(g.x, 100 * g.tar, "o-", ms=3, color=palette[lab], label=lab)
        ax.fill_between(g.x, 100 * g.tar_low, 100 * g.tar_high, color=palette[lab], alpha=0.15)
    ax.axhline(100 * far, color="k", ls=":", lw=0.8, label=f"chance (FAR {far:g})")
    ax.set_xticks(list(pos.values()), ["raw"] + [str(r) for r in ranks_all])  # raw, grid, "full"
    ax.set(yscale="symlog", ylim=(0, 100), xlabel="ISP-W rank r", ylabel=f"ridge TAR (%) at FAR {far:g}, k = {k_max}",
           title="(a) leakage against the rank (encoders that leak; 95% CI bands)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2)
    ax = axes[0][1]
    meths = [("ISP-W", "o"), ("LEACE", "s"), ("INLP", "^")]
    for i, lab in enumerate(leaking):
        for j, (m, mk) in enumerate(meths):
            for q, r in enumerate(sorted(baseline_ranks)):
                g = sweep[(sweep.encoder == lab) & (sweep.method == m) & (sweep["rank"] == min(r, r_max))]
                if not len(g):
                    continue
                row = g.iloc[0]
                xx = i + (j - 1) * 0.25 + (q - 0.5) * 0.1
                ax.errorbar(xx, 100 * row.tar, yerr=[[100 * (row.tar - row.tar_low)], [100 * (row.tar_high - row.tar)]],
                            fmt=mk, color=f"C{j}", mfc="white" if q == 0 else f"C{j}", ms=5, capsize=2,
                            label=f"{m} r={min(r, r_max)}" if i == 0 else None)
        raw_r = sweep[(sweep.encoder == lab) & (sweep.method == "raw")].iloc[0]
        ax.hlines(100 * raw_r.tar, i - 0.45, i + 0.45, color="k", lw=1, label="raw" if i == 0 else None)
    ax.set_xticks(range(len(leaking)), leaking, rotation=30, ha="right", fontsize=8)
    ax.set(yscale="symlog", ylim=(0, 100), ylabel=f"ridge TAR (%) at FAR {far:g}",
           title="(b) ISP vs LEACE vs INLP at equal rank (95% CI)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2)


def plot_rank_sweep(sweep: pd.DataFrame, util_sum: pd.DataFrame, labels: Sequence[str], *, leaking: Sequence[str],
                    general: Sequence[str], ranks: Sequence[int], baseline_ranks: Sequence[int], r_max: int,
                    far: float, k_max: int, title: str) -> tuple[Any, pd.DataFrame]:
    """Figure 3: (a) ridge TAR against the ISP-W rank for the encoders that leak, (b) ISP vs LEACE vs INLP at equal
    rank, (c) kNN and (d) copy-detection retention against the rank for the ``general`` encoders, with the paper's
    kNN retention. The x axis is categorical: raw, the sweep's ranks, then "full" (each encoder's largest rank).

    Returns:
        (figure, data): ``sweep`` (panel "tar") and ``util_sum`` (panel "utility") stacked.
    """
    import matplotlib.pyplot as plt

    check_columns("sweep", sweep, ["encoder", "method", "rank", "tar", "tar_low", "tar_high"])
    check_columns("util_sum", util_sum, ["encoder", "method", "rank"])
    if not len(ranks):
        raise InvalidArgumentError("ranks must not be empty")
    # categorical x: raw, the sweep's ranks, then "full" — each encoder's full numerical rank (its largest fitted rank
    # when that is not one of the sweep's ranks; the legend-free label says which)
    grid_r = sorted({int(r) for r in ranks if r < max(ranks)})
    ranks_all = grid_r + ["full"]
    pos_of = {0: 0, **{r: i + 1 for i, r in enumerate(grid_r)}}
    full_x = len(grid_r) + 1

    def xpos(lab: str, r: int) -> int:
        """Position of rank r of an encoder: its own grid rank, or the "full" slot for its largest rank."""
        return pos_of.get(int(r), full_x)

    pos = {**pos_of, "full": full_x}
    palette = dict(zip(labels, plt.cm.tab20(np.linspace(0, 1, max(len(labels), 2)))))
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    _rank_sweep_tar_panels(axes, sweep, leaking, palette, xpos, pos, ranks_all, baseline_ranks=baseline_ranks,
                           r_max=r_max, far=far, k_max=k_max)
    for ax, family, ttl in ((axes[1][0], "knn", "(c) kNN on non-identity attributes (mean), % of raw"),
                            (axes[1][1], "copy:recall@1", "(d) copy detection Recall@1, % of raw")):
        for lab in general:
            g = util_sum[(util_sum.encoder == lab) & util_sum.method.isin(["ISP-W"])].sort_values("rank")
            if family not in g.columns or not g[family].notna().any():
                continue
            ax.plot([xpos(lab, r) for r in g["rank"]], g[family], "o-", ms=3, color=palette[lab], label=lab)
        ax.axhline(100, color="k", lw=0.6)
        ax.axhline(90, color="grey", lw=0.6, ls=":")
        ax.set(xlabel="ISP-W rank r", ylabel="% of raw", title=ttl)
    axes[1][0].set_xticks(list(pos.values())[1:] + [len(pos)], [str(r) for r in ranks_all] + ["paper\n(r not given)"])
    placed = []
    for e, v in sorted(X.PAPER_UTILITY.items(), key=lambda kv: -kv[1]["knn_isp"]):
        # the paper's ImageNet kNN retention after ISP, at its (unstated) rank; labels nudged apart when close
        y = v["knn_isp"]
        ty = min([y] + [p_ - 3.5 for p_ in placed if abs(p_ - y) < 3.5])
        placed.append(ty)
        axes[1][0].plot(len(pos), y, "D", color="k", ms=4)
        axes[1][0].annotate(f"{e} {y:g}", (len(pos), y), xytext=(len(pos) + 0.15, ty), textcoords="data", fontsize=7,
                            va="center")
    axes[1][0].set_xlim(0.5, len(pos) + 1.3)
    axes[1][1].set_xticks(list(pos.values())[1:], [str(r) for r in ranks_all])
    for ax in (axes[0][0], axes[1][0], axes[1][1]):
        ax.set_xlabel("ISP-W rank r (full: every direction the encoder's fit has, ≤ m − 1)")
    if axes[1][0].get_legend_handles_labels()[0]:
        axes[1][0].legend(fontsize=7, ncol=2, loc="lower left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig, pd.concat([sweep.assign(panel="tar"), util_sum.assign(panel="utility")], ignore_index=True)


def plot_inversion(inv: pd.DataFrame, *, reference_far: float, resolution: int) -> Any:
    """Figure 4: per attacked encoder, condition and attack, the verification rate, rank-1 and margin of each judge
    with their intervals (blue: raw embeddings, orange: after ISP-W)."""
    import matplotlib.pyplot as plt

    check_columns("inv", inv, ["encoder", "condition", "attack", "judge", "success_rate", "ci_low", "ci_high",
                                "rank1", "rank1_low", "rank1_high", "rank1_chance", "margin", "margin_low",
                                "margin_high", "n_targets"])
    if not len(inv):
        raise InsufficientDataError("plot_inversion needs at least one row")
    keys_df = inv[["encoder", "condition", "attack"]].drop_duplicates().reset_index(drop=True)
    fig, axes = plt.subplots(1, 3, figsize=(14, 0.34 * len(keys_df) + 1.8), sharey=True)
    keys = list(keys_df.encoder + " " + keys_df.condition + " / " + keys_df.attack)
    y = np.arange(len(keys_df))[::-1]
    judge_names = list(dict.fromkeys(inv.judge))
    marks = dict(zip(judge_names, ["o", "s", "^", "D"]))
    for i, kr in keys_df.iterrows():
        for jn in judge_names:
            rr = inv[(inv.encoder == kr.encoder) & (inv.condition == kr.condition) & (inv.attack == kr.attack)
                     & (inv.judge == jn)]
            if not len(rr):
                continue
            r = rr.iloc[0]
            off = 0.18 * (judge_names.index(jn) - (len(judge_names) - 1) / 2)
            col = "#4c72b0" if r.condition == "raw" else "#dd8452"
            for ax, (v, lo_, hi_) in zip(axes, [(100 * r.success_rate, 100 * r.ci_low, 100 * r.ci_high),
                                               (100 * r.rank1, 100 * r.rank1_low, 100 * r.rank1_high),
                                               (r.margin, r.margin_low, r.margin_high)]):
                ax.errorbar(v, y[i] + off, xerr=[[v - lo_], [hi_ - v]], fmt=marks[jn], color=col, capsize=2, ms=4,
                            mfc="white" if judge_names.index(jn) else col)
    for jn in judge_names:
        axes[2].plot([], [], marks[jn], color="grey", mfc="white" if judge_names.index(jn) else "grey",
                     label=f"judge: {jn}")
    axes[2].plot([], [], "s", color="#4c72b0", label="raw embeddings")
    axes[2].plot([], [], "s", color="#dd8452", label="after ISP-W")
    axes[0].set_yticks(y, keys, fontsize=8)
    axes[0].set(xlabel=f"verified at the judge's FAR {reference_far:g} (%, Wilson 95%)", xlim=(-2, 102))
    axes[1].axvline(100 * inv.rank1_chance.iloc[0], color="k", ls=":", lw=0.8, label="chance (1/T)")
    axes[1].set(xlabel="rank-1 among the targets' real crops (%, Wilson 95%)", xlim=(-2, 102))
    axes[1].legend(fontsize=7, loc="lower right")
    axes[2].axvline(0, color="k", lw=0.6)
    axes[2].set(xlabel="judge's cosine gain over mismatched reconstructions (95% CI)")
    axes[2].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Template inversion to {resolution}-px face crops before and after ISP (paper §1.5): "
                 f"{inv.n_targets.iloc[0]} targets; paper: ≈ 0% success for general encoders, 67–100% for FR",
                 fontsize=9)
    axes[2].xaxis.set_major_locator(plt.MaxNLocator(5))
    fig.tight_layout()
    return fig


def plot_reconstructions(real_crops: torch.Tensor, recs: Mapping[str, torch.Tensor], tgt: torch.Tensor, *,
                         max_rows: int = 6, max_images: int = 8) -> tuple[Any, pd.DataFrame]:
    """Figure 5: the targets' real crops above the ridge reconstructions of up to ``max_rows`` attacked encoders
    and conditions, ``max_images`` targets wide.

    Returns:
        (figure, data): the rows shown and the target indices.
    """
    import matplotlib.pyplot as plt

    if max_rows < 1 or max_images < 1:
        raise InvalidArgumentError(f"max_rows and max_images must be >= 1, got {max_rows}, {max_images}")
    show_keys = [k for k in recs if k.endswith("/ridge")][:max_rows]
    n_show = min(max_images, len(tgt))
    if n_show < 1:
        raise InsufficientDataError("plot_reconstructions needs at least one target")
    fig, axes = plt.subplots(len(show_keys) + 1, n_show, figsize=(1.1 * n_show + 1.5, 1.15 * (len(show_keys) + 1)),
                             squeeze=False)
    for j in range(n_show):
        axes[0][j].imshow(real_crops[j].permute(1, 2, 0).numpy())
        for i, k in enumerate(show_keys, 1):
            axes[i][j].imshow(recs[k][j].permute(1, 2, 0).clamp(0, 1).numpy())
    for i, k in enumerate(["target crop"] + show_keys):
        axes[i][0].set_ylabel(k.replace("/ridge", " / ridge"), fontsize=6, rotation=0, ha="right", va="center")
    for a in axes.flat:
        a.set_xticks([])
        a.set_yticks([])
    shown = pd.DataFrame({"row": ["target crop"] + show_keys, "images": n_show,
                          "target_indices": [" ".join(str(int(i)) for i in tgt[:n_show])] * (len(show_keys) + 1)})
    return fig, shown
