#!/usr/bin/env python3
"""find_matches beside the writer at the offered rates issue 43 names, every
gate paired with upstream 1.6.1 within each repeat; written to
papers/results/matched-reads.md and .json.

Usage: python3 papers/matched-reads.py [--trace PATH] [--repeat N]
       [--window-s W] [--out DIR]

For each (workload, rate) of RATES it runs issue 43's Done-when command,
`crtc compare --mode keepup --rate R` at the preset's default scale (or on
the Mooncake trace), with `--window-s W --repeat N` (default 2 s and 15),
built with --features all-strategies,upstream and the default mimalloc.
From its JSON it takes, for every gate's fast row, compare's
`keep-up read p50/p99 vs upstream-1.6.1` ratios: each repeat's read latency
over upstream's in the same repeat, their median and min-max. A row that
did not keep up (backlog at the window's end above 1% of its events) is
marked, and so is upstream's: at a rate upstream cannot sustain the ratio
compares a queueing reader. Verdicts use issue 43's bounds (READ_BOUNDS in
generator.py): the median of p50 and of p99 at most 0.8× upstream's for
RwLock and seqlock, 1.0× for the epoch gates. `keepup.py` draws the curves
on chat alone; this file is the three workloads at their one rate each.
"""
import argparse
import json
import os
import sys
import tempfile

from generator import (DEFAULT_TRACE, FEATURES, READ_BOUNDS, ROOT, heading, kept_up, provenance,
                       run, span, trace_field, write_results)

BINARY = os.path.join(ROOT, "target", "release", "crtc")
UPSTREAM = "upstream-1.6.1"
# (workload, offered events/s): issue 43's rates, ones upstream keeps up with.
RATES = [("chat", 200_000), ("agentx", 300_000), ("trace", 100_000)]


def judge(report):
    """Every gate's paired read ratios from one compare JSON `report`:
    [{"gate", "p50": [median, lo, hi], "p99": [...], "repeats", "kept_up",
    "bound", "verdict"}], plus whether upstream kept up."""
    rows = {(r["strategy"], r["fast_path"]): r for r in report["rows"] if r["mode"] == "keepup"}
    ratios = {r["name"]: r for r in report["ratios"]}
    upstream = rows.get((UPSTREAM, None))
    judged = []
    for gate, bound in READ_BOUNDS.items():
        row = rows.get((gate, True))
        pair = [ratios.get(f"{gate} fast keep-up read {q} vs {UPSTREAM}") for q in ("p50", "p99")]
        if row is None or None in pair:
            continue
        p50, p99 = ([p["median"], *p["range"]] for p in pair)
        verdict = "met" if max(p50[0], p99[0]) <= bound else "missed"
        judged.append({"gate": gate, "p50": p50, "p99": p99, "repeats": pair[0]["repeats"],
                       "kept_up": kept_up(row), "bound": bound, "verdict": verdict})
    return judged, bool(upstream and kept_up(upstream))


def measure(name, rate, args):
    source = ["--trace", args.trace] if name == "trace" else ["--workload", name]
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run([BINARY, "compare", *source, "--mode", "keepup", "--rate", str(rate),
             "--window-s", str(args.window_s), "--repeat", str(args.repeat), "--json", out.name])
        with open(out.name) as f:
            report = json.load(f)
    gates, upstream_kept_up = judge(report)
    return {"workload": name, "rate": rate, "upstream_kept_up": upstream_kept_up, "gates": gates}


def markdown(meta, results):
    lines = heading(
        "find_matches beside the writer at issue 43's offered rates, paired with upstream "
        "1.6.1", meta,
        "Each cell is the median over the repeats of the gate's read latency during the "
        "keep-up window over upstream's in the same repeat (min–max). Bounds: 0.8× for RwLock "
        "and seqlock, 1.0× for the epoch gates, on both medians.")
    lines += [
              "| workload | offered events/s | gate | read p50 ÷ upstream | read p99 ÷ upstream "
              "| repeats | kept up | bound | verdict |",
              "|---|---:|---|---:|---:|---:|---|---:|---|"]
    for result in results:
        for g in result["gates"]:
            ratios = f"{span(g['p50'], unit='×')} | {span(g['p99'], unit='×')}"
            lines.append(f"| {result['workload']} | {result['rate']:,} | {g['gate']} | {ratios} | "
                         f"{g['repeats']} | {'yes' if g['kept_up'] else 'no'} | {g['bound']}× | "
                         f"{g['verdict']} |")
    lines.append("")
    lost = [f"{r['workload']} at {r['rate']:,}" for r in results if not r["upstream_kept_up"]]
    lines.append("Upstream fell behind (its ratios then compare a queueing reader): "
                 + (", ".join(lost) if lost else "at none of these rates") + ".")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--window-s", type=float, default=2)
    parser.add_argument("--out", default=os.path.join(ROOT, "papers", "results"))
    args = parser.parse_args()
    pairs = [(w, r) for w, r in RATES if w != "trace" or os.path.exists(args.trace)]
    if len(pairs) < len(RATES):
        print(f"matched-reads.py: no trace at {args.trace}; skipped", file=sys.stderr)
    workloads = ",".join(w for w, _ in pairs)
    meta = provenance("matched-reads.py", sys.argv[1:], workloads=workloads,
                      rates=", ".join(f"{w} {r:,}/s" for w, r in pairs),
                      window=f"{args.window_s} s per row", repeats=args.repeat,
                      **trace_field(workloads, args.trace))
    run(["cargo", "build", "-q", "--release", "-p", "crtc-bench", "--features", FEATURES])
    results = [measure(name, rate, args) for name, rate in pairs]
    write_results(args.out, "matched-reads", meta, results, markdown(meta, results) + "\n")
    print(f"wrote {args.out}/matched-reads.md and matched-reads.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
