"""Tests of the ssl-small encoder, its committed weights and its training tool (``tools/train_ssl_small.py``)."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import sys
from pathlib import Path

import pytest
import torch

from privkit.encoders.base import Encoder
from privkit.encoders.ssl_small import (
    SSL_SMALL_METADATA,
    SSL_SMALL_WEIGHTS,
    SSLSmallConfig,
    build_ssl_small_net,
    load_ssl_small,
    random_ssl_small,
    sha256_file,
    standardize_images,
)
from privkit.errors import InvalidArgumentError, MissingResourceError, ShapeError, UnknownNameError


def _load_training_tool():
    """The training tool lives outside the library, in ``tools/train_ssl_small.py``: import it from its file."""
    path = Path(__file__).resolve().parent.parent / "tools" / "train_ssl_small.py"
    spec = importlib.util.spec_from_file_location("train_ssl_small", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file executes
    spec.loader.exec_module(module)
    return module


_tool = _load_training_tool()
PROBE_TEXTURES = _tool.PROBE_TEXTURES
TRAIN_PHOTOS = _tool.TRAIN_PHOTOS
SSLAugmentConfig = _tool.SSLAugmentConfig
SSLData = _tool.SSLData
color_jitter = _tool.color_jitter
crop_views = _tool.crop_views
digits_split = _tool.digits_split
gaussian_blur = _tool.gaussian_blur
knn_accuracy = _tool.knn_accuracy
load_photo = _tool.load_photo
load_ssl_data = _tool.load_ssl_data
main = _tool.main
make_views = _tool.make_views
nt_xent_loss = _tool.nt_xent_loss
random_grayscale = _tool.random_grayscale
random_resized_boxes = _tool.random_resized_boxes
render_digits = _tool.render_digits
train_ssl_small = _tool.train_ssl_small
_digits_arrays = _tool._digits_arrays
_random_colors = _tool._random_colors
_texture_probe_images = _tool._texture_probe_images


# Small training run used by the determinism / loss test.
TRAIN_STEPS = 6
TRAIN_BATCH = 24
# The NT-Xent loss on a fixed held-out batch must drop by at least this much after TRAIN_STEPS steps.
LOSS_DROP = 0.3
# Required k-NN accuracy gains of the committed weights over random initialisation (measured with the committed
# weights: coloured digits 0.89 vs 0.49, textures 0.87 vs 0.49; over other probe seeds the texture gain ranged
# 0.12-0.30 and the coloured-digit gain about 0.30).
DIGITS_MARGIN = 0.15
TEXTURE_MARGIN = 0.10


@pytest.fixture(scope="module")
def encoder():
    return load_ssl_small(device="cpu")


@pytest.fixture(scope="module")
def small_data() -> SSLData:
    """A cheap training set: three small photos, the lfw_subset images and the digits train split."""
    return load_ssl_data(photo_names=("coffee", "coins", "camera"), max_side=96)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------------------------------------------
# committed weights
# ---------------------------------------------------------------------------------------------------
def test_committed_weights_and_metadata():
    assert SSL_SMALL_WEIGHTS.is_file() and SSL_SMALL_METADATA.is_file()
    assert SSL_SMALL_WEIGHTS.stat().st_size <= 10 * 1024 * 1024
    meta = json.loads(SSL_SMALL_METADATA.read_text())
    assert meta["sha256"] == sha256_file(SSL_SMALL_WEIGHTS)
    for key in ("command", "seed", "steps", "data", "loss", "privkit_version", "architecture", "probes"):
        assert key in meta, key
    assert "python tools/train_ssl_small.py" in meta["command"]
    assert f"--steps {meta['steps']}" in meta["command"] and f"--seed {meta['seed']}" in meta["command"]
    assert meta["data"]["identity_labels_used"] is False
    assert meta["input_resolution"] == [64, 64]
    assert meta["loss"]["window_means"][-1] < meta["loss"]["window_means"][0]


def test_encoder_interface(encoder):
    assert isinstance(encoder, Encoder)
    assert encoder.name == "ssl-small" and encoder.kind == "general"
    assert encoder.dim == 256 and encoder.input_size == (64, 64)
    assert encoder.description
    assert not encoder.training
    assert not any(p.requires_grad for p in encoder.parameters())
    assert 500_000 <= sum(p.numel() for p in encoder.parameters()) <= 2_000_000


def test_embed_unit_norm_deterministic_any_size(encoder):
    x = torch.rand(5, 3, 50, 70, generator=_gen(0))
    e1 = encoder.embed(x)
    e2 = encoder.embed(x, batch_size=2)
    assert e1.shape == (5, 256) and e1.dtype == torch.float32
    torch.testing.assert_close(e1.norm(dim=1), torch.ones(5), atol=1e-5, rtol=0)
    assert torch.equal(encoder.embed(x), e1)
    torch.testing.assert_close(e1, e2, atol=1e-5, rtol=1e-4)
    # distinct images get distinct embeddings
    assert float((e1 @ e1.T).fill_diagonal_(0).max()) < 0.9999
    # 64x64 input is used as is; float64 input accepted
    e3 = encoder.embed(torch.rand(2, 3, 64, 64, generator=_gen(1), dtype=torch.float64))
    assert e3.shape == (2, 256)


def test_embed_rejects_bad_input(encoder):
    with pytest.raises(ShapeError):
        encoder.embed(torch.rand(2, 1, 64, 64))
    with pytest.raises(InvalidArgumentError):
        encoder.embed(torch.rand(2, 3, 64, 64) + 1.5)


def test_load_checks_integrity(tmp_path):
    w, m = tmp_path / "ssl_small.safetensors", tmp_path / "ssl_small.json"
    shutil.copy(SSL_SMALL_WEIGHTS, w)
    shutil.copy(SSL_SMALL_METADATA, m)
    load_ssl_small(device="cpu", weights=w)
    raw = bytearray(w.read_bytes())
    raw[-3] ^= 0xFF
    w.write_bytes(bytes(raw))
    with pytest.raises(InvalidArgumentError, match="sha256"):
        load_ssl_small(device="cpu", weights=w)
    with pytest.raises(MissingResourceError):
        load_ssl_small(device="cpu", weights=tmp_path / "absent.safetensors")
    m.unlink()
    with pytest.raises(MissingResourceError):
        load_ssl_small(device="cpu", weights=w)


# ---------------------------------------------------------------------------------------------------
# probe: the trained encoder beats random initialisation on non-identity tasks
# ---------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_trained_beats_random_init_on_knn_probes(encoder):
    """Coloured digits (held-out split) and held-out textures: the trained features are better than random ones."""
    rand = random_ssl_small(seed=0, device="cpu")
    g = _gen(3)
    ink, target = _digits_arrays()
    tr, te = digits_split()
    tr, te = tr[:200], te[:150]
    fg, bg = _random_colors(len(tr), g)
    ref = render_digits(ink[tr], ink_color=fg, paper_color=bg)
    fg, bg = _random_colors(len(te), g)
    qry = render_digits(ink[te], ink_color=fg, paper_color=bg)
    r, ry, q, qy = _texture_probe_images(30, g)
    acc = {}
    for name, enc in (("trained", encoder), ("random", rand)):
        digits = knn_accuracy(enc.embed(ref), target[tr], enc.embed(qry), target[te], k=5)
        texture = knn_accuracy(enc.embed(r), ry, enc.embed(q), qy, k=5)
        acc[name] = (digits, texture)
    assert acc["trained"][0] > acc["random"][0] + DIGITS_MARGIN, acc
    assert acc["trained"][1] > acc["random"][1] + TEXTURE_MARGIN, acc


# ---------------------------------------------------------------------------------------------------
# data and augmentations
# ---------------------------------------------------------------------------------------------------
def test_photos_and_data():
    assert not set(PROBE_TEXTURES) & set(TRAIN_PHOTOS)
    p = load_photo("astronaut", max_side=100)
    assert p.shape == (3, 100, 100) and 0 <= float(p.min()) and float(p.max()) <= 1
    assert load_photo("camera", max_side=64).shape == (3, 64, 64)  # grayscale -> 3 channels
    with pytest.raises(UnknownNameError):
        load_photo("not-a-photo")
    with pytest.raises(InvalidArgumentError):
        load_ssl_data(photo_names=("brick",))
    tr, te = digits_split()
    assert len(tr) + len(te) == 1797 and not set(tr.tolist()) & set(te.tolist())
    assert torch.equal(digits_split()[1], te)


def test_views_shapes_range_determinism(small_data):
    a, b = make_views(small_data, 24, generator=_gen(0))
    assert a.shape == b.shape == (24, 3, 64, 64)
    assert a.dtype == torch.float32
    assert float(a.min()) >= 0 and float(a.max()) <= 1
    a2, b2 = make_views(small_data, 24, generator=_gen(0))
    assert torch.equal(a, a2) and torch.equal(b, b2)
    a3, _ = make_views(small_data, 24, generator=_gen(1))
    assert not torch.equal(a, a3)
    assert float((a - b).abs().mean()) > 0.01  # the two views differ
    # one source only
    for w in ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)):
        va, vb = make_views(small_data, 4, generator=_gen(2), augment=SSLAugmentConfig(source_weights=w))
        assert va.shape == vb.shape == (4, 3, 64, 64)


def test_crop_views_geometry():
    img = torch.rand(3, 64, 64, generator=_gen(0))
    full = torch.tensor([[0.0, 0.0, 1.0, 1.0]] * 2)
    out = crop_views(img, full, flip=torch.tensor([False, True]))
    torch.testing.assert_close(out[0], img, atol=1e-5, rtol=0)
    torch.testing.assert_close(out[1], img.flip(-1), atol=1e-5, rtol=0)
    # the right half at (32, 32): columns hit pixel centres exactly, rows average pairs of rows
    half = crop_views(img, torch.tensor([[0.5, 0.0, 1.0, 1.0]]), size=32)[0]
    ref = torch.nn.functional.avg_pool2d(img[None, :, :, 32:], kernel_size=(2, 1))[0]
    torch.testing.assert_close(half, ref, atol=1e-5, rtol=0)


def test_random_resized_boxes():
    boxes = random_resized_boxes(500, scale=(0.2, 0.6), ratio=(0.75, 4 / 3), generator=_gen(0))
    assert boxes.shape == (500, 4)
    assert float(boxes.min()) >= 0 and float(boxes.max()) <= 1 + 1e-6
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    area = w * h
    assert float(area.min()) >= 0.2 - 1e-5 and float(area.max()) <= 0.6 + 1e-5
    assert float((w / h).min()) >= 0.75 - 1e-4 and float((w / h).max()) <= 4 / 3 + 1e-4
    with pytest.raises(InvalidArgumentError):
        random_resized_boxes(3, scale=(0.5, 0.2), ratio=(1, 1), generator=_gen(0))


def test_photometric_augmentations():
    x = torch.rand(6, 3, 16, 16, generator=_gen(0))
    kw = dict(brightness=0.4, contrast=0.4, saturation=0.4, hue=0.1)
    assert torch.equal(color_jitter(x, p=0.0, generator=_gen(1), **kw), x)
    y = color_jitter(x, p=1.0, generator=_gen(1), **kw)
    assert y.shape == x.shape and not torch.equal(y, x) and float(y.min()) >= 0 and float(y.max()) <= 1
    # no-op strengths give the identity (up to the YIQ round trip)
    z = color_jitter(x, p=1.0, generator=_gen(1), brightness=0.0, contrast=0.0, saturation=0.0, hue=0.0)
    torch.testing.assert_close(z, x, atol=1e-5, rtol=0)
    gray = random_grayscale(x, p=1.0, generator=_gen(2))
    assert torch.equal(gray[:, 0], gray[:, 1]) and torch.equal(gray[:, 1], gray[:, 2])
    assert torch.equal(random_grayscale(x, p=0.0, generator=_gen(2)), x)
    const = torch.full((2, 3, 16, 16), 0.3)
    torch.testing.assert_close(gaussian_blur(const, sigma=(1.0, 2.0), p=1.0, generator=_gen(3)), const)
    blurred = gaussian_blur(x, sigma=(1.0, 2.0), p=1.0, generator=_gen(3))
    assert float(blurred.std()) < float(x.std())
    with pytest.raises(InvalidArgumentError):
        gaussian_blur(x, sigma=(1.0, 2.0), p=1.0, generator=_gen(3), kernel_size=4)
    with pytest.raises(InvalidArgumentError):
        SSLAugmentConfig(brightness=1.5)


def test_render_digits():
    ink, _ = _digits_arrays()
    img = render_digits(ink[:3], size=32)
    assert img.shape == (3, 3, 32, 32)
    assert float(img.min()) >= 0 and float(img.max()) <= 1
    # black ink on white paper by default: corners are paper
    torch.testing.assert_close(img[:, :, 0, 0], torch.ones(3, 3))
    red = render_digits(torch.ones(1, 1, 8, 8), size=8, ink_color=torch.tensor([1.0, 0.0, 0.0]))
    torch.testing.assert_close(red[0, :, 4, 4], torch.tensor([1.0, 0.0, 0.0]))


# ---------------------------------------------------------------------------------------------------
# objective and probe helpers
# ---------------------------------------------------------------------------------------------------
def test_nt_xent_matches_closed_form():
    b, tau = 4, 0.5
    z = torch.eye(b, 8, dtype=torch.float64)
    # positives have cosine 1, all 2b - 2 negatives cosine 0
    expected = -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + 2 * b - 2))
    assert nt_xent_loss(z, 3 * z, temperature=tau).item() == pytest.approx(expected, rel=1e-12)
    rnd_a = torch.randn(b, 8, generator=_gen(0), dtype=torch.float64)
    rnd_b = torch.randn(b, 8, generator=_gen(1), dtype=torch.float64)
    assert nt_xent_loss(rnd_a, rnd_b, temperature=tau) > nt_xent_loss(z, z, temperature=tau)
    # symmetric in the two views
    assert nt_xent_loss(rnd_a, rnd_b).item() == pytest.approx(nt_xent_loss(rnd_b, rnd_a).item(), rel=1e-12)
    with pytest.raises(InvalidArgumentError):
        nt_xent_loss(z, z, temperature=0.0)
    with pytest.raises(InvalidArgumentError):
        nt_xent_loss(z[:1], z[:1])


def test_knn_accuracy():
    ref = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
    lab = torch.tensor([0, 0, 1, 1])
    q = torch.tensor([[1.0, 0.05], [0.05, 1.0], [1.0, 0.0]])
    assert knn_accuracy(ref, lab, q, torch.tensor([0, 1, 0]), k=1) == 1.0
    assert knn_accuracy(ref, lab, q, torch.tensor([1, 1, 1]), k=1) == pytest.approx(1 / 3)
    assert knn_accuracy(ref, lab, ref, lab, k=1, exclude_self=True) == 1.0
    with pytest.raises(InvalidArgumentError):
        knn_accuracy(ref, lab, q, torch.tensor([0, 1, 0]), k=5)


# ---------------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------------
def test_build_is_seeded_and_leaves_global_rng_alone():
    state = torch.random.get_rng_state()
    a = build_ssl_small_net(seed=3).state_dict()
    b = build_ssl_small_net(seed=3).state_dict()
    c = build_ssl_small_net(seed=4).state_dict()
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["backbone.features.0.weight"], c["backbone.features.0.weight"])
    with pytest.raises(InvalidArgumentError):
        SSLSmallConfig(widths=(16, 32, 64, 128, 250))


@pytest.mark.slow
def test_training_is_deterministic_and_lowers_the_loss(small_data):
    kw = dict(seed=0, steps=TRAIN_STEPS, batch_size=TRAIN_BATCH, lr=2e-3, data=small_data)
    r1 = train_ssl_small(**kw)
    r2 = train_ssl_small(**kw)
    s1, s2 = r1.net.state_dict(), r2.net.state_dict()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert r1.losses == r2.losses and len(r1.losses) == TRAIN_STEPS
    assert all(math.isfinite(v) for v in r1.losses)
    # NT-Xent on a fixed held-out pair of view batches, before vs after training (batch statistics in BN)
    va, vb = make_views(small_data, 48, generator=_gen(123))
    x = standardize_images(torch.cat([va, vb]))

    def loss_of(net):
        net.train()
        with torch.no_grad():
            z = net(x)
        return nt_xent_loss(z[:48], z[48:]).item()

    before = loss_of(build_ssl_small_net(seed=0))
    after = loss_of(r1.net)
    assert after < before - LOSS_DROP, (before, after)


def test_train_validates_arguments(small_data):
    with pytest.raises(InvalidArgumentError):
        train_ssl_small(steps=0, data=small_data)
    with pytest.raises(InvalidArgumentError):
        train_ssl_small(steps=1, batch_size=1, data=small_data)
    with pytest.raises(InvalidArgumentError):
        train_ssl_small(steps=1, temperature=0.0, data=small_data)
    with pytest.raises(InvalidArgumentError):
        train_ssl_small(steps=1, out_path="weights.pt", data=small_data)


@pytest.mark.slow
def test_cli_writes_loadable_weights(tmp_path):
    out = tmp_path / "w.safetensors"
    threads = torch.get_num_threads()
    try:
        assert main(["--out", str(out), "--steps", "2", "--batch-size", "4", "--no-probe", "--threads", "1",
                     "--log-every", "0"]) == 0
    finally:
        torch.set_num_threads(threads)
    meta = json.loads(out.with_suffix(".json").read_text())
    assert meta["steps"] == 2 and meta["sha256"] == sha256_file(out)
    assert "--steps 2" in meta["command"] and "--batch-size 4" in meta["command"]
    enc = load_ssl_small(device="cpu", weights=out)
    e = enc.embed(torch.rand(3, 3, 32, 32, generator=_gen(0)))
    assert e.shape == (3, 256)
