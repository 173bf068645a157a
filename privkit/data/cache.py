"""An on-disk cache for expensive embedding computations.

Paper-scale runs embed tens of thousands of images with large frozen encoders; :func:`cached_embeddings`
computes such a tensor once and reuses it. Each entry is two files in ``cache_dir``:

- ``emb-<key>.safetensors``: the tensor (safetensors, never pickle), under the name ``"embeddings"``;
- ``emb-<key>.json``: metadata: the key fields, the privkit version, the tensor's shape and dtype and the
  sha256 of its raw bytes.

``<key>`` is the sha256 of the canonical JSON of (encoder, dataset, split, seed, privkit version, extra), so
entries for different encoders, datasets, splits, seeds, privkit versions or extras never collide. An entry
is used only when both files exist, the metadata matches the key, the tensor loads and its bytes hash to
the recorded sha256; anything else (a truncated or partial write, a flipped byte, a missing or foreign JSON
file) is reported with a :class:`CacheCorruptionWarning` and rebuilt.

Face embeddings are biometric templates, so the cache directory is created with mode 0o700 and every file
with mode 0o600 (readable by the owner only). Writes are atomic: each file goes to a temporary file in the
same directory, is flushed to disk, and is moved into place with :func:`os.replace`; the JSON file, written
last, commits the entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from .._files import atomic_write
from .._validate import check_int
from ..device import resolve_device
from ..errors import InvalidArgumentError

__all__ = [
    "cached_embeddings", "cache_key", "cache_paths", "content_fingerprint", "clear_cache", "CacheCorruptionWarning",
    "DEFAULT_CACHE_DIR",
]

def _default_cache_dir() -> str:
    """``$PRIVKIT_CACHE_DIR``, else ``build/cache`` of the checkout privkit runs from, else ``./build/cache``.

    Anchoring on the checkout keeps one cache whatever folder a notebook runs in (papermill runs in the
    repository root, nbval in the notebook's folder).
    """
    env = os.environ.get("PRIVKIT_CACHE_DIR")
    if env:
        return env
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file() and (root / "privkit").is_dir():
        return str(root / "build" / "cache")
    return "build/cache"


#: Where notebooks keep their caches (git-ignored, deleted by ``make clean``).
DEFAULT_CACHE_DIR = _default_cache_dir()

_PREFIX = "emb-"
_TENSOR_NAME = "embeddings"
_FORMAT = 1
_DIR_MODE = 0o700
_FILE_MODE = 0o600


class CacheCorruptionWarning(UserWarning):
    """A cache entry was unreadable or failed its integrity check and is being rebuilt."""


def _privkit_version() -> str:
    from .. import __version__

    return str(__version__)


def _check_name(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _key_fields(encoder: str, dataset: str, split: str, seed: int | None, extra: Mapping[str, Any] | None) -> dict:
    for name, value in (("encoder", encoder), ("dataset", dataset), ("split", split)):
        _check_name(name, value)
    if seed is not None:
        seed = check_int("seed", seed)
    extra = {} if extra is None else extra
    if not isinstance(extra, Mapping):
        raise InvalidArgumentError(f"extra must be a mapping of JSON-serialisable values or None, got {type(extra).__name__}")
    fields = {"encoder": encoder, "dataset": dataset, "split": split, "seed": seed,
              "privkit_version": _privkit_version(), "extra": dict(extra)}
    try:
        # a JSON round trip makes the fields compare equal to what the metadata file gives back (tuples
        # become lists, and so on)
        fields = json.loads(json.dumps(fields, sort_keys=True, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"extra must hold only JSON-serialisable values (str, int, finite float, bool, None, lists, dicts "
            f"with string keys); {exc}"
        ) from None
    return fields


def _key_hash(fields: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the key fields."""
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def content_fingerprint(tensors: torch.Tensor | Sequence[torch.Tensor]) -> str:
    """sha256 of the dtype, shape and bytes of each tensor (CPU, contiguous), in order.

    Raises:
        InvalidArgumentError: something other than a tensor or a sequence of tensors.
    """
    items = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors) if isinstance(tensors, Sequence) else None
    if items is None or not all(isinstance(t, torch.Tensor) for t in items):
        raise InvalidArgumentError(f"inputs must be a tensor or a sequence of tensors, got {type(tensors).__name__}")
    h = hashlib.sha256()
    for t in items:
        t = t.detach().to("cpu").contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)};".encode("utf-8"))
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def cache_key(*, encoder: str, dataset: str, split: str, seed: int | None,
              extra: Mapping[str, Any] | None = None) -> str:
    """The 64-hex-digit key of an entry: sha256 of the canonical JSON of its key fields and privkit's version.

    Args:
        encoder: encoder name (e.g. ``"dlib-resnet"``).
        dataset: dataset name (e.g. ``"celeba-20"``).
        split: split name (e.g. ``"test"``).
        seed: the seed that selected the rows (``None`` when no randomness was involved).
        extra: any further settings that change the result (image size, crop, checkpoint hash, ...); must be
            JSON-serialisable.

    Raises:
        InvalidArgumentError: empty names, a non-integer seed, or ``extra`` not JSON-serialisable.
    """
    return _key_hash(_key_fields(encoder, dataset, split, seed, extra))


def cache_paths(*, encoder: str, dataset: str, split: str, seed: int | None, extra: Mapping[str, Any] | None = None,
                cache_dir: str | os.PathLike = DEFAULT_CACHE_DIR) -> tuple[Path, Path]:
    """The ``(tensor_file, metadata_file)`` paths of an entry (they need not exist)."""
    key = cache_key(encoder=encoder, dataset=dataset, split=split, seed=seed, extra=extra)
    return _entry_paths(Path(cache_dir), key)


def _entry_paths(root: Path, key: str) -> tuple[Path, Path]:
    return root / f"{_PREFIX}{key}.safetensors", root / f"{_PREFIX}{key}.json"


def _tensor_sha256(t: torch.Tensor) -> str:
    raw = t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)
    return hashlib.sha256(raw.numpy().tobytes()).hexdigest()


def _ensure_dir(root: Path) -> None:
    if root.exists():
        if not root.is_dir():
            raise InvalidArgumentError(f"cache_dir={str(root)!r} exists and is not a directory")
        mode = stat.S_IMODE(root.stat().st_mode)
        if mode & 0o077:
            warnings.warn(f"cache directory {root} is accessible to other users (mode {mode:o}); cached face "
                          f"embeddings are biometric templates. Restrict it with: chmod 700 {root}", UserWarning,
                          stacklevel=3)
        return
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, _DIR_MODE)  # mkdir's mode is filtered by the umask; set it explicitly


def _read_entry(tensor_path: Path, meta_path: Path, fields: Mapping[str, Any]) -> tuple[torch.Tensor | None, str | None]:
    """``(tensor, None)`` for a valid entry, ``(None, reason)`` otherwise; ``reason`` is ``None`` if simply absent."""
    has_t, has_m = tensor_path.exists(), meta_path.exists()
    if not has_t and not has_m:
        return None, None
    if not has_m:
        return None, "metadata file missing"
    if not has_t:
        return None, "tensor file missing"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"metadata unreadable ({exc})"
    if not isinstance(meta, dict) or meta.get("format") != _FORMAT or meta.get("key") != dict(fields):
        return None, "metadata does not match the requested key"
    try:
        from safetensors.torch import load_file

        tensors = load_file(str(tensor_path), device="cpu")
    except Exception as exc:  # safetensors raises its own error types for truncated/garbled files
        return None, f"tensor file unreadable ({type(exc).__name__}: {exc})"
    t = tensors.get(_TENSOR_NAME)
    if t is None or set(tensors) != {_TENSOR_NAME}:
        return None, "tensor file does not hold exactly one 'embeddings' tensor"
    if list(t.shape) != meta.get("shape") or str(t.dtype) != meta.get("dtype"):
        return None, "tensor shape/dtype differ from the metadata"
    if _tensor_sha256(t) != meta.get("sha256"):
        return None, "sha256 of the tensor bytes differs from the metadata (corrupt file)"
    return t, None


def cached_embeddings(
    fn: Callable[[], torch.Tensor], *, encoder: str, dataset: str, split: str, seed: int | None,
    extra: Mapping[str, Any] | None = None, cache_dir: str | os.PathLike = DEFAULT_CACHE_DIR,
    device: str | torch.device | None = None, inputs: torch.Tensor | Sequence[torch.Tensor] | None = None,
) -> torch.Tensor:
    """Return ``fn()``, computing it only if no valid cache entry for the key exists.

    Args:
        fn: zero-argument function computing the tensor (e.g. ``lambda: encoder.embed(faces.images)``).
        encoder, dataset, split, seed, extra: the key (see :func:`cache_key`); put everything that changes
            the result into it, since a hit returns the stored tensor without calling ``fn``.
        inputs: the tensors ``fn`` reads (images, boxes); their content's sha256 (:func:`content_fingerprint`)
            joins the key, so an edit of the data that keeps its name and size (a changed renderer, a fixed
            loader) misses the cache instead of returning stale embeddings.
        cache_dir: directory of the cache; created with mode 0o700 if absent. If it already exists with
            group/other permissions, a warning says so (privkit does not change the mode of a directory it
            did not create).
        device: where to put the result; ``None`` leaves it on the CPU. Hits and misses return the same
            thing: a CPU tensor equal to the stored one (then moved to ``device``).

    Returns:
        The tensor, with the dtype and shape ``fn`` produced.

    Raises:
        InvalidArgumentError: bad key fields, ``fn`` not callable or not returning a tensor, or a sparse /
            non-strided tensor (safetensors stores dense tensors only).

    Warns:
        CacheCorruptionWarning: an existing entry failed its check (truncated, partial, hash mismatch, missing
            or foreign metadata) and was rebuilt.
    """
    if not callable(fn):
        raise InvalidArgumentError(f"fn must be a callable returning a torch.Tensor, got {type(fn).__name__}")
    if inputs is not None:
        extra = {**(extra or {}), "inputs_sha256": content_fingerprint(inputs)}
    fields = _key_fields(encoder, dataset, split, seed, extra)
    key = _key_hash(fields)
    root = Path(cache_dir)
    tensor_path, meta_path = _entry_paths(root, key)
    target = None if device is None else resolve_device(device)

    if root.is_dir():
        t, reason = _read_entry(tensor_path, meta_path, fields)
        if t is not None:
            return t if target is None else t.to(target)
        if reason is not None:
            warnings.warn(f"cache entry {tensor_path.name} for {fields['encoder']}/{fields['dataset']}/"
                          f"{fields['split']} is invalid ({reason}); recomputing it", CacheCorruptionWarning,
                          stacklevel=2)

    value = fn()
    if not isinstance(value, torch.Tensor):
        raise InvalidArgumentError(f"fn must return a torch.Tensor, got {type(value).__name__}")
    if value.layout != torch.strided:
        raise InvalidArgumentError(f"fn must return a dense (strided) tensor, got layout {value.layout}")
    cpu = value.detach().to("cpu").contiguous()
    if cpu.is_floating_point() and cpu.numel() and not bool(torch.isfinite(cpu).all()):
        warnings.warn("caching a tensor that contains NaN or inf values", UserWarning, stacklevel=2)

    from safetensors.torch import save

    _ensure_dir(root)
    sha = _tensor_sha256(cpu)
    payload = save({_TENSOR_NAME: cpu}, metadata={"sha256": sha, "key": key})
    meta = {"format": _FORMAT, "key": fields, "key_sha256": key, "shape": list(cpu.shape), "dtype": str(cpu.dtype),
            "sha256": sha, "nbytes": int(cpu.numel() * cpu.element_size())}
    atomic_write(tensor_path, payload, mode=_FILE_MODE)
    atomic_write(meta_path, (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode("utf-8"), mode=_FILE_MODE)
    return cpu if target is None else cpu.to(target)


def clear_cache(cache_dir: str | os.PathLike = DEFAULT_CACHE_DIR) -> int:
    """Delete every privkit embedding-cache file in ``cache_dir``.

    Only files this module writes (``emb-*.safetensors``, ``emb-*.json`` and their leftover temporary files)
    are removed; other files are left alone. The directory itself is removed when that leaves it empty.

    Args:
        cache_dir: the cache directory; a missing directory is not an error.

    Returns:
        The number of files removed.

    Raises:
        InvalidArgumentError: ``cache_dir`` exists and is not a directory.
    """
    root = Path(cache_dir)
    if not root.exists():
        return 0
    if not root.is_dir():
        raise InvalidArgumentError(f"cache_dir={str(root)!r} is not a directory")
    removed = 0
    for p in root.iterdir():
        name = p.name
        ours = ((name.startswith(_PREFIX) and name.endswith((".safetensors", ".json")))
                or (name.startswith("." + _PREFIX) and name.endswith(".tmp")))
        if ours and p.is_file() and not p.is_symlink():
            p.unlink()
            removed += 1
    try:
        root.rmdir()
    except OSError:
        pass
    return removed
