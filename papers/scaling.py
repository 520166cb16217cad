#!/usr/bin/env python3
"""Scaling with lanes and readers on any machine from 2 to 64 cores:
capacity-mode events/s and reader p99 per strategy and lane/reader
configuration, written to papers/results/scaling.md and scaling.json.

Usage: python3 papers/scaling.py [--workload chat|agentx] [--scale S]
       [--repeat N] [--strategies LIST] [--out DIR] [--smoke]

Configurations: L lanes and R readers for L = 1..min(8, cores/2) and
R = 0..cores/2 (at least one lane, and on 2 cores: 1 lane with 0 or 1
reader), so lanes plus readers never exceed the cores (`crtc compare`
refuses more without --oversubscribe). Each configuration is one
`crtc compare --lanes L --readers R --repeat N` run over every row (or the
--strategies given); figures are medians of the N round-robin repeats (3 by
default) with min-max. The speed-up of a configuration is its events/s over
the same row's 1-lane, no-reader events/s. Upstream's row takes its lane
count from --lanes too (its thread pool size). The header records the CPU
topology (sockets, physical cores, threads per core, SMT siblings) through
generator.provenance. A configuration that fails is recorded with its error
and the run goes on, so the script runs unattended.

--smoke (run by .ci/run): 1 lane with 0 and 1 reader (on 2 cores; the grid's
first two cells elsewhere), agentx at scale 0.02, rwlock and global-lock,
3 repeats, built with --features all-strategies (the build the CI compare
step reuses), written to target/scaling-smoke/; it checks that every cell
has its rows and that the topology is recorded, and prints what it checked.
"""
import argparse
import json
import os
import sys
import tempfile
import time

from generator import FEATURES, ROOT, cell, provenance, run, topology

BINARY = os.path.join(ROOT, "target", "release", "crtc")


def describe(args, argv):
    return provenance(
        "scaling.py", argv,
        workload=f"{args.workload} preset, scale {args.scale}",
        repeats=args.repeat,
        strategies=args.strategies or "all rows",
    )


def configurations(cores):
    """(lanes, readers): lanes 1..min(8, cores/2) x readers 0..cores/2."""
    half = max(cores // 2, 1)
    return [(lanes, readers) for lanes in range(1, min(8, half) + 1)
            for readers in range(0, half + 1)]


def measure(args, lanes, readers):
    """Capacity rows of one compare run, {label: row}, or {"error": text}."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [BINARY, "compare", "--workload", args.workload, "--scale", str(args.scale),
               "--lanes", str(lanes), "--readers", str(readers), "--repeat", str(args.repeat),
               "--json", out.name]
        if args.strategies:
            cmd += ["--strategies", args.strategies]
        print("running:", " ".join(cmd), file=sys.stderr)
        try:
            run(cmd)
        except Exception as error:  # recorded; the remaining cells still run
            return {"error": str(error)}
        with open(out.name) as f:
            report = json.load(f)
    rows = {}
    for row in report["rows"]:
        if row["mode"] != "capacity":
            continue
        path = {True: " fast", False: " general"}.get(row["fast_path"], "")
        rows[row["strategy"] + path] = row
    return rows


def speedup(row, first):
    if row and first and row.get("events_per_s") and first.get("events_per_s"):
        return f"{row['events_per_s'] / first['events_per_s']:.2f}×"
    return "–"


def render(meta, results, configs):
    names = [f"{lanes}L{readers}R" for lanes, readers in configs]
    base = results[names[0]]
    labels = [label for label in base if label != "error"]
    out = ["# Scaling with lanes and readers, up to the machine's cores", ""]
    out += [f"- {key}: {value}" for key, value in meta.items()]
    out += ["", "Generated; do not edit. `xLyR` is x lane threads and y reader threads; "
            "events/s in thousands (median, min–max over the repeats); the speed-up is "
            "over the same row's 1-lane, no-reader run. With as many lanes as cores, the "
            "issuing thread is one busy thread more while it enqueues the stream.", ""]
    header = "| configuration | " + " | ".join(labels) + " |"
    rule = "|---|" + "---:|" * len(labels)
    out += ["## Capacity, thousands of events/s (speed-up over 1L0R)", "", header, rule]
    for n in names:
        if "error" in results[n]:
            out.append(f"| {n} | failed: {results[n]['error'][:200]} |")
            continue
        cells = [f"{cell(results[n].get(label), 'events_per_s', 1000)} "
                 f"{speedup(results[n].get(label), base.get(label))}" for label in labels]
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    readers = [n for (_, r), n in zip(configs, names) if r > 0 and "error" not in results[n]]
    if readers:
        out += ["", "## Reader p99 during the run, ns (configurations with readers)", "",
                header, rule]
        for n in readers:
            out.append(f"| {n} | " + " | ".join(cell(results[n].get(label), "read_p99_ns")
                                                for label in labels) + " |")
    return "\n".join(out) + "\n"


def smoke_check(results, configs, meta):
    """Fails unless every cell measured every row and the topology is there."""
    names = [f"{lanes}L{readers}R" for lanes, readers in configs]
    failed = [n for n in names if "error" in results[n] or not results[n]]
    if failed or "topology" not in meta:
        sys.exit(f"scaling --smoke: cells without rows {failed} or no topology in {meta}")
    rows = sorted(results[names[0]])
    print(f"scaling --smoke: {len(names)} configurations ({', '.join(names)}) x "
          f"{len(rows)} rows ({', '.join(rows)}), medians of the repeats; "
          f"topology recorded ({meta['topology']})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="chat", choices=["chat", "agentx"])
    parser.add_argument("--scale", type=float, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strategies", default="")
    parser.add_argument("--out", default=None)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    cores = topology()["logical"] or 1
    configs = configurations(cores)
    features = FEATURES
    if args.smoke:
        args.workload, args.scale, args.strategies = "agentx", 0.02, "rwlock,global-lock"
        configs, features = configs[:2], "all-strategies"
    default_out = os.path.join(ROOT, *(("target", "scaling-smoke") if args.smoke
                                       else ("papers", "results")))
    out_dir = args.out or default_out
    meta = describe(args, sys.argv[1:])
    meta["features"] = features + " (plus crtc-bench's default feature mimalloc: the allocator)"
    run(["cargo", "build", "-q", "--release", "-p", "crtc-bench", "--features", features])
    started = time.monotonic()
    results = {}
    for lanes, readers in configs:
        results[f"{lanes}L{readers}R"] = measure(args, lanes, readers)
        spent = time.monotonic() - started
        left = spent / len(results) * (len(configs) - len(results))
        print(f"scaling: {len(results)}/{len(configs)} configurations in {spent:.0f} s, "
              f"about {left:.0f} s left", file=sys.stderr)
    # Recorded so a first run on a bigger machine shows whether the grid
    # keeps to its budget (under 8 minutes on 16 cores; not yet run there).
    meta["elapsed"] = f"{time.monotonic() - started:.0f} s for {len(configs)} configurations"
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "scaling.json"), "w") as f:
        json.dump({"provenance": meta, "configurations": results}, f, indent=1)
    with open(os.path.join(out_dir, "scaling.md"), "w") as f:
        f.write(render(meta, results, configs))
    print(f"wrote {out_dir}/scaling.md and scaling.json", file=sys.stderr)
    if args.smoke:
        smoke_check(results, configs, meta)


if __name__ == "__main__":
    main()
