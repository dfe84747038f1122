#!/bin/bash
# Issue #7's redis-benchmark line against cairn `appendfsync always` across
# aof-inflight-syncs x aof-group-commit-wait-us (fresh server and directory per run, 3 rounds),
# with the fdatasyncs each run issued (INFO aof_fsyncs). Run from the repo root after
# cargo build --release. Usage: bash bench/aof_sweep.sh  (AOF_DIR: default /var/tmp)
CAIRN=$(cd "$(dirname "$0")/.." && pwd)/target/release/cairn-server
run() { # inflight wait
  d=$(mktemp -d "${AOF_DIR:-/var/tmp}/cairn-aof.XXXX"); port=$((7600 + RANDOM % 200))
  $CAIRN --port $port --bind 127.0.0.1 --save "" --appendonly yes --appendfsync always --aof-inflight-syncs $1 --aof-group-commit-wait-us $2 --dir $d >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
  r=$(redis-benchmark -p $port -t set -n 300000 -r 1000000 -d 1000 -c 50 -q 2>/dev/null | tr '\r' '\n' | grep -a 'per second' | tail -1 | sed 's/.*SET: \([0-9.]*\) requests.*/\1/')
  f=$(redis-cli -p $port info persistence | grep -E "aof_fsyncs:" | tr -d '\r' | cut -d: -f2)
  echo "inflight $1 wait $2 $r fsyncs $f"
  kill $pid; wait $pid 2>/dev/null; rm -rf $d
}
for round in 1 2 3; do
  for cfg in "1 0" "2 0" "3 0" "1 300" "2 300" "1 600" "2 600" "1 1000" "2 1000"; do
    run $cfg | sed "s/^/round $round /"
  done
done
