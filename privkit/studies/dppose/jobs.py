"""The DP pose study as jobs: one ``dppose.train`` job per training run of the design, over a shared design-data
entry in the result store.

The notebook prepares the data every run of a design shares (private, test, public and blurred sets -- images or the
frozen backbone's cached features -- and the warm start) and hands it to :func:`train_runs` with the runs; that
function keys the data by what made it (:func:`design_data_spec`: the paper, the scale, the seed, the whole preset and
the fingerprint of the data root) and each run by its settings and that key (:func:`run_job_spec`), asks the executor
for the runs missing from the store, and returns one :class:`~privkit.studies.dppose.experiments.RunOutcome` per run,
read back from the store. The local executor keeps the data in memory; any other writes it to the store first, where
the cluster's workers read it.

A ``dppose.train`` job trains with epoch-boundary checkpoints in its store entry (:mod:`privkit.dppose.checkpoint`):
a job requeued after preemption, or re-run after a crash, resumes with the same noise and the same accounted steps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from privkit.data.types import PoseSet
from privkit.device import resolve_device
from privkit.dppose.features import CachedFeatures
from privkit.dppose.metrics import PCKhResult
from privkit.dppose.model import build_pose_model
from privkit.jobs.codec import decode_dataclass, encode_dataclass
from privkit.jobs import Executor, JobContext, JobResult, JobSpec, LocalExecutor, ResultStore, folder_fingerprint
from privkit.privacy.guarantee import PrivacyGuarantee

from .experiments import DesignData, DesignSettings, RunOutcome, RunSpec, train_run

__all__ = ["ModelSpec", "design_data_spec", "run_job_spec", "train_runs", "train_job", "encode_design_data",
           "decode_design_data", "design_settings", "keeps_model", "ablation_runs", "planned_jobs", "control_spec",
           "control_job", "control_specs", "run_controls", "planned_controls"]

_SETS = ("private_set", "test_set", "public_set", "blurred_set")
_SET_CLASSES = {"PoseSet": PoseSet, "CachedFeatures": CachedFeatures}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """The network a design's runs start from (what the notebook's ``make_model`` builds).

    Attributes:
        backbone: ``"efficientnet_lite0"`` / ``"movenet_lightning"`` (frozen pyramids with a neck of ``width``),
            ``"tiny_vit_5m"`` (random initialisation: warm runs load the pretraining over it) or ``"convnet"``.
        image_size: input size in pixels.
        width: neck width (frozen backbones) or base width (conv net).
    """

    backbone: str
    image_size: int
    width: int

    def build(self, seed: int) -> nn.Module:
        """A fresh network initialised with ``seed``, as the notebook's ``make_model(seed)`` builds it."""
        if self.backbone == "tiny_vit_5m":
            return build_pose_model(self.image_size, backbone="tiny_vit_5m", weights="random", seed=seed)
        if self.backbone == "convnet":
            return build_pose_model(self.image_size, width=self.width, seed=seed)
        return build_pose_model(self.image_size, backbone=self.backbone, neck_width=self.width, seed=seed)


def design_data_spec(cfg: Any, *, part: str, scale: str, seed: int, data_root: str | None) -> JobSpec:
    """The store spec of a design's shared data: what made it (preset, scale, seed, data root's file index)."""
    inputs = {"data_root": folder_fingerprint(data_root)} if data_root else {}  # given at the paper scales
    params = {"paper": "dppose", "part": part, "scale": scale, "seed": int(seed), "cfg": dataclasses.asdict(cfg)}
    return JobSpec(kind="dppose.design_data", params=params, inputs=inputs, label=f"dppose design data ({part})")


def run_job_spec(run: RunSpec, *, data_key: str, settings: DesignSettings, model: ModelSpec, n_show: int,
                 keep_model: bool) -> JobSpec:
    """The ``dppose.train`` job of one run (its purposes are not part of the key: one training serves them all; nor
    is the device, which is the executor's: a result trained on a GPU serves a CPU re-run like a result trained on
    another CPU, which drifts like a seed)."""
    params = {"run": {"method": run.method, "init": run.init, "epsilon": run.epsilon, "clip": run.clip, "k": run.k,
                      "seed": run.seed, "view": run.view},
              "settings": dataclasses.asdict(settings), "model": dataclasses.asdict(model), "n_show": int(n_show),
              "keep_model": bool(keep_model)}
    return JobSpec(kind="dppose.train", params=params, inputs={"data": data_key}, label=f"dppose {run.label}")


# ---------------------------------------------------------------------------------------------- encoding
def encode_design_data(data: DesignData) -> JobResult:
    """A design's shared data as a store result (its sets and warm start; not ``make_model``, a closure)."""
    tensors: dict[str, torch.Tensor] = {}
    sets = {n: encode_dataclass(n, getattr(data, n), tensors) for n in _SETS if getattr(data, n) is not None}
    warm = None
    if data.warm_state is not None:
        warm = list(data.warm_state)
        tensors.update({f"warm.{k}": v for k, v in data.warm_state.items()})
    return JobResult(data={"sets": sets, "warm_state": warm}, tensors=tensors)


def decode_design_data(result: JobResult, make_model: Callable[[int], nn.Module]) -> DesignData:
    """The :class:`DesignData` a store result holds, with ``make_model`` to build fresh networks."""
    sets = {n: decode_dataclass(_SET_CLASSES, n, m, result.tensors) for n, m in result.data["sets"].items()}
    warm = result.data["warm_state"]
    warm_state = None if warm is None else {k: result.tensors[f"warm.{k}"] for k in warm}
    return DesignData(make_model=make_model, warm_state=warm_state, **sets)


def _encode_outcome(out: RunOutcome) -> JobResult:
    tensors = {"pckh.per_joint": out.pckh.per_joint, "pckh.counts": out.pckh.counts, "predictions": out.predictions}
    if out.model is not None:
        tensors.update({f"model.{k}": v for k, v in out.model.state_dict().items()})
    data = {"pckh": {"mean": out.pckh.mean, "alpha": out.pckh.alpha}, "guarantee": out.guarantee.to_dict(),
            "steps": out.steps, "sample_rate": out.sample_rate, "noise_multiplier": out.noise_multiplier,
            "history": out.history, "cpu_seconds": out.cpu_seconds, "wall_seconds": out.wall_seconds,
            "config": out.config, "model": out.model is not None}
    return JobResult(data=data, tensors=tensors)


def _decode_outcome(run: RunSpec, result: JobResult, model: ModelSpec, device: torch.device) -> RunOutcome:
    d, t = result.data, result.tensors
    net = None
    if d["model"]:
        net = model.build(run.seed)
        net.load_state_dict({k[len("model."):]: v for k, v in t.items() if k.startswith("model.")})
        net = net.to(device).train()
    return RunOutcome(spec=run, pckh=PCKhResult(mean=d["pckh"]["mean"], per_joint=t["pckh.per_joint"],
                                                counts=t["pckh.counts"], alpha=d["pckh"]["alpha"]),
                      guarantee=PrivacyGuarantee.from_dict(d["guarantee"]), steps=d["steps"],
                      sample_rate=d["sample_rate"], noise_multiplier=d["noise_multiplier"], history=d["history"],
                      predictions=t["predictions"], cpu_seconds=d["cpu_seconds"], wall_seconds=d["wall_seconds"],
                      config=d["config"], model=net)


# ---------------------------------------------------------------------------------------------- the job
def _run_of(params: Mapping[str, Any]) -> RunSpec:
    r = params["run"]
    return RunSpec(method=r["method"], init=r["init"], epsilon=r["epsilon"], clip=r["clip"], k=r["k"], seed=r["seed"],
                   view=r["view"])


def train_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """The ``dppose.train`` job: one run trained on the stored design data, with checkpoints in its entry."""
    model = ModelSpec(**params["model"])
    data = decode_design_data(ctx.store.load(ctx.spec.inputs["data"]), model.build)
    settings = DesignSettings(**params["settings"])
    out = train_run(_run_of(params), data, settings, n_show=params["n_show"], device=ctx.device,
                    keep_model=params["keep_model"], checkpoint=ctx.checkpoint_dir)
    return _encode_outcome(out)


def control_spec(method: str, *, data_key: str, settings: DesignSettings, model: ModelSpec, clip: float, k: int,
                 seed: int) -> JobSpec:
    """The ``dppose.noise_control`` job: ``method`` retrained without noise from the design's warm start."""
    params = {"method": method, "clip": float(clip), "k": int(k), "seed": int(seed),
              "settings": dataclasses.asdict(settings), "model": dataclasses.asdict(model)}
    return JobSpec(kind="dppose.noise_control", params=params, inputs={"data": data_key},
                   label=f"dppose {method} no-noise control")


def control_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """The ``dppose.noise_control`` job (:func:`~privkit.studies.dppose.tables.control_run` on the stored data)."""
    from .tables import control_run

    model = ModelSpec(**params["model"])
    data = decode_design_data(ctx.store.load(ctx.spec.inputs["data"]), model.build)
    pckh = control_run(params["method"], data, DesignSettings(**params["settings"]), clip=params["clip"],
                       k=params["k"], seed=params["seed"], device=ctx.device)
    return JobResult(data={"pckh": pckh})


def control_specs(cfg: Any, *, data_key: str, seed: int) -> list[JobSpec]:
    """The no-noise controls the notebook asks for: DP-SGD and projected DP-SGD at the main clipping norm and k."""
    from .tables import CONTROL_METHODS

    model = ModelSpec(cfg.backbone, cfg.image_size, cfg.width)
    return [control_spec(m, data_key=data_key, settings=design_settings(cfg), model=model, clip=cfg.clips[0],
                         k=cfg.k, seed=seed) for m in CONTROL_METHODS]


def run_controls(cfg: Any, *, data_key: str, seed: int, store: ResultStore, executor: Executor | None = None,
                 progress: bool = False) -> dict[str, float]:
    """method -> PCKh of the no-noise controls, as jobs over the main design's stored data."""
    specs = control_specs(cfg, data_key=data_key, seed=seed)
    results = (executor or LocalExecutor()).run(specs, store, progress=progress)
    return {s.params["method"]: r.data["pckh"] for s, r in zip(specs, results)}


def train_runs(runs: Sequence[RunSpec], data: DesignData, settings: DesignSettings, *, data_spec: JobSpec,
               model: ModelSpec, store: ResultStore, executor: Executor | None = None, n_show: int = 4,
               device: str = "auto", progress: bool = False,
               on_result: Callable[[RunOutcome], None] | None = None,
               keep_model: Callable[[RunSpec], bool] | None = None) -> list[RunOutcome]:
    """Every run of a design through the result store: the missing ones run on ``executor``, all are read back.

    What :func:`~privkit.studies.dppose.experiments.run_design` computes, run by run, with the same arguments plus:

    Args:
        data_spec: the spec that names ``data`` in the store (:func:`design_data_spec`).
        model: what ``data.make_model`` builds (:class:`ModelSpec`), for the workers that rebuild it.
        store: the result store.
        executor: who runs the missing jobs (default: a :class:`~privkit.jobs.LocalExecutor`).
        device: where the returned models are put (the jobs train on the executor's device).

    Returns:
        One :class:`RunOutcome` per run, in order, with its ``purposes``.
    """
    executor = executor or LocalExecutor()
    dev = resolve_device(device)
    if store.status(data_spec) != "done":
        encoded = encode_design_data(data)
        if isinstance(executor, LocalExecutor):
            store.keep(data_spec, encoded)  # in memory: this process runs every job itself
        else:
            store.save(data_spec, encoded)
    keep = keep_model or (lambda r: False)
    specs = [run_job_spec(r, data_key=data_spec.key(), settings=settings, model=model, n_show=n_show,
                          keep_model=keep(r)) for r in runs]
    results = executor.run(specs, store, progress=progress)
    outcomes = []
    for run, result in zip(runs, results):
        out = _decode_outcome(run, result, model, dev)
        outcomes.append(out)
        if on_result is not None:
            on_result(out)
    return outcomes


# ---------------------------------------------------------------------------------------------- the notebook's design
def design_settings(cfg: Any) -> DesignSettings:
    """The training settings every run of the notebook's design shares, from its preset."""
    return DesignSettings(delta=cfg.delta, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr,
                          n_public_grads=cfg.n_public_grads, refresh=cfg.refresh, accountant=cfg.accountant,
                          nonprivate_epochs=cfg.nonprivate_epochs)


def keeps_model(cfg: Any, seed: int) -> Callable[[RunSpec], bool]:
    """Which runs keep their trained network (the projection diagnostics read them): the warm runs of seed ``seed``
    at the largest epsilon and the main clipping norm."""
    eps_max, c_main = max(tuple(cfg.epsilons) + tuple(cfg.epsilons_other)), cfg.clips[0]
    return lambda r: r.init == "warm" and r.seed == seed and r.epsilon == eps_max and r.clip == c_main


def ablation_runs(cfg: Any, seed: int) -> list[RunSpec]:
    """The backbone ablation's runs: the non-private reference and DP-SGD at the smallest and largest epsilon."""
    eps = sorted({min(cfg.epsilons), max(tuple(cfg.epsilons) + tuple(cfg.epsilons_other))})
    return [RunSpec("nonprivate", "warm", None, None, None, seed, ("ablation",)),
            *[RunSpec("dpsgd", "warm", e, cfg.clips[0], None, seed, ("ablation",)) for e in eps]]


def planned_jobs(cfg: Any, *, scale: str, seed: int, data_root: str | None) -> list[tuple[str, RunSpec, JobSpec]]:
    """``(part, run, job spec)`` of every training job the notebook asks for (the main design, then the ablation),
    keyed exactly as the notebook keys them: what ``python -m privkit plan`` lists."""
    from .experiments import design_runs

    settings = design_settings(cfg)
    parts = [("main", design_runs(cfg, seed=seed), ModelSpec(cfg.backbone, cfg.image_size, cfg.width),
              keeps_model(cfg, seed))]
    if cfg.ablation_backbone:
        parts.append(("ablation", ablation_runs(cfg, seed), ModelSpec(cfg.ablation_backbone, cfg.image_size,
                                                                       cfg.width), lambda r: False))
    out = []
    for part, runs, model, keep in parts:
        key = design_data_spec(cfg, part=part, scale=scale, seed=seed, data_root=data_root).key()
        out += [(part, r, run_job_spec(r, data_key=key, settings=settings, model=model, n_show=cfg.n_show,
                                       keep_model=keep(r))) for r in runs]
    return out


def planned_controls(cfg: Any, *, scale: str, seed: int, data_root: str | None) -> list[JobSpec]:
    """The no-noise control jobs, keyed as the notebook keys them."""
    key = design_data_spec(cfg, part="main", scale=scale, seed=seed, data_root=data_root).key()
    return control_specs(cfg, data_key=key, seed=seed)
