//! A lane's directory, `external hash -> held node`: one table per lane,
//! shared by its ranks (`papers/protocols.md` §2.1), in a hash table whose
//! size this module manages.
//!
//! Why manage it. A hash table never shrinks by itself, and the removals of
//! an eviction stream leave tombstones that use up its room: when room runs
//! out, the table rehashes in place only if at most half its capacity is
//! live and otherwise doubles, so a table holding a steady number of
//! entries under churn ends at four times that many buckets (agentx:
//! 16,384 buckets per 4,096 entries). So when a batch of inserts (one
//! event's hashes) does not fit, the table is rebuilt once for 1.5 times the
//! entries it must then hold (a load between a third and two thirds of its
//! capacity), and once a batch of removals leaves it so sparse that room
//! for half again its live entries takes at most half its capacity, it
//! shrinks to that room. Bucket counts are powers of two, so the shrink
//! rule is stated against half the capacity: a table of 65,536 buckets
//! holding 14,820 entries (the Mooncake trace's directory after its peak)
//! shrinks to 32,768, where a rule "shrink to twice the live entries once a
//! quarter full" left it alone. Why amortized O(1): right after a rebuild
//! for growth the live entries are more than a third of the capacity, so no
//! shrink follows at once; after a shrink at least half its live entries
//! must be inserted before the next growth. Every rehash thus moves at most
//! a constant times the inserts or removals since the last one.
//!
//! Why per batch. Checking for room before each insert and for sparseness
//! after each removal costs a few instructions per block on every event;
//! checking once per event costs them once (measured: `papers/choices.md`).
//!
//! A table that grew by inserts alone (no tombstones: its live entries fill
//! its whole capacity) is left to double by itself instead, which moves each
//! entry without the duplicate check a re-insert makes, a visible share of a
//! fast append whose lane table grows (measured: `papers/choices.md`).
//!
//! Why hashbrown and not open addressing with inline keys. A table of
//! 12-byte slots, linear probing and backward-shift removal was built and
//! measured as the directory (`papers/choices.md`): fewer bytes, but more
//! instructions per removal and more lane CPU on the trace.

use super::lane::NodeId;
use crate::types::ExternalSequenceBlockHash;
use hashbrown::HashTable;
use std::hash::{BuildHasher, Hasher};

/// An external hash as a lookup key: two 32-bit halves, so that with its
/// 4-byte [`NodeId`] an entry takes 12 bytes in the table instead of the 16
/// a `u64` key's alignment would pad it to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key([u32; 2]);

impl From<ExternalSequenceBlockHash> for Key {
    fn from(hash: ExternalSequenceBlockHash) -> Self {
        Self([hash.0 as u32, (hash.0 >> 32) as u32])
    }
}

impl Key {
    fn hash(self) -> ExternalSequenceBlockHash {
        ExternalSequenceBlockHash(u64::from(self.0[1]) << 32 | u64::from(self.0[0]))
    }

    /// The table's hash of the key (Fx over the 64-bit block hash).
    #[inline]
    fn table_hash(self) -> u64 {
        let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
        hasher.write_u64(self.hash().0);
        hasher.finish()
    }
}

/// One entry: the key and the node it names.
type Slot = (Key, NodeId);

/// The table's hash of an entry, for rehashing.
fn slot_hash(slot: &Slot) -> u64 {
    slot.0.table_hash()
}

/// Tables at or below this capacity are never shrunk.
const MIN_SHRINK_CAPACITY: usize = 64;

/// A lane's directory (module docs).
#[derive(Debug, Default)]
pub(crate) struct Directory {
    entries: HashTable<Slot>,
    /// The capacity the table had when it last held no tombstones.
    full: usize,
}

impl Directory {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The node the entry for `hash` names.
    #[inline]
    pub(crate) fn get(&self, hash: ExternalSequenceBlockHash) -> Option<NodeId> {
        let key = Key::from(hash);
        self.entries
            .find(key.table_hash(), |s| s.0 == key)
            .map(|s| s.1)
    }

    /// Points `hash` at `id`; returns the node it named before.
    #[cfg(test)]
    fn insert(&mut self, hash: ExternalSequenceBlockHash, id: NodeId) -> Option<NodeId> {
        self.point([hash], id).1.pop()
    }

    /// Points the entries of `hashes` at `id`, making room for all of them
    /// once: how many were new or changed, and the nodes the changed ones
    /// named before (one per changed entry that existed).
    pub(crate) fn point(
        &mut self,
        hashes: impl IntoIterator<Item = ExternalSequenceBlockHash>,
        id: NodeId,
    ) -> (usize, Vec<NodeId>) {
        let hashes = hashes.into_iter();
        self.make_room(hashes.size_hint().0);
        let mut changed = 0;
        let mut replaced = Vec::new();
        for hash in hashes {
            let key = Key::from(hash);
            let entry = self
                .entries
                .entry(key.table_hash(), |s| s.0 == key, slot_hash);
            match entry {
                hashbrown::hash_table::Entry::Occupied(mut slot) => {
                    let old = std::mem::replace(&mut slot.get_mut().1, id);
                    if old == id {
                        continue;
                    }
                    replaced.push(old);
                }
                hashbrown::hash_table::Entry::Vacant(slot) => {
                    slot.insert((key, id));
                }
            }
            changed += 1;
        }
        (changed, replaced)
    }

    /// Removes the entry for `hash`; returns the node it named.
    #[cfg(test)]
    fn remove(&mut self, hash: ExternalSequenceBlockHash) -> Option<NodeId> {
        let removed = self.remove_if(hash, |_| true);
        self.shrink_if_sparse();
        removed
    }

    /// Removes the entry for `hash` if `remove` accepts the node it names;
    /// returns that node. It never shrinks the table: a caller removing a
    /// batch calls [`Self::shrink_if_sparse`] once after it.
    pub(crate) fn remove_if(
        &mut self,
        hash: ExternalSequenceBlockHash,
        remove: impl FnOnce(NodeId) -> bool,
    ) -> Option<NodeId> {
        let key = Key::from(hash);
        let entry = self
            .entries
            .find_entry(key.table_hash(), |s| s.0 == key)
            .ok()?;
        if !remove(entry.get().1) {
            return None;
        }
        Some(entry.remove().0 .1)
    }

    /// Every entry, as (hash, node).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (ExternalSequenceBlockHash, NodeId)> + '_ {
        self.entries.iter().map(|&(key, id)| (key.hash(), id))
    }

    /// The nodes of every entry, one per entry.
    pub(crate) fn into_ids(self) -> impl Iterator<Item = NodeId> {
        self.entries.into_iter().map(|(_, id)| id)
    }

    /// Makes room for `additional` more entries (module docs).
    fn make_room(&mut self, additional: usize) {
        let live = self.entries.len();
        let needed = live + additional;
        let room = self.entries.capacity();
        if needed <= room {
            return;
        }
        if room >= self.full {
            self.entries.reserve(additional, slot_hash);
        } else {
            let mut fresh = HashTable::with_capacity(needed + needed / 2);
            for slot in self.entries.drain() {
                fresh.insert_unique(slot_hash(&slot), slot, slot_hash);
            }
            self.entries = fresh;
        }
        self.full = self.entries.capacity();
    }

    /// Shrinks to room for half again its live entries once that takes at
    /// most half its capacity (module docs).
    pub(crate) fn shrink_if_sparse(&mut self) {
        // Tombstones lower the room the table reports; `full` is its
        // capacity without them.
        let capacity = self.entries.capacity().max(self.full);
        let target = self.entries.len() + self.entries.len() / 2;
        if capacity > MIN_SHRINK_CAPACITY && target * 2 <= capacity {
            self.entries.shrink_to(target, slot_hash);
            self.full = self.entries.capacity();
        }
    }

    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.entries.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::{slot_hash, Directory, Key, NodeId};
    use crate::types::ExternalSequenceBlockHash;

    /// Block hashes look random; sequential keys would spread unnaturally
    /// evenly under the multiplicative hash.
    fn hash(k: u64) -> ExternalSequenceBlockHash {
        ExternalSequenceBlockHash(k.wrapping_mul(0xd6e8_feb8_6659_fd93).rotate_left(29) ^ k)
    }

    fn filled(n: u64) -> Directory {
        let mut table = Directory::default();
        for k in 0..n {
            table.insert(hash(k), NodeId(0));
        }
        table
    }

    #[test]
    fn a_table_emptied_by_evictions_gives_its_memory_back() {
        let mut table = filled(4096);
        let peak = table.capacity();
        for k in 0..4000 {
            table.remove(hash(k));
        }
        assert_eq!(table.len(), 96);
        assert!(
            table.capacity() * 8 <= peak,
            "{} of {peak}",
            table.capacity()
        );
        assert!(table.capacity() >= 2 * table.len(), "room left to grow");
    }

    #[test]
    fn a_batch_counts_new_and_moved_entries_and_names_what_they_replaced() {
        let mut table = Directory::default();
        assert_eq!(table.point([hash(0)], NodeId(1)), (1, vec![]));
        assert_eq!(table.point([hash(1)], NodeId(2)), (1, vec![]));
        // hash(0) already names node 1, hash(1) moves from node 2, hash(2) is new.
        let batch = [hash(0), hash(1), hash(2)];
        assert_eq!(table.point(batch, NodeId(1)), (2, vec![NodeId(2)]));
        assert_eq!(table.len(), 3);
        assert!(batch.iter().all(|&h| table.get(h) == Some(NodeId(1))));
    }

    #[test]
    fn a_removal_batch_shrinks_the_table_once_at_its_end() {
        let mut table = filled(4096);
        let peak = table.capacity();
        for k in 0..4000 {
            assert!(table.remove_if(hash(k), |_| true).is_some());
        }
        // Tombstones lower the room left, but no rebuild ran inside the batch.
        assert!(table.capacity() > peak / 2, "shrunk inside the batch");
        table.shrink_if_sparse();
        assert!(
            table.capacity() * 8 <= peak,
            "{} of {peak}",
            table.capacity()
        );
        assert!((4000..4096).all(|k| table.get(hash(k)) == Some(NodeId(0))));
    }

    #[test]
    fn an_entry_takes_twelve_bytes_and_keeps_the_whole_hash() {
        assert_eq!(std::mem::size_of::<(Key, NodeId)>(), 12);
        let hash = ExternalSequenceBlockHash(0x0123_4567_89ab_cdef);
        let mut table = Directory::default();
        table.insert(hash, NodeId(1));
        assert_eq!(table.get(hash), Some(NodeId(1)));
        let high_half_differs = ExternalSequenceBlockHash(0x1123_4567_89ab_cdef);
        let low_half_differs = ExternalSequenceBlockHash(0x0123_4567_89ab_cdee);
        assert_eq!(table.get(high_half_differs), None);
        assert_eq!(table.get(low_half_differs), None);
    }

    #[test]
    fn a_table_grown_by_inserts_keeps_every_entry() {
        let table = filled(100_000);
        assert_eq!(table.len(), 100_000);
        assert!((0..100_000).all(|k| table.get(hash(k)) == Some(NodeId(0))));
        assert!(table.capacity() < 4 * 100_000, "{}", table.capacity());
    }

    /// Steady churn: `live` entries, then per step one evicted at random and
    /// one new inserted, through the table (`managed`) or straight into its
    /// map (the control). Returns the largest capacity seen and how often the
    /// table had no room left before an insert.
    fn churn(live: u64, steps: u64, managed: bool) -> (usize, usize) {
        let mut keys: Vec<u64> = (0..live).collect();
        let mut table = filled(live);
        let (mut peak, mut full) = (table.capacity(), 0);
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for k in live..live + steps {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let evicted = hash(keys.swap_remove((state >> 33) as usize % keys.len()));
            if managed {
                assert!(table.remove(evicted).is_some());
            } else {
                assert!(table.remove_if(evicted, |_| true).is_some());
            }
            full += (table.len() == table.capacity()) as usize;
            if managed {
                table.insert(hash(k), NodeId(0));
            } else {
                let key = Key::from(hash(k));
                table
                    .entries
                    .insert_unique(key.table_hash(), (key, NodeId(0)), slot_hash);
            }
            keys.push(k);
            peak = peak.max(table.capacity());
        }
        assert_eq!(table.len(), live as usize);
        (peak, full)
    }

    #[test]
    fn a_table_under_eviction_churn_stays_at_twice_its_live_entries() {
        // 4,096 live entries fit 8,192 buckets (7,168 usable); the table's own
        // policy doubles to 16,384 once tombstones use up the room.
        let (unmanaged, _) = churn(4096, 100_000, false);
        assert!(unmanaged > 7168, "the control grows: {unmanaged}");
        let (peak, rebuilds) = churn(4096, 100_000, true);
        assert!(peak <= 7168, "peak capacity {peak}");
        assert!(
            rebuilds <= 100_000 / 2048,
            "{rebuilds} rebuilds: not amortized"
        );
    }

    #[test]
    fn a_small_or_busy_table_is_left_alone() {
        let mut small = filled(40);
        let capacity = small.capacity();
        for k in 0..39 {
            small.remove(hash(k));
        }
        assert_eq!(small.capacity(), capacity);
        let mut busy = filled(4096);
        let capacity = busy.capacity();
        busy.remove(hash(0));
        assert_eq!(busy.capacity(), capacity);
    }

    #[test]
    fn a_table_left_sparse_after_its_peak_shrinks_to_the_smallest_that_fits() {
        // The Mooncake trace's directory ended with 14,820 entries in a table
        // grown to 65,536 buckets (57,344 usable) for a past peak.
        let mut table = filled(40_000);
        for k in 0..25_180 {
            assert!(table.remove_if(hash(k), |_| true).is_some());
        }
        // 65,536 buckets; tombstones lower the room the table reports.
        assert!(table.capacity() > 40_000, "{}", table.capacity());
        table.shrink_if_sparse();
        assert_eq!(table.len(), 14_820);
        assert_eq!(table.capacity(), 28_672, "32,768 buckets");
        table.shrink_if_sparse();
        assert_eq!(
            table.capacity(),
            28_672,
            "no shrink while over a third full"
        );
    }
}
