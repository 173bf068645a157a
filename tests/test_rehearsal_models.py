"""The rehearsal data root's MPII, MovieLens and paper-scale weights, read back with the real loaders."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from privkit.data.paper.movielens import load_movielens_100k
from privkit.data.paper.mpii import load_mpii
from privkit.reproduce import rehearsal_tool
from privkit.errors import InvalidArgumentError, PrivkitError, UnknownNameError, WeightFileError

_models = rehearsal_tool().models  # a repository tool (tools/rehearsal/), loaded from its folder
MARKER = _models.MARKER
REHEARSAL_MODELS = _models.REHEARSAL_MODELS
write_clip_rehearsal = _models.write_clip_rehearsal
write_dinov2_rehearsal = _models.write_dinov2_rehearsal
write_inception_rehearsal = _models.write_inception_rehearsal
write_model_rehearsal_root = _models.write_model_rehearsal_root
write_movielens = _models.write_movielens
write_mpii = _models.write_mpii
write_sscd_rehearsal = _models.write_sscd_rehearsal
write_tiny_vit_rehearsal = _models.write_tiny_vit_rehearsal



def _marked(folder: Path) -> bool:
    return (folder / "REHEARSAL.txt").read_text().splitlines()[0] == MARKER


def _truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _check_embeddings(z: torch.Tensor, n: int, dim: int) -> None:
    assert z.shape == (n, dim) and z.dtype == torch.float32 and torch.isfinite(z).all()
    torch.testing.assert_close(z.norm(dim=1), torch.ones(n), atol=1e-4, rtol=0)
    assert (z[0] - z[1]).abs().max() > 1e-4  # different images, different embeddings


# ------------------------------------------------------------------------------------------------------------ MPII
@pytest.fixture(scope="module")
def mpii_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("mpii_root")
    summary = write_mpii(root, n_train=6, n_valid=5, size=64, seed=3)
    return root, summary


def test_mpii_valid_split_matches_the_renderer(mpii_root):
    from PIL import Image

    from privkit.data.pose import load_synthpose

    root, summary = mpii_root
    assert summary["n_train"] == 6 and summary["n_valid"] == 5 and summary["bytes"] > 0 and _marked(root / "mpii")
    ref = load_synthpose(split="private", n=11, seed=3, size=64, device="cpu")
    out = 48
    pose = load_mpii(root, split="valid", size=out, head_boxes="mat")
    assert len(pose) == 5 and pose.images.shape == (5, 3, out, out) and "gt_valid.mat" in pose.meta["head_box_source"]
    assert pose.meta["files"] == [f"{i:09d}.jpg" for i in range(7, 12)]
    for k in range(5):
        src = 6 + k
        x0, y0, x1, y1 = pose.meta["windows"][k]
        side = x1 - x0
        assert side == y1 - y0 and side > 0
        vis = ref.visible[src]
        assert torch.equal(pose.visible[k], vis)
        # keypoints: the renderer's, mapped by the crop window (the JSON's 1-based values round to 1e-4 px)
        expect = (ref.keypoints[src].double() - torch.tensor([x0, y0]) + 0.5) * out / side - 0.5
        torch.testing.assert_close(pose.keypoints[k][vis].double(), expect[vis], atol=1e-3, rtol=0)
        assert pose.keypoints[k][~vis].eq(0).all()
        assert ((pose.keypoints[k][vis] > 0) & (pose.keypoints[k][vis] < out)).all()  # inside the crop
        hb = (ref.head_box[src].double().view(2, 2) - torch.tensor([x0, y0]) + 0.5) * out / side - 0.5
        torch.testing.assert_close(pose.head_box[k].double(), hb.reshape(4), atol=1e-3, rtol=0)
        # the pixels: the rendered figure, cropped by the same window (black outside), up to JPEG noise
        pixels = (ref.images[src].clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).numpy()
        crop = Image.fromarray(pixels).crop((x0, y0, x1, y1)).resize((out, out), Image.Resampling.BILINEAR)
        expected_img = torch.from_numpy(np.asarray(crop, dtype=np.float32) / 255).permute(2, 0, 1)
        assert (pose.images[k] - expected_img).abs().mean() < 0.03
    # every visible joint of the whole split lies inside its crop
    inside = (pose.keypoints >= 0) & (pose.keypoints < out)
    assert inside.all(-1)[pose.visible].all() and pose.visible.any()


def test_mpii_json_and_mat_follow_the_hrnet_conventions(mpii_root):
    from scipy.io import loadmat

    from privkit.data.pose import load_synthpose

    root, _ = mpii_root
    ref = load_synthpose(split="private", n=11, seed=3, size=64, device="cpu")
    annot = root / "mpii" / "annot"
    train = json.loads((annot / "train.json").read_text())
    valid = json.loads((annot / "valid.json").read_text())
    assert len(train) == 6 and len(valid) == 5
    assert json.loads((annot / "trainval.json").read_text()) == train + valid
    for i, e in enumerate(train + valid):
        assert set(e) == {"image", "center", "scale", "joints", "joints_vis"}
        joints = torch.tensor(e["joints"], dtype=torch.float64)
        torch.testing.assert_close(joints - 1.0, ref.keypoints[i].double(), atol=1e-4, rtol=0)  # 1-based
        assert e["joints_vis"] == ref.visible[i].int().tolist()
        # the loader's crop centre (centre + 15 s, 0-based) is the middle of the keypoints' box
        lo, hi = ref.keypoints[i].double().min(0).values, ref.keypoints[i].double().max(0).values
        centre = torch.tensor(e["center"]) + torch.tensor([0.0, 15.0 * e["scale"]]) - 1.0
        torch.testing.assert_close(centre.double(), (lo + hi) / 2, atol=1e-3, rtol=0)
        assert e["scale"] == pytest.approx(1.1 * max(float((hi - lo).max()), 8.0) / 200, rel=1e-5)
    mat = loadmat(annot / "gt_valid.mat")
    assert mat["headboxes_src"].shape == (2, 2, 5) and mat["pos_gt_src"].shape == (16, 2, 5)
    assert mat["jnt_missing"].shape == (16, 5) and mat["dataset_joints"].shape == (1, 16)
    assert [str(np.asarray(n).reshape(-1)[0]) for n in mat["dataset_joints"][0]][8:10] == ["neck", "head"]
    np.testing.assert_allclose(mat["pos_gt_src"][:, :, 0], ref.keypoints[6].double().numpy() + 1, atol=1e-4)
    np.testing.assert_array_equal(mat["jnt_missing"][:, 0], (~ref.visible[6]).numpy().astype(float))
    # the training split has no head boxes in HRNet's files: the loader falls back to the joints
    tr = load_mpii(root, split="train", size=32)
    assert "upper-neck" in tr.meta["head_box_source"] and len(tr) + tr.meta["dropped_no_head_box"] == 6
    assert len(load_mpii(root, split="trainval", size=32, head_boxes="joints")) <= 11


def test_mpii_writer_refuses_foreign_folders_and_bad_arguments(tmp_path):
    (tmp_path / "mpii").mkdir()
    (tmp_path / "mpii" / "mine.txt").write_text("real data")
    with pytest.raises(InvalidArgumentError, match="not privkit rehearsal data"):
        write_mpii(tmp_path, n_train=1, n_valid=1, size=32)
    assert (tmp_path / "mpii" / "mine.txt").read_text() == "real data"
    with pytest.raises(InvalidArgumentError):
        write_mpii(tmp_path / "other", n_train=0, n_valid=1)
    with pytest.raises(InvalidArgumentError):
        write_mpii(tmp_path / "other", n_train=1, n_valid=1, size=16)
    # a rehearsal folder is replaced as a whole (no stale images of a larger earlier write)
    write_mpii(tmp_path / "again", n_train=3, n_valid=2, size=32, seed=1)
    write_mpii(tmp_path / "again", n_train=1, n_valid=1, size=32, seed=1)
    assert len(list((tmp_path / "again" / "mpii" / "images").iterdir())) == 2


# ------------------------------------------------------------------------------------------------------- MovieLens
def test_movielens_round_trip_and_official_split_structure(tmp_path):
    summary = write_movielens(tmp_path, n_users=40, n_items=80, n_ratings=1600, seed=1)
    assert summary["n_ratings"] == 1600 and all(c > 0 for c in summary["rating_counts"].values())
    base = tmp_path / "ml-100k"
    assert _marked(base) and (base / "u.info").read_text().splitlines() == ["40 users", "80 items", "1600 ratings"]
    tests = []
    for fold in ("u1", "u2", "u3", "u4", "u5"):
        ml = load_movielens_100k(tmp_path, fold=fold)
        assert ml.ratings.shape == (40, 80) and ml.meta["n_ratings"] == 1600
        assert torch.equal(ml.train + ml.test, ml.ratings)  # base and test partition u.data
        assert ml.meta["n_test"] == 320
        tests.append(ml.test > 0)
    assert torch.equal(torch.stack(tests).sum(0), (ml.ratings > 0).long())  # the five test folds partition u.data
    ua, ub = load_movielens_100k(tmp_path, fold="ua"), load_movielens_100k(tmp_path, fold="ub")
    assert (ua.test > 0).sum(1).eq(10).all() and (ub.test > 0).sum(1).eq(10).all()
    assert not ((ua.test > 0) & (ub.test > 0)).any() and torch.equal(ua.train + ua.test, ua.ratings)
    assert (ua.ratings > 0).sum(1).min() >= 20
    # u.data: tab-separated user item rating timestamp; split files sorted by user then item
    first = (base / "u.data").read_text().splitlines()[0].split("\t")
    assert len(first) == 4 and 1 <= int(first[2]) <= 5 and int(first[3]) > 8e8
    rows = [tuple(map(int, ln.split("\t")[:2])) for ln in (base / "u1.test").read_text().splitlines()]
    assert rows == sorted(rows)
    # same seed, same files
    write_movielens(tmp_path / "b", n_users=40, n_items=80, n_ratings=1600, seed=1)
    assert (tmp_path / "b" / "ml-100k" / "u.data").read_bytes() == (base / "u.data").read_bytes()


def test_movielens_ratings_carry_structure(tmp_path):
    write_movielens(tmp_path, n_users=120, n_items=300, n_ratings=6000, seed=0)
    ml = load_movielens_100k(tmp_path, fold="u1")
    train, test = ml.train.double(), ml.test.double()
    seen, held = train > 0, test > 0
    mu = train[seen].mean()
    user = torch.where(seen, train - mu, 0).sum(1) / (seen.sum(1) + 5)
    item = torch.where(seen, train - mu - user[:, None], 0).sum(0) / (seen.sum(0) + 5)
    pred = (mu + user[:, None] + item[None, :]).clamp(1, 5)
    rmse_bias = ((pred - test)[held] ** 2).mean().sqrt()
    rmse_mean = ((mu - test)[held] ** 2).mean().sqrt()
    assert rmse_bias < 0.9 * rmse_mean  # user and item effects: not noise
    # the residual has low-rank structure: a rank-5 fit of the training residual predicts held-out residuals
    resid = torch.where(seen, train - pred, 0)
    u, s, v = torch.linalg.svd(resid / seen.double().mean(), full_matrices=False)
    low = (u[:, :5] * s[:5]) @ v[:5]
    rmse_low = ((pred + 0.5 * low - test)[held] ** 2).mean().sqrt()
    assert rmse_low < rmse_bias


def test_movielens_rejects_bad_sizes(tmp_path):
    with pytest.raises(InvalidArgumentError, match="n_ratings"):
        write_movielens(tmp_path, n_users=10, n_items=50, n_ratings=100)  # fewer than 20 per user
    with pytest.raises(InvalidArgumentError, match="n_items"):
        write_movielens(tmp_path, n_users=10, n_items=10, n_ratings=100)


# ------------------------------------------------------------------------------------------------------- weights
def _images(n: int = 3) -> torch.Tensor:
    return torch.rand(n, 3, 72, 96, generator=torch.Generator().manual_seed(5))


@pytest.mark.slow
def test_clip_rehearsal_loads_with_the_real_loader_and_bad_files_are_named(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from privkit.encoders.paper_scale import find_weights, load_clip_vit_b16

    summary = write_clip_rehearsal(tmp_path, seed=0)
    folder = tmp_path / "weights" / "clip-vit-b16"
    assert find_weights("clip-vit-b16", data_root=tmp_path) == folder and _marked(folder)
    assert summary["bytes"] < 5e6
    with safe_open(str(folder / "open_clip_model.safetensors"), "pt") as fh:
        assert MARKER in fh.metadata()
    assert "privkit_rehearsal" in json.loads((folder / "open_clip_config.json").read_text())
    enc = load_clip_vit_b16(data_root=tmp_path)
    assert enc.dim == 512 and enc.input_size == (224, 224)  # the registry's dimension and input size
    _check_embeddings(enc.embed(_images()), 3, 512)
    # wrong architecture: a missing key, a wrong shape, a truncated file -> a privkit error naming the file
    state = load_file(str(folder / "open_clip_model.safetensors"))
    bad = tmp_path / "bad"
    for change in ("missing", "shape", "truncated"):
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(folder, bad)
        if change == "missing":
            save_file({k: v for k, v in state.items() if k != "visual.proj"}, str(bad / "open_clip_model.safetensors"))
        elif change == "shape":
            save_file({**state, "visual.conv1.weight": torch.zeros(64, 3, 8, 8, dtype=torch.float16)},
                      str(bad / "open_clip_model.safetensors"))
        else:
            _truncate(bad / "open_clip_model.safetensors")
        with pytest.raises(InvalidArgumentError) as err:
            load_clip_vit_b16(weights=bad)
        msg = str(err.value)
        assert str(bad / "open_clip_model.safetensors") in msg and "open_clip_config.json" in msg
        assert isinstance(err.value, WeightFileError) and isinstance(err.value, PrivkitError)


@pytest.mark.parametrize("arch, dim", [("vits14", 384), ("vitb14", 768)])
def test_dinov2_rehearsal_loads_through_the_stand_in_checkout(tmp_path, arch, dim):
    from privkit.encoders.paper_scale import load_dinov2

    summary = write_dinov2_rehearsal(tmp_path, arch=arch, seed=0)
    folder, checkout = tmp_path / "weights" / f"dinov2-{arch}", tmp_path / "weights" / "dinov2"
    assert _marked(folder) and _marked(checkout) and (checkout / "hubconf.py").is_file()
    state = torch.load(folder / f"dinov2_{arch}_pretrain.pth", weights_only=True)
    assert state["pos_embed"].shape == (1, 1 + 37 * 37, dim) and state["cls_token"].shape == (1, 1, dim)
    assert state["blocks.0.attn.qkv.weight"].shape == (3 * dim, dim) and state["blocks.0.ls1.gamma"].shape == (dim,)
    assert state["patch_embed.proj.weight"].shape == (dim, 3, 14, 14) and "mask_token" in state
    assert summary["bytes"] < 20e6
    enc = load_dinov2(arch, data_root=tmp_path)
    assert enc.dim == dim and enc.model.rehearsal and enc.input_size == (224, 224)
    _check_embeddings(enc.embed(_images()), 3, dim)
    torch.testing.assert_close(enc.model.pos_embed.detach(), state["pos_embed"].float())
    # a truncated .pth is named before the checkout's code runs (this hubconf would fail loudly)
    bad = tmp_path / "bad"
    (bad / "dinov2").mkdir(parents=True)
    (bad / "dinov2" / "hubconf.py").write_text("raise SystemExit('the checkout ran')\n")
    shutil.copy(folder / f"dinov2_{arch}_pretrain.pth", bad / f"dinov2_{arch}_pretrain.pth")
    _truncate(bad / f"dinov2_{arch}_pretrain.pth")
    with pytest.raises(InvalidArgumentError, match=f"dinov2_{arch}_pretrain.pth: cannot read a DINOv2 {arch}"):
        load_dinov2(arch, weights=bad / f"dinov2_{arch}_pretrain.pth")
    # a state dict of the wrong shape is named with the checkout that could not take it
    shutil.rmtree(bad / "dinov2")
    shutil.copytree(checkout, bad / "dinov2")
    torch.save({**state, "blocks.0.mlp.fc1.weight": state["blocks.0.mlp.fc1.weight"][:-1]},
               bad / f"dinov2_{arch}_pretrain.pth")
    with pytest.raises(InvalidArgumentError, match="does not fit the dinov2_.* network built by") as err:
        load_dinov2(arch, weights=bad / f"dinov2_{arch}_pretrain.pth")
    assert str(bad / f"dinov2_{arch}_pretrain.pth") in str(err.value) and isinstance(err.value, WeightFileError)


def test_dinov2_writer_never_overwrites_a_real_checkout(tmp_path):
    (tmp_path / "weights" / "dinov2").mkdir(parents=True)
    (tmp_path / "weights" / "dinov2" / "hubconf.py").write_text("# a real checkout\n")
    with pytest.raises(InvalidArgumentError, match="not privkit rehearsal data"):
        write_dinov2_rehearsal(tmp_path, arch="vits14")
    assert (tmp_path / "weights" / "dinov2" / "hubconf.py").read_text() == "# a real checkout\n"
    with pytest.raises(UnknownNameError, match="vitb14"):
        write_dinov2_rehearsal(tmp_path, arch="vitl14")


def test_sscd_rehearsal_has_the_contract_and_bad_files_are_named(tmp_path):
    from privkit.encoders.paper_scale import find_weights, load_sscd

    summary = write_sscd_rehearsal(tmp_path, seed=0)
    path = find_weights("sscd", data_root=tmp_path)
    assert path.name == "sscd_disc_mixup.torchscript.pt" and summary["bytes"] < 1e6 and _marked(path.parent)
    extra = {f"{MARKER}.txt": ""}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.load(str(path), _extra_files=extra)
    note = extra[f"{MARKER}.txt"]
    assert (note.decode() if isinstance(note, bytes) else note).startswith(MARKER)
    enc = load_sscd(data_root=tmp_path)
    assert enc.dim == 512 and enc.input_size == (288, 288)
    _check_embeddings(enc.embed(_images()), 3, 512)
    bad = tmp_path / "bad.torchscript.pt"
    shutil.copy(path, bad)
    _truncate(bad)
    with pytest.raises(InvalidArgumentError, match="cannot read it as a TorchScript module") as err:
        load_sscd(weights=bad)
    assert str(bad) in str(err.value)

    class Maps(torch.nn.Module):  # the wrong contract: feature maps instead of descriptors
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, :2]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.save(torch.jit.script(Maps()), str(bad))
    with pytest.raises(InvalidArgumentError, match=r"gave \(1, 2, 288, 288\); expected SSCD's contract"):
        load_sscd(weights=bad)


@pytest.mark.slow
def test_tiny_vit_rehearsal_builds_the_dppose_backbone_and_bad_files_are_named(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from privkit.dppose.model import build_pose_model

    summary = write_tiny_vit_rehearsal(tmp_path, seed=0)
    path = tmp_path / "weights" / "tiny_vit_5m" / "model.safetensors"  # where the dppose notebook looks
    assert _marked(path.parent) and 5.0e6 < summary["parameters"] < 6.0e6 and summary["bytes"] < 12e6
    with safe_open(str(path), "pt") as fh:
        assert MARKER in fh.metadata()
    state = load_file(str(path))
    model = build_pose_model(64, backbone="tiny_vit_5m", weights=path, seed=0)
    conv = model.backbone.patch_embed.conv1.conv.weight
    torch.testing.assert_close(conv.detach(), state["patch_embed.conv1.conv.weight"].float())
    model.eval()
    with torch.no_grad():
        lx, ly = model(torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(0)))
    assert lx.shape == (2, 16, 128) and ly.shape == (2, 16, 128) and torch.isfinite(lx).all()
    bad = tmp_path / "bad.safetensors"
    for change in ("shape", "missing", "truncated"):
        if change == "shape":
            save_file({**state, "patch_embed.conv2.conv.weight": torch.zeros(3, 3, 1, 1)}, str(bad))
        elif change == "missing":
            save_file({k: v for k, v in state.items() if not k.startswith("stages.3.")}, str(bad))
        else:
            shutil.copy(path, bad)
            _truncate(bad)
        with pytest.raises(WeightFileError, match="tiny_vit_5m_224") as err:
            build_pose_model(64, backbone="tiny_vit_5m", weights=bad)
        assert str(bad) in str(err.value)


@pytest.mark.slow
def test_inception_rehearsal_loads_strictly_and_gives_finite_features(tmp_path):
    from privkit.synthesisnet import load_inception

    summary = write_inception_rehearsal(tmp_path, seed=0)
    path = tmp_path / "weights" / "inception-v3" / "inception_v3.pth"
    assert _marked(path.parent) and summary["bytes"] < 17e6 and summary["parameters"] > 2.3e7
    net = load_inception(data_root=tmp_path)
    x = _images(4)
    feats = net.features(x)
    assert feats.shape == (4, 2048) and torch.isfinite(feats).all()
    assert feats.std(0).mean() > 1e-3 and 1e-2 < feats.abs().mean() < 1e2  # activations of order 1
    probs = net.probs(x)
    assert probs.shape == (4, 1000) and torch.isfinite(probs).all()
    torch.testing.assert_close(probs.sum(1), torch.ones(4))
    assert probs.max() < 0.9  # logits of order 1, not a one-hot softmax
    bad = tmp_path / "bad" / "inception_v3.pth"
    bad.parent.mkdir()
    shutil.copy(path, bad)
    _truncate(bad)
    with pytest.raises(WeightFileError, match="cannot be read as a torchvision Inception-v3") as err:
        load_inception(weights=bad)
    assert str(bad) in str(err.value)


# ---------------------------------------------------------------------------------------------------- the root
@pytest.mark.slow
def test_model_rehearsal_root_is_complete_small_and_fast(tmp_path):
    from privkit.encoders import list_encoders

    summary = write_model_rehearsal_root(tmp_path, seed=0)
    assert set(summary["weights"]) == set(REHEARSAL_MODELS)
    assert summary["weights_bytes"] < 60 * 2**20 and summary["bytes"] < 62 * 2**20
    assert summary["seconds"] < 120  # about 10 s on two cores; generous for a loaded CI machine
    paper = {i.name: i for i in list_encoders(scale="paper", data_root=tmp_path)}
    assert all(i.available and str(tmp_path) in i.detail for i in paper.values()), paper
    for folder in ["mpii", "ml-100k", *(f"weights/{m}" for m in REHEARSAL_MODELS), "weights/dinov2"]:
        assert _marked(tmp_path / folder), folder
    assert len(load_mpii(tmp_path, split="valid", size=64)) == 32
    assert load_movielens_100k(tmp_path).ratings.shape == (120, 300)
