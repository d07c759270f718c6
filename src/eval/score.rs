//! Offline scoring: every selected dataset row against its prediction (missing → the empty
//! prediction, counted and named), every metric of [`super::metrics`] and [`super::execute`] per
//! row, then the means over rows (totals) and per database / split / difficulty / variant kind /
//! BFCL category / TopV2 domain / SGD service / drift operator ([`breakdown`]).
//!
//! A metric that does not apply to a row is absent from it (`null` in `rows.jsonl`) and is
//! averaged only over the rows it applies to: completion needs a gold answer and an executable
//! dataset, the BFCL AST check a `bfcl` row with gold calls, irrelevance a row without gold
//! calls, the drift pass rate a drift variant row, slot scores a row with a matched call.
//! A row whose request failed (`failed` in the predictions line) is no answer: it is in no
//! metric, and counted (`Summary::failed`); its `rows.jsonl` line has no score fields
//! ([`RowResult::to_json`]).

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::execute::Runner;
use super::metrics::{self, Prf};
use super::predictions::{Prediction, Predictions, Problem};
use super::rows::{EvalRow, EvalSet, SETUP_TOOL};

/// One row's scores (`rows.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowResult {
    /// Example id.
    pub id: String,
    /// Split.
    pub split: String,
    /// Database id.
    pub db_id: Option<String>,
    /// BIRD difficulty.
    pub difficulty: Option<String>,
    /// Variant kind of a variant row.
    pub variant_kind: Option<String>,
    /// `scored`, `missing` (no prediction line: scored as no call), or `failed` (the request
    /// failed: no answer; excluded from every metric and counted, its `errors` say why).
    pub status: String,
    /// Gold calls (setup step excluded).
    pub gold_calls: usize,
    /// Predicted calls (well-formed ones).
    pub predicted_calls: usize,
    /// Live API-Bench §4.1.1 intent: position-aware, except on a row whose call order is free
    /// (MixATIS/MixSNIPS, parts of SGD, BFCL parallel), where calls match in any order
    /// ([`metrics::intent::Order`]).
    #[serde(default)]
    pub intent: Prf,
    /// The paper's literal position-aware intent on every row, order-free ones included
    /// (`intent_*_positional`; equal to `intent` on every other row).
    #[serde(default)]
    pub intent_positional: Prf,
    /// Live API-Bench §4.1.1 slot, conditional on the matched intent (`None`: no call matched,
    /// the row is excluded from the slot means).
    pub slot: Option<Prf>,
    /// Our earlier slot variant: a row with no matched call scores 0
    /// ([`metrics::intent::slot_prf_all_rows`]).
    #[serde(default)]
    pub slot_all_rows: Prf,
    /// API-BLEND §5.4 API-F1.
    #[serde(default)]
    pub api: Prf,
    /// API-BLEND §5.4 Parameter-F1 ((name, value) pairs pooled over the row's calls).
    #[serde(default)]
    pub parameter: Prf,
    /// Our variant beside it: Parameter-F1 over (API, name, value) triples
    /// ([`metrics::blend::parameter_prf_by_api`]).
    #[serde(default)]
    pub parameter_by_api: Prf,
    /// API-BLEND §5.4 LCS-F1.
    #[serde(default)]
    pub lcs: Prf,
    /// Exact match (ours: API-BLEND §5.4 defines no exact-match metric; [`metrics::blend`]).
    #[serde(default)]
    pub exact_match: bool,
    /// Live API-Bench completion (executed answer equals `gold_answer`).
    pub completion: Option<bool>,
    /// BFCL AST check.
    pub bfcl_ast: Option<bool>,
    /// BFCL irrelevance (no gold call, no predicted call).
    pub irrelevance: Option<bool>,
    /// BFCL relevance (`meta.expected` = `any_call`: at least one predicted call).
    #[serde(default)]
    pub relevance: Option<bool>,
    /// DynamicToolBench: the prediction succeeds against A_new.
    pub drift_pass: Option<bool>,
    /// Why checks failed, and malformed calls.
    pub errors: Vec<String>,
    /// Agent runs: how the episode ended (`answered`, `step_limit`, `repeated_call`, `error`).
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// The row's groups per breakdown kind ([`breakdown`]: `database`, `split`, `difficulty`,
    /// `variant_kind`, `bfcl_category`, `topv2_domain`, `sgd_service`, `drift_operator`).
    #[serde(default)]
    pub breakdown: BTreeMap<String, Vec<String>>,
    /// The row's category for BFCL's unweighted overall ([`super::compare::category_mean`]):
    /// the BFCL category, else the TopV2 domain, else the database.
    #[serde(default)]
    pub category: Option<String>,
    /// The row's errors by kind ([`super::taxonomy`]; kinds that did not occur are absent).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_kinds: BTreeMap<String, usize>,
}

/// A metric averaged over the rows it applies to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Mean {
    /// Mean over the rows (a rate for pass/fail metrics), in [0, 1].
    pub mean: f64,
    /// Rows it applies to.
    pub n: usize,
}

/// The means of every metric over a group of rows, by metric name (see [`RowResult::values`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Rows in the group.
    pub rows: usize,
    /// Rows without a prediction line.
    pub missing: usize,
    /// Rows whose request failed (in `rows`, in no metric).
    #[serde(default)]
    pub failed: usize,
    /// Metric name → mean.
    pub metrics: BTreeMap<String, Mean>,
    /// Metric name → bootstrap 95% interval ([`super::stats`]); the totals only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub intervals: BTreeMap<String, super::stats::Interval>,
}

/// The score fields of a [`RowResult`]: a failed row has none of them in `rows.jsonl`
/// ([`RowResult::to_json`]).
pub const SCORE_FIELDS: [&str; 14] = [
    "intent",
    "intent_positional",
    "slot",
    "slot_all_rows",
    "api",
    "parameter",
    "parameter_by_api",
    "lcs",
    "exact_match",
    "completion",
    "bfcl_ast",
    "irrelevance",
    "relevance",
    "drift_pass",
];

impl RowResult {
    /// The row as a `rows.jsonl` line: every field, except that a failed row (no answer) carries
    /// no score at all ([`SCORE_FIELDS`] absent, not 0: it is in no metric).
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).expect("a row result serialises");
        if self.status == "failed" {
            if let Some(m) = v.as_object_mut() {
                for f in SCORE_FIELDS {
                    m.remove(f);
                }
            }
        }
        v
    }

    /// The row's groups in the breakdown `kind` (none when it is not in that breakdown).
    pub fn groups(&self, kind: &str) -> Vec<&str> {
        self.breakdown
            .get(kind)
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect()
    }

    /// This row's value of each metric that applies to it.
    pub fn values(&self) -> Vec<(&'static str, f64)> {
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        let mut v = vec![
            ("intent_p", self.intent.p),
            ("intent_r", self.intent.r),
            ("intent_f1", self.intent.f1),
            ("intent_p_positional", self.intent_positional.p),
            ("intent_r_positional", self.intent_positional.r),
            ("intent_f1_positional", self.intent_positional.f1),
            ("slot_p_all_rows", self.slot_all_rows.p),
            ("slot_r_all_rows", self.slot_all_rows.r),
            ("slot_f1_all_rows", self.slot_all_rows.f1),
            ("api_p", self.api.p),
            ("api_r", self.api.r),
            ("api_f1", self.api.f1),
            ("parameter_p", self.parameter.p),
            ("parameter_r", self.parameter.r),
            ("parameter_f1", self.parameter.f1),
            ("parameter_p_by_api", self.parameter_by_api.p),
            ("parameter_r_by_api", self.parameter_by_api.r),
            ("parameter_f1_by_api", self.parameter_by_api.f1),
            ("lcs_p", self.lcs.p),
            ("lcs_r", self.lcs.r),
            ("lcs_f1", self.lcs.f1),
            ("exact_match", b(self.exact_match)),
        ];
        if let Some(s) = self.slot {
            v.extend([("slot_p", s.p), ("slot_r", s.r), ("slot_f1", s.f1)]);
        }
        for (k, x) in [
            ("completion", self.completion),
            ("bfcl_ast", self.bfcl_ast),
            ("irrelevance", self.irrelevance),
            ("relevance", self.relevance),
            ("drift_pass", self.drift_pass),
        ] {
            if let Some(x) = x {
                v.push((k, b(x)));
            }
        }
        v
    }
}

/// Means over `rows` (module docs), except `lcs_f1`: API-BLEND §5.4 averages LCS precision and
/// recall over the rows and takes the F1 of the two means; the mean of the per-row F1 is kept
/// beside it as `lcs_f1_row_mean`.
pub fn summarise<'a>(rows: impl IntoIterator<Item = &'a RowResult>) -> Summary {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut s = Summary::default();
    for r in rows {
        s.rows += 1;
        s.missing += (r.status == "missing") as usize;
        if r.status == "failed" {
            s.failed += 1;
            continue;
        }
        for (k, x) in r.values() {
            let e = sums.entry(k.to_string()).or_insert((0.0, 0));
            e.0 += x;
            e.1 += 1;
        }
    }
    s.metrics = sums
        .into_iter()
        .map(|(k, (sum, n))| {
            (
                k,
                Mean {
                    mean: sum / n as f64,
                    n,
                },
            )
        })
        .collect();
    if let (Some(p), Some(r)) = (s.metrics.get("lcs_p").copied(), s.metrics.get("lcs_r").copied()) {
        if let Some(row_mean) = s.metrics.get("lcs_f1").copied() {
            s.metrics.insert("lcs_f1_row_mean".into(), row_mean);
        }
        let f1 = if p.mean + r.mean == 0.0 {
            0.0
        } else {
            2.0 * p.mean * r.mean / (p.mean + r.mean)
        };
        s.metrics.insert("lcs_f1".into(), Mean { mean: f1, n: p.n });
    }
    s
}

/// A BFCL row's category (`meta.category` beside `meta.bfcl_id`).
fn bfcl_category(row: &EvalRow) -> Option<&str> {
    row.meta["bfcl_id"].as_str().and(row.meta["category"].as_str())
}

/// A row's groups per breakdown kind: `database`, `split`, `difficulty`, `variant_kind`
/// (`original` for a row that is no variant), `bfcl_category` (`meta.category` of a BFCL row), `topv2_domain`
/// (`meta.domain`), `sgd_service` (each of `meta.services`: a dialogue in two services is in
/// both groups), `drift_operator` (each operator of a drift row's change log,
/// `meta.variant.changes`). A kind the row has no value for is absent.
pub fn breakdown(row: &EvalRow) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |k: &str, v: &str| {
        let e = out.entry(k.to_string()).or_default();
        if !e.iter().any(|x| x == v) {
            e.push(v.to_string());
        }
    };
    if let Some(db) = &row.db_id {
        add("database", db);
    }
    add("split", &row.split);
    if let Some(d) = &row.difficulty {
        add("difficulty", d);
    }
    add("variant_kind", row.variant_kind().unwrap_or("original"));
    if let Some(c) = bfcl_category(row) {
        add("bfcl_category", c);
    }
    if let Some(d) = row.meta["domain"].as_str() {
        add("topv2_domain", d);
    }
    for s in row.meta["services"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str())
    {
        add("sgd_service", s);
    }
    if row.variant_kind() == Some("drift") {
        fn operators<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
            match v {
                serde_json::Value::Object(m) => {
                    if let Some(op) = m.get("operator").and_then(|o| o.as_str()) {
                        out.push(op);
                    }
                    m.values().for_each(|x| operators(x, out));
                }
                serde_json::Value::Array(a) => a.iter().for_each(|x| operators(x, out)),
                _ => {}
            }
        }
        let mut ops = Vec::new();
        operators(&row.meta["variant"]["changes"], &mut ops);
        for op in ops {
            add("drift_operator", op);
        }
    }
    out
}

/// Scores one row against its prediction (`None`: missing).
pub fn score_row(runner: &Runner, row: &EvalRow, pred: Option<&Prediction>) -> RowResult {
    let empty = Prediction::default();
    let p = pred.unwrap_or(&empty);
    // A failed request has no answer to execute (its metrics are never read).
    let runner_or_none = if p.failed.is_some() { None } else { Some(runner) };
    let mut errors = p.problems.clone();
    if let Some(why) = &p.failed {
        errors.push(format!("request failed: {why}"));
    }
    // A prediction in the old row shape may start with the setup step: it is the framework's.
    let calls: &[crate::tools::Call] = match p.calls.first() {
        Some(c) if c.name == SETUP_TOOL && !row.setup.is_empty() => &p.calls[1..],
        _ => &p.calls,
    };
    let mut completion = runner_or_none.and_then(|r| r.completion(row, calls));
    // Completion needs a finished agent: the calls of an episode that hit the step limit (or
    // looped, or broke) are not the model's answer, whatever they compute.
    if let Some(reason) = p.stop_reason.as_deref().filter(|r| *r != "answered") {
        if completion.is_some() {
            completion = Some(Err(format!("the agent did not finish ({reason})")));
        }
    }
    // Labels compared by the call they point to (alpha-equivalence).
    let gold = &metrics::labels::resolve(&row.setup, &row.gold);
    let resolved = metrics::labels::resolve(&row.setup, calls);
    let order = if row.calls_unordered {
        metrics::intent::Order::Free
    } else {
        metrics::intent::Order::Positional
    };
    let is_drift = row.variant_kind() == Some("drift");
    if let Some(Err(e)) = &completion {
        errors.push(format!("completion: {e}"));
    }
    let error_kinds = if p.failed.is_some() {
        BTreeMap::new()
    } else {
        let names: Vec<&str> = row.tools.iter().map(|t| t.name.as_str()).collect();
        super::taxonomy::classify(gold, &resolved, order, &names, p.problems.len(), p.unparsed)
    };
    let bfcl = metrics::bfcl::ast_check(&row.tools, &row.meta, calls);
    if let Some(Err(e)) = &bfcl {
        errors.push(format!("bfcl_ast: {e}"));
    }
    RowResult {
        id: row.id.clone(),
        split: row.split.clone(),
        db_id: row.db_id.clone(),
        difficulty: row.difficulty.clone(),
        variant_kind: row.variant_kind().map(String::from),
        status: match pred {
            Some(p) if p.failed.is_some() => "failed",
            Some(_) => "scored",
            None => "missing",
        }
        .into(),
        gold_calls: gold.len(),
        predicted_calls: calls.len(),
        intent: metrics::intent::intent_prf(gold, &resolved, order),
        intent_positional: metrics::intent::intent_prf(gold, &resolved, metrics::intent::Order::Positional),
        slot: metrics::intent::slot_prf(gold, &resolved, order),
        slot_all_rows: metrics::intent::slot_prf_all_rows(gold, &resolved, order),
        api: metrics::blend::api_prf(gold, &resolved),
        parameter: metrics::blend::parameter_prf(gold, &resolved),
        parameter_by_api: metrics::blend::parameter_prf_by_api(gold, &resolved),
        lcs: metrics::blend::lcs_prf(gold, &resolved),
        exact_match: metrics::blend::exact_match(gold, &resolved, order),
        drift_pass: if is_drift {
            completion.as_ref().map(Result::is_ok)
        } else {
            None
        },
        completion: completion.map(|c| c.is_ok()),
        bfcl_ast: bfcl.map(|c| c.is_ok()),
        irrelevance: metrics::irrelevance::irrelevance(gold, calls, row.meta["expected"].as_str()),
        relevance: metrics::irrelevance::relevance(gold, calls, row.meta["expected"].as_str()),
        errors,
        stop_reason: p.stop_reason.clone(),
        breakdown: breakdown(row),
        category: bfcl_category(row)
            .or(row.meta["domain"].as_str())
            .or(row.db_id.as_deref())
            .map(String::from),
        error_kinds,
    }
}

/// The scores of a whole predictions file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Scored {
    /// Per-row results, in dataset order.
    pub rows: Vec<RowResult>,
    /// Problems of the predictions file (malformed lines and calls, duplicate and unknown ids).
    pub problems: Vec<Problem>,
    /// Totals.
    pub totals: Summary,
    /// Breakdowns: each kind of [`breakdown`] → group value → summary (rows without the field
    /// are not in that breakdown; non-variant rows are `original`).
    pub by: BTreeMap<String, BTreeMap<String, Summary>>,
    /// The error taxonomy over every scored row ([`super::taxonomy`]).
    #[serde(default)]
    pub taxonomy: BTreeMap<String, super::taxonomy::KindCount>,
}

/// Selects rows: the ids given (in dataset order), else every row; then the first `limit`.
pub fn select<'a>(set: &'a EvalSet, ids: Option<&BTreeSet<String>>, limit: Option<usize>) -> Vec<&'a EvalRow> {
    set.rows
        .iter()
        .filter(|r| ids.is_none_or(|ids| ids.contains(&r.id)))
        .take(limit.unwrap_or(usize::MAX))
        .collect()
}

/// The split a run evaluates when neither `--split` nor `--ids` chooses: `test` when the
/// dataset's rows span several splits and one of them is `test` (the papers report the test
/// split: API-BLEND Table 3's SeqATIS … SeqTopV2 test sets), else `None` (every row: a
/// single-split dataset such as the Spider dev families or BFCL).
pub fn default_split(set: &EvalSet) -> Option<&'static str> {
    let splits: BTreeSet<&str> = set.rows.iter().map(|r| r.split.as_str()).collect();
    (splits.len() > 1 && splits.contains("test")).then_some("test")
}

/// Scores `predictions` over `rows` of `set` (rayon across rows).
pub fn score(set: &EvalSet, rows: &[&EvalRow], predictions: &Predictions) -> Scored {
    let runner = Runner::new(set);
    let results: Vec<RowResult> = rows
        .par_iter()
        .map(|r| score_row(&runner, r, predictions.by_id.get(&r.id)))
        .collect();
    let mut problems = predictions.problems.clone();
    let known: BTreeSet<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    for id in predictions.by_id.keys().filter(|id| !known.contains(id.as_str())) {
        problems.push(Problem {
            kind: "unknown_id".into(),
            line: 0,
            id: Some(id.clone()),
            detail: format!("no row {id:?} in {} (or not selected)", set.name),
        });
    }
    let mut by: BTreeMap<String, BTreeMap<String, Vec<&RowResult>>> = BTreeMap::new();
    for r in &results {
        for (k, groups) in &r.breakdown {
            for g in groups {
                by.entry(k.clone()).or_default().entry(g.clone()).or_default().push(r);
            }
        }
    }
    let by = by
        .into_iter()
        .map(|(k, groups)| (k, groups.into_iter().map(|(g, rs)| (g, summarise(rs))).collect()))
        .collect();
    let mut totals = summarise(&results);
    totals.intervals = super::stats::intervals(&results);
    Scored {
        taxonomy: super::taxonomy::totals(results.iter().map(|r| &r.error_kinds)),
        totals,
        rows: results,
        problems,
        by,
    }
}

/// Where a run writes and which rows it takes.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Only these ids (dataset order kept).
    pub ids: Option<BTreeSet<String>>,
    /// At most this many rows (after `ids` and `splits`).
    pub limit: Option<usize>,
    /// Only rows of these splits (`all`: every split). `None`: with `ids`, every split; without,
    /// [`default_split`] (the `test` split of a dataset that has one, else every row).
    pub splits: Option<BTreeSet<String>>,
}

impl Selection {
    /// The selected rows of `set`, in dataset order (field docs).
    pub fn rows<'a>(&self, set: &'a EvalSet) -> Vec<&'a EvalRow> {
        let splits: Option<BTreeSet<String>> = match (&self.splits, &self.ids) {
            (Some(s), _) if s.contains("all") => None,
            (Some(s), _) => Some(s.clone()),
            (None, Some(_)) => None,
            (None, None) => default_split(set).map(|s| BTreeSet::from([s.to_string()])),
        };
        set.rows
            .iter()
            .filter(|r| self.ids.as_ref().is_none_or(|ids| ids.contains(&r.id)))
            .filter(|r| splits.as_ref().is_none_or(|s| s.contains(&r.split)))
            .take(self.limit.unwrap_or(usize::MAX))
            .collect()
    }
}

/// `toolforge eval score`: loads the predictions file, scores it over the selected rows of
/// `set`, writes `out_dir` ([`super::report::write`], the page [`super::html::write`]) and
/// returns the report.
pub fn score_file(
    set: &EvalSet,
    predictions: &std::path::Path,
    selection: &Selection,
    run: &str,
    out_dir: &std::path::Path,
) -> anyhow::Result<super::report::Report> {
    use anyhow::Context as _;
    let text = std::fs::read_to_string(predictions).with_context(|| format!("reading {}", predictions.display()))?;
    let parsed = super::predictions::parse(&text);
    let rows = selection.rows(set);
    let scored = score(set, &rows, &parsed);
    let model = predictions
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let report = super::report::Report::new(run, &set.name, &model, "file", &scored);
    super::report::write(out_dir, &scored.rows, &report)?;
    super::html::write(out_dir, &report, &scored.rows, &rows, &text)?;
    Ok(report)
}
