#!/usr/bin/env bash
# Two cairn-server builds side by side under `appendfsync always` (or FSYNC=...): per run a
# fresh server and log directory, `cairn-bench aof-seed` (SET:GET 1:3, 1000 B values,
# independent connections) for SECONDS, then the throughput, GET p99, SET p50, the
# fdatasyncs the server issued during the load (INFO aof_fsyncs) and the server's CPU
# ticks (/proc/PID/stat utime+stime, 100 per CPU-second). Rounds interleaved, the order
# reversed every other round.
# Run from the repo root after cargo build --release -p cairn-bench.
# Usage: A=old/cairn-server B=new/cairn-server bash bench/aof_builds_ab.sh [ROUNDS=3] [SECONDS=5] [CONNECTIONS=50]
#   (AOF_DIR: /var/tmp, e.g. /dev/shm for tmpfs; CAIRN_ARGS: extra server options;
#    BENCH: the cairn-bench binary; a wrapper script that execs the server with an
#    environment variable set works as A or B)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-$ROOT/target/release/cairn-bench}
ROUNDS=${1:-3}; SECS=${2:-5}; CONNS=${3:-50}
: "${A:?A=path of the first cairn-server}" "${B:?B=path of the second cairn-server}"
field() { redis-cli -p $1 info persistence | tr -d '\r' | awk -F: -v f=$2 '$1 == f {print $2}'; }
ticks() { awk '{print $14 + $15}' /proc/$1/stat; }
for r in $(seq $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then order="A B"; else order="B A"; fi
  for v in $order; do
    if [ $v = A ]; then bin=$A; else bin=$B; fi
    d=$(mktemp -d "${AOF_DIR:-/var/tmp}/cairn-ab.XXXX"); port=$((7600 + RANDOM % 200))
    "$bin" --port $port --bind 127.0.0.1 --save "" --appendonly yes \
      --appendfsync ${FSYNC:-always} --dir $d $CAIRN_ARGS >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
    timeout 60 "$BENCH" aof-seed -p $port -c $CONNS -k 10000 -T 0.5 --quiet -o $d/out >/dev/null 2>&1
    f0=$(field $port aof_fsyncs); c0=$(ticks $pid)
    res=$(timeout $((SECS + 60)) "$BENCH" aof-seed -p $port -c $CONNS -k 10000 -T $SECS --no-fill --quiet -o $d/out 2>/dev/null \
      | sed -n 's/^aof-seed-json //p' | python3 -c 'import json,sys; m=json.load(sys.stdin); print("%.0f ops/s GET p99 %.3f ms SET p50 %.3f ms" % (m["all_qps"], m["get_p99_us"]/1e3, m["set_p50_us"]/1e3))')
    f1=$(field $port aof_fsyncs); c1=$(ticks $pid)
    echo "round $r $v $res fsyncs $((f1 - f0)) server-cpu-ticks $((c1 - c0))"
    kill $pid; wait $pid 2>/dev/null; rm -rf $d
  done
done
