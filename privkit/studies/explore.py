"""Interactive sections of the notebooks: move ε (or a rank) and see what changes, in seconds.

Each ``*_view`` function draws one state (printed numbers and a small figure). :func:`panel` binds it to
ipywidgets controls in JupyterLab. Under papermill and nbval (the runner and ``make test`` set
``PRIVKIT_STATIC_WIDGETS=1``) and wherever ipywidgets is missing, it draws the controls' initial state once
as ordinary output instead, so executed notebooks keep a readable result and no widget state.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from ..errors import InvalidArgumentError, UnknownNameError

#: Environment variable that asks :func:`panel` for static output (set by the runner and by ``make test``).
STATIC_ENV = "PRIVKIT_STATIC_WIDGETS"


def static_mode() -> bool:
    """True under papermill/nbval (``PRIVKIT_STATIC_WIDGETS=1``) or when ipywidgets cannot be imported."""
    if os.environ.get(STATIC_ENV, "") == "1":
        return True
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return True
    return False


def panel(view: Callable[..., None], controls: Mapping[str, Any], **fixed: Any) -> None:
    """Show ``view(**controls, **fixed)`` with ipywidgets controls, or once with their initial values.

    ``controls`` maps each argument name to an ipywidgets control (a slider or a dropdown): its ``value`` is the
    initial state.
    """
    if not controls:
        raise InvalidArgumentError("controls must name at least one ipywidgets control")
    if static_mode():
        print("Static output (run this notebook in JupyterLab to move the controls); initial state: "
              + ", ".join(f"{k} = {getattr(w, 'value', w)}" for k, w in controls.items()))
        view(**{k: getattr(w, "value", w) for k, w in controls.items()}, **fixed)
        return
    import ipywidgets as W
    from IPython.display import display

    def update(**values: Any) -> None:
        view(**values, **fixed)

    out = W.interactive_output(update, dict(controls))
    box = W.VBox([W.HBox(list(controls.values()), layout=W.Layout(flex_flow="row wrap")), out])
    box.add_class("privkit-explore")
    display(box)


def _show(fig: Any) -> None:
    """Display ``fig`` now and close it. The figure object itself is displayed, not pyplot's list of open figures:
    inside a widget callback that list was found emptied before ``plt.show()`` ran (the DP pose panel lost its
    figure after every update)."""
    import matplotlib

    if "inline" in matplotlib.get_backend():
        from IPython.display import display

        display(fig)
    plt.close(fig)


def _controls(specs: Mapping[str, tuple]) -> dict[str, Any]:
    """Build controls from ``name -> (kind, description, value, *range)``; kinds: log (range lo, hi and optionally a
    readout format), int (min, max and optionally a step), choice (the options). Without ipywidgets (static mode),
    stand-ins that hold only the initial ``value``."""
    try:
        import ipywidgets as W
    except ImportError:
        return {k: SimpleNamespace(value=spec[2]) for k, spec in specs.items()}
    out: dict[str, Any] = {}
    for name, (kind, description, value, *rest) in specs.items():
        if kind == "log":
            out[name] = W.FloatLogSlider(value=value, base=10, min=math.log10(rest[0]), max=math.log10(rest[1]),
                                         step=0.05, description=description,
                                         readout_format=rest[2] if len(rest) > 2 else ".3g", continuous_update=False)
        elif kind == "int":
            out[name] = W.IntSlider(value=value, min=rest[0], max=rest[1], step=rest[2] if len(rest) > 2 else 1,
                                    description=description, continuous_update=False)
        elif kind == "choice":
            out[name] = W.Dropdown(options=list(rest[0]), value=value, description=description)
        else:
            raise InvalidArgumentError(f"control kind must be 'log', 'int' or 'choice', got {kind!r}")
    return out


# ----------------------------------------------------------------------------------------------------------- ScoreShield
def scoreshield_controls(epsilon: float = 20.0, delta: float = 1e-4, n: int = 100) -> dict[str, Any]:
    return _controls({"epsilon": ("log", "ε", epsilon, 0.1, 200.0), "delta": ("log", "δ", delta, 1e-9, 1e-2),
                      "n": ("int", "n", n, 10, 400, 10)})


def scoreshield_view(epsilon: float, delta: float, n: int, *, tau: float = 0.5, margin: float = 0.1,
                     dim: int = 32, seed: int = 0) -> None:
    """σ of the paper's calibration and the analytic one, the true δ, a score's flip probability, Gram error."""
    from ..privacy import analytic_gaussian_delta, gaussian_sigma
    from ..scoreshield import flip_probability, release_gram

    sens = 2.0  # replacing one gallery record moves one cosine score by at most 2
    s_paper = gaussian_sigma(epsilon, delta, sensitivity=sens, method="scoreshield")
    s_exact = gaussian_sigma(epsilon, delta, sensitivity=sens, method="analytic")
    true_delta = analytic_gaussian_delta(epsilon, s_paper, sensitivity=sens)
    flip = float(flip_probability(tau + margin, tau, s_paper))
    g = torch.Generator().manual_seed(seed)
    emb = torch.nn.functional.normalize(torch.randn(n, dim, generator=g, dtype=torch.float64), dim=1)
    clean = emb @ emb.T
    err = {}
    for projection in ("none", "nearest"):
        rel = release_gram(emb, epsilon=epsilon, delta=delta, projection=projection, calibration="scoreshield",
                           generator=torch.Generator().manual_seed(seed + 1))
        err[projection] = float((rel.matrix - clean).norm() / clean.norm())
    print(f"score vector (sensitivity 2): paper's σ = {s_paper:.4g}, analytic σ = {s_exact:.4g}; the paper's σ "
          f"truly gives δ = {true_delta:.2e} at ε = {epsilon:.3g} ({'meets' if true_delta <= delta else 'MISSES'} "
          f"the requested δ = {delta:.0e})")
    print(f"a genuine score {margin:g} above the threshold τ = {tau:g} flips to a reject with probability {flip:.3f}")
    print(f"Gram matrix of n = {n} random unit vectors (d = {dim}), relative Frobenius error: naive release "
          f"{err['none']:.3f}, projected onto the correlation matrices {err['nearest']:.3f}")
    eps_grid = np.geomspace(0.1, 200, 60)
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    ax.loglog(eps_grid, [gaussian_sigma(e, delta, sensitivity=sens, method="scoreshield") for e in eps_grid],
              label="paper's calibration")
    ax.loglog(eps_grid, [gaussian_sigma(e, delta, sensitivity=sens) for e in eps_grid], "--", label="analytic")
    ax.plot([epsilon], [s_paper], "o", color="k")
    ax.set(xlabel="ε", ylabel="σ of the score noise", title=f"Noise against ε at δ = {delta:.0e}")
    ax.legend()
    fig.tight_layout()
    _show(fig)


# -------------------------------------------------------------------------------------------------------------- DP pose
def dppose_controls(epsilon: float = 1.0, clip_norm: float = 0.1, sample_rate: float = 0.02,
                    steps: int = 500) -> dict[str, Any]:
    return _controls({"epsilon": ("log", "ε", epsilon, 0.05, 20.0), "clip_norm": ("log", "C", clip_norm, 0.001, 10.0),
                      "sample_rate": ("log", "q", sample_rate, 1e-3, 0.5), "steps": ("int", "steps", steps, 10, max(5000, 2 * steps), 10)})


def dppose_view(epsilon: float, clip_norm: float, sample_rate: float, steps: int, *, delta: float,
                n_private: int, accountant: str = "rdp") -> None:
    """The noise multiplier for (ε, δ, q, steps) under both neighbouring relations and what it means for a step."""
    from ..privacy.accounting import accountant_for, epsilon_spent, noise_multiplier_for

    rows = []
    for relation in ("add_remove", "substitution"):
        acc = accountant_for(relation, accountant)
        z = noise_multiplier_for(target_epsilon=epsilon, delta=delta, sample_rate=sample_rate, steps=steps,
                                 neighbouring=relation, accountant=acc)
        spent = epsilon_spent(noise_multiplier=z, sample_rate=sample_rate, steps=steps, delta=delta,
                              neighbouring=relation, accountant=acc)
        rows.append({"neighbouring": relation, "accountant": acc, "noise multiplier σ": z, "accounted ε": spent,
                     "noise std of the mean gradient": z * clip_norm / (sample_rate * n_private)})
    table = pd.DataFrame(rows)
    print(f"ε = {epsilon:.3g}, δ = {delta:g}, q = {sample_rate:.3g} (expected batch {sample_rate * n_private:.0f} of "
          f"{n_private}), {steps} steps, C = {clip_norm:.3g}:")
    print(table.to_string(index=False, float_format="{:.4g}".format))
    grid = np.unique(np.geomspace(1, steps, 6).round().astype(int))
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for row in rows:
        spent = [epsilon_spent(noise_multiplier=row["noise multiplier σ"], sample_rate=sample_rate, steps=int(t),
                               delta=delta, neighbouring=row["neighbouring"], accountant=row["accountant"])
                 for t in grid]
        ax.loglog(grid, spent, label=f"{row['neighbouring']} (σ = {row['noise multiplier σ']:.3g})")
    ax.axhline(epsilon, color="k", lw=0.8, ls=":")
    ax.set(xlabel="steps", ylabel="accounted ε", title="ε spent as training goes on, at the chosen σ")
    ax.legend(fontsize=8)
    fig.tight_layout()
    _show(fig)


def dppose_runs_controls(runs: Mapping[str, Any], n_images: int) -> dict[str, Any]:
    labels = list(runs)
    if not labels or n_images < 1:
        raise InvalidArgumentError("runs must name at least one trained run and n_images must be >= 1")
    return _controls({"run": ("choice", "run", labels[0], labels), "image": ("int", "test image", 0, 0, n_images - 1)})


def dppose_runs_view(run: str, image: int, *, runs: Mapping[str, Any], keypoints: torch.Tensor,
                     visible: torch.Tensor, images: torch.Tensor) -> None:
    """One trained run's prediction on one test image (``runs``: label -> RunOutcome), with its guarantee."""
    from .dppose import experiments as X

    if run not in runs:
        raise UnknownNameError("run", run, runs)
    o = runs[run]
    if not 0 <= image < len(o.predictions):
        raise InvalidArgumentError(f"image must be in [0, {len(o.predictions) - 1}] (a test image shown), got {image}")
    err = (o.predictions[image] - keypoints[image]).norm(dim=-1)[visible[image]]
    eps = "non-private" if o.noise_multiplier is None else f"ε = {o.guarantee.epsilon:.3g}, δ = {o.guarantee.delta:g}"
    print(f"{run}: PCKh@0.5 on the test set {o.pckh.mean:.1f} % ({eps}); on this image the mean joint error is "
          f"{float(err.mean()) if err.numel() else float('nan'):.1f} px")
    fig, ax = plt.subplots(figsize=(3.4, 3.4))
    X.draw_pose(ax, keypoints[image], visible[image], color="white", lw=1.6, ms=6, image=images[image])
    X.draw_pose(ax, o.predictions[image], visible[image], color="tab:red", lw=1.0, ms=5)
    ax.set_title("white: ground truth; red: prediction", fontsize=8)
    _show(fig)


# ------------------------------------------------------------------------------------------------------------------ ISP
def isp_controls(sweep: pd.DataFrame, encoder: str | None = None) -> dict[str, Any]:
    encoders = list(dict.fromkeys(sweep.encoder))
    ranks = sorted(int(r) for r in sweep["rank"].unique())
    methods = [m for m in ("ISP-W", "LEACE", "INLP") if m in set(sweep.method)]
    if not encoders or not methods or len(ranks) < 2:
        raise InvalidArgumentError("sweep must hold at least one encoder, one of ISP-W/LEACE/INLP and two ranks")
    return _controls({"encoder": ("choice", "encoder", encoder or encoders[0], encoders),
                      "method": ("choice", "method", methods[0], methods),
                      "rank": ("int", "rank r", ranks[len(ranks) // 2], ranks[0], ranks[-1])})


def isp_view(encoder: str, method: str, rank: int, *, sweep: pd.DataFrame, util_sum: pd.DataFrame,
             far: float) -> None:
    """TAR at the lowest resolvable FAR and the utility retained, at the nearest measured rank."""
    s = sweep[(sweep.encoder == encoder) & (sweep.method.isin([method, "raw"]))].sort_values("rank")
    if s.empty:
        print(f"no rank sweep for {encoder} / {method}")
        return
    measured = s[s.method == method]["rank"].to_numpy()
    r = int(measured[np.abs(measured - rank).argmin()]) if len(measured) else 0
    at = s[(s.method == method) & (s["rank"] == r)]
    raw = s[s.method == "raw"]
    u = util_sum[(util_sum.encoder == encoder) & (util_sum.method == method)].sort_values("rank")
    metrics = [c for c in u.columns if c not in ("encoder", "method", "rank")]
    if len(raw):
        print(f"{encoder}: raw TAR at FAR {far:g} = {raw.tar.iloc[0]:.3f}")
    if len(at):
        a = at.iloc[0]
        print(f"{method}, r = {r} (nearest measured rank to {rank}): TAR = {a.tar:.3f} [{a.tar_low:.3f}, {a.tar_high:.3f}]")
    ur = u[u["rank"] == r]
    for m in metrics:
        if len(ur) and not pd.isna(ur[m].iloc[0]):
            print(f"  utility {m}: {ur[m].iloc[0]:.1f} % of raw")
    fig, ax = plt.subplots(1, 2, figsize=(8.5, 3.0))
    line = s[s.method == method]
    ax[0].plot(line["rank"], line.tar, "o-")
    ax[0].fill_between(line["rank"], line.tar_low, line.tar_high, alpha=0.25)
    ax[0].axvline(r, color="k", lw=0.8)
    ax[0].set(xlabel="rank r", ylabel=f"TAR at FAR {far:g}", title=f"{encoder}: leakage ({method})")
    for m in metrics:
        ax[1].plot(u["rank"], u[m], "o-", label=m)
    ax[1].axvline(r, color="k", lw=0.8)
    ax[1].set(xlabel="rank r", ylabel="% of raw", title="utility retained")
    if metrics:
        ax[1].legend(fontsize=7)
    fig.tight_layout()
    _show(fig)


# --------------------------------------------------------------------------------------------------------- SynthesisNet
def synthesisnet_controls(epsilons: tuple[float, ...]) -> dict[str, Any]:
    lo, hi = min(epsilons), max(epsilons)
    return _controls({"epsilon": ("log", "ε", math.sqrt(lo * hi), lo, hi)})


def synthesisnet_view(epsilon: float, *, model: Any, images: torch.Tensor, seed: int = 0) -> None:
    """Faces published at ε by the trained model beside their sources (the same noise seed for every ε)."""
    from .synthesisnet import experiments as X

    with torch.no_grad():
        published, guarantee = model.publish(images, epsilon=epsilon, generator=torch.Generator().manual_seed(seed))
    print(f"ε = {epsilon:.3g} per unit of latent distance: {guarantee.epsilon:.3g} between any two faces")
    fig = X.image_grid({"original": images.cpu(), f"published, ε = {epsilon:.3g}": published.cpu()},
                       n_columns=len(images))
    _show(fig)
