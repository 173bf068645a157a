"""Resuming a DP training run from an epoch-boundary checkpoint: the same weights, noise and accounted steps as the
uninterrupted run (a privacy property: a resumed run must neither re-draw noise for kept steps nor forget steps)."""

from __future__ import annotations

import json

import pytest
import torch

from privkit.dppose import DPSpec, PublicSpec, Schedule, make_private
from privkit.errors import InvalidArgumentError

from test_dppose_dp import make_poseset, small_model


class Interrupt(Exception):
    pass


def _trainer(method: str, data, public, *, epochs: int = 4, seed: int = 3, secure: bool = False):
    dp = None if method == "nonprivate" else DPSpec(epsilon=2.0, delta=1e-5, clip=0.5, secure=secure)
    pub = PublicSpec(public_set=public, k=3, n_public=12, refresh=2) if method in ("projected", "feature_projective") \
        else None
    return make_private(small_model(), data, method=method, dp=dp, public=pub,
                        schedule=Schedule(epochs=epochs, batch_size=12, lr=1e-3), seed=seed, device="cpu")


def _interrupt_at(trainer, step_to_fail: int):
    """Make ``trainer`` raise at its ``step_to_fail``-th optimiser step (0-based), as a crash mid-epoch would."""
    original = trainer._optimiser_step

    def step(perm, j, step, window):
        if step == step_to_fail:
            raise Interrupt(f"interrupted at step {step}")
        return original(perm, j, step, window)

    trainer._optimiser_step = step


@pytest.fixture(scope="module")
def sets():
    return make_poseset(48, seed=0), make_poseset(24, seed=1, id_offset=10_000)


@pytest.mark.parametrize("method", ["dpsgd", "feature_projective", "nonprivate"])
@pytest.mark.parametrize("fail_at", [5, 8])  # mid-epoch 2 (resumes after epoch 1); on the boundary after epoch 2
def test_resumed_run_equals_uninterrupted(tmp_path, sets, method, fail_at):
    data, public = sets
    whole = _trainer(method, data, public).run()
    ck = tmp_path / "ck"
    first = _trainer(method, data, public)
    _interrupt_at(first, fail_at)
    with pytest.raises(Interrupt):
        first.run(checkpoint=ck)
    saved = json.loads((ck / "latest.json").read_text())
    assert saved["stem"] == f"state-{fail_at // 4}"  # 4 steps an epoch: the last complete epoch before the crash
    second = _trainer(method, data, public)
    resumed = second.run(checkpoint=ck)
    assert second.acc_steps == (whole.steps if method != "nonprivate" else 0)
    assert resumed.steps == whole.steps
    assert resumed.history == whole.history
    for (name, a), (_, b) in zip(whole.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(a, b), name  # same process, same kernels: bit-for-bit
    assert resumed.guarantee == whole.guarantee
    assert resumed.noise_multiplier == whole.noise_multiplier


def test_resume_with_a_different_run_is_refused(tmp_path, sets):
    data, public = sets
    first = _trainer("dpsgd", data, public)
    _interrupt_at(first, 6)
    with pytest.raises(Interrupt):
        first.run(checkpoint=tmp_path)
    other = _trainer("dpsgd", data, public, seed=4)
    with pytest.raises(InvalidArgumentError, match="another training run.*seed"):
        other.run(checkpoint=tmp_path)


def test_negative_control_forgetting_the_accountant_is_caught(tmp_path, sets):
    """A broken resume that restores the weights but restarts the accountant's count reports fewer steps than ran:
    the comparison above would catch it (this is the check's negative control)."""
    data, public = sets
    whole = _trainer("dpsgd", data, public).run()
    first = _trainer("dpsgd", data, public)
    _interrupt_at(first, 6)
    with pytest.raises(Interrupt):
        first.run(checkpoint=tmp_path)
    meta_path = tmp_path / "state-1.json"
    meta = json.loads(meta_path.read_text())
    meta["acc_steps"] = 0  # the broken variant: the accountant's history is lost on resume
    meta_path.write_text(json.dumps(meta))
    broken = _trainer("dpsgd", data, public)
    result = broken.run(checkpoint=tmp_path)
    assert broken.acc_steps < whole.steps
    assert result.guarantee.epsilon < whole.guarantee.epsilon  # it would under-report the privacy loss


def test_secure_generators_are_not_written(tmp_path, sets):
    data, public = sets
    first = _trainer("dpsgd", data, public, secure=True)
    _interrupt_at(first, 6)
    with pytest.raises(Interrupt):
        first.run(checkpoint=tmp_path)
    from safetensors.torch import load_file

    assert not [k for k in load_file(str(tmp_path / "state-1.safetensors")) if k.startswith("rng.")]
    resumed = _trainer("dpsgd", data, public, secure=True)
    res = resumed.run(checkpoint=tmp_path)
    assert resumed.acc_steps == res.steps == 16
