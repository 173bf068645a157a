"""The DP pose paper's two regimes side by side: frozen fine-tuning against full fine-tuning, every method.

The dppose notebook trains in the *frozen* regime only: EfficientNet-Lite0's ImageNet pyramid is frozen up to stride
16, its features are cached, and a private step costs only the trainable neck and SimCC head (257,424
parameters). In *full* fine-tuning every parameter of the network trains (958,192: the pyramid too), so each
step runs the whole network and clips per-sample gradients over all of it (exact, through torch.func); at the default
scale that is too slow for the notebook's budget on a CPU. This script trains both regimes on the default scale's data
with the notebook's settings, one after the other in one process:

* the same synthpose data (8,192 private images at 128 px, 4,096 public, 512 test; the preset's seed);
* the same warm start for both regimes: the neck and head pretrained non-privately on the public split with the
  ImageNet pyramid (the frozen network); full fine-tuning loads it into the unfrozen network, so both regimes
  start from the same function and differ only in which parameters the private steps may move;
* every method (non-private, DP-SGD, projected DP-SGD, feature DP, feature-projective DP) at one target ε (default
  the grid's largest, 0.8), the main clipping norm C and subspace rank k, δ, batch size, learning rate and the
  private runs' number of steps (``epochs``); the non-private runs take the *same* number of steps here (the
  notebook trains its non-private reference 5 times longer), so the two regimes are compared at equal cost in
  steps;
* the guarantee of each private run as the trainer reports it (ε recomputed from the steps run; the feature
  methods accounted under substitution).

The full regime processes each step's batch in parts of ``--micro-batch`` records (default 16; the same step, see
``privkit.dppose.Schedule``), which on a CPU is faster than one pass over the whole batch; the frozen regime steps
in whole batches, as the notebook does.

It writes one row per (regime, method): PCKh@0.5 on the test split, the ε that holds, σ, steps, trainable
parameters, the micro-batch, wall and CPU seconds and seconds per step, and the CPU it ran on (trained results
drift between CPUs like a seed: compare the regimes with the notebook's seed spread,
``figures/dppose/table4_seed_spread.csv``). Rows are written as each run ends, so an interrupted run keeps what
finished; ``--append`` adds the rows of a further process (e.g. ``--regimes full``) to the same file.

At the default scale on a 2-core CPU the data, frozen features and warm start take about 6 minutes, the frozen
runs about 3 minutes in all, and each full run 4 to 12 minutes. ``--scale smoke`` runs the same code on the smoke
preset in about a minute.

Usage::

    python benchmarks/bench_dppose_full_finetuning.py --out benchmarks/results/dppose_full_finetuning.csv
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

import privkit
from privkit.data.pose import load_synthpose
from privkit.dppose import (GaussianBlur, Schedule, build_pose_model, count_parameters, evaluate_pckh,
                            full_finetuning_state, train)
from privkit.dppose.features import cache_features
from privkit.dppose.train import neighbouring_for
from privkit.studies.dppose import experiments as X

from _machine import cpu_label

METHODS = ("nonprivate", "dpsgd", "projected", "feature", "feature_projective")
FIELDS = ("regime", "method", "epsilon", "clip", "k", "seed", "pckh", "epsilon_reported", "delta", "neighbouring",
          "noise_multiplier", "steps", "trainable_parameters", "micro_batch", "wall_s", "cpu_s", "s_per_step", "cpu")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="default", help="dppose preset whose data and settings are used")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--regimes", nargs="+", default=["frozen", "full"], choices=["frozen", "full"])
    parser.add_argument("--epsilon", type=float, default=None, help="target ε (default: the preset's largest)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--micro-batch", type=int, default=16,
                        help="records per forward/backward pass of the full regime (0: the whole batch in one pass)")
    parser.add_argument("--out", type=Path, default=None, help="CSV of the results (one row per regime and method)")
    parser.add_argument("--append", action="store_true",
                        help="add the rows to an existing --out (runs split over several processes) instead of "
                             "overwriting it")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = privkit.config.load("dppose", args.scale)
    if cfg.dataset != "synthpose" or cfg.backbone != "efficientnet_lite0":
        parser.error(f"--scale {args.scale}: this study needs a synthpose preset with the efficientnet_lite0 backbone")
    eps = args.epsilon if args.epsilon is not None else max(cfg.epsilons)
    clip, k, seed = cfg.clips[0], cfg.k, args.seed
    cpu = cpu_label()

    t0 = time.perf_counter()
    private = load_synthpose(split="private", n=cfg.n_private, seed=seed, size=cfg.image_size, device="cpu")
    test = load_synthpose(split="private", n=cfg.n_test, seed=seed, size=cfg.image_size, device="cpu",
                          start=cfg.n_private)
    public = load_synthpose(split="public", n=cfg.n_public, seed=seed, size=cfg.image_size, device="cpu")
    extractor = X.pose_model(cfg, seed)
    psi = GaussianBlur.for_size(cfg.image_size)
    # the frozen regime trains on cached features of every split; the warm start (both regimes) on the public ones
    needed = ("private", "test", "public") if "frozen" in args.regimes else ("public", "test")
    splits = {"private": private, "test": test, "public": public}
    cached = {name: cache_features(extractor, splits[name], batch_size=32) for name in needed}
    if "frozen" in args.regimes:
        cached["blurred"] = cache_features(extractor, private, transform=psi, batch_size=32)
    pre = train(X.pose_model(cfg, seed), cached["public"], method="nonprivate", seed=seed,
                schedule=Schedule(epochs=cfg.pretrain_epochs, batch_size=min(cfg.batch_size, len(public)),
                                  lr=cfg.pretrain_lr))
    warm = {n: v.detach().clone() for n, v in pre.model.state_dict().items()}
    print(f"data, features and warm start: {time.perf_counter() - t0:.0f} s; warm start PCKh@0.5 "
          f"{evaluate_pckh(pre.model, cached['test']).mean:.2f} on the test split; {cpu}", flush=True)

    def full_model(s: int) -> torch.nn.Module:
        return build_pose_model(cfg.image_size, backbone="efficientnet_lite0", neck_width=cfg.width, seed=s,
                                freeze_backbone=False)

    settings = X.DesignSettings(delta=cfg.delta, epochs=cfg.epochs, batch_size=cfg.batch_size, lr=cfg.lr,
                                n_public_grads=cfg.n_public_grads, refresh=cfg.refresh, accountant=cfg.accountant)
    # the frozen regime steps the small trainable part on cached features in whole batches (as the notebook)
    regime_settings = {"frozen": settings, "full": replace(settings, micro_batch=args.micro_batch or None)}
    designs = {
        # raw images: every step runs the whole network, the feature methods blur on the fly
        "full": X.DesignData(private, test, full_model, warm_state=full_finetuning_state(warm), public_set=public),
    }
    if "frozen" in args.regimes:
        designs["frozen"] = X.DesignData(cached["private"], cached["test"], lambda s: X.pose_model(cfg, s),
                                         warm_state=warm, public_set=cached["public"], blurred_set=cached["blurred"])
    rows: list[dict] = []
    writer = None
    handle = None
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        append = args.append and args.out.is_file() and args.out.stat().st_size > 0
        handle = args.out.open("a" if append else "w", newline="")
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        if not append:
            writer.writeheader()
    try:
        for regime in args.regimes:
            n_trainable = count_parameters(designs[regime].make_model(seed))
            for method in args.methods:
                private_run = method != "nonprivate"
                spec = X.RunSpec(method, "warm", eps if private_run else None, clip if private_run else None,
                                 k if method in ("projected", "feature_projective") else None, seed, ("regime",))
                (o,) = X.run_design([spec], designs[regime], regime_settings[regime], n_show=0)
                g = o.guarantee
                row = {"regime": regime, "method": method, "epsilon": spec.epsilon, "clip": spec.clip, "k": spec.k,
                       "seed": seed, "pckh": round(o.pckh.mean, 4),
                       "epsilon_reported": g.epsilon if private_run else None,
                       "delta": g.delta if private_run else None,
                       "neighbouring": neighbouring_for(method) if private_run else None,
                       "noise_multiplier": o.noise_multiplier, "steps": o.steps,
                       "trainable_parameters": n_trainable,
                       "micro_batch": regime_settings[regime].micro_batch, "wall_s": round(o.wall_seconds, 1),
                       "cpu_s": round(o.cpu_seconds, 1), "s_per_step": round(o.wall_seconds / max(o.steps, 1), 3),
                       "cpu": cpu}
                rows.append(row)
                print(f"[{regime}] {spec.label}: PCKh@0.5 {o.pckh.mean:.2f} ({o.steps} steps, {o.wall_seconds:.0f} s)"
                      + (f"; {g.statement()}" if private_run else ""), flush=True)
                if writer is not None:
                    writer.writerow(row)
                    handle.flush()
    finally:
        if handle is not None:
            handle.close()
    by = {(r["regime"], r["method"]): r for r in rows}
    for method in args.methods:
        if ("frozen", method) in by and ("full", method) in by:
            a, b = by[("frozen", method)], by[("full", method)]
            print(f"{method:>20}: frozen {a['pckh']:.2f}  full {b['pckh']:.2f}  (full - frozen {b['pckh'] - a['pckh']:+.2f};"
                  f" {b['s_per_step'] / a['s_per_step']:.0f}x the time per step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
