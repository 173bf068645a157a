"""Dataclasses of tensors (a PoseSet, CachedFeatures, a FaceSet) to and from a store result's JSON and tensors."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

import torch

from ..errors import InvalidArgumentError

__all__ = ["plain_json", "encode_dataclass", "decode_dataclass", "encode_frame", "decode_frame"]


def plain_json(value: Any) -> Any:
    """Provenance values as JSON: numpy arrays and scalars, ranges, tuples and paths become lists, numbers, strings."""
    import numpy as np

    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, range)):
        return [plain_json(v) for v in value]
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
            meta[f.name] = plain_json(value)
        else:
            meta[f.name] = plain_json(value)
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


def _as_tensor_column(dtype: Any) -> bool:
    """Float, signed-integer, bool and uint8 columns travel as tensors (exact bits); the rest as JSON values."""
    import numpy as np

    return isinstance(dtype, np.dtype) and (dtype.kind in "fib" or dtype == np.uint8)


def encode_frame(prefix: str, frame: Any, tensors: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Put a DataFrame's numeric columns into ``tensors`` (``prefix.c<i>``, exact bits) and return the JSON of the
    rest: column names, dtypes, and the values of the other columns (strings, mixed objects) as lists.

    Raises:
        InvalidArgumentError: ``frame`` is not a DataFrame, or its index is not the default ``0..n-1`` (reset it).
    """
    import numpy as np
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise InvalidArgumentError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    if not frame.index.equals(pd.RangeIndex(len(frame))):
        raise InvalidArgumentError(f"frame {prefix!r}: only the default index 0..n-1 is stored; reset_index() first")
    meta: dict[str, Any] = {"columns": [], "n": len(frame)}
    for i, name in enumerate(frame.columns):
        col = frame.iloc[:, i]
        entry: dict[str, Any] = {"name": plain_json(name), "dtype": str(col.dtype)}
        if _as_tensor_column(col.dtype):
            tensors[f"{prefix}.c{i}"] = torch.from_numpy(np.ascontiguousarray(col.to_numpy()).copy())
        else:
            missing = col.dtype != object  # a typed column's NaN is its missing value (None in JSON)
            entry["values"] = [None if missing and isinstance(v, float) and v != v else plain_json(v)
                               for v in col.tolist()]
        meta["columns"].append(entry)
    return meta


def decode_frame(prefix: str, meta: Mapping[str, Any], tensors: Mapping[str, torch.Tensor]) -> Any:
    """The DataFrame :func:`encode_frame` described (same columns, dtypes and values)."""
    import pandas as pd

    cols = {}
    for i, entry in enumerate(meta["columns"]):
        if "values" in entry:
            cols[i] = pd.Series(entry["values"], dtype=object if entry["dtype"] == "object" else entry["dtype"])
        else:
            cols[i] = pd.Series(tensors[f"{prefix}.c{i}"].numpy())
    frame = pd.DataFrame(cols, index=pd.RangeIndex(meta["n"]))
    frame.columns = [e["name"] for e in meta["columns"]]
    return frame
