# Shared by .ci/loom.sh and .ci/shuttle.sh (sourced, not run): choosing which
# tests of a checker suite run, building and running its test binaries,
# failing when a binary ran nothing, and reading the mutant verdicts back out
# of the log for the summary line.

# choose_filter SCRIPT WHAT MODELS_WORD MUTANT_TEST...: sets the array
# `filter` to the libtest arguments for WHAT (all, MODELS_WORD = everything but
# the mutant tests, or mutants = only them) and `runs_mutants` to 1 when WHAT
# selects the mutant tests (all, mutants), else 0; anything else is a usage
# error.
choose_filter() {
    local script=$1 what=$2 models_word=$3 mutant
    shift 3
    filter=()
    runs_mutants=1
    case "$what" in
    all) ;;
    "$models_word")
        runs_mutants=0
        for mutant in "$@"; do filter+=(--skip "$mutant"); done
        ;;
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

# Test binaries that hold no negative controls, exempt from suite_ran's
# mutant check: empty here; a script that sources this file and lists such a
# suite adds it after sourcing.
suites_without_mutants=()

# run_suites LOG TEST...: builds the test binaries once with every strategy
# (the build time lands in `build`), then runs each with --nocapture and
# `filter`, appending its output to LOG (the build's and each binary's own
# output go to LOG.suite first). A failed build (a listed suite renamed or
# removed) or a failing test fails the script, and so does a binary that
# ran nothing (suite_ran).
run_suites() {
    local log=$1 test args=() out="$1.suite"
    shift
    for test in "$@"; do args+=(--test "$test"); done
    local start=$SECONDS
    if ! cargo test "${suite_packages[@]}" --release --features all-strategies "${args[@]}" --no-run >"$out" 2>&1; then
        grep -v '^ *Compiling ' "$out" | head -n 30 >&2
        echo "${0##*/}: FAILED: building the suites $* failed (a suite renamed or removed: cargo's error above)" >&2
        exit 1
    fi
    tail -n 3 "$out"
    build=$((SECONDS - start))
    for test in "$@"; do
        cargo test "${suite_packages[@]}" --release --features all-strategies --test "$test" -- \
            --nocapture "${filter[@]}" 2>&1 | tee "$out"
        cat "$out" >>"$log"
        suite_ran "$test" "$out" || exit 1
    done
}

# suite_ran TEST OUT: whether test binary TEST, whose output is in OUT, ran
# something. Returns 1 with a message naming the suite when libtest's last
# `test result:` line in OUT counts no passed test (a suite compiled out, a
# renamed test, a filter that matches nothing), or when `runs_mutants` is 1,
# TEST is not in `suites_without_mutants`, and OUT holds no mutant a child
# run caught (a line "mutant <name> [<gate>]: caught by ...") and no
# "<checker> mutants <gate>: skipped" line (the script's own knob skipped
# them).
suite_ran() {
    local test=$1 out=$2 passed caught
    # The last result line is the binary's own: a test that runs alone in a
    # child process (models::alone) forwards the child's line before it.
    passed=$(sed -nE 's/^test result: [a-zA-Z]+\. ([0-9]+) passed;.*/\1/p' "$out" | tail -n 1)
    passed=${passed:-0}
    if [ "$passed" -eq 0 ]; then
        echo "${0##*/}: FAILED: suite $test ran no test (0 passed; filter: ${filter[*]:-none}):" \
            "compiled out, renamed, or filtered away" >&2
        return 1
    fi
    [ "$runs_mutants" = 1 ] || return 0
    [[ " ${suites_without_mutants[*]} " == *" $test "* ]] && return 0
    grep -qE '[a-z]+ mutants [a-z]+: skipped' "$out" && return 0
    caught=$(grep -oE 'mutant [A-Za-z]+ \[[a-z]+\]: caught by ' "$out" | sort -u | grep -c . || true)
    if [ "$caught" -eq 0 ]; then
        echo "${0##*/}: FAILED: suite $test ran $passed tests but no mutant was caught in it" \
            "(no \"mutant <name> [<gate>]: caught by\" line; filter: ${filter[*]:-none})" >&2
        return 1
    fi
}

# catchers LOG GATE: "mutant→model:property ..." for every "mutant M [GATE]:
# caught by MODEL on PROPERTY" line in LOG, space-separated (empty when there
# is none).
catchers() {
    grep -oE "mutant [A-Za-z]+ \[$2\]: caught by [A-Za-z0-9_]+ on [a-z-]+" "$1" |
        sed -E 's/mutant ([A-Za-z]+) \[[a-z]+\]: caught by ([A-Za-z0-9_]+) on ([a-z-]+)/\1→\2:\3/' | paste -sd' ' - || true
}
