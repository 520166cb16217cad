//! A lane's ranks, each with the slot the lane last found for it
//! ([`RankSlots`], which remembers the last rank found).

use super::slots::CachedSlot;
use crate::types::WorkerWithDpRank;
use rustc_hash::FxHashMap;
use std::cell::Cell;

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

    /// Unregisters `rank`; returns its cached slot if it was registered.
    pub(crate) fn remove(&mut self, rank: WorkerWithDpRank) -> Option<Option<CachedSlot>> {
        let position = self.positions.remove(&rank)?;
        let (_, cached) = self.ranks.swap_remove(position);
        if let Some((moved, _)) = self.ranks.get(position) {
            self.positions.insert(*moved, position);
        }
        Some(cached)
    }

    /// The registered ranks with their cached slots.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (WorkerWithDpRank, Option<CachedSlot>)> + '_ {
        self.ranks.iter().copied()
    }

    /// The registered ranks.
    pub(crate) fn ranks(&self) -> impl Iterator<Item = WorkerWithDpRank> + '_ {
        self.ranks.iter().map(|(rank, _)| *rank)
    }

    /// Whether no rank is registered.
    pub(crate) fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::{CachedSlot, RankSlots};
    use crate::types::WorkerWithDpRank;
    use crtc_strategies::Slot;

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
        assert!(slots.remove(ranks[1]).is_some());
        assert_eq!(owner(&slots, ranks[1]), None);
        assert_eq!(owner(&slots, ranks[3]), Some(Slot(3)));
        // Removing the last rank leaves the remembered position past the end.
        assert!(slots.remove(ranks[2]).is_some());
        assert_eq!(owner(&slots, ranks[3]), Some(Slot(3)));
        assert_eq!(
            slots.remove(ranks[3]),
            Some(Some(CachedSlot::unstamped(Slot(3))))
        );
        assert_eq!(slots.remove(ranks[3]), None);
        assert_eq!(owner(&slots, ranks[3]), None);
        assert_eq!(owner(&slots, ranks[0]), Some(Slot(0)));
        let left: Vec<_> = slots.ranks().collect();
        assert_eq!(left, [ranks[0]]);
        slots.get_or_insert(ranks[1]);
        assert_eq!(slots.get(ranks[1]), Some(None));
        assert_eq!(owner(&slots, ranks[0]), Some(Slot(0)));
    }
}
