//! Position of an external hash in a node's edge.
//!
//! Edges only grow at the tail and are cut only by splits, so positions never
//! move. Short edges (at most [`INDEX_THRESHOLD`] blocks) keep no table: a
//! lookup scans from the tail, so the last copy of a repeated hash wins. Longer
//! edges keep a table from external hash to its last position.
//!
//! Both tables hold positions only, never keys: a slot is `position + 1`
//! (0 = empty) and its key is read from the edge. Every owner keeps its
//! positions below its slot count, so a table of at most [`NARROW_SLOTS`]
//! slots stores them in 2 bytes a slot and a larger one in 4 (the plain
//! table of an edge of up to 16,384 blocks is narrow).
//!
//! [`EdgeIndex`] (lock-based gates) is a table of positions over a prefix
//! `[0, indexed)`; the unindexed tail (fewer than [`TAIL_BATCH`] positions)
//! is scanned first, newest to oldest, so a decode append costs no hashing
//! until a batch is full. A split rebuilds the (prefix) table, which is
//! cheap next to the split itself and keeps repeated hashes exact.
//!
//! [`AtomicIndex`] (lock-free readers) is an insert-only open-addressing
//! table of atomic positions with a fixed number of slots; like the plain
//! table, a slot's key is the edge's hash at its position. Writers
//! (serialized by the node's lock) store a position with Release after its
//! pair; a reader loads it with Acquire and compares the hash only at
//! positions within its own view of the edge. A position may be newer than
//! that view (the writer indexes before it publishes the length); a probe
//! that passed such positions without finding the hash says so
//! ([`Probe::Unsure`]) and the reader decides (the epoch gate scans its
//! view).

use crate::hash::{BlockPair, ExternalSequenceBlockHash};
use crate::sync::atomic::{AtomicU16, AtomicU32, Ordering};

/// Edges longer than this keep a position table. The model checkers' edges
/// are a few blocks long, so under them it is 1: there every edge of two
/// blocks or more is indexed.
pub const INDEX_THRESHOLD: usize = if cfg!(crtc_checker) { 1 } else { 16 };

/// Appended positions are indexed in batches of this many.
pub const TAIL_BATCH: usize = 32;

/// Tables of at most this many slots keep 2-byte slots: their positions
/// (below the slot count) plus one fit in 16 bits.
pub const NARROW_SLOTS: usize = 1 << 15;

/// A plain table's slots, 2 or 4 bytes wide (module docs).
#[derive(Clone, Debug)]
enum Slots {
    Narrow(Box<[u16]>),
    Wide(Box<[u32]>),
}

impl Slots {
    fn zeroed(len: usize) -> Self {
        if len <= NARROW_SLOTS {
            Self::Narrow(vec![0; len].into_boxed_slice())
        } else {
            Self::Wide(vec![0; len].into_boxed_slice())
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Narrow(slots) => slots.len(),
            Self::Wide(slots) => slots.len(),
        }
    }

    #[inline]
    fn get(&self, at: usize) -> u32 {
        match self {
            Self::Narrow(slots) => u32::from(slots[at]),
            Self::Wide(slots) => slots[at],
        }
    }

    /// Stores `position + 1` at `at`; positions stay below the slot count.
    fn set(&mut self, at: usize, pos: usize) {
        match self {
            Self::Narrow(slots) => slots[at] = pos as u16 + 1,
            Self::Wide(slots) => slots[at] = pos as u32 + 1,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Self::Narrow(slots) => std::mem::size_of_val(&**slots),
            Self::Wide(slots) => std::mem::size_of_val(&**slots),
        }
    }
}

/// The position table of one edge (empty for short edges): open
/// addressing over positions alone. A slot holds `position + 1` (0 = empty)
/// and its key is the edge's external hash at that position, so a slot is 2
/// or 4 bytes and a lookup compares against the edge it indexes (`probe`). At
/// most half the slots are used, so a successful lookup takes about 1.5
/// steps on average.
#[derive(Clone, Debug, Default)]
pub struct EdgeIndex {
    slots: Option<Slots>,
    indexed: usize,
}

/// Where a probe for a hash stopped.
enum Stop {
    /// The slot holding the hash's latest position.
    Hit(usize, usize),
    /// The empty slot ending the probe (or `None` if every slot was full);
    /// `unsure`: it passed positions whose key `key_at` could not tell.
    Miss(Option<usize>, bool),
}

/// The probe both tables share: linear probing from the hash's Fibonacci
/// home over `len` slots (a power of two), where `slot_at(i)` is slot `i`'s
/// `position + 1` (0 = empty) and `key_at(p)` the external hash at position
/// `p`, `None` if the caller cannot see it.
fn probe(
    len: usize,
    hash: ExternalSequenceBlockHash,
    slot_at: impl Fn(usize) -> u32,
    key_at: impl Fn(usize) -> Option<u64>,
) -> Stop {
    let mask = len - 1;
    let mut at = (hash.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & mask;
    let mut unsure = false;
    for _ in 0..len {
        let Some(pos) = (slot_at(at) as usize).checked_sub(1) else {
            return Stop::Miss(Some(at), unsure);
        };
        match key_at(pos) {
            Some(key) if key == hash.0 => return Stop::Hit(at, pos),
            Some(_) => {}
            None => unsure = true,
        }
        at = (at + 1) & mask;
    }
    Stop::Miss(None, unsure)
}

impl EdgeIndex {
    /// The index of `edge`.
    pub fn build(edge: &[BlockPair]) -> Self {
        let mut index = Self::default();
        index.rebuild(edge);
        index
    }

    fn rebuild(&mut self, edge: &[BlockPair]) {
        self.slots = (edge.len() > INDEX_THRESHOLD)
            .then(|| Slots::zeroed((2 * edge.len()).next_power_of_two()));
        self.indexed = 0;
        self.index_through(edge);
    }

    /// Indexes `edge[indexed..]`, in order, so a repeat's later position
    /// replaces the earlier one.
    fn index_through(&mut self, edge: &[BlockPair]) {
        let Some(slots) = &mut self.slots else {
            return;
        };
        for (pos, pair) in edge.iter().enumerate().skip(self.indexed) {
            let key_at = |p: usize| edge.get(p).map(|pair| pair.external.0);
            match probe(slots.len(), pair.external, |i| slots.get(i), key_at) {
                Stop::Hit(at, _) | Stop::Miss(Some(at), _) => slots.set(at, pos),
                Stop::Miss(None, _) => unreachable!("at most half the slots are used"),
            }
        }
        self.indexed = edge.len();
    }

    /// Records that `edge` grew at the tail (indexing a full batch at once;
    /// a table that would pass half full is rebuilt twice as large).
    pub fn appended(&mut self, edge: &[BlockPair], _old_len: usize) {
        match &self.slots {
            Some(_) if edge.len() - self.indexed < TAIL_BATCH => {}
            Some(slots) if 2 * edge.len() <= slots.len() => self.index_through(edge),
            None if edge.len() <= INDEX_THRESHOLD => {}
            _ => self.rebuild(edge),
        }
    }

    /// Heap bytes of the table.
    pub fn bytes(&self) -> usize {
        self.slots.as_ref().map_or(0, Slots::bytes)
    }

    /// Records that `edge` was truncated (its suffix split off).
    pub fn truncated(&mut self, edge: &[BlockPair]) {
        if self.slots.is_some() {
            self.rebuild(edge);
        }
    }

    /// Last position of `hash` in `edge`.
    pub fn position(&self, edge: &[BlockPair], hash: ExternalSequenceBlockHash) -> Option<usize> {
        let Some(slots) = &self.slots else {
            return edge.iter().rposition(|pair| pair.external == hash);
        };
        let tail = self.indexed.min(edge.len());
        if let Some(recent) = edge[tail..].iter().rposition(|pair| pair.external == hash) {
            return Some(tail + recent);
        }
        let key_at = |p: usize| edge.get(p).map(|pair| pair.external.0);
        match probe(slots.len(), hash, |i| slots.get(i), key_at) {
            Stop::Hit(_, pos) => Some(pos),
            Stop::Miss(..) => None,
        }
    }

    /// Position of `hash`, checking `near - 1` and `near + 1` first (removal
    /// runs visit neighbouring positions). Returns the last copy of a repeat
    /// unless a neighbour holds the hash.
    pub fn position_near(
        &self,
        edge: &[BlockPair],
        hash: ExternalSequenceBlockHash,
        near: usize,
    ) -> Option<usize> {
        neighbour_holding(near, |p| {
            edge.get(p).is_some_and(|pair| pair.external == hash)
        })
        .or_else(|| self.position(edge, hash))
    }
}

/// The neighbour of `near` at which `holds` is true, `near - 1` first, then
/// `near + 1`: removal runs visit neighbouring positions, so every gate's
/// `position_near` asks this before its position table. Eviction removes a
/// sequence's blocks tail first, so the run mostly descends and `near - 1`
/// hits first. Written out rather than as an iterator over the two
/// candidates, which the compiler left as a loop over an array of options
/// (both measured: `papers/choices.md`).
#[inline]
pub fn neighbour_holding(near: usize, holds: impl Fn(usize) -> bool) -> Option<usize> {
    if near > 0 && holds(near - 1) {
        return Some(near - 1);
    }
    let next = near.wrapping_add(1);
    (next > near && holds(next)).then_some(next)
}

/// What a lock-free probe of an [`AtomicIndex`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// The latest position of the hash within the caller's view.
    Found(usize),
    /// The hash is not within the caller's view.
    Absent,
    /// Not found, but the probe passed positions past the caller's view;
    /// one of them may be the hash's newer copy, and an older copy may be
    /// in the view, so the caller must scan it.
    Unsure,
}

/// An insert-only atomic table of `latest position + 1` (0 = empty) whose
/// keys are the edge's external hashes at those positions, read without
/// locks (module docs): 2 or 4 bytes a slot. Its slot count is fixed; the
/// owner sizes it so it never fills, keeps positions below it, and replaces
/// the table to grow.
pub struct AtomicIndex {
    slots: AtomicSlots,
}

/// An atomic table's slots, 2 or 4 bytes wide.
enum AtomicSlots {
    Narrow(Box<[AtomicU16]>),
    Wide(Box<[AtomicU32]>),
}

/// A slot of an [`AtomicIndex`]: `position + 1`, 0 when empty.
trait AtomicSlot: Sized {
    fn empty() -> Self;
    fn load_slot(&self, order: Ordering) -> u32;
    /// Stores `position + 1`; positions stay below the slot count.
    fn store_slot(&self, pos: usize, order: Ordering);
}

impl AtomicSlot for AtomicU16 {
    fn empty() -> Self {
        AtomicU16::new(0)
    }
    #[inline]
    fn load_slot(&self, order: Ordering) -> u32 {
        u32::from(self.load(order))
    }
    #[inline]
    fn store_slot(&self, pos: usize, order: Ordering) {
        self.store(pos as u16 + 1, order);
    }
}

impl AtomicSlot for AtomicU32 {
    fn empty() -> Self {
        AtomicU32::new(0)
    }
    #[inline]
    fn load_slot(&self, order: Ordering) -> u32 {
        self.load(order)
    }
    #[inline]
    fn store_slot(&self, pos: usize, order: Ordering) {
        self.store(pos as u32 + 1, order);
    }
}

/// [`AtomicIndex::insert`] on slots of one width.
#[inline]
fn insert_into<S: AtomicSlot>(
    slots: &[S],
    hash: ExternalSequenceBlockHash,
    pos: usize,
    key_at: impl Fn(usize) -> u64,
) {
    debug_assert!(pos < slots.len(), "positions stay below the slot count");
    // Relaxed: only writers store, and they hold the node's lock.
    let slot_at = |i: usize| slots[i].load_slot(Ordering::Relaxed);
    if let Stop::Hit(at, _) | Stop::Miss(Some(at), _) =
        probe(slots.len(), hash, slot_at, |p| Some(key_at(p)))
    {
        // Release: a reader that loads this slot also sees the pair stored
        // at `pos` before it.
        slots[at].store_slot(pos, Ordering::Release);
    }
}

/// [`AtomicIndex::find`] on slots of one width.
#[inline]
fn find_in<S: AtomicSlot>(
    slots: &[S],
    hash: ExternalSequenceBlockHash,
    key_at: impl Fn(usize) -> Option<u64>,
) -> Probe {
    // Acquire: pairs with the Release store in `insert_into`.
    let slot_at = |i: usize| slots[i].load_slot(Ordering::Acquire);
    match probe(slots.len(), hash, slot_at, key_at) {
        Stop::Hit(_, pos) => Probe::Found(pos),
        Stop::Miss(_, true) => Probe::Unsure,
        Stop::Miss(_, false) => Probe::Absent,
    }
}

impl std::fmt::Debug for AtomicIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomicIndex")
            .field("slots", &self.slots())
            .finish_non_exhaustive()
    }
}

impl AtomicIndex {
    /// An empty table of `slots` slots (rounded up to a power of two).
    pub fn with_slots(slots: usize) -> Self {
        let count = slots.max(1).next_power_of_two();
        let slots = if count <= NARROW_SLOTS {
            AtomicSlots::Narrow((0..count).map(|_| AtomicSlot::empty()).collect())
        } else {
            AtomicSlots::Wide((0..count).map(|_| AtomicSlot::empty()).collect())
        };
        Self { slots }
    }

    /// Slots in the table.
    pub fn slots(&self) -> usize {
        match &self.slots {
            AtomicSlots::Narrow(slots) => slots.len(),
            AtomicSlots::Wide(slots) => slots.len(),
        }
    }

    /// Heap bytes of the table.
    pub fn bytes(&self) -> usize {
        let width = match self.slots {
            AtomicSlots::Narrow(_) => std::mem::size_of::<u16>(),
            AtomicSlots::Wide(_) => std::mem::size_of::<u32>(),
        };
        self.slots() * width
    }

    /// Records `pos` as the latest position of `hash`, whose pair the caller
    /// stored at `pos` before. Writers only, under the node's lock;
    /// `key_at(p)` is the external hash the writer's edge holds at an
    /// indexed position `p`. A full table drops the entry; readers then
    /// scan (owners size tables so this never happens).
    #[inline]
    pub fn insert(
        &self,
        hash: ExternalSequenceBlockHash,
        pos: usize,
        key_at: impl Fn(usize) -> u64,
    ) {
        match &self.slots {
            AtomicSlots::Narrow(slots) => insert_into(slots, hash, pos, key_at),
            AtomicSlots::Wide(slots) => insert_into(slots, hash, pos, key_at),
        }
    }

    /// Probes for `hash`; `key_at(p)` is the external hash at `p` in the
    /// caller's view of the edge, `None` past it.
    #[inline]
    pub fn find(
        &self,
        hash: ExternalSequenceBlockHash,
        key_at: impl Fn(usize) -> Option<u64>,
    ) -> Probe {
        match &self.slots {
            AtomicSlots::Narrow(slots) => find_in(slots, hash, key_at),
            AtomicSlots::Wide(slots) => find_in(slots, hash, key_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edge(hashes: &[u64]) -> Vec<BlockPair> {
        hashes.iter().map(|&h| BlockPair::new(h, h)).collect()
    }

    #[test]
    fn the_table_is_counted_once_it_exists() {
        let short = edge(&(0..INDEX_THRESHOLD as u64).collect::<Vec<_>>());
        assert_eq!(
            EdgeIndex::build(&short).bytes(),
            0,
            "short edges keep no table"
        );
        let long = edge(&(0..1000).collect::<Vec<_>>());
        let bytes = EdgeIndex::build(&long).bytes();
        // 1,000 positions at most half full: 2,048 slots of 2 bytes.
        assert_eq!(bytes, 2048 * 2);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "builds tables of 32,768 and 65,536 slots; interpreted, that takes minutes"
    )]
    fn slots_widen_past_the_narrow_limit_and_keep_every_position() {
        // Edges of up to half the narrow limit index into 2-byte slots;
        // one block more doubles the table past it, into 4-byte slots.
        for len in [NARROW_SLOTS / 2, NARROW_SLOTS / 2 + 1] {
            let pairs = edge(&(0..len as u64).map(|h| h * 7 + 1).collect::<Vec<_>>());
            let index = EdgeIndex::build(&pairs);
            let width = if len <= NARROW_SLOTS / 2 { 2 } else { 4 };
            assert_eq!(index.bytes(), (2 * len).next_power_of_two() * width);
            let last = ExternalSequenceBlockHash((len as u64 - 1) * 7 + 1);
            assert_eq!(index.position(&pairs, last), Some(len - 1));
            let atomic = AtomicIndex::with_slots(2 * len);
            let key_at = |p: usize| pairs[p].external.0;
            atomic.insert(last, len - 1, key_at);
            assert_eq!(atomic.bytes(), index.bytes());
            assert_eq!(
                atomic.find(last, |p| Some(key_at(p))),
                Probe::Found(len - 1)
            );
        }
    }

    #[test]
    fn positions_match_a_map_model_across_threshold_appends_and_splits() {
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % 40
        };
        // Miri interprets every lookup: a tenth of the cases there.
        for _ in 0..if cfg!(miri) { 20 } else { 200 } {
            let len = 1 + (next() as usize);
            let mut pairs = edge(&(0..len).map(|_| next()).collect::<Vec<_>>());
            let mut index = EdgeIndex::build(&pairs);
            let extra = next() as usize % 20;
            let old = pairs.len();
            pairs.extend(edge(&(0..extra).map(|_| next()).collect::<Vec<_>>()));
            index.appended(&pairs, old);
            let cut = 1 + next() as usize % pairs.len();
            pairs.truncate(cut);
            index.truncated(&pairs);
            for h in 0..40 {
                let expected = pairs.iter().rposition(|p| p.external.0 == h);
                assert_eq!(
                    index.position(&pairs, ExternalSequenceBlockHash(h)),
                    expected
                );
            }
        }
    }

    #[test]
    fn a_neighbour_is_checked_below_then_above_and_never_past_the_ends() {
        let holding = |set: &'static [usize]| move |p: usize| set.contains(&p);
        assert_eq!(neighbour_holding(5, holding(&[4, 6])), Some(4));
        assert_eq!(neighbour_holding(5, holding(&[6])), Some(6));
        assert_eq!(neighbour_holding(5, holding(&[5, 3, 7])), None);
        assert_eq!(neighbour_holding(0, holding(&[1, usize::MAX])), Some(1));
        assert_eq!(neighbour_holding(usize::MAX, holding(&[0])), None);
        let wrapped = neighbour_holding(usize::MAX, holding(&[usize::MAX - 1]));
        assert_eq!(wrapped, Some(usize::MAX - 1));
    }

    #[test]
    fn position_near_prefers_the_neighbour_copy_of_a_repeat() {
        let pairs = edge(&[1, 2, 3, 2, 5]);
        let index = EdgeIndex::build(&pairs);
        assert_eq!(
            index.position(&pairs, ExternalSequenceBlockHash(2)),
            Some(3)
        );
        assert_eq!(
            index.position_near(&pairs, ExternalSequenceBlockHash(2), 0),
            Some(1)
        );
    }
}
