"""Paper-scale general-purpose encoders: ``clip-vit-b16``, ``dinov2-vits14``, ``dinov2-vitb14``, ``sscd``.

Their weights cannot be downloaded by privkit (nothing is fetched at run time). A reader who has them puts the
files in one of these places, searched in this order:

1. the ``weights=`` argument (a file, or a folder holding the files below);
2. ``<data_root>/weights/<name>/`` when ``data_root`` is given;
3. ``build/cache/weights/<name>/`` of the privkit checkout (see :func:`weights_cache_root`).

=================  ===============================================================================================
name               files (official source)
=================  ===============================================================================================
clip-vit-b16       OpenAI CLIP ViT-B/16 in open_clip format: ``open_clip_config.json`` + ``open_clip_model.safetensors``
                   (or ``open_clip_pytorch_model.bin``) from the Hugging Face repository
                   ``timm/vit_base_patch16_clip_224.openai``. A bare state-dict file is also accepted; it is then
                   built as open_clip's ``ViT-B-16`` with QuickGELU (the OpenAI weights' activation).
dinov2-vits14      ``dinov2_vits14_pretrain.pth`` from https://dl.fbaipublicfiles.com/dinov2/dinov2_vits14/ and a
                   checkout of https://github.com/facebookresearch/dinov2 (its ``hubconf.py`` builds the network)
                   in ``<folder>/dinov2/`` or in the shared ``weights/dinov2/`` folder.
dinov2-vitb14      ``dinov2_vitb14_pretrain.pth`` from https://dl.fbaipublicfiles.com/dinov2/dinov2_vitb14/, same
                   checkout as above.
sscd               ``sscd_disc_mixup.torchscript.pt`` from https://dl.fbaipublicfiles.com/sscd-copy-detection/
                   (facebookresearch/sscd-copy-detection), a TorchScript module.
=================  ===============================================================================================

State dicts are read with ``torch.load(..., weights_only=True)`` or safetensors, never unpickled. Two code
paths run code that the reader supplied: the DINOv2 checkout's ``hubconf.py`` (executed by ``torch.hub.load``
with ``source="local"``) and the SSCD TorchScript archive (run by TorchScript's interpreter, not pickle). Only
use checkouts and files from the official sources.

Preprocessing is done in torch on the encoder's device, from [0, 1] RGB: CLIP uses the model's own
``preprocess_cfg`` (OpenAI mean/std, bicubic resize of the shorter side to 224, centre crop); DINOv2 resizes
the shorter side to 256 (bicubic) and centre-crops 224 with ImageNet mean/std; SSCD resizes the shorter side to
288 (bilinear, no crop; the ``sscd-copy-detection`` README's setting) with ImageNet mean/std. Resampling uses
antialiasing and clamps to [0, 1] as PIL would. Face boxes are ignored: these encoders embed whole images, as
in the ISP paper.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn import functional as F

from ..errors import InvalidArgumentError, MissingResourceError, WeightFileError
from .base import Encoder

__all__ = [
    "PAPER_SCALE_SPECS",
    "GeneralImageEncoder",
    "WeightSpec",
    "find_weights",
    "load_clip_vit_b16",
    "load_dinov2",
    "load_sscd",
    "preprocess_images",
    "weights_cache_root",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _read_errors() -> tuple[type[BaseException], ...]:
    """What reading a corrupt or foreign weight file raises (torch.load, safetensors, TorchScript, open_clip)."""
    import pickle

    errors: tuple[type[BaseException], ...] = (RuntimeError, ValueError, OSError, EOFError, KeyError,
                                               pickle.UnpicklingError)
    try:
        from safetensors import SafetensorError
    except ImportError:  # pragma: no cover - safetensors comes with open_clip and timm
        return errors
    return (*errors, SafetensorError)


def _read_state_dict(path: Path, expected: str) -> dict[str, torch.Tensor]:
    """``torch.load(path, weights_only=True)`` as a dict of tensors, or a :class:`WeightFileError`."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except _read_errors() as err:
        raise WeightFileError(f"{path}: cannot read {expected} ({type(err).__name__}: {err})") from None
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise WeightFileError(f"{path}: expected {expected}, got a {type(state).__name__} that is not a dict of "
                              "tensors")
    return state


@dataclass(frozen=True)
class WeightSpec:
    """What one paper-scale encoder needs on disk.

    Attributes:
        name: registry name, also the folder name under ``weights/``.
        files: accepted file names, in order of preference (any one suffices).
        how_to_get: human instructions naming the official source.
        needs_dinov2_repo: whether a facebookresearch/dinov2 checkout is needed too.
        config_dir: whether a folder holding ``open_clip_config.json`` counts as the weights.
    """

    name: str
    files: tuple[str, ...]
    how_to_get: str
    needs_dinov2_repo: bool = False
    config_dir: bool = False


def _dinov2_spec(arch: str) -> WeightSpec:
    """The two DINOv2 sizes differ only by ``arch`` (``"vits14"`` or ``"vitb14"``)."""
    return WeightSpec(
        f"dinov2-{arch}", (f"dinov2_{arch}_pretrain.pth",),
        f"Download dinov2_{arch}_pretrain.pth from https://dl.fbaipublicfiles.com/dinov2/dinov2_{arch}/"
        f"dinov2_{arch}_pretrain.pth and clone https://github.com/facebookresearch/dinov2 into the folder "
        "'dinov2' next to it (or into weights/dinov2/ to share it between DINOv2 sizes).",
        needs_dinov2_repo=True,
    )


PAPER_SCALE_SPECS: dict[str, WeightSpec] = {
    "clip-vit-b16": WeightSpec(
        "clip-vit-b16", ("open_clip_model.safetensors", "open_clip_pytorch_model.bin"),
        "Download open_clip_config.json and open_clip_model.safetensors from the Hugging Face repository "
        "timm/vit_base_patch16_clip_224.openai (OpenAI CLIP ViT-B/16 in open_clip format), e.g. "
        "`huggingface-cli download timm/vit_base_patch16_clip_224.openai open_clip_config.json "
        "open_clip_model.safetensors --local-dir <folder>`.",
        config_dir=True,
    ),
    "dinov2-vits14": _dinov2_spec("vits14"),
    "dinov2-vitb14": _dinov2_spec("vitb14"),
    "sscd": WeightSpec(
        "sscd", ("sscd_disc_mixup.torchscript.pt",),
        "Download sscd_disc_mixup.torchscript.pt from https://dl.fbaipublicfiles.com/sscd-copy-detection/"
        "sscd_disc_mixup.torchscript.pt (facebookresearch/sscd-copy-detection).",
    ),
}


def weights_cache_root() -> Path:
    """``build/cache`` of the privkit checkout (the folder holding ``pyproject.toml`` above the package).

    For an installed (non-checkout) privkit this is ``build/cache`` under the current working directory.
    """
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").is_file():
        return repo / "build" / "cache"
    return Path.cwd() / "build" / "cache"


def _candidate_dirs(name: str, data_root: str | Path | None) -> list[Path]:
    roots = [weights_cache_root()] if data_root is None else [Path(data_root), weights_cache_root()]
    return [r / "weights" / name for r in roots]


def _file_in(folder: Path, spec: WeightSpec) -> Path | None:
    if spec.config_dir and (folder / "open_clip_config.json").is_file():
        if any((folder / f).is_file() for f in spec.files):
            return folder
        return None
    for f in spec.files:
        if (folder / f).is_file():
            return folder / f
    return None


def _dinov2_repo(weights_file: Path) -> Path | None:
    for cand in (weights_file.parent / "dinov2", weights_file.parent.parent / "dinov2"):
        if (cand / "hubconf.py").is_file():
            return cand
    return None


def _missing(spec: WeightSpec, where: list[Path]) -> MissingResourceError:
    shown = " or ".join(str(p) for p in where)
    return MissingResourceError(
        f"the weight file of encoder {spec.name!r} ({' or '.join(spec.files)})",
        expected_at=shown,
        how_to_get=spec.how_to_get + " Or pass weights=<path> to load_encoder.",
    )


def find_weights(name: str, *, weights: str | Path | None = None, data_root: str | Path | None = None) -> Path:
    """Locate the weight file (or open_clip folder) of a paper-scale encoder.

    Args:
        name: one of :data:`PAPER_SCALE_SPECS`.
        weights: explicit file or folder; when given, only it is searched.
        data_root: the paper-scale data root; ``<data_root>/weights/<name>/`` is searched first.

    Returns:
        The weight file, or for CLIP possibly a folder with ``open_clip_config.json`` and weights.

    Raises:
        MissingResourceError: nothing usable was found (the message says what to download and where to put it);
            for DINOv2 also when the facebookresearch/dinov2 checkout is missing.
    """
    spec = PAPER_SCALE_SPECS[name]
    if weights is not None:
        w = Path(weights).expanduser()
        found = w if w.is_file() else _file_in(w, spec)  # None for a path that is neither a file nor a folder
        if found is None:
            raise _missing(spec, [w])
    else:
        dirs = _candidate_dirs(name, data_root)
        found = next((f for d in dirs if (f := _file_in(d, spec)) is not None), None)
        if found is None:
            raise _missing(spec, dirs)
    if spec.needs_dinov2_repo and _dinov2_repo(found) is None:
        raise MissingResourceError(
            "a checkout of facebookresearch/dinov2 (with hubconf.py)",
            expected_at=f"{found.parent / 'dinov2'} or {found.parent.parent / 'dinov2'}",
            how_to_get="Clone it with `git clone https://github.com/facebookresearch/dinov2` into one of "
            "those folders.",
        )
    return found


def preprocess_images(
    images: torch.Tensor,
    *,
    size: int,
    crop: int | None,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    interpolation: str = "bicubic",
    resize_mode: str = "shortest",
) -> torch.Tensor:
    """Resize (and crop) a (B, 3, H, W) [0, 1] batch and normalise it with ``mean``/``std``.

    Args:
        images: float batch in [0, 1].
        size: target of the resize (shorter side for ``"shortest"``, longer side for ``"longest"``, both for
            ``"squash"``).
        crop: centre-crop side after a ``"shortest"`` resize, or ``None`` for no crop.
        mean: per-channel mean.
        std: per-channel standard deviation.
        interpolation: ``"bicubic"`` or ``"bilinear"`` (antialiased).
        resize_mode: ``"shortest"``, ``"longest"`` (then zero-padded to a square) or ``"squash"``.

    Returns:
        The normalised batch.
    """
    if interpolation not in ("bicubic", "bilinear"):
        interpolation = "bicubic"
    _, _, h, w = images.shape
    if resize_mode == "squash":
        out_hw = (size, size)
    else:
        s = size / (max(h, w) if resize_mode == "longest" else min(h, w))
        out_hw = (max(1, round(h * s)), max(1, round(w * s)))
    x = images
    if out_hw != (h, w):
        x = F.interpolate(x, size=out_hw, mode=interpolation, align_corners=False, antialias=True).clamp_(0, 1)
    if resize_mode == "longest":
        ph, pw = size - x.shape[2], size - x.shape[3]
        x = F.pad(x, (pw // 2, pw - pw // 2, ph // 2, ph - ph // 2))
    elif crop is not None:
        top = max(0, (x.shape[2] - crop) // 2)
        left = max(0, (x.shape[3] - crop) // 2)
        x = x[:, :, top : top + crop, left : left + crop]
    m = torch.tensor(mean, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    sd = torch.tensor(std, dtype=x.dtype, device=x.device).view(1, -1, 1, 1)
    return (x - m) / sd


class GeneralImageEncoder(Encoder):
    """A frozen torch image model behind the :class:`Encoder` interface (whole images, boxes ignored).

    Args:
        name: registry name.
        model: the network; ``forward_fn(model, x)`` must return (B, dim) features.
        dim: feature width.
        preprocess: keyword arguments of :func:`preprocess_images`.
        forward_fn: how to get features from the model (default: ``model(x)``).
        description: one line for listings.
    """

    kind = "general"

    def __init__(
        self,
        *,
        name: str,
        model: torch.nn.Module,
        dim: int,
        preprocess: dict,
        forward_fn: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor] | None = None,
        description: str = "",
    ) -> None:
        super().__init__()
        self.name = name
        self.model = model
        self.dim = int(dim)
        self.preprocess = dict(preprocess)
        crop = self.preprocess.get("crop")
        side = int(crop if crop is not None else self.preprocess["size"])
        self.input_size = (side, side)
        self._forward = forward_fn or (lambda m, x: m(x))
        self.description = description

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        return self._forward(self.model, preprocess_images(images, **self.preprocess)).flatten(1)  # (B, dim)


def _freeze(model: torch.nn.Module, device: torch.device | str) -> torch.nn.Module:
    model = model.to(device).eval()
    for p in model.parameters():  # not model.requires_grad_, which TorchScript modules do not support
        p.requires_grad_(False)
    return model


def _probe_dim(model: torch.nn.Module, side: int, device: torch.device | str) -> int:
    with torch.no_grad():
        out = model(torch.zeros(1, 3, side, side, device=device))
    return int(out.reshape(1, -1).shape[1])


def load_clip_vit_b16(*, weights: str | Path | None = None, data_root: str | Path | None = None,
                      device: torch.device | str = "cpu", quick_gelu: bool = True) -> GeneralImageEncoder:
    """CLIP ViT-B/16 image tower via open_clip (``clip-vit-b16``, 512-D).

    Args:
        weights: a folder with ``open_clip_config.json`` + weights (Hugging Face layout; the config decides the
            architecture and preprocessing) or a bare open_clip state-dict file (built as ``ViT-B-16``).
        data_root: paper-scale data root (see the module docstring for the search order).
        device: where the model runs.
        quick_gelu: for a bare state-dict file, build with QuickGELU (True for OpenAI weights, False for
            LAION/DataComp ones). Ignored for a folder with a config.

    Raises:
        MissingResourceError: no weights found.
        WeightFileError: the weight file cannot be read or does not fit the architecture (the message names the
            file and what was expected; also a ``RuntimeError``).
    """
    path = find_weights("clip-vit-b16", weights=weights, data_root=data_root)
    import open_clip
    if path.is_dir():
        ckpt = next(path / f for f in PAPER_SCALE_SPECS["clip-vit-b16"].files if (path / f).is_file())
        expected = f"an open_clip CLIP state dict of the model_cfg in {path / 'open_clip_config.json'}"
    else:
        ckpt, expected = path, "an open_clip state dict of ViT-B-16 (OpenAI CLIP ViT-B/16)"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if path.is_dir():
                model = open_clip.create_model(f"local-dir:{path}", device="cpu", require_pretrained=True,
                                               weights_only=True)
            else:
                model = open_clip.create_model("ViT-B-16", pretrained=str(path), device="cpu",
                                               force_quick_gelu=bool(quick_gelu), require_pretrained=True,
                                               weights_only=True)
    except _read_errors() as err:
        raise WeightFileError(f"{ckpt}: cannot load it as {expected} ({type(err).__name__}: {err})") from None
    visual = _freeze(model.visual, device)
    cfg = dict(getattr(visual, "preprocess_cfg", {}) or {})
    size = cfg.get("size", visual.image_size)
    size = int(size[0] if isinstance(size, (tuple, list)) else size)
    resize_mode = cfg.get("resize_mode", "shortest")
    preprocess = dict(
        size=size,
        crop=size if resize_mode == "shortest" else None,
        mean=tuple(cfg.get("mean", open_clip.OPENAI_DATASET_MEAN)),
        std=tuple(cfg.get("std", open_clip.OPENAI_DATASET_STD)),
        interpolation=cfg.get("interpolation", "bicubic"),
        resize_mode=resize_mode,
    )
    dim = int(getattr(visual, "output_dim", 0)) or _probe_dim(visual, size, device)
    return GeneralImageEncoder(name="clip-vit-b16", model=visual, dim=dim, preprocess=preprocess,
                               description=f"open_clip image tower from {path.name}").to(device)


def load_dinov2(arch: str, *, weights: str | Path | None = None, data_root: str | Path | None = None,
                device: torch.device | str = "cpu") -> GeneralImageEncoder:
    """DINOv2 ViT-S/14 or ViT-B/14 (``dinov2-vits14`` 384-D, ``dinov2-vitb14`` 768-D), class token output.

    The network is built by the local facebookresearch/dinov2 checkout's ``hubconf.py`` with
    ``torch.hub.load(repo, "dinov2_<arch>", source="local", pretrained=False)`` and the official weights are
    loaded with ``torch.load(..., weights_only=True)`` (strict).

    Args:
        arch: ``"vits14"`` or ``"vitb14"``.
        weights: the ``.pth`` file or its folder.
        data_root: paper-scale data root.
        device: where the model runs.

    Raises:
        MissingResourceError: weights or checkout missing.
        WeightFileError: the ``.pth`` file cannot be read (checked before the checkout's code runs) or does not
            fit the checkout's network (the message names the file; also a ``RuntimeError``).
    """
    if arch not in ("vits14", "vitb14"):
        raise InvalidArgumentError(f"arch must be 'vits14' or 'vitb14', got {arch!r}")
    name = f"dinov2-{arch}"
    path = find_weights(name, weights=weights, data_root=data_root)
    repo = _dinov2_repo(path)
    # read the file before the checkout's code runs, so that a bad file is reported as such
    state = _read_state_dict(path, f"a DINOv2 {arch} state dict (dinov2_{arch}_pretrain.pth, a torch.save'd dict of "
                                   "tensors)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = torch.hub.load(str(repo), f"dinov2_{arch}", source="local", pretrained=False)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise WeightFileError(
            f"{path}: does not fit the dinov2_{arch} network built by {repo / 'hubconf.py'} (strict loading): {err}"
        ) from None
    model = _freeze(model, device)
    preprocess = dict(size=256, crop=224, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bicubic")
    dim = int(getattr(model, "embed_dim", 0)) or _probe_dim(model, 224, device)
    return GeneralImageEncoder(name=name, model=model, dim=dim, preprocess=preprocess,
                               description=f"DINOv2 {arch} class token from {path.name}").to(device)


def load_sscd(*, weights: str | Path | None = None, data_root: str | Path | None = None,
              device: torch.device | str = "cpu") -> GeneralImageEncoder:
    """SSCD copy-detection descriptor (``sscd``, 512-D for ``sscd_disc_mixup``) from its TorchScript file.

    Args:
        weights: the ``.torchscript.pt`` file or its folder.
        data_root: paper-scale data root.
        device: where the model runs.

    Raises:
        MissingResourceError: the file is missing.
        InvalidArgumentError: the file is not a TorchScript archive, or its module does not map a (1, 3, 288, 288)
            batch to (1, D) descriptors (the message names the file; also a ``RuntimeError``).
    """
    path = find_weights("sscd", weights=weights, data_root=data_root)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            model = torch.jit.load(str(path), map_location="cpu")
    except _read_errors() as err:
        raise WeightFileError(
            f"{path}: cannot read it as a TorchScript module (torch.jit.save; SSCD publishes "
            f"sscd_disc_mixup.torchscript.pt) ({type(err).__name__}: {err})"
        ) from None
    model = _freeze(model, device)
    preprocess = dict(size=288, crop=None, mean=IMAGENET_MEAN, std=IMAGENET_STD, interpolation="bilinear")
    contract = "SSCD's contract: (B, 3, H, W) ImageNet-normalised images -> (B, D) descriptors"
    try:
        with torch.no_grad():
            out = model(torch.zeros(1, 3, 288, 288, device=device))
    except RuntimeError as err:
        raise WeightFileError(f"{path}: the module fails on a (1, 3, 288, 288) batch; expected {contract} "
                              f"({err})") from None
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != 1:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise WeightFileError(f"{path}: a (1, 3, 288, 288) batch gave {got}; expected {contract}")
    return GeneralImageEncoder(name="sscd", model=model, dim=int(out.shape[1]), preprocess=preprocess,
                               description=f"SSCD descriptor from {path.name}").to(device)
