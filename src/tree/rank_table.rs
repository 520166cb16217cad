//! One rank's reverse lookup on a lane, `external hash -> held node`, in a
//! [`Directory`]; and the lane's set of them,
//! found by rank ([`RankTables`], which remembers the last rank found).
//!
//! The entries live in a [`Directory`], which manages its own size (its
//! module docs): a batch of inserts (one event's hashes) makes room once,
//! and a batch of removals shrinks the table once at its end
//! ([`RankTable::shrink_if_sparse`]); checking once per event instead of once
//! per block saves a few instructions per block (measured:
//! `papers/choices.md`).

use super::directory::Directory;
use super::lane::NodeId;
use super::slots::CachedSlot;
use crate::types::{ExternalSequenceBlockHash, WorkerWithDpRank};
use rustc_hash::FxHashMap;
use std::cell::Cell;

/// One rank's entries on a lane, and its slot as the lane last found it.
#[derive(Debug, Default)]
pub(crate) struct RankTable {
    entries: Directory,
    /// The rank's slot, checked against the registry before each use.
    pub(crate) slot: Option<CachedSlot>,
}

impl RankTable {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The node the entry for `hash` names.
    #[inline]
    pub(crate) fn get(&self, hash: ExternalSequenceBlockHash) -> Option<NodeId> {
        self.entries.get(hash)
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
        self.entries.point(hashes, id)
    }

    /// Puts back an entry taken out with [`Self::remove_if`] (room for it
    /// is normally left: no shrink runs in between).
    pub(crate) fn restore(&mut self, hash: ExternalSequenceBlockHash, id: NodeId) {
        self.entries.restore(hash, id);
    }

    /// Removes the entry for `hash`; returns the node it named.
    pub(crate) fn remove(&mut self, hash: ExternalSequenceBlockHash) -> Option<NodeId> {
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
        self.entries.remove_if(hash, remove)
    }

    /// The nodes of every entry, one per entry.
    pub(crate) fn into_ids(self) -> impl Iterator<Item = NodeId> {
        self.entries.into_ids()
    }

    /// Shrinks the table once sparse ([`Directory::shrink_if_sparse`]).
    pub(crate) fn shrink_if_sparse(&mut self) {
        self.entries.shrink_if_sparse();
    }
}

/// A lane's rank tables, found by rank, remembering the last one found.
///
/// One event looks its rank up several times (its slot, the parent's entry,
/// the upsert, each removed hash), and a probe of a hash map keyed by rank
/// costs tens of instructions (measured: `papers/choices.md`). The tables
/// live in a vector with a map from rank to position, and the position
/// found last is kept and checked against the rank stored there, so every lookup of
/// an event after its first is a compare. A stale position (its table
/// removed or moved) fails the check and falls back to the map.
#[derive(Debug, Default)]
pub(crate) struct RankTables {
    positions: FxHashMap<WorkerWithDpRank, usize>,
    tables: Vec<(WorkerWithDpRank, RankTable)>,
    recent: Cell<usize>,
}

impl RankTables {
    #[inline]
    fn position(&self, rank: WorkerWithDpRank) -> Option<usize> {
        let recent = self.recent.get();
        if self.tables.get(recent).is_some_and(|(r, _)| *r == rank) {
            return Some(recent);
        }
        let position = *self.positions.get(&rank)?;
        self.recent.set(position);
        Some(position)
    }

    /// The table of `rank`.
    #[inline]
    pub(crate) fn get(&self, rank: WorkerWithDpRank) -> Option<&RankTable> {
        self.position(rank).map(|p| &self.tables[p].1)
    }

    /// The table of `rank`, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, rank: WorkerWithDpRank) -> Option<&mut RankTable> {
        self.position(rank).map(|p| &mut self.tables[p].1)
    }

    /// The table of `rank`, created empty if it has none.
    pub(crate) fn get_or_insert(&mut self, rank: WorkerWithDpRank) -> &mut RankTable {
        let position = self.position(rank).unwrap_or_else(|| {
            let position = self.tables.len();
            self.positions.insert(rank, position);
            self.tables.push((rank, RankTable::default()));
            self.recent.set(position);
            position
        });
        &mut self.tables[position].1
    }

    /// Takes the table of `rank` out.
    pub(crate) fn remove(&mut self, rank: WorkerWithDpRank) -> Option<RankTable> {
        let position = self.positions.remove(&rank)?;
        let (_, table) = self.tables.swap_remove(position);
        if let Some((moved, _)) = self.tables.get(position) {
            self.positions.insert(*moved, position);
        }
        Some(table)
    }

    /// The ranks that have a table.
    pub(crate) fn ranks(&self) -> impl Iterator<Item = WorkerWithDpRank> + '_ {
        self.tables.iter().map(|(rank, _)| *rank)
    }
}

#[cfg(test)]
mod tests {
    use super::{NodeId, RankTable, RankTables};
    use crate::types::{ExternalSequenceBlockHash, WorkerWithDpRank};

    /// Block hashes look random; sequential keys would spread unnaturally
    /// evenly under the multiplicative hash.
    fn hash(k: u64) -> ExternalSequenceBlockHash {
        ExternalSequenceBlockHash(k.wrapping_mul(0xd6e8_feb8_6659_fd93).rotate_left(29) ^ k)
    }

    #[test]
    fn a_removed_entry_can_be_restored() {
        let mut table = RankTable::default();
        assert_eq!(table.point([hash(0), hash(1)], NodeId(1)), (2, vec![]));
        assert_eq!(table.remove(hash(0)), Some(NodeId(1)));
        assert_eq!(table.remove(hash(0)), None);
        assert_eq!(table.remove_if(hash(1), |id| id == NodeId(2)), None);
        assert_eq!(
            table.remove_if(hash(1), |id| id == NodeId(1)),
            Some(NodeId(1))
        );
        table.restore(hash(1), NodeId(1));
        assert_eq!((table.get(hash(1)), table.len()), (Some(NodeId(1)), 1));
        assert_eq!(table.into_ids().collect::<Vec<_>>(), [NodeId(1)]);
    }

    /// Each rank's table holds one entry naming the rank's own number, so a
    /// lookup that returned another rank's table shows.
    fn tables_of(ranks: &[WorkerWithDpRank]) -> RankTables {
        let mut tables = RankTables::default();
        for (n, &rank) in ranks.iter().enumerate() {
            tables.get_or_insert(rank).insert(hash(0), NodeId(n as u32));
        }
        tables
    }

    #[test]
    fn a_remembered_position_never_finds_another_ranks_table() {
        let ranks: Vec<_> = (0..4).map(|w| WorkerWithDpRank::new(w, 0)).collect();
        let owner = |tables: &RankTables, rank| tables.get(rank).and_then(|t| t.get(hash(0)));
        let mut tables = tables_of(&ranks);
        assert_eq!(owner(&tables, ranks[1]), Some(NodeId(1)));
        // Removing rank 1 moves rank 3 into the remembered position.
        assert!(tables.remove(ranks[1]).is_some());
        assert_eq!(owner(&tables, ranks[1]), None);
        assert_eq!(owner(&tables, ranks[3]), Some(NodeId(3)));
        // Removing the last table leaves the remembered position past the end.
        assert!(tables.remove(ranks[2]).is_some());
        assert_eq!(owner(&tables, ranks[3]), Some(NodeId(3)));
        assert!(tables.remove(ranks[3]).is_some());
        assert_eq!(owner(&tables, ranks[3]), None);
        assert_eq!(owner(&tables, ranks[0]), Some(NodeId(0)));
        let left: Vec<_> = tables.ranks().collect();
        assert_eq!(left, [ranks[0]]);
        tables.get_or_insert(ranks[1]);
        assert_eq!(tables.get_mut(ranks[1]).map(|t| t.len()), Some(0));
        assert_eq!(owner(&tables, ranks[0]), Some(NodeId(0)));
    }
}
