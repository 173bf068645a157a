"""SynthesisNet trained on more identities for the same number of image passes: does it generalise better?

The convolution-only preset trains SynthesisNet on 100 of `portraits-views`' 609 identities (6 views each) and
publishes 60 others, unseen. Re-identifying a published face needs the networks to generalise to new faces, which more
training identities should help. This benchmark trains that preset on every ``--identities`` count of training
identities, with the epochs of both phases scaled so that every run makes about the same number of image passes as the
default (``epochs x identities`` held at the default's), one after the other in one process. As in the notebook, the
seed draws which identities are loaded and how they split, so the 60 published identities differ between counts (and
seeds): compare differences with the seed spread. It reports for each run

* the training time of both phases (wall and process CPU seconds) and its ratio to the anchor, the first count at
  the first seed (the default: 100 identities, seed 0);
* faceres's and dlib's rank-1 re-identification of the noise-free release and of the decoder's reconstruction
  (the notebook's protocol, ``privkit.studies.synthesisnet.tables.judge_releases``): hits, probes, chance.

One (seed, count) takes 3 to 8 minutes on a 2-core CPU.

It measures the configuration that was the default before the identity's linear path
(``_synthesisnet_runs.CONV_ONLY``: 100 training identities, a 64-d identity latent, 40 + 10 epochs, every network
convolutional); ``bench_synthesisnet_linear_path.py`` compares it with today's default.

Usage::

    python benchmarks/bench_synthesisnet_train_identities.py --out benchmarks/results/synthesisnet_train_identities.csv
"""

from __future__ import annotations

import sys

from _synthesisnet_runs import CONV_ONLY, grid_main, train_and_judge


def scaled_epochs(n_identities: int) -> tuple[int, int]:
    """Epochs of both phases that keep ``epochs x identities`` at the preset's (at least one each)."""
    f = CONV_ONLY["n_train_identities"] / n_identities
    return max(1, round(CONV_ONLY["epochs_ae"] * f)), max(1, round(CONV_ONLY["epochs_gan"] * f))


def one_run(n_identities: int, seed: int, *, judges: tuple) -> tuple[dict, list[dict]]:
    """Train the convolution-only preset on ``n_identities`` identities with ``seed`` and judge its noise-free
    release."""
    e_ae, e_gan = scaled_epochs(n_identities)
    run = train_and_judge(seed, judges=judges, scale=f"bench-n{n_identities}-s{seed}",
                          **dict(CONV_ONLY, n_train_identities=n_identities, epochs_ae=e_ae, epochs_gan=e_gan))
    rows = [{"train_identities": n_identities, "seed": seed, "epochs_ae": e_ae, "epochs_gan": e_gan,
             "train_images": run.n_train_images, "judge": r["judge"], "release": r["release"], "hits": r["hits"],
             "n_probes": r["n_probes"], "chance": r["chance"], "rank1": r["rank1"],
             "ratio_to_chance": r["rank1"] / r["chance"], "identity_distance": r["identity_distance"]}
            for r in run.rows]
    return {"train_identities": n_identities, "seed": seed, "train_wall_s": run.train_wall_s,
            "train_cpu_s": run.train_cpu_s}, rows


def main(argv: list[str] | None = None) -> int:
    return grid_main(argv, __doc__, one_run, flag="identities", type=int, default=[100, 300, 540],
                     help="training identities (at most 609 - 60 published); the first is the anchor",
                     label="training identities", on=["train_identities", "seed"])


if __name__ == "__main__":
    sys.exit(main())
