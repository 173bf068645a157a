"""Jobs, the content-addressed result store and the executors that run jobs (paper scale on a cluster).

* :class:`JobSpec` -- one expensive unit of work (a kind and JSON params), keyed by its content and the code.
* :class:`ResultStore` -- one folder per key: results as JSON + safetensors, failures, checkpoints.
* :class:`LocalExecutor` (in process, the default) and :class:`SlurmExecutor` (a job array through submitit).
* :func:`run_job` -- what every executor calls for one job; :data:`JOB_KINDS` -- the registered job functions.

The studies build the specs (``privkit.studies.<paper>.jobs``); the notebooks read results back from the store.
"""

from __future__ import annotations

from .executors import (EXECUTORS, Executor, JobsFailedError, LocalExecutor, SlurmExecutor, SlurmOptions,
                        check_slurm, load_slurm_config, make_executor)
from .registry import JOB_KINDS, CodeMismatchError, JobContext, job_function, run_job
from .spec import JobSpec, canonical_json, code_fingerprint, file_fingerprint, folder_fingerprint
from .store import STATUSES, JobResult, ResultStore, store_for

__all__ = ["EXECUTORS", "Executor", "JobsFailedError", "LocalExecutor", "SlurmExecutor", "SlurmOptions",
           "check_slurm", "load_slurm_config", "make_executor", "JOB_KINDS", "CodeMismatchError", "JobContext",
           "job_function", "run_job", "JobSpec", "canonical_json", "code_fingerprint", "file_fingerprint",
           "folder_fingerprint", "STATUSES", "JobResult", "ResultStore", "store_for"]
