"""Embedding one face set with one encoder, as a job (``faces.embed``): what ISP and ScoreShield embed.

A face set is named by its :class:`FaceSource` -- the loader and the arguments that made it, and the data root's file
index at the paper scales -- so that its key is known before anything is loaded (``python -m privkit plan`` lists the
embedding jobs without reading an image). The notebook loads the set (:func:`load_source`), puts it in the store under
that source (in this process's memory for the local executor, on disk for a cluster's workers) and asks the executor
for one ``faces.embed`` job per (set, encoder). A job's key holds the source, the encoder's name and a fingerprint of
its weights, the recipe (which embedding function, with which options) and the privkit code; the job runs the same
function as the former in-kernel loop, through the same on-disk embedding cache, so the embeddings are the same bits.

Under the local executor the jobs use the encoders the notebook loaded (:func:`share_encoders`); a worker loads an
encoder by its name (``privkit.encoders.load_encoder``).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from privkit.data.types import FaceSet
from privkit.errors import InvalidArgumentError, UnknownNameError
from privkit.jobs import Executor, JobContext, JobResult, JobSpec, LocalExecutor, ResultStore, folder_fingerprint
from privkit.jobs.codec import decode_dataclass, encode_dataclass, plain_json

__all__ = ["FaceSource", "LOADERS", "RECIPES", "load_source", "face_set_spec", "save_face_set", "share_encoders",
           "shared_encoder", "weights_fingerprint", "EmbedRequest", "Embedded", "Jobs", "embed_spec", "embed_job", "embed_all"]

#: Loaders a :class:`FaceSource` may name -> ``"module:function"`` (``data_root`` first for the paper datasets).
LOADERS: dict[str, str] = {
    "load_faces": "privkit.data:load_faces",
    "load_celeba": "privkit.data.paper.celeba:load_celeba",
    "load_vggface2": "privkit.data.paper.vggface2:load_vggface2",
    "load_lfw": "privkit.data.paper.lfw:load_lfw",
}

#: Embedding recipes -> ``"module:function"``, each ``fn(encoder, faces, *, seed, **options) -> (N, d) tensor`` (the
#: functions the notebooks always embedded with: their cache keys differ, so their cache entries are kept).
RECIPES: dict[str, str] = {
    "isp": "privkit.studies.isp.experiments:embed_faces",
    "scoreshield": "privkit.studies.scoreshield.faces:embed_face_set",
    "scoreshield-impostor": "privkit.studies.scoreshield.faces:embed_impostor_faces",
}

_ENCODERS: dict[tuple[str, str, str | None], Any] = {}


def _resolve(table: Mapping[str, str], what: str, name: str) -> Any:
    if name not in table:
        raise UnknownNameError(what, name, table)
    module, fn = table[name].split(":")
    return getattr(importlib.import_module(module), fn)


@dataclasses.dataclass(frozen=True)
class FaceSource:
    """What made a face set: a loader of :data:`LOADERS`, its keyword arguments (JSON values; ``selection`` is an
    ``IdentitySelection`` as a dict) and the data root of the paper datasets (None for the embedded sets)."""

    loader: str
    args: Mapping[str, Any]
    data_root: str | None = None

    def __post_init__(self) -> None:
        if self.loader not in LOADERS:
            raise UnknownNameError("face loader", self.loader, LOADERS)
        if self.loader != "load_faces" and not self.data_root:
            raise InvalidArgumentError(f"data_root is required by face loader {self.loader!r} (a paper dataset)")
        object.__setattr__(self, "args", plain_json(dict(self.args)))

    def params(self) -> dict[str, Any]:
        return {"loader": self.loader, "args": dict(self.args), "data_root": self.data_root}

    def label(self) -> str:
        name = self.args.get("name") or self.loader.removeprefix("load_")
        return f"{name}" + (f" {self.args['split']}" if "split" in self.args else "")


def load_source(source: FaceSource) -> FaceSet:
    """Load the face set ``source`` names (LFW: its images, in the order of its pair protocol's image list)."""
    fn = _resolve(LOADERS, "face loader", source.loader)
    args = dict(source.args)
    if "selection" in args:
        from privkit.data.paper.identity_folders import IdentitySelection

        args["selection"] = IdentitySelection(**args["selection"])
    out = fn(**args) if source.data_root is None else fn(source.data_root, **args)
    return out.faces if source.loader == "load_lfw" else out


def face_set_spec(source: FaceSource) -> JobSpec:
    """The store spec of a face set: its source and, at the paper scales, the data root's file index."""
    inputs = {"data_root": folder_fingerprint(source.data_root)} if source.data_root else {}
    return JobSpec(kind="faces.set", params=source.params(), inputs=inputs, label=f"face set {source.label()}")


def save_face_set(spec: JobSpec, faces: FaceSet, store: ResultStore, executor: Executor) -> None:
    """Put a face set in the store unless it is there: in memory for the local executor, on disk for any other."""
    if not isinstance(faces, FaceSet):
        raise InvalidArgumentError(f"faces must be a FaceSet, got {type(faces).__name__}")
    if store.status(spec) != "done":
        tensors: dict[str, torch.Tensor] = {}
        meta = encode_dataclass("faces", faces, tensors)
        (store.keep if isinstance(executor, LocalExecutor) else store.save)(spec, JobResult({"faces": meta}, tensors))


def _load_face_set(store: ResultStore, key: str) -> FaceSet:
    r = store.load(key)
    return decode_dataclass({"FaceSet": FaceSet}, "faces", r.data["faces"], r.tensors)


# ---------------------------------------------------------------------------------------------- encoders
def share_encoders(encoders: Mapping[str, Any], *, device: Any, data_root: str | None) -> None:
    """Let jobs run in this process use these loaded encoders (on ``device``) instead of loading their own."""
    from privkit.device import resolve_device

    for name, enc in encoders.items():
        _ENCODERS[(name, str(resolve_device(device)), data_root)] = enc


def shared_encoder(name: str, device: Any, data_root: str | None) -> Any:
    """The encoder ``name`` on ``device``: the one shared by :func:`share_encoders`, else loaded (and kept)."""
    from privkit.device import resolve_device
    from privkit.encoders import load_encoder

    dev = resolve_device(device)
    key = (name, str(dev), data_root)
    if key not in _ENCODERS:
        _ENCODERS[key] = load_encoder(name, device=dev, data_root=data_root)
    return _ENCODERS[key]


def weights_fingerprint(encoder: Any) -> str:
    """sha256 of an encoder's parameters and buffers (every privkit encoder is a torch module holding its weights)."""
    from privkit.studies.isp.experiments import state_fingerprint

    return state_fingerprint(encoder)


# ---------------------------------------------------------------------------------------------- the job
@dataclasses.dataclass
class EmbedRequest:
    """One face set to embed with one encoder.

    Attributes:
        source: what made the set; faces: the loaded set (what ``source`` loads; None only to plan: the job's spec
            does not read it).
        encoder: the loaded encoder (its ``name`` is what a worker loads).
        recipe: a key of :data:`RECIPES`; options: its keyword arguments besides ``seed`` (JSON values).
        seed: the seed the set was made with (part of the cache key).
        device: the device to embed on (None: the executor's device).
    """

    source: FaceSource
    faces: FaceSet | None
    encoder: Any
    recipe: str
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    seed: int = 0
    device: str | None = None


@dataclasses.dataclass
class Embedded:
    """A ``faces.embed`` job's result: the (N, d) embeddings and the encoder's failures to enrol while computing them
    (0 when they came from the embedding cache)."""

    emb: torch.Tensor
    failures_to_enrol: int


def embed_spec(request: EmbedRequest, *, weights: str | None = None) -> JobSpec:
    """The ``faces.embed`` job of a request (``weights``: the encoder's :func:`weights_fingerprint`, if known)."""
    if request.recipe not in RECIPES:
        raise UnknownNameError("embedding recipe", request.recipe, RECIPES)
    source = request.source
    params = {"encoder": request.encoder.name, "recipe": request.recipe, "options": plain_json(dict(request.options)),
              "seed": int(request.seed), "device": request.device, "data_root": source.data_root}
    fp = weights if weights is not None else weights_fingerprint(request.encoder)
    return JobSpec(kind="faces.embed", params=params, inputs={"faces": face_set_spec(source).key(), "weights": fp},
                   label=f"embed {source.label()} with {request.encoder.name}")


def embed_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """The ``faces.embed`` job: one stored face set embedded by one encoder, through the embedding cache."""
    faces = _load_face_set(ctx.store, ctx.spec.inputs["faces"])
    enc = shared_encoder(params["encoder"], params["device"] or ctx.device, params["data_root"])
    fn = _resolve(RECIPES, "embedding recipe", params["recipe"])
    before = int(getattr(enc, "failures_to_enrol", 0))
    emb = fn(enc, faces, seed=params["seed"], **params["options"])
    failures = int(getattr(enc, "failures_to_enrol", 0)) - before
    return JobResult(data={"failures_to_enrol": failures, "n": len(faces)}, tensors={"emb": emb})


@dataclasses.dataclass
class Jobs:
    """Where a notebook's jobs go: the result store, the executor and whether to show a progress bar."""

    store: ResultStore
    executor: Executor
    progress: bool = False


def embed_all(requests: Sequence[EmbedRequest], jobs: Jobs | None = None) -> list[Embedded]:
    """Every request's embeddings, in order, as ``faces.embed`` jobs of ``jobs`` (only those missing from the store
    run; each distinct face set is stored once; the requests' encoders are shared with jobs run in this process).
    With ``jobs=None`` the same recipes run here, without a store."""
    for req in requests:
        if not isinstance(req, EmbedRequest):
            raise InvalidArgumentError(f"requests must be EmbedRequest objects, got {type(req).__name__}")
    if jobs is None:
        out = []
        for req in requests:
            before = int(getattr(req.encoder, "failures_to_enrol", 0))
            emb = _resolve(RECIPES, "embedding recipe", req.recipe)(req.encoder, req.faces, seed=req.seed,
                                                                    **req.options)
            out.append(Embedded(emb, int(getattr(req.encoder, "failures_to_enrol", 0)) - before))
        return out
    fps: dict[int, str] = {}
    specs = []
    for req in requests:
        fs = face_set_spec(req.source)
        save_face_set(fs, req.faces, jobs.store, jobs.executor)
        share_encoders({req.encoder.name: req.encoder}, device=req.device or jobs.executor.device,
                       data_root=req.source.data_root)
        if id(req.encoder) not in fps:
            fps[id(req.encoder)] = weights_fingerprint(req.encoder)
        specs.append(embed_spec(req, weights=fps[id(req.encoder)]))
    unique = list({s.key(): s for s in specs}.values())  # the same (set, encoder, recipe) asked twice runs once
    got = dict(zip([s.key() for s in unique], jobs.executor.run(unique, jobs.store, progress=jobs.progress)))
    return [Embedded(got[s.key()].tensors["emb"], int(got[s.key()].data["failures_to_enrol"])) for s in specs]
