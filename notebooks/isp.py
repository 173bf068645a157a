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

# %%
import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

import privkit
from privkit.data import load_faces, paper_loaders
from privkit.data.splits import identity_splits
from privkit.encoders import list_encoders, load_encoder
from privkit.errors import PrivkitError
from privkit.studies.figures import SectionTimer, save_figure, save_table, set_theme, write_run_manifest
from privkit.studies.isp import experiments as X
from privkit.isp import VerificationPairs, simple_augment, smallest_resolvable_far
from privkit.isp.utility import imagenet_photo_views, imagenet_top1_retention
from privkit.isp.inversion import describe_inversion_evidence

with warnings.catch_warnings():  # tqdm.auto warns when ipywidgets is absent and falls back to text bars
    warnings.simplefilter("ignore")
    from tqdm.auto import tqdm

cfg = privkit.config.load("isp", scale)
dev = privkit.resolve_device(device)
torch.set_num_threads(1)  # small matrices: on shared cores, OpenMP threads cost far more than they give
set_theme()
timer = SectionTimer()
pd.set_option("display.width", 180, "display.max_columns", 30, "display.precision", 4)
print(f"scale={scale} seed={seed} device={dev}")
print(cfg)

# %% [markdown]
# ## Data, splits and embeddings
# Identities are split into disjoint probe-fit / validation / test parts (the paper: 320 / 80 / 80). Encoders
# marked `[box]` see the exact face box (face-crop models: dlib, age-gender, ONet as MTCNN uses it); `[image]`
# see the whole image (`cfg.face_size` px), face and background, as the paper's general encoders do. dlib, faceres and
# EfficientNet-Lite0 embed a few dozen images per second on a CPU, so embeddings are cached in `build/cache/`
# (owner-only files: they are biometric templates).

# %%
with timer("embeddings"):
    if scale == "paper":
        faces = paper_loaders.load_celeba(data_root, min_images=cfg.images_per_identity, n_identities=cfg.n_identities,
                                          images_per_identity=cfg.images_per_identity, size=cfg.face_size, seed=seed)
        other = paper_loaders.load_vggface2(data_root, split="test", min_images=cfg.transfer_images,
                                            n_identities=cfg.transfer_identities,
                                            images_per_identity=cfg.transfer_images, size=cfg.face_size, seed=seed)
    else:
        faces = load_faces(cfg.face_set, n_identities=cfg.n_identities, images_per_identity=cfg.images_per_identity,
                           size=cfg.face_size, context_leakage=cfg.context_leakage, seed=seed)
        other = load_faces(cfg.transfer_set, n_identities=cfg.transfer_identities,
                           images_per_identity=cfg.transfer_images, size=cfg.face_size,
                           context_leakage=cfg.context_leakage, seed=seed)
    parts = identity_splits(faces.identity, counts=cfg.split_counts, seed=seed)
    masks = {k: torch.isin(faces.identity, v) for k, v in parts.items()}
    available = {e.name: e.available for e in list_encoders(data_root=data_root)}
    encoders, emb, emb_other, rows = {}, {}, {}, []
    for spec in tqdm(cfg.encoders, desc="embeddings", disable=scale == "smoke"):
        name, mode = spec.split(":")
        label = f"{name} [{mode}]"
        if not available.get(name, False):
            why = "; ".join(e.detail for e in list_encoders(data_root=data_root) if e.name == name)
            print(f"skipping {label}: not available here ({why})")
            continue
        if name not in encoders:
            encoders[name] = load_encoder(name, device=dev, data_root=data_root)
        enc = encoders[name]
        enc.reset_failures()
        emb[label] = X.embed_faces(enc, faces, input=mode, seed=seed)
        emb_other[label] = X.embed_faces(enc, other, input=mode, seed=seed)
        rows.append({"encoder": label, "kind": enc.kind, "dim": emb[label].shape[1],
                     "failures_to_enrol (uncached images)": enc.failures_to_enrol})
    labels = list(emb)
    biometric = {lab for lab in labels if encoders[lab.split(" ")[0]].kind == "face-recognition"}
    splits = {lab: {k: (emb[lab][m], faces.identity[m]) for k, m in masks.items()} for lab in labels}
    print(f"{faces.name}: {len(faces)} images of {faces.n_identities} identities; "
          f"{other.name} (ISP-X fit): {len(other)} images of {other.n_identities} identities")
    print({k: f"{len(v)} identities, {int(masks[k].sum())} images" for k, v in parts.items()})
    print(pd.DataFrame(rows).to_string(index=False))

# %% [markdown]
# ### Which FAR the data can resolve
# A FAR α is reported only if the impostor pairs allow at least 10 false accepts (α ≥ 10 / #pairs, privkit's rule;
# docs/isp.md §3). The paper's 1,600-image test set gives ≈ 1.26 M impostor pairs and resolves 1e-4; ours is much
# smaller, so the lowest resolvable FAR is higher, and no TAR is ever printed below it. **Chance reference:** a score
# that does not depend on identity accepts genuine pairs at the same rate as impostors, so its TAR at FAR α is α
# (the realised FAR column): "near chance" below means "TAR within its interval of the FAR".

# %%
n_imp = {k: VerificationPairs.create(faces.identity[masks[k]]).n_impostor_pairs for k in ("val", "test")}
floor = max(smallest_resolvable_far(n) for n in n_imp.values())
resolvable = [f for f in cfg.fars if f >= floor * (1 - 1e-12)]
far_lo = min(resolvable)
k_max = max(cfg.ks)
print(f"validation/test impostor pairs: {n_imp['val']} / {n_imp['test']} -> smallest resolvable FAR {floor:.2e}")
print(f"reported FARs: {list(cfg.fars)}; resolvable: {resolvable}; the lowest, {far_lo:g}, is used below "
      f"(the paper's 1e-4 is {'resolvable' if 1e-4 >= floor else 'NOT resolvable'} here)")

# %% [markdown]
# ## 1. Leakage before and after ISP (paper Table 1)
# The attacker fits a probe on the probe-fit identities (k labelled images each), picks its hyperparameters and the
# threshold on the validation identities, and is scored on the test identities ([I]: k = probe-fit shots,
# single-image templates; ridge λ from a 13-point log grid; MLP d→512→256 with early stopping, docs/isp.md §3).
# ISP-W is fitted on the probe-fit identities of the same set, ISP-X on the other set, both at rank
# r = `cfg.isp_rank` [I: the paper's r was not found]. Every transform is applied to all three splits: the
# attacker only ever sees sanitised embeddings. Intervals: 95% identity bootstrap of the test identities.

# %%
with timer("leakage"):
    fits, projectors, tables, cells = {}, {}, [], {}
    r_max_w = min(max(cfg.ranks), len(parts["train"]) - 1)
    r_max_x = min(max(cfg.ranks), other.n_identities - 1)
    for lab in labels:
        tr_emb, tr_id = splits[lab]["train"]
        d = tr_emb.shape[1]
        fits[lab] = {
            # fitted once at the full numerical rank (≤ min(d, m − 1)) and cut to every rank of the sweep
            "ISP-W": X.fit_eraser("isp", tr_emb, tr_id, rank=None),
            "ISP-X": X.fit_eraser("isp", emb_other[lab], other.identity, rank=min(cfg.isp_rank, r_max_x, d)),
        }
        r_main = min(cfg.isp_rank, fits[lab]["ISP-W"].rank, fits[lab]["ISP-X"].rank)
        projectors[lab] = {k: X.truncate_eraser(v, r_main) for k, v in fits[lab].items()}
        tr = {"raw": None, **projectors[lab]}
        lin = [p for p in cfg.probes if p != "mlp"]
        t, res = X.verification_table(splits[lab], tr, probes=lin, ks=cfg.ks, fars=cfg.fars, n_boot=cfg.n_boot,
                                      seed=seed, ridge_lambdas=cfg.ridge_lambdas, keep_results=True)
        if "mlp" in cfg.probes:  # the MLP only at the largest k: with one shot per identity it has nothing to learn
            t2, _ = X.verification_table(splits[lab], tr, probes=("mlp",), ks=(max(cfg.ks),), fars=cfg.fars,
                                         n_boot=cfg.n_boot, seed=seed,
                                         mlp_options={"max_epochs": cfg.mlp_epochs, "patience": cfg.mlp_patience})
            t = pd.concat([t, t2], ignore_index=True)
        t.insert(0, "encoder", lab)
        t.insert(1, "rank", r_main)
        tables.append(t)
        cells[lab] = res
    leak = pd.concat(tables, ignore_index=True)
    leak["probe"] = leak["probe"].replace({"raw": "cosine"})
    bad = leak[(leak.far < floor * (1 - 1e-12)) & leak.tar.notna()]
    print(f"rows with a TAR below the resolvable FAR: {len(bad)} (must be 0)")

    lo = leak[np.isclose(leak.far, far_lo)]
    wide = lo.pivot_table(index=["encoder", "probe", "k"], columns="transform", values=["tar", "tar_low", "tar_high"],
                          sort=False)
    wide.columns = [f"{t}_{v}" for v, t in wide.columns]
    wide = wide.reset_index()
    wide.insert(3, "far", far_lo)
    chance = lo[lo["transform"] == "raw"][["encoder", "probe", "k", "realised_far"]].rename(columns={"realised_far": "chance_tar"})
    wide = wide.merge(chance, on=["encoder", "probe", "k"], how="left")
    save_table(wide, out_dir, "table1_leakage",
               caption=f"TAR at FAR={far_lo:g} (lowest resolvable; chance = realised FAR), raw vs ISP-W vs ISP-X")
    show = wide[["encoder", "probe", "k", "chance_tar"]].copy()
    for t in ("raw", "ISP-W", "ISP-X"):
        show[t] = [f"{100 * a:5.1f} [{100 * b:4.1f}, {100 * c:4.1f}]" for a, b, c in
                   zip(wide[f"{t}_tar"], wide[f"{t}_tar_low"], wide[f"{t}_tar_high"])]
    show["chance_tar"] = (100 * show["chance_tar"]).map("{:.2f}".format)
    show = show.rename(columns={"chance_tar": "chance (%)"})
    print(f"Reproduces paper Table 1 (TAR %, FAR = {far_lo:g}, 95% identity-bootstrap CI; k = probe-fit shots; "
          f"cosine needs no shots):")
    print(show.to_string(index=False))

# %% [markdown]
# The paper's numbers (ridge, CelebA-20, TAR at FAR = 1e-4, k = 16) beside ours (ridge, TAR at our lowest resolvable
# FAR, k = 1 and the largest k we have). They are not comparable one to one: different encoders, data, scale and
# FAR. The paper's *pattern*: the face-recognition reference leaks far more than any other encoder; ISP-W and ISP-X
# lower the ridge TAR of encoders that leak; ISP-X (fitted on another dataset) does about as well as ISP-W. The
# paired comparisons below say which parts of the pattern hold here.

# %%
with timer("leakage"):
    paper = pd.DataFrame([{"source": "paper (CelebA-20, FAR 1e-4, k=16)", "encoder": e, "far": 1e-4, "k_max": 16,
                           **{c: v for c, v in vals.items()}} for e, vals in X.PAPER_RIDGE_TAR.items()])
    paper = paper.rename(columns={"k16_raw": "kmax_raw", "k16_ispw": "kmax_ispw", "k16_ispx": "kmax_ispx"})
    ours = []
    ridge = lo[lo.probe == "ridge"]
    for lab in labels:
        r = ridge[ridge.encoder == lab].set_index(["transform", "k"]).tar * 100
        ours.append({"source": f"privkit ({faces.name}, FAR {far_lo:g}, k={k_max})", "encoder": lab, "far": far_lo,
                     "k_max": k_max, "k1_raw": r.get(("raw", min(cfg.ks)), np.nan),
                     "k1_ispw": r.get(("ISP-W", min(cfg.ks)), np.nan), "kmax_raw": r.get(("raw", k_max), np.nan),
                     "kmax_ispw": r.get(("ISP-W", k_max), np.nan), "kmax_ispx": r.get(("ISP-X", k_max), np.nan)})
    table2 = pd.concat([paper, pd.DataFrame(ours)], ignore_index=True)
    if min(cfg.ks) == k_max:
        table2.loc[table2.source.str.startswith("privkit"), ["k1_raw", "k1_ispw"]] = np.nan
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
    comp = []
    for lab in labels:
        raw_row = lo[(lo.encoder == lab) & (lo.probe == "ridge") & (lo["transform"] == "raw") & (lo.k == k_max)].iloc[0]
        leaks = bool(raw_row.tar_low > raw_row.realised_far)
        clear = bool(raw_row.tar - raw_row.realised_far > raw_row.tar_high - raw_row.tar_low)
        for t in ("ISP-W", "ISP-X"):
            pc = X.paired_comparison(cells[lab], ("raw", "ridge", k_max), (t, "ridge", k_max), far=far_lo,
                                     n_boot=max(cfg.n_boot, 200), seed=seed)
            comp.append({"encoder": lab, "leaks": leaks, "clear_leak": clear, "transform": t, "raw_tar": pc["tar_a"],
                         "isp_tar": pc["tar_b"], "drop": pc["difference"], "drop_low": pc["low"],
                         "drop_high": pc["high"], "chance": raw_row.realised_far})
    comp = pd.DataFrame(comp)
    print((comp.set_index(["encoder", "transform"]) * 1).to_string(float_format="{:.4f}".format))
    for lab in comp[comp.leaks].encoder.unique():
        w, x_ = (comp[(comp.encoder == lab) & (comp["transform"] == t)].iloc[0] for t in ("ISP-W", "ISP-X"))
        sig = lambda c: "significant" if c.drop_low > 0 else "not significant"  # noqa: E731
        print(f"{lab}: ridge TAR {100 * w.raw_tar:.1f}% -> ISP-W {100 * w.isp_tar:.1f}% ({sig(w)}), "
              f"ISP-X {100 * x_.isp_tar:.1f}% ({sig(x_)})")

# %%
with timer("leakage"):
    n_p = len(cfg.probes)
    fig, axes = plt.subplots(1, n_p + 1, figsize=(4.4 * n_p + 3.6, 4.2), squeeze=False,
                             gridspec_kw={"width_ratios": [len(labels)] * n_p + [max(3, len(X.PAPER_RIDGE_TAR))]})
    for ax in axes[0][1:n_p]:
        ax.sharey(axes[0][0])
    plot_df = lo[(lo.k == k_max) | (lo.probe == "cosine")]
    order = ["raw", "ISP-W", "ISP-X"]
    colours = dict(zip(order, ["#4c72b0", "#dd8452", "#55a868"]))
    for ax, probe in zip(axes[0][:n_p], ["cosine" if p == "raw" else p for p in cfg.probes]):
        sub = plot_df[plot_df.probe == probe]
        x = np.arange(len(labels))
        for j, t in enumerate(order):
            s = sub[sub["transform"] == t].set_index("encoder").reindex(labels)
            ax.bar(x + (j - 1) * 0.27, 100 * s.tar, 0.27, color=colours[t], label=t,
                   yerr=[100 * (s.tar - s.tar_low), 100 * (s.tar_high - s.tar)], capsize=2, error_kw={"lw": 0.7})
        ax.axhline(100 * far_lo, color="k", ls=":", lw=0.8, label=f"chance (= FAR {far_lo:g})")
        ax.set_xticks(x, labels, rotation=60, ha="right", fontsize=8)
        ax.set(yscale="symlog", ylim=(0, 100), title=f"privkit: {probe} probe" + ("" if probe == "cosine" else f", k = {k_max}"))
    axes[0][0].set_ylabel(f"TAR (%) at FAR = {far_lo:g}, {faces.name}")
    axes[0][0].legend(fontsize=7, loc="upper right")
    # the paper's own numbers (ridge, CelebA-20, FAR 1e-4, k = 16), drawn on the same axis scale
    ax = axes[0][n_p]
    pap = list(X.PAPER_RIDGE_TAR.items())
    xp = np.arange(len(pap))
    for j, (t, col) in enumerate(zip(order, ("k16_raw", "k16_ispw", "k16_ispx"))):
        vals = [np.nan if v.get(col) is None else v[col] for _, v in pap]
        ax.bar(xp + (j - 1) * 0.27, vals, 0.27, color=colours[t], label=t, hatch="//", edgecolor="white")
    ax.axhline(100 * 1e-4, color="k", ls=":", lw=0.8)
    ax.set_xticks(xp, [e for e, _ in pap], rotation=60, ha="right", fontsize=8)
    ax.set(yscale="symlog", ylim=(0, 100), title="paper: ridge, k = 16, FAR 1e-4\n(CelebA-20; no intervals given)")
    fig.suptitle(f"Identity leakage before and after ISP (paper Table 1): TAR at FAR {far_lo:g}, 95% identity-bootstrap "
                 f"CIs; ISP rank r = {cfg.isp_rank}; ISP-W fitted on {faces.name}, ISP-X on {other.name}", fontsize=9)
    fig.tight_layout()
    paper_long = pd.DataFrame([{"encoder": e, "transform": t, "tar": (v.get(c) or np.nan) / 100, "source": "paper"}
                               for e, v in pap for t, c in zip(order, ("k16_raw", "k16_ispw", "k16_ispx"))])
    save_figure(fig, out_dir, "fig1_leakage", pd.concat([leak.assign(source="privkit"), paper_long], ignore_index=True))
    plt.show()
    plt.close(fig)

# %% [markdown]
# ## 2. Face versus context (paper's attribution study)
# All privkit's definitions [I] (docs/isp.md §4): face and an equal-area background region get the same Gaussian
# blur; FII = Δ_face − Δ_context with Δ = 1 − cos(z, z_perturbed) (normalised FII_n ∈ [−1, 1]; > 0: the face
# matters more), binned by face-coverage ratio (FCR); CPI(σ) = how often a face-blurred query is closer to a
# stranger in the *same scene* than to its own identity in another scene (> 0.5: context-preferring); B* = the
# smallest revealed fraction of another image's background at which a composite is closer to that image than to
# its own identity (small: context dominates). Only whole-image encoders are meaningful here; dlib and age-gender
# see face crops (and detect faces at a few images per second), so they are left out.

# %%
with timer("attribution"):
    pool = faces.subset(masks["val"] | masks["test"])
    attr, fii_rows, cpi_rows, bstar_rows, summary = {}, [], [], [], []
    for spec in cfg.attribution_encoders:
        name, mode = spec.split(":")
        lab = f"{name} [{mode}]"
        if name not in encoders:
            print(f"skipping {lab}: not loaded")
            continue
        a = X.attribution_tables(encoders[name], pool, fii_images=cfg.fii_images, sigma=cfg.fii_sigma,
                                 n_context_regions=cfg.fii_regions, fcr_bins=cfg.fcr_bins, cpi_sigmas=cfg.cpi_sigmas,
                                 cpi_queries=cfg.cpi_queries, bstar_pairs=cfg.bstar_pairs, bstar_betas=cfg.bstar_betas,
                                 seed=seed)
        attr[lab] = a
        fii_rows.append(a["fii_by_fcr"].assign(encoder=lab))
        if a["cpi"] is not None:
            cpi_rows.append(a["cpi"].assign(encoder=lab))
        else:
            print(f"{lab}: CPI not computed ({a['cpi_note']})")
        bstar_rows.append(a["bstar"].curve.assign(encoder=lab))
        b = a["bstar"]
        summary.append({"encoder": lab, "fii_mean": a["fii"].fii.mean(), "fii_normalised_mean": a["fii"].fii_normalised.mean(),
                        "share_face_dominant": float((a["fii"].fii > 0).mean()),
                        "cpi_no_blur": a["cpi"].cpi.iloc[0] if a["cpi"] is not None else np.nan,
                        "cpi_max_blur": a["cpi"].cpi.iloc[-1] if a["cpi"] is not None else np.nan,
                        "b_star_median": b.median if math.isfinite(b.median) else np.nan,
                        "never_flipped": b.never_flipped})
    table3 = pd.DataFrame(summary)
    save_table(table3, out_dir, "table3_attribution",
               caption="Attribution: mean FII, CPI without and with the strongest face blur, median B* (NaN: > 1)")
    fii_df = pd.concat(fii_rows, ignore_index=True)
    cpi_df = pd.concat(cpi_rows, ignore_index=True) if cpi_rows else pd.DataFrame(columns=["sigma", "cpi", "sem", "encoder"])
    bst_df = pd.concat(bstar_rows, ignore_index=True)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    for lab, g in fii_df.groupby("encoder", sort=False):
        xm = (g.fcr_low + g.fcr_high) / 2
        axes[0].errorbar(xm, g.fii_normalised_mean, yerr=g.fii_normalised_sem.fillna(0), marker="o", ms=3, capsize=2, label=lab)
    axes[0].axhline(0, color="k", lw=0.6)
    axes[0].set(xlabel="face coverage ratio (bin centre)", ylabel="FII_n  (> 0: face matters more)", title="FII by FCR")
    for lab, g in cpi_df.groupby("encoder", sort=False):
        axes[1].errorbar(g.sigma, g.cpi, yerr=g["sem"], marker="o", ms=3, capsize=2, label=lab)
    axes[1].axhline(0.5, color="k", lw=0.6, ls=":")
    axes[1].set(xlabel="face blur σ (px)", ylabel="CPI (> 0.5: context-preferring)", title="CPI vs blur")
    for lab, g in bst_df.groupby("encoder", sort=False):
        axes[2].plot(g.beta, g.fraction_flipped, marker="o", ms=3, label=lab)
    axes[2].set(xlabel="revealed background fraction β", ylabel="pairs closer to the background's image",
                title="B* stress test")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    long_attr = pd.concat([fii_df.assign(panel="fii_by_fcr"), cpi_df.assign(panel="cpi"), bst_df.assign(panel="bstar")],
                          ignore_index=True)
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
          "than blurring an equal area of background, even where the background decides matching (CPI, B*).")

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
    sweep, util, base_rows, imnet = [], [], [], []
    photo_views, photo_names = imagenet_photo_views(cfg.imagenet_views, size=224, seed=seed, return_names=True)
    photo_names = np.array(photo_names)
    gen_aug = torch.Generator().manual_seed(seed)
    test_idx = torch.nonzero(masks["test"]).flatten()
    ref_idx = test_idx[torch.randperm(test_idx.numel(), generator=gen_aug)[: cfg.copy_references]]
    copies = simple_augment(faces.images[ref_idx], generator=gen_aug)
    bank_m, query_m = masks["train"] | masks["val"], masks["test"]
    for lab in labels:
        name, mode = lab.split(" ")[0], lab.split("[")[1].rstrip("]")
        tr_emb, tr_id = splits[lab]["train"]
        d = tr_emb.shape[1]
        transforms = {}
        fitted = fits[lab]["ISP-W"]
        for r in sorted({min(r, fitted.rank) for r in cfg.ranks}):
            transforms[("ISP-W", r)] = X.truncate_eraser(fitted, r)
        for method in ("leace", "inlp"):
            r_top = min(max(cfg.baseline_ranks), fits[lab]["ISP-W"].rank)
            try:
                fitted = X.fit_eraser(method, tr_emb, tr_id, rank=r_top)
            except PrivkitError as err:
                print(f"{lab}: {method} not fitted ({err})")
                continue
            for r in sorted({min(r, r_top) for r in cfg.baseline_ranks}):
                transforms[(method.upper(), r)] = X.truncate_eraser(fitted, r)
        named = {f"{m} r={r}": fn for (m, r), fn in transforms.items()}
        t, _ = X.verification_table(splits[lab], {"raw": None, **named}, probes=("ridge",), ks=(k_max,), fars=(far_lo,),
                                    n_boot=cfg.n_boot, seed=seed, ridge_lambdas=cfg.ridge_lambdas)
        key = {"raw": ("raw", 0), **{f"{m} r={r}": (m, r) for (m, r) in transforms}}
        t["method"] = [key[v][0] for v in t["transform"]]
        t["rank"] = [key[v][1] for v in t["transform"]]
        t.insert(0, "encoder", lab)
        sweep.append(t)
        knn = (emb[lab][bank_m], {a: v[bank_m] for a, v in faces.attributes.items()},
               emb[lab][query_m], {a: v[query_m] for a, v in faces.attributes.items()})
        cd = None
        if mode == "image":
            enc = encoders[name]
            cd = (emb[lab][ref_idx], enc.embed(copies).float().cpu())
        r_lin = min(cfg.isp_rank, fits[lab]["ISP-W"].rank)
        # the linear probe (a full L-BFGS fit per attribute) at the main rank, for the general-purpose encoders
        lin_names = ([n_ for n_, (m, r) in zip(named, transforms) if r == r_lin]
                     if encoders[name].kind == "general" else [])
        u = X.utility_table(named, knn=knn, copy=cd, k=cfg.knn_k, linear=lin_names)
        if hasattr(encoders[name], "imagenet_logits"):  # ImageNet top-1 agreement (EfficientNet-Lite0)
            with torch.no_grad():
                pooled = encoders[name].pooled_features(photo_views)
            for (m, r), fn in {**transforms, ("ISP-X", projectors[lab]["ISP-X"].rank): projectors[lab]["ISP-X"]}.items():
                per_photo = []
                for ph in dict.fromkeys(photo_names):
                    sel = torch.from_numpy(photo_names == ph)
                    per_photo.append(imagenet_top1_retention(encoders[name], None, fn, pooled=pooled[sel])["top1_agreement"])
                per_photo = np.array(per_photo)
                boot = np.random.default_rng(seed).choice(per_photo, size=(2000, len(per_photo))).mean(1)
                imnet.append({"encoder": lab, "method": m, "rank": r, "agreement": per_photo.mean(),
                              "agreement_low": np.quantile(boot, 0.025), "agreement_high": np.quantile(boot, 0.975),
                              "n": int(pooled.shape[0]), "photos": len(per_photo)})
        u["method"] = [key[v][0] for v in u["transform"]]
        u["rank"] = [key[v][1] for v in u["transform"]]
        u.insert(0, "encoder", lab)
        util.append(u)
    sweep = pd.concat(sweep, ignore_index=True)
    util = pd.concat(util, ignore_index=True)
    imnet = pd.DataFrame(imnet)
    informative = util[util.informative]
    family = informative.metric.str.split(":").str[0].where(informative.metric.str.contains(r"^(?:knn|linear):"),
                                                             informative.metric)
    util_sum = (informative.assign(family=family)
                .groupby(["encoder", "method", "rank", "family"]).retention_pct.mean().unstack("family").reset_index())
    if len(imnet):
        util_sum = util_sum.merge(imnet[["encoder", "method", "rank", "agreement"]].assign(
            imagenet_top1_agreement=lambda d: 100 * d.agreement).drop(columns="agreement"),
            on=["encoder", "method", "rank"], how="left")
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
    # categorical x: raw, the sweep's ranks, then "full" — each encoder's full numerical rank (its largest fitted rank
    # when that is not one of the sweep's ranks; the legend-free label says which)
    grid_r = sorted({int(r) for r in cfg.ranks if r < max(cfg.ranks)})
    ranks_all = grid_r + ["full"]
    pos_of = {0: 0, **{r: i + 1 for i, r in enumerate(grid_r)}}
    full_x = len(grid_r) + 1

    def xpos(lab: str, r: int) -> int:
        """Position of rank r of an encoder: its own grid rank, or the "full" slot for its largest rank."""
        return pos_of.get(int(r), full_x)

    pos = {**pos_of, "full": full_x}
    leaking = [lab for lab in labels
               if (lambda r: r.tar_low > r.realised_far)(lo[(lo.encoder == lab) & (lo.probe == "ridge") & (lo.k == k_max)
                                                         & (lo["transform"] == "raw")].iloc[0])]
    palette = dict(zip(labels, plt.cm.tab20(np.linspace(0, 1, max(len(labels), 2)))))
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    ax = axes[0][0]
    for lab in leaking:
        g = sweep[(sweep.encoder == lab) & sweep.method.isin(["raw", "ISP-W"])].copy()
        g["x"] = [xpos(lab, r) for r in g["rank"]]
        g = g.sort_values("x")
        ax.plot(g.x, 100 * g.tar, "o-", ms=3, color=palette[lab], label=lab)
        ax.fill_between(g.x, 100 * g.tar_low, 100 * g.tar_high, color=palette[lab], alpha=0.15)
    ax.axhline(100 * far_lo, color="k", ls=":", lw=0.8, label=f"chance (FAR {far_lo:g})")
    ax.set_xticks(list(pos.values()), ["raw"] + [str(r) for r in ranks_all])  # noqa: E501 - raw, grid, "full"
    ax.set(yscale="symlog", ylim=(0, 100), xlabel="ISP-W rank r", ylabel=f"ridge TAR (%) at FAR {far_lo:g}, k = {k_max}",
           title="(a) leakage against the rank (encoders that leak; 95% CI bands)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2)
    ax = axes[0][1]
    meths = [("ISP-W", "o"), ("LEACE", "s"), ("INLP", "^")]
    for i, lab in enumerate(leaking):
        for j, (m, mk) in enumerate(meths):
            for q, r in enumerate(sorted(cfg.baseline_ranks)):
                g = sweep[(sweep.encoder == lab) & (sweep.method == m) & (sweep["rank"] == min(r, r_max_w))]
                if not len(g):
                    continue
                row = g.iloc[0]
                xx = i + (j - 1) * 0.25 + (q - 0.5) * 0.1
                ax.errorbar(xx, 100 * row.tar, yerr=[[100 * (row.tar - row.tar_low)], [100 * (row.tar_high - row.tar)]],
                            fmt=mk, color=f"C{j}", mfc="white" if q == 0 else f"C{j}", ms=5, capsize=2,
                            label=f"{m} r={min(r, r_max_w)}" if i == 0 else None)
        raw_r = sweep[(sweep.encoder == lab) & (sweep.method == "raw")].iloc[0]
        ax.hlines(100 * raw_r.tar, i - 0.45, i + 0.45, color="k", lw=1, label="raw" if i == 0 else None)
    ax.set_xticks(range(len(leaking)), leaking, rotation=30, ha="right", fontsize=8)
    ax.set(yscale="symlog", ylim=(0, 100), ylabel=f"ridge TAR (%) at FAR {far_lo:g}",
           title="(b) ISP vs LEACE vs INLP at equal rank (95% CI)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, ncol=2)
    general = [lab for lab in labels if lab not in biometric]
    for ax, family, title in ((axes[1][0], "knn", "(c) kNN on non-identity attributes (mean), % of raw"),
                              (axes[1][1], "copy:recall@1", "(d) copy detection Recall@1, % of raw")):
        for lab in general:
            g = util_sum[(util_sum.encoder == lab) & util_sum.method.isin(["ISP-W"])].sort_values("rank")
            if family not in g.columns or not g[family].notna().any():
                continue
            ax.plot([xpos(lab, r) for r in g["rank"]], g[family], "o-", ms=3, color=palette[lab], label=lab)
        ax.axhline(100, color="k", lw=0.6)
        ax.axhline(90, color="grey", lw=0.6, ls=":")
        ax.set(xlabel="ISP-W rank r", ylabel="% of raw", title=title)
    axes[1][0].set_xticks(list(pos.values())[1:] + [len(pos)], [str(r) for r in ranks_all] + ["paper\n(r not given)"])
    placed = []
    for e, v in sorted(X.PAPER_UTILITY.items(), key=lambda kv: -kv[1]["knn_isp"]):
        # the paper's ImageNet kNN retention after ISP, at its (unstated) rank; labels nudged apart when close
        y = v["knn_isp"]
        ty = min([y] + [p_ - 3.5 for p_ in placed if abs(p_ - y) < 3.5])
        placed.append(ty)
        axes[1][0].plot(len(pos), y, "D", color="k", ms=4)
        axes[1][0].annotate(f"{e} {y:g}", (len(pos), y), xytext=(len(pos) + 0.15, ty), textcoords="data", fontsize=7,
                            va="center")
    axes[1][0].set_xlim(0.5, len(pos) + 1.3)
    axes[1][1].set_xticks(list(pos.values())[1:], [str(r) for r in ranks_all])
    for ax in (axes[0][0], axes[1][0], axes[1][1]):
        ax.set_xlabel("ISP-W rank r (full: every direction the encoder's fit has, ≤ m − 1)")
    if axes[1][0].get_legend_handles_labels()[0]:
        axes[1][0].legend(fontsize=7, ncol=2, loc="lower left")
    fig.suptitle(f"ISP rank sweep on {faces.name} (paper §1.6): leakage and utility; ISP-W fitted on "
                 f"{len(parts['train'])} probe-fit identities", fontsize=10)
    fig.tight_layout()
    save_figure(fig, out_dir, "fig3_rank", pd.concat([sweep.assign(panel="tar"), util_sum.assign(panel="utility")],
                                                     ignore_index=True))
    plt.show()
    plt.close(fig)

# %%
with timer("rank_sweep"):
    b = sweep[sweep.method.isin(["ISP-W", "LEACE", "INLP"]) & sweep["rank"].isin(cfg.baseline_ranks + (r_max_w,))]
    table5 = b[["encoder", "method", "rank", "tar", "tar_low", "tar_high"]].merge(
        util_sum, on=["encoder", "method", "rank"], how="left")
    table5 = table5.sort_values(["encoder", "rank", "method"]).reset_index(drop=True)
    save_table(table5, out_dir, "table5_baselines",
               caption=f"ISP vs LEACE vs INLP: ridge TAR at FAR {far_lo:g} and utility (% of raw)")
    print(f"ISP vs LEACE vs INLP at equal rank (ridge TAR at FAR {far_lo:g}; utility % of raw). The paper's ImageNet "
          "kNN retention: DINOv2 100.1 (ISP) / 100.0 (LEACE), CLIP 98.3 / 98.5, SSCD 85.4 / 85.7:")
    print(table5.to_string(index=False, float_format="{:.3f}".format))

# %% [markdown]
# ## 5. Do identity subspaces transfer? (principal angles)
# The paper reports principal-angle cosines > 0.99 between identity subspaces fitted on disjoint datasets. Here:
# ISP fitted on the probe-fit identities (ISP-W), on the disjoint validation + test identities of the same set
# (fitted only for this comparison), and on the other set (ISP-X), all at rank r = `cfg.isp_rank`; beside them the
# mean cosine expected between two *random* r-dimensional subspaces.

# %%
with timer("subspaces"):
    ang = []
    for lab in labels:
        held = masks["val"] | masks["test"]
        r = projectors[lab]["ISP-W"].rank
        p_held = X.fit_eraser("isp", emb[lab][held], faces.identity[held], rank=r)
        t = X.subspace_angles({"ISP-W (probe-fit ids)": projectors[lab]["ISP-W"], "ISP (val+test ids)": p_held,
                               "ISP-X (other set)": projectors[lab]["ISP-X"]})
        t.insert(0, "encoder", lab)
        ang.append(t)
    table6 = pd.concat(ang, ignore_index=True)
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
# image (identities disjoint from the targets); the targets are one image of each test identity; against ISP the
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
    judge_labs = [lab for lab in ("dlib-resnet-fr [box]", "faceres [box]") if lab in emb]
    fr_pref = [lab for lab in ("mobileface [box]", "faceres [box]", "dlib-resnet-fr [box]") if lab in biometric]
    contrast_lab = next((lab for lab in fr_pref if lab not in judge_labs), fr_pref[0] if fr_pref else None)
    ref_lab = judge_labs[0] if judge_labs else None
    inv, recs = pd.DataFrame(), {}
    if ref_lab is None:
        print("no biometric reference encoder available: inversion skipped")
    else:
        judges = {lab.split(" ")[0]: encoders[lab.split(" ")[0]] for lab in judge_labs}
        taus = {lab.split(" ")[0]: X.reference_threshold_from_embeddings(*splits[lab]["val"], far=cfg.reference_far)
                for lab in judge_labs}
        g = torch.Generator().manual_seed(seed + 1)
        test_ids = torch.unique(faces.identity[test_idx])
        test_ids = test_ids[torch.randperm(test_ids.numel(), generator=g)[: cfg.inversion_targets]]
        tgt = torch.stack([test_idx[faces.identity[test_idx] == i][
            torch.randint(int((faces.identity[test_idx] == i).sum()), (1,), generator=g)] for i in test_ids]).flatten()
        aux = torch.nonzero(masks["train"]).flatten()
        attacked = {}
        for spec in cfg.inversion_encoders:
            name, mode = spec.split(":")
            lab = f"{name} [{mode}]"
            if lab not in emb:
                print(f"skipping {lab}: not available")
                continue
            for cond, proj in (("raw", None), ("ISP-W", projectors[lab]["ISP-W"])):
                fn = (lambda z: z) if proj is None else proj
                attacked[f"{lab} {cond}"] = (X.ProjectedEncoder(encoders[name], proj), fn(emb[lab][aux]),
                                             fn(emb[lab][tgt]), mode)
        if cfg.inversion_fr_contrast and contrast_lab is not None:
            for cond, proj in (("raw", None), ("ISP-W", projectors[contrast_lab]["ISP-W"])):
                fn = (lambda z: z) if proj is None else proj
                attacked[f"{contrast_lab} {cond}"] = (None, fn(emb[contrast_lab][aux]), fn(emb[contrast_lab][tgt]))
        inv, recs = X.inversion_study(attacked, faces.images[aux], faces.box[aux], faces.identity[aux],
                                      faces.images[tgt], faces.box[tgt], judges, taus,
                                      target_identities=faces.identity[tgt], crop_size=cfg.inversion_resolution,
                                      crop_margin=cfg.inversion_margin, attacks=cfg.inversion_attacks,
                                      ridge_lambdas=cfg.ridge_lambdas, epochs=cfg.inversion_epochs,
                                      steps=cfg.inversion_steps, seed=seed)
        inv.insert(1, "condition", [e.rsplit(" ", 1)[1] for e in inv.encoder])
        inv["encoder"] = [e.rsplit(" ", 1)[0] for e in inv.encoder]
        inv["reference_far"] = cfg.reference_far
        save_table(inv, out_dir, "table7_inversion",
                   caption=f"Inversion to face crops: verification by each judge at FAR {cfg.reference_far:g} and rank-1 "
                           "identification (Wilson 95% CI), margin over the mismatched control (95% CI)")
        n_t = len(tgt)
        print(f"judges' thresholds at FAR {cfg.reference_far:g} (validation identities): "
              + ", ".join(f"{j} cos > {t_:.4f}" for j, t_ in taus.items())
              + f"; {n_t} targets (one per test identity), {len(aux)} auxiliary images of {len(parts['train'])} "
              f"probe-fit identities; rank-1 chance {1 / n_t:.3f}; FR contrast: {contrast_lab}'s own embeddings")
        show7 = inv[["encoder", "condition", "attack", "judge"]].copy()
        show7["verified"] = [f"{round(r.success_rate * r.n_targets)}/{r.n_targets}" for r in inv.itertuples()]
        show7["control FA"] = inv.control_rate.map("{:.3f}".format)
        show7["rank-1 [95% CI]"] = [f"{r.rank1:.2f} [{r.rank1_low:.2f}, {r.rank1_high:.2f}]" for r in inv.itertuples()]
        show7["margin [95% CI]"] = [f"{r.margin:+.4f} [{r.margin_low:+.4f}, {r.margin_high:+.4f}]" for r in inv.itertuples()]
        show7["ridge λ"] = inv.ridge_lambda.map("{:g}".format)
        print(show7.to_string(index=False))
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
        keys_df = inv[["encoder", "condition", "attack"]].drop_duplicates().reset_index(drop=True)
        fig, axes = plt.subplots(1, 3, figsize=(14, 0.34 * len(keys_df) + 1.8), sharey=True)
        keys = list(keys_df.encoder + " " + keys_df.condition + " / " + keys_df.attack)
        y = np.arange(len(keys_df))[::-1]
        judge_names = list(dict.fromkeys(inv.judge))
        marks = dict(zip(judge_names, ["o", "s", "^", "D"]))
        for i, kr in keys_df.iterrows():
            for jn in judge_names:
                rr = inv[(inv.encoder == kr.encoder) & (inv.condition == kr.condition) & (inv.attack == kr.attack)
                         & (inv.judge == jn)]
                if not len(rr):
                    continue
                r = rr.iloc[0]
                off = 0.18 * (judge_names.index(jn) - (len(judge_names) - 1) / 2)
                col = "#4c72b0" if r.condition == "raw" else "#dd8452"
                for ax, (v, lo_, hi_) in zip(axes, [(100 * r.success_rate, 100 * r.ci_low, 100 * r.ci_high),
                                                   (100 * r.rank1, 100 * r.rank1_low, 100 * r.rank1_high),
                                                   (r.margin, r.margin_low, r.margin_high)]):
                    ax.errorbar(v, y[i] + off, xerr=[[v - lo_], [hi_ - v]], fmt=marks[jn], color=col, capsize=2, ms=4,
                                mfc="white" if judge_names.index(jn) else col)
        for jn in judge_names:
            axes[2].plot([], [], marks[jn], color="grey", mfc="white" if judge_names.index(jn) else "grey",
                         label=f"judge: {jn}")
        axes[2].plot([], [], "s", color="#4c72b0", label="raw embeddings")
        axes[2].plot([], [], "s", color="#dd8452", label="after ISP-W")
        axes[0].set_yticks(y, keys, fontsize=8)
        axes[0].set(xlabel=f"verified at the judge's FAR {cfg.reference_far:g} (%, Wilson 95%)", xlim=(-2, 102))
        axes[1].axvline(100 * inv.rank1_chance.iloc[0], color="k", ls=":", lw=0.8, label="chance (1/T)")
        axes[1].set(xlabel="rank-1 among the targets' real crops (%, Wilson 95%)", xlim=(-2, 102))
        axes[1].legend(fontsize=7, loc="lower right")
        axes[2].axvline(0, color="k", lw=0.6)
        axes[2].set(xlabel="judge's cosine gain over mismatched reconstructions (95% CI)")
        axes[2].legend(fontsize=7, loc="lower right")
        fig.suptitle(f"Template inversion to {cfg.inversion_resolution}-px face crops before and after ISP (paper §1.5): "
                     f"{inv.n_targets.iloc[0]} targets; paper: ≈ 0% success for general encoders, 67–100% for FR",
                     fontsize=9)
        axes[2].xaxis.set_major_locator(plt.MaxNLocator(5))
        fig.tight_layout()
        save_figure(fig, out_dir, "fig4_inversion", inv)
        plt.show()
        plt.close(fig)
        real_crops, _ = X.face_crops(faces.images[tgt], faces.box[tgt], size=cfg.inversion_resolution,
                                     margin=cfg.inversion_margin)
        show_keys = [k for k in recs if k.endswith("/ridge")][:6]
        n_show = min(8, len(tgt))
        fig, axes = plt.subplots(len(show_keys) + 1, n_show, figsize=(1.1 * n_show + 1.5, 1.15 * (len(show_keys) + 1)),
                                 squeeze=False)
        for j in range(n_show):
            axes[0][j].imshow(real_crops[j].permute(1, 2, 0).numpy())
            for i, k in enumerate(show_keys, 1):
                axes[i][j].imshow(recs[k][j].permute(1, 2, 0).clamp(0, 1).numpy())
        for i, k in enumerate(["target crop"] + show_keys):
            axes[i][0].set_ylabel(k.replace("/ridge", " / ridge"), fontsize=6, rotation=0, ha="right", va="center")
        for a in axes.flat:
            a.set_xticks([])
            a.set_yticks([])
        shown = pd.DataFrame({"row": ["target crop"] + show_keys, "images": n_show,
                              "target_indices": [" ".join(str(int(i)) for i in tgt[:n_show])] * (len(show_keys) + 1)})
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
from privkit.studies import claims as C

claims = []
general = [lab for lab in labels if lab not in biometric and encoders[lab.split(" ")[0]].kind == "general"]
rid = lo[(lo.probe == "ridge") & (lo.k == k_max)]
raw_r = rid[rid["transform"] == "raw"].set_index("encoder")
boot = "95% identity bootstrap"
if biometric and general:
    fr_best = raw_r.loc[sorted(biometric)].tar.idxmax()
    gen_best = raw_r.loc[general].tar.idxmax()
    a_, b_ = raw_r.loc[fr_best], raw_r.loc[gen_best]
    claims.append(C.claim_row("Table 1", "a face recogniser leaks far more identity than any general-purpose encoder",
                              paper="ArcFace 94.0 vs CLIP 19.8 (+74.2 pts)", ours=100 * (a_.tar - b_.tar),
                              low=100 * (a_.tar_low - b_.tar_high), high=100 * (a_.tar_high - b_.tar_low),
                              threshold=0.0, kind="above",
                              what=f"ridge TAR difference (pts), {fr_best} − {gen_best}, FAR {far_lo:g}",
                              interval="conservative difference of two 95% identity-bootstrap intervals"))
for lab in general:
    r = raw_r.loc[lab]
    claims.append(C.claim_row("Table 1", f"a general-purpose encoder leaks identity above chance: {lab}",
                              paper="CLIP 19.8, SSCD 9.8, DINOv2 5.7 (% at FAR 1e-4)", ours=100 * r.tar,
                              low=100 * r.tar_low, high=100 * r.tar_high, threshold=100 * r.realised_far, kind="above",
                              what=f"raw ridge TAR (%) at FAR {far_lo:g}, k = {k_max}, against the realised FAR",
                              interval=boot))
leakers = [lab for lab in labels if bool(comp[(comp.encoder == lab)].leaks.iloc[0])]
for lab in [lab for lab in labels if lab in general or lab in leakers]:
    for t, pap in (("ISP-W", "CLIP 6.8, SSCD 5.4, DINOv2 1.3 pts"), ("ISP-X", "CLIP 9.6, SSCD 5.3, DINOv2 1.5 pts")):
        c = comp[(comp.encoder == lab) & (comp["transform"] == t)].iloc[0]
        claims.append(C.claim_row("Table 1", f"{t} lowers the ridge TAR: {lab}", paper=pap, ours=100 * c["drop"],
                                  low=100 * c.drop_low, high=100 * c.drop_high, threshold=0.0, kind="above",
                                  what=f"paired drop raw − {t} (pts" + (")" if c.leaks else "; raw does not leak "
                                                                        "above chance here)"),
                                  interval="95% paired identity bootstrap"))
for lab in general:
    row = table6[(table6.encoder == lab) & table6.b.str.startswith("ISP-X")]
    if len(row):
        m = float(row.mean_cos.iloc[0])
        claims.append(C.claim_row("§1.8", f"identity subspaces fitted on different face sets align: {lab}",
                                  paper="cosines > 0.99", ours=m, low=m, high=m, threshold=0.99, kind="above",
                                  what=f"mean principal-angle cosine, ISP-W ({faces.name}) vs ISP-X ({other.name}), "
                                       f"r = {int(row['rank'].iloc[0])} (random subspaces: "
                                       f"{float(row.chance_mean_cos.iloc[0]):.2f}; largest cosine "
                                       f"{float(row.max_cos.iloc[0]):.3f})",
                                  interval="one fit per subspace, no sampling interval"))
r_main_u = min(cfg.isp_rank, r_max_w)
for lab in general:
    for fam, pap, label in (("knn", "kNN: DINOv2 100.1, CLIP 98.3, SSCD 85.4", "kNN"),
                            ("linear", "linear probe: DINOv2 99.2, CLIP 100.7, SSCD 83.3", "linear probe")):
        u = util[(util.encoder == lab) & (util.method == "ISP-W") & (util["rank"] == r_main_u) & util.informative
                 & util.metric.str.startswith(fam + ":")]
        if not len(u):
            continue
        ret = float(u.retention_pct.mean())  # mean over the informative attributes; binomial SE of each, averaged
        se = float(np.mean([100 * math.sqrt(max(x.transformed * (1 - x.transformed), 1e-12) / x.n_queries) / x.raw
                            for x in u.itertuples()]))
        claims.append(C.claim_row("§1.6", f"ISP keeps utility ({label} on non-identity attributes): {lab}", paper=pap,
                                  ours=ret, low=ret - 1.96 * se, high=ret + 1.96 * se, threshold=90.0, kind="at_least",
                                  what=f"{label} accuracy after ISP-W r = {r_main_u}, % of raw, mean of {len(u)} "
                                       "attributes (ImageNet classes in the paper)",
                                  interval="±1.96 binomial SE of the sanitised accuracies"))
if len(imnet):
    sel = imnet[(imnet.method == "ISP-W") & (imnet["rank"] == r_main_u)]
    if len(sel):
        i_ = sel.iloc[0]
        claims.append(C.claim_row("§1.6", f"ISP keeps ImageNet classification: {i_.encoder}",
                                  paper="ImageNet kNN / linear 98–101% of raw (CLIP, DINOv2)",
                                  ours=100 * i_.agreement, low=100 * i_.agreement_low, high=100 * i_.agreement_high,
                                  threshold=90.0, kind="at_least",
                                  what=f"top-1 agreement with the raw classifier after ISP-W r = {r_main_u} (%), "
                                       f"{int(i_.n)} views of {int(i_.photos)} unlabelled scikit-image photos",
                                  interval="95% photo bootstrap"))
if len(inv):
    gen_inv = inv[inv.encoder.isin(general) & (inv.condition == "raw")]
    if len(gen_inv):
        w = gen_inv.loc[gen_inv.ci_high.idxmax()]
        claims.append(C.claim_row("§1.5", "inverting a general-purpose encoder's embedding fails",
                                  paper="≈ 0% (DINO, CLIP, SSCD)", ours=100 * w.success_rate, low=100 * w.ci_low,
                                  high=100 * w.ci_high, threshold=10.0, kind="below",
                                  what=f"verification success (%) at FAR {cfg.reference_far:g}, the worst case over "
                                       f"encoders, attacks and judges ({w.encoder} / {w.attack} / judge {w.judge})",
                                  interval=f"Wilson 95%, {int(w.n_targets)} targets"))
    fr_inv = inv[(inv.encoder == contrast_lab) & (inv.condition == "raw")] if contrast_lab else inv.iloc[:0]
    if len(fr_inv):
        b = fr_inv.loc[fr_inv.success_rate.idxmax()]
        claims.append(C.claim_row("§1.5", "a face recogniser's embedding can be inverted",
                                  paper="67–100% (pretrained generative inverters)", ours=100 * b.success_rate,
                                  low=100 * b.ci_low, high=100 * b.ci_high, threshold=50.0, kind="above",
                                  what=f"verification success (%) at FAR {cfg.reference_far:g}, the best attack and "
                                       f"judge ({b.encoder} / {b.attack} / judge {b.judge}); privkit's attacks are "
                                       "small decoders, not pretrained face generators",
                                  interval=f"Wilson 95%, {int(b.n_targets)} targets"))
for lab in (cpi_df.encoder.unique() if len(cpi_df) else []):
    if lab not in general:
        continue
    g0 = cpi_df[cpi_df.encoder == lab].sort_values("sigma").iloc[0]
    claims.append(C.claim_row("§1.4", f"encoders are context-dominant: {lab}", paper="context-dominant (no number)",
                              ours=float(g0.cpi), low=float(g0.cpi - 1.96 * g0["sem"]),
                              high=float(g0.cpi + 1.96 * g0["sem"]), threshold=0.5, kind="above",
                              what="CPI without blur (share of queries closer to a stranger in their own scene)",
                              interval="±1.96 SEM over the queries"))
claims = pd.DataFrame(claims, columns=["section", "claim", "paper", "what", "ours", "low", "high", "interval", "kind",
                                       "threshold", "tol", "difference", "verdict", "evidence"])
save_table(claims, out_dir, "table8_claims", caption="The paper's claims, its numbers and ours (95% intervals), with verdicts")
for r in claims.itertuples():
    print(f"- [{r.section}] {r.claim}: {r.verdict.upper()} — {r.evidence} (paper: {r.paper})")
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
failures, notes = [], []
# 1. never a TAR below the resolvable FAR
if len(bad):
    failures.append(f"{len(bad)} TARs reported below the smallest resolvable FAR {floor:.2e}")
# 2. full-rank ISP makes the fitting identities' class means coincide (before re-normalisation), for every encoder
for lab in labels:
    p = fits[lab]["ISP-W"]
    if p.rank == len(parts["train"]) - 1:
        tr_emb, tr_id = splits[lab]["train"]
        flat = tr_emb.double() - (tr_emb.double() @ p.basis.double()) @ p.basis.double().T
        means = torch.stack([flat[tr_id == i].mean(0) for i in torch.unique(tr_id)])
        spread = float((means - means.mean(0)).norm(dim=1).max())
        if spread > 1e-5:
            failures.append(f"{lab}: full-rank ISP leaves fitting class means {spread:.2e} apart")
if scale != "smoke":
    clear = comp[comp.clear_leak & (comp["transform"] == "ISP-W")]
    notes.append(f"clear leakers (raw ridge TAR above chance by more than its CI width): {list(clear.encoder)}; "
                 f"leaking only marginally: {sorted(set(comp[comp.leaks & ~comp.clear_leak].encoder))}")
    # 3. (whether ISP-W *lowers* the TAR is the paper's claim: judged in the claims table above, not asserted here)
    # ... and raises it significantly for no leaking encoder
    for _, c in comp[comp.leaks & (comp["transform"] == "ISP-W")].iterrows():
        if c.drop_high < 0:
            failures.append(f"{c.encoder}: ISP-W raises the ridge TAR ({100 * c.raw_tar:.1f}% -> {100 * c.isp_tar:.1f}%)")
    # 4. the ridge TAR does not rise with rank beyond the interval slack (ISP-W), for every clearly leaking encoder
    for lab in clear.encoder:
        curve = sweep[(sweep.encoder == lab) & sweep.method.isin(["raw", "ISP-W"])]
        for msg in X.rises_with_rank(curve):
            failures.append(f"{lab}: {msg}")
    # 5. copy detection after ISP-W at the main rank stays far above chance (>= 10x) for every whole-image encoder.
    #    kNN / linear-probe retention is the paper's utility claim (claims table); copy-detection *retention* is
    #    reported, not asserted: in portraits-views an identity is one photo, so the identity subspace is also what
    #    tells photos apart.
    r_chk = min(cfg.isp_rank, r_max_w)
    main_u = util[(util.method == "ISP-W") & (util["rank"] == r_chk) & ~util.encoder.isin(biometric) & util.informative]
    for _, u in main_u[main_u.metric == "copy:recall@1"].iterrows():
        if u.transformed < 10 * u.chance:
            failures.append(f"{u.encoder}: copy-detection Recall@1 after ISP-W ({u.transformed:.3f}) is within 10x "
                            f"of chance ({u.chance:.4f})")
    # 6. template inversion, dlib contrast (inverting the reference's own embeddings, ridge decoder): the raw
    #    reconstructions carry identity (margin over the mismatched control above 0), and ISP-W does not give the
    #    attacker more than raw beyond the intervals (margin and rank-1). Verification at FAR 1e-3 and rank-1 above
    #    chance are reported, not asserted (they are the claims' business, above).
    if len(inv) and cfg.inversion_fr_contrast and contrast_lab is not None:
        fr = inv[(inv.encoder == contrast_lab) & (inv.attack == "ridge") & (inv.judge == inv.judge.iloc[0])]
        fr = fr.set_index("condition")
        raw_fr, isp_fr = fr.loc["raw"], fr.loc["ISP-W"]
        notes.append(f"inversion, FR contrast ({contrast_lab}, ridge, judge {inv.judge.iloc[0]}): margin raw {raw_fr.margin:+.4f} [{raw_fr.margin_low:+.4f}, "
                     f"{raw_fr.margin_high:+.4f}], ISP-W {isp_fr.margin:+.4f} [{isp_fr.margin_low:+.4f}, "
                     f"{isp_fr.margin_high:+.4f}]; rank-1 raw {raw_fr.rank1:.2f}, ISP-W {isp_fr.rank1:.2f} "
                     f"(chance {raw_fr.rank1_chance:.2f})")
        if not raw_fr.margin_low > 0:
            failures.append(f"inverting {contrast_lab}'s raw embeddings gives no identity margin over the control "
                            f"({raw_fr.margin:+.4f}, CI low {raw_fr.margin_low:+.4f})")
        if isp_fr.margin_low > raw_fr.margin_high or isp_fr.rank1_low > raw_fr.rank1_high:
            failures.append(f"inversion of ISP-W-sanitised {contrast_lab} embeddings beats the raw ones beyond the intervals")
else:
    notes.append("smoke scale: the ISP-vs-raw, rank-monotonicity, utility and inversion checks need the default "
                 "scale's identities and are skipped")
print("\n".join(notes))
print("\n".join(failures) if failures else "All checks passed.")
if failures:
    raise AssertionError("; ".join(failures))

# %%
write_run_manifest(out_dir, paper="isp",
                   parameters={"scale": scale, "seed": seed, "data_root": data_root, "device": device}, device=dev,
                   timer=timer, extra={"lowest_resolvable_far": far_lo, "smallest_resolvable_far": floor,
                                       "encoders": labels})
print({k: round(v, 1) for k, v in timer.seconds.items()}, f"total {timer.total:.1f} s")
