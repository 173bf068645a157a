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
    quadratically to the *nearest* correlation matrix.  The iteration is
    warm-started for free: A + Diag(y) + cI has the eigenvectors of A + Diag(y),
    so the first eigendecomposition (at Qi–Sun's y₀ = 1 − diag(A)) also gives θ,
    F and V at every scalar shift y₀ + c·1, and Newton starts from a shift that
    brings the diagonal of the PSD part close to one (on noisy Gram matrices
    this saves one or two of the five or six eigendecompositions).  The returned matrix is
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

__all__ = ["symmetric_from_upper", "NearestCorrelationDiagnostics", "nearest_correlation", "clip_to_correlation",
           "correlation_residuals", "METHODS", "DEFAULT_MAX_ITER"]

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
        cg_iterations: Newton only: conjugate-gradient iterations in total (one Jacobian-vector
            product each).
        warm_start: Newton only: whether every matrix started from a shifted dual point y₀ + c·1,
            c < 0 (free, from the first eigendecomposition; see the module docstring); False
            where the shift is zero, e.g. for an input that is already a correlation matrix.
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
    warm_start: bool | None = None
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


def _psd_part(G: torch.Tensor) -> torch.Tensor:
    """(G)₊ by one eigendecomposition."""
    lam, P = torch.linalg.eigh(G)
    X = (P * lam.clamp_min(0.0).unsqueeze(-2)) @ P.transpose(-1, -2)
    return 0.5 * (X + X.transpose(-1, -2))


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


def _finish(X: torch.Tensor, G: torch.Tensor, A: torch.Tensor, batch_shape: tuple[int, ...], *, verify: bool,
            **fields) -> tuple[torch.Tensor, NearestCorrelationDiagnostics]:
    n = X.shape[-1]
    diag = NearestCorrelationDiagnostics(
        max_diag_error=float((torch.diagonal(X, dim1=-2, dim2=-1) - 1).abs().max()),
        min_eigenvalue=float(torch.linalg.eigvalsh(X).min()) if verify else None,
        distance=float(torch.linalg.vector_norm(X - G)), batch_size=X.shape[0], **fields)
    out = symmetric_from_upper(X.reshape(*batch_shape, n, n).to(device=A.device, dtype=A.dtype))
    return out, diag


# ----------------------------------------------------------------------------------------
# one-eigh clip
# ----------------------------------------------------------------------------------------


def clip_to_correlation(A: torch.Tensor, *, device: str | torch.device | None = None, return_diagnostics: bool = False,
                        verify: bool = True) -> torch.Tensor | tuple[torch.Tensor, NearestCorrelationDiagnostics]:
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
    X = _rescale_unit_diagonal(_psd_part(G))
    out, diag = _finish(X, G, A, batch_shape, verify=verify and return_diagnostics, method="clip", converged=True,
                        iterations=1, eigendecompositions=G.shape[0])
    return (out, diag) if return_diagnostics else out


# ----------------------------------------------------------------------------------------
# AAP (ScoreShield Algorithm 3/6)
# ----------------------------------------------------------------------------------------


def _box_projection(Y: torch.Tensor) -> torch.Tensor:
    Q = Y.clamp(-1.0, 1.0)
    Q.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    return Q


def _sweep_until(G: torch.Tensor, tol: float, max_iter: int, n_criteria: int, sweep) -> tuple[dict, torch.Tensor]:
    """Repeat ``sweep(idx)`` on the matrices ``idx`` of the batch ``G`` that have not met the stopping rule yet.

    ``sweep`` updates its iterates in place and returns its stopping criteria, shape ``(n_criteria, len(idx))``
    (the first one the relative change); a matrix stops when all of them are <= ``tol``.  Returns the diagnostics
    the sweeping solvers share (one eigendecomposition per matrix per sweep) and each matrix's last criteria,
    shape ``(n_criteria, B)``.
    """
    B = G.shape[0]
    active = torch.ones(B, dtype=torch.bool, device=G.device)
    iters = torch.zeros(B, dtype=torch.long)
    last = torch.full((n_criteria, B), float("inf"), dtype=torch.float64)
    for _ in range(max_iter):
        idx = active.nonzero().flatten()
        if idx.numel() == 0:
            break
        criteria = sweep(idx)
        iters[idx.cpu()] += 1
        last[:, idx.cpu()] = criteria.cpu()
        active[idx[(criteria <= tol).all(dim=0)]] = False
    return {"converged": not bool(active.any()), "iterations": int(iters.max()),
            "eigendecompositions": int(iters.sum()), "relative_change": float(last[0].max())}, last


def _aap(G: torch.Tensor, tol: float, max_iter: int) -> tuple[torch.Tensor, dict]:
    S = G.clone()

    def sweep(idx: torch.Tensor) -> torch.Tensor:
        St = S[idx]
        Y = 0.5 * (St + St.transpose(-1, -2))
        P = _psd_part(Y)
        Q = _box_projection(Y)
        S_new = 0.5 * (P + Q)
        scale_S = torch.linalg.matrix_norm(St).clamp_min(1.0)
        scale_Y = torch.linalg.matrix_norm(Y).clamp_min(1.0)
        change = torch.linalg.matrix_norm(S_new - St) / scale_S
        gap = torch.maximum(torch.linalg.matrix_norm(Y - P), torch.linalg.matrix_norm(Y - Q)) / scale_Y
        S[idx] = S_new
        return torch.stack([change, gap])

    info, last = _sweep_until(G, tol, max_iter, 2, sweep)
    # Final step (Algorithm 3, step 3): PSD projection, guard, diagonal rescale (one more eigendecomposition each).
    X = _rescale_unit_diagonal(_psd_part(0.5 * (S + S.transpose(-1, -2))))
    info["eigendecompositions"] += G.shape[0]
    return X, {**info, "extra": {"feasibility_gap": float(last[1].max())}}


# ----------------------------------------------------------------------------------------
# Dykstra (Higham 2002)
# ----------------------------------------------------------------------------------------


def _dykstra(G: torch.Tensor, tol: float, max_iter: int) -> tuple[torch.Tensor, dict]:
    Y, dS, X = G.clone(), torch.zeros_like(G), torch.zeros_like(G)

    def sweep(idx: torch.Tensor) -> torch.Tensor:
        Yi, dSi, Xold = Y[idx], dS[idx], X[idx]
        R = Yi - dSi
        Xi = _psd_part(R)
        dS[idx] = Xi - R
        Yn = Xi.clone()
        Yn.diagonal(dim1=-2, dim2=-1).fill_(1.0)
        nY = torch.linalg.matrix_norm(Yn)
        nX = torch.linalg.matrix_norm(Xi).clamp_min(torch.finfo(torch.float64).tiny)
        rel = torch.stack([torch.linalg.matrix_norm(Xi - Xold) / nX, torch.linalg.matrix_norm(Yn - Yi) / nY,
                           torch.linalg.matrix_norm(Yn - Xi) / nY]).amax(dim=0)  # last: ‖diag(X) − 1‖₂ / ‖Y‖, the gap
        X[idx], Y[idx] = Xi, Yn
        return rel.unsqueeze(0)

    info, _ = _sweep_until(G, tol, max_iter, 1, sweep)
    # X is exactly PSD and its diagonal is within the tolerance of one: rescale it onto C.
    return _rescale_unit_diagonal(X), info


# ----------------------------------------------------------------------------------------
# Qi–Sun dual semismooth Newton
# ----------------------------------------------------------------------------------------


class _DualPoint:
    """Everything about θ at one dual point y, from one eigendecomposition of G + Diag(y).

    Built either from a fresh ``eigh`` (:meth:`at`) or, for a scalar shift y + c·1 of a point
    already decomposed, from that decomposition with the eigenvalues moved by c (:meth:`shifted`):
    G + Diag(y) + cI has the same eigenvectors, so the shifted point costs no eigendecomposition.
    """

    __slots__ = ("y", "lam", "P", "r", "grad", "theta", "lam_pos", "theta_scale")

    def __init__(self, y: torch.Tensor, lam: torch.Tensor, P: torch.Tensor):
        self.y, self.lam, self.P = y, lam, P
        n = lam.shape[0]
        self.lam_pos = lam.clamp_min(0.0)
        # eigh returns ascending eigenvalues: the positive block is the last r columns.
        self.r = r = int((lam > 0).sum())
        P1 = P[:, n - r:]
        # diag((G + Diag y)₊) = (P₁ ∘ P₁) λ₊  (no n×n product needed)
        self.grad = P1.square() @ self.lam_pos[n - r:] - 1.0
        half_sq = 0.5 * float(self.lam_pos.square().sum())
        self.theta = half_sq - float(y.sum())
        # magnitude of the terms summed into θ: rounding error of θ is ~ eps times this
        self.theta_scale = half_sq + float(y.abs().sum())

    @classmethod
    def at(cls, G: torch.Tensor, y: torch.Tensor) -> _DualPoint:
        """The dual point y, by one eigendecomposition of G + Diag(y)."""
        lam, P = torch.linalg.eigh(G + torch.diag(y))
        return cls(y, lam, P)

    def shifted(self, c: float) -> _DualPoint:
        """The dual point y + c·1, from this point's eigendecomposition (no ``eigh``)."""
        return _DualPoint(self.y + c, self.lam + c, self.P)

    def primal(self) -> torch.Tensor:
        """(G + Diag y)₊ = P₁ Λ₊ P₁ᵀ from the positive block only (n²r multiply-adds)."""
        n = self.lam.shape[0]
        P1 = self.P[:, n - self.r:]
        X = (P1 * self.lam_pos[n - self.r:]) @ P1.T
        return 0.5 * (X + X.T)


def _trace_shift(lam: torch.Tensor) -> float:
    """The scalar c minimising c ↦ θ(y + c·1), from the eigenvalues λ of G + Diag(y).

    θ(y + c·1) = ½ Σ_i (λ_i + c)₊² − Σ_i y_i − n c is convex in c with derivative
    Σ_i (λ_i + c)₊ − n, so the minimiser is the c with tr((G + Diag(y) + cI)₊) = n: the shift
    that gives the PSD part a unit *mean* diagonal.  With λ sorted descending and S_k the sum of
    the k largest, c_k = (n − S_k)/k is the root of Σ_{i<=k}(λ_i + c) = n, a lower bound of
    the trace, so c_k >= c, with equality for the k of the positive block: c = min_k c_k.
    """
    n = lam.shape[0]
    top = torch.cumsum(lam.flip(0), 0)
    k = torch.arange(1, n + 1, dtype=lam.dtype, device=lam.device)
    return float(((n - top) / k).min())


def _safe_shift(pt: _DualPoint) -> float:
    """The most negative scalar shift c <= 0 that keeps every diagonal entry of the PSD part >= 1.

    At Qi–Sun's start y₀ = 1 − diag(G) the matrix G₀ = G + Diag(y₀) has a unit diagonal and
    (G₀)₊ − G₀ ⪰ 0, so diag((G₀)₊) >= diag(G₀) = 1: every F_i >= 0.  Along y₀ + c·1 the eigenvectors
    stay put and F_i(c) = Σ_k P_ik² (λ_k + c)₊ − 1 is nondecreasing and piecewise linear in c, so
    the shift that keeps F >= 0 is c = max_i c_i with c_i the root of F_i.  With the positive
    eigenvalues in descending order, c_i^m = (1 − Σ_{k<=m} P_ik² λ_k) / Σ_{k<=m} P_ik² is the root
    of a lower bound of F_i (the top-m terms without the clamp), so c_i^m >= c_i, with equality
    for the m that are positive at c_i: c_i = min_m c_i^m, exactly, without iterating.
    """
    n, r = pt.lam.shape[0], pt.r
    if r == 0:
        return 0.0
    lam1 = pt.lam[n - r:].flip(0)  # positive eigenvalues, descending
    P1 = pt.P[:, n - r:].flip(1)
    chunk = max(1, (1 << 22) // r)  # rows per pass: bounded n×r temporaries
    best = -math.inf
    for i in range(0, n, chunk):
        Q = P1[i:i + chunk].square()
        weight = torch.cumsum(Q, dim=1)
        mass = torch.cumsum(Q * lam1, dim=1)
        roots = torch.where(weight > 0, (1.0 - mass) / weight, math.inf)
        best = max(best, float(roots.amin(dim=1).max()))
    return min(0.0, best) if math.isfinite(best) else 0.0


def _warm_shift(pt: _DualPoint) -> float:
    """The scalar shift c of the Newton warm start y₀ + c·1, halfway between two free shifts.

    Both come from the eigendecomposition of G + Diag(y₀) that the iteration needs anyway:
    the line minimiser c* of θ along 1 (:func:`_trace_shift`, unit *mean* diagonal of the PSD
    part) and the safe shift c_s (:func:`_safe_shift`, every diagonal entry still >= 1), with
    c* <= c_s <= 0.  θ is convex along 1 with its minimum at c*, so any c in [c*, 0] lowers θ.
    Starting at c* removes the most dual gradient, but there some F_i < 0 and (as for a
    convex increasing equation solved from the left) Newton's first steps can overshoot and
    need backtracking, i.e. extra eigendecompositions, on high-noise inputs; from c_s, where
    F >= 0, they do not, but more gradient is left.  The midpoint was chosen by measurement on
    noisy Gram matrices (n = 5…200 with σ = 0.01…2, n = 300…2000 with σ = 0.25…2): it saves as
    many eigendecompositions as c* where c* works well (6 → 4 at n = 500…2000, σ = 0.5) and,
    unlike c*, it almost never costs more than Qi–Sun's cold start (1 of 216 small cases, n = 10
    at σ = 2, against 17 for c*; c_s alone never did there, but it saves less: 5 rather than 4
    eigendecompositions at n = 500…1000, σ = 0.5).
    """
    c_star = _trace_shift(pt.lam)
    c_safe = _safe_shift(pt)
    c = 0.5 * (c_star + c_safe)
    return min(0.0, c) if math.isfinite(c) else 0.0


class _Jacobian:
    """An element V of the generalised Jacobian of F(y) = diag((G + Diag y)₊) − 1.

    With G + Diag(y) = P Λ Pᵀ, α = {λ > 0}, β = {λ <= 0}:
        V h = diag(P (Ω ∘ (Pᵀ Diag(h) P)) Pᵀ),
    Ω_ij = 1 on α×α, 0 on β×β, λ_i/(λ_i − λ_j) on α×β (and symmetrically).
    With P₁ = P_α, P₂ = P_β and Π₁ = P₁P₁ᵀ, the α×α block contributes
    diag(Π₁ Diag(h) Π₁) = (Π₁ ∘ Π₁) h, so

        V h = (Π₁ ∘ Π₁) h + 2 diag(P₁ (Ω₁₂ ∘ (P₁ᵀ Diag(h) P₂)) P₂ᵀ),

    and, when β is the smaller block (through Ω = 1 − (1 − Ω)),

        V h = h − (Π₂ ∘ Π₂) h − 2 diag(P₁ ((1 − Ω₁₂) ∘ (P₁ᵀ Diag(h) P₂)) P₂ᵀ).

    Each product costs two GEMMs for the α×β term (4n|α||β| flops) plus the smaller block's
    term: either diag(Pₘ (Pₘᵀ Diag(h) Pₘ) Pₘᵀ) directly (4nm² flops, m = min(|α|, |β|)), or one
    matrix-vector product with K = Π ∘ Π formed once per Newton step (2n²m flops).  K pays off
    after n/(2m) products; PCG takes about three per Newton step, so K is formed when m >= n/6
    (near the start on noisy Gram matrices, where m ≈ n/2) and not when the PSD part has low
    rank (near the solution, m ≈ n/7 at n = 2000, σ = 0.5).
    """

    def __init__(self, pt: _DualPoint):
        lam, P = pt.lam, pt.P
        n, r = lam.shape[0], pt.r
        s = n - r
        self.n, self.r = n, r
        self.small_positive = r <= s
        # eigh returns ascending eigenvalues: β block first, α block last.
        self.P1, self.P2 = P[:, s:], P[:, :s]
        if r == 0:
            self.diag = torch.zeros(n, dtype=P.dtype, device=P.device)
        elif r == n:
            self.diag = torch.ones(n, dtype=P.dtype, device=P.device)
        else:
            l1, l2 = lam[s:], lam[:s]
            Om12 = l1[:, None] / (l1[:, None] - l2[None, :])  # r × s, in (0, 1]
            self.W12 = Om12 if self.small_positive else 1.0 - Om12
            self.Pm = Pm = self.P1 if self.small_positive else self.P2
            self.K = (Pm @ Pm.T).square_() if 6 * Pm.shape[1] >= n else None
            # Diagonal of V (for the preconditioner): c_i = Σ_jk P_ij² Ω_jk P_ik²; the smaller
            # block contributes diag(Π ∘ Π) = (row sums of Pₘ²)².
            cross = 2.0 * ((self.P1.square() @ self.W12) * self.P2.square()).sum(1)
            kdiag = Pm.square().sum(1).square()
            self.diag = kdiag + cross if self.small_positive else 1.0 - kdiag - cross

    def __call__(self, h: torch.Tensor) -> torch.Tensor:
        r, n = self.r, self.n
        if r == 0:
            return torch.zeros_like(h)
        if r == n:
            return h.clone()
        P1, P2 = self.P1, self.P2
        M12 = P1.T @ (h[:, None] * P2)
        cross = 2.0 * ((P1 @ (self.W12 * M12)) * P2).sum(1)
        if self.K is not None:
            Kh = self.K @ h
        else:
            Pm = self.Pm
            Kh = ((Pm @ (Pm.T @ (h[:, None] * Pm))) * Pm).sum(1)
        return Kh + cross if self.small_positive else h - Kh - cross


def _pcg(apply, rhs: torch.Tensor, precond: torch.Tensor, rel_tol: float, max_iter: int) -> tuple[torch.Tensor, int]:
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


def _newton_one(G: torch.Tensor, tol: float, max_iter: int, warm_start: bool = True) -> tuple[torch.Tensor, dict]:
    """Qi–Sun dual Newton on one matrix; ``warm_start`` shifts the first dual point (see below).

    The first eigendecomposition is of G + Diag(y₀) at Qi–Sun's y₀ = 1 − diag(G).  With
    ``warm_start`` the same decomposition also serves the shifted point y₀ + c·1 (same
    eigenvectors, eigenvalues moved by c), with c from :func:`_warm_shift`, and the iteration
    starts there: no extra eigendecomposition.  On a noisy Gram matrix the PSD part of
    G + Diag(y₀) has a diagonal far above one (the positive half of the noise spectrum), and the
    shift removes most of the dual gradient, which saves Newton steps, i.e. eigendecompositions.
    """
    n = G.shape[0]
    target = tol * math.sqrt(n)  # RMS diagonal infeasibility of the unscaled primal <= tol
    y = 1.0 - torch.diagonal(G).clone()  # Qi–Sun's starting point
    pt = _DualPoint.at(G, y)
    eighs = 1
    warm = False
    if warm_start:
        c = _warm_shift(pt)
        if c < 0.0:
            shifted = pt.shifted(c)
            # θ decreases from y₀ to y₀ + c·1 (convex along 1, see _warm_shift); guard against rounding
            if shifted.theta <= pt.theta + 256.0 * _EPS * max(pt.theta_scale, shifted.theta_scale):
                pt, warm = shifted, True
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
            trial = _DualPoint.at(G, pt.y + step * d)
            eighs += 1
            # Armijo, with a slack of a few hundred ulps of θ: near the solution the predicted
            # decrease falls below θ's rounding error and an exact test rejects good steps.
            slack = 256.0 * _EPS * max(pt.theta_scale, trial.theta_scale)
            if trial.theta <= pt.theta + sigma_armijo * step * slope + slack:
                break
            step *= 0.5
        pt = trial
    # Primal point and certificate.
    Xf = _rescale_unit_diagonal(pt.primal().unsqueeze(0))[0]
    primal = 0.5 * float(torch.linalg.matrix_norm(Xf - G)) ** 2
    dual = 0.5 * float(torch.linalg.matrix_norm(G)) ** 2 - pt.theta
    return Xf, {"converged": converged, "iterations": it, "eigendecompositions": eighs,
                "dual_gradient_norm": float(torch.linalg.vector_norm(pt.grad)), "duality_gap": primal - dual,
                "cg_iterations": cg_total, "warm_start": warm}


#: How :func:`_newton` combines the per-matrix diagnostics of a batch.
_NEWTON_BATCH = {"converged": all, "iterations": max, "eigendecompositions": sum, "dual_gradient_norm": max,
                 "duality_gap": max, "cg_iterations": sum, "warm_start": all}


def _newton(G: torch.Tensor, tol: float, max_iter: int, warm_start: bool = True) -> tuple[torch.Tensor, dict]:
    # the block structure differs per matrix: solve one at a time
    results = [_newton_one(G[b], tol, max_iter, warm_start) for b in range(G.shape[0])]
    return torch.stack([X for X, _ in results]), {
        k: combine(info[k] for _, info in results) for k, combine in _NEWTON_BATCH.items()}


# ----------------------------------------------------------------------------------------
# public entry point
# ----------------------------------------------------------------------------------------


def nearest_correlation(
    A: torch.Tensor, *, method: Method = "newton", tol: float = 1e-7, max_iter: int | None = None,
    device: str | torch.device | None = None, return_diagnostics: bool = False, verify: bool = True,
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
    out, diag = _finish(X, G, A, batch_shape, verify=verify and (return_diagnostics or not info["converged"]),
                        method=method, **info)
    if not diag.converged and raise_on_max_iter:
        raise ConvergenceError(f"nearest_correlation(method={method!r}) did not meet tol={tol:g} within max_iter="
                               f"{max_iter} iterations (last relative change {diag.relative_change}, dual gradient "
                               f"norm {diag.dual_gradient_norm}); raise max_iter or tol, or pass "
                               "raise_on_max_iter=False", diagnostics=diag.to_dict())
    return (out, diag) if return_diagnostics else out
