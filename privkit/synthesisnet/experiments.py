"""Helpers of the SynthesisNet notebook (``notebooks/synthesisnet.py``): splits, judges, probes, checks, plots.

Everything here is privkit's experimental protocol [I] (the paper's full text could not be obtained):

- :func:`split_identities`: identity-disjoint train/test faces (the networks are trained without DP, so only
  faces outside the training set may be published).
- :func:`first_per_identity`: a mask of the first ``k`` images of every identity (e.g. the subset the slow dlib
  judge sees).
- :func:`with_noise`: the same trained weights with another ``noise`` mode (the "no noise" and "whole latent"
  ablations need no retraining; the auxiliary-classifier ablation does).
- :class:`AttributeProbe`: an attribute classifier trained on *real* images (logistic regression on frozen
  features), independent of the publishing model: it judges attribute preservation and supplies the class
  probabilities of the offline Inception-Score stand-in.
- :func:`judge_release`: identity distance and re-identification of one release under one judge (an embedding
  function), with bootstrap/binomial intervals.
- :func:`rank1_chance_interval`, :func:`distance_decrease_failures`: the closing checks.
- :func:`latent_pair_distances`: what ε means for these faces — Euclidean distances between clipped identity
  latents of different identities, so that ``ε·d`` (the log-likelihood-ratio bound of metric DP) can be read
  off per pair; :func:`epsilon_meaning_curves`: the same as compact distribution curves per ε (the data of the
  notebook's "what ε means" figure, small enough for git).
- :func:`latent_identity_leakage`: how much identity a latent reveals among unseen identities (leave-one-out
  nearest-neighbour rank-1 against its chance rate), e.g. ``z_att`` against ``z_id``.
- :func:`image_grid`: the samples figure.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from scipy import stats

from .._validate import check_choice, check_int, check_probability, check_tensor
from ..data.types import FaceSet
from ..errors import InsufficientDataError, InvalidArgumentError, ShapeError
from .metrics import identity_distance_from_embeddings, reidentification_from_embeddings
from .pipeline import NOISE_MODES, SynthesisNet

__all__ = [
    "split_identities",
    "first_per_identity",
    "with_noise",
    "AttributeProbe",
    "resolvable_far",
    "judge_release",
    "rank1_chance_interval",
    "distance_decrease_failures",
    "latent_pair_distances",
    "epsilon_meaning_curves",
    "latent_identity_leakage",
    "image_grid",
]


def split_identities(faces: FaceSet, *, n_train: int, n_test: int, seed: int = 0) -> tuple[FaceSet, FaceSet]:
    """Identity-disjoint ``(train, test)`` subsets: a seeded permutation of the identities, ``n_train`` then
    ``n_test`` of them (every image of an identity goes to the same side).

    Raises:
        InsufficientDataError: fewer than ``n_train + n_test`` identities.
    """
    n_train = check_int("n_train", n_train, minimum=1)
    n_test = check_int("n_test", n_test, minimum=1)
    seed = check_int("seed", seed, minimum=0, maximum=2**63 - 1)
    ids = torch.unique(faces.identity.detach().cpu())
    if ids.numel() < n_train + n_test:
        raise InsufficientDataError(
            f"faces has {ids.numel()} identities; n_train + n_test = {n_train + n_test} needed")
    perm = ids[torch.randperm(ids.numel(), generator=torch.Generator().manual_seed(seed))]
    identity = faces.identity.detach().cpu()
    train = torch.isin(identity, perm[:n_train])
    test = torch.isin(identity, perm[n_train : n_train + n_test])
    return faces.subset(train.to(faces.identity.device)), faces.subset(test.to(faces.identity.device))


def first_per_identity(faces: FaceSet, k: int) -> torch.Tensor:
    """Boolean mask ``(N,)`` (CPU) of the first ``k`` images (in row order) of every identity of ``faces``."""
    k = check_int("k", k, minimum=1)
    identity = faces.identity.detach().cpu()
    keep = torch.zeros(identity.numel(), dtype=torch.bool)
    seen: dict[int, int] = {}
    for i, v in enumerate(identity.tolist()):
        if seen.get(v, 0) < k:
            keep[i] = True
            seen[v] = seen.get(v, 0) + 1
    return keep


def with_noise(net: SynthesisNet, noise: str) -> SynthesisNet:
    """A copy of the fitted ``net`` (same weights, same device) whose config uses ``noise`` instead.

    Goes through :meth:`SynthesisNet.save` / :meth:`SynthesisNet.load` (safetensors + JSON) in a temporary folder.
    """
    check_choice("noise", noise, NOISE_MODES)
    if not isinstance(net, SynthesisNet):
        raise InvalidArgumentError(f"net must be a SynthesisNet, got {type(net).__name__}")
    import json

    with tempfile.TemporaryDirectory(prefix="privkit-synthesisnet-") as tmp:
        folder = net.save(tmp)
        meta_path = folder / "config.json"
        meta = json.loads(meta_path.read_text())
        meta["config"]["noise"] = noise
        meta_path.write_text(json.dumps(meta))
        return SynthesisNet.load(folder, device=net.device)


class AttributeProbe:
    """Attribute classifiers trained on real images: multinomial logistic regression on frozen features.

    The probe is independent of the publishing model (privkit's judge of attribute preservation [I]): it is fit
    on the features of real training images and applied to published images.

    Args:
        embed: maps a ``(B, 3, H, W)`` batch in ``[0, 1]`` to ``(B, D)`` features (e.g. ``encoder.embed``).
        c: inverse L2 regularisation strength of the logistic regression.
        max_iter: solver iterations.
    """

    def __init__(self, embed: Callable[[torch.Tensor], torch.Tensor], *, c: float = 1.0, max_iter: int = 500):
        if not callable(embed):
            raise InvalidArgumentError(f"embed must be callable, got {type(embed).__name__}")
        if not (isinstance(c, (int, float)) and math.isfinite(c) and c > 0):
            raise InvalidArgumentError(f"c must be a finite number > 0, got {c!r}")
        self.embed = embed
        self.c = float(c)
        self.max_iter = check_int("max_iter", max_iter, minimum=1)
        self.models: dict[str, Any] = {}
        self.n_classes: dict[str, int] = {}
        self.train_accuracy: dict[str, float] = {}

    def _features(self, images: torch.Tensor) -> np.ndarray:
        feats = self.embed(images)
        check_tensor("features", feats, ndim=2, shape=(images.shape[0], None))
        return feats.detach().to("cpu", torch.float64).numpy()

    def fit(self, images: torch.Tensor, attributes: Mapping[str, torch.Tensor],
            names: Sequence[str] | None = None) -> "AttributeProbe":
        """Fit one classifier per attribute in ``names`` (default: all) on ``images`` and their integer labels
        (negative labels are ignored). Attributes with a single known class are skipped."""
        from sklearn.linear_model import LogisticRegression

        check_tensor("images", images, ndim=4, floating=True)
        names = list(attributes) if names is None else list(names)
        if not names:
            raise InsufficientDataError("attributes: need at least one attribute")
        x = self._features(images)
        for name in names:
            if name not in attributes:
                raise InvalidArgumentError(f"attribute {name!r} not in attributes {sorted(attributes)}")
            y = attributes[name].detach().cpu().long()
            check_tensor(f"attributes[{name!r}]", y, shape=(images.shape[0],))
            keep = (y >= 0).numpy()
            yk = y.numpy()[keep]
            if np.unique(yk).size < 2:
                continue
            clf = LogisticRegression(C=self.c, max_iter=self.max_iter)
            clf.fit(x[keep], yk)
            self.models[name] = clf
            self.n_classes[name] = int(y.max()) + 1
            self.train_accuracy[name] = float(clf.score(x[keep], yk))
        if not self.models:
            raise InsufficientDataError("no attribute has two or more known classes in the training images")
        return self

    def __call__(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """Log-probabilities ``(B, n_classes)`` per attribute (classes never seen in training get ``-inf``)."""
        if not self.models:
            raise InvalidArgumentError("AttributeProbe is not fitted: call fit first")
        x = self._features(images)
        out = {}
        for name, clf in self.models.items():
            lp = np.full((x.shape[0], self.n_classes[name]), -np.inf)
            lp[:, clf.classes_] = clf.predict_log_proba(x)
            out[name] = torch.from_numpy(lp)
        return out

    def probs(self, images: torch.Tensor, attribute: str) -> torch.Tensor:
        """Class probabilities ``(B, n_classes)`` of one attribute (for the Inception-Score stand-in)."""
        if attribute not in self.models:
            raise InvalidArgumentError(f"attribute must be one of the fitted {sorted(self.models)}, got {attribute!r}")
        return self(images)[attribute].exp()


def resolvable_far(far: float, identities: torch.Tensor) -> float:
    """``far``, raised to the smallest FAR the impostor pairs of a release resolve (1 / number of impostor pairs
    published_i vs original_j of other identities) when it is below it."""
    far = check_probability("far", far)
    ids = identities.detach().cpu()
    n_imp = int((ids[:, None] != ids[None, :]).sum())
    if n_imp == 0:
        raise InsufficientDataError("identities: need at least 2 distinct identities for impostor pairs")
    return max(far, 1.0 / n_imp)


def rank1_chance_interval(chance: float, n: int, *, confidence: float = 0.99) -> tuple[float, float]:
    """Central ``confidence`` interval of a rank-1 rate measured on ``n`` probes when each is right with
    probability ``chance`` (binomial quantiles / n)."""
    chance = check_probability("chance", chance, open_low=False, open_high=False)
    n = check_int("n", n, minimum=1)
    confidence = check_probability("confidence", confidence)
    alpha = (1.0 - confidence) / 2.0
    return float(stats.binom.ppf(alpha, n, chance)) / n, float(stats.binom.ppf(1.0 - alpha, n, chance)) / n


def judge_release(
    original_embeddings: torch.Tensor,
    published_embeddings: torch.Tensor,
    identities: torch.Tensor,
    *,
    far: float = 1e-2,
    n_bootstrap: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, float]:
    """Identity distance (``1 - cos``, identity-cluster bootstrap CI) and re-identification (TAR at a resolvable
    FAR with the threshold from published impostors; rank-1 against the originals with its binomial CI and the
    chance rate) of one release under one judge. Returns a flat dict (a table row); ``other_identity_distance``
    is the mean ``1 - cos`` between each published face and the originals of *other* identities (the level an
    identity distance must stay below for the published face to still look like its own source)."""
    check_tensor("identities", identities, shape=(original_embeddings.shape[0],))
    dist = identity_distance_from_embeddings(original_embeddings, published_embeddings, identities=identities,
                                             n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
    far_used = resolvable_far(far, identities)
    reid = reidentification_from_embeddings(original_embeddings, published_embeddings, identities=identities,
                                            far=far_used)
    eo = torch.nn.functional.normalize(original_embeddings.detach().to("cpu", torch.float64), dim=1)
    ep = torch.nn.functional.normalize(published_embeddings.detach().to("cpu", torch.float64), dim=1)
    ids = identities.detach().cpu()
    other = ids[:, None] != ids[None, :]
    other_distance = float((1.0 - ep @ eo.T)[other].mean())
    n = reid.n_probes
    k = round(reid.rank1 * n)
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return {
        "identity_distance": dist.mean, "distance_low": dist.ci_low, "distance_high": dist.ci_high,
        "other_identity_distance": other_distance,
        "tar": reid.tar, "far": far_used, "rank1": reid.rank1, "rank1_low": float(ci.low),
        "rank1_high": float(ci.high), "rank1_chance": reid.rank1_chance, "n_probes": n,
    }


def distance_decrease_failures(
    table: pd.DataFrame, *, x: str = "epsilon", mean: str = "identity_distance", low: str = "distance_low",
    high: str = "distance_high",
) -> list[str]:
    """Failures of "the identity distance decreases in ε within bootstrap error".

    Fails when, for two consecutive ε, the distance at the larger ε is significantly *above* the one at the
    smaller ε (its CI lies entirely above), or when the distance at the largest ε is not significantly below the
    one at the smallest (CIs overlap or reversed). Returns human-readable failures (empty: the claim holds).
    """
    for col in (x, mean, low, high):
        if col not in table.columns:
            raise ShapeError(f"table has no column {col!r}")
    t = table.sort_values(x).reset_index(drop=True)
    if len(t) < 2:
        raise InsufficientDataError("need at least two epsilons")
    out = []
    for i in range(len(t) - 1):
        a, b = t.iloc[i], t.iloc[i + 1]
        if b[low] > a[high]:
            out.append(f"distance rises from {a[mean]:.3f} [{a[low]:.3f}, {a[high]:.3f}] at ε={a[x]:g} to "
                       f"{b[mean]:.3f} [{b[low]:.3f}, {b[high]:.3f}] at ε={b[x]:g}")
    first, last = t.iloc[0], t.iloc[-1]
    if not last[high] < first[low]:
        out.append(f"distance at ε={last[x]:g} ({last[mean]:.3f} [{last[low]:.3f}, {last[high]:.3f}]) is not "
                   f"significantly below that at ε={first[x]:g} ({first[mean]:.3f} [{first[low]:.3f}, "
                   f"{first[high]:.3f}])")
    return out


def latent_pair_distances(z_id: torch.Tensor, identities: torch.Tensor, *, clip_norm: float) -> pd.DataFrame:
    """Euclidean distances between clipped identity latents of *different* identities (float64).

    Returns a frame with one row per image for ``pair == "nearest other identity"`` (distance to the closest
    latent of another identity) and one row per unordered cross-identity pair for ``pair == "any other
    identity"``. Metric DP bounds the likelihood ratio of two faces' releases by ``exp(ε·d)``.
    """
    from .privatize import clip_rows

    check_tensor("z_id", z_id, ndim=2, floating=True)
    check_tensor("identities", identities, shape=(z_id.shape[0],))
    z = clip_rows(z_id.detach().to("cpu", torch.float64), clip_norm)
    ids = identities.detach().cpu()
    diff = ids[:, None] != ids[None, :]
    if not bool(diff.any()):
        raise InsufficientDataError("identities: need at least 2 distinct identities")
    d = torch.cdist(z, z)
    nearest = d.masked_fill(~diff, math.inf).min(dim=1).values
    upper = torch.triu(torch.ones_like(diff), diagonal=1) & diff
    rows = [pd.DataFrame({"pair": "nearest other identity", "distance": nearest.numpy()}),
            pd.DataFrame({"pair": "any other identity", "distance": d[upper].numpy()})]
    return pd.concat(rows, ignore_index=True)


def epsilon_meaning_curves(
    z_id: torch.Tensor, identities: torch.Tensor, *, clip_norm: float, epsilons: Sequence[float],
    n_quantiles: int = 201,
) -> pd.DataFrame:
    """Distribution curves of ``ε·d(z, z')`` over pairs of identities, one per ε: the plotted data of the
    notebook's "what ε means" figure, compact enough to commit.

    ``pair == "nearest other identity"``: one point per image (its distance to the closest latent of another
    identity), sorted, with ``fraction = rank / n`` (the empirical CDF). ``pair == "any other identity"``: the
    ``n_quantiles`` quantiles (levels evenly spaced over ``[0, 1]``, linear interpolation) of the distances of
    all unordered cross-identity pairs, with ``fraction`` the quantile level — the CDF of the O(n²) pairs at a
    fixed size. Distances come from :func:`latent_pair_distances` (clipped latents, float64).

    Args:
        z_id: ``(N, d)`` identity latents.
        identities: ``(N,)`` identity labels (at least two distinct).
        clip_norm: clip norm of the metric-DP mechanism (> 0).
        epsilons: the ε values (each > 0).
        n_quantiles: quantile levels of the all-pairs curve, ``>= 2``.

    Returns:
        A frame with columns ``pair``, ``epsilon``, ``fraction``, ``distance``, ``eps_d`` (= ε·distance).
    """
    from .._validate import check_epsilon

    eps = [check_epsilon(e) for e in epsilons]
    if not eps:
        raise InsufficientDataError("epsilons: need at least one value")
    n_quantiles = check_int("n_quantiles", n_quantiles, minimum=2)
    pairs = latent_pair_distances(z_id, identities, clip_norm=clip_norm)
    nearest = np.sort(pairs.loc[pairs.pair == "nearest other identity", "distance"].to_numpy())
    levels = np.linspace(0.0, 1.0, n_quantiles)
    anyq = np.quantile(pairs.loc[pairs.pair == "any other identity", "distance"].to_numpy(), levels)
    curves = {"nearest other identity": (np.arange(1, nearest.size + 1) / nearest.size, nearest),
              "any other identity": (levels, anyq)}
    frames = [pd.DataFrame({"pair": kind, "epsilon": e, "fraction": frac, "distance": dist, "eps_d": e * dist})
              for kind, (frac, dist) in curves.items() for e in eps]
    return pd.concat(frames, ignore_index=True)


def latent_identity_leakage(
    z: torch.Tensor, identities: torch.Tensor, *, confidence: float = 0.99,
) -> dict[str, float]:
    """What a latent reveals about identity: leave-one-out nearest-neighbour rank-1 among the rows of ``z``.

    Each row is a probe; its nearest other row (cosine similarity, float64; ties to the first) is its guess, and
    the guess is right when that row has the same identity. Chance is the mean over probes of ``(n_i - 1) /
    (N - 1)`` (``n_i`` rows of the probe's identity): the rate of a guess drawn uniformly from the other rows. Use
    it on latents of identities the networks never saw (e.g. the published test faces), where a high rank-1 means
    the latent encodes *who* the face is, not only which training class it resembles.

    Args:
        z: ``(N, d)`` latents, ``N >= 2``.
        identities: ``(N,)`` identity labels; at least one identity with two rows.
        confidence: level of the Wilson interval of the rank-1 rate and of the binomial interval of chance.

    Returns:
        ``{"rank1", "rank1_low", "rank1_high", "chance", "chance_low", "chance_high", "n"}``: the rank-1 rate with
        its Wilson interval, the chance rate and the central ``confidence`` interval of a rank-1 rate at chance
        (binomial quantiles / N), and the number of probes.

    Raises:
        ShapeError: ``z`` not 2-D or ``identities`` of another length.
        InsufficientDataError: fewer than 2 rows or no identity with two rows (nothing to re-identify).
    """
    check_tensor("z", z, ndim=2, floating=True, finite=True)
    check_tensor("identities", identities, shape=(z.shape[0],))
    confidence = check_probability("confidence", confidence)
    n = int(z.shape[0])
    if n < 2:
        raise InsufficientDataError(f"z: need at least 2 rows, got {n}")
    ids = identities.detach().cpu()
    same = ids[:, None] == ids[None, :]
    if int(same.sum()) == n:
        raise InsufficientDataError("identities: no identity has two rows, so no row can be re-identified")
    zn = torch.nn.functional.normalize(z.detach().to("cpu", torch.float64), dim=1)
    sim = zn @ zn.T
    sim.fill_diagonal_(-math.inf)
    hit = ids[sim.argmax(dim=1)] == ids
    k = int(hit.sum())
    chance = float(((same.sum(dim=1) - 1).double() / (n - 1)).mean())
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    lo, hi = rank1_chance_interval(chance, n, confidence=confidence)
    return {"rank1": k / n, "rank1_low": float(ci.low), "rank1_high": float(ci.high), "chance": chance,
            "chance_low": lo, "chance_high": hi, "n": n}


def image_grid(rows: Mapping[str, torch.Tensor], *, n_columns: int, cell: float = 0.9) -> Any:
    """A matplotlib figure: one labelled row per entry of ``rows`` (``(N, 3, H, W)`` in ``[0, 1]``), the first
    ``n_columns`` images of each."""
    import matplotlib.pyplot as plt

    n_columns = check_int("n_columns", n_columns, minimum=1)
    if not rows:
        raise InsufficientDataError("rows: nothing to show")
    for name, imgs in rows.items():
        check_tensor(f"rows[{name!r}]", imgs, ndim=4)
    n_columns = min(n_columns, min(int(v.shape[0]) for v in rows.values()))
    fig, axes = plt.subplots(len(rows), n_columns, figsize=(cell * n_columns + 1.6, cell * len(rows)),
                             squeeze=False)
    for r, (name, imgs) in enumerate(rows.items()):
        for c in range(n_columns):
            ax = axes[r, c]
            ax.imshow(imgs[c].detach().to("cpu", torch.float32).clamp(0, 1).permute(1, 2, 0).numpy())
            ax.set_xticks([])
            ax.set_yticks([])
            for s in ax.spines.values():
                s.set_visible(False)
        axes[r, 0].set_ylabel(name, rotation=0, ha="right", va="center", fontsize=7)
    fig.subplots_adjust(wspace=0.03, hspace=0.03)
    return fig
