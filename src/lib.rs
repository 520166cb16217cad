//! crtc: a compressed concurrent radix tree for KV-cache-aware routing,
//! generic over its node synchronization strategy.
//!
//! # The read contract
//!
//! Every strategy ([`strategies::ShapeGate`]) satisfies, against the
//! reference model (`crtc_verification::reference`):
//!
//! - **C1 never overcount**: a score is at most the rank's held prefix (for a
//!   concurrent read, the largest held prefix at some instant of the read).
//! - **C2 exact when strict**: without holes, after quiescence, scores equal
//!   the held prefix, fast path on or off.
//! - **C3 bounded undercount with holes**: reachable prefix ≤ score ≤ held.
//! - **C4 valid stores apply**: a store under a reachable parent is accepted.
//! - **C5 the fast path is invisible**: on any sequential stream, fast path on
//!   and off give identical scores, dumps and node counts.
//! - **C6** reads never panic and never block longer than one critical section;
//!   **C7** bad input is an error value ([`types::KvError`]); **C8** memory is
//!   bounded by live memberships after removals and a sweep.
//!
//! The tree is [`Tree`]; [`Indexer`] puts lane threads in front of it. The
//! design and the protocols are in the `papers/` directory and in each
//! module's documentation.
#![warn(missing_docs)]

pub mod indexer;
pub mod tree;
pub mod types;
pub use crtc_strategies as strategies;
pub use indexer::{Indexer, IndexerConfig};
pub use tree::{EventOutcome, Lane, NodeInfo, StoreOutcome, Tree, TreeConfig};
