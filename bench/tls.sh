#!/usr/bin/env bash
# Issue #22's TLS benchmark: redis-benchmark --tls SET/GET at pipeline 1 and 16, and GET
# of a 1 MiB value (the large-reply path under TLS), against cairn-server (io-threads 1
# and 2) and Debian's redis-server 7, all on a tls-port with the same certificates (made
# here with openssl; client certificates required), ROUNDS interleaved rounds. Prints one
# line per run and a table of medians.
# Usage: bash bench/tls.sh [ROUNDS] [REQUESTS]
set -euo pipefail
ROUNDS=${1:-3}
N=${2:-100000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CAIRN=${CAIRN:-$ROOT/target/release/cairn-server}
CERTS=$(mktemp -d)
trap 'rm -rf "$CERTS"' EXIT

# CA, server and client certificates (EC P-256, as a test would make them).
(
  cd "$CERTS"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
    -out ca.crt -days 2 -subj "/CN=bench-ca" 2>/dev/null
  printf "subjectAltName=DNS:localhost,IP:127.0.0.1\n" >ext
  for who in server client; do
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout $who.key \
      -out $who.csr -subj "/CN=$who" 2>/dev/null
    openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $who.crt \
      -days 2 -extfile ext 2>/dev/null
  done
)

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
TLS_ARGS=(--tls-cert-file "$CERTS/server.crt" --tls-key-file "$CERTS/server.key"
  --tls-ca-cert-file "$CERTS/ca.crt" --tls-auth-clients yes)
CLIENT=(--tls --cacert "$CERTS/ca.crt" --cert "$CERTS/client.crt" --key "$CERTS/client.key")

start() { # name -> sets PORT TPORT PID DIR
  PORT=$(free_port); TPORT=$(free_port); DIR=$(mktemp -d)
  case "$1" in
    redis) redis-server --port "$PORT" --tls-port "$TPORT" "${TLS_ARGS[@]}" --bind 127.0.0.1 \
      --save "" --appendonly no --dir "$DIR" >/dev/null 2>&1 & ;;
    cairn) "$CAIRN" --port "$PORT" --tls-port "$TPORT" "${TLS_ARGS[@]}" --bind 127.0.0.1 \
      --save "" --dir "$DIR" >/dev/null 2>&1 & ;;
    cairn-io2) "$CAIRN" --port "$PORT" --tls-port "$TPORT" "${TLS_ARGS[@]}" --bind 127.0.0.1 \
      --save "" --dir "$DIR" --io-threads 2 >/dev/null 2>&1 & ;;
  esac
  PID=$!
  for _ in $(seq 100); do redis-cli -p "$TPORT" "${CLIENT[@]}" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "server $1 did not start" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"; }

rps() { # test pipeline [extra args] -> requests per second
  local t=$1 p=$2; shift 2
  redis-benchmark -p "$TPORT" "${CLIENT[@]}" -t "$t" -P "$p" -c 50 -r 100000 -q "$@" 2>/dev/null \
    | tr '\r' '\n' | grep -a 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/'
}

RES=$(mktemp)
for r in $(seq "$ROUNDS"); do
  [ $((r % 2)) = 0 ] && servers="redis cairn-io2 cairn" || servers="cairn cairn-io2 redis"
  for srv in $servers; do
    start "$srv"
    line="round $r $srv:"
    for p in 1 16; do
      for t in set get; do
        v=$(rps $t $p -n "$N")
        echo "$srv $t P$p $v" >>"$RES"
        line="$line $t P$p $v"
      done
    done
    # 1 MiB values: 4 connections, bounded count (the value is set by the SET run).
    redis-benchmark -p "$TPORT" "${CLIENT[@]}" -t set -d 1048576 -n 20 -c 1 -q >/dev/null 2>&1
    v=$(redis-benchmark -p "$TPORT" "${CLIENT[@]}" -t get -d 1048576 -n 400 -c 4 -q 2>/dev/null \
      | tr '\r' '\n' | grep -a 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/')
    echo "$srv get1m P1 $v" >>"$RES"
    line="$line get-1MiB $v"
    echo "$line"
    stop
  done
done
echo "medians over $ROUNDS rounds (requests/s): test | cairn io1 | cairn io2 | redis | io1/redis | io2/redis"
python3 - "$RES" <<'EOF'
import sys, statistics, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    s, t, p, v = l.split()
    d[(s, t, p)].append(float(v))
for t, p in (("set", "P1"), ("get", "P1"), ("set", "P16"), ("get", "P16"), ("get1m", "P1")):
    m = [statistics.median(d[(s, t, p)]) for s in ("cairn", "cairn-io2", "redis")]
    name = "GET 1 MiB" if t == "get1m" else f"{t.upper()} {p}"
    print(f"| {name} | {m[0]:.0f} | {m[1]:.0f} | {m[2]:.0f} | {m[0] / m[2]:.2f}x | {m[1] / m[2]:.2f}x |")
EOF
rm -f "$RES"
