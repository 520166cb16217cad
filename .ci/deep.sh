#!/usr/bin/env bash
# Deep verification (not part of .ci/run; hours on 2 cores): the same checkers
# as CI at research depth, with a summary written to
# papers/results/verification.md, or to the path in CRTC_VERIFICATION_OUT
# (papers/regenerate.sh writes it into its scratch directory with the other
# results): command, revision, rustc, date, machine, topology, kernel, knobs
# and every step's summary line. Steps and their knobs (defaults here):
#   proptest  differential suites, CRTC_DIFF_CASES=10000 cases per gate
#             (tests/differential_tree.rs divides it among its drivers)
#   shuttle   CRTC_SHUTTLE_ITERS=17000 schedules per scheduler and seed,
#             3 seeds, random + PCT: 102,000 schedules per scenario and gate;
#             storms CRTC_SHUTTLE_STORM_ITERS=17000
#   loom      preemption bound CRTC_LOOM_PREEMPTIONS=3 (every model and mutant)
#   soak      CRTC_SOAK_SECS=600 per gate (the ignored long soak), half on the
#             fixed seed, half on a fresh one (printed)
#   miri      .ci/miri.sh (skips with one line where nightly is missing)
# Usage: .ci/deep.sh [step ...]   (default: every step, in the order above)
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR=never
export CRTC_DIFF_CASES="${CRTC_DIFF_CASES:-10000}"
export CRTC_SHUTTLE_ITERS="${CRTC_SHUTTLE_ITERS:-17000}"
export CRTC_SHUTTLE_STORM_ITERS="${CRTC_SHUTTLE_STORM_ITERS:-17000}"
export CRTC_LOOM_PREEMPTIONS="${CRTC_LOOM_PREEMPTIONS:-3}"
export CRTC_SOAK_SECS="${CRTC_SOAK_SECS:-600}"
out_file="${CRTC_VERIFICATION_OUT:-papers/results/verification.md}"

# The revision is read before anything runs, so the summary names the code
# that ran even if a step leaves files behind.
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no 2>/dev/null | grep -c . || true)
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(proptest shuttle loom soak miri)
lines=()

proptest() {
    cargo test --release -p crtc-verification --features all-strategies \
        --test differential --test differential_tree 2>&1 | grep -E '^test result:' |
        awk -v c="$CRTC_DIFF_CASES" '{p += $4; f += $6} END {printf "proptest: %d tests passed, %d failed, %s cases per gate\n", p, f, c}'
}
shuttle() { .ci/shuttle.sh | tail -n 1; }
loom() { .ci/loom.sh | tail -n 1; }
# The long soak's lines; a failing soak (or one that ran no test) fails the
# step and the script, after printing the soak's last lines.
soak() {
    local log status=0
    log=$(mktemp)
    cargo test --release -p crtc-verification --features all-strategies --test soak -- \
        --ignored soak_long --nocapture >"$log" 2>&1 || status=$?
    grep -E '^(soak|test result)' "$log" || true
    if [ "$status" -ne 0 ] || ! grep -qE '^test result: ok\. [1-9][0-9]* passed' "$log"; then
        tail -n 40 "$log" >&2
        rm -f "$log"
        echo "soak: FAILED (exit status $status)" >&2
        return 1
    fi
    rm -f "$log"
}
miri() { .ci/miri.sh | tail -n 1; }

for step in "${steps[@]}"; do
    case "$step" in
    proptest | shuttle | loom | soak | miri) ;;
    *)
        echo "usage: $0 [proptest|shuttle|loom|soak|miri ...]" >&2
        exit 2
        ;;
    esac
    start=$SECONDS
    echo "=== deep $step"
    out=$("$step")
    echo "$out"
    lines+=("- $step ($((SECONDS - start)) s): $(printf '%s' "$out" | paste -sd' ' -)")
done

mkdir -p "$(dirname "$out_file")"
# The topology line is papers/generator.py's, so every results header words it alike.
topology=$(cd papers && python3 -c 'import generator as g; print(g.describe_topology(g.topology()))')
{
    echo "# Deep verification"
    echo
    echo "- command: \`.ci/deep.sh ${*:-}\`"
    echo "- revision: \`$revision\`$([ "$dirty" -gt 0 ] && echo " (with $dirty uncommitted changes)")"
    echo "- rustc: $(rustc --version)"
    echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ) (at the end of the run)"
    echo "- machine: $(nproc) logical cores, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | xargs || echo unknown cpu)"
    echo "- topology: $topology"
    echo "- kernel: $(uname -r)"
    echo "- knobs: CRTC_DIFF_CASES=$CRTC_DIFF_CASES, CRTC_SHUTTLE_ITERS=$CRTC_SHUTTLE_ITERS," \
        "CRTC_SHUTTLE_STORM_ITERS=$CRTC_SHUTTLE_STORM_ITERS, CRTC_LOOM_PREEMPTIONS=$CRTC_LOOM_PREEMPTIONS," \
        "CRTC_SOAK_SECS=$CRTC_SOAK_SECS"
    echo
    printf '%s\n' "${lines[@]}"
} >"$out_file"
echo "deep: wrote $out_file"
