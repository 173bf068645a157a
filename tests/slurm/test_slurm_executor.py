"""The slurm executor against a real single-node Slurm cluster (``make test`` starts it: tools/slurm/cluster.sh).

Run with SLURM_CONF set (the Makefile's ``slurm`` step does). Without a cluster these tests fail, saying so.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from privkit.jobs import JobSpec, JobsFailedError, ResultStore, SlurmExecutor, SlurmOptions

REPO = Path(__file__).resolve().parents[2]
FAST = SlurmOptions(cpus_per_job=1, time_min=10, poll_s=0.5, max_wait_min=10)


@pytest.fixture(autouse=True, scope="module")
def _cluster():
    if not os.environ.get("SLURM_CONF"):
        pytest.fail("SLURM_CONF is not set: start the test cluster first (bash tools/slurm/cluster.sh start; "
                    "make test does it, as root)")
    out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0 or not out.stdout.strip():
        pytest.fail(f"the Slurm cluster does not answer: {out.stderr.strip()}")


def _squeue_state(job_id: str) -> str:
    out = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-j", job_id.split("_")[0], "-o", "%F_%K %T"],
                         capture_output=True, text=True, timeout=60)
    states = dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
    return states.get(job_id, "")


def test_failed_job_is_reported_with_its_log_and_the_others_finish(tmp_path):
    store = ResultStore(tmp_path / "store")
    specs = [JobSpec("diagnostic.echo", {"value": 1}, label="one"),
             JobSpec("diagnostic.fail", {"message": "on purpose"}, label="broken"),
             JobSpec("diagnostic.echo", {"value": 3}, label="three")]
    ex = SlurmExecutor(FAST)
    with pytest.raises(JobsFailedError) as err:
        ex.run(specs, store, progress=False)
    (label, error, log), = err.value.failures
    assert label == "broken" and "diagnostic failure: on purpose" in error
    assert log and Path(log).is_file() and "on purpose" in Path(log).read_text()
    assert [store.status(s) for s in specs] == ["done", "failed", "done"]
    assert float(store.load(specs[2]).tensors["value"]) == 3.0


def test_several_jobs_a_task_are_stored_and_reported_one_by_one(tmp_path):
    """jobs_per_task=2: three jobs in two tasks; the failing one is reported alone, the job after it in its task
    still runs, and a re-run submits only the failed job."""
    import dataclasses

    store = ResultStore(tmp_path / "store")
    specs = [JobSpec("diagnostic.fail", {"message": "first of its task"}, label="broken"),
             JobSpec("diagnostic.echo", {"value": 2}, label="two"),
             JobSpec("diagnostic.echo", {"value": 3}, label="three")]
    ex = SlurmExecutor(dataclasses.replace(FAST, jobs_per_task=2))
    with pytest.raises(JobsFailedError) as err:
        ex.run(specs, store, progress=False)
    assert len(ex.jobs) == 2 and ex.task_of == [0, 0, 1]
    (label, error, log), = err.value.failures
    assert label == "broken" and "first of its task" in error and "first of its task" in Path(log).read_text()
    assert [store.status(s) for s in specs] == ["failed", "done", "done"]
    assert float(store.load(specs[1]).tensors["value"]) == 2.0
    again = SlurmExecutor(dataclasses.replace(FAST, jobs_per_task=2))
    with pytest.raises(JobsFailedError):
        again.run(specs, store, progress=False)
    assert len(again.jobs) == 1 and again.task_of == [0]  # only the failed job went back


def test_scancel_of_one_running_job_then_rerun_completes_only_that_job(tmp_path):
    store = ResultStore(tmp_path / "store")
    specs = [JobSpec("diagnostic.count", {"n": 30, "seconds": 0.5}, label="long counter"),
             JobSpec("diagnostic.sleep", {"seconds": 1, "value": 2}, label="short sleeper")]
    ex = SlurmExecutor(FAST)
    box: dict = {}
    t = threading.Thread(target=lambda: box.setdefault("err", _run_catching(ex, specs, store)))
    t.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (ex.jobs and _squeue_state(ex.jobs[0].job_id) == "RUNNING"
                                               and (store.checkpoint_dir(specs[0]) / "count.json").is_file()):
        time.sleep(0.5)
    target = ex.jobs[0].job_id
    subprocess.run(["scancel", target], check=True, timeout=60)
    t.join(timeout=300)
    assert not t.is_alive()
    err = box["err"]
    assert isinstance(err, JobsFailedError) and [f[0] for f in err.failures] == ["long counter"]
    assert "left the queue without a result" in err.failures[0][1]
    assert store.status(specs[1]) == "done" and store.status(specs[0]) != "done"
    again = SlurmExecutor(FAST)
    results = again.run(specs, store, progress=False)
    assert len(again.jobs) == 1  # only the cancelled job was submitted again
    assert results[0].data["resumed_from"] > 0  # ... and it resumed from its checkpoint
    assert results[0].data["resumed_from"] + results[0].data["ran"] == 30


def _run_catching(ex, specs, store):
    try:
        ex.run(specs, store, progress=False)
    except JobsFailedError as exc:
        return exc
    return None


_TIMING = re.compile(r"(^|_)(cpu|wall|seconds|time)(_|$)|_s$|per_s")


@pytest.mark.parametrize("paper", ["isp", "dppose", "scoreshield", "synthesisnet"])
def test_rehearsal_study_through_slurm_equals_local(paper):
    """make test ran the rehearsal notebooks twice: in process (build/rehearsal) and with --executor slurm
    (build/rehearsal-slurm); every table and figure CSV is equal, timing columns aside."""
    local, slurm = REPO / "build/rehearsal/figures" / paper, REPO / "build/rehearsal-slurm" / paper
    if not slurm.is_dir():
        pytest.fail(f"{slurm} is missing: make test runs the rehearsal {paper} notebook with --executor slurm first")
    files = sorted(local.glob("*.csv"))
    assert files
    for f in files:
        a, b = pd.read_csv(f), pd.read_csv(slurm / f.name)
        cols = [c for c in a.columns if not _TIMING.search(str(c))]
        assert list(a.columns) == list(b.columns), f.name
        pd.testing.assert_frame_equal(a[cols], b[cols], check_exact=True, obj=f.name)
