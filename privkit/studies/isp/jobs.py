"""The ISP study as jobs: one ``isp.attribution`` job per attribution encoder, one ``isp.rank_sweep`` job per
embedded encoder and one ``isp.inversion`` job per inverted encoder, over one study-data entry in the result store.

The notebook embeds the face sets (through the content-keyed embedding cache) and fits the erasers of the leakage
study; :func:`study_spec` keys what the jobs share by what made it (the scale, the seed, the whole preset, the data
root's file index and a fingerprint of every encoder's weights), :func:`save_study` puts it in the store (in memory
under the local executor, on disk for any other), and :func:`attribution_study`, :func:`rank_sweep` and
:func:`run_inversion` ask the executor for the jobs missing from the store and assemble the notebook's tables from
the stored results with the same functions (:mod:`privkit.studies.isp.tables`) the single-encoder results always
went through: at a given scale and seed the tables equal those of the former in-kernel loops.

A worker loads an encoder by its name (``privkit.encoders.load_encoder``); in the notebook's own process the
encoders it loaded are reused (:func:`share_encoders`, :mod:`privkit.studies.embedding`, whose ``faces.embed`` jobs
make the embeddings).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd
import torch

from privkit.data.types import FaceSet
from privkit.isp.projection import IdentityProjector, LeaceEraser
from privkit.jobs import Executor, JobContext, JobResult, JobSpec, LocalExecutor, ResultStore, folder_fingerprint
from privkit.jobs.codec import decode_dataclass, decode_frame, encode_dataclass, encode_frame, plain_json
from privkit.studies.embedding import embed_spec, share_encoders
from privkit.studies.embedding import shared_encoder as _encoder
from privkit.studies.isp import experiments as X
from privkit.studies.isp import tables as T
from privkit.studies.isp.presets import IspConfig

__all__ = ["StudyData", "study_spec", "encode_study", "decode_study", "save_study", "share_encoders",
           "attribution_spec", "rank_sweep_spec", "inversion_spec", "attribution_job", "rank_sweep_job",
           "inversion_job", "judge_thresholds", "attribution_study", "rank_sweep", "run_inversion", "planned_specs"]

_ERASERS = {"IdentityProjector": IdentityProjector, "LeaceEraser": LeaceEraser}
_SPLITS = ("train", "val", "test")


@dataclasses.dataclass(eq=False)
class StudyData:
    """What the ISP jobs share.

    Attributes:
        faces: the main face set; masks: ``train`` / ``val`` / ``test`` boolean masks of its identity splits;
        emb: label ``"name [mode]"`` -> (N, d) embeddings of ``faces``; fits: label -> {"ISP-W": the full-rank fit
        on the probe-fit identities, "ISP-X": the fit on the other set} (what the leakage study fitted).
    """

    faces: FaceSet
    masks: dict[str, torch.Tensor]
    emb: dict[str, torch.Tensor]
    fits: dict[str, dict[str, Any]]


def _weights(encoders: Mapping[str, Any]) -> dict[str, str]:
    return {f"weights:{n}": X.state_fingerprint(e) for n, e in sorted(encoders.items())}


def study_spec(cfg: IspConfig, *, scale: str, seed: int, data_root: str | None,
               encoders: Mapping[str, Any]) -> JobSpec:
    """The store spec of the study data: the preset, scale and seed, the data root's file index and the weights of
    every loaded encoder (so that other weights never meet a stale entry)."""
    inputs = {"data_root": folder_fingerprint(data_root)} if data_root else {}  # given at the paper scales
    params = {"paper": "isp", "part": "study data", "scale": scale, "seed": int(seed), "cfg": plain_json(
        dataclasses.asdict(cfg))}
    return JobSpec(kind="isp.study_data", params=params, inputs={**inputs, **_weights(encoders)},
                   label="isp study data")


def encode_study(data: StudyData) -> JobResult:
    """The study data as a store result."""
    tensors: dict[str, torch.Tensor] = {}
    meta: dict[str, Any] = {"faces": encode_dataclass("faces", data.faces, tensors), "labels": list(data.emb),
                            "fits": {}}
    tensors.update({f"mask.{k}": data.masks[k] for k in _SPLITS})
    tensors.update({f"emb.{i}": data.emb[lab] for i, lab in enumerate(data.emb)})
    for i, lab in enumerate(data.emb):
        meta["fits"][lab] = {m: encode_dataclass(f"fit.{i}.{m}", f, tensors) for m, f in data.fits[lab].items()}
    return JobResult(data=meta, tensors=tensors)


def decode_study(result: JobResult) -> StudyData:
    """The :class:`StudyData` a store result holds."""
    d, t = result.data, result.tensors
    faces = decode_dataclass({"FaceSet": FaceSet}, "faces", d["faces"], t)
    labels = d["labels"]
    emb = {lab: t[f"emb.{i}"] for i, lab in enumerate(labels)}
    fits = {lab: {m: decode_dataclass(_ERASERS, f"fit.{i}.{m}", meta, t) for m, meta in d["fits"][lab].items()}
            for i, lab in enumerate(labels)}
    return StudyData(faces, {k: t[f"mask.{k}"] for k in _SPLITS}, emb, fits)


def save_study(spec: JobSpec, data: StudyData, store: ResultStore, executor: Executor) -> None:
    """Put the study data in the store unless it is there: in this process's memory for the local executor (its jobs
    run here), on disk for any other (the cluster's workers read it)."""
    if store.status(spec) != "done":
        (store.keep if isinstance(executor, LocalExecutor) else store.save)(spec, encode_study(data))


def judge_thresholds(cfg: IspConfig, study: StudyData, judge_labs: Sequence[str]) -> dict[str, float]:
    """Each judge's cosine threshold at ``cfg.reference_far``, set on the validation identities' embeddings."""
    val = study.masks["val"]
    return {lab.split(" ")[0]: X.reference_threshold_from_embeddings(study.emb[lab][val], study.faces.identity[val],
                                                                      far=cfg.reference_far) for lab in judge_labs}


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """One intra-op thread while a job runs, as the notebook's kernel runs the ISP study (its matrices are small), so
    that a job gives the same bits on a cluster worker with more CPUs as in the kernel; restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _records(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Rows of dicts as JSON that keeps their key order (the store writes mappings with sorted keys)."""
    columns = list(rows[0]) if rows else []
    return {"columns": columns, "values": [plain_json([r[c] for c in columns]) for r in rows]}


def _unrecords(records: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(records["columns"], v)) for v in records["values"]]


def _study(ctx: JobContext) -> StudyData:
    return decode_study(ctx.store.load(ctx.spec.inputs["study"]))


# ---------------------------------------------------------------------------------------------- specs
def _job_spec(kind: str, params: Mapping[str, Any], study_key: str, label: str) -> JobSpec:
    return JobSpec(kind=kind, params=dict(params), inputs={"study": study_key}, label=label)


def attribution_spec(cfg: IspConfig, lab: str, *, study_key: str, seed: int, data_root: str | None) -> JobSpec:
    """The ``isp.attribution`` job of one whole-image encoder (label ``"name [mode]"``)."""
    return _job_spec("isp.attribution", {"label": lab, "cfg": plain_json(dataclasses.asdict(cfg)), "seed": int(seed),
                                         "data_root": data_root}, study_key, f"isp attribution {lab}")


def rank_sweep_spec(cfg: IspConfig, lab: str, *, study_key: str, seed: int, data_root: str | None) -> JobSpec:
    """The ``isp.rank_sweep`` job of one encoder (at the largest k and the lowest FAR the study data resolves)."""
    return _job_spec("isp.rank_sweep", {"label": lab, "cfg": plain_json(dataclasses.asdict(cfg)), "seed": int(seed),
                                        "data_root": data_root}, study_key, f"isp rank sweep {lab}")


def inversion_spec(cfg: IspConfig, lab: str, *, module: str | None, mode: str, judges: Sequence[str],
                   study_key: str, seed: int, data_root: str | None) -> JobSpec:
    """The ``isp.inversion`` job of one encoder's raw and ISP-W embeddings (``module``: the encoder differentiated by
    the optimisation attack, None for regression attacks only), judged by ``judges`` (labels; their thresholds are
    set on the validation identities' embeddings in the study data)."""
    params = {"label": lab, "module": module, "mode": mode, "judges": list(judges),
              "cfg": plain_json(dataclasses.asdict(cfg)), "seed": int(seed), "data_root": data_root}
    return _job_spec("isp.inversion", params, study_key, f"isp inversion {lab}")


def _cfg(params: Mapping[str, Any]) -> IspConfig:
    fields = {f.name: f for f in dataclasses.fields(IspConfig)}
    return IspConfig(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in params["cfg"].items() if k in fields})


# ---------------------------------------------------------------------------------------------- the jobs
def attribution_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """The ``isp.attribution`` job: FII, CPI and B* of one encoder on the validation and test identities."""
    with _one_thread():
        return _attribution_job(params, ctx)


def _attribution_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    study = _study(ctx)
    name = params["label"].split(" ")[0]
    pool = study.faces.subset(study.masks["val"] | study.masks["test"])
    a = T.attribution_one(_cfg(params), _encoder(name, ctx.device, params["data_root"]), pool, seed=params["seed"])
    tensors: dict[str, torch.Tensor] = {}
    frames = {k: encode_frame(k, a[k], tensors) for k in ("fii", "fii_by_fcr")}
    if a["cpi"] is not None:
        frames["cpi"] = encode_frame("cpi", a["cpi"], tensors)
    b = a["bstar"]
    frames.update({"bstar.per_pair": encode_frame("bstar.per_pair", b.per_pair, tensors),
                   "bstar.curve": encode_frame("bstar.curve", b.curve, tensors)})
    return JobResult(data={"frames": frames, "cpi_note": a["cpi_note"], "bstar_median": b.median,
                           "never_flipped": b.never_flipped}, tensors=tensors)


def _decode_attribution(result: JobResult) -> dict[str, Any]:
    from privkit.isp.attribution import BStarResult

    d, t = result.data, result.tensors
    f = {k: decode_frame(k, m, t) for k, m in d["frames"].items()}
    bstar = BStarResult(median=d["bstar_median"], per_pair=f["bstar.per_pair"], curve=f["bstar.curve"],
                        never_flipped=d["never_flipped"])
    return {"fii": f["fii"], "fii_by_fcr": f["fii_by_fcr"], "cpi": f.get("cpi"), "cpi_note": d["cpi_note"],
            "bstar": bstar}


_SWEEP_INPUTS: dict[tuple[str, int], T.SweepInputs] = {}


def _sweep_inputs(study_key: str, cfg: IspConfig, study: StudyData, seed: int) -> T.SweepInputs:
    """The inputs every encoder's sweep shares, built once per study in a process (the local executor runs every
    encoder's job in the notebook's kernel); only the latest study's are kept."""
    key = (study_key, int(seed))
    if key not in _SWEEP_INPUTS:
        _SWEEP_INPUTS.clear()
        _SWEEP_INPUTS[key] = T.sweep_inputs(cfg, study.faces, study.masks, seed=seed)
    return _SWEEP_INPUTS[key]


def rank_sweep_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """The ``isp.rank_sweep`` job: one encoder's TAR and utility against the rank (ISP-W, LEACE, INLP)."""
    with _one_thread():
        return _rank_sweep_job(params, ctx)


def _rank_sweep_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    study, cfg, lab = _study(ctx), _cfg(params), params["label"]
    shared = _sweep_inputs(ctx.spec.inputs["study"], cfg, study, params["seed"])
    far = T.lowest_resolvable_far(cfg, study.faces.identity, study.masks)
    sweep, util, imnet, notes = T.rank_sweep_one(
        cfg, lab, faces=study.faces, masks=study.masks, embeddings=study.emb[lab],
        encoder=_encoder(lab.split(" ")[0], ctx.device, params["data_root"]), fit_w=study.fits[lab]["ISP-W"],
        isp_x=T.main_projectors(cfg, study.fits[lab])["ISP-X"], shared=shared, k_max=max(cfg.ks),
        far=far, seed=params["seed"])
    tensors: dict[str, torch.Tensor] = {}
    return JobResult(data={"sweep": encode_frame("sweep", sweep, tensors), "util": encode_frame("util", util, tensors),
                           "imnet": _records(imnet), "notes": notes}, tensors=tensors)


def inversion_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """The ``isp.inversion`` job: the attacks on one encoder's raw and ISP-W embeddings, judged by the judges."""
    with _one_thread():
        return _inversion_job(params, ctx)


def _inversion_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    study, cfg, lab = _study(ctx), _cfg(params), params["label"]
    tgt, aux, data, settings = T.inversion_setup(cfg, study.faces, study.masks, seed=params["seed"])
    isp_w = T.main_projectors(cfg, study.fits[lab])["ISP-W"]
    module = None if params["module"] is None else _encoder(params["module"], ctx.device, params["data_root"])
    attacked = T.inversion_attacked(lab, module, study.emb[lab], isp_w, mode=params["mode"], tgt=tgt, aux=aux)
    taus = judge_thresholds(cfg, study, params["judges"])
    judges = {j: _encoder(j, ctx.device, params["data_root"]) for j in taus}
    rows, recs = X.inversion_study(attacked, data, judges, taus, settings=settings, seed=params["seed"])
    return JobResult(data={"rows": _records(rows.to_dict("records")), "recs": list(recs), "taus": taus},
                     tensors={f"rec.{i}": r for i, r in enumerate(recs.values())})


# ---------------------------------------------------------------------------------------------- the notebook's studies
def _labels(cfg: IspConfig, encoders: Mapping[str, Any]) -> list[str]:
    """The labels of the preset's encoders that are loaded, in the preset's order (what the notebook embeds)."""
    return T.preset_labels(cfg.encoders, encoders)


def planned_specs(cfg: IspConfig, encoders: Mapping[str, Any], *, scale: str, seed: int, data_root: str | None,
                  paper_data: bool | None = None) -> dict[str, list[JobSpec]]:
    """The study data's spec and every job the notebook asks for, keyed as the notebook keys them (what ``python -m
    privkit plan`` lists): ``{"embed": [the faces.embed jobs], "study": [spec], "attribution": [...], "rank_sweep":
    [...], "inversion": [...]}``.

    Args:
        encoders: the loaded encoders by name (those that are not loaded are skipped, as the notebook skips them).
        paper_data: whether the faces come from ``data_root`` (the paper and rehearsal scales; None: when a data root
            is given), as :func:`~privkit.studies.isp.tables.face_sources`.
    """
    study = study_spec(cfg, scale=scale, seed=seed, data_root=data_root, encoders=encoders)
    key, labels = study.key(), _labels(cfg, encoders)
    biometric = [lab for lab in labels if encoders[lab.split(" ")[0]].kind == "face-recognition"]
    judge_labs, contrast = T.inversion_roles(labels, biometric)
    attribution = T.preset_labels(cfg.attribution_encoders, encoders)
    who, _ = T.inversion_attacks(cfg, labels, contrast)
    common = {"study_key": key, "seed": seed, "data_root": data_root}
    sources = T.face_sources(cfg, paper_data=data_root is not None if paper_data is None else paper_data,
                             seed=seed, data_root=data_root)
    return {"embed": [embed_spec(r) for r in T.embedding_requests(cfg, encoders, sources, seed=seed)],
            "study": [study],
            "attribution": [attribution_spec(cfg, lab, **common) for lab in attribution],
            "rank_sweep": [rank_sweep_spec(cfg, lab, **common) for lab in labels],
            "inversion": ([inversion_spec(cfg, lab, module=name, mode=mode, judges=judge_labs, **common)
                           for lab, name, mode in who] if judge_labs else [])}


def attribution_study(cfg: IspConfig, encoders: Mapping[str, Any], *, store: ResultStore, scale: str,
                      executor: Executor | None = None, seed: int = 0, data_root: str | None = None,
                      progress: bool = False) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """FII, CPI and B* of every encoder of ``cfg.attribution_encoders`` that is loaded, as jobs, and Table 3
    (:func:`~privkit.studies.isp.tables.attribution_summary`). The study data must be in ``store``
    (:func:`save_study`)."""
    executor = executor or LocalExecutor()
    specs = planned_specs(cfg, encoders, scale=scale, seed=seed, data_root=data_root)["attribution"]
    got = {s.params["label"]: r for s, r in zip(specs, executor.run(specs, store, progress=progress))}
    labs = T.preset_labels(cfg.attribution_encoders)
    return T.attribution_summary([(lab, _decode_attribution(got[lab]) if lab in got else None) for lab in labs])


def rank_sweep(cfg: IspConfig, encoders: Mapping[str, Any], *, store: ResultStore, scale: str,
               executor: Executor | None = None, seed: int = 0, data_root: str | None = None,
               progress: bool = False) -> T.RankSweep:
    """The rank sweep of every encoder (:func:`~privkit.studies.isp.tables.rank_sweep_one`), as jobs."""
    executor = executor or LocalExecutor()
    specs = planned_specs(cfg, encoders, scale=scale, seed=seed, data_root=data_root)["rank_sweep"]
    parts = []
    for r in executor.run(specs, store, progress=progress):
        d, t = r.data, r.tensors
        parts.append((decode_frame("sweep", d["sweep"], t), decode_frame("util", d["util"], t), _unrecords(d["imnet"]),
                      d["notes"]))
    return T.rank_sweep_tables(parts)


def run_inversion(cfg: IspConfig, encoders: Mapping[str, Any], *, faces: FaceSet, masks: Mapping[str, torch.Tensor],
                  store: ResultStore, scale: str, executor: Executor | None = None, seed: int = 0,
                  data_root: str | None = None, progress: bool = False) -> T.InversionRun:
    """Template inversion of every encoder of ``cfg.inversion_encoders`` (and the FR contrast) raw and after ISP-W,
    one job per encoder: one target image per test identity (at most ``cfg.inversion_targets``), every probe-fit
    image as the auxiliary set, judged by dlib and faceres (:func:`~privkit.studies.isp.tables.inversion_roles`) at
    ``cfg.reference_far`` thresholds set on the validation identities.

    Raises:
        InsufficientDataError: no judge is loaded; InvalidArgumentError: ``seed < 0``.
    """
    from privkit._validate import check_int
    from privkit.errors import InsufficientDataError

    seed = check_int("seed", seed, minimum=0)
    executor = executor or LocalExecutor()
    labels = _labels(cfg, encoders)
    biometric = [lab for lab in labels if encoders[lab.split(" ")[0]].kind == "face-recognition"]
    judge_labs, contrast = T.inversion_roles(labels, biometric)
    if not judge_labs:
        raise InsufficientDataError("inversion needs at least one judge encoder (dlib-resnet-fr or faceres)")
    specs = planned_specs(cfg, encoders, scale=scale, seed=seed, data_root=data_root)["inversion"]
    tgt, aux, _, _ = T.inversion_setup(cfg, faces, masks, seed=seed)
    _, skipped = T.inversion_attacks(cfg, labels, contrast)
    rows, recs, taus = [], {}, {}
    for r in executor.run(specs, store, progress=progress):
        rows += _unrecords(r.data["rows"])
        taus = {lab.split(" ")[0]: r.data["taus"][lab.split(" ")[0]] for lab in judge_labs}
        recs.update({name: r.tensors[f"rec.{i}"] for i, name in enumerate(r.data["recs"])})
    return T.InversionRun(T.inversion_table(cfg, rows), recs, taus, tgt, aux, contrast, skipped)
