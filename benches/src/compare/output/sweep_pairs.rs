//! The sweep's rows paired with upstream 1.6.1's: within one window every
//! strategy replays the same schedule back to back
//! ([`crate::compare::sweep`]), so a strategy's figure divided by
//! upstream's figure of the same window is a paired ratio, like the paired
//! ratios of `crtc compare --repeat`, but over runs of whole windows (2 s
//! and longer at the paper's configuration) instead of one replay of the
//! trace (0.03–0.05 s).
//!
//! Three ratios per strategy and window: lane CPU per event (the strategy's
//! over upstream's, lower is better), achieved operations per second
//! (higher is better) and find_matches p99 (lower is better). Achieved
//! rates compare capacities only where the window outran both rows: a row
//! that kept up achieved the offered rate, not its capacity, so a ratio
//! with it in it is a bound, not a measurement. So the summary's capacity
//! ratio is the median over the windows neither row kept up, and the lane
//! CPU and p99 ratios are medians over every window.

use crate::compare::output::paper::Targets;
use crate::compare::output::repeat::median;
use crate::compare::subjects::UPSTREAM_NAME;
use crate::compare::sweep::SweepRow;
use serde::Serialize;
use std::fmt::Write as _;

/// One strategy's ratios to upstream at one window.
#[derive(Clone, Debug, Serialize)]
pub struct PairedWindow {
    /// Gate name or "global-lock".
    pub strategy: String,
    /// The window, ms.
    pub window_ms: u64,
    /// Lane CPU per event ÷ upstream's.
    pub lane_cpu_ratio: Option<f64>,
    /// Achieved operations per second ÷ upstream's.
    pub achieved_ratio: f64,
    /// find_matches p99 ÷ upstream's.
    pub p99_ratio: Option<f64>,
    /// Whether both rows fell behind at this window (neither kept up), so
    /// the achieved ratio compares capacities.
    pub both_fell_behind: bool,
}

/// One strategy's paired ratios summarised over the windows.
#[derive(Clone, Debug, Serialize)]
pub struct PairedSummary {
    /// Gate name or "global-lock".
    pub strategy: String,
    /// Median lane CPU ratio over every window, with its (min, max).
    pub lane_cpu_ratio: Option<Spread>,
    /// Median achieved-rate ratio over the windows neither row kept up.
    pub capacity_ratio: Option<Spread>,
    /// Median p99 ratio over every window.
    pub p99_ratio: Option<Spread>,
}

/// A median with its range and the number of values it summarises.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// How many values.
    pub count: usize,
}

impl Spread {
    fn of(values: &[f64]) -> Option<Self> {
        let median = median(values)?;
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Self {
            median,
            min,
            max,
            count: values.len(),
        })
    }

    fn render(spread: Option<Self>) -> String {
        spread.map_or_else(
            || "-".to_owned(),
            |s| format!("{:.2}× ({:.2}–{:.2}, {})", s.median, s.min, s.max, s.count),
        )
    }
}

fn ratio(ours: Option<f64>, theirs: Option<f64>) -> Option<f64> {
    match (ours, theirs) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// Every non-upstream row paired with upstream's row of the same window
/// (none when the sweep ran without upstream).
pub fn pair(rows: &[SweepRow]) -> Vec<PairedWindow> {
    let upstream_of = |window_ms| {
        rows.iter()
            .find(|r| r.strategy == UPSTREAM_NAME && r.window_ms == window_ms)
    };
    let p99 = |r: &SweepRow| r.find_matches_p99_ns.map(|n| n as f64);
    rows.iter()
        .filter(|r| r.strategy != UPSTREAM_NAME)
        .filter_map(|r| {
            let up = upstream_of(r.window_ms)?;
            Some(PairedWindow {
                strategy: r.strategy.clone(),
                window_ms: r.window_ms,
                lane_cpu_ratio: ratio(r.lane_cpu_ns_per_event, up.lane_cpu_ns_per_event),
                achieved_ratio: r.achieved_ops_per_s / up.achieved_ops_per_s.max(f64::MIN_POSITIVE),
                p99_ratio: ratio(p99(r), p99(up)),
                both_fell_behind: !r.kept_up && !up.kept_up,
            })
        })
        .collect()
}

/// One summary per strategy, in the order the strategies first appear.
pub fn summarise(pairs: &[PairedWindow]) -> Vec<PairedSummary> {
    let mut strategies: Vec<&str> = Vec::new();
    for p in pairs {
        if !strategies.contains(&p.strategy.as_str()) {
            strategies.push(&p.strategy);
        }
    }
    strategies
        .into_iter()
        .map(|strategy| {
            let mine: Vec<&PairedWindow> =
                pairs.iter().filter(|p| p.strategy == strategy).collect();
            let values = |f: &dyn Fn(&PairedWindow) -> Option<f64>| -> Vec<f64> {
                mine.iter().filter_map(|p| f(p)).collect()
            };
            PairedSummary {
                strategy: strategy.to_owned(),
                lane_cpu_ratio: Spread::of(&values(&|p| p.lane_cpu_ratio)),
                capacity_ratio: Spread::of(&values(&|p| {
                    p.both_fell_behind.then_some(p.achieved_ratio)
                })),
                p99_ratio: Spread::of(&values(&|p| p.p99_ratio)),
            }
        })
        .collect()
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "missed"
    }
}

/// The lane CPU verdicts of one strategy: per issue's targets (as in
/// `targets.md`) its bound and whether the median ratio is within it ("-"
/// for rows without a bound or without a ratio).
fn lane_cpu_verdict(summary: &PairedSummary) -> String {
    let verdicts: Vec<String> = Targets::BOTH
        .iter()
        .filter_map(|t| {
            Some((
                t.lane_cpu_bound(&summary.strategy)?,
                summary.lane_cpu_ratio?,
            ))
        })
        .map(|(bound, ratio)| format!("≤ {bound:.1}×: {}", verdict(ratio.median <= bound)))
        .collect();
    if verdicts.is_empty() {
        "-".to_owned()
    } else {
        verdicts.join("; ")
    }
}

/// The line naming the gate with the highest median capacity ratio and
/// judging it against each issue's capacity target (as in `targets.md`).
fn best_capacity_line(summaries: &[PairedSummary]) -> String {
    let best = summaries
        .iter()
        .filter(|s| Targets::Issue35.lane_cpu_bound(&s.strategy).is_some())
        .filter_map(|s| Some((s, s.capacity_ratio?)))
        .max_by(|a, b| a.1.median.total_cmp(&b.1.median));
    match best {
        Some((s, c)) => format!(
            "\nBest gate's capacity against {UPSTREAM_NAME} on these windows: {} at {:.2}× \
             (target {}).\n",
            s.strategy,
            c.median,
            Targets::BOTH
                .map(|t| {
                    let target = t.capacity_vs_upstream();
                    format!("≥ {target:.1}×: {}", verdict(c.median >= target))
                })
                .join("; ")
        ),
        None => "\nNo window outran both a gate and upstream, so these windows do not judge \
                 capacity.\n"
            .to_owned(),
    }
}

/// The summary as a markdown section (empty when nothing was paired).
pub fn render(summaries: &[PairedSummary]) -> String {
    if summaries.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n## Paired with {UPSTREAM_NAME}, window by window\n\n\
         Each ratio is a strategy's figure over {UPSTREAM_NAME}'s in the same window (the rows \
         of one window ran back to back on the same schedule): the median over the windows, \
         with its range and the number of windows. Lane CPU per event and find_matches p99: \
         every window, lower is better. Capacity (achieved operations per second): only the \
         windows neither row kept up (a row that kept up achieved the offered rate, not its \
         capacity), higher is better; \"-\" when no window outran both.\n\n\
         | strategy | lane CPU/event ratio | lane CPU target | capacity ratio | \
         find_matches p99 ratio |\n|---|---:|---|---:|---:|\n"
    );
    for s in summaries {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            s.strategy,
            Spread::render(s.lane_cpu_ratio),
            lane_cpu_verdict(s),
            Spread::render(s.capacity_ratio),
            Spread::render(s.p99_ratio)
        );
    }
    out.push_str(&best_capacity_line(summaries));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        strategy: &str,
        window_ms: u64,
        achieved: f64,
        cpu: f64,
        p99: u64,
        kept_up: bool,
    ) -> SweepRow {
        SweepRow {
            strategy: strategy.to_owned(),
            window_ms,
            offered_ops_per_s: 100.0,
            achieved_ops_per_s: achieved,
            offered_block_ops_per_s: 1000.0,
            achieved_block_ops_per_s: achieved * 10.0,
            lane_cpu_ns_per_event: Some(cpu),
            find_matches_p50_ns: Some(1),
            find_matches_p99_ns: Some(p99),
            find_matches_p999_ns: Some(p99),
            elapsed_s: 1.0,
            issue_span_s: 1.0,
            kept_up,
            stress_lookups: 0,
            rejected_events: 0,
        }
    }

    #[test]
    fn capacity_counts_only_windows_both_rows_missed() {
        let rows = [
            row("rwlock", 4000, 100.0, 50.0, 10, true),
            row(UPSTREAM_NAME, 4000, 80.0, 100.0, 20, false),
            row("rwlock", 2000, 90.0, 60.0, 30, false),
            row(UPSTREAM_NAME, 2000, 45.0, 120.0, 10, false),
        ];
        let summary = summarise(&pair(&rows));
        assert_eq!(summary.len(), 1);
        let s = &summary[0];
        let capacity = s.capacity_ratio.expect("upstream missed one window");
        assert_eq!((capacity.median, capacity.count), (2.0, 1));
        let cpu = s.lane_cpu_ratio.expect("both windows have lane CPU");
        assert_eq!(
            (cpu.median, cpu.min, cpu.max, cpu.count),
            (0.5, 0.5, 0.5, 2)
        );
        let p99 = s.p99_ratio.expect("both windows have reads");
        assert_eq!((p99.min, p99.max), (0.5, 3.0));
        let page = render(&summary);
        assert!(page.contains(
            "| rwlock | 0.50× (0.50–0.50, 2) | ≤ 0.8×: met; ≤ 0.5×: met | 2.00× (2.00–2.00, 1) |"
        ));
        assert!(page.contains("rwlock at 2.00× (target ≥ 1.5×: met; ≥ 2.0×: met)"));
    }

    #[test]
    fn no_upstream_no_pairs() {
        let rows = [row("rwlock", 1000, 1.0, 1.0, 1, true)];
        assert!(pair(&rows).is_empty());
        assert_eq!(render(&summarise(&pair(&rows))), "");
    }
}
