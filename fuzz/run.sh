#!/usr/bin/env bash
# The differential fuzzer (fuzz/differential.py), bounded: a fixed seed and number of runs,
# and a time limit besides. Replays the seed corpus and the regression inputs first.
#   fuzz/run.sh              the short run CI does (600 inputs, at most 120 s)
#   fuzz/run.sh RUNS SECONDS a longer campaign, e.g. fuzz/run.sh -1 3600 (-1: no limit on runs);
#                            FUZZ_SEED picks another libFuzzer seed (default 1)
# New inputs that add coverage go to a scratch directory (FUZZ_WORK, default a temporary
# one); a finding is written there as crash-* and ends the run with a non-zero status.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-600}"
seconds="${2:-120}"
python="${PYTHON:-.venv/bin/python}"
work="${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/fold-fuzz.XXXXXX")}"
mkdir -p "$work/corpus"
echo "fuzz: replaying fuzz/corpus and fuzz/regressions"
"$python" fuzz/differential.py --replay fuzz/corpus fuzz/regressions
seed="${FUZZ_SEED:-1}"
echo "fuzz: $runs runs (-1 = unbounded), at most $seconds s, seed $seed; scratch in $work"
"$python" fuzz/differential.py -seed="$seed" -runs="$runs" -max_total_time="$seconds" \
    -timeout=20 -rss_limit_mb=3072 -max_len=4096 -dict=fuzz/jsonl.dict \
    -artifact_prefix="$work/" -print_final_stats=1 \
    "$work/corpus" fuzz/corpus fuzz/regressions
