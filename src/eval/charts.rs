//! SVG charts of evaluation results (plotters, SVG backend only): bar charts in percent.
//!
//! - [`metric_bars`]: one metric across models (`charts/<metric>.svg` of `eval report`), or
//!   every metric of one run (`charts/metrics.svg`);
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
use crate::store::write_atomic;

fn short(label: &str) -> String {
    if label.chars().count() <= 18 {
        label.to_string()
    } else {
        label.chars().take(17).collect::<String>() + "…"
    }
}

/// A bar chart of `(label, percent)` bars titled `title`, as SVG text.
pub fn bars(title: &str, bars: &[(String, f64)]) -> Result<String> {
    let mut svg = String::new();
    let n = bars.len().max(1);
    let width = (140 + 70 * n as u32).max(480);
    {
        let root = SVGBackend::with_string(&mut svg, (width, 380)).into_drawing_area();
        let e = |e: &dyn std::fmt::Display| anyhow!("chart {title}: {e}");
        root.fill(&WHITE).map_err(|x| e(&x))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(48)
            .build_cartesian_2d((0..n).into_segmented(), 0.0f64..100.0)
            .map_err(|x| e(&x))?;
        let labels: Vec<String> = bars.iter().map(|(l, _)| short(l)).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc("%")
            .draw()
            .map_err(|x| e(&x))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
                let mut r = Rectangle::new(
                    [(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), *v)],
                    RGBColor(31, 119, 180).filled(),
                );
                r.set_margin(0, 0, 8, 8);
                r
            }))
            .map_err(|x| e(&x))?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
                Text::new(
                    format!("{v:.1}"),
                    (SegmentValue::CenterOf(i), (v + 3.0).min(97.0)),
                    ("sans-serif", 12),
                )
            }))
            .map_err(|x| e(&x))?;
        root.present().map_err(|x| e(&x))?;
    }
    Ok(svg)
}

/// One metric across models (percent), or `None` when no model has it.
pub fn metric_bars(metric: &str, header: &str, models: &[(String, &Summary)]) -> Result<Option<String>> {
    let values: Vec<(String, f64)> = models
        .iter()
        .filter_map(|(m, s)| s.metrics.get(metric).map(|x| (m.clone(), x.mean * 100.0)))
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
    let all: Vec<(String, f64)> = TABLE
        .iter()
        .filter_map(|(m, h, _)| totals.metrics.get(*m).map(|x| (h.to_string(), x.mean * 100.0)))
        .collect();
    write_atomic(&charts.join("metrics.svg"), bars("Metrics (%)", &all)?.as_bytes())?;
    for kind in ["difficulty", "database"] {
        let Some(groups) = by.get(kind) else { continue };
        let values: Vec<(String, f64)> = groups
            .iter()
            .filter_map(|(g, s)| s.metrics.get("completion").map(|x| (g.clone(), x.mean * 100.0)))
            .collect();
        if !values.is_empty() {
            let svg = bars(&format!("Completion rate by {kind} (%)"), &values)?;
            write_atomic(&charts.join(format!("completion_by_{kind}.svg")), svg.as_bytes())?;
        }
    }
    Ok(())
}
