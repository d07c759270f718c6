#!/usr/bin/env bash
# Tool-retrieval benchmark (issue 32; numbers printed, never asserted):
# - BM25 index of 10,000 tools: the real catalogs of bfcl, mcp-tools, rest-spider and sel-spider
#   (`toolforge index ... --scale-to 10000`: the catalogs repeated with renamed copies up to
#   10,000 tools), build time and the process's peak RSS (GNU time);
# - query latency p50/p99 over the rest-spider questions (top 10 of 10,000 tools);
# - BM25 Recall@1/5/10, nDCG@10, MRR on every retrieval dataset (`toolforge retrieval`, then
#   `toolforge eval retrieval`).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/toolforge
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for recipe in rest-spider sel-spider bfcl mcp-tools; do
  "$bin" build "$recipe" --quiet --out "$tmp/out" --store "$tmp/store" > /dev/null
done
"$bin" retrieval "$tmp/out/rest-spider" > /dev/null
"$bin" retrieval "$tmp/out/sel-spider" > /dev/null
"$bin" retrieval "$tmp/out/bfcl" --split multiple > /dev/null
"$bin" retrieval "$tmp/out/mcp-tools" > /dev/null
cats=("$tmp/out/bfcl" "$tmp/out/mcp-tools" "$tmp/out/rest-spider" "$tmp/out/sel-spider")
/usr/bin/time -f "%e %M" -o "$tmp/time" "$bin" index "${cats[@]}" --scale-to 10000 -k 10 \
  --queries "$tmp/out/rest-spider-retrieval/queries.jsonl" > "$tmp/index.json"
read -r secs kib < "$tmp/time"
python3 - "$tmp/index.json" "$secs" "$kib" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latency"]
print(f"index        {r['tools']} tools  build {r['build_ms']:.0f} ms  process {float(sys.argv[2]):.2f} s  peak RSS {int(sys.argv[3]) // 1024} MiB")
print(f"query        {l['queries']} queries, top {l['k']}: p50 {l['p50_us'] / 1000:.2f} ms  p99 {l['p99_us'] / 1000:.2f} ms")
PY
"$bin" eval retrieval "$tmp/out/rest-spider-retrieval" "$tmp/out/sel-spider-retrieval" \
  "$tmp/out/bfcl-multiple-retrieval" "$tmp/out/mcp-tools-retrieval" --out "$tmp/eval" > /dev/null
cat "$tmp/eval/retrieval-bm25/report.md"
