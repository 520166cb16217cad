//! `crtc compare --paper DIR`: the evaluation files of `papers/results/`,
//! generated, never typed by hand.
//!
//! One comparison per workload — the built-in `agentx` preset (the headline
//! stream: mostly one-block decode stores), the built-in `chat` preset (for
//! the bytes-per-membership target) and the Mooncake trace (skipped with a
//! note when the file is absent) — each in the mode, lanes, readers, seed
//! and scale of the command line, with the serial cross-check against
//! upstream whenever the binary was built with feature `upstream`. For each
//! workload `W` the directory gets `W.md` (the tables as markdown, the
//! cross-check, links to the charts), `W.json` (the `--json` document) and
//! the three charts `W-throughput.svg`, `W-latency.svg`, `W-ratio.svg`;
//! `targets.md` then sets the issue's targets against the measured numbers.
//! Every markdown file starts with the command that produced it, the
//! machine, the git revision, the compiled features and the provenance of
//! [`super::provenance`] (rustc, date, topology, kernel, allocator, trace).

use crate::compare::measurement::measure::{git_dirty, git_revision};
use crate::compare::output::plots::{command_line, write_plots, CHARTS};
use crate::compare::output::repeat::RatioSummary;
use crate::compare::output::report::{p99_ratio, Report, Row};
use crate::compare::subjects::UPSTREAM_NAME;
use crate::compare::{run, CompareError, CompareOptions, Source};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Where the Mooncake trace is looked for by default (relative to the
/// project root, as the shared traces are laid out).
pub const DEFAULT_TRACE: &str = "../shared/traces/mooncake_synthetic.jsonl";

/// One workload of the paper run.
struct Entry {
    /// File stem.
    stem: &'static str,
    source: Source,
}

/// The provenance block every markdown file starts with.
fn provenance(report_like: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "- command: `{}`", command_line(&report_like.argv));
    let _ = writeln!(
        out,
        "- machine: {} ({} logical cores, {}){}",
        report_like.machine.hostname,
        report_like.machine.cores,
        report_like.machine.cpu_model,
        report_like
            .machine
            .load_average
            .map_or_else(String::new, |l| format!(
                ", 1-minute load average {l:.2} at start"
            )),
    );
    let _ = writeln!(
        out,
        "- git revision: {}{}",
        report_like.git_revision,
        if report_like.git_dirty {
            " (with uncommitted changes in tracked files)"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "- features: {}", report_like.features.join(", "));
    out.push_str(&report_like.provenance.markdown());
    out
}

fn write(path: &Path, text: &str) -> Result<(), CompareError> {
    std::fs::write(path, text)
        .map_err(|e| CompareError(format!("cannot write {}: {e}", path.display())))
}

fn workload_markdown(stem: &str, report: &Report) -> String {
    let mut out = format!("# crtc compare: {stem}\n\n{}\n", provenance(report));
    out.push_str(&report.render_markdown());
    if let Some(check) = &report.upstream_check {
        let _ = write!(
            out,
            "\n## Serial cross-check against upstream (`--check-upstream`)\n\n```\n{}```\n",
            check.render()
        );
    }
    if !report.failures.is_empty() {
        out.push_str("\n## Correctness failures\n\n");
        for failure in &report.failures {
            let _ = writeln!(out, "- {failure}");
        }
    }
    out.push_str("\n## Charts\n\n");
    for chart in CHARTS {
        let _ = writeln!(out, "![{stem} {chart}]({stem}-{chart}.svg)\n");
    }
    out
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "missed"
    }
}

fn gate_rows(report: &Report) -> impl Iterator<Item = &Row> {
    report
        .rows
        .iter()
        .filter(|r| r.mode == "capacity" && r.fast_path.is_some())
}

fn capacity_row<'a>(report: &'a Report, strategy: &str) -> Option<&'a Row> {
    report
        .rows
        .iter()
        .find(|r| r.mode == "capacity" && r.strategy == strategy)
}

/// The ratio `name` taken within each repeat, summarised (see `repeat`).
fn paired<'a>(report: &'a Report, name: &str) -> Option<&'a RatioSummary> {
    report.ratios.iter().find(|r| r.name == name)
}

/// A paired ratio's cell: median, then the range over the repeats.
fn paired_cell(ratio: Option<&RatioSummary>) -> String {
    ratio.map_or("-".to_owned(), |r| {
        format!(
            "{:.2}× ({:.2}–{:.2}, {})",
            r.median, r.range[0], r.range[1], r.repeats
        )
    })
}

/// The issue whose targets a verdict judges. Issue 13 set the first
/// efficiency bounds; issue 35 tightened them once the lane directory
/// replaced the per-rank tables. `targets.md` judges every figure against
/// both, so a reader sees how far each is from the open bound and the old.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Targets {
    /// The bounds issue 13 set (lane CPU 0.8× and 1.0×, capacity 1.5×, 32 bytes).
    Issue13,
    /// The bounds issue 35 set (lane CPU 0.5× and 0.7×, capacity 2.0×, 32 bytes or 40 on agentx).
    Issue35,
}

impl Targets {
    /// Both sets, in the order their verdict columns appear.
    pub const BOTH: [Targets; 2] = [Targets::Issue13, Targets::Issue35];

    /// A gate's bound on lane CPU per event as a multiple of upstream's
    /// (the RwLock and seqlock gates, then the epoch gates: 0.8 and 1.0 for
    /// issue 13, 0.5 and 0.7 for issue 35); none for the other rows.
    pub fn lane_cpu_bound(self, strategy: &str) -> Option<f64> {
        let (lock_based, epoch) = match self {
            Targets::Issue13 => (0.8, 1.0),
            Targets::Issue35 => (0.5, 0.7),
        };
        match strategy {
            "rwlock" | "seqlock" => Some(lock_based),
            s if s.starts_with("epoch") => Some(epoch),
            _ => None,
        }
    }

    /// The best gate's capacity against upstream 1.6.1, at least.
    pub fn capacity_vs_upstream(self) -> f64 {
        match self {
            Targets::Issue13 => 1.5,
            Targets::Issue35 => 2.0,
        }
    }

    /// Bytes per membership on the workload `stem`, at most (issue 35
    /// allows 40 on agentx, where almost no block is shared).
    pub fn bytes_per_membership(self, stem: &str) -> f64 {
        match (self, stem) {
            (Targets::Issue35, "agentx") => 40.0,
            _ => 32.0,
        }
    }
}

/// Lane CPU per event at most [`Targets::lane_cpu_bound`] × upstream's, fast
/// path on, under each issue's bounds; judged on the median of the ratios
/// paired within each repeat.
fn lane_cpu_targets(out: &mut String, reports: &[(&str, &Report)]) {
    out.push_str(
        "\n## Lane CPU per event vs upstream 1.6.1 (issue 13: rwlock, seqlock ≤ 0.8×, epoch gates ≤ 1.0×; issue 35: ≤ 0.5× and ≤ 0.7×)\n\n",
    );
    out.push_str("| workload | row | lane CPU ns/event | upstream ns/event | ratio of medians | paired ratio: median (min–max, repeats) | issue 13 | issue 35 |\n|---|---|---:|---:|---:|---:|---|---|\n");
    for (stem, report) in reports {
        let upstream = capacity_row(report, UPSTREAM_NAME).and_then(|r| r.cpu_ns_per_event);
        for row in gate_rows(report).filter(|r| r.fast_path == Some(true)) {
            let ratio = row.cpu_ns_per_event.zip(upstream).map(|(a, b)| a / b);
            let pair = paired(
                report,
                &format!("{} lane CPU/event vs {UPSTREAM_NAME}", row.label()),
            );
            let verdicts = Targets::BOTH.map(|t| {
                let bound = t.lane_cpu_bound(&row.strategy);
                match pair.zip(bound) {
                    Some((p, b)) => met(p.median <= b),
                    None => "not measured",
                }
            });
            let _ = writeln!(
                out,
                "| {stem} | {} | {} | {} | {} | {} | {} |",
                row.label(),
                row.cpu_ns_per_event
                    .map_or("-".to_owned(), |v| format!("{v:.0}")),
                upstream.map_or("-".to_owned(), |v| format!("{v:.0}")),
                ratio.map_or("-".to_owned(), |r| format!("{r:.2}×")),
                paired_cell(pair),
                verdicts.join(" | "),
            );
        }
    }
}

/// At most [`Targets::bytes_per_membership`] for every gate (issue 13: 32
/// everywhere; issue 35: 32, and 40 on agentx), and the seqlock and epoch
/// gates within 1.25× of the RwLock gate (issue 13).
fn memory_targets(out: &mut String, reports: &[(&str, &Report)]) {
    out.push_str(
        "\n## Bytes per membership (issue 13: ≤ 32 on every workload, other gates ≤ 1.25× rwlock; issue 35: ≤ 32, agentx ≤ 40)\n\n",
    );
    out.push_str("| workload | row | bytes/membership | issue 13 | issue 35 | vs rwlock | ≤ 1.25× |\n|---|---|---:|---|---|---:|---|\n");
    for (stem, report) in reports {
        let rwlock = capacity_row(report, "rwlock").and_then(|r| r.bytes_per_membership);
        for row in report.rows.iter().filter(|r| r.mode == "capacity") {
            let bytes = row.bytes_per_membership;
            let vs = bytes.zip(rwlock).map(|(b, r)| b / r);
            let gate = gate_rows(report).any(|g| g.strategy == row.strategy);
            let verdicts = Targets::BOTH
                .map(|t| bytes.map_or("not measured", |b| met(b <= t.bytes_per_membership(stem))));
            let _ = writeln!(
                out,
                "| {stem} | {} | {} | {} | {} | {} |",
                row.label(),
                bytes.map_or("-".to_owned(), |b| format!("{b:.1}")),
                verdicts.join(" | "),
                vs.map_or("-".to_owned(), |v| format!("{v:.2}×")),
                match (gate, vs) {
                    (true, Some(v)) => met(v <= 1.25),
                    _ => "-",
                },
            );
        }
    }
}

/// The capacity table: the best gate against the global-lock baseline
/// (≥ 3×) and against upstream 1.6.1 (≥ 1.5× for issue 13, ≥ 2.0× for
/// issue 35), all judged on the paired ratio; the ratio of the medians is
/// shown beside each.
fn capacity_targets(out: &mut String, reports: &[(&str, &Report)], lock_alone: &[LockAlone]) {
    out.push_str(
        "\n## Best gate vs the global-lock baseline (≥ 3×) and vs upstream 1.6.1 (issue 13: ≥ 1.5×; issue 35: ≥ 2.0×)\n\n",
    );
    out.push_str(
        "Both judged on the median of the paired ratios. Every row here runs with one reader, \
         which the global lock blocks while the lane holds it; the last column is the \
         global-lock row run again with no reader (its own run, same repeats), the capacity \
         the lock gives when nothing contends for it.\n\n",
    );
    out.push_str("| workload | best gate | events/s | global-lock events/s | ratio of medians | paired ratio: median (min–max, repeats) | target | upstream events/s | ratio of medians | paired ratio: median (min–max, repeats) | issue 13 | issue 35 | global-lock events/s, no reader |\n|---|---|---:|---:|---:|---:|---|---:|---:|---:|---|---|---:|\n");
    for (stem, report) in reports {
        let Some(best) = gate_rows(report).max_by(|a, b| {
            a.events_per_s
                .unwrap_or(0.0)
                .total_cmp(&b.events_per_s.unwrap_or(0.0))
        }) else {
            continue;
        };
        let alone = lock_alone
            .iter()
            .find(|l| l.stem == *stem)
            .and_then(|l| l.events_per_s);
        let _ = writeln!(
            out,
            "| {stem} | {} | {:.0} | {} | {} | {} |",
            best.label(),
            best.events_per_s.unwrap_or(0.0),
            against(report, best, "global-lock", &[3.0]),
            against(
                report,
                best,
                UPSTREAM_NAME,
                &Targets::BOTH.map(Targets::capacity_vs_upstream)
            ),
            alone.map_or("-".to_owned(), |r| format!("{r:.0}")),
        );
    }
}

/// The cells of `best` against the row `other`: its events/s, the ratio of
/// the medians, the paired ratio and a verdict on the paired median per
/// bound of `targets` (at least that bound).
fn against(report: &Report, best: &Row, other: &str, targets: &[f64]) -> String {
    let rate = capacity_row(report, other)
        .and_then(|r| r.events_per_s)
        .filter(|&r| r > 0.0);
    let medians = rate
        .zip(best.events_per_s)
        .map_or("-".to_owned(), |(r, b)| format!("{:.2}×", b / r));
    let pair = paired(report, &format!("{} events/s vs {other}", best.label()));
    format!(
        "{} | {medians} | {} | {}",
        rate.map_or("-".to_owned(), |r| format!("{r:.0}")),
        paired_cell(pair),
        targets
            .iter()
            .map(|&t| pair.map_or("not measured", |p| met(p.median >= t)))
            .collect::<Vec<_>>()
            .join(" | "),
    )
}

/// The reader table: the optimistic and snapshot gates' run p99 against
/// their read-only p99 (≤ 1.25×).
fn reader_targets(out: &mut String, reports: &[(&str, &Report)]) {
    out.push_str(
        "\n## Optimistic and snapshot gates: reader p99 during the run ≤ 1.25× read-only p99\n\n",
    );
    out.push_str("| workload | row | read path | run p99 ns | read-only p99 ns | ratio | target |\n|---|---|---|---:|---:|---:|---|\n");
    let ns = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    for (stem, report) in reports {
        for row in gate_rows(report).filter(|r| r.read_path != "lock") {
            let ratio = p99_ratio(row);
            let _ = writeln!(
                out,
                "| {stem} | {} | {} | {} | {} | {} | {} |",
                row.label(),
                row.read_path,
                ns(row.read_p99_ns),
                ns(row.read_only_p99_ns),
                ratio.map_or("-".to_owned(), |r| format!("{r:.2}×")),
                ratio.map_or("not measured", |r| met(r <= 1.25)),
            );
        }
    }
}

/// Issue 43's bound on a gate's find_matches latency over upstream's, on
/// like-for-like trees with no writer.
const READ_VS_UPSTREAM: f64 = 0.8;

/// The reader against upstream's (issue 43): every gate's fast row, its
/// read-only p50 and p99 judged against upstream's, and the run's read
/// latency beside it (not judged: in capacity mode each row's writer runs at
/// its own rate; `papers/matched-reads.py` judges readers at issue 43's
/// matched rates, paired within each repeat).
fn reader_vs_upstream(out: &mut String, reports: &[(&str, &Report)]) {
    let _ = write!(
        out,
        "\n## find_matches against upstream 1.6.1 (issue 43: read-only p50 and p99 ≤ {READ_VS_UPSTREAM}× upstream's)\n\n\
         Read-only: the same lookups and reader threads on each row's drained final tree, \
         swept through its own public cleanup path first (upstream's `run_cleanup_task`, \
         ours a forced stale-leaf sweep), so both trees hold no dead leaves. The run's reads are beside each row's own writer, at its own rate, so \
         they are shown, not judged: `matched-reads.md` judges readers beside a writer at issue 43's \
         matched rates, paired within each repeat, and `keepup.md` draws chat's curve.\n\n"
    );
    out.push_str("| workload | row | read-only p50: ours / upstream, paired ratio | read-only p99: ours / upstream, paired ratio | target | run p50 paired ratio | run p99 paired ratio |\n|---|---|---|---|---|---:|---:|\n");
    for (stem, report) in reports {
        let up = capacity_row(report, UPSTREAM_NAME);
        for row in gate_rows(report).filter(|r| r.fast_path == Some(true)) {
            let ratio = |what: &str| {
                paired(
                    report,
                    &format!("{} {what} vs {UPSTREAM_NAME}", row.label()),
                )
            };
            let (p50, p99) = (ratio("read-only p50"), ratio("read-only p99"));
            let verdict = match (p50, p99) {
                (Some(a), Some(b)) => {
                    met(a.median <= READ_VS_UPSTREAM && b.median <= READ_VS_UPSTREAM)
                }
                _ => "not measured",
            };
            let ns = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
            let _ = writeln!(
                out,
                "| {stem} | {} | {} / {}, {} | {} / {}, {} | {verdict} | {} | {} |",
                row.label(),
                ns(row.read_only_p50_ns),
                ns(up.and_then(|u| u.read_only_p50_ns)),
                paired_cell(p50),
                ns(row.read_only_p99_ns),
                ns(up.and_then(|u| u.read_only_p99_ns)),
                paired_cell(p99),
                paired_cell(ratio("run read p50")),
                paired_cell(ratio("run read p99")),
            );
        }
    }
}

/// `a ÷ b` as "1.23×", or "-".
fn ratio_cell(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "-".to_owned(),
    }
}

/// The fast path against the general path over the whole stream, per gate.
fn fast_path_table(out: &mut String, reports: &[(&str, &Report)]) {
    out.push_str(
        "\n## Fast path vs general path over the whole stream\n\n\
         The issue's target (general ÷ fast ≥ 2× for one-block decode stores) is a per-store \
         figure from the criterion `tail_append` group; the whole-stream ratio here also counts \
         prompt stores and removals, which take the same path either way.\n\n",
    );
    out.push_str("| workload | gate | fast events/s | general events/s | events/s ratio | general ÷ fast CPU ns/event |\n|---|---|---:|---:|---:|---:|\n");
    for (stem, report) in reports {
        let mut names: Vec<&str> = gate_rows(report).map(|r| r.strategy.as_str()).collect();
        names.dedup();
        for name in names {
            let pick = |fast: bool| {
                report.rows.iter().find(|r| {
                    r.mode == "capacity" && r.strategy == name && r.fast_path == Some(fast)
                })
            };
            let (Some(fast), Some(general)) = (pick(true), pick(false)) else {
                continue;
            };
            let _ = writeln!(
                out,
                "| {stem} | {name} | {:.0} | {:.0} | {} | {} |",
                fast.events_per_s.unwrap_or(0.0),
                general.events_per_s.unwrap_or(0.0),
                ratio_cell(fast.events_per_s, general.events_per_s),
                ratio_cell(general.cpu_ns_per_event, fast.cpu_ns_per_event),
            );
        }
    }
}

/// The global-lock row's capacity on one workload with no reader.
pub struct LockAlone {
    /// The workload's file stem.
    pub stem: String,
    /// Median events/s over the repeats (`None`: the row did not run).
    pub events_per_s: Option<f64>,
}

/// The global-lock row of `options` run again with no reader (issue 33:
/// the reader blocks the global lock, so its ratio to a gate with a reader
/// is mostly that; this is the capacity beside it).
fn global_lock_alone(stem: &str, options: &CompareOptions) -> Result<LockAlone, CompareError> {
    let report = run(&CompareOptions {
        readers: 0,
        strategies: Some(vec!["global-lock".to_owned()]),
        check_upstream: false,
        ..options.clone()
    })?;
    Ok(LockAlone {
        stem: stem.to_owned(),
        events_per_s: capacity_row(&report, "global-lock").and_then(|r| r.events_per_s),
    })
}

/// The issues' targets against `reports` (stem, report): capacity and
/// reader targets (issue 7), lane CPU and memory targets (issue 13, and
/// issue 35's tighter bounds beside them);
/// `lock_alone` is the global-lock row's capacity with no reader.
pub fn targets_markdown(reports: &[(&str, &Report)], lock_alone: &[LockAlone]) -> String {
    let mut out = String::from(
        "# Efficiency targets (lane CPU, capacity, reader p99, memory), measured in this run\n\n",
    );
    if let Some((_, first)) = reports.first() {
        out.push_str(&provenance(first));
    }
    out.push_str(
        "\nEvery figure below comes from the capacity rows of the files next to this one \
         (one process per command; with `--repeat N` each figure is the median of N runs \
         interleaved round-robin). Absolute rates on a shared 2-core machine are noisy; \
         ratios from the same run are the signal. Targets against upstream are judged on \
         the median of the ratios taken within each repeat (paired: both rows of a ratio \
         ran in the same round), shown with their range over the repeats; the ratio of the \
         two medians is shown next to it.\n",
    );
    lane_cpu_targets(&mut out, reports);
    capacity_targets(&mut out, reports, lock_alone);
    reader_targets(&mut out, reports);
    reader_vs_upstream(&mut out, reports);
    memory_targets(&mut out, reports);
    fast_path_table(&mut out, reports);
    out
}

/// The paper's workloads: the two presets and the trace at `trace`.
fn paper_entries(trace: &Path) -> [Entry; 3] {
    [
        Entry {
            stem: "agentx",
            source: Source::Preset("agentx".to_owned()),
        },
        Entry {
            stem: "chat",
            source: Source::Preset("chat".to_owned()),
        },
        Entry {
            stem: "mooncake",
            source: Source::Trace(trace.to_path_buf()),
        },
    ]
}

/// The note a workload whose trace is absent leaves in `dir`.
fn write_skipped(dir: &Path, stem: &str, path: &Path) -> Result<PathBuf, CompareError> {
    let note = format!(
        "# crtc compare: {stem}\n\nSkipped: the Mooncake trace `{}` was not found \
         (pass `--trace PATH`).\n",
        path.display()
    );
    let file = dir.join(format!("{stem}.md"));
    write(&file, &note)?;
    Ok(file)
}

/// A workload's markdown, JSON and charts in `dir`; the paths written.
fn write_workload(dir: &Path, stem: &str, report: &Report) -> Result<Vec<PathBuf>, CompareError> {
    let md = dir.join(format!("{stem}.md"));
    write(&md, &workload_markdown(stem, report))?;
    let json = dir.join(format!("{stem}.json"));
    write(&json, &format!("{}\n", report.to_json()))?;
    let mut written = vec![md, json];
    written.extend(write_plots(report, dir, stem)?);
    Ok(written)
}

/// Runs every paper workload with `options` (its source is replaced) and
/// writes the files into `dir`; `trace` is the Mooncake trace. `say`
/// receives each table and each file written. Returns the reports.
pub fn write_paper(
    options: &CompareOptions,
    dir: &Path,
    trace: &Path,
    mut say: impl FnMut(&str),
) -> Result<Vec<(String, Report)>, CompareError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CompareError(format!("cannot create {}: {e}", dir.display())))?;
    let entries = paper_entries(trace);
    // The tree's state is read once, before any file is written: the files
    // this run writes must not make its later reports look dirty.
    let (revision, dirty) = (git_revision(), git_dirty());
    let (mut reports, mut lock_alone) = (Vec::new(), Vec::new());
    let mut written: Vec<PathBuf> = Vec::new();
    for entry in entries {
        if let Source::Trace(path) = &entry.source {
            if !path.exists() {
                written.push(write_skipped(dir, entry.stem, path)?);
                say(&format!(
                    "skipped {}: {} not found\n",
                    entry.stem,
                    path.display()
                ));
                continue;
            }
        }
        let run_options = CompareOptions {
            source: entry.source,
            check_upstream: options.check_upstream || cfg!(feature = "upstream"),
            ..options.clone()
        };
        let report = Report {
            git_revision: revision.clone(),
            git_dirty: dirty,
            ..run(&run_options)?
        };
        say(&report.render());
        written.extend(write_workload(dir, entry.stem, &report)?);
        lock_alone.push(global_lock_alone(entry.stem, &run_options)?);
        reports.push((entry.stem.to_owned(), report));
    }
    let views: Vec<(&str, &Report)> = reports.iter().map(|(s, r)| (s.as_str(), r)).collect();
    let targets = dir.join("targets.md");
    write(&targets, &targets_markdown(&views, &lock_alone))?;
    written.push(targets);
    for path in &written {
        say(&format!("wrote {}\n", path.display()));
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::{targets_markdown, LockAlone};
    use crate::compare::output::repeat::RatioSummary;
    use crate::compare::output::report::tests::{report, row};
    use crate::compare::subjects::UPSTREAM_NAME;

    /// The verdict follows the median of the paired ratios, not the ratio
    /// of the two medians: here the medians say 0.89× (missed) while the
    /// ratio within each repeat was at most 0.79×.
    #[test]
    fn lane_cpu_verdicts_use_the_paired_median() {
        let mut upstream = row(UPSTREAM_NAME, None, "capacity");
        upstream.cpu_ns_per_event = Some(450.0);
        let mut report = report(vec![row("rwlock", Some(true), "capacity"), upstream]);
        report.ratios.push(RatioSummary {
            name: format!("rwlock fast lane CPU/event vs {UPSTREAM_NAME}"),
            median: 0.75,
            range: [0.7, 0.79],
            repeats: 5,
        });
        let text = targets_markdown(&[("agentx", &report)], &[]);
        let line = text
            .lines()
            .find(|l| l.starts_with("| agentx | rwlock fast | 400 |"))
            .expect("the lane CPU row");
        assert_eq!(
            line,
            "| agentx | rwlock fast | 400 | 450 | 0.89× | 0.75× (0.70–0.79, 5) | met | missed |"
        );
    }

    /// The global-lock verdict follows the paired median too: here the
    /// medians say 2.5× (missed) while every repeat's ratio was at least 3.1×.
    #[test]
    fn global_lock_verdicts_use_the_paired_median() {
        let mut lock = row("global-lock", None, "capacity");
        lock.events_per_s = lock.events_per_s.map(|r| r / 2.5);
        let mut report = report(vec![row("rwlock", Some(true), "capacity"), lock]);
        report.ratios.push(RatioSummary {
            name: "rwlock fast events/s vs global-lock".to_owned(),
            median: 3.2,
            range: [3.1, 3.4],
            repeats: 5,
        });
        let alone = LockAlone {
            stem: "agentx".to_owned(),
            events_per_s: Some(1.4e6),
        };
        let text = targets_markdown(&[("agentx", &report)], &[alone]);
        let line = text
            .lines()
            .find(|l| l.starts_with("| agentx | rwlock fast |") && l.contains("2.50×"))
            .expect("the capacity row");
        assert!(
            line.contains("| 2.50× | 3.20× (3.10–3.40, 5) | met |"),
            "{line}"
        );
        assert!(line.ends_with("| 1400000 |"), "no-reader capacity: {line}");
    }
}
