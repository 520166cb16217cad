//! One lane's counters: what it applied, refused and repaired, each a
//! [`Counter`] with the lane as its only writer.
//!
//! Protocol. A lane bumps its own counters with a load and a store (no shared
//! read-modify-write); any thread may read them (Relaxed: statistics that
//! publish nothing), so a reader sees each counter's value at some recent
//! instant, not a consistent snapshot across counters.

use crate::types::KvError;
use crtc_strategies::sync::atomic::{AtomicU64, Ordering};
use crtc_strategies::AppendMiss;

/// A counter with one writer (its lane) and any number of readers: the
/// writer's increment is a load and a store, never a shared read-modify-write.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n` (single writer).
    #[inline]
    pub fn add(&self, n: u64) {
        // Relaxed: statistics only; one writer, so load+store loses nothing.
        self.0
            .store(self.0.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }
    /// The current value.
    pub fn get(&self) -> u64 {
        // Relaxed: statistics only.
        self.0.load(Ordering::Relaxed)
    }
}

/// What one lane did.
#[derive(Debug, Default)]
pub struct LaneCounters {
    /// Stores applied (including duplicates).
    pub stores: Counter,
    /// Stores that changed nothing.
    pub duplicate_stores: Counter,
    /// Removal events applied.
    pub removals: Counter,
    /// Cleared events applied.
    pub clears: Counter,
    /// Rank removals this lane took part in (it dropped what it cached of
    /// the removed ranks, whether or not it held any).
    pub removal_drops: Counter,
    /// Events rejected with an error.
    pub errors: Counter,
    /// Events rejected, per [`Refusal`] reason (they sum to `errors`).
    pub refusals: [Counter; Refusal::ALL.len()],
    /// Stores the decode fast path applied.
    pub fast_path_hits: Counter,
    /// Stores the fast path declined, per [`AppendMiss`] reason.
    pub fast_path_misses: [Counter; 5],
    /// Stores that ran the general planning path.
    pub general_stores: Counter,
    /// Lookup repairs (scans below a stale node).
    pub repairs: Counter,
    /// Plans that failed validation and were re-made.
    pub restarts: Counter,
}

/// Why the tree refused an event (the kinds of [`KvError`] a lane returns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// A store named a parent its rank does not hold.
    ParentNotFound,
    /// A removal for a rank the lane has never seen.
    BlockNotFound,
    /// No rank slot was left for a new rank.
    SlotsExhausted,
    /// A store without blocks.
    EmptyStore,
    /// A refusal whose reason the reporter cannot tell (a peer that reports
    /// only an error count, such as the upstream subject in the harness).
    Other,
}

impl Refusal {
    /// Every reason, in counter order.
    pub const ALL: [Refusal; 5] = [
        Refusal::ParentNotFound,
        Refusal::BlockNotFound,
        Refusal::SlotsExhausted,
        Refusal::EmptyStore,
        Refusal::Other,
    ];

    /// The reason for `error`.
    pub fn of(error: &KvError) -> Self {
        match error {
            KvError::ParentBlockNotFound { .. } => Refusal::ParentNotFound,
            KvError::BlockNotFound { .. } => Refusal::BlockNotFound,
            KvError::CapacityExhausted { .. } => Refusal::SlotsExhausted,
            KvError::EmptyStore { .. } => Refusal::EmptyStore,
        }
    }

    /// A snake_case name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::ParentNotFound => "parent_not_found",
            Refusal::BlockNotFound => "block_not_found",
            Refusal::SlotsExhausted => "slots_exhausted",
            Refusal::EmptyStore => "empty_store",
            Refusal::Other => "other",
        }
    }

    /// Its position in [`LaneCounters::refusals`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl LaneCounters {
    /// Counts a refused event under its reason.
    pub fn refuse(&self, error: &KvError) {
        self.errors.add(1);
        self.refusals[Refusal::of(error).index()].add(1);
    }

    /// Fast-path misses for `reason`.
    pub fn misses(&self, reason: AppendMiss) -> u64 {
        self.fast_path_misses[reason.index()].get()
    }
}
