//! State of the model checkers' test reclaimer (per OS thread) and mutant
//! switch (per process); model-checker builds only.
//!
//! Protocol. Loom and shuttle run every modelled thread of one model on the
//! OS thread that explores it, one at a time, so the reclaimer's pin count
//! and deferred work are thread-locals: each test thread of a parallel test
//! run has its own, and one model never runs (or counts the pins of)
//! another model's deferred frees, which would touch that execution's
//! checker objects from the wrong execution. Deferred work runs once no
//! modelled thread is pinned. The mutant is process-wide (the facade's
//! unmodelled atomic, invisible to the checker: it models the harness, not
//! the code under test): a negative control selects it in a child process
//! that runs one model.
//!
//! Retired objects are also tracked by address until their deferred free
//! runs, so a second retire of one object (two writers each retiring the
//! snapshot they both started from, a double free in the making) panics
//! with [`RETIRED_TWICE`] at the retire, before any memory is freed twice.
//! An address stays in the set only while its object is still allocated
//! (its free pending, or leaked by an aborted model), so no new object can
//! share it: the check has no false positives.

use crate::sync::unmodelled::{AtomicU8, Ordering};
use std::cell::{Cell, RefCell};
use std::collections::HashSet;

type Deferred = Box<dyn FnOnce() + Send>;

thread_local! {
    static PINNED: Cell<usize> = const { Cell::new(0) };
    static DEFERRED: RefCell<Vec<Deferred>> = const { RefCell::new(Vec::new()) };
    static RETIRED: RefCell<Option<HashSet<usize>>> = const { RefCell::new(None) };
}
static MUTANT: AtomicU8 = AtomicU8::new(0);

/// Records that a thread pinned.
pub fn pin_enter() {
    PINNED.with(|p| p.set(p.get() + 1));
}

/// Records that a thread unpinned.
pub fn pin_exit() {
    PINNED.with(|p| p.set(p.get() - 1));
}

/// Number of pinned threads.
pub fn pinned() -> usize {
    PINNED.with(Cell::get)
}

/// Queues `f` until no thread is pinned.
pub fn defer(f: impl FnOnce() + Send + 'static) {
    DEFERRED.with(|d| d.borrow_mut().push(Box::new(f)));
}

/// What a second retire of one object panics with (the verification crate
/// reports it as no-free-while-held).
pub const RETIRED_TWICE: &str = "an object was retired twice before its free ran";

/// Records that the object at `addr` is retired (its free deferred).
/// Panics if it already is: the second retire would free it twice.
pub fn retired(addr: usize) {
    let fresh = RETIRED.with(|r| r.borrow_mut().get_or_insert_default().insert(addr));
    assert!(fresh, "{RETIRED_TWICE} (address {addr:#x})");
}

/// Records that the retired object at `addr` was freed.
pub fn freed(addr: usize) {
    RETIRED.with(|r| r.borrow_mut().get_or_insert_default().remove(&addr));
}

/// Runs every queued function if no thread is pinned.
pub fn run_if_unpinned() {
    while pinned() == 0 {
        let batch = DEFERRED.with(|d| std::mem::take(&mut *d.borrow_mut()));
        if batch.is_empty() {
            return;
        }
        batch.into_iter().for_each(|f| f());
    }
}

/// Selects mutant `id` (0 = none) for every gate that has one.
pub fn set_mutant(id: u8) {
    // SeqCst: set by the test before the model runs.
    MUTANT.store(id, Ordering::SeqCst);
}

/// The selected mutant.
pub fn mutant() -> u8 {
    // SeqCst: as above.
    MUTANT.load(Ordering::SeqCst)
}
