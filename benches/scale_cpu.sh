#!/usr/bin/env bash
# Scale-out CPU benchmark (issue 34; not a test): for sel-spider and slot-spider-variants, the
# CPU seconds (user + system) of a whole build, of each shard in round one and round two at
# N = 4 (run one after the other, so each is measured alone), and of the merge; then the
# critical path (the shard with the most CPU over both rounds, + the merge) and the merge as
# ratios of the whole build. Run one after the other, the last shard of round one finds every
# compile item and already computes its later items (in a parallel run, round two does). Targets: critical path <= 0.4, merge <= 0.1. Local store.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
T=$PWD/target/release/toolforge
N=${N:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu() { /usr/bin/time -f "%U %S" -o "$tmp/t" "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }; awk '{printf "%.2f", $1+$2}' "$tmp/t"; }
for R in ${RECIPES:-sel-spider slot-spider-variants}; do
    single=$(cpu "$T" build "$R" -q --no-html --out "$tmp/o1" --store "$tmp/s1")
    line="$R N=$N: single $single s"
    declare -a total=()
    for round in 1 2; do
        shards=""
        for ((i = 0; i < N; i++)); do
            c=$(cpu "$T" build "$R" -q --store "$tmp/s2" --shard "$i/$N")
            shards="$shards $c"
            total[i]=$(awk -v a="${total[i]:-0}" -v b="$c" 'BEGIN{print a + b}')
        done
        line="$line; round $round shards$shards"
    done
    longest=$(printf '%s\n' "${total[@]}" | sort -g | tail -1)
    merge=$(cpu "$T" build "$R" -q --no-html --out "$tmp/o2" --store "$tmp/s2" --merge "$N")
    diff -r "$tmp/o1/$R" "$tmp/o2/$R" >/dev/null && same=identical || same=DIFFERENT
    awk -v l="$line" -v s="$single" -v a="$longest" -v m="$merge" -v same="$same" 'BEGIN{
        printf "%s; merge %.2f s\n  critical path (longest shard, both rounds, + merge) %.2f s = %.2f x single (target <= 0.4); merge %.2f x single (target <= 0.1); output %s\n",
            l, m, a + m, (a + m) / s, m / s, same }'
    unset total
    rm -rf "$tmp/o1" "$tmp/o2" "$tmp/s1" "$tmp/s2"
done
