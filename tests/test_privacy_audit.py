"""The black-box auditor: correctly calibrated mechanisms pass, under-noised ones are caught,
the bound is valid (a data-independent mechanism audits at 0), and the contract is enforced."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import bdtr

from privkit.errors import InvalidArgumentError, PrivkitError, ShapeError, UnknownNameError
from privkit.privacy import (
    AuditResult,
    audit,
    batch_mechanism,
    epsilon_lower_bound,
    gaussian_sigma,
    laplace_scale,
    poisson_subset,
    sample_gaussian,
    sample_laplace,
)
from privkit.metrics import clopper_pearson_upper
from privkit.privacy.accounting import epsilon_spent

F64 = torch.float64
ZERO, ONE = torch.tensor(0.0, dtype=F64), torch.tensor(1.0, dtype=F64)
EPS, DELTA = 1.0, 1e-5


def gaussian_mechanism(sigma: float):
    def mechanism(data, n, generator):
        return data + sample_gaussian((n, *data.shape), sigma=sigma, generator=generator, dtype=F64)
    return mechanism


def laplace_mechanism(scale: float):
    def mechanism(data, n, generator):
        return data + sample_laplace((n, *data.shape), scale=scale, generator=generator, dtype=F64)
    return mechanism


# ---------------------------------------------------------------- scalar mechanisms
def test_calibrated_gaussian_passes():
    sigma = gaussian_sigma(EPS, DELTA)  # Delta = 1
    # confidence 0.999 keeps this pass robust to any change of the random stream
    r = audit(gaussian_mechanism(sigma), ZERO, ONE, n_samples=1_000_000, delta=DELTA, claimed_epsilon=EPS, seed=0,
              confidence=0.999)
    assert r.passed is True and r.epsilon_lower <= EPS
    assert r.epsilon_lower > 0.4  # the audit has power: it finds most of the true epsilon


def test_gaussian_with_half_the_noise_is_caught():
    sigma = gaussian_sigma(EPS, DELTA) / 2  # true epsilon at delta = 1e-5 is 2.15
    r = audit(gaussian_mechanism(sigma), ZERO, ONE, n_samples=1_000_000, delta=DELTA, claimed_epsilon=EPS, seed=0)
    assert r.passed is False and r.epsilon_lower > 1.3
    assert "FAILED" in str(r)


def test_calibrated_laplace_passes_and_is_nearly_tight():
    r = audit(laplace_mechanism(laplace_scale(1.0)), ZERO, ONE, n_samples=400_000, claimed_epsilon=1.0, seed=0,
              confidence=0.999)
    assert r.passed is True and 0.9 < r.epsilon_lower <= 1.0
    assert "PASSED" in str(r)


def test_laplace_with_half_the_scale_is_caught():
    r = audit(laplace_mechanism(laplace_scale(1.0) / 2), ZERO, ONE, n_samples=400_000, claimed_epsilon=1.0, seed=0)
    assert r.passed is False and 1.8 < r.epsilon_lower <= 2.0  # true epsilon is 2


def poisson_step(q_used: float, sigma: float):
    """One DP-SGD step on the record that may be added: its clipped gradient (1 = the clip norm, on a direction the
    released sum is projected on; the other records' gradients cancel) enters the batch when DP-SGD's sampler
    (:func:`privkit.privacy.poisson_subset`, one draw per output) picks it, then Gaussian noise sigma * C."""

    def mechanism(present, n, generator):
        picked = torch.zeros(n, dtype=F64)
        picked[poisson_subset(n, q_used, generator=generator)] = 1.0
        return (float(present) * picked + sigma * torch.randn(n, generator=generator, dtype=F64)).unsqueeze(1)
    return mechanism


@pytest.mark.parametrize("accountant", [pytest.param("prv", marks=pytest.mark.slow), "pld", "rdp"])
def test_poisson_sampled_step_audits_below_the_accountants_claim_and_oversampling_is_caught(accountant):
    """The subsampled Gaussian as DP-SGD runs it (privkit's sampler, one step, add/remove of one record) stays
    below each accountant's epsilon; a sampler that picks the record more often than the accounted q (here always,
    as a fixed batch that contains it would) is caught."""
    q, sigma, delta = 0.2, 1.0, 1e-3
    claim = epsilon_spent(noise_multiplier=sigma, sample_rate=q, steps=1, delta=delta, accountant=accountant)
    ok = audit(poisson_step(q, sigma), ONE, ZERO, n_samples=1_000_000, delta=delta, claimed_epsilon=claim, seed=0)
    assert ok.passed, str(ok)
    assert ok.epsilon_lower > 0.5 * claim  # the audit has power (0.90 of PRV's claim at seed 0; RDP's is looser)
    bad = audit(poisson_step(1.0, sigma), ONE, ZERO, n_samples=1_000_000, delta=delta, claimed_epsilon=claim, seed=0)
    assert bad.passed is False and bad.epsilon_lower > claim


def randomized_response(epsilon: float):
    keep = float(np.exp(epsilon) / (1 + np.exp(epsilon)))

    def mechanism(data, n, generator):
        flip = torch.rand(n, generator=generator, dtype=F64) >= keep
        return torch.where(flip, 1 - data, data)
    return mechanism


def test_discrete_outputs_randomized_response():
    ok = audit(randomized_response(1.0), ZERO, ONE, n_samples=200_000, claimed_epsilon=1.0, seed=0, confidence=0.999)
    assert ok.passed is True and ok.epsilon_lower > 0.9
    bad = audit(randomized_response(2.0), ZERO, ONE, n_samples=200_000, claimed_epsilon=1.0, seed=0)
    assert bad.passed is False


@pytest.mark.parametrize("statistic", ["mean_difference", "whitened"])
def test_noise_free_mechanism_reaches_the_largest_certifiable_bound(statistic):
    # zero errors on 500 held-out draws: FPR and FNR are both bounded by u = 1 - alpha^(1/500)
    def mechanism(data, n, generator):
        return data.expand(n, *data.shape).clone()
    r = audit(mechanism, torch.zeros(3, dtype=F64), torch.ones(3, dtype=F64), n_samples=1000, statistic=statistic)
    u = 1 - 0.025 ** (1 / 500)
    assert r.fpr == 0 and r.fnr == 0
    assert r.epsilon_lower == pytest.approx(np.log((1 - u) / u), rel=1e-9)


# ---------------------------------------------------------------- vector mechanisms
D0 = torch.zeros(16, dtype=F64)
D1 = D0.clone()
D1[3] = 1.0  # one coordinate differs: L2 sensitivity 1


@pytest.mark.slow
def test_vector_gaussian_calibrated_passes_and_half_noise_is_caught():
    sigma = gaussian_sigma(EPS, DELTA)
    ok = audit(gaussian_mechanism(sigma), D0, D1, n_samples=200_000, delta=DELTA, claimed_epsilon=EPS, seed=1,
               confidence=0.999)
    assert ok.statistic == "mean_difference" and ok.passed is True
    bad = audit(gaussian_mechanism(sigma / 2), D0, D1, n_samples=200_000, delta=DELTA, claimed_epsilon=EPS, seed=1)
    assert bad.passed is False and bad.epsilon_lower > 1.1


def test_matrix_outputs_and_redraw_path_agree():
    # (n, 4, 4) outputs; the redraw path (nothing cached) must reproduce the cached path exactly
    d0 = torch.zeros(4, 4, dtype=F64)
    d1 = d0.clone()
    d1[1, 2] = 1.0
    mech = gaussian_mechanism(0.5)
    a = audit(mech, d0, d1, n_samples=10_000, delta=DELTA, seed=3)
    b = audit(mech, d0, d1, n_samples=10_000, delta=DELTA, seed=3, max_cached_bytes=0, batch_size=999)
    c = audit(mech, d0, d1, n_samples=10_000, delta=DELTA, seed=3, batch_size=999)
    assert b == c
    assert a.epsilon_lower > 1.0 and abs(a.epsilon_lower - b.epsilon_lower) < 0.5


def test_whitening_exploits_correlated_noise():
    # output (x + z, z): the noise cancels in the difference, which only a whitened statistic finds
    def mechanism(data, n, generator):
        z = sample_gaussian((n,), sigma=3.0, generator=generator, dtype=F64)
        e = sample_gaussian((n,), sigma=0.3, generator=generator, dtype=F64)
        return torch.stack([data + z + e, z], dim=1)
    plain = audit(mechanism, ZERO, ONE, n_samples=20_000, delta=DELTA, statistic="mean_difference", seed=0)
    white = audit(mechanism, ZERO, ONE, n_samples=20_000, delta=DELTA, statistic="whitened", seed=0)
    assert white.epsilon_lower > plain.epsilon_lower + 1.0


def test_callable_statistic():
    sigma = gaussian_sigma(EPS, DELTA) / 2
    r = audit(gaussian_mechanism(sigma), D0, D1, n_samples=100_000, delta=DELTA, claimed_epsilon=EPS,
              statistic=lambda x: x[:, 3], seed=0)
    assert r.passed is False
    with pytest.raises(ShapeError, match="statistic"):
        audit(gaussian_mechanism(1.0), D0, D1, n_samples=100, statistic=lambda x: x)


# ---------------------------------------------------------------- validity
@pytest.mark.slow
def test_data_independent_mechanism_audits_at_zero():
    # A mechanism that ignores its input is 0-DP: a valid 95% lower bound is 0 in >= 95% of runs.
    def mechanism(data, n, generator):
        return sample_gaussian((n,), sigma=1.0, generator=generator, dtype=F64)
    positives = sum(audit(mechanism, ZERO, ONE, n_samples=4000, seed=s).epsilon_lower > 0 for s in range(40))
    assert positives <= 4


def test_seeded_audits_are_reproducible():
    mech = laplace_mechanism(1.0)
    assert audit(mech, ZERO, ONE, n_samples=5000, seed=4) == audit(mech, ZERO, ONE, n_samples=5000, seed=4)


def test_batch_mechanism_wraps_single_output_functions():
    def single(data, generator):
        return data + torch.randn((), generator=generator, dtype=F64)
    r = audit(batch_mechanism(single), ZERO, torch.tensor(20.0, dtype=F64), n_samples=200, seed=0)
    assert r.epsilon_lower > 1.0  # far-apart inputs with unit noise are trivially distinguished


# ---------------------------------------------------------------- confidence bounds
def test_clopper_pearson_upper_bound_definition():
    # p_u solves P[Binomial(n, p_u) <= k] = alpha (checked through the binomial CDF), and is 1 at k = n
    n, alpha = 500, 0.025
    k = np.array([0, 1, 7, 250, 499])
    upper = clopper_pearson_upper(k, n, alpha)
    np.testing.assert_allclose(bdtr(k, n, upper), alpha, rtol=1e-8)
    assert np.all(np.diff(upper) > 0) and clopper_pearson_upper(n, n, alpha) == 1.0
    assert clopper_pearson_upper(0, n, alpha) == pytest.approx(1 - alpha ** (1 / n), rel=1e-12)


def test_epsilon_lower_bound_formula():
    assert epsilon_lower_bound(0.01, 0.5, 0.0) == pytest.approx(np.log(50))
    assert epsilon_lower_bound(0.5, 0.01, 0.1) == pytest.approx(np.log(0.4 / 0.01))
    assert epsilon_lower_bound(0.6, 0.6, 0.0) == 0.0


# ---------------------------------------------------------------- result object and contract
def test_result_without_claim_and_to_dict():
    r = audit(laplace_mechanism(1.0), ZERO, ONE, n_samples=2000, seed=0)
    assert isinstance(r, AuditResult) and r.passed is None and r.claimed_epsilon is None
    d = r.to_dict()
    assert d["passed"] is None and d["n_samples"] == 2000 and d["n_heldout"] == 1000
    assert 0.0 <= r.fpr <= 1.0 and 0.0 <= r.fnr <= 1.0 and r.fpr <= r.fpr_upper and r.fnr <= r.fnr_upper
    assert "ε ≥" in str(r) and "PASSED" not in str(r)
    with pytest.raises(AttributeError):
        r.epsilon_lower = 0.0  # type: ignore[misc]


@pytest.mark.parametrize("mechanism,err,match", [
    (lambda data, n, g: data + torch.zeros(n + 1, dtype=F64), ShapeError, "first dimension"),
    (lambda data, n, g: [0.0] * n, InvalidArgumentError, "torch.Tensor"),
    (lambda data, n, g: torch.full((n,), float("nan"), dtype=F64), InvalidArgumentError, "NaN"),
    (lambda data, n, g: torch.zeros((n, 2 if n == 1 else 3), dtype=F64), ShapeError, "changed"),
])
def test_mechanism_contract_violations(mechanism, err, match):
    with pytest.raises(err, match=match):
        audit(mechanism, ZERO, ONE, n_samples=100)


@pytest.mark.parametrize("kw,err,argname", [
    (dict(n_samples=10), InvalidArgumentError, "n_samples"),
    (dict(confidence=1.0), InvalidArgumentError, "confidence"),
    (dict(delta=1.0), InvalidArgumentError, "delta"),
    (dict(claimed_epsilon=0.0), InvalidArgumentError, "claimed_epsilon"),
    (dict(statistic="logistic"), UnknownNameError, "statistic"),
    (dict(statistic="identity"), InvalidArgumentError, "identity"),
    (dict(batch_size=0), InvalidArgumentError, "batch_size"),
    (dict(seed=-1), InvalidArgumentError, "seed"),
])
def test_bad_arguments(kw, err, argname):
    args = dict(n_samples=100)
    args.update(kw)
    with pytest.raises(err, match=argname):
        audit(gaussian_mechanism(1.0), D0, D1, **args)
    assert issubclass(err, PrivkitError)
