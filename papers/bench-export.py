#!/usr/bin/env python3
"""Runs the criterion groups papers/evaluation.md reads and writes their
tables to papers/results/benches.md (and benches.json).

Usage: python3 papers/bench-export.py [--repeat N] [--out DIR] [--paired-rounds R]
       [--warm-up S] [--measure S]

- mixed_1r1w (one reader, one writer; every gate driven directly and through
  a feeder and one lane thread, and upstream 1.6.1 through its own): run N
  times (default 3), each run covering every gate in turn, so the repeats
  interleave; each figure is the median of the N runs' printed percentiles,
  with min-max. The percentiles come from the bench's own histogram of every
  timed read.
- tail_append at batch 1 (fast path against general path, every gate): run N
  times after the mixed_1r1w runs; criterion's median per event of each run,
  and the ratio general / fast computed within each run; each figure is the
  median of the N runs, with min-max (one run on a noisy machine can be off
  by 50%, and fast and general ids run seconds apart).
- tail_append paired mode (`-- --paired ROUNDS`, every gate, batch 1): run N
  times after the criterion runs; each run times fast and general fixtures
  back to back, ROUNDS rounds (default 200), and prints the median ratio
  general / fast over its rounds with their quartiles; each figure is the
  median of the N runs' figures, with min-max. This is the pairing the
  criterion ratio lacks (see benches/benches/tail_append.rs).
- sweep (every gate, 256 and 4096 dead leaves): one run; criterion's median
  with its 95% interval.
- find_matches (one thread, no writer, the chat tree; every gate, and
  upstream 1.6.1's CRTC, RadixTree and PositionalIndexer over the same stream
  and queries; hit, miss and partial queries): run N times after the sweep
  group; criterion's median per lookup of each run, its lookups per second,
  and each subject's ratio to upstream's CRTC computed within each run; each
  figure is the median of the N runs, with min-max. The subjects of one run
  follow one another, so a ratio pairs ids seconds apart.

Features: all-strategies,upstream. Criterion's warm-up and measurement times
are --warm-up / --measure (default 1 s and 3 s per id; the sweep group sets
its own). The revision and the tree's state are read before anything is
written, so writing cannot mark the tree dirty. No trace is read: every
group builds its own synthetic tree.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import sys

from generator import FEATURES, ROOT, provenance, run

GATES = ["rwlock", "seqlock", "epoch-crossbeam", "epoch-seize", "upstream-1.6.1"]
# mixed_1r1w's rows: each gate driven directly, then each gate and upstream
# through one lane thread and a feeder (the bench's `-fed` ids).
MIXED_IDS = GATES[:-1] + [f"{g}-fed" for g in GATES[:-1]] + GATES[-1:]
PERCENTILE = re.compile(
    r"^mixed_1r1w/(?P<gate>[\w.-]+)/reader/(?P<mode>no_writer|decode_storm): (?P<reads>\d+) reads, "
    r"p50 (?P<p50>\d+) ns, p99 (?P<p99>\d+) ns, p99\.9 (?P<p999>\d+) ns, mean (?P<mean>\d+) ns, "
    r"max (?P<max>\d+) ns$")
WRITER = re.compile(r"^mixed_1r1w/(?P<gate>[\w.-]+): .*writer (?P<appends>\d+) decode appends in "
                    r"(?P<secs>[\d.]+) s \((?P<rate>[\d.]+) M/s")
PAIRED = re.compile(
    r"^tail_append_paired/(?P<gate>[\w.-]+)/batch=1/edge=(?P<edge>\d+): general/fast median "
    r"(?P<median>[\d.]+) \(quartiles (?P<q1>[\d.]+)-(?P<q3>[\d.]+), range (?P<lo>[\d.]+)-"
    r"(?P<hi>[\d.]+), (?P<rounds>\d+) rounds\); fast (?P<fast>[\d.]+) ns/event, general "
    r"(?P<general>[\d.]+) ns/event")
RETRIES = re.compile(r"^mixed_1r1w/(?P<gate>[\w.-]+): .*per read: retries (?P<retries>[\d.]+), "
                     r"fallbacks (?P<fallbacks>[\d.]+)")


def describe(args):
    return provenance(
        "bench-export.py", sys.argv[1:],
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        repeats=args.repeat,
        criterion=f"--warm-up-time {args.warm_up} --measurement-time {args.measure}",
        trace="none (every group builds its own synthetic tree)",
    )


def bench(name, args, extra=()):
    cmd = ["cargo", "bench", "-q", "-p", "crtc-bench", "--features", FEATURES, "--bench", name,
           "--", "--warm-up-time", str(args.warm_up), "--measurement-time", str(args.measure),
           *extra]
    print("running:", " ".join(cmd), file=sys.stderr)
    return run(cmd)


def mixed(args):
    """Per gate and mode, the lists of each repeat's figures."""
    runs = {}
    for repeat in range(args.repeat):
        out = bench("mixed_1r1w", args)
        for line in out.splitlines():
            m = PERCENTILE.match(line)
            if m:
                key = (m["gate"], m["mode"])
                for field in ("p50", "p99", "p999"):
                    runs.setdefault(key, {}).setdefault(field, []).append(int(m[field]))
            for pattern, fields in ((WRITER, ("rate",)), (RETRIES, ("retries", "fallbacks"))):
                m = pattern.match(line)
                if m:
                    for field in fields:
                        runs.setdefault((m["gate"], "writer"), {}).setdefault(field, []).append(
                            float(m[field]))
        print(f"mixed_1r1w: repeat {repeat + 1} of {args.repeat} done", file=sys.stderr)
    return runs


def criterion(group):
    """full id -> (median, low, high) ns from target/criterion/<group>."""
    found = {}
    base = os.path.join(ROOT, "target", "criterion", group)
    for dirpath, _, names in os.walk(base):
        if os.path.basename(dirpath) != "new" or "benchmark.json" not in names:
            continue
        with open(os.path.join(dirpath, "benchmark.json")) as f:
            full_id = json.load(f)["full_id"]
        with open(os.path.join(dirpath, "estimates.json")) as f:
            median = json.load(f)["median"]
        ci = median["confidence_interval"]
        found[full_id] = (median["point_estimate"], ci["lower_bound"], ci["upper_bound"])
    return found


def fresh(group):
    shutil.rmtree(os.path.join(ROOT, "target", "criterion", group), ignore_errors=True)


def spread(values, fmt="{:.0f}"):
    med = statistics.median(values)
    if len(values) == 1:
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def mixed_tables(runs):
    lines = ["| gate | alone p50 | alone p99 | alone p99.9 | storm p50 | storm p99 | storm p99.9 "
             "| p99 storm/alone | writer M appends/s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    ratios = {}
    for gate in MIXED_IDS:
        alone, storm = runs.get((gate, "no_writer")), runs.get((gate, "decode_storm"))
        if not alone or not storm:
            continue
        per_run = [s / max(a, 1) for a, s in zip(alone["p99"], storm["p99"])]
        ratios[gate] = per_run
        writer = runs.get((gate, "writer"), {})
        cells = [spread(alone[f]) for f in ("p50", "p99", "p999")]
        cells += [spread(storm[f]) for f in ("p50", "p99", "p999")]
        cells.append(spread(per_run, "{:.2f}") + "×")
        cells.append(spread(writer["rate"], "{:.2f}") if "rate" in writer else "–")
        lines.append(f"| {gate} | " + " | ".join(cells) + " |")
    retry = ["| gate | read retries / read | read fallbacks / read |",
             "|---|---:|---:|"]
    for gate in MIXED_IDS:
        writer = runs.get((gate, "writer"), {})
        if "retries" in writer:
            retry.append(f"| {gate} | " + " | ".join(
                spread(writer[f], "{:.5f}") for f in ("retries", "fallbacks")) + " |")
    return lines, retry, ratios


def tail_table(runs):
    """runs: one {full id: (median, low, high)} per repeat. Returns the table
    lines, per gate/edge the per-run medians of fast, general and their ratio."""
    lines = ["| gate | edge | fast ns/event | general ns/event | general / fast |",
             "|---|---:|---:|---:|---:|"]
    figures = {}
    for gate in GATES[:-1]:
        for edge in (16, 256):
            pairs = [(run.get(f"tail_append/{gate}/fast/batch=1/edge={edge}"),
                      run.get(f"tail_append/{gate}/general/batch=1/edge={edge}")) for run in runs]
            pairs = [(f[0], g[0]) for f, g in pairs if f and g]
            if not pairs:
                continue
            fast, general = [f for f, _ in pairs], [g for _, g in pairs]
            ratio = [g / f for f, g in pairs]
            figures[f"{gate}/edge={edge}"] = {"fast": fast, "general": general,
                                              "general_over_fast": ratio}
            runs_note = "" if len(pairs) == len(runs) else f" ({len(pairs)} of {len(runs)} runs)"
            lines.append(f"| {gate}{runs_note} | {edge} | {spread(fast, '{:.1f}')} | "
                         f"{spread(general, '{:.1f}')} | {spread(ratio, '{:.2f}')}× |")
    return lines, figures


def paired(args):
    """Per gate/edge, the lists of each paired run's figures."""
    runs = {}
    for repeat in range(args.repeat):
        out = bench("tail_append", args, ["--paired", str(args.paired_rounds)])
        for line in out.splitlines():
            m = PAIRED.match(line)
            if m:
                figures = runs.setdefault(f"{m['gate']}/edge={m['edge']}", {})
                for field in ("median", "q1", "q3", "fast", "general"):
                    figures.setdefault(field, []).append(float(m[field]))
        print(f"tail_append --paired: repeat {repeat + 1} of {args.repeat} done", file=sys.stderr)
    return runs


def paired_table(runs):
    lines = ["| gate | edge | general / fast, paired: median of the rounds | quartiles of the rounds "
             "| fast ns/event | general ns/event |", "|---|---:|---:|---:|---:|---:|"]
    for key, f in runs.items():
        gate, edge = key.split("/edge=")
        lines.append(f"| {gate} | {edge} | {spread(f['median'], '{:.2f}')}× | "
                     f"{statistics.median(f['q1']):.2f}–{statistics.median(f['q3']):.2f}× | "
                     f"{spread(f['fast'], '{:.1f}')} | {spread(f['general'], '{:.1f}')} |")
    return lines


def sweep_table(found):
    lines = ["| gate | dead leaves | sweep µs | ns per unlinked leaf |", "|---|---:|---:|---:|"]
    for gate in GATES[:-1]:
        for fanout in (256, 4096):
            e = found.get(f"sweep/{gate}/fanout={fanout}")
            if e:
                lines.append(f"| {gate} | {fanout} | {e[0] / 1000:.1f} [{e[1] / 1000:.1f}, "
                             f"{e[2] / 1000:.1f}] | {e[0] / fanout:.0f} |")
    return lines


# The find_matches group's subjects beyond the gates, and its query kinds.
LOOKUP_SUBJECTS = GATES + ["upstream-radixtree", "upstream-positional"]
LOOKUP_KINDS = ["hit", "miss", "partial"]


def lookups(args):
    """The find_matches group's criterion medians, one dict per run."""
    runs = []
    for repeat in range(args.repeat):
        fresh("find_matches")
        bench("find_matches", args)
        runs.append(criterion("find_matches"))
        print(f"find_matches: repeat {repeat + 1} of {args.repeat} done", file=sys.stderr)
    return runs


def lookup_table(runs):
    """The find_matches table, and its figures per subject and kind."""
    lines = ["| subject | query | ns per lookup | lookups/s | vs upstream-1.6.1 |",
             "|---|---|---:|---:|---:|"]
    figures = {}
    for kind in LOOKUP_KINDS:
        for subject in LOOKUP_SUBJECTS:
            pairs = [(run.get(f"find_matches/{subject}/{kind}"),
                      run.get(f"find_matches/upstream-1.6.1/{kind}")) for run in runs]
            pairs = [(a[0], b[0]) for a, b in pairs if a and b]
            if not pairs:
                continue
            ns = [a for a, _ in pairs]
            ratio = [a / b for a, b in pairs]
            figures[f"{subject}/{kind}"] = {"ns": ns, "vs_upstream": ratio}
            lines.append(f"| {subject} | {kind} | {spread(ns)} | "
                         f"{spread([1e9 / v for v in ns], '{:,.0f}')} | "
                         f"{spread(ratio, '{:.2f}')}× |")
    return lines, figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(ROOT, "papers", "results"))
    parser.add_argument("--warm-up", type=float, default=1)
    parser.add_argument("--measure", type=float, default=3)
    parser.add_argument("--paired-rounds", type=int, default=200)
    args = parser.parse_args()
    if not 1 <= args.repeat <= 20:
        sys.exit("--repeat: 1 to 20")
    header = describe(args)
    runs = mixed(args)
    tail = []
    for repeat in range(args.repeat):
        fresh("tail_append")
        bench("tail_append", args, ["batch=1/"])
        tail.append(criterion("tail_append"))
        print(f"tail_append: repeat {repeat + 1} of {args.repeat} done", file=sys.stderr)
    tail_paired = paired(args)
    fresh("sweep")
    bench("sweep", args)
    sweeps = criterion("sweep")
    lookup_lines, lookup_figures = lookup_table(lookups(args))

    mixed_lines, retry_lines, ratios = mixed_tables(runs)
    tail_lines, tail_figures = tail_table(tail)
    doc = ["# Criterion groups: reader isolation, fast-path gain, sweeps, lookups", ""]
    doc += [f"- {k}: {v}" for k, v in header.items()]
    doc += ["", "Generated; do not edit. Latencies in ns; `a (b–c)` is the median of the repeats "
            "(min–max); `[lo, hi]` is criterion's 95% interval of the median.", "",
            "## mixed_1r1w: one reader's find_matches latency, alone and under a decode storm", "",
            "One reader thread and one writer (benches/benches/mixed_1r1w.rs). Percentiles are "
            "over every timed read of one run; the ratio is computed per run, then summarised. "
            "Two drivers (the bench's module docs): a gate's plain row drives our tree directly "
            "(the writer thread applies its events: two busy threads); the `-fed` rows and "
            "upstream's run the index behind one lane thread with a feeder thread enqueueing "
            "the writer's events, as upstream's crate requires (three busy threads on two "
            "cores). Compare upstream with the `-fed` rows; each row's writer rate is its own, "
            "not matched.", ""]
    doc += mixed_lines + ["", "Reader retries under the storm (per read):", ""] + retry_lines
    doc += ["", "## tail_append: one-block decode store, fast path vs general path (batch 1)", "",
            "benches/benches/tail_append.rs; upstream has no fast path, so no row. Criterion's "
            "median per event in each run; the ratio is computed within each run, then "
            "summarised over the runs. The two ids of a pair run seconds apart, so a change "
            "of the machine's speed between them moves the ratio; the paired table below does "
            "not have that problem.", ""] + tail_lines
    doc += ["", "## tail_append, paired: fast and general fixtures timed back to back (batch 1)", "",
            f"`cargo bench --bench tail_append -- --paired {args.paired_rounds}` (module docs of "
            "benches/benches/tail_append.rs): each round times 16 fixtures of each path "
            "alternately, and its ratio is general / fast per event. Per run: the median and "
            "quartiles of the ratios over its rounds and each path's median ns/event; "
            "`a (b–c)` is the median of the runs (min–max); the quartiles are the runs' "
            "medians.", ""] + paired_table(tail_paired)
    doc += ["", "## sweep: one stale-leaf sweep unlinking every dead leaf", "",
            "benches/benches/sweep.rs.", ""] + sweep_table(sweeps)
    doc += ["", "## find_matches: one thread's lookups, no writer, every subject over the same "
            "tree", "",
            "benches/benches/find_matches.rs: the chat stream (seed 7, scale 1) applied to every "
            "subject, then swept (ours by its volume rule and once more at the end, upstream's "
            "CRTC through its cleanup; RadixTree prunes on removal and the positional index has "
            "nothing to sweep), and the same hit, miss and partial queries on each. The ratio "
            "to upstream's CRTC is computed within each run, then summarised.", ""]
    doc += lookup_lines + [""]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "benches.md"), "w") as f:
        f.write("\n".join(doc))
    data = {"provenance": header,
            "mixed_1r1w": {f"{g}/{m}": v for (g, m), v in runs.items()},
            "mixed_1r1w_p99_ratio_per_run": ratios,
            "tail_append_batch1_per_run": tail_figures,
            "tail_append_paired_per_run": tail_paired,
            "tail_append_paired_general_over_fast": {
                k: statistics.median(v["median"]) for k, v in tail_paired.items()},
            "tail_append_general_over_fast": {
                k: statistics.median(v["general_over_fast"]) for k, v in tail_figures.items()},
            "sweep": {k: {"median": v[0], "low": v[1], "high": v[2]} for k, v in sweeps.items()},
            "find_matches_per_run": lookup_figures}
    with open(os.path.join(args.out, "benches.json"), "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    print("wrote", os.path.join(args.out, "benches.md"), file=sys.stderr)


if __name__ == "__main__":
    main()
