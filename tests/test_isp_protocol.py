"""Tests of privkit.isp.verification and privkit.isp.probes: low-FAR thresholds, chunked scans, the open-set protocol."""

from __future__ import annotations

import math

import pytest
import torch

from privkit.errors import InsufficientDataError, InvalidArgumentError, ShapeError, UnknownNameError
from privkit.isp.probes import (
    MLPProbe,
    RawProbe,
    RidgeProbe,
    fit_ridge_probe,
    select_ridge_probe,
)
from privkit.isp.projection import IdentitySanitizer
from privkit.isp.protocol import EmbeddingSplits, VerificationProtocol, evaluate_verification, subsample_shots
from privkit.isp.verification import (
    VerificationPairs,
    pair_threshold,
    pairwise_tar_at_far,
    scan_pairs,
    validation_tar,
)
from privkit.metrics import smallest_resolvable_far, tar_at_far, thresholds_at_far


D, R0 = 24, 4
_FRAME = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(3)))[0]
IDENTITY_BASIS = _FRAME[:, :R0]
NUISANCE_BASIS = _FRAME[:, R0 : R0 + 6]


def clusters(n_id: int, shots: int, *, seed: int, offset: int = 0, strength: float = 1.0, nuisance: float = 1.5):
    """Unit vectors whose identity signal (a planted subspace) is weaker than a large per-image nuisance.

    The nuisance dominates raw cosine, so a probe that learns the identity subspace beats raw cosine.
    """
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n_id, R0, generator=g) @ IDENTITY_BASIS.T * strength
    ids = torch.arange(n_id).repeat_interleave(shots)
    z = means[ids] + nuisance * torch.randn(ids.numel(), 6, generator=g) @ NUISANCE_BASIS.T
    z = z + 0.2 * torch.randn(ids.numel(), D, generator=g)
    return torch.nn.functional.normalize(z, dim=1), ids + offset


@pytest.fixture(scope="module")
def splits():
    train = clusters(60, 10, seed=1)
    val = clusters(30, 10, seed=2, offset=1000)
    test = clusters(30, 10, seed=3, offset=2000)
    return train, val, test


def brute_pairs(z, ids, e=1, pairs=None):
    """All genuine and impostor scores by explicit loops (reference implementation)."""
    if pairs is None or pairs.symmetric:
        s = z @ z.T
        iu = torch.triu_indices(len(ids), len(ids), offset=1)
        sc = s[iu[0], iu[1]]
        same = ids[iu[0]] == ids[iu[1]]
        return sc[same], sc[~same]
    q, ql, g, gl = pairs.build(z)
    s = q @ g.T
    same = ql[:, None] == gl[None, :]
    return s[same], s[~same]


# ---------------------------------------------------------------------------------------------------------------------
# Resolution rule and thresholds
# ---------------------------------------------------------------------------------------------------------------------
def test_smallest_resolvable_far():
    n = 1600 * 1599 // 2 - 80 * 20 * 19 // 2  # the paper's 80 x 20 test images: ~1.26 M impostor pairs
    floor = smallest_resolvable_far(n)
    assert floor == pytest.approx(10 / n)
    assert 1e-5 > floor > 1e-6  # 1e-4 and 1e-5 resolvable, 1e-6 not
    assert smallest_resolvable_far(1000, min_false_accepts=1) == 1e-3
    assert smallest_resolvable_far(0) == math.inf
    with pytest.raises(InvalidArgumentError):
        smallest_resolvable_far(-1)
    with pytest.raises(InvalidArgumentError):
        smallest_resolvable_far(10, min_false_accepts=0)


def test_thresholds_against_sorting():
    g = torch.Generator().manual_seed(0)
    imp = torch.randn(20000, generator=g, dtype=torch.float64)
    fars = (1e-1, 1e-2, 1e-3, 1e-4)
    top = torch.sort(imp, descending=True).values
    taus = thresholds_at_far(top[:3000], imp.numel(), fars)
    for far, tau in zip(fars, taus.tolist()):
        if far < 10 / imp.numel():
            assert math.isnan(tau)
            continue
        k = math.floor(far * imp.numel())
        assert tau == float(top[k])
        assert int((imp > tau).sum()) == k  # exactly floor(far * n) impostors accepted
        assert int((imp > tau).sum()) / imp.numel() <= far
    with pytest.raises(InsufficientDataError):
        thresholds_at_far(top[:5], imp.numel(), [1e-2])


def test_tar_at_far_from_scores():
    g = torch.Generator().manual_seed(1)
    imp = torch.randn(50000, generator=g)
    gen = torch.randn(2000, generator=g) + 3.0
    table = tar_at_far(gen, imp, fars=(1e-2, 1e-3, 1e-4, 1e-5))
    # 50,000 pairs resolve down to 10 / 50,000 = 2e-4: 1e-4 would rest on 5 false accepts
    assert list(table["resolvable"]) == [True, True, False, False]
    assert math.isnan(table["tar"].iloc[2]) and math.isnan(table["threshold"].iloc[2])
    for _, row in table.iloc[:2].iterrows():
        assert row["realised_far"] <= row["far"]
        assert row["tar"] == pytest.approx(float((gen > row["threshold"]).float().mean()))
    # Gaussian check: TAR at FAR a is about Phi(3 - z_a)
    from statistics import NormalDist

    nd = NormalDist()
    assert table["tar"].iloc[0] == pytest.approx(1 - nd.cdf(nd.inv_cdf(0.99) - 3), abs=0.03)
    assert table["tar"].iloc[0] > table["tar"].iloc[1]
    with pytest.raises(InvalidArgumentError):
        tar_at_far(gen, imp, fars=(0.0,))
    with pytest.raises(InsufficientDataError):
        tar_at_far(gen[:0], imp)


# ---------------------------------------------------------------------------------------------------------------------
# Chunked scans
# ---------------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("enrol_shots", [1, 3])
@pytest.mark.parametrize("chunk_size", [1, 7, None])
def test_scan_matches_brute_force(enrol_shots, chunk_size):
    z, ids = clusters(9, 6, seed=4)
    pairs = VerificationPairs.create(ids, enrol_shots=enrol_shots, generator=torch.Generator().manual_seed(0))
    gen_ref, imp_ref = brute_pairs(z, ids, pairs=pairs)
    assert pairs.n_impostor_pairs == imp_ref.numel()
    assert pairs.n_genuine_pairs == gen_ref.numel()
    tau = torch.tensor([0.1, 0.5, math.nan], dtype=torch.float64)
    scan = scan_pairs(pairs, z, top_k=50, thresholds=tau, chunk_size=chunk_size)
    assert scan.n_impostor_pairs == imp_ref.numel()
    assert torch.allclose(scan.top_scores, torch.sort(imp_ref, descending=True).values[:50].double(), atol=1e-6)
    assert torch.allclose(torch.sort(scan.genuine_scores).values, torch.sort(gen_ref).values.double(), atol=1e-6)
    for t in range(2):
        assert int(scan.exceed[t].sum()) == int((imp_ref > float(tau[t])).sum())
    assert float(scan.pair_totals.sum()) == imp_ref.numel()


def test_enrol_templates_and_shot_checks():
    z, ids = clusters(5, 4, seed=5)
    pairs = VerificationPairs.create(ids, enrol_shots=3, generator=torch.Generator().manual_seed(1))
    q, ql, g, gl = pairs.build(z)
    assert q.shape == (5, D) and g.shape == (5, D)  # one template and one probe per identity
    for i in range(5):
        members = pairs.template_members[i]
        assert torch.all(ids[members] == i)
        assert torch.allclose(q[i], torch.nn.functional.normalize(z[members].mean(0), dim=0), atol=1e-6)
    with pytest.raises(InsufficientDataError, match="enrol_shots=4"):
        VerificationPairs.create(ids, enrol_shots=4)  # 4 images per identity leave no probe
    with pytest.raises(InsufficientDataError, match="2 identities"):
        VerificationPairs.create(torch.zeros(5, dtype=torch.int64))
    keep = subsample_shots(ids, 2, generator=torch.Generator().manual_seed(0))
    assert torch.equal(torch.bincount(ids[keep]), torch.full((5,), 2))
    with pytest.raises(InsufficientDataError, match="k=5"):
        subsample_shots(ids, 5)


# ---------------------------------------------------------------------------------------------------------------------
# pairwise TAR with calibration and bootstrap
# ---------------------------------------------------------------------------------------------------------------------
def test_pairwise_tar_uses_calibration_thresholds(splits):
    _, (zv, iv), (zt, it) = splits
    table = pairwise_tar_at_far(zt, it, calibration=(zv, iv), fars=(1e-1, 1e-2, 1e-3, 1e-6), n_boot=200, seed=0)
    gen_v, imp_v = brute_pairs(zv, iv)
    gen_t, imp_t = brute_pairs(zt, it)
    for _, row in table.iterrows():
        if not row["resolvable"]:
            assert row["far"] == 1e-6 and math.isnan(row["tar"]) and math.isnan(row["tar_low"])
            continue
        k = math.floor(row["far"] * imp_v.numel())
        tau = float(torch.sort(imp_v, descending=True).values[k])
        assert row["threshold"] == pytest.approx(tau)
        assert row["tar"] == pytest.approx(float((gen_t > tau).double().mean()))
        assert row["realised_far"] == pytest.approx(float((imp_t > tau).double().mean()))
        assert row["tar_low"] <= row["tar"] <= row["tar_high"]
        assert row["realised_far_low"] <= row["realised_far"] <= row["realised_far_high"]
        assert row["tar_high"] > row["tar_low"]
    assert table["smallest_resolvable_far"].iloc[0] == pytest.approx(10 / min(imp_v.numel(), imp_t.numel()))
    no_boot = pairwise_tar_at_far(zt, it, calibration=(zv, iv), fars=(1e-2,), n_boot=0)
    assert math.isnan(no_boot["tar_low"].iloc[0])
    assert no_boot["tar"].iloc[0] == table["tar"].iloc[1]


def test_identity_bootstrap_is_seeded_and_widens_with_fewer_identities(splits):
    _, (zv, iv), (zt, it) = splits
    a = pairwise_tar_at_far(zt, it, calibration=(zv, iv), fars=(1e-1,), n_boot=300, seed=3)
    b = pairwise_tar_at_far(zt, it, calibration=(zv, iv), fars=(1e-1,), n_boot=300, seed=3)
    assert a.equals(b)
    keep = it < 2010  # 10 of the 30 test identities
    c = pairwise_tar_at_far(zt[keep], it[keep], calibration=(zv, iv), fars=(1e-1,), n_boot=300, seed=3)
    width = lambda t: float(t["tar_high"].iloc[0] - t["tar_low"].iloc[0])  # noqa: E731
    assert width(c) > width(a)


# ---------------------------------------------------------------------------------------------------------------------
# Probes
# ---------------------------------------------------------------------------------------------------------------------
def test_ridge_closed_form(splits):
    (zt, it), _, _ = splits
    probe = fit_ridge_probe(zt, it, lam=0.5)
    y = torch.nn.functional.one_hot(it, 60).double()
    w = torch.linalg.solve(zt.double().T @ zt.double() + 0.5 * torch.eye(D, dtype=torch.float64), zt.double().T @ y)
    assert torch.allclose(probe.weight.double(), w, atol=1e-5)
    out = probe(zt)
    assert out.shape == (zt.shape[0], 60)
    assert torch.allclose(out.norm(dim=1), torch.ones(zt.shape[0]), atol=1e-5)
    with pytest.raises(InvalidArgumentError):
        fit_ridge_probe(zt, it, lam=0.0)
    with pytest.raises(InsufficientDataError):
        fit_ridge_probe(zt[:10], it[:10], lam=1.0)


def test_ridge_selection_picks_best_validation_tar(splits):
    (ztr, itr), (zv, iv), _ = splits
    pairs = VerificationPairs.create(iv)
    probe, table = select_ridge_probe(ztr, itr, zv, pairs, lambdas=(1e-3, 1.0, 1e3), far=1e-2)
    assert isinstance(probe, RidgeProbe)
    assert table["selected"].sum() == 1
    best = table.loc[table["selected"]].iloc[0]
    assert best["val_tar"] == table["val_tar"].max() and probe.lam == best["lam"]
    assert best["val_tar"] == pytest.approx(validation_tar(pairs, probe(zv), far=1e-2))


def test_mlp_probe_is_seeded_and_early_stops(splits):
    (ztr, itr), (zv, iv), _ = splits
    from privkit.isp.probes import MLPOptions, fit_mlp_probe

    pairs = VerificationPairs.create(iv)
    opts = MLPOptions(hidden=(32, 16), max_epochs=6, patience=2, batch_size=128)
    a, hist = fit_mlp_probe(ztr, itr, zv, pairs, options=opts, far=1e-2, seed=0)
    b, _ = fit_mlp_probe(ztr, itr, zv, pairs, options=opts, far=1e-2, seed=0)
    assert isinstance(a, MLPProbe) and not a.training
    assert torch.equal(a(zv), b(zv))
    assert a(zv).shape == (zv.shape[0], 16)
    assert hist["selected"].sum() == 1
    assert hist.loc[hist["selected"], "val_tar"].iloc[0] == hist["val_tar"].max()
    assert hist.loc[hist["selected"], "val_tar"].iloc[0] == pytest.approx(validation_tar(pairs, a(zv), far=1e-2))
    assert a.logits(zv).shape == (zv.shape[0], 60)
    with pytest.raises(InvalidArgumentError, match="options"):
        fit_mlp_probe(ztr, itr, zv, pairs, options={"max_epochs": 2})
    with pytest.raises(InvalidArgumentError, match="patience"):
        MLPOptions(patience=0)


# ---------------------------------------------------------------------------------------------------------------------
# The protocol
# ---------------------------------------------------------------------------------------------------------------------
def _splits(train, val, test) -> EmbeddingSplits:
    return EmbeddingSplits(*train, *val, *test)


def test_protocol_ridge_beats_raw_and_isp_defeats_ridge(splits):
    s = _splits(*splits)
    kw = dict(seed=0, ridge_lambdas=(1e-2, 1.0, 1e2))
    base = dict(fars=(1e-1, 1e-2, 1e-6), select_far=1e-2, n_boot=100)
    raw = evaluate_verification(s, probe="raw", protocol=VerificationProtocol(**base), **kw)
    ridge = evaluate_verification(s, probe="ridge", protocol=VerificationProtocol(k=8, **base), **kw)
    assert isinstance(raw.probe, RawProbe) and raw.selection.empty
    assert ridge.tar(1e-2) > raw.tar(1e-2) + 0.15  # the probe finds the identity subspace under the nuisance
    assert math.isnan(ridge.tar(1e-6))
    assert not bool(ridge.table.loc[ridge.table["far"] == 1e-6, "resolvable"].iloc[0])
    proj = IdentitySanitizer(rank=R0).update(s.train_emb, s.train_id).projector  # ISP-W: fitted on probe-fit ids
    isp = evaluate_verification(s.map(proj), probe="ridge", protocol=VerificationProtocol(k=8, **base), **kw)
    assert isp.tar(1e-2) < 0.5 * ridge.tar(1e-2)
    cols = {"probe", "k", "k_mode", "probe_shots", "enrol_shots", "far", "threshold", "tar", "tar_low", "tar_high",
            "realised_far", "resolvable", "smallest_resolvable_far", "n_genuine", "n_impostor", "n_impostor_calibration"}
    assert cols <= set(ridge.table.columns)
    assert ridge.settings["select_far_used"] == 1e-2 and ridge.table["probe_shots"].iloc[0] == 8


def test_protocol_thresholds_do_not_depend_on_test(splits):
    (ztr, itr), (zv, iv), (zt, it) = splits
    kw = dict(probe="ridge", ridge_lambdas=(1.0, 10.0),
              protocol=VerificationProtocol(k=8, fars=(1e-1, 1e-2), n_boot=0, select_far=1e-2))
    a = evaluate_verification(EmbeddingSplits(ztr, itr, zv, iv, zt, it), **kw)
    z2, i2 = clusters(20, 10, seed=9, offset=3000)
    b = evaluate_verification(EmbeddingSplits(ztr, itr, zv, iv, z2, i2), **kw)
    assert list(a.table["threshold"]) == list(b.table["threshold"])
    assert a.probe.lam == b.probe.lam
    again = evaluate_verification(EmbeddingSplits(ztr, itr, zv, iv, zt, it), **kw)
    assert a.table.equals(again.table)


def test_protocol_both_readings_of_k(splits):
    s = _splits(*splits)
    base = dict(fars=(1e-1, 1e-2), select_far=1e-2, n_boot=0)
    kw = dict(probe="ridge", ridge_lambdas=(1.0,))
    probe_k = evaluate_verification(s, protocol=VerificationProtocol(k=4, k_mode="probe-shots", **base), **kw)
    enrol_k = evaluate_verification(s, protocol=VerificationProtocol(k=4, k_mode="enrol-shots", **base), **kw)
    assert probe_k.table["enrol_shots"].iloc[0] == 1 and probe_k.table["probe_shots"].iloc[0] == 4
    assert enrol_k.table["enrol_shots"].iloc[0] == 4 and enrol_k.table["probe_shots"].iloc[0] == 10
    assert enrol_k.table["n_genuine"].iloc[0] == 30 * 6  # one template vs the 6 remaining images per identity
    assert probe_k.table["n_genuine"].iloc[0] == 30 * 45  # all same-identity image pairs
    assert enrol_k.tar(1e-1) > probe_k.tar(1e-1)  # averaged templates verify better
    with pytest.raises(InsufficientDataError, match="k=11"):
        evaluate_verification(s, protocol=VerificationProtocol(k=11, **base), **kw)
    raw = evaluate_verification(s, probe="raw", protocol=VerificationProtocol(k=11, fars=(1e-1,), n_boot=0))
    assert raw.table["probe_shots"].iloc[0] == 0  # the raw baseline fits nothing, so k probe shots are not needed
    with pytest.raises(InsufficientDataError, match="enrol_shots=10"):
        evaluate_verification(s, protocol=VerificationProtocol(k=10, k_mode="enrol-shots", **base), **kw)


def test_protocol_bad_inputs(splits):
    (ztr, itr), (zv, iv), (zt, it) = splits
    no_boot = VerificationProtocol(n_boot=0)
    with pytest.raises(InvalidArgumentError, match="disjoint"):
        evaluate_verification(EmbeddingSplits(ztr, itr, zv, iv, zv, iv), protocol=no_boot)
    with pytest.raises(UnknownNameError, match="probe"):
        evaluate_verification(_splits(*splits), probe="svm")  # type: ignore[arg-type]
    with pytest.raises(UnknownNameError, match="k_mode"):
        VerificationProtocol(k_mode="both")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="splits must be an EmbeddingSplits"):
        evaluate_verification((ztr, itr, zv, iv, zt, it))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="protocol must be"):
        evaluate_verification(_splits(*splits), protocol={"k": 2})  # type: ignore[arg-type]
    with pytest.raises(ShapeError):
        evaluate_verification(EmbeddingSplits(ztr, itr, torch.nn.functional.normalize(zv[:, :10], dim=1), iv, zt, it))
    bad = zt.clone()
    bad[0, 0] = math.nan
    with pytest.raises(InvalidArgumentError, match="NaN"):
        evaluate_verification(EmbeddingSplits(ztr, itr, zv, iv, bad, it))
    from privkit.errors import NotUnitNormError

    with pytest.raises(NotUnitNormError):
        evaluate_verification(EmbeddingSplits(ztr * 3, itr, zv, iv, zt, it))
    with pytest.raises(InvalidArgumentError):
        pairwise_tar_at_far(zt, it, fars=(1.5,))


def test_pair_threshold_matches_a_full_sort_and_refuses_unresolvable_fars():
    z, ids = clusters(15, 4, seed=11)[:2]
    pairs = VerificationPairs.create(ids, enrol_shots=1)
    tau, scan = pair_threshold(pairs, z, far=1e-2)
    full = scan_pairs(pairs, z, top_k=pairs.n_impostor_pairs)
    assert tau == pytest.approx(float(thresholds_at_far(full.top_scores, pairs.n_impostor_pairs, [1e-2])[0]))
    assert scan.genuine_scores.numel() > 0
    with pytest.raises(InsufficientDataError, match="my_set: .* resolve FARs"):
        pair_threshold(pairs, z, far=1e-5, argument="my_set")
