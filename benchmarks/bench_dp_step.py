"""Speed (and memory) of one DP-SGD step on privkit's pose network, against opacus.

Side by side in ONE process, on the same model, batch and loss (the SimCC KL
loss of :mod:`privkit.dppose`), each a full optimiser step:

* ``plain``             non-private step (forward, backward, SGD step);
* ``privkit``           privkit's DP step: per-sample norms by per-layer formulas
                        (grouped weight-gradient convolutions, ghost norms for the
                        linear head), one weighted contraction per layer for the
                        clipped sum, Gaussian noise, SGD step;
* ``privkit_grams``     (frozen regime only) privkit's DP step with the patch Grams of
                        the first neck convolution cached (computed once per record,
                        outside the step, as training does): that layer's per-sample
                        norms by the ghost formula, its clipped sum by one ordinary
                        weight-gradient convolution;
* ``privkit_vmap``      the same with torch.func per-sample gradients (vmap);
* ``opacus_hooks``      opacus ``GradSampleModule`` (hooks) + ``DPOptimizer``;
* ``opacus_ew``         opacus expanded weights + ``DPOptimizer``;
* ``opacus_functorch``  opacus with functorch per-sample gradients + ``DPOptimizer``;
* ``opacus_ghost``      opacus ghost clipping (two backward passes) +
                        ``DPOptimizerFastGradientClipping``;
* ``privkit_projected`` privkit's DP step (with the Grams in the frozen regime) +
                        projection of the noisy gradient on a
                        rank-k public subspace; ``projected_refresh`` is the cost
                        of one subspace refresh (m public per-sample gradients +
                        the m x m Gram eigendecomposition), also shown amortised
                        over ``--refresh`` steps.

Timing: ``--repeats`` rounds, the modes interleaved within each round so that
load from other processes hits them alike; the table shows the median and the
minimum, and ratios of medians to ``plain``.  Peak memory: the largest amount
of tensor memory allocated during one step above what was allocated before it
(from the PyTorch profiler's allocation events; CPU only).

With ``--backbone efficientnet_lite0`` the network is the default scale's frozen fine-tuning network (ImageNet
EfficientNet-Lite0 frozen up to stride 16, trainable conv neck + SimCC head): every mode then steps the
trainable part on cached frozen features, which is what a private step costs in that regime (the features
are computed once per image, outside the step).  The issue's target there: a DP step <= 1.1x a non-private
step of the same trainable part.

Usage::

    python benchmarks/bench_dp_step.py                 # batch 64, 3x64x64, 1 thread, privkit's conv net
    python benchmarks/bench_dp_step.py --backbone efficientnet_lite0 --size 128 --width 64 --batch 256
    python benchmarks/bench_dp_step.py --out build/bench_dp_step.csv

The README quotes ``benchmarks/results/dp_step_convnet.csv`` (the first line, ``--repeats 15``) and
``benchmarks/results/dp_step_frozen.csv`` (the second, with ``--threads 2 --repeats 9``).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from privkit.dppose import build_pose_model, count_parameters, pose_loss, public_subspace_from_model
from privkit.dppose.grads import add_gaussian_noise, clipped_grad_sum, patch_gram, trainable_parameters, unflatten_grads
from privkit.dppose.features import first_trainable_layer
from privkit.dppose.train import _FromFeatures

Step = Callable[[], None]


def _data(batch: int, size: int, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(batch, 3, size, size, generator=g)
    kp = torch.rand(batch, 16, 2, generator=g) * (size - 1)
    vis = torch.rand(batch, 16, generator=g) > 0.1
    return x, kp, vis


class _Criterion(torch.nn.Module):
    """The SimCC loss with a ``reduction`` attribute (opacus's ghost clipping needs per-sample losses)."""

    def __init__(self):
        super().__init__()
        self.reduction = "mean"

    def forward(self, out, target):
        tx, ty, w = target
        from privkit.dppose import simcc_kl_loss

        return simcc_kl_loss(out, tx, ty, w, reduction=self.reduction)


def _network(args) -> torch.nn.Module:
    if args.backbone == "efficientnet_lite0":
        return build_pose_model(args.size, backbone="efficientnet_lite0", neck_width=args.width, seed=args.seed)
    return build_pose_model(args.size, width=args.width, seed=args.seed)


def build_modes(args) -> tuple[dict[str, Step], dict[str, object]]:
    dev = torch.device(args.device)
    x, kp, vis = (t.to(dev) for t in _data(args.batch, args.size, args.seed))
    ref = _network(args).to(dev)
    frozen = ref.frozen is not None
    if frozen:  # the step runs on the cached output of the frozen part
        x = ref.features(x)
    tx, ty, w = ref.targets(kp, vis)
    batch = (x, tx, ty, w)
    clip, sigma, lr = args.clip, 1.0, 1e-3
    info: dict[str, object] = {"params": count_parameters(ref), "input": tuple(x.shape[1:])}
    modes: dict[str, Step] = {}
    net = _network(args).to(dev) if frozen else None

    def fresh():
        if frozen:  # the trainable part (neck + head) of a fresh copy, fed cached features
            import copy

            return _FromFeatures(copy.deepcopy(net))
        return build_pose_model(args.size, width=args.width, seed=args.seed).to(dev)

    # plain
    m_plain = fresh()
    opt_plain = torch.optim.SGD(m_plain.parameters(), lr=lr)

    def plain() -> None:
        opt_plain.zero_grad(set_to_none=True)
        pose_loss(m_plain(x), tx, ty, w).backward()
        opt_plain.step()

    modes["plain"] = plain

    # privkit
    def privkit_step(method: str, subspace=None, grams: torch.Tensor | None = None) -> tuple[Step, torch.nn.Module]:
        model = fresh()
        params = trainable_parameters(model)
        opt = torch.optim.SGD(list(params.values()), lr=lr)
        gen = torch.Generator(device=dev).manual_seed(0)
        input_grams = None if grams is None else {model.get_submodule(gram_layer): grams}

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            cs = clipped_grad_sum(model, pose_loss, batch, clip=clip, method=method, input_grams=input_grams)
            g = add_gaussian_noise(cs.flat(), clip=clip, noise_multiplier=sigma, generator=gen) / args.batch
            if subspace is not None:
                g = subspace.project(g)
            for p, gg in zip(params.values(), unflatten_grads(g, params).values()):
                p.grad = gg
            opt.step()

        return step, model

    modes["privkit"], _ = privkit_step("hooks")
    grams, gram_layer = None, ""
    if frozen:  # the patch Grams of the first neck conv, computed once per record (outside the step, as in training)
        gram_layer, layer = first_trainable_layer(ref)  # the trainable part keeps the network's names
        t0 = time.perf_counter()
        grams = patch_gram(layer, x)
        info["gram_ms_per_record"] = 1e3 * (time.perf_counter() - t0) / args.batch
        modes["privkit_grams"], _ = privkit_step("hooks", grams=grams)
        check = fresh()
        a = clipped_grad_sum(check, pose_loss, batch, clip=clip).flat()
        b = clipped_grad_sum(check, pose_loss, batch, clip=clip,
                             input_grams={check.get_submodule(gram_layer): grams}).flat()
        info["max_rel_diff_grams"] = float((a - b).abs().max() / a.abs().max())
    if not args.skip_vmap:
        modes["privkit_vmap"], _ = privkit_step("vmap")

    # opacus
    from opacus import GradSampleModule
    from opacus.grad_sample import GradSampleModuleExpandedWeights
    from opacus.grad_sample.grad_sample_module_fast_gradient_clipping import GradSampleModuleFastGradientClipping
    from opacus.optimizers import DPOptimizer
    from opacus.optimizers.optimizer_fast_gradient_clipping import DPOptimizerFastGradientClipping
    from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping

    def opacus_step(kind: str) -> Step:
        model = fresh()
        if kind == "hooks":
            gsm = GradSampleModule(model)
        elif kind == "functorch":
            gsm = GradSampleModule(model, force_functorch=True)
        else:
            gsm = GradSampleModuleExpandedWeights(model)
        opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=lr), noise_multiplier=sigma, max_grad_norm=clip,
                          expected_batch_size=args.batch, generator=torch.Generator(device=dev).manual_seed(0))

        def step() -> None:
            opt.zero_grad(set_to_none=True)
            pose_loss(gsm(x), tx, ty, w).backward()
            opt.step()

        return step

    for kind in ("hooks", "ew", "functorch"):
        modes[f"opacus_{kind}"] = opacus_step(kind)

    g_model = GradSampleModuleFastGradientClipping(fresh(), max_grad_norm=clip, use_ghost_clipping=True)
    g_opt = DPOptimizerFastGradientClipping(torch.optim.SGD(g_model.parameters(), lr=lr), noise_multiplier=sigma,
                                            max_grad_norm=clip, expected_batch_size=args.batch,
                                            generator=torch.Generator(device=dev).manual_seed(0))
    g_crit = DPLossFastGradientClipping(g_model, g_opt, _Criterion())

    def ghost() -> None:
        g_opt.zero_grad(set_to_none=True)
        g_crit(g_model(x), (tx, ty, w)).backward()
        g_opt.step()

    modes["opacus_ghost"] = ghost

    # projected: the subspace from m public per-sample gradients at the current weights
    pub_x, pub_kp, pub_vis = (t.to(dev) for t in _data(args.m, args.size, args.seed + 1))
    if frozen:
        pub_x = ref.features(pub_x)
    pub = (pub_x, *ref.targets(pub_kp, pub_vis))
    proj_model = fresh()
    sub = public_subspace_from_model(proj_model, pose_loss, pub, k=args.k)
    modes["privkit_projected"], _ = privkit_step("hooks", subspace=sub, grams=grams)

    def refresh() -> None:
        public_subspace_from_model(proj_model, pose_loss, pub, k=args.k)

    modes["projected_refresh"] = refresh

    # sanity: privkit's clipped sum equals opacus's (before noise) on this batch
    check = fresh()
    ours = clipped_grad_sum(check, pose_loss, batch, clip=clip).flat()
    gsm = GradSampleModule(fresh())
    pose_loss(gsm(x), tx, ty, w).backward()
    gs = [p.grad_sample.reshape(args.batch, -1) for p in gsm.parameters()]
    flat = torch.cat(gs, dim=1)
    factor = (clip / (flat.norm(dim=1) + 1e-6)).clamp(max=1.0)
    theirs = (factor[:, None] * flat).sum(0)
    info["max_rel_diff_vs_opacus"] = float((ours - theirs).abs().max() / theirs.abs().max())
    return modes, info


def _peak_bytes(step: Step, device: torch.device) -> int:
    if device.type == "cuda":  # the step's peak above what was allocated before it
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - base
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted(prof.events(), key=lambda e: e.time_range.start)
    cur = peak = 0
    for e in events:
        cur += e.self_cpu_memory_usage if e.name != "[memory]" else e.cpu_memory_usage
        peak = max(peak, cur)
    return peak


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=64, help="image side (64 or 128)")
    p.add_argument("--width", type=int, default=16, help="pose-net base width (neck width on efficientnet_lite0)")
    p.add_argument("--backbone", choices=("convnet", "efficientnet_lite0"), default="convnet",
                   help="efficientnet_lite0: the frozen fine-tuning network, steps on cached features")
    p.add_argument("--clip", type=float, default=1e-3)
    p.add_argument("--k", type=int, default=100, help="subspace rank")
    p.add_argument("--m", type=int, default=128, help="public gradients per subspace refresh")
    p.add_argument("--refresh", type=int, default=50, help="steps between subspace refreshes (for amortising)")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-vmap", action="store_true")
    p.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurement")
    p.add_argument("--out", type=Path, default=None, help="write the table as CSV")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda (timed with a synchronize per step)")
    args = p.parse_args(argv)
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device here")
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")

    modes, info = build_modes(args)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    for _ in range(args.warmup):
        for step in modes.values():
            step()
    times: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(args.repeats):
        for name, step in modes.items():
            sync()
            t0 = time.perf_counter()
            step()
            sync()
            times[name].append(time.perf_counter() - t0)
    peaks = {} if args.no_memory else {name: _peak_bytes(step, dev) for name, step in modes.items()}

    plain = statistics.median(times["plain"])
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append({
            "mode": name,
            "median_ms": 1e3 * med,
            "min_ms": 1e3 * min(ts),
            "ratio_to_plain": med / plain,
            "peak_mb": peaks[name] / 2**20 if name in peaks else float("nan"),
        })
    best = "privkit_grams" if "privkit_grams" in times else "privkit"
    dp = statistics.median(times[best])
    refresh = statistics.median(times["projected_refresh"])
    proj = statistics.median(times["privkit_projected"])
    rows.append({"mode": f"projected_amortised_R{args.refresh}", "median_ms": 1e3 * (proj + refresh / args.refresh),
                 "min_ms": float("nan"), "ratio_to_plain": (proj + refresh / args.refresh) / plain,
                 "peak_mb": float("nan")})

    print(f"pose net ({args.backbone}): {info['params']} trainable parameters; batch {args.batch} x "
          f"{' x '.join(map(str, info['input']))}{' cached features' if args.backbone != 'convnet' else ''}; "
          f"{args.threads} thread(s); torch {torch.__version__}; {args.repeats} interleaved repeats on {dev}")
    print(f"privkit clipped sum vs opacus (hooks) clipped sum: max relative difference "
          f"{info['max_rel_diff_vs_opacus']:.2e}")
    print(f"{'mode':<26}{'median ms':>11}{'min ms':>10}{'x plain':>9}{'peak MB':>10}")
    for r in rows:
        print(f"{r['mode']:<26}{r['median_ms']:>11.1f}{r['min_ms']:>10.1f}{r['ratio_to_plain']:>9.2f}"
              f"{r['peak_mb']:>10.1f}")
    if "max_rel_diff_grams" in info:
        print(f"privkit clipped sum with cached input Grams vs without: max relative difference "
              f"{info['max_rel_diff_grams']:.2e}; the Grams cost {info['gram_ms_per_record']:.2f} ms per record, once "
              "(not in the step times)")
    opacus_best = min(statistics.median(times[n]) for n in times if n.startswith("opacus"))
    target = 1.1 if args.backbone != "convnet" else 1.6
    print(f"privkit DP step ({best}): {dp / plain:.2f}x plain (target <= {target}x: {'MET' if dp / plain <= target else 'NOT MET'}); "
          f"{opacus_best / dp:.2f}x faster than the fastest opacus mode")
    print(f"projection: {100 * (proj - dp) / dp:+.1f}% per step (target <= 10%); "
          f"{100 * (proj + refresh / args.refresh - dp) / dp:+.1f}% with one refresh every {args.refresh} steps "
          f"(k={args.k}, m={args.m})")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        setting = {"device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
                   "backbone": args.backbone, "batch": args.batch, "size": args.size, "width": args.width,
                   "threads": args.threads, "repeats": args.repeats, "torch": torch.__version__,
                   "max_rel_diff_vs_opacus": info["max_rel_diff_vs_opacus"],
                   "max_rel_diff_grams": info.get("max_rel_diff_grams", float("nan")),
                   "gram_ms_per_record": info.get("gram_ms_per_record", float("nan"))}
        rows = [{**r, **setting} for r in rows]
        with args.out.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
