//! `crtc compare`: one workload replayed through every compiled gate with
//! the decode fast path on and off, plus a global-lock baseline, in write
//! capacity and/or keep-up mode, each run checked against the reference
//! model.
//!
//! The driver reads top to bottom:
//!
//! - [`options`](CompareOptions): what a run takes, its validation, and the
//!   stream it names ([`load_workload`]);
//! - [`budget`]: a preset scale too large for this machine refused up
//!   front with the size it needs;
//! - registry: the subjects listed once ([`gates`], [`configurations`]);
//! - [`subjects`]: the indexes measured, behind one backend trait;
//! - [`measurement`]: the stream split into writes and lookups, capacity and
//!   keep-up runs, clocks and percentiles;
//! - [`checks`]: every row scored against the reference model, and the
//!   serial cross-check against upstream (`--check-upstream`);
//! - [`run`]: one comparison from options to [`Report`];
//! - [`output`]: the table and JSON report, SVG charts and paper tables;
//! - [`sweep`]: upstream's windowed trace replay and sweep (`--sweep`,
//!   `--benchmark-duration-ms`) over the expanded trace;
//! - [`validate`](mod@validate): the rules that refuse options and flags a run cannot use.
//!
//! Adding a gate is one line in the registry. With feature `upstream`, NVIDIA
//! Dynamo's published CRTC is one more row and the peer of the serial
//! cross-check; `--upstream-rows all` adds every indexer of 1.6.1 a router
//! would pick and crtc's gates inside upstream's pool, at 1 and 4 event
//! threads.

pub mod budget;
pub mod checks;
pub mod measurement;
mod options;
pub mod output;
mod registry;
mod run;
pub mod subjects;
pub mod sweep;
pub mod validate;

#[cfg(feature = "upstream")]
pub use checks::check_upstream;
pub use options::{
    features, load_workload, trace_timeline, validate, CompareError, CompareOptions, Mode, Source,
    DEFAULT_CHECK_LIMIT, DEFAULT_RATE, DEFAULT_SCALE, DEFAULT_SEED, DEFAULT_WINDOW,
    MAX_SWEEP_STEPS, MAX_WORKERS, UPSTREAM_MISSING, UPSTREAM_ROWS_MISSING,
};
pub use output::report::{Report, Row, REPORT_KEYS, ROW_KEYS};
pub use output::{paper, plots};
pub use registry::{
    configurations, gates, serial_trees, Build, BuildSerial, Configuration, Gate, ReadPath,
    RetryCounters, Setup, UpstreamRows,
};
pub use run::run;
