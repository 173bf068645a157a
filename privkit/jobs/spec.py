"""Job specs and their content keys.

A :class:`JobSpec` names one expensive unit of work (one DP training run, one SynthesisNet training, ...) by its
``kind`` (a registered job function, :mod:`privkit.jobs.registry`) and its ``params``: a small mapping of JSON values
(numbers, strings, booleans, None, lists and mappings of them). ``inputs`` are the fingerprints of everything the job
reads that its params do not describe (a data root's file index, a weight file's digest, the key of another job's
stored result).

Its :meth:`~JobSpec.key` is the SHA-256 of the canonical JSON of the kind, the params, the inputs and the code
fingerprint (:func:`code_fingerprint`: a digest of every source file of the installed ``privkit`` package), so a job
whose spec, inputs or code changed gets a new key and is never served from a stale store entry.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._files import file_digest
from ..errors import InvalidArgumentError

__all__ = ["JobSpec", "canonical_json", "code_fingerprint", "folder_fingerprint", "file_fingerprint"]

_PACKAGE = Path(__file__).resolve().parent.parent


def _check_json(name: str, value: Any) -> Any:
    """``value`` as plain JSON data (tuples become lists); raises for anything JSON cannot hold exactly."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"{name} must hold finite numbers only, got {value!r}")
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_check_json(f"{name}[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidArgumentError(f"{name} must have string keys, got {k!r}")
            out[k] = _check_json(f"{name}[{k!r}]", v)
        return out
    raise InvalidArgumentError(f"{name} must hold JSON values (numbers, strings, booleans, None, lists, mappings), "
                               f"got {type(value).__name__}")


def canonical_json(value: Any) -> str:
    """The one JSON text of ``value``: sorted keys, no spaces, finite floats in Python's shortest round-trip form."""
    return json.dumps(_check_json("value", value), sort_keys=True, separators=(",", ":"), allow_nan=False)


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 over the relative path and bytes of every ``.py`` file of the privkit package (sorted by path).

    Any change to the library's code changes every job key: conservative (a change of one paper's code re-runs the
    others' jobs too) but never stale. The environment variable ``PRIVKIT_CODE_FINGERPRINT`` overrides it (for a
    cluster whose workers run from another checkout of the same commit; the submitting process sets it).
    """
    override = os.environ.get("PRIVKIT_CODE_FINGERPRINT")
    if override:
        return override
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        rel = path.relative_to(_PACKAGE).as_posix()
        digest.update(rel.encode() + b"\0" + file_digest(path).digest())
    return digest.hexdigest()


def file_fingerprint(path: str | os.PathLike) -> str:
    """SHA-256 of a file's bytes (weights, a small index)."""
    return file_digest(Path(path)).hexdigest()


def folder_fingerprint(root: str | os.PathLike) -> str:
    """SHA-256 of a folder's file index: every file's relative path, size and modification time (not its bytes, so
    a data root of hundreds of GB is fingerprinted in seconds). Hidden entries (``.privkit-cache``, a result store)
    are left out."""
    root = Path(root)
    if not root.is_dir():
        raise InvalidArgumentError(f"root must be an existing folder, got {str(root)!r}")
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(f for f in filenames if not f.startswith(".")):
            p = Path(dirpath) / name
            st = p.stat()
            digest.update(f"{p.relative_to(root).as_posix()}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class JobSpec:
    """One job: a registered ``kind``, its JSON ``params`` and the fingerprints of its ``inputs``.

    Attributes:
        kind: the job function's registered name (:func:`privkit.jobs.registry.job_kinds`), e.g. ``"dppose.train"``.
        params: JSON values that decide the result (the run's settings).
        inputs: ``name -> fingerprint`` of what the job reads besides its params (data, weights, other results).
        label: a short readable name for progress lines and logs (not part of the key).
    """

    kind: str
    params: Mapping[str, Any]
    inputs: Mapping[str, str] = field(default_factory=dict)
    label: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind:
            raise InvalidArgumentError(f"kind must be a non-empty string, got {self.kind!r}")
        object.__setattr__(self, "params", _check_json("params", dict(self.params)))
        inputs = _check_json("inputs", dict(self.inputs))
        if not all(isinstance(v, str) for v in inputs.values()):
            raise InvalidArgumentError("inputs must map names to fingerprint strings")
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "label", str(self.label or self.kind))

    def key(self) -> str:
        """The content key: SHA-256 of the canonical JSON of kind, params, inputs and the code fingerprint."""
        text = canonical_json({"kind": self.kind, "params": self.params, "inputs": self.inputs,
                               "code": code_fingerprint()})
        return hashlib.sha256(text.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "params": self.params, "inputs": self.inputs, "label": self.label}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "JobSpec":
        missing = {"kind", "params"} - set(d)
        if missing:
            raise InvalidArgumentError(f"a job spec needs the fields kind and params; missing {sorted(missing)}")
        return cls(kind=d["kind"], params=d["params"], inputs=d.get("inputs", {}), label=d.get("label", ""))
