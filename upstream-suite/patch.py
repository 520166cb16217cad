#!/usr/bin/env python3
"""Turns a fresh copy of dynamo-kv-router 1.6.1 into the crtc upstream suite.

Usage: patch.py REGISTRY_SRC CRTC_DIR DEST

Run by .ci/upstream-suite.sh (nothing of upstream is committed here). It
copies the registry's crate REGISTRY_SRC to a staging directory next to
DEST and there

1. makes the copy its own workspace, adds the path dependency on crtc with
   every gate, drops the bench targets and criterion (the suite builds only
   the library's tests), turns debug info off, and gives it a build script
   (BUILD_SCRIPT) that sets the cfg `crtc_upstream_copy`, under which our
   module names the crate-private parts only the copy can reach;
2. adds our backend module (upstream-suite/crtc_backend.rs, next to this
   file) as `crate::indexer::crtc_backend`, with the test glue of
   upstream-suite/suite_glue.rs appended;
3. adds one rstest value per crtc gate (GATES) to every template of
   src/indexer/tests.rs that lists "concurrent_compressed", and the arms
   that build those variants in the tests' factories;
4. copies every test outside the templates that builds upstream's CRTC
   inside a ThreadPoolIndexer (POOL_FILES: the indexer suite's own, the
   CRTC tests', the pool's, the approximate-LRU lane's, the branch-sharded
   indexer's over CRTC shards and the shard handle's), with the helpers that
   build it, into one module per gate, `crtc_pool_<gate>`, in the same file,
   with our backend swapped in;
5. adds one value per gate to the KvIndexerDelegate tests
   (src/indexer/delegate_tests.rs) that list upstream's CRTC.

Every edit names the text it expects and how often; a mismatch (another
upstream version) stops the script instead of running a partial suite.
Then it syncs the staging copy into DEST, rewriting only the files whose
bytes changed (unchanged files keep their times, so cargo rebuilds nothing
when neither upstream nor our module changed) and keeping DEST/Cargo.lock
(seeded from CRTC_DIR/Cargo.lock on the first run, so the copy resolves the
versions the workspace uses).
"""

import pathlib
import re
import shutil
import sys

# Variant name -> type alias in crtc_backend::gates.
GATES = {
    "crtc_rwlock": "Rwlock",
    "crtc_seqlock": "Seqlock",
    "crtc_epoch": "Epoch",
    "crtc_seize": "Seize",
}

CRTC_CTOR = "ConcurrentRadixTreeCompressed::new()"
CRTC_POOL = "ThreadPoolIndexer<ConcurrentRadixTreeCompressed>"

# The files (under src/indexer) whose tests outside the templates build
# upstream's CRTC inside a ThreadPoolIndexer: how many tests each gate gets
# from them, whether their helpers that build it are copied too (the
# template files' factories are not: the templates cover them), and whether
# the gate modules go at the end of the file or inside its last module (the
# file's `mod tests`, whose private helpers they use).
POOL_FILES = [
    ("tests.rs", 3, False, "end"),
    ("concurrent_radix_tree_compressed/tests.rs", 10, False, "end"),
    ("thread_pool.rs", 5, True, "inside"),  # one needs the bench feature
    ("approximate_lru.rs", 1, True, "inside"),
    ("branch_sharded.rs", 19, True, "inside"),
    ("shard_handle.rs", 1, True, "inside"),
]


def fail(message):
    sys.exit(f"upstream-suite: patch.py: {message}")


def replace(text, old, new, count=1, what=None):
    found = text.count(old)
    if found != count:
        fail(f"expected {count} of {what or old!r}, found {found}")
    return text.replace(old, new)


def sub(text, pattern, repl, count, what):
    new, found = re.subn(pattern, repl, text)
    if found != count:
        fail(f"expected {count} of {what}, found {found}")
    return new


# The copy's build script: the cfg under which upstream-suite/crtc_backend.rs
# compiles its crate-private parts (its module docs).
BUILD_SCRIPT = """// Added by crtc's upstream-suite/patch.py.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(crtc_upstream_copy)");
    println!("cargo::rustc-cfg=crtc_upstream_copy");
}
"""


def patch_manifest(copy, crtc):
    path = copy / "Cargo.toml"
    text = path.read_text()
    text = replace(text, 'build = false\n', 'build = "crtc_build.rs"\n')
    (copy / "crtc_build.rs").write_text(BUILD_SCRIPT)
    # Only the library's unit tests are built: drop the bench targets and
    # criterion (which only they use, with plotters and rayon behind it),
    # and build without debug info, to keep the step's build short.
    text = sub(text, r"\[\[bench\]\]\n(?:[^\[\n][^\n]*\n|\n)*?(?=\[)", "", 5, "[[bench]] targets")
    text = sub(text, r"\[dev-dependencies\.criterion\]\nversion = \"0\.5\"\n\n", "", 1,
               "the criterion dev-dependency")
    text += "\n[profile.dev]\ndebug = false\n\n[profile.test]\ndebug = false\n"
    text += (
        "\n# Added by crtc's upstream-suite/patch.py.\n[workspace]\n\n"
        f'[dependencies.crtc]\npath = "{crtc}"\nfeatures = ["all-strategies"]\n'
    )
    path.write_text(text)


def patch_module(copy, here):
    backend = (here / "crtc_backend.rs").read_text()
    glue = (here / "suite_glue.rs").read_text()
    (copy / "src/indexer/crtc_backend.rs").write_text(backend + "\n" + glue)
    path = copy / "src/indexer/mod.rs"
    text = path.read_text()
    text = replace(text, "pub mod radix_tree;\n", "pub mod radix_tree;\npub mod crtc_backend;\n")
    path.write_text(text)


def add_template_values(text):
    values = ", ".join(f'"{name}"' for name in GATES)
    return sub(
        text,
        r'(#\[values\([^\]]*"concurrent_compressed")\)\]',
        rf"\1, {values})]",
        4,
        "template value lists naming concurrent_compressed",
    )


def add_factory_arms(text):
    glue = "crate::indexer::crtc_backend::suite"
    text = replace(
        text,
        '        _ => panic!("Unknown variant: {}", variant),\n    };\n\n    (indexer, metrics)',
        f"        v if {glue}::is_crtc(v) => {glue}::pool_with_metrics(v, 4, kv_block_size, "
        "metrics.clone()),\n"
        '        _ => panic!("Unknown variant: {}", variant),\n    };\n\n    (indexer, metrics)',
        what="make_indexer_with_metrics's fallback arm",
    )
    text = replace(
        text,
        '        _ => panic!("Unknown variant: {}", variant),\n    }\n}',
        f"        v if {glue}::is_crtc(v) => {glue}::pool_with_pruning(v, 4, kv_block_size, "
        "prune_config),\n"
        '        _ => panic!("Unknown variant: {}", variant),\n    }\n}',
        what="make_approx_indexer's fallback arm",
    )
    return text


# TreeSizeTestIndexer: our variant and its arm in every method that has one
# for ConcurrentCompressed.
SIZED_ARMS = {
    "apply_event": "Self::Crtc(index) => index.apply(event).await,",
    "flush": "Self::Crtc(index) => index.flush().await,",
    "tree_size_for_worker": "Self::Crtc(index) => index.block_count_for(worker).await,",
    "live_thread_pool_worker_count": "Self::Crtc(index) => Some(index.worker_count().await),",
    "scores": "Self::Crtc(index) => index.scores(&query),",
    "snapshot_tree": "Self::Crtc(index) => snapshot_events(index.dump().await),",
}


def add_sized_variant(text):
    glue = "crate::indexer::crtc_backend::suite"
    text = replace(
        text,
        "    ConcurrentCompressed(ThreadPoolIndexer<ConcurrentRadixTreeCompressed>),\n",
        "    ConcurrentCompressed(ThreadPoolIndexer<ConcurrentRadixTreeCompressed>),\n"
        f"    Crtc(Box<dyn {glue}::SizedPool>),\n",
    )
    text = replace(
        text,
        '            _ => panic!("Unknown tree-size test variant: {}", variant),',
        f"            v if {glue}::is_crtc(v) => Self::Crtc({glue}::sized_pool(v, 4, 4)),\n"
        '            _ => panic!("Unknown tree-size test variant: {}", variant),',
    )
    start = text.index("impl TreeSizeTestIndexer {")
    end = text.index("\nasync fn route_approx_tokens(", start)
    block = text[start:end]
    arm = "Self::ConcurrentCompressed(index) =>"
    out, pos, done = [], 0, set()
    for match in re.finditer(re.escape(arm), block):
        fn = re.findall(r"fn (\w+)", block[: match.start()])[-1]
        if fn not in SIZED_ARMS:
            fail(f"TreeSizeTestIndexer::{fn} has a ConcurrentCompressed arm this script does not know")
        line_start = block.rindex("\n", 0, match.start()) + 1
        indent = block[line_start : match.start()]
        out.append(block[pos:line_start])
        out.append(f"{indent}{SIZED_ARMS[fn]}\n")
        pos = line_start
        done.add(fn)
    out.append(block[pos:])
    if done != set(SIZED_ARMS):
        fail(f"TreeSizeTestIndexer arms missing for {sorted(set(SIZED_ARMS) - done)}")
    return text[:start] + "".join(out) + text[end:]


def patch_indexer_tests(copy):
    path = copy / "src/indexer/tests.rs"
    text = path.read_text()
    text = add_template_values(text)
    text = add_factory_arms(text)
    text = add_sized_variant(text)
    path.write_text(text)


def fn_items(text):
    """(name, source, is_test) of every fn of `text` not nested in another
    fn, its attribute lines included."""
    items, covered = [], 0
    for match in re.finditer(r"(?m)^[ \t]*(?:pub(?:\([^)]*\))? )?(?:async )?fn (\w+)\b", text):
        if match.start() < covered:
            continue
        body = text.index("{", match.end())
        semi = text.find(";", match.end())
        if semi != -1 and semi < body:
            continue
        start = match.start()
        while start > 0:
            above = text.rfind("\n", 0, start - 1) + 1
            if not text[above:start].strip().startswith("#["):
                break
            start = above
        depth, i = 1, body + 1
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        source = text[start:i]
        head = text[start : match.start()]
        items.append((match.group(1), source, "#[tokio::test]" in head or "#[test]" in head))
        covered = i
    return items


def crtc_aliases(text):
    """The type aliases of `text` that name upstream's CRTC, by name."""
    found = re.findall(r"(?m)^[ \t]*type (\w+) = ([^;]*ConcurrentRadixTreeCompressed[^;]*);", text)
    return dict(found)


def patch_delegate_tests(copy):
    """The KvIndexerDelegate suite: one value per gate in every value list
    naming upstream's CRTC ("compressed"), and their arm in its factory."""
    path = copy / "src/indexer/delegate_tests.rs"
    text = path.read_text()
    values = ", ".join(f'"{name}"' for name in GATES)
    text = sub(text, r'(#\[values\([^\]]*"compressed"[^\]]*)\)\]', rf"\1, {values})]", 5,
               "delegate value lists naming compressed")
    glue = "crate::indexer::crtc_backend::suite"
    text = replace(
        text,
        "        _ => unreachable!(),\n    }\n}",
        f"        v if {glue}::is_crtc(v) => {glue}::pool_with_delegate(v, 4, 32, delegate),\n"
        "        _ => unreachable!(),\n    }\n}",
        what="the delegate factory's fallback arm",
    )
    path.write_text(text)


def pool_items(text, helpers):
    """The fns of `text` to copy per gate: the tests that build upstream's
    CRTC in a pool (or name a type alias of it), with `helpers` also the
    helpers that do, and the tests that call a copied helper."""
    aliases = crtc_aliases(text)
    names = [CRTC_CTOR, CRTC_POOL, *(re.compile(rf"\b{a}\b") for a in aliases)]

    def builds(source):
        pooled = "ThreadPoolIndexer" in source or any(a in source for a in aliases)
        return pooled and any(n in source if isinstance(n, str) else n.search(source) for n in names)

    items = fn_items(text)
    chosen = {n for n, src, test in items if (test or helpers) and builds(src)}
    while True:
        calls = re.compile(r"\b(" + "|".join(map(re.escape, chosen)) + r")\(") if chosen else None
        more = {n for n, src, test in items
                if n not in chosen and (test or helpers) and calls and calls.search(src)}
        if not more:
            break
        chosen |= more
    return [(n, src, test) for n, src, test in items if n in chosen], aliases


GATE_MODULE = """
/// Added by crtc's upstream-suite/patch.py: the pool tests above on crtc's
/// {alias} gate.
mod crtc_pool_{gate} {{
    use super::*;
    use crate::indexer::crtc_backend::{{gates, CrtcBackend}};

    type Backend = CrtcBackend<gates::{alias}>;
{shadows}
    #[allow(dead_code)]
    async fn index_block_count(index: &ThreadPoolIndexer<Backend>) -> usize {{
        crate::indexer::KvIndexerInterface::shard_sizes(index)
            .await
            .into_iter()
            .map(|snapshot| snapshot.block_count)
            .sum()
    }}

    #[allow(dead_code)]
    fn assert_edge_lengths(index: &Backend, expected: &[usize]) {{
        assert_eq!(index.edge_lengths_for_test(), expected.to_vec());
    }}

{tests}
}}
"""


def swap(source):
    return source.replace(CRTC_CTOR, "Backend::new()").replace(CRTC_POOL, "ThreadPoolIndexer<Backend>")


def add_gate_modules(path, expected, helpers, placement):
    """Adds to `path` one module per gate with a copy of each fn
    `pool_items` picks, upstream's CRTC swapped for our backend; returns the
    names of the copied tests."""
    text = path.read_text()
    items, aliases = pool_items(text, helpers)
    tests = [name for name, _, test in items if test]
    if len(tests) != expected:
        fail(f"expected {expected} CRTC pool tests in {path.name}, found {len(tests)}: {tests}")
    body = "\n\n".join("    " + swap(source.strip()) for _, source, _ in items)
    shadows = "".join(f"    #[allow(dead_code)]\n    type {a} = {swap(t)};\n" for a, t in aliases.items())
    modules = "".join(
        GATE_MODULE.format(gate=variant.removeprefix("crtc_"), alias=alias, shadows=shadows, tests=body)
        for variant, alias in GATES.items()
    )
    if placement == "end":
        text += modules
    else:
        last = text.rstrip().rindex("}")
        text = text[:last] + modules + text[last:]
    path.write_text(text)
    return tests


def sync(staging, dest):
    """Makes dest equal to staging, touching only files whose bytes differ."""
    wanted = {p.relative_to(staging) for p in staging.rglob("*") if p.is_file()}
    for rel in sorted(wanted):
        src, dst = staging / rel, dest / rel
        data = src.read_bytes()
        if not dst.is_file() or dst.read_bytes() != data:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
    for path in sorted(dest.rglob("*"), reverse=True):
        rel = path.relative_to(dest)
        if path.is_file() and rel not in wanted and rel != pathlib.Path("Cargo.lock"):
            path.unlink()


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    registry = pathlib.Path(sys.argv[1])
    crtc = pathlib.Path(sys.argv[2]).resolve()
    dest = pathlib.Path(sys.argv[3])
    here = pathlib.Path(__file__).resolve().parent
    staging = dest.with_name(dest.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(registry, staging, ignore=shutil.ignore_patterns(".cargo-ok", ".cargo_vcs_info.json"))
    patch_manifest(staging, crtc)
    patch_module(staging, here)
    patch_indexer_tests(staging)
    patch_delegate_tests(staging)
    names = []
    for file, expected, helpers, placement in POOL_FILES:
        path = staging / "src/indexer" / file
        names += add_gate_modules(path, expected, helpers, placement)
    dest.mkdir(parents=True, exist_ok=True)
    if not (dest / "Cargo.lock").exists():
        shutil.copyfile(crtc / "Cargo.lock", dest / "Cargo.lock")
    sync(staging, dest)
    shutil.rmtree(staging)
    print(f"upstream-suite: patched copy in {dest} (gates: {', '.join(GATES)}; "
          f"non-template pool tests per gate: {len(names)})")


if __name__ == "__main__":
    main()
