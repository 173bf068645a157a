"""Shared argument checks.  Explicit checks that raise privkit errors; never ``assert``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from .errors import (
    InsufficientDataError,
    InvalidArgumentError,
    NotUnitNormError,
    ShapeError,
    UnknownNameError,
)

#: Default tolerance on | ||x||_2 - 1 | for embeddings that must be unit norm.
#: float32 normalisation leaves errors around 1e-7; 1e-4 leaves room for
#: embeddings written to disk at reduced precision but still rejects
#: un-normalised inputs.
UNIT_NORM_TOL = 1e-4


def check_real(name: str, value: Any) -> float:
    """A finite real number (not bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not (
        hasattr(value, "__float__") and not isinstance(value, (str, bytes))
    ):
        raise InvalidArgumentError(f"{name} must be a finite real number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise InvalidArgumentError(f"{name} must be finite, got {v}")
    return v


def check_positive(name: str, value: Any) -> float:
    """A finite real number > 0."""
    v = check_real(name, value)
    if v <= 0:
        raise InvalidArgumentError(f"{name} must be > 0 (allowed range: (0, inf)), got {v}")
    return v


def check_nonnegative(name: str, value: Any) -> float:
    v = check_real(name, value)
    if v < 0:
        raise InvalidArgumentError(f"{name} must be >= 0 (allowed range: [0, inf)), got {v}")
    return v


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """Privacy parameter epsilon: finite and > 0."""
    return check_positive(name, value)


def check_delta(value: Any, name: str = "delta", *, allow_zero: bool = False) -> float:
    """Privacy parameter delta in (0, 1) (or [0, 1) with ``allow_zero``)."""
    return check_probability(name, value, open_low=not allow_zero)


def check_probability(name: str, value: Any, *, open_low: bool = True, open_high: bool = True) -> float:
    v = check_real(name, value)
    lo = v > 0 if open_low else v >= 0
    hi = v < 1 if open_high else v <= 1
    if not (lo and hi):
        rng = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise InvalidArgumentError(f"{name} must lie in {rng}, got {v}")
    return v


def check_int(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    if isinstance(value, np.integer):
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum or maximum is not None and value > maximum:
        lo = "-inf" if minimum is None else str(minimum)
        hi = "inf" if maximum is None else str(maximum)
        raise InvalidArgumentError(f"{name} must lie in [{lo}, {hi}], got {value}")
    return int(value)


def check_choice(name: str, value: Any, choices: Iterable[str]) -> str:
    choices = list(choices)
    if value not in choices:
        raise UnknownNameError(name, value, choices)
    return value


def all_finite(x: torch.Tensor) -> bool:
    """Whether every entry of ``x`` is finite (no NaN, no inf); exact, and fast when they are.

    A NaN or an infinity in ``x`` makes its sum NaN or infinite, so a finite sum proves every entry finite with one
    reduction (no boolean copy of ``x``); only a non-finite sum (a NaN or inf, or an overflow of finite values) is
    settled by the element-wise test.
    """
    if not x.is_floating_point() and not x.is_complex():
        return True
    if x.numel() == 0 or bool(torch.isfinite(x.sum())):
        return True
    return bool(torch.isfinite(x).all())


def check_tensor(
    name: str,
    x: Any,
    *,
    ndim: int | Sequence[int] | None = None,
    shape: Sequence[int | None] | None = None,
    finite: bool = True,
    floating: bool = False,
) -> torch.Tensor:
    """A torch tensor with the given rank/shape and (by default) only finite entries."""
    if not isinstance(x, torch.Tensor):
        raise InvalidArgumentError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if x.ndim not in allowed:
            raise ShapeError(f"{name} must have {' or '.join(map(str, allowed))} dimensions, got shape {tuple(x.shape)}")
    if shape is not None:
        if x.ndim != len(shape) or any(s is not None and s != xs for s, xs in zip(shape, x.shape)):
            want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise ShapeError(f"{name} must have shape {want}, got {tuple(x.shape)}")
    if floating and not x.is_floating_point():
        raise InvalidArgumentError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if finite and x.is_floating_point() and not all_finite(x):
        raise InvalidArgumentError(f"{name} contains NaN or inf values; all entries must be finite")
    return x


def check_image_batch(name: str, images: Any, *, unit_range: bool = True, nonempty: bool = False) -> torch.Tensor:
    """A floating-point ``(N, 3, H, W)`` image batch of finite values in [0, 1].

    Args:
        name: the argument's name, for the messages.
        images: the value to check.
        unit_range: also require values in [0, 1] (``False``: any finite values).
        nonempty: also require H >= 1 and W >= 1.

    Returns:
        ``images`` itself.

    Raises:
        ShapeError: not 4-D, not 3 channels, or (with ``nonempty``) an empty side.
        InvalidArgumentError: not a floating-point tensor, NaN or inf, or values outside [0, 1].
    """
    check_tensor(name, images, ndim=4, floating=True)
    if images.shape[1] != 3:
        raise ShapeError(f"{name} must have 3 channels (N, 3, H, W), got shape {tuple(images.shape)}")
    if nonempty and (images.shape[2] < 1 or images.shape[3] < 1):
        raise ShapeError(f"{name} must have H >= 1 and W >= 1, got shape {tuple(images.shape)}")
    values = images.detach()
    if unit_range and values.numel() and (float(values.min()) < 0.0 or float(values.max()) > 1.0):
        raise InvalidArgumentError(f"{name} must have values in [0, 1]")
    return images


def check_unit_norm(name: str, x: torch.Tensor, *, tol: float = UNIT_NORM_TOL) -> torch.Tensor:
    """Rows of ``x`` (shape (..., d)) must have L2 norm 1 within ``tol``."""
    check_tensor(name, x, floating=True)
    norms = torch.linalg.vector_norm(x.double(), dim=-1)
    worst = float((norms - 1).abs().max()) if norms.numel() else 0.0
    if worst > tol:
        raise NotUnitNormError(
            f"{name} must have unit L2 norm along its last dimension (tolerance {tol:g}); "
            f"the worst row is off by {worst:.3g}. Normalise with x / x.norm(dim=-1, keepdim=True)."
        )
    return x


def check_min_count(name: str, count: int, minimum: int, what: str) -> None:
    if count < minimum:
        raise InsufficientDataError(f"{name}: need at least {minimum} {what}, got {count}")


def check_columns(name: str, table: Any, columns: Iterable[str]) -> Any:
    """A table (a pandas DataFrame, or anything with ``columns``) that has every column of ``columns``."""
    if not hasattr(table, "columns") or not hasattr(table, "loc"):
        raise InvalidArgumentError(f"{name} must be a pandas DataFrame, got {type(table).__name__}")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InvalidArgumentError(f"{name} lacks the columns {missing}")
    return table
