//! SVG charts of evaluation results (plotters, SVG backend only): bar charts in percent.
//!
//! - [`bars`]: numbered bars with a legend of full names under the plot and error bars for
//!   95% intervals (`charts/<metric>.svg` of `eval report`, `charts/metrics.svg` of a run);
//! - [`metric_bars`]: one metric across summaries;
//! - completion rate by difficulty and by database (`charts/completion_by_<kind>.svg`).
//!
//! Output is a pure function of the numbers (no timestamps), so reports stay byte-identical.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use super::report::TABLE;
use super::score::Summary;
use super::stats::Interval;
use crate::store::write_atomic;

/// Height of the plot area; the legend goes below it.
const PLOT_HEIGHT: u32 = 360;
/// Height of one legend line.
const LEGEND_LINE: u32 = 18;

/// A bar chart of `(label, percent, 95% interval)` bars titled `title`, as SVG text. The x axis
/// numbers the bars (1, 2, …) and the legend under the plot gives each number's full label and
/// value, so long names (run names, databases) are never cut and never overlap; an interval is
/// drawn as an error bar.
pub fn bars(title: &str, bars: &[(String, f64, Option<Interval>)]) -> Result<String> {
    let mut svg = String::new();
    let n = bars.len().max(1);
    let longest = bars.iter().map(|(l, _, _)| l.chars().count()).max().unwrap_or(0) as u32;
    let width = (120 + 56 * n as u32).max(200 + 7 * longest).max(480);
    let height = PLOT_HEIGHT + 16 + LEGEND_LINE * n as u32;
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        let e = |e: &dyn std::fmt::Display| anyhow!("chart {title}: {e}");
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let (plot, legend) = root.split_vertically(PLOT_HEIGHT);
        let mut chart = ChartBuilder::on(&plot)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d((0..n).into_segmented(), 0.0f64..100.0)
            .map_err(|x| e(&x))?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => (i + 1).to_string(),
                _ => String::new(),
            })
            .x_desc("bar (see the legend below)")
            .y_desc("%")
            .draw()
            .map_err(|x| e(&x))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (_, v, _))| {
                let mut r = Rectangle::new(
                    [(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), *v)],
                    RGBColor(31, 119, 180).filled(),
                );
                r.set_margin(0, 0, 8, 8);
                r
            }))
            .map_err(|x| e(&x))?;
        chart
            .draw_series(bars.iter().enumerate().filter_map(|(i, (_, _, iv))| {
                let iv = (*iv)?;
                Some(PathElement::new(
                    vec![(SegmentValue::CenterOf(i), iv.lo), (SegmentValue::CenterOf(i), iv.hi)],
                    BLACK.stroke_width(2),
                ))
            }))
            .map_err(|x| e(&x))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (_, v, iv))| {
                let top = iv.map_or(*v, |iv| iv.hi.max(*v));
                Text::new(
                    format!("{v:.1}"),
                    (SegmentValue::CenterOf(i), (top + 4.0).min(97.0)),
                    ("sans-serif", 12),
                )
            }))
            .map_err(|x| e(&x))?;
        for (i, (label, v, iv)) in bars.iter().enumerate() {
            let interval = iv.map_or(String::new(), |iv| format!(" [{:.1}, {:.1}]", iv.lo, iv.hi));
            legend
                .draw(&Text::new(
                    format!("{}. {label}: {v:.1}{interval}", i + 1),
                    (12, 4 + (LEGEND_LINE * i as u32) as i32),
                    ("sans-serif", 13),
                ))
                .map_err(|x| e(&x))?;
        }
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}

/// One metric across models (percent), or `None` when no model has it.
pub fn metric_bars(metric: &str, header: &str, models: &[(String, &Summary)]) -> Result<Option<String>> {
    let values: Vec<(String, f64, Option<Interval>)> = models
        .iter()
        .filter_map(|(m, s)| s.metrics.get(metric).map(|x| (m.clone(), x.mean * 100.0, None)))
        .collect();
    if values.is_empty() {
        return Ok(None);
    }
    bars(header, &values).map(Some)
}

/// Writes one run's charts into `dir/charts/`: `metrics.svg` (every table metric of the run),
/// `completion_by_difficulty.svg` and `completion_by_database.svg` when the run has completion
/// and the breakdown has groups.
pub fn write_run_charts(dir: &Path, totals: &Summary, by: &BTreeMap<String, BTreeMap<String, Summary>>) -> Result<()> {
    let charts = dir.join("charts");
    std::fs::create_dir_all(&charts)?;
    let pct = |i: &Interval| Interval {
        lo: i.lo * 100.0,
        hi: i.hi * 100.0,
    };
    let all: Vec<(String, f64, Option<Interval>)> = TABLE
        .iter()
        .filter_map(|(m, h, _)| {
            let x = totals.metrics.get(*m)?;
            Some((h.to_string(), x.mean * 100.0, totals.intervals.get(*m).map(pct)))
        })
        .collect();
    write_atomic(&charts.join("metrics.svg"), bars("Metrics (%)", &all)?.as_bytes())?;
    for kind in ["difficulty", "database"] {
        let Some(groups) = by.get(kind) else { continue };
        let values: Vec<(String, f64, Option<Interval>)> = groups
            .iter()
            .filter_map(|(g, s)| s.metrics.get("completion").map(|x| (g.clone(), x.mean * 100.0, None)))
            .collect();
        if !values.is_empty() {
            let svg = bars(&format!("Completion rate by {kind} (%)"), &values)?;
            write_atomic(&charts.join(format!("completion_by_{kind}.svg")), svg.as_bytes())?;
        }
    }
    Ok(())
}
