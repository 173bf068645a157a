"""Paper-scale resource guards: before a long paper run starts, check every input and say what the run will cost.

:func:`plan_paper_run` is what a notebook calls at the paper and rehearsal scales, before it loads anything big:

1. **Inputs.** It looks for every dataset part and weight file the paper branch of that notebook reads (through the
   loaders' own cheap index readers and weight finders) and, when any is missing or malformed, raises ONE
   :class:`~privkit.errors.MissingResourceError` listing all of them with what to download and where to put it —
   seconds into the run, not an hour in.
2. **Plan.** It counts what the preset will read (images, pairs, training steps) and estimates the memory that the
   decoded images take.
3. **Probe.** It times the decoding of a few CelebA images (ISP, SynthesisNet) and one small batch through each
   encoder the notebook embeds with (ISP, ScoreShield), and extrapolates to the planned images.
4. **Training probe** (DP pose, SynthesisNet). DP pose: for every training method of the preset's design it builds
   the preset's network and times optimisation steps at the preset's batch size (per-sample gradients, clipping,
   noise, the public view and the subspace refresh included) on random inputs of the planned size, then sums
   steps × seconds over every planned run and the public pretraining. SynthesisNet: it trains the preset's networks
   for one autoencoder and one GAN epoch on a few CelebA images and extrapolates the images/s to the planned epochs.
   On CUDA the probe's peak memory is reported. The estimate leaves out evaluation, feature caching and the
   ablations; it is an order of magnitude for deciding whether to start, not a promise.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from privkit._validate import check_choice, check_int
from privkit.errors import InvalidArgumentError, MissingResourceError, PrivkitError

__all__ = ["RunPlan", "check_paper_inputs", "plan_paper_run", "run_steps", "run_seconds"]

PAPERS_WITH_PAPER_DATA = ("isp", "dppose", "scoreshield", "synthesisnet")


@dataclass
class RunPlan:
    """What a paper-scale run will read and roughly cost (:func:`plan_paper_run`).

    Attributes:
        paper, device: the paper and the device the run uses.
        inputs: ``(what, where)`` of every dataset part and weight file found.
        counts: what the preset will read or run, by name (images, pairs, steps, ...).
        memory_bytes: the decoded images held in memory (float32).
        probe: seconds per image of each probed stage (``"decode"``, ``"embed <encoder>"``).
        estimate_seconds: the probed stages extrapolated to the planned images (training not included).
        training_probe: what the training probe measured, by name (seconds per step of each DP pose method and per
            subspace refresh; images/s of SynthesisNet's two phases); empty if not probed.
        training_seconds: the training probe extrapolated to every planned run (0 if not probed).
        probe_peak_bytes: peak CUDA memory during the training probe (None on CPU, where it is not measured).
        resources: what the input checks had to load whole, by name, for the notebook to reuse instead of reading it
            again (ScoreShield: each IJB protocol, every crop checked, and ``"MovieLens-100K"``).
    """

    paper: str
    device: str
    inputs: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    memory_bytes: int = 0
    probe: dict[str, float] = field(default_factory=dict)
    estimate_seconds: float = 0.0
    training_probe: dict[str, float] = field(default_factory=dict)
    training_seconds: float = 0.0
    probe_peak_bytes: int | None = None
    resources: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        lines = [f"Paper-scale run of {self.paper} on {self.device}; inputs found:"]
        lines += [f"  {what}: {where}" for what, where in self.inputs]
        lines.append("planned: " + ", ".join(f"{v:,} {k}" for k, v in self.counts.items()))
        lines.append(f"decoded images in memory: about {self.memory_bytes / 2**30:.2f} GiB (float32)")
        if self.probe:
            lines.append("probe (s per image): " + ", ".join(f"{k} {v:.4f}" for k, v in self.probe.items()))
            stages = " + ".join(self.probe)
            lines.append(f"estimated time of the probed stages ({stages}) for the planned images: about "
                         f"{self.estimate_seconds / 60:.1f} min (stages not probed are not included"
                         + ("; training: below)" if self.training_probe else ", nor is training)"))
        if self.training_probe:
            lines.append("training probe: " + ", ".join(f"{k} {v:.3g}" for k, v in self.training_probe.items()))
            lines.append(f"estimated training time of every planned run on {self.device}: about "
                         f"{_duration(self.training_seconds)} (evaluation, feature caching and ablations not included)")
            if self.probe_peak_bytes is not None:
                lines.append(f"peak {self.device} memory of the training probe: "
                             f"{self.probe_peak_bytes / 2**30:.2f} GiB")
        return "\n".join(lines)


def _duration(seconds: float) -> str:
    """``"45 s"``, ``"12 min"``, ``"3.4 h"`` or ``"2.1 days"``."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _weights_for(encoders: list[str], data_root: Path) -> list[tuple[str, Callable[[], Any]]]:
    from privkit.encoders.paper_scale import PAPER_SCALE_SPECS, find_weights

    return [(f"{name} weights", lambda name=name: find_weights(name, data_root=data_root))
            for name in encoders if name in PAPER_SCALE_SPECS]


def _tiny_vit(data_root: Path) -> Path:
    path = data_root / "weights" / "tiny_vit_5m" / "model.safetensors"
    if not path.is_file():
        raise MissingResourceError(
            "TinyViT-5M ImageNet weights", expected_at=str(path),
            how_to_get="Download timm's tiny_vit_5m_224 (ImageNet-1k) model.safetensors and put it there.")
    return path


def _vggface2(data_root: Path, split: str) -> Path:
    from privkit.data.paper.vggface2 import _vggface2_root

    base = _vggface2_root(data_root)
    if base is None or not (base / split).is_dir():
        raise MissingResourceError(
            f"VGGFace2 {split} split", expected_at=str(data_root / "VGGFace2" / split),
            how_to_get="Download VGGFace2 (https://www.robots.ox.ac.uk/~vgg/data/vgg_face2/) and extract it so that "
                       f"DATA_ROOT/VGGFace2/{split}/n000001/0001_01.jpg exists.")
    return base / split


def _lfw_pairs(data_root: Path) -> Path:
    from privkit.data.paper.lfw import read_lfw_pairs

    for p in (data_root / "lfw" / "pairs.txt", data_root / "pairs.txt"):
        if p.is_file():
            read_lfw_pairs(p)  # raises on a malformed line
            return p
    raise MissingResourceError("LFW pairs.txt", expected_at=str(data_root / "lfw" / "pairs.txt"),
                               how_to_get="Download pairs.txt from http://vis-www.cs.umass.edu/lfw/ and put it there.")


def _mpii(data_root: Path) -> Path:
    from privkit.data.paper.mpii import _HOW_MPII

    for rel in ("annot/train.json", "annotations/mpii_train.json"):
        if (data_root / "mpii" / rel).is_file():
            return data_root / "mpii" / rel
    raise MissingResourceError("MPII annotations", expected_at=str(data_root / "mpii" / "annot" / "train.json"),
                               how_to_get=_HOW_MPII)


def _checks(paper: str, cfg: Any, data_root: Path, resources: dict[str, Any]) -> list[tuple[str, Callable[[], Any]]]:
    """``(what, check)`` of every input of ``paper``'s paper branch; a check returns what it found or raises, and
    puts what it loaded whole into ``resources``."""
    from privkit.data.paper.celeba import read_celeba_index

    def celeba():
        idx = read_celeba_index(data_root)
        return f"{idx.image_dir} ({len(idx.filenames):,} images)"

    if paper == "isp":
        names = [e.split(":")[0] for e in cfg.encoders]
        return [("CelebA", celeba), ("VGGFace2 test split", lambda: _vggface2(data_root, "test")),
                *_weights_for(names, data_root)]
    if paper == "scoreshield":
        from privkit.data.paper.ijb import load_ijb
        from privkit.data.paper.movielens import load_movielens_100k

        def ijb(name: str) -> str:
            resources[name] = load_ijb(data_root, name=name)  # reads the meta files and checks every listed crop
            return str(data_root / name)

        def movielens() -> str:
            resources["MovieLens-100K"] = load_movielens_100k(data_root)
            return str(data_root / "ml-100k")

        return [("LFW pairs", lambda: _lfw_pairs(data_root)),
                *[(name, lambda name=name: ijb(name)) for name in cfg.ijb_sets], ("MovieLens-100K", movielens)]
    if paper == "dppose":
        return [("MPII", lambda: _mpii(data_root)), ("TinyViT-5M weights", lambda: _tiny_vit(data_root))]
    from privkit.synthesisnet.metrics import _find_inception  # synthesisnet (check_paper_inputs checked the name)

    return [("CelebA", celeba), ("Inception-v3 weights", lambda: _find_inception(None, data_root))]


def check_paper_inputs(paper: str, cfg: Any, data_root: str | Path, *,
                       resources: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """``(what, where)`` of every dataset part and weight file ``paper``'s paper branch reads.

    ``resources``, if given, receives what the checks loaded whole (:attr:`RunPlan.resources`).

    Raises:
        MissingResourceError: one or more inputs are missing or malformed; the message lists every one of them, each
            with what to download and where to put it.
    """
    check_choice("paper", paper, PAPERS_WITH_PAPER_DATA)
    root = Path(data_root).expanduser()
    if not root.is_dir():
        raise MissingResourceError("the paper-scale data root", expected_at=str(root),
                                   how_to_get="Pass --data-root DIR (see the README's 'Paper scale' section).")
    found, problems = [], []
    for what, check in _checks(paper, cfg, root, {} if resources is None else resources):
        try:
            found.append((what, str(check())))
        except PrivkitError as err:
            problems.append(f"- {what}: {err}")
    if problems:
        raise MissingResourceError(
            f"{len(problems)} input(s) of the {paper} paper path", expected_at=str(root),
            how_to_get="Nothing was loaded yet. Fix these first:\n" + "\n".join(problems) + "\n")
    return found


def _planned_counts(paper: str, cfg: Any, root: Path) -> tuple[dict[str, int], int, int]:
    """(counts, planned decoded images, their side in pixels)."""
    if paper == "isp":
        n = cfg.n_identities * cfg.images_per_identity + cfg.transfer_identities * cfg.transfer_images
        return {"images": n, "encoders": len(cfg.encoders), "embeddings": n * len(cfg.encoders)}, n, cfg.face_size
    if paper == "scoreshield":
        from privkit.data.paper.lfw import read_lfw_pairs

        pairs = next((read_lfw_pairs(p) for p in (root / "lfw" / "pairs.txt", root / "pairs.txt") if p.is_file()), [])
        n = len({img for pair in pairs for img in (pair.a, pair.b)})
        return {"LFW images": n, "encoders": len(cfg.face_encoders), "IJB sets": len(cfg.ijb_sets)}, n, cfg.face_size
    if paper == "dppose":
        from privkit.studies.dppose.experiments import design_runs

        n = _mpii_training_records(cfg, root)
        runs = design_runs(cfg)
        steps = sum(run_steps(cfg, r.method, n) for r in runs)
        return ({"private records": n, "public images": cfg.n_public, "runs": len(runs),
                 "training steps of all runs": steps, "epochs": cfg.epochs, "seeds": cfg.seeds},
                n + cfg.n_public, cfg.image_size)
    n = (cfg.n_train_identities + cfg.n_test_identities) * cfg.images_per_identity
    return {"images": n, "autoencoder epochs": cfg.epochs_ae, "GAN epochs": cfg.epochs_gan}, n, cfg.image_size


def plan_paper_run(paper: str, cfg: Any, data_root: str | Path, *, device: str | torch.device = "cpu",
                   probe_images: int = 4, encoders: dict[str, Any] | None = None,
                   probe_training: bool = True) -> RunPlan:
    """Check the inputs (:func:`check_paper_inputs`), count the planned work and time a short probe.

    Args:
        paper: ``"isp"``, ``"dppose"``, ``"scoreshield"`` or ``"synthesisnet"``.
        cfg: the notebook's preset (``privkit.config.load(paper, scale)``).
        data_root: the paper-scale data root.
        device: where the run computes (``"auto"``: CUDA when present, else the CPU).
        probe_images: images decoded and embedded by each encoder for the timing probe; 0 skips every probe.
        encoders: already loaded encoders by name (the others the notebook uses are loaded here for the probe).
        probe_training: also time training steps (DP pose, SynthesisNet; module docstring) and extrapolate them.

    Raises:
        MissingResourceError: inputs are missing (all of them are listed).
    """
    probe_images = check_int("probe_images", probe_images, minimum=0)
    if not isinstance(probe_training, bool):
        raise InvalidArgumentError(f"probe_training must be a bool, got {probe_training!r}")
    from privkit.device import resolve_device

    device = resolve_device(device)  # "auto" -> cuda if present, else cpu
    plan = RunPlan(paper=paper, device=str(device))
    plan.inputs = check_paper_inputs(paper, cfg, data_root, resources=plan.resources)
    plan.counts, n_images, side = _planned_counts(paper, cfg, Path(data_root).expanduser())
    plan.memory_bytes = n_images * 3 * side * side * 4
    if not probe_images:
        return plan
    if paper in ("isp", "synthesisnet"):  # the images the notebook decodes come from CelebA
        from privkit.data.paper.celeba import load_celeba

        t0 = time.perf_counter()
        load_celeba(data_root, indices=list(range(probe_images)), size=side)
        plan.probe["decode"] = (time.perf_counter() - t0) / probe_images
    # each encoder the notebook embeds with (loaded here unless given; the content does not change its cost)
    names = {"isp": [e.split(":")[0] for e in getattr(cfg, "encoders", ())],
             "scoreshield": list(getattr(cfg, "face_encoders", ()))}.get(paper, [])
    x = torch.rand(probe_images, 3, side, side, generator=torch.Generator().manual_seed(0))
    for name in names:
        enc = (encoders or {}).get(name)
        if enc is None:
            from privkit.encoders import load_encoder

            enc = load_encoder(name, device=device, data_root=data_root)
        t0 = time.perf_counter()
        enc.embed(x)
        plan.probe[f"embed {name}"] = (time.perf_counter() - t0) / probe_images
    plan.estimate_seconds = sum(plan.probe.values()) * n_images
    if probe_training and paper in ("dppose", "synthesisnet"):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        if paper == "dppose":
            plan.training_probe, plan.training_seconds = _probe_dppose(cfg, plan.counts["private records"], device)
        else:
            plan.training_probe, plan.training_seconds = _probe_synthesisnet(cfg, Path(data_root).expanduser(), device)
        if device.type == "cuda":
            plan.probe_peak_bytes = int(torch.cuda.max_memory_allocated(device))
    return plan


# ---------------------------------------------------------------------------------------------- training probes
def _mpii_training_records(cfg: Any, root: Path) -> int:
    """Private training records the DP pose notebook reads: ``cfg.n_private``, or every MPII training entry up to
    the notebook's cap of 40,000."""
    if cfg.n_private:
        return int(cfg.n_private)
    from privkit.data.paper.mpii import _mpii_entries

    return min(len(_mpii_entries(_mpii(root))), 40_000)


def run_steps(cfg: Any, method: str, n: int) -> int:
    """Optimiser steps of one DP pose run of ``n`` private records (the trainer's rule: epochs × round(n / batch))."""
    epochs = cfg.nonprivate_epochs if method == "nonprivate" and cfg.nonprivate_epochs else cfg.epochs
    return int(epochs) * max(1, round(n / min(cfg.batch_size, n)))


def run_seconds(cfg: Any, method: str, n: int, *, step_s: float, refresh_s: float = 0.0) -> float:
    """Estimated seconds of one DP pose run: its steps × the probed seconds per step, plus one subspace refresh
    every ``cfg.refresh`` steps (what the training probe sums, and ``python -m privkit plan`` prints per job)."""
    steps = run_steps(cfg, method, n)
    return steps * step_s + math.ceil(steps / cfg.refresh) * refresh_s


def _random_poses(n: int, size: int, *, first_identity: int, seed: int) -> Any:
    """Random images and keypoints of the planned size (the content does not change a step's cost)."""
    from privkit.data.types import PoseSet

    g = torch.Generator().manual_seed(seed)
    head = torch.tensor([0.4, 0.1, 0.6, 0.3]) * size
    return PoseSet(images=torch.rand(n, 3, size, size, generator=g),
                   keypoints=(0.2 + 0.6 * torch.rand(n, 16, 2, generator=g)) * size,
                   visible=torch.ones(n, 16, dtype=torch.bool), head_box=head.repeat(n, 1),
                   identity=torch.arange(first_identity, first_identity + n), name="probe")


def _probe_dppose(cfg: Any, n_private: int, device: torch.device) -> tuple[dict[str, float], float]:
    """Seconds per step (and per subspace refresh) of every method the design trains, and their sum over the
    planned runs and the public pretraining."""
    from privkit.dppose.train import DPSpec, PublicSpec, Schedule, make_private
    from privkit.studies.dppose.experiments import design_runs, pose_model

    runs = design_runs(cfg)
    bsz = min(cfg.batch_size, n_private)
    m = max(min(cfg.n_public_grads, cfg.n_public), cfg.k)
    private = _random_poses(bsz, cfg.image_size, first_identity=0, seed=0)
    public = _random_poses(m, cfg.image_size, first_identity=bsz, seed=1)
    measured: dict[str, float] = {}
    per_method: dict[str, dict[str, float]] = {}
    for method in dict.fromkeys(["nonprivate", *(r.method for r in runs)]):
        dp = None if method == "nonprivate" else DPSpec(noise_multiplier=1.0, delta=cfg.delta, clip=cfg.clips[0])
        pub = (PublicSpec(public_set=public, k=min(cfg.k, m), n_public=m, refresh=cfg.refresh)
               if method in ("projected", "feature_projective") else None)
        trainer = make_private(pose_model(cfg, 0), private, method=method, dp=dp, public=pub,
                               schedule=Schedule(epochs=1, batch_size=bsz, lr=cfg.lr), device=device)
        per_method[method] = trainer.probe_seconds()
        measured[f"{method} s/step"] = per_method[method]["step"]
        if per_method[method]["refresh"]:
            measured[f"{method} s/refresh"] = per_method[method]["refresh"]
    total = sum(run_seconds(cfg, r.method, n_private, step_s=per_method[r.method]["step"],
                            refresh_s=per_method[r.method]["refresh"]) for r in runs)
    n_pub = max(1, round(cfg.n_public / min(cfg.batch_size, cfg.n_public)))
    total += cfg.pretrain_epochs * n_pub * per_method["nonprivate"]["step"]
    return measured, total


def _probe_synthesisnet(cfg: Any, root: Path, device: torch.device) -> tuple[dict[str, float], float]:
    """Images/s of one autoencoder and one GAN epoch of the preset's networks on a few CelebA images, extrapolated
    to the planned epochs (the method and the no-auxiliary-classifier ablation's GAN)."""
    from dataclasses import replace

    from privkit.data.paper.celeba import load_celeba, read_celeba_index
    from privkit.studies.synthesisnet.experiments import net_config
    from privkit.synthesisnet import SynthesisNet

    n = min(2 * cfg.batch_size, len(read_celeba_index(root).filenames))
    faces = load_celeba(root, indices=list(range(n)), size=cfg.image_size)
    faces = replace(faces, identity=torch.arange(n) % max(2, n // 2))  # identities do not change a step's cost
    net = SynthesisNet(net_config(cfg)).fit(faces, epochs_ae=1, epochs_gan=1, batch_size=min(cfg.batch_size, n),
                                            device=device)
    tp = net.history["throughput"]
    ae, gan = float(tp["ae_images_per_s"]), float(tp["gan_images_per_s"])
    n_train = cfg.n_train_identities * cfg.images_per_identity
    total = n_train * (cfg.epochs_ae / ae + 2 * cfg.epochs_gan / gan)
    return {"autoencoder images/s": ae, "GAN images/s": gan}, total
