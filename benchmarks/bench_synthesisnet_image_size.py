"""SynthesisNet at 64 px against 128 px: training cost and what the real recognisers still recognise.

The default scale's SynthesisNet trains on 64-px aligned crops. This benchmark trains one preset's networks (same
identities, views, schedule, width and seed) at every ``--sizes`` side, one after the other in one process, and
reports for each size

* the training time of both phases (wall and process CPU seconds) and its ratio to the anchor, the first size
  (the default, 64 px);
* faceres's and dlib's rank-1 re-identification of the noise-free release and of the decoder's reconstruction:
  each judged face against the gallery of the originals of all published identities (the notebook's protocol,
  ``privkit.studies.synthesisnet.tables.judge_releases``), with the hit count, the number of probes and chance.

The numbers decide which size the default scale uses (the README quotes them from the CSV this writes). One run
on a 2-core CPU takes about a quarter of an hour.

``--preset conv-only`` (the default of this script, which wrote ``synthesisnet_image_size.csv``) measures the
configuration that was the default before the identity's linear path (``_synthesisnet_runs.CONV_ONLY``: 100 training
identities, a 64-d identity latent, 40 + 10 epochs, every network convolutional); ``--preset default`` measures
today's default preset (``synthesisnet_image_size_default.csv``). ``bench_synthesisnet_linear_path.py`` compares the
two presets at 64 px.

Usage::

    python benchmarks/bench_synthesisnet_image_size.py --out benchmarks/results/synthesisnet_image_size.csv
    python benchmarks/bench_synthesisnet_image_size.py --preset default \
        --out benchmarks/results/synthesisnet_image_size_default.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from _synthesisnet_runs import CONV_ONLY, run_grid, train_and_judge

import privkit

#: The presets this benchmark can measure, as overrides of the default scale's preset.
PRESETS = {"conv-only": CONV_ONLY, "default": {}}


def one_size(size: int, *, seed: int, judges: tuple, preset: str = "conv-only") -> tuple[dict, list[dict]]:
    """Train ``preset`` at ``size`` px and judge its noise-free release and reconstruction."""
    over = dict(PRESETS[preset], image_size=size)
    run = train_and_judge(seed, judges=judges, scale=f"bench-{preset}-{size}px", **over)
    cfg = privkit.config.load("synthesisnet", "default")
    rows = [{"image_size": size, "judge": r["judge"], "release": r["release"], "rank1": r["rank1"], "hits": r["hits"],
             "n_probes": r["n_probes"], "chance": r["chance"], "identity_distance": r["identity_distance"]}
            for r in run.rows]
    return {"image_size": size, "train_wall_s": run.train_wall_s, "train_cpu_s": run.train_cpu_s,
            "n_train_images": run.n_train_images, "epochs_ae": over.get("epochs_ae", cfg.epochs_ae),
            "epochs_gan": over.get("epochs_gan", cfg.epochs_gan)}, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 128], help="image sides; the first is the anchor")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--preset", default="conv-only", choices=list(PRESETS),
                        help="conv-only: the default before the identity's linear path; default: today's")
    parser.add_argument("--out", type=Path, default=None, help="CSV of the results (one row per size and judge)")
    args = parser.parse_args(argv)
    run_grid([args.seed], args.sizes,
             lambda size, seed, judges: one_size(size, seed=seed, judges=judges, preset=args.preset),
             label="image size", on=["image_size"], out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
