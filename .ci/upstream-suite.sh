#!/usr/bin/env bash
# upstream-suite step: NVIDIA Dynamo's own indexer suite (dynamo-kv-router
# 1.6.1, src/indexer/tests.rs, plus the CRTC tests that go through the
# thread pool) run on crtc, one variant per gate, through upstream's
# ThreadPoolIndexer and our SyncIndexer backend (upstream-suite/).
#
# Nothing of upstream is committed: the registry's copy of the crate (cargo
# fetches it for crtc-bench's `upstream` feature) is copied to
# target/upstream-suite/crate/ at test time and patched there by
# upstream-suite/patch.py, which adds our backend module, the path
# dependency on crtc (every gate) and the variants. One build serves every
# gate; the build directory target/upstream-suite/target is kept between
# runs.
#
# Prints one line per gate, "upstream-suite <gate>: N passed, M failed",
# and the same for upstream's own CRTC variant of the templates (the
# reference). A failure is accepted only if README.md lists the test (its
# name without the variant) under "Differences from upstream's suite"; any
# other failure fails the step. Needs rustc >= 1.88 (the crate is edition 2024); with an older
# toolchain it prints "upstream-suite: skipped (...)" and succeeds.
#
# Time on the 2-core CI machine (shared with other builds, load average 5):
# 3 min 48 s from no target/upstream-suite; when only our module changed,
# 40-60 s; with nothing changed, 8 s.
#
# Usage: .ci/upstream-suite.sh            (the test output: target/upstream-suite/test.log)
set -euo pipefail
cd "$(dirname "$0")/.."

gates=(rwlock seqlock epoch seize)
work=target/upstream-suite
dest=$work/crate/dynamo-kv-router-1.6.1
log=$work/test.log

rustc_minor=$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
if [ "$rustc_minor" -lt 88 ]; then
    echo "upstream-suite: skipped (rustc $(rustc --version | cut -d' ' -f2) < 1.88)"
    exit 0
fi

registry=$(cargo metadata --format-version 1 --features crtc-bench/upstream |
    python3 -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "dynamo-kv-router" and p["version"] == "1.6.1":
        print(p["manifest_path"].rsplit("/", 1)[0])')
[ -n "$registry" ] || { echo "upstream-suite: dynamo-kv-router 1.6.1 not in cargo metadata"; exit 1; }

mkdir -p "$work"
python3 upstream-suite/patch.py "$registry" . "$dest"
# A test outside the suite (scheduling::policy_config) include_str!s a file
# of the dynamo repository two levels above the crate, which the published
# crate does not carry; an empty stand-in lets the crate compile.
# Created once: touching it would rebuild the crate.
stand_in=$work/examples/router/policy-class-queues.yaml
[ -e "$stand_in" ] || { mkdir -p "${stand_in%/*}" && : >"$stand_in"; }

export CARGO_TARGET_DIR=$work/target
cargo test --quiet --manifest-path "$dest/Cargo.toml" --lib --features metrics --no-run
set +e
cargo test --manifest-path "$dest/Cargo.toml" --lib --features metrics -- \
    indexer::tests:: indexer::delegate_tests:: ::crtc_pool_ >"$log" 2>&1
status=$?
set -e

# The test names README.md lists as deliberate differences: the list items
# of its section "Differences from upstream's suite" that open with a
# backticked name.
accepted=$(sed -n '/^### Differences from upstream.s suite/,/^##/p' README.md |
    sed -nE 's/^- `([a-z_:0-9]+)`.*/\1/p')

results=$(grep -E '^test .* \.\.\. (ok|FAILED)$' "$log" || true)
unexpected=()
report() {
    local label=$1 pattern=$2
    local lines passed failed
    lines=$(grep -E "$pattern" <<<"$results" || true)
    passed=$(grep -c ' ok$' <<<"$lines" || true)
    failed=$(grep -c ' FAILED$' <<<"$lines" || true)
    echo "upstream-suite $label: $passed passed, $failed failed"
    while read -r name; do
        [ -n "$name" ] || continue
        # The test's name without its variant: the rstest case or the
        # per-gate module.
        local base
        base=$(sed -E 's/::variant_[0-9]+_+[a-z_]+_*$//; s/crtc_pool_[a-z]+::/crtc_pool::/' <<<"$name")
        if ! grep -qxF "$base" <<<"$accepted"; then
            unexpected+=("$name")
        fi
    done < <(grep ' FAILED$' <<<"$lines" | sed -E 's/^test (.*) \.\.\. FAILED$/\1/')
}
for gate in "${gates[@]}"; do
    report "$gate" "(crtc_${gate}_* \\.\\.\\.|crtc_pool_${gate}::)"
done
report "upstream concurrent_compressed, templates only (reference)" "concurrent_compressed_* \\.\\.\\."

if [ ${#unexpected[@]} -gt 0 ]; then
    echo "upstream-suite: failures not listed in README.md's differences (log: $log):"
    printf '  %s\n' "${unexpected[@]}"
    exit 1
fi
if [ "$status" -ne 0 ] && ! grep -q FAILED <<<"$results"; then
    echo "upstream-suite: cargo test failed without a failing test (log: $log)"
    tail -n 20 "$log"
    exit 1
fi
