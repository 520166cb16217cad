//! The subjects of a comparison, listed once: every compiled gate (with how
//! its readers synchronize and its readers' counters), and the rows
//! they make with the fast path on and off, followed by the global-lock
//! baseline and, with feature `upstream`, NVIDIA Dynamo's published tree.

use crate::compare::checks::crosscheck::SerialIndex;
use crate::compare::output::report::label;
use crate::compare::subjects::backend::{Backend, IndexerBackend};
use crate::compare::subjects::baseline::GlobalLockIndexer;
use crate::compare::subjects::serial::build_serial;
#[cfg(feature = "upstream")]
use crate::compare::subjects::upstream;
use crtc_strategies::sync::Arc;
use crtc_strategies::ShapeGate;
pub use crtc_strategies::{ReadCounters, ReadPath};

/// Builds a backend with `lanes` lanes and the fast path on or off.
pub type Build = fn(lanes: usize, fast_path: bool) -> Arc<dyn Backend>;

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

fn build_indexer<G: ShapeGate>(lanes: usize, fast_path: bool) -> Arc<dyn Backend> {
    Arc::new(IndexerBackend::<G>::new(lanes, fast_path))
}

fn build_baseline(lanes: usize, _fast_path: bool) -> Arc<dyn Backend> {
    Arc::new(GlobalLockIndexer::new(lanes))
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
}

impl Configuration {
    /// "rwlock fast", "rwlock general" or "global-lock".
    pub fn label(&self) -> String {
        label(self.strategy, self.fast_path)
    }
}

/// Every gate with the fast path on, then off, then the global-lock
/// baseline, then (feature `upstream`) upstream's CRTC.
pub fn configurations() -> Vec<Configuration> {
    let mut all: Vec<Configuration> = gates()
        .into_iter()
        .flat_map(|gate| {
            [true, false].map(|fast| Configuration {
                strategy: gate.name,
                fast_path: Some(fast),
                build: gate.build,
                read_path: gate.read_path,
                retries: Some(gate.retries),
            })
        })
        .collect();
    all.push(Configuration {
        strategy: "global-lock",
        fast_path: None,
        build: build_baseline,
        read_path: ReadPath::Lock,
        retries: None,
    });
    #[cfg(feature = "upstream")]
    all.push(Configuration {
        strategy: upstream::NAME,
        fast_path: None,
        build: upstream::build,
        read_path: ReadPath::Lock,
        retries: None,
    });
    all
}

/// The strategy names of [`configurations`], in order, each once.
pub fn strategy_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for config in configurations() {
        if !names.contains(&config.strategy) {
            names.push(config.strategy);
        }
    }
    names
}

/// The configurations `--strategies` selects (all of them without it).
pub fn selected_configurations(strategies: Option<&[String]>) -> Vec<Configuration> {
    configurations()
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
        let configs = configurations();
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
        let backend = (configs[0].build)(1, true);
        backend.flush();
        assert_eq!(backend.applied(), 0);
        assert_eq!(serial_trees().len(), 2 * gates);
    }
}
