"""SynthesisNet with and without the identity's linear path: what the real recognisers recognise, and what it costs.

Before the linear path, the default scale's SynthesisNet (every network convolutional, 100 training identities, a
64-d identity latent, 40 + 10 epochs; ``_synthesisnet_runs.CONV_ONLY``) gave noise-free releases that faceres
re-identified 1 to 9 times in 120 (chance 2), in every lever the other SynthesisNet benchmarks measured. Today's
default gives the identity a linear path fitted in closed form (``SynthesisNetConfig.linear_path``). This benchmark
trains, for every ``--seeds`` seed, one after the other in one process:

* ``conv-only``: the earlier default (the anchor of the training-time ratios, at the first seed);
* ``linear, conv-only data``: the same data, latent and schedule with the linear path;
* ``closed form only``: today's default data and latent, with the linear path and no training epoch (what the closed
  form alone gives);
* ``default``: today's default preset.

and reports faceres's and dlib's rank-1 re-identification of the noise-free release and of the decoder's
reconstruction (the notebook's protocol, ``privkit.studies.synthesisnet.tables.judge_releases``: hits, probes,
chance), the training time, and the leave-one-out rank-1 of the attribute latent ``z_att`` among the published faces
with the upper end of its 99 % chance interval (``z_att`` is published without noise, so a linear path must not
push identity into it). The first two configurations load the same identities (they publish the same 60 faces), the
last two another set (400 training identities are loaded with the 60): compare across the pairs with the seed
spread. One seed takes about 15 minutes on a 2-core CPU.

Usage::

    python benchmarks/bench_synthesisnet_linear_path.py --out benchmarks/results/synthesisnet_linear_path.csv
"""

from __future__ import annotations

import sys

from _synthesisnet_runs import CONV_ONLY, grid_main, train_and_judge

#: The configurations, as overrides of the default preset.
CONFIGS = {
    "conv-only": CONV_ONLY,
    "linear, conv-only data": dict(CONV_ONLY, linear_path=True),
    "closed form only": dict(epochs_ae=0, epochs_gan=0),
    "default": {},
}


def one_run(config: str, seed: int, *, judges: tuple) -> tuple[dict, list[dict]]:
    """Train configuration ``config`` with ``seed`` and judge its noise-free release and reconstruction."""
    slug = config.replace(", ", "-").replace(" ", "-")
    run = train_and_judge(seed, judges=judges, scale=f"bench-{slug}-s{seed}", **CONFIGS[config])
    rows = [{"config": config, "seed": seed, "train_images": run.n_train_images, "judge": r["judge"],
             "release": r["release"], "hits": r["hits"], "n_probes": r["n_probes"], "chance": r["chance"],
             "rank1": r["rank1"], "ratio_to_chance": r["rank1"] / r["chance"],
             "identity_distance": r["identity_distance"], "z_att_rank1": run.att_leak["rank1"],
             "z_att_chance": run.att_leak["chance"], "z_att_chance_high": run.att_leak["chance_high"]}
            for r in run.rows]
    return {"config": config, "seed": seed, "train_wall_s": run.train_wall_s, "train_cpu_s": run.train_cpu_s}, rows


def main(argv: list[str] | None = None) -> int:
    return grid_main(argv, __doc__, one_run, flag="configs", default=list(CONFIGS), choices=list(CONFIGS),
                     help="configurations; the first is the anchor", label="configuration", on=["config", "seed"])


if __name__ == "__main__":
    sys.exit(main())
