"""Speed of the DP pose notebook's frozen-feature cache: channels-last against the default layout.

``PoseNet.features`` runs the frozen pyramid (EfficientNet-Lite0 or MoveNet-Lightning up to stride 16) with
channels-last weights and inputs, which oneDNN's CPU convolutions run faster.  The anchor is the same frozen
module, deep-copied with contiguous (NCHW) weights and fed NCHW inputs: what ``features`` did before.  Both run side
by side in one process on the same images, interleaved over ``--repeats`` rounds; the table gives the median
seconds per image and the ratio anchor / channels-last, and checks that the two agree up to float rounding.

Usage::

    python benchmarks/bench_frozen_features.py                      # 128 px, batch 32 (the notebook's), 2 threads
    python benchmarks/bench_frozen_features.py --out benchmarks/results/frozen_features.csv
"""

from __future__ import annotations

import argparse
import copy
import csv
import statistics
import sys
import time
from pathlib import Path

import torch

from privkit.dppose import build_pose_model


def _anchor(net: torch.nn.Module):
    frozen = copy.deepcopy(net.frozen).to(memory_format=torch.contiguous_format)

    @torch.no_grad()
    def run(images: torch.Tensor, bs: int) -> torch.Tensor:
        return torch.cat([frozen((images[i:i + bs] - net.mean) / net.std) for i in range(0, len(images), bs)])

    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=128)
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    x = torch.rand(args.images, 3, args.size, args.size, generator=torch.Generator().manual_seed(0))
    rows = []
    for backbone in ("efficientnet_lite0", "movenet_lightning"):
        net = build_pose_model(args.size, backbone=backbone, neck_width=64, seed=0).eval()
        modes = {"default layout (anchor)": _anchor(net),
                 "channels-last (PoseNet.features)": lambda im, bs, net=net: net.features(im, batch_size=bs)}
        outs = {name: fn(x[: args.batch], args.batch) for name, fn in modes.items()}  # warm-up
        a, b = outs.values()
        rel = float((a - b).abs().max() / a.abs().max())
        times: dict[str, list[float]] = {name: [] for name in modes}
        for _ in range(args.repeats):
            for name, fn in modes.items():
                t = time.perf_counter()
                fn(x, args.batch)
                times[name].append(time.perf_counter() - t)
        anchor = statistics.median(times["default layout (anchor)"])
        for name, ts in times.items():
            med = statistics.median(ts)
            rows.append({"backbone": backbone, "mode": name, "ms_per_image": round(1000 * med / args.images, 2),
                         "speedup_vs_anchor": round(anchor / med, 2), "max_rel_diff": f"{rel:.1e}",
                         "size": args.size, "batch": args.batch, "threads": args.threads})
    _write_csv(rows, sys.stdout)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as fh:
            _write_csv(rows, fh)
    return 0


def _write_csv(rows: list[dict], fh) -> None:
    w = csv.DictWriter(fh, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)


if __name__ == "__main__":
    raise SystemExit(main())
