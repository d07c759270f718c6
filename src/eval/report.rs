//! The files of one evaluation run, `eval/<run>/`:
//!
//! | file           | what                                                                     |
//! |----------------|--------------------------------------------------------------------------|
//! | `rows.jsonl`   | one [`RowResult`] per selected row, dataset order; a failed row no score |
//! | `report.json`  | [`Report`]: run identity, accounting, problems, totals, breakdowns       |
//! | `report.md`    | the Markdown table ([`table`]) and the breakdowns, for a person          |
//! | `charts/*.svg` | [`super::charts`]                                                        |
//!
//! Runs are compared by `eval report` ([`super::compare`]).
//!
//! Percentages in the Markdown are the means × 100 with one decimal. Everything is written
//! deterministically (ordered maps, no timestamps), each file atomically.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::blocks::Block;
use super::predictions::Problem;
use super::score::{RowResult, Scored, Summary};
use crate::store::write_atomic;

/// Columns of the Markdown table (Live API-Bench Table 3 style): metric, header, source.
/// Our earlier variants of a paper's definition are columns beside it, named `(ours)`.
pub const TABLE: [(&str, &str, &str); 14] = [
    ("intent_f1", "Intent F1", "Live API-Bench §4.1.1"),
    ("slot_f1", "Slot F1", "Live API-Bench §4.1.1, matched-intent rows"),
    ("slot_f1_all_rows", "Slot F1 all rows (ours)", "unmatched rows scored 0"),
    ("completion", "Completion", "Live API-Bench §4.1.1"),
    ("api_f1", "API-F1", "API-BLEND §5.4"),
    ("parameter_f1", "Param-F1", "API-BLEND §5.4, (name, value) pairs"),
    (
        "parameter_f1_by_api",
        "Param-F1 by API (ours)",
        "(API, name, value) triples",
    ),
    ("lcs_f1", "LCS-F1", "API-BLEND §5.4, F1 of mean P and R"),
    ("lcs_f1_row_mean", "LCS-F1 row mean (ours)", "mean of per-row F1"),
    ("exact_match", "EM", "ours: the whole sequence equal"),
    ("bfcl_ast", "BFCL AST", "BFCL"),
    ("irrelevance", "Irrelevance", "BFCL"),
    ("relevance", "Relevance", "BFCL live_relevance"),
    ("drift_pass", "Drift pass", "DynamicToolBench"),
];

/// `report.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Run name (the directory under `eval/`).
    pub run: String,
    /// Dataset name.
    pub dataset: String,
    /// Model name (`eval run`), or the predictions file name (`eval score`).
    pub model: String,
    /// `direct`, `agent`, or `file` (`eval score`).
    pub mode: String,
    /// Rows selected.
    pub rows: usize,
    /// The splits the selected rows come from, sorted: the totals are over these rows only
    /// (`eval score`/`eval run` take the `test` split of a dataset that has one unless `--split`
    /// or `--ids` says otherwise; [`super::score::Selection`]).
    #[serde(default)]
    pub splits: Vec<String>,
    /// Rows with a prediction line that is an answer (not failed).
    pub scored: usize,
    /// Rows without one (scored as no call); their ids are `missing_ids`.
    pub missing: usize,
    /// Ids of the missing rows.
    pub missing_ids: Vec<String>,
    /// Rows whose request failed (excluded from every metric; `eval run` retries them on
    /// resume and exits non-zero while any remain); their ids are `failed_ids`.
    #[serde(default)]
    pub failed: usize,
    /// Ids of the failed rows.
    #[serde(default)]
    pub failed_ids: Vec<String>,
    /// Agent runs: rows per stop reason (`answered`, `step_limit`, `repeated_call`, `error`;
    /// Live API-Bench Table 4); empty for direct runs and files without them.
    #[serde(default)]
    pub stop_reasons: BTreeMap<String, usize>,
    /// Problems of the predictions file by kind.
    pub problem_counts: BTreeMap<String, usize>,
    /// Every problem.
    pub problems: Vec<Problem>,
    /// Run accounting (`eval run`: requests, cache hits, steps, …).
    pub accounting: BTreeMap<String, serde_json::Value>,
    /// Totals.
    pub totals: Summary,
    /// Breakdowns (see [`Scored::by`]).
    pub by: BTreeMap<String, BTreeMap<String, Summary>>,
    /// The error taxonomy over every scored row (kind → occurrences and rows;
    /// [`super::taxonomy`]).
    #[serde(default)]
    pub error_taxonomy: BTreeMap<String, super::taxonomy::KindCount>,
    /// Open-world agent runs: the retrieval metrics of the model's searches
    /// ([`super::open_world`]); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world: Option<super::open_world::OpenWorldReport>,
}

impl Report {
    /// The report of `scored`.
    pub fn new(run: &str, dataset: &str, model: &str, mode: &str, scored: &Scored) -> Report {
        let missing_ids: Vec<String> = scored
            .rows
            .iter()
            .filter(|r| r.status == "missing")
            .map(|r| r.id.clone())
            .collect();
        let failed_ids: Vec<String> = scored
            .rows
            .iter()
            .filter(|r| r.status == "failed")
            .map(|r| r.id.clone())
            .collect();
        let mut stop_reasons = BTreeMap::new();
        for r in &scored.rows {
            if let Some(s) = &r.stop_reason {
                *stop_reasons.entry(s.clone()).or_insert(0) += 1;
            }
        }
        let mut problem_counts = BTreeMap::new();
        for p in &scored.problems {
            *problem_counts.entry(p.kind.clone()).or_insert(0) += 1;
        }
        Report {
            run: run.into(),
            dataset: dataset.into(),
            model: model.into(),
            mode: mode.into(),
            rows: scored.rows.len(),
            splits: scored
                .rows
                .iter()
                .map(|r| r.split.clone())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect(),
            scored: scored.rows.len() - missing_ids.len() - failed_ids.len(),
            missing: missing_ids.len(),
            missing_ids,
            failed: failed_ids.len(),
            failed_ids,
            stop_reasons,
            problem_counts,
            problems: scored.problems.clone(),
            accounting: BTreeMap::new(),
            totals: scored.totals.clone(),
            by: scored.by.clone(),
            error_taxonomy: scored.taxonomy.clone(),
            open_world: None,
        }
    }
}

fn pct(s: &Summary, metric: &str) -> String {
    s.metrics
        .get(metric)
        .map_or("–".to_string(), |m| format!("{:.1}", m.mean * 100.0))
}

/// The `Rows` cell of a summary: the rows its means cover (failed rows are in none), then how
/// many failed, if any (`8 (2 failed)`).
fn rows_cell(s: &Summary) -> String {
    match s.failed {
        0 => s.rows.to_string(),
        f => format!("{} ({f} failed)", s.rows - f),
    }
}

/// The Markdown table: one row per (label, summary), one column per [`TABLE`] metric that any
/// row has, values in percent; `–` where a metric does not apply.
pub fn table(rows: &[(String, &Summary)]) -> String {
    table_block(rows, "Model").markdown()
}

/// [`table`] as a [`Block`], its first column headed `first`.
pub fn table_block(rows: &[(String, &Summary)], first: &str) -> Block {
    let cols: Vec<&(&str, &str, &str)> = TABLE
        .iter()
        .filter(|(m, _, _)| rows.iter().any(|(_, s)| s.metrics.contains_key(*m)))
        .collect();
    Block::Table {
        header: [first.to_string(), "Rows".to_string()]
            .into_iter()
            .chain(cols.iter().map(|c| c.1.to_string()))
            .collect(),
        numeric: std::iter::once(false)
            .chain(std::iter::repeat_n(true, cols.len() + 1))
            .collect(),
        rows: rows
            .iter()
            .map(|(label, s)| {
                [label.clone(), rows_cell(s)]
                    .into_iter()
                    .chain(cols.iter().map(|c| pct(s, c.0)))
                    .collect()
            })
            .collect(),
    }
}

/// `report.md`: the totals table, the breakdowns, the accounting and the problems.
pub fn markdown(report: &Report) -> String {
    let mut out = format!("# Evaluation `{}`\n\n", report.run);
    if report.failed > 0 {
        out.push_str(&format!(
            "**{} of {} rows failed** (the request failed: no answer; in no metric below; re-run to retry them): {}.\n\n",
            report.failed,
            report.rows,
            report
                .failed_ids
                .iter()
                .map(|i| format!("`{i}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out.push_str(&format!(
        "Dataset `{}` (split {}), model `{}`, mode `{}`: {} rows, {} failed, {} scored, {} missing.\n\n",
        report.dataset,
        report.splits.join(", "),
        report.model,
        report.mode,
        report.rows,
        report.failed,
        report.scored,
        report.missing
    ));
    out.push_str(&table(&[(report.model.clone(), &report.totals)]));
    out.push_str("\nMetrics (percent, mean over the rows each applies to): ");
    out.push_str(
        &TABLE
            .iter()
            .map(|(_, h, src)| format!("{h} ({src})"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    out.push_str(".\n");
    if !report.totals.intervals.is_empty() {
        out.push_str(&format!(
            "\n## 95% intervals\n\nPercentile bootstrap over rows ({} resamples, seed {}), percent.\n\n| Metric | Mean | 95% interval | Rows |\n|---|---:|---:|---:|\n",
            super::stats::RESAMPLES,
            super::stats::SEED
        ));
        for (k, i) in &report.totals.intervals {
            if let Some(m) = report.totals.metrics.get(k) {
                out.push_str(&format!(
                    "| {k} | {:.1} | [{:.1}, {:.1}] | {} |\n",
                    m.mean * 100.0,
                    i.lo * 100.0,
                    i.hi * 100.0,
                    m.n
                ));
            }
        }
    }
    for (kind, groups) in &report.by {
        if groups.len() < 2 {
            continue;
        }
        out.push_str(&format!("\n## By {kind}\n\n"));
        let rows: Vec<(String, &Summary)> = groups.iter().map(|(g, s)| (g.clone(), s)).collect();
        out.push_str(&table_block(&rows, kind).markdown());
    }
    if !report.error_taxonomy.is_empty() {
        out.push_str("\n## Error taxonomy\n\nOver every scored row (failed rows have no answer): occurrences (calls or arguments) and rows with at least one.\n\n| Kind | Count | Rows |\n|---|---:|---:|\n");
        for k in super::taxonomy::KINDS {
            if let Some(c) = report.error_taxonomy.get(k) {
                out.push_str(&format!("| {k} | {} | {} |\n", c.count, c.rows));
            }
        }
    }
    if let Some(ow) = &report.open_world {
        out.push_str(&super::open_world::markdown(ow));
    }
    if !report.stop_reasons.is_empty() {
        out.push_str("\n## Agent stop reasons\n\nOnly `answered` episodes can complete.\n\n");
        for (k, n) in &report.stop_reasons {
            out.push_str(&format!("- {k}: {n}\n"));
        }
    }
    if !report.accounting.is_empty() {
        out.push_str("\n## Accounting\n\n");
        for (k, v) in &report.accounting {
            out.push_str(&format!("- {k}: {v}\n"));
        }
    }
    if !report.problem_counts.is_empty() {
        out.push_str("\n## Problems in the predictions\n\n");
        for (k, n) in &report.problem_counts {
            out.push_str(&format!("- {k}: {n}\n"));
        }
    }
    out
}

/// Writes `rows.jsonl`, `report.json`, `report.md` and the charts into `dir`.
pub fn write(dir: &Path, rows: &[RowResult], report: &Report) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut jsonl = Vec::new();
    for r in rows {
        serde_json::to_writer(&mut jsonl, &r.to_json())?;
        jsonl.push(b'\n');
    }
    write_atomic(&dir.join("rows.jsonl"), &jsonl)?;
    let mut json = serde_json::to_vec_pretty(report)?;
    json.push(b'\n');
    write_atomic(&dir.join("report.json"), &json)?;
    write_atomic(&dir.join("report.md"), markdown(report).as_bytes())?;
    super::charts::write_run_charts(dir, &report.totals, &report.by)?;
    Ok(())
}
