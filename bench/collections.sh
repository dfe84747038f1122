#!/usr/bin/env bash
# Issue #3's benchmark: redis-benchmark's collection tests against cairn-server and
# Debian's redis-server 7, interleaved, ROUNDS rounds, then memory for 100k hashes of 20
# fields and 100k sorted sets of 100 members (RSS after loading, each into a fresh server).
# Usage: bash bench/collections.sh [ROUNDS] [REQUESTS]
set -euo pipefail
ROUNDS=${1:-3}
N=${2:-1000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CAIRN=$ROOT/target/release/cairn-server
TESTS=lpush,rpush,lpop,rpop,sadd,hset,spop,zadd,zpopmin,lrange_100,mset
OUT=$(mktemp -d)

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
start() { # server -> PORT PID DIR
  PORT=$(free_port); DIR=$(mktemp -d)
  if [ "$1" = redis ]; then
    redis-server --port "$PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$DIR" >/dev/null 2>&1 &
  else
    "$CAIRN" --port "$PORT" --bind 127.0.0.1 --save "" --dir "$DIR" >/dev/null 2>&1 &
  fi
  PID=$!
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "server did not start" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"; }

for r in $(seq "$ROUNDS"); do
  order="cairn redis"; [ $((r % 2)) = 0 ] && order="redis cairn"
  for srv in $order; do
    start "$srv"
    redis-benchmark -p "$PORT" -t "$TESTS" -n "$N" -c 50 -P 16 -q 2>/dev/null | tr '\r' '\n' \
      | grep -a 'requests per second' | sed 's/^ *//' >"$OUT/$srv-$r.txt"
    stop
  done
done

python3 - "$OUT" "$ROUNDS" <<'EOF'
import os, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
res = {}
for srv in ("cairn", "redis"):
    for r in range(1, rounds + 1):
        for line in open(os.path.join(out, f"{srv}-{r}.txt")):
            m = re.match(r"(.+?): ([0-9.]+) requests per second", line)
            if m:
                res.setdefault(m.group(1), {}).setdefault(srv, []).append(float(m.group(2)))
print(f"| test | cairn (median req/s) | redis 7 (median req/s) | cairn/redis | per-round ratios |")
print("|---|---:|---:|---:|---|")
for test, v in res.items():
    c, rd = statistics.median(v["cairn"]), statistics.median(v["redis"])
    per = ", ".join(f"{a / b:.2f}" for a, b in zip(v["cairn"], v["redis"]))
    print(f"| {test} | {c:,.0f} | {rd:,.0f} | {c / rd:.2f}x | {per} |")
EOF

# Memory: 100k hashes x 20 fields (10-byte values), 100k zsets x 100 members.
rss_kib() { awk '/VmRSS/{print $2}' /proc/"$1"/status; }
load() { # kind -> prints RSS MiB after loading
  python3 - "$1" <<'EOF' | redis-cli -p "$PORT" --pipe >/dev/null
import sys
kind = sys.argv[1]
out = sys.stdout.buffer
def cmd(*a):
    out.write(b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a))
for i in range(100000):
    if kind == "hash":
        args = [b"HSET", b"h:%d" % i]
        for f in range(20):
            args += [b"field:%d" % f, b"v%09d" % (i * 20 + f)]
    else:
        args = [b"ZADD", b"z:%d" % i]
        for m in range(100):
            args += [b"%d" % ((i * 7 + m * 13) % 1000), b"member:%d" % m]
    cmd(*args)
EOF
  sleep 1
  echo "$(( $(rss_kib "$PID") / 1024 ))"
}
for kind in hash zset; do
  for srv in cairn redis; do
    start "$srv"
    echo "memory $kind $srv: $(load $kind) MiB RSS"
    stop
  done
done
rm -rf "$OUT"
