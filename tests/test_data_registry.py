"""The dataset registry front door."""

from __future__ import annotations

import pytest
import torch

from privkit.data import list_datasets, load_faces, load_pose
from privkit.errors import UnknownNameError


def test_list_datasets_covers_embedded_and_paper_scale():
    names = {d.name for d in list_datasets()}
    assert {"lfw-subset-views", "synthfaces", "synthpose", "digits", "topic-sentences"} <= names
    assert {"celeba", "vggface2", "lfw", "mpii", "movielens-100k"} <= names
    assert {d.name for d in list_datasets(kind="pose")} == {"synthpose", "mpii"}
    with pytest.raises(UnknownNameError, match="kind"):
        list_datasets(kind="audio")


def test_unknown_names():
    with pytest.raises(UnknownNameError, match="lfw-subset-views, portraits, portraits-views, synthfaces"):
        load_faces("celeba")
    with pytest.raises(UnknownNameError, match="synthpose"):
        load_pose("mpii")


@pytest.mark.slow
def test_load_faces_passes_options_through():
    fs = load_faces("synthfaces", n_identities=6, images_per_identity=2, size=32, seed=3)
    assert fs.images.shape == (12, 3, 32, 32) and fs.n_identities == 6
    again = load_faces("synthfaces", n_identities=6, images_per_identity=2, size=32, seed=3)
    assert torch.equal(fs.images, again.images)
    lfw = load_faces("lfw-subset-views", n_identities=3, images_per_identity=2, size=32, split="all")
    assert lfw.images.shape[0] == 6 and lfw.name == "lfw-subset-views"


def test_load_pose_front_door():
    ps = load_pose(split="public", n=4, size=64, seed=1)
    assert ps.keypoints.shape == (4, 16, 2) and ps.images.shape == (4, 3, 64, 64)
