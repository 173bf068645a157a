"""Errors, argument validation, device selection, config registry and figure output."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import pytest
import torch

import privkit
from privkit import _validate as v
from privkit import config
from privkit.errors import (
    InsufficientDataError,
    InvalidArgumentError,
    MissingResourceError,
    NotUnitNormError,
    PrivkitError,
    ShapeError,
    UnknownNameError,
)
from privkit.studies.figures import SectionTimer, save_figure, save_table, set_theme, write_run_manifest


# -- errors -----------------------------------------------------------------------------------------------
def test_error_hierarchy_is_rooted_in_valueerror():
    for cls in (InvalidArgumentError, UnknownNameError, ShapeError, NotUnitNormError, InsufficientDataError,
                MissingResourceError, privkit.ConvergenceError, privkit.PrivacyBudgetError):
        assert issubclass(cls, PrivkitError) and issubclass(cls, ValueError)


def test_missing_resource_says_what_and_where():
    err = MissingResourceError("CelebA identity file", expected_at="/data/celeba/identity_CelebA.txt",
                               how_to_get="Download it from the CelebA website.")
    assert isinstance(err, FileNotFoundError)
    msg = str(err)
    assert "/data/celeba/identity_CelebA.txt" in msg and "Download" in msg and "never downloads" in msg


def test_unknown_name_lists_valid_values():
    err = UnknownNameError("method", "foo", ["b", "a"])
    assert str(err) == "method='foo' is not known; valid values are: a, b"


# -- validation -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "1", None, True])
def test_epsilon_rejects(bad):
    with pytest.raises(InvalidArgumentError, match="epsilon"):
        v.check_epsilon(bad)


@pytest.mark.parametrize("bad", [0, 1, 1.5, -1e-9, float("nan")])
def test_delta_rejects(bad):
    with pytest.raises(InvalidArgumentError, match=r"delta must lie in \(0, 1\)|delta must be finite"):
        v.check_delta(bad)


def test_delta_allow_zero_and_accepts_valid():
    assert v.check_delta(0.0, allow_zero=True) == 0.0
    assert v.check_delta(1e-5) == 1e-5


def test_check_int_and_choice():
    assert v.check_int("k", 3, minimum=1) == 3
    with pytest.raises(InvalidArgumentError, match=r"k must lie in \[1, inf\]"):
        v.check_int("k", 0, minimum=1)
    with pytest.raises(InvalidArgumentError, match="integer"):
        v.check_int("k", 1.5)
    with pytest.raises(UnknownNameError, match="valid values are: x, y"):
        v.check_choice("mode", "z", ["x", "y"])


def test_check_tensor_shape_and_finiteness():
    x = torch.zeros(3, 4)
    assert v.check_tensor("x", x, ndim=2, shape=(None, 4)) is x
    with pytest.raises(ShapeError, match=r"x must have shape \(\*, 5\)"):
        v.check_tensor("x", x, shape=(None, 5))
    with pytest.raises(ShapeError, match="dimensions"):
        v.check_tensor("x", x, ndim=3)
    x[1, 2] = float("nan")
    with pytest.raises(InvalidArgumentError, match="NaN or inf"):
        v.check_tensor("x", x)
    with pytest.raises(InvalidArgumentError, match="torch.Tensor"):
        v.check_tensor("x", [1, 2])


def test_unit_norm_check():
    e = torch.nn.functional.normalize(torch.randn(5, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    v.check_unit_norm("e", e)
    with pytest.raises(NotUnitNormError, match="unit L2 norm"):
        v.check_unit_norm("e", e * 1.01)


def test_min_count():
    with pytest.raises(InsufficientDataError, match="at least 2 identities"):
        v.check_min_count("identity", 1, 2, "identities")


# -- device -------------------------------------------------------------------------------------------------
def test_resolve_device():
    assert privkit.resolve_device("cpu") == torch.device("cpu")
    assert privkit.resolve_device("auto").type in ("cpu", "cuda")
    with pytest.raises(UnknownNameError, match="auto, cpu, cuda"):
        privkit.resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(InvalidArgumentError, match="no CUDA"):
            privkit.resolve_device("cuda")


# -- config -------------------------------------------------------------------------------------------------
def test_config_errors():
    with pytest.raises(UnknownNameError, match="paper"):
        config.load("nope", "smoke")
    with pytest.raises(UnknownNameError, match="scale"):
        config.load("scoreshield", "huge")


def test_check_and_load_presets(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        n: int

    with pytest.raises(PrivkitError, match="missing"):
        config.check_presets("isp", {"smoke": Cfg(1)})
    every = {"smoke": Cfg(1), "default": Cfg(2), "paper": Cfg(3), "rehearsal": Cfg(4)}
    assert set(every) == set(config.SCALES)
    with pytest.raises(PrivkitError, match="frozen dataclass"):
        config.check_presets("isp", {**every, "smoke": {"n": 1}})
    with pytest.raises(UnknownNameError, match="paper"):
        config.check_presets("nope", every)
    monkeypatch.setitem(config._PRESETS, "isp", config.check_presets("isp", every))
    monkeypatch.setitem(config._ARTEFACTS, "isp", (("fig1_x", "a figure"),))
    assert config.artefacts("isp") == (("fig1_x", "a figure"),)
    assert config.load("isp", "default") == Cfg(2)
    assert config.load("isp", "smoke", n=7) == Cfg(7)
    with pytest.raises(UnknownNameError, match="override"):
        config.load("isp", "smoke", m=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.load("isp", "smoke").n = 5


def test_registered_presets_are_complete_frozen_dataclasses():
    assert set(config._PRESETS) == set(config.PAPERS)
    for paper, presets in config._PRESETS.items():
        assert set(presets) == set(config.SCALES), paper
        for cfg in presets.values():
            assert type(cfg).__dataclass_params__.frozen
        assert config.artefacts(paper), paper


@pytest.mark.slow
def test_no_mechanism_imports_a_study_or_the_runner():
    """The house (docs/architecture.md): mechanisms, data, encoders and the privacy core never import a study or the
    runner (module-level or inside a function); studies never import the runner; the shared layer (metrics,
    transforms, linalg, the privacy core) imports neither data, encoders nor a wing."""
    import ast
    import pathlib

    root = pathlib.Path(privkit.__file__).parent
    runner = ("privkit.config", "privkit.reproduce", "privkit.plan", "privkit.__main__")
    shared_modules = ("privkit.metrics", "privkit.transforms", "privkit.linalg", "privkit.errors", "privkit._validate",
                      "privkit.device")
    above_shared = ("privkit.data", "privkit.encoders", "privkit.isp", "privkit.dppose", "privkit.scoreshield",
                    "privkit.synthesisnet")
    for path in root.rglob("*.py"):
        rel = path.relative_to(root.parent).with_suffix("")
        mod = ".".join(rel.parts)
        if mod in runner or mod in ("privkit.__init__",):
            continue
        in_study = mod.startswith("privkit.studies")
        in_shared = mod in shared_modules or mod.startswith("privkit.privacy")
        pkg = mod.split(".")[:-1]  # the package a relative import starts from (``__init__`` counts as a module)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = pkg[: len(pkg) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else [])) if node.level else (node.module or "")
                names = [f"{target}.{a.name}" for a in node.names] + [target]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                assert not any(name == r or name.startswith(r + ".") for r in runner), (mod, name)
                if not in_study:
                    assert not name.startswith("privkit.studies"), (mod, name)
                if in_shared:  # the shared layer sits below data, encoders and the four wings
                    assert not any(name == w or name.startswith(w + ".") for w in above_shared), (mod, name)


# -- figures --------------------------------------------------------------------------------------------------
def _plot():
    set_theme()
    df = pd.DataFrame({"n": [1, 2, 3], "err": [1.0, 0.5, 0.25]})
    fig, ax = plt.subplots()
    ax.plot(df.n, df.err)
    return fig, df


@pytest.mark.slow
def test_save_figure_is_byte_stable_and_writes_data(tmp_path):
    fig, df = _plot()
    paths = save_figure(fig, tmp_path / "a", "fig1_test", df)
    save_figure(fig, tmp_path / "b", "fig1_test", df)
    plt.close(fig)
    assert {p.name for p in paths} == {"fig1_test.pdf", "fig1_test.png", "fig1_test.csv"}
    for name in ("fig1_test.pdf", "fig1_test.png", "fig1_test.csv"):
        a = hashlib.sha256((tmp_path / "a" / name).read_bytes()).hexdigest()
        b = hashlib.sha256((tmp_path / "b" / name).read_bytes()).hexdigest()
        assert a == b, name
    assert b"CreationDate" not in (tmp_path / "a" / "fig1_test.pdf").read_bytes()
    assert pd.read_csv(tmp_path / "a" / "fig1_test.csv").equals(df)
    assert not list(tmp_path.rglob("*.tmp"))


def test_save_figure_requires_data_and_good_names(tmp_path):
    fig, df = _plot()
    with pytest.raises(InvalidArgumentError, match="DataFrame"):
        save_figure(fig, tmp_path, "fig1", None)
    with pytest.raises(InvalidArgumentError, match="name"):
        save_figure(fig, tmp_path, "../escape", df)
    with pytest.raises(InvalidArgumentError, match="formats"):
        save_figure(fig, tmp_path, "fig1", df, formats=("jpg",))
    plt.close(fig)


def test_failed_write_leaves_nothing(tmp_path):
    class Boom:
        def savefig(self, fh, **kw):
            fh.write(b"partial")
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        save_figure(Boom(), tmp_path, "fig9_boom", pd.DataFrame({"a": [1]}))
    assert list(tmp_path.iterdir()) == []


def test_save_table_csv_and_latex(tmp_path):
    df = pd.DataFrame({"method": ["naive_x", "proj"], "mse": [1.23456, math.pi]})
    save_table(df, tmp_path, "table1_mse", caption="MSE & more")
    tex = (tmp_path / "table1_mse.tex").read_text()
    assert r"\toprule" in tex and r"naive\_x" in tex and "3.142" in tex and r"MSE \& more" in tex
    assert pd.read_csv(tmp_path / "table1_mse.csv")["mse"].iloc[1] == pytest.approx(math.pi)


def test_run_manifest(tmp_path):
    timer = SectionTimer()
    with timer("fig2"):
        pass
    p = write_run_manifest(tmp_path, paper="scoreshield", parameters={"scale": "smoke", "seed": 0, "x": Path("/a")},
                           device=torch.device("cpu"), timer=timer)
    m = json.loads(p.read_text())
    assert m["paper"] == "scoreshield" and m["parameters"]["scale"] == "smoke" and m["device"] == "cpu"
    assert "fig2" in m["wall_seconds"] and m["versions"]["torch"].startswith("2.14")
    assert "git_commit" in m


def test_run_manifest_from_a_dirty_tree_warns_loudly(tmp_path, monkeypatch, capsys):
    from privkit.studies import figures

    monkeypatch.setattr(figures, "git_commit", lambda: "0123abcd-dirty")
    write_run_manifest(tmp_path, paper="isp", parameters={}, device="cpu")
    err = capsys.readouterr().err
    assert "WARNING" in err and "uncommitted changes" in err and "0123abcd-dirty" in err
    assert json.loads((tmp_path / "run.json").read_text())["git_commit"] == "0123abcd-dirty"
    monkeypatch.setattr(figures, "git_commit", lambda: "0123abcd")
    write_run_manifest(tmp_path, paper="isp", parameters={}, device="cpu")
    assert capsys.readouterr().err == ""


def test_a_regenerated_figure_does_not_make_the_tree_dirty(tmp_path):
    """Only inputs make a run's commit dirty: a batch run rewrites figures/<paper> (tracked) paper after paper, and
    the later papers' manifests must still name a clean commit; an edited source file does make it dirty."""
    import subprocess

    from privkit._files import git_commit

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "figures" / "isp").mkdir(parents=True)
    (tmp_path / "figures" / "isp" / "t.csv").write_text("a\n1\n")
    (tmp_path / "code.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    head = git_commit(tmp_path)
    assert head is not None and len(head) == 40
    (tmp_path / "figures" / "isp" / "t.csv").write_text("a\n2\n")  # an output rewritten
    assert git_commit(tmp_path) == head
    (tmp_path / "code.py").write_text("x = 2\n")  # an input edited
    assert git_commit(tmp_path) == head + "-dirty"
    assert git_commit(tmp_path / "figures") == head + "-dirty"  # from a subfolder, the whole checkout counts
    assert git_commit(tmp_path.parent / "no-such-checkout-here") is None


def test_all_finite_is_exact_on_its_fast_and_slow_paths():
    from privkit._validate import all_finite

    x = torch.randn(64, 33)
    assert all_finite(x) and all_finite(torch.empty(0)) and all_finite(torch.arange(5))
    for bad in (float("nan"), float("inf"), -float("inf")):
        y = x.clone()
        y[17, 5] = bad
        assert not all_finite(y)
    both = x.clone()
    both[0, 0], both[1, 1] = float("inf"), -float("inf")  # their sum is NaN, still refused
    assert not all_finite(both)
    huge = torch.full((8,), 3e38)  # finite entries whose float32 sum overflows: settled element-wise
    assert not bool(torch.isfinite(huge.sum())) and all_finite(huge)
    with pytest.raises(InvalidArgumentError, match="NaN or inf"):
        v.check_tensor("x", torch.tensor([1.0, float("nan")]))
