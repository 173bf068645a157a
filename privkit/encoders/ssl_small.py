"""``ssl-small``: a small self-supervised convolutional encoder trained by privkit itself.

It plays the role of a general-purpose image encoder (CLIP / DINOv2 in the papers) at a scale that trains
on two CPU cores in minutes and ships with the repository. The network is a plain 9-layer convolutional
net with GroupNorm, trained with SimCLR's NT-Xent objective on unlabelled images only (random crops of
scikit-image's bundled photos, scikit-image's ``lfw_subset`` as unlabelled images, and scikit-learn's
digits rendered as RGB images; no identity labels, see ``tools/train_ssl_small.py``). The
projection head used during training is dropped: the encoder outputs the 256-d globally pooled features
of the backbone, L2-normalised.

Input resolution: 64 x 64 RGB. :meth:`SSLSmallEncoder._embed_batch` resizes any input (bilinear with
anti-aliasing) to 64 x 64 and standardises it with fixed constants (``(x - 0.5) / 0.25``).

The committed weights live in ``privkit/assets/ssl_small.safetensors`` with metadata in
``privkit/assets/ssl_small.json`` (training command, seed, steps, data, loss summary, probe results and the
sha256 of the weights file, checked at load time).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from .._files import file_digest
from .._validate import check_int
from ..device import resolve_device
from ..errors import InvalidArgumentError, MissingResourceError
from ..transforms import resize
from .base import Encoder

__all__ = ["SSL_SMALL_INPUT_SIZE", "SSL_SMALL_WEIGHTS", "SSL_SMALL_METADATA", "SSLSmallConfig", "SSLSmallBackbone",
           "SSLSmallNet", "SSLSmallEncoder", "init_ssl_small_", "build_ssl_small_net", "load_ssl_small",
           "random_ssl_small", "sha256_file"]

#: (H, W) the network works at.
SSL_SMALL_INPUT_SIZE: tuple[int, int] = (64, 64)
_ASSETS = Path(__file__).resolve().parent.parent / "assets"
#: Default location of the committed weights and their metadata.
SSL_SMALL_WEIGHTS: Path = _ASSETS / "ssl_small.safetensors"
SSL_SMALL_METADATA: Path = _ASSETS / "ssl_small.json"

#: Fixed input standardisation: ``(x - mean) / std`` on [0, 1] images.
_INPUT_MEAN = 0.5
_INPUT_STD = 0.25


@dataclass(frozen=True)
class SSLSmallConfig:
    """Architecture of ``ssl-small``.

    Attributes:
        widths: channels of the stem and of the four stride-2 stages.
        groups: GroupNorm groups (each width must be divisible by it).
        proj_hidden: hidden width of the training-time projection head.
        proj_dim: output width of the projection head (the NT-Xent space).
    """

    widths: tuple[int, int, int, int, int] = (16, 32, 64, 128, 256)
    groups: int = 8
    proj_hidden: int = 512
    proj_dim: int = 128

    def __post_init__(self) -> None:
        if len(self.widths) != 5:
            raise InvalidArgumentError(f"widths must have 5 entries (stem + 4 stages), got {self.widths!r}")
        check_int("groups", self.groups, minimum=1)
        for w in self.widths:
            check_int("widths[i]", w, minimum=1)
            if w % self.groups:
                raise InvalidArgumentError(
                    f"every entry of widths must be divisible by groups={self.groups}, got {self.widths!r}"
                )
        check_int("proj_hidden", self.proj_hidden, minimum=1)
        check_int("proj_dim", self.proj_dim, minimum=1)

    @property
    def dim(self) -> int:
        """Width of the representation (the encoder's output)."""
        return self.widths[-1]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["widths"] = list(self.widths)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "SSLSmallConfig":
        return cls(widths=tuple(int(w) for w in d["widths"]), groups=int(d["groups"]),  # type: ignore[arg-type]
                   proj_hidden=int(d["proj_hidden"]), proj_dim=int(d["proj_dim"]))


def _conv_gn_relu(c_in: int, c_out: int, stride: int, groups: int) -> list[nn.Module]:
    conv = nn.Conv2d(c_in, c_out, kernel_size=3, stride=stride, padding=1, bias=False)
    return [conv, nn.GroupNorm(groups, c_out), nn.ReLU(inplace=True)]


class SSLSmallBackbone(nn.Module):
    """The representation network: 64x64x3 -> 256 (global average pool after 4 stride-2 stages).

    Layout: a 3x3 stem at full resolution, then four stages each made of a stride-2 3x3 convolution and
    a stride-1 3x3 convolution (spatial sizes 32, 16, 8, 4), every convolution followed by GroupNorm and
    ReLU, then global average pooling.
    """

    def __init__(self, config: SSLSmallConfig = SSLSmallConfig()) -> None:
        super().__init__()
        self.config = config
        w, g = config.widths, config.groups
        layers: list[nn.Module] = _conv_gn_relu(3, w[0], 1, g)
        for c_in, c_out in zip(w[:-1], w[1:]):
            layers += _conv_gn_relu(c_in, c_out, 2, g)
            layers += _conv_gn_relu(c_out, c_out, 1, g)
        self.features = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Standardised images (B, 3, 64, 64) -> (B, dim) pooled features (not normalised)."""
        return self.features(x).mean(dim=(2, 3))


class SSLSmallNet(nn.Module):
    """Backbone plus the projection head used only for training (Linear-BatchNorm-ReLU-Linear)."""

    def __init__(self, config: SSLSmallConfig = SSLSmallConfig()) -> None:
        super().__init__()
        self.config = config
        self.backbone = SSLSmallBackbone(config)
        self.head = nn.Sequential(
            nn.Linear(config.dim, config.proj_hidden, bias=False),
            nn.BatchNorm1d(config.proj_hidden),
            nn.ReLU(inplace=True),
            nn.Linear(config.proj_hidden, config.proj_dim),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Standardised images -> projections (B, proj_dim) (not normalised)."""
        return self.head(self.backbone(x))


@torch.no_grad()
def init_ssl_small_(module: nn.Module, *, generator: torch.Generator) -> nn.Module:
    """Initialise every parameter of ``module`` in place from ``generator`` (no global RNG use).

    Convolutions get Kaiming-normal (fan-out, ReLU) weights; linear layers get PyTorch's default
    Kaiming-uniform weights and uniform biases; normalisation layers get weight 1 and bias 0 (and fresh
    running statistics).
    """
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu", generator=generator)
            if m.bias is not None:
                m.bias.zero_()
        elif isinstance(m, nn.Linear):
            nn.init.kaiming_uniform_(m.weight, a=5**0.5, generator=generator)
            if m.bias is not None:
                bound = 1.0 / m.in_features**0.5
                nn.init.uniform_(m.bias, -bound, bound, generator=generator)
        elif isinstance(m, (nn.GroupNorm, nn.BatchNorm1d)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
            if isinstance(m, nn.BatchNorm1d):
                m.reset_running_stats()
    return module


def build_ssl_small_net(*, config: SSLSmallConfig = SSLSmallConfig(), seed: int = 0) -> SSLSmallNet:
    """A freshly initialised :class:`SSLSmallNet` on the CPU, deterministic in ``seed``.

    The modules are built on the meta device and then initialised from a private generator, so building
    one does not consume or change PyTorch's global random state.
    """
    seed = check_int("seed", seed, minimum=0)
    with torch.device("meta"):
        net = SSLSmallNet(config)
    net = net.to_empty(device="cpu")
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return init_ssl_small_(net, generator=gen)  # type: ignore[return-value]


def standardize_images(images: torch.Tensor) -> torch.Tensor:
    """Map [0, 1] images to the network's input scale ``(x - 0.5) / 0.25``."""
    return (images - _INPUT_MEAN) / _INPUT_STD


class SSLSmallEncoder(Encoder):
    """The frozen ``ssl-small`` encoder (projection head dropped).

    Args:
        backbone: a trained (or, for baselines, randomly initialised) :class:`SSLSmallBackbone`.
        metadata: provenance dictionary (kept on :attr:`metadata`).
        device: where to run.
    """

    name = "ssl-small"
    dim = SSLSmallConfig().dim
    input_size = SSL_SMALL_INPUT_SIZE
    kind = "general"
    description = (
        "Small conv net (9 conv layers, GroupNorm, 1.2M parameters) trained by privkit with SimCLR (NT-Xent) "
        "on unlabelled 64x64 crops of scikit-image photos, lfw_subset images and rendered digits; "
        "a stand-in for a general-purpose self-supervised encoder such as DINOv2 or CLIP."
    )

    def __init__(self, backbone: SSLSmallBackbone, *, metadata: dict | None = None,
                 device: str | torch.device = "cpu") -> None:
        super().__init__()
        if not isinstance(backbone, SSLSmallBackbone):
            raise InvalidArgumentError(f"backbone must be an SSLSmallBackbone, got {type(backbone).__name__}")
        self.backbone = backbone
        self.dim = backbone.config.dim
        self.metadata = dict(metadata or {})
        self.requires_grad_(False)
        self.eval()
        self.to(resolve_device(device))

    def train(self, mode: bool = True) -> "SSLSmallEncoder":  # type: ignore[override]
        """The encoder is frozen: it always stays in evaluation mode."""
        return super().train(False)

    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        if tuple(images.shape[-2:]) != self.input_size:
            images = resize(images, self.input_size)
        return self.backbone(standardize_images(images.clamp(0.0, 1.0)))


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    return file_digest(Path(path)).hexdigest()


def load_ssl_small(*, device: str | torch.device = "auto", weights: str | Path | None = None,
                   metadata: str | Path | None = None, verify: bool = True) -> SSLSmallEncoder:
    """Load the committed ``ssl-small`` weights.

    Args:
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` or a ``torch.device``.
        weights: safetensors file (default: ``privkit/assets/ssl_small.safetensors``).
        metadata: its JSON metadata (default: the file next to ``weights`` with a ``.json`` suffix).
        verify: check the weights file against the sha256 recorded in the metadata.

    Returns:
        A frozen :class:`SSLSmallEncoder` whose :meth:`~Encoder.embed` returns (N, 256) unit-norm rows.

    Raises:
        MissingResourceError: the weights or the metadata file is absent.
        InvalidArgumentError: the file does not match the sha256 in its metadata, or its tensors do not match
            the architecture recorded in the metadata.
    """
    from safetensors.torch import load_file

    weights = Path(weights) if weights is not None else SSL_SMALL_WEIGHTS
    metadata = Path(metadata) if metadata is not None else weights.with_suffix(".json")
    how = "Regenerate it with `python tools/train_ssl_small.py --out privkit/assets/ssl_small.safetensors`."
    if not weights.is_file():
        raise MissingResourceError("The ssl-small weights", expected_at=str(weights), how_to_get=how)
    if not metadata.is_file():
        raise MissingResourceError("The ssl-small metadata", expected_at=str(metadata), how_to_get=how)
    meta = json.loads(metadata.read_text())
    if verify:
        digest = sha256_file(weights)
        if digest != meta.get("sha256"):
            raise InvalidArgumentError(
                f"weights file {weights} has sha256 {digest}, but its metadata {metadata} records "
                f"{meta.get('sha256')!r}; the file is corrupt or does not belong to this metadata"
            )
    config = SSLSmallConfig.from_dict(meta["architecture"])
    with torch.device("meta"):
        backbone = SSLSmallBackbone(config)
    state = load_file(str(weights), device="cpu")
    expected = {k: tuple(v.shape) for k, v in backbone.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items()}
    if expected != got:
        raise InvalidArgumentError(
            f"weights file {weights} does not match the ssl-small architecture {config}: "
            f"missing {sorted(set(expected) - set(got))}, unexpected {sorted(set(got) - set(expected))}, "
            f"shape mismatches {sorted(k for k in set(expected) & set(got) if expected[k] != got[k])}"
        )
    backbone.load_state_dict(state, assign=True)
    return SSLSmallEncoder(backbone, metadata=meta, device=resolve_device(device))


def random_ssl_small(*, seed: int = 0, device: str | torch.device = "auto",
                     config: SSLSmallConfig = SSLSmallConfig()) -> SSLSmallEncoder:
    """The ``ssl-small`` architecture with random (untrained) weights: the baseline the training must beat."""
    net = build_ssl_small_net(config=config, seed=seed)
    meta = {"weights": "random-init", "seed": seed}
    enc = SSLSmallEncoder(net.backbone, metadata=meta, device=resolve_device(device))
    enc.name = "ssl-small-random"
    return enc

