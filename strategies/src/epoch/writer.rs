//! The epoch gate's writer: a draft of the next state, built under the node's
//! lock while readers keep reading the current snapshot.
//!
//! Coverage and flag changes go to a private copy of the coverage (made on
//! the first change). Pairs are appended in place into the shared buffer past
//! its published length when they fit, or into a fresh private buffer (a
//! copy of the edge with room to grow) when they do not; truncation always
//! builds a fresh buffer, so pairs below any published length are never
//! rewritten. Nothing is visible to readers until the gate publishes what
//! [`Writer::finish`] returns, in the order its docs give.

use super::edge::EdgeBuf;
use super::snapshot::{Coverage, Snapshot, View};
use crate::edge_index::neighbour_holding;
use crate::hash::{BlockPair, ExternalSequenceBlockHash, Slot};
use crate::shape::{ShapeRead, ShapeWrite};
use crate::sync::Arc;

/// What a finished section must publish, in this order.
pub(super) enum Publish {
    /// Nothing changed.
    Nothing,
    /// Pairs were appended in place and coverage did not change: publish the
    /// current buffer's new length.
    Length(usize),
    /// A new snapshot; then, if `length` is set, the shared buffer's new
    /// length (pairs appended in place by a section that also changed
    /// coverage). `replaced_buffer`: the snapshot holds a fresh buffer.
    Snapshot {
        next: Box<Snapshot>,
        length: Option<usize>,
        replaced_buffer: bool,
    },
}

/// A writer of an epoch node. Exists only under the gate's lock.
pub struct Writer<'a> {
    cur: &'a Snapshot,
    len: usize,
    fresh: Option<EdgeBuf>,
    draft: Option<Coverage>,
}

impl std::fmt::Debug for Writer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("len", &self.len)
            .field("fresh_buffer", &self.fresh.is_some())
            .field("draft", &self.draft)
            .finish_non_exhaustive()
    }
}

impl<'a> Writer<'a> {
    /// A writer over `cur`, the published snapshot. The caller holds the lock.
    pub(super) fn new(cur: &'a Snapshot) -> Self {
        let live = cur.edge.live_locked();
        let own = cur.shape().len;
        debug_assert!(live >= own, "the current buffer covers its snapshot");
        Self {
            cur,
            len: live.max(own).min(cur.edge.capacity()),
            fresh: None,
            draft: None,
        }
    }

    #[inline]
    fn edge(&self) -> &EdgeBuf {
        self.fresh.as_ref().unwrap_or(&self.cur.edge)
    }

    #[inline]
    fn cover(&self) -> &Coverage {
        self.draft.as_ref().unwrap_or(&self.cur.shape().cover)
    }

    fn draft(&mut self) -> &mut Coverage {
        let cur = self.cur;
        self.draft.get_or_insert_with(|| cur.shape().cover.clone())
    }

    /// Whether a slot other than `slot` is full (an append by `slot` would
    /// demote it).
    pub(super) fn others_full(&self, slot: Slot) -> bool {
        self.cover().full.has_other_than(slot)
    }

    #[inline]
    fn view(&self) -> View<'_> {
        View::new(self.edge(), self.len, self.cover())
    }

    /// Moves the edge into a fresh private buffer of `capacity` pairs holding
    /// `edge[..keep]`.
    fn rebuild(&mut self, capacity: usize, keep: usize) {
        let fresh = self.edge().copy_prefix(keep.min(self.len), capacity);
        self.len = fresh.live_locked();
        self.fresh = Some(fresh);
    }

    /// What the gate must publish for this section; the writer is spent.
    /// (By reference: moving the writer into a call copied it whole, a
    /// visible share of a one-block fast append; `papers/choices.md`.)
    pub(super) fn finish(&mut self) -> Publish {
        let cur = self.cur;
        let cover_changed = self.draft.as_ref().is_some_and(|d| *d != cur.shape().cover);
        let appended = self.fresh.is_none() && self.len > cur.edge.live_locked();
        if self.fresh.is_none() && !cover_changed {
            return if appended {
                Publish::Length(self.len)
            } else {
                Publish::Nothing
            };
        }
        let replaced_buffer = self.fresh.is_some();
        let edge = match self.fresh.take() {
            Some(fresh) => {
                // Still private: the snapshot's Release publication orders it.
                fresh.publish(self.len);
                Arc::new(fresh)
            }
            None => Arc::clone(&cur.edge),
        };
        let cover = self
            .draft
            .take()
            .unwrap_or_else(|| cur.shape().cover.clone());
        Publish::Snapshot {
            next: Box::new(Snapshot::new(edge, self.len, cover)),
            length: appended.then_some(self.len),
            replaced_buffer,
        }
    }
}

impl ShapeRead for Writer<'_> {
    fn len(&self) -> usize {
        self.len
    }
    // Removal runs read pairs and neighbours through the writer once per
    // block: these two go to the buffer directly (the writer's length never
    // passes its buffer's capacity) instead of building a view per call.
    #[inline]
    fn pair(&self, pos: usize) -> BlockPair {
        if pos < self.len {
            self.edge().pair(pos)
        } else {
            BlockPair::new(0, 0)
        }
    }
    fn position(&self, hash: ExternalSequenceBlockHash) -> Option<usize> {
        self.view().position(hash)
    }
    #[inline]
    fn position_near(&self, hash: ExternalSequenceBlockHash, near: usize) -> Option<usize> {
        let edge = self.edge();
        neighbour_holding(near, |p| p < self.len && edge.external(p) == Some(hash))
            .or_else(|| self.view().position(hash))
    }
    fn is_internal(&self) -> bool {
        self.cover().internal
    }
    fn is_anchor(&self) -> bool {
        self.cover().anchor
    }
    fn is_full(&self, slot: Slot) -> bool {
        self.cover().full.contains(slot)
    }
    fn cutoff(&self, slot: Slot) -> Option<u32> {
        self.view().cutoff(slot)
    }
    fn full_word(&self, index: usize) -> u64 {
        self.cover().full.word(index)
    }
    fn full_word_count(&self) -> usize {
        self.cover().full.word_count()
    }
    fn for_each_cutoff(&self, f: impl FnMut(Slot, u32)) {
        self.view().for_each_cutoff(f)
    }
    fn has_full(&self) -> bool {
        !self.cover().full.is_empty()
    }
    fn has_cutoffs(&self) -> bool {
        !self.cover().cutoffs.is_empty()
    }
}

impl ShapeWrite for Writer<'_> {
    fn push_blocks(&mut self, blocks: &[BlockPair]) {
        let needed = self.len + blocks.len();
        let capacity = self.edge().capacity();
        if needed > capacity {
            self.rebuild(needed.max(2 * capacity), self.len);
        }
        // In place: past the published length of the shared buffer (or into
        // the private fresh one), so no reader can be reading these positions.
        let edge = self.edge();
        if mutant!(EpochLenBeforePairs) && self.fresh.is_none() {
            // Broken on purpose: the shared buffer's length is published
            // before its pairs are written.
            edge.publish(needed);
        }
        for (i, &pair) in blocks.iter().enumerate() {
            edge.write(self.len + i, pair);
        }
        self.len = needed.min(self.edge().capacity());
    }

    fn truncate_edge(&mut self, len: usize) -> Vec<BlockPair> {
        let len = len.min(self.len);
        let suffix = (len..self.len).map(|p| self.edge().pair(p)).collect();
        self.rebuild(len, len);
        suffix
    }

    fn insert_full(&mut self, slot: Slot) -> bool {
        self.draft().full.insert(slot)
    }

    fn remove_full(&mut self, slot: Slot) -> bool {
        self.draft().full.remove(slot)
    }

    fn set_cutoff(&mut self, slot: Slot, k: u32) {
        let cutoffs = &mut self.draft().cutoffs;
        match cutoffs.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(i) => cutoffs[i].1 = k,
            Err(i) => cutoffs.insert(i, (slot, k)),
        }
    }

    fn remove_cutoff(&mut self, slot: Slot) -> bool {
        let cutoffs = &mut self.draft().cutoffs;
        match cutoffs.binary_search_by_key(&slot, |&(s, _)| s) {
            Ok(i) => {
                cutoffs.remove(i);
                true
            }
            Err(_) => false,
        }
    }

    fn take_cutoffs(&mut self) -> Vec<(Slot, u32)> {
        std::mem::take(&mut self.draft().cutoffs)
    }

    fn set_internal(&mut self) {
        if !self.cover().internal {
            self.draft().internal = true;
        }
    }
}
