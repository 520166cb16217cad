#!/usr/bin/env python3
"""How close each gate's bytes per membership are to the floor that the
design's data structures set, per workload: written to
papers/results/memory-floor.md and memory-floor.json.

Usage: python3 papers/memory-floor.py [--workloads agentx,chat,trace]
       [--scale S] [--trace PATH] [--out DIR]

For each workload it writes the event stream with `crtc gen` (the stream
`crtc compare` replays, at the same scale as `targets.md`) and replays its
stored, removed, cleared and remove_worker events as sets of external hashes
per (worker, rank): the memberships held at the end, and how many distinct
blocks they name. Then one `crtc compare --json` run of every gate gives the
measured bytes per membership (the counting allocator around the whole
index) and the part of it the tree's nodes hold (`footprint`).

The floor follows from DESIGN.md section 5 and the lane directory
(papers/protocols.md, the lane lookup; issue 35), whatever the gate:
- every edge position is a (local, external) pair, 16 bytes, stored once
  per block however many ranks hold it: 16 bytes times distinct blocks per
  membership;
- every lane keeps one directory `external -> node` shared by its ranks:
  one entry per distinct block the lane's ranks hold, at least an 8-byte
  key and a 4-byte node reference (12 bytes in a table with no empty slot;
  14.9 bytes in a table like hashbrown's, which adds a 1-byte control per
  slot and is at most 7/8 full). The lane of a rank is the one the indexer
  gives it: round-robin in the order ranks first appear in the stream,
  over the lanes the compare run used (its JSON `settings.lanes`).
Nodes, coverage, edge indexes, growth slack and the allocator's rounding
come on top and are not in the floor. About a minute on 2 cores.
"""
import argparse
import collections
import json
import os
import sys
import tempfile

from generator import (DEFAULT_TRACE, FEATURES, ROOT, provenance, run, trace_field, workloads,
                       write_results)

BINARY = os.path.join(ROOT, "target", "release", "crtc")
GATES = ["rwlock", "seqlock", "epoch-crossbeam", "epoch-seize"]
PAIR_BYTES = 16
LOOKUP_DENSE = 12.0
LOOKUP_HASHBROWN = 13.0 * 8 / 7


def held_at_end(events_path):
    """Memberships held after the stream (blocks per (worker, rank)), and the
    ranks in the order they first appear (the indexer's routing order)."""
    held = collections.defaultdict(set)
    first_seen = {}
    with open(events_path) as f:
        for line in f:
            event = json.loads(line)
            kind = event["t"]
            if "rank" in event:
                first_seen.setdefault((event["worker"], event["rank"]), len(first_seen))
            if kind == "stored":
                held[(event["worker"], event["rank"])].update(x for _, x in event["blocks"])
            elif kind == "removed":
                held[(event["worker"], event["rank"])].difference_update(event["hashes"])
            elif kind == "cleared":
                held.pop((event["worker"], event["rank"]), None)
            elif kind == "remove_worker":
                for key in [k for k in held if k[0] == event["worker"]]:
                    del held[key]
    return held, first_seen


def directory_entries(held, first_seen, lanes):
    """Entries the lanes' directories need at least: per lane, the distinct
    blocks its ranks hold."""
    per_lane = collections.defaultdict(set)
    for rank, blocks in held.items():
        per_lane[first_seen.get(rank, 0) % max(lanes, 1)].update(blocks)
    return sum(len(blocks) for blocks in per_lane.values())


def measure(name, workload_args, scratch):
    events = os.path.join(scratch, f"{name}.jsonl")
    run([BINARY, "gen", *workload_args, "--out", events])
    held, first_seen = held_at_end(events)
    memberships = sum(len(blocks) for blocks in held.values())
    distinct = len(set().union(*held.values())) if held else 0
    report = os.path.join(scratch, f"{name}.json")
    run([BINARY, "compare", *workload_args, "--strategies", ",".join(GATES), "--json", report])
    with open(report) as f:
        compared = json.load(f)
    rows = [r for r in compared["rows"] if r.get("fast_path")]
    lanes = compared["settings"]["lanes"]
    share = distinct / memberships
    entries = directory_entries(held, first_seen, lanes) / memberships
    return {
        "workload": name, "args": workload_args, "memberships": memberships,
        "distinct_blocks": distinct, "blocks_per_membership": share, "lanes": lanes,
        "entries_per_membership": entries,
        "floor_dense": PAIR_BYTES * share + LOOKUP_DENSE * entries,
        "floor_hashbrown": PAIR_BYTES * share + LOOKUP_HASHBROWN * entries,
        "gates": [{"strategy": r["strategy"], "bytes": r["bytes_per_membership"],
                   "tree": r["footprint_bytes_per_membership"]} for r in rows],
    }


def markdown(meta, results):
    lines = ["# Bytes per membership against the design's floor", ""]
    lines += [f"- {key}: {value}" for key, value in meta.items()]
    lines += ["", "Floor (per membership) = 16 bytes × distinct blocks per membership (edge "
              "pairs) + the lane directories' entries (one per distinct block of a lane's "
              f"ranks) × {LOOKUP_DENSE:.1f} bytes with no empty slot, or × "
              f"{LOOKUP_HASHBROWN:.1f} in a map at most 7/8 full with a control byte per slot "
              "(the script's docstring gives the reasoning). Nodes, coverage, edge indexes and "
              "growth slack are above it. Measured = `crtc compare` bytes per membership, fast "
              "rows; tree = the part held by the tree's nodes (edges, coverage, indexes, "
              "children); rest = lane directories, node holds and the slot registry.", "",
              "| workload | memberships | distinct blocks | blocks/membership | lanes "
              "| entries/membership | floor (dense) | floor (7/8 map) | gate | measured | tree "
              "| rest | tree + 7/8 lookup |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for result in results:
        head = [result["workload"], f"{result['memberships']:,}",
                f"{result['distinct_blocks']:,}", f"{result['blocks_per_membership']:.3f}",
                f"{result['lanes']}", f"{result['entries_per_membership']:.3f}",
                f"{result['floor_dense']:.1f}", f"{result['floor_hashbrown']:.1f}"]
        lookup = LOOKUP_HASHBROWN * result["entries_per_membership"]
        for i, gate in enumerate(result["gates"]):
            cells = head if i == 0 else [""] * len(head)
            lines.append("| " + " | ".join(cells + [
                gate["strategy"], f"{gate['bytes']:.1f}", f"{gate['tree']:.1f}",
                f"{gate['bytes'] - gate['tree']:.1f}",
                f"{gate['tree'] + lookup:.1f}"]) + " |")
    lines += ["", "\"tree + 7/8 lookup\" is what a gate would hold with its tree as measured and "
              "the lane directories in maps at their fullest with nothing else beside them: the "
              "most that making the directories denser alone could give. Where it is above 32, "
              "the tree itself (nodes, coverage, edge indexes, growth slack) must shrink too.", ""]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", default="agentx,chat,trace")
    parser.add_argument("--scale", default="4")
    parser.add_argument("--trace", default=DEFAULT_TRACE)
    parser.add_argument("--out", default=os.path.join(ROOT, "papers", "results"))
    args = parser.parse_args()
    meta = provenance("memory-floor.py", sys.argv[1:], workloads=args.workloads,
                      scale=args.scale, **trace_field(args.workloads, args.trace))
    run(["cargo", "build", "--release", "-q", "-p", "crtc-bench", "--features", FEATURES])
    with tempfile.TemporaryDirectory() as scratch:
        results = [measure(name, workload_args, scratch) for name, workload_args
                   in workloads("memory-floor.py", args.workloads, args.scale, args.trace)]
    write_results(args.out, "memory-floor", meta, results, markdown(meta, results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
