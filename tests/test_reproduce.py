"""The batch runner, through the real jupytext + papermill path, on tiny fixture notebooks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from privkit import UnknownNameError
from privkit.reproduce import main, prepare, reproduce, run_paper

pytestmark = pytest.mark.slow  # a module-wide fixture takes seconds to build


FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("figs")
    # previous results of the failing notebook must survive its failure
    (out / "fail").mkdir()
    (out / "fail" / "fig0_previous.csv").write_text("a\n1\n")
    proc = subprocess.run(
        [sys.executable, "-m", "privkit", "reproduce", "--paper", "ok", "fail", "--scale", "smoke",
         "--device", "cpu", "--out", str(out), "--notebooks-dir", str(FIXTURES)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    return out, proc


def test_failing_notebook_gives_nonzero_exit_naming_paper_and_cell(batch):
    _, proc = batch
    assert proc.returncode == 1
    assert "fail" in proc.stderr and "cell" in proc.stderr
    assert "deliberate failure" in proc.stderr
    assert "RuntimeError" in proc.stderr


def test_progress_lines_and_summary(batch):
    _, proc = batch
    assert "[1/2] ok: ok in" in proc.stdout
    assert "[2/2] fail: failed" in proc.stdout
    assert "Summary" in proc.stdout


def test_successful_notebook_writes_figure_table_and_data(batch):
    out, _ = batch
    files = {p.name for p in (out / "ok").iterdir()}
    assert {"fig1_square.pdf", "fig1_square.png", "fig1_square.csv", "table1_square.csv", "table1_square.tex"} <= files
    assert "smoke" in (out / "ok" / "fig1_square.csv").read_text()  # the injected parameter reached the notebook


def test_failure_leaves_no_partial_output_and_keeps_previous_results(batch):
    out, _ = batch
    assert [p.name for p in (out / "fail").iterdir()] == ["fig0_previous.csv"]
    leftovers = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert leftovers == []
    assert not list(out.rglob("*.tmp"))


def test_executed_notebooks_are_kept(batch):
    executed = ROOT / "build" / "executed" / "smoke"
    nb = json.loads((executed / "fail.ipynb").read_text())
    assert any("deliberate failure" in json.dumps(c.get("outputs", [])) for c in nb["cells"])


def test_unknown_names_list_valid_ones(tmp_path):
    with pytest.raises(UnknownNameError, match="valid values are: dppose, isp, scoreshield, synthesisnet"):
        reproduce(["nope"], out=tmp_path)
    with pytest.raises(UnknownNameError, match="scale"):
        reproduce(None, scale="huge", out=tmp_path)
    with pytest.raises(UnknownNameError, match="device"):
        run_paper("ok", device="tpu", out=tmp_path, notebooks_dir=FIXTURES)
    assert main(["reproduce", "--paper", "nope", "--out", str(tmp_path)]) == 2


def test_prepare_writes_parameterised_unexecuted_notebooks(tmp_path):
    paths = prepare(scale="smoke", out=tmp_path, notebooks_dir=FIXTURES)
    assert {p.name for p in paths} == {"ok.ipynb", "fail.ipynb"}
    nb = json.loads((tmp_path / "notebooks" / "ok.ipynb").read_text())
    injected = [c for c in nb["cells"] if "injected-parameters" in c["metadata"].get("tags", [])]
    assert injected and "scale = \"smoke\"" in "".join(injected[0]["source"])
    assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")


def test_list_command(capsys):
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    for paper in ("isp", "dppose", "scoreshield", "synthesisnet", "smoke", "default", "paper"):
        assert paper in text


def test_paper_data_scales_need_a_data_root(tmp_path, capsys):
    """--scale paper and --scale rehearsal read --data-root; without one (or with a missing folder) the runner says
    what to do before any notebook starts."""
    from privkit.errors import PrivkitError
    from privkit.reproduce import _validate_common

    with pytest.raises(PrivkitError, match="rehearsal-root DIR"):
        _validate_common("rehearsal", "cpu", None)
    with pytest.raises(PrivkitError, match="Paper scale: datasets and weights"):
        _validate_common("paper", "cpu", tmp_path / "nowhere")
    _validate_common("rehearsal", "cpu", tmp_path)  # a folder: accepted
    assert main(["reproduce", "--scale", "rehearsal", "--paper", "isp", "--out", str(tmp_path / "o")]) == 2
    assert "rehearsal-root" in capsys.readouterr().err


def test_rehearsal_root_command_writes_every_dataset_and_weight(tmp_path, capsys):
    root = tmp_path / "root"
    assert main(["rehearsal-root", str(root)]) == 0
    out = capsys.readouterr().out
    assert "--scale rehearsal --data-root" in out
    for part in ("celeba", "VGGFace2", "lfw", "IJBB", "IJBC", "mpii", "ml-100k", "weights", "REHEARSAL.txt"):
        assert (root / part).exists(), part
    assert main(["rehearsal-root", str(root)]) == 2  # never written over


def test_rehearsal_tool_is_loaded_from_the_checkout_or_named_when_absent(tmp_path, monkeypatch):
    import sys

    from privkit import reproduce
    from privkit.errors import MissingResourceError

    tool = reproduce.rehearsal_tool()
    assert callable(tool.write_rehearsal_root) and tool.faces.write_celeba and tool.models.write_mpii
    assert reproduce.rehearsal_tool() is tool  # imported once
    monkeypatch.delitem(sys.modules, "privkit_tools_rehearsal")
    monkeypatch.setattr(reproduce, "__file__", str(tmp_path / "site-packages" / "privkit" / "reproduce.py"))
    with pytest.raises(MissingResourceError, match="tools/rehearsal"):
        reproduce.rehearsal_tool()


def test_batch_kernels_talk_over_ipc_in_a_private_folder(tmp_path, capfd):
    """Batch runs start their kernel with IPC sockets in the run's temporary folder (no unencrypted-TCP warning)."""
    import nbformat
    import papermill as pm

    from privkit.reproduce import _local_kernel_config

    cfg = _local_kernel_config(tmp_path)
    assert cfg.KernelManager.transport == "ipc" and cfg.KernelManager.ip == str(tmp_path / "kernel")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('kernel ok')")])
    nbformat.write(nb, tmp_path / "in.ipynb")
    pm.execute_notebook(str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="python3",
                        progress_bar=False, config=cfg)
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert out.cells[0].outputs[0]["text"] == "kernel ok\n"
    assert "without encryption" not in capfd.readouterr().err
