#!/usr/bin/env python3
"""Scaling with lanes and readers up to the machine's cores: capacity-mode
events/s per strategy and lane/reader configuration, written to
papers/results/scaling.md and scaling.json.

Usage: python3 papers/scaling.py [--workload chat|agentx] [--scale S]
       [--repeat N] [--out DIR]

Configurations: L lanes and no reader for L = 1..cores, and L lanes with one
reader for L = 1..cores-1, so lanes plus readers never exceed the cores
(`crtc compare` refuses more without --oversubscribe). Each configuration is
one `crtc compare --lanes L --readers R --repeat N` run (built with
--features all-strategies,upstream and the default allocator, mimalloc) over
every row; figures are medians of the N round-robin repeats with min-max.
The speed-up of a configuration is its events/s over the same row's 1-lane,
no-reader events/s. Upstream's row takes its lane count from --lanes too (its
thread pool size). Nothing beyond the machine's cores is measured or
extrapolated here. The revision and the tree's state are read before
anything is written.
"""
import argparse
import json
import os
import sys
import tempfile

from generator import FEATURES, ROOT, cell, provenance, run

BINARY = os.path.join(ROOT, "target", "release", "crtc")


def describe(args, argv):
    return provenance(
        "scaling.py", argv,
        workload=f"{args.workload} preset, scale {args.scale}",
        repeats=args.repeat,
    )


def configurations(cores):
    """(lanes, readers) pairs with lanes + readers <= cores."""
    configs = [(lanes, 0) for lanes in range(1, cores + 1)]
    configs += [(lanes, 1) for lanes in range(1, cores)]
    return configs


def measure(args, lanes, readers):
    """Capacity rows of one compare run: {label: row}."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [BINARY, "compare", "--workload", args.workload, "--scale", str(args.scale),
               "--lanes", str(lanes), "--readers", str(readers), "--repeat", str(args.repeat),
               "--json", out.name]
        print("running:", " ".join(cmd), file=sys.stderr)
        run(cmd)
        with open(out.name) as f:
            report = json.load(f)
    rows = {}
    for row in report["rows"]:
        if row["mode"] != "capacity":
            continue
        path = {True: " fast", False: " general"}.get(row["fast_path"], "")
        rows[row["strategy"] + path] = row
    return rows


def render(meta, results, configs):
    names = [f"{lanes}L{readers}R" for lanes, readers in configs]
    base = results[names[0]]
    out = ["# Scaling with lanes and readers, up to the machine's cores", ""]
    out += [f"- {key}: {value}" for key, value in meta.items()]
    out += ["", "Generated; do not edit. `xLyR` is x lane threads and y reader threads; "
            "events/s in thousands (median, min–max over the repeats); the speed-up is "
            "over the same row's 1-lane, no-reader run. With as many lanes as cores, the "
            "issuing thread is one busy thread more while it enqueues the stream.", ""]
    out += ["## Capacity, thousands of events/s", "",
            "| row | " + " | ".join(names) + " | " +
            " | ".join(f"speed-up {n}" for n in names[1:]) + " |",
            "|---|" + "---:|" * (2 * len(names) - 1)]
    for label in base:
        cells = [cell(results[n].get(label), "events_per_s", 1000) for n in names]
        ups = []
        for n in names[1:]:
            row, first = results[n].get(label), base[label]
            ups.append(f"{row['events_per_s'] / first['events_per_s']:.2f}×"
                       if row and row.get("events_per_s") and first.get("events_per_s") else "–")
        out.append(f"| {label} | " + " | ".join(cells) + " | " + " | ".join(ups) + " |")
    readers = [n for (lanes, r), n in zip(configs, names) if r > 0]
    if readers:
        out += ["", "## Reader p99 during the run, ns (configurations with a reader)", "",
                "| row | " + " | ".join(readers) + " |", "|---|" + "---:|" * len(readers)]
        for label in base:
            out.append(f"| {label} | " +
                       " | ".join(cell(results[n].get(label), "read_p99_ns") for n in readers) +
                       " |")
    return "\n".join(out) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="chat", choices=["chat", "agentx"])
    parser.add_argument("--scale", type=float, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(ROOT, "papers", "results"))
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    meta = describe(args, sys.argv[1:])
    run(["cargo", "build", "-q", "--release", "-p", "crtc-bench", "--features", FEATURES])
    configs = configurations(cores)
    results = {f"{lanes}L{readers}R": measure(args, lanes, readers) for lanes, readers in configs}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "scaling.json"), "w") as f:
        json.dump({"provenance": meta, "configurations": results}, f, indent=1)
    with open(os.path.join(args.out, "scaling.md"), "w") as f:
        f.write(render(meta, results, configs))
    print(f"wrote {args.out}/scaling.md and scaling.json", file=sys.stderr)


if __name__ == "__main__":
    main()
