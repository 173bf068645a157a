"""Containers returned by privkit's data loaders."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

#: ``FaceSet.meta`` keys that hold one entry per row (subset together with the rows by :meth:`FaceSet.subset`).
PER_ROW_META: tuple[str, ...] = ("files", "source_sizes")


@dataclass
class FaceSet:
    """Identity-labelled face images.

    Attributes:
        images: (N, 3, H, W) float32 in [0, 1].
        identity: (N,) int64 identity ids (0 .. n_identities-1 within this set, unless ``identity_names`` says otherwise).
        box: (N, 4) float32 xyxy face box in pixels.
        mask: (N, 1, H, W) bool face mask (exact for generated sets; the box for real sets without masks).
        context: (N,) int64 context label (e.g. background id); -1 where unknown.
        attributes: name -> (N,) int64 non-identity labels.
        name: dataset name.
        meta: free-form provenance (seed, transforms, split, source files).
    """

    images: torch.Tensor
    identity: torch.Tensor
    box: torch.Tensor
    mask: torch.Tensor
    context: torch.Tensor
    attributes: dict[str, torch.Tensor] = field(default_factory=dict)
    name: str = ""
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def n_identities(self) -> int:
        return int(self.identity.unique().numel())

    def subset(self, index: torch.Tensor) -> "FaceSet":
        """Rows selected by a boolean mask or an index tensor.

        ``meta`` is copied; its per-row lists (the keys in :data:`PER_ROW_META`, e.g. the source file of each row)
        are subset with the rows.
        """
        index = torch.as_tensor(index)
        rows = torch.nonzero(index).flatten() if index.dtype == torch.bool else index.reshape(-1)
        meta = dict(self.meta)
        for key in PER_ROW_META:
            value = meta.get(key)
            if isinstance(value, (list, tuple)) and len(value) == len(self):
                meta[key] = [value[int(r)] for r in rows.tolist()]
        return FaceSet(
            images=self.images[index], identity=self.identity[index], box=self.box[index], mask=self.mask[index],
            context=self.context[index], attributes={k: v[index] for k, v in self.attributes.items()}, name=self.name,
            meta=meta,
        )

    def face_coverage_ratio(self) -> torch.Tensor:
        """FCR: fraction of image pixels covered by the face mask, per image (N,)."""
        return self.mask.flatten(1).float().mean(dim=1)


@dataclass
class PoseSet:
    """Images with 16 MPII-ordered keypoints.

    Attributes:
        images: (N, 3, H, W) float32 in [0, 1].
        keypoints: (N, 16, 2) float32 (x, y) pixels, MPII joint order.
        visible: (N, 16) bool.
        head_box: (N, 4) float32 xyxy head box (PCKh normaliser).
        identity: (N,) int64 figure identity.
        name: dataset name; meta: provenance.
    """

    images: torch.Tensor
    keypoints: torch.Tensor
    visible: torch.Tensor
    head_box: torch.Tensor
    identity: torch.Tensor
    name: str = ""
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def subset(self, index: torch.Tensor) -> "PoseSet":
        return PoseSet(
            images=self.images[index], keypoints=self.keypoints[index], visible=self.visible[index],
            head_box=self.head_box[index], identity=self.identity[index], name=self.name, meta=dict(self.meta),
        )


#: MPII joint order (index -> name).
MPII_JOINTS: tuple[str, ...] = (
    "r_ankle", "r_knee", "r_hip", "l_hip", "l_knee", "l_ankle", "pelvis", "thorax",
    "upper_neck", "head_top", "r_wrist", "r_elbow", "r_shoulder", "l_shoulder", "l_elbow", "l_wrist",
)
