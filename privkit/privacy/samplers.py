"""Noise samplers for DP mechanisms, driven by an explicit ``torch.Generator``.

Every sampler takes an optional ``generator`` and draws *only* from it, so a
seeded generator makes a notebook reproducible and no global RNG state is
touched.  The generator must live on the device of the output (a CUDA output
needs a CUDA generator); when ``device`` is omitted the generator's device is
used, and without either the CPU.

Reproducibility versus deployment: :func:`make_generator` with ``seed=<int>``
gives the reproducible noise a paper companion needs; that is wrong for a
deployment, where the noise must be unpredictable.  Use
``make_generator(secure=True)``, which seeds from the operating system's
entropy (``os.urandom``).

.. warning::
   These samplers are **not hardened against floating-point attacks**.  They
   transform floating-point uniforms and normals (Mironov, "On significance of
   the least significant bits for differential privacy", CCS 2012), so the set
   of reachable outputs depends on the secret input and an adversary who sees
   exact floating-point outputs can, in principle, distinguish neighbours.
   PyTorch's generators (Mersenne Twister on CPU, Philox on CUDA) are also not
   cryptographically secure; ``secure=True`` only makes the *seed*
   unpredictable.  Use a hardened discrete sampler (e.g. the discrete Gaussian
   of Canonne, Kamath & Steinke 2020 with a CSPRNG) for production releases.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import torch

from .._validate import check_epsilon, check_int, check_positive, check_probability
from ..device import resolve_device
from ..errors import InvalidArgumentError

__all__ = ["make_generator", "sample_gaussian", "sample_laplace", "sample_gamma", "sample_metric_laplace",
           "poisson_subset"]

ShapeLike = int | Sequence[int] | torch.Size


def make_generator(seed: int | None = None, *, secure: bool = False,
                   device: str | torch.device | None = None) -> torch.Generator:
    """A ``torch.Generator`` for the samplers of this module.

    Args:
        seed: Integer seed in ``[0, 2**64 - 1]`` for reproducible noise (papers,
            notebooks, tests).  ``None`` seeds from the operating system's
            entropy, like ``secure=True``.
        secure: Seed from ``os.urandom`` (OS entropy).  This is what a
            deployment should use; it may not be combined with ``seed``.
            The generator itself is PyTorch's (not a CSPRNG), see the module
            docstring.
        device: Device of the generator (``"cpu"``, ``"cuda"``, ``"cuda:N"``,
            ``"auto"`` or a ``torch.device``); default the CPU.

    Returns:
        A seeded ``torch.Generator`` on ``device``.

    Raises:
        InvalidArgumentError: ``seed`` given together with ``secure=True``, or a
            seed outside ``[0, 2**64 - 1]``.
    """
    if not isinstance(secure, bool):
        raise InvalidArgumentError(f"secure must be a bool, got {secure!r}")
    if secure and seed is not None:
        raise InvalidArgumentError(
            "seed must be None when secure=True: a secure generator is seeded from OS entropy; "
            "pass seed=<int> with secure=False for reproducible (non-deployment) noise"
        )
    dev = torch.device("cpu") if device is None else resolve_device(device)
    if seed is None:
        value = int.from_bytes(os.urandom(8), "little")
    else:
        value = check_int("seed", seed, minimum=0, maximum=2**64 - 1)
    gen = torch.Generator(device=dev)
    gen.manual_seed(value)
    return gen


def poisson_subset(n: int, q: float, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """Poisson sampling of DP-SGD: the indices (ascending) of the records among ``n`` that enter a batch, each
    independently with probability ``q``.

    The uniforms are drawn in float64: with float32 ones a record's inclusion probability would be ``q`` rounded
    up to a multiple of ``2**-24``, not ``q`` (the subsampling accountants assume exactly ``q``).

    Args:
        n: Number of records, ``>= 0``.
        q: Sampling rate in ``(0, 1]``.
        generator: A CPU ``torch.Generator`` (see :func:`make_generator`); None uses torch's global one.

    Returns:
        int64 tensor of the included indices (empty when none is drawn).
    """
    n = check_int("n", n, minimum=0)
    q = check_probability("q", q, open_low=True, open_high=False)
    if generator is not None and (not isinstance(generator, torch.Generator) or generator.device.type != "cpu"):
        raise InvalidArgumentError("generator must be a CPU torch.Generator or None")
    return (torch.rand(n, generator=generator, dtype=torch.float64) < q).nonzero().squeeze(1)


def _resolve(generator: torch.Generator | None, device: str | torch.device | None, dtype: torch.dtype) -> torch.device:
    """Output device; checks generator/device agreement and the dtype."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point or dtype.is_complex:
        raise InvalidArgumentError(f"dtype must be a real floating-point torch.dtype, got {dtype!r}")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise InvalidArgumentError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    if device is None:
        return generator.device if generator is not None else torch.device("cpu")
    dev = resolve_device(device)
    if generator is not None and generator.device.type != dev.type:
        raise InvalidArgumentError(
            f"generator is on device {generator.device} but the output device is {dev}; "
            "create the generator on the output's device (make_generator(..., device=...))"
        )
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _shape(shape: ShapeLike) -> tuple[int, ...]:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise InvalidArgumentError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    return tuple(check_int("shape", s, minimum=0) for s in dims)


# Noise is always drawn in float64 and rounded to ``dtype`` at the end: a
# float32 uniform has 24 bits, which would cut exponential/Laplace tails at
# about 16.6 scales (probability 6e-8, visible in audits); float64 moves
# the cut to about 36.7 scales.


def sample_gaussian(shape: ShapeLike, *, sigma: float, generator: torch.Generator | None = None,
                    device: str | torch.device | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """I.i.d. ``N(0, sigma^2)`` noise.

    Args:
        shape: Output shape.
        sigma: Standard deviation, ``> 0``.
        generator: Source of randomness (on the output's device).
        device: Output device; default the generator's device, else the CPU.
        dtype: Floating-point output dtype.

    Returns:
        A tensor of ``shape``.
    """
    s = check_positive("sigma", sigma)
    dev = _resolve(generator, device, dtype)
    size = _shape(shape)
    z = torch.randn(size, generator=generator, device=dev, dtype=torch.float64)
    return z.mul_(s).to(dtype)


def _exponential(size: tuple[int, ...], generator, device) -> torch.Tensor:
    """Standard float64 exponentials ``-log(U)``, ``U`` uniform on (0, 1]."""
    u = torch.rand(size, generator=generator, device=device, dtype=torch.float64)
    return torch.log1p(-u).neg_()  # -log(1 - U) with 1 - U in (0, 1]: finite


def sample_laplace(shape: ShapeLike, *, scale: float, generator: torch.Generator | None = None,
                   device: str | torch.device | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """I.i.d. Laplace noise with density ``exp(-|x| / scale) / (2 scale)``.

    Drawn as the difference of two independent exponentials (no log of zero).

    Args:
        shape: Output shape.
        scale: Laplace scale ``b > 0`` (``b = Delta_1 / epsilon``, see
            :func:`~privkit.privacy.laplace_scale`).
        generator: Source of randomness (on the output's device).
        device: Output device; default the generator's device, else the CPU.
        dtype: Floating-point output dtype.

    Returns:
        A tensor of ``shape``.
    """
    b = check_positive("scale", scale)
    dev = _resolve(generator, device, dtype)
    size = _shape(shape)
    e1 = _exponential(size, generator, dev)
    e2 = _exponential(size, generator, dev)
    return (e1 - e2).mul_(b).to(dtype)


# Shapes up to this value are drawn as a sum of exponentials (exact, cheap);
# above it Marsaglia-Tsang is used.
_SUM_OF_EXPONENTIALS_MAX_SHAPE = 8


def _gamma_marsaglia_tsang(n: int, alpha: float, generator, device) -> torch.Tensor:
    """``n`` Gamma(alpha, 1) draws, alpha >= 1, by Marsaglia & Tsang (2000), in float64.

    Vectorised: all pending draws propose at once, and only the rejected ones
    (about 1-5 % per round) are redrawn.
    """
    d = alpha - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = torch.empty(n, device=device, dtype=torch.float64)
    pending = torch.arange(n, device=device)
    for _ in range(10_000):
        m = pending.numel()
        if m == 0:
            return out
        x = torch.randn(m, generator=generator, device=device, dtype=torch.float64)
        u = torch.rand(m, generator=generator, device=device, dtype=torch.float64)
        v = 1.0 + c * x
        positive = v > 0
        v = torch.where(positive, v, torch.ones_like(v)) ** 3
        # log(U) < x^2/2 + d - d v + d log v   (log(0) = -inf always accepts, fine: U = 0 has prob. 0)
        accept = positive & (torch.log(u) < 0.5 * x * x + d - d * v + d * torch.log(v))
        out[pending[accept]] = d * v[accept]
        pending = pending[~accept]
    raise RuntimeError("Marsaglia-Tsang gamma sampler did not terminate")  # pragma: no cover


def sample_gamma(shape: ShapeLike, *, concentration: float, scale: float = 1.0,
                 generator: torch.Generator | None = None, device: str | torch.device | None = None,
                 dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """I.i.d. Gamma(``concentration``, ``scale``) draws (mean ``concentration * scale``).

    ``torch._standard_gamma`` takes no generator, so this sampler is built from
    ``torch.rand``/``torch.randn`` on the given generator: a sum of
    exponentials for integer shapes up to 8, Marsaglia & Tsang's squeeze method
    for larger shapes, and ``Gamma(a) = Gamma(a + 1) U^(1/a)`` for shapes below
    1.  Computed in float64, returned in ``dtype``.

    Args:
        shape: Output shape.
        concentration: Shape parameter ``k > 0``.
        scale: Scale parameter ``theta > 0``.
        generator: Source of randomness (on the output's device).
        device: Output device; default the generator's device, else the CPU.
        dtype: Floating-point output dtype.

    Returns:
        A tensor of ``shape``.
    """
    k = check_positive("concentration", concentration)
    theta = check_positive("scale", scale)
    dev = _resolve(generator, device, dtype)
    size = _shape(shape)
    n = math.prod(size)
    if n == 0:
        return torch.empty(size, device=dev, dtype=dtype)
    if k == int(k) and k <= _SUM_OF_EXPONENTIALS_MAX_SHAPE:
        g = _exponential((n, int(k)), generator, dev).sum(dim=1)
    elif k >= 1.0:
        g = _gamma_marsaglia_tsang(n, k, generator, dev)
    else:
        g = _gamma_marsaglia_tsang(n, k + 1.0, generator, dev)
        u = torch.rand(n, generator=generator, device=dev, dtype=torch.float64)
        g = g * torch.exp(torch.log1p(-u) / k)  # U^(1/k) with U in (0, 1]
    return (g * theta).reshape(size).to(dtype)


def sample_metric_laplace(n: int, d: int, *, epsilon: float, generator: torch.Generator | None = None,
                          device: str | torch.device | None = None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Multivariate (Euclidean) Laplace noise for metric DP, one independent draw per row.

    Row ``i`` has density proportional to ``exp(-epsilon ||z_i||_2)`` on ``R^d``:
    ``z_i = R_i u_i`` with ``R_i ~ Gamma(shape=d, scale=1/epsilon)`` and ``u_i``
    uniform on the unit sphere (a normalised standard Gaussian).  Adding row
    ``i`` to record ``i`` gives ``epsilon * ||x - x'||_2``-privacy.  Every row is
    an independent draw: sharing one noise vector across a batch is a known bug
    that this sampler does not have.

    Args:
        n: Number of rows (records), ``>= 0``.
        d: Dimension, ``>= 1``.
        epsilon: Metric-privacy parameter, ``> 0`` (per unit of L2 distance).
        generator: Source of randomness (on the output's device).
        device: Output device; default the generator's device, else the CPU.
        dtype: Floating-point output dtype.

    Returns:
        A tensor of shape ``(n, d)``.
    """
    n = check_int("n", n, minimum=0)
    d = check_int("d", d, minimum=1)
    eps = check_epsilon(epsilon)
    dev = _resolve(generator, device, dtype)
    if n == 0:
        return torch.empty((0, d), device=dev, dtype=dtype)
    radius = sample_gamma((n,), concentration=float(d), scale=1.0 / eps, generator=generator,
                          device=dev, dtype=torch.float64)
    direction = torch.randn((n, d), generator=generator, device=dev, dtype=torch.float64)
    while True:
        norms = torch.linalg.vector_norm(direction, dim=1)
        zero = norms == 0
        if not bool(zero.any()):  # a zero vector (probability ~0) has no direction: redraw it
            break
        direction[zero] = torch.randn((int(zero.sum()), d), generator=generator, device=dev, dtype=torch.float64)
    return (direction * (radius / norms).unsqueeze(1)).to(dtype)
