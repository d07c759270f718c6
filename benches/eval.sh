#!/usr/bin/env bash
# Evaluation benchmark (numbers printed, never asserted):
# - scoring throughput: `toolforge eval score` of 10,000 gold predictions over rest-spider-variants
#   (every metric, every row executed: REST endpoints, A_new under drift) and of slot-spider
#   (every row's sequence run on the executor after its join step);
# - agent-mode overhead per step excluding the model's time: `toolforge eval replay` (each gold
#   call rendered as model text, parsed, run live in-process, its observation rendered).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/toolforge
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dbs=../shared/corpora/spider/database
for recipe in rest-spider-variants slot-spider; do
  "$bin" build "$recipe" --quiet --out "$tmp/out" --store "$tmp/store" > /dev/null
  python3 - "$tmp/out/$recipe" "$tmp/$recipe.jsonl" <<'PY'
import glob, json, sys
rows = [json.loads(l) for f in sorted(glob.glob(sys.argv[1] + "/data/*.jsonl")) for l in open(f)]
with open(sys.argv[2], "w") as out:
    for i in range(10000):
        r = rows[i % len(rows)]
        # ids repeat past the dataset size: later lines are duplicates, parsed and counted, not scored
        out.write(json.dumps({"id": r["id"], "output": r["output"]}) + "\n")
PY
  n=$(python3 -c "import glob;print(min(10000, sum(1 for f in glob.glob('$tmp/out/$recipe/data/*.jsonl') for _ in open(f))))")
  /usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" eval score "$tmp/out/$recipe" "$tmp/$recipe.jsonl" \
    --databases "$dbs" --out "$tmp/eval" --limit "$n" > /dev/null
  read -r secs kib < "$tmp/time"
  printf 'eval score   %-22s %6d rows %6.2f s  %7.0f rows/s  peak RSS %4d MiB\n' "$recipe" "$n" "$secs" \
    "$(python3 -c "print($n/max($secs,0.001))")" "$((kib / 1024))"
done
for recipe in slot-spider rest-spider-variants; do
  printf 'eval replay  %-22s ' "$recipe"
  "$bin" eval replay "$tmp/out/$recipe" --databases "$dbs" | sed 's/^replay [^:]*: //'
done
