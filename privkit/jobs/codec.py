"""Dataclasses of tensors (a PoseSet, CachedFeatures, a FaceSet) to and from a store result's JSON and tensors."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import torch

from ..errors import InvalidArgumentError

__all__ = ["encode_dataclass", "decode_dataclass"]


def _plain(value: Any) -> Any:
    """Provenance values as JSON: numpy arrays and scalars, ranges, tuples and paths become lists, numbers, strings."""
    import numpy as np

    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, range)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def encode_dataclass(prefix: str, obj: Any, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Put ``obj``'s tensor fields (and dicts of tensors) into ``tensors`` under ``prefix.field[.key]``; returns the
    JSON of the other fields (tuples as lists) with the class name and which fields are tensors."""
    if not dataclasses.is_dataclass(obj):
        raise InvalidArgumentError(f"obj must be a dataclass instance, got {type(obj).__name__}")
    meta: dict[str, Any] = {"class": type(obj).__name__, "tensors": [], "tensor_dicts": {}, "tuples": []}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, torch.Tensor):
            tensors[f"{prefix}.{f.name}"] = value
            meta["tensors"].append(f.name)
        elif isinstance(value, Mapping) and value and all(isinstance(v, torch.Tensor) for v in value.values()):
            meta["tensor_dicts"][f.name] = list(value)
            tensors.update({f"{prefix}.{f.name}.{k}": v for k, v in value.items()})
        elif isinstance(value, tuple):
            meta["tuples"].append(f.name)
            meta[f.name] = _plain(value)
        else:
            meta[f.name] = _plain(value)
    return meta


def decode_dataclass(classes: Mapping[str, type], prefix: str, meta: Mapping[str, Any],
                     tensors: Mapping[str, torch.Tensor]) -> Any:
    """The object :func:`encode_dataclass` described; ``classes`` maps the allowed class names to classes."""
    if meta.get("class") not in classes:
        raise InvalidArgumentError(f"stored {prefix!r} is a {meta.get('class')}, expected one of {sorted(classes)}")
    skip = ("class", "tensors", "tensor_dicts", "tuples")
    args = {k: (tuple(v) if k in meta["tuples"] else v) for k, v in meta.items() if k not in skip}
    args.update({f: tensors[f"{prefix}.{f}"] for f in meta["tensors"]})
    args.update({f: {k: tensors[f"{prefix}.{f}.{k}"] for k in keys} for f, keys in meta["tensor_dicts"].items()})
    return classes[meta["class"]](**args)
