"""Privacy accounting for DP-SGD (Poisson-subsampled Gaussian), under two neighbouring relations.

privkit does not re-derive accountants: it hands the real history of
``(noise_multiplier, sample_rate, steps)`` to a published accountant and asks it for epsilon.
Setting the history explicitly (rather than a step counter that the accountant does not read)
is the fix for the "epsilon = 0" bug of the public DP-pose code.

Neighbouring relations (docs/privacy.md, "Which neighbours"):

``"add_remove"``
    one record added or removed: the clipped sum moves by at most C when the record is
    sampled.  Accountants: opacus's RDP (Mironov 2017; Mironov, Talwar & Zhang 2019) or PRV
    (Gopi, Lee & Wutschitz 2021), or the PLD accountant of Google's ``dp-accounting``.
``"substitution"``
    one record replaced by another (replace-one), e.g. feature-level DP, where a record keeps
    its public features and labels and changes the rest: the record is sampled with the same
    probability in both datasets and the clipped sum moves by up to 2C.  The dominating pair
    per step is (1 − q)·N(0, σ²) + q·N(−1, σ²) against (1 − q)·N(0, σ²) + q·N(+1, σ²) (in units
    of C).  Only ``accountant="pld"`` (``dp-accounting``'s PLD accountant with its REPLACE_ONE
    relation) accounts it; opacus covers add/remove only.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np

from .._validate import check_choice, check_delta, check_epsilon, check_int, check_positive, check_probability
from ..errors import InvalidArgumentError, PrivacyBudgetError

__all__ = ["ACCOUNTANTS", "NEIGHBOURINGS", "epsilon_spent", "epsilon_from_history", "noise_multiplier_for",
           "accountant_for"]

Accountant = Literal["rdp", "prv", "pld"]
Neighbouring = Literal["add_remove", "substitution"]

#: Valid values of ``accountant``.
ACCOUNTANTS: tuple[str, ...] = ("rdp", "prv", "pld")

#: Valid values of ``neighbouring``.
NEIGHBOURINGS: tuple[str, ...] = ("add_remove", "substitution")

#: Error allowed in the PRV accountant's epsilon (it returns an upper bound
#: within this of the true epsilon); 0.01 keeps a call well under a second.
PRV_EPS_ERROR = 0.01

#: Discretisation of the privacy loss in the PLD accountant (its pessimistic estimate is an upper bound;
#: 1e-3 changes epsilon by < 1e-3 against 1e-4 at the settings privkit uses, in a tenth of the time).
PLD_DISCRETIZATION = 1e-3

#: Largest noise multiplier :func:`noise_multiplier_for` will return.
MAX_NOISE_MULTIPLIER = 1e4


def accountant_for(neighbouring: str, accountant: str) -> str:
    """The accountant that will account ``neighbouring``: ``accountant`` itself, except that substitution is
    accounted by ``"pld"`` (the only one here with a replace-one relation for Poisson sampling)."""
    check_choice("neighbouring", neighbouring, NEIGHBOURINGS)
    check_choice("accountant", accountant, ACCOUNTANTS)
    return "pld" if neighbouring == "substitution" else accountant


def _check_entry(index: int | None, entry: object) -> tuple[float, float, int]:
    where = "" if index is None else f"history[{index}]."
    try:
        sigma, q, steps = entry  # type: ignore[misc]
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"history[{index}] must be a (noise_multiplier, sample_rate, steps) tuple, got {entry!r}"
        ) from None
    sigma = check_positive(f"{where}noise_multiplier", sigma)
    q = check_probability(f"{where}sample_rate", q, open_low=True, open_high=False)
    steps = check_int(f"{where}steps", steps, minimum=0)
    return sigma, q, steps


def _check_relation(neighbouring: str, accountant: str) -> None:
    accountant_for(neighbouring, accountant)  # checks both names
    if neighbouring == "substitution" and accountant != "pld":
        raise InvalidArgumentError(
            f"neighbouring='substitution' needs accountant='pld' (dp-accounting's replace-one PLD accountant); "
            f"{accountant!r} (opacus) accounts add/remove neighbours only"
        )


def _pld_epsilon(history: list[tuple[float, float, int]], delta: float, neighbouring: str) -> float:
    import dp_accounting  # lazily: only the PLD path needs it
    from dp_accounting.pld import pld_privacy_accountant

    relation = (dp_accounting.NeighboringRelation.REPLACE_ONE if neighbouring == "substitution"
                else dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=relation,
                                               value_discretization_interval=PLD_DISCRETIZATION)
    for sigma, q, steps in history:
        acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return acc.get_epsilon(delta)


def _epsilon(history: list[tuple[float, float, int]], delta: float, accountant: str,
             neighbouring: str = "add_remove") -> float:
    """epsilon of a validated, non-empty history (no zero-step entries); ``inf`` when the accountant gives NaN."""
    eps = float(_pld_epsilon(history, delta, neighbouring) if accountant == "pld"
                else _opacus_epsilon(history, delta, accountant))
    if math.isnan(eps):
        return math.inf
    return max(0.0, eps)


def _opacus_epsilon(history: list[tuple[float, float, int]], delta: float, accountant: str) -> float:
    from opacus.accountants import create_accountant  # heavy import, done lazily

    acc = create_accountant(mechanism=accountant)
    acc.history = list(history)
    with warnings.catch_warnings(), np.errstate(divide="ignore"):
        # RDP warns "Optimal order is the largest/smallest alpha" at extreme
        # settings (the returned value is still a valid upper bound); the PRV
        # density takes log(1 - q) = -inf at sample_rate = 1, which is harmless.
        warnings.simplefilter("ignore", UserWarning)
        if accountant == "prv":
            return acc.get_epsilon(delta=delta, eps_error=PRV_EPS_ERROR)
        return acc.get_epsilon(delta=delta)


def epsilon_from_history(history: Sequence[tuple[float, float, int]], *, delta: float, accountant: Accountant = "rdp",
                         neighbouring: Neighbouring = "add_remove") -> float:
    """epsilon spent by a sequence of heterogeneous DP-SGD phases.

    Args:
        history: ``[(noise_multiplier, sample_rate, steps), ...]``; each phase
            runs ``steps`` steps of the Poisson-subsampled Gaussian mechanism
            with noise ``noise_multiplier * clip_norm`` and sampling
            probability ``sample_rate``.  Entries with 0 steps are ignored.
        delta: Target delta in ``(0, 1)``.
        accountant: ``"rdp"`` (opacus RDPAccountant), ``"prv"`` (opacus
            PRVAccountant, tighter; an upper bound within 0.01 of its estimate)
            or ``"pld"`` (dp-accounting's PLD accountant, pessimistic estimate).
        neighbouring: ``"add_remove"`` (default) or ``"substitution"``
            (replace-one; needs ``accountant="pld"``).

    Returns:
        The epsilon that holds at ``delta`` (``0.0`` for an empty history,
        ``math.inf`` when the accountant cannot bound it).
    """
    _check_relation(neighbouring, accountant)
    dlt = check_delta(delta)
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise InvalidArgumentError(
            f"history must be a list of (noise_multiplier, sample_rate, steps) tuples, got {type(history).__name__}"
        )
    entries = [_check_entry(i, e) for i, e in enumerate(history)]
    entries = [e for e in entries if e[2] > 0]
    if not entries:
        return 0.0
    return _epsilon(entries, dlt, accountant, neighbouring)


def epsilon_spent(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float,
                  accountant: Accountant = "rdp", neighbouring: Neighbouring = "add_remove") -> float:
    """epsilon spent by ``steps`` steps of DP-SGD with fixed noise and sampling rate.

    Args:
        noise_multiplier: Noise std divided by the clipping norm, ``> 0``.
        sample_rate: Poisson sampling probability in ``(0, 1]``.
        steps: Number of steps, ``>= 0``.
        delta: Target delta in ``(0, 1)``.
        accountant: ``"rdp"``, ``"prv"`` or ``"pld"``.
        neighbouring: ``"add_remove"`` or ``"substitution"`` (needs ``"pld"``).

    Returns:
        epsilon (``0.0`` for zero steps).
    """
    return epsilon_from_history([(noise_multiplier, sample_rate, steps)], delta=delta, accountant=accountant,
                                neighbouring=neighbouring)


def noise_multiplier_for(*, target_epsilon: float, delta: float, sample_rate: float, steps: int,
                         accountant: Accountant = "rdp", epsilon_tolerance: float = 0.01,
                         max_noise_multiplier: float = MAX_NOISE_MULTIPLIER,
                         neighbouring: Neighbouring = "add_remove") -> float:
    """Smallest noise multiplier (up to ``epsilon_tolerance``) reaching ``target_epsilon``.

    A bisection with the opacus accountant, as in
    ``opacus.accountants.utils.get_noise_multiplier``: the returned value
    always satisfies ``epsilon_spent(...) <= target_epsilon`` and spends at
    least ``target_epsilon - epsilon_tolerance``.

    Args:
        target_epsilon: Target epsilon, ``> 0``.
        delta: Target delta in ``(0, 1)``.
        sample_rate: Poisson sampling probability in ``(0, 1]``.
        steps: Number of steps, ``>= 1``.
        accountant: ``"rdp"``, ``"prv"`` or ``"pld"``.
        epsilon_tolerance: Absolute slack below the target, ``> 0``.
        max_noise_multiplier: Cap on the noise multiplier, ``> 0``.
        neighbouring: ``"add_remove"`` or ``"substitution"`` (needs ``"pld"``):
            the relation under which ``target_epsilon`` must hold.

    Returns:
        The noise multiplier.

    Raises:
        InvalidArgumentError: out-of-range arguments.
        PrivacyBudgetError: the target needs a noise multiplier above
            ``max_noise_multiplier``.
    """
    target = check_epsilon(target_epsilon, "target_epsilon")
    dlt = check_delta(delta)
    q = check_probability("sample_rate", sample_rate, open_low=True, open_high=False)
    steps = check_int("steps", steps, minimum=1)
    _check_relation(neighbouring, accountant)
    tol = check_positive("epsilon_tolerance", epsilon_tolerance)
    cap = check_positive("max_noise_multiplier", max_noise_multiplier)

    def eps_at(sigma: float) -> float:
        return _epsilon([(sigma, q, steps)], dlt, accountant, neighbouring)

    hi = min(1.0, cap)
    eps_hi = eps_at(hi)
    while eps_hi > target:
        if hi >= cap:
            raise PrivacyBudgetError(
                f"target_epsilon={target} at delta={dlt} cannot be reached with sample_rate={q} and "
                f"steps={steps}: even noise_multiplier={cap:g} (max_noise_multiplier) spends epsilon={eps_hi:.4g}. "
                "Lower the sampling rate or the number of steps, or raise max_noise_multiplier."
            )
        hi = min(2.0 * hi, cap)
        eps_hi = eps_at(hi)
    lo = 0.0
    if hi <= 1.0:  # the first guess was already private enough: bracket from below
        lo = hi / 2.0
        while lo > 1e-6 and eps_at(lo) <= target:
            hi, lo = lo, lo / 2.0
        eps_hi = eps_at(hi)
    for _ in range(200):
        if target - eps_hi <= tol or hi - lo <= 1e-9 * hi:
            break
        mid = 0.5 * (lo + hi)
        eps_mid = eps_at(mid)
        if eps_mid <= target:
            hi, eps_hi = mid, eps_mid
        else:
            lo = mid
    return float(hi)
