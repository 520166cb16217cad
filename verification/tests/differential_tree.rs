//! The differential suite against the tree (C1–C4 and detail checks), for
//! every strategy × fast path on/off × driver (direct, indexer with 1 and 2
//! lanes), strict and non-strict; and C5: one sequential stream with the fast
//! path on and off gives identical scores, dumps and node counts. Cases come
//! from `CRTC_DIFF_CASES` (default 256). The suite is
//! `crtc_verification::differential_gate_tests!`
//! (`verification/src/gate_suite.rs`); a gate of `for_each_gate!` gets it
//! here, a gate of another crate from its own tests.

use crtc_verification::differential_gate_tests;

crtc_strategies::for_each_gate!(
    differential_gate_tests,
    (concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proptest-regressions/differential_tree.txt"
    ))
);
