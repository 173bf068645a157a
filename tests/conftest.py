"""Shared test set-up."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: Test modules that ``make test`` runs a second time under other CPU kernels (``-m kernels``, with
#: ``ATEN_CPU_CAPABILITY=default``, ``MKL_ENABLE_INSTRUCTIONS=SSE4_2`` and two threads): every release and every
#: exact property (symmetry, unit diagonal, idempotence, clipping bounds) lives in one of them, so a test that only
#: passes by the luck of one machine's floating-point rounding surfaces on any machine.
KERNEL_MODULES = frozenset({
    "test_audit_regressions.py",
    "test_scoreshield_release.py",
    "test_scoreshield_projection.py",
    "test_privacy_samplers.py",
    "test_privacy_calibration.py",
    "test_dppose_dp.py",
    "test_isp_projection.py",
})

#: Tests of modules that also train networks: only the release tests (matched by name) are re-run.
KERNEL_TESTS = {"test_synthesisnet.py": ("noise", "clipping", "privatize", "guarantee", "audit"),
                "test_dppose_features.py": ("clipped_sum", "hooks")}


#: tests/slurm needs a running Slurm cluster: `make slurm-check` (part of `make test`) starts one and runs them.
collect_ignore = [] if os.environ.get("PRIVKIT_SLURM_TESTS") else ["slurm"]


def pytest_collection_modifyitems(config, items):
    for item in items:
        module = Path(str(item.fspath)).name
        if module in KERNEL_MODULES or any(k in item.name for k in KERNEL_TESTS.get(module, ())):
            item.add_marker(pytest.mark.kernels)


@pytest.fixture(autouse=True, scope="session")
def _torch_threads():
    """One intra-op thread by default: the tensors in the tests are small, and on a shared 2-core CI machine
    spinning OpenMP threads costs far more than it gains (small eigendecompositions were 3-30x slower with 2 threads
    under contention). ``PRIVKIT_TEST_THREADS`` overrides it (the kernel re-run uses 2). torch is imported here, not
    at the top, so that pytest-xdist's controller process (``make test-fast``), which runs no test, never loads it."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(int(os.environ.get("PRIVKIT_TEST_THREADS", "1")))
    yield
    torch.set_num_threads(threads)
