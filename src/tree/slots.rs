//! Rank slots: a dense index per rank for coverage bitsets.
//!
//! Protocol. The registry keeps two maps, both changed only under its mutex
//! and both changed in place, so no change copies either map:
//!
//! * *owners* (`slot -> rank`), read without locks by readers crediting
//!   bits. Each slot has one fixed cell of two atomic words, the worker id
//!   and a tag (the dp rank plus an "owned" flag). Cells live in segments
//!   (8 cells, 8, then doubling up to the capacity) allocated on first
//!   use and never moved or freed while the registry lives.
//! * *mapping* (`rank -> slot`), read by the ranks' writers: a hash map
//!   sharded by rank, one reader-writer lock per shard on its own cache
//!   lines, so lanes storing for different ranks rarely share a lock word.
//!
//! `acquire` hands out the lowest released slot (a min-heap), else the next
//! never-issued one, else fails closed with `CapacityExhausted`, which names
//! the limit. It writes the owner cell before it maps the rank, so a writer
//! that found its slot in the mapping writes bits a reader credits to it.
//! Issuing a slot therefore costs one cell write and one map insert: O(1)
//! amortized, O(log n) when it reuses a released slot.
//!
//! Writers look a rank's slot up once per event, and the mapping's lock
//! costs two shared read-modify-writes per lookup, so each lane keeps the
//! slot it last found for a rank as a [`CachedSlot`], stamped with the
//! registry's *unmap count* read before the lookup. `unmap` bumps that count
//! when it removed a mapping (after removing it, before its caller waits
//! for pinned threads), and a cached slot is used only while the count still
//! equals its stamp. Why that is enough: a writer that loads the count under
//! its pin and does not see the bump was pinned before the remover's wait
//! for pinned threads began, so the sweep that follows the wait sees that
//! writer's bits. It is the argument for a reader that loaded a pointer
//! before it was unlinked, with the count as the pointer: for crossbeam the
//! pin's SeqCst fence and the one the remover's wait makes when it pins
//! order the two; for seize, whose pin has only a light barrier, the SeqCst
//! load of the count and the heavy barrier of the retirement the wait
//! defers (as for `Reclaim::protect` loads, `crtc_strategies::reclaim`). A
//! writer that sees the bump looks the mapping up again. Stamping *before*
//! the lookup matters: a count read after it could already include an unmap
//! the lookup missed, and the stale slot would then pass as current after
//! its release. A lane belongs to the tree that made it: another tree's
//! registry counts its own unmaps.
//!
//! Removing ranks is `unmap` (they may no longer write; readers still credit
//! their old bits), then the caller waits for pinned threads and sweeps the
//! slots out of the tree, then `release`: the owners are vacated at once,
//! and the slots become reusable only after every thread pinned before the
//! release has unpinned. A reader pinned across that wait reads the cell of
//! the old owner or the vacated cell, never a new owner's; a reader pinned
//! after it reads the vacated cell or the new owner's, which pairs with bits
//! written after the sweep. That is the guarantee a retired pointer rests
//! on, and it is why a cell's two words are never torn between owners.
//!
//! Between `unmap` and the end of `release` a slot is *pending*, recorded
//! with its owner under the registry mutex. `wait_for_release` polls that
//! record (mutex, then a `Backoff` snooze between polls) until no
//! pending slot belongs to the target: a removal that lost the unmap race,
//! and a `Cleared` of a rank being removed elsewhere, return only once the
//! winner's sweep is done and the slot released. Callers must not be pinned
//! while they wait (the winner waits for pinned threads).
//!
//! The limit is [`MAX_SLOTS`] (65,536) ranks per tree: slots are 16 bits
//! wide, and coverage bitsets grow in 256-slot chunks up to their highest
//! slot, so a tree with more ranks than that pays kilobytes per node on
//! every node a high slot touches. A deployment with more ranks shards its
//! index by worker.

use crate::types::{DpRank, KvError, WorkerWithDpRank};
use crtc_strategies::sync::atomic::{AtomicU64, Ordering};
use crtc_strategies::sync::{Arc, Backoff, Mutex, RwLock, SetOnce};
use crtc_strategies::{mutant, Reclaim, Slot, MAX_SLOTS};
use rustc_hash::{FxHashMap, FxHasher};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::{Hash, Hasher};

/// Cells in the first segment; segment `k > 0` holds `FIRST << (k - 1)`.
const FIRST: usize = 8;
/// Segments covering [`MAX_SLOTS`] cells.
const SEGMENTS: usize = (MAX_SLOTS / FIRST).trailing_zeros() as usize + 1;
/// Shards of the rank mapping.
const SHARDS: usize = 16;
/// The tag bit saying a cell has an owner (the dp rank is the low 32 bits).
const OWNED: u64 = 1 << 32;

/// The owner of one slot: two words, written only under the registry mutex.
#[derive(Debug)]
struct OwnerCell {
    worker: AtomicU64,
    tag: AtomicU64,
}

impl OwnerCell {
    fn vacant() -> Self {
        Self {
            worker: AtomicU64::new(0),
            tag: AtomicU64::new(0),
        }
    }

    fn owner(&self) -> Option<WorkerWithDpRank> {
        // Acquire: pairs with the Release in `set`, so the worker word read
        // next is the one written with this tag (a newer one needs a grace
        // period this pinned caller holds off).
        let tag = self.tag.load(Ordering::Acquire);
        if tag & OWNED == 0 {
            return None;
        }
        // Relaxed: ordered after the tag load above.
        let worker = self.worker.load(Ordering::Relaxed);
        Some(WorkerWithDpRank::new(worker, tag as DpRank))
    }

    fn set(&self, rank: WorkerWithDpRank) {
        // Relaxed: published by the Release store of the tag below.
        self.worker.store(rank.worker_id, Ordering::Relaxed);
        // Release: publishes the worker word with the tag.
        self.tag
            .store(OWNED | u64::from(rank.dp_rank), Ordering::Release);
    }

    fn vacate(&self) {
        // Release: a reader that sees the vacated tag sees the sweep that
        // preceded it.
        self.tag.store(0, Ordering::Release);
    }
}

/// One shard of the rank mapping, on its own cache lines.
#[derive(Debug)]
#[repr(align(128))]
struct Shard(RwLock<FxHashMap<WorkerWithDpRank, Slot>>);

/// The registry's maps: owners by slot, slots by rank.
#[derive(Debug)]
pub struct SlotTable {
    segments: [SetOnce<Box<[OwnerCell]>>; SEGMENTS],
    shards: Box<[Shard]>,
}

/// Cells in `segment`.
#[inline]
fn segment_len(segment: usize) -> usize {
    FIRST << segment.saturating_sub(1)
}

/// The segment holding `index` and the index within it (segment `k > 0`
/// starts where it is long).
#[inline]
fn locate(index: usize) -> (usize, usize) {
    let segment = (usize::BITS - (index / FIRST).leading_zeros()) as usize;
    let base = if segment == 0 {
        0
    } else {
        segment_len(segment)
    };
    (segment, index - base)
}

fn shard_of(rank: WorkerWithDpRank) -> usize {
    let mut hasher = FxHasher::default();
    rank.hash(&mut hasher);
    (hasher.finish() >> 32) as usize % SHARDS
}

impl SlotTable {
    fn new() -> Self {
        Self {
            segments: std::array::from_fn(|_| SetOnce::new()),
            shards: (0..SHARDS)
                .map(|_| Shard(RwLock::new(FxHashMap::default())))
                .collect(),
        }
    }

    /// The rank credited for `slot`'s bits. The caller is pinned.
    #[inline]
    pub fn owner(&self, slot: Slot) -> Option<WorkerWithDpRank> {
        let (segment, offset) = locate(slot.index());
        self.segments
            .get(segment)?
            .get()
            .and_then(|cells| cells[offset].owner())
    }

    /// The slot `rank` writes with.
    #[inline]
    pub fn slot(&self, rank: WorkerWithDpRank) -> Option<Slot> {
        self.shards[shard_of(rank)].0.read().get(&rank).copied()
    }

    /// The cell of `slot`, allocating its segment on first use (under the
    /// registry mutex).
    fn cell(&self, slot: Slot) -> &OwnerCell {
        let (segment, offset) = locate(slot.index());
        let cells = self.segments[segment].get_or_init(|| {
            (0..segment_len(segment))
                .map(|_| OwnerCell::vacant())
                .collect()
        });
        &cells[offset]
    }

    /// Removes the ranks matching `target` from the mapping; returns them
    /// with their slots.
    fn unmap(&self, target: impl Fn(WorkerWithDpRank) -> bool) -> Vec<(Slot, WorkerWithDpRank)> {
        let mut unmapped = Vec::new();
        for shard in self.shards.iter() {
            shard.0.write().retain(|&rank, &mut slot| {
                let hit = target(rank);
                if hit {
                    unmapped.push((slot, rank));
                }
                !hit
            });
        }
        unmapped
    }
}

#[derive(Debug, Default)]
struct Issue {
    issued: usize,
    released: BinaryHeap<Reverse<Slot>>,
    /// Unmapped but not yet released, with their owners.
    pending: FxHashMap<Slot, WorkerWithDpRank>,
}

impl Issue {
    /// The lowest released slot, else the next never-issued one below
    /// `capacity`.
    fn take(&mut self, capacity: usize) -> Option<Slot> {
        if let Some(Reverse(slot)) = self.released.pop() {
            return Some(slot);
        }
        (self.issued < capacity).then(|| {
            self.issued += 1;
            Slot((self.issued - 1) as u16)
        })
    }
}

/// The slot registry of one tree.
pub struct SlotRegistry<R: Reclaim> {
    table: SlotTable,
    issue: Arc<Mutex<Issue>>,
    /// Calls of `unmap` that removed a mapping: the stamp of every
    /// [`CachedSlot`].
    unmaps: AtomicU64,
    capacity: usize,
    reclaim: std::marker::PhantomData<R>,
}

/// A rank's slot as one lane last found it, stamped with the registry's
/// unmap count read before the lookup: valid while no rank has been
/// unmapped since.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedSlot {
    slot: Slot,
    unmaps: u64,
}

impl CachedSlot {
    /// The slot.
    pub fn slot(self) -> Slot {
        self.slot
    }

    /// A cached `slot` with stamp 0, for tests of the lane's bookkeeping.
    #[cfg(test)]
    pub(crate) fn unstamped(slot: Slot) -> Self {
        Self { slot, unmaps: 0 }
    }
}

impl<R: Reclaim> SlotRegistry<R> {
    /// A registry issuing at most `capacity` slots (clamped to [`MAX_SLOTS`]).
    pub fn new(capacity: usize) -> Self {
        Self {
            table: SlotTable::new(),
            issue: Arc::new(Mutex::new(Issue::default())),
            unmaps: AtomicU64::new(0),
            capacity: capacity.clamp(1, MAX_SLOTS),
            reclaim: std::marker::PhantomData,
        }
    }

    /// The maps; owners read through it are valid while `guard` lives.
    #[inline]
    pub fn table<'g>(&'g self, _guard: &'g R::Guard) -> &'g SlotTable {
        &self.table
    }

    /// The slot of `rank`: `cached` if no rank was unmapped since it was
    /// found, else the mapped one, else the lowest free one, issued now.
    pub fn acquire(
        &self,
        rank: WorkerWithDpRank,
        _guard: &R::Guard,
        cached: Option<CachedSlot>,
    ) -> Result<CachedSlot, KvError> {
        // SeqCst: ordered after the pin's fence, so it sees the bump of any
        // unmap whose wait for pinned threads does not wait for this pin.
        let unmaps = self.unmaps.load(Ordering::SeqCst);
        if let Some(cached) =
            cached.filter(|c| c.unmaps == unmaps || mutant!(SlotCacheIgnoresUnmaps))
        {
            return Ok(cached);
        }
        let slot = self.lookup_or_issue(rank)?;
        let unmaps = if mutant!(SlotStampAfterLookup) {
            // Broken on purpose: the stamp may include an unmap the lookup
            // missed. (SeqCst: as the load above.)
            self.unmaps.load(Ordering::SeqCst)
        } else {
            unmaps
        };
        Ok(CachedSlot { slot, unmaps })
    }

    /// The mapped slot of `rank`, else the lowest free one, issued now.
    fn lookup_or_issue(&self, rank: WorkerWithDpRank) -> Result<Slot, KvError> {
        if let Some(slot) = self.table.slot(rank) {
            return Ok(slot);
        }
        let mut issue = self.issue.lock();
        if let Some(slot) = self.table.slot(rank) {
            return Ok(slot);
        }
        let Some(slot) = issue.take(self.capacity) else {
            return Err(KvError::CapacityExhausted {
                rank,
                capacity: self.capacity,
            });
        };
        self.table.cell(slot).set(rank);
        self.table.shards[shard_of(rank)]
            .0
            .write()
            .insert(rank, slot);
        Ok(slot)
    }

    /// Stops the ranks matching `target` from writing; they stay credited
    /// and their slots become pending. Returns the slots (empty when another
    /// caller unmapped them first).
    pub fn unmap(&self, target: impl Fn(WorkerWithDpRank) -> bool) -> Vec<Slot> {
        let mut issue = self.issue.lock();
        let unmapped = self.table.unmap(target);
        if !unmapped.is_empty() {
            // SeqCst: after the mappings are gone and ahead of the caller's
            // wait for pinned threads (module docs). An unmap that removed
            // nothing leaves every lane's cached slots valid.
            self.unmaps.fetch_add(1, Ordering::SeqCst);
        }
        issue.pending.extend(unmapped.iter().copied());
        unmapped.into_iter().map(|(slot, _)| slot).collect()
    }

    /// Returns once no slot of a rank matching `target` is pending (unmapped
    /// by someone and not yet released). The caller must not be pinned.
    pub fn wait_for_release(&self, target: impl Fn(WorkerWithDpRank) -> bool) {
        let mut backoff = Backoff::new();
        while self.is_pending(&target) {
            backoff.snooze();
        }
    }

    /// Every slot `rank` owns: its mapped one and any a removal has
    /// unmapped but not released yet.
    pub fn owned_by(&self, rank: WorkerWithDpRank) -> Vec<Slot> {
        let issue = self.issue.lock();
        let pending = issue.pending.iter().filter(|&(_, &r)| r == rank);
        let mut slots: Vec<Slot> = pending.map(|(&slot, _)| slot).collect();
        slots.extend(self.table.slot(rank));
        slots
    }

    /// Whether a rank matching `target` has a pending slot (diagnostics).
    pub fn is_pending(&self, target: impl Fn(WorkerWithDpRank) -> bool) -> bool {
        self.issue.lock().pending.values().any(|&r| target(r))
    }

    /// Vacates `slots`, waits until every thread pinned before has unpinned
    /// (so no reader still credits the old owner), then frees them for
    /// reuse. The slots must have been swept; the caller must not be pinned.
    pub fn release(&self, slots: &[Slot]) {
        if slots.is_empty() {
            return;
        }
        {
            let _issue = self.issue.lock();
            slots
                .iter()
                .for_each(|&slot| self.table.cell(slot).vacate());
        }
        if !mutant!(SlotRecycledBeforeGrace) {
            R::wait_for_pinned_threads();
        }
        let mut issue = self.issue.lock();
        for &slot in slots {
            issue.pending.remove(&slot);
            issue.released.push(Reverse(slot));
        }
    }

    /// Number of slots issued so far (released ones included).
    pub fn issued(&self) -> usize {
        self.issue.lock().issued
    }
}
