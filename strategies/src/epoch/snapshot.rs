//! Snapshots: a node's shape as one immutable value, and the view readers get.
//!
//! A [`Snapshot`] holds the node's coverage (full bits, cutoffs, flags) and
//! the edge length at the time it was built as plain data in one
//! [`PlainCell`], written when the snapshot is built and immutable once
//! published (the gate's Release store of the pointer orders the write before
//! every reader's Acquire load; under loom every read of the cell is checked
//! against that order), plus a shared handle to the edge buffer. The buffer
//! may grow past that length while the snapshot is current (pure appends);
//! the gate decides which length a reader may use (see the module docs of
//! `epoch`), and a [`View`] reads exactly that many pairs.
//!
//! Every accessor is total: positions past the view's length read as default
//! pairs, and nothing panics whatever the stored values are.

use super::edge::EdgeBuf;
use crate::bits::SlotBits;
use crate::edge_index::{neighbour_holding, Probe};
use crate::hash::{BlockPair, ExternalSequenceBlockHash, LocalBlockHash, Slot};
use crate::shape::{ShapeInit, ShapeRead};
use crate::stats::{StatCounter, StatGauge};
use crate::sync::{Arc, PlainCell};

/// Snapshots alive (process-wide, every epoch gate).
pub static LIVE_SNAPSHOTS: StatGauge = StatGauge::new();
/// Snapshots built (process-wide): every publication of a coverage, flag or
/// buffer change, plus one per node.
pub static SNAPSHOT_ALLOCATIONS: StatCounter = StatCounter::new();

/// Who covers the edge, and the node's flags. Plain data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Coverage {
    pub(super) full: SlotBits,
    /// Sorted by slot; each `0 < k < len`.
    pub(super) cutoffs: Vec<(Slot, u32)>,
    pub(super) internal: bool,
    pub(super) anchor: bool,
}

impl Coverage {
    fn cutoff(&self, slot: Slot) -> Option<u32> {
        self.cutoffs
            .binary_search_by_key(&slot, |&(s, _)| s)
            .ok()
            .map(|i| self.cutoffs[i].1)
    }

    fn bytes(&self) -> usize {
        (self.full.word_count().saturating_sub(4)) * 8
            + self.cutoffs.capacity() * std::mem::size_of::<(Slot, u32)>()
    }
}

/// A snapshot's plain part: what a published snapshot fixes.
pub(super) struct Shape {
    /// The edge length when the snapshot was built.
    pub(super) len: usize,
    pub(super) cover: Coverage,
}

/// One published state of a node's shape.
pub(super) struct Snapshot {
    pub(super) edge: Arc<EdgeBuf>,
    shape: PlainCell<Shape>,
}

impl Snapshot {
    pub(super) fn new(edge: Arc<EdgeBuf>, len: usize, cover: Coverage) -> Self {
        LIVE_SNAPSHOTS.add(1);
        SNAPSHOT_ALLOCATIONS.bump();
        Self {
            edge,
            shape: PlainCell::new(Shape { len, cover }),
        }
    }

    /// The length and coverage. Callers hold a snapshot loaded through the
    /// reclaimer's `protect` (Acquire, pairing with the Release publication)
    /// or the node's mutex.
    #[inline]
    pub(super) fn shape(&self) -> &Shape {
        // SAFETY: the shape is written only in `new`, before the snapshot is
        // published; every caller's load of the snapshot is ordered after
        // that publication.
        self.shape.with(|shape| unsafe { &*shape })
    }

    /// The first snapshot of a node, with a buffer of exactly its edge.
    pub(super) fn from_init(init: ShapeInit) -> Self {
        let len = init.edge.len();
        let edge = Arc::new(EdgeBuf::with_pairs(len, &init.edge));
        let cover = Coverage {
            full: init.full,
            cutoffs: init.cutoffs,
            internal: init.internal,
            anchor: init.anchor,
        };
        Self::new(edge, len, cover)
    }

    /// Bytes of the snapshot itself (the buffer is counted on its own).
    pub(super) fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.shape().cover.bytes()
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        LIVE_SNAPSHOTS.sub(1);
    }
}

/// A node's shape as a reader or a writer sees it: an edge buffer read up to
/// `len`, and a coverage.
pub struct View<'a> {
    edge: &'a EdgeBuf,
    len: usize,
    cover: &'a Coverage,
}

impl std::fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("len", &self.len)
            .field("cover", self.cover)
            .finish_non_exhaustive()
    }
}

impl<'a> View<'a> {
    /// A view of `edge[..len]` (clamped to the capacity) with `cover`.
    pub(super) fn new(edge: &'a EdgeBuf, len: usize, cover: &'a Coverage) -> Self {
        Self {
            edge,
            len: len.min(edge.capacity()),
            cover,
        }
    }

    fn scan(&self, hash: ExternalSequenceBlockHash) -> Option<usize> {
        (0..self.len)
            .rev()
            .find(|&p| self.edge.pair(p).external == hash)
    }
}

impl ShapeRead for View<'_> {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }
    #[inline]
    fn pair(&self, pos: usize) -> BlockPair {
        if pos < self.len {
            self.edge.pair(pos)
        } else {
            BlockPair::new(0, 0)
        }
    }
    #[inline]
    fn match_locals(&self, from: usize, locals: &[LocalBlockHash]) -> usize {
        self.edge.match_locals(from, self.len, locals)
    }
    fn position(&self, hash: ExternalSequenceBlockHash) -> Option<usize> {
        match self.edge.find(hash, self.len) {
            // No index: a short edge, scanned from the tail.
            Err(()) => self.scan(hash),
            Ok(Probe::Found(pos)) => Some(pos),
            // Every hash below `len` was indexed before `len` was published.
            Ok(Probe::Absent) => None,
            // Maybe a newer copy past this view: scan our prefix.
            Ok(Probe::Unsure) => self.scan(hash),
        }
    }
    #[inline]
    fn position_near(&self, hash: ExternalSequenceBlockHash, near: usize) -> Option<usize> {
        neighbour_holding(near, |p| {
            p < self.len && self.edge.external(p) == Some(hash)
        })
        .or_else(|| self.position(hash))
    }
    #[inline]
    fn is_internal(&self) -> bool {
        self.cover.internal
    }
    #[inline]
    fn is_anchor(&self) -> bool {
        self.cover.anchor
    }
    #[inline]
    fn is_full(&self, slot: Slot) -> bool {
        self.cover.full.contains(slot)
    }
    fn cutoff(&self, slot: Slot) -> Option<u32> {
        self.cover.cutoff(slot)
    }
    #[inline]
    fn full_word(&self, index: usize) -> u64 {
        self.cover.full.word(index)
    }
    #[inline]
    fn full_word_count(&self) -> usize {
        self.cover.full.word_count()
    }
    fn for_each_cutoff(&self, mut f: impl FnMut(Slot, u32)) {
        self.cover.cutoffs.iter().for_each(|&(slot, k)| f(slot, k));
    }
    fn has_full(&self) -> bool {
        !self.cover.full.is_empty()
    }
    fn has_cutoffs(&self) -> bool {
        !self.cover.cutoffs.is_empty()
    }
}
