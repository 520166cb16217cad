//! A lane's directory, `external hash -> held node` ([`RankTable`], one per
//! lane, shared by its ranks: `papers/protocols.md` §2.1), in a hash table
//! whose size this module manages; and the lane's ranks with their cached
//! slots ([`RankSlots`], which remembers the last rank found).
//!
//! Why manage it. A hash table never shrinks by itself, and the removals of
//! an eviction stream leave tombstones that use up its room: when room runs
//! out, the table rehashes in place only if at most half its capacity is
//! live and otherwise doubles, so a rank holding a steady number of entries
//! under churn ends in a table of four times that many buckets (agentx:
//! 16,384 buckets per 4,096 entries). So when a batch of inserts (one
//! event's hashes) does not fit, the table is rebuilt once for 1.5 times the
//! entries it must then hold (1.7 to 3.5 buckets per live entry, with room
//! for at least half its live entries before the next rebuild), and once a
//! batch of removals leaves it a quarter full it shrinks to twice its live
//! entries. Every rehash moves at most a constant times the inserts or
//! removals since the last one, so each costs O(1) amortized.
//!
//! Why per batch. Checking for room before each insert and for sparseness
//! after each removal costs a few instructions per block on every event;
//! checking once per event costs them once (measured: `papers/choices.md`).
//!
//! A table that grew by inserts alone (no tombstones: its live entries fill
//! its whole capacity) is left to double by itself instead, which moves each
//! entry without the duplicate check a re-insert makes, a visible share of a
//! fast append whose lane table grows (measured: `papers/choices.md`).

use super::lane::NodeId;
use super::slots::CachedSlot;
use crate::types::{ExternalSequenceBlockHash, WorkerWithDpRank};
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::collections::hash_map::Entry;

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

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(u64::from(self.0[1]) << 32 | u64::from(self.0[0]));
    }
}

/// Tables at or below this capacity are never shrunk.
const MIN_SHRINK_CAPACITY: usize = 64;

/// A lane's directory entries.
#[derive(Debug, Default)]
pub(crate) struct RankTable {
    entries: FxHashMap<Key, NodeId>,
    /// The capacity the table had when it last held no tombstones.
    full: usize,
}

impl RankTable {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The node the entry for `hash` names.
    #[inline]
    pub(crate) fn get(&self, hash: ExternalSequenceBlockHash) -> Option<NodeId> {
        self.entries.get(&hash.into()).copied()
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
            match self.entries.insert(hash.into(), id) {
                Some(old) if old == id => continue,
                Some(old) => replaced.push(old),
                None => {}
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
        let Entry::Occupied(entry) = self.entries.entry(hash.into()) else {
            return None;
        };
        if !remove(*entry.get()) {
            return None;
        }
        Some(entry.remove())
    }

    /// Every entry, as (hash, node).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (ExternalSequenceBlockHash, NodeId)> + '_ {
        self.entries.iter().map(|(k, &id)| {
            (
                ExternalSequenceBlockHash(u64::from(k.0[1]) << 32 | u64::from(k.0[0])),
                id,
            )
        })
    }

    /// The nodes of every entry, one per entry.
    pub(crate) fn into_ids(self) -> impl Iterator<Item = NodeId> {
        self.entries.into_values()
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
            self.entries.reserve(additional);
        } else {
            let mut fresh =
                FxHashMap::with_capacity_and_hasher(needed + needed / 2, Default::default());
            fresh.extend(self.entries.drain());
            self.entries = fresh;
        }
        self.full = self.entries.capacity();
    }

    /// Shrinks to twice the live entries once a quarter full (module docs).
    pub(crate) fn shrink_if_sparse(&mut self) {
        let capacity = self.entries.capacity();
        if capacity > MIN_SHRINK_CAPACITY && self.entries.len() * 4 < capacity {
            self.entries.shrink_to(self.entries.len() * 2);
            self.full = self.entries.capacity();
        }
    }

    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.entries.capacity()
    }
}

/// A lane's ranks with the slot the lane last found for each (checked
/// against the registry before each use), found by rank, remembering the
/// last one found.
///
/// One event looks its rank up several times (its slot, the parent's entry,
/// the upsert, each removed hash), and a probe of a hash map keyed by rank
/// costs tens of instructions (measured: `papers/choices.md`). The ranks
/// live in a vector with a map from rank to position, and the position
/// found last is kept and checked against the rank stored there, so every
/// lookup of an event after its first is a compare. A stale position (its
/// rank removed or moved) fails the check and falls back to the map.
#[derive(Debug, Default)]
pub(crate) struct RankSlots {
    positions: FxHashMap<WorkerWithDpRank, usize>,
    ranks: Vec<(WorkerWithDpRank, Option<CachedSlot>)>,
    recent: Cell<usize>,
}

impl RankSlots {
    #[inline]
    fn position(&self, rank: WorkerWithDpRank) -> Option<usize> {
        let recent = self.recent.get();
        if self.ranks.get(recent).is_some_and(|(r, _)| *r == rank) {
            return Some(recent);
        }
        let position = *self.positions.get(&rank)?;
        self.recent.set(position);
        Some(position)
    }

    /// The cached slot of `rank`, if `rank` is registered.
    #[inline]
    pub(crate) fn get(&self, rank: WorkerWithDpRank) -> Option<Option<CachedSlot>> {
        self.position(rank).map(|p| self.ranks[p].1)
    }

    /// The cached slot of `rank`, registering `rank` without one first if
    /// it is not registered.
    pub(crate) fn get_or_insert(&mut self, rank: WorkerWithDpRank) -> &mut Option<CachedSlot> {
        let position = self.position(rank).unwrap_or_else(|| {
            let position = self.ranks.len();
            self.positions.insert(rank, position);
            self.ranks.push((rank, None));
            self.recent.set(position);
            position
        });
        &mut self.ranks[position].1
    }

    /// Unregisters `rank`; returns whether it was registered.
    pub(crate) fn remove(&mut self, rank: WorkerWithDpRank) -> bool {
        let Some(position) = self.positions.remove(&rank) else {
            return false;
        };
        self.ranks.swap_remove(position);
        if let Some((moved, _)) = self.ranks.get(position) {
            self.positions.insert(*moved, position);
        }
        true
    }

    /// The registered ranks.
    pub(crate) fn ranks(&self) -> impl Iterator<Item = WorkerWithDpRank> + '_ {
        self.ranks.iter().map(|(rank, _)| *rank)
    }

    /// The cached slots of the registered ranks that have one.
    pub(crate) fn slots(&self) -> impl Iterator<Item = CachedSlot> + '_ {
        self.ranks.iter().filter_map(|(_, slot)| *slot)
    }

    /// Whether no rank is registered.
    pub(crate) fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::{CachedSlot, Key, NodeId, RankSlots, RankTable};
    use crate::types::{ExternalSequenceBlockHash, WorkerWithDpRank};
    use crtc_strategies::Slot;

    /// Block hashes look random; sequential keys would spread unnaturally
    /// evenly under the multiplicative hash.
    fn hash(k: u64) -> ExternalSequenceBlockHash {
        ExternalSequenceBlockHash(k.wrapping_mul(0xd6e8_feb8_6659_fd93).rotate_left(29) ^ k)
    }

    fn filled(n: u64) -> RankTable {
        let mut table = RankTable::default();
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
        let mut table = RankTable::default();
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
        let mut table = RankTable::default();
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
                assert!(table.entries.remove(&evicted.into()).is_some());
            }
            full += (table.len() == table.capacity()) as usize;
            if managed {
                table.insert(hash(k), NodeId(0));
            } else {
                table.entries.insert(hash(k).into(), NodeId(0));
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

    /// Each rank caches the slot of its own number, so a lookup that
    /// returned another rank's position shows.
    fn registered(ranks: &[WorkerWithDpRank]) -> RankSlots {
        let mut slots = RankSlots::default();
        for (n, &rank) in ranks.iter().enumerate() {
            *slots.get_or_insert(rank) = Some(CachedSlot::unstamped(Slot(n as u16)));
        }
        slots
    }

    #[test]
    fn a_remembered_position_never_finds_another_ranks_slot() {
        let ranks: Vec<_> = (0..4).map(|w| WorkerWithDpRank::new(w, 0)).collect();
        let owner = |slots: &RankSlots, rank| slots.get(rank).flatten().map(|c| c.slot());
        let mut slots = registered(&ranks);
        assert_eq!(owner(&slots, ranks[1]), Some(Slot(1)));
        // Removing rank 1 moves rank 3 into the remembered position.
        assert!(slots.remove(ranks[1]));
        assert_eq!(owner(&slots, ranks[1]), None);
        assert_eq!(owner(&slots, ranks[3]), Some(Slot(3)));
        // Removing the last rank leaves the remembered position past the end.
        assert!(slots.remove(ranks[2]));
        assert_eq!(owner(&slots, ranks[3]), Some(Slot(3)));
        assert!(slots.remove(ranks[3]));
        assert_eq!(owner(&slots, ranks[3]), None);
        assert_eq!(owner(&slots, ranks[0]), Some(Slot(0)));
        let left: Vec<_> = slots.ranks().collect();
        assert_eq!(left, [ranks[0]]);
        slots.get_or_insert(ranks[1]);
        assert_eq!(slots.get(ranks[1]), Some(None));
        assert_eq!(owner(&slots, ranks[0]), Some(Slot(0)));
        assert_eq!(slots.slots().count(), 1);
    }
}
