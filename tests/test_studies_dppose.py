"""The DP pose notebook's table and figure helpers (privkit.studies.dppose.tables, privkit.studies.dppose.plots) and
the verdict of its claims on privkit.studies.claims."""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
import torch

from privkit.errors import InvalidArgumentError
from privkit.studies.dppose import experiments as X
from privkit.studies.dppose import plots as P
from privkit.studies.dppose import tables as T

NAN = float("nan")


def _runs() -> pd.DataFrame:
    rows = []
    for s in range(3):
        rows.append({"method": "nonprivate", "init": "warm", "view": "raw", "epsilon": NAN, "clip_norm": NAN,
                     "k": NAN, "seed": s, "purposes": "seeds", "pckh": 60.0 + s})
        rows.append({"method": "dpsgd", "init": "warm", "view": "raw", "epsilon": 0.8, "clip_norm": 0.01,
                     "k": NAN, "seed": s, "purposes": "grid+seeds", "pckh": 40.0 + s})
    rows += [
        {"method": "dpsgd", "init": "warm", "view": "raw", "epsilon": 0.2, "clip_norm": 0.01, "k": NAN, "seed": 0,
         "purposes": "grid", "pckh": 30.0},
        {"method": "dpsgd", "init": "warm", "view": "raw", "epsilon": 0.8, "clip_norm": 1.0, "k": NAN, "seed": 0,
         "purposes": "clip", "pckh": 41.0},
        {"method": "feature_projective", "init": "warm", "view": "raw", "epsilon": 0.8, "clip_norm": 0.01, "k": 100,
         "seed": 0, "purposes": "grid", "pckh": 50.0},
        {"method": "feature_projective", "init": "warm", "view": "raw", "epsilon": 0.8, "clip_norm": 0.01, "k": 10,
         "seed": 0, "purposes": "k", "pckh": 45.0},
        {"method": "nonprivate", "init": "warm", "view": "blurred", "epsilon": NAN, "clip_norm": NAN, "k": NAN,
         "seed": 0, "purposes": "blurred", "pckh": 55.0},
        {"method": "dpsgd", "init": "scratch", "epsilon": 0.8, "view": "raw", "clip_norm": 0.01, "k": NAN, "seed": 0,
         "purposes": "init", "pckh": 5.0},
    ]
    return pd.DataFrame(rows)


def _outcome(method, epsilon, clip, *, pckh, seed=0, k=None, sigma=1.0, model=None):
    spec = X.RunSpec(method, "warm", epsilon, clip, k, seed, ("ablation",))
    return SimpleNamespace(spec=spec, pckh=SimpleNamespace(mean=pckh), noise_multiplier=sigma, model=model)


def _old_verdict(diff: float, margin: float) -> str:
    return "holds" if diff > margin else "does not hold" if diff < -margin else "not resolvable"


@pytest.mark.parametrize("a,b,sd", list(itertools.product([[10.0], [12.0, 13.0], [20.0, 21.0, 22.0]],
                                                          [[10.0], [11.5, 12.5], [14.0]], [0.1, 0.5, 3.0])))
def test_verdict_is_judge_claim_on_the_difference_and_its_margin(a, b, sd):
    v = X.verdict(a, b, sd=sd)
    assert v["verdict"] == _old_verdict(v["diff"], v["margin"])


def test_verdict_keeps_its_own_words_for_missing_runs_and_spread():
    assert X.verdict([], [1.0], sd=1.0)["verdict"] == "not resolvable: not run at this scale"
    assert X.verdict([2.0], [1.0], sd=NAN)["verdict"] == "not resolvable: no seed spread at this scale"


def test_main_runs_keeps_the_warm_raw_runs_at_the_main_clip_and_rank():
    m = T.main_runs(_runs(), clip=0.01, k=100)
    assert set(m.view) == {"raw"} and set(m.init) == {"warm"}
    assert not (m.clip_norm == 1.0).any() and not (m.k == 10).any()
    assert len(m) == 3 + 3 + 1 + 1  # non-private seeds, DP-SGD seeds at 0.8, DP-SGD at 0.2, feature-projective k=100


def test_ablation_rows_compare_with_the_main_runs_of_the_same_settings():
    df = _runs()
    outs = [_outcome("nonprivate", None, None, pckh=70.0), _outcome("dpsgd", 0.8, 0.01, pckh=41.0)]
    rows = T.ablation_rows(df, outs, seed=0, warm_imagenet=20.0, warm_pose=25.0)
    assert rows[0] == {"run": "warm start (public split only)", "imagenet": 20.0, "pose_pretrained": 25.0, "n_main": 1}
    np_row, dp_row = rows[1], rows[2]
    assert np_row["n_main"] == 3 and np_row["imagenet"] == pytest.approx(61.0)
    assert np_row["difference"] == pytest.approx(9.0) and np_row["verdict"] == "holds"
    assert dp_row["n_main"] == 3 and dp_row["imagenet"] == pytest.approx(41.0) and dp_row["verdict"] == "not resolvable"
    assert "seed=0" not in dp_row["run"]
    text = T.ablation_text(pd.DataFrame(rows), ablation_backbone="movenet", backbone="efficientnet_lite0")
    assert text.count("- pose pretraining beats ImageNet") == 2 and "HOLDS" in text


def test_diagnostic_models_pick_the_runs_at_the_largest_epsilon():
    warm = torch.nn.Linear(1, 1)
    dp, pr = torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)
    outs = [_outcome("dpsgd", 0.8, 0.01, pckh=1.0, model=dp, sigma=2.0),
            _outcome("projected", 0.8, 0.01, pckh=1.0, model=pr, k=10, sigma=3.0),
            _outcome("dpsgd", 0.2, 0.01, pckh=1.0, model=torch.nn.Linear(1, 1), sigma=9.0)]
    models, sigma = T.diagnostic_models(outs, warm, seed=0, epsilon=0.8, clip=0.01, k=10)
    assert list(models) == ["warm start", "after DP-SGD (ε = 0.8)", "after projected DP-SGD (ε = 0.8)"]
    assert models["after DP-SGD (ε = 0.8)"] is dp and sigma == 3.0
    _, sigma = T.diagnostic_models(outs[:1] + outs[2:], warm, seed=0, epsilon=0.8, clip=0.01, k=10)
    assert sigma == 9.0  # no projected run: the last run's noise
    with pytest.raises(InvalidArgumentError):
        T.diagnostic_models([], warm, seed=0, epsilon=0.8, clip=0.01, k=10)


def test_projection_text_reports_the_gaps_with_and_without_noise():
    diag = pd.DataFrame([{"model": "warm start", "k": 10, "p": 1000, "energy_fraction": 0.5, "random_fraction": 0.01,
                          "snr_unprojected": 1e-3, "snr_projected": 5e-2, "snr_gain": 50.0}])
    controls = pd.DataFrame([{"model": "DP-SGD, with noise", "method": "dpsgd", "noise": "with noise", "pckh": 40.0},
                             {"model": "DP-SGD, no noise", "method": "dpsgd", "noise": "no noise", "pckh": 50.0},
                             {"model": "projected DP-SGD, with noise", "method": "projected", "noise": "with noise",
                              "pckh": 35.0},
                             {"model": "projected DP-SGD, no noise", "method": "projected", "noise": "no noise",
                              "pckh": 45.0}])
    text = T.projection_text(diag, controls, k=10)
    assert "holds 50.0% of the clean private gradient's energy" in text
    assert "-5.00 points with noise, -5.00 without noise: the projection itself costs accuracy" in text


def test_plots_return_figures_and_their_data():
    df = _runs()
    main = T.main_runs(df, clip=0.01, k=100)
    fig, data = P.plot_pckh_vs_epsilon(df, main[main.seed == 0], X.seed_spread(df),
                                       main[main.method == "nonprivate"].pckh, warm_test=10.0, eps_max=0.8,
                                       clip=0.01, delta=4e-5, subtitle="test")
    assert set(data.source) == {"ours", "paper MPII (C = 0.01)"}
    assert len(data[data.source.str.startswith("paper")]) == len(X.PAPER_MPII_PCKH)
    plt.close(fig)
    with pytest.raises(InvalidArgumentError):
        P.plot_pckh_vs_epsilon(df, main, X.seed_spread(df), main.pckh.iloc[:0], warm_test=1.0, eps_max=0.8,
                               clip=0.01, delta=4e-5, subtitle="")
    assert list(P.method_palette()) == list(P.METHOD_NAMES)
    assert math.isclose(P.paper_mpii_table().pckh.max(), 82.61)
