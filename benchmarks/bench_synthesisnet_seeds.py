"""SynthesisNet's noise-free re-identification across seeds and network widths: is the 5x-chance target resolvable?

The default scale judges one trained SynthesisNet (seed 0) with faceres and dlib: rank-1 re-identification of the
noise-free release among the 120 judged faces of the 60 published identities (chance 1/60). privkit's target is
faceres rank-1 >= 5x chance, i.e. >= 10 of 120 hits. This benchmark trains the default preset (same data, schedule
and protocol as the notebook, ``privkit.studies.synthesisnet.tables.judge_releases``) for every ``--seeds`` seed
(the seed draws the identity split, the views and the weights) and every ``--widths`` network width, one after the
other in one process, and reports for each

* the training time of both phases (wall and process CPU seconds) and its ratio to the anchor, the first width at
  the first seed (the default, width 16, seed 0);
* faceres's and dlib's rank-1 of the noise-free release and of the decoder's reconstruction: hits, probes, chance
  and the hits' ratio to chance.

One run on a 2-core CPU takes about five minutes per (seed, width) at width 16 and eight at width 32.

Usage::

    python benchmarks/bench_synthesisnet_seeds.py --out benchmarks/results/synthesisnet_seeds.csv
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


def one_run(width: int, seed: int, *, judges: tuple) -> tuple[dict, list[dict]]:
    """Train the default preset at ``width`` with ``seed`` and judge its noise-free release and reconstruction."""
    cfg = replace(privkit.config.load("synthesisnet", "default"), width=width)
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
        scale=f"bench-w{width}-s{seed}", seed=seed).judged
    rows = []
    for r in judged[judged.judge.isin(["faceres", "dlib"]) & (judged.method != "original")].itertuples():
        hits = int(round(r.rank1 * r.n_probes))
        rows.append({"width": width, "seed": seed, "judge": r.judge, "release": r.method, "hits": hits,
                     "n_probes": int(r.n_probes), "chance": r.rank1_chance, "rank1": r.rank1,
                     "ratio_to_chance": r.rank1 / r.rank1_chance, "identity_distance": r.identity_distance})
    return {"width": width, "seed": seed, "train_wall_s": wall, "train_cpu_s": cpu}, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[16, 32], help="network widths; the first is the anchor")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=None, help="CSV of the results (one row per run, judge, release)")
    args = parser.parse_args(argv)
    judges = (load_faceres_attributes(device="cpu"), load_encoder("dlib-resnet-fr", device="cpu"))
    costs, rows = [], []
    for seed in args.seeds:
        for width in args.widths:
            cost, judged = one_run(width, seed, judges=judges)
            costs.append(cost)
            rows += judged
            print(f"width {width}, seed {seed}: training {cost['train_wall_s']:.0f} s wall", flush=True)
    cost = pd.DataFrame(costs)
    cost["train_ratio_to_anchor"] = cost.train_wall_s / cost.train_wall_s.iloc[0]
    df = pd.DataFrame(rows).merge(cost, on=["width", "seed"])
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df.to_string(index=False))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
