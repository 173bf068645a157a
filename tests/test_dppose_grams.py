"""Cached patch Grams of the first trainable layer: exact per-sample norms and clipped sums without per-sample grads."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from privkit.dppose import DPSpec, Schedule, build_pose_model, cache_features, cache_input_grams, patch_gram, train
from privkit.dppose.features import first_trainable_layer
from privkit.dppose.grads import clipped_grad_sum, per_sample_grads, per_sample_norms
from privkit.dppose.train import _FromFeatures, pose_batch, pose_loss
from privkit.errors import InvalidArgumentError, ShapeError

from test_dppose_experiments import SIZE, poses  # random keypoints drawn as dots, 32 px


class _Net(nn.Module):
    """conv (the layer with Grams) -> GroupNorm -> ReLU -> conv -> linear: a small stand-in for the neck and head."""

    def __init__(self, cin: int = 5, *, stride: int = 1, padding: int = 1, dilation: int = 1, bias: bool = True):
        super().__init__()
        self.first = nn.Conv2d(cin, 6, 3, stride=stride, padding=padding, dilation=dilation, bias=bias)
        self.norm = nn.GroupNorm(2, 6)
        self.second = nn.Conv2d(6, 4, 3, padding=1)
        self.fc = nn.LazyLinear(3)

    def forward(self, x):
        z = self.second(F.relu(self.norm(self.first(x))))
        return self.fc(z.flatten(1))


def _mse(out, y):
    return ((out - y) ** 2).sum(1).mean()


def _setup(seed: int = 0, **kw):
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = _Net(**kw)
    x = torch.randn(9, 5, 10, 10, generator=g)  # signed features, as EfficientNet's linear bottlenecks give
    net(x[:1])  # materialise the lazy layer
    y = torch.randn(9, 3, generator=g)
    return net, x, y


# ----------------------------------------------------------------------------------------------- patch_gram
@pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(padding=0), dict(dilation=2, padding=2)])
def test_patch_gram_is_the_gram_of_the_unfolded_patches_and_exactly_symmetric(kw):
    net, x, _ = _setup(**kw)
    gram = patch_gram(net.first, x)
    u = F.unfold(x.double(), 3, dilation=net.first.dilation, padding=net.first.padding, stride=net.first.stride)
    ref = u.transpose(1, 2) @ u
    assert gram.shape == ref.shape and gram.dtype == x.dtype
    assert torch.allclose(gram.double(), ref, rtol=1e-5, atol=1e-4)
    assert torch.equal(gram, gram.transpose(1, 2))  # by construction, whatever the kernel's rounding


def test_patch_gram_refuses_other_layers_and_shapes():
    net, x, _ = _setup()
    with pytest.raises(InvalidArgumentError, match="plain nn.Conv2d"):
        patch_gram(net.fc, x)
    with pytest.raises(InvalidArgumentError, match="plain nn.Conv2d"):
        patch_gram(nn.Conv2d(5, 6, 3, groups=1, padding="same"), x)
    with pytest.raises(ShapeError, match=r"\(B, 5, H, W\)"):
        patch_gram(net.first, x[:, :4])


# ----------------------------------------------------------------------------------------------- the clipped sum
@pytest.mark.parametrize("kw", [dict(), dict(stride=2), dict(padding=0, bias=False), dict(dilation=2, padding=2)])
def test_clipped_sum_with_grams_equals_the_materialised_one(kw):
    net, x, y = _setup(**kw)
    norms = per_sample_norms(per_sample_grads(net, _mse, (x, y), method="vmap"))
    clip = float(norms.median())  # about half the records are clipped
    ref = clipped_grad_sum(net, _mse, (x, y), clip=clip, method="hooks")
    got = clipped_grad_sum(net, _mse, (x, y), clip=clip, method="hooks",
                           input_grams={net.first: patch_gram(net.first, x)})
    assert torch.allclose(got.norms, norms, rtol=1e-5)
    assert torch.allclose(got.norms, ref.norms, rtol=1e-5)
    assert got.grads.keys() == ref.grads.keys()
    for name in ref.grads:
        assert torch.allclose(got.grads[name], ref.grads[name], rtol=1e-5, atol=1e-6), name
    # the sensitivity bound: one record's clipped contribution has norm <= C (up to float rounding)
    one = clipped_grad_sum(net, _mse, (x[:1], y[:1]), clip=clip, input_grams={net.first: patch_gram(net.first, x[:1])})
    assert not one.flat().requires_grad and float(one.flat().norm()) <= clip * (1 + 1e-5)


def test_grams_keep_a_non_finite_record_out_of_the_sum():
    net, x, y = _setup()
    y = y.clone()
    y[4] = float("nan")
    ref = clipped_grad_sum(net, _mse, (x, y), clip=0.5, method="hooks")
    got = clipped_grad_sum(net, _mse, (x, y), clip=0.5, input_grams={net.first: patch_gram(net.first, x)})
    assert got.non_finite == ref.non_finite == 1
    assert torch.allclose(got.flat(), ref.flat(), rtol=1e-5, atol=1e-6)


def test_grams_of_other_rows_or_shapes_are_refused():
    net, x, y = _setup()
    gram = patch_gram(net.first, x)
    with pytest.raises(InvalidArgumentError, match="do not match the layer's input"):
        clipped_grad_sum(net, _mse, (x, y), clip=1.0, input_grams={net.first: gram.roll(1, 0)})
    with pytest.raises(InvalidArgumentError, match="do not match the layer's input"):
        clipped_grad_sum(net, _mse, (x, y), clip=1.0, input_grams={net.first: patch_gram(net.first, x * 1.01)})
    with pytest.raises(ShapeError, match=r"\(9, T, T\)"):
        clipped_grad_sum(net, _mse, (x, y), clip=1.0, input_grams={net.first: gram[:5]})
    with pytest.raises(ShapeError, match=r"\(9, 100, 100\)"):
        clipped_grad_sum(net, _mse, (x, y), clip=1.0, input_grams={net.first: gram[:, :64, :64]})
    with pytest.raises(InvalidArgumentError, match="not method='vmap'"):
        clipped_grad_sum(net, _mse, (x, y), clip=1.0, method="vmap", input_grams={net.first: gram})
    with pytest.raises(InvalidArgumentError, match="not a layer of model"):
        clipped_grad_sum(net, _mse, (x, y), clip=1.0, input_grams={nn.Conv2d(5, 6, 3, padding=1): gram})
    with pytest.raises(InvalidArgumentError, match="plain nn.Conv2d"):
        clipped_grad_sum(net, _mse, (x, y), clip=1.0, input_grams={net.fc: gram})
    with pytest.raises(InvalidArgumentError, match="mapping"):
        clipped_grad_sum(net, _mse, (x, y), clip=1.0, input_grams=[gram])
    frozen = copy.deepcopy(net)
    frozen.first.weight.requires_grad_(False)
    with pytest.raises(InvalidArgumentError, match="trainable weight"):
        clipped_grad_sum(frozen, _mse, (x, y), clip=1.0, input_grams={frozen.first: gram})


# ----------------------------------------------------------------------------------------------- cache and trainer
@pytest.fixture(scope="module")
def model():
    return build_pose_model(SIZE, backbone="efficientnet_lite0", neck_width=8, seed=0)


@pytest.fixture(scope="module")
def private(model):
    return cache_features(model, poses(24, seed=1))


def test_cache_input_grams_attaches_one_gram_per_record(model, private):
    name, layer = first_trainable_layer(model)
    assert name == "backbone.body.0" and layer is model.backbone.body[0]
    with_grams = cache_input_grams(model, private, batch_size=5)
    t = (SIZE // 8) ** 2
    assert with_grams.grams.shape == (24, t, t) and with_grams.grams_for == name
    assert with_grams.images is private.images and private.grams is None
    assert torch.allclose(with_grams.grams, patch_gram(layer, private.images), rtol=1e-5, atol=1e-5)
    sub = with_grams.subset(torch.tensor([3, 1]))
    assert torch.equal(sub.grams, with_grams.grams[[3, 1]]) and sub.grams_for == name
    # the trainable part's clipped sum with the cached Grams equals the one without
    net = copy.deepcopy(model).train()
    idx = torch.tensor([0, 2, 5, 7, 11, 19])
    batch = pose_batch(net, private, idx)
    ref = clipped_grad_sum(_FromFeatures(net), pose_loss, batch, clip=0.05)
    got = clipped_grad_sum(_FromFeatures(net), pose_loss, batch, clip=0.05,
                           input_grams={net.get_submodule(name): with_grams.grams[idx]})
    assert torch.allclose(got.norms, ref.norms, rtol=1e-5)
    assert torch.allclose(got.flat(), ref.flat(), rtol=1e-5, atol=1e-7)


def test_cache_input_grams_refuses_what_it_cannot_do(model, private):
    with pytest.raises(InvalidArgumentError, match="max_gib"):
        cache_input_grams(model, private, max_gib=1e-6)
    with pytest.raises(InvalidArgumentError, match="CachedFeatures"):
        cache_input_grams(model, poses(4, seed=1))
    with pytest.raises(InvalidArgumentError, match="frozen part"):
        cache_input_grams(build_pose_model(SIZE, width=8, seed=0), private)
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        cache_input_grams(model, private, batch_size=0)


@pytest.mark.slow
def test_training_with_grams_equals_training_without(model, private):
    with_grams = cache_input_grams(model, private)
    # SGD, not AdamW: a last-bit difference in the gradient stays a last-bit difference in the update
    kw = dict(method="dpsgd", schedule=Schedule(epochs=2, batch_size=8, lr=1e-2, optimizer="sgd"), seed=3,
              dp=DPSpec(epsilon=2.0, delta=1e-5, clip=0.05))
    a = train(model, private, **kw)
    b = train(model, with_grams, **kw)
    assert b.config["input_grams"] and not a.config["input_grams"]
    assert a.guarantee.epsilon == b.guarantee.epsilon and a.steps == b.steps
    assert not torch.allclose(b.model.head.fc_x.weight, model.head.fc_x.weight)  # the run did train
    for k, v in a.model.state_dict().items():
        assert torch.allclose(v, b.model.state_dict()[k], rtol=1e-4, atol=1e-6), k
    # vmap per-sample gradients do not use them; a non-private run ignores them
    c = train(model, with_grams, **{**kw, "dp": DPSpec(epsilon=2.0, delta=1e-5, clip=0.05, per_sample_method="vmap")})
    assert not c.config["input_grams"]
    assert not train(model, with_grams, method="nonprivate", schedule=kw["schedule"], seed=3).config["input_grams"]
    # Grams said to be for another layer are refused before training
    wrong = copy.copy(with_grams)
    wrong.grams_for = "backbone.body.3"
    with pytest.raises(InvalidArgumentError, match="receives the features"):
        train(model, wrong, **kw)
    wrong.grams_for = "no.such.layer"
    with pytest.raises(InvalidArgumentError, match="not a layer of the model"):
        train(model, wrong, **kw)


@pytest.mark.slow
def test_step_cost_times_both_steps_with_the_grams_attached(model, private):
    from privkit.studies.dppose.experiments import step_cost

    def make(s):
        return build_pose_model(SIZE, backbone="efficientnet_lite0", neck_width=8, seed=s)

    cost = step_cost(make, private, batch_size=8, clip=0.1, delta=1e-5, lr=1e-3, rounds=2, steps=1)
    assert cost["grams"] and cost["rounds"] == 2 and cost["steps"] == 1 and cost["batch_size"] == 8
    assert cost["nonprivate_s"] > 0 and cost["dpsgd_s"] > 0
    assert cost["ratio"] == pytest.approx(cost["dpsgd_s"] / cost["nonprivate_s"])
    assert private.grams is None  # the caller's set is left as it was
    images = step_cost(make, poses(24, seed=1), batch_size=8, clip=0.1, delta=1e-5, lr=1e-3, rounds=1, steps=1)
    assert not images["grams"]
    with pytest.raises(InvalidArgumentError, match="rounds"):
        step_cost(make, private, batch_size=8, clip=0.1, delta=1e-5, lr=1e-3, rounds=0)
