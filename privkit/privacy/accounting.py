"""Privacy accounting for DP-SGD (Poisson-subsampled Gaussian) through opacus.

privkit does not re-derive accountants: it hands opacus's RDP accountant
(Mironov 2017; Mironov, Talwar & Zhang 2019) or PRV accountant (Gopi, Lee &
Wutschitz 2021) the real history of ``(noise_multiplier, sample_rate, steps)``
and asks it for epsilon.  Setting the history explicitly (rather than a step
counter that the accountant does not read) is the fix for the "epsilon = 0"
bug of the public DP-pose code.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Literal

import numpy as np

from .._validate import check_choice, check_delta, check_epsilon, check_int, check_positive, check_probability
from ..errors import InvalidArgumentError, PrivacyBudgetError

__all__ = ["ACCOUNTANTS", "epsilon_spent", "epsilon_from_history", "noise_multiplier_for"]

Accountant = Literal["rdp", "prv"]

#: Valid values of ``accountant``.
ACCOUNTANTS: tuple[str, ...] = ("rdp", "prv")

#: Error allowed in the PRV accountant's epsilon (it returns an upper bound
#: within this of the true epsilon); 0.01 keeps a call well under a second.
PRV_EPS_ERROR = 0.01

#: Largest noise multiplier :func:`noise_multiplier_for` will return.
MAX_NOISE_MULTIPLIER = 1e4


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


def _epsilon(history: list[tuple[float, float, int]], delta: float, accountant: str) -> float:
    """epsilon of a validated, non-empty history (no zero-step entries)."""
    from opacus.accountants import create_accountant  # heavy import, done lazily

    acc = create_accountant(mechanism=accountant)
    acc.history = list(history)
    with warnings.catch_warnings(), np.errstate(divide="ignore"):
        # RDP warns "Optimal order is the largest/smallest alpha" at extreme
        # settings (the returned value is still a valid upper bound); the PRV
        # density takes log(1 - q) = -inf at sample_rate = 1, which is harmless.
        warnings.simplefilter("ignore", UserWarning)
        if accountant == "prv":
            eps = acc.get_epsilon(delta=delta, eps_error=PRV_EPS_ERROR)
        else:
            eps = acc.get_epsilon(delta=delta)
    eps = float(eps)
    if math.isnan(eps):
        return math.inf
    return max(0.0, eps)


def epsilon_from_history(
    history: Sequence[tuple[float, float, int]],
    *,
    delta: float,
    accountant: Accountant = "rdp",
) -> float:
    """epsilon spent by a sequence of heterogeneous DP-SGD phases.

    Args:
        history: ``[(noise_multiplier, sample_rate, steps), ...]``; each phase
            runs ``steps`` steps of the Poisson-subsampled Gaussian mechanism
            with noise ``noise_multiplier * clip_norm`` and sampling
            probability ``sample_rate``.  Entries with 0 steps are ignored.
        delta: Target delta in ``(0, 1)``.
        accountant: ``"rdp"`` (opacus RDPAccountant) or ``"prv"`` (opacus
            PRVAccountant, tighter; an upper bound within 0.01 of its estimate).

    Returns:
        The epsilon that holds at ``delta`` (``0.0`` for an empty history,
        ``math.inf`` when the accountant cannot bound it).
    """
    check_choice("accountant", accountant, ACCOUNTANTS)
    dlt = check_delta(delta)
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise InvalidArgumentError(
            f"history must be a list of (noise_multiplier, sample_rate, steps) tuples, got {type(history).__name__}"
        )
    entries = [_check_entry(i, e) for i, e in enumerate(history)]
    entries = [e for e in entries if e[2] > 0]
    if not entries:
        return 0.0
    return _epsilon(entries, dlt, accountant)


def epsilon_spent(
    *,
    noise_multiplier: float,
    sample_rate: float,
    steps: int,
    delta: float,
    accountant: Accountant = "rdp",
) -> float:
    """epsilon spent by ``steps`` steps of DP-SGD with fixed noise and sampling rate.

    Args:
        noise_multiplier: Noise std divided by the clipping norm, ``> 0``.
        sample_rate: Poisson sampling probability in ``(0, 1]``.
        steps: Number of steps, ``>= 0``.
        delta: Target delta in ``(0, 1)``.
        accountant: ``"rdp"`` or ``"prv"``.

    Returns:
        epsilon (``0.0`` for zero steps).
    """
    return epsilon_from_history([(noise_multiplier, sample_rate, steps)], delta=delta, accountant=accountant)


def noise_multiplier_for(
    *,
    target_epsilon: float,
    delta: float,
    sample_rate: float,
    steps: int,
    accountant: Accountant = "rdp",
    epsilon_tolerance: float = 0.01,
    max_noise_multiplier: float = MAX_NOISE_MULTIPLIER,
) -> float:
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
        accountant: ``"rdp"`` or ``"prv"``.
        epsilon_tolerance: Absolute slack below the target, ``> 0``.
        max_noise_multiplier: Cap on the noise multiplier, ``> 0``.

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
    check_choice("accountant", accountant, ACCOUNTANTS)
    tol = check_positive("epsilon_tolerance", epsilon_tolerance)
    cap = check_positive("max_noise_multiplier", max_noise_multiplier)

    def eps_at(sigma: float) -> float:
        return _epsilon([(sigma, q, steps)], dlt, accountant)

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
