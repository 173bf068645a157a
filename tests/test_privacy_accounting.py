"""DP-SGD accounting through opacus: regression values, round trips, heterogeneous histories,
and agreement with the analytic Gaussian mechanism for a single full-batch step."""

from __future__ import annotations

import pytest

from privkit.errors import InvalidArgumentError, PrivacyBudgetError, UnknownNameError
from privkit.privacy import (
    analytic_gaussian_epsilon,
    epsilon_from_history,
    epsilon_spent,
    noise_multiplier_for,
)


def test_opacus_rdp_regression_value():
    eps = epsilon_spent(noise_multiplier=1.5, sample_rate=0.04, steps=2250, delta=1e-5, accountant="rdp")
    assert eps == pytest.approx(7.32911117143, rel=1e-6)


def test_rdp_and_prv_reference_values():
    kw = dict(noise_multiplier=1.0, sample_rate=0.01, steps=1000, delta=1e-5)
    assert epsilon_spent(**kw, accountant="rdp") == pytest.approx(2.101, abs=2e-3)
    assert epsilon_spent(**kw, accountant="prv") == pytest.approx(1.838, abs=2e-3)


def test_rdp_round_trip():
    sigma = noise_multiplier_for(target_epsilon=2.0, delta=1e-5, sample_rate=0.01, steps=1000)
    eps = epsilon_spent(noise_multiplier=sigma, sample_rate=0.01, steps=1000, delta=1e-5)
    assert 2.0 - 0.01 <= eps <= 2.0
    # a little less noise overshoots the target: the value is (close to) minimal
    assert epsilon_spent(noise_multiplier=sigma * 0.98, sample_rate=0.01, steps=1000, delta=1e-5) > 2.0


@pytest.mark.slow
def test_prv_round_trip():
    kw = dict(delta=1e-5, sample_rate=0.05, steps=100)
    sigma = noise_multiplier_for(target_epsilon=3.0, accountant="prv", epsilon_tolerance=0.05, **kw)
    eps = epsilon_spent(noise_multiplier=sigma, accountant="prv", **kw)
    assert 3.0 - 0.05 <= eps <= 3.0


def test_round_trip_for_a_loose_target_brackets_from_below():
    sigma = noise_multiplier_for(target_epsilon=8.0, delta=1e-5, sample_rate=1.0, steps=1)
    assert sigma < 1.0
    eps = epsilon_spent(noise_multiplier=sigma, sample_rate=1.0, steps=1, delta=1e-5)
    assert 8.0 - 0.01 <= eps <= 8.0


def test_unreachable_target_raises_budget_error():
    with pytest.raises(PrivacyBudgetError, match="max_noise_multiplier"):
        noise_multiplier_for(target_epsilon=1e-3, delta=1e-5, sample_rate=1.0, steps=10_000,
                             max_noise_multiplier=100.0)


def test_heterogeneous_history():
    delta = 1e-5
    whole = epsilon_spent(noise_multiplier=1.5, sample_rate=0.04, steps=2250, delta=delta)
    split = epsilon_from_history([(1.5, 0.04, 1000), (1.5, 0.04, 1250)], delta=delta)
    assert split == pytest.approx(whole, rel=1e-12)
    # a phase with more noise sits between the two homogeneous runs
    mixed = epsilon_from_history([(1.5, 0.04, 1000), (3.0, 0.04, 1250)], delta=delta)
    low = epsilon_spent(noise_multiplier=3.0, sample_rate=0.04, steps=2250, delta=delta)
    assert low < mixed < whole
    # zero-step phases are ignored; an empty history spends nothing
    assert epsilon_from_history([(1.5, 0.04, 2250), (0.5, 0.5, 0)], delta=delta) == pytest.approx(whole, rel=1e-12)
    assert epsilon_from_history([], delta=delta) == 0.0
    assert epsilon_spent(noise_multiplier=1.0, sample_rate=0.1, steps=0, delta=delta) == 0.0


@pytest.mark.slow
def test_heterogeneous_history_prv():
    delta = 1e-5
    mixed = epsilon_from_history([(1.0, 0.01, 500), (2.0, 0.02, 300)], delta=delta, accountant="prv")
    first = epsilon_spent(noise_multiplier=1.0, sample_rate=0.01, steps=500, delta=delta, accountant="prv")
    assert mixed > first
    rdp = epsilon_from_history([(1.0, 0.01, 500), (2.0, 0.02, 300)], delta=delta, accountant="rdp")
    assert mixed < rdp  # PRV is tighter than RDP


def test_epsilon_grows_with_steps_and_sampling_rate():
    base = dict(noise_multiplier=1.2, delta=1e-6)
    e1 = epsilon_spent(sample_rate=0.01, steps=100, **base)
    e2 = epsilon_spent(sample_rate=0.01, steps=400, **base)
    e3 = epsilon_spent(sample_rate=0.04, steps=400, **base)
    assert e1 < e2 < e3


def test_prv_single_full_batch_step_matches_analytic_gaussian():
    # One step with sample_rate = 1 is the plain Gaussian mechanism with sigma = noise_multiplier
    # (sensitivity 1); PRV returns an upper bound within its eps_error (0.01) of the exact value.
    exact = analytic_gaussian_epsilon(2.0, 1e-5)
    prv = epsilon_spent(noise_multiplier=2.0, sample_rate=1.0, steps=1, delta=1e-5, accountant="prv")
    assert exact - 1e-6 <= prv <= exact + 0.02


@pytest.mark.parametrize("kw,err,argname", [
    (dict(noise_multiplier=0.0), InvalidArgumentError, "noise_multiplier"),
    (dict(sample_rate=0.0), InvalidArgumentError, "sample_rate"),
    (dict(sample_rate=1.5), InvalidArgumentError, "sample_rate"),
    (dict(steps=-1), InvalidArgumentError, "steps"),
    (dict(steps=2.5), InvalidArgumentError, "steps"),
    (dict(delta=0.0), InvalidArgumentError, "delta"),
    (dict(accountant="gdp"), UnknownNameError, "accountant"),
])
def test_epsilon_spent_rejects_bad_input(kw, err, argname):
    args = dict(noise_multiplier=1.0, sample_rate=0.01, steps=10, delta=1e-5)
    args.update(kw)
    with pytest.raises(err, match=argname):
        epsilon_spent(**args)


@pytest.mark.parametrize("kw,argname", [
    (dict(target_epsilon=0.0), "target_epsilon"),
    (dict(steps=0), "steps"),
    (dict(sample_rate=2.0), "sample_rate"),
    (dict(epsilon_tolerance=0.0), "epsilon_tolerance"),
    (dict(max_noise_multiplier=-1.0), "max_noise_multiplier"),
])
def test_noise_multiplier_for_rejects_bad_input(kw, argname):
    args = dict(target_epsilon=1.0, delta=1e-5, sample_rate=0.01, steps=100)
    args.update(kw)
    with pytest.raises(InvalidArgumentError, match=argname):
        noise_multiplier_for(**args)


def test_history_validation_names_the_entry():
    with pytest.raises(InvalidArgumentError, match=r"history\[1\]"):
        epsilon_from_history([(1.0, 0.01, 10), (1.0, 0.01)], delta=1e-5)
    with pytest.raises(InvalidArgumentError, match=r"history\[0\]\.sample_rate"):
        epsilon_from_history([(1.0, 1.01, 10)], delta=1e-5)
    with pytest.raises(InvalidArgumentError, match="history"):
        epsilon_from_history("abc", delta=1e-5)
