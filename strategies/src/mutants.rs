//! Deliberately broken variants of each strategy (the RwLock gate's decode
//! append, the seqlock gate's fences, version bumps, retirement and writer
//! exclusion, the epoch gate's publication, retirement, writer exclusion
//! and reader length rule), of the tree's sweep (its claim, in `crtc`'s
//! `tree::scheduler`, and its frees, in `tree::children`), of the tree's
//! child sets (their publication, in `tree::children`), of the root's
//! key counts (in `tree::key_filter`), of the lanes'
//! cached rank slots and the slots' release (in `tree::slots`), of the
//! lanes' shared directory (parent resolution and the store skip, in
//! `tree::store`) and of anchor creation (in `tree::anchor`), compiled only into model-checker builds and selected at
//! run time, so one checker build runs every negative control. Every mutation point, in the gates
//! and in the tree, is a `mutant!(Name)` check.
//!
//! Each variant's doc names the property whose check must fail on it. A
//! model that does not fail on a mutant is too weak; the verification
//! suites assert that every mutant of their gate's list is caught. The
//! per-gate lists ([`Mutant::RWLOCK`], [`Mutant::RWLOCK_LOOM`],
//! [`Mutant::SEQLOCK`], [`Mutant::EPOCH`]), the tree's ([`Mutant::TREE`],
//! run under every gate), the sweep trigger's ([`Mutant::SWEEP`]), the
//! rank slots' ([`Mutant::SLOTS`]), rank removal's ([`Mutant::RANKS`],
//! `loom_ranks`), the lane directory's ([`Mutant::DIRECTORY`],
//! `loom_ranks` and the shuttle suites), anchor creation's
//! ([`Mutant::ANCHORS`], `loom_ranks`) and the grace reclaimer's bag mode's
//! ([`Mutant::BAG`], `loom_bag`) are what the suites run; the catalogue
//! (`crtc_verification::models::suites`) names the lists each loom and
//! shuttle suite runs and the property each mutant must fail, and its
//! coverage test fails when a mutant is in no loom list, or when a listed
//! catcher (loom or shuttle) cannot fail the property it is listed for.

use crate::checker_state;
use crate::gate::{append_eligibility, AppendMiss};
use crate::hash::{BlockPair, ExternalSequenceBlockHash, Slot};
use crate::rwlock::RwLockGate;
use crate::shape::{append_demoting, promote_full, ShapeRead, ShapeWrite};

/// A broken variant of the decode append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mutant {
    /// The correct code.
    None = 0,
    /// Appends even to an internal node.
    SkipInternalCheck = 1,
    /// Demotion clears another rank's full bit and publishes that before its
    /// cutoff is written.
    ClearBitBeforeCutoff = 2,
    /// The append does not invalidate plans made before it.
    NoInvalidation = 3,
    /// The eligibility checks run before the exclusive section, not inside.
    TailCheckOutsideSection = 4,
    /// Seqlock: the optimistic reader skips its Acquire fence.
    NoReaderAcquireFence = 5,
    /// Seqlock: a structural writer skips the Release fence after locking.
    NoWriterReleaseFence = 6,
    /// Seqlock: an append publishes `len` before writing the pairs.
    /// Property: `race-free` (the pairs' tracked cells).
    LenBeforePairs = 7,
    /// Seqlock: an append that demotes another rank does not bump the version.
    DemotingAppendWithoutBump = 8,
    /// Seqlock: a split (any structural commit) does not bump the version.
    /// Property: `atomic-read` (the loom reader model L2t: a reader that
    /// read the edge before the split and the child map after it validates,
    /// and with the leaf's repeated local hashes scores blocks nobody
    /// holds; the gate-level `split` model shows it too).
    SplitWithoutBump = 9,
    /// Epoch: a new snapshot is published with a Relaxed store, so a reader
    /// may load the pointer before the snapshot's contents are visible.
    EpochRelaxedPublish = 10,
    /// Epoch: the replaced snapshot is retired before the pointer to it is
    /// overwritten, so a reader pinned in between can load it after its
    /// grace period began.
    EpochRetireBeforeUnlink = 11,
    /// Epoch: an in-place append publishes the buffer's length before it
    /// writes the pairs. Property: `race-free` (the pairs' tracked cells).
    EpochLenBeforePairs = 12,
    /// Epoch: writers lock a private mutex instead of the node's, so two
    /// writers on one node run at once.
    EpochUnexcludedWriters = 13,
    /// Sweep scheduling: the one-in-flight flag is claimed by a load and a
    /// later store instead of a compare-and-swap, so two schedulers can both
    /// win it.
    RacySweepClaim = 14,
    /// Seqlock: a replaced out-of-line array (edge buffer, position table,
    /// cutoff list, full-bit chunks) is retired *before* its pointer is
    /// swapped, so a reader that pins in between loads it after its grace
    /// period began and holds it when it is freed. Property: nothing is
    /// freed while a pinned reader holds it (the grace-period reclaimer with
    /// the quarantining allocator; the checker reclaimer cannot see it).
    SeqlockRetireBeforeUnpublish = 15,
    /// Sweep: the compact child set a sweep replaces when it unlinks a leaf
    /// is freed at once instead of retired, so a reader walking into the
    /// leaf under its pin holds freed memory. Property: nothing is freed
    /// while a pinned reader holds it (sweeps on, a reader racing
    /// `unlink_if_stale`: the loom model U1). The free happens in the
    /// sweeper's own code, not in deferred work, so the checker must watch
    /// every deallocation during the model, not only the reclaimer's.
    SweepFreesBeforeGrace = 16,
    /// Seqlock: a successful fast-path append does not bump the plan
    /// version, so a plan made before it (on the old tail) still commits.
    /// Property: a plan whose node changed after it was made fails its
    /// commit — final state among the serial outcomes when a planned store
    /// races a decode append on the same leaf (no lost or misplaced block).
    SeqlockAppendWithoutPlanBump = 17,
    /// Epoch: a successful fast-path append does not bump the plan counter.
    /// Property: as [`Mutant::SeqlockAppendWithoutPlanBump`]; in the epoch
    /// suite, whose L4b runs a reader, the stale extension first shows as a
    /// read crediting B with A's block (read bounds, C1).
    EpochAppendWithoutPlanBump = 18,
    /// Epoch: a reader follows the buffer's live length past its snapshot's
    /// own length without re-loading the gate's pointer, so it may combine
    /// an old snapshot (a rank still full) with blocks appended after that
    /// rank was demoted. Property: every view is a state the node was in (a
    /// reader racing a demoting append credits no rank with blocks it never
    /// held).
    EpochUnvalidatedLiveLength = 19,
    /// Epoch: when the snapshot was replaced after in-place appends past its
    /// length, the reader uses `(S, S.len)` instead of re-running under the
    /// mutex, a state older than one the caller may already have seen.
    /// Property: read-your-writes — a lane's own pure append, then another
    /// lane's coverage raise that replaces the snapshot without a plan bump,
    /// then the first lane's own read must credit its block (loom model L5,
    /// at preemption bound 3).
    EpochReadsReplacedSnapshotLength = 20,
    /// Rank slots: a lane's cached slot is used without checking the unmap
    /// count, so a rank removed elsewhere keeps writing with its old slot
    /// (checked in `crtc`'s `tree::slots`). Must fail `slot-owned`.
    SlotCacheIgnoresUnmaps = 21,
    /// Rank slots: a cached slot is stamped with the unmap count read after
    /// the mapping lookup instead of before, so an unmap the lookup missed
    /// can pass as seen. Must fail `slot-owned`.
    SlotStampAfterLookup = 22,
    /// RwLock: the append compares its parent with the edge's first block
    /// instead of its tail, so every decode append to an edge of two or more
    /// blocks misses and the general path stores it: no block is lost or
    /// misplaced, the fast path just never runs. Property: `fast-hits` (L1's
    /// append on the 4-block leaf must hit; L4b must hit in at least one
    /// execution of its exploration).
    TailCheckAgainstHead = 30,
    /// RwLock: the append runs no eligibility check inside its exclusive
    /// section (it trusts the caller's tail lookup), so two appenders that
    /// both looked up the same tail both append. Property: `one-append-wins`
    /// (the gate-level `two_appenders` model).
    AppendTrustsLookup = 31,
    /// Sweep: the entry a sweep unlinks from a *sharded* child set is
    /// dropped at once instead of through the reclaimer, so the leaf is
    /// freed when the sweep drops its candidate list, while a reader that
    /// walked into it under its pin may still read it. Property:
    /// `no-free-while-held` (the loom model U3, whose parent holds three
    /// children, a sharded set under the checkers' `COMPACT_MAX` of 2).
    ShardedSweepFreesBeforeGrace = 33,
    /// Sweep: a finished sweep records its recount but never frees the
    /// in-flight flag (checked in `crtc::tree::sweep`), so no sweep can be
    /// claimed again. Property: `sweep-not-lost` (the `sweep_claim` model:
    /// the flag is left set after every scheduler returned).
    SweepFinishKeepsFlag = 32,
    /// Rank slots: `release` makes the swept slots reusable at once, without
    /// waiting for the threads pinned before it (the grace period after the
    /// removal's sweep; checked in `crtc::tree::slots`), so a reader that
    /// read the removed rank's bits before the sweep resolves them to the
    /// new rank that took the slot. Must fail `read-bounds` (the new rank
    /// credited with blocks it never stored) in `loom_ranks`.
    SlotRecycledBeforeGrace = 50,
    /// Epoch: a snapshot that changes only coverage (a removal's cutoff, a
    /// raise; the edge buffer shared, no pair appended) is published with a
    /// Relaxed store, so a reader may load it before its plain coverage is
    /// visible. No atomic is created with it, so only the coverage's tracked
    /// cell shows it. Property: `race-free` (loom's causality check on the
    /// snapshot's `PlainCell`).
    EpochRelaxedCoverPublish = 40,
    /// Epoch: the snapshot a demoting append publishes over the shared
    /// buffer (pairs written in place) is stored Relaxed, so a reader may
    /// load it before its coverage and the new pairs are visible. Property:
    /// `race-free` (the snapshot's and the pairs' tracked cells).
    EpochRelaxedDemotePublish = 41,
    /// Epoch: a pure append publishes the buffer's length with a Relaxed
    /// store, so a reader that loads the new length reads pairs whose writes
    /// are not ordered before it. Property: `race-free` (the pairs' tracked
    /// cells).
    EpochRelaxedLengthPublish = 42,
    /// Seqlock: an append publishes `len` with a Relaxed store, so an
    /// optimistic reader that loads the new length reads pairs whose writes
    /// are not ordered before it (a pure append bumps no version, so the
    /// reader's validation passes). Property: `race-free` (the pairs'
    /// tracked cells).
    SeqlockRelaxedLengthPublish = 43,
    /// Epoch: an exclusive section (split, first child, children clear)
    /// closes `seq` with a Relaxed store instead of Release, so a reader
    /// that loads the closing (even) value is not ordered after the
    /// section: it may read the snapshot from before the section with the
    /// child map the section published, a view the node never had, and its
    /// validation passes (`seq` unchanged). Property: `atomic-read` (the
    /// loom reader model L2t, whose leaf repeats its local hashes, so the
    /// old edge with the split's children credits blocks nobody holds).
    EpochRelaxedSectionClose = 45,
    /// Tree: a compact child set is sorted again in place after it was
    /// published (a plain write after the publication), so a reader that
    /// loaded the set reads entries a writer is writing. Property:
    /// `race-free` (the compact set's tracked cell).
    ChildrenSortedAfterPublish = 44,
    /// Lane directory: a store's parent resolution skips the check that the
    /// storing rank covers the parent on the node its lane's entry names
    /// (checked in `crtc`'s `tree::store::parent`), so a rank stores under
    /// a parent only another rank of its lane holds: the tree accepts an
    /// event the reference model refuses (`ParentBlockNotFound`) and
    /// credits the rank with the blocks before the parent. Must fail
    /// `read-bounds` (C1: the rank's own lane reads it back above the
    /// blocks it ever stored; the shuttle case `shared lane`, the loom
    /// model `D1`).
    SharedEntrySkipsCoverage = 60,
    /// Lane directory: the store skip (the blocks a commit places within
    /// the coverage before it get no directory entry) takes the coverage of
    /// every slot on the node instead of the lane's slot mask (checked in
    /// `crtc`'s `tree::store::edge`), so a lane that stores blocks another
    /// lane's rank covers writes no entries for them, and its next store
    /// under them finds no parent. Must fail `accepted` (the tree refuses
    /// that store: `ParentBlockNotFound`; the shuttle case `shared lane`,
    /// the loom model `D1`).
    StoreSkipPastLaneCoverage = 61,
    /// Seqlock: a writer takes the node's writer lock without the
    /// compare-and-swap (it only reads the word), so two writers on one node
    /// run at once. Must fail `one-append-wins` (two appenders of the same
    /// tail both pass the eligibility check and both succeed: the
    /// gate-level `two_appenders` model).
    SeqlockUnexcludedWriters = 62,
    /// Rank removal: the lanes drop the removed ranks before their slots are
    /// unmapped (the order before issue 44; checked in `crtc`'s
    /// `tree::ranks`), so a late event of a removed rank applied between the
    /// two registers the rank again with its old slot, and that slot stays
    /// in the lane's slot mask after its release and reissue. Another rank
    /// of the lane then skips the directory entries of blocks the slot's new
    /// owner covers: its valid store under them is refused and its removal
    /// of them is lost. Must fail `accepted` or `read-bounds` (C4, C1) in the
    /// shuttle `indexer` model.
    RemovalDropsBeforeUnmap = 63,
    /// Anchors: an anchor is created without the writers' lock (checked in
    /// `crtc`'s `tree::anchor`), so two lanes that create the same anchor at
    /// once both find it absent, each link a node of their own, and the
    /// later publication of the map drops the other's node: the rank that
    /// joined the dropped node holds an anchor no lookup finds, and its
    /// stores under the anchor hang off that node. Must fail
    /// `serial-outcome` (the loom model A1 in `loom_ranks`: the final
    /// scores from the anchor miss that rank).
    AnchorWritersUnlocked = 65,
    /// Rank removal: the indexer unmaps without first flushing its lanes
    /// (checked in `crtc`'s `indexer`), so a removed rank's event enqueued
    /// before the removal runs after the unmap, on a fresh slot, and
    /// survives the removal. Must fail `read-bounds` (the rank credited
    /// after its removal) in the shuttle `indexer` model.
    RemovalWithoutFlush = 64,
    /// Tree: the root's key counts (`crtc`'s `tree::key_filter`) count no
    /// insert, so every lookup reads 0 for its first hash and returns no
    /// scores before walking: the reader misses children linked before it
    /// began. Must fail `read-bounds` (the held-throughout floor: a read
    /// during the writes scores 0 for blocks a rank held throughout it;
    /// loom's L2, shuttle's `mixed`), before the final scores fail
    /// `serial-outcome`.
    RootFilterNotCounted = 70,
    /// Epoch: an exclusive section retires the snapshot it replaced before
    /// it closes, and closes `seq` Relaxed (the layout the section had
    /// before its retire moved out, with the close weakened). A reclaimer
    /// that fences at every retire orders readers after the section in
    /// `seq`'s place; crossbeam-epoch's `defer` does not fence. Property:
    /// `atomic-read` (the reader model L2t, as for
    /// [`Mutant::EpochRelaxedSectionClose`]), caught only in the grace
    /// reclaimer's bag mode ([`Mutant::BAG`]).
    EpochRetireInRelaxedSection = 67,
}

impl Mutant {
    /// The mutants of the RwLock gate's append.
    pub const RWLOCK: [Mutant; 4] = [
        Mutant::SkipInternalCheck,
        Mutant::ClearBitBeforeCutoff,
        Mutant::NoInvalidation,
        Mutant::TailCheckOutsideSection,
    ];

    /// The mutants of the RwLock gate's append that only loom's models see:
    /// they leave every final state and read correct and break only the
    /// fast-path counts (`fast-hits`) and the two-appender outcome
    /// (`one-append-wins`), which shuttle's scenarios do not check.
    pub const RWLOCK_LOOM: [Mutant; 2] = [Mutant::TailCheckAgainstHead, Mutant::AppendTrustsLookup];

    /// The mutants of the stale-leaf sweep's trigger (`crtc::tree::sweep`).
    pub const SWEEP: [Mutant; 2] = [Mutant::RacySweepClaim, Mutant::SweepFinishKeepsFlag];

    /// The mutants of the lanes' cached rank slots (`crtc::tree::slots`).
    pub const SLOTS: [Mutant; 2] = [Mutant::SlotCacheIgnoresUnmaps, Mutant::SlotStampAfterLookup];

    /// The mutants of the tree around the gates (run under every gate).
    pub const TREE: [Mutant; 4] = [
        Mutant::SweepFreesBeforeGrace,
        Mutant::ShardedSweepFreesBeforeGrace,
        Mutant::ChildrenSortedAfterPublish,
        Mutant::RootFilterNotCounted,
    ];

    /// The mutants of the seqlock gate.
    pub const SEQLOCK: [Mutant; 9] = [
        Mutant::NoReaderAcquireFence,
        Mutant::NoWriterReleaseFence,
        Mutant::LenBeforePairs,
        Mutant::DemotingAppendWithoutBump,
        Mutant::SplitWithoutBump,
        Mutant::SeqlockAppendWithoutPlanBump,
        Mutant::SeqlockRetireBeforeUnpublish,
        Mutant::SeqlockRelaxedLengthPublish,
        Mutant::SeqlockUnexcludedWriters,
    ];

    /// The mutants of the epoch gate.
    pub const EPOCH: [Mutant; 11] = [
        Mutant::EpochRelaxedPublish,
        Mutant::EpochRetireBeforeUnlink,
        Mutant::EpochLenBeforePairs,
        Mutant::EpochUnexcludedWriters,
        Mutant::EpochAppendWithoutPlanBump,
        Mutant::EpochUnvalidatedLiveLength,
        Mutant::EpochReadsReplacedSnapshotLength,
        Mutant::EpochRelaxedCoverPublish,
        Mutant::EpochRelaxedDemotePublish,
        Mutant::EpochRelaxedLengthPublish,
        Mutant::EpochRelaxedSectionClose,
    ];

    /// The mutants of rank removal on the real tree (`loom_ranks`).
    pub const RANKS: [Mutant; 1] = [Mutant::SlotRecycledBeforeGrace];

    /// The mutants of the indexer's rank removal against its lanes (the
    /// shuttle `indexer` model).
    pub const INDEXER: [Mutant; 2] = [Mutant::RemovalDropsBeforeUnmap, Mutant::RemovalWithoutFlush];

    /// The mutants of anchor creation (`crtc::tree::anchor`; `loom_ranks`'
    /// A1).
    pub const ANCHORS: [Mutant; 1] = [Mutant::AnchorWritersUnlocked];

    /// The mutants of the lanes' shared directory (`crtc::tree::store`):
    /// parent resolution and the store skip (`loom_ranks`' D1, the shuttle
    /// case `shared lane`).
    pub const DIRECTORY: [Mutant; 2] = [
        Mutant::SharedEntrySkipsCoverage,
        Mutant::StoreSkipPastLaneCoverage,
    ];

    /// The mutants only the grace reclaimer's bag mode catches
    /// (`loom_bag`): orderings its per-defer fence masks, which
    /// crossbeam-epoch's `defer` does not give.
    pub const BAG: [Mutant; 1] = [Mutant::EpochRetireInRelaxedSection];

    /// Every mutant, for lookups by name or id.
    pub const ALL: [Mutant; 41] = [
        Mutant::SkipInternalCheck,
        Mutant::ClearBitBeforeCutoff,
        Mutant::NoInvalidation,
        Mutant::TailCheckOutsideSection,
        Mutant::NoReaderAcquireFence,
        Mutant::NoWriterReleaseFence,
        Mutant::LenBeforePairs,
        Mutant::DemotingAppendWithoutBump,
        Mutant::SplitWithoutBump,
        Mutant::EpochRelaxedPublish,
        Mutant::EpochRetireBeforeUnlink,
        Mutant::EpochLenBeforePairs,
        Mutant::EpochUnexcludedWriters,
        Mutant::RacySweepClaim,
        Mutant::SeqlockRetireBeforeUnpublish,
        Mutant::SweepFreesBeforeGrace,
        Mutant::SeqlockAppendWithoutPlanBump,
        Mutant::EpochAppendWithoutPlanBump,
        Mutant::EpochUnvalidatedLiveLength,
        Mutant::EpochReadsReplacedSnapshotLength,
        Mutant::SlotCacheIgnoresUnmaps,
        Mutant::SlotStampAfterLookup,
        Mutant::TailCheckAgainstHead,
        Mutant::AppendTrustsLookup,
        Mutant::SweepFinishKeepsFlag,
        Mutant::SlotRecycledBeforeGrace,
        Mutant::EpochRelaxedCoverPublish,
        Mutant::EpochRelaxedDemotePublish,
        Mutant::EpochRelaxedLengthPublish,
        Mutant::SeqlockRelaxedLengthPublish,
        Mutant::ChildrenSortedAfterPublish,
        Mutant::SharedEntrySkipsCoverage,
        Mutant::StoreSkipPastLaneCoverage,
        Mutant::SeqlockUnexcludedWriters,
        Mutant::RemovalDropsBeforeUnmap,
        Mutant::RemovalWithoutFlush,
        Mutant::EpochRelaxedSectionClose,
        Mutant::AnchorWritersUnlocked,
        Mutant::ShardedSweepFreesBeforeGrace,
        Mutant::RootFilterNotCounted,
        Mutant::EpochRetireInRelaxedSection,
    ];

    /// The mutant with numeric id `id` (`Mutant as u8`; 0 is [`Mutant::None`]).
    pub fn by_id(id: u8) -> Option<Mutant> {
        std::iter::once(Mutant::None)
            .chain(Mutant::ALL)
            .find(|&m| m as u8 == id)
    }

    /// Makes `self` the active mutant of every gate.
    pub fn select(self) {
        checker_state::set_mutant(self as u8);
    }

    /// The active mutant.
    pub fn active() -> Mutant {
        Mutant::by_id(checker_state::mutant()).unwrap_or(Mutant::None)
    }

    /// Whether `self` is the active mutant.
    pub fn is_active(self) -> bool {
        Mutant::active() == self
    }
}

/// The RwLock gate's append under the active mutant; `None` runs the real code.
pub(crate) fn rwlock_append<R: crate::reclaim::Reclaim>(
    gate: &RwLockGate<R>,
    slot: Slot,
    parent: ExternalSequenceBlockHash,
    blocks: &[BlockPair],
) -> Option<Result<usize, AppendMiss>> {
    let mutant = Mutant::active();
    if mutant == Mutant::None {
        return None;
    }
    if mutant == Mutant::TailCheckOutsideSection {
        let checked = append_eligibility(&*gate.state.read(), slot, parent, blocks);
        return Some(checked.map(|()| {
            let exclusive = gate.gate.write();
            let mut state = gate.state.write();
            let old_len = state.len();
            append_demoting(&mut *state, slot, blocks);
            gate.bump(&exclusive);
            old_len
        }));
    }
    let exclusive = gate.gate.write();
    let mut state = gate.state.write();
    let checked = match mutant {
        Mutant::AppendTrustsLookup => Ok(()),
        Mutant::TailCheckAgainstHead if state.len() > 1 && state.pair(0).external != parent => {
            Err(AppendMiss::NotTail)
        }
        _ => append_eligibility(&*state, slot, parent, blocks),
    };
    let internal_only = mutant == Mutant::SkipInternalCheck && checked == Err(AppendMiss::Internal);
    if checked.is_err()
        && !(internal_only
            && state.tail().map(|t| t.external) == Some(parent)
            && state.is_full(slot))
    {
        return Some(checked.map(|()| 0));
    }
    let old_len = state.len();
    if mutant == Mutant::ClearBitBeforeCutoff {
        let others: Vec<Slot> = state
            .full_slots()
            .into_iter()
            .filter(|&s| s != slot)
            .collect();
        others.iter().for_each(|&s| {
            state.remove_full(s);
        });
        drop(state);
        state = gate.state.write();
        others
            .iter()
            .for_each(|&s| state.set_cutoff(s, old_len as u32));
        state.push_blocks(blocks);
        promote_full(&mut *state, slot);
    } else {
        append_demoting(&mut *state, slot, blocks);
    }
    if mutant != Mutant::NoInvalidation {
        gate.bump(&exclusive);
    }
    Some(Ok(old_len))
}
