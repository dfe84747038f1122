#!/usr/bin/env bash
# Issue #24's run: BGSAVE of N keys x 500 B of incompressible values under an open-loop
# SET load, for two cairn-server binaries (before / after) and Redis, interleaved rounds.
# Each round runs `cairn-bench snapshot-vs` twice: binary A with Redis beside it, then
# binary B alone (cairn-bench runs its sides one after the other, so every server gets
# the machine to itself apart from the load generator). Prints, per run, the table rows
# that matter and cairn's cut line (converged or switched to freeze-free); the full
# reports stay in OUT.
#
# Usage: bash bench/snapshot_converge.sh A_BINARY B_BINARY [KEYS] [RATE] [ROUNDS] [OUT]
#   defaults: 8000000 keys, 40000 SET/s, 1 round, OUT=bench-out/converge-<time>
# Needs: target/release/cairn-bench (or CAIRN_BENCH=...), redis-server on PATH (or
# REDIS=...), ~2x the dataset in free memory for Redis's fork, and the image sizes on disk
# under TMPDIR (the servers' directories go there; default /tmp).
set -euo pipefail
a=$1; b=$2; keys=${3:-8000000}; rate=${4:-40000}; rounds=${5:-1}
out=${6:-bench-out/converge-$(date -u +%Y%m%dT%H%M%S)}
bench=${CAIRN_BENCH:-target/release/cairn-bench}
redis=${REDIS:-redis-server}
mkdir -p "$out"

run() { # name binary extra-args... -> OUT/name.{out,err}
  local name=$1 bin=$2; shift 2
  "$bench" snapshot-vs --cairn "$bin" --redis "$redis" -k "$keys" -d 500 -r "$rate" \
    --value-entropy random --cairn-arg=--loglevel --cairn-arg=verbose -o "$out/$name" "$@" \
    >"$out/$name.out" 2>"$out/$name.err" || echo "$name: cairn-bench failed (see $out/$name.err)"
  echo "== $name ($bin)"
  grep -E 'BGSAVE duration|extra memory \(server|longest executor pause|probe PING latency, max \(BGSAVE|probe PING latency, p99 \(BGSAVE|restart to serving|image / RDB' "$out/$name.out" || true
  grep -oE 'Snapshot cut: pause [0-9]+ us[^)]*\)|switching to synchronous[^"]*|Background saving terminated[^"]*' "$out/$name.out" | head -5 || true
}

for r in $(seq "$rounds"); do
  run "r$r-A+redis" "$a"
  run "r$r-B" "$b" --cairn-only
done
echo "reports in $out"
