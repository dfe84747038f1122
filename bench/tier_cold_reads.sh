#!/bin/bash
# Cold reads of a tiered cairn: a server with `maxmemory 100mb` and a tier file is filled
# with 100,000 values of 4000 incompressible bytes (4x maxmemory, by cairn-bench's fill),
# left 4 s to settle, then redis-benchmark GETs of random keys at 1, 8 and 32 connections;
# about 89 % of them find their value on disk. Prints requests/s per binary, so two
# builds can be compared in interleaved runs:
#
#   for i in 1 2 3; do for b in OLD NEW; do bash bench/tier_cold_reads.sh $b; done; done
#
# Usage: bash bench/tier_cold_reads.sh [BINARY] (cairn-bench from target/release)
set -eu
B=${1:-target/release/cairn-server}
BENCH=$(cd "$(dirname "$0")/.." && pwd)/target/release/cairn-bench
D=$(mktemp -d)
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$B" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$D" --maxmemory 100mb \
  --tiered-prefix "$D/tier" --tiered-max-file-size 1gb >"$D/log" 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null; wait $SP 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 50); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.2; done
(cd "$D" && "$BENCH" run -p "$PORT" --keys 100000 -d 4000 --fill 100000 -n 1 -c 1 >/dev/null 2>&1)
sleep 4
rps() { redis-benchmark -p "$PORT" -t get -n "$1" -r 100000 -c "$2" </dev/null 2>/dev/null |
  awk '/throughput summary/ {print $3}'; }
C1=$(rps 10000 1)
# Where the 1-connection cold reads' time went: INFO tiered's timeline, µs per read.
STAGES=$(redis-cli -p "$PORT" INFO tiered | tr -d '\r' | awk -F: '
  /^tiered_read_timed:/ {n = $2} /^tiered_read_resumed:/ {r = $2}
  /^tiered_read_wait_us_(queue|device|wake|run):/ {sub("tiered_read_wait_us_", "", $1); t[$1] = $2}
  END {if (n > 0 && r > 0) printf "queue=%.0f device=%.0f wake=%.0f run=%.0f",
    t["queue"] / n, t["device"] / n, t["wake"] / n, t["run"] / r}')
C8=$(rps 30000 8)
C32=$(rps 30000 32)
MISSES=$(redis-cli -p "$PORT" INFO tiered | tr -d '\r' | awk -F: '/^tiered_misses:/ {print $2}')
echo "$(basename "$B") GET c1=$C1 c8=$C8 c32=$C32 tiered_misses=$MISSES c1_us_per_read: $STAGES"
