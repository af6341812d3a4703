#!/usr/bin/env bash
# GPU check of the diffusion model: training and generation throughput on CUDA in a few minutes.
#
#   bash benchmarks/gpu_check.sh            # prints figures; writes nothing outside $OUT (default: a temp dir)
#
# Without a CUDA device it says so and exits 0, touching nothing. With one it runs:
#   1. bench_model.py --device cuda (light/full, diffusion vs AR, contexts 1024-16384, quick);
#   2. a real `tracesynth train` on one bundled workload (bf16 autocast, 300 steps, batch 32);
#   3. `tracesynth generate` of 200k events from that model, and reports events/s.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu_check: no CUDA device here; nothing to measure (the CPU figures come from bench_model.py)"
    exit 0
fi
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
"$PY" -c 'import torch; print("device:", torch.cuda.get_device_name(0), "| torch", torch.__version__)'
echo "== 1. model benchmark (CUDA)"
timeout 240 "$PY" benchmarks/bench_model.py --device cuda --threads 8 --quick --contexts 1024,4096,16384 \
    --json "$OUT/bench_cuda.json" || echo "(benchmark stopped: $?)"
WORKLOAD=$("$PY" -c 'import tracesynth.datasets as d; w = d.workloads(); print(w[0] if w else "")')
if [ -z "$WORKLOAD" ]; then
    echo "no bundled workload found: skipping the training run"
    exit 0
fi
echo "== 2. train light on $WORKLOAD (CUDA, bf16)"
start=$(date +%s.%N)
timeout 240 "$PY" -m tracesynth train "$WORKLOAD" -o "$OUT/model" --device cuda --steps 300 --batch-size 32 \
    --context 4096 --val-every 100 --checkpoint-every 300
end=$(date +%s.%N)
"$PY" - "$OUT/model" "$start" "$end" <<'PY'
import json, sys
state = json.load(open(sys.argv[1] + "/state.json"))
secs = float(sys.argv[3]) - float(sys.argv[2])
print(f"training: {state['events_seen']:,} events in {state['seconds']:.1f} s of steps "
      f"({state['events_seen'] / state['seconds']:,.0f} events/s; {secs:.0f} s wall incl. loading); "
      f"validation {state['val_loss'][-1][1]:.3f} nats/event")
PY
echo "== 3. generate 200k events (CUDA)"
timeout 120 "$PY" -m tracesynth generate "$OUT/model" -n 200000 --steps 16 --constraints none --device cuda \
    -o "$OUT/synthetic.parquet"
