//! Bag mode of the grace reclaimer (`CRTC_GRACE_BAG=N`, `N > 1`): deferred
//! work gathers in a bag per modelled thread, and only pushing a bag fences,
//! as in crossbeam-epoch.
//!
//! Protocol. crossbeam-epoch's `defer` puts the function into the calling
//! thread's local bag and issues no fence. The bag goes to the global queue
//! (`push_bag`: a SeqCst fence, then the bag sealed with the global epoch,
//! then the queue's Release push) only when it is full (64 functions), when
//! the thread flushes (`Guard::flush`, which the crate's `Reclaim::flush`,
//! its default `collect` and its default `wait_for_pinned_threads` call),
//! or when the thread's handle ends with the thread. In this mode the grace
//! reclaimer does the same:
//!
//! - `defer` appends to the thread's bag (no fence) and pushes the bag when
//!   it holds `N` functions;
//! - `flush` and `collect` push the caller's bag when it is not empty;
//! - `wait_for_pinned_threads` always pushes (crossbeam's wait defers a flag
//!   and flushes, so its bag is never empty), before it reads the pins it
//!   waits for;
//! - a thread's bag is pushed when the modelled thread ends (a checker
//!   thread-local registered at its first defer; its destructor runs at the
//!   thread's end, and the work runs at another thread's next reclaimer
//!   call), and whatever is left when the execution ends is pushed
//!   by the model's main thread, which only delays it.
//!
//! A push issues `fence(SeqCst)`, bumps the queue word with Release, and
//! records, for every function of the bag, the pins active at that moment:
//! the function runs once all of them have ended and the running thread has
//! seen them end (the module's grace rule), and after that thread has read
//! the queue word with Acquire (crossbeam's queue pop), so it sees what the
//! pusher did before the push even when the pusher was not pinned (a push
//! at the thread's end or from a wait). Work never becomes runnable relative
//! to its `defer`: a pin that starts between the `defer` and the push is
//! waited for, as crossbeam stamps a bag with the epoch of its push. What
//! this mode takes away is the order the per-defer fence gave the deferring
//! thread's code around the `defer` (a SeqCst fence is also a release and
//! an acquire fence under loom): a store after a retire no longer publishes
//! what came before the retire unless its own ordering does.

use super::{current_thread, with_state, words, Deferred, ThreadKey};
use crate::models::env_number;
use crtc_strategies::sync::atomic::{fence, Ordering};
use crtc_strategies::sync::thread;
use crtc_strategies::sync::unmodelled::{AtomicUsize, Ordering as Unmodelled};
use std::cell::Cell;

/// crossbeam-epoch's bag size (`MAX_OBJECTS`, without its sanitizer cfg).
pub const CROSSBEAM_BAG: usize = 64;

/// The bag size of a test binary that does not set `CRTC_GRACE_BAG` (1 but
/// in `loom_bag`): harness state, not modelled.
static DEFAULT_SIZE: AtomicUsize = AtomicUsize::new(1);

std::thread_local! {
    /// The bag size of the running execution (1: a fence at every defer).
    static SIZE: Cell<usize> = const { Cell::new(1) };
}

thread::thread_local! {
    /// Touched at a modelled thread's first defer, so its destructor pushes
    /// the thread's bag when the thread ends (crossbeam's handle does).
    static EXIT: ExitPush = ExitPush(current_thread());
}

/// Pushes the ending thread's bag (see [`EXIT`]). It keeps the thread's
/// key: the checker's own thread-locals (the current thread's handle) may
/// be gone when it drops, so it neither asks for it nor runs work (work
/// pushed here runs at the next reclaimer call of another thread).
struct ExitPush(ThreadKey);

impl Drop for ExitPush {
    fn drop(&mut self) {
        if !std::thread::panicking() && holds(&self.0) {
            push(&self.0);
        }
    }
}

/// Makes `size` this process's bag size where `CRTC_GRACE_BAG` is unset.
pub fn set_default_size(size: usize) {
    // Relaxed: harness state, set before any execution begins.
    DEFAULT_SIZE.store(size, Unmodelled::Relaxed);
}

/// The bag size of the next execution: `CRTC_GRACE_BAG`, else the process
/// default ([`set_default_size`]); 1 (or 0) is the per-defer mode.
pub fn size() -> usize {
    // Relaxed: as in `set_default_size`.
    let default = DEFAULT_SIZE.load(Unmodelled::Relaxed);
    env_number("CRTC_GRACE_BAG", default).max(1)
}

/// Fixes the bag size of the execution about to begin.
pub(super) fn configure() {
    SIZE.with(|s| s.set(size()));
}

/// Whether the running execution gathers deferred work in bags.
pub(super) fn enabled() -> bool {
    SIZE.with(Cell::get) > 1
}

/// Puts `work` into the calling thread's bag, pushing the bag once full.
pub(super) fn defer(work: Deferred) {
    EXIT.with(|_| {});
    let me = current_thread();
    let size = SIZE.with(Cell::get);
    let full = with_state(|s| {
        let bag = match s.bags.iter().position(|(t, _)| *t == me) {
            Some(index) => &mut s.bags[index].1,
            None => {
                s.bags.push((me.clone(), Vec::new()));
                &mut s.bags.last_mut().expect("just pushed").1
            }
        };
        bag.push(work);
        bag.len() >= size
    });
    if full {
        push(&me);
    }
}

/// Pushes the calling thread's bag if it holds anything (bag mode only).
pub(super) fn push_own() {
    if !enabled() {
        return;
    }
    let me = current_thread();
    if holds(&me) {
        push(&me);
    }
}

/// Whether `thread`'s bag holds work.
fn holds(thread: &ThreadKey) -> bool {
    with_state(|s| s.bags.iter().any(|(t, b)| t == thread && !b.is_empty()))
}

/// A wait for pinned threads: pushes the caller's bag, empty or not (bag
/// mode only).
pub(super) fn push_for_wait() {
    if enabled() {
        push(&current_thread());
    }
}

/// Pushes every bag still holding work, from the model's main thread at the
/// end of the execution (bag mode only).
pub(super) fn push_all() {
    if !enabled() {
        return;
    }
    let owners: Vec<ThreadKey> = with_state(|s| {
        (s.bags.iter())
            .filter(|(_, bag)| !bag.is_empty())
            .map(|(thread, _)| thread.clone())
            .collect()
    });
    owners.iter().for_each(push);
}

/// Pushes `owner`'s bag from the calling thread (module docs).
fn push(owner: &ThreadKey) {
    // SeqCst: crossbeam's `push_bag` fence: a pin that registers after it
    // fences after it, so its loads see what the bag's functions unlinked.
    fence(Ordering::SeqCst);
    if let Some(words) = words() {
        // Release: the queue edge to the thread that runs the work, which
        // reads the word with Acquire first (`take_ready`).
        words.queue.fetch_add(1, Ordering::Release);
    }
    with_state(|s| {
        let Some(index) = s.bags.iter().position(|(t, _)| t == owner) else {
            return;
        };
        for work in std::mem::take(&mut s.bags[index].1) {
            let pending = s.record(work, true);
            s.pending.push(pending);
        }
    });
}
