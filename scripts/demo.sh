#!/usr/bin/env bash
# `make demo`: the main job end to end on real traces; prints where every output is.
# Later steps (baselines, training, generation, checking, evaluation) use the bundled dataset.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-out/demo}"
TS=.venv/bin/tracesynth
SHARED_CTF="${SHARED_CTF:-../shared/data/ctf}"
WORKLOAD="${DEMO_WORKLOAD:-scimark}"
mkdir -p "$OUT"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. the bundled real dataset (recorded with tracesynth record; datasets/MANIFEST.md)"
$TS datasets list

step "2. ingest a real LTTng kernel trace (CTF, read with babeltrace2's bt2)"
if [ -f "$SHARED_CTF/many-threads/metadata" ]; then
    $TS ingest "$SHARED_CTF/many-threads" -o "$OUT/many-threads.parquet" --workload many-threads
    $TS info "$OUT/many-threads.parquet" --top 5
else
    echo "(skipped: no shared LTTng traces at $SHARED_CTF; set SHARED_CTF=...)"
fi

step "3. write a trace back out: babeltrace2-like text and a real CTF trace (opens in babeltrace2 / Trace Compass)"
$TS export "datasets/$WORKLOAD/run1.parquet" -f text -o "$OUT/$WORKLOAD-run1.txt"
$TS export "datasets/$WORKLOAD/run1.parquet" -f ctf -o "$OUT/$WORKLOAD-run1-ctf"
echo "babeltrace2 reads $(babeltrace2 "$OUT/$WORKLOAD-run1-ctf" | wc -l) events from our CTF output; first lines:"
(babeltrace2 "$OUT/$WORKLOAD-run1-ctf" || true) | head -3

step "4. record a new real trace with ftrace (root + tracefs)"
if $TS record -o "$OUT/recorded-tar.parquet" --workload tar -- tar -czf "$OUT/src.tgz" src; then
    $TS info "$OUT/recorded-tar.parquet" --top 5
else
    echo "(recording not possible here: see the message above)"
fi

echo
echo "Outputs:"
find "$OUT" -maxdepth 1 -mindepth 1 | sort | sed 's/^/  /'
