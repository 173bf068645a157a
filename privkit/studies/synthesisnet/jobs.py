"""The SynthesisNet study as jobs: the method's training and the no-auxiliary-classifier ablation's GAN, each a
``synthesisnet.train`` job over the training faces stored once.

:func:`train_nets` keys the training faces by what made them (:func:`faces_spec`: scale, seed, the whole preset, the
data root's file index), runs the method's training (autoencoder, then GAN) and then the ablation (the method's
autoencoder, its own GAN) as two stages on the executor, and returns both networks read back from the store (saved
as SynthesisNet saves itself: safetensors weights and a JSON of config, labels and history).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from privkit._validate import check_choice
from privkit.data.types import FaceSet
from privkit.jobs import Executor, JobContext, JobResult, JobSpec, LocalExecutor, ResultStore, folder_fingerprint
from privkit.jobs.codec import decode_dataclass, encode_dataclass
from privkit.synthesisnet import SynthesisNet, SynthesisNetConfig

__all__ = ["faces_spec", "train_spec", "planned_specs", "train_job", "train_nets"]

VARIANTS = ("method", "no_auxiliary_classifier")


def faces_spec(cfg: Any, *, scale: str, seed: int, data_root: str | None) -> JobSpec:
    """The store spec of the training faces: what made them."""
    inputs = {"data_root": folder_fingerprint(data_root)} if data_root else {}  # given at the paper scales
    params = {"paper": "synthesisnet", "part": "training faces", "scale": scale, "seed": int(seed),
              "cfg": dataclasses.asdict(cfg)}
    return JobSpec(kind="synthesisnet.faces", params=params, inputs=inputs, label="synthesisnet training faces")


def train_spec(variant: str, *, net_config: SynthesisNetConfig, faces_key: str, epochs_ae: int, epochs_gan: int,
               batch_size: int, seed: int, autoencoder_key: str | None = None) -> JobSpec:
    """The ``synthesisnet.train`` job of one variant (``autoencoder_key``: the job whose autoencoder it reuses)."""
    check_choice("variant", variant, VARIANTS)
    inputs = {"faces": faces_key, **({"autoencoder": autoencoder_key} if autoencoder_key else {})}
    params = {"variant": variant, "net_config": net_config.to_dict(), "epochs_ae": int(epochs_ae),
              "epochs_gan": int(epochs_gan), "batch_size": int(batch_size), "seed": int(seed)}
    return JobSpec(kind="synthesisnet.train", params=params, inputs=inputs, label=f"synthesisnet {variant}")


def planned_specs(cfg: Any, *, net_config: SynthesisNetConfig, scale: str, seed: int,
                  data_root: str | None) -> tuple[JobSpec, JobSpec, JobSpec]:
    """The training faces' spec and the two training jobs the notebook asks for (method, then ablation), keyed as
    :func:`train_nets` keys them (what ``python -m privkit plan`` lists)."""
    fspec = faces_spec(cfg, scale=scale, seed=seed, data_root=data_root)
    common = {"net_config": net_config, "faces_key": fspec.key(), "batch_size": cfg.batch_size, "seed": seed}
    method = train_spec("method", epochs_ae=cfg.epochs_ae, epochs_gan=cfg.epochs_gan, **common)
    ablation = train_spec("no_auxiliary_classifier", epochs_ae=0, epochs_gan=cfg.epochs_gan,
                          autoencoder_key=method.key(), **common)
    return fspec, method, ablation


def _encode_net(net: SynthesisNet) -> JobResult:
    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory() as tmp:
        folder = net.save(tmp)
        meta = json.loads((folder / "config.json").read_text())
        tensors = load_file(str(folder / "model.safetensors"))
    return JobResult(data={"net": meta}, tensors=tensors)


def _decode_net(result: JobResult, device: str | torch.device) -> SynthesisNet:
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        save_file({k: v.contiguous() for k, v in result.tensors.items()}, str(folder / "model.safetensors"),
                  metadata={"format": result.data["net"]["format"]})
        (folder / "config.json").write_text(json.dumps(result.data["net"], allow_nan=True))
        return SynthesisNet.load(folder, device=device)


def train_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """The ``synthesisnet.train`` job: one variant trained on the stored faces."""
    stored = ctx.store.load(ctx.spec.inputs["faces"])
    faces = decode_dataclass({"FaceSet": FaceSet}, "faces", stored.data["faces"], stored.tensors)
    config = SynthesisNetConfig.from_dict(params["net_config"])
    base = None
    if "autoencoder" in ctx.spec.inputs:
        base = _decode_net(ctx.store.load(ctx.spec.inputs["autoencoder"]), ctx.device)
    overrides = {} if params["variant"] == "method" else {"auxiliary_classifier": False}
    net = SynthesisNet(config, **overrides).fit(
        faces, epochs_ae=params["epochs_ae"], epochs_gan=params["epochs_gan"], batch_size=params["batch_size"],
        seed=params["seed"], device=ctx.device, autoencoder_from=base)
    return _encode_net(net)


def train_nets(train: FaceSet, *, cfg: Any, net_config: SynthesisNetConfig, scale: str, seed: int,
               data_root: str | None, store: ResultStore, executor: Executor | None = None, device: str = "auto",
               progress: bool = False) -> tuple[SynthesisNet, SynthesisNet]:
    """The method's network and the no-auxiliary-classifier ablation, trained as jobs or read from the store.

    The ablation shares the method's trained autoencoder and trains its own GAN (same schedule, same seed).
    """
    executor = executor or LocalExecutor()
    fspec, method, ablation = planned_specs(cfg, net_config=net_config, scale=scale, seed=seed, data_root=data_root)
    if store.status(fspec) != "done":
        tensors: dict[str, torch.Tensor] = {}
        encoded = JobResult(data={"faces": encode_dataclass("faces", train, tensors)}, tensors=tensors)
        (store.keep if isinstance(executor, LocalExecutor) else store.save)(fspec, encoded)
    nets = []
    for spec in (method, ablation):  # two stages: the ablation reads the method's autoencoder
        (result,) = executor.run([spec], store, progress=progress)
        nets.append(_decode_net(result, device))
    return nets[0], nets[1]
