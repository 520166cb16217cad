//! The sync facade is the only source file that names a sync primitive's
//! home (`std::sync`, `parking_lot`, loom's and shuttle's `sync` and
//! `thread`, std's thread spawners): the half of the rule clippy cannot
//! check, because the facade re-exports std's atomics, `Arc` and `spawn`
//! unchanged and clippy sees the same definitions at every use site (see
//! `clippy.toml`). Comments and the model checkers' drivers (`loom::model`,
//! `shuttle::Runner`, which explore, not synchronize) are not counted.

use std::path::{Path, PathBuf};

/// Spellings that bypass the facade.
const FORBIDDEN: [&str; 8] = [
    "std::sync",
    "parking_lot",
    "loom::sync",
    "loom::thread",
    "shuttle::sync",
    "shuttle::thread",
    "std::thread::spawn",
    "std::thread::scope",
];

/// The facade itself.
const FACADE: &str = "strategies/src/sync.rs";
/// This test, which spells the forbidden words.
const THIS: &str = "strategies/tests/facade.rs";
/// Code compiled into a test-time copy of upstream's crate
/// (`.ci/upstream-suite.sh`), which follows upstream's conventions: it is
/// not built as part of this workspace.
const UPSTREAM_COPY: &str = "upstream-suite";

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() && name != "target" && !name.to_string_lossy().starts_with('.') {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
#[cfg_attr(miri, ignore = "reads the source tree; miri isolates the file system")]
fn no_source_file_but_the_facade_names_a_sync_primitive() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let mut files = Vec::new();
    rust_files(root, &mut files);
    assert!(files.len() > 20, "found the workspace's sources");
    let mut offences = Vec::new();
    for file in files {
        let relative = file.strip_prefix(root).unwrap_or(&file);
        if relative == Path::new(FACADE)
            || relative == Path::new(THIS)
            || relative.starts_with(UPSTREAM_COPY)
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if let Some(word) = FORBIDDEN.iter().find(|w| code.contains(*w)) {
                offences.push(format!("{}:{}: {word}", relative.display(), n + 1));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "sync primitives named outside the facade ({FACADE}):\n{}",
        offences.join("\n")
    );
}
