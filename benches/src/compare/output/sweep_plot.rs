//! The sweep's chart, as upstream's `mooncake_bench` draws it: achieved
//! against offered block operations per second on log-log axes, one line
//! per strategy across the windows, and a dashed identity line (a row on
//! the line kept up with its offered load). Like the compare charts, the
//! SVG's `<title>` and `<desc>` name the chart and the command, machine and
//! revision that produced it.

use crate::compare::output::plots::{add_metadata, command_line};
use crate::compare::sweep::{SweepReport, SweepRow};
use crate::compare::CompareError;
use plotters::prelude::*;
use std::path::Path;

const WIDTH: u32 = 900;
const HEIGHT: u32 = 640;

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn drawing(e: impl std::fmt::Display) -> CompareError {
    CompareError(format!("drawing the sweep chart failed: {e}"))
}

/// The strategies of `report`, in row order, with their (offered, achieved)
/// points.
fn series(report: &SweepReport) -> Vec<(&str, Vec<(f64, f64)>)> {
    let mut out: Vec<(&str, Vec<(f64, f64)>)> = Vec::new();
    for row in &report.rows {
        let point = (row.offered_block_ops_per_s, row.achieved_block_ops_per_s);
        match out.iter_mut().find(|(name, _)| *name == row.strategy) {
            Some((_, points)) => points.push(point),
            None => out.push((row.strategy.as_str(), vec![point])),
        }
    }
    out
}

/// The axis range covering every offered and achieved rate, padded.
fn bounds(rows: &[SweepRow]) -> (f64, f64) {
    let rates = rows
        .iter()
        .flat_map(|r| [r.offered_block_ops_per_s, r.achieved_block_ops_per_s])
        .filter(|v| v.is_finite() && *v > 0.0);
    let (lo, hi) = rates.fold((f64::MAX, 0.0_f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi <= 0.0 {
        (1.0, 10.0)
    } else {
        (lo * 0.8, hi * 1.25)
    }
}

/// The identity line from `lo` to `hi` as every other of 40 segments even
/// in log scale (a dashed line).
fn identity_dashes(lo: f64, hi: f64) -> impl Iterator<Item = [(f64, f64); 2]> {
    let step = (hi / lo).ln() / 40.0;
    (0..40).step_by(2).map(move |i| {
        let (a, b) = (
            lo * (step * i as f64).exp(),
            lo * (step * (i + 1) as f64).exp(),
        );
        [(a, a), (b, b)]
    })
}

/// The SVG's `<desc>`: command, machine, revision and features.
fn provenance(report: &SweepReport) -> String {
    let dirty = if report.git_dirty {
        " with uncommitted changes"
    } else {
        ""
    };
    format!(
        "produced by: {}; machine: {} ({} cores, {}); git revision {}{dirty}; features: {}",
        command_line(&report.argv),
        report.machine.hostname,
        report.machine.cores,
        report.machine.cpu_model,
        report.git_revision,
        report.features.join(", "),
    )
}

/// Writes the chart of `report` to `path`.
pub fn write_sweep_chart(report: &SweepReport, path: &Path) -> Result<(), CompareError> {
    let root = SVGBackend::new(path, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(drawing)?;
    let (lo, hi) = bounds(&report.rows);
    let caption = format!("{}: achieved vs offered", report.corpus.name);
    let caption_title = caption.clone();
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 16))
        .margin(20)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d((lo..hi).log_scale(), (lo..hi).log_scale())
        .map_err(drawing)?;
    chart
        .configure_mesh()
        .x_desc("offered block ops/s")
        .y_desc("achieved block ops/s (drain included)")
        .draw()
        .map_err(drawing)?;
    chart
        .draw_series(identity_dashes(lo, hi).map(|s| PathElement::new(s, BLACK.mix(0.4))))
        .map_err(drawing)?;
    for (i, (name, points)) in series(report).into_iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(drawing)?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        let marks = points
            .into_iter()
            .map(|p| Circle::new(p, 4, color.filled()));
        chart.draw_series(marks).map_err(drawing)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(drawing)?;
    let footer = format!("$ {}", command_line(&report.argv));
    root.draw(&Text::new(
        footer,
        (20, HEIGHT as i32 - 18),
        ("monospace", 11),
    ))
    .map_err(drawing)?;
    root.present().map_err(drawing)?;
    drop(root);
    add_metadata(path, &caption_title, &provenance(report)).map_err(drawing)
}
