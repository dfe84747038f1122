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
#   CLOSED=1          adds a second line per run, the closed-loop saturating variant:
#                     redis-benchmark GETs of 1 KB values on 50 connections with no rate
#                     limit (CLOSED_N requests, default 200000), p99.9 without and then
#                     with one client doing NOISE_RATE 10 MB GETs (SETs with NOISE=set)
#                     per second beside it
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
CLOSED=${CLOSED:-}
CLOSED_N=${CLOSED_N:-200000}
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

# p99.9 (ms) of a redis-benchmark run: the first percentile line at or past 99.9 %.
# Reads all of its input: an early exit would end redis-benchmark with SIGPIPE, and
# `pipefail` would end the script.
p999() { tr '\r' '\n' | awk '/^ *[0-9.]+% <= [0-9.]+ milliseconds/ && !done { sub(/%/, "", $1); if ($1 + 0 >= 99.9) { print $3; done = 1 } }'; }

# One client doing NOISE_RATE requests/s on a 10 MB value (GET, or SET with NOISE=set)
# until killed or 600 s have passed; every reply is read whole. Runs in the background.
noise_client() { # port
  python3 - "$1" "$NOISE" "$NOISE_RATE" <<'PY' &
import socket, sys, time
port, op, rate = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
size = 10 * 1024 * 1024
val = bytes(i * 2654435761 % 251 for i in range(65536)) * (size // 65536)
s = socket.create_connection(("127.0.0.1", port))
def reply():
    buf = b""
    while b"\r\n" not in buf:
        buf += s.recv(1 << 20)
    head, _, rest = buf.partition(b"\r\n")
    if head[:1] == b"$" and int(head[1:]) >= 0:
        need = int(head[1:]) + 2 - len(rest)
        while need > 0:
            got = s.recv(min(need, 1 << 20))
            if not got:
                sys.exit(1)
            need -= len(got)
set_req = b"*3\r\n$3\r\nSET\r\n$8\r\nnoise:10\r\n$%d\r\n" % size + val + b"\r\n"
s.sendall(set_req); reply()
req = set_req if op == "set" else b"*2\r\n$3\r\nGET\r\n$8\r\nnoise:10\r\n"
t = time.time(); end = t + 600
while t < end:
    s.sendall(req); reply()
    t += 1.0 / rate
    time.sleep(max(0.0, t - time.time()))
PY
  NOISE_PID=$!
}

# The closed-loop saturating line (CLOSED=1): 50 connections of 1 KB GETs, no rate limit,
# without and with the 10 MB noise client.
closed_loop() { # round server
  redis-benchmark -p "$PORT" -t set -d 1024 -r 20000 -n 20000 -c 50 -q >/dev/null 2>&1
  local quiet noisy
  quiet=$(redis-benchmark -p "$PORT" -t get -d 1024 -r 20000 -n "$CLOSED_N" -c 50 2>/dev/null | p999)
  redis-cli -p "$PORT" del noise:10 >/dev/null
  noise_client "$PORT"
  # The noise has begun once its first SET is in (at most 30 s on a loaded machine).
  for _ in $(seq 300); do
    [ "$(redis-cli -p "$PORT" strlen noise:10)" = 10485760 ] && break; sleep 0.1
  done
  noisy=$(redis-benchmark -p "$PORT" -t get -d 1024 -r 20000 -n "$CLOSED_N" -c 50 2>/dev/null | p999)
  kill "$NOISE_PID" 2>/dev/null || true
  wait "$NOISE_PID" 2>/dev/null || true
  echo "round $1 $2: closed loop, 50 connections: 1KB GET p99.9 ${quiet} ms, with ${NOISE_RATE}/s 10 MB ${OP}s ${noisy} ms"
}

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
      [ -n "$CLOSED" ] && closed_loop "$r" "$srv"
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
    [ -n "$CLOSED" ] && closed_loop "$r" "$srv"
    stop
  done
done
