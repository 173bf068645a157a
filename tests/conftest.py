"""Shared test set-up."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """One intra-op thread for the whole run: the tensors in the tests are small, and on a shared 2-core CI
    machine spinning OpenMP threads costs far more than it gains (small eigendecompositions were 3-30x slower
    with 2 threads under contention)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
