//! `EpochGate<R>`: RCU snapshots read under a reclaimer pin, with in-place
//! decode appends into a shared append-only edge buffer.
//!
//! # Protocol
//!
//! A node's shape is an immutable snapshot (coverage, flags, edge length, a
//! shared handle to the edge buffer) behind one atomic pointer. Besides it
//! the gate keeps a writer mutex, a plan counter, and an exclusive-section
//! word `seq` (odd while an exclusive section runs). The mutex and the plan
//! counter, which only writers touch, sit on a cache line of their own: a
//! decode append takes the one and bumps the other, and beside the snapshot
//! pointer and `seq` those stores would take from every reader the line it
//! loads first.
//!
//! * **Readers** (`read`, `plan`) pin `R` (nested inside the tree's per-walk
//!   pin: a thread-local count bump for crossbeam and seize), load the
//!   snapshot with [`Reclaim::protect`] (Acquire, SeqCst for seize), choose a
//!   length (below), and run the closure on that view. They take no lock,
//!   write nothing shared, and never loop. The exceptions are an overlap
//!   with an exclusive section of the same node, detected by `seq` (below),
//!   and a snapshot replaced after in-place appends past its length (below):
//!   then the closure runs once more under the writer mutex, waiting for at
//!   most one section.
//! * **Writers** serialize on the mutex. A section drafts its changes
//!   ([`Writer`]): coverage and flags in a private copy, pairs in place past
//!   the buffer's published length (or in a fresh buffer when they do not
//!   fit, or after a truncation). At the end, a coverage, flag or buffer
//!   change publishes a new snapshot with one Release store and retires the
//!   old one through `R`; a pure append publishes only the buffer's length
//!   (Release), with no allocation and no retire.
//! * **Plans** carry the plan counter, bumped (Release, after the section's
//!   publications) by every shape change and every successful fast-path
//!   append, pure or not; a plan loads it (Acquire) before its view, and
//!   commits compare it under the mutex.
//!
//! # Which length a reader uses (the overcount argument)
//!
//! Consecutive snapshots share one buffer, and pure appends grow it while a
//! snapshot stays current. A reader holding an *older* snapshot in which
//! some rank B was still full must never use blocks appended after B was
//! demoted (or cut) — that would credit B with blocks it never held. So a
//! snapshot's own `len` is the only length its readers may trust, except
//! that a reader may follow the buffer's live length `L > len` if the
//! snapshot is *still current after `L` was read*: it loads `L` (Acquire),
//! then re-loads the gate's pointer, and uses `L` only if it is unchanged.
//!
//! Why that is sound: writers store the live length only under the mutex,
//! and a section that replaces the snapshot stores the new pointer *before*
//! it stores a new length (a demoting append publishes its snapshot first,
//! then `L`; growth and truncation move to a fresh buffer whose length is
//! set before its snapshot is published). If the `L` a reader read was
//! stored after snapshot `S` had been replaced, that replacement happens
//! before the store of `L` (same section, or an earlier one through the
//! mutex), which the reader's Acquire load synchronizes with; by coherence
//! its re-load then cannot return `S` (a retired snapshot is never
//! republished, and its address is not reused while the reader is pinned).
//! So when the re-load returns `S`, every append up to `L` ran while `S` was
//! current, and appends that leave the snapshot current are pure: the
//! appender was `S`'s only full slot and no coverage changed, so `(S, L)`
//! is a state the node was in. If `L = S.len`, no pair was appended past
//! `S` when `L` was read, so `(S, S.len)` was current then. Otherwise (`L >
//! S.len` and `S` replaced) the reader re-runs under the mutex: `(S, S.len)`
//! was a state of the node, but it can be older than one the caller already
//! saw — its own pure append past `S.len`, then a coverage raise by another
//! lane that replaced `S` without a plan bump — and a plan made on it misses
//! the caller's own block: a valid store whose parent is that block is
//! rejected, and the caller's coverage is undercounted. Pairs below any
//! published length are never rewritten (truncation and growth build fresh
//! buffers), so every view reads stable pairs.
//!
//! # Why exclusive sections still have a word readers check
//!
//! Children belong to the tree and are published separately from the
//! snapshot, but a reader's closure reads both (`find_matches` looks up the
//! next child; a plan looks up the child to descend into). After a split,
//! the old, longer edge combined with the new child map (suffix and tail
//! children, keyed for the shorter edge) is a state the node never had, and
//! with repeated local hashes it can credit blocks nobody holds. No ordering
//! of two independent publications lets a lock-free reader read both
//! atomically, so exclusive sections (the only ones that may change the
//! child map in ways an old snapshot disagrees with: split, first child,
//! children clear) open by making `seq` odd and issuing a Release fence, and
//! close with an even `seq` (Release). A reader loads `seq` (Acquire), runs
//! the closure, fences (Acquire) and re-loads `seq`: if any store of the
//! section was visible to the closure, the fences synchronize and the
//! re-load sees the change. Shared sections (child inserts under an internal
//! node, coverage raises) and fast-path appends do not touch `seq`: a child
//! added under an unchanged edge, or coverage that only grows, is consistent
//! with any snapshot a reader holds. Decode storms therefore send readers
//! to the mutex only in the rare case of the length rule above (a snapshot
//! replaced by growth or a demotion between two of the reader's loads).
//!
//! # Memory
//!
//! Every replaced snapshot is retired through `R` after it is unlinked and
//! freed once every reader pinned before has left. Buffers are held by the
//! snapshots (`Arc`): a replaced buffer is freed when the last retired
//! snapshot holding it is reclaimed, so it outlives every reader that could
//! reach it without a second retire. Readers never touch reference counts.
//! [`retired_bytes`] reports what is retired and not yet freed.

mod edge;
mod snapshot;
mod writer;

pub use edge::{BUFFER_ALLOCATIONS, LIVE_BUFFERS, RETIRED_BUFFER_BYTES};
pub use snapshot::{View, LIVE_SNAPSHOTS, SNAPSHOT_ALLOCATIONS};
pub use writer::Writer;

use crate::gate::{append_eligibility, AppendMiss, Commit, ShapeGate, Stale, Version};
use crate::hash::{BlockPair, ExternalSequenceBlockHash, Slot};
use crate::reclaim::{DefaultReclaim, Reclaim};
use crate::shape::{append_demoting, ShapeInit, ShapeRead, ShapeWrite};
use crate::stats::{StatCounter, StatGauge};
use crate::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
use crate::sync::{Mutex, MutexGuard};
use snapshot::Snapshot;
use std::marker::PhantomData;
use writer::Publish;

/// Bytes of replaced snapshots not yet freed (process-wide).
pub static RETIRED_SNAPSHOT_BYTES: StatGauge = StatGauge::new();
/// Reads (`read`: lookups) that overlapped an exclusive section, or met a
/// replaced snapshot's length, and re-ran under the mutex (process-wide).
pub static READ_FALLBACKS: StatCounter = StatCounter::new();
/// The same for plans (a writer's view of a node before its commit),
/// counted apart so that the readers' figures are their own (process-wide).
pub static PLAN_FALLBACKS: StatCounter = StatCounter::new();

/// Bytes retired through the reclaimer and not yet freed, snapshots and
/// buffers, across every epoch gate of the process.
pub fn retired_bytes() -> i64 {
    RETIRED_SNAPSHOT_BYTES.get() + RETIRED_BUFFER_BYTES.get()
}

/// The epoch / RCU strategy over reclaimer `R`.
pub struct EpochGate<R: Reclaim> {
    snap: AtomicPtr<Snapshot>,
    seq: AtomicU64,
    writers: WriterWords,
    reclaim: PhantomData<fn() -> R>,
}

/// The words only writers touch, on a cache line of their own (module docs).
/// In `mixed_1r1w` on a 2-core Intel Xeon VM, four interleaved runs of each
/// layout, the epoch-crossbeam reader's p99 under a decode storm over its p99
/// alone went from a median of 1.67 to 1.41 (commit message of the change).
#[repr(align(64))]
struct WriterWords {
    plan: AtomicU64,
    lock: Mutex<()>,
}

/// The epoch gate over the build's default reclaimer (crossbeam-epoch, or
/// the checker reclaimer under loom and shuttle).
pub type DefaultEpochGate = EpochGate<DefaultReclaim>;

/// The epoch gate over crossbeam-epoch (the suites' and benches' name).
pub type CrossbeamEpochGate = EpochGate<crate::reclaim::EpochReclaim>;

/// The epoch gate over seize.
#[cfg(feature = "seize")]
pub type SeizeEpochGate = EpochGate<crate::reclaim::SeizeReclaim>;

impl<R: Reclaim> std::fmt::Debug for EpochGate<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Relaxed: diagnostics only.
        f.debug_struct("EpochGate")
            .field("reclaim", &R::NAME)
            .field("seq", &self.seq.load(Ordering::Relaxed))
            .field("plan", &self.writers.plan.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// A replaced snapshot on its way through the reclaimer: the pointer the
/// gate published (from `Box::into_raw`), never one made from a borrow.
struct Retired {
    snap: *mut Snapshot,
    bytes: usize,
}

// SAFETY: the pointer is the unique owner of a `Box<Snapshot>` (unlinked
// before it was retired), and `Snapshot` is `Send`.
unsafe impl Send for Retired {}

impl Retired {
    /// Frees the snapshot.
    ///
    /// # Safety
    /// `snap` came from `Box::into_raw` and was published by this gate; it
    /// was unpublished before it was retired, and this runs once, after
    /// every reader that could have loaded it has unpinned.
    unsafe fn free(self) {
        #[cfg(crtc_checker)]
        crate::checker_state::freed(self.snap as usize);
        RETIRED_SNAPSHOT_BYTES.sub(self.bytes);
        // SAFETY: the caller's contract.
        drop(unsafe { Box::from_raw(self.snap) });
    }
}

/// Whether the active mutant publishes this snapshot Relaxed: every
/// snapshot, a coverage-only one, or a demoting append's, the last two only
/// over the shared buffer.
#[cfg(crtc_checker)]
fn relaxed_publish_mutant(shared_buffer: bool, appended: bool) -> bool {
    use crate::mutants::Mutant;
    match Mutant::active() {
        Mutant::EpochRelaxedPublish => true,
        Mutant::EpochRelaxedCoverPublish => shared_buffer && !appended,
        Mutant::EpochRelaxedDemotePublish => shared_buffer && appended,
        _ => false,
    }
}

/// No mutant outside the checkers.
#[cfg(not(crtc_checker))]
#[inline]
fn relaxed_publish_mutant(_shared_buffer: bool, _appended: bool) -> bool {
    false
}

/// Makes `seq` even again when an exclusive section ends, even by unwinding.
struct Exclusive<'a> {
    seq: &'a AtomicU64,
    opened: u64,
}

impl<'a> Exclusive<'a> {
    fn open(seq: &'a AtomicU64) -> Self {
        // Relaxed: only mutex holders store `seq`.
        let opened = seq.load(Ordering::Relaxed);
        // Relaxed: ordered before the section's stores by the fence below.
        seq.store(opened + 1, Ordering::Relaxed);
        // Release: a reader whose closure sees any later store of this
        // section, and then fences (Acquire), sees the odd value too.
        fence(Ordering::Release);
        Self { seq, opened }
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        // Release: a reader that loads the even value sees the section's
        // stores. (Mutant `EpochRelaxedSectionClose`: Relaxed, so a reader
        // may load the even value with an older snapshot and the section's
        // child map; `EpochRetireInRelaxedSection`: Relaxed after a retire
        // inside the section.)
        let retired_inside = mutant!(EpochRetireInRelaxedSection);
        let order = if mutant!(EpochRelaxedSectionClose) || retired_inside {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        self.seq.store(self.opened + 2, order);
    }
}

impl<R: Reclaim> EpochGate<R> {
    /// The current snapshot, valid while `guard` lives.
    #[inline]
    fn current<'g>(&'g self, _guard: &'g R::Guard) -> &'g Snapshot {
        let ptr = R::protect(&self.snap);
        // SAFETY: the pointer is always a live snapshot; a replaced one is
        // retired through `R` after it is unlinked, so it outlives `_guard`.
        unsafe { &*ptr }
    }

    /// The current snapshot for the mutex holder.
    ///
    /// # Safety
    /// `_lock` guards this gate's own mutex (`self.writers.lock`): only its holder
    /// replaces and retires the snapshot, so the snapshot outlives the lock
    /// without a pin.
    unsafe fn locked<'l>(&'l self, _lock: &'l MutexGuard<'_, ()>) -> &'l Snapshot {
        // Relaxed: only mutex holders store the pointer; the mutex orders them.
        let ptr = self.snap.load(Ordering::Relaxed);
        // SAFETY: the caller holds the gate's mutex, and its holder retires
        // the snapshot only after its final use (`write` and
        // `try_append_at_tail` retire after `publish` returned).
        unsafe { &*ptr }
    }

    /// The length a reader of `snap` may use (module docs), or `None` when
    /// `snap` was replaced after pairs were appended past its own length:
    /// then `(snap, snap.len)` may be older than a state the caller already
    /// observed (its own earlier append, say), so the read goes to the
    /// mutex instead.
    #[inline]
    fn reader_len(&self, snap: &Snapshot) -> Option<usize> {
        let live = snap.edge.live();
        let own = snap.shape().len;
        if live <= own {
            return Some(own);
        }
        if mutant!(EpochUnvalidatedLiveLength) {
            return Some(live);
        }
        // Relaxed: a comparison only; the Acquire load of `live` orders it,
        // and coherence makes a replaced snapshot fail it (module docs).
        let still_current = std::ptr::eq(self.snap.load(Ordering::Relaxed), snap);
        if !still_current && mutant!(EpochReadsReplacedSnapshotLength) {
            return Some(own);
        }
        still_current.then_some(live)
    }

    /// Runs `f` on a consistent view: lock-free unless an exclusive section
    /// overlapped, then once more under the mutex (counted in `fallbacks`).
    fn validated<T>(
        &self,
        guard: &R::Guard,
        mut f: impl FnMut(&View<'_>) -> T,
        fallbacks: &StatCounter,
    ) -> T {
        // Acquire: pairs with the Release store that closes a section.
        let seq = self.seq.load(Ordering::Acquire);
        let snap = self.current(guard);
        if let (0, Some(len)) = (seq & 1, self.reader_len(snap)) {
            let result = f(&View::new(&snap.edge, len, &snap.shape().cover));
            // Acquire: pairs with the Release fence that opens a section.
            fence(Ordering::Acquire);
            // Relaxed: ordered by the fence above.
            if self.seq.load(Ordering::Relaxed) == seq {
                return result;
            }
        }
        fallbacks.bump();
        let lock = self.writers.lock.lock();
        // SAFETY: `lock` guards `self.writers.lock`.
        let snap = unsafe { self.locked(&lock) };
        let shape = snap.shape();
        let len = snap.edge.live_locked().max(shape.len);
        f(&View::new(&snap.edge, len, &shape.cover))
    }

    /// The mutex writers serialize on: the node's own. (Mutant: a private
    /// one in `unshared`, so writers exclude nobody.)
    #[inline]
    fn writer_mutex<'m>(&'m self, unshared: &'m mut Option<Mutex<()>>) -> &'m Mutex<()> {
        if mutant!(EpochUnexcludedWriters) {
            return unshared.insert(Mutex::new(()));
        }
        &self.writers.lock
    }

    fn plan_matches(&self, version: Option<Version>) -> bool {
        // Relaxed: the caller holds the mutex, which orders every bump.
        version.is_none_or(|v| self.writers.plan.load(Ordering::Relaxed) == v.0)
    }

    fn bump_plan(&self) {
        // Relaxed load: mutex holders only. Release store: a plan that sees
        // the new value sees the section's publications.
        let next = self.writers.plan.load(Ordering::Relaxed) + 1;
        self.writers.plan.store(next, Ordering::Release);
    }

    /// Publishes what a finished writer drafted, in the order the module
    /// docs require: snapshot pointer, then the shared buffer's length.
    /// Returns the replaced snapshot for the caller to retire with
    /// [`Self::retire`] once nothing borrows it: a reclaimer may free it
    /// inside the retire (seize does when no other thread is active), and
    /// `cur` stays borrowed until this call returns.
    #[must_use]
    fn publish(&self, cur: &Snapshot, publish: Publish) -> Option<Retired> {
        let Publish::Snapshot {
            next,
            length,
            replaced_buffer,
        } = publish
        else {
            if let Publish::Length(len) = publish {
                cur.edge.publish(len);
            }
            return None;
        };
        // Relaxed: only mutex holders store the pointer. The raw pointer
        // (not `cur`, a shared borrow) is what may free the box: it carries
        // the provenance of `Box::into_raw`.
        let raw = self.snap.load(Ordering::Relaxed);
        debug_assert!(std::ptr::eq(raw, cur), "the mutex holder's snapshot");
        let mut old = Some(Retired {
            snap: raw,
            bytes: cur.bytes(),
        });
        if mutant!(EpochRetireBeforeUnlink) {
            // SAFETY: violated on purpose (a negative control for the
            // checkers): the snapshot is still the published one.
            unsafe { Self::retire(old.take()) };
        }
        // Release: a reader that loads the new snapshot sees its coverage
        // and every pair below its length. (Mutants: Relaxed, for every
        // snapshot, for a coverage-only change, or for a demoting append
        // into the shared buffer.)
        let order = if relaxed_publish_mutant(!replaced_buffer, length.is_some()) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        self.snap.store(Box::into_raw(next), order);
        if replaced_buffer {
            cur.edge.mark_retired();
        }
        if let Some(len) = length {
            cur.edge.publish(len);
        }
        old
    }

    /// Retires a snapshot `publish` replaced.
    ///
    /// # Safety
    /// `old` came from `publish`, which unpublished it; nothing borrows it
    /// any more; it is retired once.
    unsafe fn retire(old: Option<Retired>) {
        let Some(old) = old else { return };
        // Under the model checkers a second retire of one snapshot (writers
        // not excluded, the mutant `EpochUnexcludedWriters`) panics here,
        // before it could be freed twice.
        #[cfg(crtc_checker)]
        crate::checker_state::retired(old.snap as usize);
        RETIRED_SNAPSHOT_BYTES.add(old.bytes);
        // SAFETY: the caller's contract, and `R` runs this only after every
        // reader that could have loaded the snapshot has unpinned.
        R::defer(&R::pin(), move || unsafe { old.free() });
    }

    /// A writer section: validate, draft with `f`, publish, bump the plan
    /// counter if `f` reports a shape change.
    fn write<T>(
        &self,
        version: Option<Version>,
        exclusive: bool,
        f: impl FnOnce(&mut Writer<'_>) -> (T, bool),
    ) -> Result<T, Stale> {
        let mut unshared = None;
        let lock = self.writer_mutex(&mut unshared).lock();
        if !self.plan_matches(version) {
            return Err(Stale);
        }
        let section = exclusive.then(|| Exclusive::open(&self.seq));
        // SAFETY: `lock` guards `self.writers.lock` (but under the mutant
        // `EpochUnexcludedWriters`, broken on purpose).
        let cur = unsafe { self.locked(&lock) };
        let mut writer = Writer::new(cur);
        let (value, shape_changed) = f(&mut writer);
        let mut replaced = self.publish(cur, writer.finish());
        // The section ends with its last store a reader can see: the retire
        // below is the reclaimer's business, and a reclaimer that fences
        // there (crossbeam's full bag, the checkers' grace reclaimer) would
        // otherwise order readers after the section in `seq`'s place.
        // (Mutant `EpochRetireInRelaxedSection`: the retire inside the
        // section, which then closes Relaxed.)
        let inside = mutant!(EpochRetireInRelaxedSection);
        if inside {
            // SAFETY: as below.
            unsafe { Self::retire(replaced.take()) };
        }
        drop(section);
        // SAFETY: `publish` unpublished it, and `cur` is not used again.
        unsafe { Self::retire(replaced) };
        if shape_changed {
            self.bump_plan();
        }
        Ok(value)
    }
}

// SAFETY: (1) every section but `read`/`plan` holds the mutex; `read` and
// `plan` run lock-free only when no exclusive section overlapped them
// (`seq`), else under the mutex. (2) the plan counter is compared under the
// mutex and only grows. (3) every reported shape change and every successful
// fast-path append bumps it. (4) a view is one immutable snapshot with a
// length that state had (module docs), or is read under the mutex.
// (5) snapshots are retired through `R` after they are unlinked; buffers
// die with the last snapshot holding them.
unsafe impl<R: Reclaim> ShapeGate for EpochGate<R> {
    const NAME: &'static str = R::EPOCH_GATE_NAME;
    const READ_PATH: crate::gate::ReadPath = crate::gate::ReadPath::Snapshot;
    type View<'a> = View<'a>;
    type Writer<'a> = Writer<'a>;
    type Reclaim = R;

    fn new(init: ShapeInit) -> Self {
        let snap = Box::new(Snapshot::from_init(init));
        Self {
            snap: AtomicPtr::new(Box::into_raw(snap)),
            seq: AtomicU64::new(0),
            writers: WriterWords {
                plan: AtomicU64::new(0),
                lock: Mutex::new(()),
            },
            reclaim: PhantomData,
        }
    }

    fn read<T>(&self, f: impl FnMut(&View<'_>) -> T) -> T {
        self.read_in(&R::pin(), f)
    }

    fn plan<T>(&self, f: impl FnMut(&View<'_>) -> T) -> (T, Version) {
        self.plan_in(&R::pin(), f)
    }

    #[inline]
    fn read_in<T>(&self, guard: &R::Guard, f: impl FnMut(&View<'_>) -> T) -> T {
        self.validated(guard, f, &READ_FALLBACKS)
    }

    fn plan_in<T>(&self, guard: &R::Guard, f: impl FnMut(&View<'_>) -> T) -> (T, Version) {
        // Acquire: a plan that sees a version sees the state it covers.
        let version = Version(self.writers.plan.load(Ordering::Acquire));
        (self.validated(guard, f, &PLAN_FALLBACKS), version)
    }

    fn shared<T>(&self, version: Option<Version>, f: impl FnOnce() -> T) -> Result<T, Stale> {
        let _lock = self.writers.lock.lock();
        self.plan_matches(version).then(f).ok_or(Stale)
    }

    fn shared_commit<T>(
        &self,
        version: Option<Version>,
        f: impl FnOnce(&mut Writer<'_>) -> T,
    ) -> Result<T, Stale> {
        self.write(version, false, |w| (f(w), false))
    }

    fn exclusive_commit<T>(
        &self,
        version: Option<Version>,
        f: impl FnOnce(&mut Writer<'_>) -> Commit<T>,
    ) -> Result<T, Stale> {
        self.write(version, true, |w| {
            let commit = f(w);
            (commit.value, commit.shape_changed)
        })
    }

    fn try_append_at_tail(
        &self,
        slot: Slot,
        parent: ExternalSequenceBlockHash,
        blocks: &[BlockPair],
    ) -> Result<usize, AppendMiss> {
        let mut unshared = None;
        let lock = self.writer_mutex(&mut unshared).lock();
        // SAFETY: `lock` guards `self.writers.lock` (but under the mutant
        // `EpochUnexcludedWriters`, broken on purpose).
        let cur = unsafe { self.locked(&lock) };
        let mut writer = Writer::new(cur);
        append_eligibility(&writer, slot, parent, blocks)?;
        let old_len = writer.len();
        if writer.others_full(slot) {
            append_demoting(&mut writer, slot, blocks);
        } else {
            writer.push_blocks(blocks);
        }
        let replaced = self.publish(cur, writer.finish());
        // SAFETY: `publish` unpublished it, and `cur` is not used again.
        unsafe { Self::retire(replaced) };
        if !mutant!(EpochAppendWithoutPlanBump) {
            self.bump_plan();
        }
        Ok(old_len)
    }

    fn footprint(&self) -> usize {
        let guard = R::pin();
        let snap = self.current(&guard);
        std::mem::size_of::<Self>() + snap.bytes() + snap.edge.bytes()
    }

    /// Readers never retry; they fall back to the mutex (`READ_FALLBACKS`).
    /// Both epoch gates share the counters and the retired bytes.
    fn read_counters() -> crate::gate::ReadCounters {
        crate::gate::ReadCounters {
            retries: 0,
            fallbacks: READ_FALLBACKS.get(),
            retired_bytes: Some(retired_bytes()),
        }
    }
}

impl<R: Reclaim> Drop for EpochGate<R> {
    fn drop(&mut self) {
        // Relaxed: `&mut self` proves no other thread uses the gate.
        let ptr = self.snap.load(Ordering::Relaxed);
        // SAFETY: the current snapshot is owned by the gate alone (replaced
        // ones were retired), and a dropped node is unreachable by readers.
        let snap = unsafe { Box::from_raw(ptr) };
        // The buffer may outlive the gate in retired snapshots; count it as
        // retired until the last of them is reclaimed.
        snap.edge.mark_retired();
    }
}

#[cfg(all(test, not(crtc_checker)))]
mod tests;
