//! The per-gate test lists, written once: every gate's loom binary and
//! shuttle binary is a gate type, its counters, its storm bounds and its
//! mutants, handed to one of these macros. A model is added to every gate
//! by adding it here.
//!
//! - [`loom_gate_tests!`](crate::loom_gate_tests) expands to one `#[test]`
//!   per tree model (L1–L4 with the reader models L2r and L3r, the sweep
//!   models U1 and U2) and per gate-level model (torn reads against a split,
//!   a demoting append and a pure append, in place and into a new buffer;
//!   two appenders), the serial-outcome check, and the negative controls. The pure-append test also checks that a pure append
//!   never makes a reader retry (the gate's retry counters do not move).
//! - [`shuttle_gate_tests!`](crate::shuttle_gate_tests) expands to the
//!   whole-tree scenarios (fast path on and off), the two decode storms with
//!   their retry distributions, the case-stream check and the negative
//!   controls.
//!
//! Both run their models through `$suite()` (loom) or the checker type
//! built by [`loom_explorer!`](crate::loom_explorer) /
//! [`shuttle_explorer!`](crate::shuttle_explorer) in the same binary.

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
/// `suite` builds the gate's [`Suite`](crate::models::Suite); `gate` is the
/// tree models' gate type; `explorer` the binary's loom explorer;
/// `retries` returns the gate's process-wide retry counters; `mutants` the
/// gate's mutants; `catchers` maps a mutant to the models that must catch it.
#[macro_export]
macro_rules! loom_gate_tests {
    (
        suite: $suite:ident,
        gate: $G:ty,
        explorer: $explorer:expr,
        retries: $retries:expr,
        mutants: $mutants:expr,
        catchers: $catchers:expr $(,)?
    ) => {
        /// The test that doubles as the negative controls' child.
        const MUTANT_TEST: &str = "loom_mutants_are_caught";

        $crate::model_report_tests! { $suite:
            l1_fast_append_vs_reader => "L1",
            l2r_reader_vs_divergent_split => "L2r",
            l3r_reader_vs_removal => "L3r",
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
        }

        /// Reads the process-wide retry counters, so it runs alone in a
        /// child process (other tests' models bump them).
        #[test]
        fn gate_reader_vs_pure_append() {
            $crate::models::alone("gate_reader_vs_pure_append", || {
                let retries: fn() -> (u64, u64) = $retries;
                let before = retries();
                $suite().report("pure_append");
                assert_eq!(
                    before,
                    retries(),
                    "a pure append made a reader retry (restarts, fallbacks)"
                );
            });
        }

        #[test]
        fn serial_outcomes_are_as_designed() {
            $crate::models::tree::check_serial_outcomes::<$G>(&$explorer);
        }

        #[test]
        fn loom_mutants_are_caught() {
            $suite().mutants(MUTANT_TEST, &$mutants, $catchers);
        }
    };
}

/// The shuttle tests of one gate; see the module docs. Arguments: `gate`
/// (type) and `name` (in reports); `explorer` the binary's shuttle explorer
/// type; `retries` returns the gate's process-wide (restarts, fallbacks);
/// `check_storm(&stats, lock_step)` asserts the storm's retry bounds;
/// `mutants` the gate's mutants that shuttle can see (it runs every atomic
/// as SeqCst, so ordering mutants are loom's alone) and `catch` the property
/// that must fail for each; every scenario is tried, and a survivor fails
/// the test.
#[macro_export]
macro_rules! shuttle_gate_tests {
    (
        gate: $G:ty,
        name: $name:literal,
        explorer: $Shuttle:ident,
        retries: $retries:expr,
        check_storm: $check:expr,
        mutants: $mutants:expr,
        catch: $catch:expr $(,)?
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
            let retries: fn() -> (u64, u64) = $retries;
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
            let check: fn(&$crate::models::scenarios::RetryStats, bool) = $check;
            check(&stats, lock_step);
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
            let catch: fn($crate::models::Mutant) -> $crate::models::Property = $catch;
            suite.mutants(MUTANT_TEST, &$mutants, |mutant| {
                $crate::models::Catch::new(catch(mutant), &$crate::models::scenarios::CASES)
            });
        }
    };
}
