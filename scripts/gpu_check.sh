#!/usr/bin/env bash
# The GPU checks, in one command, on a lent GPU machine (the device tool; see docs/gpu.md). Writes logs to $OUT.
# Needs the wheels the GPU image lacks in .whl/ (kornia, kornia_rs, pydantic and its core, tomlkit).
set -u
OUT=${OUT:-/tmp/perfsuite-gpu}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# perfsuite itself, so that pytest finds its plugin by the entry point, as a user's install does
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . 2>&1 | tail -2
step() { echo "=== $1 $(date -u +%T)"; }
# STEPS picks the checks (default: all), e.g. STEPS="record compare exec"
want() { [[ " ${STEPS:-unit record compare exec doctor} " == *" $1 "* ]]; }
step gpu
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.csv"
python3 -c 'import torch, kornia, pynvml; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), "kornia", kornia.__version__)'
want unit && { step cuda-unit-tests
timeout 120 python3 -m pytest -q -p no:cacheprovider -rs tests/unit/test_probe_syncs.py tests/unit/test_probe_cost.py \
  tests/unit/test_runner.py tests/unit/test_probe_nvml.py tests/unit/test_augment_gpu.py tests/plugin/test_plugin_options.py \
  2>&1 | tee "$OUT/unit.log" | tail -25; }
want record && { step perf-record-exact
timeout 150 python3 -m pytest tests/perf -p perfsuite -q -rs -p no:cacheprovider --perfsuite-update-exact \
  --perfsuite-report-md "$OUT/perf-record.md" 2>&1 | tee "$OUT/perf-record.log" | tail -25
cp baselines/exact/cuda__*.json "$OUT/" 2>/dev/null; ls baselines/exact/; }
want compare && { step perf-compare-exact
timeout 120 python3 -m pytest tests/perf -p perfsuite -q -rs -p no:cacheprovider --perfsuite-compare \
  --perfsuite-report-md "$OUT/perf-compare.md" 2>&1 | tee "$OUT/perf-compare.log" | tail -15; }
python3 examples/own_pipeline/make_data.py /tmp/own-data --count 64 --size 128 >/dev/null
want exec && { step exec-own-pipeline
timeout 60 python3 -m perfsuite.cli exec --steps 20 -- python3 examples/own_pipeline/train.py --data /tmp/own-data --epochs 20 --device cuda \
  2>&1 | tee "$OUT/exec.log" | tail -40; }
want doctor && { step doctor-own-pipeline
timeout 90 python3 -m perfsuite.cli doctor -- python3 examples/own_pipeline/train.py --data /tmp/own-data --epochs 40 --device cuda \
  2>&1 | tee "$OUT/doctor.log" | tail -60; }
step end
