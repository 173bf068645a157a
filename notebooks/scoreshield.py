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
# # ScoreShield: differentially private release of similarity scores
#
# **Paper.** Razeghi & Rahimi, *ScoreShield: Differentially Private Release of Similarity Scores*,
# arXiv:2607.25041v1 (2026).
#
# ScoreShield releases cosine similarities under (ε, δ)-differential privacy: Gaussian noise at the
# global sensitivity of the release, then a projection back onto valid cosine objects — clipping to
# [−1, 1] for a query's score vector (regime i), the set of correlation matrices for a full Gram
# matrix (regime ii). This notebook regenerates the paper's artefacts with privkit's implementation:
#
# 1. the calibration the paper uses and the guarantee that actually holds at its ε;
# 2. error scaling in n (paper Fig. 2);
# 3. DP face verification with and without threshold recalibration (paper Table 1 / H.1), the
#    ROC/AUC/EER shift and decision-flip probabilities (App. G), the operating-point study;
# 4. downstream utility of a private Gram matrix: clustering, retrieval, recommendation (Fig. 5, K.*);
# 5. the projection solvers: the paper's averaged alternating projections (AAP) against the exact
#    nearest-correlation solvers;
# 6. empirical privacy audits, each with a negative control.
#
# **Data at the default scale.** The paper's face results use IR101/ViT-B face recognisers trained on
# WebFace4M and the LFW/IJB benchmarks; none can be downloaded here. privkit uses dlib's real 128-D
# face descriptor on `lfw-subset-views` (the 100 real LFW crops bundled with scikit-image, each an
# identity, in seeded synthetic views), scikit-learn's digits, privkit's own topic-labelled sentences
# embedded with all-MiniLM-L6-v2, and a documented synthetic ratings matrix in place of MovieLens.
# Numbers therefore differ from the paper's; the paper's numbers are printed beside ours where it gives
# them, and the differences are explained. Items marked [I] are privkit's reading where the paper is
# silent.

# %% tags=["parameters"]
scale = "default"
seed = 0
data_root = None
device = "auto"
out_dir = "figures/scoreshield"

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

import privkit
from privkit.figures import SectionTimer, save_figure, save_table, set_theme, write_run_manifest
from privkit.privacy import gaussian_sigma
from privkit.scoreshield import (
    bootstrap_ci,
    auc,
    eer,
    flip_probability,
    flip_probability_mc,
    recalibrate_threshold,
    release_scores,
    roc_shift_bound,
    synthetic_score_families,
)
from privkit.scoreshield import experiments as X

cfg = privkit.config.load("scoreshield", scale)
dev = privkit.resolve_device(device)
torch.set_num_threads(1)  # the matrices here are small: threads cost more than they give
set_theme()
timer = SectionTimer()
pd.set_option("display.width", 160, "display.max_columns", 30, "display.precision", 4)
print(f"scale={scale} seed={seed} device={dev}")
print(cfg)

# %% [markdown]
# ## Embeddings
# Face descriptors: dlib's ResNet face descriptor (the biometric reference, standing in for the
# paper's IR101). dlib's descriptor space is not centred — different faces have cosine ≈ 0.87 on these
# small crops — so privkit centres it with the mean embedding of the *training* identities (disjoint
# from the evaluated ones, hence public) and re-normalises [I]. Without centring the genuine/impostor
# margin would be a few hundredths and any DP noise would erase it.

# %%
from privkit.data import load_faces, paper_loaders
from privkit.data.cache import cached_embeddings
from privkit.data.splits import identity_splits
from privkit.encoders import load_encoder

with timer("embeddings"):
    fr = load_encoder("dlib-resnet-fr", device="cpu")
    lfw = None
    if scale == "paper":  # LFW's official View-2 protocol: pairs.txt, 10 folds of 300 + 300 pairs
        lfw = paper_loaders.load_lfw(data_root, size=cfg.face_size)
        faces = lfw.faces
    else:
        faces = load_faces(cfg.face_set, n_identities=cfg.n_identities, images_per_identity=cfg.images_per_identity,
                           size=cfg.face_size, seed=seed)
    emb = cached_embeddings(lambda: fr.embed(faces.images, boxes=faces.box), encoder=fr.name, dataset=faces.name,
                            split="all", seed=seed, extra={"n": len(faces), "size": cfg.face_size, "scale": scale})
    print(f"{faces.name}: {len(faces)} images of {faces.n_identities} identities; "
          f"dlib failures to enrol: {fr.failures_to_enrol} (faces are given by their exact boxes)")
    if lfw is None:
        parts = identity_splits(faces.identity, seed=seed)
        is_train = torch.isin(faces.identity, parts["train"])
        centre = emb[is_train].double().mean(0)
    else:  # [I] LFW's protocol has no training identities: centre on all its images (label-free, 10 folds alike)
        is_train = torch.zeros(len(faces), dtype=torch.bool)
        centre = emb.double().mean(0)
    femb = torch.nn.functional.normalize(emb.double() - centre, dim=1)
    eval_emb, eval_id = femb[~is_train], faces.identity[~is_train]
    raw_cos = (emb[~is_train].double() @ emb[~is_train].double().T)
    print(f"mean cosine between different identities: raw {float(raw_cos[eval_id[:, None] != eval_id[None]].mean()):.3f}, "
          f"centred {float((eval_emb @ eval_emb.T)[eval_id[:, None] != eval_id[None]].mean()):.3f}")

# %% [markdown]
# ## 1. What the paper's calibration guarantees (docs/scoreshield.md §5)
# The paper calibrates σ = Δ·√(2 ln(2/δ))/ε, the classical Gaussian-mechanism rule, which is a valid
# (ε, δ) guarantee only for ε < 1; its tables use ε from 15 to 100. `calibration="scoreshield"`
# reproduces the paper's noise exactly, and every privkit release reports the δ that truly holds for
# that noise (the analytic Gaussian mechanism of Balle & Wang 2018). At ε = 70 and 100 the paper's noise
# gives no guarantee at all (δ ≈ 1).

# %%
with timer("calibration"):
    cal = X.calibration_table(cfg.verification_epsilons, (cfg.verification_delta,))
    save_table(cal, out_dir, "tableC1_calibration",
               caption="Paper's sigma (Delta=2) vs the analytic sigma* and the delta that truly holds")
    print("Calibration at Δ = 2, δ = 1e-4 (paper's σ vs the minimal analytic σ*):")
    print(cal.to_string(index=False))
    r = release_scores(eval_emb[0], eval_emb[1:], epsilon=20.0, delta=1e-4, calibration="scoreshield",
                       generator=torch.Generator().manual_seed(seed))
    print("\nThe guarantee privkit returns for the paper's setting ε = 20, δ = 1e-4:")
    print(r.guarantee)

# %% [markdown]
# ## 2. Error scaling in n (paper Fig. 2)
# Empirical MSE/c of the naive release (noise only) and the projected release (clip for regime i,
# nearest correlation matrix for regime ii) against the collection size n, with the naive theory and
# the paper's projected rates overlaid: regime (ii) naive Θ(n³) vs projected O(n²) under record
# adjacency, Θ(n²) vs O(n^1.5) under Gram adjacency (Δ_G = 2). ε = 1, δ = 1e-5, face descriptors.

# %%
with timer("fig2"):
    pool = femb if len(femb) > max(cfg.scaling_ns) else torch.nn.functional.normalize(
        torch.randn(max(cfg.scaling_ns) + 1, femb.shape[1], generator=torch.Generator().manual_seed(seed),
                    dtype=torch.float64), dim=1)
    scal = X.error_scaling(pool, cfg.scaling_ns, epsilon=1.0, delta=1e-5, delta_g=2.0,
                           repeats=cfg.scaling_repeats, seed=seed)
    long = scal.melt(id_vars=["regime", "adjacency", "n", "repeat", "theory_naive"],
                     value_vars=["naive", "projected"], var_name="release", value_name="mse_over_c")
    panels = [("i: score vector", "record"), ("ii: Gram", "record"), ("ii: Gram", "gram")]
    rates = {("ii: Gram", "record"): 2.0, ("ii: Gram", "gram"): 1.5, ("i: score vector", "record"): 1.0}
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.2))
    for ax, (reg, adj) in zip(axes, panels):
        d = long[(long.regime == reg) & (long.adjacency == adj)]
        m = d.groupby(["release", "n"]).mse_over_c.agg(["mean", "std"]).reset_index()
        for rel, mk in (("naive", "o"), ("projected", "s")):
            mm = m[m.release == rel]
            ax.errorbar(mm.n, mm["mean"], yerr=mm["std"].fillna(0), marker=mk, label=rel, capsize=2)
        th = scal[(scal.regime == reg) & (scal.adjacency == adj)].groupby("n").theory_naive.mean()
        ax.plot(th.index, th.values, "k--", lw=0.8, label="naive theory")
        p = m[m.release == "projected"]
        ref = p["mean"].iloc[-1] * (p.n / p.n.iloc[-1]) ** rates[(reg, adj)]
        ax.plot(p.n, ref, "k:", lw=0.8, label=f"n^{rates[(reg, adj)]:g} (projected rate)")
        ax.set(xscale="log", yscale="log", xlabel="n", title=f"regime {reg.split(':')[0]}, {adj} adjacency")
    axes[0].set_ylabel("MSE / c")
    axes[0].legend(fontsize=7)
    save_figure(fig, out_dir, "fig2_error_scaling", long)
    plt.show()
    plt.close(fig)
    summary = scal.groupby(["regime", "adjacency", "n"])[["naive", "projected", "theory_naive"]].mean()
    print("Reproduces paper Fig. 2 (the paper gives the rates, not numbers). Mean MSE/c:")
    print(summary.to_string())

# %% [markdown]
# ## 3. DP face verification (paper Table 1 / H.1)
# Every verification pair's cosine is released with the paper's noise (regime i, Δ = 2, its
# c-calibration), at δ = 1e-4 across the paper's ε grid. *Accuracy* re-tunes the threshold on the
# noisy scores by 10-fold cross-validation [I: the paper does not say]. *TAR@FAR fixed* keeps the
# clean threshold (its false-accept rate inflates: column `far@… fixed`); *recal* picks the threshold
# that restores the target FAR on the privatised impostor scores; when the target is below the
# attainable floor L(σ) the paper's tables print 0, and so do we. Each row states the requested δ and
# the δ that truly holds for the noise used.

# %%
with timer("table1"):
    if lfw is not None:  # the official pairs and folds: accuracy is LFW's 10-fold protocol
        pairs = X.lfw_protocol_pairs(lfw.pairs, lfw.same, lfw.fold, femb, faces.identity)
        print(f"LFW View 2 ({lfw.faces.meta['pairs_file']}): {len(lfw)} pairs in {int(lfw.fold.max()) + 1} folds")
    else:  # all genuine pairs of the evaluated identities, seeded impostor pairs; accuracy on a balanced subset
        pairs = X.verification_pairs(eval_emb, eval_id, max_impostors=200_000, seed=seed)
    n_gen, n_imp = int(pairs["label"].sum()), int((pairs["label"] == 0).sum())
    fars = tuple(f for f in (1e-2, 1e-3) if f * n_imp >= 10)
    print(f"{n_gen} genuine and {n_imp} impostor pairs; FARs resolvable with >= 10 false accepts: {fars}")
    ver = X.dp_verification(pairs, epsilons=cfg.verification_epsilons, delta=cfg.verification_delta, fars=fars,
                            repeats=cfg.verification_repeats, seed=seed)
    num = ver.drop(columns=["repeat"]).groupby("epsilon", sort=False).mean(numeric_only=True)
    num["paper_lfw_accuracy_IR101"] = [X.PAPER_TABLE1_LFW.get(e, np.nan) for e in num.index]
    table1 = num.reset_index()
    save_table(table1, out_dir, "table1_dp_verification",
               caption=f"DP face verification (dlib descriptors, {faces.name}) vs the paper's LFW accuracy")
    cols = ["epsilon", "sigma", "stated_delta", "true_delta", "accuracy", "paper_lfw_accuracy_IR101", "auc", "eer"]
    cols += [c for c in table1.columns if c.startswith(("tar@", "far@"))]
    print(table1[cols].to_string(index=False))
    acc = table1.set_index("epsilon").accuracy
    lo, hi = f"{min(cfg.verification_epsilons):g}", f"{max(cfg.verification_epsilons):g}"
    print(f"\nPaper (IR101 on LFW, δ = 1e-4): {X.PAPER_TABLE1_LFW['clean']:.2f} clean, "
          f"{X.PAPER_TABLE1_LFW.get(hi, float('nan')):.2f} at ε = {hi}, {X.PAPER_TABLE1_LFW.get(lo, float('nan')):.2f} at ε = {lo}.\n"
          f"Ours (dlib on {faces.name}):  {acc['clean']:.2f} clean, {acc[hi]:.2f} at ε = {hi}, {acc[lo]:.2f} at ε = {lo}.\n"
          "The noise σ depends only on (ε, δ, Δ = 2), not on the encoder, so at small ε both land near the same\n"
          "accuracy: the noise swamps any encoder's margin. At large ε ours is capped by its much lower clean\n"
          "accuracy (25-px source crops and dlib instead of IR101 trained on WebFace4M). Recalibration restores\n"
          "the target FAR whenever it is attainable; without it the FAR grows many-fold (column far@… fixed).")

# %% [markdown]
# ### Template verification (paper Table 1, IJB-B / IJB-C columns)
# IJB-B/C compare *templates* — sets of stills and video frames of one subject — at very low FPR. A
# template's feature is the usual IJB pooling: average the frames of each media, sum the media,
# normalise (`X.template_features`). The pair score of two unit-norm template features is released
# exactly like an image pair (regime i, Δ = 2): a template is the private record. The paper does not
# say how templates interact with the noise (docs/scoreshield.md §5, item 4); this is privkit's reading [I].
# At the paper scale the NIST protocols are read from `data_root` (`paper_loaders.load_ijb`; IJB is
# licensed, so a missing set is reported and skipped). At the default scale no IJB exists here, so
# privkit forms an IJB-*style* protocol on the evaluated identities: disjoint templates of
# `images_per_template` images per identity, every template pair a protocol pair. TAR is reported only
# at FPRs the impostor pairs can resolve (≥ 10 false accepts); the paper's 1e-6 needs ≥ 10⁷ impostor pairs.

# %%
with timer("table1b"):
    proto_rows = []

    def template_rows(set_name, t_ids, feats, tpairs, tsame):
        tp = X.template_pairs(t_ids, feats, tpairs, tsame)
        n_i = int((tp["label"] == 0).sum())
        t_fars = tuple(f for f in (1e-4, 1e-3, 1e-2) if f * n_i >= 10)
        print(f"{set_name}: {feats.shape[0]} templates, {int(tp['label'].sum())} genuine and {n_i} impostor pairs; "
              f"resolvable FPRs: {t_fars}")
        res = X.dp_verification(tp, epsilons=cfg.verification_epsilons, delta=cfg.verification_delta, fars=t_fars,
                                repeats=cfg.verification_repeats, seed=seed)
        res = res.drop(columns=["repeat"]).groupby("epsilon", sort=False).mean(numeric_only=True).reset_index()
        res.insert(0, "protocol", set_name)
        for k, far in enumerate((1e-6, 1e-5, 1e-4)):
            key = set_name if set_name in ("IJBB", "IJBC") else "IJBC"
            res[f"paper_IR101_{key}_tar@{far:g}"] = [X.PAPER_TABLE1_IJB.get(e, {}).get(key, (np.nan,) * 3)[k]
                                                     for e in res.epsilon]
        return res

    if scale == "paper":
        for set_name in cfg.ijb_sets:
            try:
                ijb = paper_loaders.load_ijb(data_root, name=set_name)
            except privkit.errors.MissingResourceError as exc:
                print(f"{set_name} skipped: {exc}")
                continue

            def embed_ijb(ijb=ijb):
                out = []
                for _, batch in ijb.iter_faces(batch_size=2048, size=cfg.face_size):
                    out.append(fr.embed(batch.images, boxes=batch.box))
                return torch.cat(out)

            ijb_emb = cached_embeddings(embed_ijb, encoder=fr.name, dataset=set_name.lower(), split="all", seed=seed,
                                        extra={"n": len(ijb), "size": cfg.face_size})
            ids_, feats_ = X.template_features(ijb_emb.double() - centre, ijb.template, ijb.media)
            proto_rows.append(template_rows(set_name, ids_, feats_, ijb.pairs, ijb.same))
    templ = X.build_templates(eval_id, images_per_template=cfg.images_per_template, seed=seed)
    keep = templ >= 0
    ids_, feats_ = X.template_features(eval_emb[keep], templ[keep])
    tpairs, tsame = X.template_protocol(templ, eval_id)
    proto_rows.append(template_rows(f"{faces.name} templates of {cfg.images_per_template}", ids_, feats_, tpairs, tsame))
    table1b = pd.concat(proto_rows, ignore_index=True)
    save_table(table1b, out_dir, "table1b_template_verification",
               caption="DP template verification (IJB-style pooling) vs the paper's IJB-B/C TAR (IR101)")
    show = ["protocol", "epsilon", "sigma", "true_delta", "auc"]
    show += [c for c in table1b.columns if c.startswith("tar@") and c.endswith("recal")]
    show += [c for c in table1b.columns if c.startswith("paper_")]
    print("Reproduces paper Table 1's IJB-B / IJB-C columns (TAR at low FPR, IR101 numbers beside ours):")
    print(table1b[show].to_string(index=False))
    emb_row = table1b[table1b.protocol.str.contains("templates")].set_index("epsilon")
    print(f"\nTemplates pool {cfg.images_per_template} images: clean AUC {emb_row.auc['clean']:.3f} against "
          f"{float(table1.set_index('epsilon').auc['clean']):.3f} for single images (Table 1). The noise is the "
          "same per pair,\nso pooling helps only through the wider clean margin.")
    tar_cols = [c for c in emb_row.columns if c.startswith("tar@") and c.endswith("recal")]
    if tar_cols:
        lo_eps = f"{min(cfg.verification_epsilons):g}"
        zero = [c for c in tar_cols if emb_row.loc[lo_eps, c] == 0.0]
        print(f"At ε = {lo_eps}, recalibrated TAR is 0 (target FPR below the attainable floor) at "
              f"{len(zero)} of {len(tar_cols)} resolvable FPRs; the paper's IJB columns are 0 for every ε < 35 "
              "(IR101).")


# %% [markdown]
# ### ROC, AUC and EER under noise against the O(σ) bound (paper App. G)
# With L-Lipschitz genuine and impostor score CDFs, every ROC point moves by at most η = Lσ√(2/π),
# |ΔAUC| ≤ 2η and |ΔEER| ≤ η. L is estimated as the largest histogram density of the clean scores [I].
# Confidence intervals resample identities.

# %%
with timer("figG1"):
    s_clean, y = pairs["score"], pairs["label"]
    g_clean, i_clean = s_clean[y == 1], s_clean[y == 0]
    groups = (pairs["id_a"][y == 1], pairs["id_a"][y == 0])
    hist_l = max(np.histogram(v.numpy(), bins=50, range=(-1, 1), density=True)[0].max() for v in (g_clean, i_clean))
    base_auc = bootstrap_ci(auc, g_clean, i_clean, groups=groups, n_boot=cfg.n_boot, seed=seed)
    rows = []
    gen_noise = torch.Generator().manual_seed(seed + 1)
    for eps in cfg.verification_epsilons:
        sigma = gaussian_sigma(eps, cfg.verification_delta, sensitivity=2.0, method="scoreshield")
        noisy = (s_clean + sigma * torch.randn(s_clean.shape, generator=gen_noise, dtype=torch.float64)).clamp(-1, 1)
        ci = bootstrap_ci(auc, noisy[y == 1], noisy[y == 0], groups=groups, n_boot=cfg.n_boot, seed=seed)
        eta = roc_shift_bound(float(hist_l), sigma)
        rows.append({"epsilon": eps, "sigma": sigma, "auc": ci.estimate, "auc_low": ci.low, "auc_high": ci.high,
                     "delta_auc": base_auc.estimate - ci.estimate, "bound_2eta": min(2 * eta, 1.0),
                     "eer": eer(noisy[y == 1], noisy[y == 0]), "eer_clean": eer(g_clean, i_clean),
                     "bound_eta": min(eta, 1.0)})
    roc_df = pd.DataFrame(rows)
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    axes[0].plot(roc_df.sigma, roc_df.delta_auc, "o-", label="measured |ΔAUC|")
    axes[0].plot(roc_df.sigma, roc_df.bound_2eta, "k--", label="bound 2η = 2Lσ√(2/π)")
    axes[0].set(xlabel="σ", ylabel="AUC loss", title="AUC shift")
    axes[0].legend(fontsize=7)
    axes[1].plot(roc_df.sigma, (roc_df.eer - roc_df.eer_clean).abs(), "o-", label="measured |ΔEER|")
    axes[1].plot(roc_df.sigma, roc_df.bound_eta, "k--", label="bound η")
    axes[1].set(xlabel="σ", title="EER shift")
    axes[1].legend(fontsize=7)
    save_figure(fig, out_dir, "figG1_roc_shift", roc_df)
    plt.show()
    plt.close(fig)
    print(f"clean AUC {base_auc.estimate:.4f} [{base_auc.low:.4f}, {base_auc.high:.4f}] (identity bootstrap); L ≈ {hist_l:.2f}")
    print(roc_df.to_string(index=False))

# %% [markdown]
# ### Decision-flip probability (paper App. G)
# For a score s and threshold τ ∈ (−1, 1), clipping never changes the decision, and the decision flips
# with probability Q(|s − τ|/σ). Closed form against Monte Carlo, at the clean EER threshold.

# %%
with timer("figG2"):
    tau = float(recalibrate_threshold(i_clean, target_fpr=1e-2).threshold)
    sigma = gaussian_sigma(35.0, cfg.verification_delta, sensitivity=2.0, method="scoreshield")
    grid = torch.linspace(-0.99, 0.99, 41, dtype=torch.float64)
    theory = flip_probability(grid, tau, sigma)
    mc = flip_probability_mc(grid, tau, sigma, n_samples=20_000, generator=torch.Generator().manual_seed(seed))
    flip_df = pd.DataFrame({"score": grid.numpy(), "theory": theory.numpy(), "monte_carlo": mc.numpy(),
                            "tau": tau, "sigma": sigma})
    pair_flip_theory = float(flip_probability(s_clean, tau, sigma).mean())
    noisy = (s_clean + sigma * torch.randn(s_clean.shape, generator=torch.Generator().manual_seed(seed + 2),
                                           dtype=torch.float64)).clamp(-1, 1)
    pair_flip_measured = float(((noisy > tau) != (s_clean > tau)).double().mean())
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot(grid, theory, "k-", label="Q(|s−τ|/σ)")
    ax.plot(grid, mc, "o", ms=3, label="Monte Carlo")
    ax.axvline(tau, color="grey", lw=0.6)
    ax.set(xlabel="clean score s", ylabel="flip probability", title=f"ε = 35, δ = 1e-4 (σ = {sigma:.3f})")
    ax.legend(fontsize=7)
    save_figure(fig, out_dir, "figG2_flip_probability", flip_df)
    plt.show()
    plt.close(fig)
    pair_flip = pd.DataFrame([{"epsilon": 35.0, "delta": cfg.verification_delta, "sigma": sigma, "tau": tau,
                               "n_pairs": int(s_clean.numel()), "flip_rate_closed_form": pair_flip_theory,
                               "flip_rate_measured": pair_flip_measured,
                               "max_abs_theory_minus_mc_on_grid": float((theory - mc).abs().max())}])
    save_table(pair_flip, out_dir, "tableG2_pair_flip_rate",
               caption="Decision-flip rate over the verification pairs at ε = 35: closed form vs measured (App. G)")
    print(f"over the verification pairs: predicted flip rate {pair_flip_theory:.4f}, measured {pair_flip_measured:.4f}; "
          f"max |theory − MC| on the grid {float((theory - mc).abs().max()):.4f}")

# %% [markdown]
# ### Operating-point study (paper App. G/H, synthetic score families)
# The paper's four synthetic families (Gaussian, Beta, mixture, Student-t; docs/scoreshield.md §4) with its
# (ε, δ, α) grid. For each target false-match rate α: the clean threshold τ_α, the false-match rate if
# it is kept, the recalibrated threshold, whether α is attainable at all (α ≥ L(σ)), and the TPR.

# %%
with timer("tableG1"):
    fams = synthetic_score_families(cfg.op_scores, seed=seed)
    ops = X.operating_points(fams, epsilons=cfg.op_epsilons, deltas=cfg.op_deltas, alphas=cfg.op_alphas, seed=seed)
    save_table(ops, out_dir, "tableG1_operating_points", caption="Operating points on synthetic score families")
    fig, axes = plt.subplots(1, len(cfg.op_alphas), figsize=(4.2 * len(cfg.op_alphas), 3.2), squeeze=False)
    d_show = max(cfg.op_deltas)
    for ax, alpha in zip(axes[0], cfg.op_alphas):
        sub = ops[(ops.alpha == alpha) & (ops.delta == d_show)]
        for fam, ff in sub.groupby("family"):
            ax.plot(ff.epsilon, ff.tpr_recal, "o-", ms=3, label=fam)
        ax.set(xscale="log", xlabel="ε", ylabel="TPR after recalibration", title=f"α = {alpha:g}, δ = {d_show:g}")
    axes[0][0].legend(fontsize=7)
    save_figure(fig, out_dir, "figG3_operating_points", ops)
    plt.show()
    plt.close(fig)
    print(ops[ops.delta == d_show][["family", "epsilon", "alpha", "sigma", "tau_clean", "fmr_kept_threshold",
                                    "tau_recal", "attainable", "fmr_recal", "tpr_clean", "tpr_recal"]]
          .to_string(index=False, max_rows=60))
    gauss = ops[(ops.family == "gaussian") & ops.attainable]
    if len(gauss):
        row = gauss.iloc[-1]
        from privkit.scoreshield import gaussian_offset
        print(f"\nGaussian family check at ε = {row.epsilon:g}: measured offset {row.offset:.4f}, closed form "
              f"τ0(√(1+σ²/s²) − 1) = {gaussian_offset(row.tau_clean, row.sigma, 0.2):.4f}")

# %% [markdown]
# ## 4. Downstream utility of a private Gram matrix (paper Fig. 5, K.1–K.10)
# Regime (ii) with the paper's **Gram/output adjacency** (radius Δ_G ∈ {0.5, 2}, δ = 1e-8). This is
# *not* record-level privacy: protecting one record needs Δ = 2√(2(n−1)) (column `record_delta`, e.g.
# ≈ 32 at n = 128), i.e. 16–64× more noise. Naive (noisy matrix), the one-eigendecomposition clip, the
# paper's AAP and the exact nearest correlation matrix are compared on the same noise draws.
# Embeddings: digits (privkit's `pixels` encoder), topic sentences (all-MiniLM-L6-v2), faces (centred dlib).

# %%
from privkit.data.digits import load_digits_images
from privkit.data.text import load_sentence_embeddings

with timer("fig5"):
    dig_x, dig_y = load_digits_images(size=16, seed=seed)
    pix = load_encoder("pixels", device="cpu")
    dig_e = pix.embed(dig_x).double()
    sent_e, sent_y, _, _ = load_sentence_embeddings(device="cpu")
    datasets = {"digits": (dig_e, dig_y), "sentences": (sent_e.double(), sent_y), "faces": (eval_emb, eval_id)}
    datasets = {k: v for k, v in datasets.items() if v[0].shape[0] >= cfg.gram_n}
    ga = X.gram_analytics(datasets, n=cfg.gram_n, epsilons=cfg.gram_epsilons, delta=cfg.gram_delta,
                          delta_gs=cfg.gram_delta_gs, projections=cfg.gram_projections, repeats=cfg.gram_repeats,
                          seed=seed)
    priv = ga[ga.method != "clean"]
    clean = ga[ga.method == "clean"].groupby(["dataset", "metric"]).value.mean()
    dg_show = max(cfg.gram_delta_gs)
    grid = sns.relplot(data=priv[priv.delta_g == dg_show], x="epsilon", y="value", hue="method", style="method",
                       row="metric", col="dataset", kind="line", marker="o", height=2.2, aspect=1.2,
                       facet_kws={"sharey": "row"}, errorbar="sd")
    grid.set_titles("{col_name}: {row_name}")
    for (metric, dataset), ax in grid.axes_dict.items():
        ax.axhline(clean[(dataset, metric)], color="k", lw=0.7, ls="--")
        ax.set_xscale("log")
    grid.figure.suptitle(f"Gram adjacency Δ_G = {dg_show:g}, δ = {cfg.gram_delta:g} (dashed: clean)", y=1.02)
    save_figure(grid.figure, out_dir, "fig5_gram_analytics", ga)
    plt.show()
    plt.close(grid.figure)
    tab = priv.groupby(["dataset", "metric", "delta_g", "epsilon", "method"]).value.mean().unstack("method")
    print("Reproduces the qualitative claim of paper Fig. 5 / K.* (the paper gives figures only, no numbers):")
    print(tab.to_string())

# %% [markdown]
# ### Recommendation from a private user-similarity Gram (paper Fig. K.*)
# MovieLens-100K cannot be downloaded here; at the default scale privkit uses a documented synthetic
# low-rank ratings matrix (rank 5, 30% observed, ratings 1–5; `X.synthetic_ratings` says why it is
# denser than MovieLens) with the paper's protocol: user-mean-centred ratings, cosine user
# similarities released privately (Gram adjacency), and similarity-weighted neighbour prediction; RMSE
# on held-out ratings. Two references: the clean Gram, and *user means* (no similarity at all), the
# floor a release must beat to be worth anything. At the paper scale the MovieLens loader reads
# `ml-100k/` with its official u1 split.

# %%
with timer("fig5b"):
    if scale == "paper":
        ml = paper_loaders.load_movielens_100k(data_root)
        train_r, test_r = ml.train.double(), ml.test.double()
    else:
        train_r, test_r = X.synthetic_ratings(cfg.ratings_users, cfg.ratings_items, seed=seed)
    rec = X.recommender_study(train_r, test_r, epsilons=cfg.gram_epsilons, delta=cfg.gram_delta,
                              delta_gs=cfg.gram_delta_gs, projections=cfg.gram_projections, repeats=cfg.gram_repeats,
                              k=cfg.recommender_k, seed=seed)
    clean_rmse = float(rec[rec.method == "clean"].rmse.iloc[0])
    mean_rmse = float(rec[rec.method == "user means"].rmse.iloc[0])
    fig, axes = plt.subplots(1, len(cfg.gram_delta_gs), figsize=(4.2 * len(cfg.gram_delta_gs), 3.2), squeeze=False)
    for ax, dg in zip(axes[0], cfg.gram_delta_gs):
        sub = rec[(rec.delta_g == dg)]
        sns.lineplot(data=sub, x="epsilon", y="rmse", hue="method", style="method", marker="o", ax=ax, errorbar="sd")
        ax.axhline(clean_rmse, color="k", lw=0.7, ls="--", label="clean Gram")
        ax.axhline(mean_rmse, color="grey", lw=0.7, ls=":", label="user means")
        ax.legend(fontsize=7)
        ax.set(xscale="log", title=f"Δ_G = {dg:g}")
    save_figure(fig, out_dir, "fig5b_recommender", rec)
    plt.show()
    plt.close(fig)
    print("Reproduces paper Fig. K.* (recommendation; the paper gives figures only, no numbers).")
    print(f"clean RMSE {clean_rmse:.4f}; user means (no similarity) {mean_rmse:.4f}")
    rec_tab = rec[~rec.method.isin(["clean", "user means"])].groupby(["delta_g", "epsilon", "method"]).rmse.mean().unstack()
    print(rec_tab.to_string())
    beat = (rec_tab.lt(mean_rmse)).sum()
    print("settings (Δ_G, ε) where the release beats user means, per method: "
          + ", ".join(f"{m} {int(beat[m])}/{len(rec_tab)}" for m in rec_tab.columns))
    if {"none", "nearest"} <= set(rec_tab.columns):
        gain = rec_tab["none"] - rec_tab["nearest"]
        print(f"nearest projection vs naive: lower RMSE in {int((gain > 0).sum())}/{len(gain)} settings, mean gain "
              f"{gain.mean():+.4f} (largest {gain.max():+.4f}).")
        if gain.mean() > 0.01 and (gain > 0).mean() > 0.5:
            print("The projection visibly helps, as the paper's Fig. K.* claims for recommendation.")
        else:
            print("Neighbour prediction uses only the top-k similarities and their weights, which the noise perturbs "
                  "far less than the\nwhole matrix, so the projection's error reduction (Fig. 2) buys little here: "
                  "the paper's claim of a visible\ngain on recommendation is not reproduced at this size.")

# %% [markdown]
# ## 5. Projection solvers
# The paper's AAP (its Algorithm 3) reaches *a* correlation matrix, not the nearest one its risk bounds
# assume. privkit's default is the Qi–Sun dual Newton method, which reaches the nearest point in a few
# eigendecompositions; Higham's alternating projections with Dykstra's correction reach it too, slowly.
# Noisy Grams of random unit embeddings (d = 64, symmetric noise σ = 0.5). `excess_distance_rel` is the
# distance to the noisy input relative to the best method; `distance_to_clean` measures utility: at
# high noise the one-eigendecomposition clip can be closer to the clean matrix than the nearest point.

# %%
with timer("solvers"):
    solv = X.solver_comparison(cfg.solver_ns, seed=seed)
    save_table(solv, out_dir, "tableS1_solvers", caption="Correlation projection solvers")
    print(solv[["n", "method", "seconds", "time_in_eighs", "iterations", "eigendecompositions", "min_eigenvalue",
                "max_diag_error", "excess_distance_rel", "distance_to_clean"]].to_string(index=False))
    print("\nbenchmarks/bench_nearest_correlation.py measures the same at n = 500…2000 against statsmodels.")

# %% [markdown]
# ## 6. Empirical privacy audits
# The shared auditor draws many releases on two worst-case neighbouring inputs, fits a threshold test on
# half and reports a 95% Clopper–Pearson lower bound on ε from the other half. A correct mechanism must
# audit below its claim; each negative control (the sensitivity halved without enforcing the score domain it
# implies, i.e. the release before the clamp; Gram adjacency with half the
# record radius presented as if it covered records) must be caught. Analytic calibration, ε = 1, δ = 1e-5.

# %%
with timer("audits"):
    audits = []
    for label, fn, expect in [
        ("score vector, Δ = 2 (correct)", lambda: X.audit_score_release(epsilon=1.0, delta=1e-5, n_samples=cfg.audit_samples, seed=seed), "pass"),
        ("score vector, Δ = 1 with the domain [0, 1] enforced (correct)", lambda: X.audit_score_release(epsilon=1.0, delta=1e-5, sensitivity=1.0, n_samples=cfg.audit_samples, seed=seed), "pass"),
        ("score vector, Δ = 1 without the domain (broken: sensitivity halved)", lambda: X.audit_score_release(epsilon=1.0, delta=1e-5, sensitivity=1.0, enforce_domain=False, n_samples=cfg.audit_samples, seed=seed), "caught"),
        ("Gram, record adjacency (correct)", lambda: X.audit_gram_release(epsilon=1.0, delta=1e-5, n_samples=cfg.audit_samples, seed=seed), "pass"),
        ("Gram, Δ_G = half the record radius (not record-level)", lambda: X.audit_gram_release(epsilon=1.0, delta=1e-5, delta_g=X.record_sensitivity(5) / 2, n_samples=cfg.audit_samples, seed=seed), "caught"),
    ]:
        res = fn()
        audits.append({"release": label, "claimed_epsilon": res.claimed_epsilon, "epsilon_lower_95": res.epsilon_lower,
                       "passed": res.passed, "expected": expect, "n_samples": res.n_samples})
        print(f"{label}: {res}")
    audit_df = pd.DataFrame(audits)
    save_table(audit_df, out_dir, "tableA1_audits", caption="Empirical privacy audits (95% lower bounds on epsilon)")

# %% [markdown]
# ## Checks of the paper's claims at this scale
# nbval fails the notebook when one of these stops holding.

# %%
failures = []
proj_vs_naive = scal.groupby(["regime", "adjacency", "n"])[["naive", "projected"]].mean()
if not (proj_vs_naive.projected < proj_vs_naive.naive).all():
    failures.append("projected error is not below naive error at every n")
for _, a in audit_df.iterrows():
    if (a.expected == "pass") != bool(a.passed):
        failures.append(f"audit '{a.release}' expected {a.expected}, got epsilon_lower={a.epsilon_lower_95:.3f}")
# recalibrated FAR within its binomial 99% interval of the target, for every attainable row
for _, r in ver.iterrows():
    for far in fars:
        if r.epsilon != "clean" and bool(r[f"attainable@{far:g}"]):
            half = 2.58 * math.sqrt(far * (1 - far) / n_imp) + 1.0 / n_imp
            if abs(r[f"far@{far:g} recal"] - far) > half:
                failures.append(f"recalibrated FAR {r[f'far@{far:g} recal']:.2e} not within ±{half:.1e} of {far:g} at ε={r.epsilon}")
# the paper's calibration is invalid at its large ε; privkit must say so
if not (~cal.paper_sigma_valid).all():
    failures.append("expected the paper's sigma to miss its stated delta at every eps >= 15")
if not (solv[solv.method == "newton"].excess_distance_rel <= 1e-6).all():
    failures.append("Newton did not reach the nearest point")
if scale != "smoke":
    acc = table1.set_index("epsilon").accuracy
    eps_sorted = [f"{e:g}" for e in sorted(cfg.verification_epsilons)]
    if not acc[eps_sorted[-1]] > acc[eps_sorted[0]]:
        failures.append("verification accuracy does not improve from the smallest to the largest epsilon")
print("\n".join(failures) if failures else "All checks passed.")
if failures:
    raise AssertionError("; ".join(failures))

# %%
write_run_manifest(out_dir, paper="scoreshield",
                   parameters={"scale": scale, "seed": seed, "data_root": data_root, "device": device}, device=dev,
                   timer=timer)
print({k: round(v, 1) for k, v in timer.seconds.items()}, f"total {timer.total:.1f} s")
