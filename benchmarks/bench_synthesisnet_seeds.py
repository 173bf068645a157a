"""SynthesisNet's noise-free re-identification across seeds and network widths: is the 5x-chance target resolvable?

The default scale judges one trained SynthesisNet (seed 0) with faceres and dlib: rank-1 re-identification of the
noise-free release among the 120 judged faces of the 60 published identities (chance 1/60). privkit's target is
faceres rank-1 >= 5x chance, i.e. >= 10 of 120 hits. This benchmark trains the convolution-only preset (same data,
schedule and protocol as the notebook, ``privkit.studies.synthesisnet.tables.judge_releases``) for every ``--seeds``
seed (the seed draws the identity split, the views and the weights) and every ``--widths`` network width, one after
the other in one process, and reports for each

* the training time of both phases (wall and process CPU seconds) and its ratio to the anchor, the first width at
  the first seed (the default, width 16, seed 0);
* faceres's and dlib's rank-1 of the noise-free release and of the decoder's reconstruction: hits, probes, chance
  and the hits' ratio to chance.

One run on a 2-core CPU takes about five minutes per (seed, width) at width 16 and eight at width 32.

It measures the configuration that was the default before the identity's linear path
(``_synthesisnet_runs.CONV_ONLY``: 100 training identities, a 64-d identity latent, 40 + 10 epochs, every network
convolutional); ``bench_synthesisnet_linear_path.py`` compares it with today's default.

Usage::

    python benchmarks/bench_synthesisnet_seeds.py --out benchmarks/results/synthesisnet_seeds.csv
"""

from __future__ import annotations

import sys

from _synthesisnet_runs import CONV_ONLY, grid_main, train_and_judge


def one_run(width: int, seed: int, *, judges: tuple) -> tuple[dict, list[dict]]:
    """Train the convolution-only preset at ``width`` with ``seed`` and judge its noise-free release and
    reconstruction."""
    run = train_and_judge(seed, judges=judges, scale=f"bench-w{width}-s{seed}", **CONV_ONLY, width=width)
    rows = [{"width": width, "seed": seed, "judge": r["judge"], "release": r["release"], "hits": r["hits"],
             "n_probes": r["n_probes"], "chance": r["chance"], "rank1": r["rank1"],
             "ratio_to_chance": r["rank1"] / r["chance"], "identity_distance": r["identity_distance"]}
            for r in run.rows]
    return {"width": width, "seed": seed, "train_wall_s": run.train_wall_s, "train_cpu_s": run.train_cpu_s}, rows


def main(argv: list[str] | None = None) -> int:
    return grid_main(argv, __doc__, one_run, flag="widths", type=int, default=[16, 32],
                     help="network widths; the first is the anchor", label="width", on=["width", "seed"])


if __name__ == "__main__":
    sys.exit(main())
