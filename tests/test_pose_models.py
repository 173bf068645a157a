"""Pretrained pose models (MoveNet, EfficientPose) behind privkit's pose-model interface."""

from __future__ import annotations

import pytest
import torch

from privkit.data import MPII_JOINTS
from privkit.encoders.pose_models import (
    COCO_JOINTS,
    coco_to_mpii,
    list_pose_models,
    load_pose_model,
    pose_model_table,
)
from privkit.errors import InvalidArgumentError, ShapeError, UnknownNameError

AVAILABLE = {i.name for i in list_pose_models() if i.available}
needs = pytest.mark.skipif(len(AVAILABLE) < 3, reason="the npm package's pose models are not in the cache (make venv)")

#: Hand-marked points on scikit-image's astronaut (512 x 512), (x, y) in pixels, marked by eye on a zoomed grid:
#: eyes and nose are sharp (±3 px); the shoulder joints sit under a bulky suit, marked where the joint would be
#: (about 10 px below the suit's top contour; ±15 px); the head top is where the hair ends (±5 px).
ASTRONAUT = {"nose": (226, 126), "r_eye": (206, 101), "l_eye": (246, 104),
             "r_shoulder": (100, 258), "l_shoulder": (320, 262), "head_top": (228, 20)}
#: Allowed distances (pixels) from the marks: tight where the marks are sharp, looser where the joint is hidden
#: or (head top of the COCO models) derived by privkit's mapping.
TOLERANCE = {"nose": 8, "r_eye": 8, "l_eye": 8, "r_shoulder": 25, "l_shoulder": 25, "head_top": 20}


@pytest.fixture(scope="module")
def astronaut() -> torch.Tensor:
    from skimage import data

    return torch.from_numpy(data.astronaut()).permute(2, 0, 1).float()[None] / 255


def test_registry_lists_three_models():
    names = [i.name for i in list_pose_models()]
    assert names == ["movenet-lightning", "movenet-thunder", "efficientpose"]
    assert "efficientpose" in pose_model_table()
    with pytest.raises(UnknownNameError, match="movenet-lightning"):
        load_pose_model("posenet")


@needs
@pytest.mark.parametrize("name", ["movenet-lightning", "movenet-thunder", "efficientpose"])
def test_keypoints_on_the_astronaut_match_hand_marks(name, astronaut):
    model = load_pose_model(name, device="cpu")
    # a head-and-shoulders close-up: EfficientPose, trained on whole figures, needs the canvas doubled
    pred = model.predict(astronaut, context=2.0 if name == "efficientpose" else None)
    assert pred.keypoints.shape == (1, len(pred.joints), 2) and pred.scores.shape == (1, len(pred.joints))
    mpii = pred.to_mpii()
    assert mpii.joints == MPII_JOINTS and mpii.keypoints.shape == (1, 16, 2)
    points = {j: mpii.keypoints[0, MPII_JOINTS.index(j)] for j in ("r_shoulder", "l_shoulder", "head_top")}
    if pred.skeleton == "coco17":
        points.update({j: pred.keypoints[0, COCO_JOINTS.index(j)] for j in ("nose", "r_eye", "l_eye")})
    for joint, xy in points.items():
        dist = float(torch.linalg.vector_norm(xy - torch.tensor(ASTRONAUT[joint], dtype=torch.float32)))
        assert dist <= TOLERANCE[joint], f"{name}: {joint} at {xy.tolist()}, {dist:.1f} px from the mark"


@needs
def test_batch_invariance_and_coordinates_follow_the_image(astronaut):
    model = load_pose_model("movenet-lightning", device="cpu")
    flipped = astronaut.flip(-1)
    batch = model.predict(torch.cat([astronaut, flipped]))
    one = model.predict(astronaut)
    torch.testing.assert_close(batch.keypoints[:1], one.keypoints, atol=1e-3, rtol=0)
    # a horizontal flip moves the nose to the mirrored x
    nose = COCO_JOINTS.index("nose")
    assert abs(float(batch.keypoints[1, nose, 0]) - (512 - float(batch.keypoints[0, nose, 0]))) < 6
    # a crop of the image: the same nose, shifted by the crop offset
    crop = model.predict(astronaut[..., 40:, 60:])
    assert float(torch.linalg.vector_norm(crop.keypoints[0, nose] + torch.tensor([60.0, 40.0])
                                          - one.keypoints[0, nose])) < 8


@needs
def test_features_and_gradients_flow_for_fine_tuning(astronaut):
    model = load_pose_model("movenet-lightning", device="cpu", trainable=True)
    feats = model.features(astronaut)
    assert feats["stride32"].shape[1:] == (1280, 6, 6) and feats["fpn_stride4"].shape[-1] == 48
    x, _ = model.prepare(astronaut)
    out = model(x)
    out[..., 2].sum().backward()  # the keypoint scores
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads) and any(float(g.abs().sum()) > 0 for g in grads)
    frozen = load_pose_model("movenet-lightning", device="cpu")
    assert not any(p.requires_grad for p in frozen.parameters())


@needs
def test_bad_input_is_rejected(astronaut):
    model = load_pose_model("movenet-lightning", device="cpu")
    with pytest.raises(InvalidArgumentError, match=r"\[0, 1\]"):
        model.predict(astronaut * 255)
    bad = astronaut.clone()
    bad[0, 0, 0, 0] = float("nan")
    with pytest.raises(InvalidArgumentError, match="NaN"):
        model.predict(bad)
    with pytest.raises(ShapeError):
        model.predict(astronaut[:, :1])
    with pytest.raises(InvalidArgumentError, match="context"):
        model.predict(astronaut, context=0.5)


def test_coco_to_mpii_mapping():
    kp = torch.zeros(1, 17, 2)
    c = {n: i for i, n in enumerate(COCO_JOINTS)}
    kp[0, c["l_shoulder"]] = torch.tensor([10.0, 10.0])
    kp[0, c["r_shoulder"]] = torch.tensor([-10.0, 10.0])
    kp[0, c["nose"]] = torch.tensor([0.0, 0.0])
    kp[0, c["l_hip"]] = torch.tensor([6.0, 40.0])
    kp[0, c["r_hip"]] = torch.tensor([-6.0, 40.0])
    sc = torch.linspace(0.1, 0.9, 17)[None]
    out, scores = coco_to_mpii(kp, sc)
    m = {n: i for i, n in enumerate(MPII_JOINTS)}
    torch.testing.assert_close(out[0, m["thorax"]], torch.tensor([0.0, 10.0]))
    torch.testing.assert_close(out[0, m["pelvis"]], torch.tensor([0.0, 40.0]))
    torch.testing.assert_close(out[0, m["head_top"]], torch.tensor([0.0, -6.0]))
    torch.testing.assert_close(out[0, m["upper_neck"]], torch.tensor([0.0, 6.5]))
    assert float(scores[0, m["r_wrist"]]) == pytest.approx(float(sc[0, c["r_wrist"]]))
    assert float(scores[0, m["thorax"]]) == pytest.approx(min(float(sc[0, c["l_shoulder"]]), float(sc[0, c["r_shoulder"]])))
    with pytest.raises(ShapeError):
        coco_to_mpii(torch.zeros(1, 16, 2), torch.zeros(1, 16))


@needs
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_matches_cpu(astronaut):
    cpu = load_pose_model("movenet-lightning", device="cpu").predict(astronaut)
    gpu = load_pose_model("movenet-lightning", device="cuda").predict(astronaut.cuda())
    torch.testing.assert_close(gpu.keypoints, cpu.keypoints, atol=1.0, rtol=0)


@pytest.mark.slow
@needs
def test_zero_shot_pckh_on_synthpose_matches_the_readme():
    """The README quotes zero-shot PCKh@0.5 of the pose models on 100 synthpose figures at 128 px."""
    import re
    from pathlib import Path

    from privkit.data.pose import load_synthpose
    from privkit.dppose.metrics import pckh

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    quoted = re.search(r"movenet-thunder ([\d.]+), efficientpose ([\d.]+), movenet-lightning ([\d.]+)", readme)
    assert quoted, "the README's zero-shot sentence is missing"
    data = load_synthpose(split="private", n=100, seed=0, size=128, device="cpu")
    for name, value in zip(("movenet-thunder", "efficientpose", "movenet-lightning"), quoted.groups()):
        pred = load_pose_model(name, device="cpu").predict(data.images).to_mpii()
        score = pckh(pred.keypoints, data.keypoints, data.visible, data.head_box).mean
        assert score == pytest.approx(float(value), abs=0.5), (name, score)  # a few joint decisions may flip on
        # another CPU's rounding (one joint is 1/1600 = 0.06 points)
        assert score > 50  # the public pose pretraining transfers to the synthetic figures
