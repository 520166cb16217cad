#!/usr/bin/env bash
# A/B of two builds' reader latency under a decode storm: interleaved
# `mixed_1r1w` runs of two criterion bench binaries of one gate.
#
# Usage: N=5 GATE=seqlock papers/ab-mixed.sh BASE_BINARY CHANGE_BINARY
#   BASE_BINARY, CHANGE_BINARY: the `mixed_1r1w` bench binaries of the two
#   revisions (`cargo bench -p crtc-bench --bench mixed_1r1w --features
#   all-strategies --no-run` prints its path; copy it out before building the
#   other revision).
#   N pairs (default 5): base first in odd pairs, change first in even ones,
#   so neither always runs second. Each run is
#     <binary> --bench "mixed_1r1w/$GATE/" --warm-up-time 1 --measurement-time 3
#   (the trailing slash keeps out the fed pair, mixed_1r1w/$GATE-fed/...).
#   OUT (default a fresh directory under target/ab-mixed/) keeps each run's
#   output and criterion's files.
# Prints one row per run (ns): alone p50/p99, storm p50/p99/p99.9, storm/alone
# p99 and the writer's rate in M appends/s, then per variant the median and
# range of each. Run it on a quiet machine: the two threads take both cores.
set -euo pipefail
[ $# -eq 2 ] || { sed -n '4,18p' "$0"; exit 2; }
N=${N:-5}
GATE=${GATE:-seqlock}
root=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$root/target/ab-mixed/$GATE-$(date -u +%Y%m%dT%H%M%S)}
declare -A binary=([base]=$(realpath "$1") [change]=$(realpath "$2"))
mkdir -p "$OUT/criterion-base" "$OUT/criterion-change"
run() { # variant index
    # criterion keeps its reports under the working directory: one per variant.
    (cd "$OUT/criterion-$1" &&
        "${binary[$1]}" --bench "mixed_1r1w/$GATE/" --warm-up-time 1 --measurement-time 3) \
        >"$OUT/$1-$2.log" 2>&1
    echo "ran $1 #$2" >&2
}
for i in $(seq 1 "$N"); do
    if [ $((i % 2)) -eq 1 ]; then run base "$i"; run change "$i"; else run change "$i"; run base "$i"; fi
done
python3 - "$OUT" "$N" "$GATE" <<'PY'
import re, statistics, sys
out, n, gate = sys.argv[1], int(sys.argv[2]), re.escape(sys.argv[3])
hist = re.compile(rf"mixed_1r1w/{gate}/reader/(no_writer|decode_storm): \d+ reads, "
                  r"p50 (\d+) ns, p99 (\d+) ns, p99\.9 (\d+) ns")
rate = re.compile(rf"mixed_1r1w/{gate}: .*\(([0-9.]+) M/s")
cols = ["alone p50", "alone p99", "storm p50", "storm p99", "storm p99.9", "p99 storm/alone",
        "writer M/s"]
rows = {"base": [], "change": []}
for variant, found in rows.items():
    for i in range(1, n + 1):
        text = open(f"{out}/{variant}-{i}.log").read()
        h = {m[0]: [int(x) for x in m[1:]] for m in hist.findall(text)}
        w = rate.search(text)
        if "no_writer" not in h or "decode_storm" not in h:
            sys.exit(f"{variant} #{i}: no histogram lines (see {out}/{variant}-{i}.log)")
        a, s = h["no_writer"], h["decode_storm"]
        found.append([a[0], a[1], s[0], s[1], s[2], s[1] / a[1], float(w[1]) if w else float("nan")])
fmt = lambda c, v: f"{v:.2f}" if c in ("p99 storm/alone", "writer M/s") else f"{v:.0f}"
print("variant  run  " + "  ".join(f"{c:>15}" for c in cols))
for variant, rs in rows.items():
    for i, r in enumerate(rs, 1):
        print(f"{variant:<7}  {i:>3}  " + "  ".join(f"{fmt(c, v):>15}" for c, v in zip(cols, r)))
print("\nvariant  stat    " + "  ".join(f"{c:>15}" for c in cols))
for variant, rs in rows.items():
    med = [statistics.median(col) for col in zip(*rs)]
    print(f"{variant:<7}  median  " + "  ".join(f"{fmt(c, v):>15}" for c, v in zip(cols, med)))
    rng = [f"{fmt(c, min(col))}-{fmt(c, max(col))}" for c, col in zip(cols, zip(*rs))]
    print(f"{variant:<7}  range   " + "  ".join(f"{v:>15}" for v in rng))
print(f"\nruns: {out}")
PY
