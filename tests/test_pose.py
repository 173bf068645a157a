"""Tests of the procedural pose figures (privkit.data.pose)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from privkit.data import pose
from privkit.data.pose import (
    ANGLE_LIMITS,
    ANGLE_NAMES,
    BLOCK_SIZE,
    POSE_CLASSES,
    PUBLIC_IDENTITY_OFFSET,
    PoseParams,
    identity_traits,
    load_synthpose,
    render_pose,
    sample_pose_params,
    synthpose_params,
)
from privkit.data.types import MPII_JOINTS, PoseSet
from privkit.errors import InvalidArgumentError, PrivkitError, ShapeError, UnknownNameError

J = {name: i for i, name in enumerate(MPII_JOINTS)}
A = {name: i for i, name in enumerate(ANGLE_NAMES)}


@pytest.fixture(scope="module")
def private() -> PoseSet:
    return load_synthpose(split="private", n=96, seed=0, size=64, device="cpu")


@pytest.fixture(scope="module")
def public() -> PoseSet:
    return load_synthpose(split="public", n=96, seed=0, size=64, device="cpu")


def _saturation(rgb: torch.Tensor, dim: int) -> torch.Tensor:
    hi, lo = rgb.amax(dim), rgb.amin(dim)
    return (hi - lo) / hi.clamp_min(1e-3)


# ------------------------------------------------------------------ shapes and ranges
@pytest.mark.slow
@pytest.mark.parametrize("split", ["private", "public"])
def test_shapes_dtypes_and_ranges(split: str, private: PoseSet, public: PoseSet) -> None:
    ds = private if split == "private" else public
    n = 96
    assert isinstance(ds, PoseSet) and len(ds) == n
    assert ds.images.shape == (n, 3, 64, 64) and ds.images.dtype == torch.float32
    assert ds.keypoints.shape == (n, 16, 2) and ds.keypoints.dtype == torch.float32
    assert ds.visible.shape == (n, 16) and ds.visible.dtype == torch.bool
    assert ds.head_box.shape == (n, 4) and ds.head_box.dtype == torch.float32
    assert ds.identity.shape == (n,) and ds.identity.dtype == torch.int64
    assert float(ds.images.min()) >= 0.0 and float(ds.images.max()) <= 1.0
    assert torch.isfinite(ds.keypoints).all() and torch.isfinite(ds.head_box).all()
    assert ds.name == f"synthpose-{split}" and ds.meta["split"] == split
    # Images are not blank: there is real content (figure over a background) in every image.
    assert (ds.images.flatten(1).std(dim=1) > 0.03).all()
    # Most joints are visible, but not all (frame borders, occluders, self-occlusion).
    frac = ds.visible.float().mean()
    assert 0.6 < float(frac) < 0.98
    assert ds.meta["visible_fraction"] == pytest.approx(float(frac))


def test_visible_implies_in_frame(private: PoseSet, public: PoseSet) -> None:
    for ds in (private, public):
        size = ds.images.shape[-1]
        kp = ds.keypoints[ds.visible]
        assert ((kp >= 0) & (kp <= size - 1)).all()
        # Keypoints outside the frame exist (the data set is not trivially centred) and are invisible.
        out = ((ds.keypoints < 0) | (ds.keypoints > size - 1)).any(-1)
        assert not (out & ds.visible).any()
    both = torch.cat([((d.keypoints < 0) | (d.keypoints > 63)).any(-1) for d in (private, public)])
    assert both.any()


def test_head_box_contains_head_segment(private: PoseSet, public: PoseSet) -> None:
    for ds in (private, public):
        box = ds.head_box
        assert (box[:, 2] > box[:, 0]).all() and (box[:, 3] > box[:, 1]).all()
        for joint in ("head_top", "upper_neck"):
            k = ds.keypoints[:, J[joint]]
            assert ((k[:, 0] >= box[:, 0]) & (k[:, 0] <= box[:, 2])).all()
            assert ((k[:, 1] >= box[:, 1]) & (k[:, 1] <= box[:, 3])).all()
        # The PCKh normaliser is a head-sized length: a fraction of the figure, not the image.
        diag = (box[:, 2:] - box[:, :2]).norm(dim=1)
        seg = (ds.keypoints[:, J["head_top"]] - ds.keypoints[:, J["upper_neck"]]).norm(dim=1)
        assert (diag >= seg).all()
        assert float(diag.median()) < 0.4 * ds.images.shape[-1]


def test_figure_covers_its_keypoints() -> None:
    """The rendered figure is where the keypoints say: pixels at visible torso keypoints differ from
    the same pixels of the background rendered alone (figure shrunk to nothing)."""
    params = synthpose_params(split="private", n=32, seed=0)
    img, kp, vis, _ = render_pose(params, size=64, device="cpu")
    tiny = dataclasses.replace(params, view=params.view.clone())
    tiny.view[:, 1] = 1e-4   # a figure of zero size: only the background remains
    bg, _, _, _ = render_pose(tiny, size=64, device="cpu")
    mid = ((kp[:, J["pelvis"]] + kp[:, J["thorax"]]) / 2).round().long()
    ok = (mid >= 0).all(1) & (mid <= 63).all(1)
    rows = torch.arange(32)[ok]
    diff = (img[rows, :, mid[ok, 1], mid[ok, 0]] - bg[rows, :, mid[ok, 1], mid[ok, 0]]).abs().amax(1)
    # A rare occluder or a torso colour close to the background may hide the difference.
    assert float((diff > 0.05).float().mean()) > 0.8


# ------------------------------------------------------------------ kinematics and visibility
def test_kinematic_tree_preserves_limb_lengths() -> None:
    g = torch.Generator().manual_seed(5)
    p = sample_pose_params(256, generator=g, style="photo")
    pts = pose._skeleton(p.body, p.clothing, p.angles)
    b = {k: p.body[:, i] for i, k in enumerate(pose.BODY_FIELDS)}
    for a, c, length in [("r_knee", "r_ankle", "shin"), ("l_knee", "l_ankle", "shin"),
                         ("r_hip", "r_knee", "thigh"), ("l_hip", "l_knee", "thigh"),
                         ("pelvis", "thorax", "torso"), ("thorax", "upper_neck", "neck"),
                         ("upper_neck", "head_top", "head"), ("r_shoulder", "r_elbow", "upper_arm"),
                         ("l_elbow", "l_wrist", "forearm")]:
        d = (pts[:, J[a]] - pts[:, J[c]]).norm(dim=1)
        torch.testing.assert_close(d, b[length], rtol=1e-5, atol=1e-6)
    hips = (pts[:, J["r_hip"]] - pts[:, J["l_hip"]]).norm(dim=1)
    torch.testing.assert_close(hips, 2 * b["hip_width"], rtol=1e-5, atol=1e-6)


def test_angles_within_anatomical_limits_and_all_pose_families() -> None:
    p = synthpose_params(split="private", n=4096, seed=1)
    lim = torch.tensor(ANGLE_LIMITS)
    assert (p.angles >= lim[:, 0]).all() and (p.angles <= lim[:, 1]).all()
    counts = torch.bincount(p.pose_class, minlength=len(POSE_CLASSES))
    assert (counts > 200).all()
    # Pose families differ in the way they should.
    sitting = p.pose_class == POSE_CLASSES.index("sitting")
    standing = p.pose_class == POSE_CLASSES.index("standing")
    raised = p.pose_class == POSE_CLASSES.index("arms_raised")
    bending = p.pose_class == POSE_CLASSES.index("bending")
    assert p.angles[sitting, A["r_knee"]].mean() > 1.0 > p.angles[standing, A["r_knee"]].mean()
    arm_up = p.angles[:, [A["r_shoulder_abduct"], A["l_shoulder_abduct"]]].amax(1)
    assert arm_up[raised].mean() > 1.5 > arm_up[standing].mean()
    assert p.angles[bending, A["torso_bend"]].mean() > 0.5 > p.angles[standing, A["torso_bend"]].mean()


def _controlled(n: int = 3) -> PoseParams:
    """Three figures in a T-pose facing the camera, no occluders, framed in the image centre."""
    g = torch.Generator().manual_seed(0)
    p = sample_pose_params(n, generator=g, style="photo", identity=torch.arange(n))
    angles = torch.zeros(n, len(ANGLE_NAMES))
    angles[:, A["r_shoulder_abduct"]] = angles[:, A["l_shoulder_abduct"]] = 1.5
    view = torch.tensor([[0.0, 0.7, 0.0, 0.0, 0.0]]).repeat(n, 1)
    occ = p.occluders.clone()
    occ[:, :, 0] = 0.0
    return dataclasses.replace(p, angles=angles, view=view, occluders=occ)


def test_visibility_occluder_and_self_occlusion() -> None:
    p = _controlled()
    o = pose._O
    # Figure 1: a small occluder on its right wrist.
    p.occluders[1, 0, o["present"]] = 1.0
    p.occluders[1, 0, o["anchor"]] = J["r_wrist"]
    p.occluders[1, 0, o["dx"]] = p.occluders[1, 0, o["dy"]] = 0.0
    p.occluders[1, 0, o["half_w"]] = p.occluders[1, 0, o["half_h"]] = 0.06
    # Figure 2: seen from behind, hands folded in front of the belly (hidden by the torso).
    p.angles[2, A["yaw"]] = math.pi
    for s in ("r", "l"):
        p.angles[2, A[f"{s}_shoulder_abduct"]] = 0.15
        p.angles[2, A[f"{s}_shoulder_flex"]] = 0.5
        p.angles[2, A[f"{s}_elbow"]] = 1.9
        p.angles[2, A[f"{s}_arm_twist"]] = 1.3
    img, kp, vis, _ = render_pose(p, size=96, device="cpu")
    assert vis[0].all()
    assert not vis[1, J["r_wrist"]] and vis[1, J["l_wrist"]] and vis[1, J["head_top"]]
    assert not vis[2, J["r_wrist"]] and not vis[2, J["l_wrist"]]
    assert vis[2, J["head_top"]] and vis[2, J["r_ankle"]]
    # Facing the camera, the person's right wrist is on the image's left.
    assert kp[0, J["r_wrist"], 0] < kp[0, J["thorax"], 0] < kp[0, J["l_wrist"], 0]
    assert kp[0, J["head_top"], 1] < kp[0, J["thorax"], 1] < kp[0, J["pelvis"], 1] < kp[0, J["r_ankle"], 1]
    # Moving the figure out of the frame makes its joints invisible.
    p.view[0, 2] = 2.0
    _, kp2, vis2, _ = render_pose(p[:1], size=96, device="cpu")
    assert not vis2.any() and (kp2[..., 0] > 95).all()


# ------------------------------------------------------------------ determinism and slicing
def test_determinism_per_seed() -> None:
    a = load_synthpose(split="private", n=12, seed=7, size=48, device="cpu")
    b = load_synthpose(split="private", n=12, seed=7, size=48, device="cpu")
    c = load_synthpose(split="private", n=12, seed=8, size=48, device="cpu")
    assert torch.equal(a.images, b.images) and torch.equal(a.keypoints, b.keypoints)
    assert torch.equal(a.visible, b.visible) and torch.equal(a.head_box, b.head_box)
    assert not torch.allclose(a.keypoints, c.keypoints)
    assert (a.images - c.images).abs().mean() > 0.05
    # Identities follow the sample index, not the seed.
    assert torch.equal(a.identity, c.identity)


def test_slices_match_the_whole() -> None:
    whole = load_synthpose(split="public", n=10, seed=2, size=40, device="cpu")
    head = load_synthpose(split="public", n=4, seed=2, size=40, device="cpu")
    tail = load_synthpose(split="public", n=6, seed=2, size=40, device="cpu", start=4)
    torch.testing.assert_close(torch.cat([head.images, tail.images]), whole.images, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.cat([head.keypoints, tail.keypoints]), whole.keypoints, atol=1e-4, rtol=0)
    assert torch.equal(torch.cat([head.identity, tail.identity]), whole.identity)


@pytest.mark.slow
def test_twenty_thousand_samples_on_demand() -> None:
    n = 20_000
    params = synthpose_params(split="private", n=n, seed=0)
    assert len(params) == n
    assert torch.unique(params.angles, dim=0).shape[0] == n            # all distinct
    assert torch.unique(params.identity).numel() == 256
    # Any slice equals a direct draw at that offset (parameters are per-index deterministic,
    # drawn in blocks), across a block boundary too.
    lo = 3 * BLOCK_SIZE - 5
    direct = synthpose_params(split="private", n=10, seed=0, start=lo)
    for f in ("angles", "view", "body", "colors", "occluders", "background", "noise_seed", "identity"):
        assert torch.equal(getattr(params, f)[lo:lo + 10], getattr(direct, f)), f
    # Rendering a slice at the far end of the virtual data set works and matches the params.
    ds = load_synthpose(split="private", n=4, seed=0, size=32, device="cpu", start=n - 4)
    img, kp, _, _ = render_pose(params[n - 4:], size=32, device="cpu")
    torch.testing.assert_close(ds.keypoints, kp)
    torch.testing.assert_close(ds.images, img)
    assert torch.equal(ds.identity, params.identity[n - 4:])


def test_identity_traits_are_fixed_per_identity() -> None:
    p = synthpose_params(split="private", n=600, seed=4, n_identities=50)
    assert torch.equal(p.identity, torch.arange(600) % 50)
    same = p.identity == 7
    assert int(same.sum()) == 12
    assert (p.body[same] == p.body[same][0]).all() and (p.colors[same] == p.colors[same][0]).all()
    assert (p.clothing[same] == p.clothing[same][0]).all()
    # Different identities differ in body shape, and poses differ within one identity.
    assert torch.unique(p.body[:50], dim=0).shape[0] == 50
    assert torch.unique(p.angles[same], dim=0).shape[0] == 12
    traits = identity_traits(torch.tensor([7, 7, 8]), style="photo")
    assert torch.equal(traits["body"][0], p.body[same][0]) and not torch.equal(traits["body"][0], traits["body"][2])


# ------------------------------------------------------------------ public vs private
def test_public_and_private_are_disjoint(private: PoseSet, public: PoseSet) -> None:
    pub_ids, priv_ids = set(public.identity.tolist()), set(private.identity.tolist())
    assert not pub_ids & priv_ids
    assert min(pub_ids) >= PUBLIC_IDENTITY_OFFSET
    a = synthpose_params(split="private", n=512, seed=0)
    b = synthpose_params(split="public", n=512, seed=0)
    # Independent random streams: no pose or body shape is shared.
    assert not (a.angles[:, None, :] == b.angles[None, :, :]).all(-1).any()
    assert not (a.body[:, None, :] == b.body[None, :, :]).all(-1).any()
    assert public.meta["style"] == "cartoon" and private.meta["style"] == "photo"


def test_public_style_differs_from_private(private: PoseSet, public: PoseSet) -> None:
    a = synthpose_params(split="private", n=1024, seed=0)
    b = synthpose_params(split="public", n=1024, seed=0)
    shirt = pose.COLOR_FIELDS.index("shirt")
    # Clothing palette: saturated in the public (cartoon) style, muted in the private (photo) one.
    assert _saturation(b.colors[:, shirt], -1).mean() > _saturation(a.colors[:, shirt], -1).mean() + 0.3
    # Patterned shirts are the rule in the public style and the exception in the private one.
    pat = pose.CLOTHING_FIELDS.index("shirt_pattern")
    assert (b.clothing[:, pat] > 0).float().mean() > 0.65 > 0.55 > (a.clothing[:, pat] > 0).float().mean()

    # Rendered images: torso pixels are more saturated in the public style ...
    def torso_saturation(ds: PoseSet) -> torch.Tensor:
        mid = ((ds.keypoints[:, J["pelvis"]] + ds.keypoints[:, J["thorax"]]) / 2).round().long().clamp(0, 63)
        pix = ds.images[torch.arange(len(ds)), :, mid[:, 1], mid[:, 0]]
        return _saturation(pix, 1)

    assert torso_saturation(public).mean() > torso_saturation(private).mean() + 0.1
    # ... and private backgrounds carry sensor noise (the public cartoon style has none): the residual
    # of a 3x3 mean filter on flat procedural backgrounds is far smaller than on photos with noise.
    def residual(ds: PoseSet) -> float:
        x = ds.images
        blur = torch.nn.functional.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
        return float((x - blur)[..., 4:-4, 4:-4].abs().median())

    assert residual(private) > 2 * residual(public)
    # Rendering one set of parameters in both styles changes the image but not the geometry.
    p = synthpose_params(split="private", n=6, seed=9)
    img_a, kp_a, vis_a, box_a = render_pose(p, size=48, device="cpu", style="photo")
    img_b, kp_b, vis_b, box_b = render_pose(p, size=48, device="cpu", style="cartoon")
    torch.testing.assert_close(kp_a, kp_b)
    torch.testing.assert_close(box_a, box_b)
    assert (img_a - img_b).abs().mean() > 0.05


# ------------------------------------------------------------------ sizes and bad inputs
def test_other_sizes_scale_the_keypoints() -> None:
    p = synthpose_params(split="private", n=5, seed=3)
    _, kp64, _, box64 = render_pose(p, size=64, device="cpu")
    img128, kp128, _, box128 = render_pose(p, size=128, device="cpu")
    assert img128.shape == (5, 3, 128, 128)
    # Same figure, twice the pixels: keypoints scale about the pixel-centre origin.
    torch.testing.assert_close(kp128 + 0.5, 2 * (kp64 + 0.5), atol=1e-3, rtol=1e-5)
    torch.testing.assert_close(box128[:, 2:] - box128[:, :2], 2 * (box64[:, 2:] - box64[:, :2]), atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "error", "argument"),
    [
        ({"n": 0}, InvalidArgumentError, "n"),
        ({"n": -3}, InvalidArgumentError, "n"),
        ({"n": 2.5}, InvalidArgumentError, "n"),
        ({"size": 16}, InvalidArgumentError, "size"),
        ({"size": 4096}, InvalidArgumentError, "size"),
        ({"split": "train"}, UnknownNameError, "split"),
        ({"seed": -1}, InvalidArgumentError, "seed"),
        ({"n_identities": 0}, InvalidArgumentError, "n_identities"),
        ({"start": -1}, InvalidArgumentError, "start"),
        ({"device": "tpu"}, UnknownNameError, "device"),
    ],
)
def test_bad_inputs_raise_named_errors(kwargs: dict, error: type, argument: str) -> None:
    args = {"n": 2, "size": 32, "device": "cpu", **kwargs}
    with pytest.raises(error) as info:
        load_synthpose(**args)
    assert argument in str(info.value)
    assert isinstance(info.value, PrivkitError) and isinstance(info.value, ValueError)


def test_bad_inputs_of_the_lower_level_functions() -> None:
    g = torch.Generator().manual_seed(0)
    with pytest.raises(InvalidArgumentError, match="n"):
        sample_pose_params(0, generator=g, style="photo")
    with pytest.raises(UnknownNameError, match="style"):
        sample_pose_params(2, generator=g, style="anime")
    with pytest.raises(InvalidArgumentError, match="generator"):
        sample_pose_params(2, generator=0, style="photo")  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="identity"):
        sample_pose_params(2, generator=g, style="photo", identity=torch.arange(3))
    with pytest.raises(InvalidArgumentError, match="identity"):
        identity_traits(torch.tensor([-1]), style="photo")
    p = sample_pose_params(2, generator=g, style="photo")
    assert torch.equal(p.identity, torch.tensor([-1, -1]))
    with pytest.raises(InvalidArgumentError, match="size"):
        render_pose(p, size=8, device="cpu")
    with pytest.raises(UnknownNameError, match="style"):
        render_pose(p, size=32, device="cpu", style="sketch")
    with pytest.raises(InvalidArgumentError, match="params"):
        render_pose({"angles": p.angles}, size=32, device="cpu")  # type: ignore[arg-type]
