//! The `ShapeGate` trait: how one node's shape is stored, read and changed.
//!
//! Protocol. The tree never touches a node's shape directly; it runs closures
//! inside sections the gate provides:
//!
//! * **read** — a consistent view of one node for a reader (`find_matches`,
//!   dumps). Optimistic gates may run the closure more than once and discard
//!   all but the last validated run, so the closure must be free of side
//!   effects outside its own scratch state.
//! * **plan** — a consistent view plus the [`Version`] it was taken under. A
//!   plan is a decision ("tail insert", "split at 3", "child missing") that is
//!   only valid while the version stays the same.
//! * **shared** / **shared_commit** — a section that excludes every shape
//!   change (split, extension, first-child insert, children clear) but not
//!   other shared sections. With a version, it fails with [`Stale`] if the
//!   shape changed since the plan. `shared_commit` may make monotone coverage
//!   changes only (promote to full, raise a cutoff); the tree uses `shared`
//!   to insert a child under an already-internal node.
//! * **exclusive_commit** — a section that excludes every other section of the
//!   node except readers of optimistic or snapshot gates (which validate or
//!   read a snapshot). It validates the version and bumps it when the closure
//!   reports a shape change, so every plan made before fails.
//! * **try_append_at_tail** — the decode fast path, written per strategy: one
//!   critical section that checks and appends.
//!
//! Children and everything else topological belong to the tree; it changes
//! them only inside these sections, so "the edge and the child map agree" is
//! protected by the gate.

use crate::hash::{BlockPair, ExternalSequenceBlockHash, Slot};
use crate::reclaim::Reclaim;
use crate::shape::{ShapeInit, ShapeRead, ShapeWrite};

/// A shape version: the token a plan carries to its commit. Gates make
/// versions in `plan` (from a per-node counter they keep) and compare them
/// in their commits; the tree only carries one from a plan to its commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Version(pub(crate) u64);

impl Version {
    /// The version with counter value `raw`, for a gate's `plan` (the
    /// gates of other crates build theirs with it).
    pub const fn new(raw: u64) -> Self {
        Self(raw)
    }

    /// The counter value, for a gate's commit to compare.
    pub const fn get(self) -> u64 {
        self.0
    }
}

/// How a gate's readers synchronize with its writers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReadPath {
    /// Readers take a lock (shared or exclusive).
    Lock,
    /// Readers run optimistically and validate a version (seqlock).
    Optimistic,
    /// Readers follow a published snapshot (epoch/RCU).
    Snapshot,
}

impl ReadPath {
    /// "lock", "optimistic" or "snapshot".
    pub fn name(self) -> &'static str {
        match self {
            ReadPath::Lock => "lock",
            ReadPath::Optimistic => "optimistic",
            ReadPath::Snapshot => "snapshot",
        }
    }
}

/// A gate's reader counters since the process started, summed over every
/// gate of its kind (the counters are process-wide statistics). Lookups
/// only: plans count apart, so these are the readers' own figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadCounters {
    /// Reads that failed validation and re-ran on their lock-free path.
    pub retries: u64,
    /// Reads that gave up their lock-free path and ran under the writers'
    /// lock.
    pub fallbacks: u64,
    /// Bytes of the gate's shapes retired and not yet freed (`None`: the
    /// gate does not count them).
    pub retired_bytes: Option<i64>,
}

impl ReadCounters {
    /// The retries and fallbacks counted since `before` (`retired_bytes` is a
    /// level, kept as now).
    pub fn since(self, before: Self) -> Self {
        Self {
            retries: self.retries.saturating_sub(before.retries),
            fallbacks: self.fallbacks.saturating_sub(before.fallbacks),
            retired_bytes: self.retired_bytes,
        }
    }
}

/// The shape changed since the plan was made; the caller re-plans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stale;

/// What an exclusive commit's closure returns: its value and whether it
/// changed the shape (which bumps the version).
#[derive(Debug)]
pub struct Commit<R> {
    /// The closure's result.
    pub value: R,
    /// Whether the edge, the internal flag or the child map changed.
    pub shape_changed: bool,
}

impl<R> Commit<R> {
    /// A commit that changed the shape.
    pub fn changed(value: R) -> Self {
        Self {
            value,
            shape_changed: true,
        }
    }
    /// A commit that left the shape alone (coverage-only changes).
    pub fn unchanged(value: R) -> Self {
        Self {
            value,
            shape_changed: false,
        }
    }
}

/// Why the decode fast path declined a store. It changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AppendMiss {
    /// The store carries no blocks.
    Empty,
    /// The node has (or had) children; it never extends again.
    Internal,
    /// Anchors have a fixed one-block edge.
    Anchor,
    /// The parent is not the last block of the edge.
    NotTail,
    /// The rank does not cover the tail.
    Uncovered,
}

impl AppendMiss {
    /// Every reason, in a fixed order (for counters).
    pub const ALL: [AppendMiss; 5] = [
        AppendMiss::Empty,
        AppendMiss::Internal,
        AppendMiss::Anchor,
        AppendMiss::NotTail,
        AppendMiss::Uncovered,
    ];
    /// Index into [`AppendMiss::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            AppendMiss::Empty => "empty",
            AppendMiss::Internal => "internal",
            AppendMiss::Anchor => "anchor",
            AppendMiss::NotTail => "not_tail",
            AppendMiss::Uncovered => "uncovered",
        }
    }
}

/// The checks of the decode fast path, shared by every strategy: run inside
/// the strategy's critical section, before any write.
pub fn append_eligibility(
    shape: &impl ShapeRead,
    slot: Slot,
    parent: ExternalSequenceBlockHash,
    blocks: &[BlockPair],
) -> Result<(), AppendMiss> {
    if blocks.is_empty() {
        return Err(AppendMiss::Empty);
    }
    if shape.is_internal() {
        return Err(AppendMiss::Internal);
    }
    if shape.is_anchor() {
        return Err(AppendMiss::Anchor);
    }
    if shape.tail().map(|pair| pair.external) != Some(parent) {
        return Err(AppendMiss::NotTail);
    }
    if !shape.is_full(slot) {
        return Err(AppendMiss::Uncovered);
    }
    Ok(())
}

/// A node synchronization strategy.
///
/// # Safety
///
/// Implementations must uphold, for every node:
///
/// 1. **Exclusion.** An `exclusive_commit` or `try_append_at_tail` section
///    excludes every other section of the same node except `read`; a
///    `shared`/`shared_commit` section excludes every exclusive section.
///    `shared_commit` sections exclude each other.
/// 2. **Validation.** A `shared*` or `exclusive_commit` call given
///    `Some(version)` runs its closure only if no shape change committed since
///    the `plan` that returned `version`; otherwise it returns `Err(Stale)`
///    without running it. Versions are never reused for one node.
/// 3. **Invalidation.** An exclusive commit whose closure reports
///    `shape_changed`, and every successful `try_append_at_tail`, make every
///    version handed out before it fail validation.
/// 4. **Consistent reads.** The view passed to the closure whose result `read`
///    or `plan` returns is the state between two complete sections: never a
///    mix of a section's writes. Closures run on views that fail validation
///    must not cause undefined behaviour; their results are discarded.
/// 5. **Memory.** Memory a view exposes stays valid for the closure's run;
///    anything replaced is retired through [`ShapeGate::Reclaim`], never freed
///    while a reader may still see it.
pub unsafe trait ShapeGate: Send + Sync + Sized + 'static {
    /// The gate's name in reports and benchmark ids, unique among the gates
    /// this crate builds: `rwlock`, `seqlock`, `epoch-crossbeam`,
    /// `epoch-seize` (the label [`for_each_gate!`](crate::for_each_gate)
    /// passes; `strategies/tests/gate_contract.rs` checks they agree).
    const NAME: &'static str;
    /// How the strategy's readers synchronize with its writers.
    const READ_PATH: ReadPath;
    /// The view given to read and plan closures.
    type View<'a>: ShapeRead
    where
        Self: 'a;
    /// The writer given to commit closures.
    type Writer<'a>: ShapeWrite
    where
        Self: 'a;
    /// The reclaimer for memory that readers may still see when it is replaced.
    type Reclaim: Reclaim;

    /// A gate holding the shape `init`.
    fn new(init: ShapeInit) -> Self;

    /// Runs `f` on a consistent view for a reader.
    fn read<R>(&self, f: impl FnMut(&Self::View<'_>) -> R) -> R;

    /// Runs `f` on a consistent view and returns its result with the version
    /// the view belongs to.
    fn plan<R>(&self, f: impl FnMut(&Self::View<'_>) -> R) -> (R, Version);

    /// [`Self::read`] under the caller's pin of [`Self::Reclaim`], which
    /// stays pinned for the call: a walk pins once, not once per node. The
    /// default pins again (the RwLock gate's views expose nothing retired).
    #[inline]
    fn read_in<R>(&self, guard: &Guard<Self>, f: impl FnMut(&Self::View<'_>) -> R) -> R {
        let _ = guard;
        self.read(f)
    }

    /// [`Self::plan`] under the caller's pin of [`Self::Reclaim`] (as
    /// [`Self::read_in`]).
    #[inline]
    fn plan_in<R>(&self, guard: &Guard<Self>, f: impl FnMut(&Self::View<'_>) -> R) -> (R, Version) {
        let _ = guard;
        self.plan(f)
    }

    /// Runs `f` in a shared section, after validating `version` if given.
    fn shared<R>(&self, version: Option<Version>, f: impl FnOnce() -> R) -> Result<R, Stale>;

    /// Runs `f` in a shared section with a writer restricted (by contract) to
    /// monotone coverage changes, after validating `version` if given.
    fn shared_commit<R>(
        &self,
        version: Option<Version>,
        f: impl FnOnce(&mut Self::Writer<'_>) -> R,
    ) -> Result<R, Stale>;

    /// Runs `f` in an exclusive section, after validating `version` if given;
    /// bumps the version if `f` reports a shape change.
    fn exclusive_commit<R>(
        &self,
        version: Option<Version>,
        f: impl FnOnce(&mut Self::Writer<'_>) -> Commit<R>,
    ) -> Result<R, Stale>;

    /// The decode fast path: in one critical section, check
    /// [`append_eligibility`] and, if it holds, append `blocks` for `slot`
    /// demoting every other full slot to a cutoff at the old length, and
    /// invalidate every older version. Returns the old edge length. On a miss
    /// nothing changed.
    fn try_append_at_tail(
        &self,
        slot: Slot,
        parent: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> Result<usize, AppendMiss>;

    /// Approximate bytes held by the gate and its shape.
    fn footprint(&self) -> usize;

    /// Its readers' retry and fallback counters (process-wide); zero for a
    /// gate whose readers never retry nor fall back.
    fn read_counters() -> ReadCounters {
        ReadCounters::default()
    }
}

/// The reclaimer guard of gate `G`: what a reader holds while it walks.
pub type Guard<G> = <<G as ShapeGate>::Reclaim as Reclaim>::Guard;
