"""Throughput of privkit's procedural data (images per second) on this machine.

Renders each generator ``--repeats`` times after one warm-up and reports the best time as images/s:
``synthfaces`` (a batch of ``--n`` faces), ``lfw-subset-views`` (``--n`` views of the real LFW crops) and
``synthpose`` in both styles at 64 and 128 px. Tests never time anything; this script is where speed is measured.

Usage::

    python benchmarks/bench_renderers.py                      # CPU, n=256
    python benchmarks/bench_renderers.py --device cuda --n 4096 --out build/bench_renderers.csv
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import torch

from privkit import resolve_device
from privkit.data import load_faces, load_pose


def _best(fn, repeats: int, device: torch.device) -> float:
    fn()  # warm-up (also fills caches of background photos)
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=256, help="images per batch")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="optional CSV path")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    dev = resolve_device(a.device)
    per_id = 8
    cases = {
        "synthfaces 64px": lambda: load_faces("synthfaces", n_identities=max(1, a.n // per_id), images_per_identity=per_id,
                                              size=64, device=dev),
        "lfw-subset-views 64px": lambda: load_faces("lfw-subset-views", n_identities=min(100, max(1, a.n // 12)),
                                                    images_per_identity=12, size=64, device=dev),
        "synthpose private 64px": lambda: load_pose(split="private", n=a.n, size=64, device=dev),
        "synthpose public 64px": lambda: load_pose(split="public", n=a.n, size=64, device=dev),
        "synthpose private 128px": lambda: load_pose(split="private", n=a.n, size=128, device=dev),
    }
    rows = []
    print(f"device={dev} threads={torch.get_num_threads()} n={a.n}")
    print(f"{'generator':<26} {'images':>7} {'seconds':>9} {'images/s':>10}")
    for name, fn in cases.items():
        n_img = len(fn())
        sec = _best(fn, a.repeats, dev)
        rows.append({"generator": name, "images": n_img, "seconds": sec, "images_per_s": n_img / sec,
                     "device": str(dev), "threads": torch.get_num_threads()})
        print(f"{name:<26} {n_img:>7} {sec:>9.3f} {n_img / sec:>10.1f}")
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        with open(a.out, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
