//! A compact open-addressing hash table `external hash -> held node`, the
//! storage of a lane's reverse lookup.
//!
//! Layout. One array of 12-byte slots, each holding the two 32-bit halves of
//! the key and a [`NodeId`]; there are no separate control bytes, so a probe
//! reads one place in memory (one cache miss in a table larger than the
//! cache, where a table with control bytes apart from its entries takes two).
//! An empty slot is one whose node is [`EMPTY`] (`u32::MAX`): a `NodeId`
//! indexes the lane's vector of holds, one per held node, which never grows
//! to `u32::MAX` elements (each hold owns a node allocation), so no entry
//! names that value; [`Directory::point`] asserts it in debug builds.
//!
//! Probing. Any slot count works, not only powers of two: a key's home slot
//! is the high half of the product of its mixed hash and the slot count
//! (a multiply-high range reduction). Block hashes look random, but keys with
//! structure (tests, sequential hashes) must spread too, so the hash is first
//! folded (its high half xored into its low half) and then multiplied by an
//! odd constant, which carries every bit of the key into the high bits the
//! reduction reads. Collisions go to the next slot, wrapping at the end
//! (linear probing). A removal shifts the rest of its cluster back into the
//! hole (backward shift), so the table never holds tombstones and a lookup
//! stops at the first empty slot.
//!
//! Size policy. The load `live / slots` stays at most 3/4: a batch of inserts
//! that would pass it rebuilds the table first, and a single insert that
//! would pass it (a batch longer than its size hint said) rebuilds it then.
//! A batch of removals that leaves the load below 3/8 shrinks it once at the
//! batch's end ([`Directory::shrink_if_sparse`]). Every rebuild makes the
//! table twice the entries it must hold (load 1/2, at least [`MIN_SLOTS`]
//! slots). Why these numbers: at load `a` a linear-probing miss reads about
//! `(1 + 1/(1-a)^2)/2` slots, 8.5 at 3/4 and 2.5 at 1/2, and its slots are
//! adjacent (one or two cache lines), so 3/4 bounds the probe while keeping
//! the table at 16 to 32 bytes per live entry (12 bytes over a load between
//! 3/8 and 3/4). Why amortized O(1): after a rebuild to load 1/2 with `L`
//! live entries, a grow needs the live count to pass `3L/2`, so the inserts
//! since the rebuild (this batch's included) are more than a third of the
//! entries it moves; a shrink needs it under `3L/4`, so the removals since
//! are at least `L/4` and the at most `3L/4` entries it moves are at most
//! three times that. Every rebuild thus moves at most three times the
//! operations since the last one (checked over swinging live counts by the
//! test `rebuilds_move_at_most_three_entries_per_operation`; the churn test
//! checks a steady live count stays under 2.7 slots per entry).
//!
//! Cost. The load buys memory with instructions: a miss and a removal read
//! several slots at these loads, and a removal computes the home of each
//! entry after it in its cluster. Against the hashbrown map it replaced the
//! lane takes fewer bytes per membership and more instructions per event;
//! `papers/choices.md` (the Directory entry) has the figures and the
//! variants measured.

use super::lane::NodeId;
use crate::types::ExternalSequenceBlockHash;

/// The node value of an empty slot (module docs: no `NodeId` reaches it).
const EMPTY: u32 = u32::MAX;

/// The fewest slots a table that holds anything has: below it a rebuild
/// would move fewer entries than its allocation costs.
const MIN_SLOTS: usize = 16;

/// An odd 64-bit constant (2^64 divided by the golden ratio) whose product
/// spreads every bit of a key into the high bits.
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

/// One slot: the key's low and high halves, and the node (or [`EMPTY`]).
/// Two halves instead of a `u64` keep the slot at 12 bytes, where a `u64`'s
/// alignment would pad it to 16.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    key: [u32; 2],
    node: u32,
}

const VACANT: Slot = Slot {
    key: [0; 2],
    node: EMPTY,
};

fn split(hash: ExternalSequenceBlockHash) -> [u32; 2] {
    [hash.0 as u32, (hash.0 >> 32) as u32]
}

fn join(key: [u32; 2]) -> ExternalSequenceBlockHash {
    ExternalSequenceBlockHash(u64::from(key[1]) << 32 | u64::from(key[0]))
}

/// The key folded and multiplied (module docs): a bijection of `u64`.
#[inline]
fn mix(key: [u32; 2]) -> u64 {
    let folded = u64::from(key[1]) << 32 | u64::from(key[0] ^ key[1]);
    folded.wrapping_mul(SPREAD)
}

/// The home slot of `key` in a table of `slots` slots (0 when it has none).
#[inline]
fn home(key: [u32; 2], slots: usize) -> usize {
    ((u128::from(mix(key)) * slots as u128) >> 64) as usize
}

/// The slot after `i` in a table of `slots` slots, wrapping at the end.
#[inline]
fn next(i: usize, slots: usize) -> usize {
    if i + 1 == slots {
        0
    } else {
        i + 1
    }
}

/// Whether `live` entries would pass the 5/8 load of `slots` slots.
fn overfull(live: usize, slots: usize) -> bool {
    live * 8 > slots * 5
}

/// An open-addressing table `external hash -> node` (module docs).
#[derive(Default)]
pub(crate) struct Directory {
    slots: Box<[Slot]>,
    live: usize,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Directory {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    /// The slot holding `key`, if any.
    #[inline]
    fn find(&self, key: [u32; 2]) -> Option<usize> {
        let n = self.slots.len();
        let mut i = home(key, n);
        loop {
            // Only a table without slots ends the loop here: the load bound
            // leaves an empty slot in every other.
            let slot = self.slots.get(i)?;
            if slot.node == EMPTY {
                return None;
            }
            if slot.key == key {
                return Some(i);
            }
            i = next(i, n);
        }
    }

    /// The node the entry for `hash` names.
    #[inline]
    pub(crate) fn get(&self, hash: ExternalSequenceBlockHash) -> Option<NodeId> {
        self.find(split(hash)).map(|i| NodeId(self.slots[i].node))
    }

    /// Points the entries of `hashes` at `id`, making room for the batch
    /// once (its size hint's lower bound): how many were new or changed,
    /// and the nodes the changed ones named before (one per changed entry
    /// that existed). An entry that already names `id` is not counted.
    pub(crate) fn point(
        &mut self,
        hashes: impl IntoIterator<Item = ExternalSequenceBlockHash>,
        id: NodeId,
    ) -> (usize, Vec<NodeId>) {
        debug_assert_ne!(id.0, EMPTY, "a NodeId never reaches the empty mark");
        let hashes = hashes.into_iter();
        let needed = self.live + hashes.size_hint().0;
        if overfull(needed, self.slots.len()) {
            self.rebuild(needed);
        }
        let mut changed = 0;
        let mut replaced = Vec::new();
        for hash in hashes {
            match self.put(split(hash), id.0) {
                Some(old) if old == id => continue,
                Some(old) => replaced.push(old),
                None => {}
            }
            changed += 1;
        }
        (changed, replaced)
    }

    /// Points `key` at `node`; returns the node it named before. Grows the
    /// table first if a new entry would pass the load bound.
    fn put(&mut self, key: [u32; 2], node: u32) -> Option<NodeId> {
        let n = self.slots.len();
        let mut i = home(key, n);
        loop {
            let Some(slot) = self.slots.get_mut(i) else {
                // A table without slots: give it some, then insert.
                self.rebuild(1);
                return self.put(key, node);
            };
            if slot.node == EMPTY {
                if overfull(self.live + 1, n) {
                    self.rebuild(self.live + 1);
                    return self.put(key, node);
                }
                *slot = Slot { key, node };
                self.live += 1;
                return None;
            }
            if slot.key == key {
                return Some(NodeId(std::mem::replace(&mut slot.node, node)));
            }
            i = next(i, n);
        }
    }

    /// Removes the entry for `hash` if `remove` accepts the node it names;
    /// returns that node. It never shrinks the table: a caller removing a
    /// batch calls [`Self::shrink_if_sparse`] once after it.
    pub(crate) fn remove_if(
        &mut self,
        hash: ExternalSequenceBlockHash,
        remove: impl FnOnce(NodeId) -> bool,
    ) -> Option<NodeId> {
        let i = self.find(split(hash))?;
        let id = NodeId(self.slots[i].node);
        if !remove(id) {
            return None;
        }
        self.shift_back(i);
        self.live -= 1;
        Some(id)
    }

    /// Empties slot `hole`, moving later entries of its cluster back into
    /// it so each stays reachable from its home without a tombstone: an
    /// entry moves into the hole when the hole lies on its probe path, that
    /// is when its home is not in the cyclic range `(hole, i]` of slots
    /// after the hole up to the entry.
    fn shift_back(&mut self, mut hole: usize) {
        let n = self.slots.len();
        let mut i = hole;
        loop {
            i = next(i, n);
            let slot = self.slots[i];
            if slot.node == EMPTY {
                break;
            }
            let h = home(slot.key, n);
            let between = if hole < i {
                hole < h && h <= i
            } else {
                hole < h || h <= i
            };
            if !between {
                self.slots[hole] = slot;
                hole = i;
            }
        }
        self.slots[hole] = VACANT;
    }

    /// Rebuilds to half full once less than 3/8 full (module docs).
    pub(crate) fn shrink_if_sparse(&mut self) {
        let slots = self.slots.len();
        if slots > MIN_SLOTS && self.live * 4 < slots {
            self.rebuild(self.live);
        }
    }

    /// Moves every entry into a table of twice `entries` slots (at least
    /// [`MIN_SLOTS`]), `entries` being at least the live count.
    fn rebuild(&mut self, entries: usize) {
        let n = (entries * 2).max(MIN_SLOTS);
        let mut slots = vec![VACANT; n].into_boxed_slice();
        for &slot in self.slots.iter().filter(|s| s.node != EMPTY) {
            let mut i = home(slot.key, n);
            while slots[i].node != EMPTY {
                i = next(i, n);
            }
            slots[i] = slot;
        }
        self.slots = slots;
    }

    /// Every entry, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (ExternalSequenceBlockHash, NodeId)> + '_ {
        self.slots
            .iter()
            .filter(|s| s.node != EMPTY)
            .map(|s| (join(s.key), NodeId(s.node)))
    }

    /// The nodes of every entry, one per entry.
    pub(crate) fn into_ids(self) -> impl Iterator<Item = NodeId> {
        self.slots
            .into_vec()
            .into_iter()
            .filter(|s| s.node != EMPTY)
            .map(|s| NodeId(s.node))
    }

    /// Bytes of the slot array (tests and diagnostics).
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.len() * std::mem::size_of::<Slot>()
    }
}

#[cfg(test)]
mod tests {
    use super::{home, Directory, NodeId, Slot, MIN_SLOTS};
    use crate::types::ExternalSequenceBlockHash;
    use std::collections::HashMap;

    /// Block hashes look random; the tests also use structured keys.
    fn hash(k: u64) -> ExternalSequenceBlockHash {
        ExternalSequenceBlockHash(k.wrapping_mul(0xd6e8_feb8_6659_fd93).rotate_left(29) ^ k)
    }

    /// A plain linear congruential generator (no dependencies).
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, bound: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % bound
        }
    }

    fn filled(n: u64) -> Directory {
        let mut table = Directory::default();
        for k in 0..n {
            table.point([hash(k)], NodeId(0));
        }
        table
    }

    fn slots(table: &Directory) -> usize {
        table.heap_bytes() / std::mem::size_of::<Slot>()
    }

    /// The first `count` structured keys whose home is `target` of `n` slots.
    fn keys_at_home(target: usize, n: usize, count: usize) -> Vec<ExternalSequenceBlockHash> {
        (0..)
            .map(ExternalSequenceBlockHash)
            .filter(|&h| home(super::split(h), n) == target)
            .take(count)
            .collect()
    }

    #[test]
    fn an_entry_takes_twelve_bytes_and_keeps_the_whole_hash() {
        assert_eq!(std::mem::size_of::<Slot>(), 12);
        let hash = ExternalSequenceBlockHash(0x0123_4567_89ab_cdef);
        let mut table = Directory::default();
        assert_eq!(table.get(hash), None, "a table without slots");
        table.point([hash], NodeId(1));
        assert_eq!(table.get(hash), Some(NodeId(1)));
        let high_half_differs = ExternalSequenceBlockHash(0x1123_4567_89ab_cdef);
        let low_half_differs = ExternalSequenceBlockHash(0x0123_4567_89ab_cdee);
        assert_eq!(table.get(high_half_differs), None);
        assert_eq!(table.get(low_half_differs), None);
        table.point([high_half_differs], NodeId(2));
        table.point([low_half_differs], NodeId(3));
        let mut entries: Vec<_> = table.iter().collect();
        entries.sort_by_key(|&(_, id)| id.0);
        let expected = [(hash, 1), (high_half_differs, 2), (low_half_differs, 3)];
        assert_eq!(entries, expected.map(|(h, id)| (h, NodeId(id))));
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
        let ids: Vec<_> = table.into_ids().collect();
        assert_eq!(ids, [NodeId(1); 3]);
    }

    #[test]
    fn a_batch_longer_than_its_size_hint_still_finds_room() {
        let mut table = Directory::default();
        let unhinted = (0..1000).map(hash).filter(|_| true);
        assert_eq!(table.point(unhinted, NodeId(7)), (1000, vec![]));
        assert!((0..1000).all(|k| table.get(hash(k)) == Some(NodeId(7))));
        assert!(slots(&table) * 3 >= 1000 * 4, "load above 3/4");
    }

    #[test]
    fn keys_sharing_one_home_slot_stay_findable_through_removals() {
        let keys = keys_at_home(5, MIN_SLOTS, 10);
        let mut table = Directory::default();
        for (n, &key) in keys.iter().enumerate() {
            table.point([key], NodeId(n as u32));
        }
        assert_eq!(
            slots(&table),
            MIN_SLOTS,
            "10 entries fit the smallest table"
        );
        for n in [0, 4, 9] {
            assert_eq!(table.remove_if(keys[n], |_| true), Some(NodeId(n as u32)));
            assert_eq!(table.get(keys[n]), None);
        }
        for (n, &key) in keys.iter().enumerate() {
            let kept = ![0, 4, 9].contains(&n);
            assert_eq!(table.get(key), kept.then_some(NodeId(n as u32)), "key {n}");
        }
    }

    #[test]
    fn a_removal_shifts_back_a_cluster_that_wraps_around_the_end() {
        let last = MIN_SLOTS - 1;
        // Three keys at home in the last slot fill it and slots 0 and 1; one
        // key at home in slot 0 lands in slot 2 and one at home in slot 2 in 3.
        let mut keys = keys_at_home(last, MIN_SLOTS, 3);
        keys.extend(keys_at_home(0, MIN_SLOTS, 1));
        keys.extend(keys_at_home(2, MIN_SLOTS, 1));
        for removed in 0..keys.len() {
            let mut table = Directory::default();
            for (n, &key) in keys.iter().enumerate() {
                table.point([key], NodeId(n as u32));
            }
            assert_eq!(slots(&table), MIN_SLOTS);
            assert!(table.remove_if(keys[removed], |_| true).is_some());
            for (n, &key) in keys.iter().enumerate() {
                let expected = (n != removed).then_some(NodeId(n as u32));
                assert_eq!(table.get(key), expected, "removed {removed}, key {n}");
            }
        }
    }

    #[test]
    fn a_refused_removal_leaves_the_entry() {
        let mut table = filled(3);
        assert_eq!(table.remove_if(hash(1), |id| id == NodeId(1)), None);
        assert_eq!(table.remove_if(hash(9), |_| true), None);
        assert_eq!(table.get(hash(1)), Some(NodeId(0)));
        assert_eq!(table.len(), 3);
    }

    #[test]
    fn a_table_emptied_by_evictions_gives_its_memory_back() {
        let mut table = filled(4096);
        let peak = table.heap_bytes();
        for k in 0..4000 {
            assert!(table.remove_if(hash(k), |_| true).is_some());
        }
        assert_eq!(table.heap_bytes(), peak, "shrunk inside the batch");
        table.shrink_if_sparse();
        assert!(
            table.heap_bytes() * 8 <= peak,
            "{} of {peak}",
            table.heap_bytes()
        );
        assert_eq!(slots(&table), 2 * 96, "rebuilt half full");
        assert!((4000..4096).all(|k| table.get(hash(k)) == Some(NodeId(0))));
        for k in 4000..4096 {
            table.remove_if(hash(k), |_| true);
            table.shrink_if_sparse();
        }
        assert_eq!((table.len(), slots(&table)), (0, MIN_SLOTS));
    }

    #[test]
    fn a_table_grown_by_inserts_keeps_every_entry() {
        let table = filled(100_000);
        assert_eq!(table.len(), 100_000);
        assert!((0..100_000).all(|k| table.get(hash(k)) == Some(NodeId(0))));
        assert!(slots(&table) * 3 >= 100_000 * 4, "load above 3/4");
        assert!(slots(&table) <= 2 * 100_000, "{}", slots(&table));
    }

    /// Replays `live` entries, then per step one evicted at random (a
    /// one-removal batch) and one new inserted. Returns the most slots seen
    /// and the number of rebuilds during the churn.
    fn churn(live: u64, steps: u64) -> (usize, usize) {
        let mut keys: Vec<u64> = (0..live).collect();
        let mut table = filled(live);
        let (mut peak, mut rebuilds) = (slots(&table), 0);
        let mut random = Lcg(0x9e37_79b9_7f4a_7c15);
        for k in live..live + steps {
            let before = slots(&table);
            let evicted = keys.swap_remove(random.below(keys.len() as u64) as usize);
            assert!(table.remove_if(hash(evicted), |_| true).is_some());
            table.shrink_if_sparse();
            table.point([hash(k)], NodeId(0));
            keys.push(k);
            rebuilds += usize::from(slots(&table) != before);
            peak = peak.max(slots(&table));
        }
        assert_eq!(table.len(), live as usize);
        assert!(keys.iter().all(|&k| table.get(hash(k)) == Some(NodeId(0))));
        (peak, rebuilds)
    }

    #[test]
    fn a_table_under_eviction_churn_stays_below_three_slots_per_entry() {
        let (peak, rebuilds) = churn(4096, 100_000);
        assert!(peak * 10 <= 4096 * 27, "peak {peak} slots");
        assert!(rebuilds <= 100_000 / 2048, "{rebuilds} rebuilds");
    }

    #[test]
    fn rebuilds_move_at_most_three_entries_per_operation() {
        // Live counts swinging between 0 and 5,000: every rebuild moves the
        // entries live before the operation that triggered it.
        let mut table = Directory::default();
        let (mut operations, mut moved, mut next) = (0, 0, 0u64);
        let mut random = Lcg(7);
        for _ in 0..40 {
            let target = random.below(5000) as usize;
            while table.len() != target {
                let before = (slots(&table), table.len());
                if table.len() < target {
                    table.point([hash(next)], NodeId(0));
                    next += 1;
                } else {
                    let (key, _) = table.iter().next().expect("entries left");
                    table.remove_if(key, |_| true);
                    table.shrink_if_sparse();
                }
                operations += 1;
                moved += if slots(&table) != before.0 {
                    before.1
                } else {
                    0
                };
            }
        }
        assert!(moved <= 3 * operations, "{moved} moved for {operations}");
    }

    /// One random operation on `table` and on the `model` it must match.
    fn step(table: &mut Directory, model: &mut HashMap<u64, u32>, random: &mut Lcg) {
        // Structured keys: low half only, high half only, and both.
        let key = |random: &mut Lcg| {
            let k = random.below(200);
            [k, k << 32, k << 32 | k][random.below(3) as usize]
        };
        let id = random.below(5) as u32;
        match random.below(4) {
            0 | 1 => {
                let batch: Vec<u64> = (0..random.below(4)).map(|_| key(random)).collect();
                let (mut changed, mut replaced) = (0, Vec::new());
                for &k in &batch {
                    match model.insert(k, id) {
                        Some(old) if old == id => continue,
                        Some(old) => replaced.push(NodeId(old)),
                        None => {}
                    }
                    changed += 1;
                }
                let hashes = batch.iter().map(|&k| ExternalSequenceBlockHash(k));
                assert_eq!(table.point(hashes, NodeId(id)), (changed, replaced));
            }
            2 => {
                let k = key(random);
                let accept = |named: NodeId| named.0 % 2 == id % 2;
                let expected = model.get(&k).map(|&v| NodeId(v)).filter(|&v| accept(v));
                if expected.is_some() {
                    model.remove(&k);
                }
                let hash = ExternalSequenceBlockHash(k);
                assert_eq!(table.remove_if(hash, accept), expected);
            }
            _ => table.shrink_if_sparse(),
        }
        let k = key(random);
        let expected = model.get(&k).map(|&v| NodeId(v));
        assert_eq!(table.get(ExternalSequenceBlockHash(k)), expected);
        assert_eq!(table.len(), model.len());
    }

    #[test]
    fn random_operations_match_a_hash_map() {
        let mut table = Directory::default();
        let mut model = HashMap::new();
        let mut random = Lcg(1);
        for _ in 0..20_000 {
            step(&mut table, &mut model, &mut random);
        }
        let entries: HashMap<u64, u32> = table.iter().map(|(h, id)| (h.0, id.0)).collect();
        assert_eq!(entries, model);
        assert!(!model.is_empty());
    }
}
