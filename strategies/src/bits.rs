//! Slot bitsets: 256 inline bits plus 256-bit chunks beyond.
//!
//! `SlotBits` is plain data. Gates that keep it behind a lock (the RwLock
//! gate) store it directly; readers use it as the "active set" of a walk.
//! The first 256 slots never allocate, so a walk over a tree with at most 256
//! ranks allocates nothing per hop.

use crate::hash::Slot;

const INLINE_WORDS: usize = 4;
const CHUNK_BITS: usize = INLINE_WORDS * 64;

/// A set of slots: four inline words and a list of four-word chunks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotBits {
    inline: [u64; INLINE_WORDS],
    chunks: Vec<[u64; INLINE_WORDS]>,
}

impl SlotBits {
    /// The empty set.
    pub const fn new() -> Self {
        Self {
            inline: [0; INLINE_WORDS],
            chunks: Vec::new(),
        }
    }

    /// A set holding one slot.
    pub fn single(slot: Slot) -> Self {
        let mut bits = Self::new();
        bits.insert(slot);
        bits
    }

    #[inline]
    fn locate(slot: Slot) -> (usize, usize, u64) {
        let index = slot.index();
        let chunk = index / CHUNK_BITS;
        let word = (index % CHUNK_BITS) / 64;
        (chunk, word, 1u64 << (index % 64))
    }

    #[inline]
    fn chunk(&self, chunk: usize) -> Option<&[u64; INLINE_WORDS]> {
        if chunk == 0 {
            Some(&self.inline)
        } else {
            self.chunks.get(chunk - 1)
        }
    }

    /// Whether `slot` is in the set.
    #[inline]
    pub fn contains(&self, slot: Slot) -> bool {
        let (chunk, word, mask) = Self::locate(slot);
        self.chunk(chunk)
            .is_some_and(|words| words[word] & mask != 0)
    }

    /// Whether the set holds a slot other than `slot`. (The fast path asks
    /// this on every append: one OR over each chunk's words, without a
    /// branch per word.)
    #[inline]
    pub fn has_other_than(&self, slot: Slot) -> bool {
        let (chunk, word, mask) = Self::locate(slot);
        let others = |index: usize, words: &[u64; INLINE_WORDS]| {
            let mut words = *words;
            if index == chunk {
                words[word] &= !mask;
            }
            words.iter().fold(0, |any, &bits| any | bits) != 0
        };
        others(0, &self.inline)
            || (self.chunks.iter().enumerate()).any(|(i, words)| others(i + 1, words))
    }

    /// Adds `slot`; returns whether it was absent.
    pub fn insert(&mut self, slot: Slot) -> bool {
        let (chunk, word, mask) = Self::locate(slot);
        let words = if chunk == 0 {
            &mut self.inline
        } else {
            if self.chunks.len() < chunk {
                self.chunks.resize(chunk, [0; INLINE_WORDS]);
            }
            &mut self.chunks[chunk - 1]
        };
        let absent = words[word] & mask == 0;
        words[word] |= mask;
        absent
    }

    /// Removes `slot`; returns whether it was present.
    pub fn remove(&mut self, slot: Slot) -> bool {
        let (chunk, word, mask) = Self::locate(slot);
        let words = if chunk == 0 {
            &mut self.inline
        } else {
            match self.chunks.get_mut(chunk - 1) {
                Some(words) => words,
                None => return false,
            }
        };
        let present = words[word] & mask != 0;
        words[word] &= !mask;
        present
    }

    /// Whether the set is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        // One OR per chunk and no branch per word: a walk asks this after
        // every hop.
        let empty = |words: &[u64; INLINE_WORDS]| words.iter().fold(0, |any, &w| any | w) == 0;
        empty(&self.inline) && self.chunks.iter().all(empty)
    }

    /// Number of slots in the set.
    pub fn len(&self) -> usize {
        self.words()
            .map(|(_, word)| word.count_ones() as usize)
            .sum()
    }

    /// Removes every slot, keeping the allocation.
    pub fn clear(&mut self) {
        self.inline = [0; INLINE_WORDS];
        self.chunks.iter_mut().for_each(|c| *c = [0; INLINE_WORDS]);
    }

    /// Makes `self` equal to `other`, reusing the allocation.
    pub fn copy_from(&mut self, other: &SlotBits) {
        self.inline = other.inline;
        self.chunks.clear();
        self.chunks.extend_from_slice(&other.chunks);
    }

    /// Every word with its global word index (word `i` holds slots `64i..64i+64`).
    pub fn words(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.inline
            .iter()
            .chain(self.chunks.iter().flatten())
            .copied()
            .enumerate()
    }

    /// Calls `f` with every word and its global word index, in order: the
    /// loop form of [`SlotBits::words`], for a walk's per-hop passes (plain
    /// loops over each chunk instead of a chained iterator's branch per word).
    #[inline]
    pub fn for_each_word(&self, mut f: impl FnMut(usize, u64)) {
        for (index, &word) in self.inline.iter().enumerate() {
            f(index, word);
        }
        for (chunk, words) in self.chunks.iter().enumerate() {
            let base = INLINE_WORDS * (chunk + 1);
            for (index, &word) in words.iter().enumerate() {
                f(base + index, word);
            }
        }
    }

    /// Calls `f` with every slot in ascending order: the loop form of
    /// [`SlotBits::iter`].
    #[inline]
    pub fn for_each_slot(&self, mut f: impl FnMut(Slot)) {
        self.for_each_word(|index, word| {
            BitIter { word }.for_each(|bit| f(Slot((index * 64 + bit) as u16)))
        });
    }

    /// The word with global index `index` (0 past the end).
    #[inline]
    pub fn word(&self, index: usize) -> u64 {
        self.chunk(index / INLINE_WORDS)
            .map_or(0, |words| words[index % INLINE_WORDS])
    }

    /// Number of words, inline and chunked.
    #[inline]
    pub fn word_count(&self) -> usize {
        INLINE_WORDS * (1 + self.chunks.len())
    }

    /// Replaces the contents with `words` (word `i` holds slots `64i..64i+64`).
    pub fn assign_words(&mut self, words: &[u64]) {
        if words.len() == INLINE_WORDS && self.chunks.is_empty() {
            // The common case (at most 256 ranks): a straight copy.
            self.inline.copy_from_slice(words);
            return;
        }
        self.clear();
        for (index, &word) in words.iter().enumerate() {
            if word == 0 {
                continue;
            }
            let chunk = index / INLINE_WORDS;
            if chunk == 0 {
                self.inline[index] = word;
            } else {
                if self.chunks.len() < chunk {
                    self.chunks.resize(chunk, [0; INLINE_WORDS]);
                }
                self.chunks[chunk - 1][index % INLINE_WORDS] = word;
            }
        }
    }

    /// The slots in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = Slot> + '_ {
        self.words().flat_map(|(index, word)| {
            BitIter { word }.map(move |bit| Slot((index * 64 + bit) as u16))
        })
    }

    /// Keeps only the slots for which `keep_word` keeps the bit; calls
    /// `on_dropped` for every slot that leaves. `keep_word(i)` returns the
    /// mask of word `i` to keep.
    pub fn retain_words(
        &mut self,
        mut keep_word: impl FnMut(usize) -> u64,
        mut on_dropped: impl FnMut(Slot),
    ) {
        let inline = self.inline.iter_mut();
        let chunked = self.chunks.iter_mut().flatten();
        for (index, word) in inline.chain(chunked).enumerate() {
            if *word == 0 {
                continue;
            }
            let kept = *word & keep_word(index);
            for bit in (BitIter {
                word: *word & !kept,
            }) {
                on_dropped(Slot((index * 64 + bit) as u16));
            }
            *word = kept;
        }
    }
}

/// Iterates the set bit positions of one word, lowest first.
struct BitIter {
    word: u64,
}

impl Iterator for BitIter {
    type Item = usize;
    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.word == 0 {
            return None;
        }
        let bit = self.word.trailing_zeros() as usize;
        self.word &= self.word - 1;
        Some(bit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_across_chunks_round_trip() {
        let mut bits = SlotBits::new();
        for s in [0u16, 63, 64, 255, 256, 300, 301, 1000] {
            assert!(bits.insert(Slot(s)));
        }
        assert!(!bits.insert(Slot(300)));
        assert_eq!(bits.len(), 8);
        let collected: Vec<u16> = bits.iter().map(|s| s.0).collect();
        assert_eq!(collected, vec![0, 63, 64, 255, 256, 300, 301, 1000]);
        let mut looped = Vec::new();
        bits.for_each_slot(|s| looped.push(s.0));
        assert_eq!(looped, collected, "for_each_slot visits what iter yields");
        let mut copy = SlotBits::new();
        copy.assign_words(&bits.words().map(|(_, w)| w).collect::<Vec<_>>());
        assert_eq!(copy, bits, "assign_words across chunks");
        let mut inline = SlotBits::single(Slot(9));
        inline.assign_words(&[1 << 3, 0, 0, 1 << 63]);
        assert_eq!(inline.iter().map(|s| s.0).collect::<Vec<_>>(), vec![3, 255]);
        assert!(bits.remove(Slot(256)));
        assert!(!bits.contains(Slot(256)));
        assert!(bits.contains(Slot(301)));
    }

    #[test]
    fn other_slots_are_seen_in_every_word_and_chunk() {
        let mut bits = SlotBits::new();
        assert!(!bits.has_other_than(Slot(5)));
        bits.insert(Slot(5));
        assert!(!bits.has_other_than(Slot(5)));
        assert!(bits.has_other_than(Slot(6)));
        // 261 has slot 5's word and bit in the next chunk.
        for other in [4u16, 63, 64, 255, 256, 261, 300, 1000] {
            let mut with_other = bits.clone();
            with_other.insert(Slot(other));
            assert!(with_other.has_other_than(Slot(5)), "slot {other}");
            with_other.remove(Slot(other));
            assert!(!with_other.has_other_than(Slot(5)), "slot {other} removed");
        }
        let mut far = SlotBits::new();
        far.insert(Slot(700));
        assert!(!far.has_other_than(Slot(700)));
        assert!(far.has_other_than(Slot(0)));
    }

    #[test]
    fn retain_reports_dropped_slots_across_chunks() {
        let mut active = SlotBits::new();
        let mut full = SlotBits::new();
        for s in [1u16, 2, 300, 301] {
            active.insert(Slot(s));
        }
        full.insert(Slot(2));
        full.insert(Slot(301));
        let mut dropped = Vec::new();
        active.retain_words(|i| full.word(i), |s| dropped.push(s.0));
        assert_eq!(dropped, vec![1, 300]);
        assert_eq!(active.iter().map(|s| s.0).collect::<Vec<_>>(), vec![2, 301]);
    }
}
