#!/usr/bin/env python3
"""Per-row attribution of lane-thread samples from `perf script --inline` of a
`crtc compare` run. Rows are identified by the order in which lane thread
pairs first appear (the compare row order); upstream's lane threads are the
unnamed `crtc` threads whose stacks name dynamo_kv_router."""
import re, sys, collections

ROWS = ["rwlock on", "rwlock off", "seqlock on", "seqlock off",
        "epoch-crossbeam on", "epoch-crossbeam off", "epoch-seize on", "epoch-seize off"]
ALLOC = re.compile(r"^(malloc|free|cfree|realloc|calloc|_int_malloc|_int_free|_int_realloc|malloc_consolidate|__rust_alloc|__rust_dealloc|__rust_realloc|__libc_malloc|__libc_free|__libc_calloc|__libc_realloc|unlink_chunk|tcache_\w+|alloc_perturb|_int_free_merge_chunk|_int_free_create_chunk|_int_free_maybe_consolidate|__memcpy\w*|__memmove\w*|__memset\w*|sysmalloc|brk|__default_morecore)")
RULES = [
    ("reclamation", re.compile(r"crossbeam_epoch|seize::|::reclaim::|Reclaim>::(pin|defer|flush|protect)")),
    ("edge index", re.compile(r"edge_index|EdgeIndex|AtomicIndex")),
    ("fast path", re.compile(r"tail_append|try_fast_append")),
    ("coverage", re.compile(r"SlotBits|::bits::|promote_full|cut_at|drop_slot|set_cutoff|insert_full|remove_full|remove_cutoff|take_cutoffs|demot|cover_child|covered_len|::cutoff|is_full|for_each_cutoff|has_full|has_holders|Cover")),
    ("child lookup", re.compile(r"::children::|child_step")),
    ("lane entries", re.compile(r"::lane::|Lane<G>>::|Lane<G>::")),
    ("rank slots", re.compile(r"::slots::")),
    ("gate sync", re.compile(r"parking_lot|RawRwLock|lock_shared|lock_exclusive|unlock_|::seqlock::|Backoff|spin_loop|::sync::")),
    ("removal walk", re.compile(r"::tree::remove::")),
    ("planning/commit", re.compile(r"::tree::store|place_at_parent|plan_after|commit_after|place_below|absorb_on_edge|split_node|extend_leaf|insert_child|apply_stored|shared_commit|exclusive_commit|plan_read|::shape::|::rwlock::|::epoch::")),
    ("event dispatch", re.compile(r"::indexer::|mpsc|apply_event|Tree<G>::")),
]

def samples(path):
    head, stack = None, []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if head:
                    yield head, stack
                head, stack = None, []
            elif head is None:
                head = line.split()
            else:
                parts = line.strip().split(None, 1)
                if len(parts) == 2:
                    yield_sym = re.sub(r" \(inlined\)$", "", parts[1])
                    stack.append(yield_sym)
    if head:
        yield head, stack

def classify(stack):
    for f in stack:
        if ALLOC.search(f):
            return "allocation", f
        for name, rx in RULES:
            if rx.search(f):
                return name, f
    return "other", stack[0] if stack else "?"

UPSTREAM_RULES = [
    ("lane entries", re.compile(r"lookup")),
    ("edge index", re.compile(r"edge_index|edge_hash|contains_edge")),
    ("event dispatch", re.compile(r"enqueue|thread_pool|channel")),
    ("coverage", re.compile(r"worker|cover|full|cutoff")),
    ("child lookup", re.compile(r"child")),
]

def classify_upstream(stack):
    """Upstream's samples by the innermost dynamo_kv_router frame's name."""
    first = stack[0] if stack else "?"
    if ALLOC.search(first):
        return "allocation", first
    inner = next((f for f in stack if "dynamo_kv_router" in f), "?")
    cat = next((name for name, rx in UPSTREAM_RULES if rx.search(inner)), "upstream")
    return cat, inner

def main(paths):
    counts = collections.defaultdict(collections.Counter)
    tops = collections.defaultdict(collections.Counter)
    for path in paths:
        lane_order, row_of = [], {}
        for head, stack in samples(path):
            comm, tid = head[0], head[1]
            if comm.startswith("crtc-lane"):
                if tid not in row_of:
                    lane_order.append(tid)
                    row_of[tid] = ROWS[min((len(lane_order) - 1) // 2, len(ROWS) - 1)]
                row = row_of[tid]
            elif comm.startswith("crtc-glock"):
                row = "global-lock"
            elif comm == "crtc" and any("dynamo_kv_router" in f for f in stack) and not any("find_matches" in f for f in stack):
                row = "upstream-1.6.1"
            else:
                continue
            if row == "upstream-1.6.1":
                cat, top = classify_upstream(stack)
            else:
                cat, top = classify(stack)
            counts[row][cat] += 1
            tops[row][re.sub(r"<.*?>", "<>", top)[:110]] += 1
    cats = [n for n, _ in RULES] + ["allocation", "upstream", "other"]  # "upstream": its other tree code
    print("| row | lane samples | " + " | ".join(cats) + " |")
    print("|---|---:|" + "---:|" * len(cats))
    order = ROWS + ["global-lock", "upstream-1.6.1"]
    for row in order:
        total = sum(counts[row].values())
        if not total:
            continue
        print(f"| {row} | {total} | " + " | ".join(f"{100 * counts[row][c] / total:.1f}" for c in cats) + " |")
    for row in order:
        total = sum(tops[row].values())
        if not total:
            continue
        print(f"\n{row}: top frames")
        for sym, n in tops[row].most_common(14):
            print(f"  {100 * n / total:5.1f}%  {sym}")

main(sys.argv[1:])
