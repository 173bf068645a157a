"""IJB-B / IJB-C 1:1 template verification, in InsightFace's ``IJB_release`` layout: ``IJBC/loose_crop/*.jpg``,
``IJBC/meta/ijbc_face_tid_mid.txt``, ``ijbc_template_pair_label.txt`` (+ optional ``ijbc_name_5pts_score.txt``);
``IJBB/`` with the ``ijbb_`` prefix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from ..._validate import check_choice, check_int, check_nonnegative
from ...errors import InvalidArgumentError, MissingResourceError
from ..types import FaceSet
from .common import (PathLike, _as_root, _build_faceset, _check_image_files, _check_size, _check_workers,
                     _first_existing, _format_error, _landmark_boxes, _read_lines)

__all__ = ["IJBProtocol", "load_ijb"]

_HOW_IJB = (
    "IJB-B and IJB-C are distributed by NIST (https://www.nist.gov/programs-projects/face-challenges) under a "
    "licence agreement. privkit reads the widely used evaluation package of InsightFace "
    "(https://github.com/deepinsight/insightface/tree/master/recognition/_evaluation_/ijb, 'IJB_release'): "
    "extract it so that DATA_ROOT/IJBC/loose_crop/1.jpg, DATA_ROOT/IJBC/meta/ijbc_face_tid_mid.txt, "
    "DATA_ROOT/IJBC/meta/ijbc_template_pair_label.txt and (optional, for face boxes) "
    "DATA_ROOT/IJBC/meta/ijbc_name_5pts_score.txt exist (IJBB/... with the ijbb_ prefix for IJB-B; an enclosing "
    "IJB_release/ folder is also accepted)."
)

_IJB_NAMES = ("IJBB", "IJBC")


@dataclass
class IJBProtocol:
    """The 1:1 verification protocol of IJB-B or IJB-C: images grouped into media and templates, template pairs.

    Images are not decoded here (IJB-C has 227,630 of them): :meth:`faces` decodes any subset of rows, and
    :meth:`iter_faces` walks all of them in batches, so a caller can embed the whole set in bounded memory.

    Attributes:
        name: ``"IJBB"`` or ``"IJBC"``.
        image_dir: the ``loose_crop`` folder.
        files: (N,) image file names in ``image_dir``.
        template: (N,) int64 template id of each image (the protocol's ids).
        media: (N,) int64 media id of each image (frames of one video share a media id).
        landmarks: (N, 5, 2) float32 five-point landmarks in source pixels, or ``None`` when the landmark file is
            absent (then the face box is the whole loose crop).
        detection_score: (N,) float32 detector confidence from the landmark file, or ``None``.
        pairs: (P, 2) int64 template ids of each verification pair.
        same: (P,) bool, True for genuine (same-subject) pairs.
        meta: provenance (files read, counts).
    """

    name: str
    image_dir: Path
    files: list[str]
    template: torch.Tensor
    media: torch.Tensor
    landmarks: torch.Tensor | None
    detection_score: torch.Tensor | None
    pairs: torch.Tensor
    same: torch.Tensor
    meta: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.files)

    def boxes(self) -> list[list[float] | None]:
        """Face boxes in source pixels from the five landmarks (``None`` per image without landmarks)."""
        if self.landmarks is None:
            return [None] * len(self.files)
        return _landmark_boxes(self.landmarks.to(torch.float64)).tolist()

    def faces(self, rows: torch.Tensor | Sequence[int] | None = None, *, size: int = 112, margin: float = 0.1,
              num_workers: int = 0, progress: bool = False) -> FaceSet:
        """Decode the images at ``rows`` (default: all; mind the memory) into a :class:`FaceSet`.

        The crop is a square around the landmark box enlarged by ``margin`` per side (``crop="box"``), or the whole
        loose crop when there are no landmarks. ``identity`` holds the templates (IJB subjects are not in the
        1:1 files) as contiguous labels; ``attributes["template"]`` and ``attributes["media"]`` hold the protocol's
        template and media ids.
        """
        size = _check_size(size)
        check_nonnegative("margin", margin)
        num_workers = _check_workers(num_workers)
        if rows is None:
            idx = list(range(len(self.files)))
        else:
            idx = [int(r) for r in torch.as_tensor(rows, dtype=torch.int64).reshape(-1).tolist()]
            bad = [r for r in idx if r < 0 or r >= len(self.files)]
            if bad:
                raise InvalidArgumentError(f"rows must lie in [0, {len(self.files) - 1}], got {bad[0]}")
        all_boxes = self.boxes()
        boxes = [all_boxes[r] for r in idx]
        crop = "box" if self.landmarks is not None else "full"
        paths = [self.image_dir / self.files[r] for r in idx]
        t = self.template[idx]
        meta = {"source": str(self.image_dir), "files": [self.files[r] for r in idx],
                "box_source": "five-point landmarks" if self.landmarks is not None else "whole loose crop"}
        return _build_faceset(paths, t.tolist(), boxes, size=size, crop=crop, margin=float(margin),
                              name=f"{self.name.lower()}", meta=meta, num_workers=num_workers, progress=progress,
                              attributes={"template": t.clone(), "media": self.media[idx].clone()})

    def iter_faces(self, *, batch_size: int = 1024, size: int = 112, margin: float = 0.1, num_workers: int = 0):
        """Yield ``(rows, FaceSet)`` over all images in order, ``batch_size`` at a time."""
        batch_size = check_int("batch_size", batch_size, minimum=1)
        for start in range(0, len(self.files), batch_size):
            rows = torch.arange(start, min(start + batch_size, len(self.files)))
            yield rows, self.faces(rows, size=size, margin=margin, num_workers=num_workers)


def load_ijb(data_root: PathLike, *, name: Literal["IJBB", "IJBC"] = "IJBC",
             max_pairs: int | None = None) -> IJBProtocol:
    """Read IJB-B's or IJB-C's 1:1 verification protocol in InsightFace's ``IJB_release`` format.

    Files (``p`` = ``ijbb`` or ``ijbc``): ``DATA_ROOT/<name>/meta/p_face_tid_mid.txt`` (``image template media``
    per line), ``DATA_ROOT/<name>/meta/p_template_pair_label.txt`` (``template1 template2 label``, label 1 =
    genuine), optional ``DATA_ROOT/<name>/meta/p_name_5pts_score.txt`` (``image x1 y1 ... x5 y5 score``) and the
    images ``DATA_ROOT/<name>/loose_crop/<image>``. Nothing is decoded (see :class:`IJBProtocol`), but every listed
    image is checked up front (present, an image signature, not cut short: 16 bytes read per file), so a missing or
    truncated crop is reported before any embedding.

    Args:
        data_root: folder holding ``IJBC/`` (or ``IJB_release/IJBC/``).
        name: ``"IJBB"`` or ``"IJBC"``.
        max_pairs: keep only the first ``max_pairs`` pairs of the pair file (default all; for quick looks).

    Raises:
        MissingResourceError: the folder, a required file or a listed image is missing (the message says where to
            get them).
        InvalidArgumentError: a file does not follow the format (the message names the line), a pair names a
            template that has no image, or a listed image is not an image or is truncated (named).
    """
    root = _as_root(data_root)
    name = check_choice("name", name, _IJB_NAMES)
    if max_pairs is not None:
        max_pairs = check_int("max_pairs", max_pairs, minimum=1)
    base = _first_existing([root / name, root / "IJB_release" / name], want_dir=True)
    if base is None:
        raise MissingResourceError(f"{name}'s evaluation folder", how_to_get=_HOW_IJB,
                                   expected_at=f"{root / name} or {root / 'IJB_release' / name}")
    p = name.lower()
    tid_file = base / "meta" / f"{p}_face_tid_mid.txt"
    pair_file = base / "meta" / f"{p}_template_pair_label.txt"
    lmk_file = base / "meta" / f"{p}_name_5pts_score.txt"
    image_dir = base / "loose_crop"
    for what, path, is_dir in ((f"{name} image-template-media list", tid_file, False),
                               (f"{name} template pair list", pair_file, False),
                               (f"{name} loose face crops", image_dir, True)):
        if not (path.is_dir() if is_dir else path.is_file()):
            raise MissingResourceError(what, expected_at=str(path), how_to_get=_HOW_IJB)

    files: list[str] = []
    tmpl: list[int] = []
    med: list[int] = []
    for k, line in enumerate(_read_lines(tid_file)):
        parts = line.split()
        if len(parts) != 3:
            raise _format_error(tid_file, k + 1, f"expected 'image template media', got {line!r}")
        try:
            tmpl.append(int(parts[1]))
            med.append(int(parts[2]))
        except ValueError:
            raise _format_error(tid_file, k + 1, f"template and media ids must be integers, got {line!r}") from None
        files.append(parts[0])
    if not files:
        raise _format_error(tid_file, None, "lists no image")
    # every listed crop must be there and look like a complete image before anything is embedded (16 bytes read
    # per file, no decoding)
    _check_image_files([image_dir / f for f in dict.fromkeys(files)], f"{name} ({tid_file.name})", _HOW_IJB)

    pa: list[int] = []
    pb: list[int] = []
    lab: list[bool] = []
    for k, line in enumerate(_read_lines(pair_file)):
        if max_pairs is not None and len(pa) >= max_pairs:
            break
        parts = line.split()
        if len(parts) != 3:
            raise _format_error(pair_file, k + 1, f"expected 'template1 template2 label', got {line!r}")
        try:
            a, b, y = (int(v) for v in parts)
        except ValueError:
            raise _format_error(pair_file, k + 1, f"expected three integers, got {line!r}") from None
        if y not in (0, 1):
            raise _format_error(pair_file, k + 1, f"label must be 0 or 1, got {y}")
        pa.append(a)
        pb.append(b)
        lab.append(bool(y))
    if not pa:
        raise _format_error(pair_file, None, "lists no pair")
    known = set(tmpl)
    missing = sorted({t for t in pa + pb if t not in known})
    if missing:
        raise InvalidArgumentError(f"{pair_file}: {len(missing)} template(s) of the pair list have no image in "
                                   f"{tid_file.name} (first: {missing[0]})")

    landmarks = score = None
    if lmk_file.is_file():
        by_name: dict[str, tuple[list[float], float]] = {}
        for k, line in enumerate(_read_lines(lmk_file)):
            parts = line.split()
            if len(parts) != 12:
                raise _format_error(lmk_file, k + 1, f"expected 'image x1 y1 ... x5 y5 score' (12 fields), "
                                                     f"got {line!r}")
            try:
                vals = [float(v) for v in parts[1:]]
            except ValueError:
                raise _format_error(lmk_file, k + 1, f"landmarks and score must be numbers, got {line!r}") from None
            if not all(np.isfinite(vals)):
                raise _format_error(lmk_file, k + 1, f"landmarks and score must be finite, got {line!r}")
            by_name[parts[0]] = (vals[:10], vals[10])
        absent = [f for f in files if f not in by_name]
        if absent:
            raise InvalidArgumentError(f"{lmk_file}: no landmarks for {len(absent)} image(s) (first: {absent[0]})")
        landmarks = torch.tensor([by_name[f][0] for f in files], dtype=torch.float32).reshape(-1, 5, 2)
        score = torch.tensor([by_name[f][1] for f in files], dtype=torch.float32)

    same = torch.tensor(lab, dtype=torch.bool)
    return IJBProtocol(
        name=name, image_dir=image_dir, files=files,
        template=torch.tensor(tmpl, dtype=torch.int64), media=torch.tensor(med, dtype=torch.int64),
        landmarks=landmarks, detection_score=score,
        pairs=torch.tensor([pa, pb], dtype=torch.int64).T.contiguous(), same=same,
        meta={"source": str(base), "n_images": len(files), "n_templates": len(known), "n_pairs": len(pa),
              "n_genuine": int(same.sum()), "landmarks": lmk_file.is_file()},
    )
