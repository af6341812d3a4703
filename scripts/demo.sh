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

W="datasets/$WORKLOAD"
N_TEST=$(.venv/bin/python -c "import tracesynth.datasets as d; print(len(d.load('$WORKLOAD', run=3)))")
N_GEN="${DEMO_EVENTS:-$N_TEST}"

step "5. reference generators: an order-8 Markov chain, and training's own events walked piece by piece ($WORKLOAD, runs 1-2)"
$TS baseline markov "$W/run1.parquet" "$W/run2.parquet" -n "$N_GEN" --order 8 --seed 0 -o "$OUT/markov8.parquet"
# The span splice's walk as published, with no model (docs/evaluation.md): what `generate --splice 64`
# must beat (its walk since 2026-12-08 is `--piece 384 --context 16 --drift 64` here).
$TS baseline resample "$W/run1.parquet" "$W/run2.parquet" -n "$N_GEN" --seed 0 -o "$OUT/resample.parquet"
# The same walk over whole rows (threads, CPUs, return values, payloads): it jumps only where every
# CPU runs a thread of the same name in the same syscall and renames threads across jumps, so its
# trace keeps the kernel's rules (step 8 checks it beside the Markov chain's).
$TS baseline resample "$W/run1.parquet" "$W/run2.parquet" -n 8192 --channels full --seed 0 \
    -o "$OUT/resample-full.parquet"

step "6. train the diffusion model (light = event + inter-event time, context 4096; ${DEMO_STEPS:-300} steps for the demo; the default is 1000)"
# --keep-best: the weights of the lowest validation loss also land in model/best (a model
# directory `generate` reads); on long runs that overfit (build on a GPU) they beat the last.
$TS train "$WORKLOAD:1,2" -o "$OUT/model" --channels light --context 4096 --steps "${DEMO_STEPS:-300}" --val-every 100 --seed 0 \
    --keep-best
$TS info "$OUT/model"   # what the model is, how its training went, the traces it learnt from

step "7. generate $N_GEN events, guided by the kernel rules, and write them as Parquet and CTF"
# The start-up is drawn cold (the default start temperature, 0.25): on this 300-step model that
# scored TSTR/TRTR 0.643 / 0.730 (sampling seeds 0 / 1) against 0.581 / 0.680 warm (measured
# before the support corrector; the n-gram prior, on by default, multiplies every event draw by
# the training runs' counts after and before the decided events nearby; its last lines say so,
# how many of the trace's 8-grams no
# training run contains, and how many of its 256-event spans a training run holds verbatim — the
# copy guard stays off on scimark, whose real runs share most of their long spans; DEMO_WORKLOAD=tar
# shows it at work; DEMO_WORKLOAD=pybench adds a line on the serial syscalls the guide holds to
# one-at-a-time order, since its syscalls come from several processes).
$TS generate "$OUT/model" -n "$N_GEN" --seed 0 --constraints guided \
    -o "$OUT/tracesynth.parquet"
$TS export "$OUT/tracesynth.parquet" -f ctf -o "$OUT/tracesynth-ctf"
$TS info "$OUT/tracesynth.parquet" --top 5

step "7b. the same model drawing nearly one event at a time: 256 parts a step (--ngram-rounds 256)"
# Every draw then sees the events decided just before it: fewer 8-grams no training run has and
# windows closer to real on sqlite, pybench, stream and tar (docs/model.md, "Sequential draws"), at 5-7x
# the sampling time, so the demo draws ${DEMO_SEQUENTIAL_EVENTS:-8192} events. Compare its last
# lines with step 7's: on scimark, whose loop is deterministic, it copies even more of the
# training runs' long spans (every 256-event span in the run made for the README, against 87% in
# step 7 and 72% for a real run) — there the defaults are the better choice.
$TS generate "$OUT/model" -n "${DEMO_SEQUENTIAL_EVENTS:-8192}" --seed 0 --constraints guided --ngram-rounds 256 \
    -o "$OUT/tracesynth-sequential.parquet"

step "7c. a self-conditioned model (train --self-condition): each denoising step reads what the last one expected"
# Opt-in (docs/model.md, "Self-conditioning"): on workloads whose samples repeat themselves under
# half as much as real (sqlite, pybench: DEMO_WORKLOAD=sqlite) it halves the 8-grams no training
# run has and its windows are harder to tell from real; on scimark, whose sample is already more
# regular than the held-out run, it makes it more so — the evaluation's last line says which.
$TS train "$WORKLOAD:1,2" -o "$OUT/model-self-conditioned" --channels light --context 4096 \
    --steps "${DEMO_STEPS:-300}" --val-every 0 --seed 0 --self-condition
$TS generate "$OUT/model-self-conditioned" -n "${DEMO_SEQUENTIAL_EVENTS:-8192}" --seed 0 --constraints guided \
    -o "$OUT/tracesynth-self-conditioned.parquet"
$TS evaluate --train "$W/run1.parquet" "$W/run2.parquet" --test "$W/run3.parquet" \
    --synthetic "$OUT/tracesynth-self-conditioned.parquet" -o "$OUT/report-self-conditioned" --quick --seeds 1 \
    | sed -n "/^$WORKLOAD: /,\$p"  # its one-line summary (the table: the report)

step "7d. the same model, its trace beginning with a training run's start-up (--start-anchor 256, opt-in)"
# The first 256 events are run 1's (seed 0; seed 1 takes run 2), in event types and gap classes;
# the model draws the rest around them. Start-ups become exact; on average TSTR/TRTR does not
# move (docs/model.md, "Start-up anchor"; step 10 compares the published runs).
$TS generate "$OUT/model" -n 4096 --seed 0 --constraints guided --start-anchor 256 \
    -o "$OUT/tracesynth-anchored.parquet" 2>&1 | grep -E '^(start-up anchor|4,096 events)'

step "7e. the same model with the span splice (--splice 64, opt-in)"
# Each stretch that no training 64-gram covers gets training's events between the same 64-event
# anchors, or a walk through training in pieces where no anchors match; undone where the trace
# would then copy more of one training run than the least one training run copies of another
# (+0.10). Its line says which (docs/model.md, "Span splice"; step 10 compares the published runs).
$TS generate "$OUT/model" -n 4096 --seed 0 --constraints guided --splice 64 \
    -o "$OUT/tracesynth-spliced.parquet" 2>&1 | grep -E '^(span splice|4,096 events)'

step "8. check both synthetic traces against kernel semantics; repair the Markov one"
$TS check "$OUT/tracesynth.parquet" "$OUT/markov8.parquet" "$OUT/resample-full.parquet" || true
$TS repair "$OUT/markov8.parquet" -o "$OUT/markov8-repaired.parquet" --edits "$OUT/markov8-edits.jsonl"

step "9. evaluate the three against the held-out real run 3 (TSTR/TRTR, fidelity and the start-up, discriminative and what gives windows away, repeated spans, privacy)"
for gen in tracesynth markov8 resample; do
    $TS evaluate --train "$W/run1.parquet" "$W/run2.parquet" --test "$W/run3.parquet" \
        --synthetic "$OUT/$gen.parquet" -o "$OUT/report-$gen" --quick --seeds 1
done

step "10. compare two published experiment runs cell for cell (the same models and seeds, one setting changed)"
# Per workload A -> B and the paired difference with its 95% interval; the committed runs
# under benchmarks/results/ (docs/experiments.md, "Comparing two runs").
$TS compare benchmarks/results/experiments-light4096-ngram benchmarks/results/experiments-guide-rounds-ngram \
    -m tstr_trtr -m disc_512 -m gen_events_per_s -o "$OUT/compare-guide-rounds.md" --plot "$OUT/compare-guide-rounds.png"
# Sampler settings on the same weights: the first window in 64 denoising steps (opt-in; fileio's
# loader calls come back with run 1 or 2 held out, not with run 3), and the cadence scaffold on
# every rhythm against off: fileio gains (its rhythm has closers, the fsync after every 20th
# sync, so the default `auto` places it), the plain gap rhythms do not (docs/model.md, "Start
# steps", "Cadence scaffold").
$TS compare benchmarks/results/experiments-holdout-run1 benchmarks/results/experiments-start-steps-run1 \
    -m tstr_trtr -m gen_events_per_s -o "$OUT/compare-start-steps.md" | grep -E '^\| (fileio|\*\*mean)'
$TS compare benchmarks/results/experiments-holdout-run1 benchmarks/results/experiments-cadence-guard-run1 \
    -m tstr_trtr -m disc_512 -m copy_rate_256 -o "$OUT/compare-cadence.md" | grep -E '^\| (fileio|stream|scimark|pybench) '
# The start-up anchor at training size on fileio's three folds: the worst fold gains, the start-up
# edits go to 0 (docs/model.md, "Start-up anchor").
$TS compare benchmarks/results/experiments-fileio-folds-matched-exec benchmarks/results/experiments-fileio-folds-matched-anchor \
    --where generator=tracesynth -m tstr_trtr_matched -m startup_edits -o "$OUT/compare-start-anchor.md" \
    | grep -E '^\| fileio'
# The span splice, with its walk, on the headline models (run 3 held out): windows against copying.
$TS compare benchmarks/results/experiments-defaults-run3-exec benchmarks/results/experiments-splice-walk-run3 \
    --where generator=tracesynth -m disc_512 -m copy_rate_256 -o "$OUT/compare-splice.md" \
    | grep -E '^\| (sqlite|gzip|pybench|build) '
# The same walk with no model (the resample peer) against the model with the splice and walk, seed
# for seed: what the network adds (docs/model.md, "What the model still decides").
$TS compare benchmarks/results/experiments-resample-run3 benchmarks/results/experiments-splice-walk-run3 \
    --where-b generator=tracesynth -m disc_512 -m tstr_trtr -m copy_rate_256 -o "$OUT/compare-resample.md" \
    | grep -E '^\| (sqlite|gzip|pybench|build|\*\*mean)'
# The walk's privacy dial: a jump needing only the last 16 events to match (not 64) copies fewer of
# training's long spans at level windows (docs/results.md, "The walk's privacy dial").
$TS compare benchmarks/results/experiments-resample-run3 benchmarks/results/experiments-resample-context16-run3 \
    -m disc_512 -m tstr_trtr -m copy_rate_256 -o "$OUT/compare-resample-context.md" \
    | grep -E '^\| (stream|tar|\*\*mean)'
# The whole-row walk with a 16-event match and jumps within 64 events of its own place
# (`--context 16 --drift 64 --channels full`) against the default whole-row walk: a third less
# copying at level windows over two folds (docs/results.md, "The walk over whole rows").
$TS compare benchmarks/results/experiments-resample-full-run3 benchmarks/results/experiments-resample-full-drift-run3 \
    --where-a generator=resample-full -m disc_512 -m copy_rate_256 -o "$OUT/compare-resample-full-drift.md" \
    | grep -E '^\| (build|pybench|\*\*mean)'
# One run's grid split in two: the same workloads and seeds at context 256 and 16384.
$TS compare benchmarks/results/experiments-context-ngram --where-a context=256 --where-b context=16384 \
    -m tstr_trtr -m disc_2048 -o "$OUT/compare-context.md" >/dev/null

echo
echo "Reports: $OUT/report-tracesynth/report.html, $OUT/report-markov8/report.html, $OUT/report-resample/report.html and $OUT/report-self-conditioned/report.html"
echo "Outputs:"
find "$OUT" -maxdepth 1 -mindepth 1 | sort | sed 's/^/  /'
