"""Tests of privkit.scoreshield.recalibration: decisions on privatised scores."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from privkit.errors import InvalidArgumentError, ShapeError
from privkit.privacy import make_generator, sample_gaussian
from privkit.scoreshield import (
    SCORE_FAMILIES,
    acceptance_rate,
    flip_probability,
    flip_probability_bound,
    flip_probability_mc,
    fmr_floor,
    fmr_private,
    gaussian_offset,
    recalibrate_threshold,
    recalibration_offset,
    roc_shift_bound,
    synthetic_score_families,
)
from privkit.metrics import auc, bootstrap_ci, eer, roc_curve


def privatise(s: torch.Tensor, sigma: float, seed: int) -> torch.Tensor:
    w = sample_gaussian(s.shape, sigma=sigma, generator=make_generator(seed), dtype=torch.float64)
    return (s + w).clamp(-1.0, 1.0)


@pytest.fixture(scope="module")
def gaussian_impostors() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return 0.2 * torch.randn(200_000, generator=g, dtype=torch.float64)  # N(0, 0.2^2), |S| < 1 w.p. ~1


# ------------------------------------------------------------------------------------------
# flips
# ------------------------------------------------------------------------------------------


def test_flip_probability_closed_form_matches_monte_carlo():
    s = torch.tensor([-0.9, -0.2, 0.25, 0.3, 0.33, 0.45, 0.95], dtype=torch.float64)
    tau, sigma, n = 0.3, 0.1, 100_000
    closed = flip_probability(s, tau, sigma)
    mc = flip_probability_mc(s, tau, sigma, n_samples=n, generator=make_generator(1))
    se = torch.sqrt(closed * (1 - closed) / n)
    assert torch.all((mc - closed).abs() <= 5 * se + 1e-4)
    assert float(closed[3]) == pytest.approx(0.5)  # s = tau: the noise sign decides
    assert float(closed[0]) < 1e-20  # far from the threshold: essentially never flips
    # the Gaussian tail bound dominates the exact probability
    k_pos = (s - tau).abs() > 0
    assert torch.all(flip_probability_bound(s, tau, sigma)[k_pos] >= closed[k_pos])
    exact = norm.sf(abs(0.45 - 0.3) / 0.1)
    assert float(closed[5]) == pytest.approx(exact, rel=1e-10)


def test_flip_probability_errors():
    with pytest.raises(InvalidArgumentError, match="tau"):
        flip_probability(0.1, 1.0, 0.1)
    with pytest.raises(InvalidArgumentError, match="sigma"):
        flip_probability(0.1, 0.2, 0.0)


# ------------------------------------------------------------------------------------------
# private FMR and its floor
# ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fmr_private_matches_simulation_and_is_decreasing(gaussian_impostors):
    S = gaussian_impostors
    sigma = 0.15
    priv = privatise(S, sigma, seed=2)
    taus = torch.tensor([-0.5, 0.0, 0.3, 0.5, 0.7], dtype=torch.float64)
    model = fmr_private(taus, S, sigma)
    emp = torch.stack([(priv > t).double().mean() for t in taus])
    se = torch.sqrt(model * (1 - model) / S.numel())
    assert torch.all((emp - model).abs() <= 5 * se + 1e-5)
    grid = torch.linspace(-0.99, 0.99, 50, dtype=torch.float64)
    vals = fmr_private(grid, S, sigma)
    assert torch.all(vals[1:] < vals[:-1])  # strictly decreasing on (-1, 1)
    assert float(fmr_private(1.0, S, sigma)) == 0.0 and float(fmr_private(-1.5, S, sigma)) == 1.0
    # sigma = 0: the clean empirical FMR
    assert float(fmr_private(0.3, S, 0.0)) == pytest.approx(float((S > 0.3).double().mean()))
    # Gaussian impostors: Pr[S + W > tau] = Q(tau / sqrt(s^2 + sigma^2))
    assert float(fmr_private(0.5, S, sigma)) == pytest.approx(norm.sf(0.5 / math.hypot(0.2, sigma)), rel=0.02)


def test_fmr_floor_is_the_mass_clipped_to_one(gaussian_impostors):
    S = gaussian_impostors
    sigma = 0.4
    L = fmr_floor(S, sigma)
    priv = privatise(S, sigma, seed=3)
    assert float((priv >= 1.0).double().mean()) == pytest.approx(L, rel=0.05)
    assert float(fmr_private(1 - 1e-9, S, sigma)) == pytest.approx(L, rel=1e-6)  # the left limit


# ------------------------------------------------------------------------------------------
# recalibration
# ------------------------------------------------------------------------------------------


def test_recalibrated_threshold_hits_target_and_matches_gaussian_offset(gaussian_impostors):
    S = gaussian_impostors
    s, sigma, alpha = 0.2, 0.1, 1e-2
    priv = privatise(S, sigma, seed=4)
    r = recalibrate_threshold(priv, target_fpr=alpha)
    assert r.attainable and r.resolvable
    assert alpha - 1.5 / S.numel() <= r.achieved_fpr <= alpha  # hits the target to one score
    assert acceptance_rate(priv, r.threshold) == r.achieved_fpr
    # fresh privatised impostors at that threshold: FPR near the target (generalises)
    fresh = privatise(S, sigma, seed=5)
    assert acceptance_rate(fresh, r.threshold) == pytest.approx(alpha, rel=0.1)
    # the offset matches the Gaussian closed form tau0 (sqrt(1 + sigma^2/s^2) - 1)
    tau0 = recalibrate_threshold(S, target_fpr=alpha).threshold
    assert tau0 == pytest.approx(s * norm.isf(alpha), abs=0.005)
    assert r.threshold - tau0 == pytest.approx(gaussian_offset(tau0, sigma, s), abs=0.01)
    # model-based recalibration (root finding on the clean scores) matches it more tightly
    m = recalibration_offset(S, sigma=sigma, target_fpr=alpha)
    assert m.attainable and m.tau_clean == tau0
    assert m.offset == pytest.approx(gaussian_offset(tau0, sigma, s), abs=0.003)
    assert float(fmr_private(m.tau_private, S, sigma)) == pytest.approx(alpha, rel=1e-8)
    assert m.fmr_at_clean_threshold > alpha  # without recalibration the FMR is inflated


def test_gaussian_offset_formula_and_small_noise_limit():
    assert gaussian_offset(2.0, 0.0) == 0.0
    assert gaussian_offset(2.0, 1.0) == pytest.approx(2.0 * (math.sqrt(2.0) - 1.0))
    assert gaussian_offset(0.5, 0.1, s=0.2) == pytest.approx(0.5 * (math.sqrt(1.25) - 1.0))
    small = gaussian_offset(1.5, 1e-3)
    assert small == pytest.approx(1.5 * 1e-6 / 2, rel=1e-5)  # tau0 sigma^2 / 2 + O(sigma^4)


def test_unattainable_target_is_flagged(gaussian_impostors):
    S = gaussian_impostors
    sigma, alpha = 1.0, 1e-3
    priv = privatise(S, sigma, seed=6)
    assert fmr_floor(S, sigma) > alpha
    r = recalibrate_threshold(priv, target_fpr=alpha)
    assert not r.attainable
    assert r.floor == pytest.approx(float((priv >= 1).double().mean()))
    assert r.threshold == 1.0 and r.achieved_fpr == 0.0
    genuine = privatise(torch.full((1000,), 0.9, dtype=torch.float64), sigma, seed=7)
    assert acceptance_rate(genuine, r.threshold) == 0.0  # TAR 0, as the paper's tables print
    m = recalibration_offset(S, sigma=sigma, target_fpr=alpha)
    assert not m.attainable and m.tau_private == 1.0 and m.floor > alpha
    # the same sigma with a target above the floor is attainable
    assert recalibrate_threshold(priv, target_fpr=0.3).attainable


def test_recalibration_resolvability_and_errors():
    x = torch.linspace(-0.9, 0.9, 100, dtype=torch.float64)
    r = recalibrate_threshold(x, target_fpr=1e-3)
    assert not r.resolvable and r.achieved_fpr == 0.0
    assert recalibrate_threshold(x, target_fpr=0.05).achieved_fpr == pytest.approx(0.05)
    r_ge = recalibrate_threshold(x, target_fpr=0.05, strict=False)
    assert acceptance_rate(x, r_ge.threshold, strict=False) == pytest.approx(0.05)
    with pytest.raises(InvalidArgumentError, match="clipped"):
        recalibrate_threshold(torch.tensor([0.0, 1.5], dtype=torch.float64), target_fpr=0.1)
    with pytest.raises(InvalidArgumentError, match="target_fpr"):
        recalibrate_threshold(x, target_fpr=0.0)
    with pytest.raises(ShapeError):
        recalibrate_threshold(x.reshape(10, 10), target_fpr=0.1)


# ------------------------------------------------------------------------------------------
# ROC / AUC / EER
# ------------------------------------------------------------------------------------------


def test_roc_and_auc_match_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score
    from sklearn.metrics import roc_curve as sk_roc

    g = torch.Generator().manual_seed(8)
    gen = torch.round(torch.randn(300, generator=g, dtype=torch.float64) + 1, decimals=1)  # many ties
    imp = torch.round(torch.randn(500, generator=g, dtype=torch.float64), decimals=1)
    r = roc_curve(gen, imp)
    y = np.r_[np.ones(300), np.zeros(500)]
    fpr, tpr, thr = sk_roc(y, np.r_[gen.numpy(), imp.numpy()], drop_intermediate=False)
    assert np.allclose(r.fpr.numpy(), fpr) and np.allclose(r.tpr.numpy(), tpr)
    assert np.allclose(r.thresholds.numpy()[1:], thr[1:])
    assert auc(gen, imp) == pytest.approx(roc_auc_score(y, np.r_[gen.numpy(), imp.numpy()]), abs=1e-12)


def test_eer_on_gaussians_and_hand_example():
    g = torch.Generator().manual_seed(9)
    gen = 2.0 + torch.randn(100_000, generator=g, dtype=torch.float64)
    imp = torch.randn(100_000, generator=g, dtype=torch.float64)
    assert eer(gen, imp) == pytest.approx(norm.sf(1.0), abs=0.004)  # equal-variance: Q(mu/2)
    # separable: EER 0; identical: EER 1/2
    assert eer(torch.tensor([2.0, 3.0]), torch.tensor([0.0, 1.0])) == 0.0
    assert eer(torch.tensor([0.0, 1.0]), torch.tensor([0.0, 1.0])) == pytest.approx(0.5)


def test_auc_shift_is_within_the_roc_bound():
    fam = synthetic_score_families(50_000, seed=1)["gaussian"]
    sigma = 0.1
    L = 1.0 / (0.2 * math.sqrt(2 * math.pi))  # Lipschitz constant of N(., 0.2^2) CDFs (max density)
    eta = roc_shift_bound(L, sigma)
    assert eta == pytest.approx(L * sigma * math.sqrt(2 / math.pi))
    auc_clean = auc(fam.genuine, fam.impostor)
    auc_priv = auc(privatise(fam.genuine, sigma, 10), privatise(fam.impostor, sigma, 11))
    assert 0 < auc_clean - auc_priv <= 2 * eta
    assert abs(eer(fam.genuine, fam.impostor) - eer(privatise(fam.genuine, sigma, 10),
                                                     privatise(fam.impostor, sigma, 11))) <= eta


# ------------------------------------------------------------------------------------------
# bootstrap
# ------------------------------------------------------------------------------------------


def test_identity_bootstrap_is_wider_than_score_bootstrap_with_identity_effects():
    rng = np.random.default_rng(12)
    K, per = 40, 25
    offsets = rng.normal(0, 0.5, K)  # strong per-identity effects: scores are clustered
    g_ids = np.repeat(np.arange(K), per)
    i_ids = np.repeat(np.arange(K), per)
    gen = torch.from_numpy(1.0 + offsets[g_ids] + rng.normal(0, 0.3, K * per))
    imp = torch.from_numpy(offsets[i_ids] + rng.normal(0, 0.3, K * per))
    groups = (torch.from_numpy(g_ids), torch.from_numpy(i_ids))
    ci_id = bootstrap_ci(auc, gen, imp, groups=groups, n_boot=200, seed=0)
    ci_sc = bootstrap_ci(auc, gen, imp, n_boot=200, seed=0)
    assert ci_id.unit == "identity" and ci_sc.unit == "score"
    assert ci_id.low <= ci_id.estimate <= ci_id.high
    assert ci_sc.low <= ci_sc.estimate <= ci_sc.high
    assert (ci_id.high - ci_id.low) > 1.3 * (ci_sc.high - ci_sc.low)
    again = bootstrap_ci(auc, gen, imp, groups=groups, n_boot=200, seed=0)
    assert torch.equal(again.samples, ci_id.samples)  # reproducible from the seed
    with pytest.raises(ShapeError):
        bootstrap_ci(auc, gen, imp, groups=(groups[0][:-1], groups[1]), n_boot=20)
    with pytest.raises(InvalidArgumentError):
        bootstrap_ci(auc, gen, imp, groups=(gen, imp), n_boot=20)


# ------------------------------------------------------------------------------------------
# synthetic families
# ------------------------------------------------------------------------------------------


def test_synthetic_score_families():
    fams = synthetic_score_families(100_000, seed=3)
    assert tuple(fams) == SCORE_FAMILIES
    for f in fams.values():
        assert f.genuine.shape == f.impostor.shape == (100_000,)
        for x in (f.genuine, f.impostor):
            assert x.dtype == torch.float64 and float(x.min()) > -1 and float(x.max()) < 1
        assert auc(f.genuine, f.impostor) > 0.9
    imp = {k: f.impostor for k, f in fams.items()}
    assert float(imp["gaussian"].std()) == pytest.approx(0.20, abs=0.005)
    assert float(imp["beta"].mean()) == pytest.approx(0.0, abs=0.005)
    assert float(imp["beta"].std()) == pytest.approx(2 * math.sqrt(25 / (100 * 11)), abs=0.005)
    assert float(imp["student_t"].std()) == pytest.approx(0.25, abs=0.01)
    assert float(imp["mixture"].mean()) == pytest.approx(0.1 * 0.30, abs=0.005)
    assert float(fams["beta"].genuine.mean()) == pytest.approx(2 * 9 / 11 - 1, abs=0.005)
    again = synthetic_score_families(1000, seed=3)
    other = synthetic_score_families(1000, seed=4)
    assert torch.equal(again["mixture"].impostor, synthetic_score_families(1000, seed=3)["mixture"].impostor)
    assert not torch.equal(again["gaussian"].genuine, other["gaussian"].genuine)
