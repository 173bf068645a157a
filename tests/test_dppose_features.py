"""Frozen fine-tuning on a real backbone: the EfficientNet-Lite0 pose network and the frozen-feature cache."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from privkit.data.types import PoseSet
from privkit.dppose import (
    DPSpec,
    GaussianBlur,
    PublicSpec,
    Schedule,
    build_pose_model,
    full_finetuning_state,
    evaluate_pckh,
    per_sample_grads,
    train,
)
from privkit.dppose.features import CachedFeatures, cache_features
from privkit.dppose.grads import check_per_record_model
from privkit.dppose.train import _FromFeatures, pose_batch, pose_loss, private_clipped_sum
from privkit.errors import InvalidArgumentError, ShapeError

from test_dppose_experiments import SIZE, poses  # random keypoints drawn as dots, 32 px


@pytest.fixture(scope="module")
def model():
    return build_pose_model(SIZE, backbone="efficientnet_lite0", neck_width=8, seed=0)


@pytest.fixture(scope="module")
def data():
    return poses(24, seed=1), poses(12, seed=2, id_offset=1000), poses(8, seed=3, id_offset=2000)


def _close_states(a: dict, b: dict, *, atol: float = 1e-5) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=atol, rtol=1e-4), k


# ----------------------------------------------------------------------------------------------- the network
@pytest.mark.slow
def test_pyramid_is_the_encoders_stride_8_and_16_maps(model):
    from privkit.encoders.efficientnet_lite import load_efficientnet_lite0

    x = torch.rand(3, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0))
    enc = load_efficientnet_lite0(device="cpu")
    f = enc.backbone_features(x)
    ref = torch.cat([f[8], F.interpolate(f[16], size=f[8].shape[-2:], mode="bilinear", align_corners=False)], 1)
    assert model.feature_shape == (152, SIZE // 8, SIZE // 8)
    # same maps up to float rounding (the pyramid runs channels-last, the encoder does not)
    assert torch.allclose(model.features(x), ref, rtol=1e-4, atol=1e-4)


def test_frozen_part_has_no_trainable_parameter_and_keeps_batchnorm_in_eval(model):
    net = copy.deepcopy(model).train()
    assert not any(p.requires_grad for p in net.frozen.parameters())
    assert all(not m.training for m in net.frozen.modules() if isinstance(m, torch.nn.BatchNorm2d))
    check_per_record_model(net)  # no train-mode BatchNorm anywhere
    trainable = {n for n, p in net.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("backbone.", "head.")) for n in trainable)
    full = build_pose_model(SIZE, backbone="efficientnet_lite0", neck_width=8, seed=0, freeze_backbone=False).train()
    assert full.frozen is None and sum(p.numel() for p in full.parameters() if p.requires_grad) > 600_000
    check_per_record_model(full)


@pytest.mark.slow
def test_full_finetuning_starts_from_a_frozen_regime_warm_start(model, data):
    """The renamed frozen-regime state loads strictly into the unfrozen network, which computes the same function."""
    frozen = copy.deepcopy(model).eval()
    with torch.no_grad():  # a non-trivial neck and head (not the seeded initialisation the full network also has)
        for p in frozen.head.parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(5)))
    full = build_pose_model(SIZE, backbone="efficientnet_lite0", neck_width=8, seed=3, freeze_backbone=False)
    state = full_finetuning_state(frozen.state_dict())
    assert set(state) == set(full.state_dict())
    full.load_state_dict(state, strict=True)
    full.eval()
    x = data[0].images[:4]
    with torch.no_grad():
        a, b = frozen(x), full(x)
    assert torch.allclose(a[0], b[0], atol=1e-5, rtol=1e-5) and torch.allclose(a[1], b[1], atol=1e-5, rtol=1e-5)
    # and a private run of the full network takes it as its warm start
    r = train(full, data[0], method="nonprivate", schedule=Schedule(epochs=1, batch_size=8), seed=0,
              warm_start=state)
    assert r.steps >= 1
    with pytest.raises(InvalidArgumentError, match="frozen_state"):
        full_finetuning_state(full.state_dict())  # already the full network's form: no frozen.* entry
    with pytest.raises(InvalidArgumentError, match="already in the full network's form"):
        full_finetuning_state({**frozen.state_dict(), "backbone.0.x": torch.zeros(1)})


def test_forward_on_cached_features_equals_forward_on_images(model, data):
    x = data[0].images[:5]
    a = model(x)
    b = model.forward_features(model.features(x))
    # the same operations; tolerances, because a kernel may round a gradient-tracking pass differently
    assert torch.allclose(a[0], b[0], atol=1e-5, rtol=1e-5) and torch.allclose(a[1], b[1], atol=1e-5, rtol=1e-5)
    with torch.no_grad():
        model.eval()
        c = model(x)
        model.train()
    assert torch.allclose(c[0], b[0], atol=1e-5, rtol=1e-5)


# ----------------------------------------------------------------------------------------------- the cache
def test_cached_clipped_sum_equals_recomputing_the_frozen_part(model, data):
    private = data[0]
    cached = cache_features(model, private, batch_size=7)
    net = copy.deepcopy(model).train()
    idx = torch.tensor([0, 3, 4, 9, 17])
    on_images = private_clipped_sum(net, pose_batch(net, private, idx), method="dpsgd", clip=0.05)
    on_features = private_clipped_sum(_FromFeatures(net), pose_batch(net, cached, idx), method="dpsgd", clip=0.05)
    assert torch.allclose(on_images.norms, on_features.norms, rtol=1e-5)
    assert torch.allclose(on_images.flat(), on_features.flat(), atol=1e-7, rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["dpsgd", "feature_projective", "nonprivate"])
def test_training_on_cached_features_equals_training_on_images(model, data, method):
    private, public, test = data
    psi = GaussianBlur.for_size(SIZE)
    cached = cache_features(model, private)
    # SGD, not AdamW: its update is proportional to the gradient, so a last-bit difference between kernels stays
    # a last-bit difference (AdamW normalises tiny gradient coordinates to +-lr)
    kw = dict(method=method, schedule=Schedule(epochs=1, batch_size=8, lr=1e-2, optimizer="sgd"), seed=3)
    if method != "nonprivate":
        kw.update(dp=DPSpec(epsilon=2.0, delta=1e-5, clip=0.1))
    img_kw, feat_kw = dict(kw), dict(kw)
    if method == "feature_projective":
        img_kw.update(public=PublicSpec(public_set=public, k=4, n_public=8, refresh=2, blur=psi))
        feat_kw.update(public=PublicSpec(public_set=cache_features(model, public), k=4, n_public=8, refresh=2,
                                         blur=psi, blurred_set=cache_features(model, private, transform=psi)))
    a = train(model, private, **img_kw)
    b = train(model, cached, **feat_kw)
    assert b.config["cached_features"] and not a.config["cached_features"]
    assert a.guarantee.epsilon == b.guarantee.epsilon and a.steps == b.steps
    assert not torch.allclose(a.model.head.fc_x.weight, model.head.fc_x.weight)  # the runs did train
    _close_states(a.model.state_dict(), b.model.state_dict())
    # evaluation on images and on their cached features: the same predictions up to arg-max ties
    pred_img = b.model.predict(test.images)
    pred_feat = b.model.predict(cache_features(model, test).images, features=True)
    assert (pred_img == pred_feat).float().mean() >= 0.95
    assert 0.0 <= evaluate_pckh(b.model, cache_features(model, test)).mean <= 100.0


def test_cache_on_disk_is_memory_mapped_and_identical(model, data, tmp_path):
    private = data[0]
    mem = cache_features(model, private, batch_size=5)
    disk = cache_features(model, private, batch_size=5, path=tmp_path / "feat.npy")
    assert torch.equal(mem.images, disk.images)
    assert isinstance(np.load(tmp_path / "feat.npy", mmap_mode="r"), np.memmap)
    assert not list(tmp_path.glob(".*tmp"))  # no temporary file left behind
    assert disk.input_size == (SIZE, SIZE) and torch.equal(disk.keypoints, private.keypoints)
    sub = disk.subset(torch.tensor([1, 2]))
    assert isinstance(sub, CachedFeatures) and sub.input_size == (SIZE, SIZE) and len(sub) == 2
    with pytest.raises(InvalidArgumentError, match="path"):
        cache_features(model, private, path=tmp_path / "feat.pt")


# ----------------------------------------------------------------------------------------------- bad input
def test_bad_inputs_are_refused_with_clear_errors(model, data):
    private, public, _ = data
    cached = cache_features(model, private)
    convnet = build_pose_model(SIZE, seed=0)
    with pytest.raises(InvalidArgumentError, match="frozen part"):
        cache_features(convnet, private)
    with pytest.raises(InvalidArgumentError, match="PoseSet of images"):
        cache_features(model, cached)
    with pytest.raises(ShapeError):
        cache_features(model, PoseSet(images=torch.rand(2, 3, 64, 64), keypoints=torch.zeros(2, 16, 2),
                                      visible=torch.ones(2, 16, dtype=bool), head_box=torch.zeros(2, 4),
                                      identity=torch.arange(2)))
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        cache_features(model, private, batch_size=0)
    dp = dict(dp=DPSpec(epsilon=1.0, delta=1e-5, clip=0.1), schedule=Schedule(batch_size=8))
    with pytest.raises(InvalidArgumentError, match="blurred_set"):
        train(model, cached, method="feature", **dp)
    with pytest.raises(InvalidArgumentError, match="public_set must be CachedFeatures"):
        train(model, cached, method="projected", public=PublicSpec(public_set=public, k=2), **dp)
    with pytest.raises(InvalidArgumentError, match="row for row"):
        train(model, cached, method="feature", public=PublicSpec(blurred_set=cached.subset(torch.arange(5))), **dp)
    with pytest.raises(InvalidArgumentError, match="both be images or both"):
        train(model, cached, method="feature", public=PublicSpec(blurred_set=private), **dp)
    # the blurred view enters the update un-noised, so it must really be psi(x): not the raw features, not
    # another blur
    psi = GaussianBlur.for_size(SIZE)
    with pytest.raises(InvalidArgumentError, match="cached features of psi"):
        train(model, cached, method="feature", public=PublicSpec(blurred_set=cached), **dp)
    other_blur = cache_features(model, private, transform=GaussianBlur(kernel_size=3, sigma=0.5))
    with pytest.raises(InvalidArgumentError, match="cached features of psi"):
        train(model, cached, method="feature", public=PublicSpec(blurred_set=other_blur), **dp)
    with pytest.raises(InvalidArgumentError, match="differ from psi"):
        train(model, private, method="feature", public=PublicSpec(blurred_set=private), **dp)
    blurred_images = PoseSet(images=psi(private.images), keypoints=private.keypoints, visible=private.visible,
                             head_box=private.head_box, identity=private.identity)
    ok = train(model, private, method="feature", public=PublicSpec(blurred_set=blurred_images), **dp)
    assert ok.steps >= 1
    with pytest.raises(InvalidArgumentError, match="no frozen part"):
        train(convnet, cached, method="dpsgd", **dp)
    with pytest.raises(InvalidArgumentError, match="pass the model"):
        train(None, cached, method="dpsgd", **dp)
    other = build_pose_model(64, backbone="efficientnet_lite0", neck_width=8, seed=0)
    with pytest.raises(ShapeError, match="features of shape"):
        train(other, cached, method="dpsgd", **dp)
    with pytest.raises(InvalidArgumentError, match="frozen part"):
        convnet.predict(cached.images, features=True)
    with pytest.raises(ShapeError):
        model.predict(private.images, features=True)
    with pytest.raises(InvalidArgumentError, match="freeze_backbone"):
        build_pose_model(SIZE, backbone="efficientnet_lite0", freeze_backbone="yes")
    with pytest.raises(InvalidArgumentError, match="weights"):
        build_pose_model(SIZE, backbone="efficientnet_lite0", weights="random")
    with pytest.raises(InvalidArgumentError, match="multiples of 16"):
        build_pose_model(40, backbone="efficientnet_lite0")


# ------------------------------------------------------------------------ per-sample gradients of subclassed layers
def test_hooks_never_handle_a_conv_subclass_that_pads_in_forward(data):
    """timm's Conv2dSame pads its input in forward: the layer hooks would differentiate an unpadded conv.

    Full fine-tuning of EfficientNet-Lite0 must therefore fall back to torch.func (exact per-sample gradients),
    and asking for hooks must fail loudly instead of returning wrong gradients (wrong clipping = no privacy).
    """
    full = build_pose_model(SIZE, backbone="efficientnet_lite0", neck_width=8, seed=0, freeze_backbone=False).train()
    private = data[0]
    batch = pose_batch(full, private, torch.arange(3))
    with pytest.raises(InvalidArgumentError, match="hooks"):
        per_sample_grads(full, pose_loss, batch, method="hooks")
    got = per_sample_grads(full, pose_loss, batch, method="auto")
    names = [n for n, p in full.named_parameters() if p.requires_grad]
    for i in range(3):
        full.zero_grad()
        one = tuple(t[i:i + 1] for t in batch)
        pose_loss(full(one[0]), *one[1:]).backward()
        for n in names:
            p = dict(full.named_parameters())[n]
            assert torch.allclose(got[n][i], p.grad, atol=1e-6, rtol=1e-4), n


# ------------------------------------------------------------------------------------------------ no-noise control
@pytest.mark.slow
def test_no_noise_control_is_labelled_not_private(model, data):
    private, public, _ = data
    cached = cache_features(model, private)
    r = train(model, cached, method="dpsgd", dp=DPSpec(noise_multiplier=0.0, delta=1e-5, clip=0.1),
              schedule=Schedule(batch_size=8), seed=1)
    assert r.noise_multiplier == 0.0 and r.guarantee.epsilon == float("inf") and r.guarantee.delta == 1.0
    assert "nothing" in r.guarantee.protects and "no noise" in r.guarantee.mechanism
    assert type(r.guarantee.event).__name__ == "NonPrivateDpEvent"
    assert r.guarantee.neighbours.relation == "add-remove-one"
    assert all(h["eps_so_far"] == float("inf") for h in r.history)
    # without noise the run does not depend on the noise stream: two secure=False runs with the same sampling
    # seed agree exactly, and differ from a noisy run
    again = train(model, cached, method="dpsgd", dp=DPSpec(noise_multiplier=0.0, delta=1e-5, clip=0.1),
                  schedule=Schedule(batch_size=8), seed=1)
    assert all(torch.equal(a, b) for a, b in zip(r.model.state_dict().values(), again.model.state_dict().values()))
    noisy = train(model, cached, method="dpsgd", dp=DPSpec(noise_multiplier=1.0, delta=1e-5, clip=0.1),
                  schedule=Schedule(batch_size=8), seed=1)
    assert not torch.equal(noisy.model.head.fc_x.weight, r.model.head.fc_x.weight)
    with pytest.raises(InvalidArgumentError, match="not private"):
        train(model, cached, method="dpsgd", dp=DPSpec(epsilon=1.0, noise_multiplier=0.0, delta=1e-5, clip=0.1),
              schedule=Schedule(batch_size=8))
    with pytest.raises(InvalidArgumentError):
        train(model, cached, method="dpsgd", dp=DPSpec(noise_multiplier=-1.0, delta=1e-5, clip=0.1),
              schedule=Schedule(batch_size=8))


def test_a_public_feature_row_identical_to_a_private_one_is_refused(model, data):
    private, public, _ = data
    cached, pub = cache_features(model, private), cache_features(model, public)
    pub.images[3] = cached.images[7]  # other identities, but one record is a private record's copy
    with pytest.raises(InvalidArgumentError, match="identical images"):
        train(model, cached, method="projected", dp=DPSpec(epsilon=1.0, delta=1e-5, clip=0.1),
              public=PublicSpec(public_set=pub, k=2), schedule=Schedule(batch_size=8))
