//! `toolforge eval report`: runs compared on the same rows, with the statistics a paper needs.
//!
//! Each run directory gives its `report.json` and `rows.jsonl` ([`RowResult`]s). Runs are
//! compared **on their common rows** only: the ids every run selected, less any row a run
//! failed on (no answer, [`super::score`]). Runs over different datasets or different row sets
//! are refused — their means are not comparable — unless `allow_different_rows` is set, and then
//! the Markdown states how many rows each run had and how many are compared.
//!
//! `compare.md` (and the returned text), and the same document as data in `compare.json` (a
//! list of [`Block`]s: headings, paragraphs, lists, tables; `eval report --html` renders its
//! tables as HTML tables, [`super::html::write_compare`]):
//! - the table of every run on the common rows (row-weighted means, [`super::score::summarise`]);
//! - BFCL's overall beside it: the **unweighted mean over categories** (each category's mean,
//!   then the plain mean of those; BFCL's leaderboard averages its categories so that a large
//!   category does not outweigh the others). A row's category is [`RowResult::category`]: the
//!   BFCL category, else the TopV2 domain, else the database;
//! - per run after the first (the baseline): each metric's difference with the baseline and its
//!   **paired bootstrap** 95% interval (the common rows resampled together, [`super::stats`]),
//!   and for completion and exact match **McNemar's exact test** (two-sided binomial test on the
//!   discordant rows: `b` = baseline right and run wrong, `c` = the reverse; p =
//!   min(1, 2 · P[X ≤ min(b, c)]) for X ~ Bin(b + c, ½)), with a sentence saying whether the
//!   difference is significant at 0.05;
//! - the breakdowns of every run (per TopV2 domain, SGD service, BFCL category, drift operator,
//!   variant kind, database …) on the common rows.
//!
//! Charts (`charts/<metric>.svg`): one bar per run with its 95% interval, the x axis numbered
//! and a legend under the plot giving each number's full run name ([`super::charts::bars`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::blocks::{self, Block};
use super::report::{Report, TABLE, table, table_block};
use super::score::{RowResult, Summary, summarise};
use super::stats::{Interval, bootstrap};
use crate::store::write_atomic;

/// One run as read from its directory.
pub struct Run {
    /// `report.json`.
    pub report: Report,
    /// `rows.jsonl`.
    pub rows: Vec<RowResult>,
    /// The name shown: `<run> (<model>, <mode>)`.
    pub name: String,
}

/// Reads a run directory.
pub fn load(dir: &Path) -> Result<Run> {
    let p = dir.join("report.json");
    let bytes = std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?;
    let report: Report = serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", p.display()))?;
    let p = dir.join("rows.jsonl");
    let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
    let rows = text
        .lines()
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).with_context(|| format!("{} line {}", p.display(), i + 1)))
        .collect::<Result<Vec<RowResult>>>()?;
    let name = format!("{} ({}, {})", report.run, report.model, report.mode);
    Ok(Run { report, rows, name })
}

/// McNemar's exact test (module docs): the two-sided p-value for `b` and `c` discordant rows.
pub fn mcnemar_exact(b: usize, c: usize) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    // ln C(n, i) - n ln 2, summed for i = 0..=min(b, c).
    let ln_fact = |k: usize| (1..=k).map(|x| (x as f64).ln()).sum::<f64>();
    let ln_n = ln_fact(n);
    let tail: f64 = (0..=b.min(c))
        .map(|i| (ln_n - ln_fact(i) - ln_fact(n - i) - n as f64 * std::f64::consts::LN_2).exp())
        .sum();
    (2.0 * tail).min(1.0)
}

/// A metric's value over `rows` (the row-weighted mean as [`summarise`] computes it).
fn value(rows: &[&RowResult], metric: &str) -> Option<f64> {
    summarise(rows.iter().copied()).metrics.get(metric).map(|m| m.mean)
}

/// BFCL's overall: the unweighted mean over categories of each category's mean (module docs);
/// `None` when no row has the metric, and the number of categories that have it.
pub fn category_mean(rows: &[&RowResult], metric: &str) -> Option<(f64, usize)> {
    let mut groups: BTreeMap<&str, Vec<&RowResult>> = BTreeMap::new();
    for r in rows {
        groups.entry(r.category.as_deref().unwrap_or("")).or_default().push(r);
    }
    let means: Vec<f64> = groups.values().filter_map(|g| value(g, metric)).collect();
    (!means.is_empty()).then(|| (means.iter().sum::<f64>() / means.len() as f64, means.len()))
}

/// The paired difference `run − base` of `metric` on the rows both have it, and its paired
/// bootstrap 95% interval (module docs); `None` when no row pair has it. Each resample draws
/// row pairs; a mean metric's statistic is the mean of the per-row differences, `lcs_f1`'s the
/// difference of the two F1s of mean precision and recall (API-BLEND §5.4).
pub fn paired_difference(base: &[&RowResult], run: &[&RowResult], metric: &str) -> Option<(f64, Interval, usize)> {
    let pairs: Vec<(&RowResult, &RowResult)> = base
        .iter()
        .zip(run)
        .filter(|(a, b)| has(a, metric) && has(b, metric))
        .map(|(a, b)| (*a, *b))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len();
    if metric == "lcs_f1" {
        let prs: Vec<[f64; 4]> = pairs
            .iter()
            .map(|(a, b)| [a.lcs.p, a.lcs.r, b.lcs.p, b.lcs.r])
            .collect();
        let stat = |it: &mut dyn Iterator<Item = &[f64; 4]>| {
            let (mut s, mut k) = ([0.0; 4], 0usize);
            for x in it {
                (0..4).for_each(|i| s[i] += x[i]);
                k += 1;
            }
            let f1 = |p: f64, r: f64| if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) };
            let m = |i: usize| s[i] / k as f64;
            f1(m(2), m(3)) - f1(m(0), m(1))
        };
        return Some((stat(&mut prs.iter()), bootstrap(&prs, stat)?, n));
    }
    let base_metric = metric.strip_suffix("_row_mean").unwrap_or(metric);
    let row_value = |r: &RowResult| {
        r.values()
            .into_iter()
            .find(|(k, _)| *k == base_metric)
            .map_or(0.0, |(_, v)| v)
    };
    let diffs: Vec<f64> = pairs.iter().map(|(a, b)| row_value(b) - row_value(a)).collect();
    let mean = |it: &mut dyn Iterator<Item = &f64>| {
        let (s, k) = it.fold((0.0, 0usize), |(s, k), x| (s + x, k + 1));
        s / k as f64
    };
    Some((mean(&mut diffs.iter()), bootstrap(&diffs, mean)?, n))
}

fn has(r: &RowResult, metric: &str) -> bool {
    let base = metric.strip_suffix("_row_mean").unwrap_or(metric);
    r.values().iter().any(|(k, _)| *k == base)
}

/// Compares the runs in `dirs` (module docs; runs without any common row, allowed, are each
/// shown on their own rows and not paired), writes `compare.md` and the charts into `out`, and
/// returns the Markdown.
pub fn compare(dirs: &[PathBuf], out: &Path, allow_different_rows: bool) -> Result<String> {
    let runs = dirs.iter().map(|d| load(d)).collect::<Result<Vec<Run>>>()?;
    let Some(first) = runs.first() else {
        bail!("no run to compare");
    };
    let ids = |r: &Run| -> BTreeSet<String> { r.rows.iter().map(|x| x.id.clone()).collect() };
    let datasets: BTreeSet<&str> = runs.iter().map(|r| r.report.dataset.as_str()).collect();
    let same_rows = runs.iter().all(|r| ids(r) == ids(first));
    if !allow_different_rows && (datasets.len() > 1 || !same_rows) {
        let what: Vec<String> = runs
            .iter()
            .map(|r| format!("{}: {} rows of {}", r.name, r.rows.len(), r.report.dataset))
            .collect();
        bail!(
            "the runs are over {} ({}): their means are not comparable; pass --allow-different-rows to compare them on their common rows",
            if datasets.len() > 1 {
                "different datasets"
            } else {
                "different rows"
            },
            what.join("; ")
        );
    }
    // The common rows: selected by every run, answered (not failed) by every run.
    let answered = |r: &Run| -> BTreeSet<String> {
        r.rows
            .iter()
            .filter(|x| x.status != "failed")
            .map(|x| x.id.clone())
            .collect()
    };
    let common: BTreeSet<String> = runs.iter().skip(1).fold(answered(first), |acc, r| &acc & &answered(r));
    // No common row at all (different datasets, allowed): each run on its own answered rows,
    // unpaired.
    let paired = !common.is_empty();
    let on_common: Vec<Vec<&RowResult>> = runs
        .iter()
        .map(|r| {
            if !paired {
                return r.rows.iter().filter(|x| x.status != "failed").collect();
            }
            let by_id: BTreeMap<&str, &RowResult> = r.rows.iter().map(|x| (x.id.as_str(), x)).collect();
            common.iter().map(|id| by_id[id.as_str()]).collect()
        })
        .collect();
    let summaries: Vec<Summary> = on_common.iter().map(|rs| summarise(rs.iter().copied())).collect();
    let on = datasets.iter().map(|d| format!("`{d}`")).collect::<Vec<_>>().join(", ");
    let mut doc = vec![
        Block::heading(1, "Evaluation report"),
        Block::text(if paired {
            format!(
                "{} runs on {} common rows (selected and answered by every run) of {on}.",
                runs.len(),
                common.len()
            )
        } else {
            format!(
                "{} runs with no common row ({on}): each run on its own answered rows, not paired.",
                runs.len()
            )
        }),
        Block::List {
            items: runs
                .iter()
                .map(|r| {
                    let failed = r.rows.iter().filter(|x| x.status == "failed").count();
                    format!("{}: {} rows, {failed} failed", r.name, r.rows.len())
                })
                .collect(),
        },
        Block::heading(2, "Row-weighted means (percent)"),
    ];
    let named: Vec<(String, &Summary)> = runs.iter().map(|r| r.name.clone()).zip(&summaries).collect();
    doc.push(table_block(&named, "Model"));
    doc.extend(category_table(&runs, &on_common));
    for (i, run) in runs.iter().enumerate().skip(1).filter(|_| paired) {
        doc.extend(paired_section(first, run, &on_common[0], &on_common[i]));
    }
    doc.extend(breakdowns(&runs, &on_common));
    let md = blocks::markdown(&doc);
    let mut json = serde_json::to_vec_pretty(&doc)?;
    json.push(b'\n');
    std::fs::create_dir_all(out.join("charts"))?;
    write_atomic(&out.join("compare.md"), md.as_bytes())?;
    write_atomic(&out.join("compare.json"), &json)?;
    write_atomic(&out.join("table.md"), table(&named).as_bytes())?;
    let intervals: Vec<BTreeMap<String, Interval>> = on_common
        .iter()
        .map(|rows| super::stats::intervals(rows.iter().copied()))
        .collect();
    for (metric, header, _) in TABLE {
        let bars: Vec<(String, f64, Option<Interval>)> = runs
            .iter()
            .zip(&on_common)
            .zip(&intervals)
            .filter_map(|((r, rows), ivs)| {
                let v = value(rows, metric)?;
                let iv = ivs.get(metric).copied();
                Some((
                    r.name.clone(),
                    v * 100.0,
                    iv.map(|i| Interval {
                        lo: i.lo * 100.0,
                        hi: i.hi * 100.0,
                    }),
                ))
            })
            .collect();
        if !bars.is_empty() {
            let svg = super::charts::bars(&format!("{header} (%, 95% interval)"), &bars)?;
            write_atomic(&out.join("charts").join(format!("{metric}.svg")), svg.as_bytes())?;
        }
    }
    Ok(md)
}

/// The BFCL-style overall beside the row-weighted one, per run.
fn category_table(runs: &[Run], on_common: &[Vec<&RowResult>]) -> Vec<Block> {
    let mut rows = Vec::new();
    for (r, common) in runs.iter().zip(on_common) {
        for (metric, header, _) in TABLE {
            if let (Some(v), Some((c, n))) = (value(common, metric), category_mean(common, metric)) {
                rows.push(vec![
                    r.name.clone(),
                    header.to_string(),
                    format!("{:.1}", v * 100.0),
                    format!("{:.1}", c * 100.0),
                    n.to_string(),
                ]);
            }
        }
    }
    vec![
        Block::heading(2, "Row-weighted and unweighted category means (percent)"),
        Block::text(
            "Category mean: the plain mean of the per-category means (BFCL's overall; category = BFCL category, else TopV2 domain, else database).",
        ),
        Block::Table {
            header: ["Run", "Metric", "Row-weighted", "Category mean", "Categories"]
                .map(String::from)
                .to_vec(),
            numeric: vec![false, false, true, true, true],
            rows,
        },
    ]
}

/// One run against the baseline: paired differences and McNemar.
fn paired_section(base: &Run, run: &Run, a: &[&RowResult], b: &[&RowResult]) -> Vec<Block> {
    let mut rows = Vec::new();
    for (metric, header, _) in TABLE {
        if let Some((d, iv, n)) = paired_difference(a, b, metric) {
            rows.push(vec![
                header.to_string(),
                format!("{:+.1}", d * 100.0),
                format!("[{:+.1}, {:+.1}]", iv.lo * 100.0, iv.hi * 100.0),
                n.to_string(),
            ]);
        }
    }
    let mut out = vec![
        Block::heading(2, format!("{} vs {} (paired, {} rows)", run.name, base.name, a.len())),
        Block::text(format!(
            "Difference in points (run − baseline), paired bootstrap 95% interval ({} resamples, seed {}).",
            super::stats::RESAMPLES,
            super::stats::SEED
        )),
        Block::Table {
            header: ["Metric", "Difference", "95% interval", "Rows"]
                .map(String::from)
                .to_vec(),
            numeric: vec![false, true, true, true],
            rows,
        },
    ];
    for metric in ["completion", "exact_match"] {
        let pass =
            |r: &RowResult| -> Option<bool> { r.values().iter().find(|(k, _)| *k == metric).map(|(_, v)| *v == 1.0) };
        let (mut bc, mut cb) = (0, 0);
        let mut n = 0;
        for (x, y) in a.iter().zip(b) {
            if let (Some(p), Some(q)) = (pass(x), pass(y)) {
                n += 1;
                bc += (p && !q) as usize;
                cb += (!p && q) as usize;
            }
        }
        if n == 0 {
            continue;
        }
        let p = mcnemar_exact(bc, cb);
        out.push(Block::text(format!(
            "McNemar exact test, {metric}: b = {bc} (baseline right, run wrong), c = {cb} (run right, baseline wrong), p = {p:.4}: {}.",
            if p < 0.05 {
                "significant at 0.05"
            } else {
                "not significant at 0.05"
            }
        )));
    }
    out
}

/// The breakdowns of every run on the common rows, one table per kind with at least two groups.
fn breakdowns(runs: &[Run], on_common: &[Vec<&RowResult>]) -> Vec<Block> {
    let mut out = Vec::new();
    let kinds: BTreeSet<&str> = runs
        .iter()
        .flat_map(|r| r.report.by.keys().map(String::as_str))
        .collect();
    for kind in kinds {
        let mut rows: Vec<(String, Summary)> = Vec::new();
        for (r, common) in runs.iter().zip(on_common) {
            let mut groups: BTreeMap<&str, Vec<&RowResult>> = BTreeMap::new();
            for x in common {
                for g in x.groups(kind) {
                    groups.entry(g).or_default().push(x);
                }
            }
            if groups.len() < 2 {
                continue;
            }
            for (g, rs) in groups {
                rows.push((format!("{} / {g}", r.name), summarise(rs)));
            }
        }
        if rows.is_empty() {
            continue;
        }
        out.push(Block::heading(2, format!("By {kind}")));
        let named: Vec<(String, &Summary)> = rows.iter().map(|(n, s)| (n.clone(), s)).collect();
        out.push(table_block(&named, &format!("Run / {kind}")));
    }
    out
}
