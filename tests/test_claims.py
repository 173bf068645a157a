"""privkit.studies.claims: the verdicts of every notebook's claims table and the intervals behind them."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privkit.studies import claims as C
from privkit.errors import InvalidArgumentError, PrivkitError, UnknownNameError

NAN = float("nan")


# ------------------------------------------------------------------------------------------------ judge_claim
@pytest.mark.parametrize("kind,low,high,expected", [
    # above: holds only when the whole interval is above the threshold, fails when it is at or below it
    ("above", 1.01, 1.5, "holds"), ("above", 1.0, 1.5, "not resolvable"), ("above", 0.9, 1.1, "not resolvable"),
    ("above", 0.5, 1.0, "does not hold"), ("above", 0.5, 0.99, "does not hold"),
    # below
    ("below", 0.5, 0.99, "holds"), ("below", 0.5, 1.0, "not resolvable"), ("below", 0.9, 1.1, "not resolvable"),
    ("below", 1.0, 1.5, "does not hold"),
    # at_least: the boundary itself counts for the claim
    ("at_least", 1.0, 1.5, "holds"), ("at_least", 0.99, 1.5, "not resolvable"), ("at_least", 0.5, 0.99, "does not hold"),
    ("at_least", 0.5, 1.0, "not resolvable"),
    # at_most
    ("at_most", 0.5, 1.0, "holds"), ("at_most", 0.5, 1.01, "not resolvable"), ("at_most", 1.01, 1.5, "does not hold"),
    ("at_most", 1.0, 1.5, "not resolvable"),
    # contains: consistent with the value or not (never unresolved)
    ("contains", 0.9, 1.1, "holds"), ("contains", 1.0, 1.1, "holds"), ("contains", 0.9, 1.0, "holds"),
    ("contains", 1.01, 1.1, "does not hold"), ("contains", 0.5, 0.99, "does not hold"),
])
def test_judge_claim_each_side_of_the_boundary(kind, low, high, expected):
    ours = (low + high) / 2
    assert C.judge_claim(ours, low, high, threshold=1.0, kind=kind) == expected


@pytest.mark.parametrize("low,high,expected", [
    (0.95, 1.05, "holds"), (0.9, 1.1, "holds"),            # inside the band [0.9, 1.1], edges included
    (0.85, 1.0, "not resolvable"), (1.05, 1.2, "not resolvable"), (0.5, 1.5, "not resolvable"),
    (0.5, 0.89, "does not hold"), (1.11, 1.3, "does not hold"),
])
def test_judge_claim_within_tolerance(low, high, expected):
    assert C.judge_claim((low + high) / 2, low, high, threshold=1.0, kind="within", tol=0.1) == expected


def test_judge_claim_exact_numbers_and_orderings():
    # an exact number (low = high = ours) is judged on its value
    assert C.judge_claim(2e-3, 2e-3, 2e-3, threshold=1e-4, kind="at_most") == "does not hold"
    assert C.judge_claim(5e-5, 5e-5, 5e-5, threshold=1e-4, kind="at_most") == "holds"
    assert C.judge_claim(1e-4, 1e-4, 1e-4, threshold=1e-4, kind="below") == "does not hold"
    # an ordering of two cells, given as their difference, against 0
    assert C.judge_claim(3.0, 1.0, 5.0, threshold=0.0, kind="above") == "holds"
    assert C.judge_claim(-3.0, -5.0, -1.0, threshold=0.0, kind="above") == "does not hold"
    assert C.judge_claim(1.0, -1.0, 3.0, threshold=0.0, kind="above") == "not resolvable"
    # negative thresholds work the same way
    assert C.judge_claim(-2.0, -2.5, -1.5, threshold=-1.0, kind="below") == "holds"


@pytest.mark.parametrize("ours,low,high", [(NAN, 0.0, 1.0), (0.5, NAN, 1.0), (0.5, 0.0, NAN), (NAN, NAN, NAN)])
@pytest.mark.parametrize("kind", ["above", "below", "at_least", "at_most", "contains"])
def test_judge_claim_unmeasured_is_not_resolvable(ours, low, high, kind):
    assert C.judge_claim(ours, low, high, threshold=0.2, kind=kind) == "not resolvable"


def test_judge_claim_bad_inputs_raise_privkit_errors():
    with pytest.raises(UnknownNameError):
        C.judge_claim(1.0, 0.5, 1.5, threshold=1.0, kind="ordering-ish")
    with pytest.raises(InvalidArgumentError):  # ours outside its own interval
        C.judge_claim(2.0, 0.5, 1.5, threshold=1.0, kind="above")
    with pytest.raises(InvalidArgumentError):  # low above high
        C.judge_claim(1.0, 1.5, 0.5, threshold=1.0, kind="above")
    with pytest.raises(InvalidArgumentError):  # within needs a tolerance
        C.judge_claim(1.0, 0.5, 1.5, threshold=1.0, kind="within")
    with pytest.raises(InvalidArgumentError):
        C.judge_claim(1.0, 0.5, 1.5, threshold=1.0, kind="within", tol=0.0)
    with pytest.raises(InvalidArgumentError):  # a tolerance is meaningless elsewhere
        C.judge_claim(1.0, 0.5, 1.5, threshold=1.0, kind="above", tol=0.1)
    for bad in (math.inf, "1.0", None, True):
        with pytest.raises(InvalidArgumentError):
            C.judge_claim(bad, 0.5, 1.5, threshold=1.0, kind="above")
    for bad in (math.nan, math.inf, "x"):
        with pytest.raises(InvalidArgumentError):
            C.judge_claim(1.0, 0.5, 1.5, threshold=bad, kind="above")
    assert issubclass(InvalidArgumentError, PrivkitError) and issubclass(UnknownNameError, PrivkitError)


def test_verdicts_are_the_three_words():
    assert C.VERDICTS == ("holds", "does not hold", "not resolvable")
    assert set(C.CLAIM_KINDS) == {"above", "below", "at_least", "at_most", "contains", "within"}


# ------------------------------------------------------------------------------------------------ intervals
def test_proportion_interval_wilson():
    p, lo, hi = C.proportion_interval(18, 185_136)
    assert p == pytest.approx(18 / 185_136)
    assert lo < 1e-4 < hi and lo > 0
    # textbook Wilson values: 0/10 -> [0, 0.2775], 5/10 -> [0.2366, 0.7634]
    assert C.proportion_interval(0, 10)[1:] == pytest.approx((0.0, 0.27753), abs=1e-4)
    assert C.proportion_interval(5, 10)[1:] == pytest.approx((0.23659, 0.76341), abs=1e-4)
    # fractional successes (a mean rate times n) are rounded to a count
    assert C.proportion_interval(4.6, 10)[0] == 0.5
    for args in ((-1, 10), (11, 10), (1, 0), (1.0, 10.5)):
        with pytest.raises(InvalidArgumentError):
            C.proportion_interval(*args)
    with pytest.raises(InvalidArgumentError):
        C.proportion_interval(1, 10, level=1.0)


def test_mean_interval():
    m, lo, hi = C.mean_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and (lo, hi) == pytest.approx((2.0 - 2.4842, 2.0 + 2.4842), abs=1e-3)  # t(0.975, 2)·1/√3
    m, lo, hi = C.mean_interval([4.0])
    assert m == 4.0 and math.isnan(lo) and math.isnan(hi)
    assert C.judge_claim(m, lo, hi, threshold=0.0, kind="above") == "not resolvable"
    for bad in ([], [1.0, math.nan], [math.inf]):
        with pytest.raises(InvalidArgumentError):
            C.mean_interval(bad)


def test_loglog_slope_recovers_a_power_law():
    n = np.repeat([16, 32, 64, 128, 256], 3)
    rng = np.random.default_rng(0)
    y = 3.0 * n**1.5 * np.exp(rng.normal(0, 0.05, n.size))
    s, lo, hi = C.loglog_slope(n, y)
    assert lo < s < hi and hi - lo < 0.1 and s == pytest.approx(1.5, abs=0.05)
    exact = C.loglog_slope(n, 3.0 * n**1.5)  # an exact power law: the interval shrinks to the slope
    assert exact == pytest.approx((1.5, 1.5, 1.5), abs=1e-9)
    assert C.judge_claim(s, lo, hi, threshold=2.0, kind="at_most") == "holds"
    assert C.judge_claim(s, lo, hi, threshold=1.0, kind="at_most") == "does not hold"
    s, lo, hi = C.loglog_slope([2, 4], [4, 16])  # two points: exact slope, no interval
    assert s == pytest.approx(2.0) and math.isnan(lo)
    for args in (([1, 2, 3], [1, 2]), ([2, 2, 2], [1, 2, 3]), ([1, 2, 3], [1, 0, 3]), ([1, 2, 3], [1, math.nan, 3])):
        with pytest.raises(InvalidArgumentError):
            C.loglog_slope(*args)


# ------------------------------------------------------------------------------------------------ claim rows
def test_claim_row_and_readme_row():
    r = C.claim_row("Table 1", "accuracy falls", paper="92.05 → 61.67", ours=12.0, low=9.5, high=14.5,
                    threshold=0.0, kind="above", what="accuracy drop", interval="normal interval")
    assert r["verdict"] == "holds" and r["difference"] == 12.0
    assert r["evidence"] == ("accuracy drop 12 ([9.5, 14.5], normal interval); the claim needs it above 0 — holds")
    assert C.claim_readme_row(r) == "| accuracy falls | 92.05 → 61.67 | accuracy drop | 12 [9.5, 14.5] | holds |"
    e = C.claim_row("calibration", "valid δ", paper="1e-4", ours=8.6e-3, low=8.6e-3, high=8.6e-3, threshold=1e-4,
                    kind="at_most", what="exact δ", interval="computed exactly")
    assert e["verdict"] == "does not hold" and "(computed exactly)" in e["evidence"]
    assert C.claim_readme_row(e) == "| valid δ | 1e-4 | exact δ | 0.0086 | does not hold |"
    u = C.claim_row("DP-RAG", "generators", paper="—", ours=NAN, low=NAN, high=NAN, threshold=0.0, kind="above",
                    what="accuracy", interval="not measured")
    assert u["verdict"] == "not resolvable" and "not measured" in u["evidence"]
    assert C.claim_readme_row(u).endswith("| not measured | not resolvable |")
    w = C.claim_row("x", "y", paper="—", ours=1.0, low=0.95, high=1.04, threshold=1.0, kind="within", tol=0.1,
                    what="ratio", interval="t")
    assert w["verdict"] == "holds" and "within ±0.1 of 1" in w["evidence"] and w["tol"] == 0.1
    bars = C.claim_row("App. G", "|ΔEER| ≤ η", paper="Pr[flip | s]", ours=0.2, low=0.2, high=0.2, threshold=1.0,
                       kind="at_most", what="ratio", interval="one draw")
    assert C.claim_readme_row(bars) == "| \\|ΔEER\\| ≤ η | Pr[flip \\| s] | ratio | 0.2 | holds |"


def test_every_undecided_claim_names_its_cause():
    decided = C.claim_row("s", "c", paper="—", ours=2.0, low=1.0, high=3.0, threshold=0.0, kind="above", what="w",
                          interval="i", cause="never shown")
    assert decided["verdict"] == "holds" and decided["cause"] == ""
    wide = C.claim_row("s", "c", paper="—", ours=0.5, low=-1.0, high=2.0, threshold=0.0, kind="above", what="w",
                       interval="i")
    assert wide["cause"].startswith("interval too wide for n: [-1, 2] straddles 0")
    assert C.claim_row("s", "c", paper="—", ours=NAN, low=NAN, high=NAN, threshold=0.0, kind="above", what="w",
                       interval="i")["cause"] == "needs the paper scale: not measured at this scale"
    assert C.claim_row("s", "c", paper="—", ours=1.0, low=NAN, high=NAN, threshold=0.0, kind="above", what="w",
                       interval="i")["cause"].startswith("no interval")
    named = C.claim_row("s", "c", paper="—", ours=0.5, low=-1.0, high=2.0, threshold=0.0, kind="above", what="w",
                        interval="i", cause="stand-in model")
    assert named["cause"] == "stand-in model"
    with pytest.raises(UnknownNameError):
        C.claim_row("x", "y", paper="—", ours=1.0, low=0.5, high=1.5, threshold=1.0, kind="nope", what="w",
                    interval="i")
