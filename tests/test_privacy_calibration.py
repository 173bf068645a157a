"""Gaussian/Laplace calibration against published values, an independent high-precision
reference (mpmath), and monotonicity properties; plus PrivacyGuarantee."""

from __future__ import annotations

import math

import mpmath
import pytest
from dp_accounting import GaussianDpEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from privkit.errors import InvalidArgumentError, PrivkitError, UnknownNameError
from privkit.privacy import (
    Neighbouring,
    PrivacyGuarantee,
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
    gaussian_sigma,
    laplace_scale,
    scoreshield_constant,
)

mpmath.mp.dps = 50


def mp_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> mpmath.mpf:
    """Balle & Wang's delta_AG in 50-digit arithmetic (independent of privkit's log-space code)."""
    e, s, d = mpmath.mpf(epsilon), mpmath.mpf(sigma), mpmath.mpf(sensitivity)
    return mpmath.ncdf(d / (2 * s) - e * s / d) - mpmath.exp(e) * mpmath.ncdf(-d / (2 * s) - e * s / d)


# ---------------------------------------------------------------- published values (docs/scoreshield.md §5)
# ScoreShield, Delta = 2, delta = 1e-4: the paper's sigma and the analytic sigma* actually needed.
SCORESHIELD_TABLE = [(20, 0.445, 0.539), (35, 0.254, 0.362), (70, 0.127, 0.229), (100, 0.089, 0.182)]


@pytest.mark.parametrize("epsilon,paper_sigma,needed_sigma", SCORESHIELD_TABLE)
def test_scoreshield_table(epsilon, paper_sigma, needed_sigma):
    assert gaussian_sigma(epsilon, 1e-4, sensitivity=2.0, method="scoreshield") == pytest.approx(paper_sigma, abs=5e-4)
    assert gaussian_sigma(epsilon, 1e-4, sensitivity=2.0, method="analytic") == pytest.approx(needed_sigma, abs=5e-4)


def test_true_delta_at_the_papers_sigma():
    true = {e: analytic_gaussian_delta(e, gaussian_sigma(e, 1e-4, sensitivity=2.0, method="scoreshield"),
                                       sensitivity=2.0) for e in (20, 35, 70, 100)}
    assert true[20] == pytest.approx(8.6e-3, rel=0.01)
    assert true[35] == pytest.approx(0.26, abs=0.005)
    assert true[70] > 0.99 and true[100] > 0.99
    # the stated delta is not met at any of the paper's epsilons
    assert all(v > 1e-4 * 80 for v in true.values())


def test_sufficient_vs_analytic_examples_reproduce_with_sensitivity_two():
    # "eps = 1, delta = 1e-5: sufficient 9.88 vs analytic 7.46; eps = 10: 0.988 vs 0.9998" holds for Delta = 2
    # (Delta = 1 would give 4.94 / 3.73).
    assert gaussian_sigma(1, 1e-5, sensitivity=2, method="scoreshield") == pytest.approx(9.88, abs=5e-3)
    assert gaussian_sigma(1, 1e-5, sensitivity=2) == pytest.approx(7.46, abs=5e-3)
    assert gaussian_sigma(10, 1e-5, sensitivity=2, method="scoreshield") == pytest.approx(0.988, abs=5e-4)
    assert gaussian_sigma(10, 1e-5, sensitivity=2) == pytest.approx(0.9998, abs=5e-4)
    assert gaussian_sigma(1, 1e-5, sensitivity=1, method="scoreshield") == pytest.approx(4.94, abs=5e-3)


def test_scoreshield_constant_and_rule():
    c = scoreshield_constant(2.0, 1e-6)
    assert c == pytest.approx(2 * math.log(2e6) / 4, rel=1e-14)
    assert gaussian_sigma(2.0, 1e-6, sensitivity=3.0, method="scoreshield") == pytest.approx(3.0 * math.sqrt(c), rel=1e-14)


def test_classic_formula_and_refusal_above_one():
    assert gaussian_sigma(0.5, 1e-5, sensitivity=2.0, method="classic") == pytest.approx(
        2.0 * math.sqrt(2 * math.log(1.25e5)) / 0.5, rel=1e-14)
    for eps in (1.0, 3.0):
        with pytest.raises(InvalidArgumentError, match="analytic"):
            gaussian_sigma(eps, 1e-5, method="classic")


def test_scoreshield_rule_is_allowed_but_documented_invalid_above_one():
    assert gaussian_sigma(50.0, 1e-4, method="scoreshield") > 0
    doc = gaussian_sigma.__doc__
    assert "valid (epsilon, delta) calibration only for" in " ".join(doc.split())


def test_laplace_scale():
    assert laplace_scale(0.5, sensitivity=2.0) == 4.0
    assert laplace_scale(2.0) == 0.5
    with pytest.raises(InvalidArgumentError, match="epsilon"):
        laplace_scale(0.0)


# ---------------------------------------------------------------- analytic mechanism: exactness
EXTREMES = [(1e-3, 0.1), (1e-3, 1e-12), (0.1, 1e-5), (1.0, 1e-5), (1.0, 1e-30), (10.0, 1e-5),
            (100.0, 1e-4), (1000.0, 1e-12), (1e5, 1e-8)]


@pytest.mark.parametrize("epsilon,delta", EXTREMES)
def test_analytic_sigma_is_valid_and_minimal_to_1e10(epsilon, delta):
    sigma = gaussian_sigma(epsilon, delta, sensitivity=1.5)
    # valid: the exact delta at sigma does not exceed the target (float rounding slack only)
    assert mp_delta(epsilon, sigma, 1.5) <= delta * (1 + 1e-9)
    # minimal to relative 1e-10: slightly less noise already breaks the target
    assert mp_delta(epsilon, sigma * (1 - 1e-10), 1.5) > delta


@pytest.mark.parametrize("epsilon,delta", EXTREMES)
def test_analytic_delta_matches_mpmath(epsilon, delta):
    sigma = gaussian_sigma(epsilon, delta) * 1.01
    got = analytic_gaussian_delta(epsilon, sigma)
    ref = float(mp_delta(epsilon, sigma))
    assert got == pytest.approx(ref, rel=1e-9)


def test_analytic_delta_edge_values():
    rho = 0.7
    assert analytic_gaussian_delta(0.0, 1 / rho) == pytest.approx(2 * float(mpmath.ncdf(rho / 2)) - 1, rel=1e-12)
    assert analytic_gaussian_delta(200.0, 1.0) == 0.0 or analytic_gaussian_delta(200.0, 1.0) < 1e-300
    assert analytic_gaussian_delta(1.0, 1e-6) == pytest.approx(1.0, abs=1e-12)


def test_analytic_epsilon_inverse_and_zero():
    for eps, dlt in [(0.3, 1e-6), (1.0, 1e-5), (20.0, 1e-4), (300.0, 1e-10)]:
        sigma = gaussian_sigma(eps, dlt, sensitivity=2.0)
        assert analytic_gaussian_epsilon(sigma, dlt, sensitivity=2.0) == pytest.approx(eps, rel=1e-9)
    # ScoreShield at eps = 20: the paper's sigma buys epsilon ~ 2x larger at the stated delta
    sigma_paper = gaussian_sigma(20, 1e-4, sensitivity=2.0, method="scoreshield")
    true_eps = analytic_gaussian_epsilon(sigma_paper, 1e-4, sensitivity=2.0)
    assert true_eps > 20 and analytic_gaussian_delta(true_eps, sigma_paper, sensitivity=2.0) <= 1e-4 * (1 + 1e-9)
    # noise so large that epsilon = 0 already holds (total variation <= delta)
    assert analytic_gaussian_epsilon(1e7, 1e-5) == 0.0


# ---------------------------------------------------------------- properties
eps_st = st.floats(min_value=1e-3, max_value=500.0)
delta_st = st.floats(min_value=1e-15, max_value=0.5)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(eps=eps_st, dlt=delta_st, factor=st.floats(min_value=1.01, max_value=10.0))
def test_sigma_decreases_in_epsilon_and_delta(eps, dlt, factor):
    s = gaussian_sigma(eps, dlt)
    assert gaussian_sigma(eps * factor, dlt) < s
    assert gaussian_sigma(eps, min(0.9, dlt * factor)) < s
    for method in ("scoreshield",):
        assert gaussian_sigma(eps * factor, dlt, method=method) < gaussian_sigma(eps, dlt, method=method)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(eps=eps_st, dlt=delta_st, sens=st.floats(min_value=1e-3, max_value=1e3))
def test_sigma_is_linear_in_sensitivity(eps, dlt, sens):
    assert gaussian_sigma(eps, dlt, sensitivity=sens) == pytest.approx(sens * gaussian_sigma(eps, dlt), rel=1e-9)
    assert gaussian_sigma(eps, dlt, sensitivity=sens, method="scoreshield") == pytest.approx(
        sens * gaussian_sigma(eps, dlt, method="scoreshield"), rel=1e-12)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(eps=st.floats(min_value=1e-3, max_value=0.999), dlt=st.floats(min_value=1e-15, max_value=0.5))
def test_analytic_never_exceeds_classic_below_one(eps, dlt):
    assert gaussian_sigma(eps, dlt) <= gaussian_sigma(eps, dlt, method="classic")


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(eps=eps_st, dlt=delta_st)
def test_analytic_round_trips(eps, dlt):
    sigma = gaussian_sigma(eps, dlt)
    assert analytic_gaussian_delta(eps, sigma) <= dlt * (1 + 1e-9)
    assert analytic_gaussian_epsilon(sigma, dlt) == pytest.approx(eps, rel=1e-8)


# ---------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("kwargs,argname", [
    (dict(epsilon=0.0, delta=1e-5), "epsilon"),
    (dict(epsilon=-1.0, delta=1e-5), "epsilon"),
    (dict(epsilon=math.nan, delta=1e-5), "epsilon"),
    (dict(epsilon=math.inf, delta=1e-5), "epsilon"),
    (dict(epsilon=1.0, delta=0.0), "delta"),
    (dict(epsilon=1.0, delta=1.0), "delta"),
    (dict(epsilon=1.0, delta=1e-5, sensitivity=0.0), "sensitivity"),
    (dict(epsilon="1", delta=1e-5), "epsilon"),
    (dict(epsilon=True, delta=1e-5), "epsilon"),
])
def test_gaussian_sigma_rejects_bad_input(kwargs, argname):
    eps = kwargs.pop("epsilon")
    dlt = kwargs.pop("delta")
    with pytest.raises(InvalidArgumentError, match=argname):
        gaussian_sigma(eps, dlt, **kwargs)


def test_unknown_method_lists_valid_names():
    with pytest.raises(UnknownNameError, match="analytic, classic, scoreshield"):
        gaussian_sigma(1.0, 1e-5, method="dwork")


def test_other_functions_reject_bad_input():
    with pytest.raises(InvalidArgumentError, match="sigma"):
        analytic_gaussian_delta(1.0, 0.0)
    with pytest.raises(InvalidArgumentError, match="epsilon"):
        analytic_gaussian_delta(-0.5, 1.0)
    with pytest.raises(InvalidArgumentError, match="delta"):
        analytic_gaussian_epsilon(1.0, 0.0)
    with pytest.raises(InvalidArgumentError, match="delta"):
        scoreshield_constant(1.0, 2.0)
    assert issubclass(InvalidArgumentError, ValueError)


# ---------------------------------------------------------------- PrivacyGuarantee
def _g(**kw) -> PrivacyGuarantee:
    base = dict(epsilon=1.0, delta=1e-5,
                neighbours=Neighbouring(relation="replace-one", unit="one face embedding", bound=2.0, norm="l2"),
                protects="one face embedding", event=GaussianDpEvent(3.0))
    base.update(kw)
    return PrivacyGuarantee(**base)


def test_guarantee_string_and_dict():
    g = _g(requested_epsilon=1.0, requested_delta=1e-5)
    assert g.neighbours.relation == "replace-one" and g.neighbours.scale == 1.0
    assert isinstance(g.event, GaussianDpEvent) and g.event.noise_multiplier == 3.0
    s = str(g)
    # the rendered prose still states ε, δ, the mechanism, the relation and what is protected
    assert s.startswith("(ε=1.00, δ=1e-05)-DP [Gaussian mechanism (noise multiplier 3, σ = 3)] neighbouring: "
                        "replace-one (substitution): one face embedding replaced by another (ℓ2 sensitivity 2); "
                        "protects: one face embedding")
    assert "WARNING" not in s and g.meets_request
    d = g.to_dict()
    assert d["epsilon"] == 1.0 and d["delta"] == 1e-5 and d["meets_request"] is True and d["notes"] == []
    assert d["neighbours"] == {"relation": "replace-one", "unit": "one face embedding", "bound": 2.0, "norm": "l2",
                               "detail": ""}
    assert d["event"] == {"type": "GaussianDpEvent", "noise_multiplier": 3.0}
    assert d["neighbouring"] == g.neighbouring and d["mechanism"] == g.mechanism
    assert "replace-one" in g._repr_markdown_() and "Gaussian mechanism" in g._repr_html_()


def test_guarantee_warns_when_request_not_met():
    # ScoreShield at eps = 20: request (20, 1e-4), but the delta that holds at eps = 20 is ~8.6e-3.
    sigma = gaussian_sigma(20, 1e-4, sensitivity=2.0, method="scoreshield")
    true_delta = analytic_gaussian_delta(20, sigma, sensitivity=2.0)
    g = _g(epsilon=20.0, delta=true_delta, requested_epsilon=20.0, requested_delta=1e-4,
           notes=("ScoreShield calibration",))
    assert not g.meets_request
    s = str(g)
    assert "WARNING" in s and "NOT met" in s and "note: ScoreShield calibration" in s
    assert "NOT met" in g._repr_markdown_()


def test_guarantee_meets_request_tolerance_and_partial_requests():
    assert _g(epsilon=1.0 * (1 + 1e-12), requested_epsilon=1.0).meets_request
    assert not _g(epsilon=1.0001, requested_epsilon=1.0).meets_request
    assert _g(delta=1e-6, requested_delta=1e-5).meets_request
    assert not _g(delta=1e-4, requested_delta=1e-5).meets_request
    assert _g().meets_request  # nothing requested


def test_guarantee_infinite_epsilon_means_no_guarantee():
    g = _g(epsilon=math.inf, delta=1.0)
    assert not g.is_meaningful
    assert "NO meaningful privacy guarantee" in str(g) and "ε=∞" in str(g)


def test_guarantee_is_frozen_and_normalises_notes():
    g = _g(notes=["a", "b"], processing=["c"])
    assert g.notes == ("a", "b") and g.processing == ("c",)
    with pytest.raises(AttributeError):
        g.epsilon = 2.0  # type: ignore[misc]


@pytest.mark.parametrize("kw,argname", [
    (dict(epsilon=0.0), "epsilon"), (dict(epsilon=-1.0), "epsilon"), (dict(epsilon=math.nan), "epsilon"),
    (dict(delta=-0.1), "delta"), (dict(delta=1.5), "delta"), (dict(neighbours="record replacement"), "neighbours"),
    (dict(protects=3), "protects"), (dict(protects=""), "protects"), (dict(requested_epsilon=0.0), "requested_epsilon"),
    (dict(requested_delta=1.0), "requested_delta"), (dict(notes=(1,)), "notes"), (dict(processing=(1,)), "processing"),
    (dict(event="Gaussian mechanism"), "event"), (dict(accountant="moments"), "accountant"),
])
def test_guarantee_validation(kw, argname):
    with pytest.raises(PrivkitError, match=argname):
        _g(**kw)
