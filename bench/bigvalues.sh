#!/usr/bin/env bash
# Issue #5's benchmark: 1 KB GET latency with and without ten 10 MB GETs per second
# (cairn-bench `noise`), and 10 MB GET throughput (redis-benchmark: one process with 4
# connections, and 4 processes of one connection), for cairn-server
# (io-threads 1 and 2) and Debian's redis-server 7, interleaved, ROUNDS rounds.
# Prints one line per run; tables go to $OUT/noise-<server>-<round>/.
# Usage: bash bench/bigvalues.sh [ROUNDS] [OUT]
# Environment:
#   NOISE=set         the noise SETs the 10 MB values instead of GETting them (the 10 MB
#                     throughput runs are skipped)
#   AOF=everysec      every server runs with `appendonly yes` and this `appendfsync`
#   BEFORE=<binary>   adds `cairn-before`: that cairn-server binary, io-threads 1 (A/B)
#   NOISE_RATE=10     10 MB requests per second in the noise phase
#   SERVERS="..."     the servers to run, in round-1 order (reversed every other round);
#                     default "cairn-io1 cairn-io2 redis" (plus cairn-before with BEFORE)
#   SERVER_ARGS="..." more options for every server (both take redis.conf names), e.g.
#                     "--auto-aof-rewrite-percentage 0" to keep log rewrites out of the run
set -euo pipefail
ROUNDS=${1:-3}
OUT=${2:-bench-out/bigvalues}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/target/release/cairn-bench
CAIRN=$ROOT/target/release/cairn-server
NOISE=${NOISE:-get}
AOF=${AOF:-}
BEFORE=${BEFORE:-}
NOISE_RATE=${NOISE_RATE:-10}
mkdir -p "$OUT"
persist=()
[ -n "$AOF" ] && persist=(--appendonly yes --appendfsync "$AOF")
# shellcheck disable=SC2206 # split on purpose: a list of options
persist+=(${SERVER_ARGS:-})

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

start() { # name -> sets PORT PID DIR
  PORT=$(free_port); DIR=$(mktemp -d)
  case "$1" in
    redis) redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" "${persist[@]}" >/dev/null 2>&1 & ;;
    cairn-io1) "$CAIRN" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$DIR" "${persist[@]}" >/dev/null 2>&1 & ;;
    cairn-io2) "$CAIRN" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$DIR" --io-threads 2 "${persist[@]}" >/dev/null 2>&1 & ;;
    cairn-before) "$BEFORE" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$DIR" "${persist[@]}" >/dev/null 2>&1 & ;;
  esac
  PID=$!
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "server did not start" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"; }

default="cairn-io1 cairn-io2 redis"
[ -n "$BEFORE" ] && default="cairn-before cairn-io1 cairn-io2 redis"
order=${SERVERS:-$default}
reversed=$(echo "$order" | tr ' ' '\n' | tac | tr '\n' ' ')
OP=GET; [ "$NOISE" = set ] && OP=SET
op=$(echo "$OP" | tr 'A-Z' 'a-z')
for r in $(seq "$ROUNDS"); do
  [ $((r % 2)) = 0 ] && servers=$reversed || servers=$order
  for srv in $servers; do
    start "$srv"
    # A run that misses its request rate exits non-zero; its table is still the result.
    "$BENCH" noise -p "$PORT" --pid "$PID" -k 20000 -c 16 -t 2 -r 20000 -T 8 --noise-rate "$NOISE_RATE" \
      --noise-size 10MB --noise-command "$NOISE" --quiet -o "$OUT/noise-$srv-$r" >"$OUT/noise-$srv-$r.txt" 2>&1 || true
    base=$(grep '^| baseline' "$OUT/noise-$srv-$r.txt" | awk -F'|' '{print $6}' | tr -d ' ')
    noisy=$(grep '^| + noise' "$OUT/noise-$srv-$r.txt" | awk -F'|' '{print $6}' | tr -d ' ')
    if [ "$OP" = SET ]; then
      # SET noise measures the small GETs' tail only (10 MB SET throughput with the log
      # on is the disk's).
      echo "round $r $srv: 1KB GET p99.9 baseline $base, with noise (10 MB SETs) $noisy"
      stop
      continue
    fi
    # 10 MB GET throughput: 4 clients, 200 GETs of one 10 MB value.
    redis-benchmark -p "$PORT" -t set -d 10485760 -n 20 -c 1 -q >/dev/null 2>&1
    n1=200; n4=60
    gets=$(redis-benchmark -p "$PORT" -t "$op" -d 10485760 -n $n1 -c 4 -q 2>/dev/null | tr '\r' '\n' \
      | grep -a 'requests per second' | tail -1 | sed "s/.*$OP: \([0-9.]*\) requests.*/\1/")
    mbs=$(python3 -c "print(f'{$gets * 10.48576:.0f}')")
    # The same with 4 client processes of one connection each: the single redis-benchmark
    # process above is itself the bottleneck (100% of a core, the server ~20%).
    t0=$(date +%s.%N); pids=""
    for _ in 1 2 3 4; do
      redis-benchmark -p "$PORT" -t "$op" -d 10485760 -n $n4 -c 1 -q >/dev/null 2>&1 & pids="$pids $!"
    done
    wait $pids; t1=$(date +%s.%N)
    mbs4=$(python3 -c "print(f'{4 * $n4 * 10.48576 / ($t1 - $t0):.0f}')")
    echo "round $r $srv: 1KB GET p99.9 baseline $base, with noise $noisy; 10MB $OP ${gets}/s = ${mbs} MB/s (1 process, 4 connections); ${mbs4} MB/s (4 processes)"
    stop
  done
done
