"""End-to-end check of the notebooks in JupyterLab, driven by a real headless Chromium (Debian's package).

`make test` runs it after `make browser-deps`. For each paper notebook it:
1. starts JupyterLab on a free local port, with a random token and the project's JupyterLab settings
   (`jupyter/`: jupytext notebooks as the default viewer of `.py` files, kernels over IPC);
2. opens a copy of the jupytext `.py` notebook, whose parameters cell is set to the smoke scale (so no committed
   figure is touched), and checks that it opened as a notebook;
3. runs its cells down to its interactive section ("explore"), one Shift+Enter per cell, as a reader would;
4. checks that no cell errored or wrote to stderr, that a figure and the ipywidgets panel rendered, and that
   moving the panel's first control changes what the panel shows;
5. saves a screenshot to `<out>/<paper>.png`.
With ``--student DIR`` it also opens a built course assignment's blank student notebook, runs every cell and checks
that nothing errors and that the otter checks render (`<out>/course-student.png`).

It fails, saying why, when Chromium is missing: it never skips.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAPERS = ("scoreshield", "dppose", "isp", "synthesisnet")
CHROMIUM = Path(os.environ.get("PRIVKIT_CHROMIUM", "/usr/bin/chromium"))
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'


class CheckFailed(Exception):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare(work: Path) -> dict[str, tuple[int, int]]:
    """Copy each notebook with ``scale = "smoke"``; return (index of its first code cell, of its explore cell)."""
    import jupytext

    for folder in (work, work.parent / "lab-workspaces", work.parent / "lab-user-settings"):
        shutil.rmtree(folder, ignore_errors=True)
    work.mkdir(parents=True)
    cells_to_run = {}
    for paper in PAPERS:
        text = (ROOT / "notebooks" / f"{paper}.py").read_text()
        text, n = re.subn(r'^scale = "default"$', 'scale = "smoke"', text, flags=re.M)
        if n != 1:
            raise CheckFailed(f"notebooks/{paper}.py: no `scale = \"default\"` line in its parameters cell")
        (work / f"{paper}.py").write_text(text)
        cells = jupytext.reads(text, fmt="py:percent").cells
        explore = [i for i, c in enumerate(cells) if "explore" in c.metadata.get("tags", [])]
        if len(explore) != 1:
            raise CheckFailed(f"notebooks/{paper}.py has {len(explore)} cells tagged 'explore' (expected 1)")
        first_code = next(i for i, c in enumerate(cells) if c.cell_type == "code")
        cells_to_run[paper] = (first_code, explore[0])
    return cells_to_run


def start_lab(work: Path, log: Path) -> tuple[subprocess.Popen, str, str]:
    port, token = _free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "PRIVKIT_STATIC_WIDGETS")}
    env["JUPYTER_CONFIG_PATH"] = str(ROOT / "jupyter")
    cmd = [str(Path(sys.executable).parent / "jupyter"), "lab", "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={work}",
           # fresh workspace and user settings: nothing a reader's own JupyterLab saved (open tabs, settings) applies
           f"--LabApp.workspaces_dir={work.parent / 'lab-workspaces'}",
           f"--LabApp.user_settings_dir={work.parent / 'lab-user-settings'}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")  # this kind of machine runs everything as root
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CheckFailed(f"JupyterLab exited with {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                if r.status == 200:
                    return proc, base, token
        except OSError:
            time.sleep(0.5)
    raise CheckFailed(f"JupyterLab did not answer on {base} within 60 s; see {log}")


def _shutdown_kernels(base: str, token: str) -> None:
    """Stop every kernel of the server (each notebook's kernel is done once its check is)."""
    with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=10) as r:
        kernels = json.load(r)
    for kernel in kernels:
        req = urllib.request.Request(f"{base}/api/kernels/{kernel['id']}?token={token}", method="DELETE")
        urllib.request.urlopen(req, timeout=30).close()


def _fail_on_stderr(page, panel, out: Path, label: str) -> None:
    """Fail, with a screenshot, if any output of the notebook went to stderr (an error or a warning)."""
    errors = panel.locator(STDERR).all_inner_texts()
    if errors:
        page.screenshot(path=str(out / f"{Path(label).stem}-failed.png"))
        raise CheckFailed(f"{label}: {len(errors)} cell output(s) on stderr (errors or warnings): "
                          + " | ".join(e.strip()[:400] for e in errors))


def _active_cell(status) -> int:
    match = re.match(r"Cell (\d+)/", status.inner_text(timeout=5000))
    return int(match.group(1)) if match else 0


def _shift_enter_to(page, last: int, label: str) -> None:
    """Shift+Enter until the status bar's "Cell k/N" reads ``last``, each press checked (a key press can be lost
    while the notebook re-renders): every cell from the selected one to ``last - 1`` is run."""
    status = page.locator(".jp-StatusBar-TextItem", has_text=re.compile(r"^Cell \d+/\d+$")).first
    for target in range(_active_cell(status) + 1, last + 1):
        for _attempt in range(20):
            page.keyboard.press("Shift+Enter")
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and _active_cell(status) < target:
                time.sleep(0.1)
            if _active_cell(status) >= target:
                break
        else:
            raise CheckFailed(f"{label}: could not move to cell {target} with Shift+Enter")


def _panel_text(page) -> str:
    return page.locator(".privkit-explore .jp-OutputArea").first.inner_text(timeout=5000)


def check_notebook(page, base: str, token: str, paper: str, cells: tuple[int, int], out: Path,
                   timeout_s: float) -> dict:
    first_code, explore_index = cells
    page.goto(f"{base}/lab/tree/{paper}.py?reset&token={token}")  # reset: only this notebook open
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").last
    try:
        panel.locator(".jp-Cell").first.wait_for(timeout=60_000)
    except Exception as exc:
        raise CheckFailed(f"{paper}.py did not open as a notebook (no cells within 60 s): {exc}") from None
    # the kernel is ready when the status bar reads "... | Idle"
    page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for(timeout=120_000)
    panel.locator(".jp-Cell").nth(first_code).locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")  # command mode: Shift+Enter runs the cell and selects the next one
    started = time.monotonic()
    _shift_enter_to(page, explore_index + 2, paper)  # status bar positions are 1-based
    explore = panel.locator(".privkit-explore")
    rendered = ".privkit-explore .jp-OutputArea img, .privkit-explore .jp-OutputArea pre"
    while not panel.locator(rendered).count():
        _fail_on_stderr(page, panel, out, paper)
        if time.monotonic() - started > timeout_s:
            page.screenshot(path=str(out / f"{paper}-failed.png"))
            raise CheckFailed(f"{paper}: the interactive panel did not render within {timeout_s:.0f} s")
        time.sleep(1.0)
    page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for(timeout=timeout_s * 1000)
    run_s = time.monotonic() - started
    _fail_on_stderr(page, panel, out, paper)
    n_figures = panel.locator(".jp-RenderedImage img").count()
    if n_figures == 0:
        raise CheckFailed(f"{paper}: no figure rendered in the cells run")
    controls = explore.locator(".widget-slider, .widget-dropdown")
    if controls.count() == 0:
        raise CheckFailed(f"{paper}: the interactive panel has no slider or dropdown")
    page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for(timeout=120_000)
    before = _panel_text(page)
    first = explore.locator(".widget-slider .noUi-handle, .widget-dropdown select").first
    first.scroll_into_view_if_needed()
    if first.evaluate("e => e.tagName") == "SELECT":
        options = first.locator("option").all_inner_texts()
        first.select_option(index=(1 if len(options) > 1 else 0))
    else:  # drag the slider's handle to the right, as a reader would
        box = first.bounding_box()
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.mouse.down()
        page.mouse.move(box["x"] + box["width"] / 2 + 25, box["y"] + box["height"] / 2, steps=5)
        page.mouse.up()
    deadline = time.monotonic() + 60
    while _panel_text(page) == before and time.monotonic() < deadline:
        time.sleep(0.5)
    moved = _panel_text(page) != before
    if not moved:
        page.screenshot(path=str(out / f"{paper}-failed.png"))
        raise CheckFailed(f"{paper}: moving the panel's first control did not change its output within 60 s")
    time.sleep(1.0)  # let the kernel pick up the last value, then wait for every update to finish
    page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for(timeout=120_000)
    time.sleep(0.5)
    deadline = time.monotonic() + 60
    while explore.locator(".jp-OutputArea img").count() == 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    if explore.locator(".jp-OutputArea img").count() == 0:
        page.screenshot(path=str(out / f"{paper}-failed.png"))
        (out / f"{paper}-panel.html").write_text(explore.first.inner_html())
        raise CheckFailed(f"{paper}: after the control moved, the panel shows no figure within 60 s")
    explore.first.scroll_into_view_if_needed()
    time.sleep(0.5)
    page.screenshot(path=str(out / f"{paper}.png"))
    return {"paper": paper, "cells_run": explore_index + 1, "seconds": round(run_s, 1), "figures": n_figures,
            "controls": controls.count(), "control_moved_output": moved}


def check_student_notebook(page, base: str, token: str, relpath: str, n_cells: int, out: Path) -> dict:
    """A course assignment's blank student notebook: it opens, every cell runs, the otter checks render."""
    page.goto(f"{base}/lab/tree/{relpath}?reset&token={token}")
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").last
    panel.locator(".jp-Cell").first.wait_for(timeout=60_000)
    page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for(timeout=120_000)
    panel.locator(".jp-Cell").first.locator(".jp-InputPrompt").click()
    page.keyboard.press("Escape")
    started = time.monotonic()
    _shift_enter_to(page, n_cells, relpath)
    page.keyboard.press("Control+Enter")  # the last cell (Shift+Enter would append an empty cell)
    deadline = time.monotonic() + 240
    time.sleep(1.0)
    while panel.locator(".jp-InputPrompt", has_text="[*]").count() and time.monotonic() < deadline:
        time.sleep(0.5)  # cells still queued or running
    if panel.locator(".jp-InputPrompt", has_text="[*]").count():
        raise CheckFailed(f"{relpath}: cells still running after 240 s")
    checks = panel.locator(".jp-OutputArea-output", has_text=re.compile(r"q\d+ results")).count()
    page.screenshot(path=str(out / "course-student.png"))
    _fail_on_stderr(page, panel, out, relpath)
    if checks == 0:
        raise CheckFailed(f"{relpath}: no grader.check output rendered")
    return {"paper": relpath, "cells_run": n_cells, "seconds": round(time.monotonic() - started, 1),
            "figures": 0, "controls": 0, "control_moved_output": False, "otter_checks": checks}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "browser"))
    parser.add_argument("--papers", nargs="*", default=list(PAPERS))
    parser.add_argument("--timeout", type=float, default=240, help="seconds per notebook to reach its panel")
    parser.add_argument("--student", default=None,
                        help="a built course assignment's student folder (e.g. build/assignments-check/core/student): "
                             "its notebook is opened and run too")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    if not CHROMIUM.exists():
        print(f"browser check FAILED: no Chromium at {CHROMIUM}. Install Debian's chromium and chromium-driver "
              "(`make browser-deps`, as root) or set PRIVKIT_CHROMIUM to a Chromium binary.", file=sys.stderr)
        return 1
    try:
        from playwright.sync_api import Error as PlaywrightError, sync_playwright
    except ImportError:
        print("browser check FAILED: the playwright package is missing (it is in privkit's test extra)", file=sys.stderr)
        return 1
    started = time.monotonic()
    proc = None
    results = []
    try:
        cells = prepare(out / "work")
        proc, base, token = start_lab(out / "work", out / "jupyterlab.log")
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                         args=["--no-sandbox", "--disable-dev-shm-usage"])
            for paper in args.papers:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                console = (out / f"{paper}-console.log").open("w")
                page.on("console", lambda msg, f=console: f.write(f"{msg.type}: {msg.text}\n"))
                try:
                    result = check_notebook(page, base, token, paper, cells[paper], out, args.timeout)
                except PlaywrightError as exc:
                    page.screenshot(path=str(out / f"{paper}-failed.png"))
                    raise CheckFailed(f"{paper}: {str(exc).splitlines()[0]}") from None
                finally:
                    page.close()
                    _shutdown_kernels(base, token)
                results.append(result)
                print(f"ok {paper}: {result['cells_run']} cells in {result['seconds']} s, {result['figures']} "
                      f"figure(s), panel with {result['controls']} control(s) that update it; {out / (paper + '.png')}")
            if args.student:
                student = Path(args.student)
                notebooks = sorted(student.glob("*.ipynb"))
                if len(notebooks) != 1:
                    raise CheckFailed(f"--student {student}: expected one student notebook, found {len(notebooks)}")
                shutil.copytree(student, out / "work" / "course-student")
                import nbformat

                n_cells = len(nbformat.read(notebooks[0], as_version=4).cells)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                try:
                    result = check_student_notebook(page, base, token, f"course-student/{notebooks[0].name}",
                                                    n_cells, out)
                except PlaywrightError as exc:
                    page.screenshot(path=str(out / "course-student-failed.png"))
                    raise CheckFailed(f"student notebook: {str(exc).splitlines()[0]}") from None
                finally:
                    page.close()
                results.append(result)
                print(f"ok course student notebook {notebooks[0].name}: {n_cells} cells run, "
                      f"{result['otter_checks']} grader.check outputs; {out / 'course-student.png'}")
            browser.close()
    except CheckFailed as exc:
        print(f"browser check FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"browser check passed: {len(results)} notebooks in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
