"""Face-versus-context attribution: FCR, FII, CPI(σ) and B* (paper 1, docs/isp.md §4).

The paper's formulas were not recovered. Everything below except FCR is **privkit's definition** ([I] in
docs/isp.md §4), built on the paper's stated principle that face and context are compared with *equal-area,
equal-strength* perturbations:

* Perturbation T_σ(x, R) (:func:`perturb_region`): pixels in region R are replaced by the Gaussian blur of the image
  (standard deviation σ pixels, kernel radius ⌈3σ⌉, reflect padding, the same kernel everywhere), or — ``kind="fill"``
  — by the image's per-channel mean colour. Face and context regions always get the same σ / fill.
* Equal-area context region (:func:`equal_area_context_regions`): for face mask F with area a, a compact region of
  exactly a background pixels: the a pixels outside the dilated face mask that are nearest to a random background
  seed pixel (random tie-breaking). Several such regions per image are averaged.
* FCR(x) = |F| / |x| (:func:`face_coverage_ratio`).
* FII(x) = Δ_face − Δ_ctx with Δ_R = 1 − cos(z(x), z(T_σ(x, R))), in [−2, 2], and the normalised
  FII_n = (Δ_face − Δ_ctx)/(Δ_face + Δ_ctx) in [−1, 1]; positive means the face matters more
  (:func:`face_importance_index`, binned by FCR with :func:`summarise_by_fcr`).
* CPI(σ) (:func:`context_preference_curve`): blur the face of a query q (identity A, context c) with σ; candidate 1 is
  an image sharing q's context with a different identity, candidate 2 another image of A in a different context;
  CPI(σ) = Pr[cos(q, cand₁) > cos(q, cand₂)] (ties count ½). Above 0.5 means context-preferring.
* B* (:func:`background_dominance`): composites keep the face of image x_A (identity A) and reveal a fraction β of the
  context of an image y (identity B ≠ A), growing as a compact region from a random seed pixel, the rest a neutral
  grey. B* of a pair is the smallest β on the grid at which cos(z(composite), z(y)) > cos(z(composite), t_A), with
  t_A the normalised mean embedding of A's other images; ∞ if it never happens. B* is the median over pairs; small B*
  means the context dominates.

Encoders are anything with ``embed(images)`` (a privkit :class:`~privkit.encoders.base.Encoder`) or any callable
mapping (N, 3, H, W) images in [0, 1] to (N, D) embeddings; outputs are L2-normalised here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Union

import pandas as pd
import torch

from .._validate import (check_choice, check_image_batch, check_int, check_nonnegative, check_probability, check_real,
                         check_tensor)
from ..errors import InsufficientDataError, InvalidArgumentError, ShapeError
from ..encoders.base import embed_images
from ..transforms import gaussian_blur

__all__ = ["EncoderLike", "face_coverage_ratio", "perturb_region", "equal_area_context_regions",
           "face_importance_index", "summarise_by_fcr", "context_preference_curve", "BStarResult",
           "background_dominance"]

EncoderLike = Union[Callable[[torch.Tensor], torch.Tensor], torch.nn.Module]


# ---------------------------------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------------------------------
def _check_images(images: torch.Tensor, name: str = "images") -> torch.Tensor:
    return check_image_batch(name, images, unit_range=False)


def _check_masks(masks: torch.Tensor, images: torch.Tensor | None = None, name: str = "masks") -> torch.Tensor:
    """(N, 1, H, W) or (N, H, W) masks -> (N, 1, H, W) bool."""
    check_tensor(name, masks, ndim=(3, 4))
    if masks.ndim == 3:
        masks = masks[:, None]
    if masks.shape[1] != 1:
        raise ShapeError(f"{name} must have shape (N, 1, H, W) or (N, H, W), got {tuple(masks.shape)}")
    if images is not None and (masks.shape[0] != images.shape[0] or masks.shape[-2:] != images.shape[-2:]):
        raise ShapeError(f"{name} must match images: expected ({images.shape[0]}, 1, {images.shape[2]}, "
                         f"{images.shape[3]}), got {tuple(masks.shape)}")
    return masks > 0.5 if masks.is_floating_point() else masks.bool()


def _check_labels(name: str, labels: torch.Tensor, n: int) -> torch.Tensor:
    check_tensor(name, labels, shape=(n,))
    if labels.is_floating_point():
        raise InvalidArgumentError(f"{name} must be an integer tensor, got dtype {labels.dtype}")
    return labels.to(torch.int64)


def face_coverage_ratio(masks: torch.Tensor) -> torch.Tensor:
    """FCR: the fraction of pixels covered by the face mask, per image. (N, 1, H, W) or (N, H, W) → (N,) float32."""
    return _check_masks(masks).flatten(1).float().mean(1)


# ---------------------------------------------------------------------------------------------------------------------
# Perturbations and regions
# ---------------------------------------------------------------------------------------------------------------------
def perturb_region(images: torch.Tensor, regions: torch.Tensor, *, kind: Literal["blur", "fill"] = "blur",
                   sigma: float = 4.0) -> torch.Tensor:
    """T_σ(x, R): replace the pixels of ``regions`` by the blurred image (``"blur"``) or the mean colour (``"fill"``).

    Args:
        images: (N, 3, H, W) in [0, 1].
        regions: (N, 1, H, W) or (N, H, W) boolean region masks.
        kind: ``"blur"`` (Gaussian, std ``sigma`` px) or ``"fill"`` (per-image, per-channel mean colour).
        sigma: blur strength in pixels (ignored for ``"fill"``).
    """
    _check_images(images)
    r = _check_masks(regions, images, "regions").to(images.dtype)
    kind = check_choice("kind", kind, ("blur", "fill"))
    if kind == "blur":
        repl = gaussian_blur(images, sigma, clip_radius=True)
    else:
        repl = images.mean(dim=(2, 3), keepdim=True).expand_as(images)
    return r * repl + (1 - r) * images


def _dilate(masks: torch.Tensor, pixels: int) -> torch.Tensor:
    if pixels == 0:
        return masks
    return torch.nn.functional.max_pool2d(masks.float(), 2 * pixels + 1, stride=1, padding=pixels) > 0.5


def _grow_regions(allowed: torch.Tensor, sizes: torch.Tensor, *,
                  generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row: ``sizes[i]`` allowed pixels nearest to a random allowed seed pixel. Returns (regions, pixel ranks).

    ``allowed``: (B, 1, H, W) bool; ``sizes``: (B,) int64. Rows without enough allowed pixels get an empty region.
    The ranks (B, H, W) order every allowed pixel by its distance to the seed (inf elsewhere), for nested growth.
    """
    b, _, h, w = allowed.shape
    flat = allowed.reshape(b, h * w)
    # random seed pixel among the allowed ones (rows with none get pixel 0 and are discarded below)
    u = torch.rand(b, h * w, generator=generator).to(allowed.device)
    seed = torch.where(flat, u, torch.full_like(u, -1.0)).argmax(1)
    yy, xx = torch.meshgrid(torch.arange(h, device=allowed.device), torch.arange(w, device=allowed.device), indexing="ij")
    yy, xx = yy.reshape(-1).float(), xx.reshape(-1).float()
    dist = (yy[None] - yy[seed][:, None]) ** 2 + (xx[None] - xx[seed][:, None]) ** 2
    jitter = torch.rand(b, h * w, generator=generator).to(allowed.device) * 1e-3
    dist = torch.where(flat, dist + jitter, torch.full_like(dist, math.inf))
    order = torch.argsort(dist, dim=1)
    ranks = torch.empty_like(order).scatter_(1, order, torch.arange(h * w, device=allowed.device).expand(b, -1))
    ranks = torch.where(flat, ranks.float(), torch.full_like(dist, math.inf))
    region = (ranks < sizes[:, None].float()) & (flat.sum(1) >= sizes)[:, None]
    return region.reshape(b, 1, h, w), ranks.reshape(b, h, w)


def equal_area_context_regions(masks: torch.Tensor, *, n_regions: int = 4, dilation: int = 2,
                               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random compact background regions with exactly the face's area (privkit's definition).

    Each region is the |F| pixels outside the face mask dilated by ``dilation`` pixels that are nearest to a random
    seed pixel of that background (random tie-breaks).

    Args:
        masks: (N, 1, H, W) or (N, H, W) face masks.
        n_regions: regions per image.
        dilation: pixels of margin kept between the face and the context regions.
        generator: seeds the seed pixels.

    Returns:
        (regions, valid): (N, n_regions, 1, H, W) bool regions and (N, n_regions) bool; a region is invalid (and
        empty) when the background has fewer than |F| pixels, or the face mask is empty.
    """
    m = _check_masks(masks)
    n_regions = check_int("n_regions", n_regions, minimum=1)
    dilation = check_int("dilation", dilation, minimum=0)
    n, _, h, w = m.shape
    rep_allowed = (~_dilate(m, dilation)).repeat_interleave(n_regions, 0)
    rep_area = m.flatten(1).sum(1).repeat_interleave(n_regions)
    regions, _ = _grow_regions(rep_allowed, rep_area, generator=generator)
    valid = (rep_allowed.flatten(1).sum(1) >= rep_area) & (rep_area > 0)
    return regions.reshape(n, n_regions, 1, h, w), valid.reshape(n, n_regions)


# ---------------------------------------------------------------------------------------------------------------------
# FII
# ---------------------------------------------------------------------------------------------------------------------
@torch.no_grad()
def face_importance_index(encoder: EncoderLike, images: torch.Tensor, masks: torch.Tensor, *,
                          kind: Literal["blur", "fill"] = "blur", sigma: float = 4.0, n_context_regions: int = 4,
                          dilation: int = 2, seed: int = 0, batch_size: int = 64) -> pd.DataFrame:
    """FII per image: Δ_face − Δ_ctx with equal-area, equal-strength perturbations (privkit's definition).

    Args:
        encoder: encoder-like object (see the module docstring).
        images: (N, 3, H, W) in [0, 1].
        masks: (N, 1, H, W) face masks.
        kind, sigma: the perturbation (same for face and context).
        n_context_regions: random equal-area context regions averaged per image.
        dilation: margin between face and context regions.
        seed: seeds the context regions.

    Returns:
        DataFrame, one row per image: fcr, delta_face, delta_context (mean over valid regions), delta_context_sd,
        n_context_regions, fii, fii_normalised. Images without a valid context region (face larger than the
        background) get NaN deltas for the context and FII.
    """
    _check_images(images)
    m = _check_masks(masks, images)
    n = images.shape[0]
    if n == 0:
        raise InsufficientDataError("images: need at least 1 image, got 0")
    gen = torch.Generator().manual_seed(int(seed))
    regions, valid = equal_area_context_regions(m, n_regions=n_context_regions, dilation=dilation, generator=gen)
    z = embed_images(encoder, images, batch_size=batch_size)
    z_face = embed_images(encoder, perturb_region(images, m, kind=kind, sigma=sigma), batch_size=batch_size)
    delta_face = (1 - (z * z_face).sum(1)).clamp(0, 2)  # clamp float rounding of cos to [-1, 1]
    deltas = torch.full((n, n_context_regions), math.nan)
    for j in range(n_context_regions):
        zc = embed_images(encoder, perturb_region(images, regions[:, j], kind=kind, sigma=sigma), batch_size=batch_size)
        deltas[:, j] = (1 - (z * zc).sum(1)).clamp(0, 2).cpu()
    deltas = torch.where(valid.cpu(), deltas, torch.full_like(deltas, math.nan))
    n_valid = valid.sum(1).cpu()
    delta_ctx = deltas.nansum(1) / n_valid.clamp(min=1)
    delta_ctx = torch.where(n_valid > 0, delta_ctx, torch.full_like(delta_ctx, math.nan))
    sd = torch.tensor([float(row[~torch.isnan(row)].std()) if int(c) > 1 else math.nan for row, c in zip(deltas, n_valid)])
    df_, dc = delta_face.cpu().double(), delta_ctx.double()
    fii, denom = df_ - dc, df_ + dc
    fii_n = torch.where(denom > 0, fii / denom.clamp(min=1e-300), torch.full_like(fii, math.nan))
    return pd.DataFrame({"fcr": face_coverage_ratio(m).cpu().double().numpy(), "delta_face": df_.numpy(),
                         "delta_context": dc.numpy(), "delta_context_sd": sd.double().numpy(),
                         "n_context_regions": n_valid.numpy(), "fii": fii.numpy(), "fii_normalised": fii_n.numpy()})


def summarise_by_fcr(table: pd.DataFrame, *, bins: int | Sequence[float] = 4,
                     columns: Sequence[str] = ("fii", "fii_normalised")) -> pd.DataFrame:
    """Mean, standard error and count of ``columns`` per FCR bin (so faces of similar size are compared).

    Args:
        table: a DataFrame with an ``fcr`` column (e.g. from :func:`face_importance_index`).
        bins: number of equal-count (quantile) bins, or explicit bin edges.
        columns: value columns to summarise (NaN rows are dropped per column).

    Returns:
        DataFrame with fcr_bin, fcr_low, fcr_high (the bin edges; images outside explicit edges are dropped), and
        for each column c: c_mean, c_sem, c_n.
    """
    if "fcr" not in table.columns:
        raise InvalidArgumentError("table must have an 'fcr' column")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InvalidArgumentError(f"columns {missing} are not in table (available: {list(table.columns)})")
    fcr = table["fcr"].astype(float)
    if isinstance(bins, int):
        bins = check_int("bins", bins, minimum=1)
        codes, edges = pd.qcut(fcr, q=bins, labels=False, retbins=True, duplicates="drop")
    else:
        edges = [check_real("bins", b) for b in bins]
        if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:])):
            raise InvalidArgumentError("bins must be an integer >= 1 or at least 2 increasing edges")
        codes = pd.cut(fcr, bins=edges, labels=False, include_lowest=True)
    rows = []
    for code, grp in table.groupby(codes):
        lo, hi = float(edges[int(code)]), float(edges[int(code) + 1])
        row = {"fcr_bin": f"[{lo:.4g}, {hi:.4g}]", "fcr_low": lo, "fcr_high": hi}
        for c in columns:
            v = grp[c].dropna()
            row[f"{c}_mean"] = float(v.mean()) if len(v) else math.nan
            row[f"{c}_sem"] = float(v.std(ddof=1) / math.sqrt(len(v))) if len(v) > 1 else math.nan
            row[f"{c}_n"] = int(len(v))
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------------------
# CPI
# ---------------------------------------------------------------------------------------------------------------------
def _pick(candidates: torch.Tensor, generator: torch.Generator) -> int:
    return int(candidates[int(torch.randint(candidates.numel(), (1,), generator=generator))])


@torch.no_grad()
def context_preference_curve(encoder: EncoderLike, images: torch.Tensor, masks: torch.Tensor, identities: torch.Tensor,
                             contexts: torch.Tensor, *, sigmas: Sequence[float] = (0.0, 1.0, 2.0, 4.0, 8.0),
                             max_queries: int | None = None, seed: int = 0, batch_size: int = 64) -> pd.DataFrame:
    """CPI(σ): how often a face-blurred query is closer to a same-context stranger than to its own identity elsewhere.

    A query q needs a candidate 1 (same context label, different identity) and a candidate 2 (same identity,
    different context); one of each is drawn at random per query. Context label −1 means unknown (never used).

    Args:
        encoder: encoder-like object.
        images: (N, 3, H, W); masks: (N, 1, H, W) face masks; identities, contexts: (N,) integer labels.
        sigmas: face-blur strengths in pixels (0 = no blur).
        max_queries: use at most this many eligible queries (random subset).
        seed: seeds the candidate draws and the query subset.

    Returns:
        DataFrame with sigma, cpi, sem (binomial standard error), n_queries.
    """
    _check_images(images)
    m = _check_masks(masks, images)
    n = images.shape[0]
    ids = _check_labels("identities", identities, n).cpu()
    ctx = _check_labels("contexts", contexts, n).cpu()
    sig = [check_nonnegative("sigmas", s) for s in sigmas]
    if not sig:
        raise InvalidArgumentError("sigmas must contain at least one value >= 0")
    gen = torch.Generator().manual_seed(int(seed))
    q, c1, c2 = [], [], []
    for i in range(n):
        if int(ctx[i]) < 0:
            continue
        cand1 = torch.nonzero((ctx == ctx[i]) & (ids != ids[i])).flatten()
        cand2 = torch.nonzero((ids == ids[i]) & (ctx != ctx[i]) & (ctx >= 0)).flatten()
        if cand1.numel() and cand2.numel():
            q.append(i)
            c1.append(_pick(cand1, gen))
            c2.append(_pick(cand2, gen))
    if not q:
        raise InsufficientDataError(
            "images: no query has both a same-context image of another identity and an image of its own identity in "
            "another context; CPI needs identities seen in several contexts and contexts shared by several identities")
    q_t, c1_t, c2_t = torch.tensor(q), torch.tensor(c1), torch.tensor(c2)
    if max_queries is not None and q_t.numel() > check_int("max_queries", max_queries, minimum=1):
        keep = torch.randperm(q_t.numel(), generator=gen)[:max_queries]
        q_t, c1_t, c2_t = q_t[keep], c1_t[keep], c2_t[keep]
    dev = images.device
    z1 = embed_images(encoder, images[c1_t.to(dev)], batch_size=batch_size)
    z2 = embed_images(encoder, images[c2_t.to(dev)], batch_size=batch_size)
    qi, qm = images[q_t.to(dev)], m[q_t.to(dev)]
    rows = []
    for s in sig:
        zq = embed_images(encoder, perturb_region(qi, qm, kind="blur", sigma=s) if s > 0 else qi, batch_size=batch_size)
        s1, s2 = (zq * z1).sum(1), (zq * z2).sum(1)
        pref = (s1 > s2).double() + 0.5 * (s1 == s2).double()
        p, k = float(pref.mean()), pref.numel()
        rows.append({"sigma": s, "cpi": p, "sem": math.sqrt(max(p * (1 - p), 0.0) / k), "n_queries": k})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------------------------------
# B*
# ---------------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class BStarResult:
    """Result of :func:`background_dominance`.

    Attributes:
        median: B*, the median over pairs of the per-pair flip fraction (∞ when most pairs never flip).
        per_pair: DataFrame with face_index, context_index, b_star (∞ = never flipped on the grid).
        curve: DataFrame with beta, fraction_flipped (pairs whose composite is closer to the context image than to
            the face identity's template at this β), mean_margin (mean of cos(z_c, z_y) − cos(z_c, t_A)).
        never_flipped: fraction of pairs with B* = ∞.
    """

    median: float
    per_pair: pd.DataFrame
    curve: pd.DataFrame
    never_flipped: float


@torch.no_grad()
def background_dominance(encoder: EncoderLike, images: torch.Tensor, masks: torch.Tensor, identities: torch.Tensor, *,
                         betas: Sequence[float] | None = None, n_pairs: int = 100, neutral: float = 0.5, seed: int = 0,
                         batch_size: int = 64) -> BStarResult:
    """B*: how much of another image's context outweighs the identity of the face (privkit's definition).

    For random pairs (x_A, y) with different identities, composites keep x_A's face (its mask), reveal the fraction β
    of y's context pixels (outside both faces) as a compact region grown from a random seed pixel (nested in β),
    and fill the rest with the grey level ``neutral``. The identity template t_A is the normalised mean embedding of
    A's other images (x_A itself if A has no other image).

    Args:
        encoder: encoder-like object.
        images, masks, identities: the image pool ((N, 3, H, W), (N, 1, H, W), (N,)).
        betas: increasing grid of revealed fractions in [0, 1] (default 0, 0.1, …, 1).
        n_pairs: number of random (face, context) pairs.
        neutral: grey level of the unrevealed background, in [0, 1].
        seed: seeds the pairs and the reveal order.

    Returns:
        A :class:`BStarResult`.
    """
    _check_images(images)
    m = _check_masks(masks, images)
    n = images.shape[0]
    ids_cpu = _check_labels("identities", identities, n).cpu()
    n_pairs = check_int("n_pairs", n_pairs, minimum=1)
    neutral = check_probability("neutral", neutral, open_low=False, open_high=False)
    grid = [i / 10 for i in range(11)] if betas is None else [check_real("betas", b) for b in betas]
    if not grid or any(b < 0 or b > 1 for b in grid) or any(b2 <= b1 for b1, b2 in zip(grid, grid[1:])):
        raise InvalidArgumentError("betas must be a non-empty increasing sequence of values in [0, 1]")
    if int(torch.unique(ids_cpu).numel()) < 2:
        raise InsufficientDataError("identities: need at least 2 identities for B*, got 1")
    gen = torch.Generator().manual_seed(int(seed))
    dev = images.device
    z_all = embed_images(encoder, images, batch_size=batch_size)
    # pairs (a, y) with different identities, and the templates of A without x_A
    a_idx = torch.randint(n, (n_pairs,), generator=gen)
    y_idx = torch.empty(n_pairs, dtype=torch.int64)
    templates = torch.empty(n_pairs, z_all.shape[1], device=z_all.device)
    for p in range(n_pairs):
        y_idx[p] = _pick(torch.nonzero(ids_cpu != ids_cpu[a_idx[p]]).flatten(), gen)
        same = torch.nonzero(ids_cpu == ids_cpu[a_idx[p]]).flatten()
        rest = same[same != a_idx[p]]
        use = rest if rest.numel() else same
        templates[p] = torch.nn.functional.normalize(z_all[use.to(z_all.device)].mean(0), dim=0)
    ad, yd = a_idx.to(dev), y_idx.to(dev)
    face_a, mask_a, img_y, mask_y = images[ad], m[ad], images[yd], m[yd]
    available = ~mask_a & ~mask_y
    n_avail = available.flatten(1).sum(1)
    _, ranks = _grow_regions(available, n_avail, generator=gen)
    ranks = ranks[:, None].to(dev)
    z_y = z_all[yd]
    margins = torch.empty(len(grid), n_pairs)
    mf = mask_a.to(images.dtype)
    for bi, beta in enumerate(grid):
        rv = ((ranks < (beta * n_avail.float())[:, None, None, None]) & available).to(images.dtype)
        zc = embed_images(encoder, mf * face_a + (1 - mf) * (rv * img_y + (1 - rv) * neutral), batch_size=batch_size)
        margins[bi] = ((zc * z_y).sum(1) - (zc * templates).sum(1)).cpu()
    flipped = margins > 0
    first = torch.where(flipped.any(0), flipped.float().argmax(0), torch.full((n_pairs,), -1))
    b_star = torch.tensor([grid[int(i)] if int(i) >= 0 else math.inf for i in first], dtype=torch.float64)
    per_pair = pd.DataFrame({"face_index": a_idx.numpy(), "context_index": y_idx.numpy(), "b_star": b_star.numpy()})
    curve = pd.DataFrame({"beta": grid, "fraction_flipped": flipped.double().mean(1).numpy(),
                          "mean_margin": margins.double().mean(1).numpy()})
    # the per-pair B* are grid values or inf (never NaN), so the median of an even count is finite or inf
    return BStarResult(median=statistics.median(b_star.tolist()), per_pair=per_pair, curve=curve,
                       never_flipped=float(torch.isinf(b_star).double().mean()))
