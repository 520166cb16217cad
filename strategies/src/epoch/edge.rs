//! The epoch gate's edge buffer: append-only atomic pairs below a published
//! length, shared by consecutive snapshots of one node.
//!
//! Protocol. A buffer has a fixed capacity. Pairs are plain data, one
//! [`PlainCell`] each. Pairs at positions below `live` (the published
//! length) are never written again; a writer holding the node's lock writes
//! new pairs past `live` and then publishes them, either by a Release store
//! of `live` or by the Release publication of a snapshot whose own length
//! covers them. Readers never read at or past the length they loaded with
//! Acquire, so no read runs concurrently with the write of its pair (under
//! loom, every pair access is checked against that order).
//! A buffer never shrinks: truncation and growth past the capacity build a
//! fresh buffer (see `Writer`), and the old one is freed when the last
//! snapshot holding it is reclaimed.
//!
//! Long buffers (capacity above [`INDEX_THRESHOLD`]) carry an
//! [`AtomicIndex`] sized so that a full buffer fills at most two thirds of
//! it: it never needs to grow (a larger buffer gets a larger table).
//! Appends insert before they publish, so a reader holding length `L` finds
//! every hash at a position below `L`; the table may also show a newer
//! position at or past `L`, and then the reader scans its own prefix
//! instead (see `View::position`).

use crate::edge_index::{AtomicIndex, Probe, INDEX_THRESHOLD};
use crate::hash::{BlockPair, ExternalSequenceBlockHash, LocalBlockHash};
use crate::shape::common_prefix;
use crate::stats::{StatCounter, StatGauge};
use crate::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use crate::sync::PlainCell;

/// Edge buffers alive (process-wide, every epoch gate).
pub static LIVE_BUFFERS: StatGauge = StatGauge::new();
/// Bytes of replaced buffers not yet freed: a buffer counts from the moment
/// its node stops using it until the last snapshot holding it is reclaimed.
pub static RETIRED_BUFFER_BYTES: StatGauge = StatGauge::new();
/// Edge buffers allocated (process-wide).
pub static BUFFER_ALLOCATIONS: StatCounter = StatCounter::new();

/// The pairs of one edge, append-only below `live`.
pub(super) struct EdgeBuf {
    pairs: Box<[PlainCell<BlockPair>]>,
    live: AtomicUsize,
    index: Option<AtomicIndex>,
    retired: AtomicBool,
}

impl EdgeBuf {
    /// A buffer of `capacity` pairs holding `pairs` (published as its
    /// length; pairs past the capacity are dropped). Not shared yet, so the
    /// writes need no ordering of their own: the snapshot that first holds it
    /// publishes it.
    pub(super) fn with_pairs(capacity: usize, pairs: &[BlockPair]) -> Self {
        Self::filled(capacity, pairs.iter().copied())
    }

    /// A buffer of `capacity` pairs holding this buffer's first `keep` pairs
    /// (writers only, below the length they hold; like [`Self::with_pairs`],
    /// not shared yet). Growth and truncation rebuild an edge with it.
    pub(super) fn copy_prefix(&self, keep: usize, capacity: usize) -> Self {
        let keep = keep.min(self.capacity());
        Self::filled(capacity, (0..keep).map(|pos| self.pair(pos)))
    }

    /// A buffer of `capacity` pairs starting with `pairs`, indexed when long.
    fn filled(capacity: usize, pairs: impl Iterator<Item = BlockPair>) -> Self {
        let capacity = capacity.min(u32::MAX as usize - 1);
        // Copied into one exact allocation and the rest zeroed: element by
        // element through a map over every slot, or pair by pair with a
        // capacity check per push, this was most of a rebuild's cost.
        let mut all = Vec::with_capacity(capacity);
        all.extend(pairs.take(capacity).map(PlainCell::new));
        let len = all.len();
        all.resize_with(capacity, || PlainCell::new(BlockPair::new(0, 0)));
        // At most `capacity` distinct keys fill at most two thirds of it.
        let index =
            (capacity > INDEX_THRESHOLD).then(|| AtomicIndex::with_slots(capacity + capacity / 2));
        let buf = Self {
            pairs: all.into_boxed_slice(),
            live: AtomicUsize::new(len),
            index,
            retired: AtomicBool::new(false),
        };
        if let Some(index) = &buf.index {
            let key_at = |p: usize| buf.external(p).map_or(0, |hash| hash.0);
            for pos in 0..len {
                index.insert(ExternalSequenceBlockHash(key_at(pos)), pos, key_at);
            }
        }
        LIVE_BUFFERS.add(1);
        BUFFER_ALLOCATIONS.bump();
        buf
    }

    /// Pairs the buffer can hold.
    #[inline]
    pub(super) fn capacity(&self) -> usize {
        self.pairs.len()
    }

    /// The pair at `pos`; a default pair past the capacity. Callers read only
    /// below a length they loaded with Acquire.
    #[inline]
    pub(super) fn pair(&self, pos: usize) -> BlockPair {
        self.pairs.get(pos).map_or(BlockPair::new(0, 0), |cell| {
            // SAFETY: `pos` is below a published length the caller loaded
            // with Acquire (or holds under the lock): that pair was written
            // before the length was published and is never written again.
            cell.with(|pair| unsafe { *pair })
        })
    }

    /// [`common_prefix`] of the cells from `from` below `len` and
    /// `locals`. Callers pass a length they loaded with Acquire.
    #[inline]
    pub(super) fn match_locals(&self, from: usize, len: usize, locals: &[LocalBlockHash]) -> usize {
        let cells = self.pairs.get(from..len).unwrap_or_default();
        // SAFETY: as `pair`: every cell below `len` was written before `len`
        // was published and is never written again.
        let local = |i: usize| cells[i].with(|pair| unsafe { (*pair).local });
        common_prefix(cells.len(), local, locals)
    }

    /// The external hash at `pos`; `None` past the capacity. Callers read
    /// only below a length they loaded with Acquire.
    #[inline]
    pub(super) fn external(&self, pos: usize) -> Option<ExternalSequenceBlockHash> {
        let cell = self.pairs.get(pos)?;
        // SAFETY: as in `pair`.
        Some(cell.with(|pair| unsafe { (*pair).external }))
    }

    /// Writes `pair` at `pos` (at or past `live`) and indexes it. Writers
    /// only; nothing is visible until published.
    pub(super) fn write(&self, pos: usize, pair: BlockPair) {
        if let Some(cell) = self.pairs.get(pos) {
            // A Release store publishes the pair later (module docs).
            // SAFETY: the caller holds the node's lock (the only writer); no
            // reader reads at `pos`, at or past every published length.
            cell.with_mut(|slot| unsafe { *slot = pair });
            if let Some(index) = &self.index {
                index.insert(pair.external, pos, |p| self.pair(p).external.0);
            }
        }
    }

    /// The published length, for readers.
    #[inline]
    pub(super) fn live(&self) -> usize {
        // Acquire: pairs with `publish`, so the pairs below it are visible.
        self.live.load(Ordering::Acquire)
    }

    /// The published length, for writers holding the node's lock.
    pub(super) fn live_locked(&self) -> usize {
        // Relaxed: only lock holders store it; the lock orders them.
        self.live.load(Ordering::Relaxed)
    }

    /// Publishes the pairs below `len`. (Mutant `EpochRelaxedLengthPublish`:
    /// with a Relaxed store.)
    pub(super) fn publish(&self, len: usize) {
        // Release: a reader that loads `len` sees the pairs written before.
        let order = if mutant!(EpochRelaxedLengthPublish) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        self.live.store(len, order);
    }

    /// Probes the index for `hash` as seen by a view of the first `len`
    /// pairs; `Err(())` when the buffer keeps no index.
    #[inline]
    pub(super) fn find(&self, hash: ExternalSequenceBlockHash, len: usize) -> Result<Probe, ()> {
        let key_at = |p| (p < len).then(|| self.pair(p).external.0);
        self.index
            .as_ref()
            .map(|index| index.find(hash, key_at))
            .ok_or(())
    }

    /// Heap and inline bytes of the buffer (inside its `Arc`).
    pub(super) fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + 2 * std::mem::size_of::<usize>()
            + self.pairs.len() * std::mem::size_of::<BlockPair>()
            + self.index.as_ref().map_or(0, AtomicIndex::bytes)
    }

    /// Records that the node no longer uses this buffer: its bytes count as
    /// retired until the last snapshot holding it is reclaimed.
    pub(super) fn mark_retired(&self) {
        // Relaxed: statistics only; the `Arc` orders the drop after it.
        if !self.retired.swap(true, Ordering::Relaxed) {
            RETIRED_BUFFER_BYTES.add(self.bytes());
        }
    }
}

impl Drop for EdgeBuf {
    fn drop(&mut self) {
        LIVE_BUFFERS.sub(1);
        // Relaxed: statistics only; the last `Arc` drop synchronizes.
        if self.retired.load(Ordering::Relaxed) {
            RETIRED_BUFFER_BYTES.sub(self.bytes());
        }
    }
}

#[cfg(all(test, not(crtc_checker)))]
mod tests {
    use super::*;

    #[test]
    fn the_index_keeps_the_latest_position_of_repeats() {
        let pairs = (0..40u64).map(|i| BlockPair::new(i, i % 7));
        let buf = EdgeBuf::with_pairs(64, &pairs.collect::<Vec<_>>());
        assert_eq!(buf.live_locked(), 40);
        for h in 0..7u64 {
            let last = (0..40u64).rev().find(|i| i % 7 == h).unwrap() as usize;
            assert_eq!(
                buf.find(ExternalSequenceBlockHash(h), 40),
                Ok(Probe::Found(last))
            );
        }
        assert_eq!(
            buf.find(ExternalSequenceBlockHash(99), 40),
            Ok(Probe::Absent)
        );
        // A view of the first 30 pairs cannot confirm the latest copy of a
        // hash repeated past it, and says so.
        assert_eq!(
            buf.find(ExternalSequenceBlockHash(6), 30),
            Ok(Probe::Unsure)
        );
        assert_eq!(buf.pair(200), BlockPair::new(0, 0));
    }

    #[test]
    fn short_buffers_keep_no_index() {
        let buf = EdgeBuf::with_pairs(4, &[BlockPair::new(1, 1)]);
        assert_eq!(buf.find(ExternalSequenceBlockHash(1), 1), Err(()));
        assert_eq!(buf.capacity(), 4);
    }
}
