//! `crtc compare --plots DIR`: three SVG bar charts drawn with plotters from
//! a [`Report`] (never typed by hand):
//!
//! - `throughput.svg`: events applied per second for every row, fast path on
//!   and off side by side per gate, then the global-lock baseline (and the
//!   upstream row when compiled);
//! - `latency.svg`: reader find_matches p50 and p99 during the run and the
//!   read-only p99 on the final tree, per row (log scale);
//! - `ratio.svg`: per gate, fast ÷ general events/s and general ÷ fast CPU
//!   per applied event over the whole stream, with a reference line at 1×
//!   (no 2× line: that target is per one-block store, criterion
//!   `tail_append`, not per stream).
//!
//! With `--repeat N` (N > 1) the throughput and latency bars are medians and
//! carry error bars from each figure's min–max over the repeats
//! (`Row::spread`); the ratio bars are medians of per-row medians, without
//! bars. Capacity rows are drawn when the report has any, keep-up rows otherwise.
//! Each chart is titled with the workload and carries, as its subtitle, the
//! command that produced it; the SVG's `<title>` and `<desc>` repeat them
//! with the machine and git revision. Text is laid out by plotters' built-in
//! estimate and rendered by the viewer, so no system font is needed.

use crate::compare::output::report::{p99_ratio, Report, Row};
use crate::compare::CompareError;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 640;
/// Height of the title block above the chart.
const TITLE_BLOCK: u32 = 76;

const FAST: RGBColor = RGBColor(31, 119, 180);
const GENERAL: RGBColor = RGBColor(255, 127, 14);
const OTHER: RGBColor = RGBColor(127, 127, 127);
const P50: RGBColor = RGBColor(44, 160, 44);
const P99: RGBColor = RGBColor(214, 39, 40);
const QUIET: RGBColor = RGBColor(148, 103, 189);

/// The command line as one shell-quoted string.
pub fn command_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The rows a chart draws: capacity rows, or keep-up rows when there are
/// none.
fn chart_rows(report: &Report) -> Vec<&Row> {
    let capacity: Vec<&Row> = report
        .rows
        .iter()
        .filter(|r| r.mode == "capacity")
        .collect();
    if capacity.is_empty() {
        report.rows.iter().collect()
    } else {
        capacity
    }
}

/// One bar.
struct Bar {
    /// Category (x position).
    slot: usize,
    /// Offset inside the category, in bar widths from its center.
    offset: f64,
    /// Bar width in category units.
    width: f64,
    value: f64,
    color: RGBColor,
    /// Printed above the bar.
    text: String,
    /// The figure's range over the repeats (an error bar), if measured
    /// more than once.
    range: Option<[f64; 2]>,
}

/// The range over the repeats of `row`'s figure `key` (`Row::spread`).
fn range_of(row: &Row, key: &str) -> Option<[f64; 2]> {
    row.spread.get(key).copied().filter(|_| row.repeats > 1)
}

/// A bar chart before drawing.
struct Bars {
    title: String,
    /// Settings line under the title.
    detail: String,
    y_desc: String,
    /// Category labels, one or two lines each.
    categories: Vec<(String, String)>,
    bars: Vec<Bar>,
    /// Legend entries.
    legend: Vec<(String, RGBColor)>,
    /// Horizontal reference lines (value, label).
    lines: Vec<(f64, String)>,
    log: bool,
}

fn short(value: f64) -> String {
    if value == 0.0 {
        "0".to_owned()
    } else if value >= 1e6 {
        format!("{:.2}M", value / 1e6)
    } else if value >= 1e4 {
        format!("{:.0}k", value / 1e3)
    } else if value >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else if value >= 10.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.2}")
    }
}

fn text_error(e: impl std::fmt::Display) -> String {
    format!("drawing failed: {e}")
}

/// Draws the title block: the title and, below it, the command.
fn title_block(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    bars: &Bars,
    command: &str,
) -> Result<(), String> {
    area.draw(&Text::new(
        bars.title.clone(),
        (16, 8),
        ("sans-serif", 18).into_font().color(&BLACK),
    ))
    .map_err(text_error)?;
    area.draw(&Text::new(
        bars.detail.clone(),
        (16, 32),
        ("sans-serif", 13).into_font().color(&BLACK),
    ))
    .map_err(text_error)?;
    area.draw(&Text::new(
        format!("$ {command}"),
        (16, 52),
        ("monospace", 12).into_font().color(&RGBColor(80, 80, 80)),
    ))
    .map_err(text_error)?;
    Ok(())
}

/// A bar chart's plotting area over a value axis `Y`.
type Chart<'a, 'b, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, Y>>;

/// The axes and the horizontal reference lines with their labels.
fn draw_axes<Y>(chart: &mut Chart<'_, '_, Y>, bars: &Bars) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let n = bars.categories.len() as f64;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(bars.y_desc.as_str())
        .y_label_formatter(&|v| short(*v))
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 14))
        .draw()
        .map_err(text_error)?;
    for (value, text) in &bars.lines {
        chart
            .draw_series(LineSeries::new(
                [(-0.5, *value), (n - 0.5, *value)],
                BLACK.mix(0.5).stroke_width(1),
            ))
            .map_err(text_error)?;
        let style = ("sans-serif", 12)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Right, VPos::Bottom));
        chart
            .draw_series([Text::new(text.clone(), (n - 0.5, *value), style)])
            .map_err(text_error)?;
    }
    Ok(())
}

/// One bar from `floor`, its min–max whisker when it has one, and its
/// value on top.
fn draw_bar<Y>(chart: &mut Chart<'_, '_, Y>, bar: &Bar, floor: f64) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let center = bar.slot as f64 + bar.offset * bar.width;
    let (left, right) = (center - 0.45 * bar.width, center + 0.45 * bar.width);
    chart
        .draw_series([Rectangle::new(
            [(left, floor), (right, bar.value)],
            bar.color.filled(),
        )])
        .map_err(text_error)?;
    if let Some([low, high]) = bar.range {
        let (low, high) = (low.max(floor), high.max(floor));
        let cap = 0.15 * bar.width;
        let whisker = [
            [(center, low), (center, high)],
            [(center - cap, low), (center + cap, low)],
            [(center - cap, high), (center + cap, high)],
        ];
        chart
            .draw_series(whisker.map(|segment| PathElement::new(segment, BLACK.stroke_width(1))))
            .map_err(text_error)?;
    }
    let style = ("sans-serif", 11)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    chart
        .draw_series([Text::new(bar.text.clone(), (center, bar.value), style)])
        .map_err(text_error)?;
    Ok(())
}

/// Category labels under the axis, placed in canvas pixels (`root` is the
/// whole canvas, whose coordinates are the backend's), and the legend in one
/// row along the bottom of the canvas.
fn draw_labels<Y>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &Chart<'_, '_, Y>,
    bars: &Bars,
    floor: f64,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    for (i, (first, second)) in bars.categories.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64, floor));
        let style = ("sans-serif", 13)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(first.clone(), (x, y + 8), style.clone()))
            .map_err(text_error)?;
        root.draw(&Text::new(second.clone(), (x, y + 24), style))
            .map_err(text_error)?;
    }
    let (mut x, y) = (96, HEIGHT as i32 - 26);
    for (name, color) in &bars.legend {
        root.draw(&Rectangle::new([(x, y), (x + 12, y + 12)], color.filled()))
            .map_err(text_error)?;
        let font = ("sans-serif", 13).into_font().color(&BLACK);
        root.draw(&Text::new(name.clone(), (x + 18, y), font))
            .map_err(text_error)?;
        x += 18 + 8 * name.chars().count() as i32 + 32;
    }
    Ok(())
}

fn draw_on<Y>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &mut Chart<'_, '_, Y>,
    bars: &Bars,
    floor: f64,
) -> Result<(), String>
where
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    draw_axes(chart, bars)?;
    for bar in &bars.bars {
        draw_bar(chart, bar, floor)?;
    }
    draw_labels(root, chart, bars, floor)
}

fn render(bars: &Bars, command: &str, path: &Path) -> Result<(), String> {
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(text_error)?;
    let (head, body) = root.split_vertically(TITLE_BLOCK);
    title_block(&head, bars, command)?;
    let n = bars.categories.len().max(1) as f64;
    let top = bars
        .bars
        .iter()
        .map(|b| b.value)
        .chain(bars.lines.iter().map(|l| l.0))
        .fold(0.0f64, f64::max);
    let mut builder = ChartBuilder::on(&body);
    builder
        .margin(12)
        .margin_right(24)
        .x_label_area_size(56)
        .margin_bottom(40)
        .y_label_area_size(80);
    if bars.log {
        let low = bars
            .bars
            .iter()
            .map(|b| b.value)
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        let floor = if low.is_finite() {
            10f64.powf(low.log10().floor())
        } else {
            1.0
        };
        let ceiling = top.max(floor * 10.0) * 2.0;
        let mut chart = builder
            .build_cartesian_2d(-0.5..n - 0.5, (floor..ceiling).log_scale())
            .map_err(text_error)?;
        draw_on(&root, &mut chart, bars, floor)?;
    } else {
        let ceiling = if top > 0.0 { top * 1.15 } else { 1.0 };
        let mut chart = builder
            .build_cartesian_2d(-0.5..n - 0.5, 0.0..ceiling)
            .map_err(text_error)?;
        draw_on(&root, &mut chart, bars, 0.0)?;
    }
    root.present().map_err(text_error)?;
    Ok(())
}

/// Strategies in row order, each with its rows.
fn by_strategy<'a>(rows: &[&'a Row]) -> Vec<(String, Vec<&'a Row>)> {
    let mut groups: Vec<(String, Vec<&Row>)> = Vec::new();
    for row in rows {
        match groups.iter_mut().find(|(s, _)| *s == row.strategy) {
            Some((_, members)) => members.push(row),
            None => groups.push((row.strategy.clone(), vec![row])),
        }
    }
    groups
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn threads(report: &Report) -> String {
    format!(
        "{}, {}",
        plural(report.settings.lanes, "lane"),
        plural(report.settings.readers, "reader")
    )
}

fn fast_color(fast: Option<bool>) -> RGBColor {
    match fast {
        Some(true) => FAST,
        Some(false) => GENERAL,
        None => OTHER,
    }
}

fn throughput(report: &Report, rows: &[&Row]) -> Bars {
    let groups = by_strategy(rows);
    let mut bars = Vec::new();
    for (slot, (_, members)) in groups.iter().enumerate() {
        let k = members.len() as f64;
        for (j, row) in members.iter().enumerate() {
            let value = row.events_per_s.unwrap_or(0.0);
            bars.push(Bar {
                slot,
                offset: j as f64 - (k - 1.0) / 2.0,
                width: 0.8 / k,
                value,
                color: fast_color(row.fast_path),
                text: short(value),
                range: range_of(row, "events_per_s"),
            });
        }
    }
    Bars {
        title: format!(
            "{}: events applied per second, fast path on/off",
            report.workload.name
        ),
        detail: format!(
            "{} mode, {}, drain included",
            rows.first().map_or("capacity", |r| r.mode.as_str()),
            threads(report),
        ),
        y_desc: "events applied per second".to_owned(),
        categories: groups
            .iter()
            .map(|(s, _)| (s.clone(), String::new()))
            .collect(),
        bars,
        legend: vec![
            ("fast path on".to_owned(), FAST),
            ("fast path off (general)".to_owned(), GENERAL),
            ("no fast-path switch".to_owned(), OTHER),
        ],
        lines: Vec::new(),
        log: false,
    }
}

/// Reads one figure of a row.
type Figure = fn(&Row) -> Option<u64>;

/// A latency chart's category label: the strategy, then the path and the
/// run p99 ÷ read-only p99.
fn latency_category(r: &Row) -> (String, String) {
    let path = match r.fast_path {
        Some(true) => "fast",
        Some(false) => "general",
        None => "",
    };
    let second = match p99_ratio(r) {
        Some(ratio) if path.is_empty() => format!("p99 x{ratio:.2}"),
        Some(ratio) => format!("{path}, p99 x{ratio:.2}"),
        None => path.to_owned(),
    };
    (r.strategy.clone(), second)
}

fn latency(report: &Report, rows: &[&Row]) -> Bars {
    let mut bars = Vec::new();
    let series: [(&str, RGBColor, Figure, &str); 3] = [
        ("run p50", P50, |r| r.read_p50_ns, "read_p50_ns"),
        ("run p99", P99, |r| r.read_p99_ns, "read_p99_ns"),
        (
            "read-only p99",
            QUIET,
            |r| r.read_only_p99_ns,
            "read_only_p99_ns",
        ),
    ];
    for (slot, row) in rows.iter().enumerate() {
        for (j, (_, color, get, key)) in series.iter().enumerate() {
            if let Some(value) = get(row) {
                bars.push(Bar {
                    slot,
                    offset: j as f64 - 1.0,
                    width: 0.8 / 3.0,
                    value: value.max(1) as f64,
                    color: *color,
                    text: short(value as f64),
                    range: range_of(row, key),
                });
            }
        }
    }
    let categories = rows.iter().map(|r| latency_category(r)).collect();
    Bars {
        title: format!("{}: find_matches latency, ns", report.workload.name),
        detail: format!(
            "log scale; during the run ({}) and read-only on the drained final tree (same lookups, no writer); x = run p99 / read-only p99",
            threads(report),
        ),
        y_desc: "find_matches service time, ns".to_owned(),
        categories,
        bars,
        legend: series
            .iter()
            .map(|(name, color, _, _)| ((*name).to_owned(), *color))
            .collect(),
        lines: Vec::new(),
        log: true,
    }
}

fn ratio(report: &Report, rows: &[&Row]) -> Bars {
    let mut categories = Vec::new();
    let mut bars = Vec::new();
    for (strategy, members) in by_strategy(rows) {
        let fast = members.iter().find(|r| r.fast_path == Some(true));
        let general = members.iter().find(|r| r.fast_path == Some(false));
        let (Some(fast), Some(general)) = (fast, general) else {
            continue;
        };
        let slot = categories.len();
        categories.push((strategy.clone(), String::new()));
        let throughput = match (fast.events_per_s, general.events_per_s) {
            (Some(f), Some(g)) if g > 0.0 => Some(f / g),
            _ => None,
        };
        let cpu = match (general.cpu_ns_per_event, fast.cpu_ns_per_event) {
            (Some(g), Some(f)) if f > 0.0 => Some(g / f),
            _ => None,
        };
        for (j, (value, color)) in [(throughput, FAST), (cpu, GENERAL)].into_iter().enumerate() {
            if let Some(value) = value {
                bars.push(Bar {
                    slot,
                    offset: j as f64 - 0.5,
                    width: 0.35,
                    value,
                    color,
                    text: format!("{value:.2}x"),
                    range: None,
                });
            }
        }
    }
    Bars {
        title: format!(
            "{}: fast path vs general path per gate",
            report.workload.name
        ),
        detail: format!(
            "whole stream (prompt stores and removals included), {}",
            threads(report),
        ),
        y_desc: "ratio".to_owned(),
        categories,
        bars,
        legend: vec![
            ("events/s fast ÷ general".to_owned(), FAST),
            ("CPU ns/event general ÷ fast".to_owned(), GENERAL),
        ],
        // Parity only: the 2x fast-path target is per one-block store
        // (criterion `tail_append`), not per whole stream.
        lines: vec![(1.0, "1x".to_owned())],
        log: false,
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Puts `<title>` and `<desc>` right after the opening `<svg ...>` tag.
pub(crate) fn add_metadata(path: &Path, title: &str, desc: &str) -> Result<(), String> {
    let svg = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let Some(end) = svg
        .find("<svg")
        .and_then(|s| svg[s..].find('>').map(|e| s + e + 1))
    else {
        return Err("no <svg> element".to_owned());
    };
    let tagged = format!(
        "{}\n<title>{}</title>\n<desc>{}</desc>{}",
        &svg[..end],
        escape(title),
        escape(desc),
        &svg[end..]
    );
    std::fs::write(path, tagged).map_err(|e| e.to_string())
}

/// The chart file names `write_plots` produces, in order.
pub const CHARTS: [&str; 3] = ["throughput", "latency", "ratio"];

/// Writes the three charts of `report` into `dir` (created if missing),
/// named `PREFIX-throughput.svg` etc., or `throughput.svg` etc. when
/// `prefix` is empty. Returns the paths written.
pub fn write_plots(
    report: &Report,
    dir: &Path,
    prefix: &str,
) -> Result<Vec<PathBuf>, CompareError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CompareError(format!("cannot create {}: {e}", dir.display())))?;
    let rows = chart_rows(report);
    let command = command_line(&report.argv);
    let provenance = format!(
        "produced by: {command}; machine: {} ({} cores, {}); git revision {}{}; features: {}",
        report.machine.hostname,
        report.machine.cores,
        report.machine.cpu_model,
        report.git_revision,
        if report.git_dirty {
            " with uncommitted changes"
        } else {
            ""
        },
        report.features.join(", "),
    );
    let charts = [
        throughput(report, &rows),
        latency(report, &rows),
        ratio(report, &rows),
    ];
    let mut written = Vec::new();
    for (name, bars) in CHARTS.iter().zip(&charts) {
        let file = if prefix.is_empty() {
            format!("{name}.svg")
        } else {
            format!("{prefix}-{name}.svg")
        };
        let path = dir.join(file);
        let fail = |e: String| CompareError(format!("cannot write {}: {e}", path.display()));
        render(bars, &command, &path).map_err(fail)?;
        add_metadata(&path, &bars.title, &provenance).map_err(fail)?;
        written.push(path);
    }
    Ok(written)
}
