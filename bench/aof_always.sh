#!/usr/bin/env bash
# Issue #7's line: redis-benchmark -t set -n 300000 -r 1000000 -d 1000 -c 50 against cairn and
# Debian's redis-server 7, appendfsync always / everysec and appendonly no (cairn also
# always with aof-group-commit-wait-us 600: "always-group"), fresh server and directory
# per run, 3 interleaved rounds (order reversed every other round). Run from the repo root
# after cargo build --release. Usage: bash bench/aof_always.sh  (AOF_DIR: a directory on the
# disk under test, default /var/tmp; not a tmpfs)
CAIRN=$(cd "$(dirname "$0")/.." && pwd)/target/release/cairn-server
run() { # server mode
  d=$(mktemp -d "${AOF_DIR:-/var/tmp}/cairn-aof.XXXX"); port=$((7400 + RANDOM % 200))
  if [ $1 = redis ]; then
    if [ $2 = no ]; then redis-server --port $port --bind 127.0.0.1 --save "" --appendonly no --dir $d >/dev/null 2>&1 &
    else redis-server --port $port --bind 127.0.0.1 --save "" --appendonly yes --appendfsync $2 --dir $d >/dev/null 2>&1 & fi
  else
    if [ $2 = no ]; then "$CAIRN" --port $port --bind 127.0.0.1 --save "" --appendonly no --dir $d >/dev/null 2>&1 &
    elif [ $2 = always-group ]; then "$CAIRN" --port $port --bind 127.0.0.1 --save "" --appendonly yes --appendfsync always --aof-group-commit-wait-us 600 --dir $d >/dev/null 2>&1 &
    else "$CAIRN" --port $port --bind 127.0.0.1 --save "" --appendonly yes --appendfsync $2 --dir $d >/dev/null 2>&1 & fi
  fi
  pid=$!
  for _ in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.05; done
  r=$(redis-benchmark -p $port -t set -n 300000 -r 1000000 -d 1000 -c 50 -q 2>/dev/null | tr '\r' '\n' | grep -a 'per second' | tail -1 | sed 's/.*SET: \([0-9.]*\) requests.*/\1/')
  echo "$1 $2 $r"
  kill $pid; wait $pid 2>/dev/null; rm -rf $d
}
for round in 1 2 3; do
  if [ $((round % 2)) = 1 ]; then order="cairn:always cairn:always-group cairn:everysec cairn:no redis:always redis:everysec redis:no"; else order="redis:no redis:everysec redis:always cairn:no cairn:everysec cairn:always-group cairn:always"; fi
  for x in $order; do run ${x%%:*} ${x##*:} | sed "s/^/round $round /"; done
done
