"""What the generators under papers/ share: how they run commands, what they
record about a run, and how a table cell shows a median with its range.
Imported by bench-export.py, keepup.py, scaling.py, instructions.py, profile-find-matches.py,
lookup-split.py, matched-reads.py, profile-mooncake.py and memory-floor.py (run as
`python3 papers/<script>.py`, so this directory is on the import path).

The revision and the tree's state are read when `provenance` is called; the
generators call it before they write anything, so writing their output cannot
mark the tree dirty.
"""
import datetime
import glob
import hashlib
import json
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The features every generator builds crtc-bench with; mimalloc (the
# allocator) is crtc-bench's default feature and comes on top.
FEATURES = "all-strategies,upstream"
# The shared synthetic Mooncake trace, beside the repository (never committed).
DEFAULT_TRACE = os.path.join(ROOT, "..", "shared", "traces", "mooncake_synthetic.jsonl")
# Issue 43's bounds on a gate's reader over upstream's, read-only and beside
# the writer at a matched offered rate; the epoch gates' bound is looser.
READ_BOUND = 0.8
EPOCH_READ_BOUND = 1.0
READ_BOUNDS = {"rwlock": READ_BOUND, "seqlock": READ_BOUND,
               "epoch-crossbeam": EPOCH_READ_BOUND, "epoch-seize": EPOCH_READ_BOUND}


def run(cmd, **kw):
    """Runs `cmd` in the repository root; its stdout, or an exception."""
    return subprocess.run(cmd, cwd=ROOT, check=True, text=True, capture_output=True, **kw).stdout


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def topology():
    """Sockets, physical cores, threads per core and whether logical cores
    share a physical core, from /sys/devices/system/cpu (as `crtc compare`
    reads it); a dict with "logical" only when /sys is unreadable."""
    cpus = sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology"))
    packages, cores = set(), set()
    for path in cpus:
        try:
            with open(os.path.join(path, "physical_package_id")) as f:
                package = f.read().strip()
            with open(os.path.join(path, "core_id")) as f:
                cores.add((package, f.read().strip()))
            packages.add(package)
        except OSError:
            return {"logical": os.cpu_count()}
    logical = len(cpus) or os.cpu_count()
    physical = max(len(cores), 1)
    return {"logical": logical, "sockets": len(packages), "cores": physical,
            "threads_per_core": logical // physical, "smt_siblings": logical > physical}


def describe_topology(t):
    if "cores" not in t:
        return f"{t['logical']} logical cores (topology unreadable)"
    share = ("logical cores share physical cores (SMT siblings)" if t["smt_siblings"]
             else "no two logical cores share a physical core")
    return (f"{t['sockets']} socket(s), {t['cores']} physical core(s), "
            f"{t['threads_per_core']} thread(s) per core, {t['logical']} logical: {share}")


def trace_origin(path):
    """`path`, its SHA-256 and the paragraph of the README beside it that
    names it (the trace's origin)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    origin = "unrecorded"
    readme = os.path.join(os.path.dirname(path), "README.md")
    if os.path.exists(readme):
        with open(readme) as f:
            for paragraph in f.read().split("\n\n"):
                if os.path.basename(path) in paragraph and not paragraph.startswith("#"):
                    origin = " ".join(paragraph.split())
                    break
    return f"{os.path.basename(path)}, sha256 {digest.hexdigest()} (origin: {origin})"


def provenance(script, argv, **fields):
    """Command, revision, rustc, date, machine, topology, kernel, allocator
    and features of this run, with the generator's own `fields` (in order)
    before the features (a field named like a standard one replaces it)."""
    revision = run(["git", "rev-parse", "HEAD"]).strip()
    dirty = bool(run(["git", "status", "--porcelain", "--untracked-files=no"]).strip())
    standard = {
        "command": f"python3 papers/{script} " + " ".join(argv),
        "revision": revision + (" (with uncommitted changes)" if dirty else ""),
        "rustc": run(["rustc", "-V"]).strip(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{os.cpu_count()} logical cores, {cpu_model()}, 1-minute load average "
                   f"{os.getloadavg()[0]:.2f} at start",
        "topology": describe_topology(topology()),
        "kernel": platform.release(),
        "allocator": "mimalloc (crtc-bench's default feature mimalloc)",
    }
    return {
        **standard,
        **fields,
        "features": FEATURES + " (plus crtc-bench's default feature mimalloc: the allocator)",
    }


def kept_up(row):
    """Whether a keep-up row's backlog at its window's end is within 1% of the
    events it was offered (a row beyond that is saturated)."""
    return (row.get("backlog_at_end") or 0) <= 0.01 * row["events"]


def cell(row, key, scale=1.0, fmt="{:.0f}"):
    """`row[key] / scale` formatted, with the repeats' min-max when there
    were several; an en dash when the row or the figure is missing."""
    value = row.get(key) if row else None
    if value is None:
        return "–"
    text = fmt.format(value / scale)
    low_high = row.get("spread", {}).get(key)
    if low_high and row.get("repeats", 1) > 1:
        text += f" ({fmt.format(low_high[0] / scale)}–{fmt.format(low_high[1] / scale)})"
    return text


def span(values, fmt="{:.2f}", unit=""):
    """`[median, low, high]` as "median<unit> (low–high)"."""
    mid, low, high = (fmt.format(v) for v in values)
    return f"{mid}{unit} ({low}–{high})"


def heading(title, meta, prose):
    """A results page's opening lines: its title, its provenance as a list,
    then a paragraph of `prose`."""
    return [f"# {title}", "", *(f"- {key}: {value}" for key, value in meta.items()), "",
            prose, ""]


def load_script(name):
    """The generator `papers/<name>` as a module (its file name has a hyphen,
    so tests cannot import it by name)."""
    import importlib.util
    path = os.path.join(ROOT, "papers", name)
    spec = importlib.util.spec_from_file_location(name.replace("-", "_")[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def workloads(script, names, scale, trace):
    """`(name, crtc workload arguments)` for each comma-separated name: a
    preset at `scale`, or `trace` for "trace", skipped with a note on stderr
    when the trace file is absent."""
    for name in names.split(","):
        if name != "trace":
            yield name, ["--workload", name, "--scale", scale]
        elif os.path.exists(trace):
            yield name, ["--trace", trace]
        else:
            print(f"{script}: no trace at {trace}; skipped", file=sys.stderr)


def trace_field(names, trace):
    """`{"trace": origin}` when the comma-separated workload `names` include
    the trace and it is present; nothing otherwise."""
    if "trace" in names.split(",") and os.path.exists(trace):
        return {"trace": trace_origin(trace)}
    return {}


def sources(script, names, trace):
    """`(name, source)` for each comma-separated workload name: a preset's
    name is its own source, "trace" is `trace`'s path, skipped with a note on
    stderr when the file is absent (for the examples that take either)."""
    for name in names.split(","):
        if name != "trace":
            yield name, name
        elif os.path.exists(trace):
            yield name, trace
        else:
            print(f"{script}: no trace at {trace}; skipped", file=sys.stderr)


def write_results(out, stem, meta, results, text):
    """Writes `stem.json` (meta and results) and `stem.md` (`text`) into `out`."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{stem}.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    with open(os.path.join(out, f"{stem}.md"), "w") as f:
        f.write(text)
