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
# # Identity leakage in image encoders and the Identity Sanitization Projection (ISP)
#
# **Paper.** George, Yeh, Lee, Zhang, *From Measurement to Mitigation: Quantifying and Reducing Identity
# Leakage in Image Representation Encoders with Linear Subspace Removal*, CVPR 2026 (arXiv:2604.05296).
#
# The paper asks how much *identity* a frozen image encoder leaks to an attacker who holds its embeddings and a
# few labelled images of *other* people, and removes it with ISP: the top-r left singular vectors of the
# centred class-mean matrix of a labelled fitting set are projected out and the embedding re-normalised. This
# notebook regenerates, with privkit's implementation:
#
# 1. the leakage table — TAR at low FAR of an open-set attacker (cosine, ridge and MLP probes) on raw embeddings,
#    after ISP fitted in-domain (**ISP-W**) and after ISP fitted on the *other* face set (**ISP-X**), with the
#    paper's CLIP/DINOv2/ArcFace numbers beside ours (paper Table 1);
# 2. the face-versus-context attribution: FII by face-coverage ratio, CPI against face blur, B*;
# 3. TAR and utility (kNN on non-identity attributes, copy detection) against the rank r;
# 4. ISP against LEACE and INLP at equal rank; 5. principal angles between identity subspaces fitted on
#    different data; 6. template inversion to aligned face crops (regression and optimisation attacks) before and
#    after ISP, judged by dlib verification, rank-1 identification and the margin over a mismatched control.
#
# ISP is a deterministic linear projection, not a differential-privacy mechanism: it comes with no
# `PrivacyGuarantee`, and its protection is empirical — against the probes measured here (the paper itself calls
# it certified against *linear* attackers only).
#
# **Data at the default scale.** CelebA, VGGFace2, CLIP, DINOv2 and ArcFace cannot be downloaded here. privkit
# uses `portraits-views` as the main set — 609 real frontal portraits of 609 different people, each its own identity,
# shown in seeded views (pose warp, lighting, crop, blur, noise, occluders) on real background photos with exact face
# masks; views are transforms of one photo, not other photographs of the person — and `lfw-subset-views` (the 100
# real LFW faces bundled with scikit-image, in the same kind of views) as the *other* set for ISP-X. The encoders all
# install offline: three biometric references (dlib's ResNet descriptor, the HSE `faceres` recogniser trained on
# VGGFace2, and `mobileface`; the paper's ArcFace role), ImageNet **EfficientNet-Lite0** (the general-purpose
# encoder, the paper's CLIP/DINOv2 role), **MoveNet**'s backbone (a human-centric encoder pretrained on COCO poses,
# never on identities), MTCNN's ONet and the age/gender CNN (face-trained, never on identities), privkit's small
# self-supervised `ssl-small`, PDQ and pHash (perceptual hashes) and raw pixels. Numbers therefore differ from the
# paper's; the paper's are printed and drawn beside ours with the reasons. Items marked **[I]** are privkit's
# definitions where the paper is silent (docs/isp.md): the rank, the probe details, FII/CPI/B*, the inversion attacks
# and thresholds. The closing section judges each claim of the paper as *holds*, *does not hold* or *not resolvable
# here*, from this run's data and intervals.

# %% tags=["parameters"]
scale = "default"
seed = 0
data_root = None
device = "auto"
out_dir = "figures/isp"
executor = "local"
executor_options = None
store_dir = None

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

import privkit
from privkit.config import PAPER_DATA_SCALES, SMALL_SCALES
from privkit.studies import guards as G
from privkit.data.splits import identity_splits
from privkit.isp.inversion import describe_inversion_evidence
from privkit.studies import claims as C
from privkit.studies.figures import SectionTimer, save_figure, save_table, set_theme, write_run_manifest
from privkit.studies.isp import claims as IC
from privkit.jobs import make_executor, store_for
from privkit.studies.embedding import Jobs, load_source
from privkit.studies.isp import experiments as X
from privkit.studies.isp import jobs as J
from privkit.studies.isp import plots as P
from privkit.studies.isp import tables as T

cfg = privkit.config.load("isp", scale)
dev = privkit.resolve_device(device)
torch.set_num_threads(1)  # small matrices: on shared cores, OpenMP threads cost far more than they give
set_theme()
timer = SectionTimer()
pd.set_option("display.width", 180, "display.max_columns", 30, "display.precision", 4)
print(f"scale={scale} seed={seed} device={dev} executor={executor}")
print(cfg)

# %% [markdown]
# ## Data, splits and embeddings
# Identities are split into disjoint probe-fit / validation / test parts (the paper: 320 / 80 / 80). Encoders
# marked `[box]` see the exact face box (face-crop models: dlib, faceres, mobileface, age-gender, ONet as MTCNN uses
# it); `[image]`
# see the whole image (`cfg.face_size` px), face and background, as the paper's general encoders do. dlib, faceres and
# EfficientNet-Lite0 embed a few dozen images per second on a CPU, so embeddings are cached in `build/cache/`
# (owner-only files: they are biometric templates).

# %%
with timer("embeddings"):
    # every (face set, encoder) embedding is a job, and so are the attribution, rank sweep and inversion below: run by
    # `executor` unless already in the store
    store, jobs = store_for(out_dir, store_dir), make_executor(executor, device=device, **(executor_options or {}))
    if scale in PAPER_DATA_SCALES:
        print(G.plan_paper_run("isp", cfg, data_root, device=device).text())  # check inputs, plan, probe
    sources = T.face_sources(cfg, paper_data=scale in PAPER_DATA_SCALES, seed=seed, data_root=data_root)
    faces, other = (load_source(src) for src in sources)
    parts = identity_splits(faces.identity, counts=cfg.split_counts, seed=seed)
    masks = {k: torch.isin(faces.identity, v) for k, v in parts.items()}
    embedded = T.embed_encoders(cfg, faces, other, device=dev, data_root=data_root, seed=seed, sources=sources,
                                jobs=Jobs(store, jobs, progress=scale not in SMALL_SCALES))
    for line in embedded.skipped:
        print(line)
    encoders, emb, emb_other = embedded.encoders, embedded.emb, embedded.emb_other
    labels = list(emb)
    biometric = {lab for lab in labels if encoders[lab.split(" ")[0]].kind == "face-recognition"}
    splits = {lab: {k: (emb[lab][m], faces.identity[m]) for k, m in masks.items()} for lab in labels}
    print(f"{faces.name}: {len(faces)} images of {faces.n_identities} identities; "
          f"{other.name} (ISP-X fit): {len(other)} images of {other.n_identities} identities")
    print({k: f"{len(v)} identities, {int(masks[k].sum())} images" for k, v in parts.items()})
    print(embedded.table.to_string(index=False))

# %% [markdown]
# ### Which FAR the data can resolve
# A FAR α is reported only if the impostor pairs allow at least 10 false accepts (α ≥ 10 / #pairs, privkit's rule;
# docs/isp.md §3). The paper's 1,600-image test set gives ≈ 1.26 M impostor pairs and resolves 1e-4; ours is much
# smaller, so the smallest resolvable FAR is higher (whether 1e-4 is still resolvable is printed below), and no TAR
# is ever printed below it. **Chance reference:** a score
# that does not depend on identity accepts genuine pairs at the same rate as impostors, so its TAR at FAR α is α
# (the realised FAR column): "near chance" below means "TAR within its interval of the FAR".

# %%
fars = T.resolvable_fars(cfg, faces.identity, masks)
n_imp, floor, resolvable, far_lo = fars.impostor_pairs, fars.floor, fars.resolvable, fars.lowest
k_max = max(cfg.ks)
print(f"validation/test impostor pairs: {n_imp['val']} / {n_imp['test']} -> smallest resolvable FAR {floor:.2e}")
print(f"reported FARs: {list(cfg.fars)}; resolvable: {resolvable}; the lowest, {far_lo:g}, is used below "
      f"(the paper's 1e-4 is {'resolvable' if 1e-4 >= floor else 'NOT resolvable'} here)")

# %% [markdown]
# ## 1. Leakage before and after ISP (paper Table 1)
# The attacker fits a probe on the probe-fit identities (k labelled images each), picks its hyperparameters and the
# threshold on the validation identities, and is scored on the test identities ([I]: k = probe-fit shots,
# single-image templates; ridge λ from the log grid `cfg.ridge_lambdas` (decades at the default scale, a finer grid
# at the paper scale); MLP d→512→256 with early stopping, docs/isp.md §3).
# ISP-W is fitted on the probe-fit identities of the same set, ISP-X on the other set, both at rank
# r = `cfg.isp_rank` [I: the paper's r was not found]. Every transform is applied to all three splits: the
# attacker only ever sees sanitised embeddings. Intervals: 95% identity bootstrap of the test identities.

# %%
with timer("leakage"):
    r_max_w = min(max(cfg.ranks), len(parts["train"]) - 1)
    study = T.leakage_study(cfg, labels, splits, emb_other, other.identity, seed=seed)
    fits, projectors, leak, cells = study.fits, study.projectors, study.leak, study.cells
    # what the attribution, rank sweep and inversion jobs share (the faces, the splits, the embeddings, the fits) is
    # stored once
    J.share_encoders(encoders, device=dev, data_root=data_root)
    J.save_study(J.study_spec(cfg, scale=scale, seed=seed, data_root=data_root, encoders=encoders),
                 J.StudyData(faces, masks, emb, fits), store, jobs)
    job_args = {"store": store, "scale": scale, "executor": jobs, "seed": seed, "data_root": data_root,
                "progress": scale not in SMALL_SCALES}
    bad = leak[(leak.far < floor * (1 - 1e-12)) & leak.tar.notna()]
    print(f"rows with a TAR below the resolvable FAR: {len(bad)} (must be 0)")

    lo = leak[np.isclose(leak.far, far_lo)]
    wide = T.leakage_wide(lo, far_lo)
    save_table(wide, out_dir, "table1_leakage",
               caption=f"TAR at FAR={far_lo:g} (lowest resolvable; chance = realised FAR), raw vs ISP-W vs ISP-X")
    print(f"Reproduces paper Table 1 (TAR %, FAR = {far_lo:g}, 95% identity-bootstrap CI; k = probe-fit shots; "
          f"cosine needs no shots):")
    print(T.format_leakage(wide).to_string(index=False))

# %% [markdown]
# The paper's numbers (ridge, CelebA-20, TAR at FAR = 1e-4, k = 16) beside ours (ridge, TAR at our lowest resolvable
# FAR, k = 1 and the largest k we have). They are not comparable one to one: different encoders, data and scale
# (and FAR wherever the paper's 1e-4 is not resolvable). The paper's *pattern*: the face-recognition reference
# leaks far more than any other encoder; ISP-W and ISP-X lower the ridge TAR of encoders that leak; ISP-X (fitted
# on another dataset) does about as well as ISP-W. The paired comparisons below say which parts of the pattern hold
# here.

# %%
with timer("leakage"):
    table2 = T.paper_reference_table(lo, labels, ks=cfg.ks, far=far_lo, dataset=faces.name)
    save_table(table2, out_dir, "table2_paper_reference", caption="Ridge TAR (%): the paper's numbers and ours")
    print(table2.assign(far=table2.far.map("{:g}".format)).to_string(index=False, na_rep="—", float_format="{:.1f}".format))
    print("\nPaper headline: CLIP 19.8 → 13.0 (ISP-W) → 10.2 (ISP-X); DINOv2 5.7 → 4.4 → 4.2; ArcFace 94.0 (no ISP).")

# %% [markdown]
# ### Does ISP lower what leaks? Paired comparisons
# An encoder *leaks* when its raw ridge TAR at the lowest resolvable FAR lies above the chance reference by more
# than its interval (lower bound > realised FAR), and leaks *clearly* when the excess over chance is larger than the
# whole interval width [I] — only then can a drop be resolved with this many test identities. The drop raw − ISP
# is measured on the same test identities with a *paired* identity bootstrap (both sides resampled together),
# which is far tighter than comparing two separate intervals.

# %%
with timer("leakage"):
    comp = T.paired_leakage(lo, cells, labels, k_max=k_max, far=far_lo, n_boot=max(cfg.n_boot, 200), seed=seed)
    print((comp.set_index(["encoder", "transform"]) * 1).to_string(float_format="{:.4f}".format))
    for line in T.describe_paired_leakage(comp):
        print(line)

# %%
with timer("leakage"):
    fig, fig1_data = P.plot_leakage(lo, leak, labels, probes=cfg.probes, k_max=k_max, far=far_lo,
                                    isp_rank=cfg.isp_rank, dataset=faces.name, other_dataset=other.name)
    save_figure(fig, out_dir, "fig1_leakage", fig1_data)
    plt.show()
    plt.close(fig)

# %% [markdown]
# ## 2. Face versus context (paper's attribution study)
# All privkit's definitions [I] (docs/isp.md §4): face and an equal-area background region get the same Gaussian
# blur; FII = Δ_face − Δ_context with Δ = 1 − cos(z, z_perturbed) (normalised FII_n ∈ [−1, 1]; > 0: the face
# matters more), binned by face-coverage ratio (FCR); CPI(σ) = how often a face-blurred query is closer to a
# stranger in the *same scene* than to its own identity in another scene (> 0.5: context-preferring); B* = the
# smallest revealed fraction of another image's background at which a composite is closer to that image than to
# its own identity (small: context dominates). Only whole-image encoders are meaningful here; the `[box]` encoders
# see face crops, so they are left out.

# %%
with timer("attribution"):
    attr, attr_notes = J.attribution_study(cfg, encoders, **job_args)
    for line in attr_notes:
        print(line)
    table3, fii_df, cpi_df, bst_df = attr["table3"], attr["fii"], attr["cpi"], attr["bstar"]
    save_table(table3, out_dir, "table3_attribution",
               caption="Attribution: mean FII, CPI without and with the strongest face blur, median B* (NaN: > 1)")
    fig, long_attr = P.plot_attribution(fii_df, cpi_df, bst_df)
    save_figure(fig, out_dir, "fig2_attribution", long_attr)
    plt.show()
    plt.close(fig)
    print("Reproduces the paper's attribution study (it gives no numbers; its conclusion: encoders are "
          "context-dominant):")
    print(table3.to_string(index=False))
    ctx = table3[table3.cpi_no_blur > 0.5].encoder.tolist()
    print(f"\nCPI > 0.5 (a face-blurred query is closer to a stranger in its own scene than to itself elsewhere) for "
          f"{len(ctx)} of {len(table3)} encoders: {ctx}.\nFII_n > 0 on average for "
          f"{int((table3.fii_normalised_mean > 0).sum())} of {len(table3)}: blurring the face moves the embedding more "
          f"than blurring an equal area of background. B* < 0.5 for {int((table3.b_star_median < 0.5).sum())} of "
          f"{len(table3)}. The measures need not agree, so Table 8 judges 'context-dominant' on each of the three.")

# %% [markdown]
# ## 3. TAR and utility against the rank r; 4. ISP vs LEACE vs INLP
# ISP is nested in r (the top-r singular directions), so one fit per set serves the whole sweep; LEACE (its
# closed form, rank-truncated [I]) and INLP (one ridge-classifier direction per iteration [I]) are fitted on the
# same probe-fit embeddings and compared at equal rank. Utility, as % of raw (paper §1.6 uses ImageNet kNN and a
# linear probe): kNN (k = `cfg.knn_k`) and a linear probe (multinomial logistic regression) of the *non-identity*
# attributes of the views (lighting, occluder, blur, pose, flip, background scene), bank = images of the probe-fit
# and validation identities, queries = test identities; only attributes the raw encoder predicts above chance count
# (see `utility_table`). For EfficientNet-Lite0, which has its ImageNet classifier, also the **ImageNet top-1
# agreement**: seeded views of scikit-image's photos are classified from the raw and from the ISP-sanitised features
# (each rescaled to its raw norm before the classifier); agreement with the raw top-1 is the label-free analogue of
# the paper's ImageNet top-1 retention. Copy detection: augmented copies
# (crop, flip, colour, noise) of test images retrieved among their originals (whole-image encoders only: the copies
# move the face, and the face-crop encoders need its box). Caveat of this data: in `portraits-views` an identity
# *is* one photograph (its views are transforms of it), so the identity subspace is also the subspace that tells
# photographs apart — copy detection is expected to lose more here than on real face data, where a person has
# many different photographs.

# %%
with timer("rank_sweep"):
    rs = J.rank_sweep(cfg, encoders, **job_args)
    for line in rs.notes:
        print(line)
    sweep, util, imnet = rs.sweep, rs.util, rs.imnet
    util_sum = T.utility_summary(util, imnet)
    if len(imnet):
        save_table(imnet, out_dir, "table9_imagenet",
                   caption="EfficientNet-Lite0 ImageNet top-1 agreement with raw after ISP/LEACE/INLP, scikit-image "
                           "photo views (95% photo-bootstrap CI)")
        print(f"ImageNet top-1 agreement with the raw classifier (efficientnet-lite0, {int(imnet.n.iloc[0])} views of "
              f"{int(imnet.photos.iloc[0])} scikit-image photos; photo-bootstrap 95% CI):")
        print(imnet.to_string(index=False, float_format="{:.3f}".format))
    save_table(util, out_dir, "table4_utility",
               caption="Utility after ISP/LEACE/INLP as % of raw: kNN on non-identity attributes, copy detection")
    print("kNN attributes the raw encoders predict above chance (bank: probe-fit + validation identities):")
    print(util[(util.method == "ISP-W") & (util["rank"] == util["rank"].min())][["encoder", "metric", "raw", "chance", "informative"]]
          .to_string(index=False))

# %%
with timer("rank_sweep"):
    fig, fig3_data = P.plot_rank_sweep(
        sweep, util_sum, labels, leaking=T.raw_leakers(lo, labels, k_max=k_max),
        general=[lab for lab in labels if lab not in biometric], ranks=cfg.ranks, baseline_ranks=cfg.baseline_ranks,
        r_max=r_max_w, far=far_lo, k_max=k_max,
        title=f"ISP rank sweep on {faces.name} (paper §1.6): leakage and utility; ISP-W fitted on "
              f"{len(parts['train'])} probe-fit identities")
    save_figure(fig, out_dir, "fig3_rank", fig3_data)
    plt.show()
    plt.close(fig)

# %%
with timer("rank_sweep"):
    table5 = T.baseline_table(sweep, util_sum, cfg.baseline_ranks + (r_max_w,))
    save_table(table5, out_dir, "table5_baselines",
               caption=f"ISP vs LEACE vs INLP: ridge TAR at FAR {far_lo:g} and utility (% of raw)")
    print(f"ISP vs LEACE vs INLP at equal rank (ridge TAR at FAR {far_lo:g}; utility % of raw). The paper's ImageNet "
          "kNN retention: DINOv2 100.1 (ISP) / 100.0 (LEACE), CLIP 98.3 / 98.5, SSCD 85.4 / 85.7:")
    print(table5.to_string(index=False, float_format="{:.3f}".format))

# %% [markdown]
# ### Explore: TAR and utility against the rank (interactive; privkit)
# Choose an encoder, a method and a rank r. The panel reads the rank sweep above (no refitting):
# - the ridge attacker's TAR at the lowest resolvable FAR, with its interval;
# - the utility retained, as % of raw.
#
# Under the batch runner this cell prints its initial state instead.

# %% tags=["explore"]
from privkit.studies import explore as E

E.panel(E.isp_view, E.isp_controls(sweep), sweep=sweep, util_sum=util_sum, far=far_lo)

# %% [markdown]
# ## 5. Do identity subspaces transfer? (principal angles)
# The paper reports principal-angle cosines > 0.99 between identity subspaces fitted on disjoint datasets. Here:
# ISP fitted on the probe-fit identities (ISP-W), on the disjoint validation + test identities of the same set
# (fitted only for this comparison), and on the other set (ISP-X), all at rank r = `cfg.isp_rank`; beside them the
# mean cosine expected between two *random* r-dimensional subspaces.

# %%
with timer("subspaces"):
    table6 = T.subspace_table(labels, projectors, emb, faces.identity, masks["val"] | masks["test"])
    save_table(table6, out_dir, "table6_subspaces", caption="Principal-angle cosines between fitted identity subspaces")
    print(table6.to_string(index=False, float_format="{:.3f}".format))
    print("\nPaper: cosines > 0.99 between CelebA and VGGFace2 subspaces (real photographs, large encoders). Here the "
          f"mean cosine ranges from {table6.mean_cos.min():.2f} to {table6.mean_cos.max():.2f} (chance "
          f"{table6.chance_mean_cos.min():.2f}–{table6.chance_mean_cos.max():.2f}); only the top directions agree closely "
          f"(max cosine up to {table6.max_cos.max():.3f}).")

# %% [markdown]
# ## 6. Template inversion before and after ISP (paper §1.5)
# Can a face be rebuilt from a leaked embedding, and does ISP stop it? The paper audits four generative inverters
# (DiffMI, ALSUV, Vec2Face, Bob) with pretrained generators; none is available offline, so privkit runs two small
# families that stand for them [I]: **regression** (the Vec2Face family, and Bob's learned embedding→image map) — a
# closed-form **ridge** decoder from embedding to pixels (the standard linear baseline; λ by identity-grouped
# cross-validation on the auxiliary set) and a small **conv** decoder (pixel MSE); and **optimisation** (the ALSUV
# family) — a latent search of the conv decoder, from the leaked embedding, so that the attacked encoder's embedding
# of the reconstruction matches it (differentiable encoders only). DiffMI (diffusion) has no counterpart here.
#
# Reconstructions are **aligned face crops** (square, the face box's longer side plus 20% on each side, at
# `cfg.inversion_resolution` px), as template-inversion work produces; the leaked embeddings are what each encoder
# normally computes (the whole image for `[image]` encoders). For the latent search an `[image]` encoder sees the
# reconstructed crop pasted into the attacker's own estimate of the scene at its estimate of the face box (both
# ridge-predicted from the leaked embedding; no target image or box is used). The auxiliary set is every probe-fit
# image (identities disjoint from the targets); the targets are one image each of at most `cfg.inversion_targets`
# randomly chosen test identities; against ISP the
# attacker knows the projector and inverts the sanitised embeddings.
#
# **Success rule** [I]: two judges, dlib and faceres (biometric references never used by the attacks), each embed
# every reconstruction and every target's real crop with the crop's face box; a reconstruction *verifies* when the
# cosine exceeds the judge's FAR = `cfg.reference_far` threshold, set on the validation identities' face-box
# embeddings. Beside it, the **identification view**: rank-1 — the real target crop nearest to a reconstruction is its
# own target's (chance 1/T) — and the **margin** over the mismatched control (cosine to the own target minus the mean
# cosine of the other targets' reconstructions to it). Margins live in each judge's own cosine scale: fine for ranking
# and for "above zero", not comparable to the paper's success rates. The **FR contrast** rows invert a *third*
# recogniser's embeddings (mobileface; regression only: it is not differentiable here), so both judges stay disjoint
# from the attacked model — the stand-in for the paper's FR-embedding inversions (67–100% success there, ≈ 0% for
# DINO/CLIP/SSCD).

# %%
with timer("inversion"):
    # two judges (never used by the attacks) and, for the FR contrast, a third recogniser whose embeddings are attacked
    judge_labs, contrast_lab = T.inversion_roles(labels, biometric)
    inv, recs = pd.DataFrame(), {}
    if not judge_labs:
        print("no biometric reference encoder available: inversion skipped")
    else:
        inversion = J.run_inversion(cfg, encoders, faces=faces, masks=masks, **job_args)
        for line in inversion.skipped:
            print(line)
        inv, recs, tgt, aux = inversion.table, inversion.recs, inversion.tgt, inversion.aux
        save_table(inv, out_dir, "table7_inversion",
                   caption=f"Inversion to face crops: verification by each judge at FAR {cfg.reference_far:g} and rank-1 "
                           "identification (Wilson 95% CI), margin over the mismatched control (95% CI)")
        n_t = len(tgt)
        print(f"judges' thresholds at FAR {cfg.reference_far:g} (validation identities): "
              + ", ".join(f"{j} cos > {t_:.4f}" for j, t_ in inversion.taus.items())
              + f"; {n_t} targets (one image each of {n_t} test identities), {len(aux)} auxiliary images of "
              f"{len(parts['train'])} probe-fit identities; rank-1 chance {1 / n_t:.3f}; FR contrast: {contrast_lab}'s own embeddings")
        print(T.format_inversion(inv).to_string(index=False))
        print(f"\n{int((inv.success_rate * inv.n_targets).round().sum())} of {int(inv.n_targets.sum())} reconstructions "
              f"verified at FAR {cfg.reference_far:g}; rows with rank-1 above chance (CI): "
              f"{int((inv.rank1_low > inv.rank1_chance).sum())} of {len(inv)}; rows with a margin CI above 0: "
              f"{int((inv.margin_low > 0).sum())} of {len(inv)}. The paper reports ≈ 0% success for non-FR encoders "
              "and 67–100% for FR embeddings with pretrained generative inverters; privkit's small attacks, trained on "
              f"{len(aux)} images of {len(parts['train'])} people, are far weaker, so the graded views (rank-1, margin) "
              "carry the comparison.")
        print(describe_inversion_evidence(inv))

# %%
with timer("inversion"):
    if len(inv):
        fig = P.plot_inversion(inv, reference_far=cfg.reference_far, resolution=cfg.inversion_resolution)
        save_figure(fig, out_dir, "fig4_inversion", inv)
        plt.show()
        plt.close(fig)
        real_crops, _ = X.face_crops(faces.images[tgt], faces.box[tgt], size=cfg.inversion_resolution,
                                     margin=cfg.inversion_margin)
        fig, shown = P.plot_reconstructions(real_crops, recs, tgt)
        save_figure(fig, out_dir, "fig5_reconstructions", shown)
        plt.show()
        plt.close(fig)

# %% [markdown]
# ## Verdicts on the paper's claims
# Each claim of the paper that this notebook measures is compared with a threshold (0 for "lowers", the realised FAR
# for "above chance", the paper's own bound where it states one), and the verdict reads only our 95% interval
# (`privkit.studies.claims.judge_claim`): **holds** when the whole interval is on the claimed side, **does not hold** when it
# is wholly on the other side, **not resolvable** when it straddles the threshold. Intervals: paired identity
# bootstrap for TAR drops, identity bootstrap for TARs, binomial for attribute accuracies, photo bootstrap for ImageNet
# agreement, Wilson for inversion success, ±1.96 SEM for CPI. A difference between two encoders' TARs gets the
# conservative interval [low_a − high_b, high_a − low_b]. Principal angles come from one fit per subspace and have no
# interval (the row says so).

# %%
general = [lab for lab in labels if lab not in biometric and encoders[lab.split(" ")[0]].kind == "general"]
claims = IC.claims_table({"lo": lo, "comp": comp, "table6": table6, "util": util, "imnet": imnet, "inv": inv,
                          "cpi": cpi_df, "fii_images": attr["fii_images"], "bstar_pairs": attr["bstar_pairs"]}, labels, general=general, biometric=biometric, k_max=k_max, far=far_lo,
                         rank=min(cfg.isp_rank, r_max_w), reference_far=cfg.reference_far, contrast=contrast_lab,
                         dataset=faces.name, other_dataset=other.name)
save_table(claims, out_dir, "table8_claims", caption="The paper's claims, its numbers and ours (95% intervals), with verdicts")
for r in claims.itertuples():
    print(f"- [{r.section}] {r.claim}: {r.verdict.upper()} — {r.evidence} (paper: {r.paper})"
          + (f"\n    cause: {r.cause}" if r.cause else ""))
print(f"\n{len(claims)} claims: " + ", ".join(f"{(claims.verdict == v).sum()} {v}" for v in C.VERDICTS))

# %% [markdown]
# ## Checks of the paper's claims at this scale
# nbval fails the notebook when one of these stops holding. Claims that smoke-scale noise could flip are checked at
# the default scale only (and say so). Where a claim of the paper does not hold on this data, the check asserts
# what is honestly expected here and the text says so: (i) a drop in TAR is required only of encoders that leak
# *clearly* (a marginal leak cannot resolve a drop); (ii) kNN utility must not fall *significantly* below 90% of raw
# (with near-chance raw accuracies the retention ratio itself is too noisy for a hard 90% line); (iii)
# copy-detection retention is reported, not asserted (see section 3). These are privkit's own invariants; the paper's
# claims get their verdicts in the section above and never fail the notebook by themselves.

# %%
# full-rank ISP must make the fitting identities' class means coincide (before re-normalisation), for every encoder
spreads = {lab: IC.class_mean_spread(*splits[lab]["train"], fits[lab]["ISP-W"].basis) for lab in labels
           if fits[lab]["ISP-W"].rank == len(parts["train"]) - 1}
failures, notes = IC.invariant_checks({"comp": comp, "sweep": sweep, "util": util, "inv": inv},
                                      n_below_floor=len(bad), floor=floor, spreads=spreads,
                                      full_scale=scale not in SMALL_SCALES, biometric=biometric,
                                      rank=min(cfg.isp_rank, r_max_w), check_inversion=cfg.inversion_fr_contrast,
                                      contrast=contrast_lab)
print("\n".join(notes))
print("\n".join(failures) if failures else "All checks passed.")
if failures:
    raise AssertionError("; ".join(failures))

# %%
write_run_manifest(out_dir, paper="isp",
                   parameters={"scale": scale, "seed": seed, "data_root": data_root, "device": device}, device=dev,
                   timer=timer, extra={"lowest_resolvable_far": far_lo, "smallest_resolvable_far": floor,
                                       "encoders": labels, "face_set": faces.name, "transfer_set": other.name})
print({k: round(v, 1) for k, v in timer.seconds.items()}, f"total {timer.total:.1f} s")
