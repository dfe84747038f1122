#!/usr/bin/env bash
# A/B of two cairn-server binaries on the core operations, interleaved rounds:
# redis-benchmark -t set,get -n N -r 1000000 -d 100 -c 50 -P {1,16}, each binary started
# fresh per round (loopback, no persistence). Prints every round and the median ratio B/A.
# The load generator shares the machine's vCPUs with the server.
#
# Usage: bash bench/ab_binaries.sh A_BINARY B_BINARY [ROUNDS] [REQUESTS]
set -euo pipefail
a=$1; b=$2; rounds=${3:-5}; n=${4:-500000}
port=$((20000 + RANDOM % 10000))

run() { # binary pipeline -> "set_rps get_rps"
  local bin=$1 p=$2 pid out
  "$bin" --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
  out=$(redis-benchmark -p "$port" -t set,get -n "$n" -r 1000000 -d 100 -c 50 -P "$p" -q </dev/null 2>/dev/null | tr '\r' '\n')
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$dir"/*
  echo "$(echo "$out" | grep -o 'SET: [0-9.]* requests' | awk '{print $2}' | tail -1)" \
    "$(echo "$out" | grep -o 'GET: [0-9.]* requests' | awk '{print $2}' | tail -1)"
}

tmp=$(mktemp)
dir=$(mktemp -d)
trap 'rm -rf "$tmp" "$dir"' EXIT
declare -A res
for p in 1 16; do
  for r in $(seq "$rounds"); do
    for which in a b; do
      bin=$a; [ "$which" = b ] && bin=$b
      run "$bin" "$p" >"$tmp"
      read -r s g <"$tmp"
      res[$which,$p,set,$r]=$s; res[$which,$p,get,$r]=$g
      echo "P$p round $r $which: SET $s GET $g"
    done
  done
done

median() { sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo
echo "| pipeline | op | A median (req/s) | B median (req/s) | B/A |"
echo "|---|---|---|---|---|"
for p in 1 16; do
  for op in set get; do
    ma=$(for r in $(seq "$rounds"); do echo "${res[a,$p,$op,$r]}"; done | median)
    mb=$(for r in $(seq "$rounds"); do echo "${res[b,$p,$op,$r]}"; done | median)
    echo "| P$p | ${op^^} | $ma | $mb | $(awk -v x="$mb" -v y="$ma" 'BEGIN {printf "%.3f", x/y}') |"
  done
done
