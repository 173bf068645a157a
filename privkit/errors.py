"""The privkit error hierarchy.

Every error privkit raises on purpose is a :class:`PrivkitError`, itself a
``ValueError`` so that callers who already catch ``ValueError`` keep working
(the opacus convention).  Messages always name the offending argument and the
range or the set of values that would have been accepted.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["PrivkitError", "InvalidArgumentError", "WeightFileError", "UnknownNameError", "ShapeError",
           "NotUnitNormError", "InsufficientDataError", "MissingResourceError", "ConvergenceError", "PrivacyBudgetError"]


class PrivkitError(ValueError):
    """Base class of every error privkit raises deliberately."""


class InvalidArgumentError(PrivkitError):
    """An argument is outside its allowed range (NaN/inf, epsilon <= 0, ...)."""


class WeightFileError(InvalidArgumentError):
    """A weight file that cannot be read or does not fit the network its loader builds (a truncated file, another
    architecture, missing or unexpected keys); the message names the file and what was expected."""


class UnknownNameError(PrivkitError):
    """A name (paper, scale, encoder, dataset, method, ...) is not registered."""

    def __init__(self, argument: str, value: object, valid: Iterable[str]):
        self.argument = argument
        self.value = value
        self.valid = sorted(str(v) for v in valid)
        super().__init__(f"{argument}={value!r} is not known; valid values are: {', '.join(self.valid)}")


class ShapeError(PrivkitError):
    """A tensor has the wrong number of dimensions or the wrong size."""


class NotUnitNormError(PrivkitError):
    """Embeddings that must lie on the unit sphere do not."""


class InsufficientDataError(PrivkitError):
    """Too few identities, samples, shots or pairs for the requested protocol."""


class MissingResourceError(PrivkitError, FileNotFoundError):
    """A dataset or weight file that cannot be downloaded here is absent.

    The message says what to download, from where, and where to put it.
    """

    def __init__(self, what: str, *, expected_at: str, how_to_get: str):
        self.what = what
        self.expected_at = expected_at
        self.how_to_get = how_to_get
        super().__init__(f"{what} was not found at {expected_at}. {how_to_get} "
                         "privkit never downloads data or weights at run time.")


class ConvergenceError(PrivkitError):
    """An iterative solver hit its iteration limit; carries its residuals."""

    def __init__(self, message: str, *, diagnostics: dict | None = None):
        self.diagnostics = dict(diagnostics or {})
        super().__init__(message)


class PrivacyBudgetError(PrivkitError):
    """A privacy target cannot be met with the given parameters."""
