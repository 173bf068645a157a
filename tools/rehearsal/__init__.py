"""privkit's rehearsal tool: a miniature paper-scale data root in the real on-disk formats.

A repository tool, not part of the library: ``python -m privkit rehearsal-root DIR`` (or
:func:`privkit.reproduce.write_rehearsal_root`) loads it from this folder of a privkit checkout. :mod:`.faces` writes
CelebA, VGGFace2, LFW and IJB-B/C from privkit's embedded faces; :mod:`.models` writes MPII, MovieLens-100K and
randomly initialised weights for every paper-scale model. Every number computed on a rehearsal root is meaningless;
it exists so that every notebook's paper branch runs end to end in CI.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .faces import write_face_rehearsal_root
from .models import write_model_rehearsal_root

__all__ = ["write_rehearsal_root"]


def write_rehearsal_root(root: str | os.PathLike, *, seed: int = 0) -> dict:
    """Write the miniature paper-scale data root (face datasets, MPII, MovieLens and rehearsal weights, all in the
    real on-disk formats) into the empty or new folder ``root``; returns a summary."""
    t0 = time.perf_counter()
    root = Path(root)
    faces = write_face_rehearsal_root(root, seed=seed)
    models = write_model_rehearsal_root(root, seed=seed)
    files = [f for f in root.rglob("*") if f.is_file()]
    (root / "REHEARSAL.txt").write_text(
        "A privkit rehearsal data root: miniature datasets and randomly initialised weights in the real on-disk\n"
        "formats, for `python -m privkit reproduce --scale rehearsal --data-root <this folder>`. It exercises the\n"
        "paper path; every number it produces is meaningless. Never use it as real data.\n")
    return {"root": str(root.resolve()), "files": len(files) + 1, "bytes": sum(f.stat().st_size for f in files),
            "seconds": time.perf_counter() - t0, "faces": faces, "models": models}
