//! `crtc compare --trace T --sweep` (or `--benchmark-duration-ms W`):
//! upstream's `mooncake_bench` in its own terms. The trace is expanded and
//! laid out on a per-worker timeline once
//! ([`crtc_verification::workload::expand`]); then for every window, longest
//! first, every selected strategy (fast path on where it has a switch) and
//! upstream 1.6.1 (feature `upstream`) replays the same schedule on a fresh
//! index ([`window`]), round-robin so
//! the rows of one window share machine state.
//!
//! Each row: offered and achieved operations and block operations per
//! second, find_matches service p50/p99/p99.9, elapsed ÷ window, and whether
//! the row kept up. The windows of `--sweep` are `--sweep-steps` values
//! evenly spaced in log scale from `--sweep-max-ms` down to `--sweep-min-ms`.

use crate::compare::measurement::measure::CpuClock;
use crate::compare::measurement::measure::{git_dirty, git_revision, percentile, Machine};
use crate::compare::measurement::plan::Plan;
use crate::compare::measurement::window::{self, Deadlines, WindowSetup};
use crate::compare::options::trace_timeline;
use crate::compare::output::plots::command_line;
use crate::compare::output::provenance::Provenance;
use crate::compare::output::sweep_pairs::{self, PairedSummary, PairedWindow};
use crate::compare::registry::selected_configurations;
use crate::compare::{features, validate, CompareError, CompareOptions, Configuration, Source};
use crtc_strategies::sync::Arc;
use crtc_verification::workload::expand::TraceShape;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Duration;

/// `n` windows (ms) evenly spaced in log scale from `max_ms` down to
/// `min_ms`, rounded to whole milliseconds (one window: `max_ms`).
pub fn sweep_windows(min_ms: u64, max_ms: u64, steps: usize) -> Vec<u64> {
    if steps <= 1 {
        return vec![max_ms];
    }
    let (lo, hi) = ((min_ms as f64).ln(), (max_ms as f64).ln());
    (0..steps)
        .map(|i| {
            let t = i as f64 / (steps - 1) as f64;
            (hi * (1.0 - t) + lo * t).exp().round() as u64
        })
        .collect()
}

/// One strategy at one window.
#[derive(Clone, Debug, Serialize)]
pub struct SweepRow {
    /// Gate name, "global-lock" or the upstream row's name.
    pub strategy: String,
    /// The benchmark window, ms.
    pub window_ms: u64,
    /// (lookups + events) ÷ window.
    pub offered_ops_per_s: f64,
    /// (lookups + events) ÷ elapsed.
    pub achieved_ops_per_s: f64,
    /// Block operations ÷ window.
    pub offered_block_ops_per_s: f64,
    /// Block operations ÷ elapsed.
    pub achieved_block_ops_per_s: f64,
    /// CPU time of the index's lane threads ÷ the corpus's events, ns
    /// (none when the lane threads' clocks could not be read).
    pub lane_cpu_ns_per_event: Option<f64>,
    /// find_matches service time percentiles, ns.
    pub find_matches_p50_ns: Option<u64>,
    /// p99.
    pub find_matches_p99_ns: Option<u64>,
    /// p99.9.
    pub find_matches_p999_ns: Option<u64>,
    /// Start to last completion, drain included, seconds.
    pub elapsed_s: f64,
    /// Start to the last write issued, seconds.
    pub issue_span_s: f64,
    /// Issue span ≤ 1.01 × window and elapsed ≤ 1.10 × window.
    pub kept_up: bool,
    /// Lookups of the `--find-matches-concurrency` threads (not in the corpus).
    pub stress_lookups: u64,
    /// Events the index refused.
    pub rejected_events: u64,
}

/// The corpus every row replays.
#[derive(Clone, Debug, Serialize)]
pub struct Corpus {
    /// Its name (trace and shape).
    pub name: String,
    /// Lookups.
    pub lookups: u64,
    /// Events.
    pub events: u64,
    /// Block operations: lookup blocks + stored + removed blocks.
    pub block_ops: u64,
    /// Ranks (workers × worker duplication).
    pub ranks: usize,
    /// Seconds to build it.
    pub build_s: f64,
}

/// A whole sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepReport {
    /// The command line.
    pub argv: Vec<String>,
    /// Where it ran.
    pub machine: Machine,
    /// Compiler, date, topology, kernel, allocator, trace.
    pub provenance: Provenance,
    /// `git rev-parse HEAD`.
    pub git_revision: String,
    /// Whether tracked files differed from it.
    pub git_dirty: bool,
    /// Cargo features of the binary.
    pub features: Vec<String>,
    /// Upstream's shaping flags.
    pub shape: ShapeSettings,
    /// The corpus.
    pub corpus: Corpus,
    /// One row per window × strategy.
    pub rows: Vec<SweepRow>,
    /// Every strategy's ratios to upstream's row of the same window.
    pub paired: Vec<PairedWindow>,
    /// Those ratios summarised over the windows, per strategy.
    pub paired_summary: Vec<PairedSummary>,
}

/// The flags that shaped the corpus and the run.
#[derive(Clone, Debug, Serialize)]
pub struct ShapeSettings {
    /// `--trace-length-factor`.
    pub trace_length_factor: u64,
    /// `--trace-duplication-factor`.
    pub trace_duplication_factor: u64,
    /// `--num-unique-inference-workers`.
    pub num_unique_inference_workers: usize,
    /// `--inference-worker-duplication-factor`.
    pub inference_worker_duplication_factor: usize,
    /// `--trace-simulation-duration-ms`.
    pub trace_simulation_duration_ms: Option<u64>,
    /// `--capacity` (blocks per worker).
    pub capacity_blocks: usize,
    /// `--seed`.
    pub seed: u64,
    /// Lane threads.
    pub lanes: usize,
    /// Scheduled reader threads.
    pub readers: usize,
    /// `--find-matches-concurrency`.
    pub find_matches_concurrency: usize,
}

fn shape_settings(options: &CompareOptions, workers: usize, capacity: usize) -> ShapeSettings {
    let TraceShape {
        length_factor,
        duplication_factor,
        worker_duplication,
        simulation_ms,
    } = options.shape;
    ShapeSettings {
        trace_length_factor: length_factor,
        trace_duplication_factor: duplication_factor,
        num_unique_inference_workers: workers,
        inference_worker_duplication_factor: worker_duplication,
        trace_simulation_duration_ms: simulation_ms,
        capacity_blocks: capacity,
        seed: options.seed,
        lanes: options.lanes,
        readers: options.readers,
        find_matches_concurrency: options.find_matches_concurrency,
    }
}

/// The rows a sweep measures: each strategy once, fast path on where it
/// has a switch.
fn sweep_configurations(options: &CompareOptions) -> Vec<Configuration> {
    selected_configurations(options.upstream_rows, options.strategies.as_deref())
        .into_iter()
        .filter(|c| c.fast_path != Some(false))
        .collect()
}

struct Cell<'a> {
    plan: &'a Plan,
    deadlines: &'a Deadlines,
    corpus: &'a Corpus,
    options: &'a CompareOptions,
}

fn measure(cell: &Cell<'_>, config: &Configuration, window_ms: u64) -> Result<SweepRow, String> {
    let backend = config.backend(cell.options.lanes, true);
    let setup = WindowSetup {
        window: Duration::from_millis(window_ms),
        readers: cell.options.readers,
        stress: cell.options.find_matches_concurrency,
    };
    let mut run = window::run(Arc::clone(&backend), cell.plan, cell.deadlines, &setup)?;
    drop(backend);
    run.reads.sort_unstable();
    let ops = (cell.corpus.lookups + cell.corpus.events) as f64;
    let lane_cpu_ns_per_event = (run.stats.cpu_clock != CpuClock::Process)
        .then(|| run.stats.cpu_ns as f64 / cell.corpus.events.max(1) as f64);
    let blocks = cell.corpus.block_ops as f64;
    let (w, e) = (setup.window.as_secs_f64(), run.elapsed.as_secs_f64());
    Ok(SweepRow {
        strategy: config.strategy.to_owned(),
        window_ms,
        offered_ops_per_s: ops / w,
        achieved_ops_per_s: ops / e.max(f64::MIN_POSITIVE),
        offered_block_ops_per_s: blocks / w,
        achieved_block_ops_per_s: blocks / e.max(f64::MIN_POSITIVE),
        lane_cpu_ns_per_event,
        find_matches_p50_ns: percentile(&run.reads, 50.0),
        find_matches_p99_ns: percentile(&run.reads, 99.0),
        find_matches_p999_ns: percentile(&run.reads, 99.9),
        elapsed_s: e,
        issue_span_s: run.issue_span.as_secs_f64(),
        kept_up: window::kept_up(&run, setup.window),
        stress_lookups: run.stress_lookups,
        rejected_events: run.stats.errors,
    })
}

/// Runs the sweep `options` describe (`options.windows`, a trace source).
pub fn run_sweep(options: &CompareOptions) -> Result<SweepReport, CompareError> {
    validate(options)?;
    let (Source::Trace(path), Some(windows)) = (&options.source, &options.windows) else {
        return Err(CompareError(
            "--sweep and --benchmark-duration-ms replay a trace: give --trace PATH".to_owned(),
        ));
    };
    let started = std::time::Instant::now();
    let (timeline, config) = trace_timeline(options, path)?;
    let deadlines = Deadlines::new(&timeline.workload, &timeline.positions);
    let plan = Plan::new(&timeline.workload);
    let corpus = Corpus {
        name: timeline.workload.name.clone(),
        lookups: deadlines.lookups.len() as u64,
        events: plan.events,
        block_ops: deadlines.lookup_blocks + plan.blocks,
        ranks: config.workers * options.shape.worker_duplication,
        build_s: started.elapsed().as_secs_f64(),
    };
    drop(timeline);
    let cell = Cell {
        plan: &plan,
        deadlines: &deadlines,
        corpus: &corpus,
        options,
    };
    let mut rows = Vec::new();
    for &window_ms in windows {
        for config in sweep_configurations(options) {
            rows.push(measure(&cell, &config, window_ms)?);
        }
    }
    let paired = sweep_pairs::pair(&rows);
    let paired_summary = sweep_pairs::summarise(&paired);
    Ok(SweepReport {
        argv: options.argv.clone(),
        machine: Machine::detect(),
        provenance: Provenance::detect(Some(path)),
        git_revision: git_revision(),
        git_dirty: git_dirty(),
        features: features(),
        shape: shape_settings(options, config.workers, config.capacity_blocks),
        corpus,
        rows,
        paired,
        paired_summary,
    })
}

fn rate(v: f64) -> String {
    crate::compare::output::report::rate(Some(v))
}

fn micros(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".to_owned(), |n| format!("{:.1}", n as f64 / 1e3))
}

impl SweepReport {
    /// The header: command, machine, revision, features and provenance.
    fn header(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "- command: `{}`", command_line(&self.argv));
        let _ = writeln!(
            out,
            "- machine: {} ({} logical cores, {})",
            self.machine.hostname, self.machine.cores, self.machine.cpu_model
        );
        let dirty = if self.git_dirty {
            " (with uncommitted changes in tracked files)"
        } else {
            ""
        };
        let _ = writeln!(out, "- git revision: {}{dirty}", self.git_revision);
        let _ = writeln!(out, "- features: {}", self.features.join(", "));
        out.push_str(&self.provenance.markdown());
        out
    }

    /// The corpus and settings line.
    fn corpus_line(&self) -> String {
        let (c, s) = (&self.corpus, &self.shape);
        format!(
            "{}: {} lookups + {} events = {} operations, {} block operations, {} ranks \
             ({} workers × {}), capacity {} blocks per worker, seed {}; {} lanes, {} readers, \
             {} find_matches stress threads; built in {:.1} s",
            c.name,
            c.lookups,
            c.events,
            c.lookups + c.events,
            c.block_ops,
            c.ranks,
            s.num_unique_inference_workers,
            s.inference_worker_duplication_factor,
            s.capacity_blocks,
            s.seed,
            s.lanes,
            s.readers,
            s.find_matches_concurrency,
            c.build_s
        )
    }

    /// The report as markdown: header, corpus, one table row per window ×
    /// strategy.
    pub fn render_markdown(&self) -> String {
        let mut out = String::from("# Mooncake trace sweep (upstream's expansion and window)\n\n");
        out.push_str(&self.header());
        let _ = writeln!(out, "\n{}\n", self.corpus_line());
        out.push_str(
            "| strategy | window ms | offered ops/s | achieved ops/s | offered block ops/s | \
             achieved block ops/s | lane CPU ns/event | find_matches p50 µs | p99 µs | p99.9 µs | \
             elapsed ÷ window | kept up |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
        );
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} |",
                r.strategy,
                r.window_ms,
                rate(r.offered_ops_per_s),
                rate(r.achieved_ops_per_s),
                rate(r.offered_block_ops_per_s),
                rate(r.achieved_block_ops_per_s),
                r.lane_cpu_ns_per_event
                    .map_or_else(|| "-".to_owned(), |n| format!("{n:.0}")),
                micros(r.find_matches_p50_ns),
                micros(r.find_matches_p99_ns),
                micros(r.find_matches_p999_ns),
                r.elapsed_s * 1000.0 / r.window_ms as f64,
                if r.kept_up { "yes" } else { "no" }
            );
        }
        out.push_str(
            "\nkept up: last write issued within 1.01 × window and last completion (drain \
             included) within 1.10 × window (upstream's gen-3 rule). Lane CPU: the CPU time of \
             the index's lane threads over the corpus's events (\"-\" where their clocks could \
             not be read).\n",
        );
        out.push_str(&sweep_pairs::render(&self.paired_summary));
        out
    }

    /// The report as one JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_log_spaced_longest_first() {
        assert_eq!(sweep_windows(1000, 50_000, 1), [50_000]);
        assert_eq!(
            sweep_windows(750, 24_000, 6),
            [24_000, 12_000, 6000, 3000, 1500, 750]
        );
        assert_eq!(sweep_windows(100, 100, 3), [100, 100, 100]);
    }
}
