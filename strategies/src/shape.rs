//! A node's shape state and the coverage rules every gate shares.
//!
//! The shape of a node is its edge (a sequence of block pairs), the coverage of
//! that edge per slot (a `full` bit, or a cutoff `k` meaning `edge[0..k]`, with
//! `0 < k < len`), the sticky `internal` flag and the immutable `anchor` flag.
//! How a gate *stores* the shape is its own business; what the tree may do with
//! it is written once here, as [`ShapeRead`] and [`ShapeWrite`], plus the
//! coverage rules ([`promote_full`], [`cover_prefix`], [`append_demoting`],
//! [`cut_at`], [`split_at`]) that every gate's writer runs.
//!
//! Ordering inside a rule matters for gates whose readers see writes as they
//! happen (optimistic readers): a promotion sets the bit *before* deleting the
//! cutoff, and a demotion writes the cutoff *before* clearing the bit, so a
//! reader never sees a covered slot uncovered nor an uncovered slot covered.
//!
//! Readers of optimistic gates may see inconsistent values: every method of
//! [`ShapeRead`] is total (never panics, whatever the stored values are) and
//! callers clamp what they derive from it.

use crate::bits::SlotBits;
use crate::edge_index::EdgeIndex;
use crate::hash::{BlockPair, ExternalSequenceBlockHash, LocalBlockHash, Slot};

/// Read access to a node's shape. All methods are total.
pub trait ShapeRead {
    /// Number of blocks on the edge.
    fn len(&self) -> usize;
    /// The block at `pos`; a default pair past the end.
    fn pair(&self, pos: usize) -> BlockPair;
    /// Last position of `hash` on the edge.
    fn position(&self, hash: ExternalSequenceBlockHash) -> Option<usize>;
    /// Position of `hash`, trying `near ± 1` first.
    fn position_near(&self, hash: ExternalSequenceBlockHash, near: usize) -> Option<usize>;
    /// Whether the node ever had a child (sticky).
    fn is_internal(&self) -> bool;
    /// Whether the node is an anchor (immutable).
    fn is_anchor(&self) -> bool;
    /// Whether `slot` covers the whole edge.
    fn is_full(&self, slot: Slot) -> bool;
    /// The cutoff of `slot`, if it covers only a prefix.
    fn cutoff(&self, slot: Slot) -> Option<u32>;
    /// Word `index` of the full bitset (0 past the end).
    fn full_word(&self, index: usize) -> u64;
    /// Number of words of the full bitset.
    fn full_word_count(&self) -> usize;
    /// Calls `f` for every `(slot, cutoff)`, ascending by slot.
    fn for_each_cutoff(&self, f: impl FnMut(Slot, u32));
    /// Whether any slot is full.
    fn has_full(&self) -> bool;
    /// Whether any slot has a cutoff.
    fn has_cutoffs(&self) -> bool;

    /// Whether the edge is empty (only the root's is).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// How many leading blocks `slot` covers.
    fn covered_len(&self, slot: Slot) -> usize {
        if self.is_full(slot) {
            self.len()
        } else {
            self.cutoff(slot)
                .map_or(0, |k| (k as usize).min(self.len()))
        }
    }
    /// How many leading blocks some slot of `slots` covers (the longest
    /// prefix any of them covers): the edge if one of them is full, else
    /// the largest of their cutoffs.
    fn covered_len_by_any(&self, slots: &SlotBits) -> usize {
        let words = self.full_word_count().min(slots.word_count());
        if (0..words).any(|index| self.full_word(index) & slots.word(index) != 0) {
            return self.len();
        }
        let mut longest = 0;
        self.for_each_cutoff(|slot, k| {
            if slots.contains(slot) {
                longest = longest.max(k as usize);
            }
        });
        longest.min(self.len())
    }
    /// The last block of the edge.
    fn tail(&self) -> Option<BlockPair> {
        self.len().checked_sub(1).map(|last| self.pair(last))
    }
    /// Whether any slot covers any block.
    fn has_holders(&self) -> bool {
        self.has_full() || self.has_cutoffs()
    }
    /// Number of leading positions from `from` whose local hash equals `locals`.
    fn local_match_len(
        &self,
        from: usize,
        locals: impl IntoIterator<Item = LocalBlockHash>,
    ) -> usize {
        let len = self.len();
        let mut matched = 0;
        for local in locals {
            let pos = from + matched;
            if pos >= len || self.pair(pos).local != local {
                break;
            }
            matched += 1;
        }
        matched
    }
    /// [`ShapeRead::local_match_len`] for a slice of locals (the lookup's
    /// query), which a shape may compare several positions at a time.
    fn match_locals(&self, from: usize, locals: &[LocalBlockHash]) -> usize {
        self.local_match_len(from, locals.iter().copied())
    }
    /// Whether `blocks` equal (local and external) the edge from `from` on.
    fn pairs_match(&self, from: usize, blocks: &[BlockPair]) -> bool {
        from + blocks.len() <= self.len()
            && blocks
                .iter()
                .enumerate()
                .all(|(i, block)| self.pair(from + i) == *block)
    }
    /// Copies `edge[range]` into `out`.
    fn copy_pairs(&self, range: std::ops::Range<usize>, out: &mut Vec<BlockPair>) {
        let end = range.end.min(self.len());
        out.extend((range.start..end).map(|pos| self.pair(pos)));
    }
    /// The full slots.
    fn full_slots(&self) -> Vec<Slot> {
        let mut slots = Vec::new();
        for index in 0..self.full_word_count() {
            let mut word = self.full_word(index);
            while word != 0 {
                slots.push(Slot((index * 64) as u16 + word.trailing_zeros() as u16));
                word &= word - 1;
            }
        }
        slots
    }
}

/// Write access to a node's shape, given to the closures of a gate's commit
/// sections. The raw mutators do one thing each; the coverage rules below
/// compose them in the order readers need.
pub trait ShapeWrite: ShapeRead {
    /// Appends `blocks` at the tail and indexes them.
    fn push_blocks(&mut self, blocks: &[BlockPair]);
    /// Truncates the edge to `len` and returns the cut-off suffix.
    fn truncate_edge(&mut self, len: usize) -> Vec<BlockPair>;
    /// Sets the full bit of `slot`; returns whether it was clear.
    fn insert_full(&mut self, slot: Slot) -> bool;
    /// Clears the full bit of `slot`; returns whether it was set.
    fn remove_full(&mut self, slot: Slot) -> bool;
    /// Sets the cutoff of `slot` to `k` (`0 < k < len`).
    fn set_cutoff(&mut self, slot: Slot, k: u32);
    /// Deletes the cutoff of `slot`; returns whether there was one.
    fn remove_cutoff(&mut self, slot: Slot) -> bool;
    /// Removes and returns every cutoff.
    fn take_cutoffs(&mut self) -> Vec<(Slot, u32)>;
    /// Marks the node internal (sticky).
    fn set_internal(&mut self);
}

/// Everything a gate needs to build a node.
#[derive(Clone, Debug, Default)]
pub struct ShapeInit {
    /// The edge.
    pub edge: Vec<BlockPair>,
    /// Slots covering the whole edge.
    pub full: SlotBits,
    /// Slots covering a prefix, sorted by slot, each `0 < k < len`.
    pub cutoffs: Vec<(Slot, u32)>,
    /// Whether the node starts internal.
    pub internal: bool,
    /// Whether the node is an anchor.
    pub anchor: bool,
}

impl ShapeInit {
    /// A leaf holding `edge`, covered fully by `slot`.
    pub fn leaf(edge: Vec<BlockPair>, slot: Slot) -> Self {
        Self {
            edge,
            full: SlotBits::single(slot),
            ..Self::default()
        }
    }
}

/// Makes `slot` full. Bit first, cutoff second. Returns whether coverage changed.
pub fn promote_full(shape: &mut impl ShapeWrite, slot: Slot) -> bool {
    if shape.is_full(slot) {
        return false;
    }
    shape.insert_full(slot);
    shape.remove_cutoff(slot);
    true
}

/// Raises `slot`'s coverage to at least `edge[0..k]`; never lowers it.
/// Returns whether coverage changed.
pub fn cover_prefix(shape: &mut impl ShapeWrite, slot: Slot, k: usize) -> bool {
    if k == 0 || shape.is_full(slot) {
        return false;
    }
    if k >= shape.len() {
        return promote_full(shape, slot);
    }
    if shape.cutoff(slot).is_some_and(|old| old as usize >= k) {
        return false;
    }
    shape.set_cutoff(slot, k as u32);
    true
}

/// Appends `blocks` for `slot` at the tail: every other full slot is demoted
/// to a cutoff at the old length (cutoff written before the bit clears), then
/// the blocks are appended and `slot` becomes full.
pub fn append_demoting(shape: &mut impl ShapeWrite, slot: Slot, blocks: &[BlockPair]) {
    let old_len = shape.len() as u32;
    if has_other_full(shape, slot) {
        for other in shape.full_slots() {
            if other != slot {
                shape.set_cutoff(other, old_len);
                shape.remove_full(other);
            }
        }
    }
    shape.push_blocks(blocks);
    promote_full(shape, slot);
}

/// Whether a slot other than `slot` is full (no allocation: the decode
/// append asks this on every call, and usually the answer is no).
pub fn has_other_full(shape: &impl ShapeRead, slot: Slot) -> bool {
    (0..shape.full_word_count()).any(|index| {
        let mine = if index == slot.index() / 64 {
            1u64 << (slot.index() % 64)
        } else {
            0
        };
        shape.full_word(index) & !mine != 0
    })
}

/// Lowers `slot`'s coverage to `edge[0..pos]`. Returns the positions that
/// became uncovered (empty if `pos` was already beyond its coverage).
pub fn cut_at(shape: &mut impl ShapeWrite, slot: Slot, pos: usize) -> std::ops::Range<usize> {
    let old = shape.covered_len(slot);
    if pos >= old {
        return old..old;
    }
    if pos == 0 {
        shape.remove_cutoff(slot);
    } else {
        shape.set_cutoff(slot, pos as u32);
    }
    shape.remove_full(slot);
    pos..old
}

/// Removes every trace of `slot`. Returns whether it had coverage.
pub fn drop_slot(shape: &mut impl ShapeWrite, slot: Slot) -> bool {
    let cut = shape.remove_cutoff(slot);
    shape.remove_full(slot) || cut
}

/// Splits the edge at `pos` (`0 < pos < len`): the node keeps `edge[..pos]`
/// and becomes internal; the returned init describes the suffix. The suffix
/// gets the full set as it was, cutoffs `k > pos` become `k - pos` there;
/// every cutoff `k >= pos` is promoted to full on the prefix.
pub fn split_at(shape: &mut impl ShapeWrite, pos: usize) -> ShapeInit {
    let mut full = SlotBits::new();
    for slot in shape.full_slots() {
        full.insert(slot);
    }
    let mut suffix_cutoffs = Vec::new();
    for (slot, k) in shape.take_cutoffs() {
        let k = k as usize;
        if k < pos {
            shape.set_cutoff(slot, k as u32);
            continue;
        }
        shape.insert_full(slot);
        if k > pos {
            suffix_cutoffs.push((slot, (k - pos) as u32));
        }
    }
    let edge = shape.truncate_edge(pos);
    shape.set_internal();
    ShapeInit {
        edge,
        full,
        cutoffs: suffix_cutoffs,
        internal: false,
        anchor: false,
    }
}

/// The shape as plain data, for gates that keep it behind a lock.
#[derive(Clone, Debug, Default)]
pub struct PlainShape {
    edge: Vec<BlockPair>,
    index: EdgeIndex,
    full: SlotBits,
    cutoffs: Vec<(Slot, u32)>,
    internal: bool,
    anchor: bool,
}

/// How many leading positions `i < len` have `edge(i) == locals[i]`,
/// comparing four positions per branch while they match (a lookup's edge
/// match is the bulk of its work on long shared prefixes).
#[inline]
pub fn common_prefix(
    len: usize,
    edge: impl Fn(usize) -> LocalBlockHash,
    locals: &[LocalBlockHash],
) -> usize {
    let n = len.min(locals.len());
    let differs = |i: usize| edge(i).0 ^ locals[i].0;
    let mut i = 0;
    while i + 4 <= n && (differs(i) | differs(i + 1) | differs(i + 2) | differs(i + 3)) == 0 {
        i += 4;
    }
    while i < n && differs(i) == 0 {
        i += 1;
    }
    i
}

impl PlainShape {
    /// The shape described by `init`.
    pub fn new(init: ShapeInit) -> Self {
        Self {
            index: EdgeIndex::build(&init.edge),
            edge: init.edge,
            full: init.full,
            cutoffs: init.cutoffs,
            internal: init.internal,
            anchor: init.anchor,
        }
    }

    /// The edge as a slice.
    pub fn edge(&self) -> &[BlockPair] {
        &self.edge
    }

    fn cutoff_index(&self, slot: Slot) -> Result<usize, usize> {
        self.cutoffs.binary_search_by_key(&slot, |&(s, _)| s)
    }

    /// Approximate heap and inline bytes held by this shape.
    pub fn footprint(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.edge.capacity() * std::mem::size_of::<BlockPair>()
            + self.cutoffs.capacity() * std::mem::size_of::<(Slot, u32)>()
            + self.index.bytes()
    }
}

impl ShapeRead for PlainShape {
    #[inline]
    fn len(&self) -> usize {
        self.edge.len()
    }
    #[inline]
    fn pair(&self, pos: usize) -> BlockPair {
        self.edge.get(pos).copied().unwrap_or(BlockPair::new(0, 0))
    }
    #[inline]
    fn match_locals(&self, from: usize, locals: &[LocalBlockHash]) -> usize {
        let edge = self.edge.get(from..).unwrap_or_default();
        common_prefix(edge.len(), |i| edge[i].local, locals)
    }
    fn position(&self, hash: ExternalSequenceBlockHash) -> Option<usize> {
        self.index.position(&self.edge, hash)
    }
    fn position_near(&self, hash: ExternalSequenceBlockHash, near: usize) -> Option<usize> {
        self.index.position_near(&self.edge, hash, near)
    }
    #[inline]
    fn is_internal(&self) -> bool {
        self.internal
    }
    #[inline]
    fn is_anchor(&self) -> bool {
        self.anchor
    }
    #[inline]
    fn is_full(&self, slot: Slot) -> bool {
        self.full.contains(slot)
    }
    fn cutoff(&self, slot: Slot) -> Option<u32> {
        self.cutoff_index(slot).ok().map(|i| self.cutoffs[i].1)
    }
    #[inline]
    fn full_word(&self, index: usize) -> u64 {
        self.full.word(index)
    }
    #[inline]
    fn full_word_count(&self) -> usize {
        self.full.word_count()
    }
    fn for_each_cutoff(&self, mut f: impl FnMut(Slot, u32)) {
        self.cutoffs.iter().for_each(|&(slot, k)| f(slot, k));
    }
    fn has_full(&self) -> bool {
        !self.full.is_empty()
    }
    fn has_cutoffs(&self) -> bool {
        !self.cutoffs.is_empty()
    }
}

impl ShapeWrite for PlainShape {
    fn push_blocks(&mut self, blocks: &[BlockPair]) {
        let old = self.edge.len();
        self.edge.extend_from_slice(blocks);
        self.index.appended(&self.edge, old);
    }
    fn truncate_edge(&mut self, len: usize) -> Vec<BlockPair> {
        let suffix = self.edge.split_off(len.min(self.edge.len()));
        self.edge.shrink_to_fit();
        self.index.truncated(&self.edge);
        suffix
    }
    fn insert_full(&mut self, slot: Slot) -> bool {
        self.full.insert(slot)
    }
    fn remove_full(&mut self, slot: Slot) -> bool {
        self.full.remove(slot)
    }
    fn set_cutoff(&mut self, slot: Slot, k: u32) {
        match self.cutoff_index(slot) {
            Ok(i) => self.cutoffs[i].1 = k,
            Err(i) => self.cutoffs.insert(i, (slot, k)),
        }
    }
    fn remove_cutoff(&mut self, slot: Slot) -> bool {
        match self.cutoff_index(slot) {
            Ok(i) => {
                self.cutoffs.remove(i);
                true
            }
            Err(_) => false,
        }
    }
    fn take_cutoffs(&mut self) -> Vec<(Slot, u32)> {
        std::mem::take(&mut self.cutoffs)
    }
    fn set_internal(&mut self) {
        self.internal = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `common_prefix` against a position-by-position count, for every edge
    /// length up to 9, query length up to 9 and first mismatch position
    /// (so the four-at-a-time loop's every exit is taken).
    #[test]
    fn common_prefix_counts_every_matching_position() {
        let h = |x: u64| LocalBlockHash(x);
        for len in 0..10usize {
            for qlen in 0..10usize {
                for miss in 0..=qlen {
                    let edge: Vec<_> = (0..len as u64).map(h).collect();
                    let mut query: Vec<_> = (0..qlen as u64).map(h).collect();
                    if let Some(q) = query.get_mut(miss) {
                        *q = h(99);
                    }
                    let naive = edge.iter().zip(&query).take_while(|(a, b)| a == b).count();
                    assert_eq!(
                        common_prefix(len, |i| edge[i], &query),
                        naive,
                        "{len} {qlen} {miss}"
                    );
                }
            }
        }
    }

    fn shape(len: u64, full: &[u16], cutoffs: &[(u16, u32)]) -> PlainShape {
        let mut init = ShapeInit {
            edge: (1..=len).map(|h| BlockPair::new(h, h)).collect(),
            ..ShapeInit::default()
        };
        full.iter().for_each(|&s| {
            init.full.insert(Slot(s));
        });
        init.cutoffs = cutoffs.iter().map(|&(s, k)| (Slot(s), k)).collect();
        PlainShape::new(init)
    }

    #[test]
    fn split_moves_cutoffs_at_and_past_the_boundary() {
        let mut node = shape(6, &[0, 300], &[(1, 2), (2, 3), (301, 5)]);
        let suffix = split_at(&mut node, 3);
        assert_eq!(node.len(), 3);
        assert!(node.is_internal());
        assert_eq!(
            node.full_slots(),
            vec![Slot(0), Slot(2), Slot(300), Slot(301)]
        );
        assert_eq!(node.cutoff(Slot(1)), Some(2));
        assert_eq!(suffix.edge.len(), 3);
        assert_eq!(
            suffix.full.iter().collect::<Vec<_>>(),
            vec![Slot(0), Slot(300)]
        );
        assert_eq!(suffix.cutoffs, vec![(Slot(301), 2)]);
    }

    #[test]
    fn extension_demotes_other_full_ranks_to_the_old_tail() {
        let mut node = shape(3, &[0, 1], &[]);
        append_demoting(&mut node, Slot(0), &[BlockPair::new(4, 4)]);
        assert_eq!(node.full_slots(), vec![Slot(0)]);
        assert_eq!(node.cutoff(Slot(1)), Some(3));
        assert_eq!(node.len(), 4);
    }

    #[test]
    fn extension_promotes_a_partial_extender() {
        let mut node = shape(3, &[1], &[(0, 2)]);
        append_demoting(&mut node, Slot(0), &[BlockPair::new(4, 4)]);
        assert!(node.is_full(Slot(0)));
        assert_eq!(node.cutoff(Slot(0)), None);
        assert_eq!(node.cutoff(Slot(1)), Some(3));
    }

    #[test]
    fn cut_returns_only_newly_uncovered_positions() {
        let mut node = shape(6, &[0], &[]);
        assert_eq!(cut_at(&mut node, Slot(0), 4), 4..6);
        assert_eq!(cut_at(&mut node, Slot(0), 5), 4..4);
        assert_eq!(cut_at(&mut node, Slot(0), 2), 2..4);
        assert_eq!(cut_at(&mut node, Slot(0), 0), 0..2);
        assert!(!node.has_holders());
    }

    #[test]
    fn a_set_covers_its_longest_member_and_ignores_other_slots() {
        let mut set = SlotBits::new();
        [1, 300].into_iter().for_each(|s| {
            set.insert(Slot(s));
        });
        assert_eq!(
            shape(6, &[0], &[(1, 2), (2, 5)]).covered_len_by_any(&set),
            2
        );
        assert_eq!(shape(6, &[300], &[(1, 2)]).covered_len_by_any(&set), 6);
        assert_eq!(shape(6, &[0], &[(301, 4)]).covered_len_by_any(&set), 0);
        assert_eq!(
            shape(6, &[], &[(1, 2), (300, 4)]).covered_len_by_any(&set),
            4
        );
        assert_eq!(shape(6, &[1], &[]).covered_len_by_any(&SlotBits::new()), 0);
    }

    #[test]
    fn cover_prefix_never_lowers_and_promotes_at_the_tail() {
        let mut node = shape(4, &[], &[(0, 3)]);
        assert!(!cover_prefix(&mut node, Slot(0), 2));
        assert!(cover_prefix(&mut node, Slot(0), 4));
        assert!(node.is_full(Slot(0)));
        assert!(!node.has_cutoffs());
    }
}
