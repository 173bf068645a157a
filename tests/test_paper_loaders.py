"""Paper-scale dataset loaders, on tiny fixture folders written in each dataset's real on-disk format."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import scipy.io
import torch
from PIL import Image

from privkit.data.paper.celeba import load_celeba, read_celeba_index
from privkit.data.paper.common import default_max_images
from privkit.data.paper.identity_folders import IdentitySelection, load_identity_folders, select_identities
from privkit.data.paper.ijb import load_ijb
from privkit.data.paper.lfw import load_lfw, read_lfw_pairs
from privkit.data.paper.movielens import load_movielens_100k
from privkit.data.paper.mpii import load_mpii
from privkit.data.paper.vggface2 import load_vggface2
from privkit.data.types import FaceSet, PoseSet
from privkit.errors import InsufficientDataError, InvalidArgumentError, MissingResourceError, UnknownNameError

RED, BLUE, GREEN = (230, 20, 20), (20, 20, 230), (20, 200, 20)


def _save(path, img: Image.Image) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jpg":
        img.save(path, quality=95)
    else:
        img.save(path)


def _solid(w, h, colour) -> Image.Image:
    return Image.new("RGB", (w, h), colour)


def _boxed(w, h, box, inside=RED, outside=BLUE) -> Image.Image:
    im = _solid(w, h, outside)
    x0, y0, x1, y1 = box
    im.paste(_solid(x1 - x0, y1 - y0, inside), (x0, y0))
    return im


# ------------------------------------------------------------------------------------------ select_identities
def test_select_identities_counts_and_determinism():
    identity = torch.tensor([5] * 25 + [7] * 19 + [9] * 30 + [3] * 22)
    idx = select_identities(identity, min_images=20, seed=0)
    assert torch.equal(idx, torch.sort(idx).values)
    kept = identity[idx]
    assert set(kept.tolist()) == {3, 5, 9}  # 7 has only 19 images
    assert len(idx) == 25 + 30 + 22

    capped = select_identities(identity, min_images=20, n_identities=2, images_per_identity=20, seed=1)
    ids, counts = identity[capped].unique(return_counts=True)
    assert len(ids) == 2 and counts.tolist() == [20, 20]
    again = select_identities(identity, min_images=20, n_identities=2, images_per_identity=20, seed=1)
    assert torch.equal(capped, again)
    draws = {tuple(select_identities(identity, n_identities=2, images_per_identity=20, seed=s).tolist()) for s in range(6)}
    assert len(draws) > 1  # the seed matters
    g = torch.Generator().manual_seed(1)
    assert torch.equal(select_identities(identity, min_images=20, n_identities=2, images_per_identity=20, seed=g), capped)


def test_select_identities_images_per_identity_raises_threshold():
    identity = torch.tensor([0] * 5 + [1] * 12)
    idx = select_identities(identity, min_images=1, images_per_identity=10, seed=0)
    assert identity[idx].tolist() == [1] * 10


def test_select_identities_errors():
    identity = torch.tensor([0, 0, 1, 1, 1])
    with pytest.raises(InsufficientDataError, match="n_identities"):
        select_identities(identity, min_images=3, n_identities=2, seed=0)
    with pytest.raises(InsufficientDataError):
        select_identities(identity, min_images=4, seed=0)
    with pytest.raises(InvalidArgumentError, match="min_images"):
        select_identities(identity, min_images=0, seed=0)
    with pytest.raises(InvalidArgumentError, match="integer"):
        select_identities(identity.float(), seed=0)
    with pytest.raises(InvalidArgumentError, match="seed"):
        select_identities(identity, seed=1.5)


# ------------------------------------------------------------------------------------------------------ CelebA
ATTRS = ("Smiling", "Male", "Eyeglasses")
# (file, identity, partition, attrs as +-1)
CELEBA_ROWS = [
    ("000001.jpg", 2880, 0, (1, -1, -1)),
    ("000002.jpg", 2880, 0, (-1, -1, 1)),
    ("000003.jpg", 17, 0, (1, 1, -1)),
    ("000004.jpg", 2880, 1, (1, -1, -1)),
    ("000005.jpg", 17, 2, (-1, 1, -1)),
    ("000006.jpg", 17, 2, (-1, 1, 1)),
    ("000007.jpg", 2880, 2, (1, -1, -1)),
    ("000008.jpg", 412, 2, (-1, 1, -1)),
]
W_AL, H_AL = 30, 36  # aligned images (real: 178 x 218)
W_WILD, H_WILD = 60, 40


def _write_celeba(root, *, flat=True, with_optional=True):
    if flat:
        base = anno = ev = root / "celeba"
        img = base / "img_align_celeba"
        wild = base / "img_celeba"
    else:
        anno, ev = root / "CelebA" / "Anno", root / "CelebA" / "Eval"
        img = root / "CelebA" / "Img" / "img_align_celeba"
        wild = root / "CelebA" / "Img" / "img_celeba"
    for d in (anno, ev):
        d.mkdir(parents=True, exist_ok=True)
    shades = {}
    for k, (f, ident, _, _) in enumerate(CELEBA_ROWS):
        shade = (20 + 25 * k, 100, 200 - 20 * k)
        shades[f] = shade
        _save(img / f, _solid(W_AL, H_AL, shade))
        _save(wild / f, _boxed(W_WILD, H_WILD, (10 + k, 5, 30 + k, 25)))
    (anno / "identity_CelebA.txt").write_text("".join(f"{f} {i}\n" for f, i, _, _ in CELEBA_ROWS))
    if with_optional:
        (ev / "list_eval_partition.txt").write_text("".join(f"{f} {p}\n" for f, _, p, _ in CELEBA_ROWS))
        attr = f"{len(CELEBA_ROWS)}\n" + " ".join(ATTRS) + " \n"
        attr += "".join(f"{f} " + " ".join(f"{a:2d}" for a in at) + "\n" for f, _, _, at in CELEBA_ROWS)
        (anno / "list_attr_celeba.txt").write_text(attr)
        bbox = f"{len(CELEBA_ROWS)}\nimage_id x_1 y_1 width height\n"
        bbox += "".join(f"{f}    {10 + k}   5  20  20\n" for k, (f, *_rest) in enumerate(CELEBA_ROWS))
        (anno / "list_bbox_celeba.txt").write_text(bbox)
        lm = f"{len(CELEBA_ROWS)}\nlefteye_x lefteye_y righteye_x righteye_y nose_x nose_y leftmouth_x leftmouth_y rightmouth_x rightmouth_y\n"
        lm += "".join(f"{f} 10 14 20 14 15 19 11 24 19 24\n" for f, *_rest in CELEBA_ROWS)
        (anno / "list_landmarks_align_celeba.txt").write_text(lm)
    return shades


def test_celeba_index_reads_real_syntax(tmp_path):
    _write_celeba(tmp_path, flat=False)  # the official Drive layout
    idx = read_celeba_index(tmp_path)
    assert idx.filenames[0] == "000001.jpg" and len(idx) == len(CELEBA_ROWS)
    assert idx.identity.tolist() == [r[1] for r in CELEBA_ROWS]
    assert idx.partition.tolist() == [r[2] for r in CELEBA_ROWS]
    assert set(idx.attributes) == set(ATTRS)
    assert idx.attributes["Eyeglasses"].tolist() == [int(r[3][2] > 0) for r in CELEBA_ROWS]
    assert idx.attributes["Male"].dtype == torch.int64
    # bbox "x_1 y_1 width height" -> xyxy
    assert idx.bbox[2].tolist() == [12.0, 5.0, 32.0, 25.0]
    assert idx.landmarks.shape == (len(CELEBA_ROWS), 5, 2)


def test_load_celeba_faceset(tmp_path):
    shades = _write_celeba(tmp_path)
    faces = load_celeba(tmp_path, size=16)
    assert isinstance(faces, FaceSet) and len(faces) == len(CELEBA_ROWS)
    assert faces.images.shape == (8, 3, 16, 16) and faces.images.dtype == torch.float32
    assert float(faces.images.min()) >= 0 and float(faces.images.max()) <= 1
    # identities are 0..k-1, names give the CelebA numbers
    names = faces.meta["identity_names"]
    assert sorted(names, key=int) == ["17", "412", "2880"]
    assert [names[i] for i in faces.identity.tolist()] == [str(r[1]) for r in CELEBA_ROWS]
    assert faces.n_identities == 3
    # the pixels of each row come from the right file (each file has its own colour)
    for i, f in enumerate(faces.meta["files"]):
        want = torch.tensor(shades[f], dtype=torch.float32) / 255
        assert torch.allclose(faces.images[i, :, 8, 8], want, atol=0.05)
    assert faces.context.eq(-1).all()
    assert faces.attributes["Smiling"].tolist() == [int(r[3][0] > 0) for r in CELEBA_ROWS]
    # box from the aligned landmarks (privkit's rule), mapped through the 30 x 30 centre crop of 30 x 36
    assert "landmarks" in faces.meta["box_source"]
    d = 10.0
    src = torch.tensor([10 - 0.6 * d, 14 - 1.0 * d, 20 + 0.6 * d, 24 + 0.8 * d])
    off = torch.tensor([0.0, 3.0, 0.0, 3.0])  # the centre crop starts at y = (36 - 30) / 2
    expect = ((src - off) * 16 / 30).clamp(0, 16)
    assert torch.allclose(faces.box[0], expect, atol=1e-4)
    # mask = box: the mask's extent matches the box
    m = faces.mask[0, 0]
    ys, xs = torch.nonzero(m, as_tuple=True)
    assert xs.min() + 0.5 >= expect[0] and xs.max() + 0.5 <= expect[2]
    assert ys.min() + 0.5 >= expect[1] and ys.max() + 0.5 <= expect[3]
    assert 0 < float(faces.face_coverage_ratio()[0]) < 1


def test_celeba_whole_image_box_without_landmarks(tmp_path):
    _write_celeba(tmp_path, with_optional=False)
    faces = load_celeba(tmp_path, size=12, crop="full")
    assert faces.attributes == {}
    assert torch.allclose(faces.box, torch.tensor([0.0, 0.0, 12.0, 12.0]).expand(8, 4))
    assert faces.mask.all()
    assert "whole image" in faces.meta["box_source"]
    with pytest.raises(MissingResourceError, match="list_eval_partition.txt"):
        load_celeba(tmp_path, split="test")


def test_celeba_split_and_selection(tmp_path):
    _write_celeba(tmp_path)
    test = load_celeba(tmp_path, split="test", size=8)
    assert test.meta["files"] == ["000005.jpg", "000006.jpg", "000007.jpg", "000008.jpg"]
    assert set(test.meta["partition"]) == {2}
    three = IdentitySelection(min_images=3, n_identities=2, images_per_identity=3)
    sel = load_celeba(tmp_path, selection=three, size=8, seed=3)
    assert len(sel) == 6 and sel.identity.bincount().tolist() == [3, 3]
    assert set(sel.meta["identity_names"]) == {"17", "2880"}
    assert sel.meta["selection"] == {"min_images": 3, "n_identities": 2, "images_per_identity": 3}
    again = load_celeba(tmp_path, selection=three, size=8, seed=3)
    assert again.meta["files"] == sel.meta["files"] and torch.equal(again.images, sel.images)
    one = load_celeba(tmp_path, indices=[7, 0], size=8)
    assert one.meta["files"] == ["000008.jpg", "000001.jpg"]
    with pytest.raises(InvalidArgumentError, match="indices"):
        load_celeba(tmp_path, indices=[0], split="test")
    with pytest.raises(InvalidArgumentError, match="indices"):
        load_celeba(tmp_path, indices=[0], selection=IdentitySelection(min_images=1))
    with pytest.raises(InvalidArgumentError, match="IdentitySelection"):
        load_celeba(tmp_path, selection={"min_images": 3})
    with pytest.raises(InvalidArgumentError, match="max_images"):
        load_celeba(tmp_path, size=8, max_images=3)
    with pytest.raises(InsufficientDataError):
        load_celeba(tmp_path, selection=IdentitySelection(min_images=5), size=8)


def test_celeba_in_the_wild_box_crop(tmp_path):
    _write_celeba(tmp_path)
    faces = load_celeba(tmp_path, aligned=False, size=16, margin=0.0)
    assert faces.meta["box_source"] == "list_bbox_celeba.txt"
    # crop='box' with no margin: the whole crop is the red face square, and the box fills the image
    inner = faces.images[:, :, 2:-2, 2:-2]
    red = torch.tensor(RED, dtype=torch.float32).view(1, 3, 1, 1) / 255
    assert (inner - red).abs().max() < 0.08
    assert torch.allclose(faces.box, torch.tensor([0.0, 0.0, 16.0, 16.0]).expand(8, 4), atol=1e-4)
    padded = load_celeba(tmp_path, aligned=False, size=16, margin=0.5, indices=[0])
    assert torch.allclose(padded.box[0], torch.tensor([4.0, 4.0, 12.0, 12.0]), atol=1e-4)


def test_celeba_missing_and_malformed(tmp_path):
    with pytest.raises(MissingResourceError) as err:
        load_celeba(tmp_path)
    msg = str(err.value)
    assert "identity_CelebA.txt" in msg and "mmlab.ie.cuhk.edu.hk" in msg and str(tmp_path) in msg
    assert isinstance(err.value, FileNotFoundError)
    _write_celeba(tmp_path)
    attr = tmp_path / "celeba" / "list_attr_celeba.txt"
    lines = attr.read_text().splitlines()
    attr.write_text("\n".join(lines[:-2]) + "\n")  # truncated: fewer rows than announced
    with pytest.raises(InvalidArgumentError, match="list_attr_celeba.txt"):
        read_celeba_index(tmp_path)
    attr.write_text("\n".join(lines[:2] + [lines[2].replace(" 1", " 7", 1)] + lines[3:]) + "\n")
    with pytest.raises(InvalidArgumentError, match="-1 or 1"):
        read_celeba_index(tmp_path)
    attr.write_text("\n".join(lines[:3] + [lines[3].replace(" 1", " x", 1)] + lines[4:]) + "\n")
    with pytest.raises(InvalidArgumentError, match="line 4"):
        read_celeba_index(tmp_path)
    ident = tmp_path / "celeba" / "identity_CelebA.txt"
    ident_text = ident.read_text()
    ident.write_text(ident_text + "000009.jpg\n")  # a row without an identity
    with pytest.raises(InvalidArgumentError, match="identity_CelebA.txt"):
        read_celeba_index(tmp_path)
    ident.write_text(ident_text)
    (tmp_path / "celeba" / "img_align_celeba" / "000003.jpg").unlink()
    attr.write_text("\n".join(lines) + "\n")
    with pytest.raises(MissingResourceError, match="000003.jpg"):
        load_celeba(tmp_path, size=8)


# ---------------------------------------------------------------------------------------- VGGFace2 / folders
def _write_vggface2(root):
    base = root / "VGGFace2"
    counts = {"n000001": 3, "n000002": 2, "n000009": 4}
    boxes = []
    for cid, n in counts.items():
        for j in range(1, n + 1):
            stem = f"{j:04d}_01"
            box = (8, 6, 8 + 16, 6 + 20)
            _save(base / "test" / cid / f"{stem}.jpg", _boxed(40, 32, box))
            boxes.append((f"{cid}/{stem}", *box[:2], box[2] - box[0], box[3] - box[1]))
    bb = base / "bb_landmark" / "loose_bb_test.csv"
    bb.parent.mkdir(parents=True)
    with bb.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["NAME_ID", "X", "Y", "W", "H"])
        w.writerows(boxes)
    (base / "identity_meta.csv").write_text(
        'Class_ID, Name, Sample_Num, Flag, Gender\n'
        'n000001, "14th_Dalai_Lama", 424, 0, m\n'
        'n000002, "Doe, Jane", 315, 0, f\n'
        'n000009, "A_Name", 401, 0, m\n'
    )
    return counts


def test_load_vggface2(tmp_path):
    _write_vggface2(tmp_path)
    faces = load_vggface2(tmp_path, size=20, crop="full")
    assert len(faces) == 9 and faces.name == "vggface2-test"
    assert faces.meta["identity_names"] == ["n000001", "n000002", "n000009"]
    assert faces.identity.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert faces.meta["files"][3] == "n000002/0001_01.jpg"
    assert faces.attributes["male"].tolist() == [1, 1, 1, 0, 0, 1, 1, 1, 1]
    # loose box (8, 6, 24, 26) in a 40 x 32 image, full resize to 20 x 20
    expect = torch.tensor([8 * 20 / 40, 6 * 20 / 32, 24 * 20 / 40, 26 * 20 / 32])
    assert torch.allclose(faces.box, expect.expand(9, 4), atol=1e-4)
    assert faces.meta["box_source"] == "dataset boxes"
    threaded = load_vggface2(tmp_path, size=20, crop="full", num_workers=2)
    assert torch.equal(threaded.images, faces.images) and torch.equal(threaded.box, faces.box)
    boxed = load_vggface2(tmp_path, size=16, crop="box", margin=0.0)
    centre = boxed.images[:, :, 4:12, 4:12]
    assert (centre - torch.tensor(RED).view(1, 3, 1, 1) / 255).abs().max() < 0.08
    sel = load_vggface2(tmp_path, size=8, selection=IdentitySelection(min_images=3, images_per_identity=3), seed=0)
    assert sel.identity.bincount().tolist() == [3, 3]
    assert sel.meta["identity_names"] == ["n000001", "n000009"]


def test_vggface2_missing(tmp_path):
    with pytest.raises(MissingResourceError) as err:
        load_vggface2(tmp_path, split="train")
    assert "VGGFace2" in str(err.value) and "train" in err.value.expected_at


def test_load_identity_folders_png_and_no_boxes(tmp_path):
    for name, n in (("alice", 2), ("bob", 3)):
        for j in range(n):
            _save(tmp_path / "ppl" / name / f"{j}.png", _solid(10, 14, GREEN))
    (tmp_path / "ppl" / "notes.txt").write_text("ignored")
    (tmp_path / "ppl" / "bob" / "readme.md").write_text("ignored")
    faces = load_identity_folders(tmp_path / "ppl", size=8)
    assert len(faces) == 5 and faces.meta["identity_names"] == ["alice", "bob"]
    assert torch.allclose(faces.images[:, 1], torch.full((5, 8, 8), 200 / 255), atol=1e-6)  # PNG is exact
    assert torch.allclose(faces.box, torch.tensor([0.0, 0.0, 8.0, 8.0]).expand(5, 4))
    with pytest.raises(InvalidArgumentError, match="crop='box'"):
        load_identity_folders(tmp_path / "ppl", size=8, crop="box")
    boxed = load_identity_folders(tmp_path / "ppl", size=8, crop="full", boxes={"bob/1": (1, 2, 6, 9)})
    assert torch.allclose(boxed.box[3], torch.tensor([8 / 10, 16 / 14, 48 / 10, 72 / 14]), atol=1e-5)
    assert boxed.meta["box_source"] == "dataset boxes for 1 images, whole source image for 4"
    with pytest.raises(InvalidArgumentError, match="boxes"):
        load_identity_folders(tmp_path / "ppl", size=8, boxes={"bob/1": (5, 2, 1, 9)})
    with pytest.raises(MissingResourceError):
        load_identity_folders(tmp_path / "nothing")
    with pytest.raises(InvalidArgumentError, match="size"):
        load_identity_folders(tmp_path / "ppl", size=2)


def test_default_max_images_budget():
    assert default_max_images(64) == 512 * 2**20 // (3 * 64 * 64 * 4 + 64 * 64)
    assert default_max_images(112) < default_max_images(64)


# -------------------------------------------------------------------------------------------------------- LFW
LFW_PEOPLE = {"Aaron_Eckhart": 1, "Abel_Pacheco": 2, "Ana_Guevara": 3, "Zico": 2}
LFW_PAIRS = (
    "2\t2\n"
    "Abel_Pacheco\t1\t2\n"
    "Ana_Guevara\t1\t3\n"
    "Aaron_Eckhart\t1\tAbel_Pacheco\t2\n"
    "Ana_Guevara\t2\tZico\t1\n"
    "Zico\t1\t2\n"
    "Ana_Guevara\t2\t3\n"
    "Aaron_Eckhart\t1\tZico\t2\n"
    "Abel_Pacheco\t1\tAna_Guevara\t1\n"
)


def _write_lfw(root):
    shades = {}
    k = 0
    for name, n in LFW_PEOPLE.items():
        for j in range(1, n + 1):
            shade = (30 + 20 * k, 60, 90)
            shades[(name, j)] = shade
            _save(root / "lfw" / name / f"{name}_{j:04d}.jpg", _solid(25, 25, shade))
            k += 1
    (root / "lfw" / "pairs.txt").write_text(LFW_PAIRS)
    return shades


def test_read_lfw_pairs(tmp_path):
    _write_lfw(tmp_path)
    recs = read_lfw_pairs(tmp_path / "lfw" / "pairs.txt")
    assert len(recs) == 8
    assert [r.same for r in recs] == [True, True, False, False] * 2
    assert [r.fold for r in recs] == [0] * 4 + [1] * 4
    assert recs[2].a == ("Aaron_Eckhart", 1) and recs[2].b == ("Abel_Pacheco", 2)
    # View-1 files have a single count
    (tmp_path / "dev.txt").write_text("1\nZico\t1\t2\nZico\t1\tAna_Guevara\t3\n")
    dev = read_lfw_pairs(tmp_path / "dev.txt")
    assert [r.same for r in dev] == [True, False] and {r.fold for r in dev} == {0}


def test_read_lfw_pairs_malformed(tmp_path):
    bad = LFW_PAIRS.replace("Ana_Guevara\t1\t3\n", "Ana_Guevara\t1\tZico\t3\n")  # mismatched line in the matched block
    (tmp_path / "p.txt").write_text(bad)
    with pytest.raises(InvalidArgumentError, match="line 3"):
        read_lfw_pairs(tmp_path / "p.txt")
    (tmp_path / "q.txt").write_text("\n".join(LFW_PAIRS.splitlines()[:-1]) + "\n")
    with pytest.raises(InvalidArgumentError, match="announces 8"):
        read_lfw_pairs(tmp_path / "q.txt")


def test_load_lfw(tmp_path):
    shades = _write_lfw(tmp_path)
    lfw = load_lfw(tmp_path, size=10)
    faces = lfw.faces
    assert len(lfw) == 8 and lfw.pairs.shape == (8, 2)
    assert lfw.same.tolist() == [True, True, False, False] * 2
    assert lfw.fold.tolist() == [0] * 4 + [1] * 4
    files = faces.meta["files"]
    assert len(files) == len(set(files)) == 8  # every distinct image of the pairs, once
    a, b = lfw.pairs[2].tolist()
    assert files[a] == "Aaron_Eckhart/Aaron_Eckhart_0001.jpg" and files[b] == "Abel_Pacheco/Abel_Pacheco_0002.jpg"
    for i, f in enumerate(files):
        name, num = f.split("/")[0], int(f[-8:-4])
        assert faces.meta["identity_names"][int(faces.identity[i])] == name
        want = torch.tensor(shades[(name, num)], dtype=torch.float32) / 255
        assert torch.allclose(faces.images[i, :, 5, 5], want, atol=0.05)
    same_id = faces.identity[lfw.pairs[:, 0]] == faces.identity[lfw.pairs[:, 1]]
    assert torch.equal(same_id, lfw.same)
    one = load_lfw(tmp_path, size=10, folds=[1])
    assert len(one) == 4 and one.fold.eq(1).all()
    with pytest.raises(InvalidArgumentError, match="folds"):
        load_lfw(tmp_path, folds=[2])
    (tmp_path / "lfw" / "Zico" / "Zico_0002.jpg").unlink()
    with pytest.raises(MissingResourceError, match="Zico_0002.jpg"):
        load_lfw(tmp_path, size=10)


def test_lfw_missing(tmp_path):
    with pytest.raises(MissingResourceError, match="vis-www.cs.umass.edu/lfw"):
        load_lfw(tmp_path)
    (tmp_path / "lfw").mkdir()
    with pytest.raises(MissingResourceError, match="pairs.txt"):
        load_lfw(tmp_path)


# ------------------------------------------------------------------------------------------------------- MPII
def _joints(cx, cy, head_top=(50.0, 10.0), neck=(50.0, 20.0)):
    j = [[cx + k, cy + k] for k in range(16)]
    j[9], j[8] = list(head_top), list(neck)
    return j


def _write_mpii(root, *, layout="hrnet", mat=True, head_field=False):
    base = root / "mpii"
    # photo A: 100 x 80, green square centred at 0-based (40, 32)
    im = _solid(100, 80, BLUE)
    im.paste(_solid(14, 14, GREEN), (33, 25))
    _save(base / "images" / "000000001.jpg", im)
    _save(base / "images" / "000000002.jpg", _solid(60, 60, RED))
    # scale 0.2 -> crop side 200 * 1.25 * 0.2 = 50; centre (1-based, before HRNet's +15 s shift)
    entries = [
        {"image": "000000001.jpg", "center": [41.0, 30.0], "scale": 0.2, "joints": _joints(41.0, 33.0),
         "joints_vis": [1] * 16},
        {"image": "000000001.jpg", "center": [61.0, 50.0], "scale": 0.4, "joints": _joints(61.0, 50.0),
         "joints_vis": [1] * 15 + [0]},
        {"image": "000000002.jpg", "center": [11.0, 8.0], "scale": 0.2, "joints": _joints(11.0, 8.0),
         "joints_vis": [1] * 8 + [0] + [1] * 7},  # upper neck not annotated
    ]
    if head_field:
        for e in entries:
            e["head_box"] = [41.0, 11.0, 61.0, 31.0]
    if layout == "hrnet":
        ann, gt = base / "annot" / "valid.json", base / "annot" / "gt_valid.mat"
    else:
        ann, gt = base / "annotations" / "mpii_val.json", base / "annotations" / "mpii_gt_val.mat"
    ann.parent.mkdir(parents=True, exist_ok=True)
    ann.write_text(json.dumps(entries))
    if mat:
        hb = np.zeros((2, 2, 3))
        for i in range(3):
            hb[0, :, i] = [36.0 + i, 21.0]  # top-left (x, y), 1-based
            hb[1, :, i] = [46.0 + i, 31.0]  # bottom-right
        scipy.io.savemat(gt, {"headboxes_src": hb, "jnt_missing": np.zeros((16, 3))})
    return entries


def test_load_mpii_geometry_and_mat_head_boxes(tmp_path):
    _write_mpii(tmp_path)
    pose = load_mpii(tmp_path, size=20)
    assert isinstance(pose, PoseSet) and len(pose) == 3
    assert pose.images.shape == (3, 3, 20, 20) and pose.keypoints.shape == (3, 16, 2)
    assert pose.meta["windows"][0] == [15, 7, 65, 57]  # centre (40, 32) 0-based, side 50
    # joint 0 of person 0 sits on the adjusted centre, pixel 40 - 15 = 25 of the crop; pixel centres map as
    # q + 0.5 = (25 + 0.5) * 20/50 (the pixel-index convention through Pillow's resize)
    assert torch.allclose(pose.keypoints[0, 0], torch.tensor([9.7, 9.7]), atol=1e-5)
    assert torch.allclose(pose.keypoints[0, 1], torch.tensor([10.1, 10.1]), atol=1e-5)  # +1 px * 20/50
    green = torch.tensor(GREEN, dtype=torch.float32) / 255
    assert torch.allclose(pose.images[0, :, 9:11, 9:11], green.view(3, 1, 1).expand(3, 2, 2), atol=0.1)
    assert torch.allclose(pose.images[0, :, 1, 1], torch.tensor(BLUE, dtype=torch.float32) / 255, atol=0.1)
    # head box from headboxes_src (1-based -> 0-based), in crop pixels
    assert "gt_valid.mat" in pose.meta["head_box_source"]
    expect = (torch.tensor([35.0, 20.0, 45.0, 30.0]) - torch.tensor([15.0, 7.0, 15.0, 7.0]) + 0.5) * 20 / 50 - 0.5
    assert torch.allclose(pose.head_box[0], expect, atol=1e-5)
    # visibility; unlabelled joints zeroed
    assert pose.visible[0].all() and not pose.visible[1, 15] and pose.visible[1, :15].all()
    assert pose.keypoints[1, 15].eq(0).all()
    # identity = source photograph
    assert pose.identity.tolist() == [0, 0, 1]
    # person 2's window reaches beyond the 60 x 60 photo: padded with black
    assert pose.meta["windows"][2] == [-15, -15, 35, 35]
    assert pose.images[2, :, :4, :4].max() < 0.02
    assert torch.allclose(pose.images[2, :, 12, 12], torch.tensor(RED, dtype=torch.float32) / 255, atol=0.08)
    sub = load_mpii(tmp_path, size=20, head_boxes="mat", n_samples=2, seed=0)
    assert len(sub) == 2 and sub.meta["entries"] == sorted(sub.meta["entries"])
    k = sub.meta["entries"][0]
    assert torch.equal(sub.keypoints[0], pose.keypoints[k]) and torch.equal(sub.head_box[0], pose.head_box[k])


def test_mpii_joint_head_boxes_and_json_field(tmp_path):
    _write_mpii(tmp_path, layout="mmpose", mat=False)
    pose = load_mpii(tmp_path, size=20)  # auto -> joints (no field, no .mat)
    assert "privkit [I]" in pose.meta["head_box_source"]
    assert len(pose) == 2 and pose.meta["dropped_no_head_box"] == 1
    # head top (49, 9) and neck (49, 19) 0-based: square of side 10 centred at (49, 14)
    expect = (torch.tensor([44.0, 9.0, 54.0, 19.0]) - torch.tensor([15.0, 7.0, 15.0, 7.0]) + 0.5) * 20 / 50 - 0.5
    assert torch.allclose(pose.head_box[0], expect, atol=1e-5)
    with pytest.raises(MissingResourceError, match="gt_valid.mat"):
        load_mpii(tmp_path, head_boxes="mat")
    with pytest.raises(InvalidArgumentError, match="head_box"):
        load_mpii(tmp_path, head_boxes="json")

    other = tmp_path / "with_field"
    _write_mpii(other, head_field=True)
    pj = load_mpii(other, size=20)
    assert "head_box" in pj.meta["head_box_source"] and len(pj) == 3
    expect = (torch.tensor([40.0, 10.0, 60.0, 30.0]) - torch.tensor([15.0, 7.0, 15.0, 7.0]) + 0.5) * 20 / 50 - 0.5
    assert torch.allclose(pj.head_box[0], expect, atol=1e-5)


def test_mpii_missing_and_malformed(tmp_path):
    with pytest.raises(MissingResourceError) as err:
        load_mpii(tmp_path, split="train")
    assert "train.json" in str(err.value) and "human-pose.mpi-inf.mpg.de" in str(err.value)
    _write_mpii(tmp_path)
    ann = tmp_path / "mpii" / "annot" / "valid.json"
    entries = json.loads(ann.read_text())
    entries[1]["joints"] = entries[1]["joints"][:15]
    ann.write_text(json.dumps(entries))
    with pytest.raises(InvalidArgumentError, match="16 x 2"):
        load_mpii(tmp_path)
    _write_mpii(tmp_path)
    scipy.io.savemat(tmp_path / "mpii" / "annot" / "gt_valid.mat", {"headboxes_src": np.zeros((2, 2, 5))})
    with pytest.raises(InvalidArgumentError, match="5 boxes"):
        load_mpii(tmp_path, head_boxes="mat")


# -------------------------------------------------------------------------------------------------- MovieLens
ML_RATINGS = [(1, 1, 5), (1, 3, 3), (2, 2, 4), (2, 5, 1), (3, 1, 2), (3, 4, 5), (4, 5, 3), (4, 2, 2)]


def _write_ml(root, test_rows=(1, 4, 7)):
    base = root / "ml-100k"
    base.mkdir(parents=True)

    def fmt(rows):
        return "".join(f"{u}\t{i}\t{r}\t{881250949 + k}\n" for k, (u, i, r) in enumerate(rows))

    (base / "u.data").write_text(fmt(ML_RATINGS))
    test = [ML_RATINGS[k] for k in test_rows]
    base_rows = [r for k, r in enumerate(ML_RATINGS) if k not in test_rows]
    (base / "u1.base").write_text(fmt(base_rows))
    (base / "u1.test").write_text(fmt(test))
    return base


def test_load_movielens(tmp_path):
    base = _write_ml(tmp_path)
    ml = load_movielens_100k(tmp_path)
    assert ml.ratings.shape == (4, 5) and ml.n_users == 4 and ml.n_items == 5
    for u, i, r in ML_RATINGS:
        assert float(ml.ratings[u - 1, i - 1]) == r
    assert int((ml.ratings > 0).sum()) == len(ML_RATINGS)
    assert torch.equal(ml.train + ml.test, ml.ratings)
    assert float(ml.test[0, 2]) == 3 and float(ml.train[0, 2]) == 0 and float(ml.train[1, 1]) == 4
    assert ml.meta["n_test"] == 3
    (base / "u.info").write_text("6 users\n7 items\n8 ratings\n")
    assert load_movielens_100k(tmp_path).ratings.shape == (6, 7)


def test_movielens_errors(tmp_path):
    with pytest.raises(MissingResourceError, match="grouplens.org"):
        load_movielens_100k(tmp_path)
    base = _write_ml(tmp_path)
    with pytest.raises(MissingResourceError, match="u2.base"):
        load_movielens_100k(tmp_path, fold="u2")
    (base / "u1.test").write_text("1\t1\t5\t1\n")  # also in u1.base? no: (1, 1) is in base -> overlap
    (base / "u1.base").write_text("1\t1\t5\t1\n2\t2\t4\t1\n")
    with pytest.raises(InvalidArgumentError, match="disjoint"):
        load_movielens_100k(tmp_path)
    (base / "u.data").write_text("1\t1\t9\t1\n")
    with pytest.raises(InvalidArgumentError, match="1..5"):
        load_movielens_100k(tmp_path)
    with pytest.raises(Exception, match="fold"):
        load_movielens_100k(tmp_path, fold="u9")


# ------------------------------------------------------------------------------------------ IJB-B / IJB-C
# InsightFace's IJB_release layout: 5 images, templates 11 (two stills), 12 (two frames of one video), 13, 14
IJB_TID_MID = "1.jpg 11 101\n2.jpg 11 102\n3.jpg 12 103\n4.jpg 12 103\n5.jpg 13 104\n6.jpg 14 105\n"
IJB_PAIRS = "11 12 1\n11 13 0\n12 14 0\n13 14 1\n"


def _write_ijb(root, name="IJBC", landmarks=True, release=False):
    base = root / ("IJB_release" if release else "") / name
    p = name.lower()
    for i in range(1, 7):
        _save(base / "loose_crop" / f"{i}.jpg", _boxed(40, 50, (10, 12, 30, 40), inside=(40 * i, 60, 90)))
    (base / "meta").mkdir(parents=True, exist_ok=True)
    (base / "meta" / f"{p}_face_tid_mid.txt").write_text(IJB_TID_MID)
    (base / "meta" / f"{p}_template_pair_label.txt").write_text(IJB_PAIRS)
    if landmarks:
        # eyes at (15, 20) and (25, 20), nose (20, 27), mouth corners (16, 33) and (24, 33)
        line = " 15 20 25 20 20 27 16 33 24 33 0.99\n"
        (base / "meta" / f"{p}_name_5pts_score.txt").write_text("".join(f"{i}.jpg{line}" for i in range(1, 7)))
    return base


@pytest.mark.parametrize("name,release", [("IJBC", False), ("IJBB", True)])
def test_load_ijb_reads_protocol_and_decodes_faces(tmp_path, name, release):
    _write_ijb(tmp_path, name=name, release=release)
    ijb = load_ijb(tmp_path, name=name)
    assert len(ijb) == 6 and ijb.files[0] == "1.jpg"
    assert ijb.template.tolist() == [11, 11, 12, 12, 13, 14] and ijb.media.tolist() == [101, 102, 103, 103, 104, 105]
    assert ijb.pairs.tolist() == [[11, 12], [11, 13], [12, 14], [13, 14]]
    assert ijb.same.tolist() == [True, False, False, True]
    assert ijb.landmarks.shape == (6, 5, 2) and float(ijb.detection_score[0]) == pytest.approx(0.99)
    assert ijb.meta["n_templates"] == 4 and ijb.meta["n_genuine"] == 2
    faces = ijb.faces([0, 5], size=16)
    assert isinstance(faces, FaceSet) and faces.images.shape == (2, 3, 16, 16)
    assert faces.attributes["template"].tolist() == [11, 14] and faces.attributes["media"].tolist() == [101, 105]
    # the crop is a square around the landmark box: its centre is the red face patch of image i
    assert faces.images[1, 0, 8, 8] == pytest.approx(240 / 255, abs=0.05)
    batches = list(ijb.iter_faces(batch_size=4, size=8))
    assert [r.tolist() for r, _ in batches] == [[0, 1, 2, 3], [4, 5]]
    assert load_ijb(tmp_path, name=name, max_pairs=2).pairs.shape == (2, 2)


def test_load_ijb_without_landmarks_uses_the_whole_crop(tmp_path):
    _write_ijb(tmp_path, landmarks=False)
    ijb = load_ijb(tmp_path)
    assert ijb.landmarks is None and ijb.detection_score is None
    faces = ijb.faces([0], size=10)
    assert faces.box[0].tolist() == [0.0, 0.0, 10.0, 10.0]


def test_load_ijb_errors_name_what_is_missing_or_malformed(tmp_path):
    with pytest.raises(MissingResourceError, match="IJBC"):
        load_ijb(tmp_path)
    with pytest.raises(UnknownNameError, match="IJBA"):
        load_ijb(tmp_path, name="IJBA")
    base = _write_ijb(tmp_path)
    with pytest.raises(InvalidArgumentError, match="max_pairs"):
        load_ijb(tmp_path, max_pairs=0)
    (base / "meta" / "ijbc_template_pair_label.txt").write_text("11 12 1\n11 99 0\n")
    with pytest.raises(InvalidArgumentError, match="first: 99"):
        load_ijb(tmp_path)
    (base / "meta" / "ijbc_template_pair_label.txt").write_text("11 12 2\n")
    with pytest.raises(InvalidArgumentError, match="line 1.*label"):
        load_ijb(tmp_path)
    (base / "meta" / "ijbc_template_pair_label.txt").write_text(IJB_PAIRS)
    (base / "meta" / "ijbc_face_tid_mid.txt").write_text("1.jpg 11\n")
    with pytest.raises(InvalidArgumentError, match="line 1"):
        load_ijb(tmp_path)
    (base / "meta" / "ijbc_face_tid_mid.txt").write_text(IJB_TID_MID)
    (base / "meta" / "ijbc_name_5pts_score.txt").write_text("1.jpg 1 2 3\n")
    with pytest.raises(InvalidArgumentError, match="12 fields"):
        load_ijb(tmp_path)
    (base / "meta" / "ijbc_name_5pts_score.txt").unlink()
    ijb = load_ijb(tmp_path)
    with pytest.raises(InvalidArgumentError, match="rows"):
        ijb.faces([6])
    (base / "loose_crop" / "6.jpg").unlink()
    with pytest.raises(MissingResourceError, match="6.jpg"):
        ijb.faces([5])


def test_faceset_subset_keeps_per_row_meta_aligned(tmp_path):
    _write_lfw(tmp_path)
    faces = load_lfw(tmp_path, size=10).faces
    files = faces.meta["files"]
    sub = faces.subset(torch.tensor([5, 0]))
    assert sub.meta["files"] == [files[5], files[0]] and len(sub.meta["source_sizes"]) == 2
    mask = torch.zeros(len(faces), dtype=torch.bool)
    mask[[1, 3]] = True
    assert faces.subset(mask).meta["files"] == [files[1], files[3]]
    assert faces.subset(mask).meta["identity_names"] == faces.meta["identity_names"]  # not per row
    assert faces.meta["files"] == files  # the original is untouched


@pytest.mark.parametrize("side,out", [(200, 20), (50, 20), (40, 80)])
def test_mpii_keypoints_land_on_the_image_content(tmp_path, side, out):
    """A blob centred on a joint (pixel-index convention) keeps its intensity centroid on the mapped joint after
    the crop and Pillow's resize, when shrinking and when enlarging; scaling the index alone misses by 0.5 (1 - s)."""
    from privkit.data.paper.common import _decode, _map_points

    w = h = 240
    joint = torch.tensor([[[101.3, 117.6]]], dtype=torch.float64)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    blob_sd = max(2.5, 2.0 * side / out)  # wide enough to survive the shrink, well inside the window
    blob = np.exp(-((xx - 101.3) ** 2 + (yy - 117.6) ** 2) / (2 * blob_sd**2))
    img = np.repeat((blob * 255).round().astype(np.uint8)[..., None], 3, axis=2)
    path = tmp_path / "blob.png"
    Image.fromarray(img).save(path)
    win = (101 - side // 2, 118 - side // 2, 101 - side // 2 + side, 118 - side // 2 + side)
    arr, got_win, _ = _decode(path, lambda w_, h_: win, out)
    assert got_win == win
    m = arr[..., 0].astype(np.float64)
    cols, rows = np.arange(out)[None, :], np.arange(out)[:, None]
    centroid = torch.tensor([(m * cols).sum() / m.sum(), (m * rows).sum() / m.sum()])
    mapped = _map_points(joint, [win], out, pixel_index=True)[0, 0].double()
    torch.testing.assert_close(mapped, centroid, atol=0.06, rtol=0)
    s = out / side
    if abs(1 - s) > 0.3:  # the old index scaling is measurably off by 0.5 (1 - s)
        naive = _map_points(joint, [win], out)[0, 0].double()
        assert ((naive - centroid).abs() - 0.5 * abs(1 - s)).abs().max() < 0.08
