"""Projection of noisy similarity matrices onto the correlation matrices (the elliptope).

The feasible set of a cosine Gram matrix of unit vectors is the *elliptope*

    C = {X symmetric : X ⪰ 0, diag(X) = 1},

and PSD together with a unit diagonal already implies |X_ij| <= 1.  After the
Gaussian mechanism of ScoreShield regime (ii) the released matrix S' = S + G
leaves C; projecting it back is post-processing and costs no privacy.

Three solvers are offered by :func:`nearest_correlation`:

``"newton"`` (default)
    The dual semismooth Newton method of Qi & Sun (2006).  It minimises the
    convex dual  θ(y) = ½‖(A + Diag(y))₊‖²_F − Σ_i y_i,  whose gradient is
    F(y) = diag((A + Diag(y))₊) − 1.  Each iteration uses one eigendecomposition
    of A + Diag(y), an element V of the generalised Jacobian of F (built from
    that eigendecomposition, applied matrix-free inside preconditioned
    conjugate gradients) and an Armijo line search on θ.  It converges
    quadratically to the *nearest* correlation matrix.  The returned matrix is
    (A + Diag(y))₊ with its diagonal rescaled to one (exactly PSD and unit
    diagonal) and the diagnostics carry a certificate: the dual gradient norm
    ‖F(y)‖ and the duality gap ½‖X − A‖² − (½‖A‖² − θ(y)), an upper bound on
    how far the objective is from the optimum.

``"dykstra"``
    Higham (2002): alternating projections onto the PSD cone and onto the
    unit-diagonal matrices with Dykstra's correction on the PSD step, which
    makes alternating projections converge to the nearest point (linearly, and
    often slowly).  Stops when the relative changes of both iterates and the
    relative gap between them are all below ``tol``.

``"aap"``
    ScoreShield's Algorithm 3/6 (averaged alternating projections), verbatim:
    Krasnosel'skiĭ–Mann averaging Ŝ ← ½(P + Q) of the PSD projection P and the
    box projection Q (unit diagonal, off-diagonals clipped to [−1, 1]), the
    paper's two-part stopping rule, then a final PSD projection and diagonal
    rescale.  The result is feasible but in general *not* the nearest point.
    The stopping rule is applied in relative form (changes and gaps divided by
    max(1, ‖·‖_F)), as in the paper's experiments (App. K.1: relative change
    < 1e-7, at most 500 iterations); the optional Frobenius-ball rescaling of
    Algorithm 3 is omitted, since the paper notes it is not needed with the box
    step.

:func:`clip_to_correlation` is the one-eigendecomposition shortcut (clip the
negative eigenvalues, rescale to a unit diagonal): AAP's final step alone.

All eigendecompositions run in float64 (``torch.linalg.eigh``) on the input's
device (or ``device=``); inputs of shape ``(..., n, n)`` are processed as a
batch.  The result has the input's dtype and device.

Asymmetric inputs are **symmetrised**, not rejected: for symmetric X,
‖X − A‖²_F = ‖X − ½(A + Aᵀ)‖²_F + ‖½(A − Aᵀ)‖²_F, so the nearest correlation
matrix to A is the nearest one to ½(A + Aᵀ).  Non-square, non-floating or
non-finite inputs raise privkit errors.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch

from .._validate import check_choice, check_int, check_positive, check_tensor
from ..device import resolve_device
from ..errors import ConvergenceError, ShapeError

__all__ = [
    "symmetric_from_upper",
    "NearestCorrelationDiagnostics",
    "nearest_correlation",
    "clip_to_correlation",
    "correlation_residuals",
    "METHODS",
    "DEFAULT_MAX_ITER",
]

Method = Literal["newton", "dykstra", "aap"]
METHODS: tuple[str, ...] = ("newton", "dykstra", "aap")

#: Default iteration limits: Newton steps, Dykstra sweeps, AAP sweeps (the
#: paper's "at most 500 iterations", App. K.1).
DEFAULT_MAX_ITER: dict[str, int] = {"newton": 200, "dykstra": 20000, "aap": 500}


@dataclass(frozen=True)
class NearestCorrelationDiagnostics:
    """What a correlation projection did and how feasible its output is.

    For a batch, counts are summed (``eigendecompositions``) or maximised
    (``iterations``), residuals are the worst over the batch, and distances are
    Frobenius norms over the whole stack.

    Attributes:
        method: solver name (``"newton"``, ``"dykstra"``, ``"aap"``, ``"clip"``).
        converged: whether every matrix met the stopping rule.
        iterations: solver iterations (Newton steps / projection sweeps), max over the batch.
        eigendecompositions: full float64 ``eigh`` calls the solver made (line-search
            trials included), summed over the batch; the verification below is not counted.
        max_diag_error: max |diag(X) − 1| of the returned matrix.
        min_eigenvalue: smallest eigenvalue of the returned matrix (one extra ``eigvalsh``
            per matrix), or ``None`` when not verified.
        distance: ‖X − sym(A)‖_F, the distance moved from the (symmetrised) input.
        relative_change: the last relative change of the iterate (dykstra/aap), else ``None``.
        dual_gradient_norm: Newton only: ‖diag((A + Diag(y))₊) − 1‖₂ at the final dual point.
        duality_gap: Newton only: ½‖X − A‖²_F − (½‖A‖²_F − θ(y)) ≥ 0 (up to rounding), an
            upper bound on ½‖X − A‖²_F − ½‖X* − A‖²_F for the true nearest point X*.
        cg_iterations: Newton only: conjugate-gradient iterations in total.
        batch_size: number of matrices processed.
    """

    method: str
    converged: bool
    iterations: int
    eigendecompositions: int
    max_diag_error: float
    min_eigenvalue: float | None
    distance: float
    relative_change: float | None = None
    dual_gradient_norm: float | None = None
    duality_gap: float | None = None
    cg_iterations: int | None = None
    batch_size: int = 1
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """A plain dict (for tables, JSON and error messages)."""
        return asdict(self)


# ----------------------------------------------------------------------------------------
# small shared pieces
# ----------------------------------------------------------------------------------------


def symmetric_from_upper(X: torch.Tensor) -> torch.Tensor:
    """The symmetric matrix (or batch) whose upper triangle, diagonal included, is ``X``'s.

    Every entry below the diagonal is a *copy* of its mirror above it, so the result is
    bitwise symmetric on any device, dtype, CPU or BLAS kernel.  A released matrix must be
    symmetric by construction: ``E @ E.T`` is not bitwise symmetric under every GEMM kernel
    (MKL's AVX2 path on AMD rounds about 5 % of mirrored entries differently), and an
    asymmetry that the symmetric noise does not cover is a noise-free function of the private
    rows (docs/privacy.md, "Symmetric by construction").
    """
    if X.ndim < 2 or X.shape[-1] != X.shape[-2]:
        raise ShapeError(f"X must have shape (..., n, n), got {tuple(X.shape)}")
    n = X.shape[-1]
    upper = torch.ones(n, n, dtype=torch.bool, device=X.device).triu()
    return torch.where(upper, X, X.transpose(-1, -2))


def _prepare(A: torch.Tensor, device: str | torch.device | None) -> tuple[torch.Tensor, tuple[int, ...]]:
    """Validate, symmetrise, move to the compute device, flatten the batch, cast to float64."""
    check_tensor("A", A, floating=True)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"A must be a square matrix or a batch of them, shape (..., n, n); got {tuple(A.shape)}")
    if A.shape[-1] < 1:
        raise ShapeError("A must be at least 1 x 1")
    dev = A.device if device is None else resolve_device(device)
    G = A.detach().to(device=dev, dtype=torch.float64)
    G = 0.5 * (G + G.transpose(-1, -2))
    batch_shape = tuple(G.shape[:-2])
    n = G.shape[-1]
    return G.reshape(-1, n, n), batch_shape


def _psd_part(G: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(G)₊ by one eigendecomposition; also returns eigenvalues and vectors."""
    lam, P = torch.linalg.eigh(G)
    lam_pos = lam.clamp_min(0.0)
    X = (P * lam_pos.unsqueeze(-2)) @ P.transpose(-1, -2)
    return 0.5 * (X + X.transpose(-1, -2)), lam, P


def _rescale_unit_diagonal(X: torch.Tensor) -> torch.Tensor:
    """D^{-1/2} X D^{-1/2} with D = diag(X), exactly unit diagonal.

    As in the paper's final step: where some diagonal entry is <= 0 (a zero
    row of a PSD matrix) add μI with μ = 1e-8‖X‖_F/n first (μ = 1 when X = 0).
    """
    n = X.shape[-1]
    d = torch.diagonal(X, dim1=-2, dim2=-1)
    bad = (d <= 0).any(dim=-1)
    if bool(bad.any()):
        mu = 1e-8 * torch.linalg.matrix_norm(X) / n
        mu = torch.where(mu > 0, mu, torch.ones_like(mu))
        eye = torch.eye(n, dtype=X.dtype, device=X.device)
        X = torch.where(bad[:, None, None], X + mu[:, None, None] * eye, X)
        d = torch.diagonal(X, dim1=-2, dim2=-1)
    s = d.rsqrt()
    X = X * s.unsqueeze(-1) * s.unsqueeze(-2)
    X = 0.5 * (X + X.transpose(-1, -2))
    X.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    return X


def correlation_residuals(X: torch.Tensor) -> dict[str, float]:
    """Feasibility residuals of (a batch of) candidate correlation matrices.

    Args:
        X: tensor of shape ``(..., n, n)``.

    Returns:
        ``{"min_eigenvalue", "max_diag_error", "max_asymmetry", "max_abs_offdiag"}``, each the worst
        over the batch, computed in float64 (one ``eigvalsh`` per matrix).
    """
    check_tensor("X", X, floating=True)
    if X.ndim < 2 or X.shape[-1] != X.shape[-2]:
        raise ShapeError(f"X must have shape (..., n, n), got {tuple(X.shape)}")
    Y = X.detach().double()
    n = Y.shape[-1]
    sym = 0.5 * (Y + Y.transpose(-1, -2))
    off = Y.masked_fill(torch.eye(n, dtype=torch.bool, device=Y.device), 0.0)
    return {
        "min_eigenvalue": float(torch.linalg.eigvalsh(sym).min()),
        "max_diag_error": float((torch.diagonal(Y, dim1=-2, dim2=-1) - 1).abs().max()),
        "max_asymmetry": float((Y - Y.transpose(-1, -2)).abs().max()),
        "max_abs_offdiag": float(off.abs().max()) if n > 1 else 0.0,
    }


def _finish(
    X: torch.Tensor,
    G: torch.Tensor,
    A: torch.Tensor,
    batch_shape: tuple[int, ...],
    *,
    verify: bool,
    **fields,
) -> tuple[torch.Tensor, NearestCorrelationDiagnostics]:
    n = X.shape[-1]
    diag_err = float((torch.diagonal(X, dim1=-2, dim2=-1) - 1).abs().max())
    min_eig = float(torch.linalg.eigvalsh(X).min()) if verify else None
    dist = float(torch.linalg.vector_norm(X - G))
    diag = NearestCorrelationDiagnostics(
        max_diag_error=diag_err,
        min_eigenvalue=min_eig,
        distance=dist,
        batch_size=X.shape[0],
        **fields,
    )
    out = symmetric_from_upper(X.reshape(*batch_shape, n, n).to(device=A.device, dtype=A.dtype))
    return out, diag


# ----------------------------------------------------------------------------------------
# one-eigh clip
# ----------------------------------------------------------------------------------------


def clip_to_correlation(
    A: torch.Tensor,
    *,
    device: str | torch.device | None = None,
    return_diagnostics: bool = False,
    verify: bool = True,
) -> torch.Tensor | tuple[torch.Tensor, NearestCorrelationDiagnostics]:
    """Cheap feasible correction: clip negative eigenvalues, then rescale to a unit diagonal.

    One float64 eigendecomposition per matrix.  This is exactly the final step
    of ScoreShield's AAP (Algorithm 3, step 3) applied to the noisy input: the
    output is PSD with unit diagonal but it is not the nearest such matrix.

    Args:
        A: ``(..., n, n)`` floating tensor (symmetrised if asymmetric).
        device: where to compute (default: ``A``'s device); the result returns to ``A``'s device.
        return_diagnostics: also return a :class:`NearestCorrelationDiagnostics`.
        verify: with ``return_diagnostics``, compute the output's minimum eigenvalue.

    Returns:
        The projected matrix (dtype and device of ``A``), and the diagnostics if asked.
    """
    G, batch_shape = _prepare(A, device)
    X, _, _ = _psd_part(G)
    X = _rescale_unit_diagonal(X)
    out, diag = _finish(
        X, G, A, batch_shape, verify=verify and return_diagnostics,
        method="clip", converged=True, iterations=1, eigendecompositions=G.shape[0],
    )
    return (out, diag) if return_diagnostics else out


# ----------------------------------------------------------------------------------------
# AAP (ScoreShield Algorithm 3/6)
# ----------------------------------------------------------------------------------------


def _box_projection(Y: torch.Tensor) -> torch.Tensor:
    Q = Y.clamp(-1.0, 1.0)
    Q.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    return Q


def _aap(G: torch.Tensor, tol: float, max_iter: int) -> tuple[torch.Tensor, dict]:
    B = G.shape[0]
    S = G.clone()
    active = torch.ones(B, dtype=torch.bool, device=G.device)
    iters = torch.zeros(B, dtype=torch.long)
    eighs = 0
    last_change = torch.full((B,), float("inf"), dtype=torch.float64)
    last_gap = torch.full((B,), float("inf"), dtype=torch.float64)
    for _ in range(max_iter):
        idx = active.nonzero().flatten()
        if idx.numel() == 0:
            break
        St = S[idx]
        Y = 0.5 * (St + St.transpose(-1, -2))
        P, _, _ = _psd_part(Y)
        eighs += idx.numel()
        Q = _box_projection(Y)
        S_new = 0.5 * (P + Q)
        scale_S = torch.linalg.matrix_norm(St).clamp_min(1.0)
        scale_Y = torch.linalg.matrix_norm(Y).clamp_min(1.0)
        change = torch.linalg.matrix_norm(S_new - St) / scale_S
        gap = torch.maximum(torch.linalg.matrix_norm(Y - P), torch.linalg.matrix_norm(Y - Q)) / scale_Y
        S[idx] = S_new
        iters[idx.cpu()] += 1
        last_change[idx.cpu()] = change.cpu()
        last_gap[idx.cpu()] = gap.cpu()
        done = (change <= tol) & (gap <= tol)
        active[idx[done]] = False
    converged = not bool(active.any())
    # Final step (Algorithm 3, step 3): PSD projection, guard, diagonal rescale.
    Sf = 0.5 * (S + S.transpose(-1, -2))
    X, _, _ = _psd_part(Sf)
    eighs += B
    X = _rescale_unit_diagonal(X)
    info = {
        "converged": converged,
        "iterations": int(iters.max()),
        "eigendecompositions": eighs,
        "relative_change": float(last_change.max()),
        "extra": {"feasibility_gap": float(last_gap.max())},
    }
    return X, info


# ----------------------------------------------------------------------------------------
# Dykstra (Higham 2002)
# ----------------------------------------------------------------------------------------


def _dykstra(G: torch.Tensor, tol: float, max_iter: int) -> tuple[torch.Tensor, dict]:
    B = G.shape[0]
    Y = G.clone()
    dS = torch.zeros_like(G)
    X = torch.zeros_like(G)
    active = torch.ones(B, dtype=torch.bool, device=G.device)
    iters = torch.zeros(B, dtype=torch.long)
    eighs = 0
    last = torch.full((B,), float("inf"), dtype=torch.float64)
    for _ in range(max_iter):
        idx = active.nonzero().flatten()
        if idx.numel() == 0:
            break
        Yi, dSi, Xold = Y[idx], dS[idx], X[idx]
        R = Yi - dSi
        Xi, _, _ = _psd_part(R)
        eighs += idx.numel()
        dS[idx] = Xi - R
        Yn = Xi.clone()
        Yn.diagonal(dim1=-2, dim2=-1).fill_(1.0)
        nY = torch.linalg.matrix_norm(Yn)
        nX = torch.linalg.matrix_norm(Xi).clamp_min(torch.finfo(torch.float64).tiny)
        rel = torch.stack(
            [
                torch.linalg.matrix_norm(Xi - Xold) / nX,
                torch.linalg.matrix_norm(Yn - Yi) / nY,
                torch.linalg.matrix_norm(Yn - Xi) / nY,  # = ‖diag(X) − 1‖₂ / ‖Y‖: feasibility gap
            ]
        ).amax(dim=0)
        X[idx], Y[idx] = Xi, Yn
        iters[idx.cpu()] += 1
        last[idx.cpu()] = rel.cpu()
        active[idx[rel <= tol]] = False
    converged = not bool(active.any())
    # X is exactly PSD and its diagonal is within the tolerance of one: rescale it onto C.
    out = _rescale_unit_diagonal(X)
    info = {
        "converged": converged,
        "iterations": int(iters.max()),
        "eigendecompositions": eighs,
        "relative_change": float(last.max()),
    }
    return out, info


# ----------------------------------------------------------------------------------------
# Qi–Sun dual semismooth Newton
# ----------------------------------------------------------------------------------------


class _DualPoint:
    """Everything about θ at one dual point y, from one eigendecomposition of G + Diag(y)."""

    __slots__ = ("y", "lam", "P", "grad", "theta", "lam_pos", "theta_scale")

    def __init__(self, G: torch.Tensor, y: torch.Tensor):
        self.y = y
        lam, P = torch.linalg.eigh(G + torch.diag(y))
        self.lam, self.P = lam, P
        self.lam_pos = lam.clamp_min(0.0)
        # diag((G + Diag y)₊) = (P ∘ P) λ₊  (no n×n product needed)
        self.grad = (P * P) @ self.lam_pos - 1.0
        half_sq = 0.5 * float(self.lam_pos.square().sum())
        self.theta = half_sq - float(y.sum())
        # magnitude of the terms summed into θ: rounding error of θ is ~ eps times this
        self.theta_scale = half_sq + float(y.abs().sum())


class _Jacobian:
    """An element V of the generalised Jacobian of F(y) = diag((G + Diag y)₊) − 1.

    With G + Diag(y) = P Λ Pᵀ, α = {λ > 0}, β = {λ <= 0}:
        V h = diag(P (Ω ∘ (Pᵀ Diag(h) P)) Pᵀ),
    Ω_ij = 1 on α×α, 0 on β×β, λ_i/(λ_i − λ_j) on α×β (and symmetrically).
    Applied matrix-free in O(n² min(|α|, |β|)) using whichever block is smaller
    (for |α| > |β| through V h = h − diag(P ((1 − Ω) ∘ M) Pᵀ)).
    """

    def __init__(self, pt: _DualPoint):
        lam, P = pt.lam, pt.P
        n = lam.shape[0]
        pos = lam > 0
        r = int(pos.sum())
        self.n, self.r = n, r
        # eigh returns ascending eigenvalues: β block first, α block last.
        s = n - r
        self.P1, self.P2 = P[:, s:], P[:, :s]
        if 0 < r < n:
            l1, l2 = lam[s:], lam[:s]
            self.Om12 = l1[:, None] / (l1[:, None] - l2[None, :])  # r × s, in (0, 1]
        else:
            self.Om12 = None
        # Diagonal of V (for the preconditioner): c_i = Σ_jk P_ij² Ω_jk P_ik².
        if r == 0:
            self.diag = torch.zeros(n, dtype=P.dtype, device=P.device)
        elif r == n:
            self.diag = torch.ones(n, dtype=P.dtype, device=P.device)
        else:
            Q1, Q2 = self.P1.square(), self.P2.square()
            if r <= s:
                self.diag = Q1.sum(1).square() + 2.0 * ((Q1 @ self.Om12) * Q2).sum(1)
            else:
                self.diag = 1.0 - Q2.sum(1).square() - 2.0 * ((Q1 @ (1.0 - self.Om12)) * Q2).sum(1)

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        r, n = self.r, self.n
        if r == 0:
            return torch.zeros_like(h)
        if r == n:
            return h.clone()
        P1, P2 = self.P1, self.P2
        hP2 = h[:, None] * P2
        M12 = P1.T @ hP2
        if r <= n - r:
            M11 = P1.T @ (h[:, None] * P1)
            return ((P1 @ M11) * P1).sum(1) + 2.0 * ((P1 @ (self.Om12 * M12)) * P2).sum(1)
        M22 = P2.T @ hP2
        return h - ((P2 @ M22) * P2).sum(1) - 2.0 * ((P1 @ ((1.0 - self.Om12) * M12)) * P2).sum(1)


def _pcg(
    apply, rhs: torch.Tensor, precond: torch.Tensor, rel_tol: float, max_iter: int
) -> tuple[torch.Tensor, int]:
    """Preconditioned conjugate gradients for a symmetric positive definite operator."""
    x = torch.zeros_like(rhs)
    r = rhs.clone()
    bnorm = float(torch.linalg.vector_norm(rhs))
    if bnorm == 0.0:
        return x, 0
    z = r / precond
    p = z.clone()
    rz = float(r @ z)
    k = 0
    for k in range(1, max_iter + 1):
        Ap = apply(p)
        pAp = float(p @ Ap)
        if pAp <= 0.0:
            break
        a = rz / pAp
        x = x + a * p
        r = r - a * Ap
        if float(torch.linalg.vector_norm(r)) <= rel_tol * bnorm:
            break
        z = r / precond
        rz_new = float(r @ z)
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, k


_EPS = torch.finfo(torch.float64).eps


def _newton_one(G: torch.Tensor, tol: float, max_iter: int) -> tuple[torch.Tensor, dict]:
    n = G.shape[0]
    target = tol * math.sqrt(n)  # RMS diagonal infeasibility of the unscaled primal <= tol
    y = 1.0 - torch.diagonal(G).clone()  # Qi–Sun's starting point
    pt = _DualPoint(G, y)
    eighs = 1
    cg_total = 0
    it = 0
    converged = False
    sigma_armijo = 1e-4
    for it in range(max_iter + 1):
        gnorm = float(torch.linalg.vector_norm(pt.grad))
        if gnorm <= target:
            converged = True
            break
        if it == max_iter:
            break
        V = _Jacobian(pt)
        mu = min(1e-2, gnorm) * 1e-2  # small Tikhonov term keeps V + μI positive definite
        eta = min(1e-2, gnorm)  # forcing term -> superlinear/quadratic local rate
        precond = (V.diag + mu).clamp_min(1e-12)
        d, k = _pcg(lambda h: V(h) + mu * h, -pt.grad, precond, eta, max(50, min(n, 500)))
        cg_total += k
        slope = float(pt.grad @ d)
        if slope >= 0:  # not a descent direction (CG broke down): use preconditioned gradient
            d = -pt.grad / precond
            slope = float(pt.grad @ d)
        step = 1.0
        for _ in range(60):
            trial = _DualPoint(G, pt.y + step * d)
            eighs += 1
            # Armijo, with a slack of a few hundred ulps of θ: near the solution the predicted
            # decrease falls below θ's rounding error and an exact test rejects good steps.
            slack = 256.0 * _EPS * max(pt.theta_scale, trial.theta_scale)
            if trial.theta <= pt.theta + sigma_armijo * step * slope + slack:
                break
            step *= 0.5
        pt = trial
    # Primal point and certificate.
    X = (pt.P * pt.lam_pos) @ pt.P.T
    X = 0.5 * (X + X.T)
    Xf = _rescale_unit_diagonal(X.unsqueeze(0))[0]
    primal = 0.5 * float(torch.linalg.matrix_norm(Xf - G)) ** 2
    dual = 0.5 * float(torch.linalg.matrix_norm(G)) ** 2 - pt.theta
    info = {
        "converged": converged,
        "iterations": it,
        "eigendecompositions": eighs,
        "dual_gradient_norm": float(torch.linalg.vector_norm(pt.grad)),
        "duality_gap": primal - dual,
        "cg_iterations": cg_total,
    }
    return Xf, info


def _newton(G: torch.Tensor, tol: float, max_iter: int) -> tuple[torch.Tensor, dict]:
    outs, infos = [], []
    for b in range(G.shape[0]):  # the block structure differs per matrix: solve one at a time
        X, info = _newton_one(G[b], tol, max_iter)
        outs.append(X)
        infos.append(info)
    return torch.stack(outs), {
        "converged": all(i["converged"] for i in infos),
        "iterations": max(i["iterations"] for i in infos),
        "eigendecompositions": sum(i["eigendecompositions"] for i in infos),
        "dual_gradient_norm": max(i["dual_gradient_norm"] for i in infos),
        "duality_gap": max(i["duality_gap"] for i in infos),
        "cg_iterations": sum(i["cg_iterations"] for i in infos),
    }


# ----------------------------------------------------------------------------------------
# public entry point
# ----------------------------------------------------------------------------------------


def nearest_correlation(
    A: torch.Tensor,
    *,
    method: Method = "newton",
    tol: float = 1e-7,
    max_iter: int | None = None,
    device: str | torch.device | None = None,
    return_diagnostics: bool = False,
    verify: bool = True,
    raise_on_max_iter: bool = True,
) -> torch.Tensor | tuple[torch.Tensor, NearestCorrelationDiagnostics]:
    """Project ``A`` onto the correlation matrices {X = Xᵀ ⪰ 0, diag(X) = 1}.

    Args:
        A: floating tensor of shape ``(n, n)`` or ``(..., n, n)``, finite.  Asymmetric input
            is symmetrised (which does not change the nearest point, see the module docstring).
        method: ``"newton"`` (Qi–Sun dual Newton, nearest point, default), ``"dykstra"``
            (Higham's alternating projections with Dykstra's correction, nearest point) or
            ``"aap"`` (ScoreShield Algorithm 3: feasible, not nearest).
        tol: stopping tolerance, > 0.  ``newton``: RMS of diag((A + Diag y)₊) − 1 ≤ tol
            (i.e. dual gradient norm ≤ tol·√n).  ``dykstra``: relative changes of both
            iterates and relative gap ‖Y − X‖_F/‖Y‖_F all ≤ tol.  ``aap``: relative change
            ‖Ŝ_{t+1} − Ŝ_t‖_F/max(1, ‖Ŝ_t‖_F) ≤ tol and max(‖Y − P‖_F, ‖Y − Q‖_F)/max(1, ‖Y‖_F) ≤ tol.
        max_iter: iteration limit (default :data:`DEFAULT_MAX_ITER` for the method).
        device: compute device (``"cpu"``, ``"cuda"``, ``"auto"``, ...); default ``A``'s device.
            The result always comes back on ``A``'s device with ``A``'s dtype.
        return_diagnostics: also return :class:`NearestCorrelationDiagnostics`.
        verify: with ``return_diagnostics``, compute the output's minimum eigenvalue (one
            extra ``eigvalsh`` per matrix, not counted in ``eigendecompositions``).
        raise_on_max_iter: raise :class:`~privkit.errors.ConvergenceError` (with the
            diagnostics attached) when ``max_iter`` is reached before the stopping rule; if
            False, return the (always feasible) last result with ``converged=False``.

    Returns:
        The correlation matrix (exactly PSD up to rounding, unit diagonal), shaped like ``A``;
        with ``return_diagnostics`` a tuple ``(X, diagnostics)``.

    Raises:
        ShapeError: ``A`` is not (a batch of) square matrices.
        InvalidArgumentError: non-floating or non-finite ``A``, bad ``tol``/``max_iter``.
        UnknownNameError: unknown ``method``.
        ConvergenceError: the iteration limit was hit (see ``raise_on_max_iter``).
    """
    check_choice("method", method, METHODS)
    tol = check_positive("tol", tol)
    if max_iter is None:
        max_iter = DEFAULT_MAX_ITER[method]
    max_iter = check_int("max_iter", max_iter, minimum=1)
    G, batch_shape = _prepare(A, device)
    solver = {"newton": _newton, "dykstra": _dykstra, "aap": _aap}[method]
    X, info = solver(G, tol, max_iter)
    extra = info.pop("extra", {})
    out, diag = _finish(
        X, G, A, batch_shape, verify=verify and (return_diagnostics or not info["converged"]),
        method=method, extra=extra, **info,
    )
    if not diag.converged and raise_on_max_iter:
        raise ConvergenceError(
            f"nearest_correlation(method={method!r}) did not meet tol={tol:g} within max_iter={max_iter} "
            f"iterations (last relative change {diag.relative_change}, dual gradient norm "
            f"{diag.dual_gradient_norm}); raise max_iter or tol, or pass raise_on_max_iter=False",
            diagnostics=diag.to_dict(),
        )
    return (out, diag) if return_diagnostics else out
