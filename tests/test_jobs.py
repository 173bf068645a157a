"""Jobs, the result store and the local executor (the slurm executor: tests/slurm, against a real cluster)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from privkit.errors import InvalidArgumentError, MissingResourceError, PrivkitError, UnknownNameError
from privkit.jobs import (JobResult, JobsFailedError, JobSpec, LocalExecutor, ResultStore, code_fingerprint,
                          folder_fingerprint, load_slurm_config, make_executor, run_job, store_for)
from privkit.jobs.codec import decode_dataclass, decode_frame, encode_dataclass, encode_frame
from privkit.privacy.guarantee import PrivacyGuarantee


def test_key_depends_on_kind_params_inputs_and_code(monkeypatch):
    a = JobSpec("diagnostic.echo", {"value": 1, "x": [1, 2]})
    assert a.key() == JobSpec("diagnostic.echo", {"x": (1, 2), "value": 1}, label="other label").key()
    assert a.key() != JobSpec("diagnostic.echo", {"value": 2, "x": [1, 2]}).key()
    assert a.key() != JobSpec("diagnostic.sleep", {"value": 1, "x": [1, 2]}).key()
    assert a.key() != JobSpec("diagnostic.echo", {"value": 1, "x": [1, 2]}, inputs={"data": "abc"}).key()
    key = a.key()
    code_fingerprint.cache_clear()
    monkeypatch.setenv("PRIVKIT_CODE_FINGERPRINT", "other code")
    try:
        assert JobSpec("diagnostic.echo", {"value": 1, "x": [1, 2]}).key() != key
    finally:
        monkeypatch.delenv("PRIVKIT_CODE_FINGERPRINT")
        code_fingerprint.cache_clear()


def test_changed_code_is_never_served_from_a_stale_entry(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    spec = JobSpec("diagnostic.echo", {"value": 5})
    LocalExecutor().run([spec], store, progress=False)
    assert ResultStore(tmp_path).status(spec) == "done"
    code_fingerprint.cache_clear()
    monkeypatch.setenv("PRIVKIT_CODE_FINGERPRINT", "edited code")
    try:
        assert ResultStore(tmp_path).status(spec) == "missing"
    finally:
        monkeypatch.delenv("PRIVKIT_CODE_FINGERPRINT")
        code_fingerprint.cache_clear()


@pytest.mark.parametrize("bad", [{"x": float("nan")}, {"x": math.inf}, {"x": object()}, {1: 2}])
def test_spec_params_must_be_json(bad):
    with pytest.raises(InvalidArgumentError, match="params"):
        JobSpec("diagnostic.echo", bad)


def test_store_round_trip_is_exact_and_owner_only(tmp_path):
    store = ResultStore(tmp_path / "s")
    spec = JobSpec("diagnostic.echo", {"value": 1})
    t = torch.randn(3, 4, dtype=torch.float64)
    store.save(spec, JobResult(data={"a": [1.5, math.inf], "b": "x"}, tensors={"t": t}))
    fresh = ResultStore(tmp_path / "s").load(spec)
    assert torch.equal(fresh.tensors["t"], t) and fresh.data["a"][1] == math.inf
    entry = store.entry(spec)
    assert (entry.stat().st_mode & 0o077) == 0 and ((entry / "result.safetensors").stat().st_mode & 0o077) == 0
    assert json.loads((entry / "spec.json").read_text())["key"] == spec.key()


def test_local_executor_runs_missing_only_and_reports_failures(tmp_path):
    store = ResultStore(tmp_path)
    ok, bad = JobSpec("diagnostic.echo", {"value": 1}, label="ok"), JobSpec("diagnostic.fail", {}, label="bad")
    with pytest.raises(JobsFailedError, match="bad: PrivkitError: diagnostic failure") as err:
        LocalExecutor().run([bad, ok], store, progress=False)
    assert err.value.failures[0][0] == "bad" and store.status(ok) == "done" and store.status(bad) == "failed"
    assert "Traceback" in store.failure(bad)["traceback"]
    before = (store.entry(ok) / "done.json").stat().st_mtime_ns
    (res,) = LocalExecutor().run([ok], ResultStore(tmp_path), progress=False)
    assert (store.entry(ok) / "done.json").stat().st_mtime_ns == before and float(res.tensors["value"]) == 1.0


def test_checkpointed_job_resumes(tmp_path):
    store = ResultStore(tmp_path)
    spec = JobSpec("diagnostic.count", {"n": 5, "seconds": 0.0})
    (store.checkpoint_dir(spec) / "count.json").write_text(json.dumps({"done": 3}))
    (res,) = LocalExecutor().run([spec], store, progress=False)
    assert res.data == {"n": 5, "resumed_from": 3, "ran": 2}
    assert not (store.entry(spec) / "checkpoint").exists()  # dropped once done


def test_worker_with_other_code_refuses(tmp_path):
    spec = JobSpec("diagnostic.echo", {"value": 1})
    with pytest.raises(PrivkitError, match="other privkit code"):
        run_job(tmp_path, spec, code="0" * 64)
    assert ResultStore(tmp_path).status(spec) == "failed"


def test_unknown_kind_and_bad_executor_inputs(tmp_path, monkeypatch):
    with pytest.raises(JobsFailedError, match="job kind='nope' is not known"):
        LocalExecutor().run([JobSpec("nope", {})], ResultStore(tmp_path), progress=False)
    with pytest.raises(UnknownNameError, match="executor"):
        make_executor("kubernetes")
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch here
    with pytest.raises(MissingResourceError, match="sbatch"):
        make_executor("slurm")


def test_slurm_config_file(tmp_path):
    good = tmp_path / "slurm.toml"
    good.write_text('[slurm]\npartition = "gpu"\ngpus_per_job = 1\ntime_min = 90\n')
    opts = load_slurm_config(good, qos="high")
    params = opts.parameters()
    assert params["slurm_partition"] == "gpu" and params["gpus_per_node"] == 1 and params["timeout_min"] == 90
    assert params["slurm_qos"] == "high"
    with pytest.raises(PrivkitError, match="cannot be read"):
        load_slurm_config(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("partition = ")
    with pytest.raises(PrivkitError, match="not valid TOML"):
        load_slurm_config(tmp_path / "bad.toml")
    (tmp_path / "unknown.toml").write_text("gpus = 2\n")
    with pytest.raises(UnknownNameError, match="slurm option"):
        load_slurm_config(tmp_path / "unknown.toml")
    with pytest.raises(InvalidArgumentError, match="time_min"):
        load_slurm_config(time_min=0)
    (tmp_path / "packed.toml").write_text("jobs_per_task = 4\n")
    assert load_slurm_config(tmp_path / "packed.toml").jobs_per_task == 4
    assert "jobs_per_task" not in load_slurm_config(tmp_path / "packed.toml").parameters()  # privkit's, not sbatch's
    with pytest.raises(InvalidArgumentError, match="jobs_per_task"):
        load_slurm_config(jobs_per_task=0)


def test_slurm_job_is_checkpointable():
    import submitit

    from privkit.jobs.slurm import SlurmJob

    job = SlurmJob()
    assert isinstance(job, submitit.helpers.Checkpointable)
    again = job.checkpoint("root", {"kind": "diagnostic.echo", "params": {}}, "code")
    assert isinstance(again, submitit.helpers.DelayedSubmission) and again.args[0] == "root"


def test_folder_fingerprint_and_store_for(tmp_path):
    (tmp_path / "a").write_text("1")
    f1 = folder_fingerprint(tmp_path)
    (tmp_path / ".privkit-cache").mkdir()
    assert folder_fingerprint(tmp_path) == f1  # hidden entries are not data
    (tmp_path / "b").write_text("2")
    assert folder_fingerprint(tmp_path) != f1
    assert store_for(tmp_path / "figures" / ".staging-dppose-x").root == (tmp_path / "figures" / ".store").resolve()
    with pytest.raises(InvalidArgumentError):
        folder_fingerprint(tmp_path / "nope")


def test_codec_round_trip():
    from privkit.data.types import FaceSet

    fs = FaceSet(images=torch.rand(2, 3, 4, 4), identity=torch.tensor([0, 1]), box=torch.rand(2, 4),
                 mask=torch.rand(2, 1, 4, 4), context=torch.tensor([0, 0]),
                 attributes={"g": torch.tensor([1, 0])}, name="x", meta={"k": 1})
    tensors: dict = {}
    meta = json.loads(json.dumps(encode_dataclass("f", fs, tensors)))
    back = decode_dataclass({"FaceSet": FaceSet}, "f", meta, tensors)
    assert back.name == "x" and back.meta == {"k": 1} and torch.equal(back.attributes["g"], fs.attributes["g"])
    with pytest.raises(InvalidArgumentError, match="expected one of"):
        decode_dataclass({}, "f", meta, tensors)


@pytest.mark.parametrize("method", ["dpsgd", "feature_projective", "nonprivate"])
def test_guarantee_from_dict_round_trip(method):
    from test_dppose_resume import _trainer
    from test_dppose_dp import make_poseset

    trainer = _trainer(method, make_poseset(48, seed=0), make_poseset(24, seed=1, id_offset=10_000), epochs=1)
    g = trainer.run().guarantee
    back = PrivacyGuarantee.from_dict(json.loads(json.dumps(g.to_dict())))
    assert back == g and str(back) == str(g)
    with pytest.raises(InvalidArgumentError):
        PrivacyGuarantee.from_dict({"epsilon": 1})


def test_store_saves_tensors_that_share_memory(tmp_path):
    base = torch.arange(6.0)
    store = ResultStore(tmp_path)
    spec = JobSpec("diagnostic.echo", {"value": 0})
    store.save(spec, JobResult(tensors={"a": base, "b": base, "c": base[2:]}))
    back = ResultStore(tmp_path).load(spec).tensors
    assert torch.equal(back["a"], base) and torch.equal(back["b"], base) and torch.equal(back["c"], base[2:])


def test_squeue_that_does_not_answer_tells_nothing(monkeypatch):
    import subprocess

    from privkit.jobs import executors

    def fake(args, **kw):
        return subprocess.CompletedProcess(args, fake.rc, stdout=fake.out, stderr="")

    fake.rc, fake.out = 0, "17 0 RUNNING\n17 1 PENDING\n18 N/A PENDING\n"
    monkeypatch.setattr(executors.subprocess, "run", fake)
    assert executors._squeue_states(["17_0", "17_1", "18"]) == {"17_0": "RUNNING", "17_1": "PENDING", "18": "PENDING"}
    fake.rc, fake.out = 1, ""  # "slurm_load_jobs error: Socket timed out": not "every task left the queue"
    assert executors._squeue_states(["17_0"]) is None


def test_reproduce_refuses_bad_executor_input_before_running(tmp_path, capsys, monkeypatch):
    from privkit.reproduce import main

    assert main(["reproduce", "--executor", "bogus", "--out", str(tmp_path)]) == 2
    assert "executor='bogus' is not known" in capsys.readouterr().err
    if __import__("shutil").which("sbatch"):
        assert main(["reproduce", "--executor", "slurm", "--slurm-config", str(tmp_path / "no.toml"),
                     "--out", str(tmp_path)]) == 2
        assert "cannot be read" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["reproduce", "--executor", "slurm", "--out", str(tmp_path)]) == 2
    assert "sbatch" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # nothing ran, nothing was written


# ------------------------------------------------------------------------------------------------ DataFrames
def test_frames_round_trip_with_their_dtypes_and_exact_values():
    import numpy as np
    import pandas as pd

    frame = pd.DataFrame({"x": [1 / 3, np.nan, -0.0], "n": [1, 2, 3], "s": ["a", None, "c"], "b": [True, False, True],
                          "o": [None, 0.1, "mixed"], 7: np.array([1, 2, 3], dtype=np.float32),
                          "u": np.array([0, 255, 7], dtype=np.uint8)})
    tensors: dict = {}
    meta = encode_frame("t", frame, tensors)
    assert {"t.c0", "t.c1", "t.c3", "t.c5", "t.c6"} == set(tensors)  # numeric columns travel as tensors
    back = decode_frame("t", json.loads(json.dumps(meta)), tensors)
    pd.testing.assert_frame_equal(back, frame, check_exact=True)
    assert list(back.dtypes) == list(frame.dtypes)
    empty = pd.DataFrame(columns=["sigma", "cpi"])
    tensors = {}
    pd.testing.assert_frame_equal(decode_frame("e", encode_frame("e", empty, tensors), tensors), empty)


def test_frames_with_another_index_or_not_a_frame_are_refused():
    import pandas as pd

    with pytest.raises(InvalidArgumentError, match="reset_index"):
        encode_frame("t", pd.DataFrame({"a": [1, 2]}, index=[5, 6]), {})
    with pytest.raises(InvalidArgumentError, match="DataFrame"):
        encode_frame("t", {"a": [1]}, {})
