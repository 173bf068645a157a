"""The tables of the ISP notebook (``notebooks/isp.py``): each study's per-encoder step, and the tables built from it.

The notebook calls these in order — :func:`embed_encoders` → :func:`resolvable_fars` → :func:`leakage_study` →
:func:`leakage_wide` / :func:`paper_reference_table` / :func:`paired_leakage` → (as jobs,
:mod:`privkit.studies.isp.jobs`) :func:`attribution_one` per encoder → :func:`attribution_summary`;
:func:`rank_sweep_one` per encoder → :func:`rank_sweep_tables` → :func:`utility_summary` / :func:`baseline_table`;
→ :func:`subspace_table`; :func:`inversion_setup` and :func:`inversion_attacked` per encoder →
:func:`inversion_table` — and prints or saves what they return. The single-encoder building blocks live in
:mod:`privkit.studies.isp.experiments`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch

from privkit._validate import check_columns, check_int, check_probability
from privkit.data.types import FaceSet
from privkit.errors import InsufficientDataError, InvalidArgumentError, PrivkitError
from privkit.isp.probes import MLPOptions
from privkit.studies.embedding import EmbedRequest, FaceSource, Jobs, embed_all
from privkit.studies.isp import experiments as X
from privkit.studies.isp.presets import IspConfig

__all__ = [
    "preset_labels", "main_projectors", "EmbeddedEncoders", "ResolvableFars", "resolvable_fars", "lowest_resolvable_far", "LeakageStudy", "RankSweep",
    "InversionRun", "face_sources", "embedding_requests", "embed_encoders", "leakage_study", "leakage_wide",
    "format_leakage", "paper_reference_table", "paired_leakage", "describe_paired_leakage", "raw_leakers",
    "attribution_one", "attribution_summary", "SweepInputs", "sweep_inputs", "rank_sweep_one", "rank_sweep_tables",
    "utility_summary", "baseline_table", "subspace_table", "inversion_roles", "inversion_setup", "inversion_attacked",
    "inversion_attacks", "inversion_table", "format_inversion",
]

Split = tuple[torch.Tensor, torch.Tensor]


def _check_nonempty(name: str, labels: Sequence[str]) -> list[str]:
    labels = list(labels)
    if not labels:
        raise InsufficientDataError(f"{name} is empty: no encoder produced embeddings")
    return labels


# ---------------------------------------------------------------------------------------------------------------------
# Data and embeddings
# ---------------------------------------------------------------------------------------------------------------------
@dataclass
class EmbeddedEncoders:
    """What :func:`embed_encoders` returns.

    Attributes:
        encoders: encoder name -> loaded encoder; emb / emb_other: label ``"name [mode]"`` -> (N, D) embeddings of
        the main / other set; table: one row per embedded encoder (kind, dimension, failures to enrol);
        skipped: one line per encoder of the preset that is not available here.
    """

    encoders: dict[str, Any]
    emb: dict[str, torch.Tensor]
    emb_other: dict[str, torch.Tensor]
    table: pd.DataFrame
    skipped: list[str] = field(default_factory=list)


def face_sources(cfg: IspConfig, *, paper_data: bool, seed: int = 0,
                 data_root: str | None = None) -> tuple[FaceSource, FaceSource]:
    """What makes the main face set and the other set (ISP-X's fit): CelebA and VGGFace2 test from ``data_root`` with
    ``paper_data`` (the paper and rehearsal scales), else the embedded sets ``cfg.face_set`` and ``cfg.transfer_set``."""
    seed = check_int("seed", seed, minimum=0)
    if paper_data:
        main = FaceSource("load_celeba", {"selection": {"min_images": cfg.images_per_identity,
                                                        "n_identities": cfg.n_identities,
                                                        "images_per_identity": cfg.images_per_identity},
                                          "size": cfg.face_size, "seed": seed}, data_root)
        other = FaceSource("load_vggface2", {"split": "test", "selection": {
            "min_images": cfg.transfer_images, "n_identities": cfg.transfer_identities,
            "images_per_identity": cfg.transfer_images}, "size": cfg.face_size, "seed": seed}, data_root)
        return main, other
    main = FaceSource("load_faces", {"name": cfg.face_set, "n_identities": cfg.n_identities,
                                     "images_per_identity": cfg.images_per_identity, "size": cfg.face_size,
                                     "context_leakage": cfg.context_leakage, "seed": seed})
    other = FaceSource("load_faces", {"name": cfg.transfer_set, "n_identities": cfg.transfer_identities,
                                      "images_per_identity": cfg.transfer_images, "size": cfg.face_size,
                                      "context_leakage": cfg.context_leakage, "seed": seed})
    return main, other


def embedding_requests(cfg: IspConfig, encoders: Mapping[str, Any], sources: tuple[FaceSource, FaceSource],
                       sets: tuple[FaceSet | None, FaceSet | None] = (None, None), *,
                       seed: int = 0) -> list[EmbedRequest]:
    """The ``faces.embed`` requests of every preset encoder in ``encoders`` (in the preset's order): the main set, then
    the other set, per encoder (``sets``: the loaded sets; None only to plan, as the job spec does not read them)."""
    out = []
    for spec in cfg.encoders:
        name, mode = spec.split(":")
        if name in encoders:
            out += [EmbedRequest(src, fs, encoders[name], "isp", {"input": mode}, seed) for src, fs in zip(sources, sets)]
    return out


def embed_encoders(cfg: IspConfig, faces: FaceSet, other: FaceSet, *, device: Any, data_root: str | None = None,
                   seed: int = 0, sources: tuple[FaceSource, FaceSource] | None = None,
                   jobs: Jobs | None = None) -> EmbeddedEncoders:
    """Embeddings of both face sets by every encoder of ``cfg.encoders`` (``"name:mode"``, mode ``image`` or
    ``box``) that is available here, one ``faces.embed`` job per (set, encoder) of ``jobs`` (None: here, without a
    store) through the on-disk cache of :func:`~privkit.studies.isp.experiments.embed_faces`.

    Args:
        sources: what made ``faces`` and ``other`` (:func:`face_sources`; None: the preset's, at the default scale).

    Raises:
        InvalidArgumentError: an encoder spec without ``":"`` or with an unknown mode, or ``seed < 0``.
    """
    seed = check_int("seed", seed, minimum=0)
    from privkit.encoders import list_encoders, load_encoder

    for spec in cfg.encoders:
        if spec.count(":") != 1 or spec.split(":")[1] not in X.INPUT_MODES:
            raise InvalidArgumentError(f"encoder spec must be 'name:mode' with mode in {X.INPUT_MODES}, got {spec!r}")
    src_main, src_other = sources or face_sources(cfg, paper_data=False, seed=seed, data_root=data_root)
    listed = list_encoders(data_root=data_root)
    available = {e.name: e.available for e in listed}
    encoders, kept, skipped = {}, [], []
    for spec in cfg.encoders:
        name, mode = spec.split(":")
        label = f"{name} [{mode}]"
        if not available.get(name, False):
            why = "; ".join(e.detail for e in listed if e.name == name)
            skipped.append(f"skipping {label}: not available here ({why})")
            continue
        if name not in encoders:
            encoders[name] = load_encoder(name, device=device, data_root=data_root)
        kept.append((label, name))
    got = embed_all(embedding_requests(cfg, encoders, (src_main, src_other), (faces, other), seed=seed), jobs)
    emb, emb_other, rows = {}, {}, []
    for i, (label, name) in enumerate(kept):
        emb[label], emb_other[label] = got[2 * i].emb, got[2 * i + 1].emb
        rows.append({"encoder": label, "kind": encoders[name].kind, "dim": emb[label].shape[1],
                     "failures_to_enrol (uncached images)": got[2 * i].failures_to_enrol
                     + got[2 * i + 1].failures_to_enrol})
    return EmbeddedEncoders(encoders, emb, emb_other, pd.DataFrame(rows), skipped)


@dataclass(frozen=True)
class ResolvableFars:
    """Which FARs the validation and test identities resolve (:func:`resolvable_fars`).

    Attributes:
        impostor_pairs: split -> impostor pairs; floor: the smallest resolvable FAR (the larger of the two splits');
        resolvable: the preset's FARs at or above it; lowest: the lowest of them (what the studies report).
    """

    impostor_pairs: dict[str, int]
    floor: float
    resolvable: list[float]
    lowest: float


def resolvable_fars(cfg: IspConfig, identity: torch.Tensor, masks: Mapping[str, torch.Tensor]) -> ResolvableFars:
    """The preset's FARs that both the validation and the test identities resolve (at least 10 false accepts,
    :func:`~privkit.metrics.smallest_resolvable_far`), and the lowest of them.

    Raises:
        InsufficientDataError: none of ``cfg.fars`` is resolvable.
    """
    from privkit.isp import VerificationPairs
    from privkit.metrics import smallest_resolvable_far

    n_imp = {k: VerificationPairs.create(identity[masks[k]]).n_impostor_pairs for k in ("val", "test")}
    floor = max(smallest_resolvable_far(n) for n in n_imp.values())
    resolvable = [f for f in cfg.fars if f >= floor * (1 - 1e-12)]
    if not resolvable:
        raise InsufficientDataError(f"none of the FARs {list(cfg.fars)} is resolvable: the smallest resolvable FAR of "
                                    f"these validation/test identities is {floor:.2e}; add identities or a larger FAR")
    return ResolvableFars(n_imp, floor, resolvable, min(resolvable))


def lowest_resolvable_far(cfg: IspConfig, identity: torch.Tensor, masks: Mapping[str, torch.Tensor]) -> float:
    """The lowest FAR of the preset that the validation and test identities resolve (:func:`resolvable_fars`)."""
    return resolvable_fars(cfg, identity, masks).lowest


# ---------------------------------------------------------------------------------------------------------------------
# 1. Leakage before and after ISP
# ---------------------------------------------------------------------------------------------------------------------
def preset_labels(specs: Sequence[str], loaded: Any = None) -> list[str]:
    """``"name [mode]"`` labels of preset encoder specs ``"name:mode"`` (only those whose name is in ``loaded``, when
    given), in the preset's order."""
    out = [f"{n} [{m}]" for n, m in (e.split(":") for e in specs)]
    return out if loaded is None else [lab for lab in out if lab.split(" ")[0] in loaded]


def main_projectors(cfg: IspConfig, fits: Mapping[str, Any]) -> dict[str, Any]:
    """One encoder's ISP-W / ISP-X fits cut to the main rank: ``cfg.isp_rank`` capped by both fits' ranks."""
    r_main = min(cfg.isp_rank, fits["ISP-W"].rank, fits["ISP-X"].rank)
    return {k: X.truncate_eraser(v, r_main) for k, v in fits.items()}


@dataclass
class LeakageStudy:
    """What :func:`leakage_study` returns.

    Attributes:
        fits: label -> {"ISP-W": full-rank fit on the probe-fit identities, "ISP-X": fit on the other set};
        projectors: label -> the same cut to the main rank; leak: the long verification table (every encoder,
        probe, transform, k and FAR; the cosine attacker's probe is named "cosine"); cells: label -> the kept
        per-cell results of the linear probes (for paired comparisons).
    """

    fits: dict[str, dict[str, Any]]
    projectors: dict[str, dict[str, Any]]
    leak: pd.DataFrame
    cells: dict[str, Any]


def leakage_study(cfg: IspConfig, labels: Sequence[str], splits: Mapping[str, Mapping[str, Split]],
                  emb_other: Mapping[str, torch.Tensor], other_identity: torch.Tensor, *,
                  seed: int = 0) -> LeakageStudy:
    """Open-set verification TARs of every encoder, raw and after ISP-W / ISP-X at ``cfg.isp_rank`` (capped by each
    fit's rank), for the preset's probes, shots and FARs; the MLP probe only at the largest k.

    Raises:
        InsufficientDataError: no labels; InvalidArgumentError: ``seed < 0``.
    """
    labels = _check_nonempty("labels", labels)
    seed = check_int("seed", seed, minimum=0)
    fits, projectors, tables, cells = {}, {}, [], {}
    r_max_x = min(max(cfg.ranks), int(torch.unique(other_identity).numel()) - 1)
    for lab in labels:
        tr_emb, tr_id = splits[lab]["train"]
        d = tr_emb.shape[1]
        # ISP-W fitted once at the full numerical rank (≤ min(d, m − 1)) and cut to every rank of the sweep
        fits[lab] = {"ISP-W": X.fit_eraser("isp", tr_emb, tr_id, rank=None),
                     "ISP-X": X.fit_eraser("isp", emb_other[lab], other_identity, rank=min(cfg.isp_rank, r_max_x, d))}
        projectors[lab] = main_projectors(cfg, fits[lab])
        r_main = projectors[lab]["ISP-W"].rank
        tr = {"raw": None, **projectors[lab]}
        lin = [p for p in cfg.probes if p != "mlp"]
        t, res = X.verification_table(splits[lab], tr, probes=lin, ks=cfg.ks, fars=cfg.fars, n_boot=cfg.n_boot,
                                      seed=seed, ridge_lambdas=cfg.ridge_lambdas, keep_results=True)
        if "mlp" in cfg.probes:  # the MLP only at the largest k: with one shot per identity it has nothing to learn
            t2, _ = X.verification_table(splits[lab], tr, probes=("mlp",), ks=(max(cfg.ks),), fars=cfg.fars,
                                         n_boot=cfg.n_boot, seed=seed,
                                         mlp_options=MLPOptions(max_epochs=cfg.mlp_epochs, patience=cfg.mlp_patience))
            t = pd.concat([t, t2], ignore_index=True)
        t.insert(0, "encoder", lab)
        t.insert(1, "rank", r_main)
        tables.append(t)
        cells[lab] = res
    leak = pd.concat(tables, ignore_index=True)
    leak["probe"] = leak["probe"].replace({"raw": "cosine"})
    return LeakageStudy(fits, projectors, leak, cells)


def leakage_wide(lo: pd.DataFrame, far: float) -> pd.DataFrame:
    """Table 1: one row per (encoder, probe, k) at one FAR, the TAR and its interval for raw / ISP-W / ISP-X side by
    side, and the chance TAR (the realised FAR of the raw cell).

    Raises:
        InvalidArgumentError: ``lo`` lacks a column of the verification table, or ``far`` is not in (0, 1].
    """
    check_columns("lo", lo, ["encoder", "probe", "k", "transform", "tar", "tar_low", "tar_high", "realised_far"])
    check_probability("far", far, open_high=False)
    wide = lo.pivot_table(index=["encoder", "probe", "k"], columns="transform", values=["tar", "tar_low", "tar_high"],
                          sort=False)
    wide.columns = [f"{t}_{v}" for v, t in wide.columns]
    wide = wide.reset_index()
    wide.insert(3, "far", far)
    chance = lo[lo["transform"] == "raw"][["encoder", "probe", "k", "realised_far"]].rename(
        columns={"realised_far": "chance_tar"})
    return wide.merge(chance, on=["encoder", "probe", "k"], how="left")


def format_leakage(wide: pd.DataFrame) -> pd.DataFrame:
    """Table 1 for reading: TAR % with its interval as ``"a [b, c]"`` per transform, and the chance TAR in %."""
    check_columns("wide", wide, ["encoder", "probe", "k", "chance_tar"])
    show = wide[["encoder", "probe", "k", "chance_tar"]].copy()
    for t in ("raw", "ISP-W", "ISP-X"):
        show[t] = [f"{100 * a:5.1f} [{100 * b:4.1f}, {100 * c:4.1f}]" for a, b, c in
                   zip(wide[f"{t}_tar"], wide[f"{t}_tar_low"], wide[f"{t}_tar_high"])]
    show["chance_tar"] = (100 * show["chance_tar"]).map("{:.2f}".format)
    return show.rename(columns={"chance_tar": "chance (%)"})


def paper_reference_table(lo: pd.DataFrame, labels: Sequence[str], *, ks: Sequence[int], far: float,
                          dataset: str) -> pd.DataFrame:
    """Table 2: the paper's ridge TARs (%, CelebA-20, FAR 1e-4) and ours at ``far`` (k = 1 and the largest k) in the
    same columns; our k = 1 columns are NaN when the smallest k is the largest.

    Raises:
        InvalidArgumentError: ``lo`` lacks a column of the verification table, or ``ks`` is empty.
    """
    check_columns("lo", lo, ["encoder", "probe", "k", "transform", "tar"])
    if not len(ks):
        raise InvalidArgumentError("ks must not be empty")
    k_max = max(ks)
    paper = pd.DataFrame([{"source": "paper (CelebA-20, FAR 1e-4, k=16)", "encoder": e, "far": 1e-4, "k_max": 16,
                           **vals} for e, vals in X.PAPER_RIDGE_TAR.items()])
    paper = paper.rename(columns={"k16_raw": "kmax_raw", "k16_ispw": "kmax_ispw", "k16_ispx": "kmax_ispx"})
    cells = {"k1_raw": ("raw", min(ks)), "k1_ispw": ("ISP-W", min(ks)), "kmax_raw": ("raw", k_max),
             "kmax_ispw": ("ISP-W", k_max), "kmax_ispx": ("ISP-X", k_max)}
    ours = []
    ridge = lo[lo.probe == "ridge"]
    for lab in labels:
        r = ridge[ridge.encoder == lab].set_index(["transform", "k"]).tar * 100
        ours.append({"source": f"privkit ({dataset}, FAR {far:g}, k={k_max})", "encoder": lab, "far": far,
                     "k_max": k_max, **{c: r.get(cell, np.nan) for c, cell in cells.items()}})
    table2 = pd.concat([paper, pd.DataFrame(ours)], ignore_index=True)
    if min(ks) == k_max:
        table2.loc[table2.source.str.startswith("privkit"), ["k1_raw", "k1_ispw"]] = np.nan
    return table2


def _raw_ridge_row(lo: pd.DataFrame, lab: str, k_max: int) -> pd.Series:
    return lo[(lo.encoder == lab) & (lo.probe == "ridge") & (lo["transform"] == "raw") & (lo.k == k_max)].iloc[0]


def raw_leakers(lo: pd.DataFrame, labels: Sequence[str], *, k_max: int) -> list[str]:
    """The encoders whose raw ridge TAR at the largest k lies above chance by more than its interval (the lower
    bound exceeds the realised FAR)."""
    check_columns("lo", lo, ["encoder", "probe", "k", "transform", "tar_low", "realised_far"])
    return [lab for lab in labels if (lambda r: r.tar_low > r.realised_far)(_raw_ridge_row(lo, lab, k_max))]


def paired_leakage(lo: pd.DataFrame, cells: Mapping[str, Any], labels: Sequence[str], *, k_max: int, far: float,
                   n_boot: int, seed: int = 0) -> pd.DataFrame:
    """The drop raw − ISP-W and raw − ISP-X of each encoder's ridge TAR at ``far`` and the largest k, with its paired
    identity-bootstrap interval; ``leaks`` / ``clear_leak`` say whether the raw TAR is above chance beyond its
    interval / by more than its interval's width.

    Raises:
        InvalidArgumentError: ``lo`` lacks a column, ``n_boot < 1`` or ``seed < 0``.
    """
    check_columns("lo", lo, ["encoder", "probe", "k", "transform", "tar", "tar_low", "tar_high", "realised_far"])
    n_boot = check_int("n_boot", n_boot, minimum=1)
    seed = check_int("seed", seed, minimum=0)
    comp = []
    for lab in labels:
        raw_row = _raw_ridge_row(lo, lab, k_max)
        leaks = bool(raw_row.tar_low > raw_row.realised_far)
        clear = bool(raw_row.tar - raw_row.realised_far > raw_row.tar_high - raw_row.tar_low)
        for t in ("ISP-W", "ISP-X"):
            pc = X.paired_comparison(cells[lab], ("raw", "ridge", k_max), (t, "ridge", k_max), far=far,
                                     n_boot=n_boot, seed=seed)
            comp.append({"encoder": lab, "leaks": leaks, "clear_leak": clear, "transform": t, "raw_tar": pc["tar_a"],
                         "isp_tar": pc["tar_b"], "drop": pc["difference"], "drop_low": pc["low"],
                         "drop_high": pc["high"], "chance": raw_row.realised_far})
    return pd.DataFrame(comp)


def describe_paired_leakage(comp: pd.DataFrame) -> list[str]:
    """One sentence per leaking encoder of :func:`paired_leakage`: its ridge TAR raw -> ISP-W / ISP-X and whether
    each drop is significant (paired interval above 0)."""
    check_columns("comp", comp, ["encoder", "leaks", "transform", "raw_tar", "isp_tar", "drop_low"])
    lines = []
    for lab in comp[comp.leaks].encoder.unique():
        w, x_ = (comp[(comp.encoder == lab) & (comp["transform"] == t)].iloc[0] for t in ("ISP-W", "ISP-X"))
        sig = lambda c: "significant" if c.drop_low > 0 else "not significant"  # noqa: E731
        lines.append(f"{lab}: ridge TAR {100 * w.raw_tar:.1f}% -> ISP-W {100 * w.isp_tar:.1f}% ({sig(w)}), "
                     f"ISP-X {100 * x_.isp_tar:.1f}% ({sig(x_)})")
    return lines


# ---------------------------------------------------------------------------------------------------------------------
# 2. Face versus context
# ---------------------------------------------------------------------------------------------------------------------
def attribution_one(cfg: IspConfig, encoder: Any, pool: FaceSet, *, seed: int = 0) -> dict[str, Any]:
    """FII by FCR, CPI against face blur and the B* curve of one whole-image encoder with the preset's settings
    (:func:`~privkit.studies.isp.experiments.attribution_tables`)."""
    seed = check_int("seed", seed, minimum=0)
    return X.attribution_tables(encoder, pool, fii_images=cfg.fii_images, sigma=cfg.fii_sigma,
                                n_context_regions=cfg.fii_regions, fcr_bins=cfg.fcr_bins, cpi_sigmas=cfg.cpi_sigmas,
                                cpi_queries=cfg.cpi_queries, bstar_pairs=cfg.bstar_pairs, bstar_betas=cfg.bstar_betas,
                                seed=seed)


def attribution_summary(results: Sequence[tuple[str, dict[str, Any] | None]]) -> tuple[dict[str, pd.DataFrame],
                                                                                      list[str]]:
    """The attribution tables from each encoder's :func:`attribution_one` (``(label, result)`` in the preset's order;
    a None result: the encoder is not loaded) and their summary (Table 3: mean FII, CPI without and with the
    strongest blur, median B*).

    Returns:
        ({"table3", "fii", "cpi", "bstar", "fii_images" (per-image FII), "bstar_pairs" (per-pair B*, ∞: never
        flipped)} DataFrames (each long one with an ``encoder`` column), notes: one line per encoder skipped or
        without CPI).

    Raises:
        InsufficientDataError: no encoder has a result.
    """
    fii_rows, cpi_rows, bstar_rows, summary, notes, images, pairs = [], [], [], [], [], [], []
    for lab, a in results:
        if a is None:
            notes.append(f"skipping {lab}: not loaded")
            continue
        fii_rows.append(a["fii_by_fcr"].assign(encoder=lab))
        images.append(a["fii"][["fii", "fii_normalised"]].assign(encoder=lab))
        pairs.append(a["bstar"].per_pair[["b_star"]].assign(encoder=lab))
        if a["cpi"] is not None:
            cpi_rows.append(a["cpi"].assign(encoder=lab))
        else:
            notes.append(f"{lab}: CPI not computed ({a['cpi_note']})")
        bstar_rows.append(a["bstar"].curve.assign(encoder=lab))
        b = a["bstar"]
        summary.append({"encoder": lab, "fii_mean": a["fii"].fii.mean(),
                        "fii_normalised_mean": a["fii"].fii_normalised.mean(),
                        "share_face_dominant": float((a["fii"].fii > 0).mean()),
                        "cpi_no_blur": a["cpi"].cpi.iloc[0] if a["cpi"] is not None else np.nan,
                        "cpi_max_blur": a["cpi"].cpi.iloc[-1] if a["cpi"] is not None else np.nan,
                        "b_star_median": b.median if math.isfinite(b.median) else np.nan,
                        "never_flipped": b.never_flipped})
    if not summary:
        raise InsufficientDataError("no attribution encoder of the preset is loaded")
    cpi = (pd.concat(cpi_rows, ignore_index=True) if cpi_rows
           else pd.DataFrame(columns=["sigma", "cpi", "sem", "encoder"]))
    return {"table3": pd.DataFrame(summary), "fii": pd.concat(fii_rows, ignore_index=True), "cpi": cpi,
            "bstar": pd.concat(bstar_rows, ignore_index=True), "fii_images": pd.concat(images, ignore_index=True),
            "bstar_pairs": pd.concat(pairs, ignore_index=True)}, notes


# ---------------------------------------------------------------------------------------------------------------------
# 3-4. Rank sweep, utility, baselines
# ---------------------------------------------------------------------------------------------------------------------
@dataclass
class RankSweep:
    """What :func:`rank_sweep` returns.

    Attributes:
        sweep: ridge TAR per encoder, method (raw, ISP-W, LEACE, INLP) and rank; util: the utility table of every
        encoder (kNN / linear-probe / copy-detection retention); imnet: ImageNet top-1 agreement rows (empty when
        no encoder has an ImageNet head); notes: one line per baseline that could not be fitted.
    """

    sweep: pd.DataFrame
    util: pd.DataFrame
    imnet: pd.DataFrame
    notes: list[str]


def _imagenet_agreement(encoder: Any, transforms: Mapping[tuple[str, int], Any], photo_views: torch.Tensor,
                        photo_names: np.ndarray, *, label: str, seed: int) -> list[dict[str, Any]]:
    """Top-1 agreement with the raw ImageNet classifier after each transform, averaged per photo, with a 95%
    photo-bootstrap interval (2000 resamples)."""
    from privkit.isp.utility import imagenet_top1_retention

    rows = []
    with torch.no_grad():
        pooled = encoder.pooled_features(photo_views)
    photos = [torch.from_numpy(photo_names == ph) for ph in dict.fromkeys(photo_names)]
    for (m, r), fn in transforms.items():
        per_photo = np.array([imagenet_top1_retention(encoder, None, fn, pooled=pooled[sel])["top1_agreement"]
                              for sel in photos])
        boot = np.random.default_rng(seed).choice(per_photo, size=(2000, len(per_photo))).mean(1)
        rows.append({"encoder": label, "method": m, "rank": r, "agreement": per_photo.mean(),
                     "agreement_low": np.quantile(boot, 0.025), "agreement_high": np.quantile(boot, 0.975),
                     "n": int(pooled.shape[0]), "photos": len(per_photo)})
    return rows


def _tag(table: pd.DataFrame, key: Mapping[str, tuple[str, int]], label: str) -> pd.DataFrame:
    """``table`` with the method and rank of each transform name (``key``) and the encoder ``label`` in front."""
    table["method"] = [key[v][0] for v in table["transform"]]
    table["rank"] = [key[v][1] for v in table["transform"]]
    table.insert(0, "encoder", label)
    return table


@dataclass(frozen=True, eq=False)
class SweepInputs:
    """What every encoder's rank sweep shares (:func:`sweep_inputs`): the ImageNet photo views and their photo
    names, the copy-detection references (indices of test images) and their augmented copies."""

    photo_views: torch.Tensor
    photo_names: np.ndarray
    ref_idx: torch.Tensor
    copies: torch.Tensor


def sweep_inputs(cfg: IspConfig, faces: FaceSet, masks: Mapping[str, torch.Tensor], *, seed: int = 0) -> SweepInputs:
    """The seeded inputs every encoder's sweep shares (the same for every encoder, so each can rebuild them)."""
    from privkit.isp import simple_augment
    from privkit.isp.utility import imagenet_photo_views

    seed = check_int("seed", seed, minimum=0)
    photo_views, photo_names = imagenet_photo_views(cfg.imagenet_views, size=224, seed=seed, return_names=True)
    gen_aug = torch.Generator().manual_seed(seed)
    test_idx = torch.nonzero(masks["test"]).flatten()
    ref_idx = test_idx[torch.randperm(test_idx.numel(), generator=gen_aug)[: cfg.copy_references]]
    copies = simple_augment(faces.images[ref_idx], generator=gen_aug)
    return SweepInputs(photo_views, np.array(photo_names), ref_idx, copies)


def rank_sweep_one(cfg: IspConfig, lab: str, *, faces: FaceSet, masks: Mapping[str, torch.Tensor],
                   embeddings: torch.Tensor, encoder: Any, fit_w: Any, isp_x: Any, shared: SweepInputs, k_max: int,
                   far: float, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, list[dict[str, Any]], list[str]]:
    """One encoder's rank sweep: ridge TAR at ``far`` and utility raw, after ISP-W at every rank of ``cfg.ranks``
    (cut from its full fit ``fit_w``) and after LEACE / INLP at every rank of ``cfg.baseline_ranks``; utility = kNN
    (and, for general-purpose encoders, a linear probe at the main rank) on the non-identity attributes, copy
    detection of augmented test images (whole-image encoders), ImageNet top-1 agreement (encoders with an ImageNet
    head, ISP-X projector ``isp_x`` included).

    Args:
        lab: the encoder's label ``"name [mode]"``; embeddings: its (N, d) embeddings of ``faces``.

    Returns:
        (sweep rows, utility rows, ImageNet agreement rows, notes: one line per baseline not fitted).

    Raises:
        InvalidArgumentError: ``far`` outside (0, 1] or ``seed < 0``.
    """
    check_probability("far", far, open_high=False)
    seed = check_int("seed", seed, minimum=0)
    notes: list[str] = []
    mode = lab.split("[")[1].rstrip("]")
    split = {k: (embeddings[m], faces.identity[m]) for k, m in masks.items()}
    tr_emb, tr_id = split["train"]
    bank_m, query_m = masks["train"] | masks["val"], masks["test"]
    transforms = {("ISP-W", r): X.truncate_eraser(fit_w, r) for r in sorted({min(r, fit_w.rank) for r in cfg.ranks})}
    r_top = min(max(cfg.baseline_ranks), fit_w.rank)
    for method in ("leace", "inlp"):
        try:
            fitted = X.fit_eraser(method, tr_emb, tr_id, rank=r_top)
        except PrivkitError as err:
            notes.append(f"{lab}: {method} not fitted ({err})")
            continue
        for r in sorted({min(r, r_top) for r in cfg.baseline_ranks}):
            transforms[(method.upper(), r)] = X.truncate_eraser(fitted, r)
    named = {f"{m} r={r}": fn for (m, r), fn in transforms.items()}
    t, _ = X.verification_table(split, {"raw": None, **named}, probes=("ridge",), ks=(k_max,), fars=(far,),
                                n_boot=cfg.n_boot, seed=seed, ridge_lambdas=cfg.ridge_lambdas)
    key = {"raw": ("raw", 0), **{f"{m} r={r}": (m, r) for (m, r) in transforms}}
    knn = (embeddings[bank_m], {a: v[bank_m] for a, v in faces.attributes.items()},
           embeddings[query_m], {a: v[query_m] for a, v in faces.attributes.items()})
    cd = (embeddings[shared.ref_idx], encoder.embed(shared.copies).float().cpu()) if mode == "image" else None
    r_lin = min(cfg.isp_rank, fit_w.rank)
    # the linear probe (a full L-BFGS fit per attribute) at the main rank, for the general-purpose encoders
    lin_names = [n_ for n_, (m, r) in zip(named, transforms) if r == r_lin] if encoder.kind == "general" else []
    u = X.utility_table(named, knn=knn, copy=cd, k=cfg.knn_k, linear=lin_names)
    imnet = []
    if hasattr(encoder, "imagenet_logits"):  # ImageNet top-1 agreement (EfficientNet-Lite0)
        imnet = _imagenet_agreement(encoder, {**transforms, ("ISP-X", isp_x.rank): isp_x}, shared.photo_views,
                                    shared.photo_names, label=lab, seed=seed)
    return _tag(t, key, lab), _tag(u, key, lab), imnet, notes


def rank_sweep_tables(parts: Sequence[tuple[pd.DataFrame, pd.DataFrame, list[dict[str, Any]], list[str]]]) -> RankSweep:
    """The rank sweep of every encoder from each one's :func:`rank_sweep_one` (in the encoders' order).

    Raises:
        InsufficientDataError: no encoder.
    """
    if not parts:
        raise InsufficientDataError("rank sweep: no encoder produced embeddings")
    return RankSweep(pd.concat([p[0] for p in parts], ignore_index=True),
                     pd.concat([p[1] for p in parts], ignore_index=True),
                     pd.DataFrame([row for p in parts for row in p[2]]), [n for p in parts for n in p[3]])


def utility_summary(util: pd.DataFrame, imnet: pd.DataFrame) -> pd.DataFrame:
    """Mean retention (% of raw) per encoder, method, rank and metric family (kNN, linear probe, each copy-detection
    metric) over the informative attributes, with the ImageNet top-1 agreement (%) where measured."""
    check_columns("util", util, ["encoder", "method", "rank", "metric", "informative", "retention_pct"])
    informative = util[util.informative]
    family = informative.metric.str.split(":").str[0].where(informative.metric.str.contains(r"^(?:knn|linear):"),
                                                             informative.metric)
    util_sum = (informative.assign(family=family)
                .groupby(["encoder", "method", "rank", "family"]).retention_pct.mean().unstack("family").reset_index())
    if len(imnet):
        util_sum = util_sum.merge(imnet[["encoder", "method", "rank", "agreement"]].assign(
            imagenet_top1_agreement=lambda d: 100 * d.agreement).drop(columns="agreement"),
            on=["encoder", "method", "rank"], how="left")
    return util_sum


def baseline_table(sweep: pd.DataFrame, util_sum: pd.DataFrame, ranks: Sequence[int]) -> pd.DataFrame:
    """Table 5: ISP-W, LEACE and INLP at the given ranks — ridge TAR with its interval and the utility summary."""
    check_columns("sweep", sweep, ["encoder", "method", "rank", "tar", "tar_low", "tar_high"])
    b = sweep[sweep.method.isin(["ISP-W", "LEACE", "INLP"]) & sweep["rank"].isin(tuple(ranks))]
    table5 = b[["encoder", "method", "rank", "tar", "tar_low", "tar_high"]].merge(
        util_sum, on=["encoder", "method", "rank"], how="left")
    return table5.sort_values(["encoder", "rank", "method"]).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------------------------
# 5. Principal angles
# ---------------------------------------------------------------------------------------------------------------------
def subspace_table(labels: Sequence[str], projectors: Mapping[str, Mapping[str, Any]],
                   emb: Mapping[str, torch.Tensor], identity: torch.Tensor, held: torch.Tensor) -> pd.DataFrame:
    """Table 6: principal-angle cosines between ISP-W, ISP fitted on the held-out identities ``held`` (a boolean
    mask) at the same rank, and ISP-X, per encoder."""
    labels = _check_nonempty("labels", labels)
    if held.dtype != torch.bool or held.shape != identity.shape:
        raise InvalidArgumentError("held must be a boolean mask with the shape of identity")
    ang = []
    for lab in labels:
        r = projectors[lab]["ISP-W"].rank
        p_held = X.fit_eraser("isp", emb[lab][held], identity[held], rank=r)
        t = X.subspace_angles({"ISP-W (probe-fit ids)": projectors[lab]["ISP-W"], "ISP (val+test ids)": p_held,
                               "ISP-X (other set)": projectors[lab]["ISP-X"]})
        t.insert(0, "encoder", lab)
        ang.append(t)
    return pd.concat(ang, ignore_index=True)


# ---------------------------------------------------------------------------------------------------------------------
# 6. Inversion
# ---------------------------------------------------------------------------------------------------------------------
@dataclass
class InversionRun:
    """What :func:`run_inversion` returns.

    Attributes:
        table: the inversion table (``encoder``, ``condition`` raw / ISP-W, attack, judge, rates, margins);
        recs: ``"<encoder> <condition>/<attack>"`` -> reconstructions; taus: judge -> cosine threshold; tgt / aux:
        indices of the target and auxiliary images; contrast: label of the FR-contrast encoder (or None);
        skipped: one line per inversion encoder not available.
    """

    table: pd.DataFrame
    recs: dict[str, torch.Tensor]
    taus: dict[str, float]
    tgt: torch.Tensor
    aux: torch.Tensor
    contrast: str | None
    skipped: list[str]


def inversion_roles(labels: Sequence[str], biometric: Sequence[str]) -> tuple[list[str], str | None]:
    """The judges (dlib and faceres, when embedded) and the FR-contrast encoder: the first of mobileface, faceres,
    dlib that is biometric and not a judge (else the first biometric one, else None)."""
    judge_labs = [lab for lab in ("dlib-resnet-fr [box]", "faceres [box]") if lab in labels]
    fr_pref = [lab for lab in ("mobileface [box]", "faceres [box]", "dlib-resnet-fr [box]") if lab in biometric]
    contrast_lab = next((lab for lab in fr_pref if lab not in judge_labs), fr_pref[0] if fr_pref else None)
    return judge_labs, contrast_lab


def inversion_setup(cfg: IspConfig, faces: FaceSet, masks: Mapping[str, torch.Tensor], *,
                    seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, Any, Any]:
    """The targets (one seeded image each of at most ``cfg.inversion_targets`` test identities), the auxiliary set
    (every probe-fit image) and the attacks' settings.

    Returns:
        (target indices, auxiliary indices, :class:`~privkit.studies.isp.experiments.InversionTargets`,
        :class:`~privkit.studies.isp.experiments.InversionSettings`).
    """
    seed = check_int("seed", seed, minimum=0)
    test_idx = torch.nonzero(masks["test"]).flatten()
    g = torch.Generator().manual_seed(seed + 1)
    test_ids = torch.unique(faces.identity[test_idx])
    test_ids = test_ids[torch.randperm(test_ids.numel(), generator=g)[: cfg.inversion_targets]]
    tgt = torch.stack([test_idx[faces.identity[test_idx] == i][
        torch.randint(int((faces.identity[test_idx] == i).sum()), (1,), generator=g)] for i in test_ids]).flatten()
    aux = torch.nonzero(masks["train"]).flatten()
    data = X.InversionTargets(faces.images[aux], faces.box[aux], faces.identity[aux], faces.images[tgt],
                              faces.box[tgt], target_identities=faces.identity[tgt])
    settings = X.InversionSettings(crop_size=cfg.inversion_resolution, crop_margin=cfg.inversion_margin,
                                   attacks=cfg.inversion_attacks, ridge_lambdas=cfg.ridge_lambdas,
                                   epochs=cfg.inversion_epochs, steps=cfg.inversion_steps)
    return tgt, aux, data, settings


def inversion_attacked(lab: str, encoder: Any, embeddings: torch.Tensor, isp_w: Any, *, mode: str, tgt: torch.Tensor,
                       aux: torch.Tensor) -> dict[str, Any]:
    """The raw and ISP-W leaked embeddings of one encoder (``"<lab> raw"``, ``"<lab> ISP-W"``), attacked through
    ``encoder`` (None: no module to differentiate, regression attacks only)."""
    attacked = {}
    for cond, proj in (("raw", None), ("ISP-W", isp_w)):
        fn = (lambda z: z) if proj is None else proj
        module = None if encoder is None else X.ProjectedEncoder(encoder, proj)
        attacked[f"{lab} {cond}"] = X.AttackedEncoder(module, fn(embeddings[aux]), fn(embeddings[tgt]), mode)
    return attacked


def inversion_attacks(cfg: IspConfig, labels: Sequence[str], contrast_lab: str | None) -> tuple[
        list[tuple[str, str | None, str]], list[str]]:
    """Who is inverted: ``(label, encoder name or None, view)`` for every encoder of ``cfg.inversion_encoders`` that
    is embedded, then the FR contrast (its embeddings only, no module); and one line per encoder not available."""
    out, skipped = [], []
    for spec in cfg.inversion_encoders:
        name, mode = spec.split(":")
        lab = f"{name} [{mode}]"
        if lab not in labels:
            skipped.append(f"skipping {lab}: not available")
            continue
        out.append((lab, name, mode))
    if cfg.inversion_fr_contrast and contrast_lab is not None:
        out.append((contrast_lab, None, "image"))
    return out, skipped


def inversion_table(cfg: IspConfig, rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The inversion table from :func:`~privkit.studies.isp.experiments.inversion_study`'s rows of every attacked
    embedding: the encoder and its condition (raw / ISP-W) split into two columns, and the judges' FAR."""
    inv = pd.DataFrame(list(rows))
    inv.insert(1, "condition", [e.rsplit(" ", 1)[1] for e in inv.encoder])
    inv["encoder"] = [e.rsplit(" ", 1)[0] for e in inv.encoder]
    inv["reference_far"] = cfg.reference_far
    return inv


def format_inversion(inv: pd.DataFrame) -> pd.DataFrame:
    """Table 7 for reading: verified count, control false-accept rate, rank-1 and margin with their intervals."""
    check_columns("inv", inv, ["encoder", "condition", "attack", "judge", "success_rate", "n_targets", "control_rate",
                                "rank1", "rank1_low", "rank1_high", "margin", "margin_low", "margin_high",
                                "ridge_lambda"])
    show7 = inv[["encoder", "condition", "attack", "judge"]].copy()
    show7["verified"] = [f"{round(r.success_rate * r.n_targets)}/{r.n_targets}" for r in inv.itertuples()]
    show7["control FA"] = inv.control_rate.map("{:.3f}".format)
    show7["rank-1 [95% CI]"] = [f"{r.rank1:.2f} [{r.rank1_low:.2f}, {r.rank1_high:.2f}]" for r in inv.itertuples()]
    show7["margin [95% CI]"] = [f"{r.margin:+.4f} [{r.margin_low:+.4f}, {r.margin_high:+.4f}]"
                                for r in inv.itertuples()]
    show7["ridge λ"] = inv.ridge_lambda.map("{:g}".format)
    return show7
