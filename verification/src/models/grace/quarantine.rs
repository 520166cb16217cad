//! The quarantining allocator under the grace reclaimer: it makes a
//! premature free observable without touching freed memory.
//!
//! Protocol. A test binary installs [`QuarantineAlloc`] as its global
//! allocator. While deferred work runs (`capture`), every deallocation is
//! held back: the block stays allocated, recorded as freed, instead of going
//! back to the system. Outside deferred work, only the blocks pinned threads
//! loaded (the reclaimer keeps that list, `watch`) are held, and the free is
//! recorded as a direct free. Held blocks are released at the end of each
//! execution (`release`), so an address is never reused while a reader could
//! still compare against it, and a freed block is never actually accessed:
//! the reclaimer's checks fail the model first. A block freed twice is
//! recorded (`take_double_free`). Every freed block but one a pinned thread
//! holds is filled with [`POISON`], so a stale read the checks do not see
//! reads garbage instead of the object's last value. In reuse mode the
//! reclaimer hands a block deferred work freed back to the system at once
//! (`reuse`); until the allocator hands its address out again, `holds`
//! still reports it freed.
//!
//! The state lives in const-initialized thread-locals without destructors,
//! so the allocator can use them at any time without allocating (loom and
//! shuttle run every modelled thread on the test's OS thread).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};

/// The byte every freed block is filled with before it is held or handed
/// back: a stale read of a freed object reads this pattern (a pointer of
/// `0xa5a5...`, a checker object whose index is out of range) instead of the
/// value it last held, so it fails the run where a quarantined block would
/// otherwise still read as valid.
const POISON: u8 = 0xa5;

/// The global allocator of test binaries that use
/// [`GraceReclaim`](super::GraceReclaim): the
/// system allocator, except that deallocations made while deferred work runs
/// are held back (module docs), and freed blocks are poisoned
/// ([`POISON`]) but those a pinned thread holds.
#[derive(Debug, Default, Clone, Copy)]
pub struct QuarantineAlloc;

// SAFETY: every block comes from `System` with the caller's layout and goes
// back to `System` with the layout recorded for it, exactly once: either
// right away or, when held, by `release`. Nothing here allocates
// or unwinds.
unsafe impl GlobalAlloc for QuarantineAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        mark_installed();
        // SAFETY: the caller's contract is `System`'s.
        handed_out(unsafe { System.alloc(layout) })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let capturing = capturing();
        let held = hold(ptr, layout);
        // A block held because a pinned thread holds it stays intact: the
        // direct-free check reports it (tagged) at the next reclaimer call,
        // and a poisoned read before that would pre-empt it untagged.
        // Deferred work's frees are checked before any other thread runs.
        if capturing || !held {
            // SAFETY: the caller hands back a block of `layout.size()` bytes
            // it allocated here and no longer uses; nothing reads it as a
            // live object again, so its bytes are ours to overwrite.
            unsafe { std::ptr::write_bytes(ptr, POISON, layout.size()) };
        }
        if !held {
            // SAFETY: `ptr` was allocated by `System` with `layout` (above).
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        mark_installed();
        // SAFETY: the caller's contract is `System`'s.
        handed_out(unsafe { System.alloc_zeroed(layout) })
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Reallocation is never part of a deferred free; `System` moves or
        // grows the block and frees the old one itself.
        // SAFETY: the caller's contract is `System`'s.
        handed_out(unsafe { System.realloc(ptr, layout, new_size) })
    }
}

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
    /// The addresses of `blocks`, for the double-free check and
    /// [`holds`] in constant time (a shuttle execution holds thousands).
    index: AddressSet,
    overflow: bool,
    double_free: bool,
}

/// Slots of an [`AddressSet`]: twice [`CAPACITY`], so the table is at
/// most half full.
const SET_SLOTS: usize = 2 * CAPACITY;

/// A set of block addresses in a fixed table, since the allocator may
/// not allocate: open addressing with linear probing, 0 an empty slot
/// and 1 a removed one (no block lives at address 0 or 1).
struct AddressSet {
    slots: [usize; SET_SLOTS],
    /// Slots ever filled since the last [`AddressSet::clear`], removed
    /// ones included: an insert is refused at half the table.
    used: usize,
    /// Whether a slot was removed since the last clear.
    removed: bool,
}

const EMPTY: usize = 0;
const REMOVED: usize = 1;

impl AddressSet {
    const fn new() -> Self {
        Self {
            slots: [EMPTY; SET_SLOTS],
            used: 0,
            removed: false,
        }
    }

    fn home(address: usize) -> usize {
        // Fibonacci hashing of the address without its alignment bits.
        let mixed = ((address >> 3) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (mixed >> (64 - SET_SLOTS.trailing_zeros())) as usize
    }

    /// The slot holding `address`, if any.
    fn find(&self, address: usize) -> Option<usize> {
        let mut at = Self::home(address);
        loop {
            match self.slots[at] {
                EMPTY => return None,
                a if a == address => return Some(at),
                _ => at = (at + 1) % SET_SLOTS,
            }
        }
    }

    fn contains(&self, address: usize) -> bool {
        self.find(address).is_some()
    }

    /// Adds `address`; false when the table is at its fill bound.
    fn insert(&mut self, address: usize) -> bool {
        if self.used >= SET_SLOTS / 2 {
            return false;
        }
        let mut at = Self::home(address);
        while self.slots[at] != EMPTY {
            at = (at + 1) % SET_SLOTS;
        }
        self.slots[at] = address;
        self.used += 1;
        true
    }

    fn remove(&mut self, address: usize) {
        if let Some(at) = self.find(address) {
            self.slots[at] = REMOVED;
            self.removed = true;
        }
    }

    /// Empties the set, whose members are `members`. Without removed
    /// slots it empties only the runs of filled slots their homes start
    /// in (each member lies in the run its home is in, and a pass from
    /// anywhere in a run empties the run's rest), instead of the whole
    /// table on every execution.
    fn clear(&mut self, members: impl Iterator<Item = usize>) {
        if self.removed {
            self.slots = [EMPTY; SET_SLOTS];
        } else {
            for address in members {
                let mut at = Self::home(address);
                while self.slots[at] != EMPTY {
                    self.slots[at] = EMPTY;
                    at = (at + 1) % SET_SLOTS;
                }
            }
        }
        self.used = 0;
        self.removed = false;
    }
}

/// Blocks handed back to the system in reuse mode whose addresses the
/// allocator has not handed out again.
struct Reused {
    blocks: [usize; CAPACITY],
    len: usize,
}

thread_local! {
    static REUSED: RefCell<Reused> = const {
        RefCell::new(Reused {
            blocks: [0; CAPACITY],
            len: 0,
        })
    };
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
            index: AddressSet::new(),
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

/// Appends `address` after the first `*len` of `blocks`; fails the
/// model when the list (`what`) is full.
fn push_address(blocks: &mut [usize], len: &mut usize, address: usize, what: &str) {
    assert!(
        *len < blocks.len(),
        "grace reclaimer: more than {} {what}",
        blocks.len()
    );
    blocks[*len] = address;
    *len += 1;
}

/// Sets the blocks pinned threads hold.
pub(super) fn watch(addresses: impl Iterator<Item = usize>) {
    WATCHED.with(|w| {
        let mut watched = w.borrow_mut();
        let Watched { blocks, len, .. } = &mut *watched;
        *len = 0;
        for address in addresses {
            push_address(blocks, len, address, "blocks held by pinned threads");
        }
    });
}

/// The watched block freed outside deferred work since the last call.
pub(super) fn take_direct_free() -> Option<usize> {
    WATCHED.with(|w| w.borrow_mut().direct_free.take())
}

/// Records a free of a watched block outside deferred work; returns
/// whether the `size` bytes at `address` hold a watched address (an
/// object inside the block, such as the value of an `Arc`, counts).
fn note_direct_free(address: usize, size: usize) -> bool {
    WATCHED
        .try_with(|w| {
            let Ok(mut watched) = w.try_borrow_mut() else {
                return false;
            };
            let inside = |a: &usize| (address..address + size.max(1)).contains(a);
            let hit = watched.blocks[..watched.len].iter().any(inside);
            if hit && watched.direct_free.is_none() {
                watched.direct_free = Some(address);
            }
            hit
        })
        .unwrap_or(false)
}

/// Whether deferred work is running on this thread (its frees are
/// captured).
pub(super) fn capturing() -> bool {
    CAPTURING.try_with(Cell::get).unwrap_or(false)
}

/// Holds `ptr` instead of freeing it if deferred work is running on
/// this thread, or if a pinned thread holds it (then the free is
/// recorded as a direct free); returns whether it did.
pub(super) fn hold(ptr: *mut u8, layout: Layout) -> bool {
    if !capturing() && !note_direct_free(ptr as usize, layout.size()) {
        return false;
    }
    HELD.try_with(|h| {
        let Ok(mut held) = h.try_borrow_mut() else {
            return false;
        };
        let address = ptr as usize;
        if held.index.contains(address) {
            // Already held: a second free of the same block. Keep the
            // single record (it is released once).
            held.double_free = true;
            return true;
        }
        if held.len == CAPACITY || !held.index.insert(address) {
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

/// Whether `address` is a freed block: held, or handed back in reuse
/// mode and not allocated again.
pub(super) fn holds(address: usize) -> bool {
    let held = HELD.with(|h| h.borrow().index.contains(address));
    held || REUSED.with(|r| r.borrow().blocks[..r.borrow().len].contains(&address))
}

/// Reuse mode: returns the held `blocks` to the system now, each
/// recorded as freed until the allocator hands its address out again.
pub(super) fn reuse(blocks: &[usize]) {
    let records: Vec<(usize, usize, usize)> = HELD.with(|h| {
        let mut held = h.borrow_mut();
        let mut taken = Vec::new();
        let mut at = 0;
        while at < held.len {
            if blocks.contains(&held.blocks[at].0) {
                taken.push(held.blocks[at]);
                let address = held.blocks[at].0;
                held.index.remove(address);
                let last = held.len - 1;
                held.blocks.swap(at, last);
                held.len = last;
            } else {
                at += 1;
            }
        }
        taken
    });
    REUSED.with(|r| {
        let mut reused = r.borrow_mut();
        let Reused { blocks, len } = &mut *reused;
        for &(address, _, _) in &records {
            push_address(blocks, len, address, "blocks handed back for reuse");
        }
    });
    for (address, size, align) in records {
        // SAFETY: as in `release`: a held block, allocated by `System`
        // with this layout, whose record was removed above.
        unsafe {
            System.dealloc(
                address as *mut u8,
                Layout::from_size_align_unchecked(size, align),
            )
        }
    }
}

/// Records that the allocator handed `ptr` out (no longer a freed
/// address); returns it.
pub(super) fn handed_out(ptr: *mut u8) -> *mut u8 {
    let _ = REUSED.try_with(|r| {
        if let Ok(mut reused) = r.try_borrow_mut() {
            let len = reused.len;
            if let Some(at) = reused.blocks[..len].iter().position(|&a| a == ptr as usize) {
                reused.blocks.swap(at, len - 1);
                reused.len -= 1;
            }
        }
    });
    ptr
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
    REUSED.with(|r| r.borrow_mut().len = 0);
    let blocks: Vec<(usize, usize, usize)> = HELD.with(|h| {
        let mut held = h.borrow_mut();
        let blocks = held.blocks[..held.len].to_vec();
        held.index
            .clear(blocks.iter().map(|&(address, _, _)| address));
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
