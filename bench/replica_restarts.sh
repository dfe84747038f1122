#!/bin/bash
# Issue #18 point 8's restart trial: a cairn replica (appendonly yes, appendfsync always)
# restarted 100 times under writes, SIGTERM and kill -9 in turn; every restart must
# continue partially (sync_partial_ok) and the replica's DEBUG DIGEST must equal the
# primary's after each. It is the test `a_replica_restarted_from_its_log_continues_partially`
# (10 rounds in CI) with more rounds. Usage: bash bench/replica_restarts.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
CAIRN_RESTART_ROUNDS=${1:-100} cargo test --test replication_restart \
  a_replica_restarted_from_its_log_continues_partially -- --nocapture 2>&1 \
  | grep -E "restarts \(|test result|panicked|FAILED"
