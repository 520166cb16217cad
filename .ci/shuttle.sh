#!/usr/bin/env bash
# shuttle step: whole-tree scenarios (2 writer lanes + 1 reader; the streams
# hold clears, a worker's removal with a new worker on its slot,
# stale-leaf sweeps, and in the shared-lane case a store the reference model
# refuses and a writer's own read) and the decode storms (1 writer lane + 2 readers on one
# hot leaf) for every gate over the grace-period reclaimer, which frees while
# the threads run, built once with --features all-strategies, under random
# and PCT schedulers with fixed seeds, checked against the reference model
# and the structural walk; plus the negative controls shuttle can see (the
# RwLock four, the seqlock version bumps, epoch writer exclusion, the
# retire-before-unlink/unpublish pair, the two sweeps that free before the
# grace period (a compact set, a sharded set's entry) and the lane
# directory's two), each caught by its named property or the step fails (the
# ordering mutants are loom's). Test binaries: shuttle_rwlock,
# shuttle_seqlock, shuttle_epoch (scenarios in
# verification/src/models/scenarios.rs), and shuttle_indexer: the Indexer's
# lane threads racing a worker's and a dp rank's removal against the
# worker's late events, a reader and slot reuse, per gate, with the old
# removal order (RemovalDropsBeforeUnmap) as its control
# (verification/src/models/indexer.rs).
#
# Usage: .ci/shuttle.sh [all|scenarios|mutants]   (default: all)
# Knobs (CI defaults): CRTC_SHUTTLE_ITERS (500 schedules per scheduler and
# seed), CRTC_SHUTTLE_STORM_ITERS (1000), CRTC_SHUTTLE_SEEDS ("1 2 3"),
# CRTC_SHUTTLE_MUTANT_ITERS (300), CRTC_SHUTTLE_MUTANTS=0 skips the controls.
# Every suite must run at least one test and, unless the step skips the
# controls (scenarios, CRTC_SHUTTLE_MUTANTS=0), catch at least one mutant, or
# the step fails naming it (.ci/checkers.sh, suite_ran; a suite without
# negative controls is added to `suites_without_mutants` after sourcing it).
# Builds in its own target dir (${CARGO_TARGET_DIR:-target}/shuttle). Prints
# one summary line, with the blocks the reclaimer freed before the joins of
# each gate's scenario runs.
set -euo pipefail
cd "$(dirname "$0")/.."

source .ci/checkers.sh
choose_filter "$0" "${1:-all}" scenarios shuttle_mutants

export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }--cfg crtc_shuttle"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/shuttle"
export CRTC_SHUTTLE_ITERS="${CRTC_SHUTTLE_ITERS:-500}"
export CRTC_SHUTTLE_STORM_ITERS="${CRTC_SHUTTLE_STORM_ITERS:-1000}"
export CRTC_SHUTTLE_SEEDS="${CRTC_SHUTTLE_SEEDS:-1 2 3}"
export CRTC_SHUTTLE_MUTANT_ITERS="${CRTC_SHUTTLE_MUTANT_ITERS:-300}"

log=$(mktemp)
trap 'rm -f "$log" "$log.suite"' EXIT
start=$SECONDS
suites=(shuttle_rwlock shuttle_seqlock shuttle_epoch shuttle_indexer)
run_suites "$log" "${suites[@]}"

# The figures of one storm's retry distribution line: restarts per read
# (mean, max) and fallbacks, or "no restart path" / "no fallback path" where
# the gate has none (it prints so: no counter stands in for an absent path).
retry_figures() {
    local restarts fallbacks
    restarts=$(sed -nE 's/.*restarts\/read mean ([0-9.]+), max ([0-9]+) \(window bound\).*/mean \1 max \2 restarts\/read/p' <<<"$1")
    fallbacks=$(grep -oE '[0-9]+ pessimistic fallbacks' <<<"$1" | sed 's/ pessimistic//' || true)
    echo "${restarts:-no restart path}, ${fallbacks:-no fallback path}"
}

# One summary line: per gate, its scenario runs (schedules, seconds), the
# blocks freed during them, its storms' retry distributions, and its negative
# controls (a gate without retry paths: "storms: no retry path").
parts=()
for gate in rwlock seqlock epoch indexer; do
    runs=$(grep -oE "^shuttle $gate [a-z (),-]+: [0-9]+ schedules in [0-9.]+ s" "$log" |
        sed -E "s/^shuttle $gate ([a-z (),-]+): ([0-9]+) schedules in ([0-9.]+) s/\1|\2|\3/" || true)
    count=$(printf '%s\n' "$runs" | grep -c . || true)
    part="$gate:"
    if [ "$count" -gt 0 ]; then
        schedules=$(printf '%s\n' "$runs" | awk -F'|' '{s += $2} END {print s + 0}')
        per_run=$(printf '%s\n' "$runs" | awk -F'|' 'NF {gsub(/ \(fast path /, "/", $1); gsub(/\)/, "", $1); gsub(/decode storm \(/, "storm/", $1); gsub(/ /, "_", $1); printf "%s%s=%ss", sep, $1, $3; sep=" "}')
        part+=" $count runs, $schedules schedules ($per_run)"
    fi
    freed=$(grep -oE "^shuttle $gate [a-z ()-]+: [0-9]+ schedules in .*; [0-9]+ blocks freed before the join" "$log" |
        grep -oE "[0-9]+ blocks freed before the join" | awk '{s += $1} END {print s + 0}' || true)
    if [ "$freed" -gt 0 ]; then
        part+=", $freed blocks freed during runs"
    fi
    lock_step=$(grep -E "^shuttle $gate retry distribution \(lock step\): " "$log" || true)
    if [ -n "$lock_step" ]; then
        retries=$(retry_figures "$lock_step")
        if [ "$retries" = "no restart path, no fallback path" ]; then
            part+="; storms: no retry path"
        else
            reads=$(grep -oE ': [0-9]+ reads' <<<"$lock_step" | grep -oE '[0-9]+ reads')
            pure=$(retry_figures "$(grep -E "^shuttle $gate retry distribution \(pure\): " "$log" || true)")
            part+="; lock-step storm retries: $retries of $reads; pure storm: $pure"
        fi
    fi
    caught=$(grep -oE "shuttle mutants $gate: ([0-9]+ of [0-9]+ caught|skipped)" "$log" | tail -1 | sed -E "s/shuttle mutants $gate: //" || true)
    if [ -n "$caught" ]; then
        catchers=$(catchers "$log" "$gate")
        part+="; mutants $caught${catchers:+ ($catchers)}"
    fi
    [ "$part" != "$gate:" ] && parts+=("$part")
done
summary=$(printf '%s | ' "${parts[@]}")
echo "shuttle (seeds [$CRTC_SHUTTLE_SEEDS], $CRTC_SHUTTLE_ITERS/$CRTC_SHUTTLE_STORM_ITERS per scheduler and seed, build ${build}s, total $((SECONDS - start))s): ${summary% | }"
