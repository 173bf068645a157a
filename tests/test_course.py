"""Course mode (course/course.py): the sources' structure, the submission screen, and grading bad submissions.

The full check that every solution gets full marks, every blank none and every wrong answer loses the marks of
its question is `course/course.py check`, run by `make test` as its own step.
"""

from __future__ import annotations

import csv
import importlib.util
import re
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
# otter imports traitlets code that passes types where traitlets now wants instances
pytestmark = pytest.mark.filterwarnings("ignore:Traits should be given as instances:DeprecationWarning")


def _load_course():
    spec = importlib.util.spec_from_file_location("privkit_course_tool", ROOT / "course" / "course.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


course = _load_course()
NAMES = course.assignment_names()


def test_one_assignment_per_paper_and_the_privacy_core():
    assert NAMES == ["core", "dppose", "isp", "scoreshield", "synthesisnet"]


def _questions(name: str) -> dict[str, dict]:
    """Per question of a source: its points, answer cells, visible and hidden test cells (read from the markers)."""
    nb = jupytext.read(ROOT / "course" / "assignments" / f"{name}.py")
    questions: dict[str, dict] = {}
    current, block = None, None
    for cell in nb.cells:
        text = cell.source
        fenced = re.fullmatch(r"```otter\n(.*)\n```", text.strip(), flags=re.S)
        if fenced:
            body = fenced.group(1)
            if body.startswith("# BEGIN QUESTION"):
                fields = dict(line.split(": ", 1) for line in body.splitlines()[1:] if ": " in line)
                current = fields["name"]
                questions[current] = dict(points=float(fields.get("points", 1)), answers=0, visible=0, hidden=0)
            elif body.startswith("# BEGIN SOLUTION"):
                block = "solution"
            elif body.startswith("# BEGIN TESTS"):
                block = "tests"
            elif body.startswith(("# END SOLUTION", "# END TESTS", "# END QUESTION")):
                block = None
            continue
        if cell.cell_type != "code" or current is None:
            continue
        if block == "solution":
            questions[current]["answers"] += 1
        elif block == "tests":
            questions[current]["hidden" if "hidden: true" in text else "visible"] += 1
    return questions


@pytest.mark.parametrize("name", NAMES)
def test_each_assignment_has_3_to_5_questions_with_one_answer_cell_visible_and_hidden_tests(name):
    questions = _questions(name)
    assert 3 <= len(questions) <= 5, f"{name}: {len(questions)} questions"
    for q, info in questions.items():
        assert info["answers"] == 1, f"{name} {q}: {info['answers']} answer cells"
        assert info["visible"] >= 1 and info["hidden"] >= 2, f"{name} {q}: {info}"


@pytest.mark.parametrize("name", NAMES)
def test_every_question_has_wrong_answers_and_they_name_real_questions(name):
    questions = _questions(name)
    wrong = course.read_wrong_answers(name)
    assert set(wrong) == set(questions), f"{name}: wrong answers for {sorted(wrong)}, questions {sorted(questions)}"
    for q, answers in wrong.items():
        for label, (why, code) in answers.items():
            assert len(why) > 20 and "def " in code, f"{name} {q} {label}"
            compile(code, f"{name}:{q}:{label}", "exec")


@pytest.mark.parametrize("name", NAMES)
def test_the_introduction_names_every_forbidden_module(name):
    policy = course.read_policy(name)
    assert policy.forbidden_imports, f"{name} forbids nothing"
    nb = jupytext.read(ROOT / "course" / "assignments" / f"{name}.py")
    intro = next(c.source for c in nb.cells if c.cell_type == "markdown" and c.source.lstrip().startswith("# "))
    for module in policy.forbidden_imports:
        assert module in intro, f"{name}: the introduction does not tell students that {module} is forbidden"


def test_readme_table_of_assignments_is_the_one_the_sources_give():
    readme = (ROOT / "README.md").read_text()
    assert course.summary_table() in readme, "README's assignment table is stale: paste `course/course.py table`"


def test_sources_cite_only_files_inside_the_repository():
    """Readers get the repository only: no path that climbs out of it, and every docs/ page named exists."""
    for path in sorted((ROOT / "course").rglob("*.py")):
        text = path.read_text()
        assert "../" not in text, f"{path} names a path outside the repository"
        for cited in re.findall(r"docs/[\w./-]+\.md", text):
            assert (ROOT / cited).exists(), f"{path} cites {cited}, which is not in the repository"


@pytest.mark.parametrize("source, expected", [
    ("import privkit.privacy", ["privkit.privacy"]),
    ("from privkit.privacy.calibration import gaussian_sigma as s", ["privkit.privacy.calibration",
                                                                     "privkit.privacy.calibration.gaussian_sigma"]),
    ("from privkit import privacy", ["privkit", "privkit.privacy"]),
    ("m = __import__('opacus')", ["opacus"]),
    ("import importlib\nx = importlib.import_module('privkit.scoreshield')", ["importlib", "privkit.scoreshield"]),
    ("def f(:\n  import opacus", ["opacus"]),  # a syntax error still gets its import lines scanned
])
def test_module_names_finds_every_kind_of_import(source, expected):
    assert [m for m, _ in course._module_names(source)] == expected


def test_forbidden_matches_whole_module_names_only():
    forbidden = ("privkit.privacy", "opacus")
    assert course._forbidden("privkit.privacy.samplers", forbidden) == "privkit.privacy"
    assert course._forbidden("opacus", forbidden) == "opacus"
    assert course._forbidden("privkit.privacyx", forbidden) is None
    assert course._forbidden("privkit", forbidden) is None


def test_wrong_bundles_take_one_wrong_answer_per_question():
    bundles = course.wrong_bundles("core")
    wrong = course.read_wrong_answers("core")
    assert len(bundles) == max(len(v) for v in wrong.values())
    seen = {(q, label) for bundle in bundles for q, (label, _) in bundle.items()}
    assert seen == {(q, label) for q, answers in wrong.items() for label in answers}


def test_grading_rebuilds_missing_or_stale_builds_only(tmp_path, monkeypatch):
    rebuilt = []
    monkeypatch.setattr(course, "build_many", lambda names, out, workers=2: rebuilt.extend(names))
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "source.sha256").write_text(course.source_digest("core") + "\n")
    (tmp_path / "isp").mkdir()
    (tmp_path / "isp" / "source.sha256").write_text("0" * 64)  # built from another version of the source
    assert course.ensure_built(tmp_path) == [n for n in NAMES if n != "core"]
    assert rebuilt == [n for n in NAMES if n != "core"]


def test_unknown_assignment_is_a_clear_error():
    with pytest.raises(course.CourseError, match="unknown assignment 'nope'; allowed: core"):
        course.build("nope", ROOT / "build" / "never")


def test_grade_refuses_a_missing_folder(tmp_path):
    with pytest.raises(course.CourseError, match="is not a folder"):
        course.grade(tmp_path / "missing", tmp_path, tmp_path / "g.csv")


@pytest.fixture(scope="module")
def built_core(tmp_path_factory):
    return course.build("core", tmp_path_factory.mktemp("assignments"))


def _set_cell(nb, predicate, source):
    cell = next(c for c in nb.cells if predicate(c))
    cell.source = source


@pytest.mark.slow
def test_bad_submissions_are_graded_with_a_reason_and_never_stop_the_others(built_core, tmp_path):
    subs = tmp_path / "submissions"
    answers = course.answer_cells(nbformat.read(built_core.student, as_version=4))

    def write(student, nb):
        (subs / student).mkdir(parents=True)
        nbformat.write(nb, subs / student / "core.ipynb")

    tampered = course.filled(built_core)
    _set_cell(tampered, lambda c: 'grader.check("q2")' in c.source, 'print("q2 results: All test cases passed!")')
    tampered.cells = [c for c in tampered.cells if "Initialize Otter" not in c.source]
    write("tampered", tampered)
    write("forbidden", course.filled(built_core, {
        "q1": "from privkit.privacy.calibration import gaussian_sigma, analytic_gaussian_delta as gaussian_delta\n"
              "def analytic_sigma(epsilon, delta, sensitivity=1.0):\n"
              "    return gaussian_sigma(epsilon, delta, sensitivity=sensitivity)"}))
    write("sneaky", course.filled(built_core, {"q2": "import importlib\nm = importlib.import_module('opacus')\n"
                                                     "def gaussian_mechanism(values, sigma, generator):\n"
                                                     "    return values"}))
    write("broken", course.filled(built_core, {"q2": "def gaussian_mechanism(values, sigma, generator)\n    return values"}))
    slow = course.filled(built_core)
    _set_cell(slow, lambda c: c["id"] == answers["q1"], "import time\ntime.sleep(600)\n" + slow.cells[
        [c["id"] for c in slow.cells].index(answers["q1"])].source)
    write("slow", slow)
    (subs / "garbage").mkdir()
    (subs / "garbage" / "core.ipynb").write_text("{ this is not a notebook")
    stray = nbformat.v4.new_notebook()
    nbformat.write(stray, subs / "stray.ipynb")

    rows = course.grade(subs, built_core.root.parent, tmp_path / "grades.csv", timeout_s=40, workers=2)
    by = {(r["student"], r["question"]): r for r in rows}
    questions = ["q1", "q2", "q3"]

    for q in questions:  # tampering with protected cells changes nothing: restored, graded, reported
        row = by[("tampered", q)]
        assert row["score"] == row["max_score"] and row["status"] == "passed"
        assert 'protected cell grader.check("q2") was changed; the original was restored' in row["message"]
        assert "'# Initialize Otter' was deleted; the original was restored" in row["message"]
    for student, module in (("forbidden", "privkit.privacy.calibration"), ("sneaky", "opacus")):
        for q in questions:
            row = by[(student, q)]
            assert row["score"] == 0 and row["status"] == "refused"
            assert f"imports {module}" in row["message"] and "not run, no marks" in row["message"]
    assert by[("broken", "q2")]["score"] == 0 and by[("broken", "q2")]["message"]
    assert by[("broken", "q1")]["score"] == by[("broken", "q1")]["max_score"]
    for q in questions:
        assert by[("slow", q)]["status"] == "timeout" and by[("slow", q)]["score"] == 0
        assert "ran past the time limit of 40 s" in by[("slow", q)]["message"]
        assert by[("garbage", q)]["status"] == "refused"
        assert "not a readable notebook" in by[("garbage", q)]["message"]
    assert by[("stray", "")]["message"].startswith("cannot tell which assignment")
    with (tmp_path / "grades.csv").open() as fh:
        written = list(csv.DictReader(fh))
    assert len(written) == len(rows) and list(written[0]) == course.CSV_FIELDS
