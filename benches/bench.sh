#!/usr/bin/env bash
# Whole-build benchmark on ../shared/corpora (issue 17), numbers printed, never asserted:
# - the SQLite floor (benches/floor.py: Python sqlite3 executing each gold query once, one
#   thread), measured in the same run, once per text-to-SQL source;
# - per recipe: a cold build (empty store and output), an `out/`-only rebuild (store kept, output
#   removed) and a no-op rebuild: wall, CPU (user+sys), × floor (wall and CPU), peak RSS.
# Targets: text-to-SQL cold builds <= 3x the floor; no-op <= 0.2 s; peak RSS <= 1 GiB.
# RECIPES="a b" limits the run (RECIPES=none: only the synthetic large database, and Spider train
# when SPIDER_TRAIN is set); TOOLFORGE_BIN=path times another toolforge executable (e.g. the
# previous commit's, for a before/after table) instead of building this tree's.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${TOOLFORGE_BIN:-}" ]; then
  cargo build --release --quiet
fi
bin=${TOOLFORGE_BIN:-target/release/toolforge}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
corpora=../shared/corpora
spider_floor=$(python3 benches/floor.py "$corpora/spider/dev.json" "$corpora/spider/database")
bird_floor=$(python3 benches/floor.py "$corpora/bird/dev_databases/mini_dev_sqlite.json" "$corpora/bird/dev_databases")
echo "SQLite floor (wall s, CPU s, queries): spider-dev $spider_floor; bird mini-dev $bird_floor (present databases only)"
printf '%-13s %-8s %7s %7s %9s %9s %8s %s\n' recipe run wall CPU "x floor" "CPU x" "peak RSS" kept
recipes=${RECIPES:-slot-spider sel-spider rest-spider slot-bird sel-bird rest-bird seq-atis seq-snips seq-topv2 seq-sgd seq-multiwoz mcp-tools bfcl}
[ "$recipes" = none ] && recipes=""
for recipe in $recipes; do
  case "$recipe" in
    *-spider*) floor=$spider_floor ;;
    *-bird*) floor=$bird_floor ;;
    *) floor="" ;;
  esac
  for run in cold out-only noop; do
    case "$run" in
      cold) rm -rf "$tmp/out" "$tmp/store" ;;
      out-only) rm -rf "$tmp/out" ;;
    esac
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$bin" build "$recipe" --quiet --out "$tmp/out" --store "$tmp/store" > "$tmp/summary"
    read -r secs user sys kib < "$tmp/time"
    kept=$(python3 -c "import json; r=json.load(open('$tmp/out/$recipe/report/verification.json')); print(f\"{r['kept']}/{r['attempted']}\")")
    python3 - "$recipe" "$run" "$secs" "$user" "$sys" "$kib" "$kept" $floor <<'PY'
import sys
recipe, run, secs, user, sys_, kib, kept = sys.argv[1:8]
secs, cpu = float(secs), float(user) + float(sys_)
x = xc = "-"
if len(sys.argv) > 8 and run == "cold":
    fw, fc = float(sys.argv[8]), float(sys.argv[9])
    x, xc = f"{secs / fw:.1f}x", f"{cpu / max(fc, 0.001):.1f}x"
print(f"{recipe:<13} {run:<8} {secs:6.2f}s {cpu:6.2f}s {x:>9} {xc:>9} {int(kib) // 1024:5d} MiB {kept}")
PY
  done
done
# The synthetic large database (benches/synth.py, SYNTH_TRIPS rows in the fact table, default
# 1,000,000): slot and sel cold builds beside their own SQLite floor.
trips=${SYNTH_TRIPS:-1000000}
python3 benches/synth.py "$tmp/synth" "$trips"
floor=$(python3 benches/floor.py "$tmp/synth/dev.json" "$tmp/synth/database")
echo "synthetic bikes_big ($trips trips): SQLite floor (wall s, CPU s, queries) $floor"
for recipe in slot-spider sel-spider; do
  rm -rf "$tmp/sout"
  TOOLFORGE_SPIDER_DEV="$tmp/synth" /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" \
    "$bin" build "$recipe" --quiet --out "$tmp/sout" --store "$tmp/sout/.store" > /dev/null
  read -r secs user sys kib < "$tmp/time"
  kept=$(python3 -c "import json; r=json.load(open('$tmp/sout/$recipe/report/verification.json')); print(f\"{r['kept']}/{r['attempted']}\")")
  read -r fw fc _ <<< "$floor"
  python3 -c "
secs, cpu = $secs, $user + $sys
print(f'synth:{\"$recipe\":<7} cold     {secs:6.2f}s {cpu:6.2f}s {secs / $fw:8.1f}x {cpu / max($fc, 0.001):8.1f}x {$kib // 1024:5d} MiB $kept')"
done
# A larger dump of Spider (SPIDER_TRAIN=dir of the official Spider release: train_spider.json,
# tables.json, database/<db>/<db>.sqlite; 7,000 questions over 140 databases), when given: slot,
# sel and rest cold builds of its train questions beside their own floor. Not in the shared
# corpora, so skipped unless set.
if [ -n "${SPIDER_TRAIN:-}" ]; then
  mkdir -p "$tmp/train"
  ln -s "$(realpath "$SPIDER_TRAIN/train_spider.json")" "$tmp/train/dev.json"
  ln -s "$(realpath "$SPIDER_TRAIN/tables.json")" "$tmp/train/tables.json"
  ln -s "$(realpath "$SPIDER_TRAIN/database")" "$tmp/train/database"
  floor=$(python3 benches/floor.py "$tmp/train/dev.json" "$tmp/train/database")
  echo "spider train ($SPIDER_TRAIN): SQLite floor (wall s, CPU s, queries) $floor"
  read -r fw fc _ <<< "$floor"
  for recipe in slot-spider sel-spider rest-spider; do
    rm -rf "$tmp/sout"
    TOOLFORGE_SPIDER_DEV="$tmp/train" /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" \
      "$bin" build "$recipe" --quiet --out "$tmp/sout" --store "$tmp/sout/.store" > /dev/null
    read -r secs user sys kib < "$tmp/time"
    kept=$(python3 -c "import json; r=json.load(open('$tmp/sout/$recipe/report/verification.json')); print(f\"{r['kept']}/{r['attempted']}\")")
    python3 -c "
secs, cpu = $secs, $user + $sys
print(f'train:{\"$recipe\":<7} cold     {secs:6.2f}s {cpu:6.2f}s {secs / $fw:8.1f}x {cpu / max($fc, 0.001):8.1f}x {$kib // 1024:5d} MiB $kept')"
  done
fi
[ "${RECIPES:-}" = none ] && exit 0
# seq-sgd at the size of the official SGD train split (127 dialogue files; 10 are here): the train
# files linked 13 times over (dev and test as they are), cold build, peak RSS against the 1 GiB bound.
sgd=$corpora/sgd
mkdir -p "$tmp/sgd/train"
ln -s "$(realpath "$sgd/dev")" "$tmp/sgd/dev"
ln -s "$(realpath "$sgd/test")" "$tmp/sgd/test"
cp "$sgd/train/schema.json" "$tmp/sgd/train/"
n=1
for _ in $(seq 1 13); do
  for f in "$sgd"/train/dialogues_*.json; do
    ln -s "$(realpath "$f")" "$tmp/sgd/train/$(printf 'dialogues_%03d.json' "$n")"
    n=$((n + 1))
  done
done
rm -rf "$tmp/sout"
TOOLFORGE_SGD="$tmp/sgd" /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" \
  "$bin" build seq-sgd --quiet --out "$tmp/sout" --store "$tmp/sout/.store" > /dev/null
read -r secs user sys kib < "$tmp/time"
kept=$(python3 -c "import json; r=json.load(open('$tmp/sout/seq-sgd/report/verification.json')); print(f\"{r['kept']}/{r['attempted']}\")")
python3 -c "print(f'seq-sgd x13 train files ($((n - 1))) cold {$secs:6.2f}s {$user + $sys:6.2f}s CPU {$kib // 1024:5d} MiB $kept')"
