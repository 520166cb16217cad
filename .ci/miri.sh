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
#   4. the concurrent tests again (CRTC_MIRI_CONCURRENT: miri_tree's
#      two_threads per gate and epoch_memory's readers racing writers) under
#      CRTC_MIRI_SEEDS more schedules (-Zmiri-many-seeds=1..=N; seed 0 is
#      passes 1-2), each seed a different thread interleaving and weak-memory
#      outcome.
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
# sized so the step stays at a few minutes on 2 cores).
#
# Skips (prints "miri: skipped (<reason>)" and succeeds) only where there is
# no nightly toolchain. With one, it installs the nightly miri and rust-src
# components if they are missing and fails when it cannot install or run
# them. Builds in target/miri (cargo miri's own directory). Prints one
# summary line:
#   miri: <tests> test runs (<n> once, <m> concurrent x <seeds> seeds), <u> UB
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
trap 'rm -f "$log" "$seeded_log"' EXIT
status=0
cargo +nightly miri test -p crtc-strategies --features seqlock,seize 2>&1 | tee -a "$log" || status=1
cargo +nightly miri test -p crtc-verification --features all-strategies --test miri_tree 2>&1 |
    tee -a "$log" || status=1
cargo +nightly miri test -p crtc --features all-strategies --lib -- "$crtc_filter" 2>&1 |
    tee -a "$log" || status=1
if [ "$seeds" -gt 0 ]; then
    (
        export MIRIFLAGS="$MIRIFLAGS -Zmiri-many-seeds=1..$((seeds + 1))"
        cargo +nightly miri test -p crtc-verification --features all-strategies --test miri_tree \
            -- two_threads
        cargo +nightly miri test -p crtc-strategies --features seqlock,seize --test epoch_memory
    ) 2>&1 | tee "$seeded_log" || status=1
fi

once=$(grep -E '^test result:' "$log" | awk '{s += $4} END {print s + 0}')
# -Zmiri-many-seeds runs the seeds in parallel and their output interleaves,
# so the seeded runs are counted from the tests the filters select (listed
# under miri, no test run) and the seeds each binary tried; a failing seed
# fails its cargo command.
concurrent=0
if [ "$seeds" -gt 0 ]; then
    listed=$(
        cargo +nightly miri test -q -p crtc-verification --features all-strategies --test miri_tree \
            -- two_threads --list 2>/dev/null
        cargo +nightly miri test -q -p crtc-strategies --features seqlock,seize --test epoch_memory \
            -- --list 2>/dev/null
    ) || status=1
    concurrent=$(printf '%s\n' "$listed" | grep -c ': test$' || true)
    tried=$(grep -o 'Trying seed: [0-9]*' "$seeded_log" | wc -l)
    if [ "$tried" -ne $((2 * seeds)) ]; then
        echo "miri: the seeded runs tried $tried seeds, not $((2 * seeds))" >&2
        status=1
    fi
fi
ub=$(cat "$log" "$seeded_log" | grep -c 'Undefined Behavior' || true)
echo "miri: $((once + concurrent * seeds)) test runs ($once once, $concurrent concurrent x $seeds more seeds), $ub UB"
if [ "$status" -ne 0 ] || [ "$ub" -ne 0 ]; then
    cat "$log" "$seeded_log" | grep -E -A3 'Undefined Behavior|^error' | head -n 40 >&2
    exit 1
fi
