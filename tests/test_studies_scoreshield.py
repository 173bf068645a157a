"""The ScoreShield notebook's faces, table, figure and claims helpers (privkit.studies.scoreshield.faces, .tables,
.plots, .claims)."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from privkit.errors import InvalidArgumentError, ShapeError
from privkit.studies import claims as C
from privkit.studies.embedding import FaceSource
from privkit.studies.scoreshield import claims as SC
from privkit.studies.scoreshield import experiments as X
from privkit.studies.scoreshield import faces as F
from privkit.studies.scoreshield import plots as P
from privkit.studies.scoreshield import tables as T


def _unit(n: int, d: int = 8, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, d, dtype=torch.float64, generator=g), dim=1)


# ------------------------------------------------------------------------------------------------ faces
def test_centre_embeddings_subtracts_the_mean_of_the_chosen_rows_and_renormalises():
    e = torch.randn(6, 4, dtype=torch.float64) + 3.0
    rows = torch.tensor([True, True, False, False, False, False])
    out = F.centre_embeddings(e.float(), rows)
    want = torch.nn.functional.normalize(e.float().double() - e.float().double()[rows].mean(0), dim=1)
    assert torch.equal(out, want) and out.dtype == torch.float64
    assert torch.allclose(F.centre_embeddings(e).norm(dim=1), torch.ones(6, dtype=torch.float64))
    assert torch.allclose(F.centre_embeddings(e).sum(0) * 0, torch.zeros(4, dtype=torch.float64))
    with pytest.raises(InvalidArgumentError):
        F.centre_embeddings(e, torch.zeros(6, dtype=torch.bool))
    with pytest.raises(ShapeError):
        F.centre_embeddings(e, rows[:3])


def test_training_mask_and_summaries():
    identity = torch.arange(20).repeat_interleave(2)
    mask = F.training_mask(identity, seed=0)
    assert mask.dtype == torch.bool and 0 < int(mask.sum()) < len(identity)
    assert all(bool(mask[identity == i].all()) or not bool(mask[identity == i].any()) for i in range(20))
    e = _unit(8)
    ids = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    assert F.centring_summary(e, e, ids).startswith("mean cosine between different identities: raw ")
    data = {("enc", "set"): {"eval": e, "id": ids}}
    lines = F.face_set_summary(data, {"enc": {"score": torch.tensor([0.1, 0.3])}})
    assert lines[0].startswith("enc on set: 8 evaluated images") and "(impostor set: 0.200 ± 0.141)" in lines[0]
    assert "impostor set" not in F.face_set_summary(data, {})[0]


def test_load_verification_sets_needs_the_main_set():
    with pytest.raises(InvalidArgumentError):
        F.load_verification_sets((None, torch.zeros(1, dtype=torch.bool)), main_name="a",
                                 sources={"b": FaceSource("load_faces", {"name": "b"})})


# ------------------------------------------------------------------------------------------------ tables
def test_scaling_pool_falls_back_to_random_unit_vectors():
    e = _unit(5)
    pool, name = T.scaling_pool(e, (2, 4), seed=0, set_name="faces")
    assert pool is e and name == "centred dlib descriptors of faces"
    pool, name = T.scaling_pool(e, (2, 8), seed=0)
    assert pool.shape == (9, 8) and torch.allclose(pool.norm(dim=1), torch.ones(9, dtype=torch.float64))
    assert name.startswith("random unit vectors in 8 dimensions")
    with pytest.raises(InvalidArgumentError):
        T.scaling_pool(e, ())


def test_error_scaling_long_has_one_row_per_release_and_the_paper_rate():
    scal = X.error_scaling(_unit(12), (4, 8), epsilon=1.0, delta=1e-5, repeats=2, seed=0)
    long = T.error_scaling_long(scal)
    assert len(long) == 2 * len(scal) and set(long.release) == {"naive", "projected"}
    for (reg, adj), rate in T.PROJECTED_RATES.items():
        assert set(long[(long.regime == reg) & (long.adjacency == adj)].projected_rate) == {rate}
    rows = SC.scaling_claims(scal, ns=(4, 8), repeats=2)
    assert len(rows) == 3 * len(T.PROJECTED_RATES) and {r["section"] for r in rows} == {"Fig. 2"}
    assert all(r["verdict"] in C.VERDICTS for r in rows)
    fig = P.plot_error_scaling(scal, long, ns=(4, 8), pool_name="x", repeats=2)
    plt.close(fig)


def _ver_all() -> pd.DataFrame:
    rows = []
    for bb in ("dlib-resnet-fr", "faceres"):
        for eps in ("clean", "15", "100"):
            for rep, acc in enumerate((90.0, 92.0)):
                rows.append({"backbone": bb, "face_set": "lfw", "epsilon": eps, "repeat": rep,
                             "accuracy": acc - (20 if eps == "15" else 0), "auc": 0.9,
                             "smallest_resolvable_far": 1e-4, "tar@0.0001 recal": 10.0 * rep})
    return pd.DataFrame(rows)


def test_table1_numbers_average_the_draws_and_add_the_paper_columns():
    t1 = T.table1_numbers(_ver_all())
    assert len(t1) == 6 and "repeat" not in t1.columns
    assert t1.set_index(["backbone", "epsilon"]).loc[("faceres", "15"), "accuracy"] == pytest.approx(71.0)
    for bb, (lfw_acc, _) in X.PAPER_TABLE1_BACKBONES.items():
        assert t1[t1.epsilon == "clean"][f"paper_lfw_accuracy_{bb}"].iloc[0] == lfw_acc["clean"]
    text = T.table1_text(t1, (1e-4,), (15.0, 100.0))
    assert "Ours (faceres on lfw): 91.00 clean, 91.00 at ε = 100, 71.00 at ε = 15." in text


def test_table1_figure_rows_place_clean_right_of_the_largest_epsilon():
    table1b = pd.DataFrame([{"backbone": "faceres", "protocol": "lfw templates of 2", "epsilon": e,
                             "tar@0.0001 recal": v} for e, v in (("clean", 50.0), ("15", 0.0), ("100", 30.0))])
    t1, panels, x_of = T.table1_figure_rows(_ver_all(), table1b, epsilons=(15.0, 100.0), short={"dlib-resnet-fr": "dlib"})
    assert panels == [1e-4] and x_of == {"clean": 180.0, "15": 15.0, "100": 100.0}
    ours = t1[(t1.source == "privkit") & (t1.panel == "accuracy")]
    assert set(ours.series) == {"dlib, lfw", "faceres, lfw"} and ours.sd.notna().all()
    assert set(t1.panel) == {"accuracy", "template TAR@0.0001"} and t1.value.notna().all()
    fig = P.plot_table1(t1, tar_panels=panels, x_of=x_of, encoders=("dlib-resnet-fr", "faceres"), face_sets=("lfw",),
                        title="t")
    plt.close(fig)


def test_roc_shift_and_flip_studies():
    g = torch.Generator().manual_seed(0)
    gen = (0.6 + 0.1 * torch.randn(40, generator=g, dtype=torch.float64)).clamp(-1, 1)
    imp = (0.1 * torch.randn(200, generator=g, dtype=torch.float64)).clamp(-1, 1)
    pairs = {"score": torch.cat([gen, imp]), "label": torch.cat([torch.ones(40), torch.zeros(200)]).long(),
             "id_a": torch.cat([torch.arange(40) % 10, torch.arange(200) % 10])}
    roc, base, hist_l = T.roc_shift_study(pairs, epsilons=(15.0, 100.0), delta=1e-4, n_boot=20, seed=0)
    assert list(roc.epsilon) == [15.0, 100.0] and hist_l > 0 and base.low <= base.estimate <= base.high
    assert (roc.bound_eta <= 1.0).all() and (roc.sigma.diff().dropna() < 0).all()
    plt.close(P.plot_roc_shift(roc))
    curve, flips = T.flip_study(pairs["score"], imp, epsilon=35.0, delta=1e-4, seed=0)
    assert len(curve) == 41 and len(flips) == 1
    f = flips.iloc[0]
    assert 0.0 <= f.flip_rate_measured <= 1.0 and f.n_pairs == 240
    assert f.max_abs_theory_minus_mc_on_grid < 0.05
    plt.close(P.plot_flip_probability(curve, title="t"))
    with pytest.raises(InvalidArgumentError):
        T.roc_shift_study(pairs, epsilons=(15.0,), delta=1e-4, n_boot=0)


def test_dprag_table7_and_claims():
    paper = X.paper_dprag_table()
    settings = sorted({(float(t), int(k)) for t, k in zip(paper.tau, paper.k)})
    rows = []
    privacy = sorted({(float(e), float(d)) for e, d in zip(paper.epsilon, paper.delta)})
    for tau, k in settings:
        for e, d in privacy:
            calib = "none" if e == math.inf else "scoreshield"
            r = 0.8 if e == math.inf else min(0.75, 0.1 + e / 200)
            rows.append({"tau": tau, "k": k, "epsilon": e, "delta": d, "calibration": calib, "sigma": 0.1,
                         "true_delta": d, "recall": r, "recall_low": r - 0.05, "recall_high": r + 0.05,
                         "n_retrieved": float(k), "recall_random": 0.05})
    rag = pd.DataFrame(rows)
    t7 = T.dprag_table7(rag, paper)
    assert len(t7) == len(paper) and {"ours_recall", "sigma", "paper_rag_gain"} <= set(t7.columns)
    with pytest.raises(InvalidArgumentError):
        T.dprag_table7(rag.iloc[1:], paper)
    claims = SC.dprag_claims(rag, settings=settings, paper_privacy=[p for p in privacy if p[0] != math.inf],
                             n_questions=50)
    assert len(claims) == len(settings) + 2
    assert claims.verdict.iloc[-1] == "not resolvable"  # the generators' accuracy is not measured
    assert set(claims.section) == {"DP-RAG"}


def test_recommender_summary_counts_the_settings_that_beat_user_means():
    rec = pd.DataFrame([{"method": "clean", "delta_g": np.nan, "epsilon": np.nan, "rmse": 0.9},
                        {"method": "user means", "delta_g": np.nan, "epsilon": np.nan, "rmse": 1.0}]
                       + [{"method": m, "delta_g": 2.0, "epsilon": e, "rmse": v}
                          for e in (1.0, 10.0) for m, v in (("none", 1.1), ("nearest", 0.95))])
    text = T.recommender_summary(rec)
    assert "clean RMSE 0.9000; user means (no similarity) 1.0000" in text
    assert "nearest 2/2, none 0/2" in text and "The projection visibly helps" in text
    plt.close(P.plot_recommender(rec, delta_gs=(2.0,)))


# ------------------------------------------------------------------------------------------------ claims
def test_diff_of_rates_is_a_normal_interval_of_two_rates():
    m, lo, hi = SC.diff_of_rates(90.0, 80.0, 400)
    half = 100 * 1.96 * math.sqrt(0.9 * 0.1 / 400 + 0.8 * 0.2 / 400)
    assert (m, lo, hi) == pytest.approx((10.0, 10.0 - half, 10.0 + half))
    assert all(math.isnan(v) for v in SC.diff_of_rates(float("nan"), 80.0, 10))
    with pytest.raises(InvalidArgumentError):
        SC.diff_of_rates(1.0, 2.0, 0)


def test_calibration_solver_and_audit_claims():
    cal = X.calibration_table((15.0, 100.0), (1e-4,))
    rows = SC.calibration_claims(cal, delta=1e-4, epsilons=(15.0, 100.0))
    ratio = float((cal.sigma_analytic / cal.sigma_paper).min())  # at large ε the paper's σ is the smaller one
    assert [r["verdict"] for r in rows] == ["does not hold", "holds", "holds" if ratio < 1 else "does not hold"]
    assert rows[2]["ours"] == ratio
    solv = pd.DataFrame([{"n": 10, "method": "aap", "min_eigenvalue": 0.0, "max_diag_error": 0.0,
                          "excess_distance_rel": 0.1},
                         {"n": 10, "method": "dykstra", "min_eigenvalue": 0.0, "max_diag_error": 0.0,
                          "excess_distance_rel": 1e-9}])
    assert [r["verdict"] for r in SC.solver_claims(solv)] == ["holds", "does not hold", "holds"]
    audits = pd.DataFrame([{"release": "score vector, Δ = 2 (correct)", "claimed_epsilon": 1.0,
                            "epsilon_lower_95": 0.4},
                           {"release": "Gram, record adjacency (correct)", "claimed_epsilon": 1.0,
                            "epsilon_lower_95": 1.5}])
    assert [r["verdict"] for r in SC.audit_claims(audits)] == ["holds", "does not hold"]
    claims = pd.DataFrame(rows + SC.audit_claims(audits))
    text = SC.claims_text(claims)
    n_hold = int((claims.verdict == "holds").sum())
    assert text.startswith(f"5 claims: {n_hold} holds, {5 - n_hold} does not hold, 0 not resolvable\n")
    assert "\ncalibration:\n  [does not hold]" in text and "\naudits:\n" in text


def test_check_invariants_reports_each_broken_guarantee():
    scal = pd.DataFrame([{"regime": "i: score vector", "adjacency": "record", "n": 4, "naive": 1.0, "projected": 2.0}])
    audits = pd.DataFrame([{"release": "broken", "expected": "caught", "passed": True, "epsilon_lower_95": 0.1}])
    ver = pd.DataFrame([{"backbone": "b", "face_set": "s", "epsilon": "15", "n_far_impostors": 1000,
                         "attainable@0.01": True, "far@0.01 recal": 0.5}])
    t1 = pd.DataFrame([{"smallest_resolvable_far": 1e-3, "tar@0.0001 recal": 1.0}])
    cal = pd.DataFrame([{"paper_sigma_valid": True}])
    solv = pd.DataFrame([{"method": "newton", "excess_distance_rel": 1.0}])
    rag = pd.DataFrame([{"tau": 0.3, "k": 5, "delta": d, "calibration": c, "epsilon": e, "recall": r}
                        for c, e, d, r in (("none", math.inf, 0.0, 0.5), ("scoreshield", 1.0, 1e-5, 0.6),
                                           ("scoreshield", 10.0, 1e-5, 0.6))])
    tables = {"scal": scal, "audit_df": audits, "ver_all": ver, "table1": t1, "table1b": t1.iloc[:0], "cal": cal,
              "solv": solv, "rag": rag}
    kw = dict(far_sets={("b", "s"): (0.01,)}, rag_settings=[(0.3, 5)], rag_epsilons=(1.0, 10.0), rag_delta=1e-5,
              epsilons=(15.0,), full=False)
    failures = SC.check_invariants(tables, **kw)
    assert len(failures) == 8
    assert failures[0] == "projected error is not below naive error at every n"
    assert any("recalibrated FAR" in f for f in failures) and any("Newton" in f for f in failures)
    with pytest.raises(InvalidArgumentError, match="missing"):
        SC.check_invariants({k: v for k, v in tables.items() if k != "rag"}, **kw)
