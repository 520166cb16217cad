#!/usr/bin/env python3
"""Where each row's lane CPU goes on the synthetic Mooncake trace, per stored
block, by kind of work (issue 13, item 1): written to
papers/results/profile-mooncake.md and profile-mooncake.json.

Usage: python3 papers/profile-mooncake.py [--trace PATH] [--repeat N]
       [--freq HZ] [--out DIR]

Two parts, both on the trace:

Every run has one lane thread per row (`--lanes 1`, the default on 2 cores).

1. Baseline, no profiler attached: one `crtc compare --repeat N --json` run of
   every gate and upstream 1.6.1, whose lane CPU per event (median of the
   repeats), divided by the trace's blocks per event, is each row's lane CPU
   per stored block.
2. Shares: for each gate and for upstream, `perf record -e cpu-clock
   --call-graph dwarf` around `crtc compare --strategies <one> --repeat N`,
   read back with `perf script --inline`. Only lane threads count, the threads
   the `lane cpu ns/ev` column measures: ours are the `crtc-lane-*` threads,
   upstream's are its unnamed pool threads (process name `crtc`) whose stacks
   name `dynamo_kv_router` outside `find_matches`. A sample goes to the
   category of its innermost frame that matches one (`CATEGORIES` below;
   `allocation` is the allocator wherever it is called from; `gate sync`
   holds every frame under `sync`, so the lock-free gates' atomic payload
   loads and any reference-count update land there too; the fast path's
   samples land in the categories of the work it does). Compare runs a
   gate's rows round-robin, fast then general, and each row run starts two
   lane threads in turn (its timed replay, then its heap-count replay of the
   same stream), so the k-th lane thread to appear belongs to row
   `(k // 2) % 2`. The attribution is checked: every sample of the fast
   path's gate section (`try_append_at_tail`) must land in a fast row, or
   the script stops.

The per-block figure of a category is the row's baseline ns per block times
the category's share of the row's samples. The shares come from profiled runs
and the baseline from an unprofiled one, so the split is approximate; the
shares themselves are sampled CPU time on a shared VM, about 1,500 samples
per row at the defaults. About 8 minutes on 2 cores; skipped with a note when
`perf` is missing or not permitted, or when the trace is absent.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

from generator import (DEFAULT_TRACE, FEATURES, ROOT, provenance, run, trace_origin,
                       write_results)

BINARY = os.path.join(ROOT, "target", "release", "crtc")
GATES = ["rwlock", "seqlock", "epoch-crossbeam", "epoch-seize"]
UPSTREAM = "upstream-1.6.1"
PATHS = ["fast", "general"]
# Lane threads one row of `crtc compare --lanes 1` starts per repeat, in this
# order: the timed run's lane, then the lanes of the swept and the unswept
# heap replays (`heap_per_membership`); a gate's fast row, then its general
# row, each repeat.
LANES_PER_ROW = 3
FAST_FRAME = "try_append_at_tail"

ALLOCATION = re.compile(
    r"^(_?mi_\w+|mi_\w+|malloc|free|cfree|realloc|calloc|_int_\w+|malloc_consolidate|"
    r"__rust_(alloc|dealloc|realloc)\w*|__libc_\w+|unlink_chunk|tcache_\w+|sysmalloc|"
    r"__memcpy\w*|__memmove\w*|__memset\w*|<alloc::alloc::Global>::\w+|alloc::alloc::\w+|"
    r"<crtc_bench::compare::measurement::heap::CountingAlloc)")
# Ours, innermost matching frame first; the order breaks ties within a frame.
CATEGORIES = [
    ("reclamation", re.compile(r"crossbeam_epoch|seize::|::reclaim::")),
    ("edge index", re.compile(r"edge_index|EdgeIndex|AtomicIndex")),
    ("coverage", re.compile(r"::bits::|SlotBits|Coverage|cutoff|demot|promote|cover_child")),
    ("child lookup", re.compile(r"::children::|child_step")),
    ("lane entries", re.compile(r"::rank_table::|::directory::|::rank_slots::|::lane::")),
    ("rank slots", re.compile(r"::slots::")),
    ("gate sync", re.compile(r"parking_lot|lock_shared|lock_exclusive|Backoff|spin_loop|"
                             r"::sync::|::seqlock::(payload::Words|SeqlockGate<R>::validated)")),
    ("removal walk", re.compile(r"::tree::remove::|::tree::sweep::|::tree::repair::")),
    ("planning/commit", re.compile(r"::tree::store|::tree::node::|::shape::|::rwlock::|"
                                   r"::epoch::|::seqlock::|::gate::")),
    ("event dispatch", re.compile(r"::indexer::|apply_event")),
]
# Upstream's, by its innermost `dynamo_kv_router` frame's name.
UPSTREAM_CATEGORIES = [
    ("lane entries", re.compile(r"lookup")),
    ("edge index", re.compile(r"edge_index|edge_hash|contains_edge")),
    ("event dispatch", re.compile(r"enqueue|thread_pool|channel")),
    ("coverage", re.compile(r"worker|cover|full|cutoff")),
    ("child lookup", re.compile(r"child")),
]
COLUMNS = [name for name, _ in CATEGORIES] + ["allocation", "upstream other", "other"]


def perf_usable(scratch):
    """Whether `perf record` works here (installed and permitted)."""
    probe = subprocess.run(["perf", "record", "-e", "cpu-clock", "-o",
                            os.path.join(scratch, "probe.data"), "--", "true"],
                           capture_output=True)
    return probe.returncode == 0


def samples(path):
    """`(comm, tid, frames innermost first)` for each sample of a
    `perf script -F comm,tid,ip,sym --inline` listing."""
    head, frames = None, []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if head:
                    yield head[0], head[1], frames
                head, frames = None, []
            elif head is None:
                head = line.split()
            else:
                parts = line.strip().split(None, 1)
                if len(parts) == 2:
                    frames.append(re.sub(r"(\+0x[0-9a-f]+)?( \(inlined\))?$", "", parts[1]))
    if head:
        yield head[0], head[1], frames


def classify(frames):
    for frame in frames:
        if ALLOCATION.search(frame):
            return "allocation", frame
        for name, pattern in CATEGORIES:
            if pattern.search(frame):
                return name, frame
    return "other", frames[0] if frames else "?"


def classify_upstream(frames):
    first = frames[0] if frames else "?"
    if ALLOCATION.search(first):
        return "allocation", first
    inner = next((f for f in frames if "dynamo_kv_router" in f), "?")
    name = next((n for n, pattern in UPSTREAM_CATEGORIES if pattern.search(inner)),
                "upstream other")
    return name, inner


def lane_row(strategy, comm, tid, frames, lane_order):
    """The row a sample belongs to, or None when it is not a lane sample."""
    if strategy == UPSTREAM:
        upstream_lane = comm == "crtc" and any("dynamo_kv_router" in f for f in frames) \
            and not any("find_matches" in f for f in frames)
        return UPSTREAM if upstream_lane else None
    if not comm.startswith("crtc-lane"):
        return None
    if tid not in lane_order:
        lane_order[tid] = len(lane_order)
    return f"{strategy} {PATHS[(lane_order[tid] // LANES_PER_ROW) % 2]}"


def profile(strategy, trace, repeat, freq, scratch):
    """Category counts and top frames of each of `strategy`'s rows."""
    data = os.path.join(scratch, f"{strategy}.data")
    listing = os.path.join(scratch, f"{strategy}.txt")
    run(["perf", "record", "-e", "cpu-clock", "-F", str(freq), "--call-graph", "dwarf,16384",
         "-o", data, "--", BINARY, "compare", "--trace", trace, "--lanes", "1", "--repeat",
         str(repeat), "--strategies", strategy])
    with open(listing, "w") as out:
        subprocess.run(["perf", "script", "-i", data, "-F", "comm,tid,ip,sym", "--inline"],
                       cwd=ROOT, check=True, stdout=out, stderr=subprocess.DEVNULL)
    os.remove(data)
    counts = collections.defaultdict(collections.Counter)
    tops = collections.defaultdict(collections.Counter)
    lane_order = {}
    for comm, tid, frames in samples(listing):
        row = lane_row(strategy, comm, tid, frames, lane_order)
        if row is None:
            continue
        if row.endswith(" general") and any(FAST_FRAME in f for f in frames):
            raise SystemExit(f"profile-mooncake.py: a {FAST_FRAME} sample landed in {row}: "
                             "compare's lane threads no longer start in the assumed order")
        name, frame = (classify_upstream if strategy == UPSTREAM else classify)(frames)
        counts[row][name] += 1
        tops[row][re.sub(r"<.*?>", "<>", frame)[:100]] += 1
    os.remove(listing)
    return counts, tops


def baseline(trace, repeat, scratch):
    """Median lane CPU ns per event of every row, and blocks per event."""
    report = os.path.join(scratch, "baseline.json")
    run([BINARY, "compare", "--trace", trace, "--lanes", "1", "--repeat", str(repeat),
         "--strategies", ",".join(GATES + [UPSTREAM]), "--json", report])
    with open(report) as f:
        data = json.load(f)
    workload = data["workload"]
    rows = {}
    for row in data["rows"]:
        if row["fast_path"] is None:
            rows[row["strategy"]] = row["cpu_ns_per_event"]
        else:
            rows[f"{row['strategy']} {'fast' if row['fast_path'] else 'general'}"] = \
                row["cpu_ns_per_event"]
    return rows, workload["blocks"] / workload["events"], workload


def markdown(meta, result):
    per_block, rows = result["blocks_per_event"], result["rows"]
    lines = ["# Where the lane CPU goes on the synthetic Mooncake trace (perf)", ""]
    lines += [f"- {key}: {value}" for key, value in meta.items()]
    lines += ["", f"{result['events']} events, {per_block:.1f} blocks per event. Baseline: "
              "lane CPU per event of an unprofiled run (median of the repeats) and per "
              "stored block (÷ blocks per event). Shares: lane samples by category of the "
              "innermost frame that names one, from the profiled runs (the script's "
              "docstring says how samples are attributed and categorised).", "",
              "## Lane CPU per stored block (ns), split by the sample shares", "",
              "| row | ns/event | ns/block | " + " | ".join(COLUMNS) + " |",
              "|---|---:|---:|" + "---:|" * len(COLUMNS)]
    for row in rows:
        ns_block = row["ns_per_event"] / per_block
        shares = row["shares"]
        lines.append(f"| {row['row']} | {row['ns_per_event']:,.0f} | {ns_block:.1f} | " +
                     " | ".join(f"{ns_block * shares[c] / 100:.1f}" for c in COLUMNS) + " |")
    lines += ["", "## Lane samples by category (%)", "",
              "| row | lane samples | " + " | ".join(COLUMNS) + " |",
              "|---|---:|" + "---:|" * len(COLUMNS)]
    for row in rows:
        lines.append(f"| {row['row']} | {row['samples']} | " +
                     " | ".join(f"{row['shares'][c]:.1f}" for c in COLUMNS) + " |")
    lines += ["", "## Top frames per row (the frame each sample was categorised by)", ""]
    for row in rows:
        lines.append(f"- **{row['row']}**: " + "; ".join(
            f"{share:.1f}% `{frame}`" for frame, share in row["top_frames"]))
    return "\n".join(lines) + "\n"


def measure(trace, repeat, freq, scratch):
    ns_per_event, blocks_per_event, workload = baseline(trace, repeat, scratch)
    rows = []
    for strategy in GATES + [UPSTREAM]:
        counts, tops = profile(strategy, trace, repeat, freq, scratch)
        names = [UPSTREAM] if strategy == UPSTREAM else [f"{strategy} {p}" for p in PATHS]
        for name in names:
            total = sum(counts[name].values())
            if not total:
                raise SystemExit(f"profile-mooncake.py: no lane samples for {name}")
            rows.append({
                "row": name, "ns_per_event": ns_per_event[name], "samples": total,
                "shares": {c: 100 * counts[name][c] / total for c in COLUMNS},
                "top_frames": [(frame, 100 * n / total)
                               for frame, n in tops[name].most_common(6)],
            })
    return {"events": workload["events"], "blocks_per_event": blocks_per_event, "rows": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=DEFAULT_TRACE)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--freq", type=int, default=4000)
    parser.add_argument("--out", default=os.path.join(ROOT, "papers", "results"))
    args = parser.parse_args()
    if not os.path.exists(args.trace):
        print(f"profile-mooncake.py: no trace at {args.trace}; skipped", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        if not perf_usable(scratch):
            print("profile-mooncake.py: perf record is missing or not permitted; skipped",
                  file=sys.stderr)
            return 0
        meta = provenance("profile-mooncake.py", sys.argv[1:], trace=trace_origin(args.trace),
                          repeat=args.repeat,
                          tool=f"perf record -e cpu-clock -F {args.freq} --call-graph dwarf")
        run(["cargo", "build", "--release", "-q", "-p", "crtc-bench", "--features", FEATURES])
        result = measure(args.trace, args.repeat, args.freq, scratch)
    write_results(args.out, "profile-mooncake", meta, result, markdown(meta, result))
    print(f"wrote {args.out}/profile-mooncake.md and profile-mooncake.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
