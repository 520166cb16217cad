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
//! - `defer` records the pins active at that moment; a deferred function
//!   runs as soon as all of those have ended, at the end of the pin that
//!   ended last (eagerly, so the model sees the earliest free the rule
//!   allows, never later than crossbeam's two epoch advances).
//! - Threads are ordered only as crossbeam-epoch orders them, through
//!   modelled atomics, and by nothing else: a thread's outermost `pin`
//!   issues `fence(SeqCst)` (crossbeam's pin: a Relaxed store of its local
//!   epoch, which orders nothing, then that fence); its outermost unpin
//!   stores "pin n ended" into its participant word with Release (crossbeam's
//!   unpin); `defer` issues `fence(SeqCst)` (crossbeam's bag push, as if
//!   every bag held one function). In bag mode (`CRTC_GRACE_BAG=N`, `N > 1`;
//!   module [`bag`]) `defer` only gathers the function, and the fence comes
//!   when the thread's bag is pushed (full, flushed, waited on, or the
//!   thread ended), where crossbeam's comes; the pins recorded are those
//!   active at the push, and `wait_for_pinned_threads` pushes (a fence)
//!   before it reads them. Deferred
//!   work runs only once the running thread has loaded the word of every
//!   other thread whose pin it waits for and seen that pin ended, as
//!   crossbeam's `try_advance` reads the participants (Relaxed, then an
//!   Acquire fence) before it advances. The model's unpin and read are
//!   read-modify-writes (a Release swap, an Acquire add of 0): they order
//!   exactly what crossbeam's store, load and fence order when the read
//!   sees the unpin (a Release RMW acquires nothing, and only the owner
//!   changes the word's value), but a read-modify-write always reads the
//!   latest value, so work runs as early as the rule allows and loom
//!   explores no stale reads of the words (a stale read would only delay a
//!   free).
//!   The deferring thread's own pin is among those waited for, so its
//!   unpin orders the defer before the run, the edge crossbeam's garbage
//!   queue gives. A writer that unlinks (Release store) and then retires is
//!   safe under this rule: a reader that pins after the retire fences after
//!   the writer's fence, so its loads see the unlink. What this does not
//!   model: seize's own protocol (its guards are modelled by this
//!   crossbeam-shaped one; the gates' `protect` for seize is SeqCst,
//!   stronger), and crossbeam's global epoch (the rule above frees no later
//!   than its two advances).
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
//! model too. Every freed block but one a pinned thread holds (which the
//! direct-free check reports, tagged, at the next reclaimer call) is filled
//! with a poison pattern, so a stale read the checks above do not see (an
//! anchor's node reached through the anchor map, a buffer through a
//! snapshot's `Arc`: pointers neither `protect`ed nor reported through
//! `borrowed`) reads garbage instead of the
//! object's last value: it fails the run (a checker's own panic on a
//! poisoned modelled object, a poisoned pointer followed, a property
//! violated), though not under a property tag of its own, so it is no
//! mutant's catch. In reuse mode (`CRTC_GRACE_REUSE=1`) a block deferred work
//! freed goes back to the system as soon as the free's checks passed (its
//! grace period is over), so later allocations of the same execution may
//! get its address again (a pointer comparison then meets a reused
//! address); until it is handed out again, a pinned load of it still fails
//! the model.
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
use std::cell::{Cell, RefCell};

pub mod bag;
mod quarantine;
pub use quarantine::QuarantineAlloc;

/// The grace-period reclaimer (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct GraceReclaim;

/// Proof of a [`GraceReclaim`] pin.
#[derive(Debug)]
pub struct GraceGuard {
    id: u64,
    /// The participant that pinned (the guard may drop on another thread).
    participant: usize,
}

type Deferred = Box<dyn FnOnce()>;

/// A modelled thread's identity (its id's debug form: the facade does not
/// name the checkers' `ThreadId` types).
type ThreadKey = String;

fn current_thread() -> ThreadKey {
    format!("{:?}", thread::current().id())
}

/// Most modelled threads that may pin in one execution.
const PARTICIPANTS: usize = 8;

/// The collector's modelled words (module docs): what orders threads.
struct Words {
    /// Per participant: the number of its last outermost pin that ended.
    locals: [AtomicU64; PARTICIPANTS],
    /// Bag mode: the global queue's word, bumped by every bag push and read
    /// before work from a pushed bag runs (module docs of `bag`).
    queue: AtomicU64,
}

/// A modelled thread that pinned: its word's index is its place in
/// `State::participants`.
struct Participant {
    thread: ThreadKey,
    /// Guards alive (pins nest).
    depth: u32,
    /// The number of its last outermost pin.
    pin: u64,
}

struct Pending {
    /// The pins that were active when the work was deferred (in bag mode:
    /// when its bag was pushed).
    waits_for: Vec<u64>,
    /// Their participants and outermost pin numbers: the running thread
    /// must see each of those pins end in its word.
    observe: Vec<(usize, u64)>,
    /// Whether it came through a pushed bag: the running thread reads the
    /// queue word first.
    queued: bool,
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
    participants: Vec<Participant>,
    /// Bag mode: each modelled thread's bag of deferred work not pushed yet.
    bags: Vec<(ThreadKey, Vec<Deferred>)>,
}

impl State {
    /// The participant index of `thread`, registered on its first pin.
    fn participant(&mut self, thread: &ThreadKey) -> usize {
        if let Some(index) = self.participants.iter().position(|p| p.thread == *thread) {
            return index;
        }
        assert!(
            self.participants.len() < PARTICIPANTS,
            "grace reclaimer: more than {PARTICIPANTS} pinning threads"
        );
        self.participants.push(Participant {
            thread: thread.clone(),
            depth: 0,
            pin: 0,
        });
        self.participants.len() - 1
    }

    /// `work` waiting for every pin active now (`queued`: from a pushed
    /// bag).
    fn record(&self, work: Deferred, queued: bool) -> Pending {
        Pending {
            waits_for: self.active.iter().map(|(id, _)| *id).collect(),
            observe: self.pinned_participants(),
            queued,
            work,
        }
    }

    /// The outermost pins active now, as (participant, pin number).
    fn pinned_participants(&self) -> Vec<(usize, u64)> {
        (self.participants.iter().enumerate())
            .filter(|(_, p)| p.depth > 0)
            .map(|(index, p)| (index, p.pin))
            .collect()
    }
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
    /// The collector words of the running execution.
    static WORDS: RefCell<Option<Arc<Words>>> = const { RefCell::new(None) };
    /// Whether the running execution hands freed blocks out again.
    static REUSE: Cell<bool> = const { Cell::new(false) };
    /// Blocks deferred work freed in the executions ended since the last
    /// [`take_freed`].
    static FREED_TOTAL: Cell<u64> = const { Cell::new(0) };
    /// Of those, the blocks freed before their execution's end (before
    /// [`end_execution`] pushed and ran what was left), in executions where
    /// more than one modelled thread pinned.
    static FREED_BEFORE_END: Cell<u64> = const { Cell::new(0) };
}

fn words() -> Option<Arc<Words>> {
    WORDS.with(|w| w.borrow().clone())
}

fn with_state<T>(f: impl FnOnce(&mut State) -> T) -> T {
    STATE.with(|s| f(&mut s.borrow_mut()))
}

// SAFETY: (1) `GraceGuard`'s field is private and only `pin` builds it;
// (2) deferred work waits for every pin active at `defer` (in bag mode at
// the later push, so for those too); (3) an outermost `pin` and every
// `defer` fence SeqCst, or in bag mode every push, before which no work of
// the bag runs (module docs); (4)
// `wait_for_pinned_threads` waits until every pin active at the call is
// seen ended. A checker's specification of the contract, run
// only inside a model.
unsafe impl Reclaim for GraceReclaim {
    type Guard = GraceGuard;
    const NAME: &'static str = "grace";

    fn pin() -> GraceGuard {
        let me = current_thread();
        let (id, participant, outermost) = with_state(|s| {
            s.next_pin += 1;
            s.active.push((s.next_pin, me.clone()));
            let index = s.participant(&me);
            let participant = &mut s.participants[index];
            participant.depth += 1;
            let outermost = participant.depth == 1;
            participant.pin += u64::from(outermost);
            (s.next_pin, index, outermost)
        });
        if outermost {
            // SeqCst: orders this pin's later loads after every retire whose
            // own fence came first (see the module docs).
            fence(Ordering::SeqCst);
        }
        GraceGuard { id, participant }
    }

    fn defer(_guard: &GraceGuard, f: impl FnOnce() + Send + 'static) {
        if bag::enabled() {
            bag::defer(Box::new(f));
            return;
        }
        // SeqCst: a pin that registers after this point fences after it.
        fence(Ordering::SeqCst);
        with_state(|s| {
            let pending = s.record(Box::new(f), false);
            s.pending.push(pending);
        });
    }

    fn flush(_guard: &GraceGuard) {
        bag::push_own();
        run_ready();
    }

    fn protect<T>(ptr: &AtomicPtr<T>) -> *mut T {
        check_direct_frees();
        // Acquire: pairs with the Release publication of the pointee.
        let loaded = ptr.load(Ordering::Acquire);
        hold_for_pin(loaded as usize);
        loaded
    }

    fn borrowed<T>(ptr: *const T) {
        check_direct_frees();
        hold_for_pin(ptr as usize);
    }

    fn collect() {
        // The crossbeam backend collects by flushing (the trait's default).
        bag::push_own();
        run_ready();
    }

    fn wait_for_pinned_threads() {
        bag::push_for_wait();
        let pinned = with_state(|s| s.pinned_participants());
        if let Some(words) = words() {
            for (index, pin) in pinned {
                // Acquire: the caller sees every access of the pins it waits
                // for (a read-modify-write: module docs).
                while words.locals[index].fetch_add(0, Ordering::Acquire) < pin {
                    spin_loop();
                }
            }
        }
        run_ready();
    }
}

impl Drop for GraceGuard {
    fn drop(&mut self) {
        let panicking = std::thread::panicking();
        if !panicking {
            check_direct_frees();
        }
        let me = current_thread();
        let ended = with_state(|s| {
            s.active.retain(|(id, _)| *id != self.id);
            if !s.active.iter().any(|(_, t)| *t == me) {
                s.loaded.retain(|(t, _)| *t != me);
            }
            watch_loaded(s);
            let participant = &mut s.participants[self.participant];
            participant.depth = participant.depth.saturating_sub(1);
            (participant.depth == 0).then_some((self.participant, participant.pin))
        });
        if panicking {
            return;
        }
        if let (Some((index, pin)), Some(words)) = (ended, words()) {
            // Release: a thread that loads it and fences (Acquire) sees every
            // access of the pin (crossbeam's unpin).
            words.locals[index].swap(pin, Ordering::Release);
        }
        run_ready();
    }
}

/// Records that the current (pinned) thread holds `address` until it
/// unpins; fails the model if the reclaimer already freed it.
fn hold_for_pin(address: usize) {
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
        let ready = take_ready();
        if ready.is_empty() {
            return;
        }
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
            if REUSE.with(Cell::get) {
                quarantine::reuse(&freed);
            }
        }
    }
}

/// Takes the deferred work whose pins have all ended and whose ends the
/// running thread sees: its own in program order, another thread's in that
/// thread's participant word (one read each). Work whose end it does not
/// see stays pending.
fn take_ready() -> Vec<Pending> {
    let me = current_thread();
    let (candidates, own) = with_state(|s| {
        let active: Vec<u64> = s.active.iter().map(|(id, _)| *id).collect();
        let (ready, waiting): (Vec<Pending>, _) = std::mem::take(&mut s.pending)
            .into_iter()
            .partition(|p| p.waits_for.iter().all(|id| !active.contains(id)));
        s.pending = waiting;
        let own = s.participants.iter().position(|p| p.thread == me);
        (ready, own)
    });
    let Some(words) = words().filter(|_| !candidates.is_empty()) else {
        return candidates;
    };
    let mut seen: Vec<(usize, u64)> = Vec::new();
    let mut ended = |index: usize, pin: u64| {
        if Some(index) == own {
            return true;
        }
        let word = seen.iter().find(|(i, _)| *i == index).map(|&(_, w)| w);
        let word = word.unwrap_or_else(|| {
            // Acquire: the work sees every access of the pin seen ended (a
            // read-modify-write: module docs).
            let word = words.locals[index].fetch_add(0, Ordering::Acquire);
            seen.push((index, word));
            word
        });
        word >= pin
    };
    let (ready, unseen): (Vec<Pending>, Vec<Pending>) = candidates
        .into_iter()
        .partition(|p| p.observe.iter().all(|&(index, pin)| ended(index, pin)));
    with_state(|s| s.pending.extend(unseen));
    if ready.iter().any(|p| p.queued) {
        // Acquire: the work sees every access its bag's pusher made before
        // the push (a read-modify-write: module docs).
        words.queue.fetch_add(0, Ordering::Acquire);
    }
    ready
}

/// Resets the reclaimer and the quarantine for a new execution. Work left
/// over from an execution that failed is dropped unrun (leaked).
pub fn begin_execution() {
    let leftover = with_state(std::mem::take);
    leftover.pending.into_iter().for_each(std::mem::forget);
    leftover.bags.into_iter().for_each(std::mem::forget);
    let words = Words {
        locals: std::array::from_fn(|_| AtomicU64::new(0)),
        queue: AtomicU64::new(0),
    };
    // Words left by a failed execution belong to that execution's checker
    // state: leak them rather than touch them from this one.
    std::mem::forget(WORDS.with(|w| w.replace(Some(Arc::new(words)))));
    REUSE.with(|r| r.set(std::env::var("CRTC_GRACE_REUSE").is_ok_and(|v| v == "1")));
    bag::configure();
    quarantine::watch(std::iter::empty());
    quarantine::take_direct_free();
    quarantine::release();
}

/// Ends an execution (every thread joined, every gate dropped): runs what is
/// still deferred, checks that no pin is left, releases the quarantine, and
/// returns `(deferred functions run, blocks they freed)`.
pub fn end_execution() -> (u64, u64) {
    let before_end = with_state(|s| if s.participants.len() > 1 { s.freed } else { 0 });
    FREED_BEFORE_END.with(|t| t.set(t.get() + before_end));
    bag::push_all();
    run_ready();
    WORDS.with(|w| w.borrow_mut().take());
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

/// The blocks deferred work freed before their execution's end, in the
/// executions ended on this thread since the last call in which more than
/// one modelled thread pinned (not a model's serial runs): in bag mode, work
/// runs only after a push, so this shows that pushes happen while the
/// model's threads run, not only at the end.
pub fn take_freed_before_end() -> u64 {
    FREED_BEFORE_END.with(|t| t.replace(0))
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
