"""The callable a Slurm array task runs (imported by name on the worker, so it lives in a module of its own).

It is a :class:`submitit.helpers.Checkpointable`: when Slurm preempts or times out a task, submitit calls
:meth:`checkpoint` (its default) and requeues the same call, which resumes from the checkpoint the job keeps in the
store (a DP training job: at its last epoch boundary, with every generator state and the accountant's step count).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import submitit

from .registry import run_job

__all__ = ["SlurmJob"]


class SlurmJob(submitit.helpers.Checkpointable):
    """``SlurmJob()(store_root, specs, code, device)``: :func:`privkit.jobs.registry.run_job` on a worker, for one
    spec or for several one after another (``jobs_per_task``: the worker's start-up, its imports, is paid once).

    Each job is stored as it finishes, so a requeued task skips the jobs already done and resumes the one it was in.
    A job that raises is recorded (its failure record names this task's log) and the task goes on with the next;
    it raises the first error at the end, so that Slurm marks the task failed.
    """

    def __call__(self, store_root: str, specs: Mapping[str, Any] | Sequence[Mapping[str, Any]], code: str,
                 device: str = "auto") -> list[str]:
        import torch

        env = submitit.JobEnvironment()
        log = str(env.paths.stderr).replace("%j", str(env.job_id)) if env.paths else None
        cpus = os.environ.get("SLURM_CPUS_PER_TASK")
        if cpus and cpus.isdigit():  # the task's CPUs, not the node's: tasks sharing a node do not oversubscribe it
            torch.set_num_threads(int(cpus))
        keys, first_error = [], None
        for spec in ([specs] if isinstance(specs, Mapping) else list(specs)):
            try:
                keys.append(run_job(store_root, spec, code=code, device=device, log=log))
            except Exception as exc:  # recorded in the store by run_job; the task's other jobs still run
                first_error = first_error or exc
        if first_error is not None:
            raise first_error
        return keys
