#!/usr/bin/env bash
# The fuzz targets (fuzz/fuzz.py --list), bounded: a fixed seed, a number of runs and a time
# limit per target. Replays every target's seed corpus and regression inputs first.
#   fuzz/run.sh                  the short run CI does: each target 150 inputs, at most 20 s
#   fuzz/run.sh RUNS SECONDS     a campaign, e.g. fuzz/run.sh -1 600 (-1: no limit on runs)
#   FUZZ_TARGETS="trace arm"     only these targets (default: all of them)
#   FUZZ_SEED=N                  another libFuzzer seed (default 1)
# A target's new inputs that add coverage go to FUZZ_WORK/<target>/corpus (default a
# temporary FUZZ_WORK); a finding is written there as crash-*, timeout-* or oom-*, the other
# targets still run, and the script ends with a non-zero status. The check holds each command
# to 20 s of processor time; -timeout bounds the wall time of a whole input (up to six
# commands, on a machine shared with other jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-150}"
seconds="${2:-20}"
python="${PYTHON:-.venv/bin/python}"
work="${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/fold-fuzz.XXXXXX")}"
seed="${FUZZ_SEED:-1}"
read -r -a targets <<< "${FUZZ_TARGETS:-$("$python" fuzz/fuzz.py --list | cut -d' ' -f1 | tr '\n' ' ')}"

echo "fuzz: replaying fuzz/corpus and fuzz/regressions"
"$python" fuzz/fuzz.py --replay fuzz/corpus fuzz/regressions

failed=()
for target in "${targets[@]}"; do
    mkdir -p "$work/$target/corpus"
    max_len=$("$python" -c "import sys; sys.path.insert(0, 'fuzz'); from targets import TARGETS
t = TARGETS['$target']; print(t.max_len, t.dictionary)")
    read -r length dictionary <<< "$max_len"
    corpora=("fuzz/corpus/$target")
    [ -d "fuzz/regressions/$target" ] && corpora+=("fuzz/regressions/$target")
    echo "fuzz: $target: $runs runs (-1 = unbounded), at most $seconds s, seed $seed; scratch in $work/$target"
    if ! "$python" fuzz/fuzz.py "$target" -seed="$seed" -runs="$runs" -max_total_time="$seconds" \
        -timeout=120 -rss_limit_mb=3072 -max_len="$length" -dict="fuzz/dicts/$dictionary" \
        -artifact_prefix="$work/$target/" -print_final_stats=1 \
        "$work/$target/corpus" "${corpora[@]}"; then
        failed+=("$target")
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: findings in ${failed[*]}: see $work/<target>/" >&2
    exit 1
fi
