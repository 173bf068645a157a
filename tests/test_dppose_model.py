"""privkit.dppose: pose network, SimCC labels/loss/decoding, PCKh, blur."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from privkit.data.types import MPII_JOINTS, PoseSet
from privkit.dppose import (
    GaussianBlur,
    build_pose_model,
    count_parameters,
    decode_simcc,
    evaluate_pckh,
    pckh,
    simcc_kl_loss,
    simcc_targets,
)
from privkit.dppose.grads import check_per_record_model
from privkit.errors import InvalidArgumentError, MissingResourceError, ShapeError, UnknownNameError
from privkit.transforms import gaussian_blur


def random_poseset(n: int, size: int = 32, seed: int = 0) -> PoseSet:
    g = torch.Generator().manual_seed(seed)
    kp = torch.rand(n, 16, 2, generator=g) * (size - 1)
    head = kp[:, 9:10].expand(n, 2, 2).reshape(n, 4) + torch.tensor([-3.0, -3.0, 3.0, 3.0])
    return PoseSet(
        images=torch.rand(n, 3, size, size, generator=g),
        keypoints=kp,
        visible=torch.rand(n, 16, generator=g) > 0.2,
        head_box=head,
        identity=torch.arange(n),
        name="random",
    )


# ------------------------------------------------------------------------------------------- model
def test_default_model_size_and_shapes():
    m = build_pose_model(64)
    p = count_parameters(m)
    assert 50_000 <= p <= 200_000, p
    x = torch.rand(3, 3, 64, 64)
    lx, ly = m(x)
    assert lx.shape == (3, 16, 128) and ly.shape == (3, 16, 128)
    assert not any(isinstance(mod, torch.nn.modules.batchnorm._BatchNorm) for mod in m.modules())
    assert any(isinstance(mod, torch.nn.GroupNorm) for mod in m.modules())
    m128 = build_pose_model(128, width=8)
    lx, ly = m128(torch.rand(2, 3, 128, 128))
    assert lx.shape == (2, 16, 256) and ly.shape == (2, 16, 256)
    mr = build_pose_model((64, 32), width=4)
    lx, ly = mr(torch.rand(2, 3, 64, 32))
    assert lx.shape == (2, 16, 64) and ly.shape == (2, 16, 128)


def test_init_is_seeded_and_leaves_global_rng_alone():
    state = torch.random.get_rng_state()
    a = build_pose_model(32, width=4, seed=3)
    b = build_pose_model(32, width=4, seed=3)
    c = build_pose_model(32, width=4, seed=4)
    assert torch.equal(torch.random.get_rng_state(), state)
    for (na, pa), (_, pb), (_, pc) in zip(a.named_parameters(), b.named_parameters(), c.named_parameters()):
        assert torch.equal(pa, pb), na
    assert any(not torch.equal(pa, pc) for pa, pc in zip(a.parameters(), c.parameters()))


def test_model_argument_errors():
    with pytest.raises(UnknownNameError, match="convnet"):
        build_pose_model(64, backbone="resnet")
    with pytest.raises(InvalidArgumentError, match="multiples of 16"):
        build_pose_model(40)
    with pytest.raises(InvalidArgumentError):
        build_pose_model(64, width=0)
    with pytest.raises(InvalidArgumentError):
        build_pose_model(64, weights="x.safetensors")  # weights only for TinyViT


def test_tiny_vit_needs_weights_and_has_no_train_mode_batchnorm(tmp_path):
    with pytest.raises(MissingResourceError, match="weights"):
        build_pose_model(64, backbone="tiny_vit_5m")
    with pytest.raises(MissingResourceError, match=str(tmp_path / "absent.safetensors")):
        build_pose_model(64, backbone="tiny_vit_5m", weights=tmp_path / "absent.safetensors")
    m = build_pose_model(64, backbone="tiny_vit_5m", weights="random", norm="groupnorm")
    assert not any(isinstance(mod, torch.nn.BatchNorm2d) for mod in m.modules())
    check_per_record_model(m)  # no train-mode BatchNorm left
    lx, ly = m(torch.rand(1, 3, 64, 64))
    assert lx.shape == (1, 16, 128) and ly.shape == (1, 16, 128)


# ------------------------------------------------------------------------------------------- labels, loss, decoding
def test_simcc_targets_are_normalised_gaussians_centred_at_k_u():
    kp = torch.tensor([[[10.0, 20.0], [5.5, 3.0], [40.0, 1.0]]])  # third joint outside a 32-px image
    vis = torch.tensor([[True, False, True]])
    tx, ty, w = simcc_targets(kp, vis, input_size=32, split_ratio=2, sigma=1.5)
    assert tx.shape == (1, 3, 64) and ty.shape == (1, 3, 64)
    assert torch.equal(w, torch.tensor([[1.0, 0.0, 0.0]]))
    assert torch.allclose(tx[0, 0].sum(), torch.tensor(1.0)) and torch.allclose(ty[0, 0].sum(), torch.tensor(1.0))
    assert int(tx[0, 0].argmax()) == 20 and int(ty[0, 0].argmax()) == 40
    b = torch.arange(64.0)
    ref = torch.exp(-((b - 20.0) ** 2) / (2 * 1.5**2))
    assert torch.allclose(tx[0, 0], ref / ref.sum(), atol=1e-7)
    assert tx[0, 1:].abs().sum() == 0  # invisible / outside joints carry no target


def test_kl_loss_matches_hand_computation_and_vanishes_at_the_target():
    g = torch.Generator().manual_seed(0)
    lx = torch.randn(2, 3, 8, generator=g)
    ly = torch.randn(2, 3, 6, generator=g)
    tx = torch.softmax(torch.randn(2, 3, 8, generator=g), -1)
    ty = torch.softmax(torch.randn(2, 3, 6, generator=g), -1)
    w = torch.tensor([[1.0, 0.0, 1.0], [1.0, 1.0, 1.0]])
    per = simcc_kl_loss((lx, ly), tx, ty, w, reduction="none")
    for i in range(2):
        tot = 0.0
        for j in range(3):
            kx = (tx[i, j] * (tx[i, j].log() - F.log_softmax(lx[i, j], -1))).sum() / 8
            ky = (ty[i, j] * (ty[i, j].log() - F.log_softmax(ly[i, j], -1))).sum() / 6
            tot += float(w[i, j]) * float(kx + ky)
        assert per[i].item() == pytest.approx(tot / 3, rel=1e-5)
    assert simcc_kl_loss((lx, ly), tx, ty, w).item() == pytest.approx(per.mean().item(), rel=1e-6)
    assert simcc_kl_loss((tx.log(), ty.log()), tx, ty, w).item() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ShapeError):
        simcc_kl_loss((lx, ly), tx[..., :4], ty, w)


def test_decoding_is_argmax_over_k():
    lx = torch.full((1, 2, 64), -10.0)
    ly = torch.full((1, 2, 64), -10.0)
    lx[0, 0, 21], ly[0, 0, 9] = 5.0, 5.0
    lx[0, 1, 0], ly[0, 1, 63] = 5.0, 5.0
    kp, conf = decode_simcc((lx, ly), split_ratio=2)
    assert torch.equal(kp, torch.tensor([[[10.5, 4.5], [0.0, 31.5]]]))
    assert bool((conf > 0.9).all())
    # labels -> decoding recovers the keypoints to the bin resolution (0.25 px at k=2)
    g = torch.Generator().manual_seed(1)
    pts = torch.rand(4, 16, 2, generator=g) * 31
    tx, ty, _ = simcc_targets(pts, torch.ones(4, 16, dtype=torch.bool), input_size=32)
    dec, _ = decode_simcc((tx.log(), ty.log()))
    assert float((dec - pts).abs().max()) <= 0.25 + 1e-6


# ------------------------------------------------------------------------------------------- PCKh
def test_pckh_hand_made():
    # Two people; head boxes 12 x 16 (diagonal 20) -> head size 0.6 * 20 = 12 -> threshold 6 px at alpha 0.5.
    head_box = torch.tensor([[0.0, 0.0, 12.0, 16.0], [3.0, 4.0, 15.0, 20.0]])
    gt = torch.zeros(2, 16, 2)
    pred = torch.zeros(2, 16, 2)
    pred[0, :, 0] = 5.0   # person 0: every joint off by 5 px (correct)
    pred[1, :, 0] = 7.0   # person 1: every joint off by 7 px (wrong)
    pred[1, 0, 0] = 6.0   # ... except joint 0 exactly at the threshold (correct: <=)
    vis = torch.ones(2, 16, dtype=torch.bool)
    vis[1, 1] = False     # joint 1 only visible for person 0
    vis[:, 2] = False     # joint 2 never visible
    res = pckh(pred, gt, vis, head_box)
    assert res.per_joint[0].item() == pytest.approx(100.0)
    assert res.per_joint[1].item() == pytest.approx(100.0)
    assert math.isnan(res.per_joint[2].item())
    assert res.per_joint[3].item() == pytest.approx(50.0)
    assert res.counts.tolist()[:4] == [2, 1, 0, 2]
    # mean: joints except 6, 7 (and 2, never visible): visible = 2 + 1 + 11*2 = 25, correct = 2 + 1 + 11 = 14
    assert res.mean == pytest.approx(100.0 * 14 / 25)
    # pelvis/thorax are excluded from the mean: making them all wrong does not change it
    pred2 = pred.clone()
    pred2[:, 6:8, 0] = 100.0
    assert pckh(pred2, gt, vis, head_box).mean == pytest.approx(res.mean)
    # alpha scales the threshold: at 0.25 (3 px) nothing is correct
    assert pckh(pred, gt, vis, head_box, alpha=0.25).mean == 0.0
    d = res.as_dict()
    assert set(MPII_JOINTS) <= set(d) and d["mean"] == res.mean
    with pytest.raises(ShapeError):
        pckh(pred, gt[:1], vis, head_box)
    with pytest.raises(InvalidArgumentError):
        pckh(pred, gt, vis, head_box, alpha=0)


def test_evaluate_pckh_and_predict():
    data = random_poseset(5, 32)
    m = build_pose_model(32, width=4)
    pred = m.predict(data.images, batch_size=2)
    assert pred.shape == (5, 16, 2)
    assert bool((pred >= 0).all()) and bool((pred <= 31.5).all())
    assert m.training  # predict restores the mode
    res = evaluate_pckh(m, data)
    assert 0.0 <= res.mean <= 100.0
    with pytest.raises(ShapeError):
        evaluate_pckh(build_pose_model(64, width=4), data)


# ------------------------------------------------------------------------------------------- blur (psi)
def test_psi_blur_is_the_shared_blur_with_the_papers_kernel():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 20, 24, generator=g, dtype=torch.float64)
    assert torch.equal(GaussianBlur(kernel_size=7, sigma=2.0)(x), gaussian_blur(x, 2.0, radius=3))
    assert torch.equal(GaussianBlur(kernel_size=1, sigma=2.0)(x), x)
    const = torch.full((1, 3, 16, 16), 0.3)
    assert torch.allclose(GaussianBlur(kernel_size=5, sigma=1.0)(const), const, atol=1e-6)
    assert GaussianBlur.for_size(256) == GaussianBlur(kernel_size=25, sigma=10.0)
    assert GaussianBlur.for_size(64) == GaussianBlur(kernel_size=7, sigma=2.5)
    with pytest.raises(InvalidArgumentError):
        GaussianBlur(kernel_size=4)
    with pytest.raises(InvalidArgumentError, match="radius"):
        GaussianBlur(kernel_size=41, sigma=1.0)(x)
