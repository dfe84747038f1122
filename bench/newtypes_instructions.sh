#!/bin/bash
# Server instructions per request for the XREADGROUP, XACK, PFADD and XADD rows of bench/newtypes.py,
# cairn against redis-server 7, counted by valgrind's callgrind (exact and independent of the
# load on a shared machine; user space only, so the socket system calls are not in it).
# Each server runs under callgrind, is preloaded like bench/newtypes.py does (the stream is
# smaller: the `>` read touches only the tail, whatever the length), then the same
# redis-benchmark command line is run with the counters zeroed before and dumped after.
#
# Usage: bash bench/newtypes_instructions.sh [CAIRN_BINARY] [REQUESTS] [STREAM_ENTRIES]
# (TESTS="PFADD XADD", PIPELINES="16", KINDS="cairn" pick a subset; KEEP=/tmp/cg keeps the callgrind files;
# CALLGRIND_ARGS="--cache-sim=yes" adds the simulated cache misses to what KEEP keeps.)
set -eu
BIN=${1:-target/release/cairn-server}
N=${2:-20000}
ENTRIES=${3:-100000}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

preload() { # port test
  python3 - "$1" "$2" "$ENTRIES" <<'PY'
import sys
sys.path.insert(0, __import__("os").environ["HERE"])
import newtypes
port, test, entries = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
if test == "XREADGROUP":
    newtypes.preload_stream(port, entries)
    newtypes.pipe(port, [newtypes.resp("XGROUP", "CREATE", "s", "g", "0")])
elif test == "XACK":
    newtypes.setup("XACK", port)  # the PEL's size sets its depth: as the wall-clock row
PY
}
export HERE

for test in ${TESTS:-XREADGROUP PFADD}; do
  case $test in
    XREADGROUP) R=1; CMD=(XREADGROUP GROUP g c COUNT 1 STREAMS s '>') ;;
    PFADD) R=100; CMD=(PFADD 'hll:__rand_int__' '__rand_int__') ;;
    XADD) R=16; CMD=(XADD 's:__rand_int__' '*' f 0123456789abcdef) ;;
    XACK) R=1000000; CMD=(XACK s g '__rand_int__-1') ;;
  esac
  for P in ${PIPELINES:-1 16}; do
    for kind in ${KINDS:-cairn redis}; do
      PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      if [ $kind = cairn ]; then
        # No busy polling: its instructions would depend on timing, not on the requests.
        ARGS=("$BIN" --port "$PORT" --bind 127.0.0.1 --save "" --event-loop-spin-us 0)
      else
        ARGS=(redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no)
      fi
      valgrind --tool=callgrind --compress-strings=no --compress-pos=no ${CALLGRIND_ARGS:-} \
        --callgrind-out-file="$OUT/$kind.%p" "${ARGS[@]}" >/dev/null 2>&1 &
      SP=$!
      for _ in $(seq 300); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.2; done
      preload "$PORT" $test
      callgrind_control -z "$SP" >/dev/null 2>&1
      redis-benchmark -p "$PORT" -n "$N" -c 50 -P "$P" -r "$R" -q "${CMD[@]}" >/dev/null 2>&1
      callgrind_control -d run "$SP" >/dev/null 2>&1
      kill "$SP"
      wait "$SP" 2>/dev/null || true
      F=$(grep -l "^desc: Trigger: .*run" "$OUT/$kind".* | head -1)
      IR=$(grep -a "^summary:\|^totals:" "$F" | head -1 | awk '{print $2}')
      [ -n "${KEEP:-}" ] && cp "$F" "$KEEP.$test.P$P.$kind"
      echo "$test P$P $kind: $((IR / N)) instructions/request"
      rm -f "$OUT/$kind".*
    done
  done
done
