//! The pages of evaluation runs (issue 33): `eval/<run>/index.html`, written by every run
//! (`eval score`, `eval run`), and `<out>/index.html` of `eval report … --html`.
//!
//! A run's page is one self-contained file (stylesheet, script and data inline, no network;
//! the charts are the run's own `charts/*.svg`, shown as images beside it): the metric table
//! with the bootstrap intervals, the charts, one table per breakdown, the error taxonomy, the
//! agent stop reasons, and a failure browser — every row that failed a check, its gold and
//! predicted calls aligned position by position, the checks that failed (`errors`, and each
//! false check among exact match, completion, BFCL AST, irrelevance, drift pass) and the
//! agent's episode as the predictions file recorded it (steps, failed calls, stop reason,
//! answer; a direct answer's text) with its turns (the model's answers and calls, each tool
//! result as the model saw it; an open-world run's searches), and for an open-world run the
//! retrieval metrics of the model's searches. The data block is [`run_data`]; it is
//! deterministic, as the run's other files are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::report::{Report, TABLE};
use super::rows::EvalRow;
use super::score::RowResult;
use crate::emit::html::page;
use crate::store::write_atomic;

/// Writes `dir/index.html`, the page of the run whose report, per-row results, selected rows
/// and predictions file text are given (the charts already in `dir/charts/`).
pub fn write(dir: &Path, report: &Report, results: &[RowResult], rows: &[&EvalRow], predictions: &str) -> Result<()> {
    let data = run_data(dir, report, results, rows, predictions);
    let html = page::render(
        "eval.html",
        include_str!("../../templates/report/eval.html"),
        json!({
            "title": format!("{} — {} on {}", report.run, report.model, report.dataset),
            "css": page::CSS,
            "common_js": page::COMMON_JS,
            "page_js": include_str!("../../templates/report/eval.js"),
            "data": page::inline_json(&data),
        }),
    )?;
    write_atomic(&dir.join("index.html"), html.as_bytes())?;
    Ok(())
}

/// The chart files of `dir` (`charts/*.svg`, relative, in name order).
fn charts(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir.join("charts"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg"))
        .map(|n| format!("charts/{n}"))
        .collect();
    out.sort();
    out
}

/// Whether a row failed any check: not scored, or a false check, or a recorded error.
fn failed_a_check(r: &RowResult) -> bool {
    r.status != "scored"
        || !r.exact_match
        || !r.errors.is_empty()
        || [r.completion, r.bfcl_ast, r.irrelevance, r.relevance, r.drift_pass].contains(&Some(false))
}

/// The page's data: `run`, `dataset`, `model`, `mode`, `rows`, `scored`, `missing`, `failed`,
/// `metrics` (`[{"key", "header", "source", "mean", "n", "lo"?, "hi"?}]`, the totals of every
/// [`TABLE`] metric the run has, intervals where computed), `columns` (the [`TABLE`] keys and
/// headers), `by` (the report's breakdowns), `taxonomy`, `stop_reasons`, `accounting`,
/// `problem_counts`, `charts`, and `failures`: one object per row that failed a check, dataset
/// order — `{"id", "status", "input", "group", "gold", "setup", "predicted", "errors",
/// "error_kinds", "failed_checks", "agent"}` (calls `[name, arguments, label]`; `agent` the
/// prediction line's `steps`, `failed_calls`, `stop_reason`, `stopped`, `answer`, `text`,
/// `failed` that are present), `turns` (the episode's messages after the system prompt,
/// `[{"role", "content", "tool_calls"?, "tool_call_id"?}]`, empty for a direct run), `searches`
/// (open world: `[{"query", "top_k", "hits"}]`); and `open_world` (the report's, or null).
pub fn run_data(dir: &Path, report: &Report, results: &[RowResult], rows: &[&EvalRow], predictions: &str) -> Value {
    let lines: BTreeMap<String, Value> = predictions
        .lines()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            Some((v["id"].as_str()?.to_string(), v))
        })
        .collect();
    let parsed = super::predictions::parse(predictions);
    let by_id: BTreeMap<&str, &EvalRow> = rows.iter().map(|r| (r.id.as_str(), *r)).collect();
    let call = |c: &crate::tools::Call| json!([c.name, c.arguments, c.label]);
    let failures: Vec<Value> = results
        .iter()
        .filter(|r| failed_a_check(r))
        .map(|r| {
            let row = by_id.get(r.id.as_str());
            let checks = [
                ("exact_match", Some(r.exact_match)),
                ("completion", r.completion),
                ("bfcl_ast", r.bfcl_ast),
                ("irrelevance", r.irrelevance),
                ("relevance", r.relevance),
                ("drift_pass", r.drift_pass),
            ];
            let line = lines.get(&r.id);
            let agent: serde_json::Map<String, Value> = [
                "steps",
                "failed_calls",
                "stop_reason",
                "stopped",
                "answer",
                "text",
                "failed",
            ]
            .iter()
            .filter_map(|k| Some((k.to_string(), line?.get(*k).filter(|v| !v.is_null())?.clone())))
            .collect();
            json!({
                "id": r.id,
                "status": r.status,
                "input": row.map(|x| x.input.as_str()),
                "group": r.db_id.clone().unwrap_or_else(|| r.split.clone()),
                "gold": row.map(|x| x.gold.iter().map(call).collect::<Vec<_>>()),
                "setup": row.map(|x| x.setup.iter().map(call).collect::<Vec<_>>()),
                "predicted": parsed.by_id.get(&r.id).map(|p| p.calls.iter().map(call).collect::<Vec<_>>()),
                "errors": r.errors,
                "error_kinds": r.error_kinds,
                "failed_checks": checks.iter().filter(|(_, v)| *v == Some(false)).map(|(k, _)| *k).collect::<Vec<_>>(),
                "agent": agent,
                "turns": line.and_then(|l| l.get("turns")).filter(|v| v.is_array()).cloned().unwrap_or(json!([])),
                "searches": line.and_then(|l| l.get("searches")).filter(|v| v.is_array()).cloned().unwrap_or(json!([])),
            })
        })
        .collect();
    let metrics: Vec<Value> = TABLE
        .iter()
        .filter_map(|(key, header, source)| {
            let m = report.totals.metrics.get(*key)?;
            let mut v = json!({"key": key, "header": header, "source": source, "mean": m.mean, "n": m.n});
            if let Some(i) = report.totals.intervals.get(*key) {
                v["lo"] = json!(i.lo);
                v["hi"] = json!(i.hi);
            }
            Some(v)
        })
        .collect();
    json!({
        "run": report.run,
        "dataset": report.dataset,
        "model": report.model,
        "mode": report.mode,
        "rows": report.rows,
        "scored": report.scored,
        "missing": report.missing,
        "failed": report.failed,
        "metrics": metrics,
        "columns": TABLE.iter().map(|(k, h, _)| json!([k, h])).collect::<Vec<_>>(),
        "by": report.by,
        "taxonomy": report.error_taxonomy,
        "stop_reasons": report.stop_reasons,
        "accounting": report.accounting,
        "problem_counts": report.problem_counts,
        "charts": charts(dir),
        "failures": failures,
        "open_world": report.open_world,
    })
}

/// `eval report … --html`: writes `out/index.html`, the comparison (`out/compare.json` as
/// written by [`super::compare::compare`]: its headings, paragraphs and lists, every table an
/// HTML table whose numeric cells are right-aligned; its charts) with a link to each run's own
/// page. Returns the page's path.
pub fn write_compare(out: &Path, runs: &[PathBuf]) -> Result<PathBuf> {
    let p = out.join("compare.json");
    let doc: Vec<super::blocks::Block> =
        serde_json::from_slice(&std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?)
            .with_context(|| format!("parsing {}", p.display()))?;
    let runs: Vec<Value> = runs
        .iter()
        .map(|r| {
            let page = std::path::absolute(r.join("index.html")).unwrap_or_else(|_| r.join("index.html"));
            json!({"name": r.file_name().map(|n| n.to_string_lossy().into_owned()), "page": page.to_string_lossy(), "exists": page.is_file()})
        })
        .collect();
    let html = page::render(
        "compare.html",
        include_str!("../../templates/report/compare.html"),
        json!({"css": page::CSS, "blocks": doc, "charts": charts(out), "runs": runs}),
    )?;
    let path = out.join("index.html");
    write_atomic(&path, html.as_bytes())?;
    Ok(path)
}
