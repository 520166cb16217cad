//! The differential suite for the mutex gate (C1–C5 against the reference
//! model, direct tree and indexer, fast path on and off), instantiated from
//! the verification crate's exported macro, as for the gates of
//! `crtc-strategies` (`verification/tests/differential_tree.rs`). Cases come
//! from `CRTC_DIFF_CASES` (default 256).

crtc_verification::differential_gate_tests!(
    mutex,
    crtc_mutex_gate::MutexGate,
    "mutex",
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proptest-regressions/differential.txt"
    )
);
