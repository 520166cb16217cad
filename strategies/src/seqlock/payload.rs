//! The seqlock gate's node payload: every field an optimistic reader touches
//! is an atomic, and every out-of-line array is either immutable or
//! append-only below an atomic length, published by pointer with Release and
//! retired through the reclaimer when replaced — never freed under a reader.
//! The one exception to "atomic" is the edge's pairs: they are plain data
//! (one [`PlainCell`] each, checked under loom), because no reader ever reads
//! a pair that may be written concurrently: a pair is written once, at or
//! past the published length, before the Release store of the length that
//! covers it (or before the Release publication of the buffer it was copied
//! into), readers read only below the length they loaded with Acquire, and a
//! truncated edge is never appended to again (a split marks its node
//! internal in the same section). The cutoff list and the full-bit chunks
//! stay atomic: writers raise a cutoff and set a bit in place, under readers
//! the version check then sends back.
//!
//! Readers use [`View`]: it loads the cutoff list, the length and the edge
//! buffer once, with Acquire, *before* the closure reads any full word, so a
//! promotion (bit set, then the cutoff list republished without the slot)
//! is seen either before, after, or as "bit set and cutoff still there" —
//! never as neither. Every accessor clamps what it reads: values from an
//! unvalidated read may be inconsistent, and nothing here may panic,
//! allocate according to them, or index out of bounds.
//!
//! Writers use [`Writer`] while holding the gate's writer lock: stores are
//! Relaxed (the gate's fences and lock word order them), except the ones that
//! publish: a grown buffer or a new cutoff list (Release store of the
//! pointer) and an appended length (Release store of `len`). A replaced
//! array is unpublished first (the pointer swap) and retired through the
//! gate's reclaimer after, so no reader that pins after the retire can load
//! it.

use crate::edge_index::{neighbour_holding, AtomicIndex, Probe, INDEX_THRESHOLD};
use crate::hash::{BlockPair, ExternalSequenceBlockHash, LocalBlockHash, Slot};
use crate::reclaim::Reclaim;
use crate::shape::{common_prefix, ShapeInit, ShapeRead, ShapeWrite};
use crate::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use crate::sync::PlainCell;
use std::marker::PhantomData;

const INTERNAL: u8 = 1;
const ANCHOR: u8 = 2;
const INLINE_WORDS: usize = 4;

/// An immutable-capacity array of atomic words.
struct Words(Box<[AtomicU64]>);

impl Words {
    /// `capacity` words starting with `prefix` (cut at the capacity), the
    /// rest zero: one exact allocation, each word written once. Zeroing it
    /// first and then setting each word through a bounds check was most of
    /// a new node's and a grown edge's cost.
    fn filled(capacity: usize, prefix: impl Iterator<Item = u64>) -> Self {
        let mut words = Vec::with_capacity(capacity);
        words.extend(prefix.take(capacity).map(AtomicU64::new));
        words.resize_with(capacity, || AtomicU64::new(0));
        Self(words.into_boxed_slice())
    }
    /// `capacity` words starting with a copy of `from`. Writers only.
    fn copied(capacity: usize, from: &[AtomicU64]) -> Self {
        // Relaxed: writers hold the gate's lock, which orders earlier stores.
        Self::filled(capacity, from.iter().map(|w| w.load(Ordering::Relaxed)))
    }
    #[inline]
    fn get(&self, index: usize) -> u64 {
        // Relaxed: ordered by the pointer's Acquire load and the gate's fences.
        self.0.get(index).map_or(0, |w| w.load(Ordering::Relaxed))
    }
    #[inline]
    fn set(&self, index: usize, value: u64) {
        if let Some(word) = self.0.get(index) {
            // Relaxed: writers hold the gate's lock; publication is ordered by
            // the Release store of `len` or of the owning pointer.
            word.store(value, Ordering::Relaxed);
        }
    }
    fn capacity(&self) -> usize {
        self.0.len()
    }
}

/// The edge's pairs, append-only below `len` (module docs).
struct EdgeBuf(Box<[PlainCell<BlockPair>]>);

impl EdgeBuf {
    /// `capacity` pairs starting with `prefix` (cut at the capacity), the
    /// rest default: one exact allocation, each pair written once.
    fn filled(capacity: usize, prefix: impl Iterator<Item = BlockPair>) -> Self {
        let mut pairs = Vec::with_capacity(capacity);
        pairs.extend(prefix.take(capacity).map(PlainCell::new));
        pairs.resize_with(capacity, || PlainCell::new(BlockPair::new(0, 0)));
        Self(pairs.into_boxed_slice())
    }
    fn capacity(&self) -> usize {
        self.0.len()
    }
    /// The pair at `pos` (a default pair past the capacity). Callers read
    /// below a length they loaded with Acquire, or hold the writer lock.
    #[inline]
    fn pair(&self, pos: usize) -> BlockPair {
        self.0.get(pos).map_or(BlockPair::new(0, 0), |cell| {
            // SAFETY: a pair below a published length is never written again
            // (module docs), and its write is ordered before the caller's
            // Acquire load of that length.
            cell.with(|pair| unsafe { *pair })
        })
    }
    /// [`common_prefix`] of the cells from `from` below `len` and
    /// `locals`. Callers pass a length they loaded with Acquire.
    #[inline]
    fn match_locals(&self, from: usize, len: usize, locals: &[LocalBlockHash]) -> usize {
        let cells = self.0.get(from..len).unwrap_or_default();
        // SAFETY: as `pair`: a pair below a published length is never
        // written again, and its write is ordered before that length's
        // Acquire load.
        let local = |i: usize| cells[i].with(|pair| unsafe { (*pair).local });
        common_prefix(cells.len(), local, locals)
    }
    /// Writes the pair at `pos`, at or past the published length. Writers
    /// only; a Release store of the length publishes it.
    fn write(&self, pos: usize, pair: BlockPair) {
        if let Some(cell) = self.0.get(pos) {
            // SAFETY: the writer lock makes this the only writer, and no
            // reader reads at or past the length it loaded (module docs).
            cell.with_mut(|slot| unsafe { *slot = pair });
        }
    }
}

/// The sorted cutoff list, immutable except for in-place raises of an existing
/// entry's cutoff: entry = slot << 32 | cutoff.
struct CutoffBuf(Words);

/// Retires a replaced box through `R`.
///
/// # Safety
/// `old` is null or came from `Box::into_raw`; it is no longer published
/// (no reader that pins from now on can load it) and is retired only here.
unsafe fn retire<R: Reclaim, T: Send + 'static>(old: *mut T) {
    if old.is_null() {
        return;
    }
    struct Owned<T>(*mut T);
    // SAFETY: the box is owned by this wrapper alone once unlinked; `T: Send`.
    unsafe impl<T: Send> Send for Owned<T> {}
    let owned = Owned(old);
    R::defer(&R::pin(), move || {
        let owned = owned;
        // SAFETY: `old` came from `Box::into_raw`, was unlinked before this
        // retire, and the reclaimer runs this only after every reader that
        // could have loaded it has unpinned.
        drop(unsafe { Box::from_raw(owned.0) });
    });
}

fn publish<T>(boxed: Option<T>) -> *mut T {
    boxed.map_or(std::ptr::null_mut(), |b| Box::into_raw(Box::new(b)))
}

/// The position table of a long edge (none for short ones), with room for
/// the edge to double before it is rebuilt.
/// `external_at(p)` is the external hash at position `p < len`. (Read in
/// place: a rebuild used to copy the edge into a `Vec` of pairs first.)
fn index_of(len: usize, external_at: impl Fn(usize) -> u64) -> Option<AtomicIndex> {
    (len > INDEX_THRESHOLD).then(|| {
        let index = AtomicIndex::with_slots(len * 2);
        for pos in 0..len {
            let hash = ExternalSequenceBlockHash(external_at(pos));
            index.insert(hash, pos, &external_at);
        }
        index
    })
}

/// A node's shape as atomics.
pub(super) struct Payload {
    len: AtomicU32,
    flags: AtomicU8,
    edge: AtomicPtr<EdgeBuf>,
    index: AtomicPtr<AtomicIndex>,
    full: [AtomicU64; INLINE_WORDS],
    chunks: AtomicPtr<Words>,
    cutoffs: AtomicPtr<CutoffBuf>,
}

fn encode(slot: Slot, k: u32) -> u64 {
    (slot.0 as u64) << 32 | k as u64
}

/// A cutoff list of `len` encoded entries, `None` when empty.
fn encoded_list(len: usize, encoded: impl Iterator<Item = u64>) -> Option<CutoffBuf> {
    (len > 0).then(|| CutoffBuf(Words::filled(len, encoded)))
}

fn decode(entry: u64) -> (Slot, u32) {
    (Slot((entry >> 32) as u16), entry as u32)
}

impl Payload {
    pub(super) fn new(init: ShapeInit) -> Self {
        let edge = EdgeBuf::filled(init.edge.len().max(1), init.edge.iter().copied());
        let words: Vec<u64> = init.full.words().map(|(_, w)| w).collect();
        let chunks = (words.len() > INLINE_WORDS).then(|| {
            let extra = &words[INLINE_WORDS..];
            Words::filled(extra.len(), extra.iter().copied())
        });
        let encoded = init.cutoffs.iter().map(|&(slot, k)| encode(slot, k));
        let cutoffs = encoded_list(init.cutoffs.len(), encoded);
        let flags = (init.internal as u8 * INTERNAL) | (init.anchor as u8 * ANCHOR);
        Self {
            len: AtomicU32::new(init.edge.len() as u32),
            flags: AtomicU8::new(flags),
            edge: AtomicPtr::new(publish(Some(edge))),
            index: AtomicPtr::new(publish(index_of(init.edge.len(), |p| {
                init.edge[p].external.0
            }))),
            full: std::array::from_fn(|i| AtomicU64::new(words.get(i).copied().unwrap_or(0))),
            chunks: AtomicPtr::new(publish(chunks)),
            cutoffs: AtomicPtr::new(publish(cutoffs)),
        }
    }

    /// Approximate bytes held.
    pub(super) fn footprint<R: Reclaim>(&self, pin: &R::Guard) -> usize {
        let view = View::<R>::new(self, pin);
        std::mem::size_of::<Self>()
            + view
                .edge
                .map_or(0, |e| e.capacity() * std::mem::size_of::<BlockPair>())
            + view.index.map_or(0, AtomicIndex::bytes)
            + view.cutoffs.map_or(0, |c| c.0.capacity() * 8)
    }
}

impl Drop for Payload {
    fn drop(&mut self) {
        // SAFETY: dropping the payload means its node is unreachable: every
        // pointer is exclusively owned here (replaced ones were retired).
        unsafe {
            drop_ptr(self.edge.load(Ordering::Relaxed));
            drop_ptr(self.index.load(Ordering::Relaxed));
            drop_ptr(self.chunks.load(Ordering::Relaxed));
            drop_ptr(self.cutoffs.load(Ordering::Relaxed));
        }
    }
}

/// # Safety
/// `ptr` is null or an unaliased pointer from `Box::into_raw`.
unsafe fn drop_ptr<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: guaranteed by the caller.
        drop(unsafe { Box::from_raw(ptr) });
    }
}

/// Dereferences a published pointer, loaded through `R`'s protection.
///
/// # Safety
/// The caller is pinned for `'a` (a guard of `R`, the reclaimer the gate
/// retires through, lives at least that long), so a replaced pointee is not
/// freed while the reference lives.
unsafe fn deref<'a, R: Reclaim, T>(ptr: &AtomicPtr<T>) -> Option<&'a T> {
    // `protect`: at least Acquire (pairs with the Release publication of the
    // pointee), and whatever more the backend's protection needs.
    let raw = R::protect(ptr);
    // SAFETY: non-null pointers are live boxes (see the function contract).
    unsafe { raw.as_ref() }
}

/// A reader's (or writer's) view of a seqlock node: the out-of-line arrays
/// loaded once, borrowed for as long as the pin the view was made under.
pub struct View<'a, R: Reclaim> {
    payload: &'a Payload,
    len: usize,
    edge: Option<&'a EdgeBuf>,
    index: Option<&'a AtomicIndex>,
    cutoffs: Option<&'a CutoffBuf>,
    /// The reclaimer whose pin the view lives under (it loads the full-bit
    /// chunks lazily, through `R::protect`).
    reclaim: PhantomData<fn() -> R>,
}

impl<R: Reclaim> std::fmt::Debug for View<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl<R: Reclaim> std::fmt::Debug for Writer<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("len", &self.view.len)
            .finish_non_exhaustive()
    }
}

impl<'a, R: Reclaim> View<'a, R> {
    /// Loads the view under `_pin`, which outlives it.
    pub(super) fn new(payload: &'a Payload, _pin: &'a R::Guard) -> Self {
        // SAFETY: `_pin` is a pin of the reclaimer the gate retires through,
        // alive for `'a`.
        let cutoffs = unsafe { deref::<R, _>(&payload.cutoffs) };
        // Acquire: pairs with the Release store of an appended length, so the
        // pairs below it are visible.
        let len = payload.len.load(Ordering::Acquire) as usize;
        // SAFETY: as above (the edge buffer is retired through the same pin).
        let edge = unsafe { deref::<R, _>(&payload.edge) };
        // SAFETY: as above (so is the position index).
        let index = unsafe { deref::<R, _>(&payload.index) };
        let capacity = edge.map_or(0, EdgeBuf::capacity);
        Self {
            payload,
            len: len.min(capacity),
            edge,
            index,
            cutoffs,
            reclaim: PhantomData,
        }
    }

    fn cutoff_entries(&self) -> impl Iterator<Item = (Slot, u32)> + '_ {
        let list = self.cutoffs.map_or(&[][..], |c| &c.0 .0[..]);
        // Relaxed: ordered by the list pointer's Acquire load.
        list.iter().map(|w| decode(w.load(Ordering::Relaxed)))
    }
}

impl<R: Reclaim> ShapeRead for View<'_, R> {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }
    #[inline]
    fn pair(&self, pos: usize) -> BlockPair {
        match self.edge {
            Some(edge) if pos < self.len => edge.pair(pos),
            _ => BlockPair::new(0, 0),
        }
    }
    #[inline]
    fn match_locals(&self, from: usize, locals: &[LocalBlockHash]) -> usize {
        self.edge
            .map_or(0, |edge| edge.match_locals(from, self.len, locals))
    }
    fn position(&self, hash: ExternalSequenceBlockHash) -> Option<usize> {
        let Some(index) = self.index else {
            return (0..self.len).rev().find(|&p| self.pair(p).external == hash);
        };
        // Only copies within this view count; a repeat whose latest copy was
        // indexed past it is absent here, as it was with keyed slots.
        match index.find(hash, |p| (p < self.len).then(|| self.pair(p).external.0)) {
            Probe::Found(pos) => Some(pos),
            Probe::Absent | Probe::Unsure => None,
        }
    }
    fn position_near(&self, hash: ExternalSequenceBlockHash, near: usize) -> Option<usize> {
        neighbour_holding(near, |p| p < self.len && self.pair(p).external == hash)
            .or_else(|| self.position(hash))
    }
    fn is_internal(&self) -> bool {
        // Relaxed: validated by the gate (the flag changes only in structural sections).
        self.payload.flags.load(Ordering::Relaxed) & INTERNAL != 0
    }
    fn is_anchor(&self) -> bool {
        // Relaxed: immutable after construction.
        self.payload.flags.load(Ordering::Relaxed) & ANCHOR != 0
    }
    #[inline]
    fn is_full(&self, slot: Slot) -> bool {
        self.full_word(slot.index() / 64) & (1 << (slot.index() % 64)) != 0
    }
    fn cutoff(&self, slot: Slot) -> Option<u32> {
        self.cutoff_entries()
            .find(|&(s, _)| s == slot)
            .map(|(_, k)| k)
    }
    #[inline]
    fn full_word(&self, index: usize) -> u64 {
        match self.payload.full.get(index) {
            // Relaxed: ordered after the view's Acquire loads; validated.
            Some(word) => word.load(Ordering::Relaxed),
            // SAFETY: the view lives no longer than the pin it was made under.
            None => unsafe { deref::<R, _>(&self.payload.chunks) }
                .map_or(0, |c| c.get(index - INLINE_WORDS)),
        }
    }
    fn full_word_count(&self) -> usize {
        // SAFETY: as above.
        INLINE_WORDS + unsafe { deref::<R, _>(&self.payload.chunks) }.map_or(0, |c| c.capacity())
    }
    fn for_each_cutoff(&self, mut f: impl FnMut(Slot, u32)) {
        self.cutoff_entries().for_each(|(s, k)| f(s, k));
    }
    fn has_full(&self) -> bool {
        (0..self.full_word_count()).any(|i| self.full_word(i) != 0)
    }
    fn has_cutoffs(&self) -> bool {
        self.cutoffs.is_some_and(|c| c.0.capacity() > 0)
    }
}

/// A writer of a seqlock node: the view plus mutators, retiring what it
/// replaces through `R`. Exists only under the gate's writer lock.
pub struct Writer<'a, R: Reclaim> {
    view: View<'a, R>,
    pin: &'a R::Guard,
}

impl<'a, R: Reclaim> Writer<'a, R> {
    /// A writer over `payload` under `pin`. The caller holds the writer lock.
    pub(super) fn new(payload: &'a Payload, pin: &'a R::Guard) -> Self {
        Self {
            view: View::new(payload, pin),
            pin,
        }
    }

    /// Whether a slot other than `slot` is full (a decode append by `slot`
    /// would demote it): the inline words, then the chunks only if any are
    /// published. The generic `has_other_full` asked each word through
    /// `full_word`, which cost a fast append dearly (`papers/choices.md`).
    pub(super) fn others_full(&self, slot: Slot) -> bool {
        let (own_word, own_bit) = (slot.index() / 64, 1u64 << (slot.index() % 64));
        let others = |index: usize, word: u64| {
            if index == own_word {
                word & !own_bit
            } else {
                word
            }
        };
        let full = &self.view.payload.full;
        // Relaxed: the writer holds the lock, which orders every store to them.
        let inline = (0..INLINE_WORDS).any(|i| others(i, full[i].load(Ordering::Relaxed)) != 0);
        // SAFETY: the writer is pinned for its lifetime (`Writer::new`).
        let chunks = unsafe { deref::<R, _>(&self.view.payload.chunks) };
        inline
            || chunks
                .is_some_and(|c| (0..c.capacity()).any(|i| others(INLINE_WORDS + i, c.get(i)) != 0))
    }

    /// Publishes `next` in `slot` (Release: its contents are visible to a
    /// reader that loads it), then retires the array it replaced. (Mutant
    /// `SeqlockRetireBeforeUnpublish`: retires the old array while it is
    /// still the published one, so a reader that pins in between can load it
    /// after its grace period began.)
    fn replace<T: Send + 'static>(slot: &AtomicPtr<T>, next: *mut T) {
        if mutant!(SeqlockRetireBeforeUnpublish) {
            // Relaxed: the writer lock orders our own stores.
            let current = slot.load(Ordering::Relaxed);
            // SAFETY: violated on purpose (a negative control for the
            // checkers): `current` is still published.
            unsafe { retire::<R, T>(current) };
            // Release: as below.
            slot.store(next, Ordering::Release);
            return;
        }
        // Release: publishes the new array's contents.
        let old = slot.swap(next, Ordering::Release);
        // SAFETY: every array pointer holds null or a box from `publish`; the
        // swap unpublished `old`, and only this writer (holding the lock)
        // saw it leave.
        unsafe { retire::<R, T>(old) };
    }

    fn refresh(&mut self) {
        self.view = View::new(self.view.payload, self.pin);
    }

    /// Publishes `list` as the cutoff list, retiring the old one.
    fn replace_cutoffs(&mut self, list: Option<CutoffBuf>) {
        Self::replace(&self.view.payload.cutoffs, publish(list));
        self.refresh();
    }

    fn grow_edge(&mut self, needed: usize) {
        let capacity = self.view.edge.map_or(0, EdgeBuf::capacity);
        if needed <= capacity {
            return;
        }
        let (edge, kept) = (self.view.edge, self.view.len.min(capacity));
        let prefix = (0..kept).map(|pos| edge.map_or(BlockPair::new(0, 0), |e| e.pair(pos)));
        let grown = EdgeBuf::filled(needed.max(2 * capacity), prefix);
        Self::replace(&self.view.payload.edge, publish(Some(grown)));
        self.refresh();
    }

    /// Replaces the edge buffer with one of exactly its length, if it has
    /// room to spare: a truncated edge is never appended to again, and a
    /// split prefix kept the buffer the whole edge had grown to (on the
    /// Mooncake trace this gate's shapes held 379 KB beyond their pairs,
    /// against 150 KB for the RwLock gate, whose `Vec` shrinks here).
    fn fit_edge(&mut self) {
        let (edge, len) = (self.view.edge, self.view.len);
        if edge.is_none_or(|e| e.capacity() <= len.max(1)) {
            return;
        }
        let prefix = (0..len).map(|pos| edge.map_or(BlockPair::new(0, 0), |e| e.pair(pos)));
        let fitted = EdgeBuf::filled(len.max(1), prefix);
        Self::replace(&self.view.payload.edge, publish(Some(fitted)));
        self.refresh();
    }

    fn index_appended(&mut self, old_len: usize) {
        let new_len = self.view.len;
        let fits = self.view.index.is_some_and(|i| new_len * 2 <= i.slots());
        if let (true, Some(index)) = (fits, self.view.index) {
            let key_at = |p| self.view.pair(p).external.0;
            (old_len..new_len).for_each(|p| index.insert(self.view.pair(p).external, p, key_at));
            return;
        }
        if new_len > INDEX_THRESHOLD {
            self.rebuild_index();
        }
    }

    fn rebuild_index(&mut self) {
        let edge = self.view.edge;
        let rebuilt = index_of(self.view.len, |p| edge.map_or(0, |e| e.pair(p).external.0));
        Self::replace(&self.view.payload.index, publish(rebuilt));
        self.refresh();
    }

    /// The current list's encoded entries (empty when there is none).
    fn cutoff_words(&self) -> &'a [AtomicU64] {
        self.view.cutoffs.map_or(&[][..], |c| &c.0 .0[..])
    }

    /// Where `slot`'s entry is in the current list, or where it would go.
    /// (Searched in place: collecting the list into a `Vec` first, on every
    /// demotion, was a quarter of `set_cutoff`'s cost on chat.)
    fn find_cutoff(&self, slot: Slot) -> Result<usize, usize> {
        // Relaxed: the writer holds the lock, which orders the list's stores.
        let slot_at = |w: &AtomicU64| decode(w.load(Ordering::Relaxed)).0;
        self.cutoff_words().binary_search_by_key(&slot, slot_at)
    }
}

impl<R: Reclaim> ShapeRead for Writer<'_, R> {
    fn len(&self) -> usize {
        self.view.len()
    }
    fn pair(&self, pos: usize) -> BlockPair {
        self.view.pair(pos)
    }
    fn position(&self, hash: ExternalSequenceBlockHash) -> Option<usize> {
        self.view.position(hash)
    }
    fn position_near(&self, hash: ExternalSequenceBlockHash, near: usize) -> Option<usize> {
        self.view.position_near(hash, near)
    }
    fn is_internal(&self) -> bool {
        self.view.is_internal()
    }
    fn is_anchor(&self) -> bool {
        self.view.is_anchor()
    }
    fn is_full(&self, slot: Slot) -> bool {
        self.view.is_full(slot)
    }
    fn cutoff(&self, slot: Slot) -> Option<u32> {
        self.view.cutoff(slot)
    }
    fn full_word(&self, index: usize) -> u64 {
        self.view.full_word(index)
    }
    fn full_word_count(&self) -> usize {
        self.view.full_word_count()
    }
    fn for_each_cutoff(&self, f: impl FnMut(Slot, u32)) {
        self.view.for_each_cutoff(f)
    }
    fn has_full(&self) -> bool {
        self.view.has_full()
    }
    fn has_cutoffs(&self) -> bool {
        self.view.has_cutoffs()
    }
}

impl<R: Reclaim> ShapeWrite for Writer<'_, R> {
    fn push_blocks(&mut self, blocks: &[BlockPair]) {
        let old_len = self.view.len;
        self.grow_edge(old_len + blocks.len());
        if mutant!(LenBeforePairs) {
            // Broken on purpose: the length is published before its pairs.
            self.view
                .payload
                .len
                .store((old_len + blocks.len()) as u32, Ordering::Release);
        }
        if let Some(edge) = self.view.edge {
            for (i, &pair) in blocks.iter().enumerate() {
                edge.write(old_len + i, pair);
            }
        }
        // Release: a reader that loads the new length sees the pairs below it.
        // (Mutant `SeqlockRelaxedLengthPublish`: Relaxed.)
        let order = if mutant!(SeqlockRelaxedLengthPublish) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        self.view
            .payload
            .len
            .store((old_len + blocks.len()) as u32, order);
        self.refresh();
        self.index_appended(old_len);
    }

    fn truncate_edge(&mut self, len: usize) -> Vec<BlockPair> {
        let suffix: Vec<BlockPair> = (len..self.view.len).map(|p| self.view.pair(p)).collect();
        // Release: structural; readers are invalidated by the version bump.
        self.view
            .payload
            .len
            .store(len.min(self.view.len) as u32, Ordering::Release);
        self.refresh();
        self.fit_edge();
        self.rebuild_index();
        suffix
    }

    fn insert_full(&mut self, slot: Slot) -> bool {
        let (word, bit) = (slot.index() / 64, 1u64 << (slot.index() % 64));
        if let Some(inline) = self.view.payload.full.get(word) {
            // Relaxed: under the writer lock; readers are ordered by the gate.
            return inline.fetch_or(bit, Ordering::Relaxed) & bit == 0;
        }
        let extra = word - INLINE_WORDS;
        // SAFETY: the writer is pinned for its lifetime (`Writer::new`).
        let chunks = unsafe { deref::<R, _>(&self.view.payload.chunks) };
        if chunks.is_none_or(|c| c.capacity() <= extra) {
            let kept = chunks.map_or(&[][..], |c| &c.0[..]);
            let grown = Words::copied((extra + 1).next_power_of_two().max(4), kept);
            Self::replace(&self.view.payload.chunks, publish(Some(grown)));
        }
        // SAFETY: the writer is pinned for its lifetime (and holds the lock,
        // so only it replaces the pointer, just published above).
        let chunks = unsafe { deref::<R, _>(&self.view.payload.chunks) };
        let before = chunks.map_or(0, |c| c.get(extra));
        chunks.into_iter().for_each(|c| c.set(extra, before | bit));
        before & bit == 0
    }

    fn remove_full(&mut self, slot: Slot) -> bool {
        let (word, bit) = (slot.index() / 64, 1u64 << (slot.index() % 64));
        if let Some(inline) = self.view.payload.full.get(word) {
            // Relaxed: under the writer lock; readers are ordered by the gate.
            return inline.fetch_and(!bit, Ordering::Relaxed) & bit != 0;
        }
        // SAFETY: the writer is pinned for its lifetime (`Writer::new`).
        let chunks = unsafe { deref::<R, _>(&self.view.payload.chunks) };
        let before = chunks.map_or(0, |c| c.get(word - INLINE_WORDS));
        chunks
            .into_iter()
            .for_each(|c| c.set(word - INLINE_WORDS, before & !bit));
        before & bit != 0
    }

    fn set_cutoff(&mut self, slot: Slot, k: u32) {
        match self.find_cutoff(slot) {
            Ok(i) => {
                if let Some(buf) = self.view.cutoffs {
                    buf.0.set(i, encode(slot, k));
                }
            }
            Err(i) => {
                // Relaxed: as in `find_cutoff`.
                let old = self
                    .cutoff_words()
                    .iter()
                    .map(|w| w.load(Ordering::Relaxed));
                let (before, after) = (old.clone().take(i), old.skip(i));
                let entries = before.chain(std::iter::once(encode(slot, k))).chain(after);
                self.replace_cutoffs(encoded_list(self.cutoff_words().len() + 1, entries));
            }
        }
    }

    fn remove_cutoff(&mut self, slot: Slot) -> bool {
        let Ok(i) = self.find_cutoff(slot) else {
            return false;
        };
        let old = self.cutoff_words();
        // Relaxed: as in `find_cutoff`.
        let kept = (old.iter().enumerate())
            .filter(|&(at, _)| at != i)
            .map(|(_, w)| w.load(Ordering::Relaxed));
        self.replace_cutoffs(encoded_list(old.len() - 1, kept));
        true
    }

    fn take_cutoffs(&mut self) -> Vec<(Slot, u32)> {
        let list: Vec<_> = self.view.cutoff_entries().collect();
        if !list.is_empty() {
            self.replace_cutoffs(None);
        }
        list
    }

    fn set_internal(&mut self) {
        // Relaxed: under the writer lock; readers are ordered by the gate.
        self.view
            .payload
            .flags
            .fetch_or(INTERNAL, Ordering::Relaxed);
    }
}
