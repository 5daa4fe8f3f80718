#!/usr/bin/env bash
# A campaign: each target fuzzed for SECONDS, carrying on past findings (FUZZ_FINDINGS), and
# started again with the next seed when a run past -timeout or -rss_limit_mb ends the process.
#   fuzz/campaign.sh SECONDS [TARGET...]     (default: every target, one after another)
# Everything goes to FUZZ_WORK (default a temporary directory): per target its grown corpus,
# the findings kept (findings/TARGET/finding-*, each with its message in a .txt), the
# timeout-*/oom-* inputs, and the log of each run; a summary of inputs run and findings is
# printed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:?SECONDS per target}"
shift
python="${PYTHON:-.venv/bin/python}"
work="${FUZZ_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/fold-campaign.XXXXXX")}"
if [ "$#" -gt 0 ]; then targets=("$@"); else
    read -r -a targets <<< "$("$python" fuzz/fuzz.py --list | cut -d' ' -f1 | tr '\n' ' ')"
fi
export FUZZ_FINDINGS="$work/findings"
for target in "${targets[@]}"; do
    read -r length dictionary <<< "$("$python" -c "import sys; sys.path.insert(0, 'fuzz')
from targets import TARGETS; t = TARGETS['$target']; print(t.max_len, t.dictionary)")"
    mkdir -p "$work/$target/corpus"
    corpora=("fuzz/corpus/$target")
    [ -d "fuzz/regressions/$target" ] && corpora+=("fuzz/regressions/$target")
    end=$(( $(date +%s) + seconds ))
    seed="${FUZZ_SEED:-1}"
    while [ "$(date +%s)" -lt "$end" ]; do
        left=$(( end - $(date +%s) ))
        "$python" fuzz/fuzz.py "$target" -seed="$seed" -max_total_time="$left" \
            -timeout=120 -rss_limit_mb=3072 -max_len="$length" -dict="fuzz/dicts/$dictionary" \
            -artifact_prefix="$work/$target/" -print_final_stats=1 \
            "$work/$target/corpus" "${corpora[@]}" > "$work/$target/run-$seed.log" 2>&1 || true
        seed=$(( seed + 1 ))
    done
done
set +e +o pipefail  # a summary with nothing found to count is still a summary
echo "campaign in $work"
for target in "${targets[@]}"; do
    runs=$(grep -h "stat::number_of_executed_units" "$work/$target"/run-*.log \
        | awk '{ n += $2 } END { print n + 0 }')
    kept=$(find "$work/findings/$target" -name 'finding-*.txt' 2>/dev/null | wc -l)
    kinds=$(find "$work/findings/$target" -name 'finding-*.txt' 2>/dev/null \
        | sed 's/.*finding-\([0-9a-f]*\)-.*/\1/' | sort -u | wc -l)
    ended=$(find "$work/$target" -maxdepth 1 \( -name 'timeout-*' -o -name 'oom-*' -o -name 'crash-*' \) | wc -l)
    corpus=$(find "$work/$target/corpus" -type f | wc -l)
    echo "$target: $runs inputs in $seconds s, $kinds kinds of finding ($kept kept), $ended runs ended by a timeout, oom or crash, corpus grew by $corpus"
done
