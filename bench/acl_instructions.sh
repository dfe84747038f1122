#!/bin/bash
# What an ACL user with key patterns costs in server instructions per request, counted by
# valgrind's callgrind (exact, unlike CPU time on a shared machine; user space only, so the
# socket system calls that dominate -P 1 are not in it). For `default` and for a user
# `on >benchpass ~key:* ~counter:* ~mylist:* +@all`: a fresh server under callgrind, its
# 100000 keys written in one order, then redis-benchmark GET and SET passes over them,
# each counted alone (callgrind_control zeroes the counters before and dumps them after).
# The ACL user's passes include its 50 connections' AUTH (a SHA-256 each), as any
# redis-benchmark run with --user does: at redis-benchmark's default of 100000 requests
# that is ~2 instructions a request, at 10000 about 20.
#
# Usage: bash bench/acl_instructions.sh [BINARY] [PIPELINE] [REQUESTS]
set -eu
BIN=${1:-target/release/cairn-server}
P=${2:-16}
N=${3:-100000}
KEYS=100000
OUT=$(mktemp -d)
python3 - "$OUT/fill.resp" "$KEYS" <<'PY'
import sys
value = b"x" * 100
with open(sys.argv[1], "wb") as f:
    for i in range(int(sys.argv[2])):
        key = b"key:%012d" % i
        f.write(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(key), key, value))
PY
for user in default acl; do
  PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # No busy polling: its instructions would depend on timing, not on the requests.
  valgrind --tool=callgrind --compress-strings=no --compress-pos=no \
    --callgrind-out-file="$OUT/$user.%p" "$BIN" --port "$PORT" --bind 127.0.0.1 --save "" \
    --event-loop-spin-us 0 >/dev/null 2>&1 &
  SP=$!
  for _ in $(seq 300); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.2; done
  redis-cli -p "$PORT" ACL SETUSER bench on '>benchpass' '~key:*' '~counter:*' '~mylist:*' '+@all' >/dev/null
  AUTH=()
  [ "$user" = acl ] && AUTH=(--user bench -a benchpass)
  bench() { redis-benchmark -p "$PORT" "${AUTH[@]}" -t "$1" -n "$N" -r "$KEYS" -d 100 -c 50 -P "$P" -q >/dev/null 2>&1; }
  # Every key the passes name exists, written in one order over one connection: both
  # servers' dicts end identical (no rehash during the passes, the same chains), where
  # redis-benchmark's own fill from 50 connections leaves each run's layout different.
  redis-cli -p "$PORT" --pipe <"$OUT/fill.resp" >/dev/null
  for t in get set; do
    callgrind_control -z "$SP" >/dev/null 2>&1
    bench "$t"
    callgrind_control -d "$t" "$SP" >/dev/null 2>&1
  done
  kill "$SP"
  wait "$SP" 2>/dev/null || true
  for t in get set; do
    F=$(grep -l "^desc: Trigger: .*$t" "$OUT/$user".* | head -1)
    IR=$(grep -a "^summary:\|^totals:" "$F" | head -1 | awk '{print $2}')
    echo "P$P $user ${t^^}: $((IR / N)) instructions/request"
    eval "IR_${user}_$t=$IR"
  done
done
for t in get set; do
  D=$(eval echo \$IR_default_$t)
  A=$(eval echo \$IR_acl_$t)
  python3 -c "print(f'P$P ${t^^}: the ACL user costs {($A - $D) / $N:+.0f} instructions/request, {100 * ($A - $D) / $D:+.2f} %')"
done
rm -rf "$OUT"
