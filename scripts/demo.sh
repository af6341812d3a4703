#!/usr/bin/env bash
# `make demo`: the main job end to end on real traces; prints where every output is.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-out/demo}"
TS=.venv/bin/tracesynth
SHARED_CTF="${SHARED_CTF:-../shared/data/ctf}"
mkdir -p "$OUT"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. ingest a real LTTng kernel trace (CTF, read with babeltrace2's bt2)"
$TS ingest "$SHARED_CTF/many-threads" -o "$OUT/many-threads.parquet" --workload many-threads
$TS info "$OUT/many-threads.parquet"

step "2. write it back out: babeltrace2-like text and a real CTF trace (opens in babeltrace2 / Trace Compass)"
$TS export "$OUT/many-threads.parquet" -f text -o "$OUT/many-threads.txt"
$TS export "$OUT/many-threads.parquet" -f ctf -o "$OUT/many-threads-ctf"
echo "babeltrace2 reads $(babeltrace2 "$OUT/many-threads-ctf" | wc -l) events from our CTF output"

echo
echo "Outputs:"
find "$OUT" -maxdepth 1 -mindepth 1 | sort | sed 's/^/  /'
