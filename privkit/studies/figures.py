"""Figure and table output: one look for every paper, byte-stable files, data beside every plot.

Everything is written atomically (temporary file in the target folder, then ``os.replace``), so an interrupted
run never leaves a half-written figure behind.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from privkit._files import git_commit
from privkit._validate import check_int
from privkit.errors import InvalidArgumentError

__all__ = ["set_theme", "save_figure", "save_table", "write_run_manifest", "SectionTimer", "atomic_write"]

_SLUG_OK = set("abcdefghijklmnopqrstuvwxyz0123456789_-.")


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not name or not set(name.lower()) <= _SLUG_OK or name.startswith("."):
        raise InvalidArgumentError(
            f"name must be a non-empty file stem of letters, digits, '_', '-' or '.', got {name!r} "
            "(convention: figN_slug or tableN_slug)"
        )
    return name


def set_theme() -> None:
    """The house style: seaborn paper context, ticks, TrueType fonts in PDFs, no LaTeX."""
    import matplotlib as mpl
    import seaborn as sns

    sns.set_theme(context="paper", style="ticks")
    mpl.rcParams.update({"pdf.fonttype": 42, "ps.fonttype": 42, "text.usetex": False, "savefig.bbox": "tight",
                         "figure.dpi": 100, "svg.hashsalt": "privkit"})


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "wb") -> Iterator[Any]:
    """Open a temporary file beside ``path``; rename it over ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as fh:
            yield fh
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; outputs get the user's usual permissions
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: The metadata each figure format is saved with: no creation dates, so the same inputs give the same bytes.
_NO_DATES = {"pdf": {"CreationDate": None, "ModDate": None, "Producer": "privkit"}, "png": {"Software": None},
             "svg": {"Date": None}}


def save_figure(fig: Any, out_dir: str | os.PathLike, name: str, data: pd.DataFrame | None, *,
                formats: tuple[str, ...] = ("pdf", "png"), dpi: int = 200) -> list[Path]:
    """Save ``fig`` as ``out_dir/name.{pdf,png}`` plus ``name.csv`` holding the plotted data.

    PDFs carry no creation date, so re-running with the same inputs gives the same bytes.

    Args:
        fig: a matplotlib Figure.
        out_dir: folder to write into (created if needed).
        name: file stem, e.g. ``"fig2_error_scaling"``.
        data: the data drawn in the figure (required: every figure has its CSV). Pass an empty DataFrame only
            for purely illustrative figures (e.g. image grids), whose CSV then lists what was shown.
        formats: subset of ("pdf", "png", "svg").
        dpi: PNG resolution.

    Returns:
        The paths written.
    """
    _check_name(name)
    dpi = check_int("dpi", dpi, minimum=10, maximum=1200)
    if data is None or not isinstance(data, pd.DataFrame):
        raise InvalidArgumentError("data must be a pandas DataFrame with the plotted values (every figure has its CSV)")
    bad = set(formats) - {"pdf", "png", "svg"}
    if bad or not formats:
        raise InvalidArgumentError(f"formats must be a non-empty subset of ('pdf', 'png', 'svg'), got {formats!r}")
    out = Path(out_dir)
    written: list[Path] = []
    for fmt in formats:
        target = out / f"{name}.{fmt}"
        with atomic_write(target) as fh:
            fig.savefig(fh, format=fmt, metadata=dict(_NO_DATES[fmt]), **({"dpi": dpi} if fmt == "png" else {}))
        written.append(target)
    csv = out / f"{name}.csv"
    with atomic_write(csv, "w") as fh:
        data.to_csv(fh, index=False)
    return [*written, csv]


def save_table(df: pd.DataFrame, out_dir: str | os.PathLike, name: str, *, caption: str = "",
               float_format: str = "{:.4g}", index: bool = False) -> list[Path]:
    """Save a table as ``name.csv`` (full precision) and ``name.tex`` (booktabs LaTeX, rounded)."""
    _check_name(name)
    if not isinstance(df, pd.DataFrame):
        raise InvalidArgumentError("df must be a pandas DataFrame")
    out = Path(out_dir)
    csv = out / f"{name}.csv"
    with atomic_write(csv, "w") as fh:
        df.to_csv(fh, index=index)
    tex = out / f"{name}.tex"

    def tex_row(cells: list[str]) -> str:
        return " & ".join(_tex_escape(c) for c in cells) + r" \\"

    cols = ([df.index.name or ""] if index else []) + [str(c) for c in df.columns]
    rows = [tex_row(([str(idx)] if index else []) + [float_format.format(v) if isinstance(v, float) else str(v)
                                                      for v in row.tolist()]) for idx, row in df.iterrows()]
    lines = [r"\begin{table}[t]", r"\centering", rf"\caption{{{_tex_escape(caption)}}}" if caption else "",
             r"\begin{tabular}{" + "l" * len(cols) + "}", r"\toprule", tex_row(cols), r"\midrule", *rows,
             r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    with atomic_write(tex, "w") as fh:
        fh.write("\n".join(line for line in lines if line) + "\n")
    return [csv, tex]


def _tex_escape(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"), ("#", r"\#"),
                 ("_", r"\_"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"), ("^", r"\^{}")):
        s = s.replace(a, b)
    return s


class SectionTimer:
    """Records wall time per named notebook section: ``with timer("fig2"): ...``; ``timer.seconds`` is a dict."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._t0 = time.perf_counter()

    @contextlib.contextmanager
    def __call__(self, section: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[section] = self.seconds.get(section, 0.0) + time.perf_counter() - t

    @property
    def total(self) -> float:
        return time.perf_counter() - self._t0


_VERSIONED = ("privkit", "torch", "torchvision", "numpy", "scipy", "pandas", "matplotlib", "seaborn",
              "scikit-learn", "scikit-image", "opacus", "dlib-bin", "onnxruntime", "papermill")


def write_run_manifest(out_dir: str | os.PathLike, *, paper: str, parameters: Mapping[str, Any], device: Any,
                       timer: SectionTimer | None = None, extra: Mapping[str, Any] | None = None) -> Path:
    """Write ``out_dir/run.json``: parameters, package versions, git commit, device, wall time per section."""
    versions = {}
    for pkg in _VERSIONED:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    manifest = {
        "paper": paper, "device": str(device), "git_commit": git_commit(), "python": sys.version.split()[0],
        "parameters": {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v))
                       for k, v in parameters.items()},
        "platform": platform.platform(), "versions": versions,
        "wall_seconds": {k: round(v, 3) for k, v in (timer.seconds if timer else {}).items()},
        "wall_seconds_total": round(timer.total, 3) if timer else None,
        "finished_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
    }
    if extra:
        manifest["extra"] = dict(extra)
    path = Path(out_dir) / "run.json"
    with atomic_write(path, "w") as fh:
        json.dump(manifest, fh, indent=2, sort_keys=True)
        fh.write("\n")
    if str(manifest["git_commit"]).endswith("-dirty"):  # loudly: such figures cannot be traced to a commit
        print(f"WARNING: {path} records {manifest['git_commit']}: the working tree had uncommitted changes, so "
              "these figures do not come from any commit; commit first, then regenerate them before committing "
              "figures", file=sys.stderr)
    return path
