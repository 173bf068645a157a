"""The figures of the SynthesisNet notebook (``notebooks/synthesisnet.py``).

Each function draws one figure from the tables of :mod:`privkit.studies.synthesisnet.tables` and returns it (with
the data it shows where that is not the input table); the notebook saves, shows and closes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from privkit._validate import check_columns
from privkit.errors import InsufficientDataError
from privkit.studies.synthesisnet.tables import WHOLE

__all__ = ["JUDGES", "plot_identity_vs_epsilon", "plot_attributes", "plot_epsilon_meaning"]

#: The judges of the identity figure, in column order.
JUDGES = ("faceres", "dlib", "model identity encoder")

_REFERENCES = {"blur": "tab:orange", "pixelate": "tab:green", "mask": "tab:red", "reconstruction (decoder)": "tab:gray",
               "no DP noise": "tab:purple"}


def plot_identity_vs_epsilon(judged: pd.DataFrame, judges: Sequence[str] = JUDGES) -> Any:
    """Figure 3: identity distance, rank-1 and TAR against ε (rows) per judge (columns) for SynthesisNet and the
    whole-latent baseline, with the releases without noise as horizontal references and chance on the rank-1 row."""
    import matplotlib.pyplot as plt

    metrics = [("identity_distance", "distance_low", "distance_high", "identity distance (1 − cos)"),
               ("rank1", "rank1_low", "rank1_high", "rank-1 re-identification"),
               ("tar", "tar_low", "tar_high", "TAR at FAR")]
    check_columns("judged", judged, ["judge", "method", "epsilon", "rank1_chance"]
                   + [c for m in metrics for c in m[:3]])
    if not len(judges):
        raise InsufficientDataError("plot_identity_vs_epsilon needs at least one judge")
    fig, axes = plt.subplots(3, len(judges), figsize=(11, 7.5), sharex=True, squeeze=False)
    for c, judge in enumerate(judges):
        jd = judged[judged.judge == judge]
        for r, (col, lo, hi, label) in enumerate(metrics):
            ax = axes[r, c]
            for m, colr, lab in (("SynthesisNet", "tab:blue", "SynthesisNet (identity noise)"),
                                 (WHOLE, "tab:brown", WHOLE)):
                sw = jd[(jd.method == m) & np.isfinite(jd.epsilon)].sort_values("epsilon")
                if len(sw):
                    ax.errorbar(sw.epsilon, sw[col], yerr=[sw[col] - sw[lo], sw[hi] - sw[col]], marker="o",
                                capsize=2, color=colr, label=lab)
            for m, colr in _REFERENCES.items():
                v = jd[jd.method == m][col]
                if len(v):
                    ax.axhline(float(v.iloc[0]), color=colr, ls="--", lw=0.9, label=m)
            if col == "rank1":
                ax.axhline(float(jd.rank1_chance.iloc[0]), color="k", ls=":", lw=0.9, label="chance")
            ax.set(xscale="log", ylabel=label if c == 0 else None, title=judge if r == 0 else None,
                   xlabel="ε (per unit of latent distance)" if r == 2 else None)
    axes[0, len(judges) - 1].legend(fontsize=6, loc="best")
    return fig


def _gender_age_panels(axes: Any, gender_age: pd.DataFrame) -> None:
    """The two faceres panels of figure 4: gender agreement and age error against ε."""
    ga_sw = gender_age[gender_age.method == "SynthesisNet"].sort_values("epsilon")
    ga_wh = gender_age[gender_age.method == WHOLE].sort_values("epsilon")
    for ax, (col, lo, hi, ref, title) in zip(axes, [
            ("gender_agreement", "gender_agreement_low", "gender_agreement_high", "gender_chance",
             "gender (faceres)"),
            ("age_mae", "age_mae_low", "age_mae_high", "age_mae_shuffled", "age error, years (faceres)")]):
        for d, colr, lab_ in ((ga_sw, "tab:blue", "SynthesisNet"), (ga_wh, "tab:brown", WHOLE)):
            if len(d):
                ax.errorbar(d.epsilon, d[col], yerr=[d[col] - d[lo], d[hi] - d[col]], marker="o", capsize=2,
                            color=colr, label=lab_)
        ax.plot(ga_sw.epsilon, ga_sw[ref], "k--", lw=0.8, label="chance / unrelated face")
        for m, colr in (("no DP noise", "tab:purple"), ("blur", "tab:orange"), ("pixelate", "tab:green")):
            v = gender_age[gender_age.method == m][col]
            if len(v):
                ax.axhline(float(v.iloc[0]), color=colr, ls=":", lw=0.9, label=m)
        ax.set(xscale="log", title=title, xlabel="ε")


def plot_attributes(att: pd.DataFrame, gender_age: pd.DataFrame, names: Sequence[str]) -> tuple[Any, pd.DataFrame]:
    """Figure 4: faceres's gender agreement and age error, then the probe accuracy of each attribute in ``names``,
    against ε, with the originals, the majority class and the blur / pixelate baselines as references.

    Returns:
        (figure, data): the probe table and the faceres table stacked, with a ``judge`` column.
    """
    import matplotlib.pyplot as plt

    check_columns("att", att, ["method", "epsilon", "attribute", "accuracy", "majority"])
    check_columns("gender_age", gender_age, ["method", "epsilon", "gender_agreement", "age_mae"])
    fig, axes = plt.subplots(1, len(names) + 2, figsize=(1.9 * (len(names) + 2) + 0.5, 2.6), squeeze=False)
    _gender_age_panels(axes[0, :2], gender_age)
    axes[0, 0].set_ylim(0, 1.02)
    axes[0, 1].legend(fontsize=5)
    sw = att[att.method == "SynthesisNet"]
    for ax, a in zip(axes[0, 2:], names):
        d = sw[sw.attribute == a].sort_values("epsilon")
        ax.plot(d.epsilon, d.accuracy, "o-", label="SynthesisNet")
        ax.axhline(float(att[(att.method == "original") & (att.attribute == a)].accuracy.iloc[0]), color="k", lw=0.8,
                   label="originals")
        ax.axhline(float(d.majority.iloc[0]), color="k", ls="--", lw=0.8, label="majority class")
        for m, colr in (("blur", "tab:orange"), ("pixelate", "tab:green")):
            ax.axhline(float(att[(att.method == m) & (att.attribute == a)].accuracy.iloc[0]), color=colr, ls=":",
                       lw=0.9, label=m)
        ax.set(xscale="log", title=f"{a} (probe)", xlabel="ε", ylim=(0, 1.02))
    axes[0, 2].set_ylabel("probe accuracy")
    axes[0, -1].legend(fontsize=6)
    fig.tight_layout()
    data = pd.concat([att.assign(judge="pixel probe (embedded labels)"),
                      gender_age.assign(judge="faceres gender/age heads")], ignore_index=True)
    return fig, data


def plot_epsilon_meaning(meaning: pd.DataFrame, epsilons: Sequence[float]) -> Any:
    """Figure 5: cumulative distribution of ε·d over pairs (nearest other identity per face; quantiles of all
    cross-identity pairs), one line per ε, with ε·d = 1 marked."""
    import matplotlib.pyplot as plt

    check_columns("meaning", meaning, ["pair", "epsilon", "fraction", "eps_d"])
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.0), sharey=True)
    for ax, kind in zip(axes, ["nearest other identity", "any other identity"]):
        for e in epsilons:
            d = meaning[(meaning.pair == kind) & (meaning.epsilon == e)]
            ax.plot(d.eps_d, d.fraction, label=f"ε = {e:g}")
        ax.axvline(1.0, color="k", ls="--", lw=0.8)
        ax.set(xscale="log", xlabel="ε · d(z, z′)  (log-likelihood-ratio bound)",
               title=kind + (" (per face)" if kind.startswith("nearest") else " (quantiles of all pairs)"))
    axes[0].set_ylabel("fraction of pairs ≤ x")
    axes[1].legend(fontsize=6)
    return fig
