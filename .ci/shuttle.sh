#!/usr/bin/env bash
# shuttle step: whole-tree scenarios (2 writer lanes + 1 reader) under random
# and PCT schedulers with fixed seeds, checked against the reference model,
# plus the shuttle negative controls. See verification/tests/shuttle_rwlock.rs.
#
# Usage: .ci/shuttle.sh [all|scenarios|mutants]   (default: all)
# Knobs (CI defaults): CRTC_SHUTTLE_ITERS (3000 schedules per scheduler and
# seed), CRTC_SHUTTLE_SEEDS ("1 2 3"), CRTC_SHUTTLE_MUTANT_ITERS (300).
# Builds in its own target dir (${CARGO_TARGET_DIR:-target}/shuttle). Prints
# one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-all}
case "$what" in
all) filter=() ;;
scenarios) filter=(--skip shuttle_mutants) ;;
mutants) filter=(--exact shuttle_mutants) ;;
*)
    echo "usage: $0 [all|scenarios|mutants]" >&2
    exit 2
    ;;
esac

export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }--cfg crtc_shuttle"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/shuttle"
export CRTC_SHUTTLE_ITERS="${CRTC_SHUTTLE_ITERS:-3000}"
export CRTC_SHUTTLE_SEEDS="${CRTC_SHUTTLE_SEEDS:-1 2 3}"
export CRTC_SHUTTLE_MUTANT_ITERS="${CRTC_SHUTTLE_MUTANT_ITERS:-300}"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test -p crtc-verification --release --test shuttle_rwlock -- \
    --test-threads=1 --nocapture "${filter[@]}" 2>&1 | tee "$log"

totals=$(grep -oE 'shuttle [a-z ]+ \(fast path (on|off)\): [0-9]+ schedules \(' "$log" || true)
count=$(printf '%s\n' "$totals" | grep -c . || true)
schedules=$(printf '%s\n' "$totals" | grep -oE '[0-9]+ schedules' | awk '{s += $1} END {print s + 0}')
caught=$(grep -oE 'shuttle mutants: ([0-9]+ of [0-9]+ caught|skipped[^)]*\))' "$log" | tail -1 || true)
parts=()
if [ "$count" -gt 0 ]; then
    parts+=("$count scenario runs, $schedules schedules (random + pct, seeds [$CRTC_SHUTTLE_SEEDS], $CRTC_SHUTTLE_ITERS per scheduler and seed)")
fi
if [ -n "$caught" ]; then
    parts+=("${caught#shuttle }")
fi
summary=$(printf '%s; ' "${parts[@]}")
echo "shuttle: ${summary%; }"
