"""Job kinds and the function that runs one job against a store (what every executor calls).

A job kind is a function ``fn(params: dict, ctx: JobContext) -> JobResult``, named in :data:`JOB_KINDS` by
``"module:function"`` so that a cluster worker imports it by name (nothing of the submitting process travels but the
spec). :func:`run_job` resolves the kind, gives the function its :class:`JobContext` (the store, the job's checkpoint
folder, its device), stores the result, and on an exception stores a failure record (error, traceback, log file)
before re-raising.
"""

from __future__ import annotations

import importlib
import os
import traceback as _traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import PrivkitError, UnknownNameError
from .spec import JobSpec, code_fingerprint
from .store import JobResult, ResultStore

__all__ = ["JOB_KINDS", "JobContext", "job_function", "run_job", "CodeMismatchError"]

#: Registered job kinds -> ``"module:function"``.
JOB_KINDS: dict[str, str] = {
    "dppose.train": "privkit.studies.dppose.jobs:train_job",
    "dppose.noise_control": "privkit.studies.dppose.jobs:control_job",
    "synthesisnet.train": "privkit.studies.synthesisnet.jobs:train_job",
    "faces.embed": "privkit.studies.embedding:embed_job",
    "isp.attribution": "privkit.studies.isp.jobs:attribution_job",
    "isp.rank_sweep": "privkit.studies.isp.jobs:rank_sweep_job",
    "isp.inversion": "privkit.studies.isp.jobs:inversion_job",
    "diagnostic.echo": "privkit.jobs.diagnostics:echo_job",
    "diagnostic.sleep": "privkit.jobs.diagnostics:sleep_job",
    "diagnostic.fail": "privkit.jobs.diagnostics:fail_job",
    "diagnostic.count": "privkit.jobs.diagnostics:count_job",
}


class CodeMismatchError(PrivkitError):
    """A worker runs other privkit code than the process that submitted the job (its keys would differ)."""


@dataclass
class JobContext:
    """What a job function gets besides its params.

    Attributes:
        spec: the job's spec.
        store: the result store (read the results this job depends on with :meth:`load`).
        checkpoint_dir: a folder kept until the job is done, for a resumable job's checkpoint.
        device: the device requested for the job (``"auto"``, ``"cpu"``, ``"cuda"``).
        log: the job's log file, when an executor writes one (None in process).
    """

    spec: JobSpec
    store: ResultStore
    checkpoint_dir: Path
    device: str = "auto"
    log: str | None = None

    def load(self, spec: JobSpec) -> JobResult:
        """The stored result of another job (e.g. the data this job trains on)."""
        return self.store.load(spec)


def job_function(kind: str) -> Callable[[Mapping[str, Any], JobContext], JobResult]:
    """The function registered for ``kind``."""
    if kind not in JOB_KINDS:
        raise UnknownNameError("job kind", kind, JOB_KINDS)
    module, name = JOB_KINDS[kind].split(":")
    return getattr(importlib.import_module(module), name)


def run_job(store_root: str | os.PathLike, spec: Mapping[str, Any] | JobSpec, *, code: str | None = None,
            device: str = "auto", log: str | None = None, store: ResultStore | None = None) -> str:
    """Run one job and store its result (or its failure); returns the job's key.

    A job already done is not run again. ``code`` is the submitting process's :func:`code_fingerprint`: a worker
    whose own differs refuses to run (its result would be keyed by other code) and records why.

    Raises:
        CodeMismatchError: ``code`` differs from this process's code fingerprint.
        Exception: whatever the job raised (after its failure record is written).
    """
    spec = spec if isinstance(spec, JobSpec) else JobSpec.from_dict(spec)
    store = store if store is not None else ResultStore(store_root)
    if store.status(spec) == "done":
        return spec.key()
    try:
        if code is not None and code != code_fingerprint():
            raise CodeMismatchError(
                f"this worker runs other privkit code (fingerprint {code_fingerprint()[:12]}) than the process that "
                f"submitted the job ({code[:12]}); install the same privkit commit on every node")
        fn = job_function(spec.kind)
        ctx = JobContext(spec=spec, store=store, checkpoint_dir=store.checkpoint_dir(spec), device=device, log=log)
        result = fn(spec.params, ctx)
        if not isinstance(result, JobResult):
            raise PrivkitError(f"job kind {spec.kind!r} returned {type(result).__name__}, not a JobResult")
        store.save(spec, result)
    except BaseException as exc:
        store.save_failure(spec, error=f"{type(exc).__name__}: {exc}", traceback=_traceback.format_exc(), log=log)
        raise
    return spec.key()
