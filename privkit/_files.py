"""File helpers shared by the caches, the model fetchers and the result store: atomic writes, file digests and the
git commit of the checkout privkit runs from."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

__all__ = ["atomic_write", "file_digest", "git_commit"]


def atomic_write(path: Path, data: bytes, *, mode: int) -> None:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, fsync, rename) with ``mode``.

    A reader never sees a half-written file, and a failed write leaves no temporary file behind. ``mode`` is set
    explicitly because ``mkstemp`` creates owner-only files (cache files stay 0o600; public model files 0o644).
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def file_digest(path: Path, algorithm: str = "sha256") -> "hashlib._Hash":
    """The ``hashlib`` digest object of a file's bytes, read in 1 MiB chunks (``.hexdigest()``, ``.digest()``)."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest


#: Folders of the checkout that hold outputs, not inputs: a regenerated figure does not make the tree dirty.
OUTPUT_FOLDERS = ("figures", "benchmarks/results")


def git_commit(root: str | os.PathLike | None = None) -> str | None:
    """The git commit of the checkout privkit runs from (or of ``root``), ``-dirty`` appended when tracked files other
    than outputs (:data:`OUTPUT_FOLDERS`) differ from it; None outside a git checkout.

    Outputs are left out so that a batch run stays clean after its first paper has rewritten ``figures/<paper>``."""
    try:
        root = Path(__file__).resolve().parent if root is None else Path(root)
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if out.returncode != 0:
            return None
        excludes = [f":(top,exclude){d}" for d in OUTPUT_FOLDERS]
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":/", *excludes],
                               cwd=root, capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None
