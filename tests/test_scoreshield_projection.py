"""Tests of privkit.scoreshield.projection: nearest correlation matrix solvers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from privkit.errors import ConvergenceError, InvalidArgumentError, ShapeError, UnknownNameError
from privkit.scoreshield import projection
from privkit.scoreshield.projection import (
    clip_to_correlation,
    correlation_residuals,
    nearest_correlation,
)


def noisy_gram(n: int, d: int = 8, sigma: float = 0.5, seed: int = 0) -> torch.Tensor:
    """Cosine Gram of n random unit vectors plus ScoreShield's symmetric Gaussian noise."""
    g = torch.Generator().manual_seed(seed)
    E = torch.randn(n, d, generator=g, dtype=torch.float64)
    E = E / E.norm(dim=1, keepdim=True)
    W = sigma * torch.randn(n, n, generator=g, dtype=torch.float64)
    return E @ E.T + 0.5 * (W + W.T)


def assert_correlation(X: torch.Tensor, *, psd_tol: float = 1e-10, diag_tol: float = 1e-12) -> None:
    res = correlation_residuals(X)
    assert res["min_eigenvalue"] >= -psd_tol, res
    assert res["max_diag_error"] <= diag_tol, res
    assert res["max_asymmetry"] <= 1e-12, res
    assert res["max_abs_offdiag"] <= 1 + 1e-9, res


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.fixture(scope="module")
def A30() -> torch.Tensor:
    return noisy_gram(30, seed=1)


@pytest.fixture(scope="module")
def reference30(A30) -> torch.Tensor:
    # Tight reference: Dykstra run to a relative tolerance of 1e-12.
    return nearest_correlation(A30, method="dykstra", tol=1e-12, max_iter=100000)


@pytest.mark.parametrize("method", ["newton", "dykstra", "aap"])
def test_outputs_are_correlation_matrices(A30, method):
    X, diag = nearest_correlation(A30, method=method, return_diagnostics=True)
    assert X.shape == A30.shape and X.dtype == A30.dtype
    assert_correlation(X)
    assert diag.converged and diag.method == method
    assert diag.min_eigenvalue >= -1e-10 and diag.max_diag_error <= 1e-12
    assert diag.eigendecompositions >= diag.iterations >= 1
    assert diag.distance == pytest.approx(float((X - A30).norm()), rel=1e-12)


def test_newton_matches_tight_dykstra_reference(A30, reference30):
    X, diag = nearest_correlation(A30, method="newton", tol=1e-10, return_diagnostics=True)
    assert rel(X, reference30) < 1e-8
    # certificate: tiny dual gradient and duality gap
    assert diag.dual_gradient_norm <= 1e-10 * np.sqrt(30)
    assert abs(diag.duality_gap) < 1e-8
    assert diag.iterations <= 15  # quadratic convergence: few eigendecompositions


def test_newton_and_dykstra_agree_at_default_tolerance():
    A = noisy_gram(60, d=16, sigma=0.4, seed=2)
    Xn = nearest_correlation(A, method="newton")
    Xd = nearest_correlation(A, method="dykstra")
    assert rel(Xn, Xd) < 1e-6


@pytest.mark.filterwarnings("ignore::statsmodels.tools.sm_exceptions.IterationLimitWarning")
def test_matches_statsmodels_corr_nearest():
    from statsmodels.stats.correlation_tools import corr_nearest

    A = noisy_gram(8, d=3, sigma=0.6, seed=3)
    ref = torch.from_numpy(corr_nearest(A.numpy(), threshold=0.0, n_fact=100))
    X = nearest_correlation(A, method="newton", tol=1e-12)
    assert rel(X, ref) < 1e-6


def test_nearest_point_optimality_conditions(A30):
    # X* = Π(A) iff <A - X*, Z - X*> <= 0 for every feasible Z: test against many feasible Z.
    X = nearest_correlation(A30, method="newton", tol=1e-11)
    g = torch.Generator().manual_seed(4)
    for _ in range(20):
        F = torch.randn(30, 5, generator=g, dtype=torch.float64)
        F = F / F.norm(dim=1, keepdim=True)
        Z = F @ F.T
        assert float(((A30 - X) * (Z - X)).sum()) <= 1e-8
        assert float((A30 - X).norm()) <= float((A30 - Z).norm()) + 1e-10


def test_aap_is_feasible_but_not_nearest(A30, reference30):
    Xa, diag = nearest_correlation(A30, method="aap", return_diagnostics=True)
    assert_correlation(Xa)
    Xn = nearest_correlation(A30, method="newton")
    d_aap = float((Xa - A30).norm())
    d_new = float((Xn - A30).norm())
    assert d_aap > d_new * (1 + 1e-4)  # strictly farther than the nearest point
    assert rel(Xa, reference30) > 1e-4
    assert diag.iterations <= 500


def test_clip_is_one_eigh_feasible_and_farther(A30):
    Xc, diag = clip_to_correlation(A30, return_diagnostics=True)
    assert_correlation(Xc)
    assert diag.eigendecompositions == 1
    Xn = nearest_correlation(A30)
    assert float((Xc - A30).norm()) > float((Xn - A30).norm())


@pytest.mark.parametrize("method", ["newton", "dykstra", "aap"])
def test_correlation_matrix_is_a_fixed_point(method):
    g = torch.Generator().manual_seed(5)
    F = torch.randn(12, 20, generator=g, dtype=torch.float64)  # full rank
    F = F / F.norm(dim=1, keepdim=True)
    C = F @ F.T
    X = nearest_correlation(C, method=method)
    assert float((X - C).abs().max()) < 1e-10
    # rank-deficient correlation matrix (n > d), as a clean cosine Gram is
    F2 = torch.randn(15, 4, generator=g, dtype=torch.float64)
    F2 = F2 / F2.norm(dim=1, keepdim=True)
    C2 = F2 @ F2.T
    assert float((nearest_correlation(C2, method=method) - C2).abs().max()) < 1e-7


@pytest.mark.parametrize("method", ["newton", "dykstra", "aap"])
def test_batched_input_matches_one_by_one(method):
    A = torch.stack([noisy_gram(10, seed=s) for s in range(3)]).reshape(3, 1, 10, 10)
    X, diag = nearest_correlation(A, method=method, return_diagnostics=True)
    assert X.shape == A.shape
    assert diag.batch_size == 3
    for i in range(3):
        Xi = nearest_correlation(A[i, 0], method=method)
        assert float((X[i, 0] - Xi).abs().max()) < 1e-9


def test_asymmetric_input_is_symmetrised():
    g = torch.Generator().manual_seed(6)
    S = noisy_gram(10, seed=6)
    K = torch.randn(10, 10, generator=g, dtype=torch.float64)
    A = S + (K - K.T)  # add a skew part
    assert torch.allclose(nearest_correlation(A), nearest_correlation(S), atol=1e-12)


def test_dtype_and_device_follow_input():
    A = noisy_gram(10, seed=7).float()
    X = nearest_correlation(A)
    assert X.dtype == torch.float32 and X.device == A.device
    assert float((torch.diagonal(X) - 1).abs().max()) < 1e-6
    assert float(torch.linalg.eigvalsh(X.double()).min()) > -1e-6
    Xc = nearest_correlation(A, device="cpu")
    assert torch.equal(X, Xc)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("method", ["newton", "dykstra", "aap"])
def test_cuda_matches_cpu(method):
    A = noisy_gram(40, seed=8)
    Xc = nearest_correlation(A, method=method)
    Xg = nearest_correlation(A.cuda(), method=method)
    assert Xg.device.type == "cuda"
    assert rel(Xg.cpu(), Xc) < 1e-7


def test_one_by_one_and_edge_cases():
    assert torch.equal(nearest_correlation(torch.tensor([[3.0]])), torch.tensor([[1.0]]))
    # all-negative input: the PSD part is zero; the result is still a correlation matrix
    A = -torch.ones(4, 4, dtype=torch.float64) - 3 * torch.eye(4, dtype=torch.float64)
    for method in ("newton", "dykstra", "aap"):
        assert_correlation(nearest_correlation(A, method=method))
    assert_correlation(clip_to_correlation(A))


@pytest.mark.parametrize(
    "bad, err",
    [
        (torch.full((3, 3), float("nan")), InvalidArgumentError),
        (torch.tensor([[1.0, float("inf")], [0.0, 1.0]]), InvalidArgumentError),
        (torch.ones(3, 4), ShapeError),
        (torch.ones(3), ShapeError),
        (torch.ones(3, 3, dtype=torch.long), InvalidArgumentError),
        ([[1.0, 0.0], [0.0, 1.0]], InvalidArgumentError),
    ],
)
def test_bad_inputs_raise(bad, err):
    with pytest.raises(err):
        nearest_correlation(bad)


def test_bad_options_raise(A30):
    with pytest.raises(UnknownNameError, match="newton"):
        nearest_correlation(A30, method="higham")
    with pytest.raises(InvalidArgumentError, match="tol"):
        nearest_correlation(A30, tol=0.0)
    with pytest.raises(InvalidArgumentError, match="max_iter"):
        nearest_correlation(A30, max_iter=0)


@pytest.mark.parametrize("method", ["newton", "dykstra", "aap"])
def test_convergence_error_when_max_iter_is_tiny(A30, method):
    with pytest.raises(ConvergenceError) as info:
        nearest_correlation(A30, method=method, max_iter=1, tol=1e-12)
    d = info.value.diagnostics
    assert d["converged"] is False and d["iterations"] == 1
    assert d["max_diag_error"] <= 1e-12 and d["min_eigenvalue"] >= -1e-10  # still feasible
    X, diag = nearest_correlation(A30, method=method, max_iter=1, tol=1e-12, raise_on_max_iter=False,
                                  return_diagnostics=True)
    assert not diag.converged
    assert_correlation(X)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=7),
    seed=st.integers(min_value=0, max_value=10_000),
    scale=st.floats(min_value=0.1, max_value=3.0),
)
def test_property_newton_is_feasible_and_nearest(n, seed, scale):
    g = torch.Generator().manual_seed(seed)
    A = scale * torch.randn(n, n, generator=g, dtype=torch.float64)
    X = nearest_correlation(A, method="newton", tol=1e-10)
    assert_correlation(X, psd_tol=1e-10, diag_tol=1e-12)
    As = 0.5 * (A + A.T)
    d = float((X - As).norm())
    # no other feasible point is nearer: the clipped point, the identity, AAP's output
    for Z in (clip_to_correlation(A), torch.eye(n, dtype=torch.float64), nearest_correlation(A, method="aap")):
        assert d <= float((Z - As).norm()) + 1e-9


# ------------------------------------------------------------------------------------------------- Newton warm start
def _cold_newton(A: torch.Tensor, tol: float) -> tuple[torch.Tensor, dict]:
    """Qi–Sun's cold start (no scalar shift), through the private solver the public entry uses."""
    G = 0.5 * (A + A.T)
    X, info = projection._newton(G[None], tol, 200, warm_start=False)
    return X[0], info


@pytest.mark.parametrize("n, d, sigma, seed", [(40, 8, 0.5, 11), (120, 16, 0.5, 12), (200, 32, 0.5, 13),
                                               (120, 16, 0.1, 14), (120, 16, 1.0, 15)])
def test_warm_start_same_point_and_no_more_eigendecompositions(n, d, sigma, seed):
    A = noisy_gram(n, d=d, sigma=sigma, seed=seed)
    Xw, dw = nearest_correlation(A, return_diagnostics=True)
    Xc, ic = _cold_newton(A, 1e-7)
    assert dw.converged and ic["converged"]
    assert dw.warm_start is True and ic["warm_start"] is False
    assert_correlation(Xw)
    assert rel(Xw, Xc) < 1e-6
    assert dw.eigendecompositions <= ic["eigendecompositions"]
    # the certificate holds at the warm-started solution too
    assert dw.dual_gradient_norm <= 1e-7 * np.sqrt(n)
    assert abs(dw.duality_gap) < 1e-6 * float((Xw - A).norm()) ** 2


@pytest.mark.parametrize("n, d, seed", [(40, 8, 21), (150, 16, 22)])
def test_warm_start_matches_tight_dykstra(n, d, seed):
    A = noisy_gram(n, d=d, sigma=0.5, seed=seed)
    Xd = nearest_correlation(A, method="dykstra", tol=1e-9, max_iter=100000)
    Xw = nearest_correlation(A)
    assert rel(Xw, Xd) < 1e-6


def test_warm_start_shifts_are_what_they_claim():
    # At Qi–Sun's start every F_i >= 0; the safe shift is the most negative c keeping min F >= 0,
    # the trace shift zeroes the mean of F, and the warm shift lies between them, lowering θ.
    A = noisy_gram(80, d=8, sigma=0.5, seed=23)
    G = 0.5 * (A + A.T)
    pt = projection._DualPoint.at(G, 1.0 - torch.diagonal(G))
    assert float(pt.grad.min()) >= -1e-12
    c_safe = projection._safe_shift(pt)
    c_star = projection._trace_shift(pt.lam)
    c = projection._warm_shift(pt)
    assert c_star < c < c_safe < 0
    assert abs(float(pt.shifted(c_safe).grad.min())) < 1e-10
    assert float(pt.shifted(c_safe - 1e-3).grad.min()) < 0
    assert abs(float(pt.shifted(c_star).grad.mean())) < 1e-10
    thetas = [pt.theta, pt.shifted(c_safe).theta, pt.shifted(c).theta, pt.shifted(c_star).theta]
    assert thetas == sorted(thetas, reverse=True)
    # a shifted point is the dual point a fresh eigendecomposition would give
    fresh = projection._DualPoint.at(G, pt.y + c)
    shifted = pt.shifted(c)
    assert torch.allclose(fresh.grad, shifted.grad, atol=1e-10)
    assert fresh.theta == pytest.approx(shifted.theta, rel=1e-12)


def test_warm_start_off_for_a_correlation_matrix():
    g = torch.Generator().manual_seed(24)
    F = torch.randn(20, 30, generator=g, dtype=torch.float64)
    F = F / F.norm(dim=1, keepdim=True)
    C = F @ F.T
    X, diag = nearest_correlation(C, return_diagnostics=True)
    assert diag.warm_start is False and diag.eigendecompositions == 1
    assert float((X - C).abs().max()) < 1e-10


@pytest.mark.parametrize("n, shift", [(30, -1.0), (30, 1.0), (60, -5.0), (60, 4.0)])
def test_jacobian_product_matches_dense_formula(n, shift):
    # V h = diag(P (Ω ∘ (Pᵀ Diag(h) P)) Pᵀ) for both block orders, with and without K = Π ∘ Π
    A = noisy_gram(n, d=8, sigma=0.5, seed=25)
    G = 0.5 * (A + A.T)
    pt = projection._DualPoint.at(G, torch.full((n,), shift, dtype=torch.float64))
    assert 0 < pt.r < n
    lam, P = pt.lam, pt.P
    pos = lam > 0
    Om = torch.zeros(n, n, dtype=torch.float64)
    Om[pos[:, None] & pos[None, :]] = 1.0
    li, lj = lam[:, None].expand(n, n), lam[None, :].expand(n, n)
    mixed = pos[:, None] & ~pos[None, :]
    Om[mixed] = li[mixed] / (li[mixed] - lj[mixed])
    Om = torch.where(mixed.T, Om.T, Om)
    g = torch.Generator().manual_seed(26)
    h = torch.randn(n, generator=g, dtype=torch.float64)
    dense = torch.diagonal(P @ (Om * (P.T @ torch.diag(h) @ P)) @ P.T)
    V = projection._Jacobian(pt)
    assert torch.allclose(V(h), dense, atol=1e-12)
    for K in (None, (V.Pm @ V.Pm.T).square()):  # both ways of applying the smaller block
        V.K = K
        assert torch.allclose(V(h), dense, atol=1e-12)
    dense_diag = torch.stack([torch.diagonal(P @ (Om * (P.T @ torch.diag(e) @ P)) @ P.T)[i]
                              for i, e in enumerate(torch.eye(n, dtype=torch.float64))])
    assert torch.allclose(V.diag, dense_diag, atol=1e-12)
