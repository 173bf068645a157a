"""Run TensorFlow.js *graph models* as ``torch.nn.Module`` s.

A TF.js graph model is a ``model.json`` file holding

* ``modelTopology``: a TensorFlow ``GraphDef`` written as JSON (a ``node`` list; every node has a ``name``, an
  ``op``, its ``input`` tensor names and its attributes ``attr``), and
* ``weightsManifest``: groups of weight specifications (``name``, ``shape``, ``dtype`` float32 / int32 / bool and
  an optional ``quantization`` ``{dtype: float16 | uint8 | uint16, scale, min}``) whose values lie, in order, in
  the binary shard files the group lists (``paths``, relative to the JSON file).

:func:`read_graph_model` decodes the weights exactly as ``@tensorflow/tfjs-core`` does (float16 widened to
float32; ``uint8``/``uint16`` values ``q`` mapped to ``q * scale + min``, computed in double precision and rounded
to float32, or rounded to the nearest integer for int32 weights) and builds a :class:`GraphModel`: float constants
become ``nn.Parameter`` s (in TensorFlow's layout, under their TensorFlow names in ``state_dict()``), integer and
boolean constants become buffers. Calling the module executes the nodes needed for the requested outputs in
topological order, with TensorFlow's semantics:

* activations stay NHWC throughout; a convolution permutes its input to an NCHW *view* (channels-last strides,
  no copy), runs ``torch.nn.functional.conv2d`` / ``conv_transpose2d`` and permutes the result back;
* ``SAME`` padding pads ``total = max((ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)`` pixels, ``total // 2``
  before and the rest after (TensorFlow pads more at the end); ``VALID`` pads nothing; ``EXPLICIT`` reads
  ``explicit_paddings``;
* the fused ops ``_FusedConv2D``, ``FusedDepthwiseConv2dNative`` and ``_FusedMatMul`` apply their ``fused_ops``
  (``BiasAdd``, then ``Relu``, ``Relu6``, ``Elu``, ``LeakyRelu``, ``Prelu``, ``Sigmoid`` or ``Tanh``) with their
  ``num_args`` extra inputs;
* ``ResizeBilinear`` implements ``align_corners`` and ``half_pixel_centers`` (and the legacy mode with both
  false) with TensorFlow's source-coordinate formulas;
* ``Conv2DBackpropInput`` (transposed convolution) reads its ``output_shape`` input at run time.

Everything is differentiable where TensorFlow's op is (integer index computations such as ``ArgMax`` are not),
batched, runs on any device the module is moved to and is deterministic on the CPU.

Batches: a graph whose placeholders declare a batch size of 1 (MoveNet and EfficientPose hard-code batch
index 0 in their post-processing) still accepts a batch of ``B`` inputs: the graph is run once per sample and
the outputs, which must then have a leading dimension of 1, are concatenated.

Only the ops in :data:`SUPPORTED_OPS` are implemented; reading a graph with any other op raises
:class:`UnsupportedOpError` naming the op and the node.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .._validate import check_tensor
from ..errors import InvalidArgumentError, MissingResourceError, ShapeError

__all__ = ["SUPPORTED_OPS", "GraphModel", "UnsupportedOpError", "decode_weights", "read_graph_model"]


class UnsupportedOpError(InvalidArgumentError):
    """A graph uses a TensorFlow op (or an op attribute) that :mod:`privkit.encoders.tfjs` does not implement."""


# ----------------------------------------------------------------------------------------------------------------
# weights
# ----------------------------------------------------------------------------------------------------------------
_PLAIN_DTYPES: dict[str, str] = {"float32": "<f4", "int32": "<i4", "bool": "|u1"}
_QUANT_DTYPES: dict[str, str] = {"float16": "<f2", "uint8": "|u1", "uint16": "<u2"}


def decode_weights(specs: Sequence[Mapping[str, Any]], buffer: bytes) -> dict[str, torch.Tensor]:
    """Decode one weight group of a TF.js weights manifest, as ``tf.io.decodeWeights`` does.

    Args:
        specs: the group's ``weights`` list (``name``, ``shape``, ``dtype`` and optional ``quantization``).
        buffer: the concatenated bytes of the group's shard files.

    Returns:
        ``{name: tensor}``: float32, int32 or bool CPU tensors of the given shapes.

    Raises:
        InvalidArgumentError: an unknown dtype or quantisation, a quantisation without ``scale``/``min``, or a
            buffer whose length does not match the specifications.
    """
    out: dict[str, torch.Tensor] = {}
    offset = 0
    for spec in specs:
        name = spec.get("name")
        dtype = spec.get("dtype")
        shape = [int(s) for s in spec.get("shape", [])]
        if not isinstance(name, str) or dtype not in _PLAIN_DTYPES:
            raise InvalidArgumentError(f"weight {name!r}: dtype must be one of {sorted(_PLAIN_DTYPES)}, got {dtype!r}")
        count = math.prod(shape)
        quant = spec.get("quantization")
        if quant is not None:
            qdtype = quant.get("dtype")
            if qdtype not in _QUANT_DTYPES:
                raise InvalidArgumentError(
                    f"weight {name!r}: quantization dtype must be one of {sorted(_QUANT_DTYPES)}, got {qdtype!r}"
                )
            if qdtype == "float16" and dtype != "float32":
                raise InvalidArgumentError(f"weight {name!r}: float16 quantization needs dtype float32, got {dtype}")
            if qdtype != "float16" and ("scale" not in quant or "min" not in quant):
                raise InvalidArgumentError(f"weight {name!r}: {qdtype} quantization needs 'scale' and 'min'")
            if dtype == "bool":
                raise InvalidArgumentError(f"weight {name!r}: bool weights cannot be quantized")
            np_dtype = np.dtype(_QUANT_DTYPES[qdtype])
        else:
            np_dtype = np.dtype(_PLAIN_DTYPES[dtype])
        nbytes = count * np_dtype.itemsize
        if offset + nbytes > len(buffer):
            raise InvalidArgumentError(
                f"weight {name!r} needs bytes {offset}..{offset + nbytes} but the weight files hold only "
                f"{len(buffer)} bytes (truncated or mismatched .bin file)"
            )
        raw = np.frombuffer(buffer, dtype=np_dtype, count=count, offset=offset)
        offset += nbytes
        if quant is None:
            arr = raw.astype(np_dtype.newbyteorder("=")) if dtype != "bool" else raw != 0
        elif quant["dtype"] == "float16":
            arr = raw.astype(np.float32)  # exact: every float16 is a float32
        else:
            # JS evaluates q * scale + min in double precision and stores it in a Float32Array / Int32Array (for
            # int32 rounded with JavaScript's Math.round: halves round up, towards +inf)
            vals = raw.astype(np.float64) * float(quant["scale"]) + float(quant["min"])
            arr = vals.astype(np.float32) if dtype == "float32" else np.floor(vals + 0.5).astype(np.int32)
        out[name] = torch.from_numpy(np.ascontiguousarray(arr).reshape(shape).copy())
    if offset != len(buffer):
        raise InvalidArgumentError(
            f"the weight specifications cover {offset} bytes but the weight files hold {len(buffer)} bytes "
            "(mismatched .bin file)"
        )
    return out


# ----------------------------------------------------------------------------------------------------------------
# attributes
# ----------------------------------------------------------------------------------------------------------------
_TF_DTYPES: dict[str, torch.dtype] = {
    "DT_FLOAT": torch.float32, "DT_INT32": torch.int32, "DT_INT64": torch.int64, "DT_BOOL": torch.bool,
    "DT_HALF": torch.float16, "DT_DOUBLE": torch.float64, "DT_UINT8": torch.uint8, "DT_INT8": torch.int8,
    "DT_INT16": torch.int16,
}


def _b64(s: str) -> str:
    return base64.b64decode(s).decode("utf-8")


@dataclass
class _Node:
    name: str
    op: str
    inputs: list[tuple[str, int]]
    attr: dict[str, Any] = field(default_factory=dict)

    # -- attribute readers ------------------------------------------------------------------------------------
    def _read(self, key: str, field: str, default: Any, convert: Callable[[Any], Any]) -> Any:
        """``convert(attr[key][field])``, or ``default`` when the attribute or that field is absent."""
        v = self.attr.get(key)
        return default if v is None or field not in v else convert(v[field])

    def s(self, key: str, default: str | None = None) -> str | None:
        return self._read(key, "s", default, _b64)

    def i(self, key: str, default: int | None = None) -> int | None:
        return self._read(key, "i", default, int)

    def f(self, key: str, default: float | None = None) -> float | None:
        return self._read(key, "f", default, float)

    def b(self, key: str, default: bool = False) -> bool:
        return self._read(key, "b", default, bool)

    def dtype(self, key: str, default: torch.dtype | None = None) -> torch.dtype | None:
        v = self.attr.get(key)
        if v is None or "type" not in v:
            return default
        if v["type"] not in _TF_DTYPES:
            raise UnsupportedOpError(f"node {self.name!r} ({self.op}): dtype {v['type']} is not supported")
        return _TF_DTYPES[v["type"]]

    def ints(self, key: str, default: list[int] | None = None) -> list[int] | None:
        return self._read(key, "list", default, lambda v: [int(x) for x in v.get("i", [])])

    def strs(self, key: str, default: list[str] | None = None) -> list[str] | None:
        return self._read(key, "list", default, lambda v: [_b64(x) for x in v.get("s", [])])

    def describe(self) -> str:
        return f"node {self.name!r} ({self.op})"


def _parse_input(ref: str) -> tuple[str, int] | None:
    """``"name"`` -> (name, 0); ``"name:2"`` -> (name, 2); control inputs ``"^name"`` -> None."""
    if ref.startswith("^"):
        return None
    name, sep, idx = ref.rpartition(":")
    return (name, int(idx)) if sep and idx.isdigit() else (ref, 0)


def _inline_const(node: _Node) -> torch.Tensor | None:
    """The value of a Const node written inside the graph (``attr.value.tensor``), or None."""
    v = node.attr.get("value", {}).get("tensor")
    if v is None:
        return None
    dtype = _TF_DTYPES.get(v.get("dtype", ""))
    if dtype is None:
        raise UnsupportedOpError(f"{node.describe()}: inline constant of dtype {v.get('dtype')!r} is not supported")
    shape = [int(d.get("size", 0)) for d in v.get("tensorShape", {}).get("dim", [])]
    count = math.prod(shape)
    if "tensorContent" in v:
        np_dtype = {torch.float32: "<f4", torch.int32: "<i4", torch.int64: "<i8", torch.bool: "|u1"}.get(dtype)
        if np_dtype is None:
            raise UnsupportedOpError(f"{node.describe()}: inline tensorContent of dtype {dtype} is not supported")
        arr = np.frombuffer(base64.b64decode(v["tensorContent"]), dtype=np_dtype).copy()
    else:
        fields = {torch.float32: "floatVal", torch.int32: "intVal", torch.int64: "int64Val", torch.bool: "boolVal"}
        vals = v.get(fields[dtype], []) if dtype in fields else []
        if not vals and count:
            raise UnsupportedOpError(f"{node.describe()}: cannot read the inline constant value")
        arr = np.asarray([float(x) if dtype == torch.float32 else int(x) for x in vals])
        if arr.size == 1 and count > 1:  # TF repeats the last value
            arr = np.repeat(arr, count)
    return torch.from_numpy(np.asarray(arr)).to(dtype).reshape(shape)


# ----------------------------------------------------------------------------------------------------------------
# op implementations: each takes (node, inputs) and returns a tensor or a list of tensors
# ----------------------------------------------------------------------------------------------------------------
def _ints(t: torch.Tensor) -> list[int]:
    """The values of an integer tensor (an op input: always a tensor), flattened."""
    return [int(v) for v in t.reshape(-1).tolist()]


def _int(t: torch.Tensor) -> int:
    vals = _ints(t)
    if len(vals) != 1:
        raise ShapeError(f"expected a scalar, got {len(vals)} values")
    return vals[0]


def _check_nhwc(node: _Node) -> None:
    fmt = node.s("data_format", "NHWC")
    if fmt != "NHWC":
        raise UnsupportedOpError(f"{node.describe()}: data_format {fmt!r} is not supported (only NHWC)")


def _spatial(node: _Node, key: str) -> tuple[int, int]:
    """The (H, W) entries of a 4-entry NHWC attribute such as ``strides``; (1, 1) when absent."""
    values = node.ints(key)
    if not values:
        return 1, 1
    if len(values) != 4 or values[0] != 1 or values[3] != 1:
        raise UnsupportedOpError(f"{node.describe()}: {key}={values} is not supported (batch/channel must be 1)")
    return values[1], values[2]


def _same_pads(size: int, k: int, s: int, d: int) -> tuple[int, int]:
    """TensorFlow's SAME padding of one spatial dimension: (before, after); after gets the extra pixel."""
    eff = (k - 1) * d + 1
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def _pads(node: _Node, h: int, w: int, kh: int, kw: int, s: tuple[int, int],
          d: tuple[int, int]) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) for the node's ``padding`` attribute."""
    padding = node.s("padding", "VALID")
    if padding == "VALID":
        return 0, 0, 0, 0
    if padding == "SAME":
        return (*_same_pads(h, kh, s[0], d[0]), *_same_pads(w, kw, s[1], d[1]))
    if padding == "EXPLICIT":
        p = node.ints("explicit_paddings", [])
        if len(p) != 8 or any(p[:2]) or any(p[6:]):
            raise UnsupportedOpError(f"{node.describe()}: explicit_paddings={p} is not supported")
        return p[2], p[3], p[4], p[5]
    raise UnsupportedOpError(f"{node.describe()}: padding {padding!r} is not supported")


def _op_conv(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    """TF (_Fused)Conv2D / (Fused)DepthwiseConv2dNative: NHWC input ``ins[0]``, TF-layout filter ``ins[1]``
    [kh, kw, in, out|multiplier], then the fused ops (:func:`_apply_fused`) with their extra inputs ``ins[2:]``."""
    x, w_tf = ins[0], ins[1]
    _check_nhwc(node)
    if x.ndim != 4 or w_tf.ndim != 4:
        raise ShapeError(
            f"{node.describe()}: expected a 4-D input and filter, got {tuple(x.shape)}, {tuple(w_tf.shape)}"
        )
    s, d = _spatial(node, "strides"), _spatial(node, "dilations")
    kh, kw, cin_w, cout_w = w_tf.shape
    cin = x.shape[3]
    if "Depthwise" in node.op:
        if cin != cin_w:
            raise ShapeError(f"{node.describe()}: input has {cin} channels, the depthwise filter {cin_w}")
        weight = w_tf.reshape(kh, kw, 1, cin_w * cout_w).permute(3, 2, 0, 1)
        groups = cin
    else:
        if cin % cin_w:
            raise ShapeError(f"{node.describe()}: input has {cin} channels, the filter {cin_w}")
        weight = w_tf.permute(3, 2, 0, 1)
        groups = cin // cin_w
    top, bottom, left, right = _pads(node, x.shape[1], x.shape[2], kh, kw, s, d)
    xc = x.permute(0, 3, 1, 2)
    if top == bottom and left == right:
        pad: tuple[int, int] = (top, left)
    else:
        xc = F.pad(xc, (left, right, top, bottom))
        pad = (0, 0)
    y = F.conv2d(xc, weight, None, stride=s, padding=pad, dilation=d, groups=groups).permute(0, 2, 3, 1)
    if node.op in ("_FusedConv2D", "FusedDepthwiseConv2dNative"):
        y = _apply_fused(node, y, ins[2:])
    return y


_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "Relu": torch.relu, "Relu6": lambda x: torch.clamp(x, 0.0, 6.0), "Elu": F.elu, "Sigmoid": torch.sigmoid,
    "Tanh": torch.tanh,
}


def _apply_fused(node: _Node, y: torch.Tensor, args: list[torch.Tensor]) -> torch.Tensor:
    """Apply a fused op list such as [BiasAdd, Relu6] with its ``num_args`` extra inputs."""
    fused = node.strs("fused_ops", [])
    num_args = node.i("num_args", len(args))
    if num_args != len(args):
        raise ShapeError(f"{node.describe()}: num_args={num_args} but {len(args)} extra inputs")
    rest = list(args)
    for k, op in enumerate(fused):
        if op == "BiasAdd" and k == 0:
            if not rest:
                raise ShapeError(f"{node.describe()}: BiasAdd without a bias input")
            y = y + rest.pop(0)
        elif op in _ACTIVATIONS:
            y = _ACTIVATIONS[op](y)
        elif op == "LeakyRelu":
            y = F.leaky_relu(y, node.f("leakyrelu_alpha", 0.2))
        elif op == "Prelu":
            if not rest:
                raise ShapeError(f"{node.describe()}: Prelu without an alpha input")
            alpha = rest.pop(0)
            y = torch.where(y < 0, alpha * y, y)
        else:
            raise UnsupportedOpError(f"{node.describe()}: fused op {op!r} (in {fused}) is not supported")
    return y


def _op_conv_transpose(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    """Conv2DBackpropInput(input_sizes, filter [kh, kw, out_c, in_c], out_backprop NHWC)."""
    _check_nhwc(node)
    sizes, w_tf, dy = _ints(ins[0]), ins[1], ins[2]
    if len(sizes) != 4 or dy.ndim != 4 or w_tf.ndim != 4:
        raise ShapeError(
            f"{node.describe()}: bad output_shape {sizes} / input {tuple(dy.shape)} / filter {tuple(w_tf.shape)}"
        )
    s, d = _spatial(node, "strides"), _spatial(node, "dilations")
    kh, kw, cout, cin = w_tf.shape
    if dy.shape[3] != cin or sizes[3] != cout:
        raise ShapeError(f"{node.describe()}: channels do not match the filter {tuple(w_tf.shape)}")
    h, w = sizes[1], sizes[2]
    top, _, left, _ = _pads(node, h, w, kh, kw, s, d)
    full = F.conv_transpose2d(dy.permute(0, 3, 1, 2), w_tf.permute(3, 2, 0, 1), None, stride=s, dilation=d)
    # full[i + pad_before] is the gradient of the forward convolution's input pixel i
    y = full[:, :, top : top + h, left : left + w]
    short_h, short_w = h - y.shape[2], w - y.shape[3]
    if short_h > 0 or short_w > 0:
        y = F.pad(y, (0, max(short_w, 0), 0, max(short_h, 0)))
    if sizes[0] != y.shape[0]:
        raise ShapeError(f"{node.describe()}: output_shape batch {sizes[0]} != input batch {y.shape[0]}")
    return y.permute(0, 2, 3, 1)


def _op_matmul(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    a, b = ins[0], ins[1]
    if node.b("transpose_a"):
        a = a.transpose(-1, -2)
    if node.b("transpose_b"):
        b = b.transpose(-1, -2)
    y = a @ b
    if node.op == "_FusedMatMul":
        y = _apply_fused(node, y, ins[2:])
    return y


def _op_reduce(fn: Callable[..., torch.Tensor]) -> Callable[[_Node, list[torch.Tensor]], torch.Tensor]:
    def op(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
        x = ins[0]
        axes = sorted({a % x.ndim for a in _ints(ins[1])}) if x.ndim else []
        return fn(x, dim=axes, keepdim=node.b("keep_dims")) if axes else x

    return op


def _op_pad(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    x = ins[0]
    p = _ints(ins[1])
    if len(p) != 2 * x.ndim:
        raise ShapeError(f"{node.describe()}: paddings {p} do not match a rank-{x.ndim} input")
    value = float(ins[2].reshape(-1)[0]) if len(ins) > 2 else 0.0
    flat = [p[2 * dim + j] for dim in reversed(range(x.ndim)) for j in (0, 1)]  # F.pad lists the last dim first
    return F.pad(x, flat, mode="constant", value=value)


def _op_squeeze(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    x = ins[0]
    dims = node.ints("squeeze_dims", []) or node.ints("axis", [])
    if not dims:
        return x.squeeze()
    dims = sorted({d % x.ndim for d in dims}, reverse=True)
    for d in dims:
        if x.shape[d] != 1:
            raise ShapeError(f"{node.describe()}: cannot squeeze dimension {d} of size {x.shape[d]}")
        x = x.squeeze(d)
    return x


def _op_unpack(node: _Node, ins: list[torch.Tensor]) -> list[torch.Tensor]:
    axis = node.i("axis", 0)
    num = node.i("num")
    parts = list(torch.unbind(ins[0], dim=axis))
    if num is not None and num != len(parts):
        raise ShapeError(f"{node.describe()}: num={num} but the axis has {len(parts)} entries")
    return parts


def _op_shape(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    dtype = node.dtype("out_type", torch.int32)
    return torch.tensor(list(ins[0].shape), dtype=dtype, device=ins[0].device)


def _op_strided_slice(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    x = ins[0]
    begin, end, strides = _ints(ins[1]), _ints(ins[2]), _ints(ins[3])
    n = len(begin)
    if not (len(end) == n == len(strides)):
        raise ShapeError(f"{node.describe()}: begin/end/strides lengths differ")
    bm, em = node.i("begin_mask", 0), node.i("end_mask", 0)
    elm, nam, sam = node.i("ellipsis_mask", 0), node.i("new_axis_mask", 0), node.i("shrink_axis_mask", 0)
    if bin(elm).count("1") > 1:
        raise UnsupportedOpError(f"{node.describe()}: more than one ellipsis")
    consumed = sum(1 for k in range(n) if not (elm >> k) & 1 and not (nam >> k) & 1)
    specs = list(range(n))
    if not elm:  # an implicit ellipsis at the end covers the remaining dimensions
        elm = 1 << n
        specs.append(n)
    if consumed > x.ndim:
        raise ShapeError(f"{node.describe()}: slicing {consumed} dimensions of a rank-{x.ndim} tensor")
    y, d, in_dim = x, 0, 0  # the output and input dimensions the next spec refers to
    for k in specs:
        if (elm >> k) & 1:
            span = x.ndim - consumed
            d += span
            in_dim += span
            continue
        if (nam >> k) & 1:
            y = y.unsqueeze(d)
            d += 1
            continue
        size = x.shape[in_dim]
        stride = strides[k]
        if stride == 0:
            raise InvalidArgumentError(f"{node.describe()}: stride 0")
        if (sam >> k) & 1:
            idx = 0 if (bm >> k) & 1 else begin[k]
            idx = idx + size if idx < 0 else idx
            if not 0 <= idx < size:
                raise ShapeError(f"{node.describe()}: index {begin[k]} out of range for size {size}")
            y = y.select(d, idx)
        else:
            b = None if (bm >> k) & 1 else begin[k]
            e = None if (em >> k) & 1 else end[k]
            start, stop, step = slice(b, e, stride).indices(size)
            if step == 1:
                y = y.narrow(d, start, max(stop - start, 0))
            else:
                y = y.index_select(d, torch.arange(start, stop, step, device=y.device))
            d += 1
        in_dim += 1
    return y


def _op_gather_nd(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    params, idx = ins[0], ins[1].long()
    k = idx.shape[-1]
    if k > params.ndim:
        raise ShapeError(f"{node.describe()}: index depth {k} > params rank {params.ndim}")
    lead = list(params.shape[:k])
    if idx.numel() and bool(((idx < 0) | (idx >= torch.tensor(lead, device=idx.device))).any()):
        raise InvalidArgumentError(f"{node.describe()}: GatherNd index out of range for params shape {lead}")
    strides = [math.prod(lead[j + 1 :]) for j in range(k)]
    lin = (idx * torch.tensor(strides, dtype=torch.long, device=idx.device)).sum(-1)
    flat = params.reshape([math.prod(lead)] + list(params.shape[k:]))
    return flat[lin]


def _op_argmax(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    dtype = node.dtype("output_type", torch.int64)
    return torch.argmax(ins[0], dim=_int(ins[1])).to(dtype)


def _op_floordiv(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    a, b = ins
    return torch.floor(a / b) if a.is_floating_point() else torch.div(a, b, rounding_mode="floor")


def _resize_index(out_size: int, in_size: int, align_corners: bool, half_pixel: bool, device) -> tuple:
    """TF's bilinear source coordinates: (lower index, upper index, fraction) per output pixel."""
    scale = (in_size - 1) / (out_size - 1) if align_corners and out_size > 1 else in_size / out_size
    o = torch.arange(out_size, dtype=torch.float64)
    src = (o + 0.5) * scale - 0.5 if half_pixel else o * scale
    lower_f = torch.floor(src)
    frac = (src - lower_f).to(torch.float32)
    lower = lower_f.clamp(min=0).to(torch.long).clamp(max=in_size - 1)
    upper = torch.ceil(src).clamp(max=in_size - 1).clamp(min=0).to(torch.long)
    return lower.to(device), upper.to(device), frac.to(device)


def _op_resize_bilinear(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    x = ins[0]
    oh, ow = _ints(ins[1])
    align, half = node.b("align_corners"), node.b("half_pixel_centers")
    if align and half:
        raise InvalidArgumentError(f"{node.describe()}: align_corners and half_pixel_centers cannot both be true")
    if not x.is_floating_point():
        x = x.to(torch.float32)
    y0, y1, fy = _resize_index(oh, x.shape[1], align, half, x.device)
    x0, x1, fx = _resize_index(ow, x.shape[2], align, half, x.device)
    top, bottom = x.index_select(1, y0), x.index_select(1, y1)
    fy, fx = fy.view(1, -1, 1, 1).to(x.dtype), fx.view(1, 1, -1, 1).to(x.dtype)
    # TF: top = tl + (tr - tl) * fx; bottom = bl + (br - bl) * fx; out = top + (bottom - top) * fy
    tl, tr = top.index_select(2, x0), top.index_select(2, x1)
    bl, br = bottom.index_select(2, x0), bottom.index_select(2, x1)
    t, b = tl + (tr - tl) * fx, bl + (br - bl) * fx
    return t + (b - t) * fy


_OpFn = Callable[[_Node, list[torch.Tensor]], "torch.Tensor | list[torch.Tensor]"]


def _binary(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> _OpFn:
    return lambda node, ins: fn(ins[0], ins[1])


def _unary(fn: Callable[[torch.Tensor], torch.Tensor]) -> _OpFn:
    return lambda node, ins: fn(ins[0])


#: Element-wise ops of one input and of two inputs.
_UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    **_ACTIVATIONS, "Sqrt": torch.sqrt, "Rsqrt": torch.rsqrt, "Square": lambda x: x * x, "Exp": torch.exp,
    "Neg": torch.neg, "Softmax": lambda x: torch.softmax(x, dim=-1),
}
_BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "Add": torch.add, "AddV2": torch.add, "Sub": torch.sub, "Mul": torch.mul, "RealDiv": torch.div,
    "Minimum": torch.minimum, "Maximum": torch.maximum, "SquaredDifference": lambda a, b: (a - b) * (a - b),
}


def _op_bias_add(node: _Node, ins: list[torch.Tensor]) -> torch.Tensor:
    _check_nhwc(node)
    return ins[0] + ins[1]


_OPS: dict[str, _OpFn] = {
    **{op: _unary(fn) for op, fn in _UNARY.items()},
    **{op: _binary(fn) for op, fn in _BINARY.items()},
    **dict.fromkeys(("Conv2D", "_FusedConv2D", "DepthwiseConv2dNative", "FusedDepthwiseConv2dNative"), _op_conv),
    **dict.fromkeys(("MatMul", "_FusedMatMul"), _op_matmul),
    **dict.fromkeys(("Pad", "PadV2"), _op_pad),
    "Identity": lambda node, ins: ins[0],
    "Conv2DBackpropInput": _op_conv_transpose,
    "BiasAdd": _op_bias_add,
    "FloorDiv": _op_floordiv,
    "LeakyRelu": lambda node, ins: F.leaky_relu(ins[0], node.f("alpha", 0.2)),
    "Mean": _op_reduce(torch.mean),
    "Sum": _op_reduce(torch.sum),
    "Max": _op_reduce(torch.amax),
    "Reshape": lambda node, ins: torch.reshape(ins[0], _ints(ins[1])),
    "Squeeze": _op_squeeze,
    "ExpandDims": lambda node, ins: ins[0].unsqueeze(_int(ins[1])),
    "Cast": lambda node, ins: ins[0].to(node.dtype("DstT", torch.float32)),  # returns ins[0] itself if no change
    "Unpack": _op_unpack,
    "Pack": lambda node, ins: torch.stack([t.to(ins[0].dtype) for t in ins], dim=node.i("axis", 0)),
    "ConcatV2": lambda node, ins: torch.cat(ins[:-1], dim=_int(ins[-1])),
    "Shape": _op_shape,
    "StridedSlice": _op_strided_slice,
    "Transpose": lambda node, ins: ins[0].permute(_ints(ins[1])),
    "GatherNd": _op_gather_nd,
    "ArgMax": _op_argmax,
    "ResizeBilinear": _op_resize_bilinear,
}

#: The TensorFlow ops :class:`GraphModel` executes (plus ``Const`` and ``Placeholder``).
SUPPORTED_OPS: frozenset[str] = frozenset(_OPS) | {"Const", "Placeholder"}


# ----------------------------------------------------------------------------------------------------------------
# the module
# ----------------------------------------------------------------------------------------------------------------
def _store_key(name: str) -> str:
    """A parameter/buffer name for a TF node name ('.' is not allowed in module attribute names)."""
    return name.replace("%", "%25").replace(".", "%2E") or "%"


class _Store(nn.Module):
    """A flat container of parameters or buffers keyed by (escaped) TensorFlow node names."""


@dataclass
class _Plan:
    steps: list[_Node]
    release: list[list[str]]  # names whose values can be dropped after each step


class GraphModel(nn.Module):
    """A TF.js graph model as a PyTorch module (build it with :func:`read_graph_model`).

    Attributes:
        weights: float constants as ``nn.Parameter`` s (TensorFlow layout; the names are the node names, with
            ``.`` written ``%2E``).
        int_constants: integer and boolean constants as buffers.
        input_names: the placeholder names.
        output_names: the signature's output names (without the ``:0`` suffix), in the file's order.
    """

    def __init__(self, nodes: Sequence[Mapping[str, Any]], constants: Mapping[str, torch.Tensor], *,
                 signature: Mapping[str, Any] | None = None, source: str = "<memory>") -> None:
        super().__init__()
        self.source = source
        self._nodes: dict[str, _Node] = {}
        for raw in nodes:
            name, op = raw.get("name"), raw.get("op")
            if not isinstance(name, str) or not isinstance(op, str):
                raise InvalidArgumentError(f"{source}: every node needs a string 'name' and 'op', got {raw!r:.200}")
            if name in self._nodes:
                raise InvalidArgumentError(f"{source}: duplicate node name {name!r}")
            ins = [p for p in (_parse_input(r) for r in raw.get("input", []) or []) if p is not None]
            self._nodes[name] = _Node(name, op, ins, dict(raw.get("attr", {}) or {}))
        unsupported: dict[str, str] = {}
        for node in self._nodes.values():
            if node.op not in SUPPORTED_OPS:
                unsupported.setdefault(node.op, node.name)
            for src, _ in node.inputs:
                if src not in self._nodes:
                    raise InvalidArgumentError(f"{source}: {node.describe()} reads the unknown node {src!r}")
        if unsupported:
            listing = "; ".join(f"op {op!r} (first at node {n!r})" for op, n in sorted(unsupported.items()))
            raise UnsupportedOpError(
                f"{source}: the graph uses TensorFlow ops privkit.encoders.tfjs does not implement: {listing}. "
                f"Supported ops: {', '.join(sorted(SUPPORTED_OPS))}"
            )
        self.weights = _Store()
        self.int_constants = _Store()
        self._const: dict[str, tuple[str, str]] = {}
        used: set[str] = set()
        probe = _Store()
        for node in self._nodes.values():
            if node.op != "Const":
                continue
            value = constants[node.name] if node.name in constants else _inline_const(node)
            if value is None:
                raise InvalidArgumentError(f"{source}: no weight in the manifest for constant node {node.name!r}")
            key = _store_key(node.name)
            if key in used or hasattr(probe, key):  # e.g. a node called "training" or "forward"
                key = "%" + key
            used.add(key)
            if value.is_floating_point():
                self.weights.register_parameter(key, nn.Parameter(value.to(torch.float32).clone()))
                self._const[node.name] = ("weights", key)
            else:
                self.int_constants.register_buffer(key, value.clone())
                self._const[node.name] = ("int_constants", key)
        self.input_names: list[str] = [n.name for n in self._nodes.values() if n.op == "Placeholder"]
        self._input_shapes: dict[str, list[int] | None] = {}
        self._input_dtypes: dict[str, torch.dtype] = {}
        for name in self.input_names:
            node = self._nodes[name]
            shp = node.attr.get("shape", {}).get("shape")
            known = shp is not None and not shp.get("unknownRank")
            self._input_shapes[name] = [int(d.get("size", -1)) for d in shp.get("dim", [])] if known else None
            self._input_dtypes[name] = node.dtype("dtype", torch.float32) or torch.float32
        outs = [] if not signature else list((signature.get("outputs") or {}).values())
        self.output_names: list[str] = []
        for o in outs:
            ref = _parse_input(str(o.get("name", "")))
            if ref is not None and ref[0] in self._nodes:
                self.output_names.append(ref[0] if ref[1] == 0 else f"{ref[0]}:{ref[1]}")
        self._plans: dict[tuple[str, ...], _Plan] = {}

    # -- introspection -----------------------------------------------------------------------------------------
    @property
    def ops(self) -> dict[str, int]:
        """How many nodes use each op."""
        return dict(Counter(n.op for n in self._nodes.values()))

    def node_names(self) -> list[str]:
        return list(self._nodes)

    def input_shape(self, name: str) -> list[int] | None:
        """The placeholder's declared shape (-1 for unknown dimensions), or None if unknown."""
        return self._input_shapes[name]

    def constant(self, name: str) -> torch.Tensor:
        """The parameter or buffer holding constant node ``name``."""
        where, key = self._const[name]
        return getattr(getattr(self, where), key)

    def extra_repr(self) -> str:
        return (f"source={self.source!r}, nodes={len(self._nodes)}, inputs={self.input_names}, "
                f"outputs={self.output_names}")

    # -- execution ----------------------------------------------------------------------------------------------
    def _plan(self, targets: tuple[str, ...]) -> _Plan:
        plan = self._plans.get(targets)
        if plan is not None:
            return plan
        order: list[_Node] = []
        state: dict[str, int] = {}  # 1 = on the stack, 2 = done
        for target in targets:
            stack: list[tuple[str, int]] = [(target, 0)]
            while stack:
                name, k = stack.pop()
                if k == 0:
                    if state.get(name) == 2:
                        continue
                    if state.get(name) == 1:
                        raise InvalidArgumentError(f"{self.source}: the graph has a cycle through node {name!r}")
                    state[name] = 1
                node = self._nodes[name]
                if k < len(node.inputs):
                    stack.append((name, k + 1))
                    stack.append((node.inputs[k][0], 0))  # popped next: skipped if done, a cycle if on the stack
                else:
                    state[name] = 2
                    order.append(node)
        last_use: dict[str, int] = {}
        for i, node in enumerate(order):
            for src, _ in node.inputs:
                last_use[src] = i
        keep = set(targets)
        release: list[list[str]] = [[] for _ in order]
        for name, i in last_use.items():
            if name not in keep:
                release[i].append(name)
        self._plans[targets] = _Plan(order, release)
        return self._plans[targets]

    def _resolve_output(self, ref: str) -> tuple[str, int]:
        if not isinstance(ref, str):
            raise InvalidArgumentError(f"output names must be strings, got {ref!r}")
        parsed = _parse_input(ref)
        if parsed is None or parsed[0] not in self._nodes:
            hint = ", ".join(self.output_names) or "none declared"
            raise InvalidArgumentError(
                f"{self.source}: no node named {ref!r}; outputs may be any node name (signature outputs: {hint})"
            )
        return parsed

    def _feeds(self, inputs: torch.Tensor | Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        if isinstance(inputs, torch.Tensor):
            if len(self.input_names) != 1:
                raise InvalidArgumentError(
                    f"{self.source}: the graph has {len(self.input_names)} placeholders {self.input_names}; "
                    "pass a dict {name: tensor}"
                )
            inputs = {self.input_names[0]: inputs}
        if not isinstance(inputs, Mapping):
            raise InvalidArgumentError(f"inputs must be a tensor or a dict of tensors, got {type(inputs).__name__}")
        feeds: dict[str, torch.Tensor] = {}
        for name, x in inputs.items():
            name = name[:-2] if isinstance(name, str) and name.endswith(":0") else name
            if name not in self._input_dtypes:
                raise InvalidArgumentError(
                    f"{self.source}: {name!r} is not a placeholder; placeholders: {self.input_names}"
                )
            check_tensor(f"inputs[{name!r}]", x)
            want = self._input_shapes[name]
            # the batch dimension is free when declared as 1: such graphs run a batch sample by sample (forward)
            if want is not None and (
                len(want) != x.ndim
                or any(w not in (-1, s) for w, s in zip(want[1:], x.shape[1:]))
                or (want and want[0] not in (-1, 1, x.shape[0]))
            ):
                raise ShapeError(
                    f"{self.source}: input {name!r} must have shape {['*' if w < 0 else w for w in want]}, "
                    f"got {list(x.shape)}"
                )
            dtype = self._input_dtypes[name]
            if x.dtype != dtype and not (x.is_floating_point() and not dtype.is_floating_point):
                # a float tensor fed to an integer placeholder stays float (so gradients can flow through graphs
                # that cast their image input to float first); anything else is converted to the declared dtype
                x = x.to(dtype)
            feeds[name] = x.to(self._device_of())
        return feeds

    def _device_of(self) -> torch.device:
        first = next(itertools.chain(self.weights.parameters(), self.int_constants.buffers()), None)
        return torch.device("cpu") if first is None else first.device

    def _run(self, feeds: Mapping[str, torch.Tensor], refs: list[tuple[str, int]]) -> list[torch.Tensor]:
        targets = tuple(dict.fromkeys(name for name, _ in refs))
        env: dict[str, list[torch.Tensor]] = {}
        plan = self._plan(targets)
        for node, release in zip(plan.steps, plan.release):
            if node.op == "Const":
                env[node.name] = [self.constant(node.name)]
            elif node.op == "Placeholder":
                if node.name not in feeds:
                    raise InvalidArgumentError(f"{self.source}: placeholder {node.name!r} needs a value")
                env[node.name] = [feeds[node.name]]
            else:
                args = [env[src][k] for src, k in node.inputs]
                try:
                    out = _OPS[node.op](node, args)
                except torch.OutOfMemoryError:
                    raise
                except (IndexError, RuntimeError) as err:
                    shapes = [tuple(a.shape) for a in args]
                    raise ShapeError(f"{self.source}: {node.describe()} failed on inputs {shapes}: {err}") from err
                env[node.name] = out if isinstance(out, list) else [out]
            for name in release:
                env.pop(name, None)
        results = []
        for name, k in refs:
            vals = env[name]
            if k >= len(vals):
                raise InvalidArgumentError(f"{self.source}: node {name!r} has {len(vals)} outputs, asked for {k}")
            results.append(vals[k])
        return results

    def forward(
        self, inputs: torch.Tensor | Mapping[str, torch.Tensor], outputs: str | Sequence[str] | None = None
    ) -> torch.Tensor | list[torch.Tensor] | dict[str, torch.Tensor]:
        """Execute the graph.

        Args:
            inputs: the value of the single placeholder, or ``{placeholder name: tensor}``. Shapes must match
                the placeholders' declared shapes (``-1`` matches anything; a declared batch of 1 accepts any
                batch, run sample by sample). A float tensor fed to an integer placeholder is used unchanged
                (not rounded), so gradients reach it through the graph's own ``Cast``.
            outputs: a node name (``"node"`` or ``"node:k"`` for its k-th output) -> one tensor; a sequence of
                names -> a list in that order; ``None`` -> ``{name: tensor}`` for the signature's outputs.

        Returns:
            The requested tensors.

        Raises:
            InvalidArgumentError: unknown placeholder or node names, missing placeholder values.
            ShapeError: an input of the wrong shape, or an op failing on the shapes it receives.
        """
        if outputs is None:
            if not self.output_names:
                raise InvalidArgumentError(f"{self.source}: the model declares no outputs; pass outputs=[...]")
            names = list(self.output_names)
        elif isinstance(outputs, str):
            names = [outputs]
        else:
            names = list(outputs)
            if not names:
                raise InvalidArgumentError("outputs must name at least one node")
        refs = [self._resolve_output(n) for n in names]
        feeds = self._feeds(inputs)
        batches = {x.shape[0] for x in feeds.values() if x.ndim}
        # a batch fed to a placeholder that declares a batch of 1 runs sample by sample
        if any((self._input_shapes[n] or [None])[0] == 1 and x.ndim and x.shape[0] != 1 for n, x in feeds.items()):
            if len(batches) != 1 or 0 in batches:
                raise ShapeError(f"{self.source}: inputs must share one non-zero batch size, got {sorted(batches)}")
            per_sample = [self._run({n: x[i : i + 1] for n, x in feeds.items()}, refs) for i in range(batches.pop())]
            results = []
            for j, name in enumerate(names):
                parts = [r[j] for r in per_sample]
                if any(p.ndim == 0 or p.shape[0] != 1 for p in parts):
                    raise ShapeError(
                        f"{self.source}: output {name!r} has no leading batch dimension of 1 "
                        f"(shape {tuple(parts[0].shape)}), so a batch cannot be run sample by sample"
                    )
                results.append(torch.cat(parts))
        else:
            results = self._run(feeds, refs)
        if outputs is None:
            return dict(zip(names, results))
        if isinstance(outputs, str):
            return results[0]
        return results


def read_graph_model(json_path: str | Path) -> GraphModel:
    """Read a TF.js graph model (``model.json`` and its weight shards) into a :class:`GraphModel`.

    Args:
        json_path: the ``.json`` file; its ``weightsManifest`` paths are resolved relative to its folder.

    Returns:
        The module on the CPU (float32 parameters, ``requires_grad=True``).

    Raises:
        MissingResourceError: the JSON file or a weight shard does not exist.
        InvalidArgumentError: the file is not a TF.js graph model, or its weights do not match the manifest.
        UnsupportedOpError: the graph uses an op this module does not implement.
    """
    path = Path(json_path)
    if not path.is_file():
        raise MissingResourceError(
            f"TF.js graph model {path.name}", expected_at=str(path),
            how_to_get="Pass the path of an existing model.json file.",
        )
    try:
        model = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InvalidArgumentError(f"{path} is not a JSON file: {err}") from None
    if not isinstance(model, dict) or not isinstance(model.get("modelTopology"), dict):
        raise InvalidArgumentError(f"{path} is not a TF.js graph model (no 'modelTopology' object)")
    topology = model["modelTopology"]
    if "node" not in topology:
        raise InvalidArgumentError(
            f"{path} is not a TF.js *graph* model (its modelTopology has no 'node' list; a layers model?)"
        )
    constants: dict[str, torch.Tensor] = {}
    for group in model.get("weightsManifest", []) or []:
        chunks = []
        for rel in group.get("paths", []):
            shard = path.parent / rel
            if not shard.is_file():
                raise MissingResourceError(
                    f"weight shard {rel} of {path.name}", expected_at=str(shard),
                    how_to_get="Keep the .bin files listed in the model's weightsManifest next to the JSON file.",
                )
            chunks.append(shard.read_bytes())
        constants.update(decode_weights(group.get("weights", []), b"".join(chunks)))
    return GraphModel(topology["node"], constants, signature=model.get("signature"), source=path.name)
