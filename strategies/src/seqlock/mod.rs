//! `SeqlockGate`: optimistic readers over a per-node version word, with
//! ROWEX-style decode appends.
//!
//! Protocol. Each node has one 64-bit version word (layout below), a plan
//! version, and a payload made only of atomics ([`payload`]).
//!
//! * **Readers** take no lock and write no node memory (their only shared
//!   write is the reclaimer pin that keeps out-of-line arrays alive: a
//!   thread-local count for crossbeam-epoch): load the word (Acquire); if a
//!   structural write is in progress, restart; run the closure on a view
//!   (Relaxed loads, clamped); `fence(Acquire)`; re-load the word (Relaxed)
//!   and compare, ignoring the append bit. After [`MAX_OPTIMISTIC`] failed
//!   attempts a reader falls back to the writer lock (which waits for the
//!   current writer and blocks the next), so no reader starves.
//! * **Writers** exclude each other through `APPEND_LOCK` (a CAS, Acquire).
//!   A structural writer (split, cutoff lowering, children clear, demotion)
//!   then sets `STRUCT_LOCK`, issues `fence(Release)` so no payload store
//!   becomes visible before the lock bit, writes, and unlocks with a bumped
//!   counter (Release). A reader whose payload loads saw any of those stores
//!   synchronizes with the fence through its own Acquire fence and then sees
//!   the locked or bumped word, so it restarts.
//! * **Monotone writes** (promote to full, raise a cutoff, insert a child under
//!   an internal node, and the pure decode append) hold only `APPEND_LOCK` and
//!   leave the reader-visible counter alone. Why a reader still sees a
//!   consistent (edge, coverage) pair across a pure append: the appender
//!   writes the new pairs past `len`, then publishes `len` with Release; a
//!   reader loads `len` once (Acquire) and reads nothing past it. With the old
//!   length it sees the old edge, on which the appender was already full and
//!   every other slot's coverage is unchanged by a pure append (it demotes no
//!   one); with the new length it sees the new pairs, and the appender's full
//!   bit (set before) covers them. Either is a state the node was in.
//!   An append that would demote another full slot is structural instead.
//! * **Plans** carry the plan version, which every shape change bumps —
//!   including pure appends, which the reader counter ignores. A plan loads
//!   it (Acquire) before reading the view; commits compare it under the
//!   writer lock. Writers store it with Release after their payload stores.
//!
//! Memory: every replaced out-of-line array is unpublished (its pointer
//! swapped, Release) and only then retired through the gate's reclaimer `R`,
//! so a reader that pins after the retire cannot load it; readers pin for
//! the whole read, so one that loaded it before keeps it alive.

pub mod payload;

use crate::gate::{append_eligibility, AppendMiss, Commit, ShapeGate, Stale, Version};
use crate::hash::{BlockPair, ExternalSequenceBlockHash, Slot};
use crate::reclaim::{DefaultReclaim, Reclaim};
use crate::shape::{append_demoting, ShapeInit, ShapeRead, ShapeWrite};
use crate::stats::StatCounter;
use crate::sync::atomic::{fence, AtomicU64, Ordering};
use crate::sync::{spin_loop, Backoff};
use payload::{Payload, View, Writer};
use std::marker::PhantomData;

/// Version word bit: a writer holds the node (readers ignore it).
const APPEND_LOCK: u64 = 1 << 0;
/// Version word bit: a structural write is in progress (readers restart).
const STRUCT_LOCK: u64 = 1 << 1;
/// Both lock bits.
const LOCKS: u64 = APPEND_LOCK | STRUCT_LOCK;
/// Counter increment per structural write (the counter is bits 2..64).
const STEP: u64 = 1 << 2;
/// Optimistic attempts before a reader takes the writer lock.
pub const MAX_OPTIMISTIC: usize = 16;

/// Optimistic reads (`read`: lookups) that failed validation and restarted
/// (process-wide).
pub static OPTIMISTIC_RESTARTS: StatCounter = StatCounter::new();
/// Reads that gave up optimism and took the writer lock (process-wide).
pub static PESSIMISTIC_FALLBACKS: StatCounter = StatCounter::new();
/// Plans (`plan`: a writer's view of a node before its commit) that failed
/// validation and restarted, counted apart from reads so that the readers'
/// figures are their own (process-wide).
pub static PLAN_RESTARTS: StatCounter = StatCounter::new();
/// Plans that gave up optimism and took the writer lock (process-wide).
pub static PLAN_FALLBACKS: StatCounter = StatCounter::new();

/// The seqlock-version strategy over reclaimer `R` (the build's default
/// unless a model checker picks a precise one).
pub struct SeqlockGate<R: Reclaim = DefaultReclaim> {
    word: AtomicU64,
    plan: AtomicU64,
    payload: Payload,
    reclaim: PhantomData<fn() -> R>,
}

impl<R: Reclaim> std::fmt::Debug for SeqlockGate<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Relaxed: diagnostics only.
        let word = self.word.load(Ordering::Relaxed);
        f.debug_struct("SeqlockGate")
            .field("word", &word)
            .field("reclaim", &R::NAME)
            .finish_non_exhaustive()
    }
}

impl<R: Reclaim> SeqlockGate<R> {
    /// Takes the writer lock; returns the unlocked word it replaced.
    fn lock(&self) -> u64 {
        if mutant!(SeqlockUnexcludedWriters) {
            // Broken on purpose: no compare-and-swap, no exclusion.
            // Relaxed: what the mutant reads is only the word's value.
            return self.word.load(Ordering::Relaxed) & !LOCKS;
        }
        let mut backoff = Backoff::new();
        loop {
            // Relaxed: only a hint; the CAS below orders.
            let seen = self.word.load(Ordering::Relaxed);
            // Acquire: everything the previous writer did is visible to us.
            if seen & LOCKS == 0
                && self
                    .word
                    .compare_exchange_weak(
                        seen,
                        seen | APPEND_LOCK,
                        Ordering::Acquire,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            {
                return seen;
            }
            backoff.snooze();
        }
    }

    /// Marks the locked section structural before its first payload store.
    fn begin_structural(&self, unlocked: u64) {
        // Relaxed: ordered before the payload stores by the fence below.
        self.word.store(unlocked | LOCKS, Ordering::Relaxed);
        // Release: a reader that sees any later payload store and then fences
        // (Acquire) also sees the lock bit or the bumped counter.
        if !mutant!(NoWriterReleaseFence) {
            fence(Ordering::Release);
        }
    }

    /// Releases the writer lock, bumping the reader counter if structural.
    fn unlock(&self, unlocked: u64, structural: bool) {
        let next = if structural {
            unlocked + STEP
        } else {
            unlocked
        };
        // Release: publishes the section's stores to the next locker and to
        // readers that load the word with Acquire.
        self.word.store(next, Ordering::Release);
    }

    fn bump_plan(&self) {
        // Relaxed load: writers hold the lock. Release store: a plan that sees
        // the new value sees the payload stores made before it.
        let next = self.plan.load(Ordering::Relaxed) + 1;
        self.plan.store(next, Ordering::Release);
    }

    fn plan_matches(&self, version: Option<Version>) -> bool {
        // Relaxed: the caller holds the writer lock, the only writers' lock.
        version.is_none_or(|v| self.plan.load(Ordering::Relaxed) == v.0)
    }

    /// One optimistic attempt; `None` if it must be retried.
    fn optimistic<T>(&self, pin: &R::Guard, f: &mut impl FnMut(&View<'_, R>) -> T) -> Option<T> {
        // Acquire: pairs with a writer's Release unlock.
        let before = self.word.load(Ordering::Acquire);
        if before & STRUCT_LOCK != 0 {
            return None;
        }
        let result = f(&View::new(&self.payload, pin));
        // Acquire: pairs with a structural writer's Release fence (see above).
        if !mutant!(NoReaderAcquireFence) {
            fence(Ordering::Acquire);
        }
        // Relaxed: ordered by the fence.
        let after = self.word.load(Ordering::Relaxed);
        (before & !APPEND_LOCK == after & !APPEND_LOCK).then_some(result)
    }

    /// A validated read, optimistic first, pessimistic after too many
    /// restarts, counted in `restarts` and `fallbacks`.
    fn validated<T>(
        &self,
        pin: &R::Guard,
        mut f: impl FnMut(&View<'_, R>) -> T,
        mut before: impl FnMut() -> u64,
        (restarts, fallbacks): (&StatCounter, &StatCounter),
    ) -> (T, u64) {
        for _ in 0..MAX_OPTIMISTIC {
            let token = before();
            if let Some(result) = self.optimistic(pin, &mut f) {
                return (result, token);
            }
            restarts.bump();
            spin_loop();
        }
        fallbacks.bump();
        let unlocked = self.lock();
        let token = before();
        let result = f(&View::new(&self.payload, pin));
        self.unlock(unlocked, false);
        (result, token)
    }
}

// SAFETY: (1) every section except `read`/`plan` holds the writer lock
// (APPEND_LOCK), so writers exclude each other and shared sections exclude
// exclusive ones. (2) the plan version is compared under the writer lock and
// only grows. (3) every shape change and every successful append bumps it.
// (4) an optimistic read is returned only if the word did not change outside
// the append bit, which every non-monotone write changes; monotone writes are
// published so that either side is a complete state (module docs); the
// pessimistic fallback reads under the lock. (5) readers pin; replaced
// arrays are unpublished, then retired through `R`.
unsafe impl<R: Reclaim> ShapeGate for SeqlockGate<R> {
    const NAME: &'static str = "seqlock";
    const READ_PATH: crate::gate::ReadPath = crate::gate::ReadPath::Optimistic;
    type View<'a> = View<'a, R>;
    type Writer<'a> = Writer<'a, R>;
    type Reclaim = R;

    fn new(init: ShapeInit) -> Self {
        Self {
            word: AtomicU64::new(0),
            plan: AtomicU64::new(0),
            payload: Payload::new(init),
            reclaim: PhantomData,
        }
    }

    fn read<T>(&self, f: impl FnMut(&View<'_, R>) -> T) -> T {
        self.read_in(&R::pin(), f)
    }

    fn plan<T>(&self, f: impl FnMut(&View<'_, R>) -> T) -> (T, Version) {
        self.plan_in(&R::pin(), f)
    }

    #[inline]
    fn read_in<T>(&self, pin: &R::Guard, f: impl FnMut(&View<'_, R>) -> T) -> T {
        let counters = (&OPTIMISTIC_RESTARTS, &PESSIMISTIC_FALLBACKS);
        self.validated(pin, f, || 0, counters).0
    }

    fn plan_in<T>(&self, pin: &R::Guard, f: impl FnMut(&View<'_, R>) -> T) -> (T, Version) {
        // Acquire: a plan that sees a version sees the payload it covers.
        let counters = (&PLAN_RESTARTS, &PLAN_FALLBACKS);
        let before = || self.plan.load(Ordering::Acquire);
        let (result, version) = self.validated(pin, f, before, counters);
        (result, Version(version))
    }

    fn shared<T>(&self, version: Option<Version>, f: impl FnOnce() -> T) -> Result<T, Stale> {
        let unlocked = self.lock();
        let result = self.plan_matches(version).then(f).ok_or(Stale);
        self.unlock(unlocked, false);
        result
    }

    fn shared_commit<T>(
        &self,
        version: Option<Version>,
        f: impl FnOnce(&mut Writer<'_, R>) -> T,
    ) -> Result<T, Stale> {
        let pin = R::pin();
        let unlocked = self.lock();
        let result = self
            .plan_matches(version)
            .then(|| f(&mut Writer::new(&self.payload, &pin)))
            .ok_or(Stale);
        self.unlock(unlocked, false);
        result
    }

    fn exclusive_commit<T>(
        &self,
        version: Option<Version>,
        f: impl FnOnce(&mut Writer<'_, R>) -> Commit<T>,
    ) -> Result<T, Stale> {
        let pin = R::pin();
        let unlocked = self.lock();
        if !self.plan_matches(version) {
            self.unlock(unlocked, false);
            return Err(Stale);
        }
        self.begin_structural(unlocked);
        let commit = f(&mut Writer::new(&self.payload, &pin));
        if commit.shape_changed {
            self.bump_plan();
        }
        self.unlock(unlocked, !mutant!(SplitWithoutBump));
        Ok(commit.value)
    }

    fn try_append_at_tail(
        &self,
        slot: Slot,
        parent: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> Result<usize, AppendMiss> {
        let pin = R::pin();
        let unlocked = self.lock();
        let mut writer = Writer::<R>::new(&self.payload, &pin);
        if let Err(miss) = append_eligibility(&writer, slot, parent, blocks) {
            self.unlock(unlocked, false);
            return Err(miss);
        }
        let old_len = writer.len();
        let others_full = writer.others_full(slot);
        let structural = others_full && !mutant!(DemotingAppendWithoutBump);
        if structural {
            self.begin_structural(unlocked);
        }
        // `slot` is full (eligibility): with no other full slot the append
        // is just the push, and asking `append_demoting` would scan the full
        // words a second time.
        if others_full {
            append_demoting(&mut writer, slot, blocks);
        } else {
            writer.push_blocks(blocks);
        }
        if !mutant!(SeqlockAppendWithoutPlanBump) {
            self.bump_plan();
        }
        self.unlock(unlocked, structural);
        Ok(old_len)
    }

    fn footprint(&self) -> usize {
        let pin = R::pin();
        2 * std::mem::size_of::<AtomicU64>() + self.payload.footprint::<R>(&pin)
    }

    fn read_counters() -> crate::gate::ReadCounters {
        crate::gate::ReadCounters {
            retries: OPTIMISTIC_RESTARTS.get(),
            fallbacks: PESSIMISTIC_FALLBACKS.get(),
            retired_bytes: None,
        }
    }
}
