"""SynthesisNet's networks: identity/attribute encoders, decoder, generator and discriminator.

The SynthesisNet paper (Shen, Wang, Tian, Cui; full text not obtained) names an autoencoder whose encoders
``Enc_id`` and ``Enc_att`` split a face into an identity latent and an attribute latent, a decoder ``Dec``, and a
DCGAN whose discriminator shares its trunk with an auxiliary attribute classifier (separate last layers), with
instance normalisation, ReLU in the generator and LeakyReLU in the discriminator. Everything below that the
paper's summary does not state is **privkit's choice** (standard DCGAN / ACGAN / pix2pix practice, as listed in
``docs/synthesisnet.md`` §4):

* Encoders (:class:`IdentityEncoder`, :class:`AttributeEncoder`): two separate convolutional trunks of
  ``Conv 4x4 / stride 2 / padding 1`` layers taking the ``S x S`` image down to ``4 x 4`` (``log2(S/4)`` layers),
  channels ``width * 2**i`` capped at ``8 * width``, InstanceNorm (affine) + LeakyReLU(0.2), no norm on the first
  layer, then a linear head. At ``S = 128, width = 64`` this is the 3 -> 64 -> 128 -> 256 -> 512 -> 512 trunk of
  ``docs/synthesisnet.md`` §4.
* Both latents live on spheres: ``z_id`` on the sphere of radius ``id_radius`` (the clip norm of the metric-DP
  mechanism, so that clipping is a no-op for encoder outputs and the noisy latent can be projected back onto the
  same sphere, see :mod:`privkit.synthesisnet.privatize`), ``z_att`` on the sphere of radius ``att_radius``.
* Decoder / generator (:class:`Decoder`, :class:`Generator`, same architecture): the two latents are rescaled to
  unit size per coordinate (divided by ``radius / sqrt(dim)``; a fixed constant, so the networks see inputs of
  order 1 whatever the radius), concatenated, mapped by a linear layer to ``4 x 4 x C`` (ReLU), then x2
  upsampling steps with channels ``width * 2**(n-1-j)`` capped at ``16 * width`` (InstanceNorm + ReLU) up to
  ``S x S x 3`` with a ``tanh`` output (images in ``[-1, 1]``). At ``S = 128, width = 64``: 1024 -> 512 -> 256 ->
  128 -> 64 -> 3, as in ``docs/synthesisnet.md`` §4. Each step is, by default (``upsample="resize"``, privkit's
  choice), a nearest-neighbour x2 upsampling followed by a ``Conv 3x3`` (Odena, Dumoulin & Olah 2016,
  "Deconvolution and checkerboard artifacts"): DCGAN's ``ConvTranspose 4x4 / stride 2`` (``upsample="transpose"``,
  kept as an option) overlaps its kernels unevenly and, in privkit's CPU-scale runs, printed a strong checkerboard
  on every generated face; the resize-convolution cannot produce that pattern at initialisation and did not learn it.
* :class:`Discriminator`: the encoder trunk with channels capped at ``16 * width`` (3 -> 64 -> ... -> 1024 at
  paper scale) shared by two heads, each a separate ``Conv 4x4`` on the ``4 x 4`` map: one real/fake logit and
  (optionally) the auxiliary classifier's logits for every attribute. Its convolutions are spectrally normalised
  by default (``norm="spectral"``, no InstanceNorm; Miyato et al. 2018) or InstanceNorm-ed (``norm="instance"``).
* Autoencoder heads: :class:`CosineClassifier` (identity from ``z_id``), :class:`MultiHeadClassifier`
  (attributes from ``z_att``) and an MLP adversary that tries to recover identity from ``z_att`` through a
  :func:`grad_reverse` layer (Ganin & Lempitsky's gradient reversal), which pushes identity out of ``z_att``.
* Weights are initialised from ``N(0, 0.02)`` (InstanceNorm scales from ``N(1, 0.02)``, biases 0) with an explicit
  ``torch.Generator`` (:func:`init_weights`).

The paper's names are kept as aliases: ``Enc_id``, ``Enc_att``, ``Dec``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import torch
from torch import nn
from torch.nn import functional as F

from .._validate import check_choice, check_int, check_positive, check_tensor
from ..errors import InsufficientDataError, InvalidArgumentError
from ..linalg import numerical_rank, top_singular_directions

__all__ = ["ENCODER_MAX_MULT", "GENERATOR_MAX_MULT", "DISCRIMINATOR_MAX_MULT", "check_image_size", "IdentityEncoder",
           "AttributeEncoder", "Decoder", "Generator", "Discriminator", "DISCRIMINATOR_NORMS", "UPSAMPLE_MODES",
           "SpectralNormConv2d", "CosineClassifier", "MultiHeadClassifier", "IdentityAdversary", "grad_reverse",
           "identity_attribute_directions", "init_weights", "project_to_sphere", "Enc_id", "Enc_att", "Dec"]

#: Channel caps (multiples of ``width``): the encoders stop at 8x (512 at width 64), the generator and the
#: discriminator at 16x (1024 at width 64), as in docs/synthesisnet.md §4.
ENCODER_MAX_MULT = 8
GENERATOR_MAX_MULT = 16
DISCRIMINATOR_MAX_MULT = 16


def check_image_size(image_size: int) -> int:
    """Image side: a power of two in ``[16, 1024]`` (the networks halve/double it down to/up from 4x4)."""
    s = check_int("image_size", image_size, minimum=16, maximum=1024)
    if s & (s - 1):
        raise InvalidArgumentError(f"image_size must be a power of two in [16, 1024] (e.g. 64, 128), got {s}")
    return s


def _n_levels(image_size: int) -> int:
    return int(round(math.log2(check_image_size(image_size) // 4)))


def project_to_sphere(z: torch.Tensor, radius: float) -> torch.Tensor:
    """Rows of ``z`` rescaled to norm ``radius`` (an all-zero row becomes ``radius * e_1``)."""
    norms = torch.linalg.vector_norm(z, dim=1, keepdim=True)
    out = z * (radius / norms.clamp_min(torch.finfo(z.dtype).tiny))
    zero = norms.squeeze(1) == 0
    if bool(zero.any()):
        out = out.clone()
        out[zero] = 0.0
        out[zero, 0] = radius
    return out


def _orthonormal_rows(blocks: Sequence[Any], n: int, *, against: torch.Tensor | None = None,
                      tol: float = 1e-8) -> torch.Tensor:
    """The first ``n`` rows of a Gram-Schmidt pass over the rows of ``blocks`` (in order, then the pixel axes),
    after removing the span of ``against``, skipping rows that are (numerically) in the span of those before."""
    d = blocks[0].shape[1]
    out: list[torch.Tensor] = []
    fixed = against if against is not None else blocks[0].new_zeros(0, d)
    blocks = list(blocks)

    def rows():
        for b in blocks:
            yield from b
        for i in range(d):  # reached only when the data span fewer than n directions
            e = blocks[0].new_zeros(d)
            e[i] = 1.0
            yield e

    for row in rows():
        v = row.clone()
        for _ in range(2):  # twice is enough (Kahan-Parlett)
            q = torch.cat([fixed, torch.stack(out)]) if out else fixed
            v = v - (q @ v) @ q
        norm = float(torch.linalg.vector_norm(v))
        if norm > tol * max(1.0, float(torch.linalg.vector_norm(row))):
            out.append(v / norm)
            if len(out) == n:
                return torch.stack(out)
    raise InsufficientDataError(f"only {len(out)} independent directions for {n} latent coordinates")


@torch.no_grad()
def identity_attribute_directions(x: torch.Tensor, labels: torch.Tensor, *, id_dim: int,
                                  att_dim: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Closed-form linear split of flattened images into an identity and an attribute subspace (float64).

    ``att_dirs`` are the ``att_dim`` leading principal directions of the *within-identity* scatter (each image
    minus its identity's mean: what changes between views of one person); ``id_dirs`` the ``id_dim`` leading
    principal directions of the *between-identity* scatter (identity means minus the overall mean), taken
    orthogonal to ``att_dirs``. When the between-identity scatter has fewer than ``id_dim`` directions (fewer
    identities), the rest come from the next within-identity, then the overall principal directions, then the
    pixel axes, all orthogonal to those already taken.

    Args:
        x: ``(N, D)`` flattened images.
        labels: ``(N,)`` identity labels ``0 .. K-1``.
        id_dim, att_dim: sizes of the two subspaces, ``id_dim + att_dim <= D``.

    Returns:
        ``(mean (D,), id_dirs (id_dim, D), att_dirs (att_dim, D))`` with orthonormal rows, the two sets mutually
        orthogonal.
    """
    check_tensor("x", x, ndim=2, floating=True, finite=True)
    check_tensor("labels", labels, shape=(x.shape[0],))
    n, d = x.shape
    id_dim = check_int("id_dim", id_dim, minimum=1)
    att_dim = check_int("att_dim", att_dim, minimum=1)
    if n < 2:
        raise InsufficientDataError(f"x: need at least 2 images, got {n}")
    if id_dim + att_dim > d:
        raise InvalidArgumentError(f"id_dim + att_dim must be <= {d} (the pixels), got {id_dim + att_dim}")
    x = x.detach().to("cpu", torch.float64)
    _, lab = torch.unique(labels.detach().to("cpu").long(), return_inverse=True)
    k = int(lab.max()) + 1
    counts = torch.bincount(lab, minlength=k).to(torch.float64)
    mean = x.mean(0)
    means = torch.zeros(k, d, dtype=torch.float64).index_add_(0, lab, x) / counts[:, None]
    within = x - means[lab]
    between = means - mean
    v_within = _principal_directions(within)
    total = _Lazy(lambda: _principal_directions(x - mean))  # only when the scatters span too few directions
    att_dirs = _orthonormal_rows([v_within, total], att_dim)
    between = between - (between @ att_dirs.T) @ att_dirs
    id_dirs = _orthonormal_rows([_principal_directions(between), v_within[att_dim:], total], id_dim,
                                against=att_dirs)
    return mean, id_dirs, att_dirs


class _Lazy:
    """Rows computed on first iteration (a block of :func:`_orthonormal_rows` that is rarely reached)."""

    def __init__(self, make: Any):
        self._make, self._rows = make, None

    def __iter__(self):
        if self._rows is None:
            self._rows = self._make()
        return iter(self._rows)


def _principal_directions(m: torch.Tensor) -> torch.Tensor:
    """Right singular vectors of ``m`` (as rows) with a non-negligible singular value, largest first
    (:func:`privkit.linalg.top_singular_directions`), each with the sign that makes its largest-magnitude entry
    positive (the eigensolver's signs are the LAPACK build's choice)."""
    u, s = top_singular_directions(m)
    vh = u[:, :numerical_rank(s)].T
    sign = torch.sign(vh.gather(1, vh.abs().argmax(1, keepdim=True)))
    return vh * sign


class SpectralNormConv2d(nn.Conv2d):
    """``Conv2d`` whose weight is divided by its largest singular value (Miyato et al. 2018).

    The singular value is estimated by power iteration on the ``(out, in * k * k)`` weight matrix, one step per
    forward pass in training mode, with the left singular vector kept in the buffer ``u`` (initialised by
    :func:`init_weights` from an explicit generator, so training is reproducible without the global RNG).
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.register_buffer("u", torch.full((self.out_channels,), self.out_channels ** -0.5))

    @torch.no_grad()
    def power_iterations(self, steps: int) -> None:
        """Refine the singular-vector estimate ``u`` by ``steps`` power-iteration steps (no weight change)."""
        w = self.weight.flatten(1)
        for _ in range(steps):
            v = F.normalize(w.T @ self.u, dim=0, eps=1e-12)
            self.u.copy_(F.normalize(w @ v, dim=0, eps=1e-12))

    def normalized_weight(self) -> torch.Tensor:
        if self.training:
            self.power_iterations(1)
        w = self.weight.flatten(1)
        with torch.no_grad():
            u = self.u.clone()  # a copy: the next training forward pass updates the buffer before this backward
            v = F.normalize(w.T @ u, dim=0, eps=1e-12)
        return self.weight / torch.dot(u, w @ v).clamp_min(1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._conv_forward(x, self.normalized_weight(), self.bias)


UpsampleMode = Literal["resize", "transpose"]
#: Upsampling of the decoder/generator: nearest x2 + Conv 3x3 (privkit's default) or DCGAN's ConvTranspose 4x4/2.
UPSAMPLE_MODES: tuple[str, ...] = ("resize", "transpose")

DiscriminatorNorm = Literal["spectral", "instance"]
DISCRIMINATOR_NORMS: tuple[str, ...] = ("spectral", "instance")


class _ConvTrunk(nn.Module):
    """``Conv 4x4 / s2`` layers from ``S x S x 3`` to ``4 x 4 x C`` with LeakyReLU(0.2).

    ``norm="instance"``: InstanceNorm (affine) from layer 2 on; ``norm="spectral"``: spectrally normalised convs
    and no InstanceNorm.
    """

    def __init__(self, image_size: int, width: int, max_mult: int, norm: str = "instance"):
        super().__init__()
        check_choice("norm", norm, DISCRIMINATOR_NORMS)
        n = _n_levels(image_size)
        layers: list[nn.Module] = []
        c_in = 3
        for i in range(n):
            c_out = width * min(2**i, max_mult)
            if norm == "spectral":
                layers.append(SpectralNormConv2d(c_in, c_out, 4, stride=2, padding=1))
            else:
                layers.append(nn.Conv2d(c_in, c_out, 4, stride=2, padding=1, bias=i == 0))
                if i > 0:
                    layers.append(nn.InstanceNorm2d(c_out, affine=True))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            c_in = c_out
        self.net = nn.Sequential(*layers)
        self.out_channels = c_in

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class _SphereEncoder(nn.Module):
    def __init__(self, *, image_size: int, width: int, dim: int, radius: float, linear: bool = False):
        super().__init__()
        self.image_size = check_image_size(image_size)
        self.width = check_int("width", width, minimum=1)
        self.dim = check_int("dim", dim, minimum=1)
        self.radius = check_positive("radius", radius)
        self.trunk = _ConvTrunk(self.image_size, self.width, ENCODER_MAX_MULT)
        self.head = nn.Linear(self.trunk.out_channels * 16, self.dim)
        if not isinstance(linear, bool):
            raise InvalidArgumentError(f"linear must be a bool, got {linear!r}")
        self.linear_path = nn.Linear(3 * self.image_size**2, self.dim) if linear else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Images in ``[-1, 1]``, shape ``(N, 3, S, S)`` -> latents ``(N, dim)`` of norm ``radius``."""
        h = self.head(self.trunk(x).flatten(1))
        if self.linear_path is not None:
            h = h + self.linear_path(x.flatten(1))
        return project_to_sphere(h, self.radius)


class IdentityEncoder(_SphereEncoder):
    """``Enc_id``: image -> identity latent ``z_id`` on the sphere of radius ``radius`` (the clip norm).

    Args:
        image_size: image side ``S`` (power of two, 16..1024).
        width: channels of the first layer.
        dim: identity latent size ``d_id``.
        radius: norm of every ``z_id``.
        linear: add a linear map of the pixels to the trunk's output before the projection onto the sphere (the
            linear path, see :class:`Decoder`).
    """


class AttributeEncoder(_SphereEncoder):
    """``Enc_att``: image -> attribute latent ``z_att`` on the sphere of radius ``radius``.

    Args:
        image_size: image side ``S`` (power of two, 16..1024).
        width: channels of the first layer.
        dim: attribute latent size ``d_att``.
        radius: norm of every ``z_att``.
        linear: add a linear map of the pixels (privkit's pipeline gives only ``Enc_id`` one, see :class:`Decoder`).
    """


def _upsample_block(c_in: int, c_out: int, mode: str, *, bias: bool) -> list[nn.Module]:
    """One x2 upsampling step: ``ConvTranspose 4x4/2`` (``"transpose"``) or nearest x2 + ``Conv 3x3``
    (``"resize"``)."""
    if mode == "transpose":
        return [nn.ConvTranspose2d(c_in, c_out, 4, stride=2, padding=1, bias=bias)]
    return [nn.Upsample(scale_factor=2, mode="nearest"), nn.Conv2d(c_in, c_out, 3, padding=1, bias=bias)]


class Decoder(nn.Module):
    """``Dec``: ``(z_id, z_att)`` -> image in ``[-1, 1]`` (DCGAN-style generator: linear, x2 upsampling steps with
    IN + ReLU, tanh).

    Args:
        image_size: output side ``S``.
        width: channels of the last hidden layer (the first hidden layer has ``width * 2**(n-1)``, capped at
            ``16 * width``).
        id_dim, att_dim: latent sizes.
        id_radius, att_radius: the latents' norms; inputs are divided by ``radius / sqrt(dim)`` so that each
            coordinate is of order 1.
        upsample: ``"resize"`` (default: nearest-neighbour x2 then ``Conv 3x3``, Odena et al. 2016, which avoids
            the checkerboard artefacts of strided transposed convolutions) or ``"transpose"`` (DCGAN's original
            ``ConvTranspose 4x4 / stride 2``). Same channel plan either way.
        linear: add a linear map of the (rescaled) identity latent to the last layer's output before the
            ``tanh``: the identity's linear path [I], which the SynthesisNet pipeline fits in closed form
            (between-identity principal directions, :meth:`~privkit.synthesisnet.SynthesisNet.fit`) so that a
            network trained for minutes starts from the best linear identity code instead of from noise. The
            attribute latent reaches the image through the convolutions only.
    """

    def __init__(self, *, image_size: int, width: int, id_dim: int, att_dim: int, id_radius: float,
                 att_radius: float, upsample: UpsampleMode = "resize", linear: bool = False):
        super().__init__()
        self.image_size = check_image_size(image_size)
        self.width = check_int("width", width, minimum=1)
        self.id_dim = check_int("id_dim", id_dim, minimum=1)
        self.att_dim = check_int("att_dim", att_dim, minimum=1)
        self.id_scale = check_positive("id_radius", id_radius) / math.sqrt(self.id_dim)
        self.att_scale = check_positive("att_radius", att_radius) / math.sqrt(self.att_dim)
        self.upsample = check_choice("upsample", upsample, UPSAMPLE_MODES)
        n = _n_levels(self.image_size)
        chans = [self.width * min(2 ** (n - 1 - j), GENERATOR_MAX_MULT) for j in range(n)]
        self.top_channels = chans[0]
        self.fc = nn.Linear(self.id_dim + self.att_dim, chans[0] * 16)
        layers: list[nn.Module] = []
        for j in range(n):
            last = j == n - 1
            c_out = 3 if last else chans[j + 1]
            layers += _upsample_block(chans[j], c_out, self.upsample, bias=last)
            if not last:
                layers += [nn.InstanceNorm2d(c_out, affine=True), nn.ReLU(inplace=True)]
        self.net = nn.Sequential(*layers)  # the tanh is applied in forward, after the linear path
        if not isinstance(linear, bool):
            raise InvalidArgumentError(f"linear must be a bool, got {linear!r}")
        self.linear_path = nn.Linear(self.id_dim, 3 * self.image_size**2) if linear else None

    @property
    def last_layer(self) -> nn.Module:
        """The convolution that outputs the 3 image channels (before the ``tanh``)."""
        return self.net[-1]

    def forward(self, z_id: torch.Tensor, z_att: torch.Tensor) -> torch.Tensor:
        """``(N, id_dim)``, ``(N, att_dim)`` -> ``(N, 3, S, S)`` in ``[-1, 1]``."""
        z = torch.cat([z_id / self.id_scale, z_att / self.att_scale], dim=1)
        h = F.relu(self.fc(z)).view(z.shape[0], self.top_channels, 4, 4)
        out = self.net(h)
        if self.linear_path is not None:
            out = out + self.linear_path(z[:, : self.id_dim]).view_as(out)
        return torch.tanh(out)


class Generator(Decoder):
    """The DCGAN generator ``G(z~_id, z_att)``: same architecture as :class:`Decoder` (and by default initialised
    from the trained decoder, privkit's choice to shorten GAN training)."""


class Discriminator(nn.Module):
    """DCGAN discriminator whose trunk is shared with an auxiliary attribute classifier (separate last layers).

    Args:
        image_size: input side ``S``.
        width: channels of the first layer.
        n_classes: number of classes of every attribute the auxiliary classifier predicts; empty for none (the
            FaceDCGAN-like ablation).
        norm: ``"spectral"`` (spectrally normalised convolutions, no InstanceNorm; privkit's default, see
            :class:`~privkit.synthesisnet.SynthesisNetConfig`) or ``"instance"`` (InstanceNorm from layer 2, as
            docs/synthesisnet.md §4 lists).

    ``forward`` returns ``(logit, class_logits)``: the real/fake logits ``(N,)`` and a list with one ``(N, k_a)``
    tensor per attribute (empty list without auxiliary classifier).
    """

    def __init__(self, *, image_size: int, width: int, n_classes: Sequence[int] = (),
                 norm: DiscriminatorNorm = "spectral"):
        super().__init__()
        self.image_size = check_image_size(image_size)
        self.width = check_int("width", width, minimum=1)
        self.n_classes = [check_int("n_classes", k, minimum=2) for k in n_classes]
        self.norm = check_choice("norm", norm, DISCRIMINATOR_NORMS)
        self.trunk = _ConvTrunk(self.image_size, self.width, DISCRIMINATOR_MAX_MULT, self.norm)
        c = self.trunk.out_channels
        conv = SpectralNormConv2d if self.norm == "spectral" else nn.Conv2d
        self.adv_head = conv(c, 1, 4, stride=1, padding=0)
        self.cls_head = conv(c, sum(self.n_classes), 4, stride=1, padding=0) if self.n_classes else None

    @property
    def has_classifier(self) -> bool:
        return self.cls_head is not None

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        h = self.trunk(x)
        logit = self.adv_head(h).flatten()
        if self.cls_head is None:
            return logit, []
        return logit, list(torch.split(self.cls_head(h).flatten(1), self.n_classes, dim=1))


class CosineClassifier(nn.Module):
    """``scale * cos(z, w_k)`` logits over ``n_classes`` (identity from ``z_id``; scale-free in ``z``)."""

    def __init__(self, in_dim: int, n_classes: int, *, scale: float = 16.0):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(check_int("n_classes", n_classes, minimum=1),
                                               check_int("in_dim", in_dim, minimum=1)))
        self.scale = check_positive("scale", scale)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.scale * F.normalize(z, dim=1) @ F.normalize(self.weight, dim=1).T


class MultiHeadClassifier(nn.Module):
    """Linear logits for several categorical attributes; ``forward`` returns one tensor per attribute.

    The input is divided by ``input_scale`` (the latent radius over ``sqrt(dim)``) so coordinates are of order 1.
    """

    def __init__(self, in_dim: int, n_classes: Sequence[int], *, input_scale: float = 1.0):
        super().__init__()
        self.n_classes = [check_int("n_classes", k, minimum=2) for k in n_classes]
        self.input_scale = check_positive("input_scale", input_scale)
        self.linear = nn.Linear(check_int("in_dim", in_dim, minimum=1), max(1, sum(self.n_classes)))

    def forward(self, z: torch.Tensor) -> list[torch.Tensor]:
        if not self.n_classes:
            return []
        return list(torch.split(self.linear(z / self.input_scale), self.n_classes, dim=1))


class IdentityAdversary(nn.Module):
    """MLP that tries to predict identity from ``z_att`` (trained through :func:`grad_reverse`)."""

    def __init__(self, in_dim: int, n_classes: int, *, hidden: int = 128, input_scale: float = 1.0):
        super().__init__()
        self.input_scale = check_positive("input_scale", input_scale)
        self.net = nn.Sequential(
            nn.Linear(check_int("in_dim", in_dim, minimum=1), check_int("hidden", hidden, minimum=1)),
            nn.ReLU(inplace=True), nn.Linear(hidden, check_int("n_classes", n_classes, minimum=1)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z / self.input_scale)


class _GradReverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, coeff: float) -> torch.Tensor:  # type: ignore[override]
        ctx.coeff = coeff
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        return -ctx.coeff * grad, None


def grad_reverse(x: torch.Tensor, coeff: float = 1.0) -> torch.Tensor:
    """Identity in the forward pass; multiplies the gradient by ``-coeff`` in the backward pass."""
    return _GradReverse.apply(x, float(coeff))


@torch.no_grad()
def init_weights(module: nn.Module, generator: torch.Generator) -> None:
    """DCGAN initialisation with an explicit generator: conv/linear weights ``N(0, 0.02)``, norm scales
    ``N(1, 0.02)``, biases 0; :class:`CosineClassifier` weights ``N(0, 1)`` (only their direction matters);
    the power-iteration vector of every :class:`SpectralNormConv2d` from ``N(0, 1)``, then 15 power iterations.

    Draws on the CPU generator and copies to each parameter's device, so the result does not depend on the
    device.
    """
    if not isinstance(generator, torch.Generator):
        raise InvalidArgumentError(f"generator must be a torch.Generator, got {type(generator).__name__}")

    def normal(p: torch.Tensor, mean: float, std: float) -> None:
        draw = torch.randn(p.shape, generator=generator, device=generator.device, dtype=torch.float32)
        p.copy_((draw * std + mean).to(p.device, p.dtype))

    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            normal(m.weight, 0.0, 0.02)
            if m.bias is not None:
                m.bias.zero_()
        elif isinstance(m, nn.InstanceNorm2d) and m.affine:
            normal(m.weight, 1.0, 0.02)
            m.bias.zero_()
        elif isinstance(m, CosineClassifier):
            normal(m.weight, 0.0, 1.0)
        if isinstance(m, SpectralNormConv2d):
            normal(m.u, 0.0, 1.0)
            m.u.div_(torch.linalg.vector_norm(m.u).clamp_min(1e-12))
            m.power_iterations(15)  # start from a converged estimate of the largest singular value


#: The paper's names.
Enc_id = IdentityEncoder
Enc_att = AttributeEncoder
Dec = Decoder
