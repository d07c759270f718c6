#!/usr/bin/env bash
# Shard balance on a synthetic corpus of 100 databases (issue 34 acceptance: worst/average shard
# <= 1.25 at N = 16; not a test). Writes the corpus with `benches/synth.py --databases 100`
# under a temporary directory and points the spider-dev source at it (`TOOLFORGE_SPIDER_DEV`),
# then for each recipe (default sel-spider and slot-spider-variants): the single build's CPU
# seconds (user + sys), the plan (`--plan --shards N`), each round of the N shards (another
# while a shard says `round two needed`; run one after the other, each measured alone), the
# merge, whether the merged output is byte-identical to the single build, and worst/average
# shard CPU per round.
# The start-up line is the CPU of `--plan` (reads the questions, hashes the executable and every
# database: more than a shard's fixed start-up) as a share of the average shard.
# Usage: benches/balance_synth.sh   (env: N=16, RECIPES="sel-spider slot-spider-variants",
# DATABASES=100, TOOLFORGE=path to a built executable, KEEP=1 keeps the temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-16}
T=${TOOLFORGE:-}
if [ -z "$T" ]; then
    cargo build --release --quiet
    T=$PWD/target/release/toolforge
fi
tmp=$(mktemp -d /tmp/balance-synth.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
python3 benches/synth.py "$tmp/corpus" --databases "${DATABASES:-100}"
export TOOLFORGE_SPIDER_DEV=$tmp/corpus
# Each step starts with the dirty pages of the one before written out (`sync`), so it does not
# pay for their writeback (shards and the merge run on separate machines in a real deployment).
cpu() { sync; /usr/bin/time -f "%U %S" -o "$tmp/t" "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }; awk '{printf "%.2f", $1+$2}' "$tmp/t"; }
ratio() { python3 -c 'import sys; c=[float(x) for x in sys.argv[1:]]; a=sum(c)/len(c); print(f"{max(c)/a:.2f} (max {max(c):.2f} s, avg {a:.2f} s, min {min(c):.2f} s)")' "$@"; }
for R in ${RECIPES:-sel-spider slot-spider-variants}; do
    single=$(cpu "$T" build "$R" -q --no-html --out "$tmp/o1" --store "$tmp/s1")
    kept=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); k, a = r["kept"], r["attempted"]; print(f"{k}/{a} kept ({100 * k / a:.1f}%)")' "$tmp/o1/$R/report/verification.json")
    plan=$(cpu "$T" build "$R" -q --plan --shards "$N" --store "$tmp/s2")
    echo "$R, ${DATABASES:-100} synthetic databases, $kept; single build $single s CPU; N=$N"
    total=0
    # Rounds as the drivers run them: another while a shard says `round two needed` (at most 3).
    round=1
    again=1
    while [ "$again" = 1 ] && [ "$round" -le 3 ]; do
        shards=()
        again=0
        for ((i = 0; i < N; i++)); do
            shards+=("$(cpu "$T" build "$R" -q --store "$tmp/s2" --shard "$i/$N")")
            grep -q "round two needed" "$tmp/log" && again=1
        done
        sum=$(python3 -c 'import sys; print(f"{sum(map(float, sys.argv[1:])):.2f}")' "${shards[@]}")
        total=$(python3 -c "print($total + $sum)")
        echo "  round $round: worst/average shard CPU $(ratio "${shards[@]}"); shards ${shards[*]}"
        round=$((round + 1))
    done
    rounds=$((round - 1))
    merge=$(cpu "$T" build "$R" -q --no-html --out "$tmp/o2" --store "$tmp/s2" --merge "$N")
    diff -r "$tmp/o1/$R" "$tmp/o2/$R" >/dev/null && same=byte-identical || same=DIFFERENT
    python3 -c "
plan, total, n = $plan, $total, $N
print(f'  merge {$merge:.2f} s; merged output {\"$same\"} to the single build')
print(f'  start-up (--plan CPU) {plan:.2f} s = {100 * plan * $rounds * n / total:.0f}% of the shards\' CPU over {$rounds} round(s) (upper bound)')"
    rm -rf "$tmp/o1" "$tmp/o2" "$tmp/s1" "$tmp/s2"
done
