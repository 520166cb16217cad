#!/usr/bin/env bash
# loom step: exhaustive (preemption-bounded) models of the RwLock gate's
# decode append on the real tree, plus the negative controls (every RwLock
# mutant must make a model fail). See verification/tests/loom_rwlock.rs.
#
# Usage: .ci/loom.sh [all|models|mutants]   (default: all)
# Knobs (CI defaults): CRTC_LOOM_PREEMPTIONS (2). loom's own LOOM_* variables
# (LOOM_MAX_BRANCHES, LOOM_MAX_DURATION, ...) pass through.
# Builds in its own target dir (${CARGO_TARGET_DIR:-target}/loom) so the cfg
# does not invalidate the normal build cache. Prints one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-all}
case "$what" in
all) filter=() ;;
models) filter=(--skip loom_mutants_are_caught) ;;
mutants) filter=(--exact loom_mutants_are_caught) ;;
*)
    echo "usage: $0 [all|models|mutants]" >&2
    exit 2
    ;;
esac

export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }--cfg crtc_loom"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/loom"
export CRTC_LOOM_PREEMPTIONS="${CRTC_LOOM_PREEMPTIONS:-2}"

log=$(mktemp)
trap 'rm -f "$log"' EXIT
cargo test -p crtc-verification --release --test loom_rwlock -- \
    --test-threads=1 --nocapture "${filter[@]}" 2>&1 | tee "$log"

models=$(grep -oE 'loom model [A-Za-z0-9]+ \([^)]*\): [0-9]+ executions in [0-9.]+ s' "$log" |
    sed -E 's/loom model ([A-Za-z0-9]+) \([^)]*\): ([0-9]+) executions in ([0-9.]+) s/\1 \2 \3/' || true)
count=$(printf '%s\n' "$models" | grep -c . || true)
executions=$(printf '%s\n' "$models" | awk '{s += $2} END {print s + 0}')
per_model=$(printf '%s\n' "$models" | awk 'NF {printf "%s%s=%ss", sep, $1, $3; sep=", "}')
caught=$(grep -oE 'loom mutants: [0-9]+ of [0-9]+ caught' "$log" | tail -1 || true)
catchers=$(grep -oE 'mutant [A-Za-z]+: caught by [A-Za-z0-9]+' "$log" |
    sed -E 's/mutant ([A-Za-z]+): caught by ([A-Za-z0-9]+)/\1→\2/' | paste -sd, - || true)
parts=()
if [ "$count" -gt 0 ]; then
    parts+=("$count models ($executions executions, preemption bound $CRTC_LOOM_PREEMPTIONS; $per_model)")
fi
if [ -n "$caught" ]; then
    parts+=("${caught#loom }${catchers:+ ($catchers)}")
fi
summary=$(printf '%s; ' "${parts[@]}")
echo "loom: ${summary%; }"
