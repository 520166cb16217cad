//! A precise grace-period reclaimer for the model checkers, and a
//! quarantining allocator that makes a premature free observable without
//! touching freed memory.
//!
//! Why another reclaimer. The facade's checker reclaimer runs deferred work
//! only once *no* thread at all is pinned. That never frees early, but it
//! also protects readers that pinned *after* the retire, which a real epoch
//! scheme does not: crossbeam-epoch and seize may free an object as soon as
//! every thread pinned *before* its retire has unpinned. A gate that retires
//! an object while it is still reachable (before unlinking it) is only wrong
//! under the real rule, so the checker reclaimer cannot catch it.
//! [`GraceReclaim`] implements exactly the real rule:
//!
//! - `pin` registers the pin, then issues `fence(SeqCst)` (as crossbeam's
//!   pin does); `defer` issues `fence(SeqCst)` and records the pins active at
//!   that moment; a deferred function runs as soon as all of those have
//!   ended, at the end of the pin that ended last (eagerly, so the model sees
//!   the earliest free the rule allows). A writer that unlinks (Release
//!   store) and then retires is safe under this rule: a reader that pins
//!   after the retire fences after the writer's fence, so its loads see the
//!   unlink.
//! - `protect` records which pointer the current thread loaded under its pin
//!   and fails the model if that pointer was already freed.
//! - When deferred work frees memory, every freed block is checked against
//!   the pointers loaded by threads that are still pinned: one of them
//!   holding a freed block fails the model ("freed while a pinned reader
//!   holds it"), before that reader can touch it again.
//!
//! - A block a pinned thread loaded through `protect` that is freed *outside*
//!   the reclaimer (code that drops what it should have retired) fails the
//!   model at the next reclaimer call of any thread ("freed outside the
//!   reclaimer while a pinned thread holds it").
//!
//! Knowing what a deferred function frees needs the allocator: a test binary
//! installs [`QuarantineAlloc`] as its global allocator, and while deferred
//! work runs, every deallocation is held back (the block stays allocated,
//! recorded as freed) instead of returned to the system. Outside deferred
//! work, the allocator holds back only the blocks pinned threads loaded (the
//! reclaimer keeps that list, `quarantine::watch`), and records the free. Held blocks are
//! released at the end of each execution ([`end_execution`]), so an address
//! is never reused while a reader could still compare against it, and a
//! freed block is never actually accessed: the checks fail the model first.
//! A block freed twice (an object retired twice) is recorded and fails the
//! model too.
//!
//! The bookkeeping lives in thread-locals: loom and shuttle run every
//! modelled thread on the test's OS thread, one at a time, so the state is
//! shared by the modelled threads and invisible to the checker (it models
//! the reclaimer's specification, not code under test). Each execution must
//! call [`begin_execution`] first and [`end_execution`] after its threads
//! joined and its gates dropped.

use crate::property::Property;
use crate::violated;
use crtc_strategies::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
use crtc_strategies::sync::{spin_loop, thread, Arc};
use crtc_strategies::Reclaim;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};

/// The grace-period reclaimer (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct GraceReclaim;

/// Proof of a [`GraceReclaim`] pin.
#[derive(Debug)]
pub struct GraceGuard {
    id: u64,
}

type Deferred = Box<dyn FnOnce()>;

/// A modelled thread's identity (its id's debug form: the facade does not
/// name the checkers' `ThreadId` types).
type ThreadKey = String;

fn current_thread() -> ThreadKey {
    format!("{:?}", thread::current().id())
}

struct Pending {
    /// The pins that were active when the work was deferred.
    waits_for: Vec<u64>,
    work: Deferred,
}

#[derive(Default)]
struct State {
    next_pin: u64,
    /// Active pins: (pin id, modelled thread).
    active: Vec<(u64, ThreadKey)>,
    pending: Vec<Pending>,
    /// Pointers loaded through `protect`, by modelled thread.
    loaded: Vec<(ThreadKey, usize)>,
    /// Deferred functions run, and blocks they freed (this execution).
    ran: u64,
    freed: u64,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
    /// The grace clock of the running execution (see [`synchronize`]).
    static CLOCK: RefCell<Option<Arc<AtomicU64>>> = const { RefCell::new(None) };
    /// Blocks deferred work freed in the executions ended since the last
    /// [`take_freed`].
    static FREED_TOTAL: Cell<u64> = const { Cell::new(0) };
}

/// Orders everything before the last guard drop before what follows: a
/// read-modify-write on the execution's clock, which every guard drop and
/// every run of deferred work makes. The bookkeeping above is invisible to
/// the checker, so without the clock a deferred free would race the loads
/// the reader made before it unpinned; a real reclaimer orders them through
/// its own atomics (crossbeam's epoch and pin words).
fn synchronize() {
    let clock = CLOCK.with(|c| c.borrow().clone());
    if let Some(clock) = clock {
        // AcqRel: a read-modify-write reads the last value, so each one
        // synchronizes with every earlier one (unpin before free).
        clock.fetch_add(1, Ordering::AcqRel);
    }
}

fn with_state<T>(f: impl FnOnce(&mut State) -> T) -> T {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

// SAFETY: (1) `GraceGuard`'s field is private and only `pin` builds it;
// (2) deferred work waits for every pin active at `defer`; (3) `pin` and
// `defer` fence SeqCst (module docs); (4) `wait_for_pinned_threads` waits
// until no pin is active. A checker's specification of the contract, run
// only inside a model.
unsafe impl Reclaim for GraceReclaim {
    type Guard = GraceGuard;
    const NAME: &'static str = "grace";

    fn pin() -> GraceGuard {
        let me = current_thread();
        let id = with_state(|s| {
            s.next_pin += 1;
            s.active.push((s.next_pin, me));
            s.next_pin
        });
        // SeqCst: orders this pin's later loads after every retire whose own
        // fence came first (see the module docs).
        fence(Ordering::SeqCst);
        GraceGuard { id }
    }

    fn defer(_guard: &GraceGuard, f: impl FnOnce() + Send + 'static) {
        // SeqCst: a pin that registers after this point fences after it.
        fence(Ordering::SeqCst);
        with_state(|s| {
            let waits_for = s.active.iter().map(|(id, _)| *id).collect();
            s.pending.push(Pending {
                waits_for,
                work: Box::new(f),
            });
        });
    }

    fn flush(_guard: &GraceGuard) {
        run_ready();
    }

    fn protect<T>(ptr: &AtomicPtr<T>) -> *mut T {
        check_direct_frees();
        // Acquire: pairs with the Release publication of the pointee.
        let loaded = ptr.load(Ordering::Acquire);
        let address = loaded as usize;
        if quarantine::holds(address) {
            violated!(
                Property::NoFreeWhileHeld,
                "grace reclaimer: a pinned reader loaded {address:#x}, which the \
                 reclaimer already freed (retired while still reachable?)"
            );
        }
        let me = current_thread();
        with_state(|s| {
            let entry = (me, address);
            if !s.loaded.contains(&entry) {
                s.loaded.push(entry);
                watch_loaded(s);
            }
        });
        loaded
    }

    fn collect() {
        run_ready();
    }

    fn wait_for_pinned_threads() {
        while with_state(|s| !s.active.is_empty()) {
            spin_loop();
        }
        run_ready();
    }
}

impl Drop for GraceGuard {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            check_direct_frees();
            synchronize();
        }
        let me = current_thread();
        with_state(|s| {
            s.active.retain(|(id, _)| *id != self.id);
            if !s.active.iter().any(|(_, t)| *t == me) {
                s.loaded.retain(|(t, _)| *t != me);
            }
            watch_loaded(s);
        });
        if !std::thread::panicking() {
            run_ready();
        }
    }
}

/// Tells the allocator which blocks pinned threads hold (every entry of
/// `loaded` belongs to a pinned thread: a thread's entries go when its last
/// pin ends).
fn watch_loaded(s: &State) {
    quarantine::watch(s.loaded.iter().map(|&(_, address)| address));
}

/// Fails the model if a block a pinned thread loaded was freed outside the
/// reclaimer since the last check.
fn check_direct_frees() {
    if let Some(address) = quarantine::take_direct_free() {
        violated!(
            Property::NoFreeWhileHeld,
            "grace reclaimer: {address:#x} was freed outside the reclaimer while a \
             pinned thread held it (dropped instead of retired?)"
        );
    }
}

/// Runs every deferred function whose pins have all ended, and checks what
/// they freed against the pointers still-pinned threads loaded.
fn run_ready() {
    check_direct_frees();
    loop {
        let ready: Vec<Pending> = with_state(|s| {
            let active: Vec<u64> = s.active.iter().map(|(id, _)| *id).collect();
            let (ready, waiting) = std::mem::take(&mut s.pending)
                .into_iter()
                .partition(|p| p.waits_for.iter().all(|id| !active.contains(id)));
            s.pending = waiting;
            ready
        });
        if ready.is_empty() {
            return;
        }
        synchronize();
        for pending in ready {
            let freed = quarantine::capture(pending.work);
            let held: Option<(ThreadKey, usize)> = with_state(|s| {
                s.ran += 1;
                s.freed += freed.len() as u64;
                let pinned = |t: &ThreadKey| s.active.iter().any(|(_, a)| a == t);
                s.loaded
                    .iter()
                    .find(|(t, address)| pinned(t) && freed.contains(address))
                    .cloned()
            });
            if let Some((reader, address)) = held {
                violated!(
                    Property::NoFreeWhileHeld,
                    "grace reclaimer: freed {address:#x} while the pinned thread \
                     {reader} still holds it (retired while still reachable?)"
                );
            }
            if quarantine::take_double_free() {
                violated!(
                    Property::NoFreeWhileHeld,
                    "grace reclaimer: a block was freed twice (retired twice?)"
                );
            }
        }
    }
}

/// Resets the reclaimer and the quarantine for a new execution. Work left
/// over from an execution that failed is dropped unrun (leaked).
pub fn begin_execution() {
    let leftover = with_state(std::mem::take);
    leftover.pending.into_iter().for_each(std::mem::forget);
    // A clock left by a failed execution belongs to that execution's
    // checker state: leak it rather than touch it from this one.
    std::mem::forget(CLOCK.with(|c| c.replace(Some(Arc::new(AtomicU64::new(0))))));
    quarantine::watch(std::iter::empty());
    quarantine::take_direct_free();
    quarantine::release();
}

/// Ends an execution (every thread joined, every gate dropped): runs what is
/// still deferred, checks that no pin is left, releases the quarantine, and
/// returns `(deferred functions run, blocks they freed)`.
pub fn end_execution() -> (u64, u64) {
    run_ready();
    CLOCK.with(|c| c.borrow_mut().take());
    quarantine::watch(std::iter::empty());
    let (active, pending, ran, freed) =
        with_state(|s| (s.active.len(), s.pending.len(), s.ran, s.freed));
    assert_eq!(
        active, 0,
        "grace reclaimer: pins left at the end of the execution"
    );
    assert_eq!(
        pending, 0,
        "grace reclaimer: deferred work left at the end of the execution"
    );
    quarantine::release();
    FREED_TOTAL.with(|t| t.set(t.get() + freed));
    (ran, freed)
}

/// The blocks deferred work freed in the executions ended on this thread
/// since the last call: a model shows with it that its reclaimer really
/// freed memory (a reclaimer that never frees cannot reveal a premature
/// free).
pub fn take_freed() -> u64 {
    FREED_TOTAL.with(|t| t.replace(0))
}

/// Runs `f` as one whole execution, between [`begin_execution`] and
/// [`end_execution`] (a model's one-execution setup runs).
pub fn one_execution<T>(f: impl FnOnce() -> T) -> T {
    begin_execution();
    let value = f();
    end_execution();
    value
}

/// The blocks deferred work freed so far in the running execution: read at
/// a model's join, it counts the frees made while the model's threads ran.
pub fn freed_in_execution() -> u64 {
    with_state(|s| s.freed)
}

/// Whether the test binary installed [`QuarantineAlloc`].
pub fn quarantine_installed() -> bool {
    quarantine::installed()
}

/// The global allocator of test binaries that use [`GraceReclaim`]: the
/// system allocator, except that deallocations made while deferred work runs
/// are held back (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct QuarantineAlloc;

// SAFETY: every block comes from `System` with the caller's layout and goes
// back to `System` with the layout recorded for it, exactly once: either
// right away or, when held, by `quarantine::release`. Nothing here allocates
// or unwinds.
unsafe impl GlobalAlloc for QuarantineAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        quarantine::mark_installed();
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !quarantine::hold(ptr, layout) {
            // SAFETY: `ptr` was allocated by `System` with `layout` (above).
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        quarantine::mark_installed();
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Reallocation is never part of a deferred free; `System` moves or
        // grows the block and frees the old one itself.
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The quarantine's state: const-initialized thread-locals without
/// destructors, so the allocator can use them at any time without
/// allocating.
mod quarantine {
    use super::{Cell, Layout, RefCell, System};
    use std::alloc::GlobalAlloc;

    /// Most blocks held per execution; more are freed normally (and the
    /// overflow is reported by `capture`). A shuttle scenario (two writers'
    /// streams with clears, a worker's removal and sweeps) frees a few
    /// thousand blocks per execution.
    const CAPACITY: usize = 16384;

    /// Most blocks pinned threads may hold at once; more fail the model. A
    /// removal's sweep walks the whole tree of a shuttle scenario under one
    /// pin.
    const WATCH_CAPACITY: usize = 512;

    struct Watched {
        blocks: [usize; WATCH_CAPACITY],
        len: usize,
        /// The first watched block freed outside deferred work, if any.
        direct_free: Option<usize>,
    }

    struct Held {
        blocks: [(usize, usize, usize); CAPACITY],
        len: usize,
        overflow: bool,
        double_free: bool,
    }

    thread_local! {
        static INSTALLED: Cell<bool> = const { Cell::new(false) };
        static CAPTURING: Cell<bool> = const { Cell::new(false) };
        static WATCHED: RefCell<Watched> = const {
            RefCell::new(Watched {
                blocks: [0; WATCH_CAPACITY],
                len: 0,
                direct_free: None,
            })
        };
        static HELD: RefCell<Held> = const {
            RefCell::new(Held {
                blocks: [(0, 0, 0); CAPACITY],
                len: 0,
                overflow: false,
                double_free: false,
            })
        };
    }

    pub(super) fn mark_installed() {
        let _ = INSTALLED.try_with(|i| i.set(true));
    }

    pub(super) fn installed() -> bool {
        INSTALLED.with(Cell::get)
    }

    /// Sets the blocks pinned threads hold.
    pub(super) fn watch(addresses: impl Iterator<Item = usize>) {
        WATCHED.with(|w| {
            let mut watched = w.borrow_mut();
            watched.len = 0;
            for address in addresses {
                assert!(
                    watched.len < WATCH_CAPACITY,
                    "grace reclaimer: more than {WATCH_CAPACITY} blocks held by pinned threads"
                );
                let len = watched.len;
                watched.blocks[len] = address;
                watched.len += 1;
            }
        });
    }

    /// The watched block freed outside deferred work since the last call.
    pub(super) fn take_direct_free() -> Option<usize> {
        WATCHED.with(|w| w.borrow_mut().direct_free.take())
    }

    /// Records a free of a watched block outside deferred work; returns
    /// whether `address` is watched.
    fn note_direct_free(address: usize) -> bool {
        WATCHED
            .try_with(|w| {
                let Ok(mut watched) = w.try_borrow_mut() else {
                    return false;
                };
                let hit = watched.blocks[..watched.len].contains(&address);
                if hit && watched.direct_free.is_none() {
                    watched.direct_free = Some(address);
                }
                hit
            })
            .unwrap_or(false)
    }

    /// Holds `ptr` instead of freeing it if deferred work is running on
    /// this thread, or if a pinned thread holds it (then the free is
    /// recorded as a direct free); returns whether it did.
    pub(super) fn hold(ptr: *mut u8, layout: Layout) -> bool {
        let capturing = CAPTURING.try_with(Cell::get).unwrap_or(false);
        if !capturing && !note_direct_free(ptr as usize) {
            return false;
        }
        HELD.try_with(|h| {
            let Ok(mut held) = h.try_borrow_mut() else {
                return false;
            };
            let address = ptr as usize;
            if held.blocks[..held.len]
                .iter()
                .any(|&(a, _, _)| a == address)
            {
                // Already held: a second free of the same block. Keep the
                // single record (it is released once).
                held.double_free = true;
                return true;
            }
            if held.len == CAPACITY {
                held.overflow = true;
                return false;
            }
            let len = held.len;
            held.blocks[len] = (address, layout.size(), layout.align());
            held.len += 1;
            true
        })
        .unwrap_or(false)
    }

    /// Whether `address` is a held (freed) block.
    pub(super) fn holds(address: usize) -> bool {
        HELD.with(|h| {
            h.borrow().blocks[..h.borrow().len]
                .iter()
                .any(|&(a, _, _)| a == address)
        })
    }

    /// Runs `work` with deallocations held; returns the blocks it freed.
    pub(super) fn capture(work: Box<dyn FnOnce()>) -> Vec<usize> {
        let before = HELD.with(|h| h.borrow().len);
        let outer = CAPTURING.with(|c| c.replace(true));
        work();
        CAPTURING.with(|c| c.set(outer));
        let (freed, overflow) = HELD.with(|h| {
            let held = h.borrow();
            let freed = held.blocks[before.min(held.len)..held.len]
                .iter()
                .map(|&(a, _, _)| a)
                .collect::<Vec<_>>();
            (freed, held.overflow)
        });
        assert!(
            !overflow,
            "grace reclaimer: quarantine overflow ({CAPACITY} blocks)"
        );
        freed
    }

    /// Whether a block was freed twice since the last call.
    pub(super) fn take_double_free() -> bool {
        HELD.with(|h| std::mem::take(&mut h.borrow_mut().double_free))
    }

    /// Returns every held block to the system.
    pub(super) fn release() {
        let blocks: Vec<(usize, usize, usize)> = HELD.with(|h| {
            let mut held = h.borrow_mut();
            let blocks = held.blocks[..held.len].to_vec();
            held.len = 0;
            held.overflow = false;
            held.double_free = false;
            blocks
        });
        for (address, size, align) in blocks {
            // SAFETY: held blocks were allocated by `System` with this
            // layout (recorded when held) and are released exactly once:
            // the record was removed above.
            unsafe {
                System.dealloc(
                    address as *mut u8,
                    Layout::from_size_align_unchecked(size, align),
                )
            }
        }
    }
}
