"""The tables of the SynthesisNet notebook (``notebooks/synthesisnet.py``): judging every release, image quality,
attribute preservation, the ablation table and the quantiles of what ε means.

The notebook calls :func:`judge_releases` → :func:`quality_table` → :func:`attribute_table` →
:func:`ablation_table` → :func:`epsilon_quantiles` and prints or saves what they return; the per-release building
blocks live in :mod:`privkit.studies.synthesisnet.experiments`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from privkit._validate import check_columns, check_int
from privkit.data.types import FaceSet
from privkit.errors import InsufficientDataError, InvalidArgumentError
from privkit.studies.synthesisnet import experiments as X
from privkit.studies.synthesisnet.presets import SynthesisNetPreset

__all__ = ["WHOLE", "ReleaseKey", "JudgedReleases", "judged_release_keys", "judge_releases", "quality_keys",
           "quality_table", "attribute_table", "attribute_summary", "ablation_table", "epsilon_quantiles"]

#: The published-noise-only baseline: metric-DP noise on z_id and z_att together.
WHOLE = "published noise only (whole latent)"

#: A release: (method, ε), ε = inf for releases without DP noise.
ReleaseKey = tuple[str, float]


def _check_releases(releases: Mapping[ReleaseKey, torch.Tensor]) -> None:
    if not releases:
        raise InsufficientDataError("releases is empty")
    for key in releases:
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str)):
            raise InvalidArgumentError(f"release keys must be (method, epsilon) tuples, got {key!r}")


# ---------------------------------------------------------------------------------------------------------------------
# Judging the releases
# ---------------------------------------------------------------------------------------------------------------------
@dataclass
class JudgedReleases:
    """What :func:`judge_releases` returns.

    Attributes:
        judged: one row per (release, judge) with :func:`~privkit.studies.synthesisnet.experiments.judge_release`'s
            columns, and the originals themselves (method "original"); gender_age: faceres's gender and age
            agreement per judged release; e_orig: judge -> embeddings of the originals (real recognisers: centred);
            e_pub_of: (judge, method, ε) -> embeddings of the release; j_ids: identities of the faces the real
            recognisers judge; n_judged / n_centre: faces judged per release / training faces behind the centre.
    """

    judged: pd.DataFrame
    gender_age: pd.DataFrame
    e_orig: dict[str, torch.Tensor]
    e_pub_of: dict[tuple[str, str, float], torch.Tensor]
    j_ids: torch.Tensor
    n_judged: int
    n_centre: int


def _reference_keys(releases: Mapping[ReleaseKey, torch.Tensor], cfg: SynthesisNetPreset) -> list[ReleaseKey]:
    """Every release without DP noise, the whole-latent baseline at ``cfg.baseline_epsilons`` and the ablation at
    ``cfg.ablation_epsilon`` (the end of both key lists below)."""
    return ([k for k in releases if k[1] == math.inf] + [(WHOLE, e) for e in cfg.baseline_epsilons if e in cfg.epsilons]
            + [("no auxiliary classifier", cfg.ablation_epsilon)])


def judged_release_keys(releases: Mapping[ReleaseKey, torch.Tensor], cfg: SynthesisNetPreset) -> list[ReleaseKey]:
    """The releases the real recognisers judge: SynthesisNet at ``cfg.judge_epsilons``, every release without DP
    noise, the whole-latent baseline at ``cfg.baseline_epsilons`` and the ablation at ``cfg.ablation_epsilon``."""
    return [("SynthesisNet", e) for e in cfg.judge_epsilons if e in cfg.epsilons] + _reference_keys(releases, cfg)


def _pack(o: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """faceres outputs as one tensor (embedding, male probability, age), for the embedding cache."""
    return torch.cat([o["embedding"], o["male_probability"][:, None], o["age"][:, None]], 1)


def _unpack(t: torch.Tensor) -> dict[str, torch.Tensor]:
    """The inverse of :func:`_pack`."""
    return {"embedding": t[:, :-2], "male_probability": t[:, -2], "age": t[:, -1]}


def _original_embeddings(faceres: Any, dlib: Any, own: Callable[[torch.Tensor], torch.Tensor], *, train: FaceSet,
                         test: FaceSet, jmask: torch.Tensor, cmask: torch.Tensor, dataset: str, scale: str,
                         seed: int, image_size: int) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor],
                                                              dict[str, torch.Tensor]]:
    """(centres, faceres outputs of the judged originals, judge -> embeddings of the originals), cached on disk."""
    from privkit.data.cache import cached_embeddings
    from privkit.encoders import embed_images

    j_imgs, j_box = test.images[jmask].cpu(), test.box[jmask].cpu()
    c_imgs, c_box = train.images[cmask].cpu(), train.box[cmask].cpu()
    key_c, key_t = ({"dataset": dataset, "seed": seed, "extra": {"scale": scale, "n": int(m.sum()), "size": image_size},
                     "inputs": inputs} for m, inputs in ((cmask, (c_imgs, c_box)), (jmask, (j_imgs, j_box))))
    centre = {"faceres": cached_embeddings(lambda: X.faceres_outputs(faceres, c_imgs, c_box)["embedding"],
                                           encoder="faceres", split="synthesisnet-train-centre", **key_c
                                           ).double().mean(0),
              "dlib": cached_embeddings(lambda: dlib.embed(c_imgs, boxes=c_box), encoder=dlib.name,
                                        split="synthesisnet-train-centre", **key_c).double().mean(0)}
    fr_orig = _unpack(cached_embeddings(lambda: _pack(X.faceres_outputs(faceres, j_imgs, j_box)),
                                        encoder="faceres+heads", split="synthesisnet-test", **key_t).double())
    e_orig = {"faceres": fr_orig["embedding"] - centre["faceres"],
              "dlib": cached_embeddings(lambda: dlib.embed(j_imgs, boxes=j_box), encoder=dlib.name,
                                        split="synthesisnet-test", **key_t).double() - centre["dlib"],
              "model identity encoder": embed_images(own, test.images, dtype=torch.float64)}
    return centre, fr_orig, e_orig


def judge_releases(releases: Mapping[ReleaseKey, torch.Tensor], *, faceres: Any, dlib: Any,
                   own: Callable[[torch.Tensor], torch.Tensor], train: FaceSet, test: FaceSet,
                   cfg: SynthesisNetPreset, dataset: str, scale: str, seed: int = 0) -> JudgedReleases:
    """Identity distance and re-identification of every release under the model's own identity encoder, and of the
    releases of :func:`judged_release_keys` under faceres and dlib (descriptors centred on the mean of
    ``cfg.judge_centre_identities`` training identities, ``cfg.judge_images_per_identity`` faces per identity),
    with faceres's gender / age agreement; the originals themselves close the table.

    Raises:
        InsufficientDataError: no release; InvalidArgumentError: a malformed release key or ``seed < 0``.
    """
    from privkit.encoders import embed_images

    _check_releases(releases)
    seed = check_int("seed", seed, minimum=0)
    jmask = X.first_per_identity(test, cfg.judge_images_per_identity)
    j_ids, j_box = test.identity[jmask].cpu(), test.box[jmask].cpu()
    cmask = X.first_per_identity(train, 1) & torch.isin(
        train.identity.cpu(), torch.unique(train.identity.cpu())[: cfg.judge_centre_identities])
    centre, fr_orig, e_orig = _original_embeddings(faceres, dlib, own, train=train, test=test, jmask=jmask,
                                                   cmask=cmask, dataset=dataset, scale=scale, seed=seed,
                                                   image_size=cfg.image_size)
    judge_keys = judged_release_keys(releases, cfg)
    judged, gender_age, e_pub_of = [], [], {}
    for key, imgs in releases.items():
        method, eps = key
        e_pub_of[("model identity encoder", *key)] = embed_images(own, imgs, dtype=torch.float64)
        judged.append({"method": method, "epsilon": eps, "judge": "model identity encoder",
                       **X.judge_release(e_orig["model identity encoder"], e_pub_of[("model identity encoder", *key)],
                                         test.identity.cpu(), far=cfg.far, n_bootstrap=cfg.n_bootstrap, seed=seed)})
        if key not in judge_keys:
            continue
        o = X.faceres_outputs(faceres, imgs[jmask], j_box)
        e_pub = {"faceres": o["embedding"] - centre["faceres"],
                 "dlib": dlib.embed(imgs[jmask], boxes=j_box).double() - centre["dlib"]}
        for judge, ep in e_pub.items():
            e_pub_of[(judge, *key)] = ep
            judged.append({"method": method, "epsilon": eps, "judge": judge,
                           **X.judge_release(e_orig[judge], ep, j_ids, far=cfg.far, n_bootstrap=cfg.n_bootstrap,
                                             seed=seed)})
        gender_age.append({"method": method, "epsilon": eps,
                           **X.gender_age_agreement(fr_orig, o, n_bootstrap=cfg.n_bootstrap, seed=seed)})
    for judge, eo in e_orig.items():  # the originals themselves (distance 0, the identification ceiling)
        ids = test.identity.cpu() if judge == "model identity encoder" else j_ids
        judged.append({"method": "original", "epsilon": math.inf, "judge": judge,
                       **X.judge_release(eo, eo, ids, far=cfg.far, n_bootstrap=0, seed=seed)})
    return JudgedReleases(pd.DataFrame(judged), pd.DataFrame(gender_age), e_orig, e_pub_of, j_ids,
                          int(jmask.sum()), int(cmask.sum()))


# ---------------------------------------------------------------------------------------------------------------------
# Image quality (FID and the IS analogue)
# ---------------------------------------------------------------------------------------------------------------------
def quality_keys(releases: Mapping[ReleaseKey, torch.Tensor], cfg: SynthesisNetPreset) -> list[ReleaseKey]:
    """The rows of the quality table: the originals, every SynthesisNet ε, every release without DP noise, the
    whole-latent baseline at ``cfg.baseline_epsilons`` and the ablation at ``cfg.ablation_epsilon``."""
    return [("original", math.inf)] + [k for k in releases if k[0] == "SynthesisNet"] + _reference_keys(releases, cfg)


def quality_table(releases: Mapping[ReleaseKey, torch.Tensor], originals: torch.Tensor, reference: torch.Tensor,
                  features: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]], *, keys: Sequence[ReleaseKey],
                  mask: torch.Tensor, n_bootstrap: int, is_splits: int, extractor: str, seed: int = 0) -> pd.DataFrame:
    """FID against the ``reference`` features and the IS analogue, each with its bootstrap interval, for the faces
    ``mask`` (boolean, one entry per published face) of every release of ``keys`` (method "original":
    ``originals``); ``features(images)`` gives (pooled features, class probabilities).

    Raises:
        InvalidArgumentError: ``mask`` not boolean of the originals' length, ``n_bootstrap < 0``, ``is_splits < 1``
        or ``seed < 0``; KeyError: a key without a release.
    """
    from privkit.synthesisnet import fid, inception_score

    if mask.dtype != torch.bool or mask.shape != originals.shape[:1]:
        raise InvalidArgumentError(f"mask must be a boolean tensor of shape ({originals.shape[0]},)")
    n_bootstrap = check_int("n_bootstrap", n_bootstrap, minimum=0)
    is_splits = check_int("is_splits", is_splits, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    qual = []
    for method, eps in keys:
        imgs = (originals if method == "original" else releases[(method, eps)])[mask]
        f_, p_ = features(imgs)
        fr_ = fid(reference, f_, n_bootstrap=n_bootstrap, seed=seed)
        is_ = inception_score(p_, splits=min(is_splits, len(p_)), n_bootstrap=n_bootstrap, seed=seed)
        qual.append({"method": method, "epsilon": eps, "FID": fr_.value, "FID_low": fr_.ci_low,
                     "FID_high": fr_.ci_high, "IS": is_.mean, "IS_low": is_.ci_low, "IS_high": is_.ci_high,
                     "IS_std_splits": is_.std, "n_fake": fr_.n_fake, "n_real": fr_.n_real, "extractor": extractor})
    return pd.DataFrame(qual)


# ---------------------------------------------------------------------------------------------------------------------
# Attributes, ablations, ε
# ---------------------------------------------------------------------------------------------------------------------
def attribute_table(releases: Mapping[ReleaseKey, torch.Tensor], originals: torch.Tensor,
                    labels: Mapping[str, torch.Tensor], probe: Any) -> pd.DataFrame:
    """Probe accuracy per release (and the originals) and attribute against the original labels, with the
    majority-class rate and the number of faces."""
    from privkit.synthesisnet import attribute_preservation

    _check_releases(releases)
    att_rows = []
    for (method, eps) in [("original", math.inf)] + list(releases):
        imgs = originals if method == "original" else releases[(method, eps)]
        res = attribute_preservation(imgs, labels, probe)
        for a in res.accuracy:
            att_rows.append({"method": method, "epsilon": eps, "attribute": a, "accuracy": res.accuracy[a],
                             "majority": res.majority[a], "n": res.n[a]})
    return pd.DataFrame(att_rows)


def attribute_summary(att: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """(accuracy per release × attribute with its mean over the attributes, the majority rate per attribute)."""
    check_columns("att", att, ["method", "epsilon", "attribute", "accuracy", "majority"])
    wide = att.pivot_table(index=["method", "epsilon"], columns="attribute", values="accuracy")
    wide["mean"] = wide.mean(axis=1)
    majority = att[att.method == "original"].set_index("attribute").majority
    return wide, majority


def ablation_table(releases: Mapping[ReleaseKey, torch.Tensor], judged: pd.DataFrame, gender_age: pd.DataFrame,
                   attribute_wide: pd.DataFrame, fid_of: Mapping[ReleaseKey, float]) -> pd.DataFrame:
    """Table 3: SynthesisNet, the whole-latent baseline, the ablation without auxiliary classifier and the release
    without noise — identity distance and rank-1 per judge, gender / age agreement, mean probe accuracy and FID
    (NaN where a release was not measured)."""
    check_columns("judged", judged, ["judge", "method", "epsilon", "identity_distance", "rank1"])
    by_judge = {j: judged[judged.judge == j].set_index(["method", "epsilon"])
                for j in ("faceres", "dlib", "model identity encoder")}
    gai = gender_age.set_index(["method", "epsilon"])
    abl = []
    for method in ("SynthesisNet", WHOLE, "no auxiliary classifier", "no DP noise"):
        for key in [k for k in releases if k[0] == method]:
            row = {"method": method, "epsilon": key[1]}
            for j, short in (("faceres", "faceres"), ("dlib", "dlib"), ("model identity encoder", "own")):
                ok = key in by_judge[j].index
                row[f"{short}_identity_distance"] = by_judge[j].loc[key, "identity_distance"] if ok else np.nan
                row[f"{short}_rank1"] = by_judge[j].loc[key, "rank1"] if ok else np.nan
            row["gender_agreement"] = gai.loc[key, "gender_agreement"] if key in gai.index else np.nan
            row["age_mae"] = gai.loc[key, "age_mae"] if key in gai.index else np.nan
            row["probe_attribute_accuracy_mean"] = attribute_wide.loc[key, "mean"]
            row["FID"] = fid_of.get(key, np.nan)
            abl.append(row)
    return pd.DataFrame(abl)


def epsilon_quantiles(meaning: pd.DataFrame, probabilities: Sequence[float] = (0.05, 0.5, 0.95)) -> pd.DataFrame:
    """The ε·d value at each probability of the cumulative curves of
    :func:`~privkit.studies.synthesisnet.experiments.epsilon_meaning_curves`, per pair kind and ε (linear
    interpolation), one column per probability named like ``"50%"``.

    Raises:
        InvalidArgumentError: a probability outside [0, 1] or missing columns.
    """
    check_columns("meaning", meaning, ["pair", "epsilon", "fraction", "eps_d"])
    if any(not 0.0 <= p <= 1.0 for p in probabilities):
        raise InvalidArgumentError(f"probabilities must lie in [0, 1], got {list(probabilities)}")
    return pd.DataFrame([{"pair": k, "epsilon": e, **{f"{int(100 * p)}%": float(np.interp(p, d.fraction, d.eps_d))
                                                       for p in probabilities}}
                         for (k, e), d in meaning.groupby(["pair", "epsilon"], sort=True)])
