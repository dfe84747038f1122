#!/usr/bin/env bash
# Runs cairn-bench's aof and noise scenarios against cairn-server and Debian's
# redis-server 7 on this machine, interleaved, ROUNDS rounds. Results (tables, JSON, SVG)
# go to $OUT/<scenario>-<server>-<config>-<round>/.
# Usage: bash bench/scenarios.sh [ROUNDS] [OUT]
set -euo pipefail
ROUNDS=${1:-1}
OUT=${2:-bench-out/scenarios}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/target/release/cairn-bench
CAIRN=$ROOT/target/release/cairn-server
mkdir -p "$OUT"

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

start() { # server persistence -> sets PORT PID DIR
  PORT=$(free_port); DIR=$(mktemp -d)
  local extra=()
  if [ "$2" = always ]; then extra=(--appendonly yes --appendfsync always); else extra=(--appendonly no); fi
  if [ "$1" = redis ]; then
    redis-server --port "$PORT" --bind 127.0.0.1 --save "" --dir "$DIR" "${extra[@]}" >/dev/null 2>&1 &
  else
    "$CAIRN" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$DIR" "${extra[@]}" >/dev/null 2>&1 &
  fi
  PID=$!
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "server did not start" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"; }

for r in $(seq "$ROUNDS"); do
  order="cairn redis"; [ $((r % 2)) = 0 ] && order="redis cairn"
  for srv in $order; do
    for p in no always; do
      start "$srv" "$p"
      echo "== aof round $r $srv appendfsync=$p"
      "$BENCH" aof -p "$PORT" --pid "$PID" -k 200000 -c 16 -t 2 -T 8 --quiet -o "$OUT/aof-$srv-$p-$r" | sed -n '1,12p'
      stop
    done
    start "$srv" no
    echo "== noise round $r $srv"
    "$BENCH" noise -p "$PORT" --pid "$PID" -k 20000 -c 16 -t 2 -r 20000 -T 8 --noise-rate 10 --noise-size 10MB --quiet -o "$OUT/noise-$srv-$r" | sed -n '1,14p'
    stop
  done
done
