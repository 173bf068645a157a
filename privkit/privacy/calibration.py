"""Noise calibration for the Gaussian and Laplace mechanisms.

Three Gaussian calibrations are offered, because the papers privkit reproduces
use different ones and privkit must be able to report what each really buys:

``"analytic"``
    The analytic Gaussian mechanism of Balle & Wang (ICML 2018).  For noise
    ``N(0, sigma^2)`` added to a query of L2 sensitivity ``Delta``, the mechanism
    is (epsilon, delta)-DP if and only if ``delta >= delta_AG(epsilon, sigma)``
    with

    .. math::

        \\delta_{AG}(\\varepsilon, \\sigma) =
        \\Phi\\Big(\\frac{\\Delta}{2\\sigma} - \\frac{\\varepsilon\\sigma}{\\Delta}\\Big)
        - e^{\\varepsilon}\\,
        \\Phi\\Big(-\\frac{\\Delta}{2\\sigma} - \\frac{\\varepsilon\\sigma}{\\Delta}\\Big).

    The calibrated sigma is the smallest one with ``delta_AG <= delta``; it is
    exact (necessary and sufficient) for every ``epsilon > 0``.

``"classic"``
    ``sigma = Delta * sqrt(2 ln(1.25/delta)) / epsilon`` (Dwork & Roth,
    Theorem A.1).  The theorem is proved only for ``epsilon < 1``; privkit refuses
    it above.

``"scoreshield"``
    The ScoreShield paper's rule ``sigma = Delta * sqrt(c)`` with
    ``c = 2 ln(2/delta) / epsilon^2``.  It reproduces the paper's noise at any
    epsilon, but it is a valid (epsilon, delta) calibration only for
    ``epsilon < 1``: at the paper's epsilon >= 20 the delta that really holds is
    far larger than the stated one (use :func:`analytic_gaussian_delta`).

All numerical work is done in float64 with ``scipy.special.log_ndtr`` so that
``delta_AG`` keeps full relative precision far in the tails (large epsilon,
tiny delta).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from scipy.optimize import brentq
from scipy.special import log_ndtr

from .._validate import check_choice, check_delta, check_epsilon, check_nonnegative, check_positive
from ..errors import ConvergenceError, InvalidArgumentError

__all__ = ["GAUSSIAN_METHODS", "gaussian_sigma", "scoreshield_constant", "analytic_gaussian_delta",
           "analytic_gaussian_epsilon", "laplace_scale"]

GaussianMethod = Literal["analytic", "classic", "scoreshield"]

#: Valid values of ``method`` in :func:`gaussian_sigma`.
GAUSSIAN_METHODS: tuple[str, ...] = ("analytic", "classic", "scoreshield")

# Relative tolerance of the root searches (the brief asks for 1e-10; brentq's
# own rtol is applied on top of an absolute xtol scaled to the bracket).
_RTOL = 1e-12


def _log_delta_ag(epsilon: float, rho: float) -> float:
    """``log delta_AG`` as a function of ``rho = Delta / sigma`` (float64, log space).

    ``delta_AG = Phi(a) - exp(eps) Phi(b)`` with ``a = rho/2 - eps/rho`` and
    ``b = -rho/2 - eps/rho``.  Written as ``Phi(a) * (1 - exp(eps + log Phi(b) -
    log Phi(a)))`` it never overflows and keeps relative precision when both
    terms are tiny.  Returns ``-inf`` when delta underflows to 0.
    """
    a = rho / 2.0 - epsilon / rho
    b = -rho / 2.0 - epsilon / rho
    log_pa = float(log_ndtr(a))
    log_pb = float(log_ndtr(b))
    diff = epsilon + log_pb - log_pa  # log of the ratio of the two terms, < 0 in exact arithmetic
    if not diff < 0.0:
        return -math.inf
    return log_pa + math.log(-math.expm1(diff))


def analytic_gaussian_delta(epsilon: float, sigma: float, *, sensitivity: float = 1.0) -> float:
    """The exact delta that the Gaussian mechanism with noise ``sigma`` satisfies at ``epsilon``.

    This is the tight privacy profile of Balle & Wang (2018, Thm. 8): the
    mechanism ``M(x) = f(x) + N(0, sigma^2 I)`` with ``||f(x) - f(x')||_2 <=
    sensitivity`` is (epsilon, delta)-DP exactly when ``delta >=`` the returned
    value.

    Args:
        epsilon: Privacy parameter, ``>= 0`` (at 0 the value is the total
            variation distance ``2 Phi(Delta / (2 sigma)) - 1``).
        sigma: Standard deviation of the added Gaussian noise, ``> 0``.
        sensitivity: L2 sensitivity ``Delta`` of the query, ``> 0``.

    Returns:
        delta in ``[0, 1]``.

    Raises:
        InvalidArgumentError: for a negative or non-finite ``epsilon``, or a
            non-positive ``sigma`` / ``sensitivity``.
    """
    eps = check_nonnegative("epsilon", epsilon)
    s = check_positive("sigma", sigma)
    d = check_positive("sensitivity", sensitivity)
    value = math.exp(_log_delta_ag(eps, d / s))
    return min(1.0, max(0.0, value))


def scoreshield_constant(epsilon: float, delta: float) -> float:
    """ScoreShield's calibration constant ``c = 2 ln(2/delta) / epsilon^2``.

    The ScoreShield paper adds Gaussian noise with variance ``c * Delta^2``.  The
    rule is a valid (epsilon, delta) calibration only for ``epsilon < 1``.

    Args:
        epsilon: Privacy parameter, ``> 0``.
        delta: Privacy parameter in ``(0, 1)``.

    Returns:
        ``c`` (so that ``sigma = Delta * sqrt(c)``).
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    return 2.0 * math.log(2.0 / dlt) / eps**2


def _widen(x: float, sign: float, done: Callable[[float], bool], side: str, diagnostics: dict) -> float:
    """Step ``x`` by ``sign`` times 1, 2, 4, ... until ``done(x)``: one end of the log-sigma bracket."""
    step = 1.0
    for _ in range(200):
        if done(x):
            return x
        x += sign * step
        step *= 2.0
    # never reached: the profile tends to 1 as sigma -> 0 and to 0 as sigma -> inf
    raise ConvergenceError(f"could not bracket the analytic Gaussian sigma from {side}",  # pragma: no cover
                           diagnostics=diagnostics)


def _analytic_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """Smallest sigma with ``delta_AG(epsilon, sigma) <= delta`` (root search on log sigma)."""
    log_target = math.log(delta)

    def f(log_sigma: float) -> float:
        return _log_delta_ag(epsilon, sensitivity / math.exp(log_sigma)) - log_target

    # f is decreasing in sigma.  Start from the classic-style guess and widen.
    guess = math.log(sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon)
    diagnostics = {"epsilon": epsilon, "delta": delta}
    lo = _widen(guess, -1.0, lambda x: f(x) > 0, "below", diagnostics)
    hi = _widen(guess, 1.0, lambda x: f(x) <= 0, "above", diagnostics)
    # An absolute tolerance on log(sigma) is a relative tolerance on sigma.
    log_sigma = brentq(f, lo, hi, xtol=1e-13, rtol=_RTOL, maxiter=500)
    sigma = math.exp(log_sigma)
    # brentq may land a hair below the root; step up until the guarantee holds.
    for _ in range(64):
        if _log_delta_ag(epsilon, sensitivity / sigma) <= log_target:
            break
        sigma *= 1.0 + 1e-13
    return sigma


def gaussian_sigma(epsilon: float, delta: float, *, sensitivity: float = 1.0,
                   method: GaussianMethod = "analytic") -> float:
    """Noise standard deviation for the Gaussian mechanism.

    Args:
        epsilon: Privacy parameter, ``> 0``.
        delta: Privacy parameter in ``(0, 1)``.
        sensitivity: L2 sensitivity ``Delta`` of the released query, ``> 0``.
        method: ``"analytic"`` (Balle & Wang 2018; exact, any epsilon; the
            default), ``"classic"`` (``Delta sqrt(2 ln(1.25/delta))/epsilon``,
            only for ``epsilon < 1``) or ``"scoreshield"`` (the ScoreShield
            paper's ``Delta sqrt(2 ln(2/delta))/epsilon``).  **The ScoreShield rule
            is accepted at any epsilon so that the paper's noise can be
            reproduced, but it is a valid (epsilon, delta) calibration only for
            epsilon < 1**; above, compute the delta that really holds with
            :func:`analytic_gaussian_delta`.

    Returns:
        sigma (float).  The analytic value is the minimal sigma to a relative
        precision far below 1e-10 and always satisfies ``delta_AG <= delta``.

    Raises:
        InvalidArgumentError: out-of-range arguments, or ``method="classic"``
            with ``epsilon >= 1``.
        UnknownNameError: unknown ``method``.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    sens = check_positive("sensitivity", sensitivity)
    check_choice("method", method, GAUSSIAN_METHODS)
    if method == "classic":
        if eps >= 1.0:
            raise InvalidArgumentError(
                f"method='classic' requires epsilon < 1 (allowed range: (0, 1)), got epsilon={eps}: "
                "the classical Gaussian-mechanism theorem does not hold for epsilon >= 1. "
                "Use method='analytic', which is exact for every epsilon > 0."
            )
        return sens * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps
    if method == "scoreshield":
        return sens * math.sqrt(scoreshield_constant(eps, dlt))
    return _analytic_sigma(eps, dlt, sens)


def analytic_gaussian_epsilon(sigma: float, delta: float, *, sensitivity: float = 1.0) -> float:
    """Smallest epsilon for which Gaussian noise ``sigma`` gives (epsilon, delta)-DP.

    Inverse of :func:`analytic_gaussian_delta` in epsilon (``delta_AG`` is
    decreasing in epsilon).  Returns ``0.0`` when the noise is so large that
    even epsilon = 0 holds (the total variation distance is ``<= delta``).

    Args:
        sigma: Noise standard deviation, ``> 0``.
        delta: Privacy parameter in ``(0, 1)``.
        sensitivity: L2 sensitivity ``Delta``, ``> 0``.

    Returns:
        epsilon ``>= 0``, to a relative precision of about 1e-12.
    """
    s = check_positive("sigma", sigma)
    dlt = check_delta(delta)
    sens = check_positive("sensitivity", sensitivity)
    rho = sens / s
    log_target = math.log(dlt)

    def f(eps: float) -> float:
        return _log_delta_ag(eps, rho) - log_target

    if f(0.0) <= 0:
        return 0.0
    hi = max(1.0, rho * rho)
    for _ in range(2000):
        if f(hi) <= 0:
            break
        hi *= 2.0
    else:  # pragma: no cover
        raise ConvergenceError("could not bracket epsilon", diagnostics={"sigma": s, "delta": dlt})
    eps = brentq(f, 0.0, hi, xtol=1e-14, rtol=_RTOL, maxiter=500)
    for _ in range(64):  # make sure the returned epsilon really satisfies delta_AG <= delta
        if f(eps) <= 0:
            break
        eps = eps * (1.0 + 1e-13) + 1e-300
    return float(eps)


def laplace_scale(epsilon: float, *, sensitivity: float = 1.0) -> float:
    """Scale ``b = Delta / epsilon`` of the Laplace mechanism (pure epsilon-DP, L1 sensitivity).

    Args:
        epsilon: Privacy parameter, ``> 0``.
        sensitivity: L1 sensitivity ``Delta`` of the query, ``> 0``.

    Returns:
        The Laplace scale ``b``.
    """
    eps = check_epsilon(epsilon)
    sens = check_positive("sensitivity", sensitivity)
    return sens / eps
