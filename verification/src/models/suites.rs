//! The per-gate test lists, written once: every gate's loom binary and
//! shuttle binary is a gate type, its counters, its storm bounds and its
//! mutants, handed to one of these macros. A model is added to every gate
//! by adding it here.
//!
//! - [`loom_gate_tests!`](crate::loom_gate_tests) expands to one `#[test]`
//!   per tree model (L1–L4 with the reader models L2r and L3r, the sweep
//!   models U1–U3) and per gate-level model (torn reads against a split,
//!   a demoting append and a pure append, in place and into a new buffer;
//!   two appenders), the serial-outcome check, and the negative controls
//!   (the suite's lists in [`LOOM_SUITES`], caught as [`loom_catch`] says).
//!   The pure-append test also checks that a pure append never makes a
//!   reader retry (the gate's retry counters, where it has any, do not
//!   move).
//! - [`shuttle_gate_tests!`](crate::shuttle_gate_tests) expands to the
//!   whole-tree scenarios (fast path on and off), the two decode storms with
//!   their retry distributions, the case-stream check and the negative
//!   controls (the suite's lists in [`SHUTTLE_SUITES`], caught as
//!   [`shuttle_catch`] says, by any scenario).
//! - [`check_catalogue`]: the coverage test of both checkers' lists and
//!   catchers.
//!
//! Both run their models through `$suite()` (loom) or the checker type
//! built by [`loom_explorer!`](crate::loom_explorer) /
//! [`shuttle_explorer!`](crate::shuttle_explorer) in the same binary.

use super::{Catch, Mutant, Property};

/// One `#[test]` per `name => "model"` pair, reporting `$suite()`'s model.
#[macro_export]
macro_rules! model_report_tests {
    ($suite:ident: $($test:ident => $model:literal),* $(,)?) => {$(
        #[test]
        fn $test() {
            $suite().report($model);
        }
    )*};
}

/// The loom tests of one gate; see the module docs. Arguments:
/// `suite` builds the gate's [`Suite`](crate::models::Suite), whose name
/// picks its mutants and their catchers from [`LOOM_SUITES`] and
/// [`loom_catch`]; `gate` is the tree models' gate type; `explorer` the
/// binary's loom explorer; `retries` the gate's process-wide retry counters
/// as `name => getter` pairs (none for a locking reader, which never
/// retries). A gate outside crtc-strategies, which has no entry in
/// [`LOOM_SUITES`], names the mutants it honours with `mutants: [..]`;
/// their catchers still come from [`loom_catch`].
#[macro_export]
macro_rules! loom_gate_tests {
    (
        suite: $suite:ident,
        gate: $G:ty,
        explorer: $explorer:expr,
        retries: [$($counter:literal => $get:expr),* $(,)?]
        $(, mutants: [$($mutant:expr),* $(,)?])? $(,)?
    ) => {
        /// The test that doubles as the negative controls' child.
        const MUTANT_TEST: &str = "loom_mutants_are_caught";

        $crate::model_report_tests! { $suite:
            l1_fast_append_vs_reader => "L1",
            l2r_reader_vs_divergent_split => "L2r",
            l3r_reader_vs_removal => "L3r",
            l2t_reader_vs_split_of_repeated_locals => "L2t",
            l2_fast_append_vs_divergent_split => "L2",
            l3_fast_append_vs_removal => "L3",
            l4a_racing_appends_on_a_shared_leaf => "L4a",
            l4b_fast_append_vs_planned_extension => "L4b",
            l5_own_read_after_pure_append_vs_raise => "L5",
            gate_torn_read_vs_split => "split",
            gate_torn_read_vs_demoting_append => "demote",
            gate_torn_read_vs_demoting_append_in_place => "demote_in_place",
            gate_reader_vs_pure_append_new_buffer => "pure_grow",
            gate_two_appenders => "two_appenders",
            u1_reader_vs_unlink => "U1",
            u2_store_and_append_vs_unlink => "U2",
            u3_reader_vs_unlink_from_sharded_set => "U3",
        }

        /// Reads the process-wide retry counters, so it runs alone in a
        /// child process (other tests' models bump them).
        #[test]
        fn gate_reader_vs_pure_append() {
            $crate::models::alone("gate_reader_vs_pure_append", || {
                let counters: &[(&str, fn() -> u64)] = &[$(($counter, $get)),*];
                let read = || counters.iter().map(|(name, get)| (*name, get())).collect::<Vec<_>>();
                let before = read();
                $suite().report("pure_append");
                let after = read();
                println!("pure append: reader retry counters {after:?} (before {before:?})");
                assert_eq!(before, after, "a pure append made a reader retry");
            });
        }

        #[test]
        fn serial_outcomes_are_as_designed() {
            $crate::models::tree::check_serial_outcomes::<$G>(&$explorer);
        }

        #[test]
        fn loom_mutants_are_caught() {
            let outside: Option<Vec<$crate::models::Mutant>> = None $(.or(Some(vec![$($mutant),*])))?;
            match outside {
                Some(mutants) => $suite().mutants(
                    MUTANT_TEST,
                    &mutants,
                    $crate::models::suites::loom_catch,
                ),
                None => $suite().loom_controls(MUTANT_TEST),
            }
        }
    };
}

/// The shuttle tests of one gate; see the module docs. Arguments: `gate`
/// (type) and `name` (in reports); `explorer` the binary's shuttle explorer
/// type; `retries` the gate's process-wide retry counters
/// ([`RetryCounters`](crate::models::scenarios::RetryCounters), a counter
/// absent where the gate has no such path); `check_storm(&stats,
/// lock_step)`, for a gate with retry paths, asserts the storm's retry bounds.
/// The negative controls are the gate's lists in [`SHUTTLE_SUITES`] (by
/// `name`), each caught as [`shuttle_catch`] says; every scenario is tried,
/// and a survivor fails the test.
#[macro_export]
macro_rules! shuttle_gate_tests {
    (
        gate: $G:ty,
        name: $name:literal,
        explorer: $Shuttle:ident,
        retries: $retries:expr,
        $(check_storm: $check:expr,)?
    ) => {
        /// The gate's name in reports.
        const GATE: &str = $name;
        /// Default schedules per (scheduler, seed).
        const DEFAULT_ITERS: usize = 500;
        /// Default schedules per (scheduler, seed) of the decode storm.
        const DEFAULT_STORM_ITERS: usize = 1000;
        /// Blocks each storm decodes (per rank in lock step).
        const STORM_BLOCKS: u64 = 24;
        /// Reads per storm reader.
        const STORM_READS: usize = 3;
        /// Default schedules per (scheduler, seed) in a negative-control child.
        const DEFAULT_MUTANT_ITERS: usize = 300;
        /// The test that doubles as the negative controls' child.
        const MUTANT_TEST: &str = "shuttle_mutants";

        fn shuttle() -> $Shuttle {
            $Shuttle($crate::models::ShuttlePlan::from_env(DEFAULT_ITERS))
        }

        #[test]
        fn shuttle_mixed_fast_on() {
            let case = $crate::models::scenarios::mixed();
            $crate::models::scenarios::report::<$G>(&shuttle(), GATE, &case, true);
        }

        #[test]
        fn shuttle_mixed_fast_off() {
            let case = $crate::models::scenarios::mixed();
            $crate::models::scenarios::report::<$G>(&shuttle(), GATE, &case, false);
        }

        #[test]
        fn shuttle_hot_leaf_fast_on() {
            let case = $crate::models::scenarios::hot_leaf();
            $crate::models::scenarios::report::<$G>(&shuttle(), GATE, &case, true);
        }

        #[test]
        fn shuttle_hot_leaf_fast_off() {
            let case = $crate::models::scenarios::hot_leaf();
            $crate::models::scenarios::report::<$G>(&shuttle(), GATE, &case, false);
        }

        #[test]
        fn shuttle_private_subtrees_fast_on() {
            let case = $crate::models::scenarios::private_subtrees();
            $crate::models::scenarios::report::<$G>(&shuttle(), GATE, &case, true);
        }

        #[test]
        fn shuttle_private_subtrees_fast_off() {
            let case = $crate::models::scenarios::private_subtrees();
            $crate::models::scenarios::report::<$G>(&shuttle(), GATE, &case, false);
        }

        #[test]
        fn shuttle_shared_lane_fast_on() {
            let case = $crate::models::scenarios::shared_lane();
            $crate::models::scenarios::report::<$G>(&shuttle(), GATE, &case, true);
        }

        #[test]
        fn shuttle_shared_lane_fast_off() {
            let case = $crate::models::scenarios::shared_lane();
            $crate::models::scenarios::report::<$G>(&shuttle(), GATE, &case, false);
        }

        /// Runs a decode storm, prints its schedules and retry distribution
        /// and checks the gate's bounds on it.
        fn storm(lock_step: bool) {
            let iters = $crate::models::env_number("CRTC_SHUTTLE_STORM_ITERS", DEFAULT_STORM_ITERS);
            let explorer = $Shuttle($crate::models::ShuttlePlan::with_iters(iters));
            let storm = $crate::models::scenarios::Storm {
                blocks: STORM_BLOCKS,
                reads: STORM_READS,
                lock_step,
            };
            let start = ::std::time::Instant::now();
            let retries: $crate::models::scenarios::RetryCounters = $retries;
            let stats = storm.explore::<$G>(&explorer, retries);
            println!(
                "shuttle {GATE} {}: {} schedules in {:.1} s ({})",
                storm.name(),
                stats.schedules,
                start.elapsed().as_secs_f64(),
                $crate::models::Explorer::bounds(&explorer)
            );
            println!(
                "shuttle {GATE} retry distribution ({}): {stats}",
                if lock_step { "lock step" } else { "pure" }
            );
            $(
                let check: fn(&$crate::models::scenarios::RetryStats, bool) = $check;
                check(&stats, lock_step);
            )?
        }

        /// The storms read the process-wide retry counters, so each runs
        /// alone in a child process (other tests' models bump them).
        #[test]
        fn shuttle_decode_storm_pure() {
            $crate::models::alone("shuttle_decode_storm_pure", || storm(false));
        }

        #[test]
        fn shuttle_decode_storm_lock_step() {
            $crate::models::alone("shuttle_decode_storm_lock_step", || storm(true));
        }

        #[test]
        fn case_streams_are_strict_and_valid() {
            $crate::models::scenarios::check_cases::<$G>(&shuttle());
        }

        #[test]
        fn shuttle_mutants() {
            if $crate::models::child_request().is_none()
                && ::std::env::var("CRTC_SHUTTLE_MUTANTS").is_ok_and(|v| v == "0")
            {
                println!("shuttle mutants {GATE}: skipped (CRTC_SHUTTLE_MUTANTS=0)");
                return;
            }
            let iters =
                $crate::models::env_number("CRTC_SHUTTLE_MUTANT_ITERS", DEFAULT_MUTANT_ITERS);
            let suite = $crate::models::scenarios::case_suite::<$G>(GATE, move || {
                Box::new($Shuttle($crate::models::ShuttlePlan::with_iters(iters)))
                    as Box<dyn $crate::models::Explorer>
            });
            let mutants = $crate::models::suites::shuttle_mutants(GATE);
            suite.mutants(MUTANT_TEST, &mutants, $crate::models::scenarios::case_catch);
        }
    };
}

/// The mutant lists one loom suite runs as its negative controls.
#[derive(Clone, Copy, Debug)]
pub struct SuiteMutants {
    /// The suite's name ([`Suite::gate`](crate::models::Suite)).
    pub suite: &'static str,
    /// The lists of `crtc_strategies::mutants::Mutant` it runs.
    pub lists: &'static [&'static [Mutant]],
}

/// Every loom suite's mutant lists: the single source the suites run and
/// the coverage test ([`check_catalogue`]) holds against `Mutant::ALL`.
pub const LOOM_SUITES: [SuiteMutants; 7] = [
    SuiteMutants {
        suite: "rwlock",
        lists: &[&Mutant::RWLOCK, &Mutant::RWLOCK_LOOM, &Mutant::TREE],
    },
    SuiteMutants {
        suite: "seqlock",
        lists: &[&Mutant::SEQLOCK, &Mutant::TREE],
    },
    SuiteMutants {
        suite: "epoch",
        lists: &[&Mutant::EPOCH, &Mutant::TREE],
    },
    SuiteMutants {
        suite: "sweep",
        lists: &[&Mutant::SWEEP],
    },
    SuiteMutants {
        suite: "slots",
        lists: &[&Mutant::SLOTS],
    },
    SuiteMutants {
        suite: "ranks",
        lists: &[&Mutant::RANKS, &Mutant::DIRECTORY, &Mutant::ANCHORS],
    },
    // The grace reclaimer's bag mode (`loom_bag`): epoch-gate models and
    // R1 with deferred work gathered as crossbeam-epoch gathers it.
    SuiteMutants {
        suite: "bag",
        lists: &[&Mutant::BAG],
    },
];

/// The mutants the loom suite `suite` runs, in list order.
pub fn loom_mutants(suite: &str) -> Vec<Mutant> {
    suite_mutants("LOOM_SUITES", &LOOM_SUITES, suite)
}

/// The lists of suite `suite` in `suites` (the catalogue `table`),
/// concatenated in order.
fn suite_mutants(table: &str, suites: &[SuiteMutants], suite: &str) -> Vec<Mutant> {
    suites
        .iter()
        .find(|s| s.suite == suite)
        .unwrap_or_else(|| panic!("no suite {suite} in {table}"))
        .lists
        .concat()
}

/// What must catch `mutant` in loom: the property each mutant's doc names
/// and the models that show it, tried in order. The match is exhaustive, so
/// a new `Mutant` variant does not compile until it is catalogued here.
pub fn loom_catch(mutant: Mutant) -> Catch {
    use Property::*;
    let (property, models): (Property, &[&'static str]) = match mutant {
        Mutant::None => panic!("Mutant::None is the correct code, not a negative control"),
        Mutant::SkipInternalCheck => (ReadBounds, &["L2"]),
        Mutant::ClearBitBeforeCutoff => (AtomicRead, &["L1", "demote"]),
        Mutant::NoInvalidation => (ReadBounds, &["L4b"]),
        Mutant::TailCheckOutsideSection => (ReadBounds, &["L4a", "L4b"]),
        Mutant::TailCheckAgainstHead => (FastHits, &["L4b", "L1"]),
        Mutant::AppendTrustsLookup => (OneAppendWins, &["two_appenders"]),
        Mutant::NoReaderAcquireFence | Mutant::NoWriterReleaseFence => {
            (AtomicRead, &["split", "demote"])
        }
        // The pairs' tracked cells see the write after the length's
        // publication before the reader's value check sees a default pair.
        Mutant::LenBeforePairs => (RaceFree, &["pure_append", "demote_in_place"]),
        Mutant::SeqlockRelaxedLengthPublish => (RaceFree, &["pure_append", "L1"]),
        Mutant::DemotingAppendWithoutBump => (AtomicRead, &["demote", "demote_in_place", "L1"]),
        // L2t's leaf repeats its local hashes, so the torn view (the old
        // edge with the split's child map) overcounts; L2r's distinct
        // hashes score the torn views like the before or after state.
        Mutant::SplitWithoutBump => (AtomicRead, &["L2t"]),
        Mutant::SeqlockAppendWithoutPlanBump => (SerialOutcome, &["L4b"]),
        Mutant::SeqlockRetireBeforeUnpublish => (NoFreeWhileHeld, &["pure_grow"]),
        // Both appenders pass the eligibility check before either pushes.
        Mutant::SeqlockUnexcludedWriters => (OneAppendWins, &["two_appenders"]),
        Mutant::EpochRelaxedPublish => (RaceFree, &["demote", "split"]),
        Mutant::EpochRetireBeforeUnlink => (NoFreeWhileHeld, &["demote", "demote_in_place"]),
        Mutant::EpochLenBeforePairs => (RaceFree, &["pure_append", "demote_in_place"]),
        Mutant::EpochRelaxedCoverPublish => (RaceFree, &["L3r", "L5"]),
        Mutant::EpochRelaxedDemotePublish => (RaceFree, &["demote_in_place", "L1"]),
        Mutant::EpochRelaxedLengthPublish => (RaceFree, &["pure_append", "L1"]),
        // The reader loads the closing `seq`, then the snapshot from
        // before the split with its new child map.
        Mutant::EpochRelaxedSectionClose => (AtomicRead, &["L2t"]),
        // The stale plan extends B over A's block: the concurrent reader
        // credits B with a block it never stored (C1) before the final
        // state is checked.
        Mutant::EpochAppendWithoutPlanBump => (ReadBounds, &["L4b"]),
        Mutant::EpochUnvalidatedLiveLength => (AtomicRead, &["demote_in_place", "demote"]),
        Mutant::EpochUnexcludedWriters => (NoFreeWhileHeld, &["two_appenders", "L4a"]),
        Mutant::EpochReadsReplacedSnapshotLength => (ReadYourWrites, &["L5"]),
        Mutant::SweepFreesBeforeGrace => (NoFreeWhileHeld, &["U1"]),
        Mutant::ShardedSweepFreesBeforeGrace => (NoFreeWhileHeld, &["U3"]),
        Mutant::ChildrenSortedAfterPublish => (RaceFree, &["L2r", "L2"]),
        // Every lookup returns no scores: the reader's, below the blocks
        // held throughout it, first.
        Mutant::RootFilterNotCounted => (ReadBounds, &["L2"]),
        Mutant::RacySweepClaim => (OneSweep, &["sweep_claim"]),
        Mutant::SweepFinishKeepsFlag => (SweepNotLost, &["sweep_claim"]),
        Mutant::SlotCacheIgnoresUnmaps | Mutant::SlotStampAfterLookup => {
            (SlotOwned, &["slot_reuse"])
        }
        Mutant::SlotRecycledBeforeGrace => (ReadBounds, &["R1"]),
        // As `EpochRelaxedSectionClose`, in the grace reclaimer's bag mode
        // (`loom_bag`): its retire no longer fences the section's stores.
        Mutant::EpochRetireInRelaxedSection => (AtomicRead, &["L2t"]),
        // A rank's own read after its store under a parent only another
        // rank of its lane holds; the lane's next store under blocks another
        // lane covered first.
        Mutant::SharedEntrySkipsCoverage => (ReadBounds, &["D1"]),
        Mutant::StoreSkipPastLaneCoverage => (Accepted, &["D1"]),
        // Both lanes find the anchor absent and link a node each; the rank
        // on the node the map dropped scores nothing from the anchor.
        Mutant::AnchorWritersUnlocked => (SerialOutcome, &["A1"]),
        // No loom model runs the indexer's lane threads (SHUTTLE_ONLY).
        Mutant::RemovalDropsBeforeUnmap => (Accepted, &[]),
        Mutant::RemovalWithoutFlush => (ReadBounds, &[]),
    };
    Catch::new(property, models)
}

/// What loom itself reports in any model: a data race on a loom cell and an
/// `Arc` released too often, and (every model runs over the grace reclaimer
/// or counts its pins) a block freed while held.
const LOOM_ANY: [Property; 2] = [Property::RaceFree, Property::NoFreeWhileHeld];

/// The properties loom model `model` can fail besides [`LOOM_ANY`], read off
/// its checks (`None`: no such loom model). A catcher listed for a property
/// its model cannot fail could never catch its mutant; [`check_catalogue`]
/// rejects that, and a negative-control run that sees a model fail a
/// property outside its row fails too, so the table cannot drift from the
/// checks unnoticed.
pub fn loom_emits(model: &str) -> Option<&'static [Property]> {
    use Property::*;
    Some(match model {
        // The reader models: one read, the before or after scores.
        "L1" | "L2r" | "L3r" | "L2t" => &[AtomicRead, Accepted, SerialOutcome, FastHits],
        // A reader within its bounds while the writers run.
        "L2" | "L3" | "L4a" | "L4b" => &[ReadBounds, Accepted, SerialOutcome, FastHits],
        "L5" => &[
            ReadYourWrites,
            ReadBounds,
            Accepted,
            SerialOutcome,
            FastHits,
        ],
        "split" | "demote" | "demote_in_place" | "pure_append" | "pure_grow" => {
            &[AtomicRead, SerialOutcome]
        }
        "two_appenders" => &[OneAppendWins, SerialOutcome],
        "U1" | "U3" => &[OneSweep, AtomicRead, Accepted, SerialOutcome, FastHits],
        "U2" => &[OneSweep, Accepted, SerialOutcome, FastHits],
        "sweep_claim" => &[OneSweep, SweepNotLost],
        "slot_reuse" => &[SlotOwned],
        // A reader within its bounds while a rank is removed or cleared.
        "R1" | "R2" => &[ReadBounds, Accepted, SerialOutcome],
        // A lane's own read within its bounds, its events' verdicts those of
        // the reference model, the final membership the reference model's.
        "D1" => &[ReadBounds, Accepted, SerialOutcome],
        // The final state from the anchor, then the creating lane's own
        // lookup (its own anchor, the other lane's at most).
        "A1" => &[SerialOutcome, Accepted, ReadYourWrites, ReadBounds],
        _ => return None,
    })
}

/// Whether loom model `model` can fail `property`.
pub fn loom_can_emit(model: &str, property: Property) -> bool {
    LOOM_ANY.contains(&property) || loom_emits(model).is_some_and(|p| p.contains(&property))
}

/// Mutants only shuttle runs: the indexer model's lane threads, remover and
/// late sender are beyond a loom model that finishes in about a minute.
pub const SHUTTLE_ONLY: [Mutant; 2] =
    [Mutant::RemovalDropsBeforeUnmap, Mutant::RemovalWithoutFlush];

/// Every shuttle suite's mutant lists (by the gate's `name` in
/// [`shuttle_gate_tests!`](crate::shuttle_gate_tests), and "indexer" for
/// the indexer model's binary): the mutants shuttle can see, each run
/// against every scenario of its suite. Shuttle runs every atomic as
/// SeqCst and its cells are untracked, so the ordering and plain-data
/// mutants are loom's alone ([`shuttle_catch`] says which).
pub const SHUTTLE_SUITES: [SuiteMutants; 4] = [
    SuiteMutants {
        suite: "rwlock",
        lists: &[
            &Mutant::RWLOCK,
            &[
                Mutant::SweepFreesBeforeGrace,
                Mutant::ShardedSweepFreesBeforeGrace,
                Mutant::RootFilterNotCounted,
            ],
            &Mutant::DIRECTORY,
        ],
    },
    SuiteMutants {
        suite: "seqlock",
        lists: &[
            &[
                Mutant::DemotingAppendWithoutBump,
                Mutant::SplitWithoutBump,
                Mutant::SeqlockRetireBeforeUnpublish,
            ],
            &[
                Mutant::SweepFreesBeforeGrace,
                Mutant::ShardedSweepFreesBeforeGrace,
                Mutant::RootFilterNotCounted,
            ],
            &Mutant::DIRECTORY,
        ],
    },
    SuiteMutants {
        suite: "epoch",
        lists: &[
            &[
                Mutant::EpochUnexcludedWriters,
                Mutant::EpochRetireBeforeUnlink,
            ],
            // Not ShardedSweepFreesBeforeGrace: it survived every scenario
            // at the CI budget (1,800 schedules each) under this gate; loom's
            // U3 catches it under every gate, shuttle under the other two.
            &[Mutant::SweepFreesBeforeGrace, Mutant::RootFilterNotCounted],
            &Mutant::DIRECTORY,
        ],
    },
    SuiteMutants {
        suite: "indexer",
        lists: &[&Mutant::INDEXER],
    },
];

/// The mutants the shuttle suite `suite` runs, in list order.
pub fn shuttle_mutants(suite: &str) -> Vec<Mutant> {
    suite_mutants("SHUTTLE_SUITES", &SHUTTLE_SUITES, suite)
}

/// What the shuttle scenarios can fail: a refused event, a read out of its
/// bounds, a final state no serial order gives (scores, membership, the
/// structural walk), and a free the grace reclaimer's quarantine reports.
pub const SHUTTLE_EMITS: [Property; 4] = [
    Property::Accepted,
    Property::ReadBounds,
    Property::SerialOutcome,
    Property::NoFreeWhileHeld,
];

/// The property whose failure in a shuttle scenario catches `mutant`, or
/// `None` for a mutant shuttle cannot see. The match is exhaustive, so a new
/// `Mutant` variant does not compile until it is catalogued here too.
pub fn shuttle_catch(mutant: Mutant) -> Option<Property> {
    use Property::*;
    Some(match mutant {
        Mutant::None => panic!("Mutant::None is the correct code, not a negative control"),
        // Under sequential consistency these still leave a final state no
        // serial order gives, a read out of its bounds or a refused event.
        Mutant::SkipInternalCheck => SerialOutcome,
        // Since the lane directory (issue 35) the stale extension first
        // shows as the racing rank's next store refused in `mixed` (its
        // lane has no entry for the misplaced parent), before the final
        // state is checked.
        Mutant::NoInvalidation => Accepted,
        Mutant::ClearBitBeforeCutoff
        | Mutant::DemotingAppendWithoutBump
        | Mutant::SplitWithoutBump => ReadBounds,
        Mutant::TailCheckOutsideSection => Accepted,
        // The lane directory's (the `shared lane` case, every schedule): a
        // writer's own read credits a rank with blocks it never stored; a
        // store under blocks another lane covered first finds no parent.
        Mutant::SharedEntrySkipsCoverage => ReadBounds,
        Mutant::StoreSkipPastLaneCoverage => Accepted,
        // Frees while a thread may hold the block, which the grace
        // reclaimer's quarantine reports.
        Mutant::SeqlockRetireBeforeUnpublish
        | Mutant::EpochRetireBeforeUnlink
        | Mutant::SweepFreesBeforeGrace
        | Mutant::ShardedSweepFreesBeforeGrace => NoFreeWhileHeld,
        // Two writers on one node: since the lane directory (issue 35) the
        // lost write first shows as a store refused in `mixed` (its lane has
        // no entry for its parent), before two writers retire one snapshot.
        Mutant::EpochUnexcludedWriters => Accepted,
        // The indexer model (`models::indexer`): a late event re-registers
        // a removed rank with its old slot, and another rank's valid store
        // under blocks the slot's next owner covers is refused.
        Mutant::RemovalDropsBeforeUnmap => Accepted,
        // W0's store queued before the removal survives it on a fresh slot.
        Mutant::RemovalWithoutFlush => ReadBounds,
        // Every lookup returns no scores: `mixed`'s reads during the run
        // fall below the blocks held throughout them.
        Mutant::RootFilterNotCounted => ReadBounds,
        // Fences, publication orders and plain-data races: shuttle runs
        // every atomic SeqCst and does not track cells.
        Mutant::NoReaderAcquireFence
        | Mutant::NoWriterReleaseFence
        | Mutant::LenBeforePairs
        | Mutant::SeqlockRelaxedLengthPublish
        | Mutant::EpochRelaxedPublish
        | Mutant::EpochLenBeforePairs
        | Mutant::EpochRelaxedCoverPublish
        | Mutant::EpochRelaxedDemotePublish
        | Mutant::EpochRelaxedLengthPublish
        | Mutant::EpochRelaxedSectionClose
        | Mutant::ChildrenSortedAfterPublish => return None,
        // Properties the scenarios do not check (fast-path counts, the
        // two-appender outcome).
        Mutant::TailCheckAgainstHead
        | Mutant::AppendTrustsLookup
        | Mutant::SeqlockUnexcludedWriters => return None,
        // Windows loom's small models build on purpose; whether shuttle's
        // scenarios reach them was not tried, so they are loom's alone.
        Mutant::SeqlockAppendWithoutPlanBump
        | Mutant::EpochUnvalidatedLiveLength
        | Mutant::EpochAppendWithoutPlanBump
        | Mutant::EpochReadsReplacedSnapshotLength => return None,
        // Components with loom models of their own (the sweep trigger, the
        // cached rank slots, rank removal).
        Mutant::RacySweepClaim
        | Mutant::SweepFinishKeepsFlag
        | Mutant::SlotCacheIgnoresUnmaps
        | Mutant::SlotStampAfterLookup
        | Mutant::SlotRecycledBeforeGrace => return None,
        // A fence order: shuttle runs every atomic SeqCst.
        Mutant::EpochRetireInRelaxedSection => return None,
        // No shuttle scenario creates anchors (loom's A1 does).
        Mutant::AnchorWritersUnlocked => return None,
    })
}

/// Whether `checker`'s model `model` can fail `property` (shuttle's
/// scenarios all fail the same [`SHUTTLE_EMITS`]).
pub fn can_emit(checker: &str, model: &str, property: Property) -> bool {
    match checker {
        "loom" => loom_can_emit(model, property),
        _ => SHUTTLE_EMITS.contains(&property),
    }
}

/// The coverage test of the negative controls: every `Mutant` variant
/// declared in `strategies/src/mutants.rs` is in `Mutant::ALL` and in a
/// loom suite's list (or, for [`SHUTTLE_ONLY`], in none, with a shuttle
/// property), no suite names a mutant twice, every catcher
/// [`loom_catch`] names is a loom model that can fail the property it is
/// listed for, and shuttle's lists hold exactly the mutants [`shuttle_catch`]
/// gives a property its scenarios can fail ([`SHUTTLE_EMITS`]). Panics with
/// every problem found; otherwise prints the declared mutants' names, which
/// `.ci/loom.sh` checks against the mutants its child runs report caught.
pub fn check_catalogue() {
    let mut problems = Vec::new();
    let declared = declared_mutants();
    let all: Vec<String> = Mutant::ALL.iter().map(|m| format!("{m:?}")).collect();
    for name in declared.iter().filter(|n| *n != "None") {
        if !all.contains(name) {
            problems.push(format!("{name} is declared but not in Mutant::ALL"));
        }
    }
    for mutant in Mutant::ALL {
        let suites: Vec<&str> = LOOM_SUITES
            .iter()
            .filter(|s| s.lists.iter().any(|l| l.contains(&mutant)))
            .map(|s| s.suite)
            .collect();
        if SHUTTLE_ONLY.contains(&mutant) {
            if !suites.is_empty() || shuttle_catch(mutant).is_none() {
                problems.push(format!(
                    "{mutant:?} is shuttle-only but in a loom list or without a shuttle property"
                ));
            }
            continue;
        }
        if suites.is_empty() {
            problems.push(format!("{mutant:?} is in no loom suite's list"));
        }
        let catch = loom_catch(mutant);
        for model in &catch.models {
            if !loom_can_emit(model, catch.property) {
                problems.push(format!(
                    "{mutant:?}: catcher {model} cannot fail {}",
                    catch.property.id()
                ));
            }
        }
    }
    for suite in LOOM_SUITES {
        problems.extend(listed_twice(
            "loom",
            suite.suite,
            &loom_mutants(suite.suite),
        ));
    }
    let shuttle = shuttle_problems(&mut problems);
    assert!(problems.is_empty(), "mutant catalogue: {problems:#?}");
    println!(
        "mutant catalogue: {} declared mutants, each in a loom suite's list ({} shuttle-only), every catcher able to fail its property; \
         shuttle: {shuttle} mutants in its suites' lists, each caught by a property its scenarios can fail",
        declared.len() - 1,
        SHUTTLE_ONLY.len()
    );
    // The names loom must catch, for .ci/loom.sh to hold against the
    // mutants its child runs caught (what ran, not this table); the
    // shuttle-only ones are held by .ci/shuttle.sh's suite check instead.
    let shuttle_only: Vec<String> = SHUTTLE_ONLY.iter().map(|m| format!("{m:?}")).collect();
    let names: Vec<&str> = declared
        .iter()
        .map(String::as_str)
        .filter(|n| *n != "None" && !shuttle_only.iter().any(|s| s == n))
        .collect();
    println!("mutant catalogue declares: {}", names.join(" "));
}

/// The problems of shuttle's lists (see [`check_catalogue`]), pushed onto
/// `problems`; returns how many distinct mutants the lists hold.
fn shuttle_problems(problems: &mut Vec<String>) -> usize {
    let mut listed = Vec::new();
    for suite in SHUTTLE_SUITES {
        let mutants = shuttle_mutants(suite.suite);
        problems.extend(listed_twice("shuttle", suite.suite, &mutants));
        for &mutant in &mutants {
            match shuttle_catch(mutant) {
                None => problems.push(format!(
                    "{mutant:?} is in shuttle suite {}'s list, but shuttle_catch says shuttle cannot see it",
                    suite.suite
                )),
                Some(p) if !SHUTTLE_EMITS.contains(&p) => problems.push(format!(
                    "{mutant:?}: shuttle's scenarios cannot fail {}",
                    p.id()
                )),
                Some(_) => {}
            }
            if !listed.contains(&mutant) {
                listed.push(mutant);
            }
        }
    }
    for mutant in Mutant::ALL {
        if shuttle_catch(mutant).is_some() && !listed.contains(&mutant) {
            problems.push(format!(
                "{mutant:?} has a shuttle property but is in no shuttle suite's list"
            ));
        }
    }
    listed.len()
}

/// A problem for each mutant `checker`'s suite `suite` lists more than once.
fn listed_twice(checker: &str, suite: &str, mutants: &[Mutant]) -> Vec<String> {
    mutants
        .iter()
        .enumerate()
        .filter(|(i, m)| mutants[..*i].contains(m))
        .map(|(_, m)| format!("{m:?} is listed twice in {checker} suite {suite}"))
        .collect()
}

/// The variant names of `enum Mutant` as declared in its source (`Name =
/// <id>,` lines), so a variant left out of `Mutant::ALL` is found too.
fn declared_mutants() -> Vec<String> {
    const SOURCE: &str = include_str!("../../../strategies/src/mutants.rs");
    let body = SOURCE
        .split_once("pub enum Mutant {")
        .and_then(|(_, rest)| rest.split_once("\n}"))
        .map(|(body, _)| body)
        .expect("strategies/src/mutants.rs declares `pub enum Mutant { .. }`");
    body.lines()
        .filter_map(|line| {
            let (name, id) = line.trim().strip_suffix(',')?.split_once(" = ")?;
            id.parse::<u8>().ok().map(|_| name.to_string())
        })
        .collect()
}
