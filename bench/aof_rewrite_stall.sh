#!/usr/bin/env bash
# SET latency under appendfsync always while a BGREWRITEAOF runs, cairn against Debian's
# redis-server 7 (issue #7). Per server, variant (rewrite / none) and round: fresh server
# and directory (on the disk under test), fill 200k keys x 1000 B, wait until no rewrite
# runs, then 6 s of open-loop SETs at 5k/s on 8 connections (cairn-bench aof, client at
# SCHED_FIFO 1 so its own scheduling does not count) with BGREWRITEAOF sent 3 s in.
# Prints SET p50 / p99 / max (ms, from the intended send time) and the rewrites seen.
# Run from the repo root after cargo build --release --workspace.
# Usage: bash bench/aof_rewrite_stall.sh [ROUNDS] [OUT_DIR]   (AOF_DIR: default /var/tmp;
# CAIRN: another cairn-server binary; SERVERS="cairn redis", VARIANTS="rewrite none")
set -u
ROUNDS=${1:-3}; OUT=${2:-bench-out/aof-rewrite-stall}; mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/.." && pwd); B=$ROOT/target/release; CAIRN=${CAIRN:-$B/cairn-server}
run() { # server variant round
  d=$(mktemp -d "${AOF_DIR:-/var/tmp}/rwstall.XXXX"); port=$((7700 + RANDOM % 200))
  if [ "$1" = redis ]; then
    redis-server --port $port --bind 127.0.0.1 --save "" --appendonly yes --appendfsync always --dir "$d" >/dev/null 2>&1 &
  else
    "$CAIRN" --port $port --bind 127.0.0.1 --save "" --appendonly yes --appendfsync always --dir "$d" >/dev/null 2>&1 &
  fi
  pid=$!
  for _ in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
  "$B/cairn-bench" aof -p $port --fill 200000 --command "1:SET {key} {value}" -n 1 --quiet -o "$d/fill" >/dev/null 2>&1
  for _ in $(seq 300); do
    redis-cli -p $port info persistence | grep -q "aof_rewrite_in_progress:0" && break; sleep 0.1
  done
  sleep 0.5
  r0=$(redis-cli -p $port info persistence | grep -a aof_rewrites: | tr -dc 0-9)
  bg=""
  if [ "$2" = rewrite ]; then (sleep 3; redis-cli -p $port bgrewriteaof >/dev/null) & bg=$!; fi
  out="$OUT/$1-$2-$3"; mkdir -p "$out"
  chrt -f 1 "$B/cairn-bench" aof -p $port --no-fill -c 8 -t 1 --command "1:SET {key} {value}" -r 5000 -T 6 --quiet -o "$out" >/dev/null 2>&1
  [ -n "$bg" ] && wait $bg
  r1=$(redis-cli -p $port info persistence | grep -a aof_rewrites: | tr -dc 0-9)
  python3 - "$out/aof.json" "$1" "$2" "$3" "$((r1 - r0))" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d['runs'][-1]['result']['totals']['cmds']['SET']
print(f"{sys.argv[2]:6} {sys.argv[3]:8} round {sys.argv[4]}  SET p50 {t['p50']/1000:.3f}  p99 {t['p99']/1000:.2f}  max {t['max']/1000:.1f} ms  rewrites {sys.argv[5]}")
PY
  kill $pid; wait $pid 2>/dev/null; rm -rf "$d"
}
for round in $(seq "$ROUNDS"); do
  for s in ${SERVERS:-cairn redis}; do for v in ${VARIANTS:-rewrite none}; do run $s $v $round; done; done
done
