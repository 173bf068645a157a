#!/usr/bin/env bash
# The GPU check (`make gpu-check`), one prepared script for a machine with an NVIDIA GPU:
#   1. the unit tests, where the CUDA tests (skipped on a CPU machine) run;
#   2. every notebook at smoke scale with device=cuda, through nbval;
#   3. the DP-step and nearest-correlation benchmarks on the GPU (benchmarks/results/gpu/dp_step_*.csv,
#      nearest_correlation.csv, each naming the device);
#   4. a row per step in benchmarks/results/gpu/gpu_check.csv naming the device, the versions and the outcome.
# It stops at once, saying so, when torch sees no CUDA device. Nothing here is needed on a CPU machine.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
OUT=benchmarks/results/gpu
mkdir -p "$OUT"
device=$($PY -c 'import torch,sys; sys.exit(3) if not torch.cuda.is_available() else print(torch.cuda.get_device_name(0))') || {
  echo "gpu-check: torch sees no CUDA device here; run it on a machine with an NVIDIA GPU" >&2; exit 1; }
versions=$($PY -c 'import torch; print(f"torch {torch.__version__} cuda {torch.version.cuda}")')
echo "gpu-check on: $device ($versions)"
row() { printf '%s,%s,"%s","%s",%s,%s\n' "$(date -u +%FT%TZ)" "$1" "$device" "$versions" "$2" "$3" >> "$OUT/gpu_check.csv"; }
[ -f "$OUT/gpu_check.csv" ] || echo "when,step,device,versions,rc,seconds" > "$OUT/gpu_check.csv"
t0=$(date +%s)
$PY -m pytest -q -p no:cacheprovider -n 8 -rs tests 2>&1 | tee "$OUT/unit_tests.log" | tail -5
rc=${PIPESTATUS[0]}; row unit_tests "$rc" $(( $(date +%s) - t0 ))
t0=$(date +%s)
rm -rf build/gpu-smoke
$PY -m privkit prepare --scale smoke --device cuda --out build/gpu-smoke >/dev/null &&
PRIVKIT_STATIC_WIDGETS=1 $PY -m pytest -q -p no:cacheprovider --nbval-lax --nbval-cell-timeout=900 \
  build/gpu-smoke/notebooks 2>&1 | tee "$OUT/smoke_notebooks.log" | tail -5
rc=${PIPESTATUS[0]}; row smoke_notebooks_cuda "$rc" $(( $(date +%s) - t0 ))
t0=$(date +%s)
$PY benchmarks/bench_dp_step.py --device cuda --repeats 15 --out "$OUT/dp_step_convnet.csv" 2>&1 | tee "$OUT/dp_step.log" | tail -3
rc=${PIPESTATUS[0]}
$PY benchmarks/bench_dp_step.py --device cuda --backbone efficientnet_lite0 --repeats 9 \
  --out "$OUT/dp_step_frozen.csv" 2>&1 | tee -a "$OUT/dp_step.log" | tail -3
rc=$(( rc | PIPESTATUS[0] )); row bench_dp_step_cuda "$rc" $(( $(date +%s) - t0 ))
t0=$(date +%s)
$PY benchmarks/bench_nearest_correlation.py --device cuda --out "$OUT/nearest_correlation.csv" 2>&1 |
  tee "$OUT/nearest_correlation.log" | tail -3
rc=${PIPESTATUS[0]}; row bench_nearest_correlation_cuda "$rc" $(( $(date +%s) - t0 ))
cat "$OUT/gpu_check.csv"
