"""Utility and privacy metrics for published faces: FID, IS, identity distance, re-identification, attributes.

Utility (as in the SynthesisNet paper's summary): the Inception Score (Salimans et al. 2016) and the Fréchet
Inception Distance (Heusel et al. 2017). Privacy: the identity distance between original and published faces under
a face-recognition encoder (the paper used an Inception-ResNet face model; privkit's default-scale notebook uses
two real recognisers, HSE's ``faceres`` and dlib's ResNet descriptor), and, as the attacker's view that the paper
does not report (privkit's addition), the re-identification rate of published faces: TAR at a fixed FAR against the
originals and rank-1 identification against a gallery.

Feature extractors. :func:`fid` and :func:`inception_score` take features and class probabilities, not images, so
the extractor is the caller's choice and must be stated next to the numbers. Inception-v3 (ImageNet) weights
cannot be downloaded here: :func:`load_inception` loads them when the reader supplies them (paper scale) and raises
:class:`~privkit.errors.MissingResourceError` otherwise. At the default scale the notebook uses
``efficientnet-lite0`` (ImageNet): its un-normalised 1280-D pooled features for FID and its 1000-class softmax for
the IS analogue (see :func:`privkit.studies.synthesisnet.experiments.efficientnet_outputs`); such "FID"/"IS" values are
comparable between methods measured with the same extractor, never with published Inception numbers.

All statistics are computed in float64. Confidence intervals are percentile bootstraps with an explicit seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .._validate import check_choice, check_image_batch, check_int, check_min_count, check_probability, check_tensor
from ..device import resolve_device
from ..errors import InsufficientDataError, InvalidArgumentError, MissingResourceError, ShapeError, WeightFileError
from ..transforms import resize
from ..encoders.base import embed_images

__all__ = ["FIDResult", "InceptionScoreResult", "IdentityDistanceResult", "ReidentificationResult",
           "AttributePreservationResult", "INCEPTION_WEIGHT_FILES", "InceptionV3Features", "load_inception",
           "frechet_distance", "frechet_distance_from_samples", "fid", "inception_score", "features_for_fid",
           "identity_distance", "identity_distance_from_embeddings", "reidentification_rate",
           "reidentification_from_embeddings", "attribute_preservation"]

F64 = torch.float64


# --------------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class FIDResult:
    """Fréchet distance between Gaussian fits of two feature sets, with a percentile-bootstrap CI.

    ``ci_low``/``ci_high`` are NaN when no bootstrap was run. FID is biased upwards at small sample sizes
    (compare methods at equal ``n_real``/``n_fake``).
    """

    value: float
    ci_low: float
    ci_high: float
    confidence: float
    n_real: int
    n_fake: int
    dim: int

    def __str__(self) -> str:
        ci = "" if math.isnan(self.ci_low) else f" [{self.ci_low:.3g}, {self.ci_high:.3g}]"
        return f"FID {self.value:.4g}{ci} ({self.n_real} real, {self.n_fake} fake, {self.dim}-D features)"


@dataclass(frozen=True)
class InceptionScoreResult:
    """Inception Score: mean and standard deviation over splits, each split's score, and (when a bootstrap was
    run) a percentile-bootstrap CI of the mean over splits (``ci_low``/``ci_high`` NaN otherwise)."""

    mean: float
    std: float
    split_scores: tuple[float, ...]
    ci_low: float = float("nan")
    ci_high: float = float("nan")
    confidence: float = float("nan")

    def __str__(self) -> str:
        ci = "" if math.isnan(self.ci_low) else f" [{self.ci_low:.4g}, {self.ci_high:.4g}]"
        return f"IS {self.mean:.4g} ± {self.std:.2g}{ci} ({len(self.split_scores)} splits)"


@dataclass(frozen=True)
class IdentityDistanceResult:
    """``1 - cos`` between the embeddings of each original and its published version (higher = more private)."""

    per_image: torch.Tensor
    mean: float
    ci_low: float
    ci_high: float
    confidence: float

    def __str__(self) -> str:
        return f"identity distance {self.mean:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}] (n={self.per_image.numel()})"


@dataclass(frozen=True)
class ReidentificationResult:
    """The attacker's success at linking published faces to identities.

    Attributes:
        tar: fraction of published faces accepted as their own original (score > threshold): TAR@FAR of the
            (published_i, original_i) pairs.
        tar_same_identity: TAR over the pairs (published_i, original_j), j != i, of the same identity (other
            photos of the person); NaN when there are none.
        far: the requested false-accept rate.
        far_achieved: the impostor false-accept rate at the threshold (<= far).
        min_far: the smallest FAR the impostor pairs resolve (1 / number of impostor pairs).
        threshold: the cosine-similarity threshold.
        threshold_from: which impostor pairs set it (``"published"``: published vs originals of other identities;
            ``"originals"``: originals vs originals of other identities).
        rank1: fraction of published faces whose nearest gallery face has their identity.
        rank1_chance: the rank-1 rate of a random guess (mean share of the probe's identity in the gallery).
        n_probes, n_gallery, n_impostor: sizes.
    """

    tar: float
    tar_same_identity: float
    far: float
    far_achieved: float
    min_far: float
    threshold: float
    threshold_from: str
    rank1: float
    rank1_chance: float
    n_probes: int
    n_gallery: int
    n_impostor: int

    def __str__(self) -> str:
        return (f"re-identification: TAR@FAR={self.far:g} {self.tar:.3f} (same identity, other photos: "
                f"{self.tar_same_identity:.3f}); rank-1 {self.rank1:.3f} (chance {self.rank1_chance:.3f}); "
                f"threshold {self.threshold:.3f} from {self.threshold_from} impostors, "
                f"{self.n_impostor} impostor pairs (min FAR {self.min_far:.2g})")


@dataclass(frozen=True)
class AttributePreservationResult:
    """Accuracy of an attribute classifier on published images against the originals' labels.

    ``majority`` is the accuracy of always predicting the most frequent label (the chance reference).
    """

    accuracy: dict[str, float] = field(default_factory=dict)
    majority: dict[str, float] = field(default_factory=dict)
    n: dict[str, int] = field(default_factory=dict)

    @property
    def mean_accuracy(self) -> float:
        return float(np.mean(list(self.accuracy.values()))) if self.accuracy else float("nan")

    def __str__(self) -> str:
        parts = [f"{k}: {self.accuracy[k]:.3f} (majority {self.majority[k]:.3f})" for k in self.accuracy]
        return "attribute preservation: " + "; ".join(parts)


# --------------------------------------------------------------------------------------------- helpers
def _check_seed(seed: int) -> int:
    return check_int("seed", seed, minimum=0, maximum=2**63 - 1)


def _check_bootstrap(n_bootstrap: int, confidence: float, seed: int) -> tuple[int, float, int]:
    """``(n_bootstrap >= 0, confidence in (0, 1), seed)`` checked, in that order."""
    n_bootstrap = check_int("n_bootstrap", n_bootstrap, minimum=0)
    return n_bootstrap, check_probability("confidence", confidence), _check_seed(seed)


def _percentile_ci(values: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1.0 - confidence) / 2.0
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1.0 - alpha))


def _resample(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
    """The rows of ``x`` drawn with replacement (as many as it has) by ``g``."""
    return x[torch.randint(0, x.shape[0], (x.shape[0],), generator=g).to(x.device)]


def _bootstrap_ci(n_bootstrap: int, confidence: float, seed: int,
                  replicate: Callable[[torch.Generator], float]) -> tuple[float, float]:
    """Percentile CI of ``n_bootstrap`` values ``replicate(g)``, ``g`` seeded with ``seed``; NaN bounds for 0."""
    if not n_bootstrap:
        return float("nan"), float("nan")
    g = torch.Generator().manual_seed(seed)
    return _percentile_ci(np.array([replicate(g) for _ in range(n_bootstrap)]), confidence)


def features_for_fid(images: torch.Tensor, encoder: Any, *, batch_size: int = 64) -> torch.Tensor:
    """Features of ``images`` for :func:`fid`, as float64 ``(N, D)``.

    ``encoder`` is an :class:`InceptionV3Features` (pool3, the standard FID features), a privkit
    :class:`~privkit.encoders.Encoder` (its unit-norm ``embed``; the offline choice at the default scale), or a
    callable ``(B, 3, H, W)`` in ``[0, 1]`` -> ``(B, D)``. State which one next to the numbers.
    """
    check_image_batch("images", images)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if isinstance(encoder, InceptionV3Features):
        feats = encoder.features(images, batch_size=batch_size)
    elif hasattr(encoder, "embed") and callable(encoder.embed):
        feats = encoder.embed(images, batch_size=batch_size)
    elif callable(encoder):
        with torch.no_grad():
            feats = torch.cat([torch.as_tensor(encoder(images[i : i + batch_size]))
                               for i in range(0, images.shape[0], batch_size)])
    else:
        raise InvalidArgumentError(f"encoder must be an Encoder, InceptionV3Features or a callable, "
                                   f"got {type(encoder).__name__}")
    check_tensor("features", feats, ndim=2)
    return feats.detach().to(F64)


# --------------------------------------------------------------------------------------------- FID
def _sqrt_psd(c: torch.Tensor) -> torch.Tensor:
    w, v = torch.linalg.eigh(c)
    return (v * w.clamp_min(0.0).sqrt()) @ v.T


def frechet_distance(mu1: torch.Tensor, cov1: torch.Tensor, mu2: torch.Tensor, cov2: torch.Tensor) -> float:
    """``||mu1 - mu2||^2 + tr(C1 + C2 - 2 (C1^1/2 C2 C1^1/2)^1/2)`` in float64.

    The matrix square root is taken of the symmetric PSD product ``C1^1/2 C2 C1^1/2`` by ``eigh`` (its trace
    equals ``tr((C1 C2)^1/2)``), which avoids the complex/unstable ``sqrtm`` of the non-symmetric ``C1 C2``;
    negative eigenvalues from rounding are clipped to 0.
    """
    mu1, mu2, cov1, cov2 = (t.to(F64) for t in (mu1, mu2, cov1, cov2))
    s1 = _sqrt_psd(cov1)
    m = s1 @ cov2 @ s1
    m = (m + m.T) / 2
    tr_sqrt = torch.linalg.eigvalsh(m).clamp_min(0.0).sqrt().sum()
    d = float(((mu1 - mu2) ** 2).sum() + torch.trace(cov1) + torch.trace(cov2) - 2.0 * tr_sqrt)
    return max(d, 0.0)


def frechet_distance_from_samples(x1: torch.Tensor, x2: torch.Tensor) -> float:
    """:func:`frechet_distance` of the Gaussian fits (mean, unbiased covariance) of two samples ``(n1, D)`` and
    ``(n2, D)``, in float64, through the samples instead of the ``D x D`` covariances.

    With ``A = (x1 - mu1) / sqrt(n1 - 1)`` and ``B = (x2 - mu2) / sqrt(n2 - 1)``, ``C1 = A^T A`` and ``C2 = B^T B``;
    the non-zero eigenvalues of ``C1^1/2 C2 C1^1/2`` (those of ``C1 C2``) are the squared singular values of the
    ``n1 x n2`` matrix ``A B^T``, so ``tr((C1^1/2 C2 C1^1/2)^1/2)`` is its nuclear norm, and ``tr(C) = ||A||_F^2``.
    Exact (up to rounding) and much cheaper than two ``D x D`` eigendecompositions when ``n1, n2 << D`` (e.g. a
    few hundred images in a 1280-D feature space). Needs ``n1, n2 >= 2``.
    """
    a, b = x1.to(F64), x2.to(F64)
    if a.shape[0] < 2 or b.shape[0] < 2:
        raise InsufficientDataError("need at least 2 rows in each sample to fit a covariance")
    mu1, mu2 = a.mean(dim=0), b.mean(dim=0)
    a = (a - mu1) / math.sqrt(a.shape[0] - 1)
    b = (b - mu2) / math.sqrt(b.shape[0] - 1)
    nuclear = torch.linalg.svdvals(a @ b.T).sum()
    d = float(((mu1 - mu2) ** 2).sum() + (a * a).sum() + (b * b).sum() - 2.0 * nuclear)
    return max(d, 0.0)


def _fd(xr: torch.Tensor, xf: torch.Tensor) -> float:
    """Fréchet distance of two samples by the cheaper exact route (samples when both are smaller than D)."""
    if max(xr.shape[0], xf.shape[0]) <= xr.shape[1]:
        return frechet_distance_from_samples(xr, xf)
    return frechet_distance(*_gaussian_fit(xr), *_gaussian_fit(xf))


def _gaussian_fit(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mu = x.mean(dim=0)
    xc = x - mu
    return mu, xc.T @ xc / (x.shape[0] - 1)


def fid(real_features: torch.Tensor, fake_features: torch.Tensor, *, n_bootstrap: int = 100, confidence: float = 0.95,
        seed: int = 0) -> FIDResult:
    """Fréchet distance between Gaussian fits of real and fake features, with a bootstrap CI.

    Args:
        real_features: ``(N_r, D)`` features of real images (e.g. :func:`features_for_fid`).
        fake_features: ``(N_f, D)`` features of published/generated images, same ``D``.
        n_bootstrap: bootstrap replicates (both sets resampled with replacement); 0 skips the CI. Each replicate
            costs two ``D x D`` eigendecompositions, or one SVD of an ``n_real x n_fake`` matrix when both sets
            are smaller than ``D`` (:func:`frechet_distance_from_samples`, the same value up to rounding).
        confidence: level of the percentile CI, in ``(0, 1)``.
        seed: seed of the bootstrap.

    Returns:
        A :class:`FIDResult`.

    Raises:
        ShapeError, InvalidArgumentError, InsufficientDataError: bad shapes, non-finite values, fewer than 2 rows.
    """
    check_tensor("real_features", real_features, ndim=2)
    check_tensor("fake_features", fake_features, shape=(None, real_features.shape[1]))
    for name, x in (("real_features", real_features), ("fake_features", fake_features)):
        check_min_count(name, x.shape[0], 2, "rows to fit a covariance")
    n_bootstrap, confidence, seed = _check_bootstrap(n_bootstrap, confidence, seed)
    xr = real_features.detach().to(F64)
    xf = fake_features.detach().to(device=xr.device, dtype=F64)
    lo, hi = _bootstrap_ci(n_bootstrap, confidence, seed, lambda g: _fd(_resample(xr, g), _resample(xf, g)))
    return FIDResult(value=_fd(xr, xf), ci_low=lo, ci_high=hi, confidence=confidence, n_real=int(xr.shape[0]),
                     n_fake=int(xf.shape[0]), dim=int(xr.shape[1]))


# --------------------------------------------------------------------------------------------- IS
def _is_splits(p: torch.Tensor, splits: int) -> list[float]:
    scores = []
    for chunk in torch.tensor_split(p, splits, dim=0):
        py = chunk.mean(dim=0, keepdim=True)
        kl = (torch.xlogy(chunk, chunk) - torch.xlogy(chunk, py.expand_as(chunk))).sum(dim=1)
        scores.append(float(torch.exp(kl.mean())))
    return scores


def inception_score(probs: torch.Tensor, *, splits: int = 10, n_bootstrap: int = 0, confidence: float = 0.95,
                    seed: int = 0) -> InceptionScoreResult:
    """Inception Score ``exp(E_x KL(p(y|x) || p(y)))`` per split (contiguous chunks), mean and std over splits.

    Args:
        probs: ``(N, K)`` class probabilities (rows sum to 1, tolerance 1e-3), e.g. a classifier's softmax on the
            published images.
        splits: number of splits, ``1 <= splits <= N`` (10 in the original and in the paper).
        n_bootstrap: bootstrap replicates of the mean over splits (images resampled with replacement, then split
            as above); 0 skips the CI.
        confidence: level of the percentile CI, in ``(0, 1)``.
        seed: seed of the bootstrap.

    Returns:
        An :class:`InceptionScoreResult`. Uniform predictions give 1; confident predictions spread evenly over
        ``K`` classes give ``K``.
    """
    check_tensor("probs", probs, ndim=2, floating=True)
    n, k = probs.shape
    if k < 1:
        raise ShapeError(f"probs must have at least one class column, got shape {tuple(probs.shape)}")
    splits = check_int("splits", splits, minimum=1)
    if n < splits:
        raise InsufficientDataError(f"probs: need at least splits={splits} rows, got {n}")
    p = probs.detach().to(F64)
    if bool((p < 0).any()):
        raise InvalidArgumentError("probs must be non-negative")
    worst = float((p.sum(dim=1) - 1.0).abs().max())
    if worst > 1e-3:
        raise InvalidArgumentError(f"probs rows must sum to 1 (tolerance 1e-3); the worst row is off by {worst:.3g}")
    n_bootstrap, confidence, seed = _check_bootstrap(n_bootstrap, confidence, seed)
    p = p / p.sum(dim=1, keepdim=True)
    scores = _is_splits(p, splits)
    arr = np.asarray(scores)
    lo, hi = _bootstrap_ci(n_bootstrap, confidence, seed, lambda g: np.mean(_is_splits(_resample(p, g), splits)))
    return InceptionScoreResult(mean=float(arr.mean()), std=float(arr.std()), split_scores=tuple(scores),
                                ci_low=lo, ci_high=hi, confidence=confidence if n_bootstrap else float("nan"))


# --------------------------------------------------------------------------------------------- Inception-v3
#: Accepted Inception-v3 weight files (ImageNet, torchvision's architecture), in order of preference:
#: torchvision's ``IMAGENET1K_V1`` state dict as published, or the same state dict as safetensors / .pth.
INCEPTION_WEIGHT_FILES: tuple[str, ...] = ("inception_v3_google-0cc3c7bd.pth", "inception_v3.safetensors",
                                            "inception_v3.pth")
_INCEPTION_HOW_TO = (
    "Download torchvision's Inception-v3 ImageNet weights (torchvision.models.Inception_V3_Weights.IMAGENET1K_V1, "
    "https://download.pytorch.org/models/inception_v3_google-0cc3c7bd.pth) on a machine with network access and "
    "put the file there, or pass weights=<file>. Note: these are not the TF-Inception weights of the original FID "
    "code, so absolute values differ slightly from published FIDs."
)


class InceptionV3Features(nn.Module):
    """Inception-v3 (torchvision architecture, ImageNet weights) giving pool3 features and class probabilities.

    Images in ``[0, 1]`` are resized to 299x299 (bilinear, antialiased) and normalised with the ImageNet mean/std
    (torchvision's ``transform_input`` converts to the weights' own normalisation).
    """

    def __init__(self, net: nn.Module):
        super().__init__()
        self.fc = net.fc
        net.fc = nn.Identity()
        self.net = net.eval()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1), persistent=False)

    @property
    def device(self) -> torch.device:
        return self.mean.device

    def _prep(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.device, torch.float32)
        x = resize(x, 299).clamp(0, 1)
        return (x - self.mean) / self.std

    @torch.no_grad()
    def features(self, images: torch.Tensor, *, batch_size: int = 64) -> torch.Tensor:
        """``(N, 2048)`` pool3 features (float32, on the model's device)."""
        check_image_batch("images", images)
        return torch.cat([self.net(self._prep(images[i : i + batch_size]))
                          for i in range(0, images.shape[0], batch_size)])

    @torch.no_grad()
    def probs(self, images: torch.Tensor, *, batch_size: int = 64) -> torch.Tensor:
        """``(N, 1000)`` ImageNet class probabilities (for :func:`inception_score`)."""
        feats = self.features(images, batch_size=batch_size)
        return torch.softmax(self.fc(feats), dim=1)


def _weight_files(folders: list[Path]) -> list[Path]:
    """The files of :data:`INCEPTION_WEIGHT_FILES` that exist in ``folders``, in search order."""
    return [d / f for d in folders for f in INCEPTION_WEIGHT_FILES if (d / f).is_file()]


def _find_inception(weights: str | Path | None, data_root: str | Path | None) -> Path:
    if weights is not None:
        w = Path(weights).expanduser()
        found = [w] if w.is_file() else _weight_files([w])
        if not found:
            raise MissingResourceError("Inception-v3 ImageNet weights", expected_at=str(w),
                                       how_to_get=_INCEPTION_HOW_TO)
        return found[0]
    from ..encoders.paper_scale import weights_cache_root

    dirs = [] if data_root is None else [Path(data_root).expanduser() / "weights" / "inception-v3"]
    dirs.append(weights_cache_root() / "weights" / "inception-v3")
    found = _weight_files(dirs)
    if not found:
        raise MissingResourceError(f"Inception-v3 ImageNet weights (one of {', '.join(INCEPTION_WEIGHT_FILES)})",
                                   expected_at=" or ".join(str(d) for d in dirs), how_to_get=_INCEPTION_HOW_TO)
    return found[0]


def load_inception(*, weights: str | Path | None = None, data_root: str | Path | None = None,
                   device: str | torch.device = "cpu") -> InceptionV3Features:
    """Load Inception-v3 for FID/IS at the paper scale, only from weights the reader supplied.

    Searched: ``weights`` (a file or folder), then ``<data_root>/weights/inception-v3/``, then
    ``build/cache/weights/inception-v3/`` of the checkout, for one of :data:`INCEPTION_WEIGHT_FILES`. State dicts
    are read with safetensors or ``torch.load(..., weights_only=True)``, never unpickled.

    Raises:
        MissingResourceError: no weight file found (nothing is ever downloaded).
        InvalidArgumentError: the file is not an Inception-v3 state dict.
    """
    from torchvision.models import inception_v3

    path = _find_inception(weights, data_root)
    import pickle

    from safetensors import SafetensorError

    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(str(path))
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, ValueError, OSError, EOFError, pickle.UnpicklingError, SafetensorError) as err:
        raise WeightFileError(f"{path} cannot be read as a torchvision Inception-v3 state dict (safetensors, or a "
                              f"torch.save file read with weights_only=True): {type(err).__name__}: {err}") from None
    if not isinstance(state, Mapping):
        raise WeightFileError(f"{path} does not hold a state dict")
    has_aux = any(k.startswith("AuxLogits.") for k in state)
    with torch.device("meta"):
        net = inception_v3(weights=None, aux_logits=has_aux, init_weights=False, transform_input=True)
    try:
        net.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as err:
        raise WeightFileError(f"{path} is not a torchvision Inception-v3 state dict: {err}") from None
    if has_aux:
        net.aux_logits = False
        net.AuxLogits = None
    return InceptionV3Features(net).to(resolve_device(device)).eval()


# --------------------------------------------------------------------------------------------- privacy
def _check_embeddings(name: str, e: Any, n: int | None = None) -> torch.Tensor:
    check_tensor(name, e, ndim=2, floating=True)
    if n is not None and e.shape[0] != n:
        raise ShapeError(f"{name} must have {n} rows, got {e.shape[0]}")
    if e.shape[0] == 0:
        raise InsufficientDataError(f"{name} is empty")
    return F.normalize(e.detach().to("cpu", F64), dim=1, eps=1e-12)


def identity_distance_from_embeddings(original_embeddings: torch.Tensor, published_embeddings: torch.Tensor, *,
                                      identities: torch.Tensor | None = None, n_bootstrap: int = 1000,
                                      confidence: float = 0.95, seed: int = 0) -> IdentityDistanceResult:
    """:func:`identity_distance` from precomputed embeddings ``(N, D)`` (rows are L2-normalised here).

    Lets a notebook embed the originals once and reuse them across an epsilon sweep.
    """
    eo = _check_embeddings("original_embeddings", original_embeddings)
    ep = _check_embeddings("published_embeddings", published_embeddings, eo.shape[0])
    if ep.shape[1] != eo.shape[1]:
        raise ShapeError(f"published_embeddings must have {eo.shape[1]} columns, got {ep.shape[1]}")
    n_bootstrap, confidence, seed = _check_bootstrap(n_bootstrap, confidence, seed)
    if identities is not None:
        check_tensor("identities", identities, shape=(eo.shape[0],))
    dist = (1.0 - (eo * ep).sum(dim=1)).clamp_min(0.0)
    if identities is None:
        replicate = lambda g: float(_resample(dist, g).mean())  # noqa: E731
    else:  # cluster bootstrap over identities
        _, groups = torch.unique(identities.detach().cpu(), return_inverse=True)
        k = int(groups.max()) + 1
        sums = torch.zeros(k, dtype=F64).index_add_(0, groups, dist)
        counts = torch.zeros(k, dtype=F64).index_add_(0, groups, torch.ones_like(dist))

        def replicate(g: torch.Generator) -> float:
            pick = torch.randint(0, k, (k,), generator=g)
            return float(sums[pick].sum() / counts[pick].sum())
    lo, hi = _bootstrap_ci(n_bootstrap, confidence, seed, replicate)
    return IdentityDistanceResult(per_image=dist, mean=float(dist.mean()), ci_low=lo, ci_high=hi, confidence=confidence)


def _check_pair(originals: Any, published: Any) -> int:
    """Check two image batches with one published row per original; their number of rows."""
    check_image_batch("originals", originals)
    check_image_batch("published", published)
    if published.shape[0] != originals.shape[0]:
        raise ShapeError(f"published must have as many rows as originals ({originals.shape[0]}), "
                         f"got {published.shape[0]}")
    return originals.shape[0]


def identity_distance(originals: torch.Tensor, published: torch.Tensor, encoder: Any, *,
                      identities: torch.Tensor | None = None, n_bootstrap: int = 1000, confidence: float = 0.95,
                      seed: int = 0, batch_size: int = 64) -> IdentityDistanceResult:
    """``1 - cos(phi(x_i), phi(x_pub_i))`` per image, its mean and a bootstrap CI (higher = more private).

    Args:
        originals: ``(N, 3, H, W)`` in ``[0, 1]``.
        published: ``(N, 3, H', W')`` in ``[0, 1]``, row ``i`` published from ``originals[i]``.
        encoder: a face-recognition :class:`~privkit.encoders.Encoder` (e.g. ``dlib-resnet-fr``) or a callable
            images -> features.
        identities: optional ``(N,)`` identity labels; when given the bootstrap resamples identities (cluster
            bootstrap), else images.
        n_bootstrap: bootstrap replicates (0: no CI, NaN bounds).
        confidence: CI level in ``(0, 1)``.
        seed: bootstrap seed.
        batch_size: images per encoder call.
    """
    if _check_pair(originals, published) == 0:
        raise InsufficientDataError("originals is empty")
    eo = embed_images(encoder, originals, batch_size=batch_size, dtype=F64, name="originals")
    ep = embed_images(encoder, published, batch_size=batch_size, dtype=F64, name="published")
    return identity_distance_from_embeddings(eo, ep, identities=identities, n_bootstrap=n_bootstrap,
                                             confidence=confidence, seed=seed)


def _threshold_at_far(impostor: torch.Tensor, far: float) -> tuple[float, float]:
    """Threshold ``t`` with ``P[impostor > t] <= far`` (accept when score > t) and the achieved rate."""
    s = torch.sort(impostor, descending=True).values
    k = int(math.floor(far * s.numel() + 1e-9))
    t = float(s[-1]) - 1.0 if k >= s.numel() else float(s[k])
    achieved = float((impostor > t).to(F64).mean())
    return t, achieved


def reidentification_from_embeddings(original_embeddings: torch.Tensor, published_embeddings: torch.Tensor, *,
                                     identities: torch.Tensor, far: float = 1e-3,
                                     gallery_embeddings: torch.Tensor | None = None,
                                     gallery_identities: torch.Tensor | None = None,
                                     threshold_from: Literal["published", "originals"] = "published",
                                     ) -> ReidentificationResult:
    """:func:`reidentification_rate` from precomputed embeddings (rows are L2-normalised here)."""
    eo = _check_embeddings("original_embeddings", original_embeddings)
    n = eo.shape[0]
    ep = _check_embeddings("published_embeddings", published_embeddings, n)
    check_tensor("identities", identities, shape=(n,))
    far = check_probability("far", far)
    check_choice("threshold_from", threshold_from, ("published", "originals"))
    if gallery_embeddings is None:
        if gallery_identities is not None:
            raise InvalidArgumentError("gallery_identities given without a gallery")
        eg, gids = eo, identities.detach().cpu().long()
    else:
        eg = _check_embeddings("gallery_embeddings", gallery_embeddings)
        if gallery_identities is None:
            raise InvalidArgumentError("a gallery needs gallery_identities (one label per gallery image)")
        check_tensor("gallery_identities", gallery_identities, shape=(eg.shape[0],))
        gids = gallery_identities.detach().cpu().long()
    for name, e in (("published_embeddings", ep), ("gallery embeddings", eg)):
        if e.shape[1] != eo.shape[1]:
            raise ShapeError(f"{name} must have {eo.shape[1]} columns, got {e.shape[1]}")
    ids = identities.detach().cpu().long()
    if int(ids.unique().numel()) < 2:
        raise InsufficientDataError("identities: need at least 2 distinct identities for impostor pairs")
    scores = ep @ eo.T  # (published, originals)
    same = ids[:, None] == ids[None, :]
    if threshold_from == "published":
        impostor = scores[~same]
    else:
        upper = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        impostor = (eo @ eo.T)[upper & ~same]
    n_imp = int(impostor.numel())
    min_far = 1.0 / n_imp
    if far < min_far * (1 - 1e-9):
        raise InsufficientDataError(f"far={far:g} is below the resolution of the {n_imp} impostor pairs (smallest "
                                    f"resolvable FAR {min_far:.3g}); use more identities/images or a larger far")
    t, achieved = _threshold_at_far(impostor, far)
    tar = float((torch.diagonal(scores) > t).to(F64).mean())
    other = same & ~torch.eye(n, dtype=torch.bool)
    tar_same = float((scores[other] > t).to(F64).mean()) if bool(other.any()) else float("nan")
    nearest = (ep @ eg.T).argmax(dim=1)
    rank1 = float((gids[nearest] == ids).to(F64).mean())
    chance = float((ids[:, None] == gids[None, :]).to(F64).mean(dim=1).mean())
    return ReidentificationResult(tar=tar, tar_same_identity=tar_same, far=far, far_achieved=achieved, min_far=min_far,
                                  threshold=t, threshold_from=threshold_from, rank1=rank1, rank1_chance=chance,
                                  n_probes=n, n_gallery=int(eg.shape[0]), n_impostor=n_imp)


def reidentification_rate(originals: torch.Tensor, published: torch.Tensor, encoder: Any, *, identities: torch.Tensor,
                          far: float = 1e-3, gallery: torch.Tensor | None = None,
                          gallery_identities: torch.Tensor | None = None,
                          threshold_from: Literal["published", "originals"] = "published",
                          batch_size: int = 64) -> ReidentificationResult:
    """The attacker's view: can published faces be linked to their identities?

    Verification: the cosine similarity of every (published_i, original_j) pair is computed; the threshold is set
    at ``far`` on impostor pairs (different identities) and TAR is the acceptance rate of the source pairs
    (published_i, original_i), and separately of the other same-identity pairs. Following
    ``docs/synthesisnet.md`` §7, a FAR below the resolution of the impostor pairs (``1 / n_impostor``) is refused,
    never reported.

    Identification: each published face is matched to its nearest ``gallery`` face (default: the originals, i.e.
    the attacker holds the source photos — the strongest case); rank-1 is the fraction matched to its identity.

    Args:
        originals: ``(N, 3, H, W)`` in ``[0, 1]``.
        published: ``(N, 3, H', W')`` in ``[0, 1]``, row ``i`` published from ``originals[i]``.
        encoder: face-recognition :class:`~privkit.encoders.Encoder` or a callable images -> features.
        identities: ``(N,)`` identity labels of the originals (and so of the published rows).
        far: target false-accept rate in ``(0, 1)``.
        gallery: optional ``(M, 3, H'', W'')`` gallery images in ``[0, 1]``; needs ``gallery_identities``.
        gallery_identities: ``(M,)`` labels of ``gallery``.
        threshold_from: ``"published"`` (impostor pairs published vs originals of other identities: an attacker who
            knows the score distribution of published faces; default) or ``"originals"`` (impostors among the
            originals: a matcher calibrated on real faces).
        batch_size: images per encoder call.

    Raises:
        InsufficientDataError: fewer than 2 identities, or ``far < 1 / n_impostor``.
    """
    n = _check_pair(originals, published)
    if gallery is None and gallery_identities is not None:
        raise InvalidArgumentError("gallery_identities given without gallery")
    if gallery is not None:
        check_image_batch("gallery", gallery)
        if gallery_identities is None:
            raise InvalidArgumentError("gallery needs gallery_identities (one label per gallery image)")
        check_tensor("gallery_identities", gallery_identities, shape=(gallery.shape[0],))
        if gallery.shape[0] == 0:
            raise InsufficientDataError("gallery is empty")
    check_tensor("identities", identities, shape=(n,))
    far = check_probability("far", far)
    check_choice("threshold_from", threshold_from, ("published", "originals"))
    eo = embed_images(encoder, originals, batch_size=batch_size, dtype=F64, name="originals")
    ep = embed_images(encoder, published, batch_size=batch_size, dtype=F64, name="published")
    eg = None if gallery is None else embed_images(encoder, gallery, batch_size=batch_size, dtype=F64, name="gallery")
    return reidentification_from_embeddings(eo, ep, identities=identities, far=far, gallery_embeddings=eg,
                                            gallery_identities=gallery_identities, threshold_from=threshold_from)


def attribute_preservation(published: torch.Tensor, labels: torch.Tensor | Mapping[str, torch.Tensor],
                           classifier: Callable[[torch.Tensor], Any], *,
                           batch_size: int = 64) -> AttributePreservationResult:
    """Accuracy of ``classifier`` on the published images against the original images' attribute labels.

    Args:
        published: ``(N, 3, H, W)`` in ``[0, 1]``.
        labels: ``(N,)`` int labels of one attribute, or a dict name -> ``(N,)`` labels; negative labels are
            ignored (unknown).
        classifier: callable mapping a ``(B, 3, H, W)`` batch to logits ``(B, k)`` (one attribute), a dict
            name -> logits, or a sequence of logits in the order of ``labels``. It should be trained on real images
            independently of the publishing model.
        batch_size: images per classifier call.
    """
    check_image_batch("published", published)
    if not callable(classifier):
        raise InvalidArgumentError(f"classifier must be callable, got {type(classifier).__name__}")
    lab = {"attribute": labels} if isinstance(labels, torch.Tensor) else dict(labels)
    if not lab:
        raise InsufficientDataError("labels: need at least one attribute")
    for k, v in lab.items():
        check_tensor(f"labels[{k!r}]", v, shape=(published.shape[0],))
    names = list(lab)
    outs: dict[str, list[torch.Tensor]] = {k: [] for k in names}
    batch_size = check_int("batch_size", batch_size, minimum=1)
    with torch.no_grad():
        for i in range(0, published.shape[0], batch_size):
            out = classifier(published[i : i + batch_size])
            if isinstance(out, torch.Tensor):
                if len(names) != 1:
                    raise InvalidArgumentError("classifier returned one tensor but labels name several attributes")
                out = {names[0]: out}
            elif isinstance(out, Mapping):
                missing = [k for k in names if k not in out]
                if missing:
                    raise InvalidArgumentError(f"classifier output lacks attributes {missing}")
            elif isinstance(out, Sequence):
                if len(out) != len(names):
                    raise InvalidArgumentError(f"classifier returned {len(out)} outputs for {len(names)} attributes")
                out = dict(zip(names, out))
            else:
                raise InvalidArgumentError(f"classifier must return logits, got {type(out).__name__}")
            for k in names:
                outs[k].append(torch.as_tensor(out[k]).detach().cpu())
    acc, maj, cnt = {}, {}, {}
    for k in names:
        logits = torch.cat(outs[k])
        check_tensor(f"classifier logits for {k!r}", logits, shape=(published.shape[0], None))
        y = lab[k].detach().cpu().long()
        keep = y >= 0
        if not bool(keep.any()):
            raise InsufficientDataError(f"labels[{k!r}] has no known (>= 0) label")
        acc[k] = float((logits.argmax(dim=1)[keep] == y[keep]).to(F64).mean())
        maj[k] = float(torch.bincount(y[keep]).max()) / int(keep.sum())
        cnt[k] = int(keep.sum())
    return AttributePreservationResult(accuracy=acc, majority=maj, n=cnt)
