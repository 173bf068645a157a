"""Tests of privkit.studies.isp.experiments: the building blocks of the ISP notebook."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from privkit.data.types import FaceSet
from privkit.encoders.base import Encoder
from privkit.errors import InsufficientDataError, InvalidArgumentError, ShapeError, UnknownNameError
from privkit.studies.isp import experiments as X
from privkit.isp.inversion import describe_inversion_evidence
from privkit.isp.projection import IdentityProjector, IdentitySanitizer, INLPFitter, LeaceFitter
from privkit.isp.verification import VerificationPairs, scan_pairs
from privkit.metrics import thresholds_at_far


@pytest.fixture(autouse=True, scope="module")
def _single_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


D, R0 = 24, 4
_FRAME = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(3), dtype=torch.float64))[0]
ID_BASIS = _FRAME[:, :R0]
ATTR_DIR = _FRAME[:, R0]


def clusters(n_id: int, shots: int, *, seed: int, offset: int = 0, strength: float = 3.0, noise: float = 0.6):
    """Float32 unit vectors: identity means in a planted subspace, a binary attribute, isotropic noise."""
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n_id, R0, generator=g, dtype=torch.float64) @ ID_BASIS.T * (strength / math.sqrt(R0))
    ids = torch.arange(n_id).repeat_interleave(shots)
    attr = torch.randint(0, 2, (ids.numel(),), generator=g)
    z = means[ids] + (2 * attr[:, None] - 1) * 0.7 * ATTR_DIR
    z = z + noise * torch.randn(ids.numel(), D, generator=g, dtype=torch.float64) / math.sqrt(D)
    return torch.nn.functional.normalize(z, dim=1).float(), ids + offset, attr


@pytest.fixture(scope="module")
def splits():
    return {
        "train": clusters(30, 6, seed=1)[:2],
        "val": clusters(12, 6, seed=2, offset=100)[:2],
        "test": clusters(12, 6, seed=3, offset=200)[:2],
    }


class CountingEncoder(Encoder):
    """A tiny differentiable encoder: per-channel means of a 4×4 pooling, plus a learnable-free linear map."""

    name = "counting"
    dim = 48
    kind = "general"

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(scale * torch.eye(48), requires_grad=False)
        self.calls = 0
        self.last_boxes = None

    def _embed_batch(self, images, boxes):
        self.calls += 1
        self.last_boxes = boxes
        x = torch.nn.functional.adaptive_avg_pool2d(images, 4).flatten(1)
        return (x - x.mean(1, keepdim=True)) @ self.weight + 1e-3


def tiny_faces(n_id: int = 4, per: int = 3, size: int = 16, *, seed: int = 0, context: bool = True) -> FaceSet:
    g = torch.Generator().manual_seed(seed)
    ids = torch.arange(n_id).repeat_interleave(per)
    n = ids.numel()
    images = torch.rand(n, 3, size, size, generator=g)
    mask = torch.zeros(n, 1, size, size, dtype=torch.bool)
    mask[:, :, size // 4 : size // 2, size // 4 : size // 2] = True
    box = torch.tensor([size / 4, size / 4, size / 2, size / 2]).repeat(n, 1)
    ctx = (torch.arange(n) % 3) if context else torch.full((n,), -1)
    return FaceSet(images=images, identity=ids, box=box, mask=mask, context=ctx,
                   attributes={"a": torch.arange(n) % 2}, name="tiny", meta={"split": "all", "images_per_identity": per})


# ---------------------------------------------------------------------------------------------------------------------
# embed_faces
# ---------------------------------------------------------------------------------------------------------------------
def test_embed_faces_caches_and_passes_boxes(tmp_path):
    faces = tiny_faces()
    enc = CountingEncoder()
    a = X.embed_faces(enc, faces, input="box", cache_dir=str(tmp_path))
    assert enc.last_boxes is not None and a.shape == (len(faces), 48)
    assert torch.allclose(a.norm(dim=1), torch.ones(len(faces)), atol=1e-5)
    calls = enc.calls
    b = X.embed_faces(enc, faces, input="box", cache_dir=str(tmp_path))
    assert enc.calls == calls and torch.equal(a, b)  # served from the cache
    c = X.embed_faces(enc, faces, input="image", cache_dir=str(tmp_path))
    assert enc.calls > calls and enc.last_boxes is None  # other input mode: other key
    # different weights -> different key (never a stale entry)
    enc2 = CountingEncoder(scale=2.0)
    X.embed_faces(enc2, faces, input="image", cache_dir=str(tmp_path))
    assert enc2.calls > 0
    assert torch.equal(c, X.embed_faces(CountingEncoder(), faces, input="image", cache=False))


def test_embed_faces_rejects_bad_input():
    with pytest.raises(UnknownNameError, match="input"):
        X.embed_faces(CountingEncoder(), tiny_faces(), input="crop", cache=False)


# ---------------------------------------------------------------------------------------------------------------------
# erasers
# ---------------------------------------------------------------------------------------------------------------------
def test_truncated_erasers_equal_lower_rank_fits(splits):
    emb, ids = splits["train"]
    probe = splits["test"][0]
    for method, direct in (
        ("isp", lambda r: IdentitySanitizer(rank=r).update(emb, ids).projector),
        ("leace", lambda r: LeaceFitter(rank=r).update(emb, ids).eraser),
        ("inlp", lambda r: INLPFitter(n_iterations=r).update(emb, ids).projector),
    ):
        big = X.fit_eraser(method, emb, ids, rank=6)
        assert big.rank == 6
        cut = X.truncate_eraser(big, 3)
        assert cut.rank == 3
        torch.testing.assert_close(cut(probe), direct(3)(probe), atol=2e-5, rtol=0)


def test_eraser_arguments():
    emb, ids = clusters(5, 4, seed=0)[:2]
    with pytest.raises(UnknownNameError, match="method"):
        X.fit_eraser("rlace", emb, ids, rank=2)
    p = X.fit_eraser("isp", emb, ids, rank=2)
    with pytest.raises(InvalidArgumentError, match="rank"):
        X.truncate_eraser(p, 3)
    with pytest.raises(InvalidArgumentError):
        X.fit_eraser("isp", emb, ids, rank=5)  # > m - 1
    full = X.fit_eraser("isp", emb, ids, rank=None)  # the full numerical rank: m - 1 = 4 here
    assert full.rank == 4
    # embeddings confined to a 2-D subspace: the full rank stops at 2 where rank=3 (≤ m − 1) would be refused
    flat = torch.nn.functional.normalize(torch.cat([emb[:, :2], torch.zeros(len(emb), emb.shape[1] - 2)], 1), dim=1)
    assert X.fit_eraser("isp", flat, ids, rank=None).rank == 2
    with pytest.raises(InsufficientDataError, match="numerical rank"):
        X.fit_eraser("isp", flat, ids, rank=3)
    with pytest.raises(InvalidArgumentError, match="ISP only"):
        X.fit_eraser("leace", emb, ids, rank=None)


# ---------------------------------------------------------------------------------------------------------------------
# verification
# ---------------------------------------------------------------------------------------------------------------------
def test_verification_table_cells_and_resolution(splits):
    p = X.fit_eraser("isp", *splits["train"], rank=R0)
    table, results = X.verification_table(splits, {"raw": None, "ISP-W": p}, probes=("raw", "ridge"), ks=(2, 6),
                                          fars=(1e-1, 1e-2, 1e-4), n_boot=30, keep_results=True)
    # raw probe once per transform (k = 0), ridge per k; 3 FARs each
    assert len(table) == 2 * (1 + 2) * 3
    assert set(results) == {(t, p_, k) for t in ("raw", "ISP-W") for p_, k in (("raw", 0), ("ridge", 2), ("ridge", 6))}
    # 12 test ids x 6 images: 2,340 impostor pairs resolve 1e-2 but not 1e-4
    assert table[table.far == 1e-4].tar.isna().all() and not table[table.far == 1e-4].resolvable.any()
    assert table[table.far == 1e-2].tar.notna().all()
    # the planted identity subspace leaks under raw cosine and ISP (rank = planted rank) removes it
    raw = table[(table["transform"] == "raw") & (table.probe == "ridge") & (table.k == 6) & (table.far == 1e-2)].iloc[0]
    isp = table[(table["transform"] == "ISP-W") & (table.probe == "ridge") & (table.k == 6) & (table.far == 1e-2)].iloc[0]
    assert raw.tar_low > raw.realised_far
    assert isp.tar < raw.tar_low
    assert table.selected[table.probe == "ridge"].str.startswith("lambda=").all()


def test_verification_table_arguments(splits):
    with pytest.raises(InvalidArgumentError, match="test"):
        X.verification_table({"train": splits["train"], "val": splits["val"]}, {"raw": None})
    with pytest.raises(UnknownNameError):
        X.verification_table(splits, {"raw": None}, probes=("svm",))


def test_paired_difference_against_direct_counts(splits):
    test_emb, test_id = splits["test"]
    worse = torch.nn.functional.normalize(test_emb + 0.8 * torch.randn(test_emb.shape, generator=torch.Generator().manual_seed(0)), dim=1)
    same = X.paired_tar_difference(test_id, test_emb, 0.5, test_emb, 0.5, n_boot=50)
    assert same["difference"] == 0 and same["low"] == 0 and same["high"] == 0
    out = X.paired_tar_difference(test_id, test_emb, 0.5, worse, 0.5, n_boot=200, seed=1)
    pairs = VerificationPairs.create(test_id)
    g_a = scan_pairs(pairs, test_emb).genuine_scores
    g_b = scan_pairs(pairs, worse).genuine_scores
    assert out["tar_a"] == pytest.approx(float((g_a > 0.5).double().mean()))
    assert out["tar_b"] == pytest.approx(float((g_b > 0.5).double().mean()))
    assert out["low"] <= out["difference"] <= out["high"]
    assert out["low"] > 0  # the noisier embeddings lose genuine accepts on every resample
    with pytest.raises(ShapeError):
        X.paired_tar_difference(test_id, test_emb[:5], 0.5, test_emb, 0.5)
    with pytest.raises(InvalidArgumentError, match="finite"):
        X.paired_tar_difference(test_id, test_emb, math.nan, test_emb, 0.5)


def test_paired_comparison_reads_cells(splits):
    p = X.fit_eraser("isp", *splits["train"], rank=R0)
    table, results = X.verification_table(splits, {"raw": None, "ISP-W": p}, probes=("ridge",), ks=(6,),
                                          fars=(1e-2,), n_boot=20, keep_results=True)
    pc = X.paired_comparison(results, ("raw", "ridge", 6), ("ISP-W", "ridge", 6), far=1e-2, n_boot=100)
    t = table.set_index("transform").tar
    assert pc["tar_a"] == pytest.approx(t["raw"]) and pc["tar_b"] == pytest.approx(t["ISP-W"])
    assert pc["low"] > 0
    with pytest.raises(InvalidArgumentError, match="not in results"):
        X.paired_comparison(results, ("raw", "mlp", 6), ("ISP-W", "ridge", 6), far=1e-2)
    with pytest.raises(InvalidArgumentError, match="resolvable"):
        X.paired_comparison(results, ("raw", "ridge", 6), ("ISP-W", "ridge", 6), far=1e-3)


def test_rises_with_rank():
    # overlapping intervals: a noisy flat tail is not a rise
    ok = pd.DataFrame({"rank": [0, 1, 2], "tar": [0.5, 0.3, 0.36], "tar_low": [0.4, 0.25, 0.3], "tar_high": [0.6, 0.35, 0.4]})
    assert X.rises_with_rank(ok) == []
    bad = pd.DataFrame({"rank": [0, 4, 8], "tar": [0.2, 0.1, 0.5], "tar_low": [0.15, 0.08, 0.4],
                        "tar_high": [0.25, 0.12, 0.6]})
    msgs = X.rises_with_rank(bad)
    assert len(msgs) == 2 and "rank 8" in msgs[0] and "rank 0" in msgs[0] and "rank 4" in msgs[1]
    with pytest.raises(InvalidArgumentError, match="tar_low"):
        X.rises_with_rank(pd.DataFrame({"rank": [1], "tar": [0.1], "tar_high": [0.2]}))


# ---------------------------------------------------------------------------------------------------------------------
# utility and subspaces
# ---------------------------------------------------------------------------------------------------------------------
def test_utility_table_informative_and_retention():
    bank, bank_id, bank_attr = clusters(20, 6, seed=4)
    query, _, query_attr = clusters(10, 6, seed=5, offset=50)
    noise_b = torch.randint(0, 2, bank_attr.shape, generator=torch.Generator().manual_seed(1))
    noise_q = torch.randint(0, 2, query_attr.shape, generator=torch.Generator().manual_seed(2))
    p = X.fit_eraser("isp", bank, bank_id, rank=R0)
    u = X.utility_table({"none": lambda z: z, "ISP": p}, knn=(bank, {"attr": bank_attr, "noise": noise_b}, query,
                                                          {"attr": query_attr, "noise": noise_q}), k=5,
                        copy=(query, torch.nn.functional.normalize(query + 0.05 * torch.randn(query.shape, generator=torch.Generator().manual_seed(3)), dim=1)))
    u = u.set_index(["transform", "metric"])
    assert u.loc[("none", "knn:attr"), "retention_pct"] == pytest.approx(100.0)
    assert bool(u.loc[("none", "knn:attr"), "informative"]) and not bool(u.loc[("none", "knn:noise"), "informative"])
    # the attribute direction is orthogonal to the identity subspace: ISP keeps it
    assert u.loc[("ISP", "knn:attr"), "retention_pct"] > 90
    assert u.loc[("none", "copy:recall@1"), "retention_pct"] == pytest.approx(100.0)
    with pytest.raises(InvalidArgumentError):
        X.utility_table({"none": lambda z: z})


def test_utility_table_linear_probe_rows():
    bank, bank_id, bank_attr = clusters(20, 6, seed=4)
    query, _, query_attr = clusters(10, 6, seed=5, offset=50)
    p = X.fit_eraser("isp", bank, bank_id, rank=R0)
    knn = (bank, {"attr": bank_attr}, query, {"attr": query_attr})
    u = X.utility_table({"none": lambda z: z, "ISP": p}, knn=knn, k=5, linear=["ISP"])
    lin = u[u.metric == "linear:attr"].set_index("transform")
    assert list(lin.index) == ["ISP"]  # only the named transform is probed
    assert bool(lin.loc["ISP", "informative"]) and lin.loc["ISP", "raw"] > 0.9
    assert lin.loc["ISP", "retention_pct"] > 90  # the attribute is orthogonal to the identity subspace
    both = X.utility_table({"none": lambda z: z}, knn=knn, k=5, linear=True)
    assert both[both.metric == "linear:attr"].retention_pct.iloc[0] == pytest.approx(100.0)
    # an attribute constant over the bank (small paper-scale subsets): kNN rows, no linear probe, no error
    const = (bank, {"attr": torch.zeros_like(bank_attr)}, query, {"attr": query_attr})
    c = X.utility_table({"none": lambda z: z}, knn=const, k=5, linear=True)
    assert set(c.metric) == {"knn:attr"}
    with pytest.raises(UnknownNameError, match="linear"):
        X.utility_table({"none": lambda z: z}, knn=knn, linear=["ISP"])
    with pytest.raises(InvalidArgumentError, match="linear"):
        X.utility_table({"none": lambda z: z}, knn=knn, linear="none")
    with pytest.raises(InvalidArgumentError, match="knn"):
        X.utility_table({"none": lambda z: z}, copy=(query, query), linear=True)


def test_subspace_angles_identical_and_random():
    emb, ids = clusters(30, 5, seed=6)[:2]
    p = X.fit_eraser("isp", emb, ids, rank=R0)
    q = IdentityProjector(torch.linalg.qr(torch.randn(D, R0, generator=torch.Generator().manual_seed(9), dtype=torch.float64))[0])
    t = X.subspace_angles({"a": p, "a again": p, "random": q})
    same = t[(t.a == "a") & (t.b == "a again")].iloc[0]
    assert same.mean_cos == pytest.approx(1.0, abs=1e-6)
    rand = t[(t.a == "a") & (t.b == "random")].iloc[0]
    assert rand.mean_cos < 0.9 and 0 < rand.chance_mean_cos < 0.9
    with pytest.raises(InvalidArgumentError):
        X.subspace_angles({"a": p})


# ---------------------------------------------------------------------------------------------------------------------
# attribution
# ---------------------------------------------------------------------------------------------------------------------
def test_attribution_tables_shapes_and_missing_context():
    faces = tiny_faces(4, 4, 16)
    enc = CountingEncoder()
    out = X.attribution_tables(enc, faces, fii_images=8, n_context_regions=2, fcr_bins=1, cpi_sigmas=(0.0, 2.0),
                               cpi_queries=8, bstar_pairs=6, bstar_betas=(0.0, 0.5, 1.0))
    assert len(out["fii"]) == 8 and {"fii", "fii_normalised"} <= set(out["fii"].columns)
    assert list(out["cpi"].sigma) == [0.0, 2.0] and out["cpi_note"] == ""
    assert len(out["bstar"].curve) == 3
    out2 = X.attribution_tables(enc, tiny_faces(4, 4, 16, context=False), fii_images=4, n_context_regions=1,
                                fcr_bins=1, bstar_pairs=2, bstar_betas=(0.0, 1.0))
    assert out2["cpi"] is None and "context" in out2["cpi_note"]


# ---------------------------------------------------------------------------------------------------------------------
# inversion
# ---------------------------------------------------------------------------------------------------------------------
def test_projected_encoder_matches_projector_and_is_differentiable():
    faces = tiny_faces(6, 3, 16)
    enc = CountingEncoder()
    z = enc.embed(faces.images)
    p = X.fit_eraser("isp", z, faces.identity, rank=3)
    pe = X.ProjectedEncoder(enc, p)
    torch.testing.assert_close(pe.embed(faces.images), p(z), atol=1e-5, rtol=0)
    torch.testing.assert_close(X.ProjectedEncoder(enc, None).embed(faces.images), z, atol=1e-6, rtol=0)
    x = faces.images[:2].clone().requires_grad_(True)
    pe._embed_batch(x).sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())


def test_reference_threshold_from_embeddings():
    emb, ids = clusters(20, 6, seed=7)[:2]
    tau = X.reference_threshold_from_embeddings(emb, ids, far=1e-2)
    pairs = VerificationPairs.create(ids)
    scan = scan_pairs(pairs, emb, top_k=pairs.n_impostor_pairs)
    assert tau == pytest.approx(float(thresholds_at_far(scan.top_scores, pairs.n_impostor_pairs, [1e-2])[0]))
    realised = float((scan.top_scores > tau).sum()) / pairs.n_impostor_pairs
    assert realised <= 1e-2
    with pytest.raises(InsufficientDataError, match="resolve"):
        X.reference_threshold_from_embeddings(emb, ids, far=1e-4)


def test_inversion_study_rows_identity_evidence_and_errors():
    faces = tiny_faces(38, 4, 16, seed=1)
    ref = CountingEncoder()
    crops, _ = X.face_crops(faces.images, faces.box, size=8, margin=0.2)
    leak = ref.embed(crops)  # an embedding that carries the face crop: identity must come back
    noise = torch.nn.functional.normalize(torch.randn(len(faces), 48, generator=torch.Generator().manual_seed(5)), dim=1)
    aux = torch.arange(0, 120)
    tgt = torch.arange(120, 152, 4)  # one image of each of 8 identities
    enc = CountingEncoder()
    z = enc.embed(faces.images)
    p = X.fit_eraser("isp", z[aux], faces.identity[aux], rank=2)
    A, T, S = X.AttackedEncoder, X.InversionTargets, X.InversionSettings
    attacked = {"leak": A(None, leak[aux], leak[tgt]), "noise": A(None, noise[aux], noise[tgt]),
                "enc raw": A(X.ProjectedEncoder(enc, None), z[aux], z[tgt]),
                "enc ISP box": A(X.ProjectedEncoder(enc, p), p(z[aux]), p(z[tgt]), "box")}
    data = T(faces.images[aux], faces.box[aux], faces.identity[aux], faces.images[tgt], faces.box[tgt])
    table, recs = X.inversion_study(attacked, data, ref, 0.5, settings=S(crop_size=8, epochs=2, steps=3), seed=0)
    assert list(table.attack[table.encoder == "enc raw"]) == ["ridge", "conv", "optimisation"]
    assert list(table.attack[table.encoder == "enc ISP box"]) == ["ridge", "conv", "optimisation"]
    assert list(table.attack[table.encoder == "leak"]) == ["ridge", "conv"]  # no module: no latent search
    assert set(table.family) == {"regression", "optimisation"}
    for lo, v, hi in (("ci_low", "success_rate", "ci_high"), ("rank1_low", "rank1", "rank1_high"),
                      ("margin_low", "margin", "margin_high")):
        assert (table[lo] <= table[v] + 1e-12).all() and (table[v] <= table[hi] + 1e-12).all()
    assert table.rank1_chance.tolist() == pytest.approx([1 / 8] * len(table))
    assert recs["enc raw/optimisation"].shape == (8, 3, 8, 8)
    assert ref.last_boxes is not None and float(ref.last_boxes.max()) <= 8  # crop boxes, in crop pixels
    leak_row = table[(table.encoder == "leak") & (table.attack == "ridge")].iloc[0]
    noise_row = table[(table.encoder == "noise") & (table.attack == "ridge")].iloc[0]
    assert leak_row.rank1 >= 0.75 and leak_row.margin_low > 0
    assert noise_row.rank1 <= 0.5 and noise_row.margin < leak_row.margin_low
    ridge_only = S(attacks=("ridge",))
    with pytest.raises(UnknownNameError):
        S(attacks=("gan",))
    with pytest.raises(ShapeError):
        X.inversion_study({"x": A(None, z[aux][:3], z[tgt])}, data, ref, 0.5, settings=S(epochs=1))
    with pytest.raises(UnknownNameError):
        X.inversion_study({"x": A(None, z[aux], z[tgt], "crop")}, data, ref, 0.5, settings=ridge_only)
    with pytest.raises(InvalidArgumentError, match="AttackedEncoder"):
        X.inversion_study({"x": (None, z[aux], z[tgt])}, data, ref, 0.5, settings=ridge_only)
    with pytest.raises(InsufficientDataError, match="identities"):
        X.inversion_study({"x": A(None, z[aux], z[tgt])}, T(faces.images[aux], faces.box[aux],
                          torch.zeros(len(aux), dtype=torch.long), faces.images[tgt], faces.box[tgt]), ref, 0.5,
                          settings=ridge_only)
    with pytest.raises(InsufficientDataError, match="targets"):
        X.inversion_study({"x": A(None, z[aux], z[tgt][:1])}, T(faces.images[aux], faces.box[aux],
                          faces.identity[aux], faces.images[tgt][:1], faces.box[tgt][:1]), ref, 0.5,
                          settings=ridge_only)


def test_inversion_study_several_judges_one_row_each():
    faces = tiny_faces(38, 4, 16, seed=1)
    ref = CountingEncoder()
    crops, _ = X.face_crops(faces.images, faces.box, size=8, margin=0.2)
    leak = ref.embed(crops)
    aux, tgt = torch.arange(0, 120), torch.arange(120, 152, 4)
    data = X.InversionTargets(faces.images[aux], faces.box[aux], faces.identity[aux], faces.images[tgt],
                              faces.box[tgt])
    attacked = {"leak": X.AttackedEncoder(None, leak[aux], leak[tgt])}
    kw = dict(settings=X.InversionSettings(crop_size=8, attacks=("ridge",)), seed=0)
    one, _ = X.inversion_study(attacked, data, ref, 0.5, **kw)
    two, _ = X.inversion_study(attacked, data, {"a": ref, "b": ref}, {"a": 0.5, "b": 2.0 ** -20}, **kw)
    assert list(two.judge) == ["a", "b"] and list(two.threshold) == [0.5, 2.0 ** -20]
    # the same reconstructions judged by the same encoder: identical graded measures, only the threshold differs
    for col in ("rank1", "margin", "mean_score"):
        assert two[col].tolist() == pytest.approx([one[col].iloc[0]] * 2)
    assert two.success_rate.iloc[1] >= two.success_rate.iloc[0]
    text = describe_inversion_evidence(two.assign(condition="raw"))
    assert "(judge a)" in text and "(judge b)" in text
    with pytest.raises(InvalidArgumentError, match="threshold"):
        X.inversion_study(attacked, data, {"a": ref}, 0.5, **kw)
    with pytest.raises(InvalidArgumentError, match="threshold"):
        X.inversion_study(attacked, data, {"a": ref}, {"b": 0.5}, **kw)
    with pytest.raises(InvalidArgumentError, match="threshold"):
        X.inversion_study(attacked, data, ref, float("nan"), **kw)