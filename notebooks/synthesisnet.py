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
# # SynthesisNet: face publishing with metric-DP identity latents
#
# **Paper.** 沈博 (Shen Bo), 王祥根 (Wang Xianggen), 田澍 (Tian Shu), 崔佳佳 (Cui Jiajia). Face-image privacy
# publishing with an identity/attribute autoencoder, metric differential privacy and a DCGAN with an auxiliary
# classifier (Chinese journal paper; full text not obtained, implemented from its summary).
#
# **The paper could not be obtained.** privkit implements the design its summary describes: a convolutional
# autoencoder splits a face into an identity latent z_id and an attribute latent z_att; metric-DP noise (the
# multivariate Laplace mechanism, one independent draw per face) perturbs z_id; a DCGAN generator whose
# discriminator carries an auxiliary attribute classifier re-synthesises the face. Every quantitative choice —
# latent sizes, clip norm (= latent radius, 10·d_id), loss weights, schedule, the attack protocol, the judges and
# the offline IS/FID stand-ins — is privkit's [I]. **No paper numbers exist**, so none are printed; the notebook
# shows the qualitative behaviour the summary describes (identity distance falls as ε grows over 0.01 … 1) and
# says where it does and does not hold here.
#
# What it regenerates:
# 1. samples: original / reconstruction / published at several ε / the classical baselines (blur, pixelate, mask);
# 2. identity distance and re-identification vs ε (the paper's Fig. 3) under two judges, baselines as references;
# 3. IS/FID per method (the paper's Table 2) with offline feature extractors;
# 4. attribute preservation vs ε; 5. ablations (no DP noise, no auxiliary classifier, noise on the whole latent);
# 6. what ε means here: the distribution of ε·d(z, z′) over pairs of identities; 7. every privacy guarantee.
#
# **Data at the default scale.** `lfw-subset-views`: seeded synthetic views (lighting, occlusion, blur, pose,
# flips, backgrounds) of the 100 real LFW face crops bundled with scikit-image, each crop one identity; 70
# identities train the networks, the other 30 (never seen in training) are published. The views put a small face
# anywhere on a photo background; the paper works on *aligned* face crops (CelebA "aligned & cropped", where the
# face fills the frame), so privkit renders the views at 128 px and cuts an aligned crop from each: a square
# around the face box with a 10 % margin, resized to 64×64 (`privkit.synthesisnet.aligned_faces`) — this
# mirrors CelebA's aligned crops [I]. The source photos are 25×25 pixels, so the crops are upsampled and soft.
# All attribute labels are kept; "background" now means the few background pixels at the crop's corners. A
# narrow network and a short schedule keep the whole notebook to minutes on a CPU; the paper used 128×128 MUCT,
# MORPH and CelebA (the paper scale reads CelebA's aligned crops from `data_root` and uses them as they are).
# Smoke scale: 32×32, one epoch — a plumbing test whose numbers mean nothing.
#
# **Judges.** dlib's real ResNet face recogniser (the attacker with a face recogniser) and the model's own
# identity encoder (an attacker who knows the published model). FID and IS use offline extractors (ssl-small
# features; an attribute probe's softmax) because Inception weights cannot be downloaded here.

# %% tags=["parameters"]
scale = "default"
seed = 0
data_root = None
device = "auto"
out_dir = "figures/synthesisnet"

# %%
import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

import privkit
from privkit.data import load_faces, paper_loaders
from privkit.data.cache import cached_embeddings
from privkit.encoders import load_encoder
from privkit.figures import SectionTimer, save_figure, save_table, set_theme, write_run_manifest
from privkit.synthesisnet import (
    BASELINES,
    SynthesisNet,
    SynthesisNetConfig,
    aligned_faces,
    anonymize,
    attribute_preservation,
    embed_images,
    features_for_fid,
    fid,
    inception_score,
    load_inception,
)
from privkit.synthesisnet import experiments as X

cfg = privkit.config.load("synthesisnet", scale)
dev = privkit.resolve_device(device)
torch.set_num_threads(1)  # small convolutions: one thread is much faster than several on a shared CPU
set_theme()
timer = SectionTimer()
progress = scale != "smoke"
pd.set_option("display.width", 160, "display.max_columns", 30, "display.precision", 4)
print(f"scale={scale} seed={seed} device={dev}")
print(cfg)

# %% [markdown]
# ## Data: identity-disjoint train / publish split
# The networks are trained without DP, so they may memorise training faces; only faces of identities outside
# the training set are published [I].

# %%
with timer("data"):
    if scale == "paper":
        faces = paper_loaders.load_celeba(data_root, size=cfg.image_size, min_images=cfg.images_per_identity,
                                          images_per_identity=cfg.images_per_identity,
                                          n_identities=cfg.n_train_identities + cfg.n_test_identities, seed=seed,
                                          progress=progress)
    else:
        faces = load_faces(cfg.face_set, n_identities=cfg.n_train_identities + cfg.n_test_identities,
                           images_per_identity=cfg.images_per_identity, size=cfg.render_size, seed=seed)
    if cfg.align_margin is not None:
        fcr_before = float(faces.face_coverage_ratio().mean())
        faces = aligned_faces(faces, size=cfg.image_size, margin=cfg.align_margin)
        print(f"aligned crops: rendered at {cfg.render_size} px, square around each face box with margin "
              f"{cfg.align_margin:g}, resized to {cfg.image_size} px; mean face coverage {fcr_before:.2f} -> "
              f"{float(faces.face_coverage_ratio().mean()):.2f}")
    train, test = X.split_identities(faces, n_train=cfg.n_train_identities, n_test=cfg.n_test_identities, seed=seed)
    attr_names = tuple(a for a in (cfg.probe_attributes or tuple(sorted(faces.attributes))) if a in faces.attributes)
    print(f"{faces.name}: {len(train)} training images of {train.n_identities} identities, "
          f"{len(test)} images of {test.n_identities} other identities to publish; {cfg.image_size}x{cfg.image_size}")
    print("attributes:", {a: int(faces.attributes[a].max()) + 1 for a in attr_names}, "(number of classes)")

# %% [markdown]
# ## Training (autoencoder, then GAN) — the method and the no-auxiliary-classifier ablation
# The "no noise" and "noise on the whole latent" ablations use the method's weights; only the ablation without
# the auxiliary classifier changes the discriminator: it shares the method's trained autoencoder (same encoders,
# so the same latents) and trains its own GAN (same schedule, same seed).
#
# Architecture choices [I]: the decoder and the generator upsample by nearest-neighbour ×2 followed by a 3×3
# convolution (`upsample="resize"`) instead of DCGAN's 4×4 stride-2 transposed convolution, whose uneven kernel
# overlap printed a strong checkerboard on every generated face in privkit's earlier runs (the transposed
# version stays available as `upsample="transpose"`); the reconstruction terms of both phases are L1 plus a
# perceptual term on the frozen convolution blocks of MTCNN's ONet (a face detector never trained on identities;
# not ssl-small, which the FID stand-in uses, and not dlib, which judges identity). Half of the GAN's training
# samples get an identity latent privatised as at publishing time (ε log-uniform in 0.01 … 1, `noise_prob`) and
# no reconstruction term [I]: at small ε the noisy latent is a nearly random point of the sphere, and a generator
# that only ever saw encoder outputs rendered it as colour noise that kept no attribute; trained this way, the
# adversarial and auxiliary-classifier terms teach it to render a plausible face with the attributes of `z_att`.

# %%
with timer("training"):
    net_cfg = SynthesisNetConfig(image_size=cfg.image_size, width=cfg.width, id_dim=cfg.id_dim, att_dim=cfg.att_dim,
                                 lambda_id=cfg.lambda_id, noise_prob=cfg.noise_prob,
                                 lambda_cls=cfg.lambda_cls)
    net = SynthesisNet(net_cfg).fit(train, epochs_ae=cfg.epochs_ae, epochs_gan=cfg.epochs_gan,
                                    batch_size=cfg.batch_size, seed=seed, device=dev, progress=progress)
    net_noaux = SynthesisNet(net_cfg, auxiliary_classifier=False).fit(
        train, epochs_ae=0, epochs_gan=cfg.epochs_gan, batch_size=cfg.batch_size, seed=seed, device=dev,
        progress=progress, autoencoder_from=net)
    net_none = X.with_noise(net, "none")
    net_whole = X.with_noise(net, "whole")
    print(net)
    for name, m in (("method", net), ("no auxiliary classifier", net_noaux)):
        ae, gan, tp = m.history["ae"][-1], m.history["gan"][-1], m.history["throughput"]
        print(f"{name}: last AE epoch L1 {ae['rec_l1']:.3f}, id CE {ae['id_ce']:.3f}, adversary acc on z_att "
              f"{ae['adv_acc']:.3f}; last GAN epoch D loss {gan['d_loss']:.3f}, G L1 {gan['g_rec_l1']:.3f}; "
              f"{tp['ae_images_per_s']:.0f} / {tp['gan_images_per_s']:.0f} images/s")

# %% [markdown]
# ### What each latent reveals about identity (privkit)
# The guarantee covers z_id only; z_att is published without noise, so it must carry (almost) no identity. Measured
# directly on the published (test) faces, whose identities the networks never saw: each face's nearest other face
# by cosine similarity of one latent, right when it shows the same person (leave-one-out rank-1; chance = the
# share of other faces of the same person). z_att is trained to predict the attribute labels while an identity
# adversary behind a gradient-reversal layer tries to read identity from it. The adversary sees only the training
# identities and sat at chance within a few epochs in privkit's runs, yet a nearest-neighbour attacker still found
# identity of unseen faces in a 64-d z_att (rank-1 0.12, chance 0.03). Its size `att_dim` is the bottleneck that
# decides this: the default scale uses 8 (its attributes are a few discrete labels), where z_att is at chance
# level [I] (the measurements behind the choice are in `privkit/synthesisnet/presets.py`).

# %%
with timer("latent leakage"):
    zt_id, zt_att = net.encode(test.images.to(dev))
    leak = pd.DataFrame([{"latent": name, "dim": int(z.shape[1]), **X.latent_identity_leakage(z.cpu(), test.identity)}
                         for name, z in (("z_id (noised before release)", zt_id),
                                         ("z_att (released without noise)", zt_att))])
    print("privkit's leakage check of the two latents (no counterpart in the paper's summary). "
          "Leave-one-out nearest-neighbour rank-1 among the test faces (99% intervals):")
    print(leak.to_string(index=False))

# %% [markdown]
# ## Releases
# Every published set is drawn with its own seeded generator (one independent noise draw per face). The
# baselines act on each face's box and carry no formal guarantee.

# %%
with timer("releases"):
    x_test = test.images.to(dev)
    releases: dict[tuple[str, float], torch.Tensor] = {}
    guarantees = []
    models = {"SynthesisNet": net, "no auxiliary classifier": net_noaux, "noise on whole latent": net_whole}
    for mi, (method, model) in enumerate(models.items()):
        for ei, eps in enumerate(cfg.epsilons):
            g = torch.Generator().manual_seed(seed * 1000 + 100 * mi + ei)
            releases[(method, eps)], gu = model.publish(x_test, epsilon=eps, generator=g)
            guarantees.append({"method": method, "epsilon": eps, "guarantee": gu})
    releases[("no DP noise", math.inf)], gu = net_none.publish(x_test, epsilon=None)
    guarantees.append({"method": "no DP noise", "epsilon": math.inf, "guarantee": gu})
    releases[("reconstruction (decoder)", math.inf)] = net.reconstruct(x_test)
    for b in BASELINES:
        releases[(b, math.inf)] = anonymize(x_test, b, boxes=test.box.to(dev))
    releases = {k: v.cpu() for k, v in releases.items()}
    print(f"{len(releases)} releases of {len(test)} faces each")

# %% [markdown]
# ### Every privacy guarantee
# The ε of each statement is the indistinguishability between **any** two faces, ε·2·clip_norm; the metric
# statement (ε per unit of latent distance) is in the notes — section "What ε means" shows the distances.

# %%
for row in guarantees:
    print(f"--- {row['method']}, ε = {row['epsilon']:g}")
    print(row["guarantee"])
print("--- blur / pixelate / mask: no formal privacy guarantee (image processing)")
gtable = pd.DataFrame([{"method": r["method"], "epsilon_per_unit_distance": r["epsilon"],
                        "epsilon_any_two_faces": r["guarantee"].epsilon, "delta": r["guarantee"].delta,
                        "protects": r["guarantee"].protects, "mechanism": r["guarantee"].mechanism}
                       for r in guarantees])
_ = save_table(gtable, out_dir, "table4_guarantees",
               caption="Privacy guarantee of every SynthesisNet release (privkit)")

# %% [markdown]
# ## Samples (privkit; the paper shows samples too)
# **Read these honestly.** At the default scale (70 training identities, one 25-px source photo each, a width-16
# network, minutes of CPU training) the published faces are soft, low-detail faces, not photo-realistic ones:
# the aligned crops, the resize-convolution upsampling (no checkerboard) and the perceptual term make them
# faces with the source's layout, skin tone and lighting, and the closing checks test whether dlib, a real face
# recogniser, still links the noise-free ones to their sources. Photo-realism needs the paper scale (CelebA at
# 128 px on a GPU).

# %%
with timer("fig1"):
    show = X.first_per_identity(test, 1)
    grid_eps = [e for e in (max(cfg.epsilons), 0.1, min(cfg.epsilons)) if e in cfg.epsilons]
    rows = {"original": test.images[show], "reconstruction": releases[("reconstruction (decoder)", math.inf)][show],
            "G, no noise": releases[("no DP noise", math.inf)][show]}
    rows.update({f"ε = {e:g}": releases[("SynthesisNet", e)][show] for e in dict.fromkeys(grid_eps)})
    rows.update({b: releases[(b, math.inf)][show] for b in BASELINES})
    fig = X.image_grid(rows, n_columns=cfg.grid_columns)
    shown = pd.DataFrame({"row": list(rows), "n_faces": [min(cfg.grid_columns, int(show.sum()))] * len(rows)})
    save_figure(fig, out_dir, "fig1_samples", shown)
    plt.show()
    plt.close(fig)

# %% [markdown]
# ## Identity distance and re-identification vs ε (paper Fig. 3)
# Identity distance = 1 − cos between the judge's embeddings of the original and of its published version
# (higher = more private; CI: identity-cluster bootstrap; dlib descriptors centred on training identities [I]).
# Re-identification [I, privkit's addition]: rank-1 of each published face against the gallery of all
# originals (the attacker holds the source photos), with its Wilson interval and the chance rate; TAR at the
# smallest FAR the impostor pairs resolve (≥ the preset's).
# The model's own identity encoder judges every release; dlib (~10 images/s on this CPU) judges
# `dlib_images_per_identity` faces per identity, at `dlib_epsilons` and the ablation ε.

# %%
with timer("judges"):
    fr = load_encoder("dlib-resnet-fr", device="cpu")
    own = lambda imgs: net.encode(imgs.to(dev))[0].cpu()  # noqa: E731  (the method's identity encoder)
    dmask = X.first_per_identity(test, cfg.dlib_images_per_identity)
    d_ids, d_box = test.identity[dmask].cpu(), test.box[dmask].cpu()
    # dlib's descriptor space is not centred (different faces have cosine ~0.9); centre it with the mean
    # descriptor of training identities (disjoint from the published ones, hence public) [I], as in ScoreShield.
    cmask = X.first_per_identity(train, 1) & torch.isin(
        train.identity.cpu(), torch.unique(train.identity.cpu())[: cfg.dlib_centre_identities])
    centre = cached_embeddings(lambda: fr.embed(train.images[cmask].cpu(), boxes=train.box[cmask].cpu()),
                               encoder=fr.name, dataset=faces.name, split="synthesisnet-train-centre", seed=seed,
                               extra={"scale": scale, "n": int(cmask.sum()), "size": cfg.image_size}).double().mean(0)
    dlib_embed = lambda imgs: fr.embed(imgs, boxes=d_box).double() - centre  # noqa: E731
    e_orig = {"model identity encoder": embed_images(test.images, own),
              "dlib": cached_embeddings(lambda: fr.embed(test.images[dmask].cpu(), boxes=d_box), encoder=fr.name,
                                        dataset=faces.name, split="synthesisnet-test", seed=seed,
                                        extra={"scale": scale, "n": int(dmask.sum()), "size": cfg.image_size}
                                        ).double() - centre}
    dlib_keys = [("SynthesisNet", e) for e in cfg.dlib_epsilons if e in cfg.epsilons]
    dlib_keys += [k for k in releases if k[1] == math.inf]
    if scale != "smoke":
        dlib_keys += [(m, cfg.ablation_epsilon) for m in ("no auxiliary classifier", "noise on whole latent")]
    judged = []
    for key, imgs in releases.items():
        method, eps = key
        e_pub = embed_images(imgs, own)
        judged.append({"method": method, "epsilon": eps, "judge": "model identity encoder",
                       **X.judge_release(e_orig["model identity encoder"], e_pub, test.identity.cpu(), far=cfg.far,
                                         n_bootstrap=cfg.n_bootstrap, seed=seed)})
        if key in dlib_keys:
            e_pub = dlib_embed(imgs[dmask])
            judged.append({"method": method, "epsilon": eps, "judge": "dlib",
                           **X.judge_release(e_orig["dlib"], e_pub, d_ids, far=cfg.far, n_bootstrap=cfg.n_bootstrap,
                                             seed=seed)})
        # the originals themselves (distance 0, the identification ceiling)
    for judge, eo in e_orig.items():
        ids = test.identity.cpu() if judge == "model identity encoder" else d_ids
        judged.append({"method": "original", "epsilon": math.inf, "judge": judge,
                       **X.judge_release(eo, eo, ids, far=cfg.far, n_bootstrap=0, seed=seed)})
    judged = pd.DataFrame(judged)
    print(f"dlib judges {int(dmask.sum())} faces per release, centred with {int(cmask.sum())} training identities; "
          f"failures to enrol: {fr.failures_to_enrol} (faces given by their boxes)")

# %%
with timer("fig3"):
    judges = ["dlib", "model identity encoder"]
    metrics = [("identity_distance", "distance_low", "distance_high", "identity distance (1 − cos)"),
               ("rank1", "rank1_low", "rank1_high", "rank-1 re-identification")]
    refs = {"blur": "tab:orange", "pixelate": "tab:green", "mask": "tab:red", "reconstruction (decoder)": "tab:gray",
            "no DP noise": "tab:purple"}
    fig, axes = plt.subplots(2, 2, figsize=(8.5, 5.6), sharex=True)
    for c, judge in enumerate(judges):
        jd = judged[judged.judge == judge]
        sw = jd[jd.method == "SynthesisNet"].sort_values("epsilon")
        for r, (col, lo, hi, label) in enumerate(metrics):
            ax = axes[r, c]
            ax.errorbar(sw.epsilon, sw[col], yerr=[sw[col] - sw[lo], sw[hi] - sw[col]], marker="o", capsize=2,
                        color="tab:blue", label="SynthesisNet (identity noise)")
            for m, colr in refs.items():
                v = jd[jd.method == m][col]
                if len(v):
                    ax.axhline(float(v.iloc[0]), color=colr, ls="--", lw=0.9, label=m)
            if col == "rank1":
                ax.plot(sw.epsilon, sw.rank1_chance, "k:", lw=0.9, label="chance")
            ax.set(xscale="log", ylabel=label if c == 0 else None, title=judge if r == 0 else None,
                   xlabel="ε (per unit of latent distance)" if r == 1 else None)
    axes[0, 1].legend(fontsize=6, loc="best")
    save_figure(fig, out_dir, "fig3_identity_vs_epsilon", judged)
    plt.show()
    plt.close(fig)
    cols = ["judge", "method", "epsilon", "identity_distance", "distance_low", "distance_high",
            "other_identity_distance", "rank1", "rank1_low",
            "rank1_high", "rank1_chance", "tar", "far", "n_probes"]
    print("Reproduces the paper's Fig. 3 (its values could not be obtained; no paper numbers to print).")
    print(judged[cols].sort_values(["judge", "method", "epsilon"]).to_string(index=False))

# %% [markdown]
# ## IS / FID per method (paper Table 2 — its values could not be obtained)
# **FID computed on ssl-small features, not Inception — Inception weights cannot be downloaded here.** The
# reference set is the real *training* faces; the "original" row (the real faces to publish) is the floor of
# this FID at this sample size (FID is biased upwards at small n: compare rows with each other, never with
# published FIDs). The "IS" stand-in uses the softmax of a logistic-regression probe on downsampled pixels
# (privkit's `pixels` encoder) trained on real training faces to predict the `is_attribute` labels (not
# Inception's ImageNet classes). At the paper scale both use Inception-v3 weights supplied in `data_root`.

# %%
with timer("table2"):
    ssl = load_encoder("ssl-small", device="cpu")
    pix = load_encoder("pixels", device="cpu")
    # privkit's trials: ssl-small features do not predict these attributes above the majority rate; raw
    # downsampled pixels read at least the background (and weakly the lighting) [I].
    probe = X.AttributeProbe(lambda imgs: pix.embed(imgs.cpu()), c=1.0).fit(train.images.cpu(), train.attributes,
                                                                           names=attr_names)
    if scale == "paper":
        inception = load_inception(data_root=data_root, device=dev)
        fid_extractor, is_probs = inception, lambda imgs: inception.probs(imgs.to(dev)).cpu()
        extractor_name = "Inception-v3 (pool3 / softmax)"
    else:
        fid_extractor, is_probs = ssl, lambda imgs: probe.probs(imgs, cfg.is_attribute)
        extractor_name = f"FID: ssl-small features; IS: pixel-probe softmax over '{cfg.is_attribute}'"
    f_ref = features_for_fid(train.images.cpu(), fid_extractor)
    table2_keys = [("original", math.inf)] + [k for k in releases if k[0] == "SynthesisNet"]
    table2_keys += [k for k in releases if k[1] == math.inf]
    table2_keys += [(m, cfg.ablation_epsilon) for m in ("no auxiliary classifier", "noise on whole latent")]
    qual = []
    for method, eps in table2_keys:
        imgs = test.images.cpu() if method == "original" else releases[(method, eps)]
        fr_ = fid(f_ref, features_for_fid(imgs, fid_extractor), n_bootstrap=cfg.fid_bootstrap, seed=seed)
        is_ = inception_score(is_probs(imgs), splits=min(cfg.is_splits, len(imgs)))
        qual.append({"method": method, "epsilon": eps, "FID": fr_.value, "FID_low": fr_.ci_low,
                     "FID_high": fr_.ci_high, "IS": is_.mean, "IS_std": is_.std, "extractor": extractor_name})
    table2 = pd.DataFrame(qual)
    save_table(table2, out_dir, "table2_is_fid",
               caption="IS/FID stand-ins per method (FID on ssl-small features, not Inception; paper values unknown)")
    print("Reproduces the layout of the paper's Table 2; the paper's values could not be obtained, so none are "
          "printed beside ours.")
    print(f"FID computed on ssl-small features, not Inception — Inception weights cannot be downloaded here "
          f"(extractor: {extractor_name}; reference: {len(train)} real training faces; {len(test)} faces per row).")
    print(table2.drop(columns="extractor").to_string(index=False))

# %% [markdown]
# ## Attribute preservation vs ε (privkit)
# The pixel probe above (trained on real training faces, independent of SynthesisNet) classifies the published
# faces; accuracy is measured against the *original* faces' labels. The noise touches only z_id, so attributes
# should survive at every ε; the dashed line is the majority-class rate (what a probe learns from nothing), the
# solid line the probe's accuracy on the real faces (its ceiling). Only attributes the probe reads on real faces
# (significantly above the majority rate) say anything about preservation.

# %%
with timer("fig4"):
    att_rows = []
    lab = {a: test.attributes[a].cpu() for a in probe.models}
    for (method, eps) in [("original", math.inf)] + list(releases):
        imgs = test.images.cpu() if method == "original" else releases[(method, eps)]
        res = attribute_preservation(imgs, lab, probe)
        for a in res.accuracy:
            att_rows.append({"method": method, "epsilon": eps, "attribute": a, "accuracy": res.accuracy[a],
                             "majority": res.majority[a], "n": res.n[a]})
    att = pd.DataFrame(att_rows)
    sw = att[att.method == "SynthesisNet"]
    names = list(probe.models)
    fig, axes = plt.subplots(1, len(names), figsize=(1.9 * len(names) + 0.5, 2.6), sharey=True, squeeze=False)
    for ax, a in zip(axes[0], names):
        d = sw[sw.attribute == a].sort_values("epsilon")
        ax.plot(d.epsilon, d.accuracy, "o-", label="SynthesisNet")
        ax.axhline(float(att[(att.method == "original") & (att.attribute == a)].accuracy.iloc[0]), color="k", lw=0.8,
                   label="originals")
        ax.axhline(float(d.majority.iloc[0]), color="k", ls="--", lw=0.8, label="majority class")
        for m, colr in (("blur", "tab:orange"), ("pixelate", "tab:green")):
            ax.axhline(float(att[(att.method == m) & (att.attribute == a)].accuracy.iloc[0]), color=colr, ls=":",
                       lw=0.9, label=m)
        ax.set(xscale="log", title=a, xlabel="ε", ylim=(0, 1.02))
    axes[0, 0].set_ylabel("probe accuracy")
    axes[0, -1].legend(fontsize=6)
    save_figure(fig, out_dir, "fig4_attributes_vs_epsilon", att)
    plt.show()
    plt.close(fig)
    wide = att.pivot_table(index=["method", "epsilon"], columns="attribute", values="accuracy")
    wide["mean"] = wide.mean(axis=1)
    majority = att[att.method == "original"].set_index("attribute").majority
    print("probe accuracy on real training faces:", {k: round(v, 3) for k, v in probe.train_accuracy.items()})
    print("majority-class rate:", majority.round(3).to_dict(), f"mean {majority.mean():.3f}")
    print(wide.to_string())

# %% [markdown]
# ## Ablations (privkit)
# Same ε sweep for the method, the ablation without the auxiliary classifier (a FaceDCGAN-like discriminator)
# and the ablation with the noise on the whole latent (identity and attribute; its guarantee covers the whole
# image but the same ε buys far more noise per coordinate), plus the release without DP noise. Judged by the
# model's identity encoder (of the method, a fixed attacker for all rows), the attribute probe and FID.

# %%
with timer("table3"):
    own_j = judged[judged.judge == "model identity encoder"].set_index(["method", "epsilon"])
    dlib_j = judged[judged.judge == "dlib"].set_index(["method", "epsilon"])
    abl = []
    for method in ("SynthesisNet", "no auxiliary classifier", "noise on whole latent", "no DP noise"):
        for key in [k for k in releases if k[0] == method]:
            fr_ = fid(f_ref, features_for_fid(releases[key], fid_extractor), n_bootstrap=0, seed=seed)
            row = {"method": method, "epsilon": key[1],
                   "own_identity_distance": own_j.loc[key, "identity_distance"],
                   "own_rank1": own_j.loc[key, "rank1"],
                   "dlib_identity_distance": dlib_j.loc[key, "identity_distance"] if key in dlib_j.index else np.nan,
                   "dlib_rank1": dlib_j.loc[key, "rank1"] if key in dlib_j.index else np.nan,
                   "attribute_accuracy_mean": wide.loc[key, "mean"], "FID": fr_.value}
            abl.append(row)
    table3 = pd.DataFrame(abl)
    save_table(table3, out_dir, "table3_ablations", caption="SynthesisNet ablations (privkit)")
    print(table3.to_string(index=False))

# %% [markdown]
# ## What ε means here (privkit)
# Metric DP bounds the likelihood ratio of the releases of two faces by exp(ε·d), d the Euclidean distance of
# their clipped identity latents. A face is hidden among its neighbours when ε·d to its nearest other identity
# is around 1 or less (ratio ≤ e); between two arbitrary faces the bound is exp(ε·2·clip_norm) — large for any
# ε in the paper's sweep. Distances are those of the published (test) faces' latents, radius clip_norm.

# %%
with timer("fig5"):
    z_test, _ = net.encode(x_test)
    # the plotted curves only: per-image nearest-other-identity distances, and 201 quantiles of all cross-identity
    # pairs (tens of thousands of pairs would make a CSV of megabytes)
    meaning = X.epsilon_meaning_curves(z_test, test.identity, clip_norm=net.config.effective_clip_norm,
                                       epsilons=cfg.epsilons, n_quantiles=201
                                       ).round({"fraction": 6, "distance": 4, "eps_d": 6})  # CSV size
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.0), sharey=True)
    for ax, kind in zip(axes, ["nearest other identity", "any other identity"]):
        for e in cfg.epsilons:
            d = meaning[(meaning.pair == kind) & (meaning.epsilon == e)]
            ax.plot(d.eps_d, d.fraction, label=f"ε = {e:g}")
        ax.axvline(1.0, color="k", ls="--", lw=0.8)
        ax.set(xscale="log", xlabel="ε · d(z, z′)  (log-likelihood-ratio bound)",
               title=kind + (" (per face)" if kind.startswith("nearest") else " (quantiles of all pairs)"))
    axes[0].set_ylabel("fraction of pairs ≤ x")
    axes[1].legend(fontsize=6)
    save_figure(fig, out_dir, "fig5_epsilon_meaning", meaning)
    plt.show()
    plt.close(fig)
    q = pd.DataFrame([{"pair": k, "epsilon": e, **{f"{int(100 * p)}%": float(np.interp(p, d.fraction, d.eps_d))
                                                  for p in (0.05, 0.5, 0.95)}}
                      for (k, e), d in meaning.groupby(["pair", "epsilon"], sort=True)])
    print(f"clip_norm = {net.config.effective_clip_norm:g}; ε·2·clip_norm between any two faces: "
          + ", ".join(f"{2 * e * net.config.effective_clip_norm:g} (ε={e:g})" for e in cfg.epsilons))
    print("ε·d quantiles:")
    print(q.to_string(index=False))

# %% [markdown]
# ## Checks of the claims at this scale
# 1. The identity distance decreases in ε within bootstrap error, under both judges (the model's own identity
#    encoder and dlib). 2. At the smallest ε, dlib's rank-1 re-identification (the real recogniser, the issue's
#    attacker) lies within the 99% binomial interval of chance. The same test is run for the model's own identity
#    encoder — an attacker who knows the published model — and **reported, not enforced**: it reads what `z_att`
#    still carries, which is published without noise and not covered by the guarantee. The small attribute latent
#    (8 dimensions) is what keeps that leak small: with 64 the own encoder linked 20 of 300 faces at ε = 0.01
#    (chance 10); with 8 it sits at the edge of the chance interval (≈ 17–22 of 300 across privkit's runs; the
#    attribute terms that keep lighting and occlusion visible also keep a little identity, e.g. each identity's
#    skin chroma in this face set). 3. The noise-free path keeps identity for the real recogniser: for the release
#    without DP noise and for the autoencoder's reconstruction, dlib's rank-1 Wilson interval lies above chance and
#    the identity distance (upper CI bound) stays below the mean distance to other identities' originals —
#    otherwise the ε sweep would measure nothing. 4. The stated attribute floor: for every attribute the probe
#    reads on the real faces (accuracy more than two binomial standard errors above the majority rate), the
#    method's accuracy stays above the majority rate (a constant guess) at every ε. At the smoke scale (one epoch,
#    a dozen faces) only check 2 and the guarantee check run (checks 1, 3 and 4 are printed, not enforced).

# %%
failures, notes = [], []
for row in guarantees:  # every noisy release must state ε·2·clip_norm, δ = 0
    g_ = row["guarantee"]
    if row["method"] == "no DP noise":
        if math.isfinite(g_.epsilon):
            failures.append("the no-noise ablation must report ε = ∞")
    else:
        clip = (net.config.whole_clip_norm if row["method"] == "noise on whole latent"
                else net.config.effective_clip_norm)
        if not (math.isclose(g_.epsilon, 2 * row["epsilon"] * clip) and g_.delta == 0.0):
            failures.append(f"guarantee of {row['method']} at ε={row['epsilon']:g} is {g_.statement}")
eps_min = min(cfg.epsilons)
for judge in ("model identity encoder", "dlib"):
    r = judged[(judged.judge == judge) & (judged.method == "SynthesisNet") & (judged.epsilon == eps_min)]
    if len(r):
        r = r.iloc[0]
        lo, hi = X.rank1_chance_interval(r.rank1_chance, int(r.n_probes), confidence=0.99)
        ok = lo <= r.rank1 <= hi
        notes.append(f"{judge}: rank-1 at ε={eps_min:g} is {r.rank1:.3f}, chance {r.rank1_chance:.3f}, "
                     f"99% chance interval [{lo:.3f}, {hi:.3f}] -> {'within' if ok else 'OUTSIDE'}")
        if not ok and judge == "dlib":
            failures.append(notes[-1])
        elif not ok:
            w = judged[(judged.judge == judge) & (judged.method == "noise on whole latent") & (judged.epsilon == eps_min)]
            whole = ""
            if len(w):
                w = w.iloc[0]
                wlo, whi = X.rank1_chance_interval(w.rank1_chance, int(w.n_probes), confidence=0.99)
                whole = (f"; with noise on the whole latent: {w.rank1:.3f}, "
                         f"{'within' if wlo <= w.rank1 <= whi else 'also outside'} the chance interval")
            notes.append(f"  reported, not enforced: an attacker holding the model links {round(r.rank1 * r.n_probes)} "
                         f"of {int(r.n_probes)} faces at ε={eps_min:g} through the attribute latent, which the "
                         f"guarantee does not cover (Table 4){whole}")
for judge in ("model identity encoder", "dlib"):
    sw = judged[(judged.judge == judge) & (judged.method == "SynthesisNet")]
    if len(sw) >= 2:
        f = X.distance_decrease_failures(sw)
        notes.append(f"{judge}: identity distance decreasing in ε within bootstrap error: "
                     f"{'yes' if not f else 'NO — ' + '; '.join(f)}")
        if f and scale != "smoke":
            failures.extend(f"{judge}: {m}" for m in f)
# the noise-free path must keep identity for the real recogniser, or the ε sweep measures nothing
for method in ("no DP noise", "reconstruction (decoder)"):
    r = judged[(judged.judge == "dlib") & (judged.method == method)]
    if len(r):
        r = r.iloc[0]
        ok_rank = r.rank1_low > r.rank1_chance
        ok_dist = r.distance_high < r.other_identity_distance
        notes.append(f"dlib, {method}: rank-1 {r.rank1:.3f} [{r.rank1_low:.3f}, {r.rank1_high:.3f}] vs chance "
                     f"{r.rank1_chance:.3f} ({r.rank1 / r.rank1_chance:.1f}x); identity distance {r.identity_distance:.3f} "
                     f"[{r.distance_low:.3f}, {r.distance_high:.3f}] vs {r.other_identity_distance:.3f} to other "
                     f"identities -> {'kept' if ok_rank and ok_dist else 'NOT kept'}")
        if not (ok_rank and ok_dist) and scale != "smoke":
            failures.append(notes[-1])
if scale != "smoke":
    orig_acc = att[att.method == "original"].set_index("attribute")
    readable = [a for a, r in orig_acc.iterrows()
                if r.accuracy > r.majority + 2 * math.sqrt(r.majority * (1 - r.majority) / r.n)]
    notes.append(f"attributes the probe reads on real faces: {readable or 'none'}")
    for a in readable:
        acc_a = att[(att.method == "SynthesisNet") & (att.attribute == a)].set_index("epsilon").accuracy
        notes.append(f"  {a}: accuracy per ε {acc_a.round(3).to_dict()}, originals {orig_acc.accuracy[a]:.3f}, "
                     f"majority {orig_acc.majority[a]:.3f}")
        if not bool((acc_a > orig_acc.majority[a]).all()):
            failures.append(f"{a}: accuracy falls to {acc_a.min():.3f}, not above the majority rate "
                            f"{orig_acc.majority[a]:.3f}")
else:
    print("smoke scale: the monotonicity and attribute checks are skipped (one epoch on a dozen faces).")
print("\n".join(notes))
print("\n".join(failures) if failures else "All checks passed.")
if failures:
    raise AssertionError("; ".join(failures))

# %%
write_run_manifest(out_dir, paper="synthesisnet",
                   parameters={"scale": scale, "seed": seed, "data_root": data_root, "device": device}, device=dev,
                   timer=timer)
print({k: round(v, 1) for k, v in timer.seconds.items()}, f"total {timer.total:.1f} s")
