#!/usr/bin/env bash
# Per-thread voluntary context switches per fdatasync under cairn `appendfsync always`, with
# the executor appending and syncing on its own io_uring (the lease, the default) and with
# every batch through the `cairn-aof` writer thread (CAIRN_AOF_EXECUTOR_APPENDS=0), plus the
# throughput and latencies of `cairn-bench aof-seed` at that moment. A sleeping thread woken
# by another counts one voluntary switch when it next sleeps; the io_uring worker
# (`iou-wrk-*`) also sleeps inside fdatasync for the disk. Fresh server and directory per
# run, rounds interleaved with the order reversed every other round.
# Run from the repo root after cargo build --release -p cairn-server -p cairn-bench.
# Usage: bash bench/aof_wakeups.sh [ROUNDS=3] [SECONDS=5] [CONNECTIONS=50]
#   (AOF_DIR: /var/tmp; CAIRN_ARGS: extra server options; CAIRN, BENCH: binaries)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CAIRN=${CAIRN:-$ROOT/target/release/cairn-server}
BENCH=${BENCH:-$ROOT/target/release/cairn-bench}
ROUNDS=${1:-3}; SECS=${2:-5}; CONNS=${3:-50}
switches() { # pid -> "thread-name count" lines, summed per name
  for t in /proc/$1/task/*; do
    echo "$(cat $t/comm) $(awk '/^voluntary_ctxt_switches/ {print $2}' $t/status)"
  done | awk '{a[$1]+=$2} END {for (k in a) print k, a[k]}' | sort
}
field() { redis-cli -p $1 info persistence | tr -d '\r' | awk -F: -v f=$2 '$1 == f {print $2}'; }
for r in $(seq $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then order="1 0"; else order="0 1"; fi
  for mode in $order; do
    d=$(mktemp -d "${AOF_DIR:-/var/tmp}/cairn-aof.XXXX"); port=$((7800 + RANDOM % 200))
    CAIRN_AOF_EXECUTOR_APPENDS=$mode "$CAIRN" --port $port --bind 127.0.0.1 --save "" \
      --appendonly yes --appendfsync always --dir $d $CAIRN_ARGS >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
    timeout 60 "$BENCH" aof-seed -p $port -c $CONNS -k 10000 -T 0.5 --quiet -o $d/out >/dev/null 2>&1
    switches $pid > $d/before; f0=$(field $port aof_fsyncs); b0=$(field $port aof_executor_batches)
    res=$(timeout $((SECS + 60)) "$BENCH" aof-seed -p $port -c $CONNS -k 10000 -T $SECS --no-fill --quiet -o $d/out 2>/dev/null \
      | sed -n 's/^aof-seed-json //p' | python3 -c 'import json,sys; m=json.load(sys.stdin); print("%.0f ops/s GET p99 %.3f ms SET p50 %.3f ms" % (m["all_qps"], m["get_p99_us"]/1e3, m["set_p50_us"]/1e3))')
    switches $pid > $d/after; f1=$(field $port aof_fsyncs)
    n=$((f1 - f0)); [ $n -gt 0 ] || n=1
    per=$(join $d/before $d/after | awk -v n=$n '{x=($3-$2)/n; if (x >= 0.005) printf "%s %.2f  ", $1, x}')
    echo "round $r executor-appends=$mode $res fsyncs $n (executor batches $(( $(field $port aof_executor_batches) - b0 ))) fsync_p50 $(field $port aof_fsync_us_p50)us | voluntary switches per fsync: $per"
    kill $pid; wait $pid 2>/dev/null; rm -rf $d
  done
done
