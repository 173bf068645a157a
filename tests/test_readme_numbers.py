"""Every number and verdict the README states about the committed results is checked against the CSV it describes.

Each test rebuilds the README's sentence (or table row) from the committed files in ``figures/`` and asserts the
README contains it, so a regenerated figure that changes a number makes this test fail until the README is updated.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from privkit.isp.inversion import describe_inversion_evidence

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FIGURES = ROOT / "figures"


def csv(name: str) -> pd.DataFrame:
    return pd.read_csv(FIGURES / f"{name}.csv")


def in_readme(text: str) -> None:
    flat = re.sub(r"\s+", " ", README)
    assert re.sub(r"\s+", " ", text) in flat, f"the README does not say (from the CSV): {text!r}"


# ------------------------------------------------------------------------------------------------- ISP
@pytest.mark.parametrize("encoder,label", [("dlib-resnet-fr [box]", "dlib-resnet-fr (biometric reference)"),
                                           ("age-gender [box]", "age-gender"),
                                           ("mtcnn-onet [box]", "mtcnn-onet (face box)"),
                                           ("ssl-small [image]", "ssl-small")])
def test_isp_ridge_table(encoder, label):
    t = csv("isp/table1_leakage")
    r = t[(t.encoder == encoder) & (t.probe == "ridge") & (t.k == 12)].iloc[0]
    in_readme(f"| {label} | {100 * r.raw_tar:.1f} % | {100 * r['ISP-W_tar']:.1f} % | {100 * r['ISP-X_tar']:.1f} % |")


def test_isp_inversion_sentences():
    t = csv("isp/table7_inversion")
    in_readme(describe_inversion_evidence(t))
    fr = t[(t.encoder.str.startswith("dlib")) & (t.attack == "ridge")].set_index("condition")
    raw, isp = (round(fr.loc[c, "success_rate"] * fr.loc[c, "n_targets"]) for c in ("raw", "ISP-W"))
    n = int(fr.loc["raw", "n_targets"])
    in_readme(f"verifies {raw}/{n} raw and {isp}/{n} after ISP-W")


# ------------------------------------------------------------------------------------------------- ScoreShield
def test_scoreshield_clip_vs_nearest():
    t = csv("scoreshield/tableS1_solvers")
    n = int(t.n.max())
    row = t[t.n == n].set_index("method")
    clip, nearest = row.loc["clip", "distance_to_clean"], row.loc["newton", "distance_to_clean"]
    assert clip < nearest  # the README's verdict: the clip can be closer to the clean Gram
    in_readme(f"(n = {n}: {clip:.1f} vs {nearest:.1f})")
    in_readme(f"(n = {n}: Newton {row.loc['newton', 'eigendecompositions']} eigendecompositions, "
              f"Dykstra {row.loc['dykstra', 'eigendecompositions']}, AAP {row.loc['aap', 'eigendecompositions']} "
              "and not the nearest point)")


def test_scoreshield_flip_rate():
    r = csv("scoreshield/tableG2_pair_flip_rate").iloc[0]
    in_readme(f"({r.flip_rate_closed_form:.4f} vs {r.flip_rate_measured:.4f} over the pairs at ε = {r.epsilon:g}")


def test_scoreshield_verification_accuracy():
    t = csv("scoreshield/table1_dp_verification").set_index("epsilon")
    a = t.accuracy
    in_readme(f"balanced 10-fold accuracy {a['clean']:.1f} % clean, {a['100']:.1f} at ε = 100, {a['20']:.1f} at "
              f"ε = 20, {a['15']:.1f} at ε = 15")
    in_readme(f"at the paper's ε = 20, δ = 1e-4 the real δ is {t.loc['20', 'true_delta']:.1e}".replace("e-03", "e-3"))


def test_scoreshield_template_tar():
    t = csv("scoreshield/table1b_template_verification").set_index("epsilon")
    tar = t["tar@0.001 recal"]
    in_readme(f"Recalibrated TAR@1e-3: {tar['clean']:.1f} % clean, {tar['100']:.1f} at ε = 100, {tar['70']:.1f} at "
              f"ε = 70, {tar['35']:.1f} at ε = 35")


def test_scoreshield_audits():
    t = csv("scoreshield/tableA1_audits")
    ok = t[t.expected == "pass"]
    bad = t[t.expected == "caught"]
    assert (ok.passed).all() and (~bad.passed).all()
    in_readme(f"audit at ε ≥ {ok.epsilon_lower_95.min():.2f} to ≥ {ok.epsilon_lower_95.max():.2f} "
              f"against a claim of 1; both negative controls are caught "
              f"({' and '.join(f'{v:.2f}' for v in bad.epsilon_lower_95)})")


# ------------------------------------------------------------------------------------------------- DP pose
@pytest.mark.parametrize("method,label", [("dpsgd", "DP-SGD"), ("projected", "projected DP-SGD"),
                                          ("feature", "feature DP"), ("feature_projective", "feature-projective DP")])
def test_dppose_table(method, label):
    t = csv("dppose/table2_paper_comparison")
    r = t[t.method == method].set_index("epsilon")
    paper = " / ".join("—" if pd.isna(r.loc[e, "paper_mpii_pckh"]) else f"{r.loc[e, 'paper_mpii_pckh']:.2f}"
                       for e in (0.2, 0.8))
    in_readme(f"| {label} | {r.loc[0.2, 'ours_pckh']:.2f} | {r.loc[0.8, 'ours_pckh']:.2f} | {paper} |")


def test_dppose_gap_and_seed_spread():
    t = csv("dppose/table2_paper_comparison")
    ours = {(r.method, r.epsilon): r.ours_pckh for r in t.itertuples()}
    top, low, fp = ours[("nonprivate", float("inf"))], ours[("dpsgd", 0.2)], ours[("feature_projective", 0.8)]
    in_readme(f"Non-private fine-tuning reaches {top:.2f}, so feature-projective recovers ({fp:.2f} − {low:.2f})/"
              f"({top:.2f} − {low:.2f}) = {100 * (fp - low) / (top - low):.0f} % of the gap")
    s = csv("dppose/table4_seed_spread").set_index("method")
    diff = s.loc["feature_projective", "mean"] - s.loc["dpsgd", "mean"]
    spread = (s.loc["feature_projective", "sd"] ** 2 + s.loc["dpsgd", "sd"] ** 2) ** 0.5
    in_readme(f"over {int(s.loc['dpsgd', 'n_seeds'])} seeds at ε = 0.8 it beats DP-SGD by {diff:.1f} points against a "
              f"spread of ±{spread:.2f}")


def test_dppose_substitution_epsilon_reported():
    runs = csv("dppose/table1_runs")
    feat = runs[runs.method.isin(["feature", "feature_projective"])]
    assert (feat.neighbouring == "substitution").all() and (feat.accountant == "pld").all()
    assert (feat.epsilon_reported <= feat.epsilon + 1e-9).all()
    other = runs[runs.method.isin(["dpsgd", "projected"])]
    assert (other.neighbouring == "add_remove").all()


def test_dppose_noise_multipliers():
    runs = csv("dppose/table1_runs")
    main = runs[(runs.seed == 0) & (runs.clip_norm == runs.clip_norm.min()) & (runs.init == "warm")]

    def sigma(method, eps):
        return main[(main.method == method) & (main.epsilon == eps)].noise_multiplier.iloc[0]

    in_readme(f"(ε = 0.8: noise multiplier {sigma('feature_projective', 0.8):.2f} against DP-SGD's "
              f"{sigma('dpsgd', 0.8):.2f}; ε = 0.2: {sigma('feature', 0.2):.1f} against {sigma('dpsgd', 0.2):.2f};")


# ------------------------------------------------------------------------------------------------- encoders
def test_encoder_table_auc():
    t = csv("encoders/verification_auc").set_index(["encoder", "face_set"]).auc

    def pair(e: str) -> str:
        return f"{t[(e, 'lfw-subset-views')]:.3f} / {t[(e, 'portraits-views')]:.3f}"

    for enc in ("dlib-resnet-fr", "faceres", "mobileface", "efficientnet-lite0", "mtcnn-onet", "age-gender",
                "ssl-small", "pixels"):
        row = next(line for line in README.splitlines() if line.startswith(f"| `{enc}` |"))
        assert row.rstrip().endswith(f"| {pair(enc)} |"), (enc, row[-40:], pair(enc))
    assert f"| {pair('pdq')}, {pair('phash')} |" in README
    # the verdict in the text
    assert t[("faceres", "portraits-views")] < t[("dlib-resnet-fr", "portraits-views")]
    assert t[("faceres", "portraits-views")] > t[("mobileface", "portraits-views")]


def test_isp_principal_angles():
    t = csv("isp/table6_subspaces")
    t["name"] = t.encoder.str.split(" [", regex=False).str[0]

    def span(names) -> tuple[float, float]:
        rows = t[t.name.isin(names)].mean_cos
        return rows.min(), rows.max()

    leak = span(["dlib-resnet-fr", "age-gender", "mtcnn-onet", "pixels", "ssl-small"])
    ssl, dlib, hashes = span(["ssl-small"]), span(["dlib-resnet-fr"]), span(["pdq", "phash"])
    in_readme(f"mean cosines {leak[0]:.2f}–{leak[1]:.2f} for the encoders that leak — ssl-small "
              f"{ssl[0]:.2f}–{ssl[1]:.2f}, dlib {dlib[0]:.2f}–{dlib[1]:.2f} — and ≈ chance, "
              f"{hashes[0]:.2f}–{hashes[1]:.2f}, for pdq/phash")
    assert hashes[1] < t[t.name.isin(["pdq", "phash"])].chance_mean_cos.max() + 0.05  # "≈ chance"
