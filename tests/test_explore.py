"""The notebooks' interactive panels (privkit.studies.explore): static under the batch runner, correct readouts."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest
import torch

from privkit.errors import InvalidArgumentError
from privkit.privacy import analytic_gaussian_delta, gaussian_sigma
from privkit.reproduce import STATIC_WIDGETS_ENV, _scale_environment
from privkit.studies import explore as E


@pytest.fixture
def static(monkeypatch):
    monkeypatch.setenv(E.STATIC_ENV, "1")


def test_the_runner_and_the_panels_agree_on_the_environment_variable(monkeypatch):
    assert STATIC_WIDGETS_ENV == E.STATIC_ENV
    monkeypatch.delenv(E.STATIC_ENV, raising=False)
    with _scale_environment("smoke", None):
        assert E.static_mode()
    assert not E.static_mode()  # restored after the run; ipywidgets is installed


def test_static_panel_prints_the_initial_state_once(static, capsys):
    seen = []
    E.panel(lambda epsilon, n, scale: seen.append((epsilon, n, scale)), E._controls(
        {"epsilon": ("log", "ε", 2.0, 0.1, 10.0), "n": ("int", "n", 50, 10, 100)}), scale=3)
    assert seen == [(pytest.approx(2.0), 50, 3)]
    assert "initial state: epsilon = 2" in capsys.readouterr().out


def test_panel_needs_controls_and_known_kinds():
    with pytest.raises(InvalidArgumentError, match="controls must name at least one"):
        E.panel(print, {})
    with pytest.raises(InvalidArgumentError, match="control kind must be 'log', 'int' or 'choice'"):
        E._controls({"x": ("slider", "x", 1)})


def test_scoreshield_view_reports_the_true_delta_of_the_papers_sigma(static, capsys):
    E.scoreshield_view(20.0, 1e-4, 20)
    out = capsys.readouterr().out
    sigma = gaussian_sigma(20.0, 1e-4, sensitivity=2.0, method="scoreshield")
    assert f"paper's σ = {sigma:.4g}" in out
    assert f"truly gives δ = {analytic_gaussian_delta(20.0, sigma, sensitivity=2.0):.2e}" in out
    assert "MISSES the requested δ" in out  # ε = 20 is far outside the classic rule's range
    naive, projected = (float(x) for x in
                        __import__("re").search(r"naive release ([\d.]+), projected onto .* ([\d.]+)", out).groups())
    assert projected < naive  # projecting onto the correlation matrices can only move towards the truth


@pytest.mark.slow
def test_dppose_view_accounts_both_relations_at_the_target(static, capsys):
    E.dppose_view(1.0, 0.1, 0.05, 40, delta=1e-5, n_private=400, accountant="rdp")
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith(("add_remove", "substitution"))]
    assert [r[0] for r in rows] == ["add_remove", "substitution"]
    assert [r[1] for r in rows] == ["rdp", "pld"]
    sigma_ar, eps_ar, sigma_sub, eps_sub = float(rows[0][2]), float(rows[0][3]), float(rows[1][2]), float(rows[1][3])
    assert eps_ar <= 1.0 + 0.011 and eps_sub <= 1.0 + 0.011
    assert sigma_sub > sigma_ar  # replace-one neighbours need more noise at the same ε


def test_isp_view_reads_the_nearest_measured_rank(static, capsys):
    sweep = pd.DataFrame({"encoder": ["enc"] * 3, "method": ["raw", "ISP-W", "ISP-W"], "rank": [0, 2, 8],
                          "tar": [0.9, 0.5, 0.1], "tar_low": [0.8, 0.4, 0.05], "tar_high": [0.95, 0.6, 0.2]})
    util = pd.DataFrame({"encoder": ["enc", "enc"], "method": ["ISP-W", "ISP-W"], "rank": [2, 8], "knn": [99.0, 90.0]})
    E.isp_view("enc", "ISP-W", 7, sweep=sweep, util_sum=util, far=0.01)
    out = capsys.readouterr().out
    assert "raw TAR at FAR 0.01 = 0.900" in out
    assert "r = 8 (nearest measured rank to 7): TAR = 0.100 [0.050, 0.200]" in out
    assert "utility knn: 90.0 % of raw" in out
    with pytest.raises(InvalidArgumentError, match="two ranks"):
        E.isp_controls(sweep.iloc[:1])


def test_synthesisnet_view_publishes_with_the_models_guarantee(static, capsys):
    class Model:
        def publish(self, images, *, epsilon, generator):
            noise = torch.randn(images.shape, generator=generator) / epsilon
            return (images + noise).clamp(0, 1), type("G", (), {"epsilon": 2 * epsilon * 3.0})()

    E.synthesisnet_view(0.5, model=Model(), images=torch.rand(3, 3, 8, 8))
    assert "ε = 0.5 per unit of latent distance: 3 between any two faces" in capsys.readouterr().out
    assert math.isclose(E.synthesisnet_controls((0.01, 1.0))["epsilon"].value, 0.1)


def test_dppose_runs_view_rejects_an_unknown_run_or_image():
    from privkit.errors import UnknownNameError

    class Run:
        predictions = torch.zeros(2, 16, 2)

    runs = {"dpsgd warm eps=1": Run()}
    with pytest.raises(UnknownNameError, match="run='nope' is not known"):
        E.dppose_runs_view("nope", 0, runs=runs, keypoints=None, visible=None, images=None)
    with pytest.raises(InvalidArgumentError, match=r"image must be in \[0, 1\]"):
        E.dppose_runs_view("dpsgd warm eps=1", 5, runs=runs, keypoints=None, visible=None, images=None)
