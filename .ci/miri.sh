#!/usr/bin/env bash
# miri step: interprets, under Tree Borrows, so that any use of freed or
# unowned memory, deallocation through a borrowed pointer or data race fails
# the step as undefined behaviour:
#   1. the strategies crate's tests (lib, gate_contract, epoch_memory; every
#      gate, since the build has every gate feature), once;
#   2. the miri-sized tree suite (verification/tests/miri_tree.rs: catalogue
#      scenarios and a two-thread store/remove/read/sweep run per gate), once;
#   3. a slice of the crtc crate's own unit tests (CRTC_MIRI_CRTC_FILTER,
#      default `tree::sweep::tests::sweep_`: the real sweep unlinking and
#      freeing nodes of a real tree), once;
#   4. the concurrent tests again (miri_tree's two_threads per gate and epoch_memory's readers racing writers) under
#      CRTC_MIRI_SEEDS more schedules, one after another (-Zmiri-seed=1..N;
#      passes 1-2 ran seed 0), each seed a different thread interleaving and
#      weak-memory outcome. They run one seed at a time rather than under
#      -Zmiri-many-seeds, whose parallel seeds interleave their output, so
#      every run's libtest result line can be read.
#
# Flags:
#   -Zmiri-tree-borrows  crossbeam-epoch's intrusive list trips Stacked
#                        Borrows before our code runs; Tree Borrows accepts it.
#   -Zmiri-ignore-leaks  crossbeam-epoch's and seize's collectors are process
#                        globals never dropped: per-thread records and work
#                        still deferred at exit stay allocated by design. Our
#                        own frees are checked by epoch_memory (net allocator
#                        bytes back to zero) and the memory suites instead.
#
# Knobs (CI defaults): CRTC_MIRI_SEEDS (3 extra seeds per concurrent test,
# run one after another; 0 runs none).
#
# Skips (prints "miri: skipped (<reason>)" and succeeds) only where there is
# no nightly toolchain. With one, it installs the nightly miri and rust-src
# components if they are missing and fails when it cannot install or run
# them. Every cargo command must report at least one passed test in its
# libtest result lines, or the step fails naming it. Builds in target/miri
# (cargo miri's own directory). Prints one summary line, its counts summed
# from those result lines:
#   miri: <tests> test runs (<n> once, <m> in <seeds> more seeds), <u> UB
set -euo pipefail
cd "$(dirname "$0")/.."

seeds="${CRTC_MIRI_SEEDS:-3}"
crtc_filter="${CRTC_MIRI_CRTC_FILTER:-tree::sweep::tests::sweep_}"

fail() {
    echo "miri: FAILED ($1)" >&2
    exit 1
}

if ! command -v rustup >/dev/null || ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "miri: skipped (no nightly toolchain)"
    exit 0
fi
installed() {
    cargo +nightly miri --version >/dev/null 2>&1 &&
        rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'
}
installed || rustup component add --toolchain nightly miri rust-src >/dev/null ||
    fail "cannot install the nightly miri and rust-src components"
cargo +nightly miri setup >/dev/null 2>&1 || fail "cargo miri setup failed"

export MIRIFLAGS="${MIRIFLAGS:+$MIRIFLAGS }-Zmiri-tree-borrows -Zmiri-ignore-leaks"
export CARGO_TERM_COLOR=never

log=$(mktemp)
seeded_log=$(mktemp)
run_log=$(mktemp)
trap 'rm -f "$log" "$seeded_log" "$run_log"' EXIT
status=0

# run LOG CARGO_ARGS...: runs `cargo +nightly miri test CARGO_ARGS`, appending
# its output to LOG; sets status=1 when it fails or its libtest result lines
# count no passed test (a filter that matches nothing, a suite compiled out).
run() {
    local log=$1 passed
    shift
    cargo +nightly miri test "$@" 2>&1 | tee "$run_log" || status=1
    cat "$run_log" >>"$log"
    passed=$(passed "$run_log")
    if [ "$passed" -eq 0 ]; then
        echo "miri: FAILED: \`cargo miri test $*\` ran no test" >&2
        status=1
    fi
}

# passed LOG: the passed tests libtest's result lines in LOG count.
passed() {
    sed -nE 's/^test result: [a-zA-Z]+\. ([0-9]+) passed;.*/\1/p' "$1" | awk '{s += $1} END {print s + 0}'
}

run "$log" -p crtc-strategies --features seqlock,seize
run "$log" -p crtc-verification --features all-strategies --test miri_tree
run "$log" -p crtc --features all-strategies --lib -- "$crtc_filter"
base_flags=$MIRIFLAGS
for seed in $(seq 1 "$seeds"); do
    export MIRIFLAGS="$base_flags -Zmiri-seed=$seed"
    run "$seeded_log" -p crtc-verification --features all-strategies --test miri_tree -- two_threads
    run "$seeded_log" -p crtc-strategies --features seqlock,seize --test epoch_memory
done
export MIRIFLAGS=$base_flags

once=$(passed "$log")
seeded=$(passed "$seeded_log")
ub=$(cat "$log" "$seeded_log" | grep -c 'Undefined Behavior' || true)
echo "miri: $((once + seeded)) test runs ($once once, $seeded in $seeds more seeds), $ub UB"
if [ "$status" -ne 0 ] || [ "$ub" -ne 0 ]; then
    cat "$log" "$seeded_log" | grep -E -A3 'Undefined Behavior|^error' | head -n 40 >&2
    exit 1
fi
