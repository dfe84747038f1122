#!/usr/bin/env bash
# Issue #7's cairn-bench `aof` table with GETs of clean keys on their own connections:
# SET:GET 1:3 as two open-loop cairn-bench processes against one server (5k SET/s on 8
# connections, 15k GET/s on 8 others, 200k keys x 1000 B filled first), cairn and Debian's
# redis-server 7, `appendonly no` and `appendfsync always`, ROUNDS interleaved rounds.
# Run from the repo root after cargo build --release --workspace.
# Usage: bash bench/aof_clean_gets.sh [ROUNDS] [OUT]   (AOF_DIR: default /var/tmp)
set -euo pipefail
ROUNDS=${1:-3}
OUT=${2:-bench-out/aof-clean-gets}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/target/release/cairn-bench
CAIRN=$ROOT/target/release/cairn-server
mkdir -p "$OUT"
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
row() { # table file -> "QPS p50 p99"
  grep -E '^\| AOF|^\| No ' "$1" | tail -1 | awk -F'|' '{gsub(/ /,"",$4);gsub(/ /,"",$5);gsub(/ /,"",$6);print $4" "$5" "$6}'
}
for r in $(seq "$ROUNDS"); do
  order="cairn redis"; [ $((r % 2)) = 0 ] && order="redis cairn"
  for srv in $order; do
    for p in no always; do
      PORT=$(free_port); DIR=$(mktemp -d "${AOF_DIR:-/var/tmp}/cairn-aofget.XXXX")
      if [ "$p" = always ]; then extra=(--appendonly yes --appendfsync always); else extra=(--appendonly no); fi
      if [ "$srv" = redis ]; then bin=redis-server; else bin=$CAIRN; fi
      "$bin" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$DIR" "${extra[@]}" >/dev/null 2>&1 &
      PID=$!
      for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.05; done
      run="$OUT/$srv-$p-$r"; mkdir -p "$run"
      "$BENCH" aof -p "$PORT" --pid "$PID" -k 200000 -d 1000 --fill 200000 \
        --command "1:SET {key} {value}" -n 1 --quiet -o "$run/fill" >/dev/null 2>&1
      # Let the fill's automatic rewrites finish.
      while [ "$(redis-cli -p "$PORT" info persistence | tr -d '\r' | grep -c 'rewrite_in_progress:1')" != 0 ]; do sleep 0.1; done
      "$BENCH" aof -p "$PORT" --pid "$PID" -k 200000 -d 1000 --no-fill -c 8 -t 1 \
        --command "1:SET {key} {value}" -r 5000 -T 6 --quiet -o "$run/set" > "$run/set.txt" &
      SETS=$!
      sleep 1
      "$BENCH" aof -p "$PORT" --pid "$PID" -k 200000 -d 1000 --no-fill -c 8 -t 1 \
        --command "1:GET {key}" -r 15000 -T 4 --quiet -o "$run/get" > "$run/get.txt"
      wait $SETS
      echo "round $r $srv $p SET $(row "$run/set.txt") GET $(row "$run/get.txt")"
      kill "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"
    done
  done
done
