//! One comparison run: load the stream once, split it into writes and
//! lookups, replay it through the reference model once, then for every row
//! build a fresh backend, measure it (capacity and/or keep-up, with the
//! seqlock retry counters read around the run), time the same lookups on
//! the drained final tree with no writer (their latency and lookups/s),
//! score every distinct lookup against the model, and count the index's
//! heap swept and unswept (`measurement::heap`). Correctness failures are
//! listed in the report; they do not stop the run. An approximate index's
//! differences from the model are reported in its row, not as failures.

use crate::compare::checks::crosscheck::CrossCheck;
use crate::compare::checks::oracle::{self, Oracle, Verdicts};
use crate::compare::checks::run_check;
use crate::compare::measurement::plan::Plan;
use crate::compare::measurement::{capacity, heap, keepup, measure};
use crate::compare::options::oversubscription;
use crate::compare::output::provenance::Provenance;
use crate::compare::output::repeat;
use crate::compare::output::report::{Report, Row, Settings, WorkloadInfo};
use crate::compare::registry::selected_configurations;
use crate::compare::subjects::backend::BackendStats;
use crate::compare::subjects::UPSTREAM_NAME;
use crate::compare::{
    features, load_workload, validate, CompareError, CompareOptions, Configuration, RetryCounters,
    Source, MAX_WORKERS,
};
use crtc::Refusal;
use crtc_strategies::sync::Arc;
use crtc_strategies::{AppendMiss, ReadCounters};
use crtc_verification::workload::Workload;
use indicatif::{ProgressBar, ProgressStyle};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn progress_bar(enabled: bool, message: String) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0).with_message(message);
    if let Ok(style) = ProgressStyle::with_template("{msg:28} [{bar:40}] {pos}/{len} {elapsed}") {
        bar.set_style(style);
    }
    bar
}

fn per_s(count: u64, elapsed: Duration) -> Option<f64> {
    let s = elapsed.as_secs_f64();
    (s > 0.0).then(|| count as f64 / s)
}

fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

/// A row with the figures common to both modes filled from `stats`;
/// `memberships` is the model's (rank, block) count for the final state.
fn base_row(
    cx: &Context<'_>,
    config: &Configuration,
    mode: &str,
    stats: &BackendStats,
    memberships: Option<u64>,
) -> Row {
    let threads = config.threads.unwrap_or(cx.options.lanes);
    let bytes_per = |count: u64| ratio(stats.footprint? as u64, count);
    Row {
        strategy: config.strategy.to_owned(),
        fast_path: config.fast_path,
        mode: mode.to_owned(),
        events: 0,
        blocks: 0,
        events_per_s: None,
        block_ops_per_s: None,
        cpu_ns_per_event: ratio(stats.cpu_ns, stats.applied),
        fast_path_hit_rate: stats
            .fast_path_hits
            .map(|hits| ratio(hits, stats.stores).unwrap_or(0.0)),
        fast_path_misses: AppendMiss::ALL
            .into_iter()
            .filter(|m| stats.fast_path_misses[m.index()] > 0)
            .map(|m| (m.name().to_owned(), stats.fast_path_misses[m.index()]))
            .collect(),
        read_p50_ns: None,
        read_p99_ns: None,
        update_p50_ns: None,
        update_p99_ns: None,
        backlog_at_end: None,
        bytes_per_membership: None,
        unswept_bytes_per_membership: None,
        footprint_bytes_per_membership: memberships.and_then(bytes_per),
        overcounts: None,
        undercounts: None,
        read_only_p50_ns: None,
        read_only_p99_ns: None,
        read_only_lookups_per_s: None,
        restarts_per_read: None,
        fallbacks: None,
        read_path: config.read_path.name().to_owned(),
        lookups: 0,
        hole_undercounts: None,
        bytes_per_node_membership: stats.memberships.and_then(|m| bytes_per(m as u64)),
        rejected_events: stats.errors,
        rejected: Refusal::ALL
            .into_iter()
            .filter(|r| stats.refusals[r.index()] > 0)
            .map(|r| (r.name().to_owned(), stats.refusals[r.index()]))
            .collect(),
        elapsed_s: 0.0,
        cpu_clock: stats.cpu_clock,
        read_samples: 0,
        repeats: 1,
        spread: BTreeMap::new(),
        event_threads: config.threads,
        oversubscribed: threads + cx.options.readers > cx.cores,
        approximate: !config.exact,
    }
}

/// Reader counter deltas over a run: retries per lookup and fallbacks
/// (`None` for subjects that are not gates).
struct Retries {
    read: Option<RetryCounters>,
    before: ReadCounters,
}

impl Retries {
    fn start(config: &Configuration) -> Self {
        Self {
            read: config.retries,
            before: config.retries.map(|read| read()).unwrap_or_default(),
        }
    }

    fn finish(&self, lookups: u64) -> (Option<f64>, Option<u64>) {
        let Some(read) = self.read else {
            return (None, None);
        };
        let run = read().since(self.before);
        (
            Some(ratio(run.retries, lookups).unwrap_or(0.0)),
            Some(run.fallbacks),
        )
    }
}

struct Context<'a> {
    options: &'a CompareOptions,
    /// The machine's cores (a row whose threads and readers exceed them is
    /// marked oversubscribed).
    cores: usize,
    plan: &'a Plan,
    oracle: Option<&'a Oracle>,
    schedule: keepup::Schedule,
    /// (rank, block) pairs held after the writes of the keep-up window.
    keepup_memberships: Option<u64>,
    /// The plan with upstream's sequence hashes, for the rows that need
    /// them (`Configuration::upstream_hashes`; capacity mode only).
    upstream_plan: Option<&'a Plan>,
}

impl Context<'_> {
    /// The plan `config` replays.
    fn plan_for(&self, config: &Configuration) -> &Plan {
        match (config.upstream_hashes, self.upstream_plan) {
            (true, Some(plan)) => plan,
            _ => self.plan,
        }
    }
}

/// The plan in upstream's sequence hashes, when a selected row needs it.
fn upstream_plan(options: &CompareOptions, plan: &Plan) -> Option<Plan> {
    let configs = selected_configurations(options.upstream_rows, options.strategies.as_deref());
    if !configs.iter().any(|c| c.upstream_hashes) {
        return None;
    }
    #[cfg(feature = "upstream")]
    return Some(crate::compare::subjects::dynamo::upstream_hashed(plan));
    #[cfg(not(feature = "upstream"))]
    {
        let _ = plan;
        None
    }
}

/// Heap bytes per membership of `config`'s index, swept and unswept (one
/// count for an index that prunes on removal).
fn heap_per_membership(
    cx: &Context<'_>,
    config: &Configuration,
    memberships: Option<u64>,
) -> (Option<f64>, Option<f64>) {
    let lanes = cx.options.lanes;
    let per = |bytes: Option<u64>| bytes.zip(memberships).and_then(|(b, m)| ratio(b, m));
    let plan = cx.plan_for(config);
    let swept = heap::index_bytes(|| config.backend(lanes, true), plan, true);
    let unswept = match config.sweeps {
        true => heap::index_bytes(|| config.backend(lanes, false), plan, false),
        false => swept,
    };
    (per(swept), per(unswept))
}

fn capacity_row(cx: &Context<'_>, config: &Configuration) -> Result<(Row, Verdicts), CompareError> {
    let backend = config.backend(cx.options.lanes, true);
    let bar = progress_bar(cx.options.progress, format!("{} capacity", config.label()));
    let retries = Retries::start(config);
    let plan = cx.plan_for(config);
    let mut run = capacity::run(Arc::clone(&backend), plan, cx.options.readers, &bar)?;
    let (restarts_per_read, fallbacks) = retries.finish(run.lookups);
    bar.finish_and_clear();
    // Every row's drained tree swept through its own cleanup path before the
    // read-only pass (upstream's timer would not have fired yet), so the
    // read-only figures compare like-for-like trees.
    backend.sweep();
    let mut quiet = capacity::read_only(&backend, plan, cx.options.readers, run.lookups)?;
    let verdicts = cx.oracle.map(|o| o.check(&*backend)).unwrap_or_default();
    drop(backend);
    let memberships = cx.oracle.map(Oracle::memberships);
    let (swept, unswept) = heap_per_membership(cx, config, memberships);
    let (p50, p99) = measure::p50_p99(&mut run.reads);
    let read_only_lookups_per_s = quiet.lookups_per_s();
    let (quiet_p50, quiet_p99) = measure::p50_p99(&mut quiet.reads);
    let row = Row {
        events: cx.plan.events,
        blocks: cx.plan.blocks,
        events_per_s: per_s(cx.plan.events, run.elapsed),
        block_ops_per_s: per_s(cx.plan.blocks, run.elapsed),
        read_p50_ns: p50,
        read_p99_ns: p99,
        overcounts: cx.oracle.map(|_| verdicts.overcounts),
        undercounts: cx.oracle.map(|_| verdicts.undercounts),
        hole_undercounts: cx.oracle.map(|_| verdicts.hole_undercounts),
        read_only_p50_ns: quiet_p50,
        read_only_p99_ns: quiet_p99,
        read_only_lookups_per_s,
        restarts_per_read,
        fallbacks,
        lookups: run.lookups,
        elapsed_s: run.elapsed.as_secs_f64(),
        read_samples: run.reads.len(),
        bytes_per_membership: swept,
        unswept_bytes_per_membership: unswept,
        ..base_row(cx, config, "capacity", &run.stats, memberships)
    };
    Ok((row, verdicts))
}

fn keepup_row(cx: &Context<'_>, config: &Configuration) -> Result<Row, CompareError> {
    let backend = config.backend(cx.options.lanes, true);
    let bar = progress_bar(cx.options.progress, format!("{} keep-up", config.label()));
    let retries = Retries::start(config);
    let mut run = keepup::run(
        Arc::clone(&backend),
        cx.plan,
        cx.options.readers,
        cx.schedule,
        &bar,
    )?;
    let (restarts_per_read, fallbacks) = retries.finish(run.reads.len() as u64);
    bar.finish_and_clear();
    drop(backend);
    let lookups = run.reads.len() as u64;
    let (read_p50, read_p99) = measure::p50_p99(&mut run.reads);
    let (update_p50, update_p99) = measure::p50_p99(&mut run.updates);
    // The offered span: the window, or less when the stream ends before it.
    let writes = cx.schedule.writes_in_window(cx.plan.ops.len());
    let span = Duration::try_from_secs_f64(writes as f64 / cx.schedule.rate)
        .map_or(cx.schedule.window, |d| d.min(cx.schedule.window));
    // Blocks applied in the window, prorated from the events applied.
    let applied_blocks = ratio(run.applied_in_window, run.issued_events)
        .map_or(0, |share| (share * run.issued_blocks as f64).round() as u64);
    Ok(Row {
        events: run.issued_events,
        blocks: run.issued_blocks,
        events_per_s: per_s(run.applied_in_window, span),
        block_ops_per_s: per_s(applied_blocks, span),
        read_p50_ns: read_p50,
        read_p99_ns: read_p99,
        update_p50_ns: update_p50,
        update_p99_ns: update_p99,
        backlog_at_end: Some(run.backlog),
        restarts_per_read,
        fallbacks,
        lookups,
        elapsed_s: span.as_secs_f64(),
        read_samples: run.reads.len(),
        ..base_row(cx, config, "keepup", &run.stats, cx.keepup_memberships)
    })
}

fn describe(
    options: &CompareOptions,
    workload: &Workload,
    plan: &Plan,
    oracle: Option<&Oracle>,
    load: Duration,
) -> WorkloadInfo {
    let stats = workload.stats();
    let strict = oracle.map_or_else(
        || crtc_verification::workload::check::check_strict(workload).is_ok(),
        Oracle::strict,
    );
    WorkloadInfo {
        name: workload.name.clone(),
        seed: options.seed,
        scale: matches!(options.source, Source::Preset(_)).then_some(options.scale),
        events: plan.events,
        blocks: plan.blocks,
        queries: stats.queries,
        distinct_queries: oracle.map(|o| o.query_count() as u64),
        remove_workers: stats.remove_workers,
        decode_share: workload.decode_share(),
        strict,
        load_s: load.as_secs_f64(),
    }
}

fn failure(row: &Row, verdicts: &Verdicts, strict: bool) -> String {
    let mut message = format!(
        "{}: {} overcounts, {} unexplained undercounts, {} hole undercounts ({} stream) over {} distinct queries",
        row.label(),
        verdicts.overcounts,
        verdicts.undercounts,
        verdicts.hole_undercounts,
        if strict { "strict" } else { "non-strict" },
        verdicts.queries,
    );
    verdicts
        .examples
        .iter()
        .for_each(|e| message.push_str(&format!("\n    {e}")));
    message
}

/// A failure for refusals the reference model does not make: a tree out of
/// rank slots leaves ranks unindexed, so the model's verdicts on the row
/// would blame the tree for a configured limit.
fn unmodelled_refusals(row: &Row) -> Option<String> {
    let refused = *row.rejected.get(Refusal::SlotsExhausted.name())?;
    Some(format!(
        "{}: {refused} events refused because the rank slots ran out (the tree holds at most \
         {MAX_WORKERS} ranks); the reference model has no such limit, so this row's scores \
         cannot be checked against it",
        row.label()
    ))
}

/// Warns on stderr when the run has more busy threads than cores.
fn warn_oversubscribed(oversubscribed: Option<(usize, usize)>) {
    if let Some((busy, cores)) = oversubscribed {
        eprintln!(
            "warning: {busy} busy threads on {cores} cores (--oversubscribe): latencies include \
             preemption; the report says so"
        );
    }
}

/// The failure a cross-check that found ours outside the contract adds.
fn upstream_failure(check: &CrossCheck) -> Option<String> {
    (check.ours_failures > 0).then(|| {
        format!(
            "check-upstream: {} scores of ours break the read contract ({} stream): {:?}",
            check.ours_failures,
            if check.strict { "strict" } else { "non-strict" },
            check.ours_inexact
        )
    })
}

/// Every repeat of every configuration: one list of rows per
/// (configuration, mode), filled one repeat at a time so each repeat's rows
/// share machine state; failures are tagged with their repeat.
fn measure_repeats(
    cx: &Context<'_>,
    strict: bool,
    failures: &mut Vec<String>,
) -> Result<Vec<Vec<Row>>, CompareError> {
    let options = cx.options;
    let configs = selected_configurations(options.upstream_rows, options.strategies.as_deref());
    let mut measured: Vec<Vec<Row>> = Vec::new();
    for repeat in 0..options.repeat {
        let tag = |failure: String| match options.repeat {
            1 => failure,
            _ => format!("repeat {}: {failure}", repeat + 1),
        };
        let mut rows = Vec::new();
        for config in &configs {
            if options.mode.capacity() {
                let (row, verdicts) = capacity_row(cx, config)?;
                failures.extend(unmodelled_refusals(&row).map(tag));
                if config.exact && verdicts.failed(strict) {
                    failures.push(tag(failure(&row, &verdicts, strict)));
                }
                rows.push(row);
            }
            if options.mode.keepup() {
                let row = keepup_row(cx, config)?;
                failures.extend(unmodelled_refusals(&row).map(tag));
                rows.push(row);
            }
        }
        measured.resize_with(rows.len(), Vec::new);
        measured
            .iter_mut()
            .zip(rows)
            .for_each(|(runs, row)| runs.push(row));
    }
    Ok(measured)
}

/// The rows of each repeat, in configuration order.
fn by_repeat(measured: &[Vec<Row>], repeats: usize) -> Vec<Vec<Row>> {
    (0..repeats)
        .map(|r| {
            measured
                .iter()
                .filter_map(|runs| runs.get(r).cloned())
                .collect()
        })
        .collect()
}

/// The settings a report records.
fn settings(options: &CompareOptions, oversubscribed: bool) -> Settings {
    Settings {
        lanes: options.lanes,
        readers: options.readers,
        oversubscribed,
        mode: options.mode.name().to_owned(),
        rate: options.rate,
        window_s: options.window.as_secs_f64(),
    }
}

/// Runs the whole comparison. Correctness failures do not stop the run; they
/// are listed in [`Report::failures`].
pub fn run(options: &CompareOptions) -> Result<Report, CompareError> {
    validate(options)?;
    let machine = measure::Machine::detect();
    let oversubscribed = oversubscription(options, machine.cores);
    warn_oversubscribed(oversubscribed);
    // The stream, the plan's copy of it and the reference model.
    crate::compare::budget::check_preset_fits(options, 3)?;
    let started = Instant::now();
    let workload = load_workload(options)?;
    let load = started.elapsed();
    let plan = Plan::new(&workload);
    // Unchained streams break the model's block identity: no verdicts.
    let oracle = (options.mode.capacity() && !options.unchained).then(|| Oracle::new(&workload));
    let info = describe(options, &workload, &plan, oracle.as_ref(), load);
    let upstream_check = match options.check_upstream {
        true => Some(run_check(&workload, options.check_limit)?),
        false => None,
    };
    drop(workload);
    let schedule = keepup::Schedule {
        rate: options.rate,
        window: options.window,
    };
    let writes = schedule.writes_in_window(plan.ops.len());
    let rehashed = upstream_plan(options, &plan);
    let cx = Context {
        options,
        cores: machine.cores,
        plan: &plan,
        oracle: oracle.as_ref(),
        schedule,
        keepup_memberships: (options.mode.keepup())
            .then(|| oracle::memberships_after(&plan.ops[..writes])),
        upstream_plan: rehashed.as_ref(),
    };
    let mut failures: Vec<String> = upstream_check.iter().filter_map(upstream_failure).collect();
    let measured = measure_repeats(&cx, info.strict, &mut failures)?;
    let ratios = repeat::ratios(&by_repeat(&measured, options.repeat), UPSTREAM_NAME);
    Ok(Report {
        machine,
        git_revision: measure::git_revision(),
        workload: info,
        argv: options.argv.clone(),
        rows: measured
            .iter()
            .filter_map(|runs| repeat::summarise(runs))
            .collect(),
        settings: settings(options, oversubscribed.is_some()),
        failures,
        features: features(),
        git_dirty: measure::git_dirty(),
        upstream_check,
        ratios,
        provenance: Provenance::detect(match &options.source {
            Source::Trace(path) => Some(path.as_path()),
            _ => None,
        }),
    })
}
