//! Rank slots: a dense index per rank for coverage bitsets.
//!
//! Protocol. The slot table (`owners[slot] -> rank` for crediting, `rank ->
//! slot` for writing) is immutable and published through an [`AtomicBox`];
//! every change copies it under the registry mutex and publishes the copy.
//! Readers load it once per walk under their pin. `acquire` hands out the
//! lowest released slot, else the next never-issued one, else fails closed
//! with `CapacityExhausted`. Removing a rank is `unmap` (it may no longer
//! write; readers still credit its old bits), then the caller sweeps the slot
//! out of the tree, then `release`: the owner is vacated at once and the slot
//! becomes reusable only after every thread pinned before the release has
//! unpinned, so a reader holding the old table never sees the slot reused.
//!
//! Between `unmap` and the end of `release` a slot is *pending*, recorded
//! with its owner under the registry mutex. `wait_for_release` polls that
//! record (mutex, then a `Backoff` snooze between polls) until no
//! pending slot belongs to the target: a removal that lost the unmap race,
//! and a `Cleared` of a rank being removed elsewhere, return only once the
//! winner's sweep is done and the slot released. Callers must not be pinned
//! while they wait (the winner waits for pinned threads).

use crate::types::{KvError, WorkerWithDpRank};
use crtc_strategies::sync::{Arc, Backoff, Mutex};
use crtc_strategies::{AtomicBox, Reclaim, Slot, SlotBits, MAX_SLOTS};
use rustc_hash::FxHashMap;

/// One published state of the registry.
#[derive(Clone, Debug, Default)]
pub struct SlotTable {
    owners: Vec<Option<WorkerWithDpRank>>,
    slots: FxHashMap<WorkerWithDpRank, Slot>,
}

impl SlotTable {
    /// The rank credited for `slot`'s bits.
    #[inline]
    pub fn owner(&self, slot: Slot) -> Option<WorkerWithDpRank> {
        self.owners.get(slot.index()).copied().flatten()
    }
    /// The slot `rank` writes with.
    #[inline]
    pub fn slot(&self, rank: WorkerWithDpRank) -> Option<Slot> {
        self.slots.get(&rank).copied()
    }
}

#[derive(Debug, Default)]
struct Issue {
    issued: usize,
    released: SlotBits,
    /// Unmapped but not yet released, with their owners.
    pending: Vec<(Slot, WorkerWithDpRank)>,
}

/// The slot registry of one tree.
pub struct SlotRegistry<R: Reclaim> {
    table: AtomicBox<SlotTable>,
    issue: Arc<Mutex<Issue>>,
    capacity: usize,
    reclaim: std::marker::PhantomData<R>,
}

impl<R: Reclaim> SlotRegistry<R> {
    /// A registry issuing at most `capacity` slots (clamped to [`MAX_SLOTS`]).
    pub fn new(capacity: usize) -> Self {
        Self {
            table: AtomicBox::new(SlotTable::default()),
            issue: Arc::new(Mutex::new(Issue::default())),
            capacity: capacity.clamp(1, MAX_SLOTS),
            reclaim: std::marker::PhantomData,
        }
    }

    /// The current table, valid while `guard` lives.
    #[inline]
    pub fn table<'g>(&'g self, guard: &'g R::Guard) -> &'g SlotTable {
        self.table.load::<R>(guard)
    }

    /// The slot of `rank`, allocating the lowest free one if it has none.
    pub fn acquire(&self, rank: WorkerWithDpRank, guard: &R::Guard) -> Result<Slot, KvError> {
        if let Some(slot) = self.table(guard).slot(rank) {
            return Ok(slot);
        }
        let mut issue = self.issue.lock();
        let current = self.table(guard);
        if let Some(slot) = current.slot(rank) {
            return Ok(slot);
        }
        let lowest_released = issue.released.iter().next();
        let slot = match lowest_released {
            Some(slot) => {
                issue.released.remove(slot);
                slot
            }
            None if issue.issued < self.capacity => {
                issue.issued += 1;
                Slot((issue.issued - 1) as u16)
            }
            None => {
                return Err(KvError::CapacityExhausted {
                    rank,
                    capacity: self.capacity,
                })
            }
        };
        let mut next = current.clone();
        if next.owners.len() <= slot.index() {
            next.owners.resize(slot.index() + 1, None);
        }
        next.owners[slot.index()] = Some(rank);
        next.slots.insert(rank, slot);
        self.table.store::<R>(next, guard);
        Ok(slot)
    }

    /// Stops the ranks matching `target` from writing; they stay credited
    /// and their slots become pending. Returns the slots (empty when another
    /// caller unmapped them first).
    pub fn unmap(&self, target: impl Fn(WorkerWithDpRank) -> bool) -> Vec<Slot> {
        let guard = R::pin();
        let mut issue = self.issue.lock();
        let mut next = self.table(&guard).clone();
        let unmapped: Vec<(Slot, WorkerWithDpRank)> = next
            .slots
            .iter()
            .filter(|(r, _)| target(**r))
            .map(|(r, s)| (*s, *r))
            .collect();
        next.slots.retain(|r, _| !target(*r));
        if !unmapped.is_empty() {
            self.table.store::<R>(next, &guard);
        }
        issue.pending.extend(unmapped.iter().copied());
        unmapped.into_iter().map(|(slot, _)| slot).collect()
    }

    /// Returns once no slot of a rank matching `target` is pending (unmapped
    /// by someone and not yet released). The caller must not be pinned.
    pub fn wait_for_release(&self, target: impl Fn(WorkerWithDpRank) -> bool) {
        let mut backoff = Backoff::new();
        loop {
            let pending = self.issue.lock().pending.iter().any(|&(_, r)| target(r));
            if !pending {
                return;
            }
            backoff.snooze();
        }
    }

    /// Whether a rank matching `target` has a pending slot (diagnostics).
    pub fn is_pending(&self, target: impl Fn(WorkerWithDpRank) -> bool) -> bool {
        self.issue.lock().pending.iter().any(|&(_, r)| target(r))
    }

    /// Vacates `slots`, waits until every thread pinned before has unpinned
    /// (so no reader still holds a table crediting the old owner), then frees
    /// them for reuse. The slots must have been swept; the caller must not be
    /// pinned.
    pub fn release(&self, slots: &[Slot]) {
        if slots.is_empty() {
            return;
        }
        {
            let guard = R::pin();
            let _issue = self.issue.lock();
            let mut next = self.table(&guard).clone();
            for slot in slots {
                if let Some(owner) = next.owners.get_mut(slot.index()) {
                    *owner = None;
                }
            }
            self.table.store::<R>(next, &guard);
        }
        R::wait_for_pinned_threads();
        let mut issue = self.issue.lock();
        slots.iter().for_each(|&s| {
            issue.released.insert(s);
        });
        issue.pending.retain(|(s, _)| !slots.contains(s));
    }

    /// Number of slots issued so far (released ones included).
    pub fn issued(&self) -> usize {
        self.issue.lock().issued
    }
}
