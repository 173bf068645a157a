"""Public gradient subspace for projected DP-SGD (paper 2, §2.2 b).

Given ``m`` per-sample gradients ``G in R^{m x p}`` of a **public** set
(disjoint from the private data), the top-``k`` eigenvectors of the gradient
second moment ``M = G^T G / m`` are found without forming the ``p x p`` matrix:
eigendecompose the small Gram matrix ``K = G G^T = V Lambda V^T`` (``m x m``,
float64) and set ``V_hat = G^T V_k Lambda_k^{-1/2}``.  Its columns are
orthonormal and span the top-``k`` eigenspace of ``G^T G`` (cost ``O(m^2 p)``
plus an ``m x m`` ``eigh``).  Projecting the *noisy* private gradient on
``span(V_hat)`` is post-processing, so the DP guarantee is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from .._validate import check_int, check_positive, check_tensor
from ..errors import InsufficientDataError, InvalidArgumentError, ShapeError
from .grads import flatten_grads, per_sample_grads

__all__ = ["PublicSubspace", "public_subspace", "public_subspace_from_model"]

#: Columns per float64 chunk in :func:`public_subspace`.
_CHUNK = 8192


@dataclass(frozen=True)
class PublicSubspace:
    """An orthonormal basis of the top public-gradient directions.

    Attributes:
        basis: (p, r) orthonormal columns ``V_hat`` (a transposed view of a
            contiguous (r, p) tensor; ``r <= k``; ``r < k`` only
            with ``allow_lower_rank=True`` when the public gradients span fewer
            than ``k`` directions).
        eigenvalues: (r,) eigenvalues of the second moment ``G^T G / m``, descending.
        k: The requested rank.
        n_public: ``m``, the number of public gradients.
    """

    basis: torch.Tensor
    eigenvalues: torch.Tensor
    k: int
    n_public: int

    @property
    def rank(self) -> int:
        """Number of basis vectors ``r``."""
        return int(self.basis.shape[1])

    @property
    def dim(self) -> int:
        """Ambient dimension ``p``."""
        return int(self.basis.shape[0])

    def project(self, v: torch.Tensor) -> torch.Tensor:
        """``V_hat V_hat^T v`` for ``v`` of shape ``(p,)`` or ``(..., p)``."""
        if v.shape[-1] != self.dim:
            raise ShapeError(f"v must have last dimension {self.dim}, got shape {tuple(v.shape)}")
        rows = self.basis.T.to(device=v.device, dtype=v.dtype)  # (r, p), contiguous as built
        return (v @ rows.T) @ rows

    def projector(self) -> torch.Tensor:
        """The dense ``p x p`` projector ``V_hat V_hat^T`` (only for small ``p``)."""
        return self.basis @ self.basis.T


def public_subspace(public_grads: torch.Tensor, *, k: int, rtol: float = 1e-8,
                    allow_lower_rank: bool = False) -> PublicSubspace:
    """Top-``k`` eigenvectors of ``G^T G`` by the ``m x m`` Gram trick.

    Args:
        public_grads: (m, p) public per-sample (or micro-batch) gradients.
        k: Rank, ``1 <= k <= m``.
        rtol: Eigenvalues ``<= rtol * lambda_max`` count as zero.
        allow_lower_rank: When the gradients span fewer than ``k`` directions,
            return the ``r < k`` available ones instead of raising.

    Returns:
        A :class:`PublicSubspace`; the basis has the dtype and device of
        ``public_grads`` (the linear algebra runs in float64).

    Raises:
        InvalidArgumentError: ``k`` outside ``[1, m]`` or bad ``rtol``.
        InsufficientDataError: fewer than ``k`` non-zero eigenvalues (unless
            ``allow_lower_rank``), or ``m = 0``.
    """
    # finiteness is checked on the Gram diagonal below (K_ii = ||g_i||^2 is finite iff row i is),
    # which is far cheaper than scanning the (m, p) matrix
    check_tensor("public_grads", public_grads, ndim=2, floating=True, finite=False)
    m, _p = public_grads.shape
    if m == 0:
        raise InsufficientDataError("public_grads: the public set is empty; need at least k public gradients")
    k = check_int("k", k, minimum=1, maximum=int(m))
    tol = check_positive("rtol", rtol)
    # float64 work in column chunks: the (m, p) matrix is never copied to float64 as a whole
    chunks = range(0, public_grads.shape[1], _CHUNK)
    gram = public_grads.new_zeros((m, m), dtype=torch.float64)
    for c in chunks:
        gc = public_grads[:, c:c + _CHUNK].double()
        gram += gc @ gc.T
    if not bool(torch.isfinite(gram.diagonal()).all()):
        raise InvalidArgumentError("public_grads contains NaN or inf values (or overflows); all entries must be finite")
    evals, evecs = torch.linalg.eigh(gram)  # ascending
    evals = evals.flip(0)[:k]
    evecs = evecs.flip(1)[:, :k]
    lam_max = float(evals[0]) if evals.numel() else 0.0
    keep = evals > tol * max(lam_max, 0.0)
    if lam_max <= 0:
        keep = torch.zeros_like(keep)
    r = int(keep.sum())
    if r < k and not allow_lower_rank:
        raise InsufficientDataError(f"the {m} public gradients span only {r} directions (eigenvalues > {tol:g} x the "
                                    f"largest); k={k} needs at least k independent public gradients")
    if r == 0:
        raise InsufficientDataError("the public gradients are all zero; no subspace can be estimated")
    evals, evecs = evals[:r], evecs[:, :r]
    # rows of V_hat^T = Lambda^{-1/2} V_k^T G, formed as one (r x m) @ (m x p) product and kept
    # contiguous as (r, p): projecting then reads memory in order.
    coef = (evecs / evals.sqrt()).T.contiguous()
    rows = public_grads.new_empty((r, public_grads.shape[1]))
    for c in chunks:
        rows[:, c:c + _CHUNK] = coef @ public_grads[:, c:c + _CHUNK].double()
    return PublicSubspace(basis=rows.T, eigenvalues=(evals / m).to(public_grads.dtype), k=k, n_public=int(m))


def public_subspace_from_model(model: nn.Module, loss_fn: Callable[..., torch.Tensor],
                               public_batch: Sequence[torch.Tensor], *, k: int, method: str = "auto",
                               allow_lower_rank: bool = False) -> PublicSubspace:
    """Per-sample gradients of ``public_batch`` at the current weights, then :func:`public_subspace`.

    Args:
        model: The network.
        loss_fn: ``loss_fn(output, *targets)`` -> mean loss.
        public_batch: ``(inputs, *targets)`` of ``m`` **public** samples
            (disjoint from the private data).
        k: Rank.
        method: Per-sample gradient method (see :func:`~privkit.dppose.grads.per_sample_grads`).
        allow_lower_rank: See :func:`public_subspace`.

    Returns:
        A :class:`PublicSubspace` over the flattened trainable parameters
        (``named_parameters`` order).
    """
    grads = per_sample_grads(model, loss_fn, public_batch, method=method)
    return public_subspace(flatten_grads(grads, batched=True).detach(), k=k, allow_lower_rank=allow_lower_rank)
