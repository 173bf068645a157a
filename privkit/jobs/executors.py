"""Executors: who runs the jobs that are missing from the store.

* ``local`` (:class:`LocalExecutor`): in this process, one after another: the default, the embedded path; no
  service needed. A job that raises is recorded and reported; the others still run.
* ``slurm`` (:class:`SlurmExecutor`): the missing jobs are submitted as one job array through **submitit**
  (``AutoExecutor``, ``update_parameters``, ``map_array``; each task a ``submitit.helpers.Checkpointable``, so a
  preempted task requeues and resumes), watched until every task is done or failed (a tqdm bar and a line per
  change: done / running / failed / pending), and gathered from the store. Task states come from the store (a
  task writes its result or its failure record) and from ``squeue``; a task that leaves the queue without either
  (cancelled, killed by the node) is reported as failed with its log file. Accounting (``sacct``) is not needed.

Both return the results in the order of the specs, and raise :class:`JobsFailedError` naming every failed job and
its log after the others finished. A re-run recomputes only what is missing or failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TextIO

from .._validate import check_int
from ..errors import InvalidArgumentError, MissingResourceError, PrivkitError, UnknownNameError
from .registry import run_job
from .spec import JobSpec, code_fingerprint
from .store import JobResult, ResultStore

__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "SlurmExecutor", "SlurmOptions", "JobsFailedError",
           "make_executor", "load_slurm_config", "check_slurm"]

EXECUTORS: tuple[str, ...] = ("local", "slurm")


class JobsFailedError(PrivkitError):
    """Some jobs failed; ``failures`` holds ``(label, error, log)`` of each (the others finished and are stored)."""

    def __init__(self, failures: Sequence[tuple[str, str, str | None]], store: ResultStore) -> None:
        self.failures = list(failures)
        lines = [f"{len(self.failures)} job(s) failed (the others are stored in {store.root}; re-run to retry only "
                 "these):"]
        lines += [f"  {label}: {error}" + (f"\n    log: {log}" if log else "") for label, error, log in self.failures]
        super().__init__("\n".join(lines))


class Executor:
    """Runs the missing jobs of a list of specs and returns every result (:meth:`run`)."""

    name = "executor"

    def run(self, specs: Sequence[JobSpec], store: ResultStore, *, progress: bool = True) -> list[JobResult]:
        raise NotImplementedError

    @staticmethod
    def _check(specs: Sequence[JobSpec], store: ResultStore) -> list[JobSpec]:
        if not isinstance(store, ResultStore):
            raise InvalidArgumentError(f"store must be a ResultStore, got {type(store).__name__}")
        specs = list(specs)
        for s in specs:
            if not isinstance(s, JobSpec):
                raise InvalidArgumentError(f"specs must hold JobSpec objects, got {type(s).__name__}")
        return specs


def _bar(total: int, desc: str, progress: bool) -> Any:
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc)


class LocalExecutor(Executor):
    """Runs each missing job in this process, in order (module docstring).

    Args:
        device: the device passed to the jobs.
    """

    name = "local"

    def __init__(self, *, device: str = "auto") -> None:
        self.device = device

    def run(self, specs: Sequence[JobSpec], store: ResultStore, *, progress: bool = True) -> list[JobResult]:
        specs = self._check(specs, store)
        failures = []
        bar = _bar(len(specs), "jobs (local)", progress)
        for spec in specs:
            if store.status(spec) != "done":
                try:
                    run_job(store.root, spec, device=self.device, store=store)
                except KeyboardInterrupt:
                    raise
                except Exception as exc:  # recorded in the store; the other jobs still run
                    failures.append((spec.label, f"{type(exc).__name__}: {exc}", None))
            if bar is not None:
                bar.update(1)
        if bar is not None:
            bar.close()
        if failures:
            raise JobsFailedError(failures, store)
        return [store.load(s) for s in specs]


@dataclass(frozen=True)
class SlurmOptions:
    """What a Slurm array is submitted with (``update_parameters``); every field may come from a config file.

    Attributes:
        partition, account, qos: ``--partition``, ``--account``, ``--qos`` (None: the cluster's default).
        gpus_per_job: GPUs per task (0 for CPU jobs).
        cpus_per_job: CPUs per task.
        mem_gb: memory per task in GB (None: the partition's default).
        time_min: time limit per task in minutes.
        array_parallelism: at most this many tasks of the array at once.
        jobs_per_task: jobs one array task runs one after another (1: a task per job). More than one pays a worker's
            start-up (Python, torch and privkit imports, a few seconds) once for several short jobs; each job is
            still stored, resumed and reported on its own. ``time_min`` is then the limit for all of them.
        poll_s: seconds between two looks at the queue.
        max_wait_min: give up watching after this many minutes (None: wait until every task ends).
        job_name: the array's name in the queue.
    """

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    gpus_per_job: int = 0
    cpus_per_job: int = 1
    mem_gb: float | None = None
    time_min: int = 60
    array_parallelism: int = 64
    jobs_per_task: int = 1
    poll_s: float = 2.0
    max_wait_min: float | None = None
    job_name: str = "privkit"

    def __post_init__(self) -> None:
        check_int("gpus_per_job", self.gpus_per_job, minimum=0)
        check_int("cpus_per_job", self.cpus_per_job, minimum=1)
        check_int("time_min", self.time_min, minimum=1)
        check_int("array_parallelism", self.array_parallelism, minimum=1)
        check_int("jobs_per_task", self.jobs_per_task, minimum=1)
        for name in ("mem_gb", "max_wait_min"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and v > 0):
                raise InvalidArgumentError(f"{name} must be a number > 0 or None, got {v!r}")
        if not (isinstance(self.poll_s, (int, float)) and self.poll_s > 0):
            raise InvalidArgumentError(f"poll_s must be a number > 0, got {self.poll_s!r}")

    def parameters(self) -> dict[str, Any]:
        """The ``AutoExecutor.update_parameters`` keywords."""
        params: dict[str, Any] = {"name": self.job_name, "timeout_min": self.time_min, "cpus_per_task": self.cpus_per_job,
                                  "slurm_array_parallelism": self.array_parallelism, "nodes": 1, "tasks_per_node": 1}
        if self.gpus_per_job:
            params["gpus_per_node"] = self.gpus_per_job
        if self.mem_gb is not None:
            params["mem_gb"] = self.mem_gb
        for name in ("partition", "account", "qos"):
            if getattr(self, name):
                params[f"slurm_{name}"] = getattr(self, name)
        return params


_OPTION_NAMES = tuple(f.name for f in fields(SlurmOptions))


def load_slurm_config(path: str | os.PathLike | None = None, **overrides: Any) -> SlurmOptions:
    """:class:`SlurmOptions` from a TOML file (its top-level keys, or its ``[slurm]`` table) and keyword overrides.

    Raises:
        PrivkitError: the file cannot be read or is not TOML.
        UnknownNameError: a key that is not a :class:`SlurmOptions` field.
    """
    values: dict[str, Any] = {}
    if path is not None:
        try:
            with open(path, "rb") as fh:
                doc = tomllib.load(fh)
        except OSError as exc:
            raise PrivkitError(f"--slurm-config {path}: cannot be read ({exc.strerror or exc}); write a TOML file "
                               "with keys such as partition, account, qos, gpus_per_job, time_min") from exc
        except tomllib.TOMLDecodeError as exc:
            raise PrivkitError(f"--slurm-config {path}: not valid TOML ({exc})") from exc
        values = dict(doc.get("slurm", doc))
    values.update({k: v for k, v in overrides.items() if v is not None})
    for k in values:
        if k not in _OPTION_NAMES:
            raise UnknownNameError("slurm option", k, _OPTION_NAMES)
    return SlurmOptions(**values)


def _squeue_states(job_ids: Sequence[str]) -> dict[str, str] | None:
    """``task id -> state`` of the tasks still in the queue (``123_4 -> RUNNING``); None when squeue did not answer
    (a busy controller times out): then nothing can be concluded about a task that is not listed."""
    if not job_ids:
        return {}
    arrays = sorted({j.split("_")[0] for j in job_ids})
    # %F the array's job id, %K the task's index ("N/A" outside arrays): squeue's own %i drops the index of a
    # one-task array ("8" for submitit's "8_0")
    out = subprocess.run(["squeue", "-h", "-r", "-j", ",".join(arrays), "-o", "%F %K %T"], capture_output=True,
                         text=True, timeout=60)
    if out.returncode != 0:
        return None
    states = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            states[f"{parts[0]}_{parts[1]}" if parts[1].isdigit() else parts[0]] = parts[2]
    return states


class SlurmExecutor(Executor):
    """Submits the missing jobs as one Slurm job array through submitit and watches them (module docstring).

    Args:
        options: a :class:`SlurmOptions` (or None for the defaults).
        folder: where submitit writes the tasks' pickled calls and logs (default ``<store>/logs/slurm``).
        device: the device the jobs use on the nodes.
        stream: where the progress lines go.

    Raises:
        MissingResourceError: ``sbatch`` is not on the PATH (no Slurm client here).
    """

    name = "slurm"

    def __init__(self, options: SlurmOptions | None = None, *, folder: str | os.PathLike | None = None,
                 device: str = "auto", stream: TextIO | None = None) -> None:
        if options is not None and not isinstance(options, SlurmOptions):
            raise InvalidArgumentError(f"options must be SlurmOptions, got {type(options).__name__}")
        self.options = options or SlurmOptions()
        self.folder = folder
        self.device = device
        self.stream = stream
        check_slurm()
        self.jobs: list[Any] = []  # the submitit jobs (array tasks) of the last run (tests cancel one of them)
        self.task_of: list[int] = []  # job of the last run's submission -> index of its task in self.jobs

    def run(self, specs: Sequence[JobSpec], store: ResultStore, *, progress: bool = True) -> list[JobResult]:
        import submitit

        from .slurm import SlurmJob

        specs = self._check(specs, store)
        stream = self.stream or sys.stdout
        todo = [i for i, s in enumerate(specs) if store.status(s) != "done"]
        for i in todo:  # a failed job is retried: its old record must not be read as this attempt's outcome
            (store.entry(specs[i]) / "failed.json").unlink(missing_ok=True)
        folder = Path(self.folder) if self.folder else store.log_dir() / "slurm"
        print(f"slurm: {len(specs) - len(todo)} of {len(specs)} jobs already stored; submitting {len(todo)}",
              file=stream, flush=True)
        self.jobs = []
        k = self.options.jobs_per_task
        chunks = [todo[j:j + k] for j in range(0, len(todo), k)]
        self.task_of = [c for c, chunk in enumerate(chunks) for _ in chunk]  # job (in todo order) -> its task
        if todo:
            ex = submitit.AutoExecutor(folder=str(folder / "%j"), cluster="slurm")
            ex.update_parameters(**self.options.parameters())
            n = len(chunks)
            calls = [[specs[i].to_dict() for i in chunk] if k > 1 else specs[chunk[0]].to_dict() for chunk in chunks]
            self.jobs = ex.map_array(SlurmJob(), [str(store.root)] * n, calls, [code_fingerprint()] * n,
                                     [self.device] * n)
            print(f"slurm: array {self.jobs[0].job_id.split('_')[0]} submitted ({n} tasks"
                  + (f", {k} jobs a task" if k > 1 else "") + f"); logs in {folder}", file=stream, flush=True)
        failures = self._watch([specs[i] for i in todo], store, progress, stream)
        if failures:
            raise JobsFailedError(failures, store)
        return [store.load(s) for s in specs]

    def _watch(self, specs: list[JobSpec], store: ResultStore, progress: bool,
               stream: TextIO) -> list[tuple[str, str, str | None]]:
        opts = self.options
        state = dict.fromkeys(range(len(specs)), "pending")
        failures: dict[int, tuple[str, str, str | None]] = {}
        bar = _bar(len(specs), "jobs (slurm)", progress)
        t0, last = time.monotonic(), None
        gone_since: dict[int, float] = {}
        while True:
            queue = _squeue_states([j.job_id for j in self.jobs])
            for i, spec in enumerate(specs):
                job = self.jobs[self.task_of[i]]
                if state[i] in ("done", "failed"):
                    continue
                status = store.status(spec)
                log = str(job.paths.stderr)
                if status == "done":
                    state[i] = "done"
                elif status == "failed":
                    rec = store.failure(spec) or {}
                    state[i], failures[i] = "failed", (spec.label, rec.get("error", "failed"), log)
                elif queue is None:  # squeue did not answer: keep the last known state
                    continue
                elif job.job_id in queue:
                    gone_since.pop(i, None)
                    state[i] = "running" if queue[job.job_id] in ("RUNNING", "COMPLETING") else "pending"
                else:  # out of the queue with neither a result nor a failure record: give the files a moment
                    first = gone_since.setdefault(i, time.monotonic())
                    if time.monotonic() - first > max(30.0, 3 * opts.poll_s):
                        why = "left the queue without a result (cancelled, preempted without requeue, or killed)"
                        state[i], failures[i] = "failed", (spec.label, why, log)
            counts = {k: sum(v == k for v in state.values()) for k in ("done", "running", "failed", "pending")}
            text = " / ".join(f"{v} {k}" for k, v in counts.items())
            if bar is not None:
                bar.n = counts["done"] + counts["failed"]
                bar.set_postfix_str(text)
                bar.refresh()
            if text != last:
                print(f"slurm: {text}", file=stream, flush=True)
                last = text
            if counts["running"] + counts["pending"] == 0:
                break
            if opts.max_wait_min is not None and time.monotonic() - t0 > 60 * opts.max_wait_min:
                for i, s in state.items():
                    if s in ("running", "pending"):
                        failures[i] = (specs[i].label, f"still {s} after {opts.max_wait_min} min (left in the queue)",
                                       str(self.jobs[self.task_of[i]].paths.stderr))
                break
            time.sleep(opts.poll_s)
        if bar is not None:
            bar.close()
        return [failures[i] for i in sorted(failures)]


def check_slurm() -> str:
    """The path of ``sbatch``; raises :class:`MissingResourceError` when Slurm's client is not installed."""
    path = shutil.which("sbatch")
    if path is None:
        raise MissingResourceError(
            "Slurm's sbatch", expected_at="on the PATH",
            how_to_get="--executor slurm submits to a Slurm cluster: run it on a node of one (where sbatch, squeue "
                       "and scancel are on the PATH; Debian: apt-get install slurm-client), or use --executor local.")
    return path


def make_executor(name: str, *, device: str = "auto", slurm_config: str | os.PathLike | None = None,
                  stream: TextIO | None = None, **slurm_options: Any) -> Executor:
    """An executor by name (:data:`EXECUTORS`); ``slurm_config`` and ``slurm_options`` configure ``slurm``.

    Raises:
        UnknownNameError: an unknown executor name.
        MissingResourceError: ``slurm`` without Slurm's client on the PATH.
    """
    if name not in EXECUTORS:
        raise UnknownNameError("executor", name, EXECUTORS)
    if name == "local":
        return LocalExecutor(device=device)
    return SlurmExecutor(load_slurm_config(slurm_config, **slurm_options), device=device, stream=stream)
