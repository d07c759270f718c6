#!/usr/bin/env bash
# Scale-out CPU benchmark (issue 34; not a test): for sel-spider and slot-spider-variants, the
# CPU seconds (user + system) of a whole build, of each shard of each round at N = 4 (run one
# after the other, so each is measured alone; another round while a shard says `round two
# needed`, as the drivers do), and of the merge; then the critical path (the rounds are
# barriers: the slowest shard of each round + the merge) and the merge as ratios of the whole
# build. Targets: critical path <= 0.4,
# merge <= 0.1. Local store. The single build, each shard and the merge are the median of three
# runs each.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
T=$PWD/target/release/toolforge
N=${N:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Each step starts with the dirty pages of the one before written out (`sync`), so it does not
# pay for their writeback (shards and the merge run on separate machines in a real deployment).
cpu() { sync; /usr/bin/time -f "%U %S" -o "$tmp/t" "$@" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }; awk '{printf "%.2f", $1+$2}' "$tmp/t"; }
# The median of three runs of a step that can be repeated from scratch (the single build, the
# merge): `cpu3 DIR… -- CMD…` removes the DIRs before each run. On this 2-core VM one run varies
# by up to 0.25 s of system time (the first writes into memory the host has not backed yet), so
# both sides of each ratio are medians; every run is printed as `median [a b c]` on stderr.
cpu3() {
    local dirs=() runs=()
    while [ "$1" != -- ]; do dirs+=("$1"); shift; done
    shift
    for _ in 1 2 3; do
        rm -rf "${dirs[@]}"
        runs+=("$(cpu "$@")")
    done
    local median
    median=$(printf '%s\n' "${runs[@]}" | sort -n | sed -n 2p)
    local label=single
    [[ " $* " == *" --merge "* ]] && label=merge
    echo "  $label $median [${runs[*]}]" >&2
    echo "$median"
}
for R in ${RECIPES:-sel-spider slot-spider-variants}; do
    single=$(cpu3 "$tmp/o1" "$tmp/s1" -- "$T" build "$R" -q --no-html --out "$tmp/o1" --store "$tmp/s1")
    line="$R N=$N: single $single s"
    # Rounds as the drivers run them: another while a shard says `round two needed` (at most 3).
    # The whole sequence of rounds three times, each into a fresh store; each shard's CPU is the
    # median of its three runs (printed), as for the single build and the merge.
    unset shard_runs
    declare -A shard_runs=()
    rounds=0
    for _ in 1 2 3; do
        rm -rf "$tmp/s2"
        round=1
        again=1
        while [ "$again" = 1 ] && [ "$round" -le 3 ]; do
            again=0
            for ((i = 0; i < N; i++)); do
                c=$(cpu "$T" build "$R" -q --store "$tmp/s2" --shard "$i/$N")
                grep -q "round two needed" "$tmp/log" && again=1
                shard_runs[$round,$i]="${shard_runs[$round,$i]:-} $c"
            done
            [ "$round" -gt "$rounds" ] && rounds=$round
            round=$((round + 1))
        done
    done
    longest=0
    for ((round = 1; round <= rounds; round++)); do
        shards=""
        slowest=0
        for ((i = 0; i < N; i++)); do
            # shellcheck disable=SC2086
            c=$(printf '%s\n' ${shard_runs[$round,$i]} | sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}')
            echo "  round $round shard $i $c [${shard_runs[$round,$i]# }]" >&2
            shards="$shards $c"
            slowest=$(awk -v a="$slowest" -v b="$c" 'BEGIN{print (b > a) ? b : a}')
        done
        longest=$(awk -v a="$longest" -v b="$slowest" 'BEGIN{print a + b}')
        line="$line; round $round shards$shards"
    done
    merge=$(cpu3 "$tmp/o2" -- "$T" build "$R" -q --no-html --out "$tmp/o2" --store "$tmp/s2" --merge "$N")
    diff -r "$tmp/o1/$R" "$tmp/o2/$R" >/dev/null && same=identical || same=DIFFERENT
    awk -v l="$line" -v s="$single" -v a="$longest" -v m="$merge" -v same="$same" 'BEGIN{
        printf "%s; merge %.2f s\n  critical path (slowest shard of each round + merge) %.2f s = %.3f x single (target <= 0.4); merge %.3f x single (target <= 0.1); output %s\n",
            l, m, a + m, (a + m) / s, m / s, same }'
    rm -rf "$tmp/o1" "$tmp/o2" "$tmp/s1" "$tmp/s2"
done
