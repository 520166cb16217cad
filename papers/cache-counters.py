#!/usr/bin/env python3
"""Hardware cache counters per append and per read, or the record that this
machine has none: written to papers/results/cache-counters.md and .json.

Usage: python3 papers/cache-counters.py [--scale S] [--out DIR]

It first asks `perf stat` for the three counters (cache-misses,
L1-dcache-loads, LLC-loads) on `true`. Where perf is missing or reports any
of them "<not supported>" (a VM that does not pass the PMU through, as the
2-core VM of papers/results is), the file says so and holds no figure: the
papers' prose then names no cache effect as a measured cause.

Where they are supported, each row (every gate's fast row and upstream 1.6.1)
runs `crtc compare --workload chat` twice under `perf stat`: with no reader
(the counts divided by the stream's events: per append, every event counted
as one) and with one reader (the increase over the first run divided by the
reader's lookups: per read). Both are whole-process counts, the stream's
generation and the reference model included, so they bound the tree's share
from above; the subtraction assumes the two runs apply the same stream. This
measuring path has not run on the VM of the committed results (no counters).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from generator import ROOT, provenance, write_results

BINARY = os.path.join(ROOT, "target", "release", "crtc")
EVENTS = ["cache-misses", "L1-dcache-loads", "LLC-loads"]
ROWS = ["rwlock", "seqlock", "epoch-crossbeam", "epoch-seize", "upstream-1.6.1"]


def perf_stat(cmd):
    """`{event: count or None}` for `cmd` under `perf stat -x,` (None when
    the counter is not supported), or None when perf cannot run."""
    try:
        done = subprocess.run(["perf", "stat", "-x,", "-e", ",".join(EVENTS), "--", *cmd],
                              cwd=ROOT, capture_output=True, text=True)
    except OSError:
        return None
    counts = {}
    for line in done.stderr.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2] in EVENTS:
            counts[fields[2]] = int(fields[0]) if fields[0].isdigit() else None
    return counts if len(counts) == len(EVENTS) else None


def compare_row(strategy, scale, readers):
    """(counters, events, lookups) of one `crtc compare` row under perf."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "row.json")
        counts = perf_stat([BINARY, "compare", "--workload", "chat", "--scale", scale,
                            "--strategies", strategy, "--readers", str(readers),
                            "--json", report])
        with open(report) as f:
            row = json.load(f)["rows"][0]
    return counts, row["events"], row.get("lookups") or 0


def measure(scale):
    """Per append and per read counts of every row."""
    results = {}
    for strategy in ROWS:
        writes, events, _ = compare_row(strategy, scale, 0)
        both, _, lookups = compare_row(strategy, scale, 1)
        results[strategy] = {
            "per_append": {e: writes[e] / events for e in EVENTS},
            "per_read": {e: (both[e] - writes[e]) / lookups if lookups else None
                         for e in EVENTS},
        }
    return results


def table(results):
    lines = ["| row | " + " | ".join(f"{e} per append" for e in EVENTS) + " | "
             + " | ".join(f"{e} per read" for e in EVENTS) + " |",
             "|---|" + "---:|" * (2 * len(EVENTS))]
    for strategy, row in results.items():
        cells = [f"{row['per_append'][e]:.1f}" for e in EVENTS]
        cells += ["–" if row["per_read"][e] is None else f"{row['per_read'][e]:.1f}"
                  for e in EVENTS]
        lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="1")
    parser.add_argument("--out", default=os.path.join(ROOT, "papers", "results"))
    args = parser.parse_args()
    meta = provenance("cache-counters.py", sys.argv[1:], counters=", ".join(EVENTS))
    probe = perf_stat(["true"])
    supported = probe is not None and all(v is not None for v in probe.values())
    doc = ["# Hardware cache counters per append and per read", ""]
    doc += [f"- {k}: {v}" for k, v in meta.items()] + [""]
    if supported:
        results = measure(args.scale)
        doc += ["Whole-process counts of `crtc compare --workload chat` (see the generator's "
                "docstring): an upper bound of the tree's share.", ""] + table(results)
    else:
        results = None
        missing = ("perf cannot run" if probe is None else "`<not supported>` for "
                   + ", ".join(e for e, v in probe.items() if v is None))
        doc += [f"Not measured: `perf stat -e {','.join(EVENTS)} true` on this machine "
                f"reports {missing}. No figure in papers/ names a cache effect as a measured "
                "cause."]
    write_results(args.out, "cache-counters", {**meta, "supported": supported}, results,
                  "\n".join(doc) + "\n")
    print("wrote", os.path.join(args.out, "cache-counters.md"), file=sys.stderr)


if __name__ == "__main__":
    main()
