"""Fan-out through Slurm: the same DP pose training jobs in process, on the local Slurm with one single-CPU worker,
and with two, side by side in one run.

The jobs are DP-SGD runs of the smoke-size DP pose design (frozen EfficientNet-Lite0 features, the notebook's
network and settings) trained for ``--epochs`` epochs, so that each takes at least about 30 s on one core; every
job is the real ``dppose.train`` job the notebook submits, over design data stored once.

* ``in_process_s``: the jobs one after another in this process (one torch thread, as a 1-CPU Slurm task gets);
* ``slurm_1_worker_s``: the same jobs on Slurm, ``array_parallelism=1``, one CPU a task (each through sbatch,
  a fresh Python process, the store on disk);
* ``slurm_2_workers_s``: the same with ``array_parallelism=2``;
* ``packed_1_worker_s`` / ``packed_2_workers_s``: the same two with ``jobs_per_task=2`` (each task runs two jobs
  one after another, so a worker's start-up -- Python, torch and privkit imports -- is paid once for two jobs).

``speedup = slurm_1_worker_s / slurm_2_workers_s`` (target >= 1.7 on 2 cores),
``overhead_per_job_s = (slurm_1_worker_s - in_process_s) / n_jobs`` (target <= 5 s), and the same two for the
packed tasks (``packed_speedup``, ``packed_overhead_per_job_s``), in ``benchmarks/results/executor_fanout.csv``
with the CPU's name. Needs a running cluster with SLURM_CONF set
(``eval "$(bash tools/slurm/cluster.sh start | tail -n 1)"``).

    python benchmarks/bench_executor.py [--jobs 4] [--epochs 150]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import cpu_label  # noqa: E402

import privkit  # noqa: E402
from privkit.data import load_pose  # noqa: E402
from privkit.data.pose import load_synthpose  # noqa: E402
from privkit.dppose import GaussianBlur, Schedule, train  # noqa: E402
from privkit.dppose.features import cache_features  # noqa: E402
from privkit.jobs import LocalExecutor, ResultStore, SlurmExecutor, SlurmOptions  # noqa: E402
from privkit.studies.dppose import experiments as X  # noqa: E402
from privkit.studies.dppose import jobs as J  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "executor_fanout.csv"


def design(epochs: int, seed: int = 0):
    cfg = privkit.config.load("dppose", "smoke", epochs=epochs)
    model = J.ModelSpec(cfg.backbone, cfg.image_size, cfg.width)
    private = load_synthpose(split="private", n=cfg.n_private, seed=seed, size=cfg.image_size, device="cpu")
    test = load_synthpose(split="private", n=cfg.n_test, seed=seed, size=cfg.image_size, device="cpu",
                          start=cfg.n_private)
    public = load_pose("synthpose", split="public", n=cfg.n_public, seed=seed, size=cfg.image_size, device="cpu")
    ext = model.build(seed)
    psi = GaussianBlur.for_size(cfg.image_size)
    blurred = cache_features(ext, private, transform=psi, batch_size=32)
    private, test, public = (cache_features(ext, d, batch_size=32) for d in (private, test, public))
    pre = train(model.build(seed), public, method="nonprivate", seed=seed, device="cpu",
                schedule=Schedule(epochs=cfg.pretrain_epochs, batch_size=min(cfg.batch_size, len(public)),
                                  lr=cfg.pretrain_lr))
    warm = {k: v.detach().clone() for k, v in pre.model.state_dict().items()}
    data = X.DesignData(private, test, model.build, warm_state=warm, public_set=public, blurred_set=blurred)
    return cfg, model, data


def timed(runs, cfg, model, data, store, executor) -> float:
    t0 = time.perf_counter()
    J.train_runs(runs, data, J.design_settings(cfg), model=model, store=store, executor=executor, n_show=0,
                 data_spec=J.design_data_spec(cfg, part="bench", scale="smoke", seed=0, data_root=None))
    return time.perf_counter() - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=4)
    p.add_argument("--epochs", type=int, default=150)
    ns = p.parse_args()
    if not os.environ.get("SLURM_CONF"):
        print("SLURM_CONF is not set: start the cluster first (bash tools/slurm/cluster.sh start)", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    cfg, model, data = design(ns.epochs)
    runs = [X.RunSpec("dpsgd", "warm", 0.8, cfg.clips[0], None, s, ("bench",)) for s in range(ns.jobs)]
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parents[1] / "build") as tmp:
        root = Path(tmp)
        local = timed(runs, cfg, model, data, ResultStore(root / "local"), LocalExecutor(device="cpu"))
        one = timed(runs, cfg, model, data, ResultStore(root / "one"),
                    SlurmExecutor(SlurmOptions(cpus_per_job=1, array_parallelism=1, poll_s=0.5), device="cpu"))
        two = timed(runs, cfg, model, data, ResultStore(root / "two"),
                    SlurmExecutor(SlurmOptions(cpus_per_job=1, array_parallelism=2, poll_s=0.5), device="cpu"))
        p1 = timed(runs, cfg, model, data, ResultStore(root / "p1"),
                   SlurmExecutor(SlurmOptions(cpus_per_job=1, array_parallelism=1, jobs_per_task=2, poll_s=0.5),
                                 device="cpu"))
        p2 = timed(runs, cfg, model, data, ResultStore(root / "p2"),
                   SlurmExecutor(SlurmOptions(cpus_per_job=1, array_parallelism=2, jobs_per_task=2, poll_s=0.5),
                                 device="cpu"))
    row = {"cpu": cpu_label(), "cores": os.cpu_count(), "n_jobs": ns.jobs, "epochs": ns.epochs,
           "in_process_s": local, "in_process_per_job_s": local / ns.jobs, "slurm_1_worker_s": one,
           "slurm_2_workers_s": two, "speedup": one / two, "overhead_per_job_s": (one - local) / ns.jobs,
           "packed_1_worker_s": p1, "packed_2_workers_s": p2, "packed_speedup": p1 / p2,
           "packed_overhead_per_job_s": (p1 - local) / ns.jobs, "speedup_target": 1.7, "overhead_target_s": 5.0}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame([row]).to_csv(OUT, index=False)
    print(pd.DataFrame([row]).T.to_string(header=False))
    print(f"written to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
