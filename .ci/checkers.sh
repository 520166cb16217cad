# Shared by .ci/loom.sh and .ci/shuttle.sh (sourced, not run): choosing which
# tests of a checker suite run, building and running its test binaries, and
# reading the mutant verdicts back out of the log for the summary line.

# choose_filter SCRIPT WHAT MODELS_WORD MUTANT_TEST...: sets the array
# `filter` to the libtest arguments for WHAT (all, MODELS_WORD = everything but
# the mutant tests, or mutants = only them); anything else is a usage error.
choose_filter() {
    local script=$1 what=$2 models_word=$3 mutant
    shift 3
    filter=()
    case "$what" in
    all) ;;
    "$models_word") for mutant in "$@"; do filter+=(--skip "$mutant"); done ;;
    mutants) filter=("$@") ;;
    *)
        echo "usage: $script [all|$models_word|mutants]" >&2
        exit 2
        ;;
    esac
}

# The packages whose test binaries hold checker suites: the verification
# crate, and each gate crate outside crtc-strategies (gates/).
suite_packages=(-p crtc-verification -p crtc-mutex-gate)

# run_suites LOG TEST...: builds the test binaries once with every strategy
# (the build time lands in `build`), then runs each with --nocapture and
# `filter`, appending its output to LOG. A failing test fails the script.
run_suites() {
    local log=$1 test args=()
    shift
    for test in "$@"; do args+=(--test "$test"); done
    local start=$SECONDS
    cargo test "${suite_packages[@]}" --release --features all-strategies "${args[@]}" --no-run 2>&1 | tail -n 3
    build=$((SECONDS - start))
    for test in "$@"; do
        cargo test "${suite_packages[@]}" --release --features all-strategies --test "$test" -- \
            --nocapture "${filter[@]}" 2>&1 | tee -a "$log"
    done
}

# catchers LOG GATE: "mutant→model:property ..." for every "mutant M [GATE]:
# caught by MODEL on PROPERTY" line in LOG, space-separated (empty when there
# is none).
catchers() {
    grep -oE "mutant [A-Za-z]+ \[$2\]: caught by [A-Za-z0-9_]+ on [a-z-]+" "$1" |
        sed -E 's/mutant ([A-Za-z]+) \[[a-z]+\]: caught by ([A-Za-z0-9_]+) on ([a-z-]+)/\1→\2:\3/' | paste -sd' ' - || true
}
