"""Speed of the ISP library against a named anchor: one N×d×d matrix product.

Side by side, on the same synthetic unit-norm embeddings (Gaussian identity clusters, float32):

* ``anchor``          — ``z @ A`` with A a d×d matrix: the cost of applying any dense d×d linear map to N vectors;
* ``isp_fit``         — :class:`IdentitySanitizer`: float64 class sums via ``index_add_``, then the d×d (or m×m)
                        symmetric eigenproblem of the centred class-mean matrix;
* ``isp_apply``       — the fused ``addmm`` projection z − (zU)Uᵀ plus re-normalisation (O(N·d·r));
* ``isp_fit+apply``   — the two together (target: ≤ 1× the anchor);
* ``leace_fit`` / ``leace_apply`` — the LEACE-style baseline (needs the d×d second moment: O(N·d²) in float64);
* ``inlp_fit``        — INLP, a few iterations, from the same streaming statistics;
* ``concept_erasure_leace_fit`` — the reference LEACE, EleutherAI's ``concept-erasure`` (0.2.4) with its defaults,
                        on one-hot identities (skipped when the package is not installed);
* ``apply_r=…``       — the projector at larger ranks, to show the O(N·d·r) scaling;
* ``impostor_scan``   — all-pairs verification at the five default FARs for ``--verify-identities`` ×
                        ``--verify-images`` embeddings (chunked top-k impostor thresholds; no bootstrap).

Each timing is the best of ``--repeats`` runs after one warm-up. Ratios are to the anchor.

Usage::

    python benchmarks/bench_isp.py                              # N=100,000, d=512, m=1,000, r=10
    python benchmarks/bench_isp.py --n 20000 --repeats 2 --threads 1 --out build/bench_isp.csv
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch

from privkit.device import resolve_device
from privkit.isp import IdentityProjector, IdentitySanitizer, INLPFitter, LeaceFitter, pairwise_tar_at_far
from privkit.metrics import DEFAULT_FARS


def synthetic(n: int, d: int, m: int, *, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit-norm float32 embeddings: identity means (strength 1) plus isotropic noise; identities 0 … m−1."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, m, (n,), generator=g)
    means = torch.randn(m, d, generator=g) / d**0.5
    z = means[ids] + 0.5 * torch.randn(n, d, generator=g) / d**0.5
    return torch.nn.functional.normalize(z, dim=1).to(device), ids.to(device)


def best_time(fn: Callable[[], object], *, repeats: int, device: torch.device) -> float:
    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        sync()
        t = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000, help="embeddings N")
    p.add_argument("--dim", type=int, default=512, help="dimension d")
    p.add_argument("--identities", type=int, default=1_000, help="fitting identities m")
    p.add_argument("--rank", type=int, default=10, help="ISP / LEACE rank r")
    p.add_argument("--inlp-iterations", type=int, default=3)
    p.add_argument("--verify-identities", type=int, default=80)
    p.add_argument("--verify-images", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: leave as is)")
    p.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-baselines", action="store_true", help="time ISP and the anchor only")
    p.add_argument("--out", type=Path, default=None, help="write the table as CSV here")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = resolve_device(args.device)
    n, d, m, r = args.n, args.dim, args.identities, args.rank
    z, ids = synthetic(n, d, m, seed=args.seed, device=dev)
    a = torch.randn(d, d, generator=torch.Generator().manual_seed(args.seed + 1)).to(dev)
    rep = dict(repeats=args.repeats, device=dev)
    rows: list[dict] = []

    def add(name: str, seconds: float, note: str) -> None:
        rows.append({"step": name, "seconds": seconds, "note": note})

    add("anchor", best_time(lambda: z @ a, **rep), f"z @ A, {n}×{d} by {d}×{d}")
    fit = lambda: IdentitySanitizer(rank=r).update(z, ids).projector  # noqa: E731
    t_fit = best_time(fit, **rep)
    add("isp_fit", t_fit, f"class sums + eigh, m={m}, r={r}")
    proj = fit()
    t_apply = best_time(lambda: proj(z), **rep)
    add("isp_apply", t_apply, "fused addmm + renormalise (+ O(N) finite check)")
    add("isp_fit+apply", t_fit + t_apply, "target <= 1x anchor")
    for big in (r * 10, min(d, r * 40)):
        basis = torch.linalg.qr(torch.randn(d, big, generator=torch.Generator().manual_seed(2)))[0].to(dev)
        pr = IdentityProjector(basis)
        add(f"apply_r={big}", best_time(lambda: pr(z, check_finite=False), **rep), "O(N·d·r)")
    if not args.skip_baselines:
        leace = lambda: LeaceFitter(rank=r).update(z, ids).eraser  # noqa: E731
        add("leace_fit", best_time(leace, **rep), "second moment (float64) + whitening")
        eraser = leace()
        add("leace_apply", best_time(lambda: eraser(z), **rep), "oblique addmm + renormalise")
        inlp = lambda: INLPFitter(args.inlp_iterations).update(z, ids).projector  # noqa: E731
        add("inlp_fit", best_time(inlp, **rep), f"{args.inlp_iterations} iterations, ridge classifier")
        try:
            import concept_erasure
        except ImportError:
            print("concept-erasure is not installed (pip install concept-erasure==0.2.4): its row is skipped",
                  file=sys.stderr)
        else:
            onehot = torch.nn.functional.one_hot(ids, m).to(z.dtype)

            def reference_fit():  # EleutherAI's LEACE, its defaults (shrinkage, trace constraint)
                return concept_erasure.LeaceFitter.fit(z, onehot).eraser

            add("concept_erasure_leace_fit", best_time(reference_fit, **rep),
                "EleutherAI concept-erasure 0.2.4 LeaceFitter.fit, one-hot identities (the reference LEACE)")
    vz, vid = synthetic(args.verify_identities * args.verify_images, d, args.verify_identities, seed=args.seed + 2, device=dev)
    vid = torch.arange(args.verify_identities, device=dev).repeat_interleave(args.verify_images)
    n_img = vz.shape[0]
    n_pairs = (n_img * n_img - args.verify_identities * args.verify_images**2) // 2
    add(
        "impostor_scan",
        best_time(lambda: pairwise_tar_at_far(vz, vid, fars=DEFAULT_FARS, n_boot=0), **rep),
        f"all {n_pairs:,} impostor pairs of {n_img} images, 5 FARs",
    )
    table = pd.DataFrame(rows)
    anchor = float(table.loc[table["step"] == "anchor", "seconds"].iloc[0])
    table["ms"] = (table["seconds"] * 1000).round(1)
    table["x_anchor"] = (table["seconds"] / anchor).round(3)
    print(f"privkit ISP benchmark: N={n:,} d={d} m={m} r={r} device={dev} threads={torch.get_num_threads()} "
          f"repeats={args.repeats}")
    print(table[["step", "ms", "x_anchor", "note"]].to_string(index=False))
    ratio = float(table.loc[table["step"] == "isp_fit+apply", "x_anchor"].iloc[0])
    print(f"ISP fit+apply = {ratio:.2f}x the anchor ({'meets' if ratio <= 1 else 'misses'} the <= 1x target)")
    ref = table.loc[table["step"] == "concept_erasure_leace_fit", "seconds"]
    if len(ref):
        fit_apply = float(table.loc[table["step"] == "isp_fit+apply", "seconds"].iloc[0])
        speedup = float(ref.iloc[0]) / fit_apply
        print(f"ISP fit+apply is {speedup:.1f}x faster than concept-erasure's LEACE fit "
              f"({'meets' if speedup >= 5 else 'misses'} the >= 5x target)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
