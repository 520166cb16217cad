#!/usr/bin/env python3
"""Where a find_matches's time goes, on each side: every gate's lookup beside
upstream 1.6.1's, with each side's result map timed alone; written to
papers/results/lookup-split.md and .json.

Usage: python3 papers/lookup-split.py [--workloads chat,agentx,trace]
       [--trace PATH] [--rounds N] [--out DIR]

For each workload and gate it runs the example `lookup-split` (crtc-bench,
built with --features all-strategies,upstream and the default mimalloc; its
docs give the method): both trees built serially from the workload's writes
and unswept, then `--rounds` interleaved rounds, the order rotating, of four
passes over the lookups: our lookup, upstream's, our result map rebuilt
alone from the same (rank, score) pairs, and upstream's. A map pass is a
floor for the map inside a lookup, so lookup less map is an upper bound on
the walk. The table gives the medians over rounds, their min-max, and the
per-round ratios' medians. Wall-clock times on a shared machine: one run's
medians can differ from another's by more than a gate's difference, which
is why each ratio is paired within a round, and why the gates run one after
another rather than interleaved (each is its own process and tree).
"""
import argparse
import os
import re
import subprocess
import sys

from generator import (DEFAULT_TRACE, FEATURES, ROOT, heading, provenance, run, sources, span,
                       trace_field, write_results)

EXAMPLE = os.path.join(ROOT, "target", "release", "examples", "lookup-split")
GATES = ["rwlock", "seqlock", "epoch-crossbeam", "epoch-seize"]
STAGES = ["ours", "upstream", "ours-map", "upstream-map"]
RATIOS = {
    "ours / upstream": "lookup",
    "ours-map / upstream": "ours_map",
    "upstream-map / upstream": "upstream_map",
    "walk: (ours - ours-map) / (upstream - upstream-map)": "walk",
}
# A figure as Rust prints an f64 (a walk ratio can be negative, inf or NaN
# when a round's map pass outran its lookup).
NUMBER = r"(-?[\d.]+|-?inf|NaN)"
STAGE = re.compile(rf"^\s+(\S+)\s+{NUMBER} ns/lookup \({NUMBER}-{NUMBER}\)$")
RATIO = re.compile(rf"^\s+(.+): {NUMBER} \({NUMBER}-{NUMBER}\), paired per round$")
HEADER = re.compile(r"\((\d+) lookups\)")


def parse(output):
    """The example's report as {"lookups", "stages": {name: [mid, lo, hi]},
    "ratios": {key: [mid, lo, hi]}}; ValueError if a line is missing."""
    report = {"stages": {}, "ratios": {}}
    for line in output.splitlines():
        if (match := HEADER.search(line)) and "lookups" not in report:
            report["lookups"] = int(match[1])
        elif match := STAGE.match(line):
            report["stages"][match[1]] = [float(match[i]) for i in (2, 3, 4)]
        elif (match := RATIO.match(line)) and match[1] in RATIOS:
            report["ratios"][RATIOS[match[1]]] = [float(match[i]) for i in (2, 3, 4)]
    missing = [s for s in STAGES if s not in report["stages"]]
    missing += [k for k in RATIOS.values() if k not in report["ratios"]]
    if missing or "lookups" not in report:
        raise ValueError(f"lookup-split printed no {missing or 'lookup count'}:\n{output}")
    return report


def measure(name, source, rounds):
    rows = []
    for gate in GATES:
        try:
            output = run([EXAMPLE, gate, source, str(rounds)])
        except subprocess.CalledProcessError as e:
            raise ValueError(f"lookup-split {gate} {name}: {e.stderr.strip()}") from e
        rows.append({"gate": gate, **parse(output)})
    return {"workload": name, "lookups": rows[0]["lookups"], "rows": rows}


def markdown(meta, results):
    lines = heading(
        "Where a find_matches's time goes: each gate's lookup and result map beside "
        "upstream 1.6.1's", meta,
        "Nanoseconds per lookup, a mean over the workload's lookups, median over rounds "
        "(min–max); ratios are medians of the per-round ratios (min–max). `map` is the result "
        "map rebuilt alone, a floor for its cost inside a lookup; `walk` is lookup less map, "
        "ours over upstream's. Not compare's p50: a mean over all lookups, on trees built "
        "serially and unswept.")
    for result in results:
        lines += [f"## {result['workload']} ({result['lookups']:,} lookups)", "",
                  "| gate | ours ns | upstream ns | our map ns | upstream's map ns "
                  "| lookup ratio | our map / upstream | upstream's map / upstream "
                  "| walk ratio |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for row in result["rows"]:
            stages = [span(row["stages"][s], "{:.0f}") for s in STAGES]
            ratios = [span(row["ratios"][k], unit="×") for k in RATIOS.values()]
            lines.append(f"| {row['gate']} | " + " | ".join(stages + ratios) + " |")
        lines.append("")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="chat,agentx,trace")
    parser.add_argument("--trace", default=DEFAULT_TRACE)
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--out", default=os.path.join(ROOT, "papers", "results"))
    args = parser.parse_args()
    meta = provenance("lookup-split.py", sys.argv[1:], workloads=args.workloads,
                      rounds=args.rounds, **trace_field(args.workloads, args.trace))
    run(["cargo", "build", "--release", "-q", "-p", "crtc-bench", "--features", FEATURES,
         "--example", "lookup-split"])
    results = [measure(name, source, args.rounds)
               for name, source in sources("lookup-split.py", args.workloads, args.trace)]
    write_results(args.out, "lookup-split", meta, results, markdown(meta, results) + "\n")
    print(f"wrote {args.out}/lookup-split.md and lookup-split.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
