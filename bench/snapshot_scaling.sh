#!/usr/bin/env bash
# Snapshot scaling (issue #24): `cairn-bench snapshot-vs --cairn-only` at several key
# counts and value entropies, rounds interleaved (round 1 of every size and entropy, then
# round 2, ...), one line per run and then the medians per size and entropy: BGSAVE
# duration, extra memory (RSS), longest executor pause, probe PING max in the BGSAVE
# window and before it (same load, no snapshot: the box's own noise), SET/s served.
#
#   bash bench/snapshot_scaling.sh [rounds] [sizes] [entropies] [rate]
#   bash bench/snapshot_scaling.sh 3 "1000000 4000000 8000000 16000000" "random text" 40000
#
# Needs a release build (cargo build --release --workspace) and a quiet machine: the load
# generator shares the CPUs with the server. Extra cairn arguments: CAIRN_ARGS="--a b".
# Results and per-run directories go to $OUT (default bench-out/snapshot-scaling).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
sizes=${2:-"1000000 4000000 8000000 16000000"}
entropies=${3:-"random text"}
rate=${4:-40000}
out=${OUT:-bench-out/snapshot-scaling}
bench=target/release/cairn-bench
mkdir -p "$out"
extra=()
for a in ${CAIRN_ARGS:-}; do extra+=("--cairn-arg=$a"); done

# Prints one field of a run's table: the cairn column of the row whose label starts so.
field() { grep -F "| $2" "$1" | head -1 | awk -F'|' '{gsub(/ /,"",$3); print $3}'; }

lines="$out/runs.tsv"
printf 'round\tkeys\tentropy\tduration\textra_rss\tpause\tprobe_max_bgsave\tprobe_max_before\tset_per_s\n' >"$lines"
for r in $(seq 1 "$rounds"); do
  for e in $entropies; do
    for k in $sizes; do
      run="$out/r$r-$k-$e"
      # A stray image in the working directory would make the next server load it.
      rm -f dump.rdb dump.cimg
      TMPDIR=${TMPDIR:-/var/tmp} "$bench" snapshot-vs --cairn-only -k "$k" -d 500 \
        -r "$rate" --value-entropy "$e" ${extra[@]+"${extra[@]}"} -o "$run" >"$run.txt" 2>&1
      set_rate=$(grep -A4 '^cairn: Whole run' "$run.txt" | tail -1 | awk -F'|' '{gsub(/ /,"",$3); print $3}')
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$k" "$e" \
        "$(field "$run.txt" 'BGSAVE duration')" \
        "$(field "$run.txt" 'extra memory (RSS of the server)')" \
        "$(field "$run.txt" 'longest executor pause')" \
        "$(field "$run.txt" 'probe PING latency, max (BGSAVE window')" \
        "$(field "$run.txt" 'probe PING latency, max before the BGSAVE window')" \
        "$set_rate" | tee -a "$lines"
      # After a run of 8M keys or more this VM shows isolated ~30 ms stalls for a while
      # (also with no snapshot running): let it settle before the next run.
      if [ "$k" -ge 8000000 ]; then sleep 60; else sleep 5; fi
    done
  done
done

python3 - "$lines" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter='\t'))
def num(v):
    return float(''.join(c for c in v if c.isdigit() or c == '.'))
print('\nmedians over rounds (every run above)\n')
print('| keys | values | BGSAVE duration | extra memory (RSS) | longest pause | probe max, BGSAVE window | probe max before it | SET/s |')
print('|---:|---|---:|---:|---:|---:|---:|---:|')
seen = []
for r in rows:
    if (r['keys'], r['entropy']) not in seen:
        seen.append((r['keys'], r['entropy']))
for keys, ent in seen:
    g = [r for r in rows if r['keys'] == keys and r['entropy'] == ent]
    med = lambda f: statistics.median(num(r[f]) for r in g)
    print(f"| {int(keys)//1000000}M | {ent} | {med('duration'):.2f} s | {med('extra_rss'):.1f} MB | "
          f"{med('pause'):.2f} ms | {med('probe_max_bgsave'):.2f} ms | {med('probe_max_before'):.2f} ms | "
          f"{med('set_per_s'):.0f} |")
EOF
