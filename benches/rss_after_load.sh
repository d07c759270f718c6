#!/usr/bin/env bash
# Memory returned to the system after load (issue 31, item 6): the server's RSS idle, at the
# peak of a load, and 10 s after it, for rest-spider (wrk, 64 connections, 15 s, two endpoints)
# and slot-spider (a session per kept row, every database's join step, each session's calls
# run, then deleted). Acceptance: RSS after load within 20% of idle. Printed, never asserted.
# TOOLFORGE_BIN picks the binary (to compare allocators).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TOOLFORGE_BIN:-target/release/toolforge}
[ -x "$bin" ] || cargo build --release --quiet
command -v wrk > /dev/null || apt-get install -y -qq wrk > /dev/null 2>&1 || { echo "rss bench: wrk is not installed"; exit 0; }
tmp=$(mktemp -d)
trap '[ -n "${pid:-}" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
"$bin" build rest-spider --quiet --out "$tmp/out" --store "$tmp/store" > /dev/null
"$bin" build slot-spider --quiet --out "$tmp/out" --store "$tmp/store" > /dev/null
rss() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$pid/status"; }
start() {
  "$bin" serve "$tmp/out/$1" --databases ../shared/corpora/spider/database --port 0 > "$tmp/log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do grep -q "listening on" "$tmp/log" && break; sleep 0.1; done
  base=$(grep -o 'http://[0-9.:]*' "$tmp/log" | head -1)
}
peak() { local m=0; while kill -0 "$1" 2> /dev/null; do r=$(rss); m=$(python3 -c "print(max($m, $r))"); sleep 0.2; done; echo "$m"; }

start rest-spider
curl -s "$base/v1/spider/concert_singer/singer/count" > /dev/null
idle=$(rss)
wrk -t2 -c64 -d15s "$base/v1/spider/battle_death/ship/count_by_disposition_of_ship?disposition_of_ship=Captured" > /dev/null &
load=$!; top=$(peak $load)
wrk -t2 -c64 -d5s "$base/v1/spider/concert_singer/singer/count" > /dev/null
sleep "${AFTER:-10}"; after=$(rss)
python3 -c "print(f'rest-spider  idle {$idle:7.1f} MiB   peak {$top:7.1f} MiB   10 s after {$after:7.1f} MiB   after/idle {$after/$idle:.2f}')"
kill $pid; wait $pid 2> /dev/null || true

start slot-spider
idle=$(rss)
python3 - "$base" "$tmp/out/slot-spider/data/dev.jsonl" <<'PY' &
import json, sys, urllib.request
base, rows = sys.argv[1], sys.argv[2]
def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read() or b"null")
for _ in range(2):
    for line in open(rows):
        row = json.loads(line)
        sid = call("POST", "/sessions", {"id": row["id"]})["session_id"]
        for c in json.loads(row["output"]) if isinstance(row["output"], str) else row["output"]:
            try:
                call("POST", f"/tools/{c['name']}", {"session_id": sid, "label": c["label"], "arguments": c["arguments"]})
            except Exception:
                pass
        call("DELETE", f"/sessions/{sid}")
PY
load=$!; top=$(peak $load)
sleep "${AFTER:-10}"; after=$(rss)
python3 -c "print(f'slot-spider  idle {$idle:7.1f} MiB   peak {$top:7.1f} MiB   10 s after {$after:7.1f} MiB   after/idle {$after/$idle:.2f}')"
