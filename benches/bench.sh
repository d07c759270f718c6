#!/usr/bin/env bash
# Whole-build benchmark on ../shared/corpora: cold build (empty store and output), no-op rebuild,
# questions/second and peak RSS. Targets (issue #2): slot-spider cold < 2 s, no-op < 0.3 s,
# peak RSS < 300 MiB; seq-topv2 (180k rows) cold < 10 s (issue #4). Numbers are printed, never
# asserted. RECIPES="a b" limits the run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/toolforge
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for recipe in ${RECIPES:-slot-spider slot-bird sel-spider rest-spider seq-atis seq-snips seq-topv2 seq-sgd seq-multiwoz mcp-tools bfcl}; do
  for run in cold noop; do
    if [ "$run" = cold ]; then rm -rf "$tmp/out" "$tmp/store"; fi
    /usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" build "$recipe" --quiet --out "$tmp/out" --store "$tmp/store" > "$tmp/summary"
    read -r secs kib < "$tmp/time"
    attempted=$(python3 -c "import json; print(json.load(open('$tmp/out/$recipe/report/verification.json'))['attempted'])")
    verified=$(python3 -c "import json; print(json.load(open('$tmp/out/$recipe/report/verification.json'))['kept'])")
    qps=$(python3 -c "print(f'{$attempted/max($secs,0.001):.0f}')")
    printf '%-13s %-5s %6.2f s  %7s items/s  peak RSS %5d MiB  (%s/%s kept)\n' "$recipe" "$run" "$secs" "$qps" "$((kib / 1024))" "$verified" "$attempted"
  done
done
