"""Batch runner: regenerate every paper's figures and tables by executing its notebook with papermill.

``python -m privkit reproduce [--paper NAME ...] [--scale smoke|default|paper] [--data-root DIR]
[--device auto|cpu|cuda] [--out DIR]`` converts ``notebooks/<paper>.py`` (jupytext percent format) to a
notebook, injects the parameters and executes it.  Each notebook writes into a private staging folder;
only when it finishes are its files moved into ``<out>/<paper>/``, so a failing notebook never leaves a
half-written figure behind and never clobbers the previous results.

``--executor slurm`` (with ``--slurm-config FILE`` or ``--partition``, ``--gpus-per-job``, ...) runs the training
jobs of the DP pose and SynthesisNet notebooks as a Slurm job array; ``python -m privkit plan`` prints each paper's
jobs, which are already stored, and their estimated cost before anything is submitted.

``python -m privkit list`` prints the papers, their artefacts and the scales.
``python -m privkit prepare --scale smoke`` writes parameterised notebooks for nbval (used by ``make test``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from .config import PAPER_DATA_SCALES, PAPERS, SCALE_DESCRIPTIONS, SCALES, artefacts
from .device import DEVICES
from .errors import MissingResourceError, PrivkitError, UnknownNameError

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_NOTEBOOKS = REPO_ROOT / "notebooks"

__all__ = ["RunResult", "run_paper", "reproduce", "prepare", "write_rehearsal_root", "main", "check_executor",
           "JOB_PAPERS"]


@dataclass
class RunResult:
    paper: str
    status: str  # "ok" | "failed" | "missing"
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)
    error: str = ""
    failed_cell: str = ""
    executed: str = ""


def _available(notebooks_dir: Path) -> dict[str, Path]:
    if notebooks_dir.resolve() == DEFAULT_NOTEBOOKS.resolve():
        return {p: DEFAULT_NOTEBOOKS / f"{p}.py" for p in PAPERS}
    return {p.stem: p for p in sorted(notebooks_dir.glob("*.py"))}


def _to_notebook(src: Path, dst: Path) -> Path:
    import jupytext
    import nbformat

    nb = jupytext.read(src)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp")
    nbformat.write(nb, str(tmp))
    os.replace(tmp, dst)
    return dst


#: The papers whose notebooks run their expensive units as jobs (they take the ``executor`` parameters).
JOB_PAPERS: tuple[str, ...] = ("isp", "dppose", "scoreshield", "synthesisnet")


def _parameters(scale: str, seed: int, data_root: str | None, device: str, out_dir: Path, paper: str = "",
                executor: str = "local", executor_options: dict | None = None) -> dict:
    params = {"scale": scale, "seed": int(seed), "data_root": str(Path(data_root).resolve()) if data_root else None,
              "device": device, "out_dir": str(out_dir)}
    if paper in JOB_PAPERS and (executor != "local" or executor_options):
        params.update(executor=executor, executor_options=dict(executor_options or {}))
    return params


def check_executor(executor: str, executor_options: dict | None = None) -> None:
    """Fail before anything runs: an unknown executor, no Slurm client, an unreadable config or a bad option."""
    from .jobs import make_executor

    make_executor(executor, **dict(executor_options or {}))


def _validate_common(scale: str, device: str, data_root: str | os.PathLike | None = None) -> None:
    if scale not in SCALES:
        raise UnknownNameError("scale", scale, SCALES)
    if device not in DEVICES:
        raise UnknownNameError("device", device, DEVICES)
    if scale in PAPER_DATA_SCALES:
        how = ("write a miniature one with `python -m privkit rehearsal-root DIR`" if scale == "rehearsal" else
               "see the README's 'Paper scale: datasets and weights' for what to download and where to put it")
        if data_root is None:
            raise PrivkitError(f"--scale {scale} reads the paper datasets and weights from --data-root DIR; {how}")
        if not Path(data_root).is_dir():
            raise PrivkitError(f"--data-root {data_root} is not a folder; {how}")


#: Set for every batch run: the notebooks' interactive panels print their initial state instead of widgets
#: (the same name as :data:`privkit.studies.explore.STATIC_ENV`; `make test` sets it for nbval too).
STATIC_WIDGETS_ENV = "PRIVKIT_STATIC_WIDGETS"


@contextlib.contextmanager
def _scale_environment(scale: str, data_root: str | os.PathLike | None):
    """The environment of a batch run: static interactive panels; and a rehearsal keeps its embedding cache inside
    its own data root, so a real paper run never reuses embeddings of rehearsal images (the cache is keyed by
    dataset name and size, not by content)."""
    changes = {STATIC_WIDGETS_ENV: "1"}
    if scale == "rehearsal":
        changes["PRIVKIT_CACHE_DIR"] = str(Path(data_root).resolve() / ".privkit-cache")
    old = {k: os.environ.get(k) for k in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_paper(paper: str, *, scale: str = "default", seed: int = 0, data_root: str | None = None, device: str = "auto",
              out: str | os.PathLike = "figures", executed_dir: str | os.PathLike | None = None,
              notebooks_dir: str | os.PathLike = DEFAULT_NOTEBOOKS, timeout: int | None = None,
              executor: str = "local", executor_options: dict | None = None) -> RunResult:
    """Execute one paper's notebook; move its outputs into ``out/<paper>/`` only if it succeeds.

    ``executor`` (``"local"`` or ``"slurm"``) and ``executor_options`` (:class:`privkit.jobs.SlurmOptions` fields and
    ``slurm_config``, a TOML file) say who runs the training jobs of the papers in :data:`JOB_PAPERS`; their results
    go to the result store ``<out>/.store``, where a re-run finds them.
    """
    import papermill as pm

    _validate_common(scale, device, data_root)
    available = _available(Path(notebooks_dir))
    if paper not in available:
        raise UnknownNameError("paper", paper, available)
    src = available[paper]
    if not src.is_file():
        return RunResult(paper, "missing", error=f"{src.relative_to(REPO_ROOT) if src.is_relative_to(REPO_ROOT) else src} does not exist yet")
    out_root = Path(out).resolve()
    out_root.mkdir(parents=True, exist_ok=True)
    executed_root = Path(executed_dir) if executed_dir else REPO_ROOT / "build" / "executed" / scale
    executed_root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".staging-{paper}-", dir=out_root))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(staging, 0o777 & ~mask)  # mkdtemp creates 0700; the final folder gets the usual permissions
    t0 = time.perf_counter()
    result = RunResult(paper, "failed")
    try:
        with tempfile.TemporaryDirectory() as tmpd:
            nb_in = _to_notebook(src, Path(tmpd) / f"{paper}.ipynb")
            nb_out = executed_root / f"{paper}.ipynb"
            result.executed = str(nb_out)
            with _scale_environment(scale, data_root):
                pm.execute_notebook(str(nb_in), str(nb_out),
                                    parameters=_parameters(scale, seed, data_root, device, staging, paper, executor,
                                                           executor_options),
                                    kernel_name="python3", cwd=str(REPO_ROOT), progress_bar=False, log_output=False,
                                    execution_timeout=timeout, config=_local_kernel_config(Path(tmpd)))
        final = out_root / paper
        old = None
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".old-{paper}-", dir=out_root))
            os.replace(final, old / paper)
        os.replace(staging, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        result.status = "ok"
        result.files = sorted(str(p.relative_to(out_root)) for p in final.rglob("*") if p.is_file())
    except pm.PapermillExecutionError as exc:
        result.error = f"{exc.ename}: {exc.evalue}"
        first_line = next((ln for ln in exc.source.splitlines() if ln.strip()), "")
        result.failed_cell = f"cell {exc.cell_index} (execution count {exc.exec_count}): {first_line[:80]}"
    except Exception as exc:  # kernel death, conversion error, ...: reported, the batch goes on
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        result.seconds = time.perf_counter() - t0
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return result


def reproduce(papers: Sequence[str] | None = None, *, scale: str = "default", seed: int = 0,
              data_root: str | None = None, device: str = "auto", out: str | os.PathLike = "figures",
              notebooks_dir: str | os.PathLike = DEFAULT_NOTEBOOKS, stream=sys.stdout, executor: str = "local",
              executor_options: dict | None = None) -> list[RunResult]:
    """Run several papers; print one progress line each and a summary table. Never stops at a failure.

    Before anything runs, the executor is checked (:func:`check_executor`) and, at the paper scales, every input
    of every chosen paper (one error listing what is missing and where to put it)."""
    _validate_common(scale, device, data_root)
    check_executor(executor, executor_options)
    available = _available(Path(notebooks_dir))
    if papers:
        for p in papers:
            if p not in available:
                raise UnknownNameError("paper", p, available)
        chosen = list(dict.fromkeys(papers))
    else:
        chosen = [p for p, path in available.items() if path.is_file()]
        if not chosen:
            print("No paper notebook exists yet (notebooks/<paper>.py); nothing to run.", file=stream)
            return []
    if scale in PAPER_DATA_SCALES:
        import privkit
        from privkit.studies.guards import check_paper_inputs

        for p in chosen:
            if p in PAPERS:
                check_paper_inputs(p, privkit.config.load(p, scale), data_root)
    results = []
    for i, paper in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {paper}: running at scale={scale} ...", file=stream, flush=True)
        r = run_paper(paper, scale=scale, seed=seed, data_root=data_root, device=device, out=out,
                      notebooks_dir=notebooks_dir, executor=executor, executor_options=executor_options)
        line = f"[{i}/{len(chosen)}] {paper}: {r.status} in {r.seconds:.1f} s"
        if r.status == "ok":
            line += f", {len(r.files)} files in {Path(out) / paper}"
        elif r.status == "failed":
            line += f" at {r.failed_cell or 'start-up'}: {r.error}"
        else:
            line += f" ({r.error})"
        print(line, file=stream, flush=True)
        results.append(r)
    print(_summary(results), file=stream, flush=True)
    return results


def _summary(results: list[RunResult]) -> str:
    rows = [("paper", "status", "seconds", "files")]
    rows += [(r.paper, r.status, f"{r.seconds:.1f}", str(len(r.files))) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))  # under the header
    return "\n".join(["", "Summary", *lines])


def prepare(*, scale: str = "smoke", seed: int = 0, out: str | os.PathLike = "build/smoke",
            data_root: str | None = None, device: str = "cpu",
            notebooks_dir: str | os.PathLike = DEFAULT_NOTEBOOKS) -> list[Path]:
    """Write parameterised, unexecuted notebooks ``<out>/notebooks/<paper>.ipynb`` (for nbval).

    Their figures go to ``<out>/figures/<paper>/``, never to ``figures/``.
    """
    import papermill as pm

    _validate_common(scale, device, data_root)
    out = Path(out).resolve()
    written = []
    for paper, src in _available(Path(notebooks_dir)).items():
        if not src.is_file():
            continue
        with tempfile.TemporaryDirectory() as tmpd:
            nb_in = _to_notebook(src, Path(tmpd) / f"{paper}.ipynb")
            nb_out = out / "notebooks" / f"{paper}.ipynb"
            nb_out.parent.mkdir(parents=True, exist_ok=True)
            fig_dir = out / "figures" / paper
            pm.execute_notebook(str(nb_in), str(nb_out), parameters=_parameters(scale, seed, data_root, device, fig_dir),
                                prepare_only=True, kernel_name="python3", progress_bar=False)
            written.append(nb_out)
    return written


def _cmd_list(_: argparse.Namespace) -> int:
    print("Papers:")
    for info in PAPERS.values():
        state = "notebook: notebooks/%s.py" % info.name if info.has_notebook else "notebook: not implemented yet"
        print(f"  {info.name:<13} {info.short_title}  [{state}]")
        print(f"  {'':<13} {info.citation}")
        for art, desc in artefacts(info.name):
            print(f"  {'':<13}   - {art}: {desc}")
    print("Scales:")
    for s in SCALES:
        print(f"  {s:<8} {SCALE_DESCRIPTIONS[s]}")
    from .data import list_datasets
    from .encoders import encoder_table, pose_model_table

    print("Encoders (ok: loadable offline now):")
    print("\n".join("  " + line for line in encoder_table().splitlines()))
    print("Pose models:")
    print("\n".join("  " + line for line in pose_model_table().splitlines()))
    print("Datasets:")
    for d in list_datasets():
        print(f"  {d}")
    return 0


def _executor_options(ns: argparse.Namespace) -> dict:
    opts = {name: getattr(ns, name) for name in _SLURM_FLAGS if getattr(ns, name) is not None}
    if ns.slurm_config:
        opts["slurm_config"] = str(Path(ns.slurm_config).resolve())
    return opts


def _cmd_reproduce(ns: argparse.Namespace) -> int:
    results = reproduce(ns.paper, scale=ns.scale, seed=ns.seed, data_root=ns.data_root, device=ns.device,
                        out=ns.out, notebooks_dir=ns.notebooks_dir, executor=ns.executor,
                        executor_options=_executor_options(ns))
    failed = [r for r in results if r.status != "ok"]
    if failed:
        print("\nFAILED:", file=sys.stderr)
        for r in failed:
            where = f" at {r.failed_cell}" if r.failed_cell else ""
            print(f"  {r.paper}: {r.status}{where}: {r.error}", file=sys.stderr)
            if r.executed and Path(r.executed).exists():
                print(f"    executed notebook with the traceback: {r.executed}", file=sys.stderr)
        return 1
    return 0


def _cmd_prepare(ns: argparse.Namespace) -> int:
    paths = prepare(scale=ns.scale, seed=ns.seed, out=ns.out, data_root=ns.data_root, device=ns.device,
                    notebooks_dir=ns.notebooks_dir)
    for p in paths:
        print(p)
    if not paths:
        print("No paper notebook exists yet; nothing prepared.")
    return 0


def _cmd_plan(ns: argparse.Namespace) -> int:
    from .jobs import store_for
    from .plan import plan_papers, plan_text

    _validate_common(ns.scale, ns.device, ns.data_root)
    papers = list(dict.fromkeys(ns.paper)) if ns.paper else list(PAPERS)
    for p in papers:
        if p not in PAPERS:
            raise UnknownNameError("paper", p, PAPERS)
    store = store_for(Path(ns.out) / "paper", ns.store)
    plans = plan_papers(papers, scale=ns.scale, seed=ns.seed, data_root=ns.data_root, device=ns.device, store=store,
                        probe=not ns.no_probe)
    print(f"result store: {store.root}")
    print(plan_text(plans, verbose=not ns.quiet))
    return 0


def _cmd_rehearsal_root(ns: argparse.Namespace) -> int:
    summary = write_rehearsal_root(ns.dir, seed=ns.seed)
    print(f"rehearsal data root written to {summary['root']}: {summary['files']} files, "
          f"{summary['bytes'] / 2**20:.1f} MiB in {summary['seconds']:.1f} s")
    print(f"run the paper path on it: python -m privkit reproduce --scale rehearsal --data-root {summary['root']}")
    return 0


def rehearsal_tool() -> ModuleType:
    """privkit's rehearsal tool (``tools/rehearsal/`` of the repository checkout privkit runs from), imported.

    Raises:
        MissingResourceError: privkit runs from an installed copy without the repository's ``tools/`` folder.
    """
    path = Path(__file__).resolve().parent.parent / "tools" / "rehearsal" / "__init__.py"
    name = "privkit_tools_rehearsal"
    if name in sys.modules:
        return sys.modules[name]
    if not path.is_file():
        raise MissingResourceError(
            "privkit's rehearsal tool (tools/rehearsal/)", expected_at=str(path),
            how_to_get="It is a repository tool, not part of the installed library: run from a clone of the privkit "
                       "repository (pip install -e .).")
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=[str(path.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _local_kernel_config(folder: Path) -> Any:
    """Kernel settings of a batch run: the kernel talks to papermill over IPC sockets in ``folder`` (a private
    temporary folder), not over localhost TCP (which ipykernel warns is unencrypted), as `make lab` does."""
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc", "ip": str(folder / "kernel")}})


def write_rehearsal_root(root: str | os.PathLike, *, seed: int = 0) -> dict:
    """Write the miniature paper-scale data root (face datasets, MPII, MovieLens and rehearsal weights, all in the
    real on-disk formats) into the empty or new folder ``root``; returns a summary (:func:`rehearsal_tool`)."""
    return rehearsal_tool().write_rehearsal_root(root, seed=seed)


#: Command-line flags of the Slurm options: ``SlurmOptions field -> (flag, type, help)``.
_SLURM_FLAGS = {
    "partition": ("--partition", str, "Slurm partition"), "account": ("--account", str, "Slurm account"),
    "qos": ("--qos", str, "Slurm QOS"), "gpus_per_job": ("--gpus-per-job", int, "GPUs per job (default 0)"),
    "cpus_per_job": ("--cpus-per-job", int, "CPUs per job (default 1)"),
    "mem_gb": ("--mem-gb", float, "memory per job in GB"),
    "time_min": ("--time-min", int, "time limit per job in minutes (default 60)"),
    "array_parallelism": ("--array-parallelism", int, "at most this many tasks at once (default 64)"),
    "jobs_per_task": ("--jobs-per-task", int, "jobs one Slurm task runs one after another, paying the worker's "
                      "start-up once (default 1)"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m privkit", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_list = sub.add_parser("list", help="papers, their figures/tables, and the scales")
    p_list.set_defaults(func=_cmd_list)

    def common(p: argparse.ArgumentParser, default_scale: str, default_out: str, default_device: str) -> None:
        p.add_argument("--scale", default=default_scale, help=f"one of {', '.join(SCALES)} (default {default_scale})")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--data-root", default=None, help="folder holding the paper-scale datasets and weights")
        p.add_argument("--device", default=default_device, help=f"one of {', '.join(DEVICES)}")
        p.add_argument("--out", default=default_out)
        p.add_argument("--notebooks-dir", default=str(DEFAULT_NOTEBOOKS), help=argparse.SUPPRESS)

    p_rep = sub.add_parser("reproduce", help="execute paper notebooks with papermill")
    p_rep.add_argument("--paper", nargs="+", default=None, help=f"any of {', '.join(PAPERS)} (default: all)")
    common(p_rep, "default", "figures", "auto")
    p_rep.add_argument("--executor", default="local",
                       help="who runs the jobs: local (in the notebook's kernel, default) or slurm "
                            "(a job array through submitit)")
    p_rep.add_argument("--slurm-config", default=None, help="TOML file of Slurm options (partition, account, qos, "
                       "gpus_per_job, cpus_per_job, mem_gb, time_min, array_parallelism, jobs_per_task, ...)")
    for flag, kind, text in _SLURM_FLAGS.values():
        p_rep.add_argument(flag, type=kind, default=None, help=text)
    p_rep.set_defaults(func=_cmd_reproduce)
    p_plan = sub.add_parser("plan", help="each paper's jobs, which are stored already, and what the rest costs")
    p_plan.add_argument("--paper", nargs="+", default=None, help=f"any of {', '.join(PAPERS)} (default: all)")
    common(p_plan, "paper", "figures", "auto")
    p_plan.add_argument("--store", default=None, help="the result store (default: <out>/.store)")
    p_plan.add_argument("--no-probe", action="store_true", help="check the inputs and list the jobs, time nothing")
    p_plan.add_argument("--quiet", action="store_true", help="totals only, no line per job")
    p_plan.set_defaults(func=_cmd_plan)
    p_prep = sub.add_parser("prepare", help="write parameterised notebooks for nbval (no execution)")
    common(p_prep, "smoke", "build/smoke", "cpu")
    p_prep.set_defaults(func=_cmd_prepare)
    p_reh = sub.add_parser("rehearsal-root", help="write a miniature paper-scale data root in the real formats")
    p_reh.add_argument("dir", help="an empty or new folder")
    p_reh.add_argument("--seed", type=int, default=0)
    p_reh.set_defaults(func=_cmd_rehearsal_root)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        return ns.func(ns)
    except PrivkitError as exc:
        print(f"privkit: error: {exc}", file=sys.stderr)
        return 2
