"""Tests of the SynthesisNet notebook helpers (privkit.studies.synthesisnet.experiments and presets)."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest
import torch

import privkit
from privkit.data.types import FaceSet
from privkit.errors import InsufficientDataError, InvalidArgumentError, PrivkitError, ShapeError
from privkit.synthesisnet import SynthesisNet
from privkit.studies.synthesisnet import experiments as X

SIZE = 16


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _faceset(n_ids=5, per_id=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = n_ids * per_id
    identity = torch.arange(n_ids).repeat_interleave(per_id)
    base = torch.rand(n_ids, 3, 1, 1, generator=g)[identity]
    images = (0.7 * base + 0.3 * torch.rand(n, 3, SIZE, SIZE, generator=g)).clamp(0, 1)
    # attribute "bright": whether the image's mean is above the median (learnable from the mean colour)
    bright = (images.mean(dim=(1, 2, 3)) > images.mean(dim=(1, 2, 3)).median()).long()
    return FaceSet(images=images, identity=identity, box=torch.tensor([[2.0, 2.0, 14.0, 14.0]]).repeat(n, 1),
                   mask=torch.ones(n, 1, SIZE, SIZE, dtype=torch.bool), context=torch.full((n,), -1),
                   attributes={"bright": bright, "const": torch.zeros(n, dtype=torch.long)}, name="random")


def test_presets_registered_and_frozen():
    for scale in privkit.config.SCALES:
        cfg = privkit.config.load("synthesisnet", scale)
        assert set(cfg.judge_epsilons) <= set(cfg.epsilons) or scale == "paper"
        assert set(cfg.baseline_epsilons) <= set(cfg.epsilons) and cfg.ablation_epsilon in cfg.epsilons
        assert min(cfg.epsilons) == 0.01 and max(cfg.epsilons) == 1.0
        with pytest.raises(Exception):
            cfg.width = 3  # frozen
    stems = [s for s, _ in privkit.config.artefacts("synthesisnet")]
    assert len(stems) == len(set(stems)) and all(s.startswith(("fig", "table")) for s in stems)
    assert "fig3_identity_vs_epsilon" in stems and "table2_is_fid" in stems


def test_split_identities_disjoint_and_seeded():
    f = _faceset(n_ids=6)
    tr, te = X.split_identities(f, n_train=4, n_test=2, seed=3)
    a, b = set(tr.identity.tolist()), set(te.identity.tolist())
    assert len(a) == 4 and len(b) == 2 and not a & b
    assert len(tr) == 12 and len(te) == 6
    tr2, _ = X.split_identities(f, n_train=4, n_test=2, seed=3)
    assert torch.equal(tr.identity, tr2.identity)
    with pytest.raises(InsufficientDataError):
        X.split_identities(f, n_train=5, n_test=2)


def test_first_per_identity():
    f = _faceset(n_ids=3, per_id=4)
    m = X.first_per_identity(f, 2)
    assert m.tolist() == [True, True, False, False] * 3
    assert bool(X.first_per_identity(f, 10).all())
    with pytest.raises(InvalidArgumentError):
        X.first_per_identity(f, 0)


def test_with_noise_shares_weights_and_changes_only_the_noise():
    net = SynthesisNet(image_size=SIZE, width=4, id_dim=4, att_dim=6)
    net.fit(_faceset(), epochs_ae=1, epochs_gan=1, batch_size=8, seed=0, device="cpu")
    none = X.with_noise(net, "none")
    assert none.config.noise == "none" and net.config.noise == "identity"
    x = _faceset().images[:4]
    out, g = none.publish(x, epsilon=None)
    assert math.isinf(g.epsilon)
    zi, za = net.encode(x)
    assert torch.allclose(out, net.synthesize(zi, za))  # same weights, no noise
    with pytest.raises(PrivkitError):
        X.with_noise(net, "loud")


def test_attribute_probe_learns_and_maps_classes():
    f = _faceset(n_ids=8, per_id=4)
    probe = X.AttributeProbe(lambda imgs: imgs.mean(dim=(2, 3)), c=100.0).fit(f.images, f.attributes)
    assert "const" not in probe.models  # a single class is skipped
    out = probe(f.images)
    assert out["bright"].shape == (len(f), 2)
    acc = float((out["bright"].argmax(1) == f.attributes["bright"]).float().mean())
    assert acc > 0.8
    p = probe.probs(f.images, "bright")
    assert torch.allclose(p.sum(1), torch.ones(len(f), dtype=p.dtype))
    # labels with an unseen class index: columns of unseen classes are -inf
    lab = {"k": torch.tensor([0, 2] * (len(f) // 2))}
    out2 = X.AttributeProbe(lambda imgs: imgs.mean(dim=(2, 3))).fit(f.images, lab)(f.images)["k"]
    assert out2.shape[1] == 3 and bool(torch.isinf(out2[:, 1]).all())
    with pytest.raises(InvalidArgumentError):
        X.AttributeProbe(lambda imgs: imgs.mean(dim=(2, 3)))(f.images)
    with pytest.raises(InvalidArgumentError):
        probe.probs(f.images, "const")
    with pytest.raises(InvalidArgumentError):
        X.AttributeProbe(lambda imgs: imgs.mean(dim=(2, 3)), c=0.0)


def test_judge_release_identity_vs_random():
    g = torch.Generator().manual_seed(0)
    ids = torch.arange(20).repeat_interleave(2)
    centres = torch.randn(20, 32, generator=g, dtype=torch.float64)
    eo = centres[ids] + 0.05 * torch.randn(40, 32, generator=g, dtype=torch.float64)
    same = X.judge_release(eo, eo + 0.01 * torch.randn(40, 32, generator=g, dtype=torch.float64), ids,
                           n_bootstrap=100)
    rand = X.judge_release(eo, torch.randn(40, 32, generator=g, dtype=torch.float64), ids, n_bootstrap=100)
    assert same["rank1"] == 1.0 and same["identity_distance"] < 0.01
    # published faces close to their own source and far from other identities' originals
    assert same["other_identity_distance"] > 0.7
    assert rand["other_identity_distance"] == pytest.approx(rand["identity_distance"], abs=0.15)
    assert rand["identity_distance"] > 0.7 and rand["rank1"] < 0.3
    assert math.isclose(rand["rank1_chance"], 2 / 40)
    assert rand["rank1_low"] <= rand["rank1"] <= rand["rank1_high"]
    assert same["far"] == 0.01  # resolvable with 40*38 impostor pairs
    assert X.resolvable_far(1e-6, ids) == pytest.approx(10 / (40 * 38))  # the one rule: 10 false accepts
    with pytest.raises(InsufficientDataError):
        X.resolvable_far(0.1, torch.zeros(4))


def test_rank1_chance_interval():
    lo, hi = X.rank1_chance_interval(0.1, 100, confidence=0.99)
    assert lo < 0.1 < hi and 0.0 < lo and hi < 0.25
    assert X.rank1_chance_interval(0.0, 10) == (0.0, 0.0)
    with pytest.raises(InvalidArgumentError):
        X.rank1_chance_interval(1.5, 10)


def test_distance_decrease_failures():
    good = pd.DataFrame({"epsilon": [0.01, 0.1, 1.0], "identity_distance": [0.9, 0.6, 0.3],
                         "distance_low": [0.85, 0.55, 0.25], "distance_high": [0.95, 0.65, 0.35]})
    assert X.distance_decrease_failures(good) == []
    # within error: a small non-significant rise is allowed
    wiggle = good.assign(identity_distance=[0.9, 0.92, 0.3], distance_low=[0.85, 0.87, 0.25],
                         distance_high=[0.95, 0.97, 0.35])
    assert X.distance_decrease_failures(wiggle) == []
    rise = good.assign(identity_distance=[0.5, 0.9, 0.3], distance_low=[0.45, 0.85, 0.25],
                       distance_high=[0.55, 0.95, 0.35])
    assert len(X.distance_decrease_failures(rise)) == 1
    flat = good.assign(identity_distance=[0.5, 0.5, 0.5], distance_low=[0.4] * 3, distance_high=[0.6] * 3)
    assert len(X.distance_decrease_failures(flat)) == 1
    with pytest.raises(ShapeError):
        X.distance_decrease_failures(good.drop(columns="distance_low"))


def test_latent_pair_distances_brute_force():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(6, 3, generator=g, dtype=torch.float64) * 10
    ids = torch.tensor([0, 0, 1, 1, 2, 2])
    df = X.latent_pair_distances(z, ids, clip_norm=5.0)
    zc = z * torch.clamp(5.0 / z.norm(dim=1, keepdim=True), max=1.0)
    nearest = [min(float((zc[i] - zc[j]).norm()) for j in range(6) if ids[j] != ids[i]) for i in range(6)]
    got = df[df.pair == "nearest other identity"].distance.tolist()
    assert got == pytest.approx(nearest)
    assert (df.pair == "any other identity").sum() == 12  # 15 pairs minus 3 same-identity pairs
    assert df.distance.max() <= 10.0 + 1e-9
    with pytest.raises(InsufficientDataError):
        X.latent_pair_distances(z, torch.zeros(6), clip_norm=1.0)


def test_epsilon_meaning_curves_are_the_distance_distributions():
    g = torch.Generator().manual_seed(2)
    ids = torch.arange(8).repeat_interleave(3)
    z = torch.randn(24, 4, generator=g, dtype=torch.float64) * 10
    pairs = X.latent_pair_distances(z, ids, clip_norm=5.0)
    df = X.epsilon_meaning_curves(z, ids, clip_norm=5.0, epsilons=(0.1, 1.0), n_quantiles=11)
    assert set(df.columns) == {"pair", "epsilon", "fraction", "distance", "eps_d"}
    near = df[(df.pair == "nearest other identity") & (df.epsilon == 1.0)]
    assert near.distance.tolist() == pytest.approx(sorted(pairs[pairs.pair == "nearest other identity"].distance))
    assert near.fraction.iloc[-1] == pytest.approx(1.0) and near.fraction.iloc[0] == pytest.approx(1 / 24)
    every = df[(df.pair == "any other identity") & (df.epsilon == 0.1)]
    allp = pairs[pairs.pair == "any other identity"].distance
    assert len(every) == 11  # a fixed size, whatever the number of pairs
    assert every.distance.iloc[0] == pytest.approx(allp.min()) and every.distance.iloc[-1] == pytest.approx(allp.max())
    assert every.distance.iloc[5] == pytest.approx(allp.median())
    assert df.eps_d.tolist() == pytest.approx((df.epsilon * df.distance).tolist())
    with pytest.raises(InvalidArgumentError):
        X.epsilon_meaning_curves(z, ids, clip_norm=5.0, epsilons=(0.0,))
    with pytest.raises(InvalidArgumentError):
        X.epsilon_meaning_curves(z, ids, clip_norm=5.0, epsilons=(1.0,), n_quantiles=1)


def test_latent_identity_leakage_separates_identity_from_noise():
    g = torch.Generator().manual_seed(3)
    ids = torch.arange(20).repeat_interleave(4)
    centres = torch.randn(20, 16, generator=g)
    z_id = centres[ids] + 0.2 * torch.randn(80, 16, generator=g)  # identity clusters
    z_att = torch.randn(80, 16, generator=g)  # no identity
    hi = X.latent_identity_leakage(z_id, ids)
    lo = X.latent_identity_leakage(z_att, ids)
    assert hi["chance"] == pytest.approx(3 / 79) and lo["chance"] == hi["chance"]
    assert hi["rank1"] == 1.0 and hi["rank1_low"] > hi["chance_high"]
    assert lo["chance_low"] <= lo["rank1"] <= lo["chance_high"]
    assert hi["n"] == 80
    # brute-force leave-one-out nearest neighbour (cosine)
    zn = torch.nn.functional.normalize(z_att.double(), dim=1)
    hits = sum(int(ids[max((j for j in range(80) if j != i), key=lambda j: float(zn[i] @ zn[j]))] == ids[i])
               for i in range(80))
    assert lo["rank1"] == pytest.approx(hits / 80)
    with pytest.raises(InsufficientDataError):
        X.latent_identity_leakage(z_att[:5], torch.arange(5))  # every identity once
    with pytest.raises(ShapeError):
        X.latent_identity_leakage(z_att, ids[:-1])


def test_image_grid():
    import matplotlib.pyplot as plt

    fig = X.image_grid({"a": torch.rand(5, 3, 8, 8), "b": torch.rand(3, 3, 8, 8)}, n_columns=4)
    assert len(fig.axes) == 2 * 3
    plt.close(fig)
    with pytest.raises(InsufficientDataError):
        X.image_grid({}, n_columns=2)


# ============================================================================ aligned crops
def _small_faces(n=6, size=40, seed=0):
    """Faces = bright discs of random radius and position on a dark, noisy background (exact masks)."""
    g = torch.Generator().manual_seed(seed)
    yy, xx = torch.meshgrid(torch.arange(size) + 0.5, torch.arange(size) + 0.5, indexing="ij")
    r = 3 + 6 * torch.rand(n, generator=g)
    cx = 10 + (size - 20) * torch.rand(n, generator=g)
    cy = 10 + (size - 20) * torch.rand(n, generator=g)
    mask = ((xx[None] - cx[:, None, None]) ** 2 + (yy[None] - cy[:, None, None]) ** 2 < r[:, None, None] ** 2)
    images = 0.1 * torch.rand(n, 3, size, size, generator=g) + 0.8 * mask[:, None].float()
    from privkit.data.faces import boxes_from_masks

    return FaceSet(images=images.clamp(0, 1), identity=torch.arange(n) % 3, box=boxes_from_masks(mask),
                   mask=mask[:, None], context=torch.arange(n), attributes={"a": torch.arange(n) % 2},
                   name="discs", meta={"seed": 0})


def test_aligned_faces_fill_the_frame_and_keep_labels():
    from privkit.synthesisnet.data import aligned_faces, square_crop_boxes

    f = _small_faces()
    a = aligned_faces(f, size=16, margin=0.1)
    assert a.images.shape == (6, 3, 16, 16) and a.mask.shape == (6, 1, 16, 16) and a.mask.dtype == torch.bool
    assert float(a.images.min()) >= 0 and float(a.images.max()) <= 1
    assert torch.equal(a.identity, f.identity) and torch.equal(a.context, f.context)
    assert torch.equal(a.attributes["a"], f.attributes["a"]) and a.name == "discs"
    assert a.meta["aligned"] == {"size": 16, "margin": 0.1, "source_size": [40, 40]} and a.meta["seed"] == 0
    # a disc fills pi/4 of its box; the crop is 1.2x the box: coverage ~ pi/4/1.44 = 0.55 whatever the source size
    cov = a.face_coverage_ratio()
    assert bool((f.face_coverage_ratio() < 0.2).all())
    assert torch.allclose(cov, torch.full_like(cov, math.pi / 4 / 1.44), atol=0.12)  # pixelated small discs
    # the face is centred: its box is symmetric inside the crop
    centre = (a.box[:, :2] + a.box[:, 2:]) / 2
    assert torch.allclose(centre, torch.full_like(centre, 8.0), atol=1.01)
    # the face pixels are bright, the corners (background) dark
    assert bool((a.images[:, :, 7:9, 7:9].mean(dim=(1, 2, 3)) > 0.7).all())
    assert bool((a.images[:, :, :2, :2].mean(dim=(1, 2, 3)) < 0.2).all())
    # a larger margin shows more background
    wide = aligned_faces(f, size=16, margin=0.5)
    assert bool((wide.face_coverage_ratio() < cov).all())
    w = square_crop_boxes(torch.tensor([[0.0, 0.0, 10.0, 4.0]]), margin=0.5)
    assert torch.allclose(w, torch.tensor([[-5.0, -8.0, 15.0, 12.0]]))


def test_aligned_faces_bad_inputs():
    from privkit.synthesisnet.data import aligned_faces

    f = _small_faces()
    with pytest.raises(InvalidArgumentError, match="size"):
        aligned_faces(f, size=4)
    with pytest.raises(InvalidArgumentError, match="margin"):
        aligned_faces(f, size=16, margin=-0.1)
    with pytest.raises(InvalidArgumentError, match="margin"):
        aligned_faces(f, size=16, margin=float("nan"))
    with pytest.raises(InvalidArgumentError, match="FaceSet"):
        aligned_faces(f.images, size=16)
    empty = f.subset(torch.arange(6))
    empty.box = empty.box.clone()
    empty.box[2] = torch.tensor([5.0, 5.0, 5.0, 9.0])
    with pytest.raises(InvalidArgumentError, match="empty face box"):
        aligned_faces(empty, size=16)
    bad = f.subset(torch.arange(6))
    bad.mask = bad.mask[:, :, :20]
    with pytest.raises(ShapeError, match="mask"):
        aligned_faces(bad, size=16)


# ------------------------------------------------------------------------------ the portraits data path and judges
def test_default_and_smoke_scales_publish_real_portraits():
    for scale in ("smoke", "default"):
        cfg = privkit.config.load("synthesisnet", scale)
        assert cfg.face_set == "portraits-views"
        assert cfg.n_train_identities + cfg.n_test_identities <= 609
        assert cfg.render_size >= 64  # portraits-views renders at 64 .. 224 px


@pytest.mark.slow
def test_portraits_views_data_path():
    """The notebook's data path: portraits-views -> aligned crops -> identity-disjoint split."""
    from privkit.data import load_faces
    from privkit.errors import MissingResourceError
    from privkit.synthesisnet import aligned_faces

    try:
        faces = load_faces("portraits-views", n_identities=6, images_per_identity=2, size=64, seed=0)
    except MissingResourceError as exc:
        pytest.skip(f"portraits-views unavailable: {exc}")
    crops = aligned_faces(faces, size=32, margin=0.1)
    assert crops.images.shape == (12, 3, 32, 32) and crops.name == "portraits-views"
    assert float(crops.images.min()) >= 0.0 and float(crops.images.max()) <= 1.0
    assert torch.equal(crops.identity, faces.identity)
    # the face fills the aligned crop far more than the view
    assert float(crops.face_coverage_ratio().mean()) > float(faces.face_coverage_ratio().mean())
    tr, te = X.split_identities(crops, n_train=4, n_test=2, seed=0)
    assert not set(tr.identity.tolist()) & set(te.identity.tolist())
    assert len(tr) == 8 and len(te) == 4
    assert {"lighting", "occluded", "flipped"} <= set(te.attributes)


def test_judge_release_reports_tar_interval():
    g = torch.Generator().manual_seed(0)
    ids = torch.arange(20)
    eo = torch.randn(20, 8, generator=g, dtype=torch.float64)
    row = X.judge_release(eo, eo + 0.1 * torch.randn(20, 8, generator=g, dtype=torch.float64), ids, far=0.01,
                          n_bootstrap=20)
    assert row["tar_low"] <= row["tar"] <= row["tar_high"]
    assert row["rank1_low"] <= row["rank1"] <= row["rank1_high"] and row["rank1_chance"] == pytest.approx(0.05)
    assert row["tar"] > 0.5 and row["rank1"] > 0.5  # small noise: the sources are found


def test_gender_age_agreement():
    male_o = torch.tensor([0.9, 0.8, 0.2, 0.1], dtype=torch.float64)
    age_o = torch.tensor([20.0, 30.0, 40.0, 50.0], dtype=torch.float64)
    same = X.gender_age_agreement({"male_probability": male_o, "age": age_o},
                                  {"male_probability": male_o, "age": age_o}, n_bootstrap=50)
    assert same["gender_agreement"] == 1.0 and same["age_mae"] == 0.0
    assert same["gender_chance"] == pytest.approx(0.5)  # half male on both sides
    assert same["age_mae_shuffled"] == pytest.approx(((10 + 20 + 30) * 2 + (10 + 20 + 10) * 2) / 12)
    flipped = X.gender_age_agreement({"male_probability": male_o, "age": age_o},
                                     {"male_probability": 1 - male_o, "age": age_o + 5}, n_bootstrap=50)
    assert flipped["gender_agreement"] == 0.0 and flipped["age_mae"] == pytest.approx(5.0)
    assert flipped["age_mae_low"] == pytest.approx(5.0) and flipped["age_mae_high"] == pytest.approx(5.0)
    assert flipped["gender_agreement_low"] == 0.0 < flipped["gender_agreement_high"]
    with pytest.raises(InvalidArgumentError, match="age"):
        X.gender_age_agreement({"male_probability": male_o}, {"male_probability": male_o, "age": age_o})
    with pytest.raises(ShapeError):
        X.gender_age_agreement({"male_probability": male_o, "age": age_o},
                               {"male_probability": male_o[:3], "age": age_o[:3]})
    with pytest.raises(InsufficientDataError):
        X.gender_age_agreement({"male_probability": male_o[:1], "age": age_o[:1]},
                               {"male_probability": male_o[:1], "age": age_o[:1]})


def test_judge_helpers_reject_wrong_models():
    x = torch.rand(2, 3, SIZE, SIZE)
    with pytest.raises(InvalidArgumentError, match="FaceresAttributes"):
        X.faceres_outputs(object(), x)
    with pytest.raises(InvalidArgumentError, match="EfficientNetLite0Encoder"):
        X.efficientnet_outputs(object(), x)


@pytest.mark.slow
def test_faceres_outputs_match_the_encoder_and_heads():
    from privkit.encoders.human_faces import load_faceres_attributes
    from privkit.errors import MissingResourceError

    try:
        fa = load_faceres_attributes()
    except MissingResourceError as exc:
        pytest.skip(f"faceres unavailable: {exc}")
    x = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    box = torch.tensor([[4.0, 4.0, 28.0, 28.0]]).repeat(3, 1)
    out = X.faceres_outputs(fa, x, box, batch_size=2)
    assert out["embedding"].shape == (3, 1024) and out["embedding"].dtype == torch.float64
    with torch.no_grad():
        ref = fa.encoder.features(x, box)
        heads = fa(x, box)
    assert torch.allclose(out["embedding"], ref.double(), rtol=1e-4, atol=1e-4)
    assert torch.allclose(out["male_probability"], heads["male_probability"].double(), atol=1e-5)
    assert torch.allclose(out["age"], heads["age"].double(), atol=1e-3)


def test_efficientnet_outputs_features_and_probabilities():
    from privkit.encoders.efficientnet_lite import load_efficientnet_lite0
    from privkit.errors import MissingResourceError

    try:
        enc = load_efficientnet_lite0()
    except MissingResourceError as exc:
        pytest.skip(f"efficientnet-lite0 unavailable: {exc}")
    x = torch.rand(3, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    f, p = X.efficientnet_outputs(enc, x, size=64, batch_size=2)
    assert f.shape == (3, 1280) and p.shape == (3, 1000) and f.dtype == p.dtype == torch.float64
    assert torch.allclose(p.sum(dim=1), torch.ones(3, dtype=torch.float64), atol=1e-9)
    up = torch.nn.functional.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False).clamp(0, 1)
    with torch.no_grad():
        ref = enc.pooled_features(up, resize=False)
    assert torch.allclose(f, ref.double(), rtol=1e-4, atol=1e-4)  # un-normalised: not unit norm
    assert not torch.allclose(f.norm(dim=1), torch.ones(3, dtype=torch.float64))
    with pytest.raises(InvalidArgumentError):
        X.efficientnet_outputs(enc, x, size=8)


def test_paired_distance_change_resolves_a_small_shift():
    g = torch.Generator().manual_seed(0)
    ids = torch.arange(30).repeat_interleave(2)
    eo = torch.randn(60, 16, generator=g, dtype=torch.float64)
    spread = torch.rand(60, 1, generator=g, dtype=torch.float64) * 2  # faces differ a lot ...
    noise = torch.randn(60, 16, generator=g, dtype=torch.float64)
    far_a = eo + (spread + 0.3) * noise  # ... but release a is always a bit further from the source than b
    near_b = eo + spread * noise
    r = X.paired_distance_change(eo, far_a, near_b, ids, n_bootstrap=200)
    assert r["change_low"] > 0 and r["mean_change"] > 0 and r["n"] == 60 and r["n_identities"] == 30
    same = X.paired_distance_change(eo, near_b, near_b, ids, n_bootstrap=50)
    assert same["mean_change"] == 0.0 and same["change_low"] == 0.0 == same["change_high"]
    with pytest.raises(ShapeError):
        X.paired_distance_change(eo, far_a[:5], near_b, ids)
    with pytest.raises(InsufficientDataError):
        X.paired_distance_change(eo, far_a, near_b, torch.zeros(60, dtype=torch.long))
