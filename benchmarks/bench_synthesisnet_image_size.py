"""SynthesisNet at 64 px against 128 px: training cost and what the real recognisers still recognise.

The default scale's SynthesisNet trains on 64-px aligned crops. This benchmark trains the default preset's networks
(same identities, views, schedule, width and seed) at every ``--sizes`` side, one after the other in one process, and
reports for each size

* the training time of both phases (wall and process CPU seconds) and its ratio to the anchor, the first size
  (the default, 64 px);
* faceres's and dlib's rank-1 re-identification of the noise-free release and of the decoder's reconstruction:
  each judged face against the gallery of the originals of all published identities (the notebook's protocol,
  ``privkit.studies.synthesisnet.tables.judge_releases``), with the hit count, the number of probes and chance.

The numbers decide which size the default scale uses (the README quotes them from the CSV this writes). One run
on a 2-core CPU takes about a quarter of an hour.

Usage::

    python benchmarks/bench_synthesisnet_image_size.py --out benchmarks/results/synthesisnet_image_size.csv
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch

import privkit
from privkit.data import load_faces
from privkit.encoders import load_encoder
from privkit.encoders.human_faces import load_faceres_attributes
from privkit.studies.synthesisnet import experiments as X
from privkit.studies.synthesisnet import tables as T
from privkit.synthesisnet import SynthesisNet, aligned_faces


def one_size(size: int, *, seed: int, judges: tuple) -> tuple[dict, list[dict]]:
    """Train the default preset at ``size`` px and judge its noise-free release and reconstruction."""
    cfg = replace(privkit.config.load("synthesisnet", "default"), image_size=size)
    faces = load_faces(cfg.face_set, n_identities=cfg.n_train_identities + cfg.n_test_identities,
                       images_per_identity=cfg.images_per_identity, size=cfg.render_size, seed=seed)
    faces = aligned_faces(faces, size=cfg.image_size, margin=cfg.align_margin)
    train, test = X.split_identities(faces, n_train=cfg.n_train_identities, n_test=cfg.n_test_identities, seed=seed)
    torch.set_num_threads(1)  # as the notebook trains
    t0, c0 = time.perf_counter(), time.process_time()
    net = SynthesisNet(X.net_config(cfg)).fit(train, epochs_ae=cfg.epochs_ae, epochs_gan=cfg.epochs_gan,
                                              batch_size=cfg.batch_size, seed=seed, device="cpu")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    releases = {("no DP noise", math.inf): X.with_noise(net, "none").publish(test.images, epsilon=None)[0].cpu(),
                ("reconstruction (decoder)", math.inf): net.reconstruct(test.images).cpu()}
    torch.set_num_threads(2)  # as the notebook judges
    faceres, dlib = judges
    judged = T.judge_releases(
        releases, faceres=faceres, dlib=dlib, own=lambda imgs: net.encode(imgs)[0].cpu(), train=train, test=test,
        cfg=replace(cfg, judge_epsilons=(), baseline_epsilons=(), n_bootstrap=0), dataset=faces.name,
        scale=f"bench-{size}px", seed=seed).judged
    rows = []
    for r in judged[judged.judge.isin(["faceres", "dlib"]) & (judged.method != "original")].itertuples():
        rows.append({"image_size": size, "judge": r.judge, "release": r.method, "rank1": r.rank1,
                     "hits": int(round(r.rank1 * r.n_probes)), "n_probes": int(r.n_probes), "chance": r.rank1_chance,
                     "identity_distance": r.identity_distance})
    return {"image_size": size, "train_wall_s": wall, "train_cpu_s": cpu,
            "n_train_images": len(train), "epochs_ae": cfg.epochs_ae, "epochs_gan": cfg.epochs_gan}, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128], help="image sides; the first is the anchor")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="CSV of the results (one row per size and judge)")
    args = parser.parse_args(argv)
    judges = (load_faceres_attributes(device="cpu"), load_encoder("dlib-resnet-fr", device="cpu"))
    costs, rows = [], []
    for size in args.sizes:
        cost, judged = one_size(size, seed=args.seed, judges=judges)
        costs.append(cost)
        rows += judged
        print(f"{size} px: training {cost['train_wall_s']:.0f} s wall, {cost['train_cpu_s']:.0f} s CPU", flush=True)
    cost = pd.DataFrame(costs)
    cost["train_ratio_to_anchor"] = cost.train_wall_s / cost.train_wall_s.iloc[0]
    df = pd.DataFrame(rows).merge(cost, on="image_size")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df.to_string(index=False))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
