"""Tests of the identity-labelled face sets: lfw-subset-views, synthfaces and identity splits."""

from __future__ import annotations

import math

import pytest
import torch

from privkit.data.faces import (
    LFW_N_FACES,
    N_SCENES,
    assign_scenes,
    boxes_from_masks,
    keyed_gaussian_noise,
    load_lfw_subset_views,
    render_backgrounds,
)
from privkit.data.splits import identity_splits, split_faceset
from privkit.data.synthfaces import (
    IDENTITY_ATTRIBUTES,
    IDENTITY_PARAM_KEYS,
    IMAGE_ATTRIBUTES,
    index_params,
    load_synthfaces,
    render_synthfaces,
    sample_identity_params,
    sample_nuisance_params,
    synthface_attributes,
)
from privkit.data.types import FaceSet
from privkit.errors import InsufficientDataError, InvalidArgumentError, ShapeError, UnknownNameError


SMALL = {
    "lfw": dict(n_identities=10, images_per_identity=4, size=32),
    "synth": dict(n_identities=24, images_per_identity=4, size=32),
}
LOADERS = {"lfw": load_lfw_subset_views, "synth": load_synthfaces}


def _load(kind: str, **kw) -> FaceSet:
    args = dict(SMALL[kind], device="cpu")
    args.update(kw)
    return LOADERS[kind](**args)


@pytest.fixture(scope="module", params=["lfw", "synth"])
def kind_and_set(request) -> tuple[str, FaceSet]:
    return request.param, _load(request.param, seed=3)


# ------------------------------------------------------------------------------------------------ structure
def test_shapes_dtypes_and_ranges(kind_and_set):
    kind, fs = kind_and_set
    n_id, k, size = SMALL[kind]["n_identities"], SMALL[kind]["images_per_identity"], SMALL[kind]["size"]
    n = n_id * k
    assert fs.images.shape == (n, 3, size, size) and fs.images.dtype == torch.float32
    assert fs.mask.shape == (n, 1, size, size) and fs.mask.dtype == torch.bool
    assert fs.box.shape == (n, 4) and fs.box.dtype == torch.float32
    assert fs.identity.shape == (n,) and fs.identity.dtype == torch.int64
    assert fs.context.shape == (n,) and fs.context.dtype == torch.int64
    assert torch.isfinite(fs.images).all()
    assert float(fs.images.min()) >= 0.0 and float(fs.images.max()) <= 1.0
    assert float(fs.images.std()) > 0.05  # not a blank image
    assert torch.equal(torch.bincount(fs.identity), torch.full((n_id,), k))
    assert int(fs.context.min()) >= 0 and int(fs.context.max()) < N_SCENES
    assert fs.name == ("lfw-subset-views" if kind == "lfw" else "synthfaces")
    assert len(fs.attributes) >= 1
    for name, v in fs.attributes.items():
        assert v.shape == (n,) and v.dtype == torch.int64, name
        assert int(v.min()) >= 0, name
    assert torch.equal(fs.attributes["background"], fs.context)


def test_attribute_label_ranges():
    fs = _load("synth", seed=1, n_identities=40, images_per_identity=3)
    expected_max = {"hair_colour": 5, "hair_style": 4, "skin_tone_bucket": 3, "eye_colour": 3, "facial_hair": 3,
                    "glasses": 1, "hat": 1, "smiling": 1, "mouth_open": 1, "brows_raised": 1, "yaw": 2,
                    "lighting": 2, "blur": 2, "background": N_SCENES - 1}
    assert set(fs.attributes) == set(IDENTITY_ATTRIBUTES) | set(IMAGE_ATTRIBUTES)
    for name, hi in expected_max.items():
        assert int(fs.attributes[name].max()) <= hi, name
    # identity-fixed attributes are constant within an identity; per-image ones vary within some identity
    for name in IDENTITY_ATTRIBUTES:
        for i in range(40):
            assert fs.attributes[name][fs.identity == i].unique().numel() == 1, name
    assert any(fs.attributes["yaw"][fs.identity == i].unique().numel() > 1 for i in range(40))
    lfw = _load("lfw", seed=1)
    assert set(lfw.attributes) == {"lighting", "occluded", "blur", "pose", "flipped", "background"}
    assert int(lfw.attributes["lighting"].max()) <= 2 and int(lfw.attributes["occluded"].max()) <= 1


def test_box_is_bounding_box_of_mask(kind_and_set):
    _, fs = kind_and_set
    size = fs.images.shape[-1]
    assert (fs.box[:, 0] >= 0).all() and (fs.box[:, 1] >= 0).all()
    assert (fs.box[:, 2] <= size).all() and (fs.box[:, 3] <= size).all()
    assert (fs.box[:, 2] > fs.box[:, 0]).all() and (fs.box[:, 3] > fs.box[:, 1]).all()
    for i in range(len(fs)):
        ys, xs = torch.nonzero(fs.mask[i, 0], as_tuple=True)
        assert ys.numel() > 0
        ref = torch.tensor([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], dtype=torch.float32)
        assert (fs.box[i] - ref).abs().max() <= 1.0


def test_face_coverage_ratio_spans_a_sensible_range():
    for kind, lo, hi in (("lfw", 0.03, 0.75), ("synth", 0.01, 0.75)):
        fs = _load(kind, seed=5, images_per_identity=6)
        fcr = fs.face_coverage_ratio()
        assert float(fcr.min()) > lo and float(fcr.max()) < hi, (kind, fcr.min(), fcr.max())
        assert float(fcr.max() - fcr.min()) > 0.2, kind  # face size varies a lot


def test_boxes_from_masks_exact_and_empty():
    m = torch.zeros(2, 1, 10, 12, dtype=torch.bool)
    m[0, 0, 2:5, 3:9] = True
    assert boxes_from_masks(m).tolist() == [[3.0, 2.0, 9.0, 5.0], [0.0, 0.0, 0.0, 0.0]]


def test_face_pixels_differ_from_context():
    # The face region must look different from its surroundings (a face was drawn there).
    fs = _load("synth", seed=2)
    g = fs.images.mean(1)
    inside = (g * fs.mask[:, 0]).sum((1, 2)) / fs.mask[:, 0].sum((1, 2))
    skin_like = fs.images[:, 0] > fs.images[:, 2]  # red above blue: true of every skin tone in the palette
    frac_in = (skin_like & fs.mask[:, 0]).sum() / fs.mask.sum()
    frac_out = (skin_like & ~fs.mask[:, 0]).sum() / (~fs.mask).sum()
    assert float(frac_in) > 0.8 and float(frac_in) > float(frac_out) + 0.2
    assert torch.isfinite(inside).all()


# ------------------------------------------------------------------------------------------------ determinism
@pytest.mark.parametrize("kind", ["lfw", "synth"])
def test_same_seed_same_tensors_different_seed_different(kind):
    a, b, c = _load(kind, seed=11), _load(kind, seed=11), _load(kind, seed=12)
    for field in ("images", "mask", "box", "identity", "context"):
        assert torch.equal(getattr(a, field), getattr(b, field)), field
    for name in a.attributes:
        assert torch.equal(a.attributes[name], b.attributes[name])
    assert not torch.equal(a.images, c.images)
    assert not torch.equal(a.box, c.box)


def test_synth_render_does_not_depend_on_batching():
    g = torch.Generator().manual_seed(0)
    ip = index_params(sample_identity_params(3, generator=g), torch.tensor([0, 1, 2, 0, 1, 2, 0]))
    nui = sample_nuisance_params(7, generator=g)
    a = render_synthfaces(ip, nui, size=32, device="cpu", batch_size=7)
    b = render_synthfaces(ip, nui, size=32, device="cpu", batch_size=2)
    for x, y in zip(a, b):
        assert torch.equal(x, y)
    attrs = synthface_attributes(ip, nui)
    assert torch.equal(attrs["glasses"], nui["glasses"])


def test_keyed_noise_is_standard_normal_and_keyed():
    keys = torch.arange(64) * 7919 + 13
    z = keyed_gaussian_noise(keys, (3, 16, 16), device=torch.device("cpu"))
    assert z.shape == (64, 3, 16, 16)
    assert abs(float(z.mean())) < 0.03 and abs(float(z.std()) - 1) < 0.03
    assert torch.equal(keyed_gaussian_noise(keys[5:9], (3, 16, 16), device=torch.device("cpu")), z[5:9])
    corr = torch.corrcoef(z.flatten(1))
    assert float((corr - torch.eye(64)).abs().max()) < 0.25  # distinct keys: unrelated fields


def test_backgrounds_fixed_per_scene():
    sc = torch.tensor([0, 5, 63, 5])
    jit = torch.zeros(4, 3)
    bg = render_backgrounds(sc, jit, size=32, device="cpu")
    assert bg.shape == (4, 3, 32, 32) and float(bg.min()) >= 0 and float(bg.max()) <= 1
    assert torch.equal(bg[1], bg[3])
    assert not torch.equal(bg[0], bg[1])


# ------------------------------------------------------------------------------------------------ splits
def test_identity_splits_disjoint_and_covering():
    ident = torch.arange(50).repeat_interleave(3)[torch.randperm(150, generator=torch.Generator().manual_seed(0))]
    parts = identity_splits(ident, seed=4)
    assert [len(parts[k]) for k in ("train", "val", "test")] == [30, 10, 10]
    allids = torch.cat(list(parts.values()))
    assert allids.unique().numel() == 50 and torch.equal(allids.sort().values, torch.arange(50))
    # depends on the set of ids only, and on the seed
    again = identity_splits(torch.arange(50).flip(0), seed=4)
    assert all(torch.equal(parts[k], again[k]) for k in parts)
    other = identity_splits(ident, seed=5)
    assert not torch.equal(parts["train"], other["train"])
    # rounding keeps every identity
    odd = identity_splits(torch.arange(7), fractions=(0.5, 0.25, 0.25), seed=0)
    assert sum(len(v) for v in odd.values()) == 7 and all(len(v) >= 1 for v in odd.values())
    counts = identity_splits(torch.arange(100, 200), counts=(20, 5, 5), seed=1)
    assert [len(counts[k]) for k in ("train", "val", "test")] == [20, 5, 5]
    assert int(torch.cat(list(counts.values())).unique().numel()) == 30


def test_identity_splits_errors():
    with pytest.raises(InvalidArgumentError, match="sum to 1"):
        identity_splits(torch.arange(10), fractions=(0.5, 0.2, 0.2))
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        identity_splits(torch.arange(10), fractions=(1.2, -0.1, -0.1))
    with pytest.raises(InsufficientDataError):
        identity_splits(torch.arange(10), counts=(8, 2, 2))
    with pytest.raises(InsufficientDataError):
        identity_splits(torch.arange(2), seed=0)
    with pytest.raises(InvalidArgumentError, match="integer"):
        identity_splits(torch.rand(5))
    with pytest.raises(InvalidArgumentError, match="not both"):
        identity_splits(torch.arange(10), fractions=(1, 0, 0), counts=(1, 1, 1))


@pytest.mark.parametrize("kind", ["lfw", "synth"])
def test_loader_splits_are_disjoint_rows_of_the_full_set(kind):
    full = _load(kind, seed=7)
    parts = {s: _load(kind, seed=7, split=s) for s in ("train", "val", "test")}
    ids = {s: set(p.identity.tolist()) for s, p in parts.items()}
    assert not (ids["train"] & ids["val"]) and not (ids["train"] & ids["test"]) and not (ids["val"] & ids["test"])
    assert set().union(*ids.values()) == set(full.identity.tolist())
    assert sum(len(p) for p in parts.values()) == len(full)
    for s, p in parts.items():
        rows = torch.isin(full.identity, p.identity.unique())
        assert torch.equal(p.images, full.images[rows]), s  # pixel-identical to the full set's rows
        assert torch.equal(p.mask, full.mask[rows]) and torch.equal(p.context, full.context[rows])
        assert p.meta["split"] == s
    ref = split_faceset(full, "val", seed=7)
    assert torch.equal(ref.images, parts["val"].images)


def test_split_faceset_relabel_and_all():
    fs = _load("lfw", seed=0)
    same = split_faceset(fs, "all")
    assert torch.equal(same.images, fs.images) and same.meta["split"] == "all"
    tr = split_faceset(fs, "train", seed=2, relabel=True)
    assert torch.equal(tr.identity.unique(), torch.arange(tr.n_identities))
    names = torch.tensor(tr.meta["identity_names"])
    assert set(names.tolist()) == set(tr.meta["split_identities"])
    with pytest.raises(UnknownNameError):
        split_faceset(fs, "training")


# ------------------------------------------------------------------------------------------------ context leakage
def test_assign_scenes_leakage_probability():
    n_id, k = 2000, 10
    ident = torch.arange(n_id).repeat_interleave(k)
    for p in (0.0, 0.5, 1.0):
        scene, own = assign_scenes(ident, n_id, p, generator=torch.Generator().manual_seed(1))
        frac = float((scene == own[ident]).double().mean())
        expect = p + (1 - p) / N_SCENES
        sd = math.sqrt(expect * (1 - expect) / ident.numel()) + 1e-12
        assert abs(frac - expect) <= 5 * sd + 1e-9, (p, frac, expect)
    # p = 0: scene independent of identity (chi-square over identity groups x scenes is unremarkable)
    scene, _ = assign_scenes(ident, n_id, 0.0, generator=torch.Generator().manual_seed(2))
    grp = ident // 200  # 10 groups of 200 identities
    table = torch.zeros(10, N_SCENES, dtype=torch.float64)
    table.index_put_((grp, scene), torch.ones_like(scene, dtype=torch.float64), accumulate=True)
    exp = table.sum(1, keepdim=True) * table.sum(0, keepdim=True) / table.sum()
    chi2 = float(((table - exp) ** 2 / exp).sum())
    dof = 9 * (N_SCENES - 1)
    assert chi2 < dof + 6 * math.sqrt(2 * dof)


@pytest.mark.parametrize("kind", ["lfw", "synth"])
def test_context_leakage_in_loaders(kind):
    one = _load(kind, seed=9, context_leakage=1.0)
    own = torch.tensor(one.meta["identity_scene"])
    assert torch.equal(one.context, own[one.identity])  # context is a function of identity
    zero = _load(kind, seed=9, context_leakage=0.0)
    own0 = torch.tensor(zero.meta["identity_scene"])
    hits = int((zero.context == own0[zero.identity]).sum())
    assert hits <= 8  # expected len/64 < 2
    per_id = [zero.context[zero.identity == i].unique().numel() for i in zero.identity.unique().tolist()]
    assert sum(per_id) / len(per_id) > 2.5  # several different backgrounds per identity


# ------------------------------------------------------------------------------------------------ bad inputs
@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(n_identities=LFW_N_FACES + 1), InvalidArgumentError),
        (dict(n_identities=0), InvalidArgumentError),
        (dict(images_per_identity=0), InvalidArgumentError),
        (dict(split="training"), UnknownNameError),
        (dict(size=16), InvalidArgumentError),
        (dict(context_leakage=1.5), InvalidArgumentError),
        (dict(context_leakage=float("nan")), InvalidArgumentError),
        (dict(seed=-1), InvalidArgumentError),
        (dict(images_per_identity=2.5), InvalidArgumentError),
        (dict(device="tpu"), UnknownNameError),
    ],
)
def test_lfw_bad_inputs(kwargs, error):
    args = dict(n_identities=3, images_per_identity=1, size=32, device="cpu")
    args.update(kwargs)
    with pytest.raises(error) as info:
        load_lfw_subset_views(**args)
    assert isinstance(info.value, ValueError)
    name = next(iter(kwargs))
    assert name.split("_")[0] in str(info.value)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        (dict(n_identities=0), InvalidArgumentError),
        (dict(images_per_identity=0), InvalidArgumentError),
        (dict(split="dev"), UnknownNameError),
        (dict(size=31), InvalidArgumentError),
        (dict(context_leakage=-0.1), InvalidArgumentError),
        (dict(n_identities=2, split="test"), InsufficientDataError),
    ],
)
def test_synth_bad_inputs(kwargs, error):
    args = dict(n_identities=3, images_per_identity=1, size=32, device="cpu")
    args.update(kwargs)
    with pytest.raises(error):
        load_synthfaces(**args)


def test_render_synthfaces_bad_params():
    g = torch.Generator().manual_seed(0)
    ip = sample_identity_params(3, generator=g)
    nui = sample_nuisance_params(4, generator=g)
    with pytest.raises(ShapeError, match="rows"):
        render_synthfaces(ip, nui, size=32, device="cpu")
    missing = {k: v for k, v in ip.items() if k != "face_w"}
    with pytest.raises(InvalidArgumentError, match="face_w"):
        render_synthfaces(missing, sample_nuisance_params(3, generator=g), size=32, device="cpu")
    with pytest.raises(InvalidArgumentError, match="scene"):
        sample_nuisance_params(2, generator=g, scene=torch.tensor([0, N_SCENES]))
    with pytest.raises(InvalidArgumentError, match="generator"):
        sample_identity_params(2, generator=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="size"):
        render_synthfaces(ip, sample_nuisance_params(3, generator=g), size=8, device="cpu")
    assert set(IDENTITY_PARAM_KEYS) == set(ip)


def test_nuisance_strength_zero_gives_identical_faces_per_identity():
    fs = _load("synth", seed=4, n_identities=6, images_per_identity=3, nuisance_strength=0.0)
    full = _load("synth", seed=4, n_identities=6, images_per_identity=3)
    assert torch.equal(fs.identity, full.identity) and torch.equal(fs.context, full.context)
    inner = -torch.nn.functional.max_pool2d(-fs.mask[:, 0].float(), 5, stride=1, padding=2)  # eroded mask
    for i in range(6):
        rows = (fs.identity == i).nonzero().flatten()
        assert all(torch.equal(fs.mask[rows[0]], fs.mask[r]) for r in rows[1:])
        m = inner[rows[0]].bool()
        assert all(torch.allclose(fs.images[rows[0]][:, m], fs.images[r][:, m], atol=1e-5) for r in rows[1:])
        assert not all(torch.equal(full.mask[rows[0]], full.mask[r]) for r in rows[1:])
    assert int(fs.attributes["glasses"].sum()) == 0 and int(fs.attributes["blur"].sum()) == 0
    with pytest.raises(InvalidArgumentError, match="nuisance_strength"):
        _load("synth", nuisance_strength=1.5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    a = _load("synth", seed=1)
    b = _load("synth", seed=1, device="cuda")
    assert b.images.device.type == "cuda"
    assert torch.equal(a.identity, b.identity.cpu()) and torch.equal(a.context, b.context.cpu())
    assert float((a.images - b.images.cpu()).abs().mean()) < 2e-3
    assert float((a.mask != b.mask.cpu()).float().mean()) < 1e-3
