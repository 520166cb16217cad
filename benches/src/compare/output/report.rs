//! The result of `crtc compare`: rows, the workload, provenance; the table
//! printed to stdout and the JSON document written by `--json`.

use crate::compare::checks::crosscheck::CrossCheck;
use crate::compare::measurement::measure::{CpuClock, Machine};
use crate::compare::output::provenance::Provenance;
use crate::compare::output::repeat::RatioSummary;
use crate::compare::registry::threaded;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Every key a JSON row carries (the schema of `--json`; extra diagnostic
/// keys follow these).
pub const ROW_KEYS: [&str; 30] = [
    "rejected",
    "repeats",
    "spread",
    "strategy",
    "fast_path",
    "mode",
    "events",
    "blocks",
    "events_per_s",
    "block_ops_per_s",
    "cpu_ns_per_event",
    "fast_path_hit_rate",
    "fast_path_misses",
    "read_p50_ns",
    "read_p99_ns",
    "update_p50_ns",
    "update_p99_ns",
    "backlog_at_end",
    "bytes_per_membership",
    "overcounts",
    "undercounts",
    "read_only_p50_ns",
    "read_only_p99_ns",
    "restarts_per_read",
    "fallbacks",
    "unswept_bytes_per_membership",
    "read_only_lookups_per_s",
    "event_threads",
    "oversubscribed",
    "approximate",
];

/// Every top-level key of the `--json` document.
pub const REPORT_KEYS: [&str; 6] = [
    "machine",
    "git_revision",
    "workload",
    "argv",
    "rows",
    "provenance",
];

/// One measured configuration. `None` (JSON `null`) where the mode does not
/// measure a figure.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Gate name, or "global-lock" for the baseline.
    pub strategy: String,
    /// Whether the decode fast path was on (`None` for the baseline).
    pub fast_path: Option<bool>,
    /// "capacity" or "keepup".
    pub mode: String,
    /// KV events replayed (capacity) or enqueued inside the window (keep-up).
    pub events: u64,
    /// Blocks those events name (stored plus removed).
    pub blocks: u64,
    /// Events per second: drain-inclusive (capacity); applied by the end of
    /// the window per second of offered span (keep-up; the span is the
    /// window, or shorter when the stream runs out first).
    pub events_per_s: Option<f64>,
    /// Stored plus removed blocks per second, like `events_per_s`.
    pub block_ops_per_s: Option<f64>,
    /// CPU nanoseconds per applied event (clock: `cpu_clock`).
    pub cpu_ns_per_event: Option<f64>,
    /// Fast-path hits per applied store (`None` for the baseline).
    pub fast_path_hit_rate: Option<f64>,
    /// Stores the fast path tried and left to the general path, per reason
    /// (the first repeat's; reasons with none left out). A store whose
    /// parent the lane does not hold is not tried and not counted.
    pub fast_path_misses: BTreeMap<String, u64>,
    /// find_matches median during the run, ns.
    pub read_p50_ns: Option<u64>,
    /// find_matches 99th percentile during the run, ns.
    pub read_p99_ns: Option<u64>,
    /// Enqueue-to-applied median (keep-up; an upper bound), ns.
    pub update_p50_ns: Option<u64>,
    /// Enqueue-to-applied 99th percentile (keep-up; an upper bound), ns.
    pub update_p99_ns: Option<u64>,
    /// Events enqueued but not applied when the window closed (keep-up).
    pub backlog_at_end: Option<u64>,
    /// Heap bytes the index holds per (rank, block) membership at the end of
    /// the stream after its own cleanup path ran (swept), counted by the
    /// global allocator in an untimed replay (`measurement::heap`; the
    /// model's membership count, the same denominator for every row).
    /// `None` where the allocator is not installed or the stream has no
    /// model.
    pub bytes_per_membership: Option<f64>,
    /// The same count with no cleanup run and the index's own sweep
    /// scheduling off where it can be (unswept; `measurement::heap`).
    pub unswept_bytes_per_membership: Option<f64>,
    /// The index's own estimate of its node bytes (`footprint`) per
    /// membership: nodes, edges and coverage, without lane lookups, slot
    /// tables or retired memory (`None` for upstream, which has none).
    pub footprint_bytes_per_membership: Option<f64>,
    /// (query, rank) scores above the held prefix (capacity).
    pub overcounts: Option<u64>,
    /// (query, rank) scores below the reachable prefix (capacity).
    pub undercounts: Option<u64>,
    /// find_matches median on the drained final tree with no writer, same
    /// lookups and reader threads (capacity).
    pub read_only_p50_ns: Option<u64>,
    /// find_matches 99th percentile on the drained final tree with no
    /// writer (capacity).
    pub read_only_p99_ns: Option<u64>,
    /// Lookups per second on the drained final tree with no writer, all
    /// readers together (capacity; `None` without readers).
    pub read_only_lookups_per_s: Option<f64>,
    /// Read retries per lookup during the run (gate rows, from
    /// `ShapeGate::read_counters`: a process-wide counter delta over the
    /// readers' lookups; 0 for gates whose readers never retry).
    pub restarts_per_read: Option<f64>,
    /// Reads that fell back to the writers' lock during the run (gate rows;
    /// process-wide counter delta).
    pub fallbacks: Option<u64>,
    /// How readers synchronize: "lock", "optimistic" or "snapshot".
    pub read_path: String,
    /// Lookups the readers completed during the run.
    pub lookups: u64,
    /// (query, rank) scores inside a hole (allowed only on non-strict
    /// streams).
    pub hole_undercounts: Option<u64>,
    /// Node bytes per (node, rank) coverage record of the tree itself (for
    /// the compressed tree a record covers a whole edge).
    pub bytes_per_node_membership: Option<f64>,
    /// Events the lanes rejected.
    pub rejected_events: u64,
    /// Rejected events per reason (reasons with none left out).
    pub rejected: BTreeMap<String, u64>,
    /// Wall time of the measured part, seconds.
    pub elapsed_s: f64,
    /// Where `cpu_ns_per_event` was read.
    pub cpu_clock: CpuClock,
    /// Read timings behind the percentiles.
    pub read_samples: usize,
    /// Repeats summarised in this row (`--repeat`; 1 for a single run).
    pub repeats: usize,
    /// Per figure reported as a median over the repeats, its range
    /// `[min, max]` (empty for a single run; `output::repeat`).
    pub spread: BTreeMap<String, [f64; 2]>,
    /// Event threads fixed by the row (`None`: `settings.lanes`).
    pub event_threads: Option<usize>,
    /// The row's event threads plus the readers exceed the machine's cores:
    /// its latencies include preemption.
    pub oversubscribed: bool,
    /// An approximate index: its differences from the reference model are
    /// reported, not failures.
    pub approximate: bool,
}

impl Row {
    /// "rwlock fast", "rwlock general", "global-lock", or with fixed event
    /// threads "upstream-pool-crtc ×4".
    pub fn label(&self) -> String {
        threaded(label(&self.strategy, self.fast_path), self.event_threads)
    }

    /// The strategy column: the name, its fixed event threads, and whether
    /// those oversubscribe the cores or the index is approximate.
    fn name(&self) -> String {
        let mut name = threaded(self.strategy.clone(), self.event_threads);
        if self.oversubscribed && self.event_threads.is_some() {
            name.push_str(" OVERSUBSCRIBED");
        }
        if self.approximate {
            name.push_str(" (approximate)");
        }
        name
    }
}

/// "rwlock fast", "rwlock general", or the bare strategy without a fast
/// path setting.
pub fn label(strategy: &str, fast_path: Option<bool>) -> String {
    match fast_path {
        Some(true) => format!("{strategy} fast"),
        Some(false) => format!("{strategy} general"),
        None => strategy.to_owned(),
    }
}

/// The replayed stream.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadInfo {
    /// Preset name, `mooncake:FILE` or `events:FILE`.
    pub name: String,
    /// Seed (presets and traces).
    pub seed: u64,
    /// Scale (presets).
    pub scale: Option<f64>,
    /// KV events.
    pub events: u64,
    /// Blocks named by KV events.
    pub blocks: u64,
    /// Lookups (duplicates included).
    pub queries: u64,
    /// Distinct lookups checked against the model (capacity mode).
    pub distinct_queries: Option<u64>,
    /// Out-of-band worker removals.
    pub remove_workers: u64,
    /// Share of events that are one-block decode stores.
    pub decode_share: f64,
    /// Whether the stream is strict (leaf-first evictions, no holes).
    pub strict: bool,
    /// Seconds spent generating or loading it.
    pub load_s: f64,
}

/// Settings of the run (echoed in the JSON).
#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    /// Lane threads per row.
    pub lanes: usize,
    /// Reader threads per row.
    pub readers: usize,
    /// Lanes plus readers exceeded the machine's cores (`--oversubscribe`):
    /// latencies then include preemption.
    pub oversubscribed: bool,
    /// "capacity", "keepup" or "both".
    pub mode: String,
    /// Keep-up offered rate, events per second.
    pub rate: f64,
    /// Keep-up window, seconds.
    pub window_s: f64,
}

/// Everything `crtc compare` measured.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Where it ran.
    pub machine: Machine,
    /// `git rev-parse HEAD`, or "unknown".
    pub git_revision: String,
    /// The stream.
    pub workload: WorkloadInfo,
    /// The command line.
    pub argv: Vec<String>,
    /// One row per strategy × fast path × mode.
    pub rows: Vec<Row>,
    /// The settings.
    pub settings: Settings,
    /// Correctness failures (empty when every row passed).
    pub failures: Vec<String>,
    /// Cargo features the binary was built with.
    pub features: Vec<String>,
    /// Whether tracked files differed from `git_revision` when it ran.
    pub git_dirty: bool,
    /// The serial cross-check against upstream (`--check-upstream`).
    pub upstream_check: Option<CrossCheck>,
    /// Ratios between rows, per repeat, summarised (`output::repeat`).
    pub ratios: Vec<RatioSummary>,
    /// Compiler, date, CPU topology, kernel, allocator and trace.
    pub provenance: Provenance,
}

/// What the tables' units and columns mean.
pub const LEGEND: &str = "times in ns; read = find_matches service time during the run; \
read-only = the same lookups on the drained final tree with no writer; \
B/membership: heap per (rank, block) membership, swept = after the index's own cleanup path, \
unswept = no cleanup and crtc's sweep policy off (equal for indexes that prune on removal); \
×N: the row's fixed event threads (OVERSUBSCRIBED: they and the readers exceed the cores); \
restarts/read and fallbacks: lookups' retries over the run, as each gate reports them \
(seqlock: optimistic restarts and writer-lock fallbacks; epoch: reads re-run under the node \
mutex, no restarts; rwlock: none, its readers lock; writers' plans counted apart)";

/// A rate as "1.23M", "45.6k" or "789"; "-" when unmeasured.
pub(crate) fn rate(value: Option<f64>) -> String {
    match value {
        None => "-".to_owned(),
        Some(v) if v >= 1e6 => format!("{:.2}M", v / 1e6),
        Some(v) if v >= 1e3 => format!("{:.1}k", v / 1e3),
        Some(v) => format!("{v:.0}"),
    }
}

/// Refused events by reason, "0" when none: `4464 slots_exhausted`.
fn rejected(by_reason: &BTreeMap<String, u64>) -> String {
    if by_reason.is_empty() {
        return "0".to_owned();
    }
    let parts: Vec<String> = by_reason
        .iter()
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    parts.join(", ")
}

fn int(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn float(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn table(header: &[&str], rows: &[Vec<String>], text_columns: usize) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let sep = if i == 0 { "" } else { "  " };
            // Text columns left-aligned, numbers right-aligned.
            let _ = if i < text_columns {
                write!(out, "{sep}{cell:<w$}")
            } else {
                write!(out, "{sep}{cell:>w$}")
            };
        }
        out.push('\n');
    };
    line(header.to_vec());
    rows.iter()
        .for_each(|row| line(row.iter().map(String::as_str).collect()));
    out
}

/// A table as a header and rows of cells, printable as aligned text or as
/// markdown.
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Cells, one row per line.
    pub rows: Vec<Vec<String>>,
    /// Leading columns that hold text (left-aligned); the rest are numbers.
    pub text_columns: usize,
}

impl Table {
    fn new(header: &[&str], rows: Vec<Vec<String>>, text_columns: usize) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            rows,
            text_columns,
        }
    }

    /// Aligned text, two spaces between columns.
    pub fn text(&self) -> String {
        let header: Vec<&str> = self.header.iter().map(String::as_str).collect();
        table(&header, &self.rows, self.text_columns)
    }

    /// A GitHub-flavoured markdown table.
    pub fn markdown(&self) -> String {
        let mut out = format!("| {} |\n|", self.header.join(" | "));
        for i in 0..self.header.len() {
            out.push_str(if i < self.text_columns {
                "---|"
            } else {
                "---:|"
            });
        }
        out.push('\n');
        for row in &self.rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        out
    }
}

fn on_off(fast: Option<bool>) -> &'static str {
    match fast {
        Some(true) => "on",
        Some(false) => "off",
        None => "-",
    }
}

/// `run / read_only`, when both are known.
pub fn p99_ratio(row: &Row) -> Option<f64> {
    match (row.read_p99_ns, row.read_only_p99_ns) {
        (Some(run), Some(quiet)) if quiet > 0 => Some(run as f64 / quiet as f64),
        _ => None,
    }
}

impl Report {
    /// The header line naming the workload.
    pub fn header(&self) -> String {
        let w = &self.workload;
        let scale = w.scale.map_or_else(String::new, |s| format!(", scale {s}"));
        let distinct = w
            .distinct_queries
            .map_or_else(String::new, |d| format!(" ({d} distinct)"));
        format!(
            "workload {} (seed {}{scale}): {} events, {} blocks, {} queries{distinct}, decode share {:.1}%, {}; \
             {} lanes, {} readers, {} cores ({}), allocator {}{}{}{}",
            w.name,
            w.seed,
            w.events,
            w.blocks,
            w.queries,
            100.0 * w.decode_share,
            if w.strict { "strict" } else { "not strict" },
            self.settings.lanes,
            self.settings.readers,
            self.machine.cores,
            self.machine.cpu_model,
            crate::compare::measurement::heap::ALLOCATOR,
            self.machine
                .load_average
                .map_or_else(String::new, |l| format!(", load average {l:.2} at start")),
            match self.rows.iter().map(|r| r.repeats).max() {
                Some(n) if n > 1 => format!(
                    "; medians of {n} repeats run round-robin (ranges in the last table; \
                     correctness counts from the worst repeat)"
                ),
                _ => String::new(),
            },
            if self.settings.oversubscribed {
                "; OVERSUBSCRIBED (--oversubscribe): more busy threads than cores, so \
                 latencies include preemption"
            } else {
                ""
            },
        )
    }

    /// The table printed to stdout: the header line, the main table, the
    /// readers table for capacity rows, and for keep-up rows a table of
    /// update latencies and backlog; then the cross-check when there is one.
    pub fn render(&self) -> String {
        let mut out = format!("{}\n{}", self.header(), self.main_table().text());
        for extra in self.extra_tables() {
            out.push('\n');
            out.push_str(&extra.text());
        }
        out.push_str(LEGEND);
        out.push('\n');
        if let Some(check) = &self.upstream_check {
            out.push_str(&check.render());
        }
        out
    }

    /// The same tables as markdown, for papers/.
    pub fn render_markdown(&self) -> String {
        let mut out = format!("{}\n\n{}", self.header(), self.main_table().markdown());
        for extra in self.extra_tables() {
            out.push('\n');
            out.push_str(&extra.markdown());
        }
        let _ = writeln!(out, "\n{LEGEND}");
        out
    }

    /// One line per row: throughput, CPU, fast path, reads, memory,
    /// correctness.
    pub fn main_table(&self) -> Table {
        let cpu = self.rows.first().map_or(CpuClock::Process, |r| r.cpu_clock);
        let header = [
            "strategy",
            "fast_path",
            "mode",
            "events",
            "events/s",
            "block ops/s",
            cpu.label(),
            "fast-path hit %",
            "read p50",
            "read p99",
            "B/membership swept",
            "unswept",
            "overcounts",
            "undercounts",
            "rejected",
        ];
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.name(),
                    on_off(r.fast_path).to_owned(),
                    r.mode.clone(),
                    r.events.to_string(),
                    rate(r.events_per_s),
                    rate(r.block_ops_per_s),
                    float(r.cpu_ns_per_event, 0),
                    float(r.fast_path_hit_rate.map(|h| 100.0 * h), 1),
                    int(r.read_p50_ns),
                    int(r.read_p99_ns),
                    float(r.bytes_per_membership, 1),
                    float(r.unswept_bytes_per_membership, 1),
                    int(r.overcounts),
                    int(r.undercounts),
                    rejected(&r.rejected),
                ]
            })
            .collect();
        Table::new(&header, rows, 3)
    }

    /// Reader latency of capacity rows during the run against the same
    /// lookups on the final tree with no writer, with seqlock retry counts.
    pub fn readers_table(&self) -> Option<Table> {
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .filter(|r| r.mode == "capacity")
            .map(|r| {
                vec![
                    r.label(),
                    r.read_path.clone(),
                    int(r.read_p50_ns),
                    int(r.read_p99_ns),
                    int(r.read_only_p50_ns),
                    int(r.read_only_p99_ns),
                    rate(r.read_only_lookups_per_s),
                    float(p99_ratio(r), 2),
                    float(r.restarts_per_read, 4),
                    int(r.fallbacks),
                ]
            })
            .collect();
        let header = [
            "readers",
            "read path",
            "run p50",
            "run p99",
            "read-only p50",
            "read-only p99",
            "read-only lookups/s",
            "p99 run/read-only",
            "restarts/read",
            "fallbacks",
        ];
        (!rows.is_empty()).then(|| Table::new(&header, rows, 2))
    }

    /// Update latency and backlog of keep-up rows.
    pub fn keepup_table(&self) -> Option<Table> {
        let offered = format!("{:.0}", self.settings.rate);
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .filter(|r| r.mode == "keepup")
            .map(|r| {
                vec![
                    r.label(),
                    offered.clone(),
                    int(r.update_p50_ns),
                    int(r.update_p99_ns),
                    int(r.backlog_at_end),
                ]
            })
            .collect();
        let header = [
            "keep-up",
            "offered/s",
            "update p50 (bound)",
            "update p99 (bound)",
            "backlog at end",
        ];
        (!rows.is_empty()).then(|| Table::new(&header, rows, 1))
    }

    /// With `--repeat N` (N > 1): per row, the range over the repeats of the
    /// figures the other tables show as medians.
    pub fn spread_table(&self) -> Option<Table> {
        let figures = [
            ("events/s", "events_per_s", 0),
            ("cpu ns/event", "cpu_ns_per_event", 0),
            ("read p50", "read_p50_ns", 0),
            ("read p99", "read_p99_ns", 0),
            ("B/membership swept", "bytes_per_membership", 1),
            ("unswept", "unswept_bytes_per_membership", 1),
            ("read-only lookups/s", "read_only_lookups_per_s", 0),
            ("update p99", "update_p99_ns", 0),
        ];
        let range = |row: &Row, key: &str, digits: usize| {
            row.spread.get(key).map_or_else(
                || "-".to_owned(),
                |[min, max]| format!("{min:.digits$}–{max:.digits$}"),
            )
        };
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .filter(|r| r.repeats > 1)
            .map(|r| {
                let mut cells = vec![r.label(), r.mode.clone(), r.repeats.to_string()];
                cells.extend(figures.iter().map(|&(_, key, d)| range(r, key, d)));
                cells
            })
            .collect();
        let mut header = vec!["range over repeats (min–max)", "mode", "repeats"];
        header.extend(figures.iter().map(|&(name, _, _)| name));
        (!rows.is_empty()).then(|| Table::new(&header, rows, 2))
    }

    /// The tables after the main one, those that apply: readers, keep-up,
    /// ranges over repeats, ratios.
    fn extra_tables(&self) -> Vec<Table> {
        [
            self.readers_table(),
            self.keepup_table(),
            self.spread_table(),
            self.ratios_table(),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// Ratios between rows, taken within each repeat: median and range.
    pub fn ratios_table(&self) -> Option<Table> {
        let rows: Vec<Vec<String>> = self
            .ratios
            .iter()
            .map(|r| {
                vec![
                    r.name.clone(),
                    format!("{:.2}", r.median),
                    format!("{:.2}–{:.2}", r.range[0], r.range[1]),
                    r.repeats.to_string(),
                ]
            })
            .collect();
        let header = ["ratio (within each repeat)", "median", "min–max", "repeats"];
        (!rows.is_empty()).then(|| Table::new(&header, rows, 1))
    }

    /// The `--json` document (pretty-printed).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn row(strategy: &str, fast_path: Option<bool>, mode: &str) -> Row {
        Row {
            strategy: strategy.to_owned(),
            fast_path,
            mode: mode.to_owned(),
            events: 10,
            blocks: 20,
            events_per_s: Some(1.5e6),
            block_ops_per_s: Some(2500.0),
            cpu_ns_per_event: Some(400.0),
            fast_path_hit_rate: fast_path.map(|f| if f { 0.9 } else { 0.0 }),
            read_p50_ns: Some(800),
            read_p99_ns: None,
            update_p50_ns: (mode == "keepup").then_some(40_000),
            update_p99_ns: (mode == "keepup").then_some(90_000),
            backlog_at_end: (mode == "keepup").then_some(3),
            bytes_per_membership: Some(31.25),
            unswept_bytes_per_membership: Some(40.5),
            footprint_bytes_per_membership: Some(20.5),
            overcounts: (mode == "capacity").then_some(0),
            undercounts: (mode == "capacity").then_some(0),
            read_only_p50_ns: (mode == "capacity").then_some(700),
            read_only_p99_ns: (mode == "capacity").then_some(1600),
            read_only_lookups_per_s: (mode == "capacity").then_some(1.2e6),
            restarts_per_read: (strategy == "seqlock").then_some(0.01),
            fallbacks: (strategy == "seqlock").then_some(2),
            read_path: "lock".to_owned(),
            lookups: 1,
            hole_undercounts: None,
            bytes_per_node_membership: None,
            rejected_events: 0,
            rejected: BTreeMap::new(),
            fast_path_misses: BTreeMap::new(),
            elapsed_s: 0.5,
            cpu_clock: CpuClock::LaneThreadsSchedstat,
            read_samples: 1,
            repeats: 1,
            spread: BTreeMap::new(),
            event_threads: None,
            oversubscribed: false,
            approximate: false,
        }
    }

    pub fn report(rows: Vec<Row>) -> Report {
        Report {
            machine: Machine {
                hostname: "h".to_owned(),
                cores: 2,
                cpu_model: "cpu".to_owned(),
                load_average: Some(0.5),
            },
            git_revision: "unknown".to_owned(),
            workload: WorkloadInfo {
                name: "agentx".to_owned(),
                seed: 1,
                scale: Some(0.5),
                events: 10,
                blocks: 20,
                queries: 3,
                distinct_queries: Some(2),
                remove_workers: 0,
                decode_share: 0.8,
                strict: true,
                load_s: 0.1,
            },
            argv: vec!["crtc".to_owned(), "compare".to_owned()],
            rows,
            settings: Settings {
                lanes: 2,
                readers: 1,
                oversubscribed: false,
                mode: "both".to_owned(),
                rate: 20_000.0,
                window_s: 5.0,
            },
            failures: Vec::new(),
            features: vec!["rwlock".to_owned()],
            git_dirty: false,
            upstream_check: None,
            ratios: Vec::new(),
            provenance: Provenance::detect(None),
        }
    }

    #[test]
    fn json_has_every_key_with_null_where_unmeasured() {
        let rows = vec![
            row("rwlock", Some(true), "capacity"),
            row("global-lock", None, "keepup"),
        ];
        let json: serde_json::Value = serde_json::from_str(&report(rows).to_json()).unwrap();
        for key in REPORT_KEYS {
            assert!(json.get(key).is_some(), "missing top-level key {key}");
        }
        for key in ["hostname", "cores", "cpu_model"] {
            assert!(
                json["machine"].get(key).is_some(),
                "missing machine key {key}"
            );
        }
        let rows = json["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 2);
        for row in rows {
            for key in ROW_KEYS {
                assert!(row.get(key).is_some(), "missing row key {key}");
            }
        }
        assert_eq!(rows[0]["fast_path"], serde_json::json!(true));
        assert!(rows[0]["update_p50_ns"].is_null() && rows[0]["read_p99_ns"].is_null());
        assert!(rows[1]["fast_path"].is_null() && rows[1]["overcounts"].is_null());
        assert_eq!(rows[1]["backlog_at_end"], serde_json::json!(3));
    }

    #[test]
    fn table_lists_every_row_and_keepup_latencies() {
        let rows = vec![
            row("rwlock", Some(true), "capacity"),
            row("rwlock", Some(false), "keepup"),
            row("global-lock", None, "capacity"),
        ];
        let text = report(rows).render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("workload agentx (seed 1, scale 0.5): 10 events"));
        assert!(lines[1].starts_with("strategy") && lines[1].contains("lane cpu ns/ev"));
        assert!(
            lines[2].contains("1.50M") && lines[2].contains("2.5k") && lines[2].contains("90.0")
        );
        assert!(lines[4].starts_with("global-lock") && lines[4].contains(" - "));
        assert!(text.contains("rwlock general") && text.contains("40000"));
        assert_eq!(label("seqlock", Some(true)), "seqlock fast");
        assert_eq!(label("global-lock", None), "global-lock");
        // The readers table: run p99 (none here) against read-only p99.
        assert!(text.contains("read-only p99") && text.contains("1600"));
        let capacity = row("seqlock", Some(true), "capacity");
        assert_eq!(p99_ratio(&capacity), None);
        let measured = Row {
            read_p99_ns: Some(2000),
            ..capacity
        };
        assert_eq!(p99_ratio(&measured), Some(1.25));
    }

    #[test]
    fn markdown_tables_have_one_line_per_row() {
        let rows = vec![
            row("rwlock", Some(true), "capacity"),
            row("seqlock", Some(false), "capacity"),
        ];
        let markdown = report(rows).render_markdown();
        let main: Vec<&str> = markdown
            .lines()
            .filter(|l| l.starts_with("| strategy") || l.contains(" | capacity | "))
            .collect();
        assert_eq!(main.len(), 3, "{markdown}");
        let readers = markdown
            .lines()
            .filter(|l| l.starts_with("| rwlock fast |") || l.starts_with("| seqlock general |"))
            .count();
        assert_eq!(readers, 2, "{markdown}");
        assert!(markdown.contains("|---|---|---|---:|"));
        assert!(markdown.contains("| seqlock general | lock |"));
        assert!(markdown.contains("0.0100"));
    }
}
