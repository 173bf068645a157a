"""Epoch-boundary checkpoints of a :class:`~privkit.dppose.train.PrivateTrainer`: resuming without breaking privacy.

A DP training run that is interrupted and resumed must release exactly what the uninterrupted run releases, and be
accounted for exactly the steps it took. So a checkpoint holds everything the rest of the run depends on:

* the network's weights and buffers and the optimiser's state (AdamW's moments and step counts);
* the state of every generator (sampling, noise, public subsampling, public-view batches): the resumed run draws
  the same noise for the same step and never re-draws noise for a step whose update was already kept;
* the accountant's record (the noise multiplier, the sampling rate and the number of accounted steps) and the
  training history, and the public subspace in use (it is refreshed only every ``refresh`` steps);
* the trainer's settings (:meth:`~privkit.dppose.train.PrivateTrainer._config` without the device) and its
  calibrated noise multiplier: a checkpoint written by another run is refused, never silently continued.

With ``DPSpec(secure=True)`` the generators are seeded from the operating system's entropy and their states are
NOT written to disk (a file that predicts the rest of the noise would void it); a resumed secure run draws fresh
noise for the steps after the checkpoint, which is as private (steps after the checkpoint had not been released).

Files: ``state-<epoch>.safetensors`` (tensors) and ``state-<epoch>.json`` (the rest), then ``latest.json`` naming
them, written atomically last; older pairs are deleted. Nothing is pickled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from .._files import atomic_write
from ..errors import InvalidArgumentError
from .subspace import PublicSubspace

__all__ = ["save_checkpoint", "load_checkpoint", "CHECKPOINT_VERSION"]

CHECKPOINT_VERSION = 1
_GENERATORS = ("g_sample", "g_public", "g_feature", "g_noise")
_MODE = 0o600


def _identity(trainer: Any) -> dict[str, Any]:
    config = {k: v for k, v in trainer._config().items() if k != "device"}
    return {"config": config, "sigma": trainer.sigma, "q": trainer.q, "total": trainer.total,
            "steps_per_epoch": trainer.steps_per_epoch, "parameters": list(trainer.params)}


def save_checkpoint(folder: str | os.PathLike, trainer: Any, *, epoch: int, step: int, history: list[dict[str, Any]],
                    window: dict[str, float]) -> Path:
    """Write the trainer's state after ``epoch`` epochs (``step`` optimiser steps) into ``folder``."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    tensors: dict[str, torch.Tensor] = {f"model.{k}": v.detach().cpu().contiguous()
                                        for k, v in trainer.net.state_dict().items()}
    opt = trainer.opt.state_dict()
    opt_scalars: dict[str, Any] = {}
    for pid, st in opt["state"].items():
        for k, v in st.items():
            if torch.is_tensor(v):
                tensors[f"opt.{pid}.{k}"] = v.detach().cpu().contiguous()
            else:
                opt_scalars[f"{pid}.{k}"] = v
    secure = bool(trainer.dp.secure)
    if not secure:
        for g in _GENERATORS:
            tensors[f"rng.{g}"] = getattr(trainer, g).get_state()
    sub = trainer.subspace
    if sub is not None:  # the basis is a transposed view of a contiguous (r, p) tensor: keep that layout
        tensors["subspace.basis_t"] = sub.basis.T.detach().cpu().contiguous()
        tensors["subspace.eigenvalues"] = sub.eigenvalues.detach().cpu().contiguous()
    meta = {"version": CHECKPOINT_VERSION, "identity": _identity(trainer), "epoch": epoch, "step": step,
            "acc_steps": trainer.acc_steps, "history": history, "window": window, "secure": secure,
            "optimizer": {"param_groups": opt["param_groups"], "scalars": opt_scalars,
                          "state_ids": [int(p) for p in opt["state"]]},
            "subspace": None if sub is None else {"k": sub.k, "n_public": sub.n_public}}
    stem = f"state-{epoch}"
    tmp = folder / f".{stem}.safetensors.tmp"
    save_file(tensors, str(tmp))
    os.chmod(tmp, _MODE)
    os.replace(tmp, folder / f"{stem}.safetensors")
    atomic_write(folder / f"{stem}.json", json.dumps(meta).encode(), mode=_MODE)
    atomic_write(folder / "latest.json", json.dumps({"stem": stem}).encode(), mode=_MODE)
    for old in folder.glob("state-*"):
        if not old.name.startswith(stem + "."):
            old.unlink(missing_ok=True)
    return folder / f"{stem}.json"


def load_checkpoint(folder: str | os.PathLike, trainer: Any) -> dict[str, Any] | None:
    """Restore the trainer from ``folder``'s latest checkpoint; returns ``{epoch, step, history, window}``, or None
    when ``folder`` holds no checkpoint.

    Raises:
        InvalidArgumentError: the checkpoint was written by a run with other settings (or another noise multiplier).
    """
    from safetensors.torch import load_file

    folder = Path(folder)
    latest = folder / "latest.json"
    if not latest.is_file():
        return None
    stem = json.loads(latest.read_text())["stem"]
    meta = json.loads((folder / f"{stem}.json").read_text())
    tensors = load_file(str(folder / f"{stem}.safetensors"))
    mine = json.loads(json.dumps(_identity(trainer)))  # through JSON, as the stored one went
    if meta.get("version") != CHECKPOINT_VERSION or meta["identity"] != mine:
        diff = sorted(k for k in mine["config"] if meta["identity"]["config"].get(k) != mine["config"][k])
        raise InvalidArgumentError(
            f"checkpoint {folder} was written by another training run (settings that differ: "
            f"{', '.join(diff) or 'noise multiplier, sampling rate, steps or parameters'}); delete it to start over")
    trainer.net.load_state_dict({k[len("model."):]: v for k, v in tensors.items() if k.startswith("model.")})
    o = meta["optimizer"]
    state: dict[int, dict[str, Any]] = {pid: {} for pid in o["state_ids"]}
    for k, v in tensors.items():
        if k.startswith("opt."):
            _, pid, name = k.split(".", 2)
            state[int(pid)][name] = v
    for k, v in o["scalars"].items():
        pid, name = k.split(".", 1)
        state[int(pid)][name] = v
    trainer.opt.load_state_dict({"state": state, "param_groups": o["param_groups"]})
    if not meta["secure"]:
        for g in _GENERATORS:
            getattr(trainer, g).set_state(tensors[f"rng.{g}"])
    trainer.acc_steps = int(meta["acc_steps"])
    sub = meta["subspace"]
    trainer.subspace = None if sub is None else PublicSubspace(
        basis=tensors["subspace.basis_t"].to(trainer.dev).T, eigenvalues=tensors["subspace.eigenvalues"].to(trainer.dev),
        k=int(sub["k"]), n_public=int(sub["n_public"]))
    return {"epoch": int(meta["epoch"]), "step": int(meta["step"]), "history": meta["history"],
            "window": meta["window"]}
