//! Summaries over `crtc compare --repeat N`: the rows of one configuration,
//! measured once per repeat (repeats interleaved round-robin over the
//! configurations, so each repeat's rows share machine state), become one
//! row whose figures are the medians, with each figure's range (min, max)
//! in `Row::spread`. Correctness counts are never a median: a row reports
//! the worst repeat (the most overcounts, undercounts, fallbacks and
//! refusals), so a failure in any repeat still shows. Ratios between rows
//! ([`ratios`]) are taken within each repeat, then summarised the same way.

use super::report::Row;
use serde::Serialize;

/// A figure summarised by its median: its name in `Row::spread`, how to read
/// it, and how to write the median back.
struct Median {
    name: &'static str,
    get: fn(&Row) -> Option<f64>,
    set: fn(&mut Row, f64),
}

macro_rules! float_median {
    ($field:ident) => {
        Median {
            name: stringify!($field),
            get: |row| row.$field,
            set: |row, value| row.$field = Some(value),
        }
    };
}

macro_rules! int_median {
    ($field:ident) => {
        Median {
            name: stringify!($field),
            get: |row| row.$field.map(|value| value as f64),
            set: |row, value| row.$field = Some(value.round() as u64),
        }
    };
}

/// Every figure reported as a median.
fn medians() -> [Median; 16] {
    [
        float_median!(events_per_s),
        float_median!(block_ops_per_s),
        float_median!(cpu_ns_per_event),
        float_median!(fast_path_hit_rate),
        int_median!(read_p50_ns),
        int_median!(read_p99_ns),
        int_median!(update_p50_ns),
        int_median!(update_p99_ns),
        int_median!(backlog_at_end),
        float_median!(bytes_per_membership),
        float_median!(unswept_bytes_per_membership),
        float_median!(footprint_bytes_per_membership),
        int_median!(read_only_p50_ns),
        int_median!(read_only_p99_ns),
        float_median!(read_only_lookups_per_s),
        float_median!(restarts_per_read),
    ]
}

/// The median of `values` (the mean of the middle two for an even count);
/// `None` when there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// One row for the repeats of one configuration (see the module docs);
/// `elapsed_s` is the repeats' total, and the other fields (events, lookups,
/// samples) are the first repeat's. `None` when `rows` is empty.
pub fn summarise(rows: &[Row]) -> Option<Row> {
    let mut summary = rows.first()?.clone();
    summary.repeats = rows.len();
    for figure in medians() {
        let values: Vec<f64> = rows.iter().filter_map(figure.get).collect();
        if let Some(middle) = median(&values) {
            (figure.set)(&mut summary, middle);
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            summary.spread.insert(figure.name.to_owned(), [min, max]);
        }
    }
    let worst = |get: fn(&Row) -> Option<u64>| rows.iter().filter_map(get).max();
    summary.overcounts = worst(|r| r.overcounts);
    summary.undercounts = worst(|r| r.undercounts);
    summary.hole_undercounts = worst(|r| r.hole_undercounts);
    summary.fallbacks = worst(|r| r.fallbacks);
    let most_rejected = rows.iter().max_by_key(|r| r.rejected_events);
    if let Some(most) = most_rejected {
        summary.rejected_events = most.rejected_events;
        summary.rejected = most.rejected.clone();
    }
    summary.elapsed_s = rows.iter().map(|r| r.elapsed_s).sum();
    Some(summary)
}

#[cfg(test)]
mod tests {
    use super::{median, summarise};
    use crate::compare::output::report::tests::row;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn summary_takes_medians_ranges_and_the_worst_correctness() {
        let mut rows = vec![row("rwlock", Some(true), "capacity"); 3];
        for (i, r) in rows.iter_mut().enumerate() {
            r.events_per_s = Some([300.0, 100.0, 200.0][i]);
            r.read_p99_ns = Some([10, 30, 20][i]);
            r.undercounts = Some([0, 2, 0][i]);
            r.rejected_events = [0, 0, 5][i];
        }
        let summary = summarise(&rows).expect("three rows");
        assert_eq!(summary.repeats, 3);
        assert_eq!(summary.events_per_s, Some(200.0));
        assert_eq!(summary.read_p99_ns, Some(20));
        assert_eq!(summary.spread["events_per_s"], [100.0, 300.0]);
        assert_eq!(summary.spread["read_p99_ns"], [10.0, 30.0]);
        assert_eq!(
            summary.undercounts,
            Some(2),
            "the worst repeat, not a median"
        );
        assert_eq!(summary.rejected_events, 5);
        assert!(summarise(&[]).is_none());
    }
}

/// A ratio between two rows, computed within each repeat and then
/// summarised over the repeats.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RatioSummary {
    /// What is divided by what.
    pub name: String,
    /// Median over the repeats.
    pub median: f64,
    /// Smallest and largest over the repeats.
    pub range: [f64; 2],
    /// Repeats the ratio could be computed in.
    pub repeats: usize,
}

/// The ratios the report summarises, each within one repeat: per gate fast
/// over general events/s; per row events/s over the global-lock row's; per
/// row lane CPU per event, events/s and heap per membership over the
/// upstream row's, heap swept against upstream swept and unswept against
/// upstream unswept (each ratio's name says which pair it divides); rows
/// with fixed event threads are left out. `repeats[r]` holds repeat `r`'s
/// rows: capacity rows with capacity rows, and keep-up rows' read
/// latencies over the upstream keep-up row's (the same offered rate).
pub fn ratios(repeats: &[Vec<Row>], upstream: &str) -> Vec<RatioSummary> {
    let mut values: Vec<(String, Vec<f64>)> = Vec::new();
    for rows in repeats {
        for (name, value) in repeat_ratios(rows, upstream) {
            match values.iter_mut().find(|(n, _)| *n == name) {
                Some((_, list)) => list.push(value),
                None => values.push((name, vec![value])),
            }
        }
    }
    values
        .into_iter()
        .filter_map(|(name, list)| {
            let min = list.iter().copied().fold(f64::INFINITY, f64::min);
            let max = list.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            Some(RatioSummary {
                median: median(&list)?,
                range: [min, max],
                repeats: list.len(),
                name,
            })
        })
        .collect()
}

/// The ratios of one repeat's rows, named.
fn repeat_ratios(rows: &[Row], upstream: &str) -> Vec<(String, f64)> {
    let capacity: Vec<&Row> = rows.iter().filter(|r| r.mode == "capacity").collect();
    let find = |strategy: &str, fast: Option<bool>| {
        capacity
            .iter()
            .find(|r| r.strategy == strategy && r.fast_path == fast && r.event_threads.is_none())
    };
    let divide = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let mut out = Vec::new();
    for row in capacity.iter().filter(|r| r.fast_path == Some(true)) {
        if let Some(general) = find(&row.strategy, Some(false)) {
            let ratio = divide(row.events_per_s, general.events_per_s);
            out.extend(ratio.map(|v| (format!("{} fast/general events/s", row.strategy), v)));
        }
    }
    // Rows with fixed event threads (`--upstream-rows all`) are compared
    // in the tables only.
    for row in capacity.iter().filter(|r| r.event_threads.is_none()) {
        if let Some(base) = find("global-lock", None).filter(|b| b.strategy != row.strategy) {
            let ratio = divide(row.events_per_s, base.events_per_s);
            out.extend(ratio.map(|v| (format!("{} events/s vs global-lock", row.label()), v)));
        }
        if let Some(up) = find(upstream, None).filter(|u| u.strategy != row.strategy) {
            let ratio = divide(row.cpu_ns_per_event, up.cpu_ns_per_event);
            out.extend(ratio.map(|v| (format!("{} lane CPU/event vs {upstream}", row.label()), v)));
            let ratio = divide(row.events_per_s, up.events_per_s);
            out.extend(ratio.map(|v| (format!("{} events/s vs {upstream}", row.label()), v)));
            out.extend(heap_ratios(row, up, upstream));
            out.extend(read_ratios(row, up, upstream));
        }
    }
    out.extend(keepup_ratios(rows, upstream));
    out
}

/// Each keep-up row's find_matches latency beside its writer over the
/// upstream keep-up row's, both at the run's offered rate.
fn keepup_ratios(rows: &[Row], upstream: &str) -> Vec<(String, f64)> {
    let keepup: Vec<&Row> = rows.iter().filter(|r| r.mode == "keepup").collect();
    let Some(up) = keepup.iter().find(|r| r.strategy == upstream) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for row in keepup.iter().filter(|r| r.strategy != upstream) {
        let pairs = [
            ("p50", row.read_p50_ns, up.read_p50_ns),
            ("p99", row.read_p99_ns, up.read_p99_ns),
        ];
        out.extend(pairs.into_iter().filter_map(|(what, ours, theirs)| {
            let (a, b) = (ours?, theirs?);
            (b > 0).then(|| {
                let name = format!("{} keep-up read {what} vs {upstream}", row.label());
                (name, a as f64 / b as f64)
            })
        }));
    }
    out
}

/// `row`'s find_matches latency over upstream's, read-only (the drained
/// trees, no writer) and during the run (beside each row's own writer).
fn read_ratios(row: &Row, up: &Row, upstream: &str) -> Vec<(String, f64)> {
    let pairs = [
        ("read-only p50", row.read_only_p50_ns, up.read_only_p50_ns),
        ("read-only p99", row.read_only_p99_ns, up.read_only_p99_ns),
        ("run read p50", row.read_p50_ns, up.read_p50_ns),
        ("run read p99", row.read_p99_ns, up.read_p99_ns),
    ];
    pairs
        .into_iter()
        .filter_map(|(what, ours, theirs)| match (ours, theirs) {
            (Some(a), Some(b)) if b > 0 => Some((
                format!("{} {what} vs {upstream}", row.label()),
                a as f64 / b as f64,
            )),
            _ => None,
        })
        .collect()
}

/// `row`'s heap per membership over upstream's, like with like: swept over
/// swept, unswept over unswept.
fn heap_ratios(row: &Row, up: &Row, upstream: &str) -> Vec<(String, f64)> {
    let pairs = [
        ("swept", row.bytes_per_membership, up.bytes_per_membership),
        (
            "unswept",
            row.unswept_bytes_per_membership,
            up.unswept_bytes_per_membership,
        ),
    ];
    pairs
        .into_iter()
        .filter_map(|(kind, ours, theirs)| match (ours, theirs) {
            (Some(a), Some(b)) if b > 0.0 => Some((
                format!(
                    "{} heap/membership {kind} vs {upstream} {kind}",
                    row.label()
                ),
                a / b,
            )),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod ratio_tests {
    use super::ratios;
    use crate::compare::output::report::tests::row;

    #[test]
    fn ratios_are_taken_per_repeat_then_summarised() {
        let repeat = |fast: f64, general: f64, base: f64| {
            let mut rows = vec![
                row("rwlock", Some(true), "capacity"),
                row("rwlock", Some(false), "capacity"),
                row("global-lock", None, "capacity"),
            ];
            for (r, v) in rows.iter_mut().zip([fast, general, base]) {
                r.events_per_s = Some(v);
            }
            rows
        };
        // Repeat 2 is twice as fast throughout: its ratios equal repeat 1's.
        let summary = ratios(
            &[repeat(300.0, 100.0, 50.0), repeat(600.0, 200.0, 100.0)],
            "up",
        );
        let fast_general = &summary[0];
        assert_eq!(fast_general.name, "rwlock fast/general events/s");
        assert_eq!((fast_general.median, fast_general.range), (3.0, [3.0, 3.0]));
        assert_eq!(fast_general.repeats, 2);
        let vs_lock = summary
            .iter()
            .find(|s| s.name == "rwlock fast events/s vs global-lock")
            .expect("a baseline ratio");
        assert_eq!(vs_lock.median, 6.0);
        assert!(
            summary.iter().all(|s| !s.name.contains("vs up")),
            "no upstream row"
        );
    }

    /// Keep-up rows pair their read latencies with the upstream keep-up
    /// row of their repeat, and never with a capacity row.
    #[test]
    fn keepup_reads_are_paired_with_upstream_keepup() {
        let repeat = |ours: u64, up: u64| {
            let mut rows = vec![
                row("rwlock", Some(true), "keepup"),
                row("up", None, "keepup"),
                row("up", None, "capacity"),
            ];
            for (r, v) in rows.iter_mut().zip([ours, up, 1]) {
                (r.read_p50_ns, r.read_p99_ns) = (Some(v), Some(2 * v));
            }
            rows
        };
        let summary = ratios(&[repeat(300, 400), repeat(100, 200)], "up");
        let p50 = summary
            .iter()
            .find(|s| s.name == "rwlock fast keep-up read p50 vs up")
            .expect("a keep-up ratio");
        assert_eq!(
            (p50.median, p50.range, p50.repeats),
            (0.625, [0.5, 0.75], 2)
        );
        assert!(summary
            .iter()
            .any(|s| s.name == "rwlock fast keep-up read p99 vs up"));
    }

    #[test]
    fn rows_are_paired_with_the_upstream_row_of_their_own_repeat() {
        let repeat = |ours: f64, up: f64| {
            let mut rows = vec![
                row("rwlock", Some(true), "capacity"),
                row("up", None, "capacity"),
            ];
            for (r, v) in rows.iter_mut().zip([ours, up]) {
                r.events_per_s = Some(v);
                r.cpu_ns_per_event = Some(1e9 / v);
            }
            rows
        };
        // Each repeat runs at its own speed (the second at half the first's):
        // paired within their repeat, the ratios are 2, 2 and 2.2.
        let summary = ratios(
            &[
                repeat(400.0, 200.0),
                repeat(200.0, 100.0),
                repeat(220.0, 100.0),
            ],
            "up",
        );
        let find = |name: &str| summary.iter().find(|s| s.name == name).expect(name);
        let rate = find("rwlock fast events/s vs up");
        assert_eq!(
            (rate.median, rate.range, rate.repeats),
            (2.0, [2.0, 2.2], 3)
        );
        let cpu = find("rwlock fast lane CPU/event vs up");
        assert_eq!(cpu.median, 0.5);
        assert!(
            summary.iter().all(|s| !s.name.starts_with("up ")),
            "no self-ratio"
        );
    }
}
