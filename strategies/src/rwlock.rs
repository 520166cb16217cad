//! `RwLockGate`: the pessimistic baseline, two reader-writer locks per node.
//!
//! Protocol. Each node has a shape gate (`RwLock<()>`), a 64-bit version and a
//! state lock around the plain shape. Readers take only the state read lock;
//! plans take the shape gate shared, read the version, then the state read
//! lock. Shared commits hold the shape gate shared (so no shape change can
//! happen) and the state write lock for their coverage change. Exclusive
//! commits hold the shape gate exclusively, validate, take the state write lock
//! and bump the version when the shape changed. The fast path is an exclusive
//! section that needs no prior plan: its checks and its append happen under the
//! same lock, and it bumps the version so plans made before it fail.
//!
//! Lock order is always shape gate, then state lock; nothing holds two nodes'
//! state locks at once. The version is written only under the exclusive gate
//! and read under the gate (shared or exclusive), so the gate orders every
//! access and `Relaxed` suffices.

use crate::gate::{append_eligibility, AppendMiss, Commit, ShapeGate, Stale, Version};
use crate::hash::{BlockPair, ExternalSequenceBlockHash, Slot};
use crate::reclaim::{DefaultReclaim, Reclaim};
use crate::shape::{append_demoting, PlainShape, ShapeInit};
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{RwLock, RwLockWriteGuard};
use std::marker::PhantomData;

/// The RwLock strategy: shape gate + state lock + version. `R` reclaims
/// what the tree retires around the gate (child maps, unlinked nodes); the
/// gate itself frees nothing readers may hold.
#[derive(Debug)]
pub struct RwLockGate<R: Reclaim = DefaultReclaim> {
    pub(crate) gate: RwLock<()>,
    version: AtomicU64,
    pub(crate) state: RwLock<PlainShape>,
    reclaim: PhantomData<fn() -> R>,
}

impl<R: Reclaim> RwLockGate<R> {
    fn check(&self, version: Option<Version>) -> Result<(), Stale> {
        // Relaxed: the caller holds the shape gate, which orders every write.
        match version {
            Some(v) if self.version.load(Ordering::Relaxed) != v.0 => Err(Stale),
            _ => Ok(()),
        }
    }

    pub(crate) fn bump(&self, _exclusive: &RwLockWriteGuard<'_, ()>) {
        // Relaxed: written only under the exclusive gate (the guard proves it).
        let next = self.version.load(Ordering::Relaxed) + 1;
        self.version.store(next, Ordering::Relaxed);
    }
}

// SAFETY: (1) exclusive sections hold `gate` for writing, shared ones for
// reading, and every mutation also holds `state` for writing, which excludes
// readers and other shared commits. (2, 3) the version is checked and bumped
// under the exclusive gate, only ever increments, and every shape change and
// fast-path append bumps it. (4) readers hold `state` for reading, so they see
// the state between two write sections. (5) the plain shape is only replaced
// under the write lock, which no reader holds at that time.
unsafe impl<R: Reclaim> ShapeGate for RwLockGate<R> {
    const NAME: &'static str = "rwlock";
    const READ_PATH: crate::gate::ReadPath = crate::gate::ReadPath::Lock;
    type View<'a> = PlainShape;
    type Writer<'a> = PlainShape;
    type Reclaim = R;

    fn new(init: ShapeInit) -> Self {
        Self {
            gate: RwLock::new(()),
            version: AtomicU64::new(0),
            state: RwLock::new(PlainShape::new(init)),
            reclaim: PhantomData,
        }
    }

    #[inline]
    fn read<T>(&self, mut f: impl FnMut(&PlainShape) -> T) -> T {
        f(&self.state.read())
    }

    fn plan<T>(&self, mut f: impl FnMut(&PlainShape) -> T) -> (T, Version) {
        let _gate = self.gate.read();
        // Relaxed: the shared gate excludes the only writers of the version.
        let version = Version(self.version.load(Ordering::Relaxed));
        (f(&self.state.read()), version)
    }

    fn shared<T>(&self, version: Option<Version>, f: impl FnOnce() -> T) -> Result<T, Stale> {
        let _gate = self.gate.read();
        self.check(version)?;
        Ok(f())
    }

    fn shared_commit<T>(
        &self,
        version: Option<Version>,
        f: impl FnOnce(&mut PlainShape) -> T,
    ) -> Result<T, Stale> {
        let _gate = self.gate.read();
        self.check(version)?;
        Ok(f(&mut self.state.write()))
    }

    fn exclusive_commit<T>(
        &self,
        version: Option<Version>,
        f: impl FnOnce(&mut PlainShape) -> Commit<T>,
    ) -> Result<T, Stale> {
        let gate = self.gate.write();
        self.check(version)?;
        let commit = f(&mut self.state.write());
        if commit.shape_changed {
            self.bump(&gate);
        }
        Ok(commit.value)
    }

    fn try_append_at_tail(
        &self,
        slot: Slot,
        parent: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> Result<usize, AppendMiss> {
        #[cfg(crtc_checker)]
        if let Some(mutated) = crate::mutants::rwlock_append(self, slot, parent, blocks) {
            return mutated;
        }
        let gate = self.gate.write();
        let mut state = self.state.write();
        append_eligibility(&*state, slot, parent, blocks)?;
        let old_len = state.edge().len();
        append_demoting(&mut *state, slot, blocks);
        self.bump(&gate);
        Ok(old_len)
    }

    fn footprint(&self) -> usize {
        std::mem::size_of::<Self>() - std::mem::size_of::<PlainShape>()
            + self.state.read().footprint()
    }
}
