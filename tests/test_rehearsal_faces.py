"""The face part of the rehearsal data root (tools/rehearsal/faces.py), read back by the real paper-scale loaders,
and the loaders' errors on broken copies of it (missing file, truncated image, bad pairs line, short identity)."""

from __future__ import annotations

import shutil

import pytest
import torch

import privkit.data.paper.common as paper_common
from privkit.data.paper.celeba import load_celeba, read_celeba_index
from privkit.data.paper.identity_folders import IdentitySelection, load_identity_folders
from privkit.data.paper.ijb import load_ijb
from privkit.data.paper.lfw import load_lfw, read_lfw_pairs
from privkit.data.paper.vggface2 import load_vggface2
from privkit.reproduce import rehearsal_tool
from privkit.errors import InsufficientDataError, InvalidArgumentError, MissingResourceError

_faces = rehearsal_tool().faces  # a repository tool (tools/rehearsal/), loaded from its folder
CELEBA_ATTRIBUTES = _faces.CELEBA_ATTRIBUTES
write_celeba = _faces.write_celeba
write_face_rehearsal_root = _faces.write_face_rehearsal_root
write_ijbc = _faces.write_ijbc
write_lfw = _faces.write_lfw


pytestmark = pytest.mark.slow  # writes a rehearsal face root (about 3 s) and reads it back many times

N_ID, K = 20, 4  # the smallest root the LFW layout allows (2 identities per fold), 4 images per identity


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("rehearsal") / "data"
    summary = write_face_rehearsal_root(root, seed=0, n_identities=N_ID, images_per_identity=K)
    return root, summary


@pytest.fixture
def broken(written, tmp_path):
    """A private copy of the written root, to damage."""
    root = tmp_path / "data"
    shutil.copytree(written[0], root)
    return root, written[1]


@pytest.fixture
def decodes(monkeypatch):
    """Counts images decoded by the paper loaders (errors must come before any)."""
    calls = []
    real = paper_common._decode

    def counting(path, window_fn, size):
        calls.append(path)
        return real(path, window_fn, size)

    monkeypatch.setattr(paper_common, "_decode", counting)
    return calls


def _all_bytes(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -------------------------------------------------------------------------------------------------- summary
def test_summary_counts_and_same_bytes_for_a_seed(written, tmp_path):
    root, s = written
    assert s["n_identities"] == N_ID and s["images_per_identity"] == K
    assert s["celeba"]["n_images"] == N_ID * K and s["celeba"]["n_identities"] == N_ID
    assert s["vggface2"]["n_images"] == N_ID * K
    assert s["vggface2"]["splits"]["train"]["n_identities"] + s["vggface2"]["splits"]["test"]["n_identities"] == N_ID
    assert s["lfw"]["n_folds"] == 10 and s["lfw"]["n_pairs"] == 2 * 10 * s["lfw"]["pairs_per_fold"]
    for name in ("IJBB", "IJBC"):
        assert s[name]["n_images"] == N_ID * K and s[name]["n_templates"] == 2 * N_ID
        assert s[name]["n_genuine"] == N_ID and s[name]["n_impostor"] == 4 * N_ID
    files = _all_bytes(root)
    assert s["files"] == len(files) and s["bytes"] == sum(len(b) for b in files.values())
    assert s["bytes"] < 8 * 2**20 and s["seconds"] < 60
    # every embedded identity has the same index in every dataset's label list
    for key in ("celeba", "vggface2", "lfw", "IJBC"):
        assert s[key]["embedded_identities"] == list(range(N_ID))
    # deterministic: the same arguments write the same bytes
    again = tmp_path / "again"
    write_face_rehearsal_root(again, seed=0, n_identities=N_ID, images_per_identity=K)
    assert _all_bytes(again) == files


def test_writers_refuse_a_used_folder_and_impossible_protocols(written, tmp_path):
    root, _ = written
    faces = load_celeba(root, size=16)
    with pytest.raises(InvalidArgumentError, match="not an empty folder"):
        write_celeba(root, faces)
    with pytest.raises(InsufficientDataError, match="at least 20 identities"):
        write_lfw(tmp_path, faces.subset(faces.identity < 5))
    with pytest.raises(InsufficientDataError, match="fold 0 .*pairs_per_fold=50"):
        write_lfw(tmp_path, faces, pairs_per_fold=50)
    one_each = faces.subset(torch.tensor([int(torch.nonzero(faces.identity == i)[0]) for i in range(3)]))
    with pytest.raises(InsufficientDataError, match="at least 2 images"):
        write_ijbc(tmp_path, one_each)
    with pytest.raises(InvalidArgumentError, match="FaceSet"):
        write_ijbc(tmp_path, "faces")
    assert not (tmp_path / "lfw").exists() and not (tmp_path / "IJBC").exists()


def test_entry_point_fails_before_writing_anything(tmp_path):
    (tmp_path / "lfw").mkdir()
    (tmp_path / "lfw" / "pairs.txt").write_text("10\t300\n")
    with pytest.raises(InvalidArgumentError, match="lfw already exists"):
        write_face_rehearsal_root(tmp_path, n_identities=N_ID)
    with pytest.raises(InsufficientDataError, match="lfw_pairs_per_fold=40: .*2 identities with 4 images"):
        write_face_rehearsal_root(tmp_path / "other", n_identities=N_ID, lfw_pairs_per_fold=40)
    with pytest.raises(InvalidArgumentError, match="n_identities"):
        write_face_rehearsal_root(tmp_path / "other", n_identities=10)
    with pytest.raises(InvalidArgumentError, match="ijb_sets"):
        write_face_rehearsal_root(tmp_path / "other", ijb_sets="IJBC")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lfw"] and not (tmp_path / "other").exists()


# --------------------------------------------------------------------------------------------------- CelebA
def test_celeba_reads_back(written):
    root, s = written
    cs = s["celeba"]
    idx = read_celeba_index(root)
    assert len(idx) == cs["n_images"]
    assert sorted(set(idx.identity.tolist())) == sorted(cs["identity_labels"])
    assert idx.bbox is not None and idx.landmarks.shape == (cs["n_images"], 5, 2)
    assert idx.filenames[0] == "000001.jpg"
    faces = load_celeba(root, size=32)
    assert len(faces) == cs["n_images"] and faces.images.shape == (cs["n_images"], 3, 32, 32)
    assert faces.identity.bincount().tolist() == [K] * N_ID  # identities really repeat
    assert set(faces.attributes) == set(CELEBA_ATTRIBUTES) and len(CELEBA_ATTRIBUTES) == 40
    assert "landmarks" in faces.meta["box_source"]
    assert faces.meta["source_sizes"][0] == [178, 218]
    # Male is an identity trait: constant over each identity's images
    for i in range(N_ID):
        assert faces.attributes["Male"][faces.identity == i].unique().numel() == 1
    # the official partition splits identities
    split_ids = {sp: set(load_celeba(root, split=sp, size=8).meta["identity_names"]) for sp in ("train", "valid", "test")}
    assert not (split_ids["train"] & split_ids["valid"]) and not (split_ids["train"] & split_ids["test"])
    assert not (split_ids["valid"] & split_ids["test"])
    assert sum(len(v) for v in split_ids.values()) == N_ID
    assert {sp: len(v) for sp, v in split_ids.items()} == cs["partition_identities"]
    sel = load_celeba(root, selection=IdentitySelection(min_images=K, n_identities=5, images_per_identity=K), size=8)
    assert sel.identity.bincount().tolist() == [K] * 5
    with pytest.raises(MissingResourceError, match="img_celeba"):
        load_celeba(root, aligned=False)  # the in-the-wild views are optional and not written by default


def test_celeba_in_the_wild_views(written, tmp_path):
    faces = load_celeba(written[0], size=64)
    faces = faces.subset(faces.identity < 3)  # the fewest identities CelebA's three splits allow
    summary = write_celeba(tmp_path, faces, seed=3, in_the_wild=True)
    assert summary["partition_identities"] == {"train": 1, "valid": 1, "test": 1}
    wild = load_celeba(tmp_path, aligned=False, size=16)
    assert len(wild) == summary["n_images"] == 3 * K and wild.meta["box_source"] == "list_bbox_celeba.txt"
    assert wild.meta["source_sizes"][0] == [64, 64]


def test_male_is_the_same_bit_in_celeba_and_vggface2(written):
    root, s = written
    celeba = load_celeba(root, size=8)
    male_celeba = {}
    for row, i in enumerate(celeba.identity.tolist()):
        male_celeba[int(celeba.meta["identity_names"][i])] = int(celeba.attributes["Male"][row])
    male_vgg = {}
    for split in ("train", "test"):
        v = load_vggface2(root, split=split, size=8)
        for row, i in enumerate(v.identity.tolist()):
            male_vgg[v.meta["identity_names"][i]] = int(v.attributes["male"][row])
    for c_label, v_label in zip(s["celeba"]["identity_labels"], s["vggface2"]["identity_labels"]):
        assert male_celeba[c_label] == male_vgg[v_label]


# ------------------------------------------------------------------------------------------------- VGGFace2
def test_vggface2_reads_back(written):
    root, s = written
    vs = s["vggface2"]
    names = {}
    for split in ("train", "test"):
        faces = load_vggface2(root, split=split, size=24, crop="box", margin=0.1)
        assert len(faces) == vs["splits"][split]["n_images"]
        assert faces.n_identities == vs["splits"][split]["n_identities"]
        assert faces.identity.bincount().tolist() == [K] * faces.n_identities
        assert faces.meta["box_source"] == "dataset boxes"
        assert set(faces.attributes["male"].tolist()) <= {0, 1}  # every class is in identity_meta.csv
        assert len({tuple(x) for x in faces.meta["source_sizes"]}) > 1  # loose crops of varying size
        names[split] = set(faces.meta["identity_names"])
    assert not (names["train"] & names["test"])
    assert names["train"] | names["test"] == set(vs["identity_labels"])
    sel = load_vggface2(root, split="test", size=8,
                        selection=IdentitySelection(min_images=K, n_identities=3, images_per_identity=2))
    assert sel.identity.bincount().tolist() == [2, 2, 2]


# ------------------------------------------------------------------------------------------------------ LFW
def test_lfw_reads_back_with_ten_folds(written):
    root, s = written
    ls = s["lfw"]
    records = read_lfw_pairs(root / "lfw" / "pairs.txt")
    assert len(records) == ls["n_pairs"]
    assert (root / "lfw" / "pairs.txt").read_text().splitlines()[0] == f"10\t{ls['pairs_per_fold']}"
    lfw = load_lfw(root, size=24)
    assert len(lfw) == ls["n_pairs"] and sorted(set(lfw.fold.tolist())) == list(range(10))
    assert lfw.fold.bincount().tolist() == [2 * ls["pairs_per_fold"]] * 10
    assert int(lfw.same.sum()) == 10 * ls["pairs_per_fold"]
    ident = lfw.faces.identity
    assert torch.equal(ident[lfw.pairs[:, 0]] == ident[lfw.pairs[:, 1]], lfw.same)
    assert lfw.faces.meta["source_sizes"][0] == [250, 250]
    # folds are person-disjoint
    names = lfw.faces.meta["identity_names"]
    people = [{names[int(ident[r])] for r in lfw.pairs[lfw.fold == f].flatten().tolist()} for f in range(10)]
    assert all(not (people[a] & people[b]) for a in range(10) for b in range(a + 1, 10))
    assert [sorted(p) for p in people] == [sorted(f) for f in ls["fold_identities"]]
    one = load_lfw(root, size=8, folds=[3])
    assert len(one) == 2 * ls["pairs_per_fold"] and one.fold.eq(3).all()
    everyone = load_identity_folders(root / "lfw", size=8)
    assert len(everyone) == ls["n_images"] and everyone.identity.bincount().tolist() == [K] * N_ID


# ------------------------------------------------------------------------------------------------------ IJB
@pytest.mark.parametrize("name", ["IJBB", "IJBC"])
def test_ijb_reads_back_with_consistent_templates(written, name):
    root, s = written
    js = s[name]
    ijb = load_ijb(root, name=name)
    assert len(ijb) == js["n_images"] and ijb.landmarks.shape == (js["n_images"], 5, 2)
    assert ijb.meta["n_templates"] == js["n_templates"] and len(ijb.pairs) == js["n_pairs"]
    assert int(ijb.same.sum()) == js["n_genuine"]
    owner = {t: i for i, ts in zip(js["embedded_identities"], js["identity_labels"]) for t in ts}
    assert set(ijb.template.tolist()) == set(owner)
    for (a, b), same in zip(ijb.pairs.tolist(), ijb.same.tolist()):
        assert (owner[a] == owner[b]) == same and a != b
    # each template: K/2 stills (one media each) or K/2 frames of one video
    for t in set(ijb.template.tolist()):
        media = ijb.media[ijb.template == t].tolist()
        assert len(media) == K // 2 and len(set(media)) in (1, len(media))
    faces = ijb.faces([0, len(ijb) - 1], size=32)
    assert faces.images.shape == (2, 3, 32, 32) and faces.meta["box_source"] == "five-point landmarks"
    batches = list(ijb.iter_faces(batch_size=32, size=16))
    assert sum(len(f) for _, f in batches) == js["n_images"]


# ---------------------------------------------------------------------------------- bad input (1): missing file
@pytest.mark.parametrize("rel,load,match", [
    ("celeba/identity_CelebA.txt", lambda r: load_celeba(r, size=8), "identity_CelebA.txt"),
    ("celeba/list_eval_partition.txt", lambda r: load_celeba(r, split="test", size=8), "list_eval_partition.txt"),
    ("celeba/img_align_celeba/000007.jpg", lambda r: load_celeba(r, size=8), "000007.jpg"),
    ("VGGFace2/test", lambda r: load_vggface2(r, split="test", size=8), "VGGFace2's test images"),
    ("lfw/pairs.txt", lambda r: load_lfw(r, size=8), "pairs.txt"),
    ("IJBC/meta/ijbc_face_tid_mid.txt", lambda r: load_ijb(r, name="IJBC"), "ijbc_face_tid_mid.txt"),
    ("IJBC/meta/ijbc_template_pair_label.txt", lambda r: load_ijb(r, name="IJBC"), "template pair list"),
    ("IJBB/loose_crop/5.jpg", lambda r: load_ijb(r, name="IJBB"), "5.jpg"),
])
def test_missing_file_is_named_before_decoding(broken, decodes, rel, load, match):
    root, _ = broken
    target = root / rel
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(MissingResourceError, match=match) as err:
        load(root)
    assert str(target) in str(err.value)  # where it was expected
    assert decodes == []


def test_missing_lfw_image_of_a_pair_is_named(broken, decodes):
    root, _ = broken
    name, num = read_lfw_pairs(root / "lfw" / "pairs.txt")[0].a
    victim = root / "lfw" / name / f"{name}_{num:04d}.jpg"
    victim.unlink()
    with pytest.raises(MissingResourceError, match=f"{name}_{num:04d}.jpg listed in pairs.txt"):
        load_lfw(root, size=8)
    assert decodes == []


# ------------------------------------------------------------------------------------ bad input (2): truncated
def _truncate(path, n_bytes):
    data = path.read_bytes()
    path.write_bytes(data[:n_bytes])


@pytest.mark.parametrize("rel,load", [
    ("celeba/img_align_celeba/000003.jpg", lambda r: load_celeba(r, size=8)),
    ("lfw/Person_0001/Person_0001_0002.jpg", lambda r: load_identity_folders(r / "lfw", size=8)),
    ("IJBC/loose_crop/7.jpg", lambda r: load_ijb(r, name="IJBC")),
])
def test_truncated_image_is_named_before_decoding(broken, decodes, rel, load):
    root, _ = broken
    _truncate(root / rel, 8)  # still starts like a JPEG, far too short to be one
    with pytest.raises(InvalidArgumentError, match="at least 100 bytes, this one has 8") as err:
        load(root)
    assert rel.split("/")[-1] in str(err.value) and "truncated" in str(err.value)
    assert decodes == []
    (root / rel).write_bytes(b"")  # empty
    with pytest.raises(InvalidArgumentError, match="expected an image file"):
        load(root)
    assert decodes == []


def test_truncated_vggface2_image_is_named(broken, decodes):
    root, _ = broken
    victim = sorted((root / "VGGFace2" / "test").rglob("*.jpg"))[2]
    _truncate(victim, 3)
    with pytest.raises(InvalidArgumentError, match=f"{victim.parent.name}.*{victim.name}.*truncated"):
        load_vggface2(root, split="test", size=8)
    assert decodes == []


def test_image_cut_inside_its_data_is_a_privkit_error(broken, decodes):
    root, _ = broken
    victim = root / "celeba" / "img_align_celeba" / "000002.jpg"
    _truncate(victim, victim.stat().st_size // 3)  # the headers survive: only decoding finds it
    with pytest.raises(InvalidArgumentError, match="000002.jpg.*expected a complete image file"):
        load_celeba(root, size=8)
    assert victim in decodes  # (and the decode counter the other tests rely on does count)


# ---------------------------------------------------------------------------------- bad input (3): pairs.txt
def _replace_line(path, line_no, new):
    lines = path.read_text().splitlines()
    lines[line_no - 1] = new(lines[line_no - 1])
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("line_no,new,match", [
    (2, lambda ln: "\t".join(ln.split("\t")[:2]), r"line 2: expected 'name i j' \(matched\)"),
    (3, lambda ln: ln.split("\t")[0] + "\tone\t2", "line 3: image numbers must be integers"),
    (2, lambda ln: "\t".join(ln.split("\t")[:2] + [ln.split("\t")[1]]), "line 2: a matched pair must name two different"),
    (8, lambda ln: "\t".join([ln.split("\t")[0], "1", ln.split("\t")[0], "2"]), "line 8: a mismatched pair must name two"),
    (8, lambda ln: "\t".join(ln.split("\t")[:3]), r"line 8: expected 'name1 i name2 j' \(mismatched\)"),
    (1, lambda ln: "10 pairs", "line 1: expected '<folds> <pairs per class>'"),
    (4, lambda ln: ln.split("\t")[0] + "\t0\t2", "line 4: image numbers start at 1"),
])
def test_corrupt_pairs_line_is_named_before_decoding(broken, decodes, line_no, new, match):
    root, s = broken
    assert s["lfw"]["pairs_per_fold"] == 6  # lines 2-7 matched, 8-13 mismatched in fold 0
    pairs = root / "lfw" / "pairs.txt"
    _replace_line(pairs, line_no, new)
    with pytest.raises(InvalidArgumentError, match=match) as err:
        load_lfw(root, size=8)
    assert str(pairs) in str(err.value)
    assert decodes == []


def test_pairs_file_with_a_line_missing(broken, decodes):
    root, _ = broken
    pairs = root / "lfw" / "pairs.txt"
    lines = pairs.read_text().splitlines()
    pairs.write_text("\n".join(lines[:5] + lines[6:]) + "\n")
    with pytest.raises(InvalidArgumentError, match="pairs.txt: the header announces 120 pairs but the file holds 119"):
        load_lfw(root, size=8)
    assert decodes == []


# ----------------------------------------------------------------------- bad input (4): identity with too few
def test_short_vggface2_identity_is_named(broken, decodes):
    root, s = broken
    n_test = s["vggface2"]["splits"]["test"]["n_identities"]
    folders = sorted(p for p in (root / "VGGFace2" / "test").iterdir() if p.is_dir())
    victim = folders[1]
    for f in sorted(victim.iterdir())[1:]:
        f.unlink()  # one image left
    want = IdentitySelection(min_images=K, n_identities=n_test, images_per_identity=K)
    with pytest.raises(InsufficientDataError, match=f"identity '{victim.name}' has 1") as err:
        load_vggface2(root, split="test", selection=want, size=8)
    assert f"need at least {n_test} identities with >= {K} images" in str(err.value)
    assert decodes == []


def test_short_celeba_identity_is_named(broken, decodes):
    root, s = broken
    ident = root / "celeba" / "identity_CelebA.txt"
    lines = ident.read_text().splitlines()
    label = lines[0].split()[1]
    kept = [ln for ln in lines if ln.split()[1] != label] + [ln for ln in lines if ln.split()[1] == label][:2]
    ident.write_text("\n".join(kept) + "\n")  # that identity now has 2 images listed
    want = IdentitySelection(min_images=K, n_identities=N_ID, images_per_identity=K)
    with pytest.raises(InsufficientDataError, match=f"identity {label} has 2"):
        load_celeba(root, selection=want, size=8)
    assert decodes == []


def test_lfw_pair_beyond_an_identitys_images_is_named(broken, decodes):
    root, _ = broken
    pairs = root / "lfw" / "pairs.txt"
    _replace_line(pairs, 2, lambda ln: f"{ln.split(chr(9))[0]}\t1\t{K + 1}")
    name = pairs.read_text().splitlines()[1].split("\t")[0]
    with pytest.raises(MissingResourceError, match=f"{name}_{K + 1:04d}.jpg listed in pairs.txt"):
        load_lfw(root, size=8)
    assert decodes == []
