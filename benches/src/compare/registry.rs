//! The subjects of a comparison, listed once: every compiled gate (with how
//! its readers synchronize and its readers' counters), and the rows
//! they make with the fast path on and off, followed by the global-lock
//! baseline and, with feature `upstream`, NVIDIA Dynamo's published tree;
//! with `--upstream-rows all`, then the indexers a dynamo user picks and
//! crtc's gates inside upstream's pool, beside crtc's own indexer, at 1 and
//! 4 event threads (`subjects::dynamo`).

use crate::compare::checks::crosscheck::SerialIndex;
use crate::compare::output::report::label;
use crate::compare::subjects::backend::{Backend, IndexerBackend};
use crate::compare::subjects::baseline::GlobalLockIndexer;
use crate::compare::subjects::serial::build_serial;
#[cfg(feature = "upstream")]
use crate::compare::subjects::{dynamo, UPSTREAM_NAME};
use crtc_strategies::sync::Arc;
use crtc_strategies::ShapeGate;
pub use crtc_strategies::{ReadCounters, ReadPath};

/// How one backend is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setup {
    /// Lane (event) threads.
    pub lanes: usize,
    /// The decode fast path on or off (crtc's trees).
    pub fast_path: bool,
    /// Whether the index schedules its own stale-node sweeps: off for the
    /// unswept heap count (crtc's `SweepPolicy::disabled`; indexes that
    /// cannot switch theirs off ignore it, see `subjects::dynamo`).
    pub sweeping: bool,
}

/// Builds a backend.
pub type Build = fn(Setup) -> Arc<dyn Backend>;

/// Builds a serially applied tree (label, fast path) for the cross-check.
pub type BuildSerial = fn(label: String, fast_path: bool) -> Box<dyn SerialIndex>;

/// Reads a gate's reader counters ([`ShapeGate::read_counters`]).
pub type RetryCounters = fn() -> ReadCounters;

/// One compiled gate.
#[derive(Clone, Copy, Debug)]
pub struct Gate {
    /// The row's strategy name ([`ShapeGate::NAME`]).
    pub name: &'static str,
    /// Its indexer.
    pub build: Build,
    /// Its tree applied serially.
    pub serial: BuildSerial,
    /// How its readers synchronize.
    pub read_path: ReadPath,
    /// Its readers' counters.
    pub retries: RetryCounters,
}

fn build_indexer<G: ShapeGate>(setup: Setup) -> Arc<dyn Backend> {
    Arc::new(IndexerBackend::<G>::with_setup(setup))
}

fn build_baseline(setup: Setup) -> Arc<dyn Backend> {
    Arc::new(GlobalLockIndexer::new(setup.lanes))
}

/// The registry entry of gate `G`.
fn gate<G: ShapeGate>() -> Gate {
    Gate {
        name: G::NAME,
        build: build_indexer::<G>,
        serial: build_serial::<G>,
        read_path: G::READ_PATH,
        retries: G::read_counters,
    }
}

/// One entry of [`gates`] per gate of [`for_each_bench_gate!`](crate::for_each_bench_gate).
macro_rules! push_gate {
    ($module:ident, $gate:ty, $label:literal, $gates:ident) => {
        $gates.push(gate::<$gate>());
    };
}

/// Every compiled gate, in report order (the order of
/// [`for_each_bench_gate!`](crate::for_each_bench_gate): the gates of
/// `crtc_strategies::for_each_gate!`, then the outside ones), each row named by its gate's
/// [`ShapeGate::NAME`].
pub fn gates() -> Vec<Gate> {
    let mut gates = Vec::new();
    push_gates(&mut gates);
    gates
}

fn push_gates(gates: &mut Vec<Gate>) {
    crate::for_each_bench_gate!(push_gate, gates);
}

/// One row of the comparison before it is measured.
#[derive(Clone, Copy, Debug)]
pub struct Configuration {
    /// Gate name, "global-lock" or the upstream row's name.
    pub strategy: &'static str,
    /// Fast path on/off (`None`: no switch).
    pub fast_path: Option<bool>,
    /// Its backend.
    pub build: Build,
    /// How its readers synchronize.
    pub read_path: ReadPath,
    /// Its readers' counters (gate rows only: the baseline and upstream do
    /// not count theirs).
    pub retries: Option<RetryCounters>,
    /// Event threads fixed by the row (`None`: `--lanes`).
    pub threads: Option<usize>,
    /// Whether a score outside the reference model's bounds fails the run
    /// (`false`: an approximate index, whose differences are reported).
    pub exact: bool,
    /// Whether the index can hold dead nodes a sweep would unlink (`false`:
    /// it prunes on removal, so its swept and unswept heap are one count).
    pub sweeps: bool,
    /// Whether the index recomputes upstream's sequence hashes from a
    /// lookup's local hashes, and so replays the stream with its external
    /// hashes relabelled to upstream's scheme (`dynamo::upstream_hashed`).
    pub upstream_hashes: bool,
}

impl Configuration {
    /// "rwlock fast", "rwlock general", "global-lock", or with fixed event
    /// threads "upstream-pool-crtc ×4".
    pub fn label(&self) -> String {
        threaded(label(self.strategy, self.fast_path), self.threads)
    }

    /// Its backend, with the row's event threads (or `lanes`) and the
    /// index's own sweeping on or off.
    pub fn backend(&self, lanes: usize, sweeping: bool) -> Arc<dyn Backend> {
        (self.build)(Setup {
            lanes: self.threads.unwrap_or(lanes),
            fast_path: self.fast_path.unwrap_or(false),
            sweeping,
        })
    }

    /// A crtc gate's row (`Indexer<G>`).
    fn gate(gate: &Gate, fast_path: bool, threads: Option<usize>) -> Self {
        Self {
            strategy: gate.name,
            fast_path: Some(fast_path),
            build: gate.build,
            read_path: gate.read_path,
            retries: Some(gate.retries),
            threads,
            exact: true,
            sweeps: true,
            upstream_hashes: false,
        }
    }
}

/// `label` with the row's fixed event threads, if any.
pub fn threaded(label: String, threads: Option<usize>) -> String {
    match threads {
        Some(n) => format!("{label} ×{n}"),
        None => label,
    }
}

/// Which upstream rows a run has (`--upstream-rows`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpstreamRows {
    /// The one `upstream-1.6.1` row (feature `upstream`).
    #[default]
    Default,
    /// Also every indexer a dynamo user picks and crtc's gates inside
    /// upstream's pool, beside crtc's own indexer, at 1 and 4 event threads.
    All,
}

/// Every gate with the fast path on, then off, then the global-lock
/// baseline, then (feature `upstream`) upstream's CRTC; with
/// [`UpstreamRows::All`], then per event-thread count the rows of
/// `subjects::dynamo` and crtc's own indexer per gate (fast path on).
pub fn configurations(rows: UpstreamRows) -> Vec<Configuration> {
    let mut all: Vec<Configuration> = gates()
        .iter()
        .flat_map(|gate| [true, false].map(|fast| Configuration::gate(gate, fast, None)))
        .collect();
    all.push(Configuration {
        strategy: "global-lock",
        fast_path: None,
        build: build_baseline,
        read_path: ReadPath::Lock,
        retries: None,
        threads: None,
        exact: true,
        sweeps: false,
        upstream_hashes: false,
    });
    #[cfg(feature = "upstream")]
    all.push(Configuration {
        strategy: UPSTREAM_NAME,
        fast_path: None,
        build: dynamo::build_pool_crtc,
        read_path: ReadPath::Lock,
        retries: None,
        threads: None,
        exact: true,
        sweeps: true,
        upstream_hashes: false,
    });
    #[cfg(feature = "upstream")]
    if rows == UpstreamRows::All {
        for threads in dynamo::THREADS {
            all.extend(dynamo::configurations(threads));
            let own = gates().into_iter();
            all.extend(own.map(|gate| Configuration::gate(&gate, true, Some(threads))));
        }
    }
    #[cfg(not(feature = "upstream"))]
    let _ = rows;
    all
}

/// The strategy names of [`configurations`], in order, each once.
pub fn strategy_names(rows: UpstreamRows) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for config in configurations(rows) {
        if !names.contains(&config.strategy) {
            names.push(config.strategy);
        }
    }
    names
}

/// The configurations of `rows` that `--strategies` selects (all of them
/// without it).
pub fn selected_configurations(
    rows: UpstreamRows,
    strategies: Option<&[String]>,
) -> Vec<Configuration> {
    configurations(rows)
        .into_iter()
        .filter(|c| strategies.is_none_or(|names| names.iter().any(|n| n == c.strategy)))
        .collect()
}

/// Every compiled gate with the fast path on and off, applied serially (the
/// "ours" side of the cross-check).
pub fn serial_trees() -> Vec<Box<dyn SerialIndex>> {
    gates()
        .into_iter()
        .flat_map(|gate| {
            [true, false].map(|fast| (gate.serial)(label(gate.name, Some(fast)), fast))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gate_runs_fast_and_general_then_the_baseline() {
        let configs = configurations(UpstreamRows::Default);
        let labels: Vec<String> = configs.iter().map(Configuration::label).collect();
        let gates = gates().len();
        let upstream = usize::from(cfg!(feature = "upstream"));
        assert_eq!(labels.len(), 2 * gates + 1 + upstream);
        assert_eq!(&labels[..2], ["rwlock fast", "rwlock general"]);
        assert_eq!(labels[2 * gates], "global-lock");
        if upstream == 1 {
            assert_eq!(labels.last().map(String::as_str), Some("upstream-1.6.1"));
        }
        let mut names: Vec<&str> = configs.iter().map(|c| c.strategy).collect();
        names.dedup();
        let distinct: rustc_hash::FxHashSet<&str> = names.iter().copied().collect();
        assert_eq!(distinct.len(), names.len(), "row names repeat: {names:?}");
        let expected = 1
            + usize::from(cfg!(feature = "seqlock"))
            + usize::from(cfg!(feature = "epoch"))
            + usize::from(cfg!(feature = "seize"))
            + usize::from(cfg!(feature = "mutex-gate"));
        assert_eq!(gates, expected);
        let backend = configs[0].backend(1, true);
        backend.flush();
        assert_eq!(backend.applied(), 0);
        assert_eq!(serial_trees().len(), 2 * gates);
    }
}
