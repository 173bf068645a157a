"""Size and shape of the privkit library: the measures the consolidation issue tracks.

Run from the repository root: ``python tools/house_metrics.py [--json]``.  It reads source files only (no import of
privkit beyond ``__all__`` lists, which are read from the syntax tree) and prints

* library lines: physical lines of ``privkit/**/*.py`` and, separately, code lines (not blank, not a comment, not a
  docstring), and statements (the syntax tree's statements, docstrings left out): a size that line wrapping does not
  change, so a cut in code lines can be told apart from a reflow;
* public names per wing: the length of each subpackage's ``__all__``;
* the largest function (lines) and the public function with the most parameters;
* notebook code lines (code cells of ``notebooks/*.py``) and the longest code cell;
* import cycles among privkit modules (any import, lazy ones included) and wing -> runner imports (a wing or the shared
  layer importing ``privkit.config`` or ``privkit.reproduce``).

Repeated-code pairs are counted by the ``duplicates`` command of the development tool library, not here.
"""
from __future__ import annotations

import argparse
import ast
import io
import json
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "privkit"
RUNNER = {"privkit.config", "privkit.reproduce", "privkit.plan", "privkit.__main__"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def code_lines(source: str, tree: ast.AST) -> int:
    doc_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                doc_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                        tokenize.ENDMARKER):
            continue
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - doc_lines)


def statements(tree: ast.AST) -> int:
    return sum(isinstance(node, ast.stmt) and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                                                   and isinstance(node.value.value, str))
               for node in ast.walk(tree))


def resolve(mod: str, is_pkg: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([target] if target else []))


def module_imports(mod: str, is_pkg: bool, tree: ast.Module, known: set[str]) -> set[str]:
    """privkit modules imported anywhere in the module (at module level or inside a function: a lazy import that
    closes a loop is still a cycle), except under ``if TYPE_CHECKING``."""
    out: set[str] = set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("privkit"):
                    out.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = resolve(mod, is_pkg, node.level, node.module)
            if not base.startswith("privkit"):
                continue
            for a in node.names:
                cand = f"{base}.{a.name}"
                out.add(cand if cand in known else base)
    return {m for m in out if m in known and m != mod}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), ignoring package->own-child edges."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def notebook_cells(path: Path) -> list[int]:
    cells: list[int] = []
    current: int | None = None
    for line in path.read_text().splitlines():
        if line.startswith("# %%"):
            if current is not None:
                cells.append(current)
            current = None if "[markdown]" in line else 0
            continue
        if current is not None and line.strip() and not line.lstrip().startswith("#"):
            current += 1
    if current is not None:
        cells.append(current)
    return cells


def measure() -> dict:
    files = sorted(LIB.rglob("*.py"))
    trees = {p: ast.parse(p.read_text(), filename=str(p)) for p in files}
    mods = {module_name(p): p for p in files}
    known = set(mods)
    physical = sum(len(p.read_text().splitlines()) for p in files)
    code = sum(code_lines(p.read_text(), trees[p]) for p in files)
    stmts = sum(statements(t) for t in trees.values())
    graph = {m: module_imports(m, p.name == "__init__.py", trees[p], known) for m, p in mods.items()}
    # A package importing its own submodules (``__init__`` re-exports) is not a cycle a reader follows.
    graph_nopkg = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in graph.items()}
    graph_nopkg = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph_nopkg.items()}
    runner = sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts
                    if t in RUNNER and m not in RUNNER and m != "privkit")
    wings = {}
    for m, p in mods.items():
        if m.count(".") == 1 and p.name == "__init__.py":
            for node in trees[p].body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets):
                    try:
                        wings[m] = len(ast.literal_eval(node.value))
                    except ValueError:
                        wings[m] = None
    biggest = (0, "")
    most_params = (0, "")
    for p, tree in trees.items():
        mod = module_name(p)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n_lines = node.end_lineno - node.lineno + 1
                if n_lines > biggest[0]:
                    biggest = (n_lines, f"{mod}.{node.name}")
                a = node.args
                n_params = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                n_params -= bool(a.args and a.args[0].arg in ("self", "cls"))
                if not node.name.startswith("_") and n_params > most_params[0]:
                    most_params = (n_params, f"{mod}.{node.name}")
    over12 = []
    for p, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                a = node.args
                n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                n -= bool(a.args and a.args[0].arg in ("self", "cls"))
                if n > 12:
                    over12.append(f"{module_name(p)}.{node.name} ({n})")
    nb = {}
    for p in sorted((ROOT / "notebooks").glob("*.py")):
        cells = notebook_cells(p)
        nb[p.stem] = {"code_lines": sum(cells), "longest_cell": max(cells, default=0),
                      "cells_over_30": sum(c > 30 for c in cells)}
    return {
        "library_physical_lines": physical,
        "library_code_lines": code,
        "library_statements": stmts,
        "modules": len(files),
        "public_names": wings,
        "largest_function": {"lines": biggest[0], "name": biggest[1]},
        "most_parameters": {"count": most_params[0], "name": most_params[1]},
        "public_functions_over_12_parameters": sorted(over12),
        "notebooks": nb,
        "import_cycles": cycles(graph_nopkg),
        "wing_to_runner_imports": runner,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of a summary")
    args = ap.parse_args(argv)
    m = measure()
    if args.json:
        print(json.dumps(m, indent=2))
        return
    print(f"library: {m['library_physical_lines']} lines ({m['library_code_lines']} code lines, "
          f"{m['library_statements']} statements), {m['modules']} modules")
    print("public names: " + ", ".join(f"{k.split('.')[-1]} {v}" for k, v in sorted(m["public_names"].items())))
    print(f"largest function: {m['largest_function']['name']} ({m['largest_function']['lines']} lines)")
    print(f"most parameters: {m['most_parameters']['name']} ({m['most_parameters']['count']}); "
          f"{len(m['public_functions_over_12_parameters'])} public functions over 12")
    for k, v in m["notebooks"].items():
        print(f"notebook {k}: {v['code_lines']} code lines, longest cell {v['longest_cell']}, "
              f"{v['cells_over_30']} cells over 30")
    print(f"import cycles: {len(m['import_cycles'])} {m['import_cycles']}")
    print(f"wing -> runner imports: {len(m['wing_to_runner_imports'])} {m['wing_to_runner_imports']}")


if __name__ == "__main__":
    main()
