#!/usr/bin/env python3
"""Keep-up curves: update latency and backlog at several offered rates, per
strategy (every gate with the fast path on, and upstream 1.6.1), written to
papers/results/keepup.md, keepup.json and keepup-update-p99.svg.

Usage: python3 papers/keepup.py [--workload chat|agentx] [--scale S]
       [--rates R1,R2,...] [--window-s W] [--repeat N] [--out DIR]
       python3 papers/keepup.py --render DIR/keepup.json [--out DIR]
           (rewrites keepup.md and the chart from a run's JSON, keeping its
           provenance; no measurement)

Each rate is one `crtc compare --mode keepup` run (built with
--features all-strategies,upstream) over every row, each row measured N
times round-robin (--repeat N): figures are medians with min-max. Update
latency is compare's upper bound of enqueue-to-applied (a flush round trip
behind sampled events); backlog is what the lanes had not applied when the
window closed. A rate a row cannot sustain shows as a growing backlog and
update latency; the saturation point is the first rate whose backlog at
window end exceeds 1% of the events offered. Runs use compare's default
lanes and readers (never more busy threads than cores). The revision and the
tree's state are read before anything is written.
"""
import argparse
import json
import math
import os
import sys
import tempfile

from generator import FEATURES, READ_BOUNDS, ROOT, cell, kept_up, provenance, run

BINARY = os.path.join(ROOT, "target", "release", "crtc")
DEFAULT_RATES = "20000,80000,160000,200000,320000,480000,640000,960000,1280000"
UPSTREAM = "upstream-1.6.1"
COLOURS = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02"]


def describe(args, argv):
    return provenance(
        "keepup.py", argv,
        workload=f"{args.workload} preset, scale {args.scale}",
        window=f"{args.window_s} s per row",
        repeats=args.repeat,
    )


def keepup(args, rate):
    """Rows of one keep-up run at `rate`: {label: row}."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [BINARY, "compare", "--mode", "keepup", "--workload", args.workload,
               "--scale", str(args.scale), "--rate", str(rate), "--window-s", str(args.window_s),
               "--repeat", str(args.repeat), "--json", out.name]
        print("running:", " ".join(cmd), file=sys.stderr)
        run(cmd)
        with open(out.name) as f:
            report = json.load(f)
    rows = {}
    for row in report["rows"]:
        if row["mode"] != "keepup" or row["fast_path"] is False:
            continue
        rows[row["strategy"]] = row
    return rows


def saturated(row):
    """Backlog at window end above 1% of the events the row offered."""
    return not kept_up(row)


def table(curves, rates):
    out = []
    for strategy, by_rate in curves.items():
        out += [f"### {strategy}", "",
                "| offered events/s | achieved events/s | update p50 µs | update p99 µs | backlog at end |",
                "|---:|---:|---:|---:|---:|"]
        for rate in rates:
            row = by_rate.get(rate)
            if not row:
                continue
            mark = " (saturated)" if saturated(row) else ""
            out.append(f"| {rate:,} | {cell(row, 'events_per_s')} | "
                       f"{cell(row, 'update_p50_ns', 1000, '{:.1f}')} | "
                       f"{cell(row, 'update_p99_ns', 1000, '{:.1f}')} | "
                       f"{row.get('backlog_at_end')}{mark} |")
        out.append("")
    return out


def readers(curves, rates):
    """The readers beside the writer at each rate upstream keeps up with:
    every strategy's run read p50 and p99 over upstream's (ratios of the
    repeats' medians), judged against READ_BOUNDS."""
    out = ["| offered events/s | strategy | read p50 ns | read p99 ns | p50 ÷ upstream | "
           "p99 ÷ upstream | issue 43 bound | verdict |", "|---:|---|---:|---:|---:|---:|---:|---|"]
    for rate in rates:
        up = curves.get(UPSTREAM, {}).get(rate)
        if not up or saturated(up) or not up.get("read_p50_ns") or not up.get("read_p99_ns"):
            continue
        for strategy, by_rate in curves.items():
            row = by_rate.get(rate)
            if strategy == UPSTREAM or not row or not row.get("read_p50_ns"):
                continue
            p50 = row["read_p50_ns"] / up["read_p50_ns"]
            p99 = row["read_p99_ns"] / up["read_p99_ns"]
            bound = READ_BOUNDS.get(strategy)
            verdict = "-" if bound is None else ("met" if max(p50, p99) <= bound else "missed")
            out.append(f"| {rate:,} | {strategy} | {row['read_p50_ns']} | {row['read_p99_ns']} | "
                       f"{p50:.2f}× | {p99:.2f}× | {bound if bound else '-'} | {verdict} |")
    return out


def svg(curves, rates, path, header):
    """Update p99 (µs, log) against the offered rate (log), one line per
    strategy, error bars from the repeats' min-max; the header's command and
    revision in a comment."""
    width, height, left, right, top, bottom = 760, 440, 80, 200, 40, 60
    points = [(r, row["update_p99_ns"] / 1000, row.get("spread", {}).get("update_p99_ns"))
              for by_rate in curves.values() for r, row in by_rate.items()
              if row.get("update_p99_ns")]
    if not points:
        return
    ys = [p[1] for p in points] + [s[1] / 1000 for _, _, s in points if s]
    ylo, yhi = math.log10(min(ys) * 0.8), math.log10(max(ys) * 1.25)
    xlo, xhi = math.log10(min(rates) * 0.8), math.log10(max(rates) * 1.25)
    x = lambda v: left + (math.log10(v) - xlo) / (xhi - xlo) * (width - left - right)
    y = lambda v: height - bottom - (math.log10(v) - ylo) / (yhi - ylo) * (height - top - bottom)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<!-- generated by: {header["command"]}; revision: {header["revision"]} -->',
             f'<text x="{width / 2}" y="20" text-anchor="middle">Keep-up: update p99 against '
             f'offered rate (median of repeats, bars min-max)</text>',
             f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="black"/>',
             f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="black"/>',
             f'<text x="{(left + width - right) / 2}" y="{height - 15}" text-anchor="middle">'
             f'offered rate, events/s (log)</text>',
             f'<text x="18" y="{(top + height - bottom) / 2}" text-anchor="middle" '
             f'transform="rotate(-90 18 {(top + height - bottom) / 2})">update p99, µs (log)</text>']
    for rate in rates:
        parts.append(f'<text x="{x(rate):.1f}" y="{height - bottom + 16}" text-anchor="middle">'
                     f'{rate // 1000}k</text>')
    decade = math.floor(ylo)
    while decade <= yhi:
        v = 10 ** decade
        if ylo <= decade <= yhi:
            parts.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
            parts.append(f'<line x1="{left}" y1="{y(v):.1f}" x2="{width - right}" y2="{y(v):.1f}" '
                         f'stroke="#ddd"/>')
        decade += 1
    for i, (strategy, by_rate) in enumerate(curves.items()):
        colour = COLOURS[i % len(COLOURS)]
        line = [(r, row) for r, row in sorted(by_rate.items()) if row.get("update_p99_ns")]
        coords = " ".join(f"{x(r):.1f},{y(row['update_p99_ns'] / 1000):.1f}" for r, row in line)
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for r, row in line:
            spread = row.get("spread", {}).get("update_p99_ns")
            if spread:
                parts.append(f'<line x1="{x(r):.1f}" y1="{y(spread[0] / 1000):.1f}" x2="{x(r):.1f}" '
                             f'y2="{y(spread[1] / 1000):.1f}" stroke="{colour}"/>')
        ly = top + 20 + 18 * i
        parts.append(f'<line x1="{width - right + 10}" y1="{ly}" x2="{width - right + 30}" y2="{ly}" '
                     f'stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{width - right + 36}" y="{ly + 4}">{strategy}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    argv = sys.argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="chat", choices=["chat", "agentx"])
    parser.add_argument("--scale", type=float, default=4)
    parser.add_argument("--rates", default=DEFAULT_RATES)
    parser.add_argument("--window-s", type=float, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(ROOT, "papers", "results"))
    parser.add_argument("--render", metavar="JSON")
    args = parser.parse_args()
    if args.render:
        with open(args.render) as f:
            saved = json.load(f)
        header, rates = saved["provenance"], saved["rates"]
        curves = {s: {int(r): row for r, row in c.items()} for s, c in saved["rows"].items()}
    else:
        rates = sorted(int(r) for r in args.rates.split(","))
        header = describe(args, argv)
        run(["cargo", "build", "-q", "--release", "-p", "crtc-bench", "--features", FEATURES])
        curves = {}
        for rate in rates:
            for strategy, row in keepup(args, rate).items():
                curves.setdefault(strategy, {})[rate] = row
    write(args.out, header, rates, curves)


def write(out, header, rates, curves):
    doc = ["# Keep-up curves: update latency and backlog against the offered rate", ""]
    doc += [f"- {k}: {v}" for k, v in header.items()]
    doc += ["", "Generated; do not edit. `a (b–c)` is the median of the repeats (min–max). Update "
            "latency is an upper bound of enqueue-to-applied (compare's sampled flush probes); a "
            "row is marked saturated when its backlog at window end exceeds 1% of the events it "
            "offered (at high rates the stream ends before the window). Chart: "
            "keepup-update-p99.svg.", ""]
    doc += saturation(curves, rates) + [""]
    doc += ["## find_matches beside the writer, at rates upstream keeps up with", "",
            "Every row's readers during the keep-up window, against upstream's at the same "
            "offered rate (issue 43: RwLock and seqlock at most 0.8× upstream's p50 and p99, "
            "the epoch gates at most 1.0×). Ratios of the repeats' medians; rates where "
            "upstream saturated are left out.", ""]
    doc += readers(curves, rates) + ["", "## Each row's curve", ""] + table(curves, rates)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "keepup.md"), "w") as f:
        f.write("\n".join(doc))
    with open(os.path.join(out, "keepup.json"), "w") as f:
        json.dump({"provenance": header, "rates": rates,
                   "rows": {s: {str(r): row for r, row in c.items()} for s, c in curves.items()}},
                  f, indent=1, sort_keys=True)
    svg(curves, rates, os.path.join(out, "keepup-update-p99.svg"), header)
    print("wrote", os.path.join(out, "keepup.md"), file=sys.stderr)


def saturation(curves, rates):
    """One line per strategy: the highest rate it kept up with, the first it did not."""
    out = ["| strategy | highest rate kept up | first saturated rate |", "|---|---:|---:|"]
    for strategy, by_rate in curves.items():
        kept = [r for r in rates if r in by_rate and not saturated(by_rate[r])]
        lost = [r for r in rates if r in by_rate and saturated(by_rate[r])]
        out.append(f"| {strategy} | {max(kept):,} | {min(lost):,} |" if kept and lost else
                   f"| {strategy} | {max(kept, default=0):,} | {min(lost) if lost else 'none'} |")
    return out


if __name__ == "__main__":
    main()
