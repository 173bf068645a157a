"""Noise samplers: distributions (KS tests), per-row independence of metric-DP noise,
determinism under a seeded generator, dtype/device handling and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

import privkit.privacy.samplers as samplers_module
from privkit.errors import InvalidArgumentError, PrivkitError
from privkit.privacy import (
    make_generator,
    sample_gamma,
    sample_gaussian,
    sample_laplace,
    sample_metric_laplace,
)

# A fixed seed makes every KS test deterministic; P_MIN only guards against a wrong distribution.
P_MIN = 1e-3
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def ks(x: torch.Tensor, dist) -> float:
    return float(stats.kstest(x.double().cpu().numpy().ravel(), dist.cdf).pvalue)


# ---------------------------------------------------------------- generators
def test_make_generator_seeded_is_reproducible():
    a = sample_gaussian(100, sigma=1.0, generator=make_generator(123))
    b = sample_gaussian(100, sigma=1.0, generator=make_generator(123))
    c = sample_gaussian(100, sigma=1.0, generator=make_generator(124))
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_make_generator_secure_uses_fresh_entropy():
    a = sample_gaussian(50, sigma=1.0, generator=make_generator(secure=True))
    b = sample_gaussian(50, sigma=1.0, generator=make_generator(secure=True))
    assert not torch.equal(a, b)
    with pytest.raises(InvalidArgumentError, match="seed"):
        make_generator(1, secure=True)
    with pytest.raises(InvalidArgumentError, match="seed"):
        make_generator(-1)
    with pytest.raises(InvalidArgumentError, match="seed"):
        make_generator(2**64)
    assert make_generator(5).device.type == "cpu"


def test_module_docstring_warns_about_floating_point_attacks():
    doc = " ".join(samplers_module.__doc__.split())
    assert "not hardened against floating-point attacks" in doc and "Mironov" in doc


def test_samplers_do_not_touch_global_rng():
    state = torch.random.get_rng_state()
    g = make_generator(0)
    sample_gaussian(10, sigma=1.0, generator=g)
    sample_laplace(10, scale=1.0, generator=g)
    sample_metric_laplace(10, 20, epsilon=1.0, generator=g)
    sample_gamma(10, concentration=20.0, generator=g)
    assert torch.equal(state, torch.random.get_rng_state())


# ---------------------------------------------------------------- Gaussian and Laplace
def test_gaussian_distribution_and_shape():
    x = sample_gaussian((200, 100), sigma=2.5, generator=make_generator(0))
    assert x.shape == (200, 100) and x.dtype == torch.float32
    assert ks(x, stats.norm(scale=2.5)) > P_MIN


def test_laplace_distribution_and_shape():
    x = sample_laplace((20000,), scale=0.7, generator=make_generator(1), dtype=torch.float64)
    assert x.shape == (20000,) and x.dtype == torch.float64
    assert ks(x, stats.laplace(scale=0.7)) > P_MIN
    assert bool(torch.isfinite(x).all())


def test_ks_tests_have_power():
    # The same KS test rejects a wrong scale, so passing above is informative.
    x = sample_laplace(20000, scale=0.7, generator=make_generator(1), dtype=torch.float64)
    assert ks(x, stats.laplace(scale=0.75)) < P_MIN
    assert ks(x, stats.norm(scale=0.7 * np.sqrt(2))) < P_MIN


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_dtypes_follow_argument(dtype):
    g = make_generator(0)
    for x in (sample_gaussian(8, sigma=1.0, generator=g, dtype=dtype),
              sample_laplace(8, scale=1.0, generator=g, dtype=dtype),
              sample_gamma(8, concentration=3.0, generator=g, dtype=dtype),
              sample_metric_laplace(4, 3, epsilon=1.0, generator=g, dtype=dtype)):
        assert x.dtype == dtype and x.device.type == "cpu"


def test_without_generator_uses_cpu_and_works():
    x = sample_gaussian(5, sigma=1.0)
    assert x.shape == (5,) and x.device.type == "cpu"


@pytest.mark.parametrize("call,argname", [
    (lambda: sample_gaussian(3, sigma=0.0), "sigma"),
    (lambda: sample_gaussian(3, sigma=float("nan")), "sigma"),
    (lambda: sample_laplace(3, scale=-1.0), "scale"),
    (lambda: sample_gaussian(-1, sigma=1.0), "shape"),
    (lambda: sample_gaussian((2, 1.5), sigma=1.0), "shape"),
    (lambda: sample_gaussian(3, sigma=1.0, dtype=torch.int64), "dtype"),
    (lambda: sample_gaussian(3, sigma=1.0, generator=42), "generator"),
    (lambda: sample_gamma(3, concentration=0.0), "concentration"),
    (lambda: sample_gamma(3, concentration=2.0, scale=0.0), "scale"),
    (lambda: sample_metric_laplace(3, 0, epsilon=1.0), "d"),
    (lambda: sample_metric_laplace(-1, 2, epsilon=1.0), "n"),
    (lambda: sample_metric_laplace(3, 2, epsilon=0.0), "epsilon"),
    (lambda: sample_metric_laplace(3, 2, epsilon=1.0, device="tpu"), "device"),
])
def test_bad_inputs(call, argname):
    with pytest.raises(PrivkitError, match=argname):
        call()


# ---------------------------------------------------------------- Gamma
@pytest.mark.parametrize("k", [0.4, 1.0, 3.0, 8.0, 9.0, 64.0, 300.0, 2.5])
def test_gamma_distribution(k):
    x = sample_gamma(8000, concentration=k, scale=0.3, generator=make_generator(7), dtype=torch.float64)
    assert ks(x, stats.gamma(k, scale=0.3)) > P_MIN
    assert bool((x > 0).all())


def test_gamma_seeded_and_empty():
    a = sample_gamma((3, 4), concentration=50.0, generator=make_generator(2))
    b = sample_gamma((3, 4), concentration=50.0, generator=make_generator(2))
    assert a.shape == (3, 4) and torch.equal(a, b)
    assert sample_gamma((0, 3), concentration=2.0).shape == (0, 3)


# ---------------------------------------------------------------- metric (multivariate) Laplace
@pytest.mark.parametrize("d,eps", [(1, 0.5), (2, 2.0), (16, 1.0), (128, 3.0), (512, 0.2)])
def test_metric_laplace_radius_is_gamma(d, eps):
    z = sample_metric_laplace(4000, d, epsilon=eps, generator=make_generator(d), dtype=torch.float64)
    assert z.shape == (4000, d)
    r = torch.linalg.vector_norm(z, dim=1)
    assert ks(r, stats.gamma(d, scale=1.0 / eps)) > P_MIN


@pytest.mark.parametrize("d", [2, 3, 16, 128])
def test_metric_laplace_direction_is_uniform(d):
    z = sample_metric_laplace(4000, d, epsilon=1.0, generator=make_generator(100 + d), dtype=torch.float64)
    u = torch.zeros(d, dtype=torch.float64)
    u[0], u[-1] = 0.6, 0.8  # a fixed unit vector that is not a coordinate axis
    t = (z @ u) / torch.linalg.vector_norm(z, dim=1)
    a = (d - 1) / 2
    assert ks((1 + t) / 2, stats.beta(a, a)) > P_MIN


def test_metric_laplace_in_one_dimension_is_laplace():
    z = sample_metric_laplace(20000, 1, epsilon=2.0, generator=make_generator(3), dtype=torch.float64)
    assert ks(z[:, 0], stats.laplace(scale=0.5)) > P_MIN


def _shared_noise_statistic(z: torch.Tensor) -> float:
    """|mean cosine| between consecutive rows, in units of its standard error under independence."""
    zn = z.double() / torch.linalg.vector_norm(z.double(), dim=1, keepdim=True)
    cos = (zn[1:] * zn[:-1]).sum(dim=1)
    n, d = z.shape
    return float(cos.mean().abs() * np.sqrt(d * (n - 1)))


def test_metric_laplace_rows_are_independent():
    n, d = 3000, 32
    z = sample_metric_laplace(n, d, epsilon=1.0, generator=make_generator(11), dtype=torch.float64)
    # no two rows alike, consecutive rows uncorrelated
    assert torch.unique(z, dim=0).shape[0] == n
    assert _shared_noise_statistic(z) < 5.0
    # second moments: E z z^T = (d + 1)/eps^2 I (radius E R^2 = d(d+1)/eps^2 spread over d axes)
    cov = z.T @ z / n
    assert torch.allclose(torch.diagonal(cov), torch.full((d,), float(d + 1), dtype=torch.float64), rtol=0.15)
    off = cov - torch.diag(torch.diagonal(cov))
    assert float(off.abs().max()) < 0.15 * (d + 1)
    # the check catches the known bug: one noise vector shared across the batch
    shared = z[:1].expand(n, d)
    assert torch.unique(shared, dim=0).shape[0] == 1
    assert _shared_noise_statistic(shared) > 100.0


def test_metric_laplace_is_reproducible_and_handles_empty():
    a = sample_metric_laplace(5, 7, epsilon=1.0, generator=make_generator(9))
    b = sample_metric_laplace(5, 7, epsilon=1.0, generator=make_generator(9))
    assert torch.equal(a, b)
    assert sample_metric_laplace(0, 7, epsilon=1.0).shape == (0, 7)


# ---------------------------------------------------------------- CUDA (skipped on CPU-only machines)
@cuda
def test_cuda_generator_and_output_device():
    g = make_generator(0, device="cuda")
    for x in (sample_gaussian(10, sigma=1.0, generator=g), sample_laplace(10, scale=1.0, generator=g),
              sample_metric_laplace(10, 4, epsilon=1.0, generator=g),
              sample_gamma(10, concentration=30.0, generator=g)):
        assert x.device.type == "cuda"
    z = sample_metric_laplace(4000, 16, epsilon=2.0, generator=make_generator(1, device="cuda"), dtype=torch.float64)
    assert ks(torch.linalg.vector_norm(z, dim=1), stats.gamma(16, scale=0.5)) > P_MIN


@cuda
def test_cuda_device_generator_mismatch_is_an_error():
    with pytest.raises(InvalidArgumentError, match="generator"):
        sample_gaussian(3, sigma=1.0, generator=make_generator(0), device="cuda")


# ---------------------------------------------------------------- Poisson sampling (DP-SGD batches)
def _poisson_p_values(sampler, *, n: int = 30, q: float = 0.3, draws: int = 4000) -> dict[str, float]:
    """Chi-square p-values of three properties Poisson sampling must have: every record is included with
    probability q, the batch size is Binomial(n, q), and two records are included independently."""
    g = torch.Generator().manual_seed(11)
    inc = torch.zeros(draws, n, dtype=torch.bool)
    for t in range(draws):
        inc[t, sampler(n, q, g)] = True
    per_record = inc.sum(0).double().numpy()
    p_record = stats.chisquare(per_record, np.full(n, per_record.sum() / n)).pvalue
    sizes = inc.sum(1).numpy()
    expected = stats.binom.pmf(np.arange(n + 1), n, q) * draws
    lo, hi = int(stats.binom.ppf(0.01, n, q)), int(stats.binom.ppf(0.99, n, q))  # pool the sparse tails
    obs = [np.sum(sizes <= lo)] + [np.sum(sizes == k) for k in range(lo + 1, hi)] + [np.sum(sizes >= hi)]
    exp = [expected[: lo + 1].sum()] + list(expected[lo + 1:hi]) + [expected[hi:].sum()]
    p_size = stats.chisquare(obs, np.asarray(exp) * draws / np.sum(exp)).pvalue
    a, b = inc[:, 0].numpy(), inc[:, 1].numpy()
    table = np.array([[np.sum(~a & ~b), np.sum(~a & b)], [np.sum(a & ~b), np.sum(a & b)]])
    p_pair = stats.chi2_contingency(table, correction=False).pvalue
    return {"record": float(p_record), "size": float(p_size), "pair": float(p_pair)}


def test_poisson_subset_is_poisson_sampling_and_a_fixed_size_batch_is_caught():
    from privkit.privacy import poisson_subset

    p = _poisson_p_values(lambda n, q, g: poisson_subset(n, q, generator=g))
    assert min(p.values()) > P_MIN, p

    def fixed_size(n, q, g):  # the common shortcut: a shuffled batch of exactly round(q n) records
        return torch.randperm(n, generator=g)[: round(q * n)]

    assert _poisson_p_values(fixed_size)["size"] < 1e-12  # the batch size never varies

    def in_pairs(n, q, g):  # records 2k and 2k + 1 enter together (e.g. sampling photos by person)
        first = (torch.rand(n // 2, generator=g, dtype=torch.float64) < q).nonzero().squeeze(1) * 2
        return torch.cat([first, first + 1])

    assert _poisson_p_values(in_pairs)["pair"] < 1e-12


def test_poisson_subset_draws_float64_uniforms_and_checks_its_arguments():
    from privkit.privacy import poisson_subset

    idx = poisson_subset(1000, 0.25, generator=torch.Generator().manual_seed(3))
    u = torch.rand(1000, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert torch.equal(idx, (u < 0.25).nonzero().squeeze(1)) and idx.dtype == torch.int64
    assert poisson_subset(0, 0.5).numel() == 0 and torch.equal(poisson_subset(5, 1.0), torch.arange(5))
    for bad in (0.0, -0.1, 1.5, float("nan"), float("inf")):
        with pytest.raises(InvalidArgumentError, match="q"):
            poisson_subset(10, bad)
    with pytest.raises(InvalidArgumentError, match="n"):
        poisson_subset(-1, 0.5)
    with pytest.raises(InvalidArgumentError, match="generator"):
        poisson_subset(10, 0.5, generator="seed")
