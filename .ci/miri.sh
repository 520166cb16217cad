#!/usr/bin/env bash
# miri step: interprets the strategies crate's tests (lib, gate_contract,
# epoch_memory; every gate, since the build has every gate feature) and the
# miri-sized tree suite (verification/tests/miri_tree.rs: a few catalogue
# scenarios and a two-thread store/remove/read/sweep run per gate) under
# Tree Borrows, so any use of freed or unowned memory, deallocation through a
# borrowed pointer or data race fails the step as undefined behaviour.
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
# Needs the nightly toolchain; installs its miri and rust-src components when
# it can, otherwise prints "miri: skipped (<reason>)" and succeeds. Builds in
# target/miri (cargo miri's own directory). Prints one summary line:
#   miri: <tests> tests, <n> UB
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
    echo "miri: skipped ($1)"
    exit 0
}

command -v rustup >/dev/null || skip "no rustup"
rustup run nightly rustc --version >/dev/null 2>&1 || skip "no nightly toolchain"
installed() {
    cargo +nightly miri --version >/dev/null 2>&1 &&
        rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'
}
installed || rustup component add --toolchain nightly miri rust-src >/dev/null 2>&1 ||
    skip "cannot install the nightly miri and rust-src components"
cargo +nightly miri setup >/dev/null 2>&1 || skip "cargo miri setup failed"

export MIRIFLAGS="${MIRIFLAGS:+$MIRIFLAGS }-Zmiri-tree-borrows -Zmiri-ignore-leaks"
export CARGO_TERM_COLOR=never

log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo +nightly miri test -p crtc-strategies --features seqlock,seize 2>&1 | tee -a "$log" || status=1
cargo +nightly miri test -p crtc-verification --features all-strategies --test miri_tree 2>&1 |
    tee -a "$log" || status=1

tests=$(grep -E '^test result:' "$log" | awk '{s += $4} END {print s + 0}')
ub=$(grep -c 'Undefined Behavior' "$log" || true)
echo "miri: $tests tests, $ub UB"
if [ "$status" -ne 0 ] || [ "$ub" -ne 0 ]; then
    grep -E -A3 'Undefined Behavior|^error' "$log" | head -n 40 >&2
    exit 1
fi
