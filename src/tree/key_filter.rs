//! A counting filter of the root's child keys: a lookup whose first block
//! starts no child returns without pinning or locking.
//!
//! Protocol. `counts[i]` is the number of keys hashing to `i` whose child
//! is linked in the set, plus inserts of such keys in flight. An insert
//! adds one for its key before it can publish the child (and takes it back
//! when the key was there already: `store::child`); the sweep takes one
//! away after it unlinked a child of the root (`sweep`). A root child is
//! linked nowhere else (the root's edge is empty, so it never splits, and
//! no removal clears its children), and the structural check of the
//! checkers' final trees (`crtc_verification::structure`) fails when a
//! child of the root is not counted. So while a
//! child is linked its key's count is at least one: its own add precedes
//! the link, its own subtraction follows the unlink, and every other
//! subtraction on that count follows its own add in the count's
//! modification order (all of them read-modify-writes of one atomic, and
//! an unlink happens after the insert whose child it unlinks). A lookup
//! that happens after a store completed therefore reads at least one for
//! the store's first key while the child stays linked: reading 0 can only
//! miss a child linked concurrently with the lookup, which a walk may miss
//! as well (C1 allows any undercount of a concurrent change). A non-zero
//! count says nothing (another key may share it): the lookup walks.
//! Relaxed throughout: the counts order nothing else, and read-modify-writes
//! keep each count's modification order whole.
//!
//! Under the model checkers the filter has two counts, so the models' few
//! root keys share them and both answers are explored.

use crtc_strategies::mutant;
use crtc_strategies::sync::atomic::{AtomicU32, Ordering};
use crtc_strategies::LocalBlockHash;

/// log2 of the number of counts: 8,192 (32 KiB per tree), or 2 under the
/// model checkers.
const BITS: u32 = if cfg!(crtc_checker) { 1 } else { 13 };

/// Counts of linked child keys by hash.
pub struct KeyFilter {
    counts: Box<[AtomicU32]>,
}

impl Default for KeyFilter {
    fn default() -> Self {
        Self {
            counts: (0..1usize << BITS).map(|_| AtomicU32::new(0)).collect(),
        }
    }
}

impl KeyFilter {
    #[inline]
    pub(super) fn count(&self, key: LocalBlockHash) -> &AtomicU32 {
        let index = key.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (u64::BITS - BITS);
        &self.counts[index as usize]
    }

    /// Whether a child may be linked under `key` (false: none was, at the
    /// load).
    #[inline]
    pub fn may_hold(&self, key: LocalBlockHash) -> bool {
        // Relaxed: the count orders nothing else (module docs).
        self.count(key).load(Ordering::Relaxed) != 0
    }

    /// Counts `key` before its child can be linked. (Mutant
    /// `RootFilterNotCounted`: counts nothing.)
    pub fn add(&self, key: LocalBlockHash) {
        if mutant!(RootFilterNotCounted) {
            return;
        }
        // Relaxed: a read-modify-write, ordered before the child's
        // publication by program order and the publication's Release.
        self.count(key).fetch_add(1, Ordering::Relaxed);
    }

    /// Takes back one count of `key`: its child was unlinked, or the
    /// insert that counted it did not link it.
    pub fn sub(&self, key: LocalBlockHash) {
        if mutant!(RootFilterNotCounted) {
            return;
        }
        // Relaxed: a read-modify-write; see the module docs.
        self.count(key).fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(crtc_checker)))]
mod tests {
    use crate::types::{
        BlockPair, ExternalSequenceBlockHash, LocalBlockHash, RouterEvent, WorkerWithDpRank,
    };
    use crate::{Tree, TreeConfig};
    use crtc_strategies::RwLockGate;

    fn blocks(hashes: &[u64]) -> Vec<BlockPair> {
        let pair = |&h: &u64| BlockPair {
            local: LocalBlockHash(h),
            external: ExternalSequenceBlockHash(100 + h),
        };
        hashes.iter().map(pair).collect()
    }

    fn count(tree: &Tree<RwLockGate>, key: u64) -> u32 {
        tree.root_keys
            .count(LocalBlockHash(key))
            .load(crtc_strategies::sync::atomic::Ordering::Relaxed)
    }

    /// A root key is counted once per linked child: a second store under
    /// it finds the child (the insert's count is taken back), a lookup
    /// starting elsewhere returns no scores, and the sweep that unlinks
    /// the child takes its count away.
    #[test]
    fn root_keys_count_linked_children() {
        let tree = Tree::<RwLockGate>::new(TreeConfig::default());
        let (mut lane_a, mut lane_b) = (tree.new_lane(), tree.new_lane());
        let (a, b) = (WorkerWithDpRank::new(1, 0), WorkerWithDpRank::new(2, 0));
        let stored = |rank, hashes: &[u64]| RouterEvent::stored(rank, None, blocks(hashes));
        tree.apply_event(&mut lane_a, &stored(a, &[1, 2])).unwrap();
        tree.apply_event(&mut lane_b, &stored(b, &[1, 3])).unwrap();
        assert_eq!(count(&tree, 1), 1);
        assert!(!tree.root_keys.may_hold(LocalBlockHash(7)));
        let query = [LocalBlockHash(7), LocalBlockHash(2)];
        assert!(tree.find_matches(&query, false).scores.is_empty());
        assert_eq!(
            tree.find_matches(&[LocalBlockHash(1)], false).scores.len(),
            2
        );
        for (lane, rank, hashes) in [(&mut lane_a, a, [101, 102]), (&mut lane_b, b, [101, 103])] {
            let gone = hashes.map(ExternalSequenceBlockHash).to_vec();
            tree.apply_event(lane, &RouterEvent::removed(rank, gone))
                .unwrap();
        }
        drop((lane_a, lane_b));
        assert!(tree.sweep_stale().unwrap().unlinked >= 1);
        assert_eq!(count(&tree, 1), 0);
        assert!(!tree.root_keys.may_hold(LocalBlockHash(1)));
    }
}
