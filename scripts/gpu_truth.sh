#!/usr/bin/env bash
# The sync model's ground truth, the reference suite's markers on CUDA, the CUDA exact file with the loader's
# counts, a timing baseline under the GPU's fingerprint, and the seeds' full-scale claim: one call on a lent GPU
# machine (docs/gpu.md). `bash scripts/gpu_truth.sh --cpu` makes the CPU side of the sync table here;
# `--dry-run` lists what would run and be compared.
# On the GPU it needs the wheels its image lacks in .whl/ (bash ../shared/tools/device-wheels.sh).
# STEPS picks the parts (default: all): unit starve suite scripts truth full doctor. Everything lands in $OUT.
# `starve` first (issues 53/59): face_parsing and captcha_slider at full scale, the seed's settings and the fix,
# REPEATS times each: GPU idle time against NVML, input efficiency from the device's own times (within 5% over the
# repeats), predicted (from the CPU Results committed in docs/data/starvation before the loan) against measured,
# and the measured demand recorded in baselines/demand/ (replacing the provisional one).
set -u
OUT=${OUT:-/tmp/perfsuite-truth}; mkdir -p "$OUT"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export PYTHONUNBUFFERED=1
step() { echo "=== $1 $(date -u +%T)"; }
ALL="unit starve suite scripts truth full doctor"
want() { [[ " ${STEPS:-$ALL} " == *" $1 "* ]]; }
if [ "${1:-}" = --dry-run ]; then  # what would run and be compared, on any machine
  ${PYTHON:-python} scripts/sync_truth.py runs; echo "steps: ${STEPS:-$ALL}"
  echo "starve: face_parsing captcha_slider x seed fix x ${REPEATS:-3} repeats at full scale, ${STARVE_S:-420} s at most;"
  echo "  predicted from: $(ls docs/data/starvation/*.json 2>/dev/null | tr '\n' ' ')"; exit 0
fi
if [ "${1:-}" = --cpu ]; then
  SIDE=cpu; PY=${PYTHON:-python}; STEPS=${STEPS:-suite scripts truth}; SUITE_S=${SUITE_S:-1500}
else
  SIDE=cuda; PY=python3
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
  $PY -m pip install -q --no-deps --no-build-isolation --no-index -e . 2>&1 | tail -2
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv | tee "$OUT/gpu.csv"
  $PY -c 'import torch, kornia; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), "kornia", kornia.__version__)'
fi
mkdir -p "$W/results" "$W/logs"
if want starve && [ $SIDE = cuda ]; then step "starvation at full scale: GPU idle, input efficiency, predicted against measured"
  SEED="--aug cpu --workers 2"
  FIX="--aug gpu --amp bf16 --workers 8 --pin-memory --persistent-workers --prefetch 4 --non-blocking"
  timeout "${STARVE_S:-420}" bash -c "
    for i in \$(seq ${REPEATS:-3}); do for w in face_parsing captcha_slider; do
      $PY -m perfsuite.cli run \$w --scale full $SEED --steps 12 --json >$W/results/starve-\$w-seed-\$i.json 2>>$W/logs/starve.log
      $PY -m perfsuite.cli run \$w --scale full $FIX --steps 12 --json >$W/results/starve-\$w-fix-\$i.json 2>>$W/logs/starve.log
    done; done"
  echo "starve: exit $?"
  find "$W/results" -name 'starve-*.json' -empty -delete
  $PY scripts/starvation.py check "$W"/results/starve-*.json | tee "$W/logs/starve-check.txt"
  $PY scripts/starvation.py table docs/data/starvation "$W"/results/starve-*.json | tee "$W/logs/starve-table.md"
  $PY -m perfsuite.cli demand add "$W"/results/starve-*.json --provenance "scripts/gpu_truth.sh starve, $(date -u +%F)"
  cp baselines/demand/*.json "$W/logs/"
fi
if want unit && [ $SIDE = cuda ]; then step "the sync probe's unit tests on CUDA"
  timeout "${UNIT_S:-60}" $PY -m pytest -q -p no:cacheprovider -rs tests/unit/test_probe_syncs.py tests/unit/test_sync_kinds.py \
    -k "not loaders_pin_memory" 2>&1 | tee "$W/logs/unit.log" | tail -15
fi
if want suite; then step "suite ($SIDE): markers, exact values re-recorded, every Result saved"
  # GPU: the saved Results are this machine's timing baselines too (baselines/<fingerprint>/)
  BASE=$([ $SIDE = cuda ] && echo baselines || echo "$W/baselines")
  timeout "${SUITE_S:-330}" $PY -m pytest tests/perf -p perfsuite -q -rs -p no:cacheprovider --perfsuite-update-exact \
    --perfsuite-save --perfsuite-baselines "$BASE" --perfsuite-report-md "$W/logs/suite-$SIDE.md" \
    2>&1 | tee "$W/logs/suite-$SIDE.log" | tail -45
  for d in "$BASE"/*/; do [ "$(basename "$d")" = exact ] || cp -r "$d" "$W/results/"; done
  cp baselines/exact/${SIDE}__*.json "$W/logs/" 2>/dev/null
fi
if want scripts; then step "scripts ($SIDE) under perfsuite exec"
  $PY examples/own_pipeline/make_data.py "$W/own-data" --count 64 --size 128 >/dev/null
  run() { name=$1; shift
    timeout 90 $PY -m perfsuite.cli exec --steps 4 --out "$W/results/$name.json" -- $PY "$@" --device $SIDE \
      >"$W/logs/exec-$name.log" 2>&1; echo "$name: exit $? $(grep -m3 'sync site' "$W/logs/exec-$name.log" | tr -s ' ')"; }
  run own_pipeline examples/own_pipeline/train.py --data "$W/own-data" --epochs 40
  run copies-pageable tests/data/scripts/copies/train.py --non-blocking
  run copies-pinned tests/data/scripts/copies/train.py --non-blocking --pin-memory
  run copies-blocking tests/data/scripts/copies/train.py --pin-memory
  run copies-from-list tests/data/scripts/copies/train.py --non-blocking --pin-memory --tensor-from-list
fi
if want truth; then step "sync truth ($SIDE)"
  $PY scripts/sync_truth.py collect "$W/results" --out "$W/logs/sync_truth_$SIDE.json"
  if [ $SIDE = cpu ]; then mkdir -p docs/data/sync_truth && cp "$W/logs/sync_truth_cpu.json" docs/data/sync_truth/cpu.json
  else $PY scripts/sync_truth.py compare docs/data/sync_truth/cpu.json "$W/logs/sync_truth_cuda.json" \
         --markdown "$W/logs/sync_truth.md" | tail -80; fi
fi
if want full && [ $SIDE = cuda ]; then step "full scale: face_parsing 512x512, the seed's settings against the seeds' fix"
  # The dataset made once (its time recorded), then found by a fresh process: the runs below are timed warm.
  # Then each run's phases against the overhead budget (issue 54: docs/phases.md; the checker runs on any Result:
  # python scripts/phase_budget.py RESULT.json)
  for k in 1 2; do timeout "${SETUP_S:-400}" $PY -m perfsuite.cli run face_parsing --scale full --setup-only --json \
    >"$W/full-setup$k.json" 2>>"$W/logs/full-setup.log"; echo "setup-only $k: exit $? $(cat "$W/full-setup$k.json")"; done
  timeout "${FULL_S:-200}" bash -c "
    $PY -m perfsuite.cli run face_parsing --scale full --aug cpu --workers 2 --steps 30 --json \
      >$W/full-seed.json 2>$W/logs/full-seed.log
    $PY -m perfsuite.cli run face_parsing --scale full --aug gpu --amp bf16 --workers 8 --pin-memory \
      --persistent-workers --prefetch 4 --non-blocking --steps 30 --json >$W/full-tuned.json 2>$W/logs/full-tuned.log"
  echo "full: exit $?"
  $PY - "$W/full-seed.json" "$W/full-tuned.json" <<'PYEOF'
import json, sys
runs = []
for path in sys.argv[1:]:
    try:
        runs.append(json.load(open(path))["metrics"])
    except Exception as exc:  # a run that did not finish: say so, print the rest
        print(f"{path}: no Result ({exc})"); runs.append({})
for name in ("samples_per_s", "gpu_util", "gpu_sm_util", "data_wait_frac", "input_efficiency", "syncs_per_step"):
    values = [m.get(name, {}).get("value") for m in runs]
    ratio = values[1] / values[0] if all(isinstance(v, (int, float)) and v for v in values) else None
    print(f"{name:18} seed {values[0]!s:>10}  tuned {values[1]!s:>10}  ratio {ratio if ratio is None else round(ratio, 3)}")
PYEOF
  # Where each run's time went, and the budget: at most BUDGET_S beyond warm-up + window, the cache hit (issue 54)
  $PY scripts/phase_budget.py "$W/full-seed.json" "$W/full-tuned.json" --setup "$W/full-setup2.json" \
    --budget "${BUDGET_S:-15}" | tee "$W/logs/phase-budget.txt"
fi
if want doctor && [ $SIDE = cuda ]; then step "doctor on the example script"
  timeout "${DOCTOR_S:-100}" $PY -m perfsuite.cli doctor -- $PY examples/own_pipeline/train.py --data "$W/own-data" \
    --epochs 40 --device cuda >"$W/logs/doctor.log" 2>&1; echo "doctor: exit $?"; tail -40 "$W/logs/doctor.log"
fi
step end
tar -C "$W" -czf "$OUT/truth-$SIDE.tgz" logs results $(cd "$W" && ls full-*.json 2>/dev/null)
