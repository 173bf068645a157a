"""Course mode: privkit's assignments, built and graded with otter-grader.

Each assignment is one jupytext file ``course/assignments/<name>.py`` written in otter-assign's
format (questions, solutions and tests marked in fenced ``otter`` cells).  From it:

* ``build``  runs ``otter assign`` and lays out ``<out>/<name>/{student,autograder,solution}``;
* ``grade``  grades a folder of submitted notebooks with ``otter run`` (one process per submission,
  with a time limit) and writes a CSV with one row per student and question;
* ``check``  builds every assignment and grades, for each, the solution (it must get full marks), the
  blank student notebook (no marks on any question) and the plausible wrong answers kept in
  ``course/wrong_answers/<name>.py`` (each must lose marks on its own question, and only there).

Before a submission runs it is screened: a notebook that cannot be read, that imports a module the
assignment forbids (listed in the source's ``privkit_course.forbidden_imports`` metadata), or that
changed a protected cell (prompts, ``grader.check`` cells) is reported with a reason.  Changed
protected cells are restored from the distributed notebook before grading; forbidden imports and
unreadable notebooks get no marks and are not executed.  A submission that runs past the time limit
gets no marks.  One bad submission never stops the grading of the others.
"""

from __future__ import annotations

import argparse
import ast
import csv
import importlib.util
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import jupytext
import nbformat

COURSE = Path(__file__).resolve().parent
ASSIGNMENTS = COURSE / "assignments"
WRONG_ANSWERS = COURSE / "wrong_answers"
ANSWER_TAG = "otter_answer_cell"
SOLUTION_TAG = "otter_assign_solution_cell"
CHECK_RE = re.compile(r"""grader\.check\(\s*["']([^"']+)["']\s*\)""")
DEFAULT_TIMEOUT_S = 600
CSV_FIELDS = ["student", "submission", "assignment", "question", "score", "max_score", "status", "message"]


class CourseError(Exception):
    """A course command cannot go on (a missing assignment, a malformed source, a failed build)."""


# --------------------------------------------------------------------------------------------------
# Sources


def assignment_names() -> list[str]:
    """The assignments kept in ``course/assignments``, in a fixed order (the privacy core first)."""
    names = sorted(p.stem for p in ASSIGNMENTS.glob("*.py") if not p.stem.startswith("_"))
    return sorted(names, key=lambda n: (n != "core", n))


def _check_name(name: str) -> str:
    names = assignment_names()
    if name not in names:
        raise CourseError(f"unknown assignment {name!r}; allowed: {', '.join(names)}")
    return name


@dataclass(frozen=True)
class Policy:
    """What a source says about grading, read from its ``privkit_course`` metadata."""

    title: str
    forbidden_imports: tuple[str, ...]


def read_policy(name: str) -> Policy:
    meta = jupytext.read(ASSIGNMENTS / f"{_check_name(name)}.py").metadata.get("privkit_course")
    if not isinstance(meta, dict) or "title" not in meta:
        raise CourseError(f"course/assignments/{name}.py: header metadata privkit_course.title is missing")
    forbidden = meta.get("forbidden_imports", [])
    if not isinstance(forbidden, list) or not all(isinstance(m, str) and m for m in forbidden):
        raise CourseError(f"course/assignments/{name}.py: privkit_course.forbidden_imports must be a list of module names")
    return Policy(str(meta["title"]), tuple(forbidden))


def read_wrong_answers(name: str) -> dict[str, dict[str, tuple[str, str]]]:
    """``{question: {wrong-answer name: (why it is wrong, code of the answer cell)}}``."""
    path = WRONG_ANSWERS / f"{_check_name(name)}.py"
    if not path.exists():
        return {}
    spec = importlib.util.spec_from_file_location(f"_privkit_wrong_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    wrong = getattr(module, "WRONG_ANSWERS", None)
    if not isinstance(wrong, dict):
        raise CourseError(f"{path}: defines no WRONG_ANSWERS dictionary")
    for question, answers in wrong.items():
        if not isinstance(answers, dict) or not answers:
            raise CourseError(f"{path}: WRONG_ANSWERS[{question!r}] must be a non-empty dictionary")
        for key, value in answers.items():
            if not (isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value)):
                raise CourseError(f"{path}: WRONG_ANSWERS[{question!r}][{key!r}] must be (why, code)")
    return wrong


def summary_table() -> str:
    """The README's table of assignments, read from the sources (question headings, points, wrong answers)."""
    lines = ["| assignment | questions (points) | wrong answers kept |", "|---|---|---|"]
    for name in assignment_names():
        nb = jupytext.read(ASSIGNMENTS / f"{name}.py")
        points = re.findall(r"# BEGIN QUESTION\nname: (\w+)\npoints: ([\d.]+)", "\n".join(c.source for c in nb.cells))
        titles = [m.group(1) for c in nb.cells if c.cell_type == "markdown"
                  for m in [re.match(r"## Q\d+\. (.+)", c.source)] if m]
        if len(points) != len(titles):
            raise CourseError(f"{name}: {len(points)} questions but {len(titles)} '## Qn.' headings")
        questions = "; ".join(f"{q.upper()} {t} ({p})" for (q, p), t in zip(points, titles))
        wrong = sum(len(v) for v in read_wrong_answers(name).values())
        lines.append(f"| `{name}`: {read_policy(name).title} | {questions} | {wrong} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Build


@dataclass(frozen=True)
class Built:
    """The three folders of one built assignment."""

    name: str
    root: Path

    @property
    def student(self) -> Path:
        return self.root / "student" / f"{self.name}.ipynb"

    @property
    def solution(self) -> Path:
        return self.root / "solution" / f"{self.name}.ipynb"

    @property
    def autograder(self) -> Path:
        return self.root / "autograder" / f"{self.name}-autograder.zip"


# Every otter command runs in a forked child of this process, which imported otter once (saving each
# child the 3-4 s of imports). The child starts its own session, so a timed-out run is killed as a whole
# group; the notebook's kernel lives in a session of its own, but ipykernel exits when its parent dies.
_CHILD_ENV = dict(PYTHONHASHSEED="0", MPLBACKEND="Agg", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


@dataclass
class OtterJob:
    """One ``otter`` command line, run in ``cwd`` with a time limit; its output goes to ``log``."""

    args: tuple[str, ...]
    cwd: Path
    log: Path
    timeout: float | None = None
    returncode: int | None = None
    timed_out: bool = False

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def _child(args: tuple[str, ...], cwd: Path, log: Path) -> None:
    os.setsid()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ.update(_CHILD_ENV)  # one thread per kernel: two graders share two cores without stalling
    os.chdir(cwd)
    code = 0
    try:
        from otter.cli import cli

        cli.main(args=list(args), prog_name="otter", standalone_mode=False)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the child reports any failure through its log and exit code
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_otter(jobs: list[OtterJob], workers: int = 2) -> list[OtterJob]:
    """Run the jobs, at most ``workers`` at a time; a job past its timeout is killed (``timed_out``)."""
    import multiprocessing

    import otter.cli  # noqa: F401 - imported once, before forking

    ctx = multiprocessing.get_context("fork")
    pending, running = list(jobs), []
    while pending or running:
        while pending and len(running) < max(1, workers):
            job = pending.pop(0)
            proc = ctx.Process(target=_child, args=(job.args, job.cwd, job.log))
            proc.start()
            running.append((job, proc, time.monotonic()))
        time.sleep(0.05)
        for item in list(running):
            job, proc, started = item
            if not proc.is_alive():
                proc.join()
                job.returncode = proc.exitcode
                running.remove(item)
            elif job.timeout is not None and time.monotonic() - started > job.timeout:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.join()
                job.returncode, job.timed_out = proc.exitcode, True
                running.remove(item)
    return jobs


def build(name: str, out: Path) -> Built:
    """``otter assign`` one source into ``out/<name>/{student,autograder,solution}``."""
    return build_many([name], out)[0]


def source_digest(name: str) -> str:
    """SHA-256 of an assignment's source: a build records it, and grading rebuilds when it no longer matches."""
    import hashlib

    return hashlib.sha256((ASSIGNMENTS / f"{_check_name(name)}.py").read_bytes()).hexdigest()


def ensure_built(out: Path, workers: int = 2) -> list[str]:
    """Build every assignment whose build under ``out`` is missing or older than its source; returns their names."""
    stale = []
    for name in assignment_names():
        stamp = Path(out) / name / "source.sha256"
        if not stamp.exists() or stamp.read_text().strip() != source_digest(name):
            stale.append(name)
    if stale:
        build_many(stale, out, workers)
    return stale


def build_many(names: list[str], out: Path, workers: int = 2) -> list[Built]:
    """Build several assignments, their ``otter assign`` runs side by side."""
    jobs = []
    for name in names:
        _check_name(name)
        read_policy(name)
        root = Path(out) / name
        shutil.rmtree(root, ignore_errors=True)
        work = root / ".assign"
        work.mkdir(parents=True)
        nb = jupytext.read(ASSIGNMENTS / f"{name}.py")
        for i, cell in enumerate(nb.cells):  # stable ids: a rebuilt student notebook matches old submissions
            cell["id"] = f"{name}-{i:03d}"
        nbformat.write(nb, work / f"{name}.ipynb")
        jobs.append(OtterJob(("assign", "--no-pdfs", f"{name}.ipynb", "dist"), work, root / "assign.log"))
    run_otter(jobs, workers)
    return [_finish_build(name, job) for name, job in zip(names, jobs)]


def _finish_build(name: str, job: OtterJob) -> Built:
    root = job.cwd.parent
    dist = job.cwd / "dist"
    zips = sorted((dist / "autograder").glob(f"{name}-autograder_*.zip"))
    if job.returncode != 0 or len(zips) != 1:
        raise CourseError(f"otter assign failed for {name}:\n{job.output()[-3000:]}")
    shutil.copytree(dist / "student", root / "student")
    (root / "autograder").mkdir()
    shutil.copy(zips[0], root / "autograder" / f"{name}-autograder.zip")
    shutil.copy(dist / "autograder" / "otter_config.json", root / "autograder" / "otter_config.json")
    (root / "solution").mkdir()
    shutil.copy(dist / "autograder" / f"{name}.ipynb", root / "solution" / f"{name}.ipynb")
    shutil.copytree(dist / "autograder" / "tests", root / "solution" / "tests")
    shutil.rmtree(job.cwd)
    job.log.unlink()
    (root / "source.sha256").write_text(source_digest(name) + "\n")
    built = Built(name, root)
    _stable_ids(built)
    if not answer_cells(nbformat.read(built.student, as_version=4)):
        raise CourseError(f"{name}: the student notebook has no answer cell")
    return built


def _stable_ids(built: Built) -> None:
    """Give the cells otter adds (init and check cells) ids that do not change from one build to the next."""
    student = nbformat.read(built.student, as_version=4)
    mapping = {}
    for i, cell in enumerate(student.cells):
        if not cell["id"].startswith(f"{built.name}-"):
            mapping[cell["id"]] = f"{built.name}-otter-{i:03d}"
    for path in (built.student, built.solution):
        nb = student if path == built.student else nbformat.read(path, as_version=4)
        for cell in nb.cells:
            cell["id"] = mapping.get(cell["id"], cell["id"])
        nbformat.write(nb, path)


def answer_cells(nb) -> dict[str, str]:
    """``{question: id of its answer cell}``: an answer cell belongs to the next ``grader.check`` cell."""
    found: dict[str, str] = {}
    pending: list[str] = []
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type == "code" and (ANSWER_TAG in tags or SOLUTION_TAG in tags):
            pending.append(cell["id"])
            continue
        match = CHECK_RE.search(cell.source) if cell.cell_type == "code" else None
        if match and pending:
            if len(pending) != 1:
                raise CourseError(f"question {match.group(1)} has {len(pending)} answer cells; write exactly one")
            found[match.group(1)] = pending.pop()
    if pending:
        raise CourseError(f"answer cells {pending} are not followed by a grader.check cell")
    return found


# --------------------------------------------------------------------------------------------------
# Submissions made from the sources (solution, blank, wrong answers)


def filled(built: Built, replace: dict[str, str] | None = None):
    """The student notebook with every answer cell holding the solution, except ``replace[question]``."""
    student = nbformat.read(built.student, as_version=4)
    solution = {c["id"]: c.source for c in nbformat.read(built.solution, as_version=4).cells}
    cells = answer_cells(student)
    unknown = set(replace or {}) - set(cells)
    if unknown:
        raise CourseError(f"{built.name}: wrong answers name unknown questions {sorted(unknown)}")
    by_id = {c["id"]: c for c in student.cells}
    for question, cell_id in cells.items():
        by_id[cell_id].source = (replace or {}).get(question, solution[cell_id]).strip("\n")
    return student


def wrong_bundles(name: str) -> list[dict[str, tuple[str, str]]]:
    """Wrong answers grouped into as few submissions as possible: bundle k holds each question's k-th one."""
    wrong = read_wrong_answers(name)
    depth = max((len(v) for v in wrong.values()), default=0)
    bundles = []
    for k in range(depth):
        bundle = {}
        for question, answers in wrong.items():
            items = list(answers.items())
            if k < len(items):
                bundle[question] = items[k]
        bundles.append(bundle)
    return bundles


# --------------------------------------------------------------------------------------------------
# Screening and grading


@dataclass
class Screened:
    """A submission after screening: the notebook to run, or the reason it is not run; notes for the CSV."""

    notebook: object | None
    refusal: str = ""
    notes: list[str] = field(default_factory=list)


def _module_names(source: str) -> list[tuple[str, int]]:
    """Modules a cell imports (``import``, ``from … import``, ``__import__``/``import_module`` with a literal)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        found = [(m, 0) for m in re.findall(r"^\s*(?:from|import)\s+([\w.]+)", source, flags=re.M)]
        return found
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append((node.module, node.lineno))
            names += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if called in ("__import__", "import_module"):
                names.append((node.args[0].value, node.lineno))
    return names


def _forbidden(module: str, forbidden: tuple[str, ...]) -> str | None:
    for bad in forbidden:
        if module == bad or module.startswith(bad + "."):
            return bad
    return None


def screen(path: Path, built: Built, policy: Policy) -> Screened:
    """Read a submission, refuse forbidden imports, restore changed or deleted protected cells."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # any unreadable file is graded 0 with the parser's reason
        return Screened(None, f"not a readable notebook ({type(exc).__name__}: {str(exc)[:200]})")
    dist = nbformat.read(built.student, as_version=4)
    protected = [c for c in dist.cells if c.get("metadata", {}).get("editable") is False]
    protected_ids = {c["id"] for c in protected}
    distributed_code = {c.source for c in dist.cells if c.cell_type == "code"}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or cell.get("id") in protected_ids and cell.source in distributed_code:
            continue
        for module, line in _module_names(cell.source):
            bad = _forbidden(module, policy.forbidden_imports)
            if bad:
                return Screened(None, f"imports {module} (cell {index + 1}, line {line}); "
                                      f"this assignment forbids {bad}: not run, no marks")
    notes = []
    by_id = {c.get("id"): c for c in nb.cells}
    previous = None
    for cell in dist.cells:
        mine = by_id.get(cell["id"])
        if cell["id"] in protected_ids:
            label = _label(cell)
            if mine is None:
                position = nb.cells.index(by_id[previous]) + 1 if previous in by_id else 0
                nb.cells.insert(position, nbformat.from_dict(dict(cell)))
                by_id[cell["id"]] = nb.cells[position]
                notes.append(f"protected cell {label} was deleted; the original was restored")
            elif mine.source != cell.source or mine.cell_type != cell.cell_type:
                mine.source, mine.cell_type = cell.source, cell.cell_type
                notes.append(f"protected cell {label} was changed; the original was restored")
        if cell["id"] in by_id:
            previous = cell["id"]
    return Screened(nb, notes=notes)


def _label(cell) -> str:
    match = CHECK_RE.search(cell.source)
    if match:
        return f'grader.check("{match.group(1)}")'
    first = cell.source.strip().splitlines()[0] if cell.source.strip() else ""
    return repr(first[:40])


@dataclass(frozen=True)
class Submission:
    student: str
    path: Path
    assignment: str


def _questions_and_points(built: Built) -> dict[str, float]:
    import zipfile

    points = {}
    with zipfile.ZipFile(built.autograder) as zf:
        for entry in sorted(zf.namelist()):
            if entry.startswith("tests/") and entry.endswith(".py"):
                scope: dict = {}
                exec(zf.read(entry).decode(), scope)  # otter's own test file: a literal dict
                points[scope["test"]["name"]] = float(scope["test"].get("points") or 1)
    return points


def _rows(sub: Submission, points: dict[str, float], score_of, status_of, message_of, extra: str = "") -> list[dict]:
    out = []
    for question, max_score in points.items():
        message = "; ".join(m for m in (message_of(question), extra) if m)
        out.append(dict(student=sub.student, submission=str(sub.path), assignment=sub.assignment,
                        question=question, score=score_of(question), max_score=max_score,
                        status=status_of(question), message=message))
    return out


def grade_many(subs: list[Submission], builts: dict[str, Built], timeout_s: float, workers: int = 2) -> list[list[dict]]:
    """Grade submissions (at most ``workers`` at a time); never raises: every failure is a row with a reason."""
    policies = {name: read_policy(name) for name in builts}
    points = {name: _questions_and_points(built) for name, built in builts.items()}
    results: list[list[dict] | None] = [None] * len(subs)
    jobs: list[tuple[int, OtterJob, str]] = []
    with tempfile.TemporaryDirectory(prefix="privkit-grade-") as tmp_root:
        for i, sub in enumerate(subs):
            built, pts = builts[sub.assignment], points[sub.assignment]
            screened = screen(sub.path, built, policies[sub.assignment])
            if screened.notebook is None:
                results[i] = _rows(sub, pts, lambda q: 0.0, lambda q: "refused", lambda q, r=screened.refusal: r)
                continue
            tmp = Path(tmp_root) / f"{i:04d}"
            tmp.mkdir()
            nbformat.write(screened.notebook, tmp / f"{built.name}.ipynb")
            args = ("run", "-a", str(built.autograder.resolve()), "-o", str(tmp), "--no-logo", f"{built.name}.ipynb")
            jobs.append((i, OtterJob(args, tmp, tmp / "otter.log", timeout_s), "; ".join(screened.notes)))
        run_otter([job for _, job, _ in jobs], workers)
        for i, job, notes in jobs:
            results[i] = _graded(subs[i], points[subs[i].assignment], job, timeout_s, notes)
    return results


def _graded(sub: Submission, points: dict[str, float], job: OtterJob, timeout_s: float, notes: str) -> list[dict]:
    if job.timed_out:
        reason = f"ran past the time limit of {timeout_s:g} s: not graded, no marks"
        return _rows(sub, points, lambda q: 0.0, lambda q: "timeout", lambda q: reason, notes)
    result_file = job.cwd / "results.json"
    if job.returncode != 0 or not result_file.exists():
        tail = job.output().strip().splitlines()[-3:]
        reason = "the grader could not run this notebook: " + " | ".join(tail)
        return _rows(sub, points, lambda q: 0.0, lambda q: "error", lambda q: reason, notes)
    results = {t["name"]: t for t in json.loads(result_file.read_text())["tests"] if "score" in t}

    def score(q):
        return float(results.get(q, {}).get("score") or 0.0)

    def status(q):
        return "passed" if score(q) >= points[q] - 1e-9 else "failed"

    def message(q):
        return "" if status(q) == "passed" else _failures(results.get(q, {}).get("output", ""))

    return _rows(sub, points, score, status, message, notes)


def _failures(output: str) -> str:
    """The failing test cases of one question, each as its last line (the exception and its message)."""
    failures = []
    for block in re.split(r"\n\s*(?=\S+ - \d+ result:)", output):
        head = re.match(r"\s*\S+ - (\d+) result:", block)
        if head and "Test case failed" in block:
            last = [line.strip() for line in block.strip().splitlines() if line.strip()][-1]
            failures.append(f"test {head.group(1)}: {last[:300]}")
    if not failures:
        return re.sub(r"\s+", " ", output).strip()[:500] or "no result for this question"
    return "; ".join(failures)


def _assignment_of(path: Path, known: list[str]) -> str | None:
    try:
        nb = nbformat.read(path, as_version=4)
        name = nb.metadata.get("otter", {}).get("assignment_name")
        if name in known:
            return name
        for cell in nb.cells[:3]:
            match = re.search(r"""otter\.Notebook\(\s*["']([\w-]+)\.ipynb["']""", cell.source)
            if match and match.group(1) in known:
                return match.group(1)
    except Exception:
        pass
    stem = path.stem
    return next((n for n in known if stem == n or stem.endswith(f"_{n}") or stem.endswith(f"-{n}")), None)


def find_submissions(folder: Path, known: list[str]) -> list[Submission | tuple[Path, str]]:
    """Every ``*.ipynb`` under ``folder``; the student is its sub-folder (or the file's stem at the top)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CourseError(f"SUBMISSIONS={folder} is not a folder of notebooks")
    found = []
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        rel = path.relative_to(folder)
        name = _assignment_of(path, known)
        student = rel.parts[0] if len(rel.parts) > 1 else path.stem
        if len(rel.parts) == 1 and name and student != name:
            student = re.sub(rf"[_-]{re.escape(name)}$", "", student)
        found.append(Submission(student, path, name) if name else (path, student))
    return found


def grade(folder: Path, built_root: Path, out_csv: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S,
          workers: int = 2) -> list[dict]:
    """Grade every notebook under ``folder`` against the assignments built under ``built_root``."""
    if not Path(folder).is_dir():
        raise CourseError(f"SUBMISSIONS={folder} is not a folder of notebooks")
    for name in ensure_built(Path(built_root), workers):
        print(f"built {name} first: its build was missing or older than course/assignments/{name}.py")
    known = [n for n in assignment_names() if (Path(built_root) / n / "autograder").is_dir()]
    if not known:
        raise CourseError(f"no built assignment under {built_root}; run `make assignments` first")
    jobs, rows = [], []
    for item in find_submissions(folder, known):
        if isinstance(item, tuple):
            path, student = item
            rows.append(dict(student=student, submission=str(path), assignment="", question="", score=0.0,
                             max_score=0.0, status="refused",
                             message=f"cannot tell which assignment this is (known: {', '.join(known)})"))
        else:
            jobs.append(item)
    builts = {n: Built(n, Path(built_root) / n) for n in known}
    for result in grade_many(jobs, builts, timeout_s, workers):
        rows.extend(result)
    out_csv = Path(out_csv)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    with out_csv.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return rows


# --------------------------------------------------------------------------------------------------
# Check: solutions get full marks, blanks none, wrong answers lose the right marks


def prepare_check(built: Built) -> tuple[Built, Path, dict[str, dict]]:
    """Write one built assignment's check submissions; returns what each is expected to score."""
    name = built.name
    subs = built.root / "check-submissions"
    subs.mkdir(parents=True)
    expectations: dict[str, dict] = {}
    nbformat.write(filled(built), subs / f"solution_{name}.ipynb")
    expectations["solution"] = {}
    shutil.copy(built.student, subs / f"blank_{name}.ipynb")
    expectations["blank"] = None
    for k, bundle in enumerate(wrong_bundles(name), start=1):
        key = f"wrong{k}"
        nbformat.write(filled(built, {q: code for q, (_, (_, code)) in bundle.items()}), subs / f"{key}_{name}.ipynb")
        expectations[key] = {q: label for q, (label, _) in bundle.items()}
    return built, subs, expectations


def check(names: list[str], out: Path, *, timeout_s: float = 300, workers: int = 2) -> bool:
    out = Path(out)
    started = time.perf_counter()
    plan = {built.name: prepare_check(built) for built in build_many(names, out, workers)}
    jobs = []
    for name, (built, subs, _) in plan.items():
        for path in sorted(subs.glob("*.ipynb")):
            jobs.append(Submission(path.stem.split("_")[0], path, name))
    builts = {n: p[0] for n, p in plan.items()}
    results = grade_many(jobs, builts, timeout_s, workers)
    ok = True
    lines = []
    for sub, rows in zip(jobs, results):
        expected = plan[sub.assignment][2][sub.student]
        for row in rows:
            q, full = row["question"], row["score"] >= row["max_score"] - 1e-9
            if expected is None:
                want, good = "no marks", row["score"] == 0
            elif row["question"] in expected:
                want, good = f"loses marks ({expected[q]})", not full
            else:
                want, good = "full marks", full
            ok &= good
            lines.append(f"{'ok  ' if good else 'FAIL'} {sub.assignment:13s} {sub.student:9s} {q:5s} "
                         f"{row['score']:.2f}/{row['max_score']:.2f}  expected {want}"
                         + ("" if good else f"  [{row['message'][:300]}]"))
    print("\n".join(lines))
    print(f"{'all expectations met' if ok else 'SOME EXPECTATIONS FAILED'}: {len(jobs)} submissions graded "
          f"in {time.perf_counter() - started:.0f} s")
    return ok


# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="course/course.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="write <out>/<name>/{student,autograder,solution}")
    p_build.add_argument("names", nargs="*")
    p_build.add_argument("--out", default="build/assignments")
    p_grade = sub.add_parser("grade", help="grade a folder of submitted notebooks into a CSV")
    p_grade.add_argument("submissions")
    p_grade.add_argument("--assignments", default="build/assignments", help="where `build` wrote the assignments")
    p_grade.add_argument("--out", default="build/grades.csv")
    p_grade.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per submission")
    p_grade.add_argument("--workers", type=int, default=2)
    sub.add_parser("table", help="print the README's table of assignments")
    p_check = sub.add_parser("check", help="solutions full marks, blanks none, wrong answers lose theirs")
    p_check.add_argument("names", nargs="*")
    p_check.add_argument("--out", default="build/assignments-check")
    p_check.add_argument("--timeout", type=float, default=300)
    p_check.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            for name in args.names or assignment_names():
                built = build(name, Path(args.out))
                print(f"{name}: {built.root}/{{student,autograder,solution}}")
            return 0
        if args.command == "table":
            print(summary_table())
            return 0
        if args.command == "grade":
            rows = grade(Path(args.submissions), Path(args.assignments), Path(args.out),
                         timeout_s=args.timeout, workers=args.workers)
            students = sorted({(r["student"], r["assignment"]) for r in rows})
            for student, assignment in students:
                mine = [r for r in rows if r["student"] == student and r["assignment"] == assignment]
                total = sum(r["score"] for r in mine)
                possible = sum(r["max_score"] for r in mine)
                print(f"{student:20s} {assignment or '?':13s} {total:6.2f} / {possible:.2f}")
            print(f"wrote {args.out} ({len(rows)} rows)")
            return 0
        names = [_check_name(n) for n in args.names] or assignment_names()
        return 0 if check(names, Path(args.out), timeout_s=args.timeout, workers=args.workers) else 1
    except CourseError as exc:
        print(f"course: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
