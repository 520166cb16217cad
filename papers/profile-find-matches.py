#!/usr/bin/env python3
"""The read path's profile: instructions per `find_matches` for every gate
beside upstream 1.6.1's CRTC, and where they go, under callgrind; written to
papers/results/profile-find-matches.md and .json.

Usage: python3 papers/profile-find-matches.py [--workloads chat,agentx,leaf,trace]
       [--trace PATH] [--passes N] [--out DIR]

Workloads: the `chat` and `agentx` presets, `leaf` (the tree and query of
the `mixed_1r1w` bench's reader alone) and the Mooncake trace. For each
workload and subject it runs the example `lookups` (crtc-bench,
built with --features all-strategies,upstream and the default mimalloc):
the subject's tree is built serially from the workload's writes (one lane;
no stale-leaf sweep on either side, so both trees hold the same dead
nodes), then every lookup of the stream runs `--passes` times on the final
tree. callgrind collects only inside the lookup itself: our
`SerialTree::find_matches` (a call of `Tree::find_matches`) and upstream's
`SyncIndexer::find_matches` (queries are converted to upstream's type
outside it). The example prints the lookups and the ranks credited over
them, which must agree across subjects (the same trees). Where the
instructions go: the subject's top functions by exclusive count
(`callgrind_annotate`), with inlined code attributed to the source file it
came from. Instruction counts do not depend on the machine's load; they do
not see cache misses or contention (`crtc compare` times the reads).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from generator import (DEFAULT_TRACE, FEATURES, ROOT, heading, provenance, run, sources,
                       trace_field, write_results)

EXAMPLE = os.path.join(ROOT, "target", "release", "examples", "lookups")
GATES = ["rwlock", "seqlock", "epoch-crossbeam", "epoch-seize"]
UPSTREAM = "upstream-1.6.1"
COLLECT = {
    "ours": "*SerialTree*find_matches",
    UPSTREAM: "*SyncIndexer*ConcurrentRadixTreeCompressed*find_matches",
}
# Issue 43's target: instructions per lookup on the trace at most this
# many times upstream's.
TRACE_TARGET = 0.6
TOP = 8


def profile(subject, source, passes, scratch):
    """(collected instructions, lookups, credited, top functions) of one run."""
    out = os.path.join(scratch, f"cg.{subject}.{os.path.basename(source)}")
    collect = COLLECT[UPSTREAM] if subject == UPSTREAM else COLLECT["ours"]
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
           f"--toggle-collect={collect}", EXAMPLE, subject, source, str(passes)]
    done = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    match = re.search(r"lookups (\d+) credited (\d+)", done.stdout)
    if not match:
        raise ValueError(f"{subject} {source}: no lookup count in {done.stdout!r}")
    annotated = run(["callgrind_annotate", out])
    return total(annotated), int(match[1]), int(match[2]), top_functions(annotated)


def total(annotated):
    for line in annotated.splitlines():
        if "PROGRAM TOTALS" in line:
            return int(line.split()[0].replace(",", ""))
    raise ValueError("no PROGRAM TOTALS in callgrind_annotate's output")


LINE = re.compile(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$")


def top_functions(annotated):
    """The TOP (file:function, instructions) rows, file paths shortened."""
    rows, seen_header = [], False
    for line in annotated.splitlines():
        if line.strip().endswith("file:function"):
            seen_header = True
            continue
        match = LINE.match(line) if seen_header else None
        if match and "PROGRAM TOTALS" not in line:
            rows.append((shorten(match[2]), int(match[1].replace(",", ""))))
        if len(rows) == TOP:
            break
    return rows


def shorten(name):
    name = re.sub(r"\s*\[[^\]]*\]$", "", name)
    name = re.sub(r"^/rustc/[0-9a-f]+/library/", "std:", name)
    name = re.sub(r"^.*/registry/src/[^/]+/", "", name)
    name = re.sub(r"^/rust/deps/", "", name)
    name = name.replace(ROOT + "/", "")
    return name if len(name) <= 150 else name[:147] + "..."


def measure(name, source, passes, scratch):
    with ThreadPoolExecutor(max_workers=2) as pool:
        jobs = {s: pool.submit(profile, s, source, passes, scratch) for s in GATES + [UPSTREAM]}
        runs = {s: job.result() for s, job in jobs.items()}
    lookups = {r[1] for r in runs.values()}
    credited = {r[2] for r in runs.values()}
    if len(lookups) != 1 or len(credited) != 1:
        raise ValueError(f"{name}: the subjects ran different lookups or trees: {runs}")
    n, up = lookups.pop(), runs[UPSTREAM][0]
    rows = [{"subject": s, "instructions": runs[s][0], "per_lookup": runs[s][0] / n,
             "vs_upstream": runs[s][0] / up, "top": runs[s][3]} for s in GATES + [UPSTREAM]]
    return {"workload": name, "lookups": n, "credited": credited.pop(), "rows": rows}


def markdown(meta, results):
    lines = heading(
        "The read path: instructions per find_matches (callgrind), every gate against upstream "
        "1.6.1", meta,
        "Both sides build their tree from the same writes, serially and unswept, then run the "
        "stream's lookups on the final tree; only the lookup itself is counted. Cache misses and "
        "contention are not: `crtc compare` times the reads.")
    for result in results:
        lines += [f"## {result['workload']} ({result['lookups']:,} lookups, "
                  f"{result['credited']:,} ranks credited)", "",
                  "| subject | Ir/lookup | vs upstream |", "|---|---:|---:|"]
        lines += [f"| {r['subject']} | {r['per_lookup']:,.0f} | {r['vs_upstream']:.2f}× |"
                  for r in result["rows"]]
        lines.append("")
        if result["workload"] == "trace":
            lines += [target_line(result), ""]
        lines += ["Where they go (exclusive instructions per lookup, top "
                  f"{TOP} per subject):", ""]
        for r in result["rows"]:
            lines.append(f"- {r['subject']}: " + "; ".join(
                f"`{f}` {c / result['lookups']:,.0f}" for f, c in r["top"]))
        lines.append("")
    return "\n".join(lines)


def target_line(result):
    ratios = {r["subject"]: r["vs_upstream"] for r in result["rows"] if r["subject"] != UPSTREAM}
    met = [s for s, v in ratios.items() if v <= TRACE_TARGET]
    return (f"Issue 43's target, at most {TRACE_TARGET}× upstream's instructions per lookup on "
            f"the trace: met by {', '.join(met) or 'no gate'}; "
            + ", ".join(f"{s} {v:.2f}×" for s, v in ratios.items()) + ".")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="chat,agentx,leaf,trace")
    parser.add_argument("--trace", default=DEFAULT_TRACE)
    parser.add_argument("--passes", default="1")
    parser.add_argument("--out", default=os.path.join(ROOT, "papers", "results"))
    args = parser.parse_args()
    if subprocess.run(["which", "valgrind"], capture_output=True).returncode != 0:
        print("profile-find-matches.py: valgrind not found; skipped", file=sys.stderr)
        return 0
    meta = provenance("profile-find-matches.py", sys.argv[1:], workloads=args.workloads,
                      passes=args.passes, tool="valgrind --tool=callgrind",
                      **trace_field(args.workloads, args.trace))
    run(["cargo", "build", "--release", "-q", "-p", "crtc-bench", "--features", FEATURES,
         "--example", "lookups"])
    with tempfile.TemporaryDirectory() as scratch:
        results = [measure(name, source, args.passes, scratch)
                   for name, source in sources("profile-find-matches.py", args.workloads,
                                               args.trace)]
    write_results(args.out, "profile-find-matches", meta, results, markdown(meta, results) + "\n")
    print(f"wrote {args.out}/profile-find-matches.md and profile-find-matches.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
