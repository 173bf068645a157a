"""A plan before the bill: for each paper, its jobs, which are already in the result store, and what the rest will
cost (``python -m privkit plan``).

At the paper and rehearsal scales the paper's inputs are checked first (:func:`~privkit.studies.guards.check_paper_inputs`:
one error listing everything missing, before anything runs) and the existing timing probes
(:func:`~privkit.studies.guards.plan_paper_run`) time the preset's training steps and encoders on the device the plan
runs on; each DP pose job's estimate is its steps times its method's seconds per step (plus its subspace refreshes),
each SynthesisNet job's its images over the probed throughput, each embedding job's (ISP, ScoreShield) its set's
images times the probed seconds per image, each other ISP job's its encoder forward passes
(:func:`isp_forward_passes`) times the probed seconds per image. Run it on a GPU node to get GPU-hours; on a CPU it
says CPU-hours. What still runs in a notebook's kernel (ISP's leakage study, ScoreShield's releases and IJB templates)
is not estimated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .config import PAPER_DATA_SCALES, PAPERS
from .jobs import ResultStore

__all__ = ["PaperPlan", "plan_papers", "plan_text", "isp_forward_passes"]



@dataclass
class PaperPlan:
    """The plan of one paper: its jobs with their store status and estimated device seconds.

    Attributes:
        paper: the paper. device: where the probe ran.
        jobs: ``(label, status, estimated seconds or None)`` per job.
        kernel_seconds: estimated seconds of the work that still runs in the notebook's kernel (None: not probed).
        peak_bytes: the training probe's peak CUDA memory (None on a CPU).
        notes: what the plan could not estimate, and why.
        probe_text: the input check and probe's own summary (paper scales).
    """

    paper: str
    device: str
    jobs: list[tuple[str, str, float | None]] = field(default_factory=list)
    kernel_seconds: float | None = None
    peak_bytes: int | None = None
    notes: list[str] = field(default_factory=list)
    probe_text: str = ""

    def counts(self) -> dict[str, int]:
        out = {"done": 0, "failed": 0, "missing": 0}
        for _, status, _ in self.jobs:
            out[status] += 1
        return out

    def remaining_seconds(self) -> float | None:
        left = [t for _, s, t in self.jobs if s != "done"]
        if any(t is None for t in left) or (not self.jobs and self.kernel_seconds is None):
            return None
        return sum(left) + (self.kernel_seconds or 0.0)


def _dppose(cfg: Any, plan: Any, *, scale: str, seed: int, data_root: str | None, store: ResultStore) -> list[tuple[str, str, float | None]]:
    from .studies.dppose import jobs as J
    from .studies.guards import run_seconds

    probe = plan.training_probe if plan is not None else {}
    n = plan.counts.get("private records", cfg.n_private) if plan is not None else cfg.n_private
    rows = []
    for part, run, spec in J.planned_jobs(cfg, scale=scale, seed=seed, data_root=data_root):
        step_s = probe.get(f"{run.method} s/step")
        est = (run_seconds(cfg, run.method, n, step_s=step_s, refresh_s=probe.get(f"{run.method} s/refresh", 0.0))
               if step_s is not None and n else None)
        rows.append((f"[{part}] {run.label}", store.status(spec), est))
    for spec in J.planned_controls(cfg, scale=scale, seed=seed, data_root=data_root):  # the no-noise controls
        m = spec.params["method"]
        step_s = probe.get(f"{m} s/step")
        est = (run_seconds(cfg, m, n, step_s=step_s, refresh_s=probe.get(f"{m} s/refresh", 0.0))
               if step_s is not None and n else None)
        rows.append((f"[controls] {spec.label}", store.status(spec), est))
    return rows


def _synthesisnet(cfg: Any, plan: Any, *, scale: str, seed: int, data_root: str | None, store: ResultStore) -> list[tuple[str, str, float | None]]:
    from .studies.synthesisnet import jobs as J
    from .studies.synthesisnet.experiments import net_config

    probe = plan.training_probe if plan is not None else {}
    _, method, ablation = J.planned_specs(cfg, net_config=net_config(cfg), scale=scale, seed=seed,
                                          data_root=data_root)
    n_train = cfg.n_train_identities * cfg.images_per_identity
    ae, gan = probe.get("autoencoder images/s"), probe.get("GAN images/s")
    est_m = n_train * (cfg.epochs_ae / ae + cfg.epochs_gan / gan) if ae and gan else None
    est_a = n_train * cfg.epochs_gan / gan if gan else None
    return [(method.label, store.status(method), est_m), (ablation.label, store.status(ablation), est_a)]


def _isp_encoders(cfg: Any, *, device: str, data_root: str | None) -> dict[str, Any]:
    """The preset's encoders that are available here, loaded (their weights key the ISP jobs)."""
    from .encoders import list_encoders, load_encoder

    available = {e.name for e in list_encoders(data_root=data_root) if e.available}
    names = dict.fromkeys(e.split(":")[0] for e in cfg.encoders)
    return {n: load_encoder(n, device=device, data_root=data_root) for n in names if n in available}


def isp_forward_passes(cfg: Any, kind: str, label: str, *, module: str | None = None,
                       judges: Sequence[str] = ()) -> dict[str, float]:
    """Approximate encoder forward passes of one ISP job, by encoder name (what the plan multiplies by the probed
    seconds per image): attribution -- the FII images with their face and context perturbations, the CPI pool and
    queries at every blur, the B* composites; rank sweep -- the copy-detection copies (and, for EfficientNet-Lite0,
    the ImageNet views); inversion -- the latent search (forward and backward, counted as three passes, per target
    and step) and each judge's embedding of every reconstruction and real crop. The probes' ridge, MLP and decoder
    fits are not counted (they are small next to the encoders at the paper scale)."""
    name = label.split(" ")[0]
    n_pool = (cfg.split_counts[1] + cfg.split_counts[2]) * cfg.images_per_identity
    if kind == "isp.attribution":
        betas = len(cfg.bstar_betas) if cfg.bstar_betas else 11
        return {name: cfg.fii_images * (2 + cfg.fii_regions) + (n_pool + cfg.cpi_queries) * len(cfg.cpi_sigmas)
                + cfg.bstar_pairs * betas}
    if kind == "isp.rank_sweep":
        views = cfg.imagenet_views * 10 if name == "efficientnet-lite0" else 0  # about ten scikit-image photos
        return {name: (cfg.copy_references if "[image]" in label else 0) + views}
    if kind == "isp.inversion":
        t = cfg.inversion_targets
        out = {module: 3.0 * t * cfg.inversion_steps} if module and "optimisation" in cfg.inversion_attacks else {}
        for j in judges:
            j = j.split(" ")[0]
            out[j] = out.get(j, 0.0) + t * (1 + 2 * len(cfg.inversion_attacks))
        return out
    return {}


def _embed_rows(specs: Sequence[tuple[Any, int | None]], probe: dict[str, float],
                store: ResultStore) -> list[tuple[str, str, float | None]]:
    """``faces.embed`` jobs: each set's images (None: not counted) times the probed seconds per image."""
    rows = []
    for spec, n in specs:
        per = probe.get(f"embed {spec.params['encoder']}")
        rows.append((spec.label, store.status(spec), n * per if n is not None and per is not None else None))
    return rows


def _scoreshield(cfg: Any, plan: Any, *, scale: str, seed: int, data_root: str | None,
                 store: ResultStore) -> list[tuple[str, str, float | None]]:
    from .encoders import load_encoder
    from .studies.scoreshield.faces import planned_embeddings

    names = dict.fromkeys(("dlib-resnet-fr", *cfg.face_encoders))
    encoders = {n: load_encoder(n, device="cpu", data_root=data_root) for n in names}
    probe = plan.probe if plan is not None else {}
    lfw = plan.counts.get("LFW images") if plan is not None else None

    def images(src: Any) -> int | None:
        if src.loader == "load_lfw":
            return lfw
        a = src.args
        per = a.get("images_per_identity") or (1 if src.args["name"] == cfg.impostor_set else None)
        return a["n_identities"] * per if a.get("n_identities") and per else None

    return _embed_rows([(spec, images(src)) for spec, src in planned_embeddings(
        cfg, encoders, scale=scale, paper_data=scale in PAPER_DATA_SCALES, seed=seed, data_root=data_root)], probe,
        store)


def _isp(cfg: Any, plan: Any, encoders: dict[str, Any], *, scale: str, seed: int, data_root: str | None,
         store: ResultStore) -> list[tuple[str, str, float | None]]:
    from .studies.isp import jobs as J

    probe = plan.probe if plan is not None else {}
    specs = J.planned_specs(cfg, encoders, scale=scale, seed=seed, data_root=data_root,
                            paper_data=scale in PAPER_DATA_SCALES)
    n_main = plan.counts.get("images") if plan is not None else None
    sizes = [n_main, cfg.transfer_identities * cfg.transfer_images]  # each encoder embeds the main set, the other set
    rows = _embed_rows([(s, sizes[i % 2]) for i, s in enumerate(specs["embed"])], probe, store)
    for spec in specs["attribution"] + specs["rank_sweep"] + specs["inversion"]:
        p = spec.params
        passes = isp_forward_passes(cfg, spec.kind, p["label"], module=p.get("module"), judges=p.get("judges", ()))
        per = [probe.get(f"embed {n}") for n in passes]
        est = sum(k * s for k, s in zip(passes.values(), per)) if probe and all(s is not None for s in per) else None
        rows.append((spec.label, store.status(spec), est))
    return rows


def plan_papers(papers: Sequence[str], *, scale: str, seed: int = 0, data_root: str | None = None,
                device: str = "auto", store: ResultStore, probe: bool = True) -> list[PaperPlan]:
    """A :class:`PaperPlan` per paper (module docstring). At the paper scales the inputs of every paper are checked
    before any probe runs.

    Raises:
        MissingResourceError: a paper-scale input is missing (all of one paper's missing inputs in one message).
    """
    from .config import load
    from .device import resolve_device
    from .studies.guards import check_paper_inputs, plan_paper_run

    cfgs = {p: load(p, scale) for p in papers}
    if scale in PAPER_DATA_SCALES:
        for p in papers:  # every input of every paper first: one error, before minutes of probing
            check_paper_inputs(p, cfgs[p], data_root)
    plans = []
    dev = str(resolve_device(device))
    for p in papers:
        cfg = cfgs[p]
        rp = None
        out = PaperPlan(paper=p, device=dev)
        encoders = _isp_encoders(cfg, device=dev, data_root=data_root) if p == "isp" else None
        if scale in PAPER_DATA_SCALES:
            rp = plan_paper_run(p, cfg, data_root, device=device, probe_images=4 if probe else 0,
                                probe_training=probe, encoders=encoders)
            out.probe_text, out.peak_bytes = rp.text(), rp.probe_peak_bytes
        else:
            out.notes.append(f"scale {scale}: no timing probe (it runs at the paper scales); jobs listed only")
        if p == "dppose":
            out.jobs = _dppose(cfg, rp, scale=scale, seed=seed, data_root=data_root, store=store)
        elif p == "synthesisnet":
            out.jobs = _synthesisnet(cfg, rp, scale=scale, seed=seed, data_root=data_root, store=store)
        elif p == "isp":
            out.jobs = _isp(cfg, rp, encoders, scale=scale, seed=seed, data_root=data_root, store=store)
            out.kernel_seconds = 0.0
            out.notes.append("each (face set, encoder) embedding is a job (the set's images times the probed seconds "
                             "per image); the leakage study runs in the notebook's kernel (its probes' fits are not "
                             "estimated); each other job's estimate counts its encoder forward passes")
        else:
            out.jobs = _scoreshield(cfg, rp, scale=scale, seed=seed, data_root=data_root, store=store)
            out.kernel_seconds = 0.0
            out.notes.append("each (face set, backbone) embedding is a job (its estimate: the set's images times the "
                             "probed seconds per image; a set whose size is known only once loaded is not estimated); "
                             "the releases and, at the paper scale, the IJB templates run in the notebook's kernel "
                             "(not estimated)")
        plans.append(out)
    return plans


def _hours(seconds: float | None, device: str) -> str:
    if seconds is None:
        return "not estimated"
    unit = "GPU-hours" if device.startswith("cuda") else "CPU-hours"
    return f"{seconds / 3600:.2f} {unit}"


def plan_text(plans: Sequence[PaperPlan], *, verbose: bool = True) -> str:
    """The plan as the CLI prints it: per paper the probe summary, every job with its status and estimate, totals."""
    lines = []
    grand, estimated = 0.0, False
    for p in plans:
        c = p.counts()
        lines.append(f"== {p.paper}: {PAPERS[p.paper].short_title}")
        if p.probe_text:
            lines += ["  " + ln for ln in p.probe_text.splitlines()]
        if p.jobs:
            lines.append(f"  {len(p.jobs)} jobs: {c['done']} done, {c['failed']} failed, {c['missing']} to run")
            if verbose:
                width = max(len(label) for label, _, _ in p.jobs)
                lines += [f"    {label:<{width}}  {status:<7}  {_hours(est, p.device) if est is not None else ''}"
                          for label, status, est in p.jobs]
        rem = p.remaining_seconds()
        lines.append(f"  still to run: {_hours(rem, p.device)} on {p.device}"
                     + (f"; probe peak memory {p.peak_bytes / 2**30:.2f} GiB" if p.peak_bytes else ""))
        lines += [f"  note: {n}" for n in p.notes]
        grand += rem or 0.0
        estimated = estimated or rem is not None
    device = plans[0].device if plans else "cpu"
    lines.append(f"== total still to run (papers with an estimate): {_hours(grand if estimated else None, device)}")
    return "\n".join(lines)
