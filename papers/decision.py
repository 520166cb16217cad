#!/usr/bin/env python3
"""The one-page decision, papers/README.md, rendered from the results files:
every figure on it is read from papers/results (the compare JSON of each
workload, benches.json, keepup.json or, when present, matched-reads.json,
code-size.md and verification.md), none is typed.

Usage: python3 papers/decision.py [--results DIR] [--out FILE] [--check]

papers/regenerate.sh runs it as its last step. With --check it writes
nothing and exits 1 when FILE differs from what it would write (run by
papers/check_figures.py, so by .ci/run); the prose it writes around the
figures is fixed here, so a change of verdict (another option ahead, a bound
now met) needs a change to this file, which the check then reports.
"""
import argparse
import difflib
import json
import os
import re
import statistics
import sys

from generator import EPOCH_READ_BOUND, READ_BOUND, ROOT, kept_up

RESULTS = os.path.join(ROOT, "papers", "results")
OUT = os.path.join(ROOT, "papers", "README.md")
WORKLOADS = ["agentx", "chat", "mooncake"]
UPSTREAM = "upstream-1.6.1"
# (label, compare row, code-size part, verification part) per option.
OPTIONS = [
    ("RwLock + fast path", "rwlock", "RwLock gate", "rwlock"),
    ("seqlock + fast path", "seqlock", "seqlock gate", "seqlock"),
    ("epoch-crossbeam + fast path", "epoch-crossbeam", "epoch gate (both reclaimers)", "epoch"),
    ("epoch-seize + fast path", "epoch-seize", "epoch gate (both reclaimers)", "epoch"),
    ("upstream 1.6.1", UPSTREAM, None, None),
]


def verdict_cells(markdown):
    """The verdict cells ("met" or "missed") of every table row in
    `markdown`, in order. Rows are split into cells, so two adjacent verdict
    cells, which share the `|` between them, are both counted."""
    verdicts = []
    for line in markdown.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        verdicts.extend(cell for cell in cells if cell in ("met", "missed"))
    return verdicts


def load(results):
    """Every input, parsed: compare reports per workload, the criterion
    export, code-size rows and verification step lines."""
    def read(name):
        with open(os.path.join(results, name), encoding="utf-8") as f:
            return f.read()
    compare = {w: json.loads(read(f"{w}.json")) for w in WORKLOADS}
    code = {}
    for line in read("code-size.md").splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 7 and cells[1].isdigit():
            code[cells[0]] = {"lines": int(cells[2]), "unsafe": int(cells[3])}
    verification = read("verification.md")
    verdicts = verdict_cells(read("targets.md"))
    steps = dict(re.findall(r"^- (\w+) \(\d+ s\): (.*)$", verification, re.M))
    keepup_path = os.path.join(results, "keepup.json")
    keepup = json.loads(read("keepup.json")) if os.path.exists(keepup_path) else None
    matched_path = os.path.join(results, "matched-reads.json")
    matched = json.loads(read("matched-reads.json")) if os.path.exists(matched_path) else None
    sweep_path = os.path.join(results, "mooncake-sweep.json")
    sweep = json.loads(read("mooncake-sweep.json")) if os.path.exists(sweep_path) else None
    return {
        "sweep": sweep,
        "keepup": keepup,
        "matched": matched,
        "compare": compare,
        "benches": json.loads(read("benches.json")),
        "code": code,
        "steps": steps,
        "missed": (verdicts.count("missed"), len(verdicts)),
        "revisions": {
            "compare": compare["mooncake"]["git_revision"],
            "benches": json.loads(read("benches.json"))["provenance"]["revision"],
            "code-size": re.search(r"revision `([0-9a-f]+)`", read("code-size.md")).group(1),
            "verification": re.search(r"revision:?\s*`([0-9a-f]+)`", verification).group(1),
            **({"sweep": sweep["git_revision"]} if sweep else {}),
            **({"keepup": keepup["provenance"]["revision"]} if keepup else {}),
            **({"matched-reads": matched["meta"]["revision"]} if matched else {}),
        },
    }


def row(report, strategy):
    """The fast row of a gate (upstream's only row) in one compare report."""
    for r in report["rows"]:
        if r["strategy"] == strategy and r["fast_path"] in (True, None):
            return r
    raise SystemExit(f"decision: no {strategy} row in a compare report")


def paired(report, strategy, measure):
    """The paired ratio record `strategy fast <measure> vs upstream`."""
    name = f"{strategy} fast {measure} vs {UPSTREAM}"
    for r in report["ratios"]:
        if r["name"] == name:
            return r
    raise SystemExit(f"decision: no ratio named {name!r}")


def ratio(record):
    low, high = record["range"]
    return f"{record['median']:.2f}×, {low:.2f}–{high:.2f}"


def median(values):
    return statistics.median(values)


def grouped(n):
    return f"{round(n):,}"


def storm(benches, strategy):
    """Reader p99 alone and under the decode storm (ns) and the storm's
    writer rate (M appends/s): medians of the export's runs."""
    runs = benches["mixed_1r1w"]
    return (median(runs[f"{strategy}/no_writer"]["p99"]),
            median(runs[f"{strategy}/decode_storm"]["p99"]),
            median(runs[f"{strategy}/writer"]["rate"]))


def fed(benches, strategy):
    """Whether the export has the gate's pair driven through a feeder and
    one lane thread, as upstream's is (mixed_1r1w's `-fed` ids)."""
    return f"{strategy}-fed/decode_storm" in benches["mixed_1r1w"]


def storm_caveat(data):
    """The sentence saying which storm figures compare with upstream's."""
    benches = data["benches"]
    upstream_rate = storm(benches, UPSTREAM)[2]
    gates = [o[1] for o in OPTIONS if o[1] != UPSTREAM]
    if all(fed(benches, g) for g in gates):
        rates = [storm(benches, f"{g}-fed")[2] for g in gates]
        return (f"upstream's storm writer runs through a feeder and its lane thread "
                f"({upstream_rate:.2f} M appends/s), and so do our gates' \"fed\" figures "
                f"({min(rates):.2f}–{max(rates):.2f} M): compare upstream with those; the first "
                "pair drives our tree directly and has no upstream counterpart")
    rates = [storm(benches, g)[2] for g in gates]
    return (f"in the storm column upstream's writer ran at {upstream_rate:.2f} M appends/s "
            f"through a feeder thread against {min(rates):.2f}–{max(rates):.2f} M for ours, "
            "driven directly, so its storm p99 is not comparable with ours")


def verification(steps, part):
    """Loom, shuttle and miri status of one gate family from verification.md."""
    def segment(step):
        for piece in steps.get(step, "").split(" | "):
            found = re.search(rf"(?:^|: ){part}: (.*)", piece)
            if found:
                return found.group(1)
        raise SystemExit(f"decision: verification.md's {step} line has no {part} part")
    loom = re.search(r"(\d+) models, (\d+) executions.*mutants (\d+) of (\d+) caught",
                     segment("loom"))
    shuttle = re.search(r"(\d+) schedules.*mutants (\d+) of (\d+) caught", segment("shuttle"))
    # .ci/miri.sh: "miri: N test runs (K once, M in S more seeds), U UB"; older results
    # files say "(K once, C concurrent x S more seeds)".
    miri = re.search(r"(\d+) test runs \(([^)]*)\), (\d+) UB", steps["miri"])
    if miri is None:
        raise SystemExit(f"decision: verification.md's miri line is not understood: "
                         f"{steps['miri']!r}")
    return (f"loom {loom[1]} models, {int(loom[2]):,} executions, mutants {loom[3]}/{loom[4]}; "
            f"shuttle {int(shuttle[1]):,} schedules, mutants {shuttle[2]}/{shuttle[3]}; "
            f"miri {miri[3]} UB in {miri[1]} test runs ({miri[2]})")


def table_row(data, option):
    label, strategy, code_part, check_part = option
    trace = data["compare"]["mooncake"]
    r = row(trace, strategy)
    alone, stormy, rate = storm(data["benches"], strategy)
    readers = f"{grouped(alone)} / {grouped(stormy)} ({rate:.2f} M/s)"
    if fed(data["benches"], strategy):
        f_alone, f_storm, f_rate = storm(data["benches"], f"{strategy}-fed")
        readers += f"; fed: {grouped(f_alone)} / {grouped(f_storm)} ({f_rate:.2f} M/s)"
    if strategy == UPSTREAM:
        cpu = f"{grouped(r['cpu_ns_per_event'])} (1×)"
        capacity = f"{grouped(r['events_per_s'])} (1×)"
        size, checked = "not counted", "upstream's own tests; not checked here"
    else:
        cpu = grouped(r["cpu_ns_per_event"])
        cpu += f" ({ratio(paired(trace, strategy, 'lane CPU/event'))})"
        capacity = f"{grouped(r['events_per_s'])} ({ratio(paired(trace, strategy, 'events/s'))})"
        part = data["code"][code_part]
        size = f"{part['lines']} / {part['unsafe']}"
        checked = verification(data["steps"], check_part)
    return (f"| {label} | {cpu} | {capacity} | {readers} | {r['bytes_per_membership']:.1f} "
            f"| {size} | {checked} |")


def strongest(data):
    """The recommendation's three numbers: RwLock fast against upstream on
    every workload (lane CPU and capacity, paired medians; heap per
    membership, upstream's over ours)."""
    cpu, cap, heap, unswept = [], [], [], []
    for w in WORKLOADS:
        report = data["compare"][w]
        cpu.append(paired(report, "rwlock", "lane CPU/event")["median"])
        cap.append(paired(report, "rwlock", "events/s")["median"])
        up, ours = row(report, UPSTREAM), row(report, "rwlock")
        heap.append(up["bytes_per_membership"] / ours["bytes_per_membership"])
        if up.get("unswept_bytes_per_membership") and ours.get("unswept_bytes_per_membership"):
            unswept.append(up["unswept_bytes_per_membership"]
                           / ours["unswept_bytes_per_membership"])
    premises = {"lane CPU below upstream's on every workload": max(cpu) < 1,
                "capacity above upstream's on every workload": min(cap) > 1,
                "the fewest gate lines": data["code"]["RwLock gate"]["lines"]
                == min(data["code"][o[2]]["lines"] for o in OPTIONS if o[2]),
                "no unsafe block": data["code"]["RwLock gate"]["unsafe"] == 0}
    for premise, holds in premises.items():
        if not holds:
            raise SystemExit(f"decision: the recommendation's premise ({premise}) no longer "
                             "holds in these results; revise papers/decision.py's verdict")
    span = lambda values, fmt: f"{fmt.format(min(values))}–{fmt.format(max(values))}×"
    if len(unswept) == len(WORKLOADS):
        memory = (f"{span(heap, '{:.1f}')} less heap per membership with both trees swept and "
                  f"{span(unswept, '{:.1f}')} with neither swept (upstream's over ours)")
    else:
        memory = (f"{span(heap, '{:.1f}')} less heap per membership (upstream's over ours; "
                  "these results predate the like-for-like pair: ours swept, upstream's not, "
                  "so the ratio overstates ours)")
    return span(cpu, "{:.2f}"), span(cap, "{:.2f}"), memory


def sweep_sentence(sweep):
    """The best gate on upstream's expanded trace (mooncake-sweep.json), paired
    with upstream window by window; empty when the sweep did not run (no
    trace)."""
    if not sweep:
        return ""
    judged = [s for s in sweep["paired_summary"] if s["capacity_ratio"]
              and s["strategy"] in {option[1] for option in OPTIONS}]
    if not judged:
        return ""
    best = max(judged, key=lambda s: s["capacity_ratio"]["median"])
    cap, cpu = best["capacity_ratio"], best["lane_cpu_ratio"]
    shape, windows = sweep["shape"], sorted({r["window_ms"] for r in sweep["rows"]})
    return (
        f" On upstream's own benchmark terms ([results/mooncake-sweep.md]"
        f"(results/mooncake-sweep.md): the trace expanded as `mooncake_bench` does, "
        f"{shape['num_unique_inference_workers']} workers, hash space "
        f"×{shape['trace_duplication_factor']}, length ×{shape['trace_length_factor']}; "
        f"{len(windows)} windows of {windows[0] / 1000:g}–{windows[-1] / 1000:g} s, each row "
        f"paired with upstream's in its window), {best['strategy']} has "
        f"{cap['median']:.2f}× upstream's capacity ({cap['min']:.2f}–{cap['max']:.2f} over the "
        f"{cap['count']} windows neither kept up) at {cpu['median']:.2f}× its lane CPU per "
        "event.")


# The offered rate on chat at which issue 43 compares readers (keepup.json).
MATCHED_RATE = 200_000


def keepup_readers(keepup):
    """Each gate's read p50 and p99 over upstream's at MATCHED_RATE in the
    keep-up curves, with its bound; empty when the curves lack that rate or
    upstream saturated there."""
    if not keepup:
        return {}
    rate = str(MATCHED_RATE)
    up = keepup["rows"].get(UPSTREAM, {}).get(rate)
    if not up or not kept_up(up):
        return {}
    out = {}
    for option in OPTIONS[:-1]:
        mine = keepup["rows"].get(option[1], {}).get(rate)
        if mine and mine.get("read_p50_ns") and up.get("read_p50_ns"):
            bound = EPOCH_READ_BOUND if option[3] == "epoch" else READ_BOUND
            out[option[1]] = (mine["read_p50_ns"] / up["read_p50_ns"],
                              mine["read_p99_ns"] / up["read_p99_ns"], bound)
    return out


def verdict(ok):
    """A bound's verdict word, as targets.md writes it."""
    return "met" if ok else "missed"


def read_only_clause(spans):
    """The read-only half of the reader sentence from each workload's span of
    the gates' paired medians, {workload: (p50s, p99s)}: which workloads meet
    issue 43's bound at both percentiles on every gate, which do not."""
    met = [w for w, (p50, p99) in spans.items() if max(p50 + p99) <= READ_BOUND]
    missed = [w for w in spans if w not in met]
    if not missed:
        lead = "The reader beats upstream on every workload"
    elif not met:
        lead = "The reader is where crtc does not beat upstream"
    else:
        lead = (f"The reader beats upstream on {' and '.join(met)}, not on "
                f"{' or '.join(missed)}")
    parts = "; ".join(
        f"{w} {min(p50):.2f}–{max(p50):.2f}× / {min(p99):.2f}–{max(p99):.2f}× "
        f"({verdict(w in met)})" for w, (p50, p99) in spans.items())
    return (f"{lead}: `find_matches` on the drained final trees, both swept, over upstream's "
            f"p50 / p99 (every gate's fast row, paired medians; issue 43's bound "
            f"{READ_BOUND}× at both): {parts}")


def matched_clause(matched):
    """The beside-the-writer half of the reader sentence from
    matched-reads.json: each workload's gates' paired read p50 / p99 medians
    over upstream's at issue 43's rate for it, and the workloads where every
    gate meets its bound."""
    parts, met, missed = [], [], []
    for result in matched["results"]:
        gates = result["gates"]
        if not gates:
            continue
        cells = ", ".join(f"{g['gate']} {g['p50'][0]:.2f}× / {g['p99'][0]:.2f}×" for g in gates)
        parts.append(f"{result['workload']} at {result['rate']:,} events/s {cells}")
        ok = all(g["verdict"] == "met" for g in gates)
        (met if ok else missed).append(result["workload"])
    if not parts:
        return ""
    judged = "; ".join(f"{word} on {' and '.join(names)}"
                       for word, names in (("met", met), ("missed", missed)) if names)
    return (f"; beside the writer at issue 43's matched rates "
            f"([results/matched-reads.md](results/matched-reads.md), medians of ratios paired "
            f"within each repeat), read p50 / p99 over upstream's: {'; '.join(parts)} (bounds "
            f"{READ_BOUND}×, epoch gates {EPOCH_READ_BOUND}×: {judged})")


def reader_sentence(data):
    """find_matches against upstream's: read-only on like-for-like trees
    (paired medians per workload over every gate) and beside the writer at
    the matched rate, each against issue 43's bound."""
    spans = {}
    for w in WORKLOADS:
        spans[w] = tuple(
            [paired(data["compare"][w], option[1], f"read-only {q}")["median"]
             for option in OPTIONS[:-1]] for q in ("p50", "p99"))
    text = read_only_clause(spans)
    if data.get("matched"):
        return text + matched_clause(data["matched"]) + "."
    beside = keepup_readers(data["keepup"])
    if beside:
        parts = ", ".join(f"{name} {a:.2f}× / {b:.2f}×" for name, (a, b, _) in beside.items())
        met = all(a <= bound and b <= bound for a, b, bound in beside.values())
        text += (
            f"; beside the writer at a matched {MATCHED_RATE:,} events/s on chat "
            f"([results/keepup.md](results/keepup.md)), read p50 / p99 over upstream's: "
            f"{parts} (bounds {READ_BOUND}×, epoch gates {EPOCH_READ_BOUND}×: {verdict(met)})")
    return text + "."


def page(data):
    """The whole of papers/README.md."""
    cpu, cap, heap = strongest(data)
    by_revision = {}
    for kind, rev in data["revisions"].items():
        by_revision.setdefault(rev[:7], []).append(kind)
    revisions = "; ".join(f"`{rev}` ({', '.join(kinds)})" for rev, kinds in by_revision.items())
    repeats = paired(data["compare"]["mooncake"], "rwlock", "events/s")["repeats"]
    rw = data["code"]["RwLock gate"]
    shared = data["code"]["reclaimers (crossbeam-epoch, seize, checker)"]
    index = data["code"]["edge index shared by seqlock and epoch"]
    soak = re.search(r"(\d+) passed; (\d+) failed", data["steps"]["soak"])
    lines = [
        "# Which shape gate to adopt: the decision",
        "",
        "Generated by `python3 papers/decision.py` from `papers/results/`; do not edit "
        "(`papers/check_figures.py`, run by `.ci/run`, fails when this page differs from what "
        f"the generator writes). The results it reads are at revision {revisions}.",
        "",
        "**Adopt the RwLock gate with the one-lock decode fast path by default.** Its three "
        "strongest numbers, against upstream 1.6.1 on agentx, chat and the Mooncake trace "
        f"(medians of ratios paired within each of {repeats} repeats): lane CPU per event {cpu} "
        f"upstream's, capacity {cap} upstream's, and {heap}. It also has the fewest gate lines and no `unsafe` block "
        f"({rw['lines']} lines, {rw['unsafe']} blocks). Take the seqlock gate instead only "
        "where a reader's tail latency while a writer decodes on its leaf matters more than "
        "its extra code and `unsafe` blocks ([evaluation.md](evaluation.md), recommendation "
        f"2).{sweep_sentence(data['sweep'])}",
        "",
        "What the figures do not say: every ratio is against the 1.6.1 release, and upstream "
        "main already has several of the causes ([upstream-main.md](upstream-main.md)); "
        f"{storm_caveat(data)}; [results/targets.md](results/targets.md) judges every "
        f"target, and {data['missed'][0]} of its {data['missed'][1]} verdicts are misses.",
        "",
        reader_sentence(data),
        "",
        "| option | lane CPU ns/event, trace (× upstream: paired median, range) | capacity "
        "events/s, trace (× upstream) | reader p99 ns alone / under decode storm (storm "
        "writer) | bytes per membership, trace | gate lines / `unsafe` blocks | verification |",
        "|---|---:|---:|---:|---:|---:|---|",
        *[table_row(data, option) for option in OPTIONS],
        "",
        "Trace columns: fast rows of [results/mooncake.md](results/mooncake.md) (1 lane, "
        "1 reader; medians of the repeats). Reader p99: criterion `mixed_1r1w`, medians of its "
        "runs ([results/benches.md](results/benches.md)). Code: "
        f"[results/code-size.md](results/code-size.md); the epoch gates also use the "
        f"reclaimers ({shared['lines']} lines, {shared['unsafe']} `unsafe` blocks), seqlock "
        f"and epoch share the edge index ({index['lines']} lines, {index['unsafe']}). "
        f"Verification: [results/verification.md](results/verification.md), which also has "
        f"the differential proptests ({data['steps']['proptest'].removeprefix('proptest: ')}) "
        f"and the long soak ({soak[1]} gates passed, {soak[2]} failed).",
        "",
        "Detail: [evaluation.md](evaluation.md) (the argument), "
        "[results/targets.md](results/targets.md) (every target), "
        "[upstream-main.md](upstream-main.md) (which gains main already has), "
        "[protocols.md](protocols.md), [porting.md](porting.md), "
        "[profile-mooncake.md](profile-mooncake.md), [choices.md](choices.md); "
        "[regenerate.sh](regenerate.sh) regenerates all of it.",
    ]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=RESULTS)
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = page(load(args.results))
    if not args.check:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        print("wrote", args.out, file=sys.stderr)
        return 0
    current = open(args.out, encoding="utf-8").read() if os.path.exists(args.out) else ""
    if current == text:
        return 0
    sys.stdout.writelines(difflib.unified_diff(
        current.splitlines(True), text.splitlines(True), args.out, "decision.py would write"))
    return 1


if __name__ == "__main__":
    sys.exit(main())
