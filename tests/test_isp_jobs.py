"""The ISP study as jobs (privkit.studies.isp.jobs): the jobs' results equal the single-encoder functions called
directly, a re-run reads the store, a worker that reads the study data from disk and loads its own encoders gets the
same result, and the keys change with what made the data."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch

from privkit.config import load as load_config
from privkit.data import load_faces
from privkit.data.splits import identity_splits
from privkit.encoders import load_encoder
from privkit.jobs import LocalExecutor, ResultStore, run_job
from privkit.studies import embedding as EJ
from privkit.studies.isp import experiments as X
from privkit.studies.isp import jobs as J
from privkit.studies.isp import tables as T


@pytest.fixture(scope="module")
def ctx():
    """The smoke preset on two encoders (the biometric judge and raw pixels): faces, splits, embeddings, fits."""
    cfg = dataclasses.replace(load_config("isp", "smoke"), encoders=("dlib-resnet-fr:box", "pixels:image"))
    faces = load_faces(cfg.face_set, n_identities=cfg.n_identities, images_per_identity=cfg.images_per_identity,
                       size=cfg.face_size, context_leakage=cfg.context_leakage, seed=0)
    other = load_faces(cfg.transfer_set, n_identities=cfg.transfer_identities, images_per_identity=cfg.transfer_images,
                       size=cfg.face_size, context_leakage=cfg.context_leakage, seed=0)
    parts = identity_splits(faces.identity, counts=cfg.split_counts, seed=0)
    masks = {k: torch.isin(faces.identity, v) for k, v in parts.items()}
    encoders = {n: load_encoder(n, device="cpu") for n in ("dlib-resnet-fr", "pixels")}
    emb, fits = {}, {}
    for spec in cfg.encoders:
        name, mode = spec.split(":")
        lab = f"{name} [{mode}]"
        emb[lab] = X.embed_faces(encoders[name], faces, input=mode, cache=False)
        fits[lab] = {"ISP-W": X.fit_eraser("isp", emb[lab][masks["train"]], faces.identity[masks["train"]], rank=None),
                     "ISP-X": X.fit_eraser("isp", X.embed_faces(encoders[name], other, input=mode, cache=False),
                                           other.identity, rank=cfg.isp_rank)}
    return cfg, faces, masks, encoders, J.StudyData(faces, masks, emb, fits)


def _store(tmp_path, cfg, encoders, data, *, keep=True):
    store = ResultStore(tmp_path / "store")
    spec = J.study_spec(cfg, scale="smoke", seed=0, data_root=None, encoders=encoders)
    (store.keep if keep else store.save)(spec, J.encode_study(data))
    J.share_encoders(encoders, device="cpu", data_root=None)
    return store


def test_study_data_round_trips_through_the_store(tmp_path, ctx):
    cfg, faces, masks, encoders, data = ctx
    store = ResultStore(tmp_path)
    spec = J.study_spec(cfg, scale="smoke", seed=0, data_root=None, encoders=encoders)
    store.save(spec, J.encode_study(data))
    back = J.decode_study(ResultStore(tmp_path).load(spec))  # a fresh store object: read from disk
    assert torch.equal(back.faces.images, faces.images) and torch.equal(back.faces.identity, faces.identity)
    assert all(torch.equal(back.masks[k], masks[k]) for k in masks)
    assert list(back.emb) == list(data.emb) and all(torch.equal(back.emb[k], data.emb[k]) for k in data.emb)
    for lab, fit in data.fits.items():
        for m, f in fit.items():
            assert type(back.fits[lab][m]) is type(f) and torch.equal(back.fits[lab][m].basis, f.basis)


def test_keys_follow_what_made_the_data(ctx):
    cfg, _, _, encoders, _ = ctx
    key = J.study_spec(cfg, scale="smoke", seed=0, data_root=None, encoders=encoders).key()
    assert key == J.study_spec(cfg, scale="smoke", seed=0, data_root=None, encoders=encoders).key()
    assert key != J.study_spec(cfg, scale="smoke", seed=1, data_root=None, encoders=encoders).key()
    assert key != J.study_spec(dataclasses.replace(cfg, isp_rank=1), scale="smoke", seed=0, data_root=None,
                               encoders=encoders).key()
    spec = J.study_spec(cfg, scale="smoke", seed=0, data_root=None, encoders=encoders)
    assert set(spec.inputs) == {"weights:dlib-resnet-fr", "weights:pixels"}  # the weights are part of the key
    planned = J.planned_specs(cfg, encoders, scale="smoke", seed=0, data_root=None)
    assert [s.params["label"] for s in planned["rank_sweep"]] == ["dlib-resnet-fr [box]", "pixels [image]"]
    assert [s.params["label"] for s in planned["attribution"]] == ["pixels [image]"]
    assert [s.params["judges"] for s in planned["inversion"]] == [["dlib-resnet-fr [box]"]]
    assert all(s.inputs["study"] == key for k in ("attribution", "rank_sweep", "inversion") for s in planned[k])
    # an encoder that is not loaded has no job, as the notebook skips it
    only_pixels = J.planned_specs(cfg, {"pixels": encoders["pixels"]}, scale="smoke", seed=0, data_root=None)
    assert [s.params["label"] for s in only_pixels["rank_sweep"]] == ["pixels [image]"]
    assert only_pixels["inversion"] == []  # no judge


def test_rank_sweep_jobs_equal_the_direct_sweep_and_a_rerun_reads_the_store(tmp_path, ctx, monkeypatch):
    cfg, faces, masks, encoders, data = ctx
    store = _store(tmp_path, cfg, encoders, data)
    got = J.rank_sweep(cfg, encoders, store=store, scale="smoke", executor=LocalExecutor(device="cpu"))
    far = T.lowest_resolvable_far(cfg, faces.identity, masks)
    shared = T.sweep_inputs(cfg, faces, masks, seed=0)
    parts = []
    for lab in data.emb:
        r_main = min(cfg.isp_rank, data.fits[lab]["ISP-W"].rank, data.fits[lab]["ISP-X"].rank)
        with J._one_thread():  # as the jobs run: one thread, so that any CPU and thread count give equal bits
            parts.append(T.rank_sweep_one(cfg, lab, faces=faces, masks=masks, embeddings=data.emb[lab],
                                          encoder=encoders[lab.split(" ")[0]], fit_w=data.fits[lab]["ISP-W"],
                                          isp_x=X.truncate_eraser(data.fits[lab]["ISP-X"], r_main), shared=shared,
                                          k_max=max(cfg.ks), far=far, seed=0))
    want = T.rank_sweep_tables(parts)
    pd.testing.assert_frame_equal(got.sweep, want.sweep, check_exact=True)
    pd.testing.assert_frame_equal(got.util, want.util, check_exact=True)
    assert got.notes == want.notes

    def broken(*a, **k):
        raise AssertionError("a job already in the store was run again")

    monkeypatch.setattr(T, "rank_sweep_one", broken)
    again = J.rank_sweep(cfg, encoders, store=store, scale="smoke", executor=LocalExecutor(device="cpu"))
    pd.testing.assert_frame_equal(again.sweep, want.sweep, check_exact=True)


def test_attribution_and_inversion_jobs_equal_the_direct_calls(tmp_path, ctx):
    cfg, faces, masks, encoders, data = ctx
    store = _store(tmp_path, cfg, encoders, data)
    attr, notes = J.attribution_study(cfg, encoders, store=store, scale="smoke")
    pool = faces.subset(masks["val"] | masks["test"])
    with J._one_thread():
        want, want_notes = T.attribution_summary([("pixels [image]",
                                                   T.attribution_one(cfg, encoders["pixels"], pool))])
    for k in ("table3", "fii", "cpi", "bstar"):
        pd.testing.assert_frame_equal(attr[k], want[k], check_exact=True)
    assert notes == want_notes

    inv = J.run_inversion(cfg, encoders, faces=faces, masks=masks, store=store, scale="smoke")
    tgt, aux, targets, settings = T.inversion_setup(cfg, faces, masks, seed=0)
    lab = "pixels [image]"
    r_main = min(cfg.isp_rank, data.fits[lab]["ISP-W"].rank, data.fits[lab]["ISP-X"].rank)
    attacked = T.inversion_attacked(lab, encoders["pixels"], data.emb[lab],
                                    X.truncate_eraser(data.fits[lab]["ISP-W"], r_main), mode="image", tgt=tgt, aux=aux)
    taus = J.judge_thresholds(cfg, data, ["dlib-resnet-fr [box]"])
    with J._one_thread():
        rows, recs = X.inversion_study(attacked, targets, {"dlib-resnet-fr": encoders["dlib-resnet-fr"]}, taus,
                                       settings=settings, seed=0)
    pd.testing.assert_frame_equal(inv.table, T.inversion_table(cfg, rows.to_dict("records")), check_exact=True)
    assert inv.taus == taus and set(inv.recs) == set(recs)
    assert all(torch.equal(inv.recs[k], recs[k]) for k in recs)
    assert torch.equal(inv.tgt, tgt) and torch.equal(inv.aux, aux)
    # read back from disk by a fresh store (as after a cluster run): the same tables, columns in the same order
    disk = ResultStore(store.root)
    again = J.run_inversion(cfg, encoders, faces=faces, masks=masks, store=disk, scale="smoke")
    pd.testing.assert_frame_equal(again.table, inv.table, check_exact=True)
    assert list(again.taus) == list(inv.taus)
    swept, swept_disk = (J.rank_sweep(cfg, encoders, store=s, scale="smoke") for s in (store, disk))
    for k in ("sweep", "util", "imnet"):
        pd.testing.assert_frame_equal(getattr(swept_disk, k), getattr(swept, k), check_exact=True)
    attr_disk, _ = J.attribution_study(cfg, encoders, store=disk, scale="smoke")
    for k in ("table3", "fii", "cpi", "bstar"):
        pd.testing.assert_frame_equal(attr_disk[k], attr[k], check_exact=True)


def test_a_worker_reads_the_study_from_disk_and_loads_its_own_encoders(tmp_path, ctx, monkeypatch):
    cfg, _, _, encoders, data = ctx
    store = _store(tmp_path, cfg, encoders, data, keep=False)
    spec = J.planned_specs(cfg, encoders, scale="smoke", seed=0, data_root=None)["attribution"][0]
    run_job(store.root, spec, device="cpu", store=store)
    in_process = store.load(spec)
    monkeypatch.setattr(EJ, "_ENCODERS", {})  # a fresh worker: nothing shared with it
    worker = ResultStore(tmp_path / "worker")
    worker_study = J.study_spec(cfg, scale="smoke", seed=0, data_root=None, encoders=encoders)
    worker.save(worker_study, ResultStore(store.root).load(worker_study))
    run_job(worker.root, spec.to_dict(), device="cpu")  # the worker's own store object, spec as JSON
    assert ("pixels", "cpu", None) in EJ._ENCODERS  # it loaded the encoder by name
    got = ResultStore(worker.root).load(spec)
    assert got.data == in_process.data
    assert set(got.tensors) == set(in_process.tensors)
    for k in got.tensors:  # bit-equal (NaN where an image has no context region)
        torch.testing.assert_close(got.tensors[k], in_process.tensors[k], rtol=0, atol=0, equal_nan=True)
