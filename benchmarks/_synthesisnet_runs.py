"""Shared by the SynthesisNet benchmarks: train the default preset with overrides and judge its noise-free release.

Not a benchmark itself (the leading underscore): the ``bench_synthesisnet_*.py`` scripts import it (they run as
scripts from the repository root, with ``benchmarks/`` on ``sys.path``).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from _machine import cpu_label

import privkit
from privkit.data import load_faces
from privkit.studies.synthesisnet import experiments as X
from privkit.studies.synthesisnet import tables as T
from privkit.synthesisnet import SynthesisNet, aligned_faces


#: The default preset's fields as they were before the identity's linear path (100 training identities, a 64-d
#: identity latent of radius 10 per coordinate, 40 + 10 epochs, every network convolutional). The image-size, seeds
#: and training-identities benchmarks measured this configuration; they keep it, so their CSVs stay reproducible.
CONV_ONLY = dict(n_train_identities=100, id_dim=64, linear_path=False, clip_norm=None, epochs_ae=40, epochs_gan=10)


@dataclass
class JudgedRun:
    """One trained network: training wall and CPU seconds, training images, one row per (judge, release), and the
    leave-one-out rank-1 of ``z_att`` among the published faces with its chance rate (``att_leak``)."""

    train_wall_s: float
    train_cpu_s: float
    n_train_images: int
    rows: list[dict[str, Any]]
    att_leak: dict[str, float]


def train_and_judge(seed: int, *, judges: tuple, scale: str, **overrides: Any) -> JudgedRun:
    """Train the default preset (with ``overrides`` of its fields) and judge the noise-free release and the
    decoder's reconstruction with faceres and dlib, as the notebook does
    (:func:`privkit.studies.synthesisnet.tables.judge_releases`)."""
    cfg = replace(privkit.config.load("synthesisnet", "default"), **overrides)
    faces = load_faces(cfg.face_set, n_identities=cfg.n_train_identities + cfg.n_test_identities,
                       images_per_identity=cfg.images_per_identity, size=cfg.render_size, seed=seed)
    faces = aligned_faces(faces, size=cfg.image_size, margin=cfg.align_margin)
    train, test = X.split_identities(faces, n_train=cfg.n_train_identities, n_test=cfg.n_test_identities, seed=seed)
    torch.set_num_threads(2)  # as the notebook trains (the three convolution-only CSVs were measured with one thread)
    t0, c0 = time.perf_counter(), time.process_time()
    net = SynthesisNet(X.net_config(cfg)).fit(train, epochs_ae=cfg.epochs_ae, epochs_gan=cfg.epochs_gan,
                                              batch_size=cfg.batch_size, seed=seed, device="cpu")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    releases = {("no DP noise", math.inf): X.with_noise(net, "none").publish(test.images, epsilon=None)[0].cpu(),
                ("reconstruction (decoder)", math.inf): net.reconstruct(test.images).cpu()}
    faceres, dlib = judges
    judged = T.judge_releases(
        releases, faceres=faceres, dlib=dlib, own=lambda imgs: net.encode(imgs)[0].cpu(), train=train, test=test,
        cfg=replace(cfg, judge_epsilons=(), baseline_epsilons=(), n_bootstrap=0), dataset=faces.name, scale=scale,
        seed=seed).judged
    rows = [{"judge": r.judge, "release": r.method, "hits": int(round(r.rank1 * r.n_probes)),
             "n_probes": int(r.n_probes), "chance": r.rank1_chance, "rank1": r.rank1,
             "identity_distance": r.identity_distance}
            for r in judged[judged.judge.isin(["faceres", "dlib"]) & (judged.method != "original")].itertuples()]
    leak = X.latent_identity_leakage(net.encode(test.images)[1].cpu(), test.identity)
    return JudgedRun(wall, cpu, len(train), rows, {k: leak[k] for k in ("rank1", "chance", "chance_high")})


def write_results(costs: list[dict[str, Any]], rows: list[dict[str, Any]], *, on: list[str], out: Any) -> None:
    """Join each run's training cost (with its ratio to the anchor, the first run) to its judged rows, add the CPU
    (:func:`cpu_label`), print the table and write it to ``out`` (a path; ``None`` prints only)."""
    import pandas as pd

    cost = pd.DataFrame(costs)
    cost["train_ratio_to_anchor"] = cost.train_wall_s / cost.train_wall_s.iloc[0]
    df = pd.DataFrame(rows).merge(cost, on=on)
    df["cpu"] = cpu_label()
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(df.to_string(index=False))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(out, index=False)
        print(f"wrote {out}")


def run_grid(seeds: Sequence[int], values: Sequence[Any], one_run: Callable[..., tuple[dict, list[dict]]], *,
             label: str, on: list[str], out: Any) -> None:
    """Call ``one_run(value, seed, judges=...)`` for every seed and value (values inner), one after the other with
    the same two judges (faceres with its heads, and dlib), then :func:`write_results` (``on``: the columns that
    name a run)."""
    from privkit.encoders import load_encoder
    from privkit.encoders.human_faces import load_faceres_attributes

    judges = (load_faceres_attributes(device="cpu"), load_encoder("dlib-resnet-fr", device="cpu"))
    costs, rows = [], []
    for seed in seeds:
        for value in values:
            cost, judged = one_run(value, seed, judges=judges)
            costs.append(cost)
            rows += judged
            print(f"{label} {value}, seed {seed}: training {cost['train_wall_s']:.0f} s wall, "
                  f"{cost['train_cpu_s']:.0f} s CPU", flush=True)
    write_results(costs, rows, on=on, out=out)


def grid_main(argv: list[str] | None, doc: str, one_run: Callable[..., tuple[dict, list[dict]]], *, flag: str,
              label: str, on: list[str], **values: Any) -> int:
    """The command line of a benchmark that runs :func:`run_grid` over ``--seeds`` (default 0 and 1) and the values
    of ``--<flag>`` (``values``: that option's ``argparse`` settings; the first value is the anchor), writing
    ``--out``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument(f"--{flag}", nargs="+", **values)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--out", type=Path, default=None, help="CSV of the results (one row per run, judge, release)")
    args = parser.parse_args(argv)
    run_grid(args.seeds, getattr(args, flag), one_run, label=label, on=on, out=args.out)
    return 0
