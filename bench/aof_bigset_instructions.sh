#!/bin/bash
# What a 10 MB SET costs the executor thread with `appendonly yes` (`appendfsync
# everysec`), counted by valgrind's callgrind per thread (exact, unlike CPU time on a
# shared machine; user space only: the socket reads and the log's pwrite are the kernel's).
# For each binary: a fresh server under callgrind, two SETs to warm up, then N SETs of one
# 10 MB value (redis-benchmark, one connection) counted alone (callgrind_control zeroes the
# counters before and dumps them after). Prints the executor's (thread 1) instructions per
# SET and those of the other threads (the log's writer among them).
#
# Usage: bash bench/aof_bigset_instructions.sh BINARY [BINARY...]   (N=10 by default)
set -eu
N=${N:-10}
for BIN in "$@"; do
  OUT=$(mktemp -d)
  DIR=$(mktemp -d)
  PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # No busy polling: its instructions would depend on timing, not on the requests. The
  # log's thread engine: under valgrind 3.19 the server stalls at the io_uring setup (so
  # no lease either: the executor hands every batch to the writer thread, in both builds).
  CAIRN_AOF_NO_URING=1 valgrind --tool=callgrind --separate-threads=yes --compress-strings=no --compress-pos=no \
    --callgrind-out-file="$OUT/cg.%p" "$BIN" --port "$PORT" --bind 127.0.0.1 --save "" \
    --dir "$DIR" --appendonly yes --appendfsync everysec --arena-reserve-bytes 4gb \
    --event-loop-spin-us 0 >/dev/null 2>&1 &
  SP=$!
  for _ in $(seq 300); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.2; done
  redis-benchmark -p "$PORT" -t set -d 10485760 -n 2 -c 1 -q >/dev/null 2>&1
  callgrind_control -z "$SP" >/dev/null 2>&1
  redis-benchmark -p "$PORT" -t set -d 10485760 -n "$N" -c 1 -q >/dev/null 2>&1
  callgrind_control -d sets "$SP" >/dev/null 2>&1
  kill "$SP"
  wait "$SP" 2>/dev/null || true
  exec_ir=0
  other_ir=0
  for F in $(grep -l "^desc: Trigger: .*sets" "$OUT"/cg.*); do
    IR=$(grep -a "^summary:\|^totals:" "$F" | head -1 | awk '{print $2}')
    case "$F" in
      *-01) exec_ir=$((exec_ir + IR)) ;;
      *) other_ir=$((other_ir + IR)) ;;
    esac
  done
  echo "$BIN: executor $((exec_ir / N)) instructions per 10 MB SET; other threads $((other_ir / N))"
  rm -rf "$OUT" "$DIR"
done
