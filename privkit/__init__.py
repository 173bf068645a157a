"""privkit: reproducible implementations of four privacy papers for face and image data.

Subpackages: ``privacy`` (shared DP primitives), ``isp``, ``dppose``,
``scoreshield``, ``synthesisnet`` (one per paper), ``data`` and ``encoders``.
"""

from __future__ import annotations

__version__ = "0.1.0"

from . import config
from .device import resolve_device
from .errors import (ConvergenceError, InsufficientDataError, InvalidArgumentError, MissingResourceError,
                     NotUnitNormError, PrivacyBudgetError, PrivkitError, ShapeError, UnknownNameError, WeightFileError)

__all__ = ["__version__", "config", "resolve_device", "PrivkitError", "InvalidArgumentError", "UnknownNameError",
           "ShapeError", "NotUnitNormError", "InsufficientDataError", "MissingResourceError", "ConvergenceError",
           "PrivacyBudgetError", "WeightFileError"]
