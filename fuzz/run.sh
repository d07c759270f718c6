#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (libFuzzer through cargo-fuzz, nightly), seeded from
# ../shared/corpora (fuzz/seed.py), and prints one line per target: executions, corpus size and
# findings. A finding is saved under fuzz/artifacts/<target>/ and makes this script exit 1;
# each one becomes a regression test beside the code it breaks. Usage: fuzz/run.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(sql_lowering recipe sql_corpus seq_corpus catalog_corpus)
command -v cargo-fuzz > /dev/null || cargo install --quiet --locked cargo-fuzz
rustup toolchain list | grep -q nightly || rustup toolchain install --profile minimal nightly
python3 seed.py
status=0
printf '%-16s %8s %12s %10s %8s\n' target seconds executions corpus findings
for t in "${targets[@]}"; do
    log=$(mktemp)
    cargo +nightly fuzz run "$t" -O -- -max_total_time="$seconds" -max_len=65536 -timeout=30 \
        -rss_limit_mb=4096 -print_final_stats=1 > "$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    corpus=$(ls "corpus/$t" 2>/dev/null | wc -l)
    findings=$(ls "artifacts/$t" 2>/dev/null | wc -l)
    printf '%-16s %8s %12s %10s %8s\n' "$t" "$seconds" "${execs:-?}" "$corpus" "$findings"
    if [ $rc -ne 0 ]; then
        status=1
        grep -m5 -E 'panicked|ERROR|SUMMARY' "$log" | sed 's/^/    /'
    fi
    rm -f "$log"
done
exit $status
