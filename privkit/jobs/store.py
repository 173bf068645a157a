"""The content-addressed result store: one folder per job key, written once, read by every later run.

Layout under the store's root (``<out>/.store`` by default, beside the papers' figure folders)::

    <key[:2]>/<key>/spec.json         the spec, the code fingerprint, privkit's version and git commit
    <key[:2]>/<key>/result.json       the result's JSON part        } written first,
    <key[:2]>/<key>/result.safetensors the result's tensors          } then ...
    <key[:2]>/<key>/done.json         ... this marker, atomically, last: an entry is done only when it exists
    <key[:2]>/<key>/failed.json       the error, its traceback and the log file of a job that raised
    <key[:2]>/<key>/checkpoint/       a resumable job's checkpoint (deleted when the job is done)

Nothing is pickled: a result is JSON plus a safetensors file. Results can hold private data (features of private
images, trained networks, face embeddings), so the store's folders are created readable by their owner only (0700,
files 0600), as the embedding cache is.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from .._files import atomic_write, git_commit
from ..errors import InvalidArgumentError, PrivkitError
from .spec import JobSpec, code_fingerprint

__all__ = ["JobResult", "ResultStore", "Status", "STATUSES", "store_for"]

Status = Literal["done", "failed", "missing"]
STATUSES: tuple[str, ...] = ("done", "failed", "missing")
_DIR_MODE, _FILE_MODE = 0o700, 0o600


@dataclass
class JobResult:
    """What a job returns and the store keeps: JSON values and named tensors.

    Attributes:
        data: JSON values (numbers, strings, lists, mappings; ``inf`` and ``nan`` are kept).
        tensors: ``name -> tensor`` (stored as safetensors, loaded on the CPU).
    """

    data: dict[str, Any] = field(default_factory=dict)
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)


def _key(spec: JobSpec | str) -> str:
    if isinstance(spec, JobSpec):
        return spec.key()
    if isinstance(spec, str):
        return spec
    raise InvalidArgumentError(f"spec must be a JobSpec or a key string, got {type(spec).__name__}")


class ResultStore:
    """A folder of job results keyed by :meth:`JobSpec.key` (module docstring).

    Args:
        root: the store's folder (created, owner-only, if missing).
    """

    def __init__(self, root: str | os.PathLike) -> None:
        if root is None or str(root) == "":
            raise InvalidArgumentError("root must be a folder path, got an empty value")
        self.root = Path(root).resolve()
        self._mkdir(self.root)
        self._memory: dict[str, JobResult] = {}

    def __repr__(self) -> str:
        return f"ResultStore({str(self.root)!r})"

    @staticmethod
    def _mkdir(path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
        os.chmod(path, _DIR_MODE)

    # -- paths -----------------------------------------------------------------------------------------------
    def entry(self, spec: JobSpec | str) -> Path:
        """The folder of ``spec`` (or of a key), whether or not it exists yet."""
        key = spec if isinstance(spec, str) else spec.key()
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise InvalidArgumentError(f"key must be a 64-digit lowercase hex SHA-256, got {key!r}")
        return self.root / key[:2] / key

    def checkpoint_dir(self, spec: JobSpec) -> Path:
        """The folder where a resumable job keeps its checkpoint (created on demand)."""
        path = self.entry(spec) / "checkpoint"
        self._mkdir(path.parent.parent)
        self._mkdir(path.parent)
        self._mkdir(path)
        return path

    def log_dir(self) -> Path:
        """Where executors write job logs (``<root>/logs``)."""
        path = self.root / "logs"
        self._mkdir(path)
        return path

    # -- status ----------------------------------------------------------------------------------------------
    def status(self, spec: JobSpec | str) -> Status:
        """``"done"`` (a result is stored), ``"failed"`` (the last attempt raised) or ``"missing"`` (of a spec or key)."""
        key = _key(spec)
        if key in self._memory:
            return "done"
        entry = self.entry(key)
        if (entry / "done.json").is_file():
            return "done"
        if (entry / "failed.json").is_file():
            return "failed"
        return "missing"

    def failure(self, spec: JobSpec | str) -> dict[str, Any] | None:
        """The failure record of a failed job (``error``, ``traceback``, ``log``), or None."""
        path = self.entry(spec) / "failed.json"
        return json.loads(path.read_text()) if path.is_file() else None

    # -- write -----------------------------------------------------------------------------------------------
    def _write_json(self, path: Path, value: Any) -> None:
        atomic_write(path, json.dumps(value, indent=1, sort_keys=True).encode(), mode=_FILE_MODE)

    def save(self, spec: JobSpec, result: JobResult) -> None:
        """Store ``result`` as the result of ``spec`` (the done marker last) and drop its checkpoint and failure."""
        if not isinstance(result, JobResult):
            raise InvalidArgumentError(f"result must be a JobResult, got {type(result).__name__}")
        from safetensors.torch import save_file

        entry = self.entry(spec)
        self._mkdir(entry.parent)
        self._mkdir(entry)
        self._write_json(entry / "spec.json", {**spec.to_dict(), "key": spec.key(), "code": code_fingerprint(),
                                               "privkit_commit": git_commit()})
        self._write_json(entry / "result.json", result.data)
        tensors, storages = {}, set()
        for k, v in result.tensors.items():  # safetensors refuses tensors that share memory (a set's labels reused
            t = v.detach().cpu().contiguous()  # by its blurred copy): the second of such a pair is written as a copy
            ptr = t.untyped_storage().data_ptr()
            tensors[k] = t.clone() if ptr in storages else t
            storages.add(ptr)
        tmp = entry / ".result.safetensors.tmp"
        save_file(tensors, str(tmp))  # straight to disk: a design's cached features can be GBs
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, entry / "result.safetensors")
        (entry / "failed.json").unlink(missing_ok=True)
        self._write_json(entry / "done.json", {"key": spec.key(), "label": spec.label})
        shutil.rmtree(entry / "checkpoint", ignore_errors=True)
        self._memory[spec.key()] = result

    def keep(self, spec: JobSpec, result: JobResult) -> None:
        """Hold ``result`` as the result of ``spec`` in this process only (nothing is written): for inputs that only
        jobs run in this process read, such as a design's cached features under the local executor."""
        if not isinstance(result, JobResult):
            raise InvalidArgumentError(f"result must be a JobResult, got {type(result).__name__}")
        self._memory[spec.key()] = result

    def save_failure(self, spec: JobSpec, *, error: str, traceback: str = "", log: str | None = None) -> None:
        """Record that ``spec`` raised (a re-run retries it; its checkpoint is kept for the retry)."""
        entry = self.entry(spec)
        self._mkdir(entry.parent)
        self._mkdir(entry)
        self._write_json(entry / "failed.json", {"key": spec.key(), "label": spec.label, "error": error,
                                                 "traceback": traceback, "log": log})

    def forget(self, spec: JobSpec) -> None:
        """Delete the entry of ``spec`` (its result, failure record and checkpoint)."""
        self._memory.pop(spec.key(), None)
        shutil.rmtree(self.entry(spec), ignore_errors=True)

    # -- read ------------------------------------------------------------------------------------------------
    def load(self, spec: JobSpec | str) -> JobResult:
        """The stored result of ``spec`` (or of a key).

        Results saved by this process are returned as they were saved (the same tensors); others are read from disk.

        Raises:
            PrivkitError: ``spec`` has no stored result (it failed, or never ran).
        """
        key = _key(spec)
        if key in self._memory:
            return self._memory[key]
        from safetensors.torch import load_file

        entry = self.entry(key)
        if not (entry / "done.json").is_file():
            failure = self.failure(spec)
            why = f"it failed: {failure['error']} (log: {failure.get('log')})" if failure else "it has not run"
            label = spec.label if isinstance(spec, JobSpec) else key[:12]
            raise PrivkitError(f"job {label!r} has no result in {self.root}: {why}")
        data = json.loads((entry / "result.json").read_text())
        tensors = load_file(str(entry / "result.safetensors"))
        result = JobResult(data=data, tensors=tensors)
        self._memory[key] = result
        return result

    def summary(self, specs: list[JobSpec]) -> Mapping[str, int]:
        """``status -> count`` over ``specs``."""
        counts = dict.fromkeys(STATUSES, 0)
        for s in specs:
            counts[self.status(s)] += 1
        return counts


def store_for(out_dir: str | os.PathLike, store_dir: str | os.PathLike | None = None) -> ResultStore:
    """The result store of a notebook writing into ``out_dir``: ``store_dir`` if given, else ``.store`` beside the
    papers' folders (``figures/.store`` for ``figures/<paper>``, also while the batch runner stages into
    ``figures/.staging-<paper>-*``), so a re-run finds what an earlier one stored."""
    if store_dir is not None:
        return ResultStore(store_dir)
    if out_dir is None or str(out_dir) == "":
        raise InvalidArgumentError("out_dir must be a folder path, got an empty value")
    return ResultStore(Path(out_dir).resolve().parent / ".store")
