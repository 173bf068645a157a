"""dlib face descriptors (``dlib-resnet-fr``) with helper processes, against one process (the anchor).

dlib holds Python's global interpreter lock and uses one core, so ``privkit.encoders.dlib_fr`` splits a batch of at
least ``PARALLEL_MIN_IMAGES`` images over ``PRIVKIT_DLIB_WORKERS`` processes (default: the available cores, at most
4). This benchmark embeds the same real faces (scikit-image's LFW crops upscaled to ``--size`` px; dlib detects the
face in each) with every ``--workers`` count, side by side in one process: ``--repeats`` rounds with the counts
interleaved within each round, after one untimed warm-up call per count (which also starts the helpers). It reports
the median and minimum seconds, images per second, the speed-up over one worker (ratio of medians), and how far
the descriptors are from the one-worker result (bit-identical, or the largest absolute difference).

Usage::

    python benchmarks/bench_dlib_workers.py --out benchmarks/results/dlib_workers.csv
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from bench_encoders import real_faces

from privkit.encoders import load_encoder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts; 1 is the anchor")
    parser.add_argument("--n", type=int, default=128, help="images per call")
    parser.add_argument("--size", type=int, default=112)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if 1 not in args.workers:
        parser.error("--workers must include 1 (the anchor)")
    torch.set_num_threads(1)
    enc = load_encoder("dlib-resnet-fr", device="cpu")
    x = real_faces(args.n, args.size)

    def run(workers: int) -> tuple[float, torch.Tensor]:
        os.environ["PRIVKIT_DLIB_WORKERS"] = str(workers)
        t = time.perf_counter()
        z = enc.embed(x, batch_size=args.n)
        return time.perf_counter() - t, z

    ref = {w: run(w)[1] for w in args.workers}  # warm-up (starts the helper processes)
    times: dict[int, list[float]] = {w: [] for w in args.workers}
    for _ in range(args.repeats):
        for w in args.workers:
            dt, z = run(w)
            times[w].append(dt)
            if not torch.equal(z, ref[w]):
                raise RuntimeError(f"{w} workers gave different descriptors on a repeat")
    anchor = statistics.median(times[1])
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    rows = [{"workers": w, "median_s": statistics.median(times[w]), "min_s": min(times[w]),
             "images_per_s": args.n / statistics.median(times[w]), "speedup_vs_1": anchor / statistics.median(times[w]),
             "identical_to_1": bool(torch.equal(ref[w], ref[1])),
             "max_abs_diff_vs_1": float((ref[w] - ref[1]).abs().max()), "n": args.n, "size": args.size,
             "repeats": args.repeats, "cores": cores}
            for w in args.workers]
    for r in rows:
        print(", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
