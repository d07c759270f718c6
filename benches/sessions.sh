#!/usr/bin/env bash
# Memory per SLOT session on the live server: 1,000 sessions on Spider's world_1 (one joined
# table shared by all of them, issue 18). Prints the server's RSS before/after and bytes per
# session; never asserts (tests/session_memory.rs does: < 200 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TOOLFORGE_BIN:-target/release/toolforge}
[ -x "$bin" ] || cargo build --release --quiet
tmp=$(mktemp -d)
"$bin" build slot-spider --quiet --out "$tmp/out" --store "$tmp/store" > /dev/null
"$bin" serve "$tmp/out/slot-spider" --databases ../shared/corpora/spider/database --port 0 --max-sessions 2000 > "$tmp/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 600); do grep -q "listening on" "$tmp/log" && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$tmp/log" | head -1) || { cat "$tmp/log" >&2; exit 1; }
python3 - "$url" "$pid" "$tmp/out/slot-spider/data/dev.jsonl" <<'PY'
import json, sys, urllib.request
url, pid, rows = sys.argv[1], sys.argv[2], sys.argv[3]
ids = [r["id"] for r in map(json.loads, open(rows)) if r.get("db_id") == "world_1"]
def rss():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
def open_session(i):
    req = urllib.request.Request(url + "/sessions", data=json.dumps({"id": i}).encode(), headers={"content-type": "application/json"})
    urllib.request.urlopen(req).read()
for i in ids:
    open_session(i)
before = rss()
n = 1000
for k in range(n):
    open_session(ids[k % len(ids)])
after = rss()
print(f"sessions: {n} world_1 sessions: RSS {before/1e6:.1f} MB -> {after/1e6:.1f} MB, {(after-before)//n} bytes per session")
PY
