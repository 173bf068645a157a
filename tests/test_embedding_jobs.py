"""Embedding as jobs (privkit.studies.embedding): a ``faces.embed`` job gives the bits of the recipe called directly,
a re-run reads the store, a worker reads the face set from disk and loads its own encoder, the same request asked
twice runs once, the keys follow what made the set, the weights and the recipe, and bad input is refused."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from privkit.config import load as load_config
from privkit.data import load_faces
from privkit.encoders import load_encoder
from privkit.errors import InvalidArgumentError, UnknownNameError
from privkit.jobs import JobSpec, LocalExecutor, ResultStore, run_job
from privkit.studies import embedding as EJ
from privkit.studies.isp import tables as IT
from privkit.studies.scoreshield import faces as SF

ARGS = {"name": "portraits-views", "n_identities": 4, "images_per_identity": 2, "size": 64, "seed": 0}


@pytest.fixture(scope="module")
def setup():
    source = EJ.FaceSource("load_faces", ARGS)
    return source, EJ.load_source(source), load_encoder("pixels", device="cpu")


def _request(setup, **kw):
    source, faces, enc = setup
    return EJ.EmbedRequest(source, faces, enc, "isp", {"input": "image", "cache": False}, 0, **kw)


def _entries(store, kind):
    return [p for p in store.root.glob("*/*/spec.json") if f'"kind": "{kind}"' in p.read_text()]


def test_a_source_loads_what_its_loader_loads(setup):
    source, faces, _ = setup
    direct = load_faces(**ARGS)
    assert torch.equal(faces.images, direct.images) and torch.equal(faces.identity, direct.identity)
    assert source.label() == "portraits-views" and source.params()["loader"] == "load_faces"


def test_a_job_equals_the_recipe_called_here_and_a_rerun_reads_the_store(tmp_path, setup, monkeypatch):
    here = EJ.embed_all([_request(setup)])[0]
    jobs = EJ.Jobs(ResultStore(tmp_path), LocalExecutor(device="cpu"))
    got = EJ.embed_all([_request(setup)], jobs)[0]
    assert torch.equal(got.emb, here.emb) and got.failures_to_enrol == here.failures_to_enrol == 0
    assert len(_entries(jobs.store, "faces.embed")) == 1
    assert not _entries(jobs.store, "faces.set")  # the local executor keeps the face set in memory only

    def boom(*a, **k):
        raise AssertionError("a stored embedding must not be recomputed")

    monkeypatch.setitem(EJ.RECIPES, "isp", "privkit.studies.isp.experiments:no_such_function")
    monkeypatch.setattr("privkit.studies.isp.experiments.embed_faces", boom)
    again = EJ.embed_all([_request(setup)], EJ.Jobs(ResultStore(tmp_path), LocalExecutor(device="cpu")))[0]
    assert torch.equal(again.emb, here.emb)  # a fresh store object: read from disk


def test_the_same_request_twice_runs_once(tmp_path, setup):
    jobs = EJ.Jobs(ResultStore(tmp_path), LocalExecutor(device="cpu"))
    a, b = EJ.embed_all([_request(setup), _request(setup)], jobs)
    assert torch.equal(a.emb, b.emb) and len(_entries(jobs.store, "faces.embed")) == 1


def test_a_worker_reads_the_face_set_from_disk_and_loads_its_own_encoder(tmp_path, setup, monkeypatch):
    source, faces, enc = setup
    req = _request(setup)
    spec = EJ.embed_spec(req)
    store = ResultStore(tmp_path)
    EJ.save_face_set(EJ.face_set_spec(source), faces, store, executor=object())  # not local: written to disk
    assert len(_entries(store, "faces.set")) == 1
    monkeypatch.setattr(EJ, "_ENCODERS", {})  # a fresh worker: nothing shared with it
    run_job(tmp_path, spec.to_dict(), device="cpu")  # its own store object, the spec as JSON
    assert ("pixels", "cpu", None) in EJ._ENCODERS
    got = ResultStore(tmp_path).load(spec)
    assert torch.equal(got.tensors["emb"], EJ.embed_all([req])[0].emb)


def test_keys_follow_the_set_the_weights_and_the_recipe(setup):
    source, faces, enc = setup
    key = EJ.embed_spec(_request(setup)).key()
    assert key == EJ.embed_spec(_request(setup)).key()
    other_set = EJ.EmbedRequest(EJ.FaceSource("load_faces", {**ARGS, "seed": 1}), faces, enc, "isp",
                                {"input": "image", "cache": False}, 0)
    assert EJ.embed_spec(other_set).key() != key
    assert EJ.embed_spec(_request(setup), weights="0" * 64).key() != key
    assert EJ.embed_spec(dataclasses.replace(_request(setup), options={"input": "box", "cache": False})).key() != key
    assert EJ.embed_spec(_request(setup)).inputs["weights"] == EJ.weights_fingerprint(enc)
    assert EJ.embed_spec(_request(setup, device="cpu")).key() != key  # where it embeds is part of the spec


def test_bad_input_is_refused(setup):
    source, faces, enc = setup
    with pytest.raises(UnknownNameError):
        EJ.FaceSource("load_nothing", {})
    with pytest.raises(InvalidArgumentError, match="data_root"):
        EJ.FaceSource("load_celeba", {"size": 32})
    with pytest.raises(UnknownNameError):
        EJ.embed_spec(dataclasses.replace(_request(setup), recipe="nope"))
    with pytest.raises(InvalidArgumentError, match="EmbedRequest"):
        EJ.embed_all(["not a request"])
    with pytest.raises(InvalidArgumentError, match="FaceSet"):
        EJ.save_face_set(EJ.face_set_spec(source), "faces", None, None)


def test_the_notebooks_name_their_face_sets_by_the_preset():
    cfg = load_config("scoreshield", "smoke")
    sets, imp = SF.face_sources(cfg, paper_data=False, seed=3)
    assert list(sets)[0] == cfg.face_set and set(sets) == set(cfg.verification_sets)
    assert sets[cfg.face_set].args == {"name": cfg.face_set, "n_identities": cfg.n_identities,
                                       "images_per_identity": cfg.images_per_identity, "size": cfg.face_size,
                                       "seed": 3}
    assert imp.args["name"] == cfg.impostor_set and imp.args["n_identities"] == cfg.impostor_identities
    assert SF.face_sources(dataclasses.replace(cfg, impostor_set=None), paper_data=False)[1] is None
    paper, _ = SF.face_sources(load_config("scoreshield", "paper"), paper_data=True, data_root="/data")
    assert paper["lfw"].loader == "load_lfw" and paper["lfw"].data_root == "/data"
    with pytest.raises(InvalidArgumentError, match="impostor_identities"):
        SF.face_sources(dataclasses.replace(cfg, impostor_identities=1), paper_data=False)
    with pytest.raises(InvalidArgumentError, match="data_root"):
        SF.face_sources(load_config("scoreshield", "paper"), paper_data=True)
    icfg = load_config("isp", "smoke")
    main, other = IT.face_sources(icfg, paper_data=False, seed=0)
    assert main.args["name"] == icfg.face_set and other.args["name"] == icfg.transfer_set
    main, other = IT.face_sources(load_config("isp", "paper"), paper_data=True, data_root="/data")
    assert (main.loader, other.loader, other.args["split"]) == ("load_celeba", "load_vggface2", "test")


def test_scoreshield_embeddings_through_jobs_equal_those_made_here(tmp_path):
    cfg = dataclasses.replace(load_config("scoreshield", "smoke"), n_identities=4, images_per_identity=2,
                              impostor_identities=3)
    sets_src, imp_src = SF.face_sources(cfg, paper_data=False)
    enc = {"pixels": load_encoder("pixels", device="cpu")}
    main = EJ.load_source(sets_src[cfg.face_set])
    sets = SF.load_verification_sets((main, SF.training_mask(main.identity)), main_name=cfg.face_set,
                                     sources=sets_src)
    jobs = EJ.Jobs(ResultStore(tmp_path), LocalExecutor(device="cpu"))
    kw = {"sources": sets_src, "encoder_names": ["pixels"], "size": cfg.face_size, "scale": "smoke"}
    here, there = (SF.embed_verification_sets(enc, sets, **kw, jobs=j) for j in (None, jobs))
    assert here.keys() == there.keys() and all(torch.equal(here[k]["all"], there[k]["all"]) for k in here)
    imp_here, text = SF.embed_impostor_set(enc, encoder_names=["pixels"], source=imp_src, size=cfg.face_size)
    imp_there, _ = SF.embed_impostor_set(enc, encoder_names=["pixels"], source=imp_src, size=cfg.face_size,
                                         jobs=jobs)
    assert torch.equal(imp_here["pixels"]["score"], imp_there["pixels"]["score"]) and "3 different people" in text
    with pytest.raises(InvalidArgumentError, match="no source"):
        SF.embed_verification_sets(enc, sets, **{**kw, "sources": {}})
    assert isinstance(EJ.face_set_spec(sets_src[cfg.face_set]), JobSpec)


def test_the_plan_names_the_embedding_jobs_the_notebook_runs(tmp_path):
    from privkit.studies.isp import jobs as IJ

    cfg = dataclasses.replace(load_config("isp", "smoke"), encoders=("pixels:image", "pixels:box"))
    sources = IT.face_sources(cfg, paper_data=False, seed=0)
    faces, other = (EJ.load_source(s) for s in sources)
    jobs = EJ.Jobs(ResultStore(tmp_path), LocalExecutor(device="cpu"))
    got = IT.embed_encoders(cfg, faces, other, device="cpu", seed=0, sources=sources, jobs=jobs)
    assert list(got.emb) == ["pixels [image]", "pixels [box]"]
    planned = IJ.planned_specs(cfg, got.encoders, scale="smoke", seed=0, data_root=None)["embed"]
    assert len(planned) == 4 and all(jobs.store.status(s) == "done" for s in planned)
    here = IT.embed_encoders(cfg, faces, other, device="cpu", seed=0, sources=sources)  # no store: the same bits
    assert all(torch.equal(here.emb[k], got.emb[k]) and torch.equal(here.emb_other[k], got.emb_other[k])
               for k in got.emb)
