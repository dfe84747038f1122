#!/usr/bin/env bash
# Issue #22's TLS benchmark: redis-benchmark --tls SET/GET at pipeline 1 and 16 against
# cairn-server (io-threads 1) and Debian's redis-server 7, both on a tls-port with the same
# certificates (made here with openssl; client certificates required), ROUNDS interleaved
# rounds. Prints one line per run and a summary of medians.
# Usage: bash bench/tls.sh [ROUNDS] [REQUESTS]
set -euo pipefail
ROUNDS=${1:-3}
N=${2:-100000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CAIRN=$ROOT/target/release/cairn-server
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
  esac
  PID=$!
  for _ in $(seq 100); do redis-cli -p "$TPORT" "${CLIENT[@]}" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "server $1 did not start" >&2; exit 1
}
stop() { kill "$PID"; wait "$PID" 2>/dev/null || true; rm -rf "$DIR"; }

rps() { # test pipeline -> requests per second
  redis-benchmark -p "$TPORT" "${CLIENT[@]}" -t "$1" -P "$2" -n "$N" -c 50 -r 100000 -q 2>/dev/null \
    | tr '\r' '\n' | grep -a 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/'
}

RES=$(mktemp)
for r in $(seq "$ROUNDS"); do
  [ $((r % 2)) = 0 ] && servers="redis cairn" || servers="cairn redis"
  for srv in $servers; do
    start "$srv"
    line="round $r $srv:"
    for p in 1 16; do
      for t in set get; do
        v=$(rps $t $p)
        echo "$srv $t P$p $v" >>"$RES"
        line="$line $t P$p $v"
      done
    done
    echo "$line"
    stop
  done
done
echo "medians over $ROUNDS rounds (requests/s), cairn / redis:"
python3 - "$RES" <<'EOF'
import sys, statistics, collections
d = collections.defaultdict(list)
for l in open(sys.argv[1]):
    s, t, p, v = l.split()
    d[(s, t, p)].append(float(v))
for p in ("P1", "P16"):
    for t in ("set", "get"):
        c = statistics.median(d[("cairn", t, p)]); r = statistics.median(d[("redis", t, p)])
        print(f"| {t.upper()} {p} | {c:.0f} | {r:.0f} | {c / r:.2f}x |")
EOF
rm -f "$RES"
