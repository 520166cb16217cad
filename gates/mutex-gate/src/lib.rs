//! `MutexGate`: one mutex per node, readers included. A [`ShapeGate`]
//! written outside `crtc-strategies`, through its public API only, to show
//! that a strategy plugs in from another crate, and as a reference row: what
//! does a reader-writer lock per node buy over a plain mutex?
//!
//! Protocol. Each node keeps its shape (a [`PlainShape`]) and a 64-bit
//! version behind one [`Mutex`] of the sync facade. Every section locks it:
//! `read`, `plan`, `shared`, `shared_commit`, `exclusive_commit` and the
//! decode append. So every section of a node excludes every other one,
//! which is more than the contract asks (shared sections may overlap, and
//! readers need not wait for writers): the cost this gate measures. The
//! version lives under the same mutex, so it is a plain integer: `plan`
//! reads it, every commit given a version compares it, and an exclusive
//! commit that reports a shape change and every successful append
//! increment it.
//!
//! The shape is changed in place under the mutex and never replaced, and a
//! reader holds the mutex for its whole view, so nothing a view exposes is
//! ever retired: the reclaimer `R` serves only what the tree retires around
//! the gate (child maps, unlinked nodes). Lock order is the tree's: a
//! section may lock another node's gate only below its own (a sweep's
//! parent, then the leaf), never the same node twice.
//!
//! The coverage rules come from [`crtc_strategies::shape`] and the append's
//! checks from [`append_eligibility`], as for the gates inside
//! `crtc-strategies`. Under a model checker (`--cfg crtc_loom`) the append
//! honours the generic decode-append mutants (`SkipInternalCheck`,
//! `NoInvalidation`, `TailCheckOutsideSection`), so the loom suite's
//! negative controls run against this gate too; `ClearBitBeforeCutoff` has
//! nothing to break here, since no reader sees a section's writes in
//! between.

#![warn(missing_docs, missing_debug_implementations)]

use crtc_strategies::shape::{append_demoting, PlainShape, ShapeInit, ShapeRead};
use crtc_strategies::sync::Mutex;
use crtc_strategies::{
    append_eligibility, AppendMiss, BlockPair, Commit, DefaultReclaim, ExternalSequenceBlockHash,
    ReadPath, Reclaim, ShapeGate, Slot, Stale, Version,
};
use std::marker::PhantomData;

/// What the node's mutex guards: the shape and its version.
#[derive(Debug)]
struct Locked {
    version: u64,
    shape: PlainShape,
}

impl Locked {
    /// `Err(Stale)` if a shape change committed since the plan of `version`.
    fn check(&self, version: Option<Version>) -> Result<(), Stale> {
        match version {
            Some(v) if v.get() != self.version => Err(Stale),
            _ => Ok(()),
        }
    }

    /// Appends `blocks` for `slot`, demoting the other full slots, and
    /// invalidates every earlier plan; returns the old edge length.
    fn append(&mut self, slot: Slot, blocks: &[BlockPair]) -> usize {
        let old_len = self.shape.len();
        append_demoting(&mut self.shape, slot, blocks);
        if !crtc_strategies::mutant!(NoInvalidation) {
            self.version += 1;
        }
        old_len
    }
}

/// The mutex strategy: one mutex around the shape and its version.
#[derive(Debug)]
pub struct MutexGate<R: Reclaim = DefaultReclaim> {
    locked: Mutex<Locked>,
    reclaim: PhantomData<fn() -> R>,
}

/// [`append_eligibility`], or under the `SkipInternalCheck` mutant the same
/// checks without the internal one.
fn eligible(
    shape: &PlainShape,
    slot: Slot,
    parent: ExternalSequenceBlockHash,
    blocks: &[BlockPair],
) -> Result<(), AppendMiss> {
    match append_eligibility(shape, slot, parent, blocks) {
        Err(AppendMiss::Internal)
            if crtc_strategies::mutant!(SkipInternalCheck)
                && shape.tail().map(|pair| pair.external) == Some(parent)
                && shape.is_full(slot) =>
        {
            Ok(())
        }
        checked => checked,
    }
}

// SAFETY: (1) every section, readers included, holds the node's mutex, so
// each excludes every other section of the node. (2, 3) the version is read,
// compared and incremented only under that mutex, never decreases, and each
// exclusive commit that changed the shape and each successful append
// increments it before the mutex is released. (4) a view is the shape under
// the mutex, which no section is changing at the time. (5) the shape is
// never replaced while a view exists: views borrow it under the mutex.
unsafe impl<R: Reclaim> ShapeGate for MutexGate<R> {
    const NAME: &'static str = "mutex";
    const READ_PATH: ReadPath = ReadPath::Lock;
    type View<'a> = PlainShape;
    type Writer<'a> = PlainShape;
    type Reclaim = R;

    fn new(init: ShapeInit) -> Self {
        let shape = PlainShape::new(init);
        Self {
            locked: Mutex::new(Locked { version: 0, shape }),
            reclaim: PhantomData,
        }
    }

    #[inline]
    fn read<T>(&self, mut f: impl FnMut(&PlainShape) -> T) -> T {
        f(&self.locked.lock().shape)
    }

    fn plan<T>(&self, mut f: impl FnMut(&PlainShape) -> T) -> (T, Version) {
        let locked = self.locked.lock();
        (f(&locked.shape), Version::new(locked.version))
    }

    fn shared<T>(&self, version: Option<Version>, f: impl FnOnce() -> T) -> Result<T, Stale> {
        let locked = self.locked.lock();
        locked.check(version)?;
        Ok(f())
    }

    fn shared_commit<T>(
        &self,
        version: Option<Version>,
        f: impl FnOnce(&mut PlainShape) -> T,
    ) -> Result<T, Stale> {
        let mut locked = self.locked.lock();
        locked.check(version)?;
        Ok(f(&mut locked.shape))
    }

    fn exclusive_commit<T>(
        &self,
        version: Option<Version>,
        f: impl FnOnce(&mut PlainShape) -> Commit<T>,
    ) -> Result<T, Stale> {
        let mut locked = self.locked.lock();
        locked.check(version)?;
        let commit = f(&mut locked.shape);
        if commit.shape_changed {
            locked.version += 1;
        }
        Ok(commit.value)
    }

    fn try_append_at_tail(
        &self,
        slot: Slot,
        parent: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> Result<usize, AppendMiss> {
        if crtc_strategies::mutant!(TailCheckOutsideSection) {
            self.read(|shape| eligible(shape, slot, parent, blocks))?;
            return Ok(self.locked.lock().append(slot, blocks));
        }
        let mut locked = self.locked.lock();
        eligible(&locked.shape, slot, parent, blocks)?;
        Ok(locked.append(slot, blocks))
    }

    fn footprint(&self) -> usize {
        std::mem::size_of::<Self>() - std::mem::size_of::<PlainShape>()
            + self.locked.lock().shape.footprint()
    }
}
