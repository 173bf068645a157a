"""Tests of privkit.scoreshield.release: score-vector and Gram releases, their guarantees, and audits."""

from __future__ import annotations

import inspect
import math

import pytest
import torch
from dp_accounting import GaussianDpEvent, SelfComposedDpEvent

from privkit.errors import InvalidArgumentError, NotUnitNormError, ShapeError, UnknownNameError
from privkit.privacy import analytic_gaussian_delta, audit, gaussian_sigma, make_generator
from privkit.scoreshield import (
    correlation_residuals,
    private_retrieve,
    record_sensitivity,
    release_gram,
    release_scores,
)
from privkit.scoreshield.release import SCORE_NEIGHBOURING, SCORE_PROTECTS


def unit(n: int, d: int, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    return (x / x.norm(dim=1, keepdim=True)).to(dtype)


# ------------------------------------------------------------------------------------------
# regime (i)
# ------------------------------------------------------------------------------------------


def test_scores_shape_dtype_clip_and_noise_level():
    E = unit(20000, 8, seed=1, dtype=torch.float32)
    q = unit(1, 8, seed=2, dtype=torch.float32)[0]
    r = release_scores(q, E, epsilon=30.0, delta=1e-5, calibration="analytic", generator=make_generator(0))
    assert r.scores.shape == (20000,) and r.scores.dtype == torch.float32
    assert float(r.scores.abs().max()) <= 1.0
    assert torch.equal(r.scores, r.unclipped.clamp(-1, 1))
    noise = (r.unclipped.double() - (E.double() @ q.double())).double()
    assert float(noise.mean()) == pytest.approx(0.0, abs=4 * r.sigma / math.sqrt(20000))
    assert float(noise.std()) == pytest.approx(r.sigma, rel=0.03)
    assert r.sensitivity == 2.0 and r.calibration == "analytic"


def test_default_calibration_meets_the_request():
    """The default σ is the analytic one, so a user who names no calibration gets the (ε, δ) asked for, also at
    ε ≥ 1 where the paper's rule under-noises; the Gram release and private retrieval default to it too."""
    E = unit(10, 4)
    r = release_scores(E[0], E, epsilon=20.0, delta=1e-4, generator=make_generator(0))
    assert r.calibration == "analytic" and r.guarantee.meets_request
    assert r.sigma == pytest.approx(gaussian_sigma(20.0, 1e-4, sensitivity=2.0, method="analytic"), rel=1e-12)
    assert r.sigma > gaussian_sigma(20.0, 1e-4, sensitivity=2.0, method="scoreshield")  # the paper's σ is too small
    g = release_gram(E, epsilon=20.0, delta=1e-4, generator=make_generator(0))
    assert g.guarantee.processing[0] == "analytic calibration of σ" and g.guarantee.meets_request
    assert g.sigma == pytest.approx(gaussian_sigma(20.0, 1e-4, sensitivity=g.sensitivity, method="analytic"),
                                    rel=1e-12)
    assert inspect.signature(private_retrieve).parameters["calibration"].default == "analytic"


def test_scoreshield_sigma_is_the_papers_and_guarantee_is_honest():
    E = unit(10, 4)
    r = release_scores(E[0], E, epsilon=20.0, delta=1e-4, calibration="scoreshield", generator=make_generator(0))
    assert r.sigma == pytest.approx(2.0 * math.sqrt(2.0 * math.log(2.0 / 1e-4)) / 20.0, rel=1e-12)
    assert r.sigma == pytest.approx(0.445, abs=5e-4)  # docs/scoreshield.md §5 table
    gt = r.guarantee
    assert gt.epsilon == 20.0 and gt.requested_delta == 1e-4
    assert gt.delta == pytest.approx(8.6e-3, rel=0.01)
    assert not gt.meets_request
    assert any("NOT met" in n for n in gt.notes)
    assert "NOT met" in str(gt)
    assert gt.neighbours == SCORE_NEIGHBOURING and gt.protects == SCORE_PROTECTS
    assert gt.neighbours.relation == "replace-one" and gt.neighbours.bound == 2.0 and gt.neighbours.norm == "l2"
    # one query: a Gaussian event, noise multiplier σ relative to the per-record bound Δ/2 = 1
    assert isinstance(gt.event, GaussianDpEvent) and gt.event.noise_multiplier == pytest.approx(r.sigma / 1.0)
    assert gt.accountant == "analytic-gaussian"
    # the rendered prose still states ε, δ, the relation and the mechanism
    assert "ε=20.00" in str(gt) and "δ=0.00863" in str(gt) and "replace-one" in gt.neighbouring
    assert "Gaussian mechanism" in gt.mechanism and "scoreshield calibration" in gt.mechanism
    # at the paper's eps >= 70 there is no guarantee left at all
    r70 = release_scores(E[0], E, epsilon=70.0, delta=1e-4, calibration="scoreshield", generator=make_generator(0))
    assert r70.guarantee.delta > 0.9


@pytest.mark.slow
@pytest.mark.parametrize("case", ["one", "joint", "per_query", "gram_record", "gram_adjacency"])
def test_release_events_reproduce_the_stated_delta(case):
    """Handed to dp_accounting's PLD accountant under the relation's NeighboringRelation, the event gives the
    exact analytic-Gaussian δ the guarantee states (same ε)."""
    from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

    E, Q = unit(30, 6, seed=3), unit(4, 6, seed=4)
    gen = make_generator(0)
    rel = {
        "one": lambda: release_scores(E[0], E, epsilon=20.0, delta=1e-4, generator=gen),
        "joint": lambda: release_scores(Q, E, epsilon=2.0, delta=1e-5, calibration="analytic", generator=gen),
        "per_query": lambda: release_scores(Q, E, epsilon=2.0, delta=1e-5, accounting="per_query", sensitivity=1.5,
                                            generator=gen),
        "gram_record": lambda: release_gram(E[:10], epsilon=1.0, delta=1e-5, generator=gen),
        "gram_adjacency": lambda: release_gram(E[:10], epsilon=1.0, delta=1e-5, adjacency="gram", delta_g=2.0,
                                               generator=gen),
    }[case]()
    g = rel.guarantee
    acc = PLDAccountant(neighboring_relation=g.neighbours.accounting_relation(), value_discretization_interval=1e-4)
    acc.compose(g.event)
    assert acc.get_delta(g.epsilon) == pytest.approx(g.delta, rel=1e-6)


def test_analytic_calibration_meets_the_request():
    E = unit(10, 4)
    r = release_scores(E[0], E, epsilon=20.0, delta=1e-4, calibration="analytic", generator=make_generator(0))
    assert r.guarantee.meets_request
    assert r.guarantee.delta <= 1e-4 * (1 + 1e-9)
    assert r.sigma == pytest.approx(0.539, abs=1e-3)  # docs/scoreshield.md §5: needed sigma* at eps=20
    # scoreshield's rule below eps = 1 is valid: request met, with a smaller true delta
    r1 = release_scores(E[0], E, epsilon=0.5, delta=1e-5, generator=make_generator(0))
    assert r1.guarantee.meets_request and r1.guarantee.delta < 1e-5


def test_multiple_queries_joint_and_per_query_accounting():
    E = unit(30, 6, seed=3)
    Q = unit(4, 6, seed=4)
    rj = release_scores(Q, E, epsilon=2.0, delta=1e-5, calibration="analytic", generator=make_generator(1))
    assert rj.scores.shape == (4, 30)
    assert rj.sigma == pytest.approx(gaussian_sigma(2.0, 1e-5, sensitivity=2.0 * 2.0), rel=1e-12)
    assert rj.guarantee.meets_request
    rp = release_scores(Q, E, epsilon=2.0, delta=1e-5, calibration="analytic", generator=make_generator(1),
                        accounting="per_query")
    assert rp.sigma == pytest.approx(gaussian_sigma(2.0, 1e-5, sensitivity=2.0), rel=1e-12)
    assert "each query row separately" in rp.guarantee.neighbours.detail
    assert "each query row separately" in rp.guarantee.neighbouring
    # per query: one Gaussian event per row; joint: the m = 4 rows are a 4-fold composition
    assert isinstance(rp.guarantee.event, GaussianDpEvent)
    assert rp.guarantee.event.noise_multiplier == pytest.approx(rp.sigma)
    assert isinstance(rj.guarantee.event, SelfComposedDpEvent) and rj.guarantee.event.count == 4
    assert rj.guarantee.event.event.noise_multiplier == pytest.approx(rj.sigma) and rj.guarantee.neighbours.detail == ""
    joint = analytic_gaussian_delta(2.0, rp.sigma, sensitivity=4.0)
    assert any(f"{joint:.3g}" in n for n in rp.guarantee.notes)


def test_reproducible_with_seed_and_fresh_without():
    E = unit(50, 8)
    a = release_scores(E[1], E, epsilon=5.0, delta=1e-5, generator=make_generator(7)).scores
    b = release_scores(E[1], E, epsilon=5.0, delta=1e-5, generator=make_generator(7)).scores
    c = release_scores(E[1], E, epsilon=5.0, delta=1e-5, generator=make_generator(8)).scores
    d = release_scores(E[1], E, epsilon=5.0, delta=1e-5).scores  # OS-entropy seeded
    assert torch.equal(a, b) and not torch.equal(a, c) and not torch.equal(a, d)


def test_domain_restricted_sensitivity_is_noted():
    E = unit(10, 4)
    r = release_scores(E[0], E, epsilon=1.0, delta=1e-5, sensitivity=1.5, generator=make_generator(0))
    assert any("clamped into [-0.5, 1]" in n for n in r.guarantee.notes)


def test_unit_norm_tolerance_and_renormalisation():
    E = unit(5, 4)
    ok = E * (1 + 5e-5)  # within UNIT_NORM_TOL = 1e-4
    r1 = release_scores(E[0], ok, epsilon=1.0, delta=1e-5, generator=make_generator(3))
    r2 = release_scores(E[0], E, epsilon=1.0, delta=1e-5, generator=make_generator(3))
    assert torch.allclose(r1.unclipped, r2.unclipped, atol=1e-12)
    with pytest.raises(NotUnitNormError, match="tolerance"):
        release_scores(E[0], E * 1.001, epsilon=1.0, delta=1e-5)
    with pytest.raises(NotUnitNormError):
        release_scores(E[0] * 2, E, epsilon=1.0, delta=1e-5)


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(epsilon=0.0, delta=1e-5), InvalidArgumentError, "epsilon"),
        (dict(epsilon=1.0, delta=1.0), InvalidArgumentError, "delta"),
        (dict(epsilon=1.0, delta=1e-5, calibration="classic"), UnknownNameError, "scoreshield"),
        (dict(epsilon=1.0, delta=1e-5, accounting="sum"), UnknownNameError, "per_query"),
        (dict(epsilon=1.0, delta=1e-5, sensitivity=-2.0), InvalidArgumentError, "sensitivity"),
        (dict(epsilon=1.0, delta=1e-5, generator=0), InvalidArgumentError, "generator"),
    ],
)
def test_score_argument_errors(kwargs, err, match):
    E = unit(5, 4)
    with pytest.raises(err, match=match):
        release_scores(E[0], E, **kwargs)


def test_score_shape_and_value_errors():
    E = unit(5, 4)
    with pytest.raises(ShapeError):
        release_scores(unit(1, 3)[0], E, epsilon=1.0, delta=1e-5)
    with pytest.raises(ShapeError):
        release_scores(E[0], E.unsqueeze(0), epsilon=1.0, delta=1e-5)
    bad = E.clone()
    bad[2, 1] = float("nan")
    with pytest.raises(InvalidArgumentError, match="NaN"):
        release_scores(E[0], bad, epsilon=1.0, delta=1e-5)
    with pytest.raises(InvalidArgumentError):
        release_scores(E[0], E.numpy(), epsilon=1.0, delta=1e-5)


# ------------------------------------------------------------------------------------------
# regime (ii)
# ------------------------------------------------------------------------------------------


def test_record_sensitivity_formula():
    assert record_sensitivity(2) == pytest.approx(2 * math.sqrt(2))
    assert record_sensitivity(2048) == pytest.approx(2 * math.sqrt(2 * 2047))
    # attained by the worst-case neighbours: all rows u, then one row replaced by -u
    n = 7
    u = unit(1, 5)[0]
    E0 = u.expand(n, 5).clone()
    E1 = E0.clone()
    E1[3] = -u
    assert float((E0 @ E0.T - E1 @ E1.T).norm()) == pytest.approx(record_sensitivity(n), rel=1e-12)
    with pytest.raises(InvalidArgumentError):
        record_sensitivity(1)


@pytest.mark.parametrize("projection", ["nearest", "aap", "clip"])
def test_gram_projections_are_feasible(projection):
    E = unit(25, 6, seed=5)
    r = release_gram(E, epsilon=5.0, delta=1e-5, adjacency="gram", delta_g=2.0, projection=projection,
                     generator=make_generator(0))
    res = correlation_residuals(r.matrix)
    assert res["min_eigenvalue"] >= -1e-10 and res["max_diag_error"] <= 1e-12
    d = r.diagnostics
    assert d.min_eigenvalue >= -1e-10 and d.max_diag_error <= 1e-12
    assert d.distance == pytest.approx(float((r.matrix - r.noisy).norm()), rel=1e-9)
    assert d.eigendecompositions >= 1
    assert r.projection == projection


def test_gram_none_returns_symmetric_noise_with_the_right_variances():
    n = 200
    E = unit(n, 16, seed=6)
    r = release_gram(E, epsilon=5.0, delta=1e-5, adjacency="gram", delta_g=1.0, projection="none",
                     calibration="analytic", generator=make_generator(1))
    assert r.sigma == pytest.approx(gaussian_sigma(5.0, 1e-5, sensitivity=1.0), rel=1e-12)
    assert torch.equal(r.noisy, r.noisy.T) and torch.equal(r.matrix, r.noisy)
    G = r.noisy - E @ E.T
    iu = torch.triu_indices(n, n, 1)
    assert float(G[iu[0], iu[1]].std()) == pytest.approx(r.sigma / math.sqrt(2), rel=0.03)
    assert float(torch.diagonal(G).std()) == pytest.approx(r.sigma, rel=0.15)
    assert r.diagnostics.method == "none" and r.diagnostics.min_eigenvalue < 0  # noisy: not PSD


def test_gram_record_adjacency_guarantee_and_labels():
    E = unit(10, 4)
    r = release_gram(E, epsilon=1.0, delta=1e-5, calibration="scoreshield", generator=make_generator(0))
    assert r.sensitivity == pytest.approx(2 * math.sqrt(18))
    assert r.sigma == pytest.approx(r.sensitivity * math.sqrt(2 * math.log(2 / 1e-5)) / 1.0, rel=1e-12)
    assert r.guarantee.neighbours.relation == "replace-one" and r.guarantee.neighbours.norm == "frobenius"
    assert r.guarantee.neighbours.bound == pytest.approx(r.sensitivity)
    assert r.guarantee.event.noise_multiplier == pytest.approx(r.sigma / (r.sensitivity / 2))
    assert r.guarantee.neighbouring.startswith("replace-one")
    assert r.guarantee.meets_request  # scoreshield's rule at eps = 1 still holds (true delta smaller)
    small = release_gram(E, epsilon=1.0, delta=1e-5, adjacency="gram", delta_g=2.0, generator=make_generator(0))
    assert small.guarantee.neighbours.relation == "bounded-change" and small.guarantee.neighbours.bound == 2.0
    assert small.guarantee.neighbours.norm == "frobenius" and small.sensitivity == 2.0
    assert small.guarantee.event.noise_multiplier == pytest.approx(small.sigma / 2.0)
    assert "NOT record-level privacy unless" in small.guarantee.neighbours.detail
    assert "8.485" in small.guarantee.neighbouring
    big = release_gram(E, epsilon=1.0, delta=1e-5, adjacency="gram", delta_g=10.0, generator=make_generator(0))
    assert big.guarantee.neighbours.relation == "bounded-change"
    assert "also covers record-level" in big.guarantee.neighbours.detail
    assert big.guarantee.protects == "each record's embedding"


def test_gram_large_epsilon_guarantee_is_honest():
    E = unit(64, 8)
    r = release_gram(E, epsilon=20.0, delta=1e-4, adjacency="gram", delta_g=2.0, projection="clip",
                     calibration="scoreshield", generator=make_generator(0))
    assert not r.guarantee.meets_request
    assert r.guarantee.delta == pytest.approx(8.6e-3, rel=0.01)  # same sigma/Delta ratio as the score case


def test_gram_projection_reduces_error_and_nearest_is_nearest():
    E = unit(60, 8, seed=9)
    S = E @ E.T
    out = {}
    for p in ("nearest", "aap", "clip", "none"):
        out[p] = release_gram(E, epsilon=10.0, delta=1e-5, adjacency="gram", delta_g=2.0, projection=p,
                              generator=make_generator(11))
    noisy = out["none"].matrix
    for p in ("aap", "clip"):
        assert torch.equal(out[p].noisy, noisy)  # same seed, same noise
        assert out["nearest"].diagnostics.distance < out[p].diagnostics.distance
    for p in ("nearest", "aap", "clip"):
        assert float((out[p].matrix - S).norm()) < float((noisy - S).norm())


def test_gram_batch_and_dtype():
    E = unit(8, 4, dtype=torch.float32)
    B = E.unsqueeze(0).expand(3, 8, 4)
    r = release_gram(B, epsilon=2.0, delta=1e-5, adjacency="gram", delta_g=1.0, generator=make_generator(2))
    assert r.matrix.shape == (3, 8, 8) and r.matrix.dtype == torch.float32
    assert not torch.equal(r.noisy[0], r.noisy[1])  # independent noise per collection
    assert any("per collection" in n for n in r.guarantee.notes)
    assert r.diagnostics.batch_size == 3


def test_gram_aap_cap_returns_feasible_output():
    E = unit(30, 4)
    r = release_gram(E, epsilon=1.0, delta=1e-5, adjacency="gram", delta_g=2.0, projection="aap", max_iter=2,
                     generator=make_generator(0))
    assert not r.diagnostics.converged and r.diagnostics.iterations == 2
    assert r.diagnostics.min_eigenvalue >= -1e-10


@pytest.mark.parametrize(
    "kwargs, err",
    [
        (dict(adjacency="gram"), InvalidArgumentError),
        (dict(adjacency="record", delta_g=2.0), InvalidArgumentError),
        (dict(adjacency="gram", delta_g=0.0), InvalidArgumentError),
        (dict(adjacency="pairs"), UnknownNameError),
        (dict(projection="psd"), UnknownNameError),
        (dict(solver="cvx"), UnknownNameError),
    ],
)
def test_gram_argument_errors(kwargs, err):
    with pytest.raises(err):
        release_gram(unit(5, 3), epsilon=1.0, delta=1e-5, **kwargs)


def test_gram_shape_errors():
    with pytest.raises(ShapeError):
        release_gram(unit(1, 3), epsilon=1.0, delta=1e-5)
    with pytest.raises(ShapeError):
        release_gram(unit(4, 3)[0], epsilon=1.0, delta=1e-5)
    with pytest.raises(NotUnitNormError):
        release_gram(unit(4, 3) * 3, epsilon=1.0, delta=1e-5)


# ------------------------------------------------------------------------------------------
# empirical privacy audits (privkit.privacy.audit)
# ------------------------------------------------------------------------------------------

EPS, DELTA = 1.0, 1e-5
U = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
GALLERY0 = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]], dtype=torch.float64)
GALLERY1 = GALLERY0.clone()
GALLERY1[0] = -U  # record 0 replaced by its opposite w.r.t. the query: its score moves by 2 = Delta


def score_mechanism(sensitivity: float):
    """n independent single-query releases (a batch of n identical queries, per-query calibrated)."""

    def mechanism(gallery, n, generator):
        r = release_scores(U.expand(n, 4), gallery, epsilon=EPS, delta=DELTA, calibration="analytic",
                           generator=generator, sensitivity=sensitivity, accounting="per_query")
        return r.unclipped[:, 0]  # pre-clip noisy score of the changed record (clipping is post-processing)

    return mechanism


def test_audit_score_release_is_below_its_claim():
    res = audit(score_mechanism(2.0), GALLERY0, GALLERY1, n_samples=200_000, delta=DELTA, seed=0,
                claimed_epsilon=EPS)
    assert res.passed
    assert 0.3 < res.epsilon_lower <= EPS  # the audit has power, and finds no violation


def test_audit_catches_halved_score_sensitivity():
    # Δ = 1 is enforced (scores clamped into [0, 1]), so the release audits below its claim ...
    assert audit(score_mechanism(1.0), GALLERY0, GALLERY1, n_samples=200_000, delta=DELTA, seed=0,
                 claimed_epsilon=EPS).passed

    # ... and the negative control, the same release with what the clamp removed added back (the release before
    # the domain was enforced), is caught.
    def unenforced(gallery, n, generator):
        return score_mechanism(1.0)(gallery, n, generator) + (float(gallery[0] @ U) - max(float(gallery[0] @ U), 0.0))

    res = audit(unenforced, GALLERY0, GALLERY1, n_samples=200_000, delta=DELTA, seed=0, claimed_epsilon=EPS)
    assert not res.passed and res.epsilon_lower > 1.1 * EPS


N_GRAM = 5
E0 = U.expand(N_GRAM, 4).clone()
E1 = E0.clone()
E1[0] = -U  # worst case: ||E0E0^T - E1E1^T||_F = 2 sqrt(2(n-1))


def gram_mechanism(delta_g: float | None):
    """n independent Gram releases, reduced to the sum of row 0's off-diagonal noisy entries.

    That sum is <noisy, D>/(-4) for the fixed difference D = E1E1^T - E0E0^T, a fixed (data-independent)
    post-processing of the release, so it carries the release's guarantee; it is the most powerful
    test statistic for this pair.
    """

    def mechanism(E, n, generator):
        kw = dict(adjacency="record") if delta_g is None else dict(adjacency="gram", delta_g=delta_g)
        r = release_gram(E.expand(n, N_GRAM, 4), epsilon=EPS, delta=DELTA, calibration="analytic",
                         projection="none", generator=generator, verify=False, **kw)
        return r.noisy[:, 0, 1:].sum(-1)

    return mechanism


@pytest.mark.slow
def test_audit_gram_release_is_below_its_claim():
    res = audit(gram_mechanism(None), E0, E1, n_samples=200_000, delta=DELTA, seed=0, claimed_epsilon=EPS)
    assert res.passed and res.epsilon_lower > 0.3


@pytest.mark.slow
def test_audit_catches_gram_adjacency_with_half_the_record_radius():
    # Gram adjacency with Δ_G = 2√(2(n−1))/2 claims (1, 1e-5) for Gram neighbours within Δ_G, which is NOT
    # record-level privacy: record neighbours lie 2√(2(n−1)) apart and the audit shows the claim fails for them.
    half = record_sensitivity(N_GRAM) / 2
    res = audit(gram_mechanism(half), E0, E1, n_samples=200_000, delta=DELTA, seed=0, claimed_epsilon=EPS)
    assert not res.passed and res.epsilon_lower > 1.1 * EPS
