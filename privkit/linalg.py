"""Linear algebra shared by the wings: the leading singular directions of a matrix given by its rows.

Two wings need the same primitive: ISP's projection removes the leading left singular vectors of the centred
identity-mean matrix, and SynthesisNet's linear path projects images onto the leading principal directions of their
between- and within-identity scatter. Both matrices are short and wide (a few hundred rows of a few thousand
columns), so :func:`top_singular_directions` solves the smaller of the two symmetric eigenproblems by default.

* :func:`top_singular_directions` — ``(u, s)`` with ``rows = (u diag(s) w)ᵀ`` for some orthonormal ``w``: the
  columns of ``u`` are the right singular vectors of ``rows`` (equivalently the left singular vectors of ``rowsᵀ``),
  in descending order of ``s``; columns whose singular value is below ``rtol · s₁`` are zero on the Gram route
  (they carry no direction). Neither route is randomised.
* :func:`numerical_rank` — how many singular values exceed ``rtol · s₁``.

Signs of singular vectors are the eigensolver's choice; callers that need reproducible signs fix them.
"""

from __future__ import annotations

from typing import Literal

import torch

from ._validate import check_choice, check_positive, check_tensor
from .errors import ShapeError

__all__ = ["RANK_RTOL", "SOLVERS", "numerical_rank", "top_singular_directions"]

#: Singular values below ``RANK_RTOL * s₁`` count as zero. Class means of float32 embeddings are accurate to about
#: 1e-7 relative, and the Gram route resolves s down to about sqrt(eps64) s₁ ≈ 1.5e-8 s₁.
RANK_RTOL = 1e-6

#: Routes of :func:`top_singular_directions`.
SOLVERS: tuple[str, ...] = ("gram", "svd")


def top_singular_directions(rows: torch.Tensor, *, solver: Literal["gram", "svd"] = "gram",
                            rtol: float = RANK_RTOL) -> tuple[torch.Tensor, torch.Tensor]:
    """Singular directions and values of the ``(m, d)`` matrix ``rows``, descending, in its dtype.

    Args:
        rows: ``(m, d)`` floating-point matrix (callers pass float64 where the directions matter).
        solver: ``"gram"`` solves the eigenproblem of the smaller of ``rows rowsᵀ`` (m × m) and ``rowsᵀ rows``
            (d × d); ``"svd"`` takes the thin SVD (LAPACK gesdd).
        rtol: on the ``m <= d`` Gram route, directions whose singular value is at most ``rtol · s₁`` are returned
            as zero columns (dividing by a vanishing singular value would only amplify rounding).

    Raises:
        ShapeError, InvalidArgumentError: ``rows`` not a non-empty finite floating matrix; bad ``solver`` or ``rtol``.

    Returns:
        ``(u, s)``: ``u`` is ``(d, min(m, d))`` (``(d, d)`` on the ``m > d`` Gram route), its columns the unit
        directions in ``d``-space in descending order of the singular values ``s``.
    """
    check_tensor("rows", rows, ndim=2, floating=True)
    check_choice("solver", solver, SOLVERS)
    rtol = check_positive("rtol", rtol)
    m, d = rows.shape
    if m == 0 or d == 0:
        raise ShapeError(f"rows must have at least one row and one column, got shape {(m, d)}")
    if solver == "svd":
        _, s, vh = torch.linalg.svd(rows, full_matrices=False)  # rows = U' S Vh  ->  rowsᵀ = Vhᵀ S U'ᵀ
        return vh.T, s
    if m <= d:
        evals, v = torch.linalg.eigh(rows @ rows.T)  # (m, m)
        evals, v = evals.flip(0), v.flip(1)
        s = evals.clamp(min=0).sqrt()
        keep = s > rtol * s[0].clamp(min=torch.finfo(s.dtype).tiny)
        u = torch.zeros(d, m, dtype=rows.dtype, device=rows.device)
        u[:, keep] = (rows.T @ v[:, keep]) / s[keep]
        return u, s
    evals, u = torch.linalg.eigh(rows.T @ rows)  # (d, d)
    return u.flip(1), evals.flip(0).clamp(min=0).sqrt()


def numerical_rank(s: torch.Tensor, *, rtol: float = RANK_RTOL) -> int:
    """How many of the descending singular values ``s`` exceed ``rtol · s[0]`` (0 when ``s`` is empty or zero)."""
    if s.numel() == 0 or float(s[0]) <= 0:
        return 0
    return int((s > rtol * s[0]).sum())
