#!/usr/bin/env bash
# Regenerates every table and figure under papers/results, and the decision
# page papers/README.md, from the checked-out revision, in one command (about
# two hours on 2 cores at fce0b6c: 55 minutes of build and measurement, the
# Mooncake sweep's 7 among them, then 54 of deep verification, 36 of them
# loom at bound 3, as verification.md's step times say and the run's step
# stamps showed [derived: verification.md @ fce0b6c]; the
# Mooncake trace is read from ../shared/traces when present, and skipped with
# a note when not):
#
#   papers/regenerate.sh
#
# Every generator writes into target/papers-scratch/results first (the path
# its files then name) and the results are copied over papers/results only at
# the end, so each file records the revision it ran at with a clean tree (a
# generator that ran after another had written into papers/results would
# otherwise see tracked files modified and mark its output "(with uncommitted
# changes)"). The tree must be clean when this starts, and it refuses to mix
# revisions: after the last step every file in the scratch directory must
# record the revision read at the start (papers/same-revision.py names any
# file that does not), HEAD must not have moved and the tree must still be
# clean, or nothing is copied.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "regenerate: the tree has uncommitted changes; commit or stash them first" >&2
    exit 2
fi
revision=$(git rev-parse HEAD)
scratch=target/papers-scratch
rm -rf "$scratch"
mkdir -p "$scratch/results/system-malloc"

step() {
    echo "== $1 ($(date -u +%H:%M:%S))"
}

step "build (mimalloc, the default allocator, and the system allocator)"
cargo build --release --quiet -p crtc-bench --features all-strategies,upstream
CARGO_TARGET_DIR=target/sysmalloc cargo build --release --quiet -p crtc-bench \
    --no-default-features --features all-strategies,upstream

step "crtc compare --paper (mimalloc)"
# 15 repeats: one repeat of a row drains in about 0.03-0.05 s (trace; the
# global-lock row 0.13) to 0.16-0.78 s (agentx, upstream's 0.78 and the
# global-lock row's 0.67 among them), each row's JSON elapsed_s (the 15
# repeats' total) divided by 15 [derived: mooncake.md @ fce0b6c]
# [derived: agentx.md @ fce0b6c], and on a shared VM one repeat's lane CPU
# ratio to upstream can differ from another's by 1.69x to 3.40x (targets.md,
# each lane CPU row's max/min of the paired ratios) [derived: targets.md @ fce0b6c];
# targets.md judges the median of the 15 paired ratios, and runs the
# global-lock row once more per workload with no reader (its capacity when no
# reader contends for the lock), shown beside its verdict.
./target/release/crtc compare --paper "$scratch/results" --scale 4 --repeat 15
step "crtc compare --sweep (upstream's trace expansion and windows: mooncake-sweep.md|json|svg)"
# Upstream's published configuration (128 workers, hash space x20, length x4,
# caches of upstream's default --num-gpu-blocks 16384), six windows from
# 24 s down to 1 s, six rows each: every row runs for at least 2 s (a row
# that falls behind runs for the corpus at its own capacity, about 4 s or
# more on 2 cores), and the short windows outrun both a gate and upstream,
# the windows whose paired ratios judge capacity. About 7 minutes with the
# corpus build (its corpus line reports its size and build time). Skipped,
# like the paper's trace, when the trace is absent.
trace=../shared/traces/mooncake_synthetic.jsonl
if [ -f "$trace" ]; then
    ./target/release/crtc compare --paper "$scratch/results" --trace "$trace" \
        -n 128 --trace-duplication-factor 20 --trace-length-factor 4 --capacity 16384 \
        --sweep --sweep-min-ms 1000 --sweep-max-ms 24000 --sweep-steps 6
fi
step "crtc compare --paper (system allocator)"
./target/sysmalloc/release/crtc compare --paper "$scratch/results/system-malloc" --scale 4 --repeat 3
step "criterion groups (papers/bench-export.py)"
python3 papers/bench-export.py --repeat 5 --out "$scratch/results"
step "keep-up curves (papers/keepup.py)"
python3 papers/keepup.py --out "$scratch/results"
step "find_matches beside the writer at issue 43's matched rates, paired within each repeat (papers/matched-reads.py)"
# chat at 200,000 events/s, agentx at 300,000, the trace at 100,000
# [defined in papers/matched-reads.py]; 15 repeats of 2 s windows each:
# about two and a half minutes.
python3 papers/matched-reads.py --out "$scratch/results"
step "scaling (papers/scaling.py)"
python3 papers/scaling.py --out "$scratch/results"
step "instructions per event under callgrind (papers/instructions.py; skipped without valgrind)"
python3 papers/instructions.py --out "$scratch/results"
step "instructions per find_matches, every gate beside upstream (papers/profile-find-matches.py; skipped without valgrind)"
python3 papers/profile-find-matches.py --out "$scratch/results"
step "a find_matches's time split into walk and result map, every gate beside upstream (papers/lookup-split.py)"
# 31 interleaved rounds per gate and workload (chat, agentx, the trace): about half a minute.
python3 papers/lookup-split.py --out "$scratch/results"
step "lane CPU by kind of work on the trace (papers/profile-mooncake.py; skipped without perf)"
python3 papers/profile-mooncake.py --out "$scratch/results"
step "bytes per membership against the design's floor (papers/memory-floor.py)"
python3 papers/memory-floor.py --out "$scratch/results"
step "code size (papers/code-size.py)"
python3 papers/code-size.py "$scratch/results/code-size.md"
step "hardware cache counters per read and per append (papers/cache-counters.py)"
python3 papers/cache-counters.py --out "$scratch/results"
step "deep verification (.ci/deep.sh: verification.md)"
# Knobs sized so the whole regeneration fits one working session on 2 cores:
# proptest at 2000 cases per gate, 60 s of soak per gate, 4000 shuttle
# schedules per scheduler and seed (8 times CI's, a quarter of deep.sh's
# default: since c56b97e the scenarios run over the grace reclaimer with
# sweeps, Cleared and remove_worker, so each schedule does more), loom at
# preemption bound 3 (one above CI's) for every model and mutant, miri at
# .ci/miri.sh's defaults. verification.md names the knobs and each step's
# time; deep.sh's own defaults take hours.
CRTC_VERIFICATION_OUT="$scratch/results/verification.md" \
    CRTC_DIFF_CASES=2000 CRTC_SOAK_SECS=60 \
    CRTC_SHUTTLE_ITERS=4000 CRTC_SHUTTLE_STORM_ITERS=4000 CRTC_LOOM_PREEMPTIONS=3 \
    .ci/deep.sh proptest shuttle loom soak miri

step "one revision, clean tree"
if [ "$(git rev-parse HEAD)" != "$revision" ]; then
    echo "regenerate: HEAD moved from $revision during the run; nothing copied" >&2
    exit 1
fi
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
    echo "regenerate: a step left tracked files modified; nothing copied:" >&2
    git status --short --untracked-files=no >&2
    exit 1
fi
python3 papers/same-revision.py "$scratch/results" "$revision"

step "copy into papers/results"
cp -r "$scratch/results/." papers/results/
# A file this run did not write (a step since removed, a skipped trace) would
# keep an older revision beside the new ones.
python3 papers/same-revision.py papers/results "$revision"
step "the decision page (papers/decision.py: papers/README.md)"
python3 papers/decision.py
git status --short papers/results papers/README.md
# The prose's [results: FILE @ REV] tags now cite an older revision than the
# results and fail papers/check_figures.py until the prose is re-read.
echo "regenerate: now run python3 papers/refresh.py --old-rev <the revision the prose cites> --write;" \
    "it refreshes the cited figures and lists the ones to re-read by hand"
