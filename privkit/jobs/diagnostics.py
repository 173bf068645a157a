"""Diagnostic job kinds: what the executor tests and benchmarks submit (they touch no data and no privacy)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import torch

from ..errors import PrivkitError
from .registry import JobContext
from .store import JobResult

__all__ = ["echo_job", "sleep_job", "fail_job", "count_job"]


def echo_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """Returns its params, and ``value`` as a tensor."""
    return JobResult(data={"params": dict(params)}, tensors={"value": torch.tensor([float(params.get("value", 0))])})


def sleep_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """Sleeps ``seconds``, then returns like :func:`echo_job`."""
    time.sleep(float(params.get("seconds", 1.0)))
    return echo_job(params, ctx)


def fail_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """Raises a PrivkitError (the failure path of an executor)."""
    raise PrivkitError(f"diagnostic failure: {params.get('message', 'this job always fails')}")


def count_job(params: Mapping[str, Any], ctx: JobContext) -> JobResult:
    """Counts to ``n`` in ``seconds`` per step, checkpointing after each step (the resume path of an executor).

    Its result says how many steps this attempt ran and from where it resumed.
    """
    n, pause = int(params["n"]), float(params.get("seconds", 0.5))
    path = ctx.checkpoint_dir / "count.json"
    start = json.loads(path.read_text())["done"] if path.is_file() else 0
    for i in range(start, n):
        time.sleep(pause)
        path.write_text(json.dumps({"done": i + 1}))
    return JobResult(data={"n": n, "resumed_from": start, "ran": n - start})
