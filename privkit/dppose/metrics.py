"""PCKh, the MPII pose metric (paper 2, §2.1).

Convention (the standard MPII evaluation as implemented in HRNet's
``evaluate`` for MPII):

* the head size of a person is ``0.6 x`` the diagonal of its head box
  (``SC_BIAS = 0.6``; MPII's head boxes are larger than the head segment the
  original protocol used, and 0.6 x the diagonal reproduces it);
* joint ``j`` of person ``i`` is correct when
  ``||pred_ij - gt_ij||_2 <= alpha * headsize_i``;
* only visible joints count; ``per_joint[j]`` is the percentage of visible
  instances of joint ``j`` that are correct (NaN when joint ``j`` is never
  visible);
* the mean is weighted by visible-joint counts and **excludes pelvis and
  thorax** (indices 6 and 7), i.e. it is the fraction of correct visible
  joints over the 14 other joints.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validate import check_positive, check_tensor
from ..data.types import MPII_JOINTS
from ..errors import ShapeError

__all__ = ["PCKhResult", "pckh", "HEAD_SIZE_FACTOR", "EXCLUDED_FROM_MEAN"]

#: Head size = HEAD_SIZE_FACTOR x head-box diagonal (HRNet's ``SC_BIAS``).
HEAD_SIZE_FACTOR = 0.6

#: Joints left out of the mean: pelvis (6) and thorax (7).
EXCLUDED_FROM_MEAN: tuple[int, ...] = (6, 7)


@dataclass(frozen=True)
class PCKhResult:
    """PCKh at one threshold.

    Attributes:
        mean: Weighted mean PCKh in percent over the joints not in
            :data:`EXCLUDED_FROM_MEAN` (NaN if none of them is visible).
        per_joint: (J,) PCKh in percent per joint (NaN where never visible).
        counts: (J,) number of visible instances per joint.
        alpha: The threshold (0.5 for PCKh@0.5).
    """

    mean: float
    per_joint: torch.Tensor
    counts: torch.Tensor
    alpha: float

    def as_dict(self) -> dict[str, float]:
        """``{"mean": ..., "<joint name>": ...}`` (MPII names when J = 16)."""
        j = self.per_joint.numel()
        names = MPII_JOINTS if j == len(MPII_JOINTS) else [f"joint_{i}" for i in range(j)]
        return {"mean": self.mean, **{n: float(v) for n, v in zip(names, self.per_joint.tolist())}}


def pckh(pred: torch.Tensor, gt: torch.Tensor, visible: torch.Tensor, head_box: torch.Tensor, *,
         alpha: float = 0.5) -> PCKhResult:
    """PCKh@alpha with the MPII conventions of the module docstring.

    Args:
        pred: (N, J, 2) predicted pixel coordinates ``(x, y)``.
        gt: (N, J, 2) ground-truth pixel coordinates.
        visible: (N, J) bool visibility of the ground truth.
        head_box: (N, 4) head boxes ``(x1, y1, x2, y2)`` in pixels.
        alpha: Threshold as a fraction of the head size, ``> 0``.

    Returns:
        A :class:`PCKhResult`.
    """
    a = check_positive("alpha", alpha)
    check_tensor("pred", pred, ndim=3)
    if pred.shape[-1] != 2:
        raise ShapeError(f"pred must have shape (N, J, 2), got {tuple(pred.shape)}")
    n, j, _ = pred.shape
    check_tensor("gt", gt, shape=(n, j, 2))
    check_tensor("visible", visible, shape=(n, j))
    check_tensor("head_box", head_box, shape=(n, 4))
    p = pred.detach().double()
    g = gt.detach().to(p.device).double()
    vis = visible.detach().to(p.device).to(torch.bool)
    hb = head_box.detach().to(p.device).double()
    head = HEAD_SIZE_FACTOR * torch.linalg.vector_norm(hb[:, 2:] - hb[:, :2], dim=-1)  # (N,)
    err = torch.linalg.vector_norm(p - g, dim=-1)  # (N, J)
    correct = (err <= a * head.unsqueeze(-1)) & vis
    counts = vis.sum(0)
    hits = correct.sum(0)
    per_joint = torch.where(counts > 0, 100.0 * hits.double() / counts.clamp_min(1).double(),
                            torch.full_like(hits, float("nan"), dtype=torch.float64))
    keep = torch.tensor([idx not in EXCLUDED_FROM_MEAN for idx in range(j)], dtype=torch.bool, device=p.device)
    total = int(counts[keep].sum())
    mean = 100.0 * float(hits[keep].sum()) / total if total > 0 else float("nan")
    return PCKhResult(mean=mean, per_joint=per_joint.float().cpu(), counts=counts.cpu(), alpha=a)
