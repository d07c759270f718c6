#!/usr/bin/env bash
# Shard balance benchmark (not a test, issue 34): for N = 2, 4, 8 shards of a recipe (default
# slot-spider), the worst over the average shard load, estimated (`--plan --shards N`, file
# bytes × (questions + 4) per item) and measured (CPU seconds, user + sys, of each shard run one
# after the other on a cold store). Usage: benches/balance.sh [RECIPE] [TOOLFORGE]
set -euo pipefail
cd "$(dirname "$0")/.."
recipe=${1:-slot-spider}
T=${2:-$PWD/target/release/toolforge}
[ -n "${2:-}" ] || cargo build --release --quiet
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 2 4 8; do
    store=$tmp/store-$n
    estimated=$("$T" build "$recipe" --quiet --plan --shards "$n" --store "$store" | sed -n 's/^worst\/average.*: //p')
    cpus=()
    for ((i = 0; i < n; i++)); do
        /usr/bin/time -o "$tmp/t" -f "%U %S" "$T" build "$recipe" --quiet --shard "$i/$n" --store "$store" >/dev/null 2>&1
        cpus+=("$(awk '{print $1 + $2}' "$tmp/t")")
    done
    python3 - "$n" "$estimated" "${cpus[@]}" <<'PY'
import sys
n, est, cpu = sys.argv[1], sys.argv[2], [float(x) for x in sys.argv[3:]]
avg = sum(cpu) / len(cpu)
print(f"N={n}: worst/average estimated {est}, measured CPU {max(cpu) / avg:.2f} "
      f"(shards {' '.join(f'{c:.2f}' for c in cpu)} s)")
PY
done
