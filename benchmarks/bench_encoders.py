"""Throughput of privkit's encoders (images per second), with ``pixels`` as the named anchor.

Inputs are real photos: the first faces of scikit-image's LFW subset (25×25, replicated to RGB) upscaled to
``--size`` pixels, so the face encoders see faces (dlib detects most of them). Each encoder embeds the same
batch ``--repeats`` times after one warm-up call; the best time is reported.

Usage::

    python benchmarks/bench_encoders.py                       # all available default-scale encoders, CPU
    python benchmarks/bench_encoders.py --threads 1 2         # one and two threads, side by side
    python benchmarks/bench_encoders.py --encoders dlib-resnet-fr pixels --n 32 --out build/bench_encoders.csv
    python benchmarks/bench_encoders.py --scale paper --data-root /data --device cuda
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import torch

from privkit.encoders import list_encoders, load_encoder

ANCHOR = "pixels"


def real_faces(n: int, size: int) -> torch.Tensor:
    """``n`` LFW face crops (cycled if n > 100) upscaled bilinearly to ``size``², as (n, 3, size, size)."""
    from skimage import data

    faces = torch.from_numpy(data.lfw_subset()[:100]).float().clamp(0, 1)
    idx = torch.arange(n) % faces.shape[0]
    x = faces[idx][:, None].expand(-1, 3, -1, -1)
    return torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False).clamp(0, 1)


def bench(name: str, images: torch.Tensor, *, device: str, batch_size: int, repeats: int, data_root) -> dict:
    t0 = time.perf_counter()
    enc = load_encoder(name, device=device, data_root=data_root)
    load_s = time.perf_counter() - t0
    x = images.to(enc.device)
    enc.embed(x[: min(len(x), batch_size)], batch_size=batch_size)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        if enc.device.type == "cuda":
            torch.cuda.synchronize(enc.device)
        t = time.perf_counter()
        enc.embed(x, batch_size=batch_size)
        if enc.device.type == "cuda":
            torch.cuda.synchronize(enc.device)
        best = min(best, time.perf_counter() - t)
    return {
        "encoder": name,
        "kind": enc.kind,
        "dim": enc.dim,
        "device": str(enc.device),
        "n": len(x),
        "size": x.shape[-1],
        "batch_size": batch_size,
        "threads": torch.get_num_threads(),
        "load_s": round(load_s, 3),
        "seconds": round(best, 4),
        "images_per_s": round(len(x) / best, 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--encoders", nargs="*", default=None, help="names (default: every available one of --scale)")
    p.add_argument("--scale", choices=["default", "paper"], default="default")
    p.add_argument("--data-root", default=None, help="paper-scale data root (weights/<name>/)")
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--n", type=int, default=32, help="images per timed run")
    p.add_argument("--size", type=int, default=112, help="image side in pixels")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, nargs="*", default=None,
                   help="torch.set_num_threads values to run in turn (default: leave as is); each has its own anchor")
    p.add_argument("--out", type=Path, default=None, help="write the table as CSV here")
    args = p.parse_args(argv)

    infos = {i.name: i for i in list_encoders(data_root=args.data_root)}
    names = args.encoders or [n for n, i in infos.items() if i.scale == args.scale and i.available]
    if ANCHOR not in names:
        names = [ANCHOR, *names]
    images = real_faces(args.n, args.size)
    rows = []
    for threads in args.threads or [None]:
        if threads is not None:
            torch.set_num_threads(threads)
        part = []
        for name in names:
            try:
                part.append(bench(name, images, device=args.device, batch_size=args.batch_size,
                                  repeats=args.repeats, data_root=args.data_root))
            except Exception as err:  # report and continue: one missing encoder must not hide the others
                print(f"{name}: skipped ({type(err).__name__}: {err})", file=sys.stderr)
        anchor = next((r for r in part if r["encoder"] == ANCHOR), None)
        for r in part:
            r["slowdown_vs_pixels"] = round(anchor["images_per_s"] / r["images_per_s"], 1) if anchor else ""
        rows.extend(part)

    cols = ["encoder", "kind", "dim", "device", "n", "size", "batch_size", "threads", "load_s", "seconds",
            "images_per_s", "slowdown_vs_pixels"]
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols} if rows else {c: len(c) for c in cols}
    print("  ".join(c.ljust(widths[c]) for c in cols))
    for r in rows:
        print("  ".join(str(r[c]).ljust(widths[c]) for c in cols))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
