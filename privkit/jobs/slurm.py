"""The callable a Slurm array task runs (imported by name on the worker, so it lives in a module of its own).

It is a :class:`submitit.helpers.Checkpointable`: when Slurm preempts or times out a task, submitit calls
:meth:`checkpoint` (its default) and requeues the same call, which resumes from the checkpoint the job keeps in the
store (a DP training job: at its last epoch boundary, with every generator state and the accountant's step count).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import submitit

from .registry import run_job

__all__ = ["SlurmJob"]


class SlurmJob(submitit.helpers.Checkpointable):
    """``SlurmJob()(store_root, spec, code, device)``: :func:`privkit.jobs.registry.run_job` on a worker."""

    def __call__(self, store_root: str, spec: Mapping[str, Any], code: str, device: str = "auto") -> str:
        import torch

        env = submitit.JobEnvironment()
        log = str(env.paths.stderr).replace("%j", str(env.job_id)) if env.paths else None
        cpus = os.environ.get("SLURM_CPUS_PER_TASK")
        if cpus and cpus.isdigit():  # the task's CPUs, not the node's: tasks sharing a node do not oversubscribe it
            torch.set_num_threads(int(cpus))
        return run_job(store_root, spec, code=code, device=device, log=log)
