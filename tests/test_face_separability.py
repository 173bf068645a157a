"""Identities of the embedded face sets are separable by a real face recogniser, but not trivially.

README reports the full-size numbers (100 identities x 4 images: dlib AUC 0.853 on lfw-subset-views, 0.787 on
synthfaces; raw pixels 0.60 / 0.64); this test checks the same ordering on a small slice.
"""

from __future__ import annotations

import pytest
import torch

from privkit.data import load_faces
from privkit.encoders import load_encoder
from privkit.encoders.quality import pair_auc


def _pair_auc(emb: torch.Tensor, ident: torch.Tensor) -> float:
    return pair_auc(emb, ident)


@pytest.fixture(scope="module")
def encoders():
    return load_encoder("dlib-resnet-fr", device="cpu"), load_encoder("pixels", device="cpu")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lfw-subset-views", "synthfaces"])
def test_dlib_separates_identities_better_than_pixels_but_not_perfectly(name, encoders):
    dlib, pixels = encoders
    fs = load_faces(name, n_identities=12, images_per_identity=3, size=64, seed=0)
    a_dlib = _pair_auc(dlib.embed(fs.images, boxes=fs.box), fs.identity)
    a_pix = _pair_auc(pixels.embed(fs.images), fs.identity)
    assert 0.65 < a_dlib < 0.995, a_dlib  # separable, not trivial
    assert a_dlib > a_pix + 0.05, (a_dlib, a_pix)
