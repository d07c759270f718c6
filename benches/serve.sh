#!/usr/bin/env bash
# Live-server load benchmark on 127.0.0.1 with wrk (Debian package `wrk`): requests/second and
# p50/p99 latency for a simple REST endpoint and for a 3-call SLOT session. Target (issue #3):
# >= 5,000 req/s for simple REST endpoints on 2 cores, p99 < 20 ms. Printed, never asserted.
# Then the cost of the server-wide memory budget (issue 47: every answer measured, reserved and
# given back as it is sent): wrk at 64 connections on one REST endpoint, the same binary with the
# budget on (default flags) and off (`--max-server-mib 0`), interleaved ROUNDS times (default 3;
# the machine is shared), each side's median req/s and their ratio (acceptance: within 10%).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk > /dev/null; then
  (apt-get install -y -qq wrk > /dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq wrk > /dev/null)) \
    || { echo "serve bench: wrk is not installed (apt-get install wrk)"; exit 0; }
fi
# The binary as the test profile builds it (`cargo build` would rebuild the dependency tree for
# another feature set); one integration test target is enough to make target/release/toolforge.
cargo test --release --no-run --test serve --quiet
bin=target/release/toolforge
duration=${DURATION:-10s}
conns=${CONNECTIONS:-32}
tmp=$(mktemp -d)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2> /dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT

start() { # recipe, extra flags...
  local recipe=$1
  shift
  "$bin" serve "$recipe" --port 0 "$@" > "$tmp/serve.log" 2>&1 &
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
kill "$pid"; wait "$pid" 2> /dev/null || true

# The memory budget on and off, side by side.
rounds=${ROUNDS:-3}
budget_conns=${BUDGET_CONNECTIONS:-64}
budget_duration=${BUDGET_DURATION:-5s}
endpoint="/v1/spider/battle_death/ship/count_by_disposition_of_ship?disposition_of_ship=Captured"
echo "budget on vs off: wrk -t2 -c$budget_conns -d$budget_duration, $rounds interleaved rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
on=(); off=()
for r in $(seq "$rounds"); do
  for side in on off; do
    if [ "$side" = on ]; then start rest-spider; else start rest-spider --max-server-mib 0; fi
    wrk -t2 -c"$budget_conns" -d"$budget_duration" --latency "$base$endpoint" > "$tmp/budget_$side"
    report "REST, budget $side (round $r)" "$tmp/budget_$side"
    rps=$(awk '/Requests\/sec/ {print $2}' "$tmp/budget_$side")
    if [ "$side" = on ]; then on+=("$rps"); else off+=("$rps"); fi
    kill "$pid"; wait "$pid" 2> /dev/null || true
    pid=""
  done
done
python3 - "${on[*]}" "${off[*]}" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys
on = [float(x) for x in sys.argv[1].split()]
off = [float(x) for x in sys.argv[2].split()]
m_on, m_off = statistics.median(on), statistics.median(off)
print(f"{'REST budget on (median)':<34} {m_on:10.0f} req/s")
print(f"{'REST budget off (median)':<34} {m_off:10.0f} req/s")
print(f"{'on / off':<34} {m_on / m_off:10.3f}   (acceptance: >= 0.90; load average after: {sys.argv[3]})")
PY
