"""Tests of privkit.isp.attribution (FCR, FII, CPI, B*), privkit.isp.inversion and privkit.isp.utility.

Images are small procedural faces (a textured disk whose colour and texture frequency encode the identity) on
striped backgrounds (the context), and the encoders are tiny differentiable torch modules that look only at the
centre of the image (a "face" encoder) or only at its border (a "context" encoder), so the attribution indices
have known signs.
"""

from __future__ import annotations

import math

import pytest
import torch

from privkit.encoders.base import Encoder
from privkit.errors import InsufficientDataError, InvalidArgumentError, ShapeError
from privkit.isp.attribution import (
    background_dominance,
    context_preference_curve,
    equal_area_context_regions,
    face_coverage_ratio,
    face_importance_index,
    perturb_region,
    summarise_by_fcr,
)
from privkit.isp.inversion import (
    RidgeDecoder,
    face_crops,
    paste_crops,
    ridge_predict,
    train_ridge_inverter,
    inversion_audit,
    inversion_success,
    optimisation_attack,
    reference_threshold,
    train_regression_inverter,
)
from privkit.metrics import wilson_interval
from privkit.encoders import embed_images
from privkit.transforms import gaussian_blur
from privkit.isp.projection import IdentitySanitizer
from privkit.isp.utility import (
    copy_detection_eval,
    copy_detection_metrics,
    knn_accuracy,
    knn_retention,
    simple_augment,
)


@pytest.fixture(autouse=True, scope="module")
def _single_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


SIZE = 32


def make_faces(n_id: int = 6, n_ctx: int = 4, *, seed: int = 0):
    """One image per (identity, context): a face disk of radius 6–10 px near the centre on a striped background."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(SIZE).float(), torch.arange(SIZE).float(), indexing="ij")
    id_col = torch.rand(n_id, 3, generator=g) * 0.8 + 0.1
    id_freq = torch.randint(2, 6, (n_id,), generator=g).float()
    ctx_col = torch.rand(n_ctx, 3, generator=g) * 0.8 + 0.1
    ctx_theta = torch.rand(n_ctx, generator=g) * math.pi
    ctx_freq = torch.randint(2, 5, (n_ctx,), generator=g).float()
    imgs, masks, ids, ctxs = [], [], [], []
    for i in range(n_id):
        for c in range(n_ctx):
            wave = torch.sin(2 * math.pi * ctx_freq[c] * (xx * torch.cos(ctx_theta[c]) + yy * torch.sin(ctx_theta[c])) / SIZE)
            bg = ctx_col[c][:, None, None] * (0.6 + 0.4 * wave)[None]
            r = 6 + 4 * float(torch.rand(1, generator=g))
            cy = SIZE / 2 + float(torch.randint(-1, 2, (1,), generator=g))
            cx = SIZE / 2 + float(torch.randint(-1, 2, (1,), generator=g))
            m = ((yy - cy) ** 2 + (xx - cx) ** 2) <= r * r
            tex = 0.75 + 0.25 * torch.sign(torch.sin(2 * math.pi * id_freq[i] * xx / SIZE) * torch.sin(2 * math.pi * id_freq[i] * yy / SIZE))
            img = torch.where(m[None], id_col[i][:, None, None] * tex[None], bg) + 0.02 * torch.randn(3, SIZE, SIZE, generator=g)
            imgs.append(img.clamp(0, 1))
            masks.append(m[None])
            ids.append(i)
            ctxs.append(c)
    return torch.stack(imgs), torch.stack(masks), torch.tensor(ids), torch.tensor(ctxs)


def ring(lo: float, hi: float) -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.arange(SIZE).float(), torch.arange(SIZE).float(), indexing="ij")
    d = ((yy - SIZE / 2) ** 2 + (xx - SIZE / 2) ** 2).sqrt()
    return ((d >= lo) & (d < hi)).float()


class SpatialEncoder(torch.nn.Module):
    """Fixed random 3×3 conv features, seen only through a spatial window, average-pooled to 4×4."""

    def __init__(self, window: torch.Tensor, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        with torch.no_grad():
            self.conv.weight.copy_(torch.randn(8, 3, 3, 3, generator=g) * 0.5)
            self.conv.bias.copy_(torch.randn(8, generator=g) * 0.1)
        self.register_buffer("window", window[None, None])

    def forward(self, x):
        return torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)) * self.window, 4).flatten(1) + 1e-6


FACE_ENCODER = SpatialEncoder(ring(0, 5))  # sees only pixels inside every face disk
CONTEXT_ENCODER = SpatialEncoder(ring(13, 99))  # sees only pixels outside every face disk


@pytest.fixture(scope="module")
def faces():
    return make_faces()


# ---------------------------------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------------------------------
def test_fcr_blur_and_perturbation(faces):
    x, m, _, _ = faces
    fcr = face_coverage_ratio(m)
    assert torch.allclose(fcr, m.flatten(1).float().mean(1))
    assert torch.equal(face_coverage_ratio(m[:, 0]), fcr)  # (N, H, W) masks too
    const = torch.full((2, 3, 16, 16), 0.3)
    assert torch.allclose(gaussian_blur(const, 2.0), const, atol=1e-6)
    assert torch.equal(gaussian_blur(x[:2], 0.0), x[:2])
    blurred = gaussian_blur(x[:4], 2.0)
    assert blurred.shape == x[:4].shape
    assert float((blurred[..., 1:] - blurred[..., :-1]).abs().mean()) < float((x[:4, ..., 1:] - x[:4, ..., :-1]).abs().mean())
    out = perturb_region(x, m, kind="blur", sigma=3.0)
    assert torch.equal(out[~m.expand_as(x)], x[~m.expand_as(x)])  # only the region changes
    filled = perturb_region(x, m, kind="fill")
    mean = x.mean(dim=(2, 3))
    assert torch.allclose(filled[0][:, m[0, 0]], mean[0][:, None].expand(-1, int(m[0].sum())))
    with pytest.raises(InvalidArgumentError):
        gaussian_blur(x, -1.0)
    with pytest.raises(ShapeError):
        perturb_region(x, m[:3])


def test_equal_area_context_regions(faces):
    _, m, _, _ = faces
    regions, valid = equal_area_context_regions(m, n_regions=3, dilation=2, generator=torch.Generator().manual_seed(0))
    assert regions.shape == (m.shape[0], 3, 1, SIZE, SIZE) and bool(valid.all())
    area = m.flatten(1).sum(1)
    assert torch.equal(regions.flatten(2).sum(2), area[:, None].expand(-1, 3))  # exactly the face's area
    dilated = torch.nn.functional.max_pool2d(m.float(), 5, stride=1, padding=2) > 0.5
    assert not bool((regions & dilated[:, None]).any())  # outside the dilated face
    assert not torch.equal(regions[:, 0], regions[:, 1])  # different random regions
    big = torch.zeros(1, 1, SIZE, SIZE, dtype=torch.bool)
    big[..., 2:30, 2:30] = True  # face larger than its background
    r, v = equal_area_context_regions(big, n_regions=2)
    assert not bool(v.any()) and not bool(r.any())


def test_embed_images_accepts_encoders_and_callables(faces):
    x, _, _, _ = faces

    class Flat(Encoder):
        name, dim, kind = "flat", 3 * SIZE * SIZE, "pixels"

        def _embed_batch(self, images, boxes):
            return images.flatten(1)

    a = embed_images(Flat(), x[:5])
    b = embed_images(lambda im: im.flatten(1) * 3.0, x[:5])
    assert torch.allclose(a, b, atol=1e-6) and torch.allclose(a.norm(dim=1), torch.ones(5))
    with pytest.raises(ShapeError):
        embed_images(lambda im: im.flatten(1)[:2], x[:5])
    with pytest.raises(InvalidArgumentError, match="NaN"):
        embed_images(lambda im: im.flatten(1) * math.nan, x[:5])


# ---------------------------------------------------------------------------------------------------------------------
# FII, CPI, B*
# ---------------------------------------------------------------------------------------------------------------------
def test_fii_sign_follows_what_the_encoder_looks_at(faces):
    x, m, _, _ = faces
    face = face_importance_index(FACE_ENCODER, x, m, n_context_regions=3, seed=0)
    ctx = face_importance_index(CONTEXT_ENCODER, x, m, n_context_regions=3, seed=0)
    assert set(face.columns) >= {"fcr", "delta_face", "delta_context", "fii", "fii_normalised"}
    assert (face["delta_face"] > 0).all() and (face["delta_context"] < 1e-6).all()
    assert (face["fii_normalised"] > 0.99).all() and (face["fii"] > 0).all()
    assert (ctx["delta_face"] < 1e-6).all()
    assert ctx["fii_normalised"].mean() < -0.9
    assert ((face["fii"] >= -2) & (face["fii"] <= 2)).all()
    fill = face_importance_index(FACE_ENCODER, x, m, kind="fill", n_context_regions=2)
    assert (fill["fii_normalised"] > 0.99).all()
    summary = summarise_by_fcr(face, bins=3)
    assert summary["fii_n"].sum() == len(face) and len(summary) == 3
    assert (summary["fii_normalised_mean"] > 0.99).all()
    edges = summarise_by_fcr(ctx, bins=[0.0, 0.15, 1.0])
    assert list(edges["fcr_low"]) == [0.0, 0.15]
    assert edges["fii_n"].sum() == len(ctx) == int((ctx["fcr"] <= 0.15).sum()) + int((ctx["fcr"] > 0.15).sum())
    with pytest.raises(InvalidArgumentError):
        summarise_by_fcr(face, bins=[0.5, 0.1])


def test_cpi_curve(faces):
    x, m, ids, ctx = faces
    face = context_preference_curve(FACE_ENCODER, x, m, ids, ctx, sigmas=(0.0, 8.0), seed=0)
    context = context_preference_curve(CONTEXT_ENCODER, x, m, ids, ctx, sigmas=(0.0, 8.0), seed=0)
    assert list(face["n_queries"]) == [len(x)] * 2
    assert face["cpi"].iloc[0] < 0.1  # identity-preferring when the face is intact
    assert face["cpi"].iloc[1] > face["cpi"].iloc[0]  # blurring the face removes identity evidence
    assert (context["cpi"] > 0.9).all()  # context-preferring at every blur
    with pytest.raises(InsufficientDataError):
        context_preference_curve(FACE_ENCODER, x, m, ids, torch.arange(len(x)))  # every context unique


def test_b_star(faces):
    x, m, ids, _ = faces
    face = background_dominance(FACE_ENCODER, x, m, ids, n_pairs=30, seed=0)
    assert face.median == math.inf and face.never_flipped == 1.0
    ctx = background_dominance(CONTEXT_ENCODER, x, m, ids, n_pairs=30, seed=0)
    assert ctx.median <= 1.0
    assert ctx.curve["fraction_flipped"].iloc[-1] > 0.8
    assert ctx.curve["mean_margin"].iloc[-1] > ctx.curve["mean_margin"].iloc[0]
    assert set(ctx.per_pair.columns) == {"face_index", "context_index", "b_star"}
    assert (ids[torch.tensor(ctx.per_pair["face_index"].values)] != ids[torch.tensor(ctx.per_pair["context_index"].values)]).all()
    with pytest.raises(InvalidArgumentError):
        background_dominance(FACE_ENCODER, x, m, ids, betas=[0.5, 0.2])
    with pytest.raises(InsufficientDataError):
        background_dominance(FACE_ENCODER, x, m, torch.zeros_like(ids))


# ---------------------------------------------------------------------------------------------------------------------
# Inversion
# ---------------------------------------------------------------------------------------------------------------------
def image_family(n_id: int, per_id: int, *, size: int = 8, seed: int):
    """Smooth images on a 6-dimensional manifold; each identity is a point plus a little per-image jitter."""
    basis = torch.nn.functional.avg_pool2d(torch.randn(6, 3, size, size, generator=torch.Generator().manual_seed(99)), 3, 1, 1)
    basis = basis / basis.flatten(1).norm(dim=1)[:, None, None, None] * size
    g = torch.Generator().manual_seed(seed)
    c = torch.randn(n_id, 6, generator=g) * 0.12
    ids = torch.arange(n_id).repeat_interleave(per_id)
    cc = c[ids] + 0.006 * torch.randn(ids.numel(), 6, generator=g)
    return (0.5 + torch.einsum("nk,kchw->nchw", cc, basis)).clamp(0, 1), ids


class LinearEncoder(torch.nn.Module):
    """An invertible linear map of the (centred) pixels: identity fully recoverable from the embedding."""

    def __init__(self, d: int):
        super().__init__()
        self.register_buffer("w", torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(1)))[0])

    def forward(self, x):
        return (x.flatten(1) - 0.5) @ self.w


class MeanColour(torch.nn.Module):
    """Sees only the mean colour: nothing identity-specific survives."""

    def forward(self, x):
        return torch.cat([x.mean((2, 3)), torch.ones(x.shape[0], 1)], 1)


def centred_pixels(x):
    """The reference encoder (not used by any attack)."""
    return (x - x.mean((1, 2, 3), keepdim=True)).flatten(1)


@pytest.fixture(scope="module")
def inversion_sets():
    ref_x, ref_id = image_family(30, 5, seed=1)  # held-out set for the reference threshold: 10,875 impostor pairs
    targets, _ = image_family(12, 1, seed=2)
    aux, _ = image_family(120, 2, seed=3)
    return ref_x, ref_id, targets, aux


def test_reference_threshold_resolution(inversion_sets):
    ref_x, ref_id, _, _ = inversion_sets
    tau = reference_threshold(centred_pixels, ref_x, ref_id, far=1e-3)
    z = embed_images(centred_pixels, ref_x)
    s = z @ z.T
    iu = torch.triu_indices(len(ref_id), len(ref_id), 1)
    imp = s[iu[0], iu[1]][ref_id[iu[0]] != ref_id[iu[1]]]
    assert int((imp > tau).sum()) == math.floor(1e-3 * imp.numel())
    with pytest.raises(InsufficientDataError, match="10000"):
        reference_threshold(centred_pixels, ref_x[:60], ref_id[:60], far=1e-3)


def test_optimisation_attack_succeeds_only_when_identity_is_encoded(inversion_sets):
    ref_x, ref_id, targets, _ = inversion_sets
    tau = reference_threshold(centred_pixels, ref_x, ref_id, far=1e-3)
    lin, mean = LinearEncoder(3 * 64), MeanColour()
    rec, cos = optimisation_attack(lin, embed_images(lin, targets), image_size=(8, 8), steps=100, lr=0.08)
    assert rec.shape == targets.shape and float(cos.min()) > 0.99
    good = inversion_success(centred_pixels, rec, targets, threshold=tau, attack="optimisation")
    assert good.success_rate >= 0.9 and good.ci_low <= good.success_rate <= good.ci_high
    rec_m, cos_m = optimisation_attack(mean, embed_images(mean, targets), image_size=(8, 8), steps=100, lr=0.08)
    assert float(cos_m.min()) > 0.99  # the attack matches the embedding ...
    bad = inversion_success(centred_pixels, rec_m, targets, threshold=tau)
    assert bad.success_rate <= 0.1  # ... but the image does not verify
    assert all(p.requires_grad is False for p in lin.parameters()) or not list(lin.parameters())
    with pytest.raises(InvalidArgumentError, match="torch.nn.Module"):
        optimisation_attack(centred_pixels, embed_images(lin, targets), image_size=(8, 8))  # type: ignore[arg-type]


@pytest.mark.slow
def test_regression_attack_and_audit(inversion_sets):
    ref_x, ref_id, targets, aux = inversion_sets
    tau = reference_threshold(centred_pixels, ref_x, ref_id, far=1e-3)
    lin = LinearEncoder(3 * 64)
    dec, hist = train_regression_inverter(lin, aux, epochs=30, channels=32, seed=0)
    assert hist["loss"].iloc[-1] < hist["loss"].iloc[0]
    with torch.no_grad():
        rec = dec(embed_images(lin, targets))
    assert rec.shape == targets.shape and float(rec.min()) >= 0 and float(rec.max()) <= 1
    assert inversion_success(centred_pixels, rec, targets, threshold=tau).success_rate >= 0.8
    mean = MeanColour()
    dec_m, _ = train_regression_inverter(mean, aux, epochs=30, channels=32, seed=0)
    with torch.no_grad():
        rec_m = dec_m(embed_images(mean, targets))
    assert inversion_success(centred_pixels, rec_m, targets, threshold=tau).success_rate <= 0.1
    table = inversion_audit(
        mean, aux, targets, centred_pixels, ref_x, ref_id,
        regression_options={"epochs": 5, "channels": 16}, optimisation_options={"steps": 10},
    )
    assert list(table["attack"]) == ["regression", "optimisation"] and (table["success_rate"] <= 0.1).all()
    assert (table["reference_far"] == 1e-3).all()


def test_face_crops_and_paste_round_trip():
    yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    img = torch.stack([xx / 31, yy / 31, (xx + yy) / 62])[None].repeat(2, 1, 1, 1)
    boxes = torch.tensor([[8.0, 6.0, 20.0, 22.0], [4.0, 4.0, 14.0, 12.0]])
    crops, cbox = face_crops(img, boxes, size=16, margin=0.25)
    assert crops.shape == (2, 3, 16, 16) and cbox.shape == (2, 4)
    # the face box sits centred, its longer side spanning 1 / (1 + 2 * margin) of the crop
    assert float((cbox[:, 3] - cbox[:, 1])[0]) == pytest.approx(16 / 1.5, abs=1e-4)
    assert float((cbox[:, 0] + cbox[:, 2])[0]) == pytest.approx(16, abs=1e-4)
    # a linear ramp is sampled exactly: the crop's top-left pixel centre maps back to the right image position
    side = 16 * 1.5
    assert float(crops[0, 0, 0, 0]) * 31 == pytest.approx(14 - side / 2 + side / 32 - 0.5, abs=1e-4)
    back = paste_crops(torch.zeros_like(img), crops, boxes, margin=0.25)
    torch.testing.assert_close(back[0, :, 6:22, 8:20], img[0, :, 6:22, 8:20], atol=1e-5, rtol=0)
    assert float(back[0, :, 0, 0].abs().max()) == 0  # outside the frame the canvas is kept
    c = crops.clone().requires_grad_(True)
    paste_crops(img, c, boxes).sum().backward()
    assert c.grad is not None and float(c.grad.abs().sum()) > 0
    with pytest.raises(InvalidArgumentError, match="xyxy"):
        face_crops(img, torch.tensor([[8.0, 6.0, 4.0, 22.0]] * 2))
    with pytest.raises(ShapeError):
        face_crops(img, boxes[:1])


def test_ridge_inverter_recovers_a_linear_map_and_picks_lambda():
    g = torch.Generator().manual_seed(0)
    w = torch.randn(6, 3 * 4 * 4, generator=g) * 0.02  # no pixel leaves [0, 1]: the map is exactly linear
    z = torch.randn(200, 6, generator=g)
    x = (0.5 + z @ w).view(200, 3, 4, 4).clamp(0, 1)
    ids = torch.arange(200) // 4
    dec, cv = train_ridge_inverter(z, x, groups=ids, lambdas=(1e-3, 1e3, 1e6), folds=4)
    assert isinstance(dec, RidgeDecoder) and dec.embed_dim == 6 and cv.chosen.sum() == 1
    assert dec.lam == 1e-3 and cv.cv_mse.iloc[0] < cv.cv_mse.iloc[2]
    zt = torch.randn(10, 6, generator=g)
    torch.testing.assert_close(dec(zt), (0.5 + zt @ w).view(10, 3, 4, 4).clamp(0, 1), atol=2e-3, rtol=0)
    torch.testing.assert_close(ridge_predict(z, x.flatten(1), zt, lam=1e-3), dec(zt).flatten(1), atol=2e-3, rtol=0)
    # an embedding independent of the images: a huge penalty (the mean image) wins the cross-validation
    noise = torch.randn(200, 6, generator=g)
    dec_n, cv_n = train_ridge_inverter(noise, x, groups=ids, lambdas=(1e-3, 1e6), folds=4)
    assert dec_n.lam == 1e6
    with pytest.raises(InsufficientDataError, match="groups"):
        train_ridge_inverter(z, x, groups=torch.zeros(200, dtype=torch.long), folds=2)
    with pytest.raises(InvalidArgumentError):
        train_ridge_inverter(z, x, lambdas=(0.0,))
    with pytest.raises(ShapeError):
        train_ridge_inverter(z[:5], x)


def test_wilson_interval():
    lo, hi = wilson_interval(0, 20)
    assert lo == 0.0 and 0.1 < hi < 0.2
    lo, hi = wilson_interval(10, 20)
    assert lo < 0.5 < hi and hi - 0.5 == pytest.approx(0.5 - lo)
    assert all(math.isnan(v) for v in wilson_interval(0, 0))


# ---------------------------------------------------------------------------------------------------------------------
# Utility
# ---------------------------------------------------------------------------------------------------------------------
def test_knn_accuracy_hand_example():
    bank = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    labels = torch.tensor([0, 0, 1, 1])
    queries = torch.tensor([[1.0, 0.05], [0.05, 1.0], [0.2, 1.0]])
    assert knn_accuracy(bank, labels, queries, torch.tensor([0, 1, 1]), k=1) == 1.0
    assert knn_accuracy(bank, labels, queries, torch.tensor([0, 1, 0]), k=2) == pytest.approx(2 / 3)
    assert knn_accuracy(bank, labels, queries, torch.tensor([0, 1, 1]), k=3, weighting="similarity") == 1.0
    with pytest.raises(InvalidArgumentError):
        knn_accuracy(bank, labels, queries, torch.tensor([0, 1, 1]), k=5)


def test_knn_retention_after_identity_removal():
    g = torch.Generator().manual_seed(0)
    ids = torch.arange(40).repeat_interleave(6)
    attr = torch.randint(0, 3, (ids.numel(),), generator=g)
    z = torch.zeros(ids.numel(), 16)
    z[:, :4] = 2 * torch.randn(40, 4, generator=g)[ids]  # identity subspace
    z[torch.arange(ids.numel()), 4 + attr] += 1.5  # attribute directions
    z = torch.nn.functional.normalize(z + 0.3 * torch.randn(z.shape, generator=g), dim=1)
    proj = IdentitySanitizer(rank=4).update(z, ids).projector
    ret = knn_retention(z[:120], attr[:120], z[120:], attr[120:], transform=proj, k=5)
    assert ret.transformed > ret.raw and ret.retention_pct > 100  # removing identity helps the attribute kNN
    ident = knn_retention(z[::2], ids[::2], z[1::2], ids[1::2], transform=proj, k=1)
    assert ident.raw > 0.6 and ident.retention_pct < 30  # while identity kNN collapses


def test_copy_detection_metrics_hand_example():
    refs = torch.eye(3)
    queries = torch.tensor([[1.0, 0.2, 0.0], [0.9, 0.5, 0.0], [0.0, 0.5, 0.8]])
    out = copy_detection_metrics(queries, torch.tensor([0, 1, 2]), refs)
    # ranks of the true source: 1, 2, 1 -> Recall@1 = 2/3, mAP = mean(1, 1/2, 1)
    assert out["recall_at_1"] == pytest.approx(2 / 3)
    assert out["map"] == pytest.approx((1 + 0.5 + 1) / 3)
    multi = copy_detection_metrics(queries[:1], torch.tensor([7]), refs, reference_ids=torch.tensor([7, 5, 7]))
    assert multi["map"] == pytest.approx((1 + 2 / 3) / 2)  # the two relevant references are ranked 1st and 3rd
    with pytest.raises(InvalidArgumentError):
        copy_detection_metrics(queries, torch.tensor([0, 1, 9]), refs)


def test_copy_detection_eval_with_augmented_copies(faces):
    x, _, _, _ = faces
    copies = simple_augment(x, generator=torch.Generator().manual_seed(0))
    assert copies.shape == x.shape and float(copies.min()) >= 0 and float(copies.max()) <= 1
    assert not torch.allclose(copies, x)
    again = simple_augment(x, generator=torch.Generator().manual_seed(0))
    assert torch.equal(copies, again)
    pixels = lambda im: torch.nn.functional.avg_pool2d(im, 4).flatten(1) - 0.5  # noqa: E731
    table = copy_detection_eval(pixels, x, n_copies=2, seed=0, augment=lambda im, generator: simple_augment(im, generator=generator, strength=0.3))
    assert table["n_queries"].iloc[0] == 2 * len(x)
    assert table["recall_at_1"].iloc[0] > 0.8 and table["map"].iloc[0] >= table["recall_at_1"].iloc[0]
    z = embed_images(pixels, x)
    proj = IdentitySanitizer(rank=2).update(z, torch.arange(len(x)) % 6).projector
    both = copy_detection_eval(pixels, x, transform=proj, seed=0)
    assert list(both["embedding"]) == ["raw", "transformed"]
    assert both["map_retention_pct"].iloc[1] == pytest.approx(100 * both["map"].iloc[1] / both["map"].iloc[0])
