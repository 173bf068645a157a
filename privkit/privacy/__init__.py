"""Shared differential-privacy primitives used by every privkit mechanism.

- :mod:`~privkit.privacy.calibration`: Gaussian (analytic, classic, ScoreShield)
  and Laplace noise calibration, and the exact delta/epsilon of a given
  Gaussian noise level.
- :mod:`~privkit.privacy.samplers`: generator-driven Gaussian, Laplace, Gamma
  and multivariate (metric-DP) Laplace samplers; ``make_generator``.
  Floating-point samplers are not hardened against floating-point attacks
  (Mironov 2012); see that module.
- :mod:`~privkit.privacy.guarantee`: :class:`PrivacyGuarantee`, returned with
  every release, with its :class:`Neighbouring` relation and its mechanism as a
  ``dp_accounting`` DpEvent.
- :mod:`~privkit.privacy.accounting`: DP-SGD accounting through opacus (RDP,
  PRV; add/remove) and dp-accounting (PLD; add/remove or substitution).
- :mod:`~privkit.privacy.audit`: black-box lower bounds on epsilon.

This subpackage depends only on ``privkit.errors``, ``privkit._validate`` and
``privkit.device``.
"""

from __future__ import annotations

from .accounting import (ACCOUNTANTS, NEIGHBOURINGS, accountant_for, epsilon_from_history, epsilon_spent,
                         noise_multiplier_for)
from .audit import AuditResult, audit, batch_mechanism, epsilon_lower_bound
from .calibration import (GAUSSIAN_METHODS, analytic_gaussian_delta, analytic_gaussian_epsilon, gaussian_sigma,
                          laplace_scale, scoreshield_constant)
from .guarantee import Neighbouring, PrivacyGuarantee
from .samplers import (make_generator, poisson_subset, sample_gamma, sample_gaussian, sample_laplace,
                       sample_metric_laplace)

__all__ = ["GAUSSIAN_METHODS", "gaussian_sigma", "scoreshield_constant", "analytic_gaussian_delta",
           "analytic_gaussian_epsilon", "laplace_scale", "make_generator", "sample_gaussian", "sample_laplace",
           "sample_gamma", "sample_metric_laplace", "poisson_subset", "PrivacyGuarantee", "Neighbouring", "ACCOUNTANTS",
           "NEIGHBOURINGS", "accountant_for", "epsilon_spent", "epsilon_from_history", "noise_multiplier_for",
           "AuditResult", "audit", "batch_mechanism", "epsilon_lower_bound"]
