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
import sys
from pathlib import Path

from _synthesisnet_runs import run_grid, train_and_judge

import privkit


def one_size(size: int, *, seed: int, judges: tuple) -> tuple[dict, list[dict]]:
    """Train the default preset at ``size`` px and judge its noise-free release and reconstruction."""
    cfg = privkit.config.load("synthesisnet", "default")
    run = train_and_judge(seed, judges=judges, scale=f"bench-{size}px", image_size=size)
    rows = [{"image_size": size, "judge": r["judge"], "release": r["release"], "rank1": r["rank1"], "hits": r["hits"],
             "n_probes": r["n_probes"], "chance": r["chance"], "identity_distance": r["identity_distance"]}
            for r in run.rows]
    return {"image_size": size, "train_wall_s": run.train_wall_s, "train_cpu_s": run.train_cpu_s,
            "n_train_images": run.n_train_images, "epochs_ae": cfg.epochs_ae, "epochs_gan": cfg.epochs_gan}, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128], help="image sides; the first is the anchor")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="CSV of the results (one row per size and judge)")
    args = parser.parse_args(argv)
    run_grid([args.seed], args.sizes, lambda size, seed, judges: one_size(size, seed=seed, judges=judges),
             label="image size", on=["image_size"], out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
