"""The DP pose notebook's presets and experiment helpers (privkit.studies.dppose.presets, privkit.studies.dppose.experiments)."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
import torch
from dp_accounting import GaussianDpEvent, NonPrivateDpEvent

import privkit
from privkit.data.types import PoseSet
from privkit.dppose import PCKhResult, build_pose_model
from privkit.studies.dppose import experiments as X
from privkit.errors import InsufficientDataError, InvalidArgumentError, UnknownNameError
from privkit.privacy.guarantee import Neighbouring, PrivacyGuarantee

SIZE = 32


def poses(n: int, *, seed: int, id_offset: int = 0) -> PoseSet:
    """Random keypoints drawn as bright dots on noise (enough for a few training steps)."""
    g = torch.Generator().manual_seed(seed)
    kp = 4 + torch.rand(n, 16, 2, generator=g) * (SIZE - 8)
    img = 0.2 * torch.rand(n, 3, SIZE, SIZE, generator=g)
    idx = kp.round().long()
    for i in range(n):
        img[i, :, idx[i, :, 1], idx[i, :, 0]] = 1.0
    head = torch.cat([kp[:, 9] - 3.0, kp[:, 9] + 3.0], dim=1)
    return PoseSet(images=img, keypoints=kp, visible=torch.rand(n, 16, generator=g) > 0.1, head_box=head,
                   identity=torch.arange(n) + id_offset, name="dots")


# ------------------------------------------------------------------------------------------------- presets
def test_presets_register_every_scale_and_artefact():
    for scale in privkit.config.SCALES:
        cfg = privkit.config.load("dppose", scale)
        assert dataclasses.is_dataclass(cfg) and type(cfg).__dataclass_params__.frozen
        assert cfg.k <= cfg.n_public_grads and all(k <= cfg.n_public_grads for k in cfg.k_grid)
        assert cfg.delta < 1e-4
    names = [a for a, _ in privkit.config.artefacts("dppose")]
    assert len(names) == len(set(names)) == 13
    assert all(n.startswith(("fig", "table")) for n in names)
    default = privkit.config.load("dppose", "default")
    assert default.epsilons == (0.2, 0.4, 0.6, 0.8) and default.seeds >= 3
    assert sorted(default.clips) == [0.01, 0.1, 1.0] and default.clips[0] == 0.1  # the paper's grid, C = 0.1 main
    assert default.delta == 4e-5 and default.backbone == "efficientnet_lite0" and default.image_size >= 128


# ------------------------------------------------------------------------------------------------- design
def test_default_design_covers_the_issue_with_each_run_once():
    cfg = privkit.config.load("dppose", "default")
    runs = X.design_runs(cfg, seed=5)
    keys = [r.key for r in runs]
    assert len(keys) == len(set(keys))
    df = pd.DataFrame([{**dataclasses.asdict(r), "purposes": "+".join(r.purposes)} for r in runs])
    df = df.rename(columns={"clip": "clip_norm"})  # DataFrame.clip is a method
    warm = df[(df.init == "warm") & (df.view == "raw")]
    c1 = cfg.clips[0]

    def eps_of(method, clip=c1, k=cfg.k, seed=5):
        d = warm[(warm.method == method) & (warm.clip_norm == clip) & (warm.seed == seed)]
        if method in ("projected", "feature_projective"):
            d = d[d.k == k]
        return sorted(d.epsilon)

    for m in ("dpsgd", "projected", "feature", "feature_projective"):
        assert eps_of(m) == [0.2, 0.4, 0.6, 0.8]
    for c in cfg.clips[1:]:
        for m in ("dpsgd", "feature_projective"):
            assert eps_of(m, clip=c) == [0.8]
        for m in ("projected", "feature"):
            assert eps_of(m, clip=c) == []
    for m in ("dpsgd", "projected", "feature", "feature_projective", "nonprivate"):
        seeds = sorted(warm[(warm.method == m) & warm.purposes.str.contains("seeds")
                            & ((warm.epsilon == 0.8) | warm.epsilon.isna())
                            & ((warm.clip_norm == c1) | warm.clip_norm.isna()) & ((warm.k == cfg.k) | warm.k.isna())].seed)
        assert seeds == [5, 6, 7]
    for m in ("dpsgd", "feature_projective"):  # the headline pair at the smallest epsilon has seeds too
        low = warm[(warm.method == m) & (warm.epsilon == 0.2) & warm.purposes.str.contains("seeds")]
        assert sorted(low.seed) == [5, 6, 7]
    blurred = df[df.view == "blurred"]
    assert len(blurred) == 1 and blurred.method.iloc[0] == "nonprivate" and blurred.purposes.iloc[0] == "blurred"
    scratch = df[df.init == "scratch"]
    assert set(scratch.method) == {"nonprivate", "dpsgd", "feature", "feature_projective"}
    assert (scratch[scratch.method != "nonprivate"].epsilon == 0.8).all()
    ks = sorted(warm[(warm.method == "feature_projective") & warm.purposes.str.contains(r"\bk\b")].k)
    assert ks == sorted(set(cfg.k_grid) | {cfg.k})
    # the run serving several questions is trained once and carries every purpose
    hub = [r for r in runs if r.key == ("feature_projective", "warm", 0.8, c1, cfg.k, 5, "raw")]
    assert len(hub) == 1 and set(hub[0].purposes) == {"grid", "clip", "seeds", "init", "k"}
    assert all(r.epsilon is None and r.clip is None and r.k is None for r in runs if r.method == "nonprivate")
    assert all(r.k is None for r in runs if r.method in ("dpsgd", "feature"))
    assert len(runs) == 42


def test_smoke_design_has_the_five_methods_and_one_epsilon():
    runs = X.design_runs(privkit.config.load("dppose", "smoke"))
    assert {r.method for r in runs} == set(X.METHODS)
    assert {r.epsilon for r in runs if r.epsilon is not None} == {0.8}
    assert {r.clip for r in runs if r.clip is not None} == {0.1}
    assert [r.view for r in runs].count("blurred") == 1 and "on blurred images" in runs[1].label
    assert "seed=0" in runs[0].label and "eps=" not in runs[0].label


def test_design_rejects_bad_configs():
    cfg = privkit.config.load("dppose", "smoke")
    with pytest.raises(UnknownNameError):
        X.design_runs(dataclasses.replace(cfg, scratch_methods=("sgd",)))
    with pytest.raises(InvalidArgumentError):
        X.design_runs(dataclasses.replace(cfg, seeds=0))
    with pytest.raises(InvalidArgumentError):
        X.design_runs(dataclasses.replace(cfg, clips=()))
    with pytest.raises(InvalidArgumentError):
        X.design_runs(cfg, seed=-1)


# ------------------------------------------------------------------------------------------------- summaries
def test_gap_recovered_reproduces_the_papers_headline():
    assert X.gap_recovered(82.61, low=63.85, high=X.PAPER_NONPRIVATE_MPII) == pytest.approx(0.7354, abs=1e-4)
    assert X.gap_recovered(82.61, low=78.17, high=89.36) == pytest.approx(0.3968, abs=1e-4)
    assert X.gap_recovered(10.0, low=10.0, high=20.0) == 0.0 and X.gap_recovered(20.0, low=10.0, high=20.0) == 1.0
    with pytest.raises(InvalidArgumentError):
        X.gap_recovered(1.0, low=2.0, high=2.0)
    with pytest.raises(InvalidArgumentError):
        X.gap_recovered(float("nan"), low=0.0, high=1.0)


def _table() -> pd.DataFrame:
    rows = []

    def add(method, eps, clip, k, seed, pckh, purposes, init="warm"):
        rows.append({"method": method, "init": init, "epsilon": eps, "clip_norm": clip, "k": k, "seed": seed,
                     "purposes": purposes, "pckh": pckh})

    for s, v in enumerate((30.0, 32.0, 31.0)):
        add("nonprivate", float("nan"), float("nan"), float("nan"), s, v, "reference+seeds" if s == 0 else "seeds")
    add("dpsgd", 0.2, 0.01, float("nan"), 0, 10.0, "grid")
    for s, v in enumerate((14.0, 16.0, 15.0)):
        add("dpsgd", 0.8, 0.01, float("nan"), s, v, "grid+seeds" if s == 0 else "seeds")
    for s, v in enumerate((22.0, 25.0, 22.0)):
        add("feature_projective", 0.8, 0.01, 100, s, v, "grid+seeds+k" if s == 0 else "seeds")
    add("feature_projective", 0.8, 0.01, 10, 0, 99.0, "k")  # another k: must not leak into the k=100 numbers
    add("feature_projective", 0.2, 0.01, 100, 0, 20.0, "grid")
    add("dpsgd", 0.8, 1.0, float("nan"), 0, 5.0, "clip")
    return pd.DataFrame(rows)


def test_gap_table_uses_both_low_ends():
    g = X.gap_table(_table(), clip=0.01, k=100, seed=0).set_index(["method", "epsilon"])
    fp = g.loc[("feature_projective", 0.8)]
    assert fp.nonprivate == 30.0 and fp.dpsgd_low == 10.0 and fp.eps_low == 0.2
    assert fp.gap_paper == pytest.approx((22 - 10) / (30 - 10))
    assert fp.gap_same_eps == pytest.approx((22 - 14) / (30 - 14))
    assert g.loc[("dpsgd", 0.2)].gap_paper == 0.0
    assert g.loc[("feature_projective", 0.2)].gap_same_eps == pytest.approx(0.5)
    with pytest.raises(InsufficientDataError):
        X.gap_table(_table(), clip=0.5, k=100, seed=0)


def test_seed_spread_and_comparison_within_spread():
    t = _table()
    sp = X.seed_spread(t).set_index("method")
    assert sp.loc["dpsgd", "n_seeds"] == 3 and sp.loc["dpsgd", "mean"] == pytest.approx(15.0)
    assert sp.loc["dpsgd", "sd"] == pytest.approx(1.0) and sp.loc["nonprivate", "max"] == 32.0
    assert sp.loc["feature_projective", "n_seeds"] == 3  # the k=10 run is not a seed run
    c = X.compare_within_spread(t, better="feature_projective", worse="dpsgd", epsilon=0.8, clip=0.01, k=100)
    assert c["mean_better"] == pytest.approx(23.0) and c["mean_worse"] == pytest.approx(15.0)
    assert c["spread"] == pytest.approx(math.sqrt(3.0 + 1.0))
    assert c["holds"] and c["clearly_better"]
    r = X.compare_within_spread(t, better="dpsgd", worse="feature_projective", epsilon=0.8, clip=0.01, k=100)
    assert not r["holds"]  # 8 points below, spread 2
    # a small deficit inside the spread still "holds"
    t2 = t.copy()
    t2.loc[(t2.method == "feature_projective") & (t2.k == 100) & (t2.epsilon == 0.8), "pckh"] = [14.0, 15.5, 13.6]
    c2 = X.compare_within_spread(t2, better="feature_projective", worse="dpsgd", epsilon=0.8, clip=0.01, k=100)
    assert c2["diff"] < 0 and c2["holds"] and not c2["clearly_better"]
    with pytest.raises(InsufficientDataError):
        X.compare_within_spread(t, better="feature", worse="dpsgd", epsilon=0.8, clip=0.01)


def test_paper_comparison_lists_the_papers_numbers_beside_ours():
    comp = X.paper_comparison(_table(), clip=0.01, k=100, seed=0).set_index(["method", "epsilon"])
    assert comp.loc[("dpsgd", 0.2)].paper_mpii_pckh == 63.85 and comp.loc[("dpsgd", 0.2)].ours_pckh == 10.0
    assert comp.loc[("feature_projective", 0.8)].paper_mpii_pckh == 82.61
    assert comp.loc[("feature_projective", 0.8)].ours_pckh == 22.0
    assert comp.loc[("feature_projective", 0.8)].paper_humanart_ap == 51.6
    assert comp.loc[("dpsgd", 0.8)].paper_humanart_ap == 39.0
    assert comp.loc[("nonprivate", math.inf)].ours_pckh == 30.0
    assert math.isnan(comp.loc[("projected", 0.8)].ours_pckh)  # not run in this table
    # the paper's main table is at C = 0.01; at our C it prints its own number where it gives one
    assert comp.loc[("dpsgd", 0.2)].paper_mpii_pckh_same_clip == 63.85 and comp.loc[("dpsgd", 0.2)]["clip"] == 0.01
    t = _table().assign(clip_norm=lambda d: d.clip_norm.where(d.clip_norm != 0.01, 0.1))
    at_01 = X.paper_comparison(t, clip=0.1, k=100, seed=0).set_index(["method", "epsilon"])
    assert at_01.loc[("dpsgd", 0.2)].paper_mpii_pckh_same_clip == 28.46  # beside ours, at the same C
    assert at_01.loc[("dpsgd", 0.2)].paper_mpii_pckh == 63.85 and at_01.loc[("dpsgd", 0.2)].ours_pckh == 10.0
    assert math.isnan(at_01.loc[("feature_projective", 0.8)].paper_mpii_pckh_same_clip)  # not given at C = 0.1


def test_verdict_uses_the_seed_spread_and_a_machine_drift_floor():
    v = X.verdict([20.0, 21.0, 22.0], [10.0, 11.0, 12.0], sd=1.0)
    assert v["verdict"] == "holds" and v["diff"] == pytest.approx(10.0)
    assert v["margin"] == pytest.approx(max(2 * math.sqrt(2 / 3), X.MACHINE_DRIFT))
    assert X.verdict([10.0], [20.0], sd=1.0)["verdict"] == "does not hold"
    assert X.verdict([10.5], [10.0], sd=0.01)["verdict"] == "not resolvable"  # inside the 1-point drift floor
    assert X.verdict([14.0], [10.0], sd=3.0)["verdict"] == "not resolvable"  # margin 2*3*sqrt(2) = 8.5
    assert X.verdict([], [10.0], sd=1.0)["verdict"].startswith("not resolvable: not run")
    assert X.verdict([12.0], [10.0], sd=float("nan"))["verdict"].startswith("not resolvable: no seed spread")


def test_pooled_seed_sd_pools_the_cells_with_several_seeds():
    t = _table()  # three cells with 3 seeds: sd 1, 1, sqrt(3)
    assert X.pooled_seed_sd(t) == pytest.approx(math.sqrt((1 + 1 + 3) / 3))
    assert math.isnan(X.pooled_seed_sd(t[t.seed == 0]))


def test_claims_table_compares_like_with_like():
    t = _table()
    extra = pd.DataFrame([
        {"method": "nonprivate", "init": "scratch", "epsilon": float("nan"), "clip_norm": float("nan"),
         "k": float("nan"), "seed": 0, "purposes": "init", "pckh": 9.0},
        {"method": "dpsgd", "init": "scratch", "epsilon": 0.8, "clip_norm": 0.01, "k": float("nan"), "seed": 0,
         "purposes": "init", "pckh": 3.0},
        {"method": "feature_projective", "init": "scratch", "epsilon": 0.8, "clip_norm": 0.01, "k": 100, "seed": 0,
         "purposes": "init", "pckh": 9.5},
        {"method": "feature_projective", "init": "warm", "epsilon": 0.8, "clip_norm": 1.0, "k": 100, "seed": 0,
         "purposes": "clip", "pckh": 4.0},
    ])
    c = X.claims_table(pd.concat([t, extra], ignore_index=True), epsilons=(0.2, 0.8), clip=0.01,
                       other_clips=(1.0,), k=100).set_index("claim")
    fp = c.loc["feature-projective DP > DP-SGD at eps=0.8"]
    # every seed of a cell is used: means 23 vs 15, sd pooled 1.29 -> margin 2.1
    assert fp.verdict == "holds" and "eps=0.8: 23.00 vs 15.00" in fp.ours and fp.n_runs == "3 vs 3"
    assert c.loc["feature-projective DP > DP-SGD at eps=0.2"].verdict == "holds"  # 20 vs 10, single runs
    assert c.loc["projected DP-SGD >= DP-SGD at eps=0.8"].verdict == "not resolvable: not run at this scale"
    assert c.loc["projected DP-SGD >= DP-SGD at eps=0.8"].ours == "not run at this scale"
    assert c.loc["DP-SGD improves with epsilon (0.2 -> 0.8)"].verdict == "holds"  # 15 vs 10
    assert c.loc["feature-projective DP > DP-SGD at C=1"].verdict == "not resolvable"  # 4 vs 5, margin 3.7
    assert c.loc["feature-projective DP > DP-SGD from scratch"].verdict == "holds"  # 9.5 vs 3
    warm = c.loc["public-data warm start > from scratch (nonprivate)"]
    assert warm.verdict == "holds" and "31.00 vs 9.00" in warm.ours
    assert c.loc["non-private on raw > non-private on blurred images"].verdict.startswith("not resolvable")
    assert all(isinstance(p, str) and p for p in c.paper)
    assert c.loc["feature-projective DP > DP-SGD at C=1"].paper == "71.66 vs 12.53 (C=1.0, eps probably 0.8)"
    # every undecided claim names its cause; a decided one none
    assert (c.cause == "").eq(~c.verdict.str.startswith("not resolvable")).all()
    assert c.loc["projected DP-SGD >= DP-SGD at eps=0.8"].cause == "needs the paper scale: not run at this scale"
    assert c.loc["feature-projective DP > DP-SGD at C=1"].cause.startswith("difference -1.00 within the margin")
    assert "substitution" in c.loc["feature-projective DP > DP-SGD at C=1"].cause
    other = X.claims_table(t, epsilons=(0.2, 0.8), clip=0.1, other_clips=(0.01, 0.1, 0.5), k=100).set_index("claim")
    assert other.loc["feature-projective DP > DP-SGD at C=0.01"].paper == "82.61 vs 78.17 (eps=0.8, C=0.01)"
    assert "28.46" in other.loc["feature-projective DP > DP-SGD at C=0.1"].paper  # each clip its own text
    assert other.loc["feature-projective DP > DP-SGD at C=0.5"].paper == "not given at C=0.5"
    assert set(c.verdict.str.split(":").str[0]) <= {"holds", "does not hold", "not resolvable"}
    with pytest.raises(InvalidArgumentError):
        X.claims_table(t, epsilons=(), clip=0.01, other_clips=(), k=100)


# ------------------------------------------------------------------------------------------------- running
@pytest.mark.slow
def test_run_design_trains_evaluates_and_reports_guarantees():
    private = poses(48, seed=0)
    public = poses(16, seed=1, id_offset=10_000)
    test = poses(12, seed=2, id_offset=20_000)
    cfg = SimpleNamespace(epsilons=(0.8,), epsilons_other=(), clips=(0.05,), seeds=1, scratch_methods=("dpsgd",),
                          k=4, k_grid=())
    runs = [r for r in X.design_runs(cfg) if r.method in ("nonprivate", "dpsgd", "feature_projective")]
    assert {(r.method, r.init) for r in runs} == {("nonprivate", "warm"), ("dpsgd", "warm"),
                                                  ("feature_projective", "warm"), ("dpsgd", "scratch")}
    warm = build_pose_model(SIZE, width=4, seed=9).state_dict()
    seen = []
    data = X.DesignData(private, test, lambda s: build_pose_model(SIZE, width=4, seed=s), warm_state=warm,
                        public_set=public)
    settings = X.DesignSettings(delta=1e-5, epochs=1, batch_size=16, lr=1e-3, n_public_grads=64, refresh=2,
                                accountant="rdp")
    outs = X.run_design(runs, data, settings, n_show=3, on_result=seen.append)
    assert len(outs) == len(runs) == len(seen)
    for o in outs:
        assert o.predictions.shape == (3, 16, 2) and o.steps == 3
        assert 0.0 <= o.pckh.mean <= 100.0
        row = o.row()
        assert row["method"] == o.spec.method and row["pckh"] == o.pckh.mean
        if o.spec.epsilon is None:
            assert math.isinf(o.guarantee.epsilon)
        else:
            assert 0 < o.guarantee.epsilon <= 0.8 and o.guarantee.delta == 1e-5
            assert o.noise_multiplier > 0 and row["clipped_fraction"] >= 0
    fp = next(o for o in outs if o.spec.method == "feature_projective")
    assert fp.config["n_public"] == 16 and fp.config["k"] == 4  # m capped at the public set size
    assert X.check_guarantees(outs) == []
    # same seeds, same results
    again = X.run_design(runs[:2], data, settings, n_show=3)
    for a, b in zip(outs[:2], again):
        assert torch.equal(a.predictions, b.predictions) and a.pckh.mean == b.pckh.mean
    # a violated guarantee is caught
    bad = dataclasses.replace(fp.guarantee, epsilon=0.9)
    broken = X.RunOutcome(**{**fp.__dict__, "guarantee": bad})
    failures = X.check_guarantees([broken])
    assert len(failures) == 1 and "exceeds the target 0.8" in failures[0]
    none = X.RunOutcome(**{**fp.__dict__, "guarantee": PrivacyGuarantee(
        epsilon=math.inf, delta=1.0, neighbours=Neighbouring(relation="add-remove-one", unit="x"), protects="x",
        event=NonPrivateDpEvent())})
    assert len(X.check_guarantees([none])) == 2  # infinite epsilon and delta above the target


def test_run_design_needs_its_inputs():
    private, test = poses(16, seed=0), poses(4, seed=2, id_offset=99)
    spec = X.RunSpec(method="dpsgd", init="warm", epsilon=0.8, clip=0.1, k=None, seed=0)
    data = X.DesignData(private, test, lambda s: build_pose_model(SIZE, width=4, seed=s))
    settings = X.DesignSettings(delta=1e-5, epochs=1, batch_size=8, lr=1e-3, n_public_grads=8, refresh=2)
    with pytest.raises(InvalidArgumentError, match="warm_state"):
        X.run_design([spec], data, settings)
    proj = dataclasses.replace(spec, method="projected", init="scratch", k=2)
    with pytest.raises(InsufficientDataError, match="public_set"):
        X.run_design([proj], data, settings)
    with pytest.raises(UnknownNameError):
        X.run_design([dataclasses.replace(spec, init="cold")], data, settings)
    with pytest.raises(InvalidArgumentError):
        X.run_design(["dpsgd"], data, settings)
    with pytest.raises(InvalidArgumentError, match="DesignData"):
        X.run_design([spec], {"private_set": private}, settings)


def _outcome(spec: X.RunSpec, mean: float) -> X.RunOutcome:
    per_joint = torch.full((16,), mean)
    score = PCKhResult(mean=mean, per_joint=per_joint, counts=torch.ones(16, dtype=torch.long), alpha=0.5)
    g = PrivacyGuarantee(epsilon=spec.epsilon or math.inf, delta=1e-5 if spec.epsilon else 1.0,
                         neighbours=Neighbouring(relation="add-remove-one", unit="x"), protects="x",
                         event=GaussianDpEvent(1.0) if spec.epsilon else NonPrivateDpEvent())
    return X.RunOutcome(spec=spec, pckh=score, guarantee=g, steps=1, sample_rate=0.1, noise_multiplier=None,
                        history=[], predictions=torch.zeros(0, 16, 2), cpu_seconds=0.0, wall_seconds=0.0,
                        config={"delta": 1e-5})


def test_per_joint_table_selects_the_runs_at_one_setting():
    outs = [_outcome(X.RunSpec("nonprivate", "warm", None, None, None, 0), 30.0),
            _outcome(X.RunSpec("feature_projective", "warm", 0.8, 0.1, 10, 0), 22.0),
            _outcome(X.RunSpec("dpsgd", "warm", 0.8, 0.1, None, 0), 15.0),
            _outcome(X.RunSpec("dpsgd", "warm", 0.2, 0.1, None, 0), 10.0),
            _outcome(X.RunSpec("dpsgd", "warm", 0.8, 1.0, None, 0), 9.0),
            _outcome(X.RunSpec("feature_projective", "warm", 0.8, 0.1, 5, 0), 21.0),
            _outcome(X.RunSpec("dpsgd", "scratch", 0.8, 0.1, None, 0), 3.0),
            _outcome(X.RunSpec("dpsgd", "warm", 0.8, 0.1, None, 1), 16.0)]
    pj = X.per_joint_table(outs, epsilon=0.8, clip=0.1, k=10, seed=0)
    assert list(pj.method) == ["nonprivate", "dpsgd", "feature_projective"]  # METHODS order
    assert list(pj["mean"]) == [30.0, 15.0, 22.0]
    assert list(pj.columns[2:]) == list(privkit.data.MPII_JOINTS) and (pj.r_ankle == pj["mean"]).all()
    with pytest.raises(InsufficientDataError):
        X.per_joint_table(outs, epsilon=0.8, clip=0.1, k=10, seed=4)
    assert X.check_guarantees(outs) == []


def test_draw_pose_draws_visible_limbs_only():
    fig, ax = plt.subplots()
    kp = poses(1, seed=0).keypoints[0]
    vis = torch.ones(16, dtype=torch.bool)
    X.draw_pose(ax, kp, vis, image=torch.rand(3, SIZE, SIZE))
    assert len(ax.lines) == len(X.MPII_SKELETON) and len(ax.images) == 1
    fig2, ax2 = plt.subplots()
    vis[7] = False  # the thorax ends four limbs
    X.draw_pose(ax2, kp, vis)
    assert len(ax2.lines) == len(X.MPII_SKELETON) - sum(7 in e for e in X.MPII_SKELETON)
    with pytest.raises(InvalidArgumentError):
        X.draw_pose(ax2, kp[:5], None)
    plt.close(fig)
    plt.close(fig2)
