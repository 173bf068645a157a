"""privkit.studies.isp tables / claims: the table building and verdict logic the ISP notebook calls."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from privkit.errors import InsufficientDataError, InvalidArgumentError, ShapeError
from privkit.studies.isp import claims as IC
from privkit.config import load as load_config
from privkit.studies.isp import experiments as X
from privkit.studies.isp import jobs as J
from privkit.studies.isp import tables as T


def _verification_rows() -> pd.DataFrame:
    """A small verification table at one FAR: two encoders, ridge and cosine, raw / ISP-W / ISP-X, k = 1 and 4."""
    rows = []
    for enc, base in (("fr [box]", 0.6), ("gen [image]", 0.05)):
        for probe in ("cosine", "ridge"):
            for k in (1, 4):
                for j, t in enumerate(("raw", "ISP-W", "ISP-X")):
                    tar = base / (1 + j) + 0.01 * k
                    rows.append({"encoder": enc, "probe": probe, "k": k, "transform": t, "far": 0.1, "tar": tar,
                                 "tar_low": tar - 0.02, "tar_high": tar + 0.02, "realised_far": 0.09})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------ Table 1 and 2
def test_leakage_wide_puts_transforms_side_by_side_with_chance():
    lo = _verification_rows()
    wide = T.leakage_wide(lo, 0.1)
    assert len(wide) == 2 * 2 * 2
    assert list(wide.columns[:4]) == ["encoder", "probe", "k", "far"]
    row = wide[(wide.encoder == "fr [box]") & (wide.probe == "ridge") & (wide.k == 4)].iloc[0]
    assert row["raw_tar"] == pytest.approx(0.64)
    assert row["ISP-W_tar"] == pytest.approx(0.34)
    assert row["ISP-X_tar_high"] == pytest.approx(0.6 / 3 + 0.04 + 0.02)
    assert row["chance_tar"] == pytest.approx(0.09)
    assert (wide.far == 0.1).all()


def test_leakage_wide_checks_its_input():
    with pytest.raises(InvalidArgumentError):
        T.leakage_wide(_verification_rows().drop(columns="realised_far"), 0.1)
    with pytest.raises(InvalidArgumentError):
        T.leakage_wide(_verification_rows(), 0.0)


def test_format_leakage_writes_percent_with_interval():
    show = T.format_leakage(T.leakage_wide(_verification_rows(), 0.1))
    assert list(show.columns) == ["encoder", "probe", "k", "chance (%)", "raw", "ISP-W", "ISP-X"]
    first = show.iloc[0]
    assert first["chance (%)"] == "9.00"
    assert first["raw"] == " 61.0 [59.0, 63.0]"


def test_paper_reference_table_has_paper_rows_then_ours():
    lo = _verification_rows()
    t = T.paper_reference_table(lo, ["fr [box]", "gen [image]"], ks=(1, 4), far=0.1, dataset="toy")
    paper = t[t.source.str.startswith("paper")]
    ours = t[t.source.str.startswith("privkit")].set_index("encoder")
    assert len(paper) == len(X.PAPER_RIDGE_TAR) and len(ours) == 2
    assert ours.loc["fr [box]", "kmax_raw"] == pytest.approx(64.0)
    assert ours.loc["fr [box]", "k1_ispw"] == pytest.approx(31.0)
    assert ours.loc["gen [image]", "source"] == "privkit (toy, FAR 0.1, k=4)"
    one_k = T.paper_reference_table(lo, ["fr [box]"], ks=(4,), far=0.1, dataset="toy")
    assert one_k[one_k.source.str.startswith("privkit")][["k1_raw", "k1_ispw"]].isna().all().all()
    with pytest.raises(InvalidArgumentError):
        T.paper_reference_table(lo, ["fr [box]"], ks=(), far=0.1, dataset="toy")


def test_raw_leakers_needs_the_lower_bound_above_the_realised_far():
    lo = _verification_rows()
    assert T.raw_leakers(lo, ["fr [box]", "gen [image]"], k_max=4) == ["fr [box]"]


def test_describe_paired_leakage_names_significant_drops():
    comp = pd.DataFrame([
        {"encoder": "a", "leaks": True, "transform": "ISP-W", "raw_tar": 0.5, "isp_tar": 0.2, "drop_low": 0.1},
        {"encoder": "a", "leaks": True, "transform": "ISP-X", "raw_tar": 0.5, "isp_tar": 0.45, "drop_low": -0.1},
        {"encoder": "b", "leaks": False, "transform": "ISP-W", "raw_tar": 0.1, "isp_tar": 0.1, "drop_low": -0.1},
        {"encoder": "b", "leaks": False, "transform": "ISP-X", "raw_tar": 0.1, "isp_tar": 0.1, "drop_low": -0.1},
    ])
    assert T.describe_paired_leakage(comp) == [
        "a: ridge TAR 50.0% -> ISP-W 20.0% (significant), ISP-X 45.0% (not significant)"]


# ------------------------------------------------------------------------------------------------ utility tables
def _utility_rows() -> pd.DataFrame:
    rows = []
    for method, rank in (("raw", 0), ("ISP-W", 2), ("LEACE", 2)):
        for metric, ret, informative in (("knn:lighting", 90.0, True), ("knn:blur", 70.0, True),
                                         ("knn:pose", 10.0, False), ("copy:recall@1", 80.0, True)):
            rows.append({"encoder": "gen [image]", "method": method, "rank": rank, "metric": metric,
                         "informative": informative, "retention_pct": ret + rank})
    return pd.DataFrame(rows)


def test_utility_summary_averages_informative_attributes_per_family():
    imnet = pd.DataFrame([{"encoder": "gen [image]", "method": "ISP-W", "rank": 2, "agreement": 0.95}])
    s = T.utility_summary(_utility_rows(), imnet).set_index(["method", "rank"])
    assert s.loc[("ISP-W", 2), "knn"] == pytest.approx(82.0)  # mean of 92 and 72; pose is not informative
    assert s.loc[("ISP-W", 2), "copy:recall@1"] == pytest.approx(82.0)
    assert s.loc[("ISP-W", 2), "imagenet_top1_agreement"] == pytest.approx(95.0)
    assert math.isnan(s.loc[("LEACE", 2), "imagenet_top1_agreement"])
    assert "imagenet_top1_agreement" not in T.utility_summary(_utility_rows(), pd.DataFrame()).columns


def test_baseline_table_keeps_the_erasers_at_the_given_ranks_sorted():
    sweep = pd.DataFrame([{"encoder": "gen [image]", "method": m, "rank": r, "tar": 0.1, "tar_low": 0.0,
                           "tar_high": 0.2, "transform": f"{m} r={r}"}
                          for m, r in (("raw", 0), ("INLP", 2), ("ISP-W", 2), ("LEACE", 2), ("ISP-W", 8))])
    util_sum = T.utility_summary(_utility_rows(), pd.DataFrame())
    t = T.baseline_table(sweep, util_sum, (2,))
    assert list(t.method) == ["INLP", "ISP-W", "LEACE"]
    assert t.set_index("method").loc["ISP-W", "knn"] == pytest.approx(82.0)
    assert math.isnan(t.set_index("method").loc["INLP", "knn"])


def test_format_inversion_counts_verified_targets():
    inv = pd.DataFrame([{"encoder": "e", "condition": "raw", "attack": "ridge", "judge": "dlib", "success_rate": 0.25,
                         "n_targets": 8, "control_rate": 0.0, "rank1": 0.5, "rank1_low": 0.2, "rank1_high": 0.8,
                         "margin": 0.01, "margin_low": -0.002, "margin_high": 0.02, "ridge_lambda": 10.0}])
    show = T.format_inversion(inv).iloc[0]
    assert show["verified"] == "2/8"
    assert show["rank-1 [95% CI]"] == "0.50 [0.20, 0.80]"
    assert show["margin [95% CI]"] == "+0.0100 [-0.0020, +0.0200]"
    assert show["ridge λ"] == "10"


def test_inversion_roles_keep_the_contrast_apart_from_the_judges():
    labels = ["dlib-resnet-fr [box]", "faceres [box]", "mobileface [box]", "pixels [image]"]
    judges, contrast = T.inversion_roles(labels, set(labels[:3]))
    assert judges == ["dlib-resnet-fr [box]", "faceres [box]"] and contrast == "mobileface [box]"
    judges, contrast = T.inversion_roles(labels[:1], {labels[0]})
    assert judges == ["dlib-resnet-fr [box]"] and contrast == "dlib-resnet-fr [box]"
    assert T.inversion_roles(["pixels [image]"], set()) == ([], None)


def test_subspace_table_compares_three_fits_per_encoder():
    g = torch.Generator().manual_seed(0)
    ids = torch.arange(12).repeat_interleave(4)
    emb = {"e [image]": torch.nn.functional.normalize(torch.randn(48, 16, generator=g), dim=1)}
    train = ids < 6
    other_ids = torch.arange(5).repeat_interleave(3)
    other = torch.nn.functional.normalize(torch.randn(15, 16, generator=g), dim=1)
    proj = {"e [image]": {"ISP-W": X.fit_eraser("isp", emb["e [image]"][train], ids[train], rank=3),
                          "ISP-X": X.fit_eraser("isp", other, other_ids, rank=3)}}
    t = T.subspace_table(["e [image]"], proj, emb, ids, ~train)
    assert len(t) == 3 and (t.encoder == "e [image]").all()
    assert ((t.mean_cos >= 0) & (t.mean_cos <= 1 + 1e-9)).all()
    with pytest.raises(InvalidArgumentError):
        T.subspace_table(["e [image]"], proj, emb, ids, (~train).long())
    with pytest.raises(InsufficientDataError):
        T.subspace_table([], proj, emb, ids, ~train)


# ------------------------------------------------------------------------------------------------ claims and checks
def test_class_mean_spread_vanishes_when_the_basis_spans_the_class_means():
    g = torch.Generator().manual_seed(1)
    ids = torch.arange(5).repeat_interleave(6)
    emb = torch.randn(30, 10, generator=g, dtype=torch.float64)
    means = torch.stack([emb[ids == i].mean(0) for i in range(5)])
    basis, _ = torch.linalg.qr((means - means.mean(0)).T)  # (10, 5): spans the centred means (rank 4)
    assert IC.class_mean_spread(emb, ids, basis[:, :4]) < 1e-10
    assert IC.class_mean_spread(emb, ids, torch.zeros(10, 0, dtype=torch.float64)) > 0.1
    with pytest.raises(ShapeError):
        IC.class_mean_spread(emb, ids[:-1], basis)


def _claim_tables() -> dict[str, pd.DataFrame]:
    lo = _verification_rows()
    comp = pd.DataFrame([{"encoder": e, "leaks": e == "fr [box]", "clear_leak": e == "fr [box]", "transform": t,
                          "raw_tar": 0.6, "isp_tar": 0.3, "drop": 0.3, "drop_low": 0.2, "drop_high": 0.4,
                          "chance": 0.09} for e in ("fr [box]", "gen [image]") for t in ("ISP-W", "ISP-X")])
    table6 = pd.DataFrame([{"encoder": "gen [image]", "a": "ISP-W (probe-fit ids)", "b": "ISP-X (other set)", "rank": 4,
                            "mean_cos": 0.5, "max_cos": 0.9, "chance_mean_cos": 0.2}])
    util = pd.DataFrame([{"encoder": "gen [image]", "method": "ISP-W", "rank": 4, "informative": True,
                          "metric": "knn:blur", "retention_pct": 99.0, "transformed": 0.5, "raw": 0.505,
                          "n_queries": 4000}])
    cpi = pd.DataFrame([{"encoder": "gen [image]", "sigma": 0.0, "cpi": 0.8, "sem": 0.05}])
    fii = pd.DataFrame({"encoder": "gen [image]", "fii": 0.1, "fii_normalised": [0.2, 0.3, 0.25, 0.35, float("nan")]})
    bstar = pd.DataFrame({"encoder": "gen [image]", "b_star": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, float("inf")]})
    return {"lo": lo, "comp": comp, "table6": table6, "util": util, "imnet": pd.DataFrame(), "inv": pd.DataFrame(),
            "cpi": cpi, "fii_images": fii, "bstar_pairs": bstar}


def test_claims_table_judges_each_claim_from_its_interval():
    claims = IC.claims_table(_claim_tables(), ["fr [box]", "gen [image]"], general=["gen [image]"],
                             biometric={"fr [box]"}, k_max=4, far=0.1, rank=4, reference_far=1e-3, contrast=None,
                             dataset="toy", other_dataset="other")
    assert list(claims.columns) == IC.CLAIM_COLUMNS
    by = {c: v for c, v in zip(claims.claim, claims.verdict)}
    assert by["a face recogniser leaks far more identity than any general-purpose encoder"] == "holds"
    assert by["a general-purpose encoder leaks identity above chance: gen [image]"] == "not resolvable"  # 9 [7, 11]
    assert by["ISP-W lowers the ridge TAR: fr [box]"] == "holds"
    assert by["identity subspaces fitted on different face sets align: gen [image]"] == "does not hold"
    assert by["ISP keeps utility (kNN on non-identity attributes): gen [image]"] == "holds"
    # context dominance on each measure: CPI 0.8 ± 0.1 (holds); FII_n 0.275 ± 0.06 > 0 (does not hold: the face moves
    # the embedding more); B* median 0.4 over 7 pairs (never flipped counted as 1), interval [0.1, 1] (not resolvable)
    assert by["encoders are context-dominant (CPI): gen [image]"] == "holds"
    assert by["encoders are context-dominant (FII): gen [image]"] == "does not hold"
    assert by["encoders are context-dominant (B*): gen [image]"] == "not resolvable"
    b = claims[claims.claim == "encoders are context-dominant (B*): gen [image]"].iloc[0]
    assert (b.ours, b.low, b.high) == (0.4, 0.1, 1.0)
    assert list(claims.section) == ["Table 1"] * 6 + ["§1.8", "§1.6", "§1.4", "§1.4", "§1.4"]


def test_median_interval_uses_order_statistics():
    med, lo, hi = IC.median_interval(np.arange(1, 101, dtype=float))
    assert med == 50.5 and (lo, hi) == (40.0, 60.0)  # ranks 50 -/+ 9.8 -> 40 and 60
    assert IC.median_interval([3.0]) == (3.0, 3.0, 3.0)
    with pytest.raises(InsufficientDataError):
        IC.median_interval([])


def test_claims_table_needs_every_table():
    tables = _claim_tables()
    del tables["cpi"]
    with pytest.raises(InvalidArgumentError, match="cpi"):
        IC.claims_table(tables, ["gen [image]"], general=["gen [image]"], biometric=set(), k_max=4, far=0.1, rank=4,
                        reference_far=1e-3, contrast=None, dataset="toy", other_dataset="other")


def _check_tables(raise_tar: bool) -> dict[str, pd.DataFrame]:
    comp = pd.DataFrame([{"encoder": "e", "leaks": True, "clear_leak": True, "transform": "ISP-W", "raw_tar": 0.4,
                          "isp_tar": 0.6 if raise_tar else 0.2, "drop": 0.0, "drop_low": -0.3 if raise_tar else 0.1,
                          "drop_high": -0.1 if raise_tar else 0.3}])
    sweep = pd.DataFrame([{"encoder": "e", "method": m, "rank": r, "tar": 0.4 - 0.1 * r, "tar_low": 0.35 - 0.1 * r,
                           "tar_high": 0.45 - 0.1 * r} for m, r in (("raw", 0), ("ISP-W", 1), ("ISP-W", 2))])
    util = pd.DataFrame([{"encoder": "e", "method": "ISP-W", "rank": 2, "informative": True, "metric": "copy:recall@1",
                          "transformed": 0.5, "chance": 0.01}])
    return {"comp": comp, "sweep": sweep, "util": util, "inv": pd.DataFrame()}


def test_invariant_checks_at_smoke_scale_only_check_the_floor_and_the_class_means():
    failures, notes = IC.invariant_checks(_check_tables(True), n_below_floor=0, floor=0.01, spreads={"e": 1e-9},
                                          full_scale=False, biometric=set(), rank=2, check_inversion=True,
                                          contrast=None)
    assert failures == [] and len(notes) == 1 and notes[0].startswith("smoke or rehearsal scale")
    failures, _ = IC.invariant_checks(_check_tables(False), n_below_floor=3, floor=0.01, spreads={"e": 1e-3},
                                      full_scale=False, biometric=set(), rank=2, check_inversion=False, contrast=None)
    assert failures == ["3 TARs reported below the smallest resolvable FAR 1.00e-02",
                        "e: full-rank ISP leaves fitting class means 1.00e-03 apart"]


def test_invariant_checks_at_full_scale_catch_a_raised_tar():
    failures, notes = IC.invariant_checks(_check_tables(True), n_below_floor=0, floor=0.01, spreads={},
                                          full_scale=True, biometric=set(), rank=2, check_inversion=False,
                                          contrast=None)
    assert failures == ["e: ISP-W raises the ridge TAR (40.0% -> 60.0%)"]
    assert notes[0].startswith("clear leakers (raw ridge TAR above chance by more than its CI width): ['e']")
    failures, _ = IC.invariant_checks(_check_tables(False), n_below_floor=0, floor=0.01, spreads={},
                                      full_scale=True, biometric=set(), rank=2, check_inversion=False, contrast=None)
    assert failures == []
    with pytest.raises(InvalidArgumentError):
        IC.invariant_checks({}, n_below_floor=0, floor=0.01, spreads={}, full_scale=True, biometric=set(), rank=2,
                            check_inversion=False, contrast=None)


def test_study_functions_check_their_arguments():
    with pytest.raises(InsufficientDataError):
        T.leakage_study(None, [], {}, {}, torch.zeros(2, dtype=torch.long))
    with pytest.raises(InvalidArgumentError):
        T.paired_leakage(_verification_rows(), {}, ["fr [box]"], k_max=4, far=0.1, n_boot=0)
    with pytest.raises(InsufficientDataError):
        J.run_inversion(load_config("isp", "smoke"), {}, faces=None, masks={}, store=None, scale="smoke")
    with pytest.raises(InsufficientDataError, match="none of the FARs"):
        T.resolvable_fars(load_config("isp", "smoke"), torch.tensor([0, 0, 1, 1]),  # a handful of impostor pairs
                          {"val": torch.tensor([True] * 4), "test": torch.tensor([True] * 4)})
    assert np.isfinite(T.leakage_wide(_verification_rows(), 0.1).select_dtypes("number").to_numpy()).all()
