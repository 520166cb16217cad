#!/usr/bin/env bash
# loom step: exhaustive (preemption-bounded) models of every gate, built once
# with --features all-strategies, plus the negative controls (every mutant
# must make a model fail, each in a child process). Test binaries:
#   loom_rwlock, loom_seqlock, loom_epoch  L1-L5 on the real tree (plus the
#       reader models L2r/L3r/L2t), the sweep models U1-U3 and the gate-level
#       models (torn reads against a
#       split / demoting append / pure append, two appenders); see
#       verification/src/models/{tree,gate}.rs
#   loom_sweep  the sweep scheduling on SweepTrigger, with its two mutants
#       (a racy claim, a finish that keeps the flag;
#       verification/src/models/sweep.rs), and the coverage test of every
#       suite's mutant lists and catchers (mutant_catalogue_is_complete)
#   loom_slots  a lane's cached rank slot against the rank's removal and the
#       slot's reuse on SlotRegistry, with its two cache mutants
#       (verification/src/models/slots.rs)
#   loom_mutex  the tree and gate models over the mutex gate of the outside
#       crate gates/mutex-gate, with the mutants it honours
#   loom_ranks  remove_worker with slot reuse (R1) and Cleared (R2) on the
#       real tree racing a split and a reader, with the release's grace
#       mutant (verification/src/models/ranks.rs), two ranks of a lane
#       sharing its directory against another lane's store (D1), with the
#       directory's two mutants (verification/src/models/directory.rs), and
#       two lanes creating one anchor against a lookup and a store under it
#       (A1), with the unlocked creation mutant
#       (verification/src/models/anchors.rs)
#   loom_bag  the grace reclaimer's bag mode (deferred work gathered per
#       thread, a fence only when a bag is pushed, as crossbeam-epoch does;
#       verification/src/models/grace/bag.rs): L2t, U1, U3 on the epoch gate
#       and R1, with the mutant only that mode catches
#       (EpochRetireInRelaxedSection) and a child run showing it survives a
#       fence at every defer ("mutant <name> [bag]: survived L2t with a
#       fence at every defer")
#
# Usage: .ci/loom.sh [all|models|mutants]   (default: all). `all` and
# `mutants` first run the unmutated models and stop if one fails, then the
# negative controls, so a mutant is never counted as caught by a model that
# fails without it. The mutants each suite runs and what must catch them are
# in verification/src/models/suites.rs (LOOM_SUITES, loom_catch); loom_sweep
# also runs their coverage test (mutant_catalogue_is_complete), which prints
# the declared mutants' names: after the negative controls, every declared
# mutant must have a child run that caught it ("mutant <name> [<gate>]:
# caught by ..." in the output), or the step fails. Every suite must run at
# least one test, and in the mutants phase catch at least one mutant, or the
# step fails naming it (.ci/checkers.sh, suite_ran).
# Knobs (CI defaults): CRTC_LOOM_PREEMPTIONS (2); CRTC_GRACE_BAG (unset:
# a fence at every defer, but bags of 64 in loom_bag; N > 1 runs every
# binary in bag mode with bags of N); CRTC_LOOM_READS and
# CRTC_LOOM_CAP override the per-gate budgets (see loom_seqlock.rs);
# CRTC_MUTANT_MATRIX=1 runs every mutant against every model. loom's own
# LOOM_* variables (LOOM_MAX_BRANCHES, LOOM_MAX_DURATION, ...) pass through.
# Builds in its own target dir (${CARGO_TARGET_DIR:-target}/loom) so the cfg
# does not invalidate the normal build cache. Prints one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."

source .ci/checkers.sh
what="${1:-all}"
mutant_tests=(loom_mutants_are_caught sweep_negative_controls_fail slots_negative_controls_fail
    ranks_negative_controls_fail bag_negative_controls_fail bag_mutant_survives_a_fence_at_every_defer)
choose_filter "$0" "$what" models "${mutant_tests[@]}"

export RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }--cfg crtc_loom"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target}/loom"
export CRTC_LOOM_PREEMPTIONS="${CRTC_LOOM_PREEMPTIONS:-2}"

log=$(mktemp)
trap 'rm -f "$log" "$log.suite"' EXIT
start=$SECONDS
suites=(loom_rwlock loom_seqlock loom_epoch loom_sweep loom_slots loom_ranks loom_bag loom_mutex)
choose_filter "$0" models models "${mutant_tests[@]}"
run_suites "$log" "${suites[@]}"
first_build=$build
phases="models"
if [ "$what" != models ]; then
    choose_filter "$0" mutants models "${mutant_tests[@]}"
    run_suites "$log" "${suites[@]}"
    phases="models, then mutants"
fi
build=$first_build

# uncaught_mutants LOG: the mutants the catalogue declares (its line
# "mutant catalogue declares: <name> ...") that no child run in LOG caught
# ("mutant <name> [<gate>]: caught by ..."), space-separated; "(none
# declared)" when the declaration line is missing.
uncaught_mutants() {
    local names name missing=()
    names=$(sed -nE 's/.*mutant catalogue declares: //p' "$1" | tail -n 1)
    [ -z "$names" ] && echo "(none declared)" && return
    for name in $names; do
        grep -qE "mutant $name \[[a-z]+\]: caught by " "$1" || missing+=("$name")
    done
    echo "${missing[*]}"
}

# One summary line: per gate, its models (executions, seconds) and its
# negative controls (caught / total, with the catching model).
parts=()
for gate in rwlock seqlock epoch sweep slots ranks bag mutex; do
    # "loom model <gate> <name> (<what>): <n> executions in <t> s (<bounds>[, capped at <cap> executions])"
    models=$(grep -oE "loom model $gate [A-Za-z0-9_]+ .*: [0-9]+ executions in [0-9.]+ s.*" "$log" |
        awk '{n = $4; for (i = 1; i <= NF; i++) if ($i == "executions" && $(i+1) == "in") {e = $(i-1); t = $(i+2)}
              printf "%s %s %s %s\n", n, e, t, (index($0, "capped") ? "capped" : "")}' || true)
    count=$(printf '%s\n' "$models" | grep -c . || true)
    part="$gate:"
    if [ "$count" -gt 0 ]; then
        executions=$(printf '%s\n' "$models" | awk '{s += $2} END {print s + 0}')
        per_model=$(printf '%s\n' "$models" | awk 'NF {printf "%s%s=%ss%s", sep, $1, $3, ($4 == "capped" ? "(capped)" : ""); sep=" "}')
        part+=" $count models, $executions executions ($per_model)"
    fi
    caught=$(grep -oE "loom mutants $gate: [0-9]+ of [0-9]+ caught" "$log" | tail -1 | grep -oE '[0-9]+ of [0-9]+' || true)
    if [ -n "$caught" ]; then
        catchers=$(catchers "$log" "$gate")
        part+="; mutants $caught caught ($catchers)"
    fi
    # loom_bag's control must also survive a fence at every defer.
    survivors=$(grep -oE "mutant [A-Za-z]+ \[$gate\]: survived [A-Za-z0-9_]+ with a fence at every defer" "$log" |
        sed -E 's/mutant ([A-Za-z]+) .*: survived ([A-Za-z0-9_]+) .*/\1 survives \2/' | paste -sd, - || true)
    [ -n "$survivors" ] && part+=" ($survivors with a fence at every defer)"
    [ "$part" != "$gate:" ] && parts+=("$part")
done
declared=$(grep -oE "mutant catalogue: [0-9]+ declared mutants" "$log" | grep -oE '[0-9]+' || true)
if [ -z "$declared" ]; then
    echo "loom.sh: FAILED: no mutant catalogue line (did mutant_catalogue_is_complete run?)" >&2
    exit 1
fi
if [ "$what" = models ]; then
    parts+=("catalogue: $declared declared mutants, each listed, every catcher able to fail its property")
else
    uncaught=$(uncaught_mutants "$log")
    if [ -n "$uncaught" ]; then
        echo "loom.sh: FAILED: declared mutants no child run caught: $uncaught" >&2
        exit 1
    fi
    loom_names=$(sed -nE 's/.*mutant catalogue declares: //p' "$log" | tail -n 1 | wc -w)
    parts+=("catalogue: each of the $loom_names mutants loom runs (of $declared declared; the rest are shuttle-only) caught by its property in this run")
fi
summary=$(printf '%s | ' "${parts[@]}")
echo "loom (preemption bound $CRTC_LOOM_PREEMPTIONS, $phases, build ${build}s, total $((SECONDS - start))s): ${summary% | }"
