"""The closing sections of the ISP notebook (``notebooks/isp.py``): verdicts on the paper's claims and privkit's own
invariant checks.

:func:`claims_table` turns the notebook's tables into one :func:`privkit.studies.claims.claim_row` per claim the
notebook measures; :func:`invariant_checks` lists what must hold of privkit's implementation at this scale (the
notebook fails when a check fails); :func:`class_mean_spread` is the full-rank ISP check on its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch

from privkit._validate import check_probability, check_tensor
from privkit.errors import InsufficientDataError, InvalidArgumentError, ShapeError
from privkit.studies import claims as C
from privkit.studies.isp import experiments as X

__all__ = ["CLAIM_COLUMNS", "CLAIM_TABLES", "claims_table", "median_interval", "class_mean_spread", "invariant_checks"]

#: Column order of the ISP claims table (Table 8).
CLAIM_COLUMNS = ["section", "claim", "paper", "what", "ours", "low", "high", "interval", "kind", "threshold", "tol",
                 "difference", "verdict", "cause", "evidence"]
#: The tables :func:`claims_table` reads, by key.
CLAIM_TABLES = ("lo", "comp", "table6", "util", "imnet", "inv", "cpi", "fii_images", "bstar_pairs")

_BOOT = "95% identity bootstrap"
#: Why a general encoder's leak is hard to see here: a stand-in for the paper's encoders on a small face set.
_STAND_IN = ("stand-in model: a small offline encoder in place of the paper's CLIP / DINOv2 / SSCD (their weights "
             "need the paper scale)")


def _leakage_claims(lo: pd.DataFrame, comp: pd.DataFrame, labels: Sequence[str], general: Sequence[str],
                    biometric: Sequence[str], *, k_max: int, far: float) -> list[dict[str, Any]]:
    """Table 1 claims: FR leaks more than any general encoder, general encoders leak, ISP-W / ISP-X lower the TAR."""
    claims = []
    rid = lo[(lo.probe == "ridge") & (lo.k == k_max)]
    raw_r = rid[rid["transform"] == "raw"].set_index("encoder")
    if biometric and general:
        fr_best = raw_r.loc[sorted(biometric)].tar.idxmax()
        gen_best = raw_r.loc[list(general)].tar.idxmax()
        a_, b_ = raw_r.loc[fr_best], raw_r.loc[gen_best]
        claims.append(C.claim_row("Table 1", "a face recogniser leaks far more identity than any general-purpose encoder",
                                  paper="ArcFace 94.0 vs CLIP 19.8 (+74.2 pts)", ours=100 * (a_.tar - b_.tar),
                                  low=100 * (a_.tar_low - b_.tar_high), high=100 * (a_.tar_high - b_.tar_low),
                                  threshold=0.0, kind="above",
                                  what=f"ridge TAR difference (pts), {fr_best} − {gen_best}, FAR {far:g}",
                                  interval="conservative difference of two 95% identity-bootstrap intervals"))
    for lab in general:
        r = raw_r.loc[lab]
        claims.append(C.claim_row("Table 1", f"a general-purpose encoder leaks identity above chance: {lab}",
                                  paper="CLIP 19.8, SSCD 9.8, DINOv2 5.7 (% at FAR 1e-4)", ours=100 * r.tar,
                                  low=100 * r.tar_low, high=100 * r.tar_high, threshold=100 * r.realised_far,
                                  kind="above",
                                  what=f"raw ridge TAR (%) at FAR {far:g}, k = {k_max}, against the realised FAR",
                                  interval=_BOOT, cause=_STAND_IN + "; " + C.not_resolvable_cause(
                                      100 * r.tar, 100 * r.tar_low, 100 * r.tar_high,
                                      threshold=100 * r.realised_far)))
    leakers = [lab for lab in labels if bool(comp[(comp.encoder == lab)].leaks.iloc[0])]
    for lab in [lab for lab in labels if lab in general or lab in leakers]:
        for t, pap in (("ISP-W", "CLIP 6.8, SSCD 5.4, DINOv2 1.3 pts"), ("ISP-X", "CLIP 9.6, SSCD 5.3, DINOv2 1.5 pts")):
            c = comp[(comp.encoder == lab) & (comp["transform"] == t)].iloc[0]
            claims.append(C.claim_row("Table 1", f"{t} lowers the ridge TAR: {lab}", paper=pap, ours=100 * c["drop"],
                                      low=100 * c.drop_low, high=100 * c.drop_high, threshold=0.0, kind="above",
                                      what=f"paired drop raw − {t} (pts" + (")" if c.leaks else "; raw does not leak "
                                                                            "above chance here)"),
                                      interval="95% paired identity bootstrap",
                                      cause=None if c.leaks else "nothing to remove: the raw embedding does not leak "
                                                                 "above chance here (" + _STAND_IN + ")"))
    return claims


def _subspace_claims(table6: pd.DataFrame, general: Sequence[str], *, dataset: str,
                     other_dataset: str) -> list[dict[str, Any]]:
    """§1.8: identity subspaces fitted on different face sets align (mean principal-angle cosine > 0.99)."""
    claims = []
    for lab in general:
        row = table6[(table6.encoder == lab) & table6.b.str.startswith("ISP-X")]
        if len(row):
            m = float(row.mean_cos.iloc[0])
            claims.append(C.claim_row("§1.8", f"identity subspaces fitted on different face sets align: {lab}",
                                      paper="cosines > 0.99", ours=m, low=m, high=m, threshold=0.99, kind="above",
                                      what=f"mean principal-angle cosine, ISP-W ({dataset}) vs ISP-X ({other_dataset}), "
                                           f"r = {int(row['rank'].iloc[0])} (random subspaces: "
                                           f"{float(row.chance_mean_cos.iloc[0]):.2f}; largest cosine "
                                           f"{float(row.max_cos.iloc[0]):.3f})",
                                      interval="one fit per subspace, no sampling interval"))
    return claims


def _utility_claims(util: pd.DataFrame, imnet: pd.DataFrame, general: Sequence[str], *,
                    rank: int) -> list[dict[str, Any]]:
    """§1.6: ISP keeps kNN / linear-probe utility and ImageNet classification (at least 90% of raw)."""
    claims = []
    for lab in general:
        for fam, pap, label in (("knn", "kNN: DINOv2 100.1, CLIP 98.3, SSCD 85.4", "kNN"),
                                ("linear", "linear probe: DINOv2 99.2, CLIP 100.7, SSCD 83.3", "linear probe")):
            u = util[(util.encoder == lab) & (util.method == "ISP-W") & (util["rank"] == rank) & util.informative
                     & util.metric.str.startswith(fam + ":")]
            if not len(u):
                continue
            ret = float(u.retention_pct.mean())  # mean over the informative attributes; binomial SE of each, averaged
            se = float(np.mean([100 * math.sqrt(max(x.transformed * (1 - x.transformed), 1e-12) / x.n_queries) / x.raw
                                for x in u.itertuples()]))
            claims.append(C.claim_row("§1.6", f"ISP keeps utility ({label} on non-identity attributes): {lab}",
                                      paper=pap, ours=ret, low=ret - 1.96 * se, high=ret + 1.96 * se, threshold=90.0,
                                      kind="at_least",
                                      what=f"{label} accuracy after ISP-W r = {rank}, % of raw, mean of {len(u)} "
                                           "attributes (ImageNet classes in the paper)",
                                      interval="±1.96 binomial SE of the sanitised accuracies"))
    if len(imnet):
        sel = imnet[(imnet.method == "ISP-W") & (imnet["rank"] == rank)]
        if len(sel):
            i_ = sel.iloc[0]
            claims.append(C.claim_row("§1.6", f"ISP keeps ImageNet classification: {i_.encoder}",
                                      paper="ImageNet kNN / linear 98–101% of raw (CLIP, DINOv2)",
                                      ours=100 * i_.agreement, low=100 * i_.agreement_low,
                                      high=100 * i_.agreement_high, threshold=90.0, kind="at_least",
                                      what=f"top-1 agreement with the raw classifier after ISP-W r = {rank} (%), "
                                           f"{int(i_.n)} views of {int(i_.photos)} unlabelled scikit-image photos",
                                      interval="95% photo bootstrap"))
    return claims


def _inversion_claims(inv: pd.DataFrame, general: Sequence[str], *, contrast: str | None,
                      reference_far: float) -> list[dict[str, Any]]:
    """§1.5: a general encoder's embedding cannot be inverted, a face recogniser's can."""
    claims: list[dict[str, Any]] = []
    if not len(inv):
        return claims
    gen_inv = inv[inv.encoder.isin(general) & (inv.condition == "raw")]
    if len(gen_inv):
        w = gen_inv.loc[gen_inv.ci_high.idxmax()]
        claims.append(C.claim_row("§1.5", "inverting a general-purpose encoder's embedding fails",
                                  paper="≈ 0% (DINO, CLIP, SSCD)", ours=100 * w.success_rate, low=100 * w.ci_low,
                                  high=100 * w.ci_high, threshold=10.0, kind="below",
                                  what=f"verification success (%) at FAR {reference_far:g}, the worst case over "
                                       f"encoders, attacks and judges ({w.encoder} / {w.attack} / judge {w.judge})",
                                  interval=f"Wilson 95%, {int(w.n_targets)} targets"))
    fr_inv = inv[(inv.encoder == contrast) & (inv.condition == "raw")] if contrast else inv.iloc[:0]
    if len(fr_inv):
        b = fr_inv.loc[fr_inv.success_rate.idxmax()]
        claims.append(C.claim_row("§1.5", "a face recogniser's embedding can be inverted",
                                  paper="67–100% (pretrained generative inverters)", ours=100 * b.success_rate,
                                  low=100 * b.ci_low, high=100 * b.ci_high, threshold=50.0, kind="above",
                                  what=f"verification success (%) at FAR {reference_far:g}, the best attack and "
                                       f"judge ({b.encoder} / {b.attack} / judge {b.judge}); privkit's attacks are "
                                       "small decoders, not pretrained face generators",
                                  interval=f"Wilson 95%, {int(b.n_targets)} targets"))
    return claims


def median_interval(values: Sequence[float] | np.ndarray, *, z: float = 1.96) -> tuple[float, float, float]:
    """The median and its distribution-free interval from order statistics (ranks n/2 ∓ z·√n/2, 1-based, clamped to
    the sample): no resampling, so the same data give the same interval on any machine.

    Raises:
        InsufficientDataError: no values.
    """
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n == 0:
        raise InsufficientDataError("median_interval needs at least one value")
    j = max(int(math.floor(n / 2 - z * math.sqrt(n) / 2)), 1)
    k = min(int(math.ceil(n / 2 + z * math.sqrt(n) / 2)), n)
    return float(np.median(x)), float(x[j - 1]), float(x[k - 1])


def _context_claims(cpi_df: pd.DataFrame, fii_images: pd.DataFrame, bstar_pairs: pd.DataFrame,
                    general: Sequence[str]) -> list[dict[str, Any]]:
    """§1.4: encoders are context-dominant, judged on each of the three attribution measures (docs/isp.md §4): CPI
    without blur above 0.5 (a face-blurred query prefers a stranger in its own scene), the mean normalised FII below 0
    (perturbing the context moves the embedding more than perturbing the face) and B* below 0.5 (less than half of a
    stranger's context outweighs the face; median over pairs, a pair that never flips counted as 1, the whole
    context)."""
    claims = []
    labs = list(dict.fromkeys([*cpi_df.get("encoder", []), *fii_images.get("encoder", []),
                               *bstar_pairs.get("encoder", [])]))
    for lab in labs:
        if lab not in general:
            continue
        c = cpi_df[cpi_df.encoder == lab] if len(cpi_df) else cpi_df
        if len(c):
            g0 = c.sort_values("sigma").iloc[0]
            claims.append(C.claim_row(
                "§1.4", f"encoders are context-dominant (CPI): {lab}", paper="context-dominant (no number)",
                ours=float(g0.cpi), low=float(g0.cpi - 1.96 * g0["sem"]), high=float(g0.cpi + 1.96 * g0["sem"]),
                threshold=0.5, kind="above",
                what="CPI without blur (share of queries closer to a stranger in their own scene)",
                interval="±1.96 SEM over the queries"))
        f = fii_images[fii_images.encoder == lab].fii_normalised if len(fii_images) else pd.Series(dtype=float)
        f = f[np.isfinite(f)]
        if len(f) > 1:
            m, se = float(f.mean()), float(f.std(ddof=1) / math.sqrt(len(f)))
            claims.append(C.claim_row(
                "§1.4", f"encoders are context-dominant (FII): {lab}", paper="context-dominant (no number)",
                ours=m, low=m - 1.96 * se, high=m + 1.96 * se, threshold=0.0, kind="below",
                what="mean normalised FII (face minus context change over their sum; below 0: context matters more)",
                interval=f"±1.96 SEM over {len(f)} images"))
        b = bstar_pairs[bstar_pairs.encoder == lab].b_star if len(bstar_pairs) else pd.Series(dtype=float)
        if len(b):
            med, lo, hi = median_interval(np.minimum(b.to_numpy(dtype=float), 1.0))
            claims.append(C.claim_row(
                "§1.4", f"encoders are context-dominant (B*): {lab}", paper="context-dominant (no number)",
                ours=med, low=lo, high=hi, threshold=0.5, kind="below",
                what="B*, median over pairs of the context fraction that outweighs the face (never flipped: 1)",
                interval=f"order-statistic 95% interval of the median, {len(b)} pairs"))
    return claims


def claims_table(tables: Mapping[str, pd.DataFrame], labels: Sequence[str], *, general: Sequence[str],
                 biometric: Sequence[str], k_max: int, far: float, rank: int, reference_far: float,
                 contrast: str | None, dataset: str, other_dataset: str) -> pd.DataFrame:
    """Table 8: one verdict row per claim of the paper the notebook measures (Table 1 leakage and ISP drops, §1.8
    subspace alignment, §1.6 utility, §1.5 inversion, §1.4 context dominance), in that order.

    Args:
        tables: the notebook's tables by :data:`CLAIM_TABLES` key — ``lo`` (verification rows at ``far``),
            ``comp`` (paired drops), ``table6`` (principal angles), ``util`` / ``imnet`` (utility, ImageNet
            agreement), ``inv`` (inversion), ``cpi`` (CPI against blur), ``fii_images`` (per-image FII) and
            ``bstar_pairs`` (per-pair B*).
        labels: every embedded encoder; general / biometric: the general-purpose and face-recognition ones.
        k_max: the largest probe-fit shots; far: the lowest resolvable FAR; rank: ISP's main rank for utility;
        reference_far: the judges' FAR in inversion; contrast: the FR-contrast encoder (or None);
        dataset / other_dataset: names of the main set and of ISP-X's set.

    Raises:
        InvalidArgumentError: a table is missing or ``far`` / ``reference_far`` lies outside (0, 1].
    """
    missing = [k for k in CLAIM_TABLES if k not in tables]
    if missing:
        raise InvalidArgumentError(f"tables lacks {missing} (needs {list(CLAIM_TABLES)})")
    check_probability("far", far, open_high=False)
    check_probability("reference_far", reference_far, open_high=False)
    claims = _leakage_claims(tables["lo"], tables["comp"], labels, general, biometric, k_max=k_max, far=far)
    claims += _subspace_claims(tables["table6"], general, dataset=dataset, other_dataset=other_dataset)
    claims += _utility_claims(tables["util"], tables["imnet"], general, rank=rank)
    claims += _inversion_claims(tables["inv"], general, contrast=contrast, reference_far=reference_far)
    claims += _context_claims(tables["cpi"], tables["fii_images"], tables["bstar_pairs"], general)
    return pd.DataFrame(claims, columns=CLAIM_COLUMNS)


def class_mean_spread(embeddings: torch.Tensor, identities: torch.Tensor, basis: torch.Tensor) -> float:
    """Largest distance of a class mean from the mean of the class means after projecting out ``basis`` (D, r)
    (orthonormal columns), in float64: 0 up to rounding when ``basis`` spans every centred class mean.

    Raises:
        ShapeError: mismatched shapes.
    """
    embeddings = check_tensor("embeddings", embeddings, ndim=2)
    identities = check_tensor("identities", identities, ndim=1)
    basis = check_tensor("basis", basis, ndim=2)
    if identities.shape[0] != embeddings.shape[0] or basis.shape[0] != embeddings.shape[1]:
        raise ShapeError(f"need embeddings (N, D), identities (N,) and basis (D, r), got "
                         f"{tuple(embeddings.shape)}, {tuple(identities.shape)}, {tuple(basis.shape)}")
    flat = embeddings.double() - (embeddings.double() @ basis.double()) @ basis.double().T
    means = torch.stack([flat[identities == i].mean(0) for i in torch.unique(identities)])
    return float((means - means.mean(0)).norm(dim=1).max())


def _inversion_checks(inv: pd.DataFrame, contrast: str) -> tuple[list[str], list[str]]:
    """Check 6: inverting the FR contrast's raw embeddings keeps identity; ISP-W gives no more than raw."""
    failures, notes = [], []
    fr = inv[(inv.encoder == contrast) & (inv.attack == "ridge") & (inv.judge == inv.judge.iloc[0])]
    fr = fr.set_index("condition")
    raw_fr, isp_fr = fr.loc["raw"], fr.loc["ISP-W"]
    notes.append(f"inversion, FR contrast ({contrast}, ridge, judge {inv.judge.iloc[0]}): margin raw "
                 f"{raw_fr.margin:+.4f} [{raw_fr.margin_low:+.4f}, "
                 f"{raw_fr.margin_high:+.4f}], ISP-W {isp_fr.margin:+.4f} [{isp_fr.margin_low:+.4f}, "
                 f"{isp_fr.margin_high:+.4f}]; rank-1 raw {raw_fr.rank1:.2f}, ISP-W {isp_fr.rank1:.2f} "
                 f"(chance {raw_fr.rank1_chance:.2f})")
    if not raw_fr.margin_low > 0:
        failures.append(f"inverting {contrast}'s raw embeddings gives no identity margin over the control "
                        f"({raw_fr.margin:+.4f}, CI low {raw_fr.margin_low:+.4f})")
    if isp_fr.margin_low > raw_fr.margin_high or isp_fr.rank1_low > raw_fr.rank1_high:
        failures.append(f"inversion of ISP-W-sanitised {contrast} embeddings beats the raw ones beyond the intervals")
    return failures, notes


def invariant_checks(tables: Mapping[str, pd.DataFrame], *, n_below_floor: int, floor: float,
                     spreads: Mapping[str, float], full_scale: bool, biometric: Sequence[str], rank: int,
                     check_inversion: bool, contrast: str | None) -> tuple[list[str], list[str]]:
    """privkit's own invariants of the ISP notebook: (1) no TAR below the resolvable FAR; (2) full-rank ISP makes the
    fitting class means coincide; and, at full scale only, (3) ISP-W raises no leaking encoder's TAR significantly,
    (4) the ridge TAR does not rise with rank for clear leakers, (5) copy detection after ISP-W stays >= 10x chance,
    (6) the FR-contrast inversion keeps identity raw and ISP-W gives no more than raw.

    Args:
        tables: ``comp`` (paired drops), ``sweep`` (rank sweep), ``util`` (utility), ``inv`` (inversion).
        n_below_floor: how many TARs were reported below the smallest resolvable FAR ``floor``.
        spreads: encoder -> :func:`class_mean_spread` of its full-rank ISP-W fit (only fits of rank m − 1).
        full_scale: False at the smoke scale (checks 3-6 skipped, with a note).
        biometric: face-recognition encoders (excluded from check 5); rank: ISP's main rank.
        check_inversion: run check 6 (the preset's FR contrast is on); contrast: the FR-contrast encoder.

    Returns:
        (failures, notes): one sentence each.

    Raises:
        InvalidArgumentError: a table is missing or ``n_below_floor < 0``.
    """
    missing = [k for k in ("comp", "sweep", "util", "inv") if k not in tables]
    if missing:
        raise InvalidArgumentError(f"tables lacks {missing}")
    if n_below_floor < 0:
        raise InvalidArgumentError(f"n_below_floor must be >= 0, got {n_below_floor}")
    failures, notes = [], []
    if n_below_floor:
        failures.append(f"{n_below_floor} TARs reported below the smallest resolvable FAR {floor:.2e}")
    for lab, spread in spreads.items():
        if spread > 1e-5:
            failures.append(f"{lab}: full-rank ISP leaves fitting class means {spread:.2e} apart")
    if not full_scale:
        notes.append("smoke or rehearsal scale: the ISP-vs-raw, rank-monotonicity, utility and inversion checks need "
                     "the default scale's identities and are skipped")
        return failures, notes
    comp, sweep, util, inv = (tables[k] for k in ("comp", "sweep", "util", "inv"))
    clear = comp[comp.clear_leak & (comp["transform"] == "ISP-W")]
    notes.append(f"clear leakers (raw ridge TAR above chance by more than its CI width): {list(clear.encoder)}; "
                 f"leaking only marginally: {sorted(set(comp[comp.leaks & ~comp.clear_leak].encoder))}")
    for _, c in comp[comp.leaks & (comp["transform"] == "ISP-W")].iterrows():
        if c.drop_high < 0:
            failures.append(f"{c.encoder}: ISP-W raises the ridge TAR ({100 * c.raw_tar:.1f}% -> "
                            f"{100 * c.isp_tar:.1f}%)")
    for lab in clear.encoder:
        curve = sweep[(sweep.encoder == lab) & sweep.method.isin(["raw", "ISP-W"])]
        for msg in X.rises_with_rank(curve):
            failures.append(f"{lab}: {msg}")
    # copy-detection retention is reported, not asserted: in portraits-views an identity is one photo, so the
    # identity subspace is also what tells photos apart; only "far above chance" is asserted
    main_u = util[(util.method == "ISP-W") & (util["rank"] == rank) & ~util.encoder.isin(biometric) & util.informative]
    for _, u in main_u[main_u.metric == "copy:recall@1"].iterrows():
        if u.transformed < 10 * u.chance:
            failures.append(f"{u.encoder}: copy-detection Recall@1 after ISP-W ({u.transformed:.3f}) is within 10x "
                            f"of chance ({u.chance:.4f})")
    if len(inv) and check_inversion and contrast is not None:
        f6, n6 = _inversion_checks(inv, contrast)
        failures += f6
        notes += n6
    return failures, notes
