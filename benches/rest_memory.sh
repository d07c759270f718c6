#!/usr/bin/env bash
# Peak memory of a REST build against the questions of one database (issue 46 item 3): Spider
# dev's world_1 questions 1×, 4× and 16× (copies reworded), each built cold into a fresh store;
# prints questions, peak RSS, CPU and wall per size and the 16×/4× RSS ratio. Needs GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/toolforge
[ -x "$bin" ] || cargo test --release --no-run --quiet
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
spider=../shared/corpora/spider
printf '%-6s %9s %10s %8s %7s\n' copies questions peak_MiB cpu_s wall_s
declare -A rss
for k in 1 4 16; do
    d="$tmp/x$k"
    mkdir -p "$d/database"
    python3 - "$spider/dev.json" "$d/dev.json" "$k" <<'PY'
import json, sys
dev = [q for q in json.load(open(sys.argv[1])) if q["db_id"] == "world_1"]
out = []
for k in range(int(sys.argv[3])):
    for q in dev:
        q = dict(q)
        if k:
            q["question"] = f'{q["question"]} (copy {k})'
        out.append(q)
json.dump(out, open(sys.argv[2], "w"))
PY
    cp "$spider/tables.json" "$d/"
    ln -s "$(realpath "$spider/database/world_1")" "$d/database/world_1"
    n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))))" "$d/dev.json")
    TOOLFORGE_SPIDER_DEV="$d" /usr/bin/time -o "$tmp/time$k" -f '%M %U %S %e' \
        "$bin" build rest-spider --out "$tmp/out$k" --store "$tmp/store$k" --quiet --no-html > /dev/null
    read -r kb user sys wall < "$tmp/time$k"
    rss[$k]=$kb
    printf '%-6s %9s %10.1f %8.2f %7.2f\n' "$k" "$n" "$(echo "$kb/1024" | bc -l)" "$(echo "$user+$sys" | bc -l)" "$wall"
done
printf 'rss 16x / 4x: %.2f (issue 46: within 1.10 when a database outgrows the trajectory window)\n' "$(echo "${rss[16]}/${rss[4]}" | bc -l)"
