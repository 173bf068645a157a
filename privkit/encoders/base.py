"""The frozen-encoder interface every privkit encoder implements."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Literal

import torch

from .._validate import check_image_batch, check_int, check_tensor
from ..errors import InsufficientDataError, InvalidArgumentError, ShapeError

EncoderKind = Literal["face-recognition", "face-nonidentity", "general", "hash", "pixels"]
ENCODER_KINDS: tuple[str, ...] = ("face-recognition", "face-nonidentity", "general", "hash", "pixels")


class Encoder(torch.nn.Module):
    """A frozen image encoder.

    Subclasses set ``name``, ``dim``, ``input_size`` (H, W the backend works at), ``kind`` and implement
    :meth:`_embed_batch`, which receives a validated float batch in [0, 1] of shape (B, 3, H, W) on
    :attr:`device` (and the matching (B, 4) xyxy boxes or ``None``) and returns (B, dim) features. The base
    class does validation, batching, L2 normalisation, float32 conversion and failure-to-enrol counting.

    Attributes:
        failures_to_enrol: number of images seen by :meth:`embed` (cumulative since the last
            :meth:`reset_failures`) for which a face encoder found no face and fell back to the whole image.
    """

    name: str = "encoder"
    dim: int = 0
    input_size: tuple[int, int] = (0, 0)
    kind: EncoderKind = "general"
    description: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.failures_to_enrol = 0
        self._device = torch.device("cpu")

    # -- device handling -------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self._device

    def to(self, *args, **kwargs):  # type: ignore[override]
        out = super().to(*args, **kwargs)
        dev, _, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        if dev is not None:
            self._device = torch.device(dev)
        return out

    def reset_failures(self) -> None:
        self.failures_to_enrol = 0

    # -- the API ---------------------------------------------------------------------------------------
    def _embed_batch(self, images: torch.Tensor, boxes: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    @torch.no_grad()
    def embed(
        self,
        images: torch.Tensor,
        *,
        boxes: torch.Tensor | None = None,
        batch_size: int = 64,
    ) -> torch.Tensor:
        """Embed images.

        Args:
            images: float tensor (N, 3, H, W) with values in [0, 1]; any H and W.
            boxes: optional (N, 4) xyxy face boxes in pixels (face encoders use them instead of detecting).
            batch_size: images per forward pass.

        Returns:
            (N, dim) float32 tensor of unit-norm rows on :attr:`device`.
        """
        check_image_batch("images", images)
        if boxes is not None:
            check_tensor("boxes", boxes, shape=(images.shape[0], 4))
        batch_size = check_int("batch_size", batch_size, minimum=1)
        outs = []
        for start in range(0, images.shape[0], batch_size):
            x = images[start : start + batch_size].to(self.device, torch.float32)
            b = None if boxes is None else boxes[start : start + batch_size].to(self.device, torch.float32)
            f = self._embed_batch(x, b).to(torch.float32)
            outs.append(torch.nn.functional.normalize(f, dim=1, eps=1e-12))
        if not outs:
            return torch.empty(0, self.dim, device=self.device)
        return torch.cat(outs).to(self.device)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, kind={self.kind!r}, dim={self.dim}, input_size={self.input_size}"


@torch.no_grad()
def embed_images(
    encoder: object,
    images: torch.Tensor,
    *,
    batch_size: int = 64,
    dtype: torch.dtype = torch.float32,
    name: str = "images",
) -> torch.Tensor:
    """Unit-norm embeddings ``(N, D)`` of ``(N, 3, H, W)`` images, in ``dtype``: the one embedding helper of privkit.

    ``encoder`` is a privkit :class:`Encoder` (its batched ``embed`` is used) or any callable mapping a
    ``(B, 3, H, W)`` batch to ``(B, D)`` features; rows are cast to ``dtype`` and L2-normalised here.

    Raises:
        ShapeError: ``images`` is not ``(N, 3, H, W)`` floating point, or the encoder does not return one row per
            image.
        InsufficientDataError: empty ``images`` with a plain callable (its feature width is unknown).
        InvalidArgumentError: ``encoder`` is neither an Encoder nor callable, or it returns NaN or inf.
    """
    check_image_batch(name, images, unit_range=False)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if callable(getattr(encoder, "embed", None)):
        feats = encoder.embed(images, batch_size=batch_size)
    elif callable(encoder):
        if images.shape[0] == 0:
            raise InsufficientDataError(f"{name} is empty")
        feats = torch.cat([torch.as_tensor(encoder(images[i : i + batch_size]))
                           for i in range(0, images.shape[0], batch_size)])
    else:
        raise InvalidArgumentError(f"encoder must be a privkit Encoder or a callable, got {type(encoder).__name__}")
    if feats.ndim != 2 or feats.shape[0] != images.shape[0]:
        raise ShapeError(f"the encoder must return (N, D) embeddings for N={images.shape[0]} {name}, "
                         f"got {tuple(feats.shape)}")
    if not bool(torch.isfinite(feats).all()):
        raise InvalidArgumentError(f"the encoder returned NaN or inf embeddings of {name}")
    return torch.nn.functional.normalize(feats.detach().to(dtype), dim=1)


def package_file(package: str, *parts: str) -> Path | None:
    """The path ``parts`` inside the folder of the installed Python package ``package`` if it exists, else ``None``.

    The package is located with :func:`importlib.util.find_spec` and never imported (some of the packages that
    ship model files cannot be imported cheaply or at all); ``package_file(package)`` is the package's folder.
    """
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return None
    for root in spec.submodule_search_locations or []:
        candidate = Path(root).joinpath(*parts)
        if candidate.exists():
            return candidate
    return None
