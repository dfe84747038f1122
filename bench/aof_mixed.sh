#!/usr/bin/env bash
# Seed 001's own workload shape on this box: SET:GET 1:3, 1000 B values, closed loop on
# 50 connections (cairn-bench aof), cairn and Debian's redis-server 7 with appendfsync
# always and with appendonly no; fresh server and directory per run, 200k keys filled
# first; rounds interleaved. Prints total ops/s and per-command p50/p99.
# Usage: bash bench/aof_mixed.sh [ROUNDS] [OUT_DIR]   (AOF_DIR: default /var/tmp)
set -u
ROUNDS=${1:-3}; OUT=${2:-bench-out/aof-mixed}; mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/.." && pwd); B=$ROOT/target/release
run() { # server mode round
  d=$(mktemp -d "${AOF_DIR:-/var/tmp}/mixed.XXXX"); port=$((7700 + RANDOM % 200))
  if [ "$2" = always ]; then a="--appendonly yes --appendfsync always"; else a="--appendonly no"; fi
  if [ "$1" = redis ]; then bin=redis-server; else bin="$B/cairn-server"; fi
  $bin --port $port --bind 127.0.0.1 --save "" --dir "$d" $a >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
  out="$OUT/$1-$2-$3"; mkdir -p "$out"
  "$B/cairn-bench" aof -p $port -k 200000 --fill 200000 -c 50 -t 2 -T 8 --quiet -o "$out" >/dev/null 2>&1
  python3 - "$out/aof.json" "$1" "$2" "$3" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
t = d['runs'][-1]['result']['totals']
c = t['cmds']
print(f"{sys.argv[2]:6} {sys.argv[3]:7} round {sys.argv[4]}  ops/s {t['all']['rate']:.0f}  "
      f"SET p50 {c['SET']['p50']/1000:.3f} p99 {c['SET']['p99']/1000:.2f}  "
      f"GET p50 {c['GET']['p50']/1000:.3f} p99 {c['GET']['p99']/1000:.2f} ms")
PY
  kill $pid; wait $pid 2>/dev/null; rm -rf "$d"
}
for round in $(seq "$ROUNDS"); do
  for x in cairn:always cairn:no redis:always redis:no; do run ${x%%:*} ${x##*:} $round; done
done
