"""Paper-scale resource guards: before a long paper run starts, check every input and say what the run will cost.

:func:`plan_paper_run` is what a notebook calls at the paper and rehearsal scales, before it loads anything big:

1. **Inputs.** It looks for every dataset part and weight file the paper branch of that notebook reads (through the
   loaders' own cheap index readers and weight finders) and, when any is missing or malformed, raises ONE
   :class:`~privkit.errors.MissingResourceError` listing all of them with what to download and where to put it —
   seconds into the run, not an hour in.
2. **Plan.** It counts what the preset will read (images, pairs, training steps) and estimates the memory that the
   decoded images take.
3. **Probe.** It times the decoding of a few CelebA images (ISP, SynthesisNet) and one small batch through each
   encoder the notebook embeds with (ISP, ScoreShield), and extrapolates to the planned images. Training time is not
   extrapolated (it depends on the device, the model and the DP machinery); the plan gives the epochs instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from privkit._validate import check_choice, check_int
from privkit.errors import InvalidArgumentError, MissingResourceError, PrivkitError

__all__ = ["RunPlan", "check_paper_inputs", "plan_paper_run"]

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
    """

    paper: str
    device: str
    inputs: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    memory_bytes: int = 0
    probe: dict[str, float] = field(default_factory=dict)
    estimate_seconds: float = 0.0

    def text(self) -> str:
        lines = [f"Paper-scale run of {self.paper} on {self.device}; inputs found:"]
        lines += [f"  {what}: {where}" for what, where in self.inputs]
        lines.append("planned: " + ", ".join(f"{v:,} {k}" for k, v in self.counts.items()))
        lines.append(f"decoded images in memory: about {self.memory_bytes / 2**30:.2f} GiB (float32)")
        if self.probe:
            lines.append("probe (s per image): " + ", ".join(f"{k} {v:.4f}" for k, v in self.probe.items()))
            stages = " + ".join(self.probe)
            lines.append(f"estimated time of the probed stages ({stages}) for the planned images: about "
                         f"{self.estimate_seconds / 60:.1f} min (stages not probed, and training, are not included)")
        return "\n".join(lines)


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


def _checks(paper: str, cfg: Any, data_root: Path) -> list[tuple[str, Callable[[], Any]]]:
    """``(what, check)`` of every input of ``paper``'s paper branch; a check returns what it found or raises."""
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
            load_ijb(data_root, name=name)  # reads the meta files and checks every listed crop
            return str(data_root / name)

        def movielens() -> str:
            load_movielens_100k(data_root)
            return str(data_root / "ml-100k")

        return [("LFW pairs", lambda: _lfw_pairs(data_root)),
                *[(name, lambda name=name: ijb(name)) for name in cfg.ijb_sets], ("MovieLens-100K", movielens)]
    if paper == "dppose":
        return [("MPII", lambda: _mpii(data_root)), ("TinyViT-5M weights", lambda: _tiny_vit(data_root))]
    if paper == "synthesisnet":
        from privkit.synthesisnet.metrics import _find_inception

        return [("CelebA", celeba), ("Inception-v3 weights", lambda: _find_inception(None, data_root))]
    raise InvalidArgumentError(f"paper must be one of {PAPERS_WITH_PAPER_DATA}, got {paper!r}")


def check_paper_inputs(paper: str, cfg: Any, data_root: str | Path) -> list[tuple[str, str]]:
    """``(what, where)`` of every dataset part and weight file ``paper``'s paper branch reads.

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
    for what, check in _checks(paper, cfg, root):
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
        return {"public images": cfg.n_public, "epochs": cfg.epochs, "seeds": cfg.seeds}, cfg.n_public, cfg.image_size
    n = (cfg.n_train_identities + cfg.n_test_identities) * cfg.images_per_identity
    return {"images": n, "autoencoder epochs": cfg.epochs_ae, "GAN epochs": cfg.epochs_gan}, n, cfg.image_size


def plan_paper_run(paper: str, cfg: Any, data_root: str | Path, *, device: str | torch.device = "cpu",
                   probe_images: int = 4, encoders: dict[str, Any] | None = None) -> RunPlan:
    """Check the inputs (:func:`check_paper_inputs`), count the planned work and time a short probe.

    Args:
        paper: ``"isp"``, ``"dppose"``, ``"scoreshield"`` or ``"synthesisnet"``.
        cfg: the notebook's preset (``privkit.config.load(paper, scale)``).
        data_root: the paper-scale data root.
        device: where the run computes.
        probe_images: images decoded and embedded by each encoder for the timing probe; 0 skips the probe.
        encoders: already loaded encoders by name (the others the notebook uses are loaded here for the probe).

    Raises:
        MissingResourceError: inputs are missing (all of them are listed).
    """
    probe_images = check_int("probe_images", probe_images, minimum=0)
    plan = RunPlan(paper=paper, device=str(device), inputs=check_paper_inputs(paper, cfg, data_root))
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
    return plan
