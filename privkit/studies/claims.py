"""Verdicts on a paper's claims from the data: *holds*, *does not hold* or *not resolvable* at this scale.

Every notebook ends with a claims table (one row per claim of its paper that the notebook measures): the paper's
number, ours with an interval computed from the data (bootstrap, binomial/Wilson, Student-t over repeats, or none
for a number computed exactly), and a verdict from :func:`judge_claim`. A point estimate alone never decides a
verdict: an interval that straddles the claim's boundary gives "not resolvable", and so does a number that was not
measured at this scale (NaN). Intervals are built here too (:func:`proportion_interval`, :func:`mean_interval`,
:func:`loglog_slope`), so every notebook judges with the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from privkit._validate import check_choice, check_int, check_positive, check_probability, check_real
from privkit.errors import InvalidArgumentError
from privkit.metrics import wilson_interval

__all__ = ["VERDICTS", "CLAIM_KINDS", "judge_claim", "proportion_interval", "mean_interval", "loglog_slope",
           "not_resolvable_cause", "claim_row", "claim_readme_row"]

#: The verdicts a claim can get.
VERDICTS = ("holds", "does not hold", "not resolvable")

#: How a claim compares our number (with its interval [low, high]) to the reference value ``threshold``:
#: "above" ours > threshold, "below" ours < threshold, "at_least" ours >= threshold, "at_most" ours <= threshold,
#: "contains" the interval is consistent with threshold, "within" ours lies within ``tol`` of threshold.
CLAIM_KINDS = ("above", "below", "at_least", "at_most", "contains", "within")

_KIND_WORDS = {"above": "above", "below": "below", "at_least": "at least", "at_most": "at most",
               "contains": "consistent with", "within": "within ±{tol:.3g} of"}


def _finite_or_nan(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise InvalidArgumentError(f"{name} must be a real number (NaN: not measured), got {value!r}")
    v = float(value)
    if math.isinf(v):
        raise InvalidArgumentError(f"{name} must be finite or NaN, got {v}")
    return v


def judge_claim(ours: float, low: float, high: float, *, threshold: float, kind: str,
                tol: float | None = None) -> str:
    """The verdict on one claim from our estimate ``ours`` and its interval ``[low, high]``.

    A claim compares our number with a reference value ``threshold`` (the paper's number, or the value its
    statement implies, e.g. 0 for an ordering of two cells given as their difference):

    - ``above``: holds when low > threshold, does not hold when high <= threshold;
    - ``below``: holds when high < threshold, does not hold when low >= threshold;
    - ``at_least``: holds when low >= threshold, does not hold when high < threshold;
    - ``at_most``: holds when high <= threshold, does not hold when low > threshold;
    - ``contains``: holds when low <= threshold <= high, does not hold otherwise;
    - ``within``: holds when [low, high] lies inside threshold ± tol, does not hold when it lies wholly outside.

    Anything else is ``"not resolvable"`` (the interval straddles the boundary), and so is a claim whose
    number is NaN (not measured at this scale). An exact, computed number is passed with ``low = high = ours``.

    Raises:
        UnknownNameError: unknown ``kind``.
        InvalidArgumentError: non-real or infinite numbers, ``low > ours`` or ``ours > high``, a missing or
            non-positive ``tol`` for ``"within"``, or a ``tol`` for any other kind.
    """
    kind = check_choice("kind", kind, CLAIM_KINDS)
    t = check_real("threshold", threshold)
    if kind == "within":
        if tol is None:
            raise InvalidArgumentError("kind='within' needs tol > 0")
        tol = check_positive("tol", tol)
    elif tol is not None:
        raise InvalidArgumentError(f"tol applies only to kind='within', not {kind!r}")
    o, lo, hi = (_finite_or_nan(n, v) for n, v in (("ours", ours), ("low", low), ("high", high)))
    if math.isnan(o) or math.isnan(lo) or math.isnan(hi):
        return "not resolvable"
    slack = 1e-12 * max(1.0, abs(o))
    if lo > o + slack or o > hi + slack:
        raise InvalidArgumentError(f"need low <= ours <= high, got {lo!r} <= {o!r} <= {hi!r}")
    if kind == "above":
        return "holds" if lo > t else "does not hold" if hi <= t else "not resolvable"
    if kind == "below":
        return "holds" if hi < t else "does not hold" if lo >= t else "not resolvable"
    if kind == "at_least":
        return "holds" if lo >= t else "does not hold" if hi < t else "not resolvable"
    if kind == "at_most":
        return "holds" if hi <= t else "does not hold" if lo > t else "not resolvable"
    if kind == "contains":
        return "holds" if lo <= t <= hi else "does not hold"
    return ("holds" if t - tol <= lo and hi <= t + tol
            else "does not hold" if hi < t - tol or lo > t + tol else "not resolvable")


def proportion_interval(successes: float, n: int, *, level: float = 0.95) -> tuple[float, float, float]:
    """A proportion k/n and its Wilson score interval (:func:`privkit.metrics.wilson_interval`): ``(estimate, low,
    high)``.

    ``successes`` may be fractional (a rate times n, e.g. a mean over noise draws); it is rounded to the nearest
    count.

    Raises:
        InvalidArgumentError: ``n < 1``, ``successes`` outside [0, n] or ``level`` outside (0, 1).
    """
    n = check_int("n", n, minimum=1)
    k = check_real("successes", successes)
    if not -1e-9 <= k <= n + 1e-9:
        raise InvalidArgumentError(f"successes must lie in [0, n={n}], got {k}")
    lvl = check_probability("level", level)
    k = min(max(round(k), 0), n)
    lo, hi = wilson_interval(k, n, level=lvl)
    return k / n, lo, hi


def mean_interval(values: Sequence[float] | np.ndarray, *, level: float = 0.95) -> tuple[float, float, float]:
    """Mean of ``values`` (e.g. one per noise draw) and its Student-t interval: ``(mean, low, high)``.

    One value gives NaN bounds (no spread to judge from: a verdict on it is "not resolvable").

    Raises:
        InvalidArgumentError: empty or non-finite ``values``, ``level`` outside (0, 1).
    """
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0 or not np.isfinite(v).all():
        raise InvalidArgumentError("values must be a non-empty sequence of finite numbers")
    lvl = check_probability("level", level)
    m = float(v.mean())
    if v.size < 2:
        return m, float("nan"), float("nan")
    from scipy.stats import t as student_t

    half = float(student_t.ppf(0.5 + lvl / 2.0, v.size - 1)) * float(v.std(ddof=1)) / math.sqrt(v.size)
    return m, m - half, m + half


def loglog_slope(n: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray, *,
                 level: float = 0.95) -> tuple[float, float, float]:
    """Least-squares slope of log(values) on log(n) and its Student-t interval: ``(slope, low, high)``.

    Pass every repeat as its own point (several values per n); the interval then reflects both the run-to-run
    spread and any curvature the power law misses. Two points give NaN bounds.

    Raises:
        InvalidArgumentError: lengths differ, fewer than two distinct n, or a non-positive / non-finite entry.
    """
    x = np.asarray(n, dtype=float).ravel()
    y = np.asarray(values, dtype=float).ravel()
    if x.shape != y.shape:
        raise InvalidArgumentError(f"n and values must have the same length, got {x.size} and {y.size}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()) or (x <= 0).any() or (y <= 0).any():
        raise InvalidArgumentError("n and values must be finite and > 0")
    if np.unique(x).size < 2:
        raise InvalidArgumentError("need at least two distinct n to fit a slope")
    lvl = check_probability("level", level)
    lx, ly = np.log(x), np.log(y)
    xc = lx - lx.mean()
    slope = float((xc * (ly - ly.mean())).sum() / (xc * xc).sum())
    if x.size < 3:
        return slope, float("nan"), float("nan")
    from scipy.stats import t as student_t

    resid = ly - ly.mean() - slope * xc
    se = math.sqrt(float((resid * resid).sum()) / (x.size - 2) / float((xc * xc).sum()))
    half = float(student_t.ppf(0.5 + lvl / 2.0, x.size - 2)) * se
    return slope, slope - half, slope + half


def _fmt(x: float) -> str:
    """The number format of the claims table and its README rows (3 significant digits; NaN as "—")."""
    return "—" if not math.isfinite(x) else f"{x:.3g}"


def not_resolvable_cause(ours: float, low: float, high: float, *, threshold: float) -> str:
    """Why a "not resolvable" verdict could not decide, from its numbers alone (the ``cause`` column when a study
    names no cause of its own): not measured at this scale, no interval, or an interval too wide for the data."""
    o, lo, hi = float(ours), float(low), float(high)
    if math.isnan(o):
        return "needs the paper scale: not measured at this scale"
    if math.isnan(lo) or math.isnan(hi):
        return "no interval: a single value, no spread to judge from"
    if lo == o == hi:
        return "a number without sampling error that lies on the claim's boundary"
    return (f"interval too wide for n: [{_fmt(lo)}, {_fmt(hi)}] straddles {_fmt(float(threshold))} "
            "(more identities, pairs or seeds would narrow it)")


def claim_row(section: str, claim: str, *, paper: str, ours: float, low: float, high: float, threshold: float,
              kind: str, what: str, interval: str, tol: float | None = None,
              cause: str | None = None) -> dict[str, object]:
    """One row of the claims table: the claim, the paper's number, ours with its interval, and the verdict.

    Args:
        section: the notebook section the evidence comes from (e.g. "Table 1").
        claim: the paper's claim in words; paper: the paper's number(s), as text ("—" where it gives none).
        ours, low, high: our estimate and its interval (``low = high = ours`` for a number without sampling
            error, e.g. computed exactly; NaN where it was not measured at this scale).
        threshold, kind, tol: what ours is compared with, as in :func:`judge_claim`.
        what: what ``ours`` is, in words (used in the evidence sentence); interval: how the interval was formed
            (or, when ``low = high = ours``, why the number has none).
        cause: why the claim may not be decidable here (a stand-in model, data not available offline, the paper
            scale), used when the verdict is "not resolvable"; None: :func:`not_resolvable_cause`.

    Returns:
        ``{"section", "claim", "paper", "what", "ours", "low", "high", "interval", "kind", "threshold", "tol",
        "difference", "verdict", "cause", "evidence"}``; ``difference`` = ours − threshold; ``cause`` is empty for a
        decided claim; ``evidence`` is a sentence made from the numbers.
    """
    verdict = judge_claim(ours, low, high, threshold=threshold, kind=kind, tol=tol)
    o, lo, hi = float(ours), float(low), float(high)
    if math.isnan(o):
        body = f"{what}: not measured at this scale"
    else:
        if math.isnan(lo) or math.isnan(hi):
            iv = f"no interval: {interval}"
        else:
            iv = interval if lo == o == hi else f"[{_fmt(lo)}, {_fmt(hi)}], {interval}"
        words = _KIND_WORDS[kind].format(tol=tol if tol is not None else 0.0)
        body = f"{what} {_fmt(o)} ({iv}); the claim needs it {words} {_fmt(float(threshold))}"
    return {"section": section, "claim": claim, "paper": paper, "what": what, "ours": o, "low": lo, "high": hi,
            "interval": interval, "kind": kind, "threshold": float(threshold),
            "tol": float("nan") if tol is None else float(tol), "difference": o - float(threshold),
            "verdict": verdict,
            "cause": "" if verdict != "not resolvable" else (
                cause if cause else not_resolvable_cause(o, lo, hi, threshold=threshold)),
            "evidence": f"{body} — {verdict}"}


def claim_readme_row(row: dict | pd.Series) -> str:
    """The README's table row for one claims-table row: ``| claim | paper | what | ours [low, high] | verdict |``.

    ``ours`` alone when it has no sampling interval (``low = high = ours``), "no interval" when a bound is NaN;
    a ``|`` inside the claim or the paper's text is escaped as ``\\|`` so that it stays inside its cell.
    """
    o, lo, hi = float(row["ours"]), float(row["low"]), float(row["high"])
    if math.isnan(o):
        ours = "not measured"
    elif lo == o == hi:
        ours = _fmt(o)
    elif math.isnan(lo) or math.isnan(hi):
        ours = f"{_fmt(o)} (no interval)"
    else:
        ours = f"{_fmt(o)} [{_fmt(lo)}, {_fmt(hi)}]"
    def cell(text: object) -> str:  # a "|" inside a cell (|ΔAUC|, Pr[flip | s]) would end it: escape it
        return str(text).replace("|", "\\|")

    return f"| {cell(row['claim'])} | {cell(row['paper'])} | {cell(row['what'])} | {ours} | {row['verdict']} |"
