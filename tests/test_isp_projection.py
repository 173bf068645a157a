"""Tests of privkit.isp.projection: ISP, LEACE and INLP fitters, frozen projectors, principal angles."""

from __future__ import annotations

import math

import pytest
import torch

from privkit.errors import (
    InsufficientDataError,
    InvalidArgumentError,
    NotUnitNormError,
    ShapeError,
    UnknownNameError,
)
from privkit.isp.projection import (
    IdentityProjector,
    IdentitySanitizer,
    INLPFitter,
    LeaceEraser,
    LeaceFitter,
    principal_angles,
)
from privkit.isp.utility import knn_retention
from privkit.isp.verification import pairwise_tar_at_far


D, R0 = 32, 5
_FRAME = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(7), dtype=torch.float64))[0]
IDENTITY_BASIS = _FRAME[:, :R0]  # planted identity subspace
ATTRIBUTE_DIR = _FRAME[:, R0]  # a non-identity attribute direction, orthogonal to it


def clusters(n_id: int, shots: int, *, seed: int, offset: int = 0, strength: float = 3.0, noise: float = 0.5):
    """Float64 unit vectors: identity means in the planted subspace, a binary attribute, isotropic noise."""
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n_id, R0, generator=g, dtype=torch.float64) @ IDENTITY_BASIS.T * (strength / math.sqrt(R0))
    ids = torch.arange(n_id).repeat_interleave(shots)
    attr = torch.randint(0, 2, (ids.numel(),), generator=g)
    z = means[ids] + (2 * attr[:, None] - 1) * 0.5 * ATTRIBUTE_DIR + noise * torch.randn(ids.numel(), D, generator=g, dtype=torch.float64) / math.sqrt(D)
    return torch.nn.functional.normalize(z, dim=1), ids + offset, attr


@pytest.fixture(scope="module")
def fit_data():
    return clusters(40, 8, seed=1)


# ---------------------------------------------------------------------------------------------------------------------
# ISP: algebra
# ---------------------------------------------------------------------------------------------------------------------
def test_projector_is_symmetric_idempotent_with_rank_r(fit_data):
    z, ids, _ = fit_data
    proj = IdentitySanitizer(rank=R0).update(z, ids).projector
    assert proj.rank == R0 and proj.dim == D and proj.method == "isp"
    p = proj.matrix()
    assert p.dtype == torch.float64
    assert torch.allclose(p, p.T, atol=1e-12)
    assert torch.allclose(p @ p, p, atol=1e-12)
    assert int(torch.linalg.matrix_rank(torch.eye(D, dtype=p.dtype) - p)) == R0
    assert torch.allclose(proj.basis.T @ proj.basis, torch.eye(R0, dtype=torch.float64), atol=1e-10)


def test_basis_matches_svd_of_centred_class_means(fit_data):
    z, ids, _ = fit_data
    san = IdentitySanitizer(rank=3).update(z, ids)
    means = torch.stack([z[ids == i].double().mean(0) for i in range(40)])
    m = (means - means.mean(0)).T  # d × m, centred on the mean of the class means
    u, s, _ = torch.linalg.svd(m, full_matrices=False)
    assert torch.allclose(san.singular_values[: s.numel()], s, atol=1e-9)
    assert torch.allclose(san.projector.matrix(), torch.eye(D, dtype=torch.float64) - u[:, :3] @ u[:, :3].T, atol=1e-9)
    svd_proj = IdentitySanitizer(rank=3, solver="svd").update(z, ids).projector
    assert torch.allclose(svd_proj.matrix(), san.projector.matrix(), atol=1e-9)


@pytest.mark.parametrize("n_id", [8, 60])  # m - 1 < d (m x m Gram) and m - 1 > d (d x d Gram)
def test_full_rank_makes_fitting_class_means_equal(n_id):
    z, ids, _ = clusters(n_id, 4, seed=2, noise=1.0)
    proj = IdentitySanitizer(rank_rule="full", renormalize=False).update(z, ids).projector
    assert proj.rank == min(D, n_id - 1)
    out = proj(z)
    means = torch.stack([out[ids == i].mean(0) for i in range(n_id)])
    assert float((means - means.mean(0)).abs().max()) < 1e-9
    # with one direction fewer the means still differ
    short = IdentitySanitizer(rank=proj.rank - 1, renormalize=False).update(z, ids).projector(z)
    means_s = torch.stack([short[ids == i].mean(0) for i in range(n_id)])
    assert float((means_s - means_s.mean(0)).abs().max()) > 1e-3


def test_apply_is_fused_projection_and_renormalises(fit_data):
    z, ids, _ = fit_data
    proj = IdentitySanitizer(rank=R0).update(z, ids).projector
    out = proj(z.float())
    assert out.dtype == torch.float32 and out.shape == z.shape
    ref = torch.nn.functional.normalize(z @ proj.matrix(), dim=1)
    assert torch.allclose(out.double(), ref, atol=1e-5)
    assert torch.allclose(proj(z), ref, atol=1e-12)
    assert torch.allclose(out.norm(dim=1), torch.ones(z.shape[0]), atol=1e-5)
    out3 = proj(z.float().reshape(4, -1, D))  # leading batch dimensions
    assert torch.allclose(out3.reshape(-1, D), out)
    raw = IdentitySanitizer(rank=R0, renormalize=False).update(z, ids).projector(z)
    assert torch.allclose(raw, z @ proj.matrix(), atol=1e-12)


# ---------------------------------------------------------------------------------------------------------------------
# ISP: streaming statistics, caching, rank rules
# ---------------------------------------------------------------------------------------------------------------------
def test_streaming_updates_accumulate_repeated_identities(fit_data):
    z, ids, _ = fit_data
    labels = ids * 7 - 100  # arbitrary (negative, sparse) identity labels
    whole = IdentitySanitizer(rank=4).update(z, labels)
    perm = torch.randperm(z.shape[0], generator=torch.Generator().manual_seed(3))
    streamed = IdentitySanitizer(rank=4)
    for chunk in perm.split(37):  # every identity is split over several updates
        streamed.update(z[chunk], labels[chunk])
    assert streamed.n_samples == z.shape[0] and streamed.n_identities == 40
    order_w = torch.argsort(whole.identities)
    order_s = torch.argsort(streamed.identities)
    assert torch.equal(whole.identities[order_w], streamed.identities[order_s])
    assert torch.allclose(whole.class_means()[order_w], streamed.class_means()[order_s], atol=1e-12)
    assert torch.allclose(whole.projector.matrix(), streamed.projector.matrix(), atol=1e-10)
    single = IdentitySanitizer(rank=4).update(z.float(), labels)  # float32 batches: float32 partial sums
    assert torch.allclose(single.class_means()[order_w], whole.class_means()[order_w], atol=1e-6)


def test_projector_cached_until_next_update(fit_data):
    z, ids, _ = fit_data
    san = IdentitySanitizer(rank=2).update(z[:160], ids[:160])
    first = san.projector
    assert san.projector is first
    san.update(z[160:], ids[160:])
    second = san.projector
    assert second is not first
    assert not torch.allclose(first.matrix(), second.matrix(), atol=1e-6)
    assert second.info["n_samples"] == z.shape[0]


def test_rank_rules(fit_data):
    z, ids, _ = fit_data
    san = IdentitySanitizer(rank_rule="energy", energy=0.95).update(z, ids)
    s = san.singular_values
    r = san.projector.rank
    energy = (s**2).cumsum(0) / (s**2).sum()
    assert energy[r - 1] >= 0.95 and (r == 1 or energy[r - 2] < 0.95)
    assert r == R0  # the planted identity subspace carries >95% of the between-class energy
    low = IdentitySanitizer(rank_rule="energy", energy=0.3).update(z, ids).projector.rank
    assert 1 <= low < r
    rel = IdentitySanitizer(rank_rule="relative", relative_sv=0.5).update(z, ids)
    assert rel.projector.rank == int((s >= 0.5 * s[0]).sum())
    full = IdentitySanitizer(rank_rule="full").update(z, ids).projector
    assert full.rank == min(D, 39)


# ---------------------------------------------------------------------------------------------------------------------
# ISP: what it removes and keeps
# ---------------------------------------------------------------------------------------------------------------------
def test_isp_removes_identity_and_keeps_attribute(fit_data):
    z, ids, _ = fit_data
    proj = IdentitySanitizer(rank=R0).update(z, ids).projector
    z_val, id_val, _ = clusters(30, 8, seed=11, offset=1000)
    z_test, id_test, attr = clusters(30, 8, seed=12, offset=2000)
    kw = dict(fars=(1e-2,), n_boot=0)
    raw = pairwise_tar_at_far(z_test, id_test, calibration=(z_val, id_val), **kw)
    isp = pairwise_tar_at_far(proj(z_test), id_test, calibration=(proj(z_val), id_val), **kw)
    assert float(raw["tar"][0]) > 0.6
    assert float(isp["tar"][0]) < 0.1  # near the FAR of 0.01
    half = z_test.shape[0] // 2
    ret = knn_retention(z_test[:half], attr[:half], z_test[half:], attr[half:], transform=proj, k=5)
    assert ret.retention_pct > 90


def test_principal_angles_of_disjoint_fits_are_near_one():
    za, ia, _ = clusters(50, 6, seed=21)
    zb, ib, _ = clusters(50, 6, seed=22, offset=500)
    pa = IdentitySanitizer(rank=R0).update(za, ia).projector
    pb = IdentitySanitizer(rank=R0).update(zb, ib).projector
    cos = principal_angles(pa, pb)
    assert cos.shape == (R0,) and cos.dtype == torch.float64
    assert float(cos.min()) > 0.99
    rand = torch.linalg.qr(torch.randn(D, R0, generator=torch.Generator().manual_seed(5), dtype=torch.float64))[0]
    assert float(principal_angles(pa, rand).max()) < 0.99


def test_principal_angles_formula():
    e = torch.eye(6, dtype=torch.float64)
    theta = 0.3
    ua = e[:, :2]
    ub = torch.stack([e[:, 0], math.cos(theta) * e[:, 1] + math.sin(theta) * e[:, 2]], dim=1)
    cos = principal_angles(ua, ub)
    assert torch.allclose(cos, torch.tensor([1.0, math.cos(theta)], dtype=torch.float64), atol=1e-12)
    assert torch.allclose(principal_angles(ua, e[:, 2:5]), torch.zeros(2, dtype=torch.float64), atol=1e-12)
    with pytest.raises(InvalidArgumentError, match="orthonormal"):
        principal_angles(ua * 2, ub)
    with pytest.raises(ShapeError):
        principal_angles(ua, torch.eye(5, dtype=torch.float64)[:, :2])


# ---------------------------------------------------------------------------------------------------------------------
# Frozen projector: devices, dtypes, save/load
# ---------------------------------------------------------------------------------------------------------------------
def test_to_round_trip_and_dtype_follows_input(fit_data):
    z, ids, _ = fit_data
    proj = IdentitySanitizer(rank=R0).update(z, ids).projector
    p32 = proj.to(dtype=torch.float32)
    assert p32.basis.dtype == torch.float32 and proj.basis.dtype == torch.float64  # frozen: a copy
    back = p32.to("cpu", torch.float64)
    assert back.basis.device.type == "cpu"
    assert torch.allclose(back.basis, proj.basis, atol=1e-7)
    assert proj(z).dtype == torch.float64 and proj(z.float()).dtype == torch.float32
    assert p32(z).dtype == torch.float64  # the input decides
    assert torch.allclose(p32(z.float()), proj(z.float()), atol=1e-6)
    with pytest.raises(AttributeError):
        proj.renormalize = False  # type: ignore[misc]


def test_save_load_round_trip(tmp_path, fit_data):
    from safetensors import safe_open

    z, ids, _ = fit_data
    proj = IdentitySanitizer(rank=3, renormalize=False).update(z, ids).projector
    path = proj.save(tmp_path / "isp.safetensors")
    with safe_open(str(path), framework="pt") as f:  # a plain safetensors file with JSON metadata
        assert set(f.keys()) == {"basis", "spectrum"}
        assert '"class": "IdentityProjector"' in f.metadata()["privkit"]
    loaded = IdentityProjector.load(path)
    assert torch.equal(loaded.basis, proj.basis)
    assert torch.equal(loaded.spectrum, proj.spectrum)
    assert loaded.renormalize is False and loaded.method == "isp" and loaded.info == proj.info
    assert torch.equal(loaded(z), proj(z))
    eraser = LeaceFitter(rank=3).update(z, ids).eraser
    epath = eraser.save(tmp_path / "leace.safetensors")
    with pytest.raises(InvalidArgumentError, match="LeaceEraser"):
        IdentityProjector.load(epath)
    with pytest.raises(InvalidArgumentError, match="not a file"):
        IdentityProjector.load(tmp_path / "missing.safetensors")


# ---------------------------------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------------------------------
def test_leace_equalises_class_means_and_is_an_oblique_projection(tmp_path):
    z, ids, _ = clusters(12, 10, seed=31, noise=1.5)
    fitter = LeaceFitter(renormalize=False).update(z[:70], ids[:70]).update(z[70:], ids[70:])
    eraser = fitter.eraser
    assert eraser.rank == 11  # m - 1 directions (W Σ_XZ has rank m - 1)
    out = eraser(z)
    means = torch.stack([out[ids == i].mean(0) for i in range(12)])
    assert float((means - out.mean(0)).abs().max()) < 1e-9
    p = eraser.matrix()
    assert torch.allclose(p @ p, p, atol=1e-9)
    assert not torch.allclose(p, p.T, atol=1e-6)  # whitened erasure is not orthogonal
    trunc = LeaceFitter(rank=2).update(z, ids).eraser
    assert trunc.rank == 2
    loaded = LeaceEraser.load(trunc.save(tmp_path / "l.safetensors"))
    assert torch.allclose(loaded(z), trunc(z))
    assert trunc.to(dtype=torch.float32)(z.float()).dtype == torch.float32


def test_inlp_finds_identity_subspace(fit_data):
    z, ids, _ = fit_data
    proj = INLPFitter(n_iterations=R0).update(z, ids).projector
    assert proj.rank == R0 and proj.method == "inlp"
    p = proj.matrix()
    assert torch.allclose(p, p.T, atol=1e-10) and torch.allclose(p @ p, p, atol=1e-10)
    cos = principal_angles(proj, IDENTITY_BASIS)
    assert float(cos[0]) > 0.95 and float(cos.mean()) > 0.9
    assert float((proj.basis.T @ ATTRIBUTE_DIR).norm()) < 0.3  # the non-identity attribute is left alone
    resid = proj.info["relative_cross_scatter_before_each_iteration"]
    assert resid[0] == pytest.approx(1.0) and resid[-1] < resid[0]
    two = INLPFitter(n_iterations=2, directions_per_iteration=2).update(z, ids).projector
    assert two.rank == 4


# ---------------------------------------------------------------------------------------------------------------------
# Bad inputs
# ---------------------------------------------------------------------------------------------------------------------
def test_bad_inputs(fit_data):
    z, ids, _ = fit_data
    with pytest.raises(InsufficientDataError, match="at least 2 distinct identities"):
        _ = IdentitySanitizer(rank=1).update(z[:8], ids[:8]).projector
    with pytest.raises(InsufficientDataError):
        _ = LeaceFitter().update(z[:8], ids[:8]).eraser
    with pytest.raises(InsufficientDataError):
        _ = INLPFitter(1).update(z[:8], ids[:8]).projector
    with pytest.raises(InvalidArgumentError, match="m - 1"):
        _ = IdentitySanitizer(rank=40).update(z, ids).projector  # rank >= number of identities
    with pytest.raises(InvalidArgumentError, match="m - 1"):
        _ = LeaceFitter(rank=40).update(z, ids).eraser
    with pytest.raises(InvalidArgumentError, match="min\\(d, m - 1\\)"):
        _ = INLPFitter(40).update(z, ids).projector
    low_rank = torch.nn.functional.normalize(z[:, :2].double() @ torch.eye(2, D, dtype=torch.float64), dim=1).float()
    with pytest.raises(InsufficientDataError, match="numerical rank"):
        _ = IdentitySanitizer(rank=5).update(low_rank, ids).projector
    bad = z.clone()
    bad[3, 0] = math.nan
    with pytest.raises(InvalidArgumentError, match="NaN"):
        IdentitySanitizer().update(bad, ids)
    partial = IdentitySanitizer(require_unit_norm=False).update(z[:40], ids[:40])
    with pytest.raises(InvalidArgumentError, match="NaN"):
        partial.update(bad, ids)
    assert partial.n_samples == 40 and partial.n_identities == 5  # a rejected batch leaves no trace
    with pytest.raises(NotUnitNormError):
        IdentitySanitizer().update(z * 2, ids)
    IdentitySanitizer(require_unit_norm=False).update(z * 2, ids)  # allowed when asked
    with pytest.raises(ShapeError):
        IdentitySanitizer().update(z, ids[:-1])
    with pytest.raises(ShapeError):
        IdentitySanitizer().update(z, ids).update(torch.nn.functional.normalize(z[:, :16], dim=1), ids)
    with pytest.raises(InvalidArgumentError, match="integer"):
        IdentitySanitizer().update(z, ids.float())
    with pytest.raises(InvalidArgumentError):
        IdentitySanitizer(rank=0)
    with pytest.raises(InvalidArgumentError):
        IdentitySanitizer(energy=1.5)
    with pytest.raises(UnknownNameError, match="rank_rule"):
        IdentitySanitizer(rank_rule="elbow")  # type: ignore[arg-type]
    with pytest.raises(InsufficientDataError, match="identical"):
        same = z[:1].expand(20, -1).contiguous()
        _ = IdentitySanitizer(rank=1).update(same, torch.arange(20) % 4).projector
    proj = IdentitySanitizer(rank=2).update(z, ids).projector
    with pytest.raises(ShapeError):
        proj(z[:, :16])
    with pytest.raises(InvalidArgumentError, match="NaN"):
        proj(bad)
    with pytest.raises(InvalidArgumentError, match="NaN"):
        IdentitySanitizer(rank=2, renormalize=False).update(z, ids).projector(bad)
    with pytest.raises(InvalidArgumentError, match="NaN"):
        LeaceFitter(rank=2).update(z, ids).eraser(bad)
    assert bool(torch.isnan(proj(bad, check_finite=False)[3]).all())  # opted out: NaN rows pass through
    with pytest.raises(ShapeError):
        IdentityProjector(torch.zeros(3, 5, dtype=torch.float64))
