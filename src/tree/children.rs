//! A node's children: small immutable snapshots, growing to a sharded map.
//!
//! Protocol. The child set is one [`AtomicBox`]: `Empty`, or a sorted boxed
//! slice of one to [`COMPACT_MAX`] children, or a sharded map. Compact states
//! are immutable: every change builds a new snapshot and publishes it, and the
//! old one is retired through the gate's reclaimer, so a reader that loaded it
//! keeps a live allocation (and every child `Arc` in it) until it unpins.
//! `insert_if_absent` may run concurrently (under a node's *shared* section),
//! so compact inserts are a compare-exchange loop; inserting a key past
//! [`COMPACT_MAX`] publishes a sharded map, which ordinary mutations never
//! demote (the stale-leaf sweep does, under the node's exclusive section,
//! once at most [`COMPACT_MAX`] children are left: see
//! [`Children::compact`]). A compact slice is
//! plain data in a [`PlainCell`]: written before its set is published (the
//! `AtomicBox`'s Release), read after the readers' Acquire load, so under
//! loom a write that is not ordered before a read fails the model. Sharded inserts take the
//! shard's lock; removals from a sharded map defer dropping the removed `Arc`
//! through the reclaimer. Removal, clearing and the split hand-off happen only
//! under the node's exclusive section. Readers borrow children (`&Node`)
//! without touching reference counts.

use crate::tree::node::Node;
use crtc_strategies::sync::{spin_loop, Arc, PlainCell, RwLock};
use crtc_strategies::{mutant, AtomicBox, Guard, LocalBlockHash, Reclaim, ShapeGate};
use rustc_hash::FxHashMap;

/// Largest compact snapshot; one more child promotes to the sharded map.
/// Under the model checkers it is 2, so their small trees (a node with
/// three children) grow, split and sweep sharded sets too.
pub const COMPACT_MAX: usize = if cfg!(crtc_checker) { 2 } else { 4 };
const SHARDS: usize = 8;

type Entry<G> = (LocalBlockHash, Arc<Node<G>>);
type Shard<G> = RwLock<FxHashMap<LocalBlockHash, Arc<Node<G>>>>;
/// One published state of a child set.
pub enum ChildSet<G: ShapeGate> {
    /// No children.
    Empty,
    /// One to [`COMPACT_MAX`] children sorted by key; read through [`entries`].
    Compact(PlainCell<Box<[Entry<G>]>>),
    /// A map sharded by key, mutated in place under its shard locks.
    Sharded(Box<[Shard<G>]>),
}

/// Outcome of [`Children::insert_if_absent`].
pub enum Insert<G: ShapeGate> {
    /// The key was absent; the given child is now linked.
    Inserted,
    /// Another child already holds the key.
    Existing(Arc<Node<G>>),
}

/// The children of one node.
pub struct Children<G: ShapeGate> {
    set: AtomicBox<ChildSet<G>, G::Reclaim>,
}

fn shard_of(key: LocalBlockHash) -> usize {
    (key.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 61) as usize % SHARDS
}

fn sharded_from<G: ShapeGate>(entries: impl IntoIterator<Item = Entry<G>>) -> ChildSet<G> {
    let shards: Box<[_]> = (0..SHARDS)
        .map(|_| RwLock::new(FxHashMap::default()))
        .collect();
    for (key, child) in entries {
        shards[shard_of(key)].write().insert(key, child);
    }
    ChildSet::Sharded(shards)
}

/// Shards at or below this capacity are never shrunk.
const SHARD_SHRINK_MIN: usize = 16;

/// Shrinks a shard once at most a quarter of its capacity is live, to twice
/// its live entries. A map never shrinks by itself, so without this a node
/// that once had many children (the root, after a burst of distinct
/// prompts) keeps the room for all of them: on the chat preset the root's
/// shards held 238 KB for 485 children. Amortized O(1): after a shrink the
/// shard is half full, so at least a quarter of its capacity must be removed
/// before the next, and as much inserted before it grows.
fn shrink_if_sparse<G: ShapeGate>(shard: &mut FxHashMap<LocalBlockHash, Arc<Node<G>>>) {
    if shard.capacity() > SHARD_SHRINK_MIN && shard.len() * 4 <= shard.capacity() {
        shard.shrink_to(shard.len() * 2);
    }
}

/// The published state holding exactly `entries` (sorted here).
fn set_from<G: ShapeGate>(mut entries: Vec<Entry<G>>) -> ChildSet<G> {
    entries.sort_unstable_by_key(|(k, _)| *k);
    match entries.len() {
        0 => ChildSet::Empty,
        n if n <= COMPACT_MAX => compact(entries.into_boxed_slice()),
        _ => sharded_from(entries),
    }
}

fn compact<G: ShapeGate>(entries: Box<[Entry<G>]>) -> ChildSet<G> {
    ChildSet::Compact(PlainCell::new(entries))
}

/// A compact set's children. The set was loaded from the `AtomicBox` under
/// a guard (Acquire) or is owned.
fn entries<G: ShapeGate>(cell: &PlainCell<Box<[Entry<G>]>>) -> &[Entry<G>] {
    // SAFETY: a compact slice is written only before its set is published
    // (and by the mutant `ChildrenSortedAfterPublish`, broken on purpose).
    cell.with(|entries| unsafe { &**entries })
}

impl<G: ShapeGate> Default for Children<G> {
    fn default() -> Self {
        Self {
            set: AtomicBox::new(ChildSet::Empty),
        }
    }
}

impl<G: ShapeGate> Children<G> {
    /// The child under `key`, borrowed for the guard's lifetime (and
    /// noted with [`Reclaim::borrowed`], which the checkers' reclaimer
    /// watches).
    #[inline]
    pub fn get<'g>(&'g self, key: LocalBlockHash, guard: &'g Guard<G>) -> Option<&'g Node<G>> {
        let child = match self.set.load(guard) {
            ChildSet::Empty => None,
            ChildSet::Compact(cell) => entries(cell)
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, c)| Arc::as_ptr(c)),
            ChildSet::Sharded(shards) => shards[shard_of(key)].read().get(&key).map(Arc::as_ptr),
        }?;
        G::Reclaim::borrowed(child);
        // The child's `Arc` is owned by a set loaded under `guard`: a compact
        // set is retired with its `Arc`s, and a sharded map drops an `Arc`
        // through the reclaimer (see `remove`).
        // SAFETY: so the child outlives `guard`.
        Some(unsafe { &*child })
    }

    /// The child under `key`, as an owned reference.
    pub fn get_arc(&self, key: LocalBlockHash, guard: &Guard<G>) -> Option<Arc<Node<G>>> {
        match self.set.load(guard) {
            ChildSet::Empty => None,
            ChildSet::Compact(cell) => entries(cell)
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, c)| Arc::clone(c)),
            ChildSet::Sharded(shards) => shards[shard_of(key)].read().get(&key).cloned(),
        }
    }

    /// Every child, as owned references.
    pub fn snapshot(&self, guard: &Guard<G>) -> Vec<Entry<G>> {
        match self.set.load(guard) {
            ChildSet::Empty => Vec::new(),
            ChildSet::Compact(cell) => entries(cell).to_vec(),
            ChildSet::Sharded(shards) => shards
                .iter()
                .flat_map(|shard| {
                    shard
                        .read()
                        .iter()
                        .map(|(k, c)| (*k, Arc::clone(c)))
                        .collect::<Vec<_>>()
                })
                .collect(),
        }
    }

    /// Number of children.
    pub fn len(&self, guard: &Guard<G>) -> usize {
        match self.set.load(guard) {
            ChildSet::Empty => 0,
            ChildSet::Compact(cell) => entries(cell).len(),
            ChildSet::Sharded(shards) => shards.iter().map(|s| s.read().len()).sum(),
        }
    }

    /// Approximate heap bytes of the published set (the `Arc`s, not the
    /// children they point to).
    pub fn footprint(&self, guard: &Guard<G>) -> usize {
        let boxed = std::mem::size_of::<ChildSet<G>>();
        boxed
            + match self.set.load(guard) {
                ChildSet::Empty => 0,
                ChildSet::Compact(cell) => std::mem::size_of_val(entries(cell)),
                ChildSet::Sharded(shards) => shards
                    .iter()
                    .map(|shard| {
                        std::mem::size_of::<Shard<G>>()
                            + shard.read().capacity() * std::mem::size_of::<Entry<G>>()
                    })
                    .sum(),
            }
    }

    /// Links `child` under `key` unless a child holds the key already.
    /// Callers hold at least the node's shared section.
    pub fn insert_if_absent(
        &self,
        key: LocalBlockHash,
        child: &Arc<Node<G>>,
        guard: &Guard<G>,
    ) -> Insert<G> {
        loop {
            let current = self.set.load(guard);
            let next = match current {
                ChildSet::Sharded(shards) => {
                    let mut shard = shards[shard_of(key)].write();
                    return match shard.get(&key) {
                        Some(existing) => Insert::Existing(Arc::clone(existing)),
                        None => {
                            shard.insert(key, Arc::clone(child));
                            Insert::Inserted
                        }
                    };
                }
                ChildSet::Empty => compact(Box::new([(key, Arc::clone(child))])),
                ChildSet::Compact(cell) => {
                    let entries = entries(cell);
                    if let Some((_, existing)) = entries.iter().find(|(k, _)| *k == key) {
                        return Insert::Existing(Arc::clone(existing));
                    }
                    let mut grown = entries.to_vec();
                    grown.push((key, Arc::clone(child)));
                    set_from(grown)
                }
            };
            match self.set.compare_exchange(current, Box::new(next), guard) {
                Ok(()) => {
                    self.after_publish(guard);
                    return Insert::Inserted;
                }
                Err(_) => spin_loop(),
            }
        }
    }

    /// Unlinks the child under `key` if it is `expected`. Exclusive section
    /// only; the sweep's unlink is the only caller. (Mutants
    /// `SweepFreesBeforeGrace`: frees the compact set it replaces at once;
    /// `ShardedSweepFreesBeforeGrace`: drops a sharded set's entry at once.)
    pub fn remove(&self, key: LocalBlockHash, expected: &Node<G>, guard: &Guard<G>) -> bool {
        match self.set.load(guard) {
            ChildSet::Empty => false,
            ChildSet::Compact(cell) => {
                let entries = entries(cell);
                let Some(index) = entries
                    .iter()
                    .position(|(k, c)| *k == key && std::ptr::eq(&**c, expected))
                else {
                    return false;
                };
                let mut rest = entries.to_vec();
                rest.remove(index);
                let next = set_from(rest);
                if mutant!(SweepFreesBeforeGrace) {
                    // SAFETY: violated on purpose (a negative control for
                    // the checkers): the replaced set is freed at once.
                    drop(unsafe { self.set.replace_and_transfer(next) });
                    return true;
                }
                self.set.store(next, guard);
                true
            }
            ChildSet::Sharded(shards) => {
                let mut shard = shards[shard_of(key)].write();
                if !shard
                    .get(&key)
                    .is_some_and(|c| std::ptr::eq(&**c, expected))
                {
                    return false;
                }
                let removed = shard.remove(&key);
                shrink_if_sparse(&mut shard);
                if mutant!(ShardedSweepFreesBeforeGrace) {
                    // Broken on purpose: the unlinked entry is dropped at once.
                    drop(removed);
                    return true;
                }
                G::Reclaim::defer(guard, move || drop(removed));
                true
            }
        }
    }

    /// Republishes a sharded set holding at most [`COMPACT_MAX`] children as
    /// a compact snapshot; the sharded one is retired (readers that loaded it
    /// keep a live value). Returns whether it did. Exclusive section only, so
    /// no insert can race the copy.
    pub fn compact(&self, guard: &Guard<G>) -> bool {
        let ChildSet::Sharded(_) = self.set.load(guard) else {
            return false;
        };
        // Count before copying: the sweep calls this after every unlink, and
        // copying a large map each time made a sweep quadratic in the fanout.
        if self.len(guard) > COMPACT_MAX {
            return false;
        }
        let entries = self.snapshot(guard);
        self.set.store(set_from(entries), guard);
        true
    }

    /// Unlinks every child; returns whether there was any. Exclusive section only.
    pub fn clear(&self, guard: &Guard<G>) -> bool {
        if self.len(guard) == 0 {
            return false;
        }
        self.set.store(ChildSet::Empty, guard);
        true
    }

    /// Moves the whole published set out (to a split's suffix), leaving this
    /// node empty until [`Children::publish`]. Exclusive section only. The
    /// moved set stays published, so readers that loaded it keep a live value.
    ///
    /// # Safety
    /// Readers pinned now may hold the moved set: the caller makes the
    /// returned children reachable from the tree (the suffix node it links)
    /// before anything could drop them, so they are freed only through the
    /// reclaimer, with the node that owns them.
    pub unsafe fn take_for_split(&self) -> Children<G> {
        Children {
            // SAFETY: the caller's contract is `replace_and_transfer`'s.
            set: unsafe { self.set.replace_and_transfer(ChildSet::Empty) },
        }
    }

    /// Replaces the whole set with exactly `entries`, retiring the old one.
    /// Exclusive section only.
    pub fn publish(&self, entries: Vec<Entry<G>>, guard: &Guard<G>) {
        self.set.store(set_from(entries), guard);
        self.after_publish(guard);
    }

    /// Mutant `ChildrenSortedAfterPublish`: sorts a just-published compact
    /// set again, in place (broken on purpose: a plain write after the
    /// publication, which readers may read concurrently). Nothing otherwise.
    #[inline]
    fn after_publish(&self, guard: &Guard<G>) {
        if !mutant!(ChildrenSortedAfterPublish) {
            return;
        }
        if let ChildSet::Compact(cell) = self.set.load(guard) {
            // SAFETY: violated on purpose (a negative control for the
            // checkers): the set is published, and readers may read it.
            cell.with_mut(|entries| unsafe { (*entries).sort_unstable_by_key(|(k, _)| *k) });
        }
    }

    /// Takes every child out, for an iterative drop (unique access).
    pub fn take_all(&mut self) -> Vec<Arc<Node<G>>> {
        match std::mem::replace(self.set.get_mut(), ChildSet::Empty) {
            ChildSet::Empty => Vec::new(),
            ChildSet::Compact(cell) => cell
                .into_inner()
                .into_vec()
                .into_iter()
                .map(|(_, c)| c)
                .collect(),
            ChildSet::Sharded(shards) => shards
                .into_vec()
                .into_iter()
                .flat_map(|s| s.into_inner().into_values())
                .collect(),
        }
    }
}
