#!/usr/bin/env bash
# `make demo`: the main job end to end on real traces; prints where every output is.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-out/demo}"
TS=.venv/bin/tracesynth
SHARED_CTF="${SHARED_CTF:-../shared/data/ctf}"
mkdir -p "$OUT"

echo "== 1. ingest a real LTTng kernel trace (CTF, through babeltrace2's bt2)"
$TS ingest "$SHARED_CTF/many-threads" -o "$OUT/many-threads.parquet" --workload many-threads
$TS info "$OUT/many-threads.parquet"

echo
echo "Outputs:"
find "$OUT" -maxdepth 1 -mindepth 1 | sort | sed 's/^/  /'
