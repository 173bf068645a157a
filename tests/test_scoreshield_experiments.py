"""The ScoreShield notebook's experiment functions (privkit.studies.scoreshield.experiments)."""

from __future__ import annotations

import math

import pytest
import torch

from privkit.errors import InsufficientDataError, InvalidArgumentError, NotUnitNormError
from privkit.studies.scoreshield import experiments as X
from privkit.metrics import auc
from privkit.scoreshield import synthetic_score_families


def clusters(k=4, per=10, d=16, spread=0.2, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(k).repeat_interleave(per)
    c = torch.nn.functional.normalize(torch.randn(k, d, generator=g, dtype=torch.float64), dim=1)
    e = torch.nn.functional.normalize(c[y] + spread * torch.randn(k * per, d, generator=g, dtype=torch.float64), dim=1)
    return e, y


def test_calibration_table_flags_the_papers_large_epsilons():
    t = X.calibration_table([0.5, 20.0, 100.0], [1e-4])
    assert list(t.paper_sigma_valid) == [True, False, False]
    assert t.true_delta_at_paper_sigma.iloc[1] == pytest.approx(8.63e-3, rel=0.01)
    assert (t.sigma_analytic.iloc[1:] > t.sigma_paper.iloc[1:]).all()


def test_error_scaling_projection_beats_naive_and_naive_matches_theory():
    e, _ = clusters(k=8, per=20)
    df = X.error_scaling(e, [8, 32], epsilon=1.0, delta=1e-5, repeats=2, seed=0)
    m = df.groupby(["regime", "adjacency", "n"])[["naive", "projected", "theory_naive"]].mean()
    assert (m.projected < m.naive).all()
    ratio = (m.naive / m.theory_naive)
    assert ((ratio > 0.4) & (ratio < 2.5)).all()  # a few draws of a chi-square with many degrees of freedom
    with pytest.raises(InsufficientDataError):
        X.error_scaling(e, [1000], epsilon=1.0, delta=1e-5)


def test_verification_pairs_and_cv_accuracy():
    e, y = clusters(k=5, per=4, spread=0.05)
    p = X.verification_pairs(e, y)
    assert int(p["label"].sum()) == 5 * 6 and len(p["label"]) == 20 * 19 // 2
    assert X.cv_accuracy(p["score"], p["label"]) == pytest.approx(1.0)
    sub = X.verification_pairs(e, y, max_impostors=50)
    assert int((sub["label"] == 0).sum()) == 50
    with pytest.raises(NotUnitNormError):
        X.verification_pairs(e * 2, y)
    with pytest.raises(InsufficientDataError):
        X.verification_pairs(e[:5], torch.arange(5))


def test_dp_verification_degrades_with_noise_and_recalibration_restores_far():
    e, y = clusters(k=20, per=6, spread=0.15, seed=1)
    p = X.verification_pairs(e, y)
    df = X.dp_verification(p, epsilons=[20.0, 1000.0], delta=1e-4, fars=(1e-2,), repeats=1, seed=0)
    acc = df.set_index("epsilon").accuracy
    assert acc["clean"] >= acc["1000"] - 2.0 and acc["1000"] > acc["20"] + 5.0  # CV accuracy has a little noise
    r = df.set_index("epsilon").loc["1000"]
    assert r["far@0.01 recal"] <= 0.01 and bool(r["attainable@0.01"])
    assert df.set_index("epsilon").loc["20", "true_delta"] > 1e-4  # the paper's sigma misses its delta at eps=20


def test_operating_points_gaussian_offset_matches_closed_form():
    fam = {"gaussian": synthetic_score_families(100_000, seed=0)["gaussian"]}
    ops = X.operating_points(fam, epsilons=[60.0], deltas=[1e-5], alphas=[1e-2], seed=0)
    r = ops.iloc[0]
    assert bool(r.attainable) and r.fmr_recal <= 1e-2
    from privkit.scoreshield import gaussian_offset

    assert r.offset == pytest.approx(gaussian_offset(r.tau_clean, r.sigma, 0.2), abs=0.01)


def test_operating_points_floor_and_inflation():
    fam = {"gaussian": synthetic_score_families(100_000, seed=0)["gaussian"]}
    ops = X.operating_points(fam, epsilons=[5.0, 60.0], deltas=[1e-5], alphas=[1e-2, 1e-3], seed=0)
    from privkit.scoreshield import fmr_floor

    for r in ops.itertuples():
        assert r.fmr_floor == pytest.approx(fmr_floor(fam["gaussian"].impostor, r.sigma), rel=1e-12)
        assert r.fmr_inflation == pytest.approx(r.fmr_kept_threshold / r.alpha)
        # attainable exactly when alpha clears the floor (measured floor; the closed form agrees to sampling error)
        assert r.attainable == (r.alpha >= r.fmr_floor_measured)
        assert r.fmr_floor_measured == pytest.approx(r.fmr_floor, abs=5 * math.sqrt(r.fmr_floor / 100_000) + 1e-4)
    big = ops[ops.epsilon == 5.0]
    assert (~big.attainable).all() and (big.tpr_recal == 0).all() and (big.fmr_inflation > 10).all()


def test_gram_metrics_on_clean_clusters():
    e, y = clusters(k=3, per=10, spread=0.05)
    S = e @ e.T
    assert X.recall_at_1(S, y) == 1.0
    assert X.pair_auc(S, y) == pytest.approx(1.0)
    assert X.spectral_nmi(S, y) > 0.95


def test_gram_analytics_rows_and_clean_reference():
    e, y = clusters(k=3, per=10, spread=0.1)
    df = X.gram_analytics({"toy": (e, y)}, n=24, epsilons=[1e4], delta=1e-5, delta_gs=[1.0],
                          projections=("none", "clip", "nearest"), repeats=1, seed=0)
    assert set(df.method) == {"clean", "none", "clip", "nearest"}
    v = df[df.metric == "recall@1"].groupby("method").value.mean()
    assert v["nearest"] >= 0.9  # tiny noise: utility kept
    with pytest.raises(InsufficientDataError):
        X.gram_analytics({"toy": (e, y)}, n=100, epsilons=[1.0], delta=1e-5, delta_gs=[1.0])


def test_recommender_clean_beats_heavy_noise_naive():
    tr, te = X.synthetic_ratings(60, 120, density=0.2, seed=0)
    assert not bool(((tr > 0) & (te > 0)).any())
    df = X.recommender_study(tr, te, epsilons=[0.01], delta=1e-5, delta_gs=[2.0], projections=("none", "nearest"),
                             repeats=1, k=10, seed=0)
    clean = df[df.method == "clean"].rmse.iloc[0]
    assert 0.3 < clean < 1.5
    assert math.isfinite(df[df.method == "nearest"].rmse.iloc[0])


def test_synthetic_ratings_default_density_lets_neighbours_beat_user_means():
    tr, te = X.synthetic_ratings(120, 300, seed=0)
    df = X.recommender_study(tr, te, epsilons=[1e4], delta=1e-5, delta_gs=[0.5], projections=("nearest",),
                             repeats=1, k=15, seed=0)
    rmse = df.groupby("method").rmse.mean()
    assert rmse["clean"] < rmse["user means"] - 0.05
    assert rmse["nearest"] < rmse["user means"]  # almost no noise: the release keeps the margin


def test_solver_comparison_newton_is_nearest():
    df = X.solver_comparison([30], seed=0)
    assert set(df.method) == {"newton", "dykstra", "aap", "clip"}
    newton = df[df.method == "newton"].iloc[0]
    assert newton.excess_distance_rel <= 1e-6 and newton.min_eigenvalue > -1e-8 and newton.max_diag_error < 1e-8
    assert (df[df.method.isin(["aap", "clip"])].excess_distance_rel > 1e-6).all()


@pytest.mark.slow
def test_audits_pass_correct_and_catch_broken_releases():
    assert X.audit_score_release(epsilon=1.0, delta=1e-5, n_samples=100_000, seed=0).passed
    assert X.audit_score_release(epsilon=1.0, delta=1e-5, sensitivity=1.0, n_samples=100_000, seed=0).passed
    assert not X.audit_score_release(epsilon=1.0, delta=1e-5, sensitivity=1.0, enforce_domain=False,
                                     n_samples=100_000, seed=0).passed
    assert X.audit_gram_release(epsilon=1.0, delta=1e-5, n_samples=100_000, seed=0).passed
    half = X.record_sensitivity(5) / 2
    assert not X.audit_gram_release(epsilon=1.0, delta=1e-5, delta_g=half, n_samples=100_000, seed=0).passed


def test_cv_accuracy_uses_given_folds():
    # fold 0 separates at 0.5, fold 1 at 0.85: the threshold learnt on one fold costs 2 errors on fold 1 and
    # 1 on fold 0 (5/8 correct, worked out by hand)
    score = torch.tensor([0.9, 0.8, 0.1, 0.2, 0.95, 0.9, 0.8, 0.75], dtype=torch.float64)
    label = torch.tensor([1, 1, 0, 0, 1, 1, 0, 0])
    fold = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    assert X.cv_accuracy(score, label, fold=fold) == 5 / 8
    with pytest.raises(InsufficientDataError, match="2 folds"):
        X.cv_accuracy(score, label, fold=torch.zeros(8, dtype=torch.long))


def test_lfw_protocol_pairs_and_dp_verification_use_the_protocols_folds():
    e, y = clusters(k=6, per=6, spread=0.15)
    g = torch.Generator().manual_seed(1)
    n = e.shape[0]
    i, j = torch.triu_indices(n, n, offset=1)
    same = y[i] == y[j]
    gen = torch.nonzero(same).squeeze(1)
    imp = torch.nonzero(~same).squeeze(1)[torch.randperm(int((~same).sum()), generator=g)[: gen.numel()]]
    pick = torch.cat([gen, imp])
    pairs = torch.stack([i[pick], j[pick]], 1)
    fold = torch.arange(pick.numel()) % 10
    P = X.lfw_protocol_pairs(pairs, same[pick], fold, e, y)
    assert torch.equal(P["fold"], fold) and P["label"].sum() == gen.numel()
    assert torch.allclose(P["score"], (e[pairs[:, 0]] * e[pairs[:, 1]]).sum(1))
    ver = X.dp_verification(P, epsilons=[0.5], delta=1e-5, fars=(0.2,), seed=0)  # 90 impostors resolve 10/90
    clean = ver[ver.epsilon == "clean"].iloc[0]
    assert clean.accuracy == pytest.approx(100 * X.cv_accuracy(P["score"], P["label"], fold=fold))
    assert clean.accuracy > 90 and ver[ver.epsilon == "0.5"].accuracy.iloc[0] < clean.accuracy
    with pytest.raises(InvalidArgumentError, match="pairs"):
        X.lfw_protocol_pairs(pairs + n, same[pick], fold, e, y)
    with pytest.raises(NotUnitNormError):
        X.lfw_protocol_pairs(pairs, same[pick], fold, 2 * e, y)


def test_template_features_pool_media_then_templates():
    # template 7: two frames of media 1 (both e0) and one still (e1): media pooling weights e0 and e1 equally
    e0, e1, e2 = torch.eye(3, dtype=torch.float64)
    emb = torch.stack([e0, e0, e1, 3 * e2])
    ids, feat = X.template_features(emb, torch.tensor([7, 7, 7, 9]), torch.tensor([1, 1, 2, 3]))
    assert ids.tolist() == [7, 9]
    assert torch.allclose(feat[0], (e0 + e1) / math.sqrt(2)) and torch.allclose(feat[1], e2)
    # without media every image is its own media: e0 counts twice
    _, f2 = X.template_features(emb, torch.tensor([7, 7, 7, 9]))
    assert torch.allclose(f2[0], torch.nn.functional.normalize(2 * e0 + e1, dim=0))
    P = X.template_pairs(ids, feat, torch.tensor([[9, 7], [7, 7]]), torch.tensor([False, True]))
    assert P["score"].tolist() == pytest.approx([0.0, 1.0]) and P["id_a"].tolist() == [9, 7]
    with pytest.raises(InvalidArgumentError, match="no feature"):
        X.template_pairs(ids, feat, torch.tensor([[7, 8], [7, 7]]), torch.tensor([False, True]))
    with pytest.raises(InvalidArgumentError, match="zero"):
        X.template_features(torch.stack([e0, -e0]), torch.tensor([1, 1]))


def test_build_templates_and_protocol():
    y = torch.tensor([0] * 7 + [1] * 6 + [2] * 2)
    t = X.build_templates(y, images_per_template=3, seed=0)
    used = t >= 0
    assert int(used.sum()) == 12 and t.max() == 3  # 2 + 2 templates; identity 2 is too small; one leftover of 0
    for tid in range(4):
        assert (t == tid).sum() == 3 and y[t == tid].unique().numel() == 1
    assert torch.equal(X.build_templates(y, images_per_template=3, seed=0), t)
    pairs, same = X.template_protocol(t, y)
    assert pairs.shape == (6, 2) and int(same.sum()) == 2
    e, yy = clusters(k=5, per=8, spread=0.3)
    tt = X.build_templates(yy, images_per_template=4, seed=1)
    ids, feat = X.template_features(e[tt >= 0], tt[tt >= 0])
    pairs, same = X.template_protocol(tt, yy)
    P = X.template_pairs(ids, feat, pairs, same)
    # pooling several images makes templates more separable than single images
    single = X.verification_pairs(e, yy)
    assert auc(P["score"][P["label"] == 1], P["score"][P["label"] == 0]) >= auc(
        single["score"][single["label"] == 1], single["score"][single["label"] == 0])
    with pytest.raises(InsufficientDataError, match="2 templates"):
        X.build_templates(torch.tensor([0, 0, 1]), images_per_template=3)
    with pytest.raises(InvalidArgumentError, match="mixes"):
        X.template_protocol(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 1]))


def test_impostor_pairs_are_all_pairs_of_different_identities():
    e, _ = clusters(k=7, per=1, spread=0.0)
    P = X.impostor_pairs(e)
    assert len(P["score"]) == 7 * 6 // 2 and int(P["label"].sum()) == 0
    assert torch.allclose(P["score"], (e[P["i"]] * e[P["j"]]).sum(1))
    e2, y2 = clusters(k=3, per=2)
    assert len(X.impostor_pairs(e2, y2)["score"]) == 6 * 5 // 2 - 3  # the 3 same-identity pairs are left out
    with pytest.raises(InsufficientDataError):
        X.impostor_pairs(e2, torch.zeros(6, dtype=torch.long))
    with pytest.raises(InsufficientDataError):
        X.impostor_pairs(e[:1])
    with pytest.raises(NotUnitNormError):
        X.impostor_pairs(2 * e)


def test_dp_verification_with_an_impostor_set_resolves_smaller_fars():
    e, y = clusters(k=6, per=5, spread=0.15, seed=2)
    p = X.verification_pairs(e, y)
    g = torch.Generator().manual_seed(3)
    many = torch.nn.functional.normalize(torch.randn(200, 16, generator=g, dtype=torch.float64), dim=1)
    imps = X.impostor_pairs(many)  # 19,900 pairs: FAR 1e-3 is resolvable (10/N = 5e-4), 1e-4 is not
    n = len(imps["score"])
    df = X.dp_verification(p, epsilons=[1000.0], delta=1e-4, fars=(1e-2, 1e-3), seed=0, impostors=imps)
    clean = df.set_index("epsilon").loc["clean"]
    assert clean.n_far_impostors == n and clean.smallest_resolvable_far == pytest.approx(10 / n)
    # the clean threshold leaves at most ⌊αN⌋ of the impostor set's scores above it
    assert clean["far@0.001 fixed"] <= 1e-3 and clean["far@0.01 recal"] == pytest.approx(0.01, abs=1 / n)
    assert "own_far@0.01 recal" in df.columns and 0.0 <= clean["own_far@0.01 recal"] <= 1.0
    # accuracy and AUC stay on the pair set's own pairs
    plain = X.dp_verification(p, epsilons=[1000.0], delta=1e-4, fars=(5e-2,), seed=0)  # 375 own impostor pairs
    assert clean.accuracy == pytest.approx(plain.set_index("epsilon").loc["clean", "accuracy"])
    assert clean.auc == pytest.approx(plain.set_index("epsilon").loc["clean", "auc"])
    with pytest.raises(InsufficientDataError, match="resolve"):
        X.dp_verification(p, epsilons=[1000.0], delta=1e-4, fars=(1e-4,), impostors=imps)
    with pytest.raises(InvalidArgumentError):
        X.dp_verification(p, epsilons=[1000.0], delta=1e-4, fars=(0.0,), impostors=imps)
