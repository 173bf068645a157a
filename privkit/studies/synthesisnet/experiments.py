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
- :func:`rank1_chance_interval`, :func:`distance_decrease_failures`, :func:`paired_distance_change`: the closing
  checks (the last compares two releases of the same faces face by face).
- :func:`latent_pair_distances`: what ε means for these faces — Euclidean distances between clipped identity
  latents of different identities, so that ``ε·d`` (the log-likelihood-ratio bound of metric DP) can be read
  off per pair; :func:`epsilon_meaning_curves`: the same as compact distribution curves per ε (the data of the
  notebook's "what ε means" figure, small enough for git).
- :func:`latent_identity_leakage`: how much identity a latent reveals among unseen identities (leave-one-out
  nearest-neighbour rank-1 against its chance rate), e.g. ``z_att`` against ``z_id``.
- :func:`faceres_outputs`: one pass of the ``faceres`` graph giving the identity embedding and the gender/age heads
  (the identity judge and the attribute judge share it).
- :func:`gender_age_agreement`: attribute preservation judged by ``faceres`` 's gender and age heads (published
  versus original predictions, with intervals and the chance level).
- :func:`efficientnet_outputs`: un-normalised 1280-D pooled ``efficientnet-lite0`` features and ImageNet class
  probabilities in one pass (the FID / IS-analogue feature space).
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

from privkit._validate import check_choice, check_int, check_probability, check_tensor
from privkit.data.types import FaceSet
from privkit.metrics import resolvable_far as metrics_resolvable_far
from privkit.metrics import wilson_interval
from privkit.errors import InsufficientDataError, InvalidArgumentError, ShapeError
from privkit.synthesisnet.metrics import (_bootstrap_ci, _check_bootstrap, _check_seed, _percentile_ci, _resample,
                                          identity_distance_from_embeddings, reidentification_from_embeddings)
from privkit.synthesisnet.pipeline import NOISE_MODES, SynthesisNet, SynthesisNetConfig

__all__ = ["net_config", "split_identities", "first_per_identity", "with_noise", "AttributeProbe", "resolvable_far",
           "judge_release", "rank1_chance_interval", "distance_decrease_failures", "latent_pair_distances",
           "epsilon_meaning_curves", "latent_identity_leakage", "image_grid", "faceres_outputs", "gender_age_agreement",
           "efficientnet_outputs", "paired_distance_change"]


def net_config(cfg: Any) -> SynthesisNetConfig:
    """The :class:`~privkit.synthesisnet.pipeline.SynthesisNetConfig` of a scale preset (its image size, width,
    latent sizes and loss weights; every other setting at the library's default)."""
    return SynthesisNetConfig(image_size=cfg.image_size, width=cfg.width, id_dim=cfg.id_dim, att_dim=cfg.att_dim,
                              lambda_id=cfg.lambda_id, noise_prob=cfg.noise_prob, lambda_cls=cfg.lambda_cls,
                              linear_path=cfg.linear_path, clip_norm=cfg.clip_norm)


def split_identities(faces: FaceSet, *, n_train: int, n_test: int, seed: int = 0) -> tuple[FaceSet, FaceSet]:
    """Identity-disjoint ``(train, test)`` subsets: a seeded permutation of the identities, ``n_train`` then
    ``n_test`` of them (every image of an identity goes to the same side).

    Raises:
        InsufficientDataError: fewer than ``n_train + n_test`` identities.
    """
    n_train = check_int("n_train", n_train, minimum=1)
    n_test = check_int("n_test", n_test, minimum=1)
    seed = _check_seed(seed)
    ids = torch.unique(faces.identity.detach().cpu())
    if ids.numel() < n_train + n_test:
        raise InsufficientDataError(f"faces has {ids.numel()} identities; n_train + n_test = {n_train + n_test} needed")
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
            clf = LogisticRegression(C=self.c, max_iter=self.max_iter).fit(x[keep], yk)
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
    """``far``, raised to the smallest FAR the impostor pairs of a release resolve (published_i vs original_j of
    other identities; privkit's one rule, :func:`privkit.metrics.resolvable_far`) when it is below it."""
    ids = identities.detach().cpu()
    n_imp = int((ids[:, None] != ids[None, :]).sum())
    if n_imp == 0:
        raise InsufficientDataError("identities: need at least 2 distinct identities for impostor pairs")
    return metrics_resolvable_far(far, n_imp)


def rank1_chance_interval(chance: float, n: int, *, confidence: float = 0.99) -> tuple[float, float]:
    """Central ``confidence`` interval of a rank-1 rate measured on ``n`` probes when each is right with
    probability ``chance`` (binomial quantiles / n)."""
    chance = check_probability("chance", chance, open_low=False, open_high=False)
    n = check_int("n", n, minimum=1)
    confidence = check_probability("confidence", confidence)
    alpha = (1.0 - confidence) / 2.0
    return float(stats.binom.ppf(alpha, n, chance)) / n, float(stats.binom.ppf(1.0 - alpha, n, chance)) / n


def judge_release(original_embeddings: torch.Tensor, published_embeddings: torch.Tensor, identities: torch.Tensor, *,
                  far: float = 1e-2, n_bootstrap: int = 200, confidence: float = 0.95,
                  seed: int = 0) -> dict[str, float]:
    """Identity distance (``1 - cos``, identity-cluster bootstrap CI) and re-identification (TAR at a resolvable
    FAR with the threshold from published impostors, with its Wilson CI over the source pairs; rank-1 against the
    originals with its Wilson CI and the chance rate) of one release under one judge. Returns a flat dict (a table
    row); ``other_identity_distance``
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
    rank1_low, rank1_high = wilson_interval(round(reid.rank1 * n), n, level=confidence)
    tar_low, tar_high = wilson_interval(round(reid.tar * n), n, level=confidence)
    return {"identity_distance": dist.mean, "distance_low": dist.ci_low, "distance_high": dist.ci_high,
            "other_identity_distance": other_distance, "tar": reid.tar, "tar_low": tar_low, "tar_high": tar_high,
            "far": far_used, "rank1": reid.rank1, "rank1_low": rank1_low, "rank1_high": rank1_high,
            "rank1_chance": reid.rank1_chance, "n_probes": n}


def distance_decrease_failures(table: pd.DataFrame, *, x: str = "epsilon", mean: str = "identity_distance",
                               low: str = "distance_low", high: str = "distance_high") -> list[str]:
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
    from privkit.synthesisnet.privatize import clip_rows

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


def epsilon_meaning_curves(z_id: torch.Tensor, identities: torch.Tensor, *, clip_norm: float, epsilons: Sequence[float],
                           n_quantiles: int = 201) -> pd.DataFrame:
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
    from privkit._validate import check_epsilon

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


def latent_identity_leakage(z: torch.Tensor, identities: torch.Tensor, *, confidence: float = 0.99) -> dict[str, float]:
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
    ci = wilson_interval(k, n, level=confidence)
    lo, hi = rank1_chance_interval(chance, n, confidence=confidence)
    return {"rank1": k / n, "rank1_low": ci[0], "rank1_high": ci[1], "chance": chance,
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
            ax.set(xticks=[], yticks=[])
            ax.spines[:].set_visible(False)
        axes[r, 0].set_ylabel(name, rotation=0, ha="right", va="center", fontsize=7)
    fig.subplots_adjust(wspace=0.03, hspace=0.03)
    return fig


@torch.no_grad()
def faceres_outputs(attributes_module: Any, images: torch.Tensor, boxes: torch.Tensor | None = None, *,
                    batch_size: int = 32) -> dict[str, torch.Tensor]:
    """One pass of the ``faceres`` graph: ``{"embedding": (N, 1024), "male_probability": (N,), "age": (N,)}``
    (float64, CPU; the embedding un-normalised).

    Args:
        attributes_module: a :class:`~privkit.encoders.human_faces.FaceresAttributes` (from
            ``load_faceres_attributes``); its ``encoder`` crops the faces exactly as the ``faceres`` encoder does.
        images: ``(N, 3, H, W)`` in ``[0, 1]``.
        boxes: optional ``(N, 4)`` xyxy face boxes (pixels).
        batch_size: images per forward pass.
    """
    from privkit.encoders.human_faces import FACERES_AGE, FACERES_GENDER, FACERES_OUTPUT, FaceresAttributes

    if not isinstance(attributes_module, FaceresAttributes):
        raise InvalidArgumentError(f"attributes_module must be a FaceresAttributes (load_faceres_attributes()), "
                                   f"got {type(attributes_module).__name__}")
    check_tensor("images", images, ndim=4, floating=True)
    n = int(images.shape[0])
    if boxes is not None:
        check_tensor("boxes", boxes, shape=(n, 4), finite=True)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if n == 0:
        raise InsufficientDataError("images is empty")
    enc = attributes_module.encoder
    dev = attributes_module.age_bins.device
    emb, male, age = [], [], []
    for i in range(0, n, batch_size):
        x = images[i : i + batch_size].to(dev, torch.float32)
        b = None if boxes is None else boxes[i : i + batch_size].to(dev, torch.float32)
        e, g, a = enc.graph(enc.crops(x, b), [FACERES_OUTPUT, FACERES_GENDER, FACERES_AGE])
        emb.append(e.reshape(x.shape[0], -1).double().cpu())
        male.append(g.reshape(-1).double().cpu())
        age.append((a.double() @ attributes_module.age_bins.double()).cpu())
    return {"embedding": torch.cat(emb), "male_probability": torch.cat(male), "age": torch.cat(age)}


def gender_age_agreement(original: Mapping[str, torch.Tensor], published: Mapping[str, torch.Tensor], *,
                         confidence: float = 0.95, n_bootstrap: int = 500, seed: int = 0) -> dict[str, float]:
    """Attribute preservation judged by ``faceres`` 's heads: do the published faces keep the gender and age the
    recogniser predicts for their originals?

    Args:
        original, published: :func:`faceres_outputs` of the originals and of their published versions (row ``i``
            of ``published`` from row ``i`` of ``original``): at least ``male_probability`` and ``age``.
        confidence: level of the Wilson interval of the gender agreement and of the bootstrap CI of the age error.
        n_bootstrap: bootstrap replicates of the age error (images resampled).
        seed: seed of the bootstrap.

    Returns:
        ``gender_agreement`` (share of faces whose predicted gender, male probability > 0.5, is the original's) with
        ``gender_agreement_low/high`` and ``gender_chance`` (the agreement of a published gender drawn independently
        with the published faces' male rate: ``p_o p_p + (1 - p_o)(1 - p_p)``); ``age_mae`` (mean absolute
        difference of the predicted ages, years) with ``age_mae_low/high`` and ``age_mae_shuffled`` (the same
        against the originals of *other* rows: the error of an unrelated face); ``n``.
    """
    for name, d in (("original", original), ("published", published)):
        for k in ("male_probability", "age"):
            if k not in d:
                raise InvalidArgumentError(f"{name} lacks {k!r} (use faceres_outputs)")
    mo = original["male_probability"].detach().cpu().double()
    check_tensor("original['male_probability']", mo, ndim=1, finite=True)
    n = int(mo.numel())
    mp = published["male_probability"].detach().cpu().double()
    ao = original["age"].detach().cpu().double()
    ap = published["age"].detach().cpu().double()
    for name, t in (("published['male_probability']", mp), ("original['age']", ao), ("published['age']", ap)):
        check_tensor(name, t, shape=(n,), finite=True)
    if n < 2:
        raise InsufficientDataError(f"need at least 2 faces, got {n}")
    confidence = check_probability("confidence", confidence)
    n_bootstrap = check_int("n_bootstrap", n_bootstrap, minimum=0)
    go, gp = mo > 0.5, mp > 0.5
    k = int((go == gp).sum())
    ci = wilson_interval(k, n, level=confidence)
    po, pp = float(go.double().mean()), float(gp.double().mean())
    err = (ap - ao).abs()
    lo = hi = float("nan")
    if n_bootstrap:  # the seed is checked only when it is used
        lo, hi = _bootstrap_ci(n_bootstrap, confidence, _check_seed(seed), lambda g: float(_resample(err, g).mean()))
    other = ~torch.eye(n, dtype=torch.bool)
    shuffled = float((ap[:, None] - ao[None, :]).abs()[other].mean())
    return {"gender_agreement": k / n, "gender_agreement_low": ci[0], "gender_agreement_high": ci[1],
            "gender_chance": po * pp + (1 - po) * (1 - pp), "age_mae": float(err.mean()), "age_mae_low": lo,
            "age_mae_high": hi, "age_mae_shuffled": shuffled, "n": n}


@torch.no_grad()
def efficientnet_outputs(encoder: Any, images: torch.Tensor, *, size: int = 224,
                         batch_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """``(features, probs)``: un-normalised 1280-D pooled ``efficientnet-lite0`` features (float64) and its
    ImageNet-1k class probabilities (softmax of the classifier on the same features, float64), both on the CPU.

    The images are resized (bilinear, antialiased when shrinking) to ``size x size`` and run without the encoder's
    own resize-and-crop (the faces are square already), then normalised as the network expects. ``size = 224`` is
    the network's training resolution; a smaller ``size`` is cheaper on a CPU and must be stated with the numbers.

    Args:
        encoder: an :class:`~privkit.encoders.efficientnet_lite.EfficientNetLite0Encoder`.
        images: ``(N, 3, H, W)`` in ``[0, 1]``.
        size: input side, in ``[32, 512]``.
        batch_size: images per forward pass.
    """
    from privkit.encoders.efficientnet_lite import EfficientNetLite0Encoder

    if not isinstance(encoder, EfficientNetLite0Encoder):
        raise InvalidArgumentError(f"encoder must be an EfficientNetLite0Encoder (load_efficientnet_lite0()), "
                                   f"got {type(encoder).__name__}")
    check_tensor("images", images, ndim=4, floating=True)
    size = check_int("size", size, minimum=32, maximum=512)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if images.shape[0] == 0:
        raise InsufficientDataError("images is empty")
    feats, probs = [], []
    for i in range(0, images.shape[0], batch_size):
        x = images[i : i + batch_size].to(torch.float32)
        if tuple(x.shape[-2:]) != (size, size):
            x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False,
                                                antialias=size < max(x.shape[-2:])).clamp(0.0, 1.0)
        f = encoder.pooled_features(x, resize=False)
        feats.append(f.double().cpu())
        probs.append(torch.softmax(encoder.model.classifier(f).double(), dim=1).cpu())
    return torch.cat(feats), torch.cat(probs)


def paired_distance_change(original_embeddings: torch.Tensor, published_a: torch.Tensor, published_b: torch.Tensor,
                           identities: torch.Tensor, *, n_bootstrap: int = 500, confidence: float = 0.95,
                           seed: int = 0) -> dict[str, float]:
    """Face-by-face change of the identity distance between two releases of the same faces: the mean over faces of
    ``d_a - d_b`` (``d = 1 - cos`` between a face's original and its published version under one judge), with an
    identity-cluster percentile-bootstrap CI (identities resampled with replacement, all their faces kept).

    Pairing removes the spread between faces, which dominates the separate CIs of two releases, so a change too
    small for those CIs to separate can still be resolved (e.g. release ``a`` at the smallest ε, ``b`` at the
    largest: a CI above 0 says the distance falls with ε for these faces).

    Returns:
        ``{"mean_change", "change_low", "change_high", "n", "n_identities"}``.

    Raises:
        ShapeError: embeddings of different shapes or identities of another length.
        InsufficientDataError: fewer than 2 identities.
    """
    eo = original_embeddings.detach().to("cpu", torch.float64)
    check_tensor("original_embeddings", eo, ndim=2, finite=True)
    pa = published_a.detach().to("cpu", torch.float64)
    pb = published_b.detach().to("cpu", torch.float64)
    check_tensor("published_a", pa, shape=tuple(eo.shape), finite=True)
    check_tensor("published_b", pb, shape=tuple(eo.shape), finite=True)
    check_tensor("identities", identities, shape=(eo.shape[0],))
    n_bootstrap, confidence, seed = _check_bootstrap(n_bootstrap, confidence, seed)
    nrm = torch.nn.functional.normalize
    eo = nrm(eo, dim=1)
    diff = (1.0 - (nrm(pa, dim=1) * eo).sum(1)) - (1.0 - (nrm(pb, dim=1) * eo).sum(1))
    ids = identities.detach().cpu()
    uniq, inv = torch.unique(ids, return_inverse=True)
    k = int(uniq.numel())
    if k < 2:
        raise InsufficientDataError(f"identities: need at least 2 distinct identities, got {k}")
    sums = torch.zeros(k, dtype=torch.float64).index_add_(0, inv, diff)
    counts = torch.zeros(k, dtype=torch.float64).index_add_(0, inv, torch.ones_like(diff))
    lo = hi = float("nan")
    if n_bootstrap:
        g = torch.Generator().manual_seed(seed)
        pick = torch.randint(0, k, (n_bootstrap, k), generator=g)
        lo, hi = _percentile_ci((sums[pick].sum(1) / counts[pick].sum(1)).numpy(), confidence)
    return {"mean_change": float(diff.mean()), "change_low": lo, "change_high": hi, "n": int(diff.numel()),
            "n_identities": k}
