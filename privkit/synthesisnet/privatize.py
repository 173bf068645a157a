"""Metric-DP (d_X-privacy) noise on SynthesisNet's identity latent.

Following the design of the SynthesisNet paper (as far as its summary describes it), the identity latent is
perturbed with noise whose scale is governed by the Euclidean distance between identity latents (metric
differential privacy, Chatzikokolakis et al. 2013). privkit implements it as the multivariate Laplace mechanism:

1. clip every row to ``clip_norm``: ``z <- z * min(1, clip_norm / ||z||)``;
2. add one **independent** draw per row, ``n = R u`` with ``R ~ Gamma(shape=d, scale=1/epsilon)`` and ``u``
   uniform on the unit sphere, i.e. density ``proportional to exp(-epsilon ||n||_2)``
   (:func:`privkit.privacy.sample_metric_laplace`).

Guarantee. For two faces whose clipped identity latents are ``x`` and ``x'``, the output densities satisfy
``p(y | x) <= exp(epsilon ||x - x'||_2) p(y | x')`` (triangle inequality): ``epsilon * d_X`` privacy with ``d_X``
the Euclidean distance. Clipped latents are at most ``2 clip_norm`` apart, so between **any** two faces the release
is ``(epsilon * 2 clip_norm, 0)``-indistinguishable. Each face gets its own draw, so releasing a batch gives every
face the same per-face guarantee (changing one face changes only its own row). A single noise vector shared by a
batch would be wrong: the differences between released rows would then be noise-free (the test suite audits this).

Scale (privkit's choice; the paper's latent size and sensitivity are unknown). The noise radius has mean
``d / epsilon``. Identity is *kept* when it is small against the latent radius and *hidden* when it is large; with
``clip_norm = 10 d`` (:func:`default_clip_norm`; SynthesisNet's identity latents lie on the sphere of that radius)
the ratio ``noise radius / clip_norm = 1 / (10 epsilon)`` crosses 1 at ``epsilon = 0.1``, the geometric middle of
the paper's sweep ``epsilon in [0.01, 1]``:

==========  =============================  ===================================================
epsilon     mean noise radius / clip_norm   angle between z and the noisy latent (approx.)
==========  =============================  ===================================================
1           0.1                             6 degrees (identity kept)
0.1         1                               45 degrees (transition)
0.01        10                              84 degrees (nearly a random direction: hidden)
==========  =============================  ===================================================

(``atan(d / (epsilon clip_norm))``, the noise being nearly orthogonal to ``z`` for ``d >= 8``.)

The guarantee is honest about what it means: between two arbitrary faces ``epsilon * 2 clip_norm`` is large
(``epsilon = 1, d = 16``: 320), i.e. metric DP protects *nearby* identity latents (similar-looking people) far more
strongly than distant ones; this is the nature of d_X-privacy and the notebook states it.

Without a ``generator`` the noise is seeded from the operating system's entropy
(:func:`privkit.privacy.make_generator` with ``secure=True``); pass a seeded generator for reproducible notebooks.
The floating-point sampler is not hardened against floating-point attacks (Mironov 2012).
"""

from __future__ import annotations

import math

import torch
from dp_accounting import LaplaceDpEvent

from .._validate import check_epsilon, check_int, check_positive, check_tensor
from ..errors import InvalidArgumentError
from ..privacy import Neighbouring, PrivacyGuarantee, make_generator, sample_metric_laplace

__all__ = ["CLIP_NORM_PER_DIM", "MECHANISM", "default_clip_norm", "noise_radius_mean", "angle_after_noise", "clip_rows",
           "metric_guarantee", "privatize_latent", "privatize_identity"]

#: ``clip_norm = CLIP_NORM_PER_DIM * d`` puts the kept/hidden transition at epsilon = 0.1 (see the module docstring).
CLIP_NORM_PER_DIM = 10.0
MECHANISM = "multivariate Laplace (metric DP)"
_FLOATING_POINT_NOTE = ("the floating-point sampler is not hardened against floating-point attacks "
                        "(Mironov 2012); see privkit.privacy.samplers")


def default_clip_norm(dim: int) -> float:
    """privkit's clip norm (= latent radius) for a ``dim``-dimensional identity latent: ``10 * dim``."""
    return CLIP_NORM_PER_DIM * check_int("dim", dim, minimum=1)


def noise_radius_mean(dim: int, epsilon: float) -> float:
    """Mean norm ``dim / epsilon`` of one multivariate-Laplace draw in ``dim`` dimensions."""
    return check_int("dim", dim, minimum=1) / check_epsilon(epsilon)


def clip_rows(z: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """Rows of ``z`` (``(N, d)``) scaled down to norm at most ``clip_norm`` (computed in float64, dtype kept)."""
    check_tensor("z", z, ndim=2, floating=True)
    c = check_positive("clip_norm", clip_norm)
    z64 = z.to(torch.float64)
    norms = torch.linalg.vector_norm(z64, dim=1, keepdim=True)
    factor = torch.clamp(c / norms.clamp_min(torch.finfo(torch.float64).tiny), max=1.0)
    return (z64 * factor).to(z.dtype)


def metric_guarantee(epsilon: float, clip_norm: float, dim: int, *, latent: str = "identity latent",
                     extra_notes: tuple[str, ...] = ()) -> PrivacyGuarantee:
    """The :class:`~privkit.privacy.PrivacyGuarantee` of the clipped multivariate Laplace mechanism.

    ``epsilon`` of the returned guarantee is the indistinguishability between **any** two faces,
    ``epsilon * 2 * clip_norm``; the metric statement (``epsilon`` per unit of Euclidean distance,
    ``guarantee.epsilon_per_unit``) is the neighbouring relation: ``Neighbouring("metric", bound=2 * clip_norm,
    norm="l2")``.  The event is ``LaplaceDpEvent(1 / (epsilon * 2 * clip_norm))``, whose pure-DP epsilon
    (δ = 0) is that of the mechanism between any two faces (the multivariate ℓ2 Laplace is not dp_accounting's
    coordinate-wise Laplace, so only its δ = 0 statement is claimed).

    Args:
        epsilon: metric-DP parameter per unit of Euclidean distance, ``> 0``.
        clip_norm: clip norm of the latents, ``> 0``.
        dim: latent dimension.
        latent: what is protected (``"identity latent"``, ``"whole latent (identity and attribute)"``).
        extra_notes: appended to the notes.
    """
    eps = check_epsilon(epsilon)
    c = check_positive("clip_norm", clip_norm)
    d = check_int("dim", dim, minimum=1)
    notes = (
        f"metric DP (ε·d_X): ε = {eps:g} per unit of Euclidean distance between clipped {latent}s; two faces "
        f"whose latents are D apart get (ε·D)-indistinguishable outputs",
        f"any two faces: clipped latents are at most 2·clip_norm = {2 * c:g} apart, so the release is "
        f"({eps * 2 * c:g}, 0)-DP between any two faces (the ε of this statement)",
        f"noise: one independent draw per face, radius ~ Gamma({d}, 1/ε) (mean d/ε = {d / eps:g}, "
        f"{d / (eps * c):.3g} × clip_norm) times a uniform direction; d = {d}, clip_norm = {c:g}",
        "each face has its own draw, so a batch release gives every face the same per-face guarantee",
        _FLOATING_POINT_NOTE, *extra_notes)
    neighbours = Neighbouring(relation="metric", unit=f"one face's clipped {latent}", bound=2.0 * c, norm="l2")
    return PrivacyGuarantee(
        epsilon=eps * 2.0 * c, delta=0.0, neighbours=neighbours, protects=f"the {latent}", notes=notes,
        # scale 1/ε per unit of distance, relative to the bound 2·clip_norm: pure ε = 1/noise_multiplier = ε·2c
        event=LaplaceDpEvent(noise_multiplier=1.0 / (eps * 2.0 * c)), accountant="laplace",
        processing=(f"{MECHANISM}: clip each row to norm {c:g}, add one independent draw per face "
                    f"(radius ~ Gamma({d}, 1/ε) times a uniform direction)",))


def _noise(n: int, d: int, epsilon: float, generator: torch.Generator | None, like: torch.Tensor) -> torch.Tensor:
    if generator is None:
        generator = make_generator(secure=True, device=like.device if like.device.type == "cuda" else None)
    elif not isinstance(generator, torch.Generator):
        raise InvalidArgumentError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    # Drawn on the generator's device (a CPU generator gives the same noise for CPU and CUDA latents), float64.
    return sample_metric_laplace(n, d, epsilon=epsilon, generator=generator, device=generator.device,
                                 dtype=torch.float64).to(like.device)


def privatize_latent(z: torch.Tensor, *, epsilon: float, clip_norm: float, generator: torch.Generator | None = None,
                     latent: str = "identity latent",
                     extra_notes: tuple[str, ...] = ()) -> tuple[torch.Tensor, PrivacyGuarantee]:
    """Clip each row of ``z`` to ``clip_norm`` and add one independent multivariate-Laplace draw per row.

    Args:
        z: latents ``(N, d)``, floating point; the output has the same dtype and device.
        epsilon: metric-DP parameter per unit of Euclidean distance, ``> 0``.
        clip_norm: clip norm, ``> 0``.
        generator: source of the noise (CPU or the latents' CUDA device); ``None`` seeds a fresh generator from
            the operating system's entropy.
        latent: name of the protected latent, used in the guarantee's text.
        extra_notes: appended to the guarantee's notes.

    Returns:
        ``(noisy latents, guarantee)``.

    Raises:
        InvalidArgumentError, ShapeError: ``epsilon <= 0``, ``clip_norm <= 0``, a non-finite or non-2-D ``z``.
    """
    check_tensor("z", z, ndim=2, floating=True)
    eps = check_epsilon(epsilon)
    c = check_positive("clip_norm", clip_norm)
    if z.shape[1] < 1:
        raise InvalidArgumentError(f"z must have at least one column, got shape {tuple(z.shape)}")
    guarantee = metric_guarantee(eps, c, z.shape[1], latent=latent, extra_notes=extra_notes)
    clipped = clip_rows(z, c).to(torch.float64)
    noisy = clipped + _noise(z.shape[0], z.shape[1], eps, generator, z)
    return noisy.to(z.dtype), guarantee


def privatize_identity(z_id: torch.Tensor, *, epsilon: float, clip_norm: float,
                       generator: torch.Generator | None = None) -> tuple[torch.Tensor, PrivacyGuarantee]:
    """Metric-DP release of identity latents: clip each row to ``clip_norm``, add an independent draw per row.

    See the module docstring for the guarantee (``epsilon * d_X``; ``epsilon * 2 clip_norm`` between any two
    faces) and for privkit's choice of latent size and clip norm.

    Args:
        z_id: identity latents ``(N, d_id)``.
        epsilon: metric-DP parameter per unit of Euclidean distance, ``> 0`` (the paper sweeps 0.01 .. 1).
        clip_norm: clip norm, ``> 0`` (SynthesisNet uses its identity-latent radius, ``10 * d_id`` by default).
        generator: source of the noise; ``None`` seeds from the operating system's entropy.

    Returns:
        ``(noisy latents (N, d_id) in z_id's dtype and device, PrivacyGuarantee)``.

    Example:
        >>> from privkit.privacy import make_generator
        >>> z = torch.zeros(3, 16)
        >>> noisy, g = privatize_identity(z, epsilon=0.1, clip_norm=160.0, generator=make_generator(0))
        >>> noisy.shape, g.epsilon
        (torch.Size([3, 16]), 32.0)
    """
    return privatize_latent(z_id, epsilon=epsilon, clip_norm=clip_norm, generator=generator, latent="identity latent")


def angle_after_noise(dim: int, epsilon: float, clip_norm: float) -> float:
    """Approximate angle (degrees) between a latent on the ``clip_norm`` sphere and its noisy version:
    ``atan((d / epsilon) / clip_norm)`` (noise of mean radius ``d / epsilon``, nearly orthogonal in high ``d``)."""
    return math.degrees(math.atan(noise_radius_mean(dim, epsilon) / check_positive("clip_norm", clip_norm)))

