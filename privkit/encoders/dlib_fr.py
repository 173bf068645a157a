"""dlib's 128-D ResNet face descriptor (``dlib-resnet-fr``), the biometric reference encoder.

The models come from the ``face-recognition-models`` package (dlib's public CC0 model files). That package
imports ``pkg_resources`` on import, which recent setuptools no longer ships, so its ``models/`` folder is
located with :func:`importlib.util.find_spec` and the package itself is never imported.

Pipeline per image (dlib runs on the CPU, on uint8 RGB arrays):

1. The image is converted to uint8 RGB. If its shorter side is below :data:`MIN_SIDE` (150 px) it is upscaled
   with bicubic interpolation so that the shorter side is 150 px: dlib's HOG detector does not find faces much
   smaller than 80 px, and scikit-image's LFW crops are 25×25. On the bundled LFW subset this detects 92 of
   the 100 faces (and none of the 100 non-face crops).
2. The face rectangle is the given box (scaled to the upscaled image) or, without boxes, the most
   confident face (highest detector score) found by dlib's HOG frontal detector, which upsamples the
   image once when its shorter side is below 400 px. When no face is found the whole image is used as
   the rectangle and :attr:`~privkit.encoders.base.Encoder.failures_to_enrol` is incremented.
3. dlib's 5-point shape predictor places landmarks in that rectangle, :func:`dlib.get_face_chip` cuts the
   aligned 150×150 chip (padding 0.25, dlib's descriptor convention) and the ResNet computes the 128-D
   descriptor for the whole batch of chips at once.

:class:`DlibFaceAligner` (steps 1–2 plus landmarks) is shared with the ``age-gender`` encoder.

dlib holds Python's global interpreter lock and runs on one core. A batch of at least
:data:`PARALLEL_MIN_IMAGES` images is therefore split into contiguous parts, one per worker
(:func:`dlib_workers`: the ``PRIVKIT_DLIB_WORKERS`` environment variable, else the available cores up to 4). The
calling process computes the first part and helper processes the others. The helpers are started once, by
``fork`` (``spawn`` would re-run an unguarded calling script in every helper); they run only dlib and numpy, never
torch or CUDA, which do not survive a fork. The split does not change the result: every step works on one image
at a time, and dlib computes each chip's descriptor on its own (bit-identical whatever the split on the machine
privkit is developed on; the tests allow another CPU's rounding). If the helpers cannot run, the batch is computed
in the calling process, with a warning.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..errors import InvalidArgumentError, MissingResourceError
from .base import Encoder, package_file

__all__ = ["MIN_SIDE", "PARALLEL_MIN_IMAGES", "check_boxes", "dlib_workers", "DlibFaceAligner",
           "DlibFaceRecognitionEncoder", "face_recognition_models_dir", "load_dlib_fr", "to_uint8_hwc"]

#: Images whose shorter side is below this many pixels are upscaled to it before detection.
MIN_SIDE = 150
#: Below this shorter side (after upscaling) the HOG detector upsamples the image once.
UPSAMPLE_BELOW = 400
#: dlib's descriptor chip size and padding.
CHIP_SIZE = 150
CHIP_PADDING = 0.25

#: Batches with at least this many images are split across :func:`dlib_workers` processes.
PARALLEL_MIN_IMAGES = 16
#: Upper bound of the default worker count.
MAX_DEFAULT_WORKERS = 4

_MODEL_FILES = {
    "shape_predictor": "shape_predictor_5_face_landmarks.dat",
    "descriptor": "dlib_face_recognition_resnet_model_v1.dat",
}


def face_recognition_models_dir() -> Path | None:
    """The ``models/`` folder of the installed ``face-recognition-models`` package, or ``None``.

    The package is located without being imported (its ``__init__`` needs ``pkg_resources``).
    """
    return package_file("face_recognition_models", "models")


def _require_model_file(key: str) -> Path:
    return dlib_model_file(_MODEL_FILES[key])


def dlib_model_file(filename: str) -> Path:
    """Path of one of dlib's model files shipped by ``face-recognition-models``; a clear error when absent."""
    folder = face_recognition_models_dir()
    if folder is None or not (folder / filename).is_file():
        raise MissingResourceError(
            f"dlib model file {filename}",
            expected_at=str((folder or Path("<site-packages>/face_recognition_models/models")) / filename),
            how_to_get="Install it with `pip install face-recognition-models==0.3.0 dlib-bin` "
            "(the package ships dlib's CC0 model files).",
        )
    return folder / filename


def check_boxes(boxes: torch.Tensor, *, name: str = "boxes") -> None:
    """Boxes must be xyxy with x1 > x0 and y1 > y0 (the base class already checked shape and finiteness)."""
    if boxes.numel() and not bool(((boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])).all()):
        raise InvalidArgumentError(f"{name} must be xyxy pixel boxes with x1 > x0 and y1 > y0 for every row")


def to_uint8_hwc(images: torch.Tensor) -> np.ndarray:
    """(B, 3, H, W) floats in [0, 1] -> (B, H, W, 3) C-contiguous uint8 RGB numpy array (rounded)."""
    x = (images.detach().to("cpu", torch.float32) * 255.0).round_().clamp_(0, 255).to(torch.uint8)
    return np.ascontiguousarray(x.permute(0, 2, 3, 1).numpy())


def _dlib_inputs(images: torch.Tensor, boxes: torch.Tensor | None) -> tuple[np.ndarray, np.ndarray | None]:
    """What the dlib pipelines take: :func:`to_uint8_hwc` images and the checked boxes as float64 (or ``None``)."""
    if boxes is not None:
        check_boxes(boxes)
    return to_uint8_hwc(images), None if boxes is None else boxes.detach().to("cpu", torch.float64).numpy()


@dataclass(frozen=True)
class AlignedFace:
    """One image after upscaling, with its face rectangle and 5-point landmarks.

    Attributes:
        image: the (possibly upscaled) uint8 RGB image the landmarks refer to.
        shape: dlib ``full_object_detection`` with 5 parts.
        found: ``False`` when no face was detected and the whole image was used.
    """

    image: np.ndarray
    shape: object
    found: bool


class DlibFaceAligner:
    """dlib HOG face detection plus 5-point landmarks, with upscaling of small images.

    Args:
        predictor_path: a dlib 5-point ``shape_predictor`` file.
        min_side: images with a shorter side below this are upscaled (bicubic) to it first.
    """

    def __init__(self, predictor_path: str | Path, *, min_side: int = MIN_SIDE) -> None:
        import dlib

        self._dlib = dlib
        self.detector = dlib.get_frontal_face_detector()
        self.predictor = dlib.shape_predictor(str(predictor_path))
        self.min_side = int(min_side)

    def _upscale(self, image: np.ndarray) -> tuple[np.ndarray, float]:
        h, w = image.shape[:2]
        short = min(h, w)
        if short >= self.min_side:
            return image, 1.0
        import cv2

        s = self.min_side / short
        new_w, new_h = max(1, round(w * s)), max(1, round(h * s))
        up = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_CUBIC)
        # cv2 may scale x and y by slightly different factors after rounding; use the mean
        return np.ascontiguousarray(up), (new_w / w + new_h / h) / 2.0

    def align(self, image: np.ndarray, box: np.ndarray | None = None) -> AlignedFace:
        """Locate the face in one uint8 RGB (H, W, 3) image.

        Args:
            image: uint8 RGB array.
            box: optional xyxy face box in the pixel coordinates of ``image``.

        Returns:
            The upscaled image, its landmarks, and whether a face was found (always ``True`` with a box).
        """
        dlib = self._dlib
        img, s = self._upscale(image)
        h, w = img.shape[:2]
        found = True
        if box is not None:
            x0, y0, x1, y1 = (float(v) * s for v in box)
            left, top = int(round(x0)), int(round(y0))
            right, bottom = max(left + 1, int(round(x1)) - 1), max(top + 1, int(round(y1)) - 1)
            rect = dlib.rectangle(left, top, right, bottom)
        else:
            upsample = 1 if min(h, w) < UPSAMPLE_BELOW else 0
            dets, scores, _ = self.detector.run(img, upsample, 0.0)
            if len(dets):
                rect = dets[int(np.argmax(scores))]
            else:
                rect = dlib.rectangle(0, 0, w - 1, h - 1)
                found = False
        return AlignedFace(image=img, shape=self.predictor(img, rect), found=found)

    def chip(self, face: AlignedFace, *, size: int, padding: float) -> np.ndarray:
        """The aligned (size, size, 3) uint8 chip of ``face``."""
        return np.ascontiguousarray(self._dlib.get_face_chip(face.image, face.shape, size=size, padding=padding))


class DlibFaceRecognitionEncoder(Encoder):
    """dlib's ResNet-34-style face descriptor (128-D), trained for face identity.

    This is privkit's biometric reference encoder (the role ArcFace plays in the papers). It runs on the
    CPU through dlib; outputs are returned on :attr:`device`. Use :func:`load_dlib_fr` or
    ``privkit.encoders.load_encoder("dlib-resnet-fr")``.
    """

    name = "dlib-resnet-fr"
    dim = 128
    input_size = (CHIP_SIZE, CHIP_SIZE)
    kind = "face-recognition"
    description = "dlib ResNet 128-D face descriptor (5-point alignment; HOG detection or given boxes)"

    def __init__(self, *, predictor_path: str | Path, descriptor_path: str | Path) -> None:
        super().__init__()
        import dlib

        self._paths = (str(predictor_path), str(descriptor_path))
        self.aligner = DlibFaceAligner(predictor_path)
        self._net = dlib.face_recognition_model_v1(str(descriptor_path))

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        arrays, box_np = _dlib_inputs(images, boxes)
        out, failures = _describe_parallel(self.aligner, self._net, self._paths, arrays, box_np)
        self.failures_to_enrol += failures
        return torch.from_numpy(out).to(self.device)


# ------------------------------------------------------------------------------------------ parallel descriptors
def dlib_workers() -> int:
    """Processes that share a batch's dlib work: ``PRIVKIT_DLIB_WORKERS`` when set (1 turns the helpers off), else
    the cores this process may use, at most :data:`MAX_DEFAULT_WORKERS` (1 where processes cannot be forked).

    Raises:
        InvalidArgumentError: ``PRIVKIT_DLIB_WORKERS`` is not an integer >= 1.
    """
    raw = os.environ.get("PRIVKIT_DLIB_WORKERS")
    if raw is not None:
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if n < 1:
            raise InvalidArgumentError(f"PRIVKIT_DLIB_WORKERS must be an integer >= 1, got {raw!r}")
        return n
    import multiprocessing

    if "fork" not in multiprocessing.get_all_start_methods():  # e.g. Windows: no helpers by default
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_WORKERS))


def _describe(aligner: DlibFaceAligner, net: object, arrays: np.ndarray,
              boxes: np.ndarray | None) -> tuple[np.ndarray, int]:
    """Descriptors ``(n, 128)`` float32 of uint8 RGB ``arrays`` and the number of images without a found face."""
    chips, failures = [], 0
    for i, img in enumerate(arrays):
        face = aligner.align(img, None if boxes is None else boxes[i])
        failures += not face.found
        chips.append(aligner.chip(face, size=CHIP_SIZE, padding=CHIP_PADDING))
    desc = net.compute_face_descriptor(chips)  # type: ignore[attr-defined]
    out = np.asarray([np.asarray(d, dtype=np.float32) for d in desc], dtype=np.float32).reshape(len(chips), -1)
    return out, failures


_WORKER: tuple[DlibFaceAligner, object] | None = None  # the models, inside a helper process
_POOLS: dict[tuple[str, str, int], ProcessPoolExecutor] = {}
_POOLS_BROKEN = False


def _init_worker(predictor_path: str, descriptor_path: str) -> None:
    global _WORKER
    import cv2
    import dlib

    cv2.setNumThreads(1)  # one small resize per image; the workers already use the cores
    _WORKER = (DlibFaceAligner(predictor_path), dlib.face_recognition_model_v1(descriptor_path))


def _describe_in_worker(arrays: np.ndarray, boxes: np.ndarray | None) -> tuple[np.ndarray, int]:
    # _WORKER is set: the pool runs _init_worker in every helper before any task (a failed one breaks the pool)
    return _describe(*_WORKER, arrays, boxes)


def _pool(paths: tuple[str, str], helpers: int) -> ProcessPoolExecutor:
    key = (*paths, helpers)
    if key not in _POOLS:
        import multiprocessing

        _POOLS[key] = ProcessPoolExecutor(max_workers=helpers, mp_context=multiprocessing.get_context("fork"),
                                          initializer=_init_worker, initargs=paths)
    return _POOLS[key]


def _describe_parallel(aligner: DlibFaceAligner, net: object, paths: tuple[str, str], arrays: np.ndarray,
                       boxes: np.ndarray | None) -> tuple[np.ndarray, int]:
    """:func:`_describe` with the batch split into contiguous parts over :func:`dlib_workers` processes."""
    global _POOLS_BROKEN
    workers = min(dlib_workers(), len(arrays) // max(1, PARALLEL_MIN_IMAGES // 2))
    if workers < 2 or len(arrays) < PARALLEL_MIN_IMAGES or _POOLS_BROKEN:
        return _describe(aligner, net, arrays, boxes)
    cuts = np.linspace(0, len(arrays), workers + 1).round().astype(int)
    parts = [(arrays[a:b], None if boxes is None else boxes[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    try:
        pool = _pool(paths, workers - 1)
        futures = [pool.submit(_describe_in_worker, *part) for part in parts[1:]]
    except Exception as err:  # noqa: BLE001 - no helper processes here: compute in this process
        _POOLS_BROKEN = True
        warnings.warn(f"dlib helper processes could not start ({err!r}); computing in this process", stacklevel=3)
        return _describe(aligner, net, arrays, boxes)
    results = [_describe(aligner, net, *parts[0])]  # this process computes the first part meanwhile
    try:
        results += [f.result() for f in futures]
    except Exception as err:  # noqa: BLE001 - a helper died (e.g. out of memory): redo its parts here
        _POOLS_BROKEN = True
        warnings.warn(f"a dlib helper process failed ({err!r}); computing in this process", stacklevel=3)
        results += [_describe(aligner, net, *part) for part in parts[len(results):]]
    return np.concatenate([r[0] for r in results]), sum(r[1] for r in results)


def load_dlib_fr(*, device: torch.device | str = "cpu") -> DlibFaceRecognitionEncoder:
    """Build ``dlib-resnet-fr`` from the installed ``face-recognition-models`` files.

    Raises:
        MissingResourceError: the package or one of its model files is absent.
    """
    enc = DlibFaceRecognitionEncoder(predictor_path=_require_model_file("shape_predictor"),
                                     descriptor_path=_require_model_file("descriptor"))
    return enc.to(device)
