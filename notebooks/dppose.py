# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Differentially private 2D human pose estimation
#
# **Paper.** Sivangi, Henderson, Deligianni, *Differentially Private 2D Human Pose Estimation*, CVPR 2026,
# arXiv:2504.10190.
#
# The paper trains a SimCC pose network under (ε, δ)-differential privacy and compares four private
# trainers with non-private training:
#
# - **DP-SGD**: per-record clipping to norm C, Gaussian noise, Poisson sampling;
# - **projected DP-SGD**: the noisy gradient projected on the top-k eigenvectors of the gradient second
#   moment of a *public* set (post-processing, same guarantee);
# - **feature DP**: the clean gradient of a public *view* ψ(x) (a Gaussian blur) added to the DP-SGD
#   gradient; private with respect to what the blur removes (feature-level DP, labels treated as public);
# - **feature-projective DP** (the proposed method): the clean public-view gradient plus the *projected*
#   DP-SGD gradient.
#
# This notebook reproduces, at the chosen scale: PCKh@0.5 of the five trainers over the paper's grid
# ε ∈ {0.2, 0.4, 0.6, 0.8} with three clipping norms, from a public-data warm start and from scratch, the
# paper's non-private baseline on blurred images; the "fraction of the privacy gap recovered" headline; PCKh
# per joint; qualitative predictions; the effect of the subspace rank k; what projected DP-SGD depends on
# (how much of the private gradient the public subspace holds); and the run-to-run spread over seeds, from
# which every claim gets a verdict.
#
# **Data and network at the default scale.** MPII, HumanArt and COCO cannot be downloaded here, and no pose
# dataset with keypoints is installable offline. The default scale trains on `synthpose`, privkit's
# procedural articulated figures with exact MPII keypoints, at 128×128 pixels: the *private* split is rendered
# over real photo backgrounds with natural clothing; the *public* split (warm start and subspace) is a
# different cartoon style with disjoint identities and random streams — unlike the public code, whose
# "public" images were the first training images. The network is the paper's recipe on a real pretrained
# backbone: EfficientNet-Lite0 with its ImageNet weights (in the role of the paper's ImageNet TinyViT-5M),
# **frozen** up to stride 16 as the paper freezes its early stages, with a trainable conv neck and the
# paper's SimCC head on top. The frozen features of every image are computed once and cached, so a step
# only runs the trainable part (the gradients are the same as recomputing them; `tests/test_dppose_features.py`).
# The numbers are not comparable with the paper's MPII numbers in absolute terms; the notebook prints the
# paper's numbers beside ours and judges the *orderings*. The paper's other regime, *full* fine-tuning (every
# parameter trains, the pyramid too: `build_pose_model(..., freeze_backbone=False)`), runs the whole network at
# every step and is too slow for this notebook's budget on a CPU; `benchmarks/bench_dppose_full_finetuning.py`
# trains every method in both regimes on this scale's data and settings, and the README reports what it measured.
#
# **Paper scale** (not run here): the same code reads MPII's train and validation splits from `data_root`
# (`privkit.data.paper.mpii.load_mpii`, 256-px square crops) and the paper's ImageNet TinyViT-5M weights
# from `<data_root>/weights/tiny_vit_5m/model.safetensors`, on a GPU. privkit has no COCO loader, so the public
# set stays the synthpose public split, rendered at 256 px.
#
# privkit's readings where the paper is silent [I]: the public set for the subspace and the warm start is a
# disjoint, differently styled synthetic split (the paper's: COCO pretraining); the blur ψ is the paper's
# 25×25, σ = 10 at 256 px scaled to the image size; the subspace uses m per-sample public gradients
# recomputed every `cfg.refresh` steps at the current weights (a default-scale private run is shorter than that,
# so its subspace is computed once, at the warm start); the privacy-gap formula is the one that reproduces the
# paper's 73%. The facts about the paper this notebook relies on are restated in `docs/dppose.md`.

# %% tags=["parameters"]
scale = "default"
seed = 0
data_root = None
device = "auto"
out_dir = "figures/dppose"
executor = "local"
executor_options = None
store_dir = None

# %%
import os
import time

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
import torch

import privkit
from privkit.config import PAPER_DATA_SCALES, SMALL_SCALES
from privkit.data import load_pose
from privkit.data.pose import load_synthpose
from privkit.data.types import MPII_JOINTS, PoseSet
from privkit.dppose import GaussianBlur, Schedule, build_pose_model, count_parameters, evaluate_pckh, train
from privkit.dppose.features import cache_features, cache_input_grams
from privkit.dppose.metrics import EXCLUDED_FROM_MEAN
from privkit.errors import InvalidArgumentError
from privkit.studies.dppose import experiments as X, jobs as J, plots as P, tables as T
from privkit.studies.figures import SectionTimer, save_figure, save_table, set_theme, write_run_manifest

cfg = privkit.config.load("dppose", scale)
dev = privkit.resolve_device(device)
# On CPU use at most two threads: measured on an idle 2-core machine, two threads make a step of the
# trainable part about 1.7x faster than one; on a machine shared with other busy processes they can make it
# several times slower (threads fighting for the cores), so run this notebook alone. A GPU run keeps torch's
# default.
if dev.type == "cpu":
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
frozen = cfg.backbone == "efficientnet_lite0"
set_theme()
timer = SectionTimer()
cpu0 = time.process_time()
pd.set_option("display.width", 180, "display.max_columns", 40, "display.precision", 4)
METHOD_NAMES, PALETTE = P.METHOD_NAMES, P.method_palette()
print(privkit.config.PAPERS["dppose"].citation)
print(f"scale={scale} seed={seed} device={dev}")
print(cfg)

# %% [markdown]
# ## Design: what is trained, and why
# The full product ε × C × method × init × seed is too large for a CPU budget (each run's cost is in the runs
# table, the whole notebook's in `run.json`), so the design covers each question with the runs it needs, and every
# run is trained once even when it serves several questions:
#
# - `grid`: the four private methods at every ε of the grid (main clipping norm, warm start);
# - `clip`: DP-SGD and feature-projective DP at the largest ε with the other clipping norms;
# - `seeds`: every private method at the largest ε, DP-SGD and feature-projective DP at the smallest, and the
#   non-private reference, over several seeds (the run-to-run spread behind every verdict);
# - `blurred`: the paper's non-private baseline trained on the blurred images ψ(x) only;
# - `init`: training from scratch (the trainable part randomly initialised, no public pose pretraining)
#   against the warm start at the largest ε;
# - `k`: feature-projective DP at the largest ε with other subspace ranks.
#
# δ = 4·10⁻⁵ for every private run, the paper's δ (its code uses 1/22000 ≈ 4.5·10⁻⁵; both are below 1/N for
# MPII's N ≈ 25k and for our N private images). Every private run has the same optimiser (AdamW, as the paper's
# code), learning rate, expected batch size B and number of steps; σ is calibrated to the target ε over those
# steps and the reported ε is recomputed from the steps actually run. The non-private runs train longer (to
# their plateau, as the paper's non-private baselines are fully trained). The
# neighbouring relation decides the accountant: DP-SGD and projected DP-SGD protect a record against its
# addition or removal (opacus's PRV accountant); the feature methods protect what the blur removes from a
# record that *stays* in the data set, a substitution (replace-one: the record's clipped gradient can move
# by 2C), accounted with dp-accounting's PLD accountant under its replace-one relation. At the same target
# ε the feature methods therefore get more noise than DP-SGD (`noise_multiplier` in the runs table).

# %%
runs = X.design_runs(cfg, seed=seed)
design = pd.DataFrame([{"run": r.label, "purposes": "+".join(r.purposes)} for r in runs])
print(f"{len(runs)} runs:")
print(design.to_string(index=False))
eps_max = max(cfg.epsilons + cfg.epsilons_other)
eps_min = min(cfg.epsilons)
c_main = cfg.clips[0]

# %% [markdown]
# ## Explore: ε, C, q and steps (interactive; privkit)
# Move the target ε, the clipping norm C, the sampling rate q and the number of steps. For each neighbouring
# relation the panel shows:
# - the noise multiplier σ the accountant needs;
# - the ε it then accounts;
# - the noise standard deviation on the averaged gradient, σC/(qN), with N the private set's size.
#
# The initial state is this scale's main run. The substitution relation, which the feature methods use, needs
# more noise at the same ε. Under the batch runner this cell prints its initial state instead.

# %% tags=["explore"]
from privkit.studies import explore as E

E.panel(E.dppose_view, E.dppose_controls(epsilon=eps_max, clip_norm=c_main, sample_rate=cfg.batch_size / cfg.n_private,
                                         steps=max(10, cfg.epochs * cfg.n_private // cfg.batch_size)),
        delta=cfg.delta, n_private=cfg.n_private, accountant=cfg.accountant)

# %% [markdown]
# ## Data
# Private training images, a held-out test set from the same private stream (images after the training
# images; the same population of figures, new poses, backgrounds and views), and the public split.

# %%
with timer("data"):
    if scale in PAPER_DATA_SCALES:
        from privkit.data.paper.mpii import load_mpii
        from privkit.studies.guards import plan_paper_run

        print(plan_paper_run("dppose", cfg, data_root, device=device).text())  # check every input first, plan

        # all of MPII's training split at 256 px is about 18 GB of float32 images
        private = load_mpii(data_root, split="train", size=cfg.image_size, n_samples=cfg.n_private or None,
                            seed=seed, max_images=40_000, progress=True)
        test = load_mpii(data_root, split="valid", size=cfg.image_size, n_samples=cfg.n_test or None, seed=seed,
                         max_images=10_000, progress=True)
    else:
        private = load_synthpose(split="private", n=cfg.n_private, seed=seed, size=cfg.image_size, device="cpu")
        test = load_synthpose(split="private", n=cfg.n_test, seed=seed, size=cfg.image_size, device="cpu",
                              start=cfg.n_private)
    public = load_pose("synthpose", split="public", n=cfg.n_public, seed=seed, size=cfg.image_size, device="cpu")
    shared = set(private.identity.tolist()) & set(public.identity.tolist())
    print(f"private: {len(private)} images ({private.name}); test: {len(test)}; public: {len(public)} ({public.name})")
    print(f"visible joints: private {float(private.visible.float().mean()):.2f}, public "
          f"{float(public.visible.float().mean()):.2f}; identities shared by private and public: {len(shared)}")
    print(f"δ = {cfg.delta:g} (1/N = {1 / len(private):.2e})")
    test_images = test.images  # kept for the qualitative figure

# %% [markdown]
# ### Features of the ablation backbone
# The backbone ablation (below) trains the same neck and head on a second frozen backbone, MoveNet-Lightning's
# MobileNetV2 pretrained on COCO *poses* (the paper's public-pose-data role), against the ImageNet backbone. Its
# features are cached here, while the images are still at hand.

# %%
abl_sets, test_raw = None, test
with timer("ablation"):
    if cfg.ablation_backbone:
        def make_abl(s: int, *, pretrained: bool = False) -> torch.nn.Module:
            """The ablation network: frozen pose-pretrained pyramid + the same neck and SimCC head."""
            return build_pose_model(cfg.image_size, backbone=cfg.ablation_backbone, neck_width=cfg.width, seed=s)

        abl_ext = make_abl(seed).to(dev)
        abl_sets = {name: cache_features(abl_ext, d, batch_size=32)
                    for name, d in (("private", private), ("test", test), ("public", public))}
        print(f"{cfg.ablation_backbone}: cached {sum(len(v) for v in abl_sets.values())} feature maps of shape "
              f"{tuple(abl_sets['private'].images.shape[1:])}; trainable part "
              f"{count_parameters(make_abl(seed)):,} parameters")
        del abl_ext

# %% [markdown]
# ## Frozen features, computed once
# In frozen fine-tuning the ImageNet pyramid never changes, so its output for every private, blurred
# private (ψ(x), the public view of the feature methods), public and test image is computed once here. The
# blurred views are cached for the same records, row for row: the feature methods sample their public-view
# batch from them. The first trainable layer (the neck's 3×3 convolution) then always sees the same input for a
# record, so the Gram matrix of its input patches is cached too: a private step gets that layer's per-sample
# gradient norms from it instead of forming 256 per-sample weight gradients (the same clipped sum up to rounding;
# tested), when the Grams fit in memory.

# %%
def make_model(s: int, *, pretrained: bool = False) -> torch.nn.Module:
    """A fresh network: the "scratch" start (random weights); warm runs load the pretraining over it."""
    return X.pose_model(cfg, s, pretrained=pretrained, data_root=data_root)


psi = GaussianBlur.for_size(cfg.image_size)
blurred = None
with timer("features"):
    if frozen:
        extractor = make_model(seed).to(dev)
        private_img = private
        private, test, public = (cache_features(extractor, d, batch_size=32) for d in (private, test, public))
        blurred = cache_features(extractor, private_img, transform=psi, batch_size=32)
        del private_img
        print(f"cached {len(private) + len(test) + len(public) + len(blurred)} feature maps of shape "
              f"{tuple(private.images.shape[1:])} ({private.feature_of}); blur ψ: {psi.describe()}")
        try:
            private = cache_input_grams(extractor, private)
            print(f"cached the patch Grams of {private.grams_for} for the {len(private)} private records: "
                  f"{tuple(private.grams.shape[1:])} each, {private.grams.numel() * 4 / 2**30:.2f} GiB")
        except InvalidArgumentError as err:  # too large (e.g. MPII at 256 px): the steps form per-sample gradients
            print(f"patch Grams not cached: {err}")
    else:
        # no frozen part: every step runs the whole network and the feature methods blur on the fly; only the
        # non-private baseline on blurred images needs a blurred copy of the private set (in chunks)
        if cfg.blurred_baseline:
            blurred = PoseSet(images=torch.cat([psi(private.images[i:i + 256]) for i in range(0, len(private), 256)]),
                              keypoints=private.keypoints, visible=private.visible, head_box=private.head_box,
                              identity=private.identity, name=private.name + " (blurred)")
        print(f"no frozen part: every step runs the whole network; blur ψ: {psi.describe()}")

# %% [markdown]
# ## Warm start: non-private pretraining on the public split
# The paper fine-tunes from COCO-pretrained weights (COCO public, MPII private). Here the warm start is the
# same network (its trainable neck and head; the ImageNet pyramid is shared) trained non-privately on the
# public cartoon split; its PCKh on the private-style test set shows how far the style gap leaves it from the
# private task.

# %%
with timer("pretrain"):
    pre = train(make_model(seed, pretrained=True), public, method="nonprivate", seed=seed, device=dev,
                schedule=Schedule(epochs=cfg.pretrain_epochs, batch_size=min(cfg.batch_size, len(public)),
                                  lr=cfg.pretrain_lr))
    warm_state = {k: v.detach().clone() for k, v in pre.model.state_dict().items()}
    warm_test = evaluate_pckh(pre.model, test).mean
    warm_pub = evaluate_pckh(pre.model, public).mean
    print(f"network: {count_parameters(pre.model):,} trainable parameters; pretraining: {pre.steps} steps")
    print(f"warm start PCKh@0.5: {warm_pub:.1f} on the public (training) split, {warm_test:.1f} on the private test set")
    print(pre.guarantee.statement(), "-", pre.guarantee.protects, "(public data: no guarantee is needed)")

# %% [markdown]
# ## Training every run
# Each private run prints the guarantee that holds (computed from the accountant's record of the steps run).
# The training losses and clipped fractions in the table are computed on private data and are diagnostics
# outside the guarantee.

# %%
def report(o: X.RunOutcome) -> None:
    print(f"[{o.spec.label}] PCKh@0.5 = {o.pckh.mean:.2f}  ({o.steps} steps, {o.cpu_seconds:.0f} s CPU)")
    if o.spec.epsilon is not None:
        print("   ", o.guarantee)


from privkit.jobs import make_executor, store_for
store = store_for(out_dir, store_dir)  # each training run is a job, run by `executor` unless already in the store
jobs = make_executor(executor, device=device, **(executor_options or {}))
with timer("train"):
    settings = J.design_settings(cfg)
    outcomes = J.train_runs(
        runs, X.DesignData(private, test, make_model, warm_state=warm_state, public_set=public, blurred_set=blurred),
        settings, data_spec=J.design_data_spec(cfg, part="main", scale=scale, seed=seed, data_root=data_root),
        model=J.ModelSpec(cfg.backbone, cfg.image_size, cfg.width), store=store, executor=jobs, n_show=cfg.n_show,
        device=device, progress=scale not in SMALL_SCALES, on_result=report,
        keep_model=J.keeps_model(cfg, seed))  # the warm runs at the largest epsilon and main C: diagnostics below
    print(f"{len(runs)} runs from the result store {store.root} ({jobs.name} executor)")
    df = pd.DataFrame([o.row() for o in outcomes])
    save_table(df, out_dir, "table1_runs", caption="Every run: PCKh@0.5 on held-out data and the guarantee that holds")
    print(df.drop(columns=["purposes", "wall_s"]).to_string(index=False))

# %% [markdown]
# ## Backbone ablation: public pose pretraining against ImageNet
# The paper pretrains on public *pose* data (COCO) before private fine-tuning. Here the main runs use an ImageNet
# backbone; this ablation swaps in MoveNet-Lightning's backbone, pretrained on COCO poses, frozen the same way, with
# the same neck, SimCC head, warm start on the public split, optimiser, δ and clipping norm. It trains the
# non-private reference and DP-SGD at the smallest and largest ε (one seed each); the verdicts use the run-to-run
# spread measured on the main backbone's seeds (floor: the cross-machine drift). MoveNet's own zero-shot PCKh
# (its COCO head, no training on our data) is printed beside it.

# %%
with timer("ablation"):
    abl = pd.DataFrame()
    if abl_sets is not None:
        pre_a = train(make_abl(seed), abl_sets["public"], method="nonprivate", seed=seed, device=dev,
                      schedule=Schedule(epochs=cfg.pretrain_epochs, batch_size=min(cfg.batch_size,
                                                                                   len(abl_sets["public"])),
                                        lr=cfg.pretrain_lr))
        warm_a = {k: v.detach().clone() for k, v in pre_a.model.state_dict().items()}
        abl_specs = J.ablation_runs(cfg, seed)  # the non-private reference and DP-SGD at the smallest and largest eps
        abl_out = J.train_runs(
            abl_specs, X.DesignData(abl_sets["private"], abl_sets["test"], make_abl, warm_state=warm_a,
                                    public_set=abl_sets["public"]),
            settings, data_spec=J.design_data_spec(cfg, part="ablation", scale=scale, seed=seed, data_root=data_root),
            model=J.ModelSpec(cfg.ablation_backbone, cfg.image_size, cfg.width), store=store, executor=jobs,
            n_show=cfg.n_show, device=device, on_result=report)
        abl = pd.DataFrame(T.ablation_rows(df, abl_out, seed=seed, warm_imagenet=warm_test,
                                           warm_pose=evaluate_pckh(pre_a.model, abl_sets["test"]).mean)
                           # the test images themselves (the cached features replaced them in `test`)
                           + T.zero_shot_rows(test_raw, ("movenet-lightning", "movenet-thunder"), device=dev))
        save_table(abl, out_dir, "table6_backbone_ablation",
                   caption=f"Frozen {cfg.ablation_backbone} (COCO pose pretraining) vs frozen {cfg.backbone} "
                           "(ImageNet): PCKh@0.5, same neck/head/warm start/optimiser; verdict: pose-pretrained above "
                           "ImageNet by more than the margin")
        print(T.ablation_text(abl, ablation_backbone=cfg.ablation_backbone, backbone=cfg.backbone))

# %% [markdown]
# ## PCKh@0.5 against ε (the paper's MPII grid)
# Reproduces the paper's main comparison (its MPII tables; docs/dppose.md §4 holds the numbers that could be
# recovered). Left: ours, warm start, C = the main clipping norm; error bars at the largest ε are the
# standard deviation over seeds. Right: the paper's MPII numbers (frozen-backbone fine-tuning, C = 0.01).

# %%
with timer("fig1"):
    main = T.main_runs(df, clip=c_main, k=cfg.k)
    base = main[main.seed == seed]
    spread = X.seed_spread(df)
    np_runs = main[main.method == "nonprivate"].pckh
    fig, fig1_data = P.plot_pckh_vs_epsilon(df, base, spread, np_runs, warm_test=warm_test, eps_max=eps_max,
                                            clip=c_main, delta=cfg.delta,
                                            subtitle=f"ours: synthpose {cfg.image_size} px, {cfg.backbone}, C = {c_main:g}")
    save_figure(fig, out_dir, "fig1_pckh_vs_epsilon", fig1_data)
    plt.show()
    plt.close(fig)
    print(base.pivot_table(index="method", columns="epsilon", values="pckh").round(2).to_string())

# %% [markdown]
# ### Beside the paper's numbers
# The paper's MPII PCKh@0.5 (its main table, C = 0.01, and, where it gives one, its number at our main C) and HumanArt
# AP next to ours (warm start, same seed, main C).

# %%
with timer("table2"):
    comp = X.paper_comparison(df, clip=c_main, k=cfg.k, seed=seed)
    save_table(comp, out_dir, "table2_paper_comparison",
               caption=f"Ours (synthpose, {cfg.image_size} px, {cfg.backbone}) beside the paper's MPII PCKh@0.5 and "
                       "HumanArt AP")
    print(comp.to_string(index=False))
    print("\nPaper (MPII, C = 0.01): DP-SGD 63.85 (ε=0.2) / 78.17 (ε=0.8); projected 78.48 / 80.63; feature DP 75.46 / "
          "80.40; feature-projective 82.61 at ε=0.8; non-private 89.36.\n"
          "Paper (HumanArt, ε=0.8, C=0.01): feature-projective 51.6 AP vs DP-SGD 39.0 AP (COCO OKS AP; privkit "
          "has no HumanArt counterpart at this scale).\n"
          f"Our figures come from procedural {cfg.image_size}-px figures, a {cfg.backbone} network "
          f"({count_parameters(pre.model):,} trainable parameters), {cfg.epochs} private fine-tuning epoch(s) and a\n"
          "public set in another style; they differ from MPII in every absolute number. What can be compared is the\n"
          "ordering of the methods and the shape of the curves in ε.")
    same = comp[comp.method.ne("nonprivate") & comp.paper_mpii_pckh_same_clip.notna()]
    for r in same.itertuples():  # the paper's numbers at our clipping norm, where it gives any
        print(f"At our C = {r.clip:g}, the paper's {r.method} at ε = {r.epsilon:g}: {r.paper_mpii_pckh_same_clip:.2f} "
              f"(ours {r.ours_pckh:.2f}; column paper_mpii_pckh_same_clip)")

# %% [markdown]
# ## Fraction of the privacy gap recovered
# The paper's headline "feature-projective DP recovers 73% of the gap" is reproduced exactly by
# (82.61 − 63.85) / (89.36 − 63.85) = 0.735: the low end is DP-SGD at ε = 0.2, not at the same ε. Both
# readings are shown; the paper's is labelled "vs DP-SGD at ε_min".

# %%
with timer("fig2"):
    paper_gap = X.gap_recovered(82.61, low=63.85, high=X.PAPER_NONPRIVATE_MPII)
    paper_gap_same = X.gap_recovered(82.61, low=78.17, high=X.PAPER_NONPRIVATE_MPII)
    gaps = X.gap_table(df, clip=c_main, k=cfg.k, seed=seed)
    print("Formula used:", X.PAPER_GAP_FORMULA)
    print(f"paper: (82.61 − 63.85) / (89.36 − 63.85) = {paper_gap:.3f}; against DP-SGD at the same ε = 0.8: "
          f"(82.61 − 78.17) / (89.36 − 78.17) = {paper_gap_same:.3f}")
    long = gaps.melt(id_vars=["method", "epsilon"], value_vars=["gap_paper", "gap_same_eps"], var_name="low_end",
                     value_name="gap_recovered")
    long["low_end"] = long.low_end.map({"gap_paper": f"vs DP-SGD at ε = {eps_min:g} (paper's)",
                                        "gap_same_eps": "vs DP-SGD at the same ε"})
    long = long[long.method != "dpsgd"].dropna()
    long["name"] = long.method.map(METHOD_NAMES)
    gap_order = [METHOD_NAMES[m] for m in ("projected", "feature", "feature_projective")]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
    for ax, (lab, d) in zip(axes, long.groupby("low_end", sort=False)):
        sns.barplot(data=d, x="epsilon", y="gap_recovered", hue="name", hue_order=gap_order,
                    palette={METHOD_NAMES[m]: c for m, c in PALETTE.items()}, ax=ax)
        ax.axhline(paper_gap if "paper" in lab else paper_gap_same, color="k", ls="--", lw=0.8,
                   label="paper, feature-projective at ε = 0.8")
        ax.axhline(0, color="k", lw=0.5)
        ax.set(title=lab, xlabel="ε", ylabel="fraction of the gap recovered")
        ax.legend(fontsize=6)
    save_figure(fig, out_dir, "fig2_gap_recovered", long)
    plt.show()
    plt.close(fig)
    fp = gaps[(gaps.method == "feature_projective") & (gaps.epsilon == eps_max)].iloc[0]
    print(f"ours: ({fp.pckh:.2f} − {fp.dpsgd_low:.2f}) / ({fp.nonprivate:.2f} − {fp.dpsgd_low:.2f}) = {fp.gap_paper:.3f} "
          f"(paper 0.735); against DP-SGD at the same ε: {fp.gap_same_eps:.3f} (paper 0.397)")
    print(gaps.round(3).to_string(index=False))

# %% [markdown]
# ## PCKh per joint
# Per-joint PCKh@0.5 at the largest ε (warm start, main C); the paper reports per-joint tables for MPII whose
# numbers could not be recovered. Pelvis and thorax are shown but excluded from the mean (MPII protocol).

# %%
with timer("per_joint"):
    pj = X.per_joint_table(outcomes, epsilon=eps_max, clip=c_main, k=cfg.k, seed=seed)
    save_table(pj, out_dir, "table3_per_joint", caption=f"PCKh@0.5 per joint at epsilon = {eps_max:g}")
    mat = pj.set_index("method")[list(MPII_JOINTS)].rename(index=METHOD_NAMES)
    fig, ax = plt.subplots(figsize=(10, 2.8))
    sns.heatmap(mat, annot=True, fmt=".0f", cmap="viridis", vmin=0, vmax=100, ax=ax, cbar_kws={"label": "PCKh@0.5"},
                annot_kws={"fontsize": 6})
    for j in EXCLUDED_FROM_MEAN:
        ax.get_xticklabels()[j].set_color("grey")
    ax.set(xlabel="", ylabel="", title=f"per-joint PCKh@0.5 at ε = {eps_max:g}, C = {c_main:g} (grey: not in the mean)")
    save_figure(fig, out_dir, "fig3_per_joint", pj)
    plt.show()
    plt.close(fig)
    print(pj.round(1).to_string(index=False))

# %% [markdown]
# ## Qualitative predictions
# Held-out private-style images; ground truth in white, predictions in colour (visible joints only), one
# column per method at the largest ε.

# %%
with timer("fig4"):
    show = [o for o in outcomes if o.spec.init == "warm" and o.spec.seed == seed and o.spec.view == "raw"
            and (o.spec.epsilon in (None, eps_max)) and o.spec.clip in (None, c_main) and o.spec.k in (None, cfg.k)]
    show.sort(key=lambda o: list(METHOD_NAMES).index(o.spec.method))
    n_img = min(cfg.n_show, len(test))
    fig, axes = plt.subplots(n_img, len(show), figsize=(1.7 * len(show), 1.7 * n_img), squeeze=False)
    rows = []
    for i in range(n_img):
        for j, o in enumerate(show):
            ax = axes[i][j]
            X.draw_pose(ax, test.keypoints[i], test.visible[i], color="white", lw=1.6, ms=6, image=test_images[i])
            X.draw_pose(ax, o.predictions[i], test.visible[i], color=PALETTE[o.spec.method], lw=1.0, ms=5)
            if i == 0:
                ax.set_title(METHOD_NAMES[o.spec.method], fontsize=7)
            err = (o.predictions[i] - test.keypoints[i]).norm(dim=-1)[test.visible[i]]
            rows.append({"image": i, "method": o.spec.method, "epsilon": o.spec.epsilon,
                         "mean_error_px": float(err.mean()) if err.numel() else float("nan")})
    fig.suptitle(f"white: ground truth; colour: prediction (ε = {eps_max:g}, C = {c_main:g})", fontsize=8)
    save_figure(fig, out_dir, "fig4_qualitative", pd.DataFrame(rows))
    plt.show()
    plt.close(fig)

# %% [markdown]
# ### Explore: every trained run's predictions (interactive; privkit)
# Choose a trained run (method, ε, clipping norm, initialisation, seed) and a test image. The panel draws the
# prediction that run's model made on that image, with the run's PCKh and guarantee. Under the batch runner
# this cell prints its initial state instead.

# %%
from privkit.studies import explore as E

by_label = {o.spec.label: o for o in outcomes}
E.panel(E.dppose_runs_view, E.dppose_runs_controls(by_label, n_img), runs=by_label, keypoints=test.keypoints,
        visible=test.visible, images=test_images)

# %% [markdown]
# ## Clipping norm and initialisation
# Left: the paper's C grid at the largest ε (only when every per-sample gradient is clipped is DP-SGD's AdamW
# update independent of C, and the runs table's `clipped_fraction` shows how many are clipped at each C; the
# feature methods depend on C in any case, because C sets the size of the noisy private part against the clean
# public-view gradient). Right: the paper's training regimes, here a public-data warm start against training
# from scratch, at the largest ε.

# %%
with timer("fig5"):
    at = df[(df.epsilon == eps_max) | df.epsilon.isna()]
    clip_d = at[(at.init == "warm") & (at.seed == seed) & at.purposes.str.contains("clip")].copy()
    clip_d["C"] = clip_d.clip_norm.map(lambda c: f"C = {c:g}")
    clip_d["name"] = clip_d.method.map(METHOD_NAMES)
    init_d = at[(at.seed == seed) & at.purposes.str.contains("init") & (at.view == "raw")].copy()
    init_d["name"] = init_d.method.map(METHOD_NAMES)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    sns.barplot(data=clip_d, x="name", y="pckh", hue="C", ax=axes[0],
                order=[n for m, n in METHOD_NAMES.items() if m in set(clip_d.method)])
    axes[0].axhline(float(np_runs.mean()), color="k", ls="--", lw=0.8, label="non-private")
    axes[0].set(xlabel="", ylabel="PCKh@0.5 (%)", title=f"clipping norm (ε = {eps_max:g})")
    axes[0].tick_params(axis="x", labelsize=6)
    axes[0].legend(fontsize=6, loc="upper left")
    axes[0].set_ylim(0, 1.25 * max([float(np_runs.mean())] + ([float(clip_d.pckh.max())] if len(clip_d) else [])))
    sns.barplot(data=init_d, x="name", y="pckh", hue="init", hue_order=["warm", "scratch"], ax=axes[1],
                order=[n for m, n in METHOD_NAMES.items() if m in set(init_d.method)])
    axes[1].set(xlabel="", ylabel="", title=f"warm start vs scratch (ε = {eps_max:g}, C = {c_main:g})")
    axes[1].tick_params(axis="x", labelsize=6)
    axes[1].legend(fontsize=6)
    save_figure(fig, out_dir, "fig5_clip_and_init", pd.concat([clip_d.assign(panel="clip"), init_d.assign(panel="init")]))
    plt.show()
    plt.close(fig)
    print(clip_d.pivot_table(index="method", columns="clip_norm", values="pckh").round(2).to_string())
    print(init_d.pivot_table(index="method", columns="init", values="pckh").round(2).to_string())
    print("Paper (MPII, from scratch, C = 0.1, ε = 0.8): DP-SGD 6.85, feature DP 11.22, feature-projective 33.48; "
          "at C = 1.0: DP-SGD 12.53 vs feature-projective 71.66 (ε probably 0.8).")

# %% [markdown]
# ## Effect of the subspace rank k
# Feature-projective DP at the largest ε with m public per-sample gradients per subspace estimate. A small k
# keeps less of the private gradient's signal, a large k lets in more noise (the noise in the projected
# gradient has norm ∝ √k instead of √p).

# %%
with timer("fig6"):
    kd = df[df.purposes.str.contains(r"\bk\b") & (df.method == "feature_projective")].sort_values("k")
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot(kd.k, kd.pckh, "o-", color=PALETTE["feature_projective"], label="feature-projective DP")
    dps = base[(base.method == "dpsgd") & (base.epsilon == eps_max)].pckh
    if len(dps):
        ax.axhline(float(dps.iloc[0]), color=PALETTE["dpsgd"], ls="--", label="DP-SGD")
    fdp = base[(base.method == "feature") & (base.epsilon == eps_max)].pckh
    if len(fdp):
        ax.axhline(float(fdp.iloc[0]), color=PALETTE["feature"], ls=":", label="feature DP (no projection)")
    ax.set(xscale="log", xlabel=f"k (m = {min(cfg.n_public_grads, len(public))} public gradients)",
           ylabel="PCKh@0.5 (%)", title=f"ε = {eps_max:g}, C = {c_main:g}")
    ax.legend(fontsize=6)
    save_figure(fig, out_dir, "fig6_effect_of_k", kd[["k", "pckh", "epsilon", "clip_norm", "seed"]])
    plt.show()
    plt.close(fig)
    print(kd[["k", "pckh"]].to_string(index=False))

# %% [markdown]
# ## What projected DP-SGD depends on
# Projection removes the noise outside a k-dimensional subspace (noise energy ∝ k instead of p, the number of
# trainable parameters), but also the part of the private gradient outside it. It helps when the public
# top-k subspace holds more than the fraction k/p of the clean private gradient's energy that a random
# subspace would hold: the ratio of the two signal-to-noise ratios is (energy fraction)/(k/p). Measured at the
# warm start and at the end of the private runs at the largest ε, over k. The clean private gradient is a
# diagnostic computed on private data (the mean clipped gradient of 256 private records, no noise) and is
# not covered by any guarantee. A second control separates the two effects of projecting: DP-SGD and
# projected DP-SGD trained again *without noise* (same clipping, sampling, subspace and steps; not private,
# diagnosis only). If projected DP-SGD stays below DP-SGD without noise too, what limits it is the part of the
# gradient the subspace discards, not the noise it removes.

# %%
with timer("fig7"):
    diag_models, sigma_ref = T.diagnostic_models(outcomes, pre.model, seed=seed, epsilon=eps_max, clip=c_main, k=cfg.k)
    m_pub = min(cfg.n_public_grads, len(public))
    ks = sorted({k for k in (1, 10, cfg.k, *cfg.k_grid, m_pub) if k <= m_pub})
    diag = X.projection_diagnostics(diag_models, private_set=private, public_set=public, ks=ks, clip=c_main,
                                    noise_multiplier=sigma_ref, batch_size=cfg.batch_size, n_private=256,
                                    n_public=m_pub)
    no_noise = J.run_controls(cfg, seed=seed, store=store, executor=jobs, data_key=J.design_data_spec(
        cfg, part="main", scale=scale, seed=seed, data_root=data_root).key())  # two jobs on the main design's data
    controls = T.noise_controls(df, no_noise, epsilon=eps_max, clip=c_main, k=cfg.k)
    fig = P.plot_projection_diagnostics(diag, controls, sigma=sigma_ref, clip=c_main, batch_size=cfg.batch_size,
                                        epsilon=eps_max)
    save_figure(fig, out_dir, "fig7_projection_diagnostics", pd.concat([diag, controls], ignore_index=True))
    plt.show()
    plt.close(fig)
    print(T.projection_text(diag, controls, k=cfg.k))

# %% [markdown]
# ## Run-to-run spread
# Seeds change the initialisation of the scratch runs, the Poisson sampling, the noise and the public
# batches (the warm start is shared).

# %%
with timer("table4"):
    save_table(spread, out_dir, "table4_seed_spread", caption=f"PCKh@0.5 over seeds at epsilon = {eps_max:g}")
    print(spread.round(3).to_string(index=False))
    pooled_sd = X.pooled_seed_sd(df)
    print(f"pooled run-to-run standard deviation: {pooled_sd:.2f} PCKh points")

# %% [markdown]
# ## Which of the paper's claims hold here
# Each claim is an ordering of two cells (each the mean over the seeds trained for it). The verdict is
# "holds" when the difference exceeds its margin, "does not hold" when it is below minus the margin, and "not
# resolvable" in between: the margin is about a 95 % interval of the difference under the pooled run-to-run
# spread, and never below one PCKh point (trained results drift by about that much from one CPU to another).

# %%
with timer("table5"):
    claims = X.claims_table(df, epsilons=cfg.epsilons, clip=c_main, other_clips=cfg.clips[1:], k=cfg.k)
    save_table(claims, out_dir, "table5_claims", caption="The paper's claims, its numbers and ours, with verdicts")
    with pd.option_context("display.max_colwidth", 70):
        print(claims.to_string(index=False))
    print()
    for _, r in claims.iterrows():
        print(f"- {r.claim}: {r.verdict.upper()} here ({r.ours}; difference {r.difference:+.2f}, margin "
              f"{r.margin:.2f}; paper: {r.paper})" + (f"\n    cause: {r.cause}" if r.cause else ""))

# %% [markdown]
# **Reading the results.** The verdicts above are computed from this run's data. Two points help read them:
# the feature methods' gain over DP-SGD comes partly from the clean, un-noised gradient of the blurred private
# images, which is covered only by *feature-level* DP relative to the blur (labels and blurred images are
# treated as public) — a much weaker promise than DP-SGD's record-level guarantee; compare the `protects`
# lines of the printed guarantees. And projected DP-SGD can only help when the public subspace holds much
# more than k/p of the private gradient (previous section).

# %% [markdown]
# ## What a private step costs here
# privkit's target for the frozen regime is a DP-SGD step of at most 1.1× a non-private step of the same trainable
# part, and this notebook at most 12 min on two CPU cores at the default scale. The step is timed here, side by
# side with the non-private one (interleaved rounds, fresh models, no step accounted), on the public split as
# stand-in data of the private set's shape, so that no timing depends on a private record; the notebook's own wall
# time is printed at the end. `benchmarks/bench_dp_step.py` compares the step with opacus. The full-fine-tuning
# regime's step (target ≤ 1.2× a non-private step of the whole network) is timed by
# `benchmarks/bench_dppose_full_finetuning.py`, which this notebook does not run; the README reports both.

# %%
with timer("speed"):
    stand_in = public.subset(torch.arange(min(len(public), 4 * cfg.batch_size)))
    cost = X.step_cost(make_model, stand_in, batch_size=cfg.batch_size, clip=c_main, delta=cfg.delta, lr=cfg.lr,
                       device=dev)
print(f"one DP-SGD step {1e3 * cost['dpsgd_s']:.0f} ms, one non-private step {1e3 * cost['nonprivate_s']:.0f} ms: "
      f"{cost['ratio']:.2f}× (medians of {cost['rounds']} interleaved rounds, expected batch {cost['batch_size']}"
      f"{', the cached patch Grams in use' if cost['grams'] else ''})")
if scale == "default":  # a target, reported: timings vary with the machine and its load
    print("target ≤ 1.1×: " + ("met" if cost["ratio"] <= 1.1 else
                               "NOT met: the second neck convolution's per-sample weight gradients (its input changes "
                               "at every step, so no Gram can be cached for it) and the Gram products remain"))

# %% [markdown]
# ## Checks of the paper's claims at this scale
# nbval fails the notebook when one of these stops holding: every private run's reported ε must be within its
# target. The 60 % PCKh@0.5 of non-private fine-tuning that this scale aims at (the level at which the
# orderings are worth judging) is reported beside it.

# %%
failures = X.check_guarantees(outcomes)
n_private_runs = sum(o.spec.epsilon is not None for o in outcomes)
print(f"{n_private_runs} private runs; reported ε ≤ target for all: {not failures}")
np_mean = float(np_runs.mean())
print(f"non-private fine-tuning: PCKh@0.5 {np_mean:.2f} over {len(np_runs)} seed(s) (target ≥ 60 at the default scale)")
if scale == "default":  # a target, reported: trained results drift by about a point across machines
    print("non-private target " + ("met" if np_mean >= 60.0 else f"NOT met ({np_mean:.2f} < 60)"))
print("\n".join(failures) if failures else "All checks passed.")
if failures:
    raise AssertionError("; ".join(failures))

# %%
cpu_total = time.process_time() - cpu0
write_run_manifest(out_dir, paper="dppose",
                   parameters={"scale": scale, "seed": seed, "data_root": data_root, "device": device}, device=dev,
                   timer=timer, extra={"cpu_seconds_notebook": round(cpu_total, 1), "n_runs": len(runs),
                                       "torch_threads": torch.get_num_threads(), "dataset": cfg.dataset,
                                       "backbone": cfg.backbone})
print({k: round(v, 1) for k, v in timer.seconds.items()}, f"total {timer.total:.1f} s wall, {cpu_total:.1f} s CPU")
if scale == "default":  # a target, reported: the wall time depends on the machine and its load
    print(f"notebook wall time {timer.total / 60:.1f} min on {torch.get_num_threads()} thread(s); target ≤ 12 min on "
          f"2 CPU cores: {'met' if timer.total <= 12 * 60 else 'NOT met'}")
