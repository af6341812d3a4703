#!/usr/bin/env bash
# Long training on a GPU: the headline model (light, context 4096, batch 8, the defaults) of every
# bundled workload, trained for as many steps as fit in a time box (up to 10x the CPU default's
# 1000), all workloads at once on one GPU. The models come back for sampling and evaluation on CPU
# (docs/experiments.md, "Models trained elsewhere").
#
#   SECONDS_BOX=480 bash benchmarks/gpu_long_training.sh     # writes under $OUT (default: a temp dir)
#   STEPS=8000 SECONDS_BOX=500 bash benchmarks/gpu_long_training.sh   # a known step count, no probe
#
# 1. a 40-step probe of all workloads at once measures seconds per step under that load (on an
#    H200 it read 0.115 s where the long run took 0.051: start-up and warm-up weigh on 40 steps,
#    so the probe errs short; once a machine's rate is known, pass STEPS);
# 2. the step count is the largest multiple of 500 (at most MAX_STEPS) that fits in what is left
#    of the box, and every workload trains that many steps (same seed, same schedule shape);
#    (a guard stops the trainings when the box runs out: the halfway checkpoint is then what comes back);
# 3. each model directory, less its optimizer state, is packed two workloads to a tar.gz; with
#    KEEP_BEST=1 the trainings run with --keep-best and each workload's best-validated weights
#    (MODEL_DIR/best, a whole model directory) come back in its place (the 16 MiB a file the
#    device tool returns holds two workloads' models, not four).
# Without a CUDA device it says so and exits 0. GPU training is not bit-reproducible (bf16
# autocast, atomics); the seed still fixes the data order and initial weights.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}   # several trainings share the CPU cores
DEVICE=${DEVICE:-cuda}   # DEVICE=cpu: a dry run of the script's logic (with small STEP_UNIT/MAX_STEPS)
if [ "$DEVICE" = cuda ] && ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu_long_training: no CUDA device here; nothing to train"
    exit 0
fi
OUT=${OUT:-$(mktemp -d)}
BOX=${SECONDS_BOX:-480}
MAX_STEPS=${MAX_STEPS:-10000}
STEP_UNIT=${STEP_UNIT:-500}
PROBE_STEPS=${PROBE_STEPS:-40}
WORK=${WORK:-/tmp/gpu_long}
KEEP_BEST=${KEEP_BEST:-0}
mkdir -p "$OUT" "$WORK"
t0=$(date +%s)
"$PY" -c 'import torch, tracesynth; print("device:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", "| torch", torch.__version__, "| tracesynth", tracesynth.__version__)'
read -r -a WORKLOADS <<<"${WORKLOADS:-$("$PY" -c 'import tracesynth.datasets as d; print(" ".join(d.workloads()))')}"
echo "workloads: ${WORKLOADS[*]}"

train_all() {  # STEPS DIR EXTRA...: every workload at once; waits for all
    local steps=$1 dir=$2; shift 2
    local pids=()
    for w in "${WORKLOADS[@]}"; do
        ${TIMEOUT:-} "$PY" -m tracesynth train "$w:1,2" -o "$dir/$w" --device "$DEVICE" --steps "$steps" --seed 0 "$@" \
            >"$dir/$w.log" 2>&1 &
        pids+=($!)
    done
    local rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return $rc
}

if [ -n "${STEPS:-}" ]; then   # a step count known from an earlier probe: no probe
    steps=$STEPS
else
    echo "== 1. probe: $PROBE_STEPS steps, all workloads at once"
    mkdir -p "$WORK/probe"
    if ! train_all "$PROBE_STEPS" "$WORK/probe" --val-every 0 --checkpoint-every 1000; then
        for w in "${WORKLOADS[@]}"; do echo "-- $w"; tail -5 "$WORK/probe/$w.log"; done
        echo "probe failed"; exit 1
    fi
    per_step=$("$PY" - "$WORK/probe" "$PROBE_STEPS" "${WORKLOADS[@]}" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
secs = [json.load(open(f"{d}/{w}/state.json"))["seconds"] / n for w in sys.argv[3:]]
print(max(secs))
PY
    )
    probe_wall=$(( $(date +%s) - t0 ))
    steps=$("$PY" -c "
left = $BOX - $probe_wall - 45        # 45 s: start-up, final tables and packing
print(int(min($MAX_STEPS, max($STEP_UNIT, left / ($per_step * 1.15)) // $STEP_UNIT * $STEP_UNIT)))")
    echo "probe: ${per_step} s/step (slowest of ${#WORKLOADS[@]} at once), ${probe_wall} s so far → ${steps} steps"
fi

echo "== 2. train ${steps} steps, all workloads at once (bf16 autocast)"
mkdir -p "$WORK/long"
t1=$(date +%s)
left=$(( BOX - ($(date +%s) - t0) - 20 ))
best=()
[ "$KEEP_BEST" = 1 ] && best=(--keep-best)
TIMEOUT="timeout $left" train_all "$steps" "$WORK/long" --val-every $STEP_UNIT --checkpoint-every $(( (steps + 1) / 2 )) \
    "${best[@]}" || echo "(a training failed; see its log)"
echo "trained in $(( $(date +%s) - t1 )) s wall"
"$PY" - "$WORK/long" "${WORKLOADS[@]}" <<'PY' | tee "$OUT/summary.txt"
import json, sys
d = sys.argv[1]
for w in sys.argv[2:]:
    try:
        s = json.load(open(f"{d}/{w}/state.json"))
    except OSError as e:
        print(f"{w}: no model ({e})"); continue
    v = s["val_loss"][-1] if s.get("val_loss") else ("-", float("nan"))
    best = f", best {s['best_val_loss']:.3f} at step {s['best_step']}" if s.get("best_step") is not None else ""
    print(f"{w}: step {s['step']}, {s['seconds']:.0f} s of steps, {s['events_seen'] / s['seconds']:,.0f} events/s, "
          f"validation {v[1]:.3f} at step {v[0]}{best}, {s['precision']}")
PY
for w in "${WORKLOADS[@]}"; do tail -2 "$WORK/long/$w.log"; done >"$OUT/train_tails.txt"

echo "== 3. pack"
pack=$WORK/long
if [ "$KEEP_BEST" = 1 ]; then   # each workload's best/ under the workload's name
    pack=$WORK/best && rm -rf "$pack" && mkdir -p "$pack"
    for w in "${WORKLOADS[@]}"; do
        [ -d "$WORK/long/$w/best" ] && ln -s "$WORK/long/$w/best" "$pack/$w"
    done
fi
n=${#WORKLOADS[@]}
for ((i = 0; i < n; i += 2)); do
    pair=("${WORKLOADS[@]:i:2}")
    tar -h -C "$pack" --exclude=optimizer.safetensors --exclude=training.safetensors --exclude=best -czf "$OUT/models_$(IFS=_; echo "${pair[*]}").tar.gz" "${pair[@]}"
done
ls -la "$OUT"
echo "total $(( $(date +%s) - t0 )) s"
