"""privkit's LEACE-style eraser against the reference implementation, EleutherAI's ``concept-erasure`` (0.2.4).

With the reference's extras switched off (no covariance shrinkage, no trace constraint, no singular-value
truncation beyond numerical zero) both compute the same closed form x' = x − W⁺ Q Qᵀ W (x − μ): the same erased
subspace and the same outputs. privkit's eraser is used without re-normalisation here (it re-normalises by
default, as ISP does).
"""

from __future__ import annotations

import pytest
import torch

from privkit.isp import LeaceFitter

concept_erasure = pytest.importorskip("concept_erasure")


def _data(n_ids: int = 12, per_id: int = 15, d: int = 24, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n_ids, d, generator=g, dtype=torch.float64)
    y = torch.arange(n_ids).repeat_interleave(per_id)
    x = means[y] + 0.7 * torch.randn(len(y), d, generator=g, dtype=torch.float64)
    return torch.nn.functional.normalize(x, dim=1), y


def _reference(x: torch.Tensor, y: torch.Tensor):
    z = torch.nn.functional.one_hot(y).to(x.dtype)
    return concept_erasure.LeaceFitter.fit(x, z, shrinkage=False, constrain_cov_trace=False, svd_tol=1e-9).eraser


def test_same_outputs_and_same_erased_subspace():
    x, y = _data()
    ref = _reference(x, y)
    fitter = LeaceFitter(renormalize=False)
    fitter.update(x, y)
    ours = fitter.eraser
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-7, atol=1e-9)
    # the erased directions: the column space of W⁺ Q (ours: right/left factors; reference: proj_left)
    ref_left = ref.proj_left[:, ref.proj_left.abs().sum(0) > 0]
    ours_left = ours.left.T  # (d, r)
    assert torch.linalg.matrix_rank(ref_left).item() == ours.rank == 11  # m − 1 directions
    q_ref, _ = torch.linalg.qr(ref_left)
    q_ours, _ = torch.linalg.qr(ours_left)
    cosines = torch.linalg.svdvals(q_ref.T @ q_ours)
    assert float(cosines.min()) > 1 - 1e-8


def test_class_means_coincide_after_erasure_for_both():
    x, y = _data(seed=1)
    fitter = LeaceFitter(renormalize=False)
    fitter.update(x, y)
    for erased in (fitter.eraser(x), _reference(x, y)(x)):
        means = torch.stack([erased[y == i].mean(0) for i in range(12)])
        assert float((means - means.mean(0)).abs().max()) < 1e-10
