#!/usr/bin/env bash
# Live-server load benchmark on 127.0.0.1 with wrk (Debian package `wrk`): requests/second and
# p50/p99 latency for a simple REST endpoint and for a 3-call SLOT session. Target (issue #3):
# >= 5,000 req/s for simple REST endpoints on 2 cores, p99 < 20 ms. Printed, never asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk > /dev/null; then
  (apt-get install -y -qq wrk > /dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq wrk > /dev/null)) \
    || { echo "serve bench: wrk is not installed (apt-get install wrk)"; exit 0; }
fi
cargo build --release --quiet
bin=target/release/toolforge
duration=${DURATION:-10s}
conns=${CONNECTIONS:-32}
tmp=$(mktemp -d)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2> /dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

start() {
  "$bin" serve "$1" --port 0 > "$tmp/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do grep -q "listening on" "$tmp/serve.log" && break; sleep 0.1; done
  base=$(sed -n 's/.*listening on //p' "$tmp/serve.log")
}

report() { # name, wrk output file
  rps=$(awk '/Requests\/sec/ {print $2}' "$2")
  p50=$(awk '/^ *50%/ {print $2}' "$2")
  p99=$(awk '/^ *99%/ {print $2}' "$2")
  errors=$(grep -E "Non-2xx|Socket errors" "$2" | tr -s ' ' || true)
  printf '%-34s %10s req/s   p50 %8s   p99 %8s   %s\n' "$1" "$rps" "$p50" "$p99" "$errors"
}

"$bin" build rest-spider --quiet > /dev/null
"$bin" build slot-spider --quiet > /dev/null
echo "wrk -t2 -c$conns -d$duration on $(nproc) cores (server and load generator share them)"

start rest-spider
wrk -t2 -c"$conns" -d"$duration" --latency "$base/v1/spider/battle_death/ship/count_by_disposition_of_ship?disposition_of_ship=Captured" > "$tmp/rest1"
report "REST, 1 string parameter" "$tmp/rest1"
wrk -t2 -c"$conns" -d"$duration" --latency "$base/v1/spider/concert_singer/singer/count" > "$tmp/rest0"
report "REST, no parameter" "$tmp/rest0"
kill "$pid"; wait "$pid" 2> /dev/null || true

start slot-spider
sessions=""
for _ in $(seq "$conns"); do
  id=$(curl -s -X POST "$base/sessions" -H 'content-type: application/json' -d '{"id":"slot-spider/3"}' \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["session_id"])')
  sessions="$sessions${sessions:+,}$id"
done
SESSIONS=$sessions wrk -t2 -c"$conns" -d"$duration" --latency -s benches/slot_session.lua "$base" > "$tmp/slot"
report "SLOT session calls (3 per sequence)" "$tmp/slot"
rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/slot")
python3 -c "print(f'{\"SLOT 3-call sequences\":<34} {float(\"$rps\")/3:10.0f} seq/s')"
