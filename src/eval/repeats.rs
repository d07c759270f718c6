//! `eval run --repeats N --seed S`: the same run N times, run `i` with request seed `S + i`
//! (each a whole run in `<run>/repeat-<i>/`, resumable and cached like any run), then a stage
//! that reads their rows and summarises them (`<run>/repeats.json`, `<run>/repeats.md`):
//!
//! - per metric, the mean over the N runs of the run's total and its sample standard deviation
//!   (n − 1 in the denominator; 0 for one run) — ToolGym's and the robustness papers' "mean ± std
//!   over runs";
//! - **pass@k** for completion, k = 1 … N, with the unbiased estimator of Chen et al. 2021
//!   (*Evaluating Large Language Models Trained on Code*, §2.1, the HumanEval paper): per row with
//!   n answered runs of which c complete, `pass@k = 1 − C(n − c, k) / C(n, k)`, computed as the
//!   paper's numerically stable product `1 − Π_{i = n − c + 1}^{n} (1 − k / i)`; averaged over the
//!   rows with completion and at least k answered runs (a run whose request failed for a row is
//!   no sample of it);
//! - **agreement**: the share of those rows whose completion is the same in every answered run.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::rows::{EvalRow, EvalSet};
use super::run::RunConfig;
use super::score::RowResult;

/// A metric over the runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanStd {
    /// Mean of the runs' totals, in [0, 1].
    pub mean: f64,
    /// Sample standard deviation of the runs' totals (n − 1; 0 for one run).
    pub std: f64,
    /// Runs that have the metric.
    pub runs: usize,
}

/// `repeats.json` (module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Repeats {
    /// The request seed of each run, in run order.
    pub seeds: Vec<u64>,
    /// Each run's directory name (`repeat-<i>`).
    pub runs: Vec<String>,
    /// Metric → mean ± std over the runs' totals.
    pub metrics: BTreeMap<String, MeanStd>,
    /// k → pass@k of completion (Chen et al. 2021), over `pass_at_k_rows[k]` rows.
    pub pass_at_k: BTreeMap<usize, f64>,
    /// k → rows averaged in `pass_at_k[k]`.
    pub pass_at_k_rows: BTreeMap<usize, usize>,
    /// Share of rows with completion whose completion is the same in every answered run.
    pub agreement: Option<f64>,
    /// Failed rows over all runs (requests that failed: no sample).
    pub failed: usize,
}

/// Chen et al. 2021's unbiased pass@k for one problem: `n` samples, `c` correct (module docs).
pub fn pass_at_k(n: usize, c: usize, k: usize) -> f64 {
    if n - c < k {
        return 1.0;
    }
    1.0 - ((n - c + 1)..=n).map(|i| 1.0 - k as f64 / i as f64).product::<f64>()
}

/// Sample mean and standard deviation (n − 1).
fn mean_std(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// The summary of runs given as (their totals' metric means, their rows) (module docs).
pub fn summarise(
    seeds: Vec<u64>,
    runs: Vec<String>,
    totals: &[BTreeMap<String, f64>],
    rows: &[Vec<RowResult>],
) -> Repeats {
    let mut per_metric: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for t in totals {
        for (k, v) in t {
            per_metric.entry(k).or_default().push(*v);
        }
    }
    let metrics = per_metric
        .into_iter()
        .map(|(k, xs)| {
            let (mean, std) = mean_std(&xs);
            (
                k.to_string(),
                MeanStd {
                    mean,
                    std,
                    runs: xs.len(),
                },
            )
        })
        .collect();
    // Per row: its completion in each answered run.
    let mut samples: BTreeMap<&str, Vec<bool>> = BTreeMap::new();
    let mut failed = 0;
    for run in rows {
        for r in run {
            if r.status == "failed" {
                failed += 1;
                continue;
            }
            if let Some(c) = r.completion {
                samples.entry(r.id.as_str()).or_default().push(c);
            }
        }
    }
    let (mut pass, mut pass_rows) = (BTreeMap::new(), BTreeMap::new());
    for k in 1..=rows.len() {
        let values: Vec<f64> = samples
            .values()
            .filter(|s| s.len() >= k)
            .map(|s| pass_at_k(s.len(), s.iter().filter(|x| **x).count(), k))
            .collect();
        if !values.is_empty() {
            pass.insert(k, values.iter().sum::<f64>() / values.len() as f64);
            pass_rows.insert(k, values.len());
        }
    }
    let agreement = (!samples.is_empty())
        .then(|| samples.values().filter(|s| s.iter().all(|x| *x == s[0])).count() as f64 / samples.len() as f64);
    Repeats {
        seeds,
        runs,
        metrics,
        pass_at_k: pass,
        pass_at_k_rows: pass_rows,
        agreement,
        failed,
    }
}

/// `repeats.md`: the metrics as mean ± std in percent, pass@k, agreement.
pub fn markdown(r: &Repeats, run: &str) -> String {
    let mut out = format!(
        "# Repeated runs `{run}`\n\n{} runs, request seeds {:?}; mean ± sample standard deviation of each run's total, percent.\n\n| Metric | Mean ± std | Runs |\n|---|---:|---:|\n",
        r.runs.len(),
        r.seeds
    );
    for (k, m) in &r.metrics {
        out.push_str(&format!(
            "| {k} | {:.1} ± {:.1} | {} |\n",
            m.mean * 100.0,
            m.std * 100.0,
            m.runs
        ));
    }
    if !r.pass_at_k.is_empty() {
        out.push_str("\n## pass@k (completion)\n\nUnbiased estimator of Chen et al. 2021 (HumanEval), mean over rows, percent.\n\n| k | pass@k | Rows |\n|---:|---:|---:|\n");
        for (k, p) in &r.pass_at_k {
            out.push_str(&format!("| {k} | {:.1} | {} |\n", p * 100.0, r.pass_at_k_rows[k]));
        }
    }
    if let Some(a) = r.agreement {
        out.push_str(&format!(
            "\nAgreement: {:.1}% of rows complete in all runs or in none.\n",
            a * 100.0
        ));
    }
    if r.failed > 0 {
        out.push_str(&format!(
            "\n**{} failed rows** over the runs (no sample; re-run to retry).\n",
            r.failed
        ));
    }
    out
}

/// Runs `rows` of `set` `repeats` times, run `i` with seed `cfg.seed + i` in
/// `out_dir/repeat-<i>`, then writes `repeats.json` and `repeats.md` in `out_dir` (module docs).
pub fn run(
    set: &EvalSet,
    rows: &[&EvalRow],
    cfg: &RunConfig,
    run_name: &str,
    out_dir: &Path,
    repeats: usize,
) -> Result<Repeats> {
    let (mut seeds, mut names, mut totals, mut all_rows) = (vec![], vec![], vec![], vec![]);
    for i in 0..repeats.max(1) {
        let seed = cfg.seed + i as u64;
        let name = format!("repeat-{i}");
        let dir = out_dir.join(&name);
        let cfg_i = RunConfig { seed, ..cfg.clone() };
        let report = super::run::run(set, rows, &cfg_i, &format!("{run_name}/{name}"), &dir)?;
        totals.push(report.totals.metrics.iter().map(|(k, m)| (k.clone(), m.mean)).collect());
        let text =
            std::fs::read_to_string(dir.join("rows.jsonl")).with_context(|| format!("reading {}", dir.display()))?;
        let parsed: Vec<RowResult> = text.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
        all_rows.push(parsed);
        seeds.push(seed);
        names.push(name);
    }
    let r = summarise(seeds, names, &totals, &all_rows);
    let mut json = serde_json::to_vec_pretty(&r)?;
    json.push(b'\n');
    crate::store::write_atomic(&out_dir.join("repeats.json"), &json)?;
    crate::store::write_atomic(&out_dir.join("repeats.md"), markdown(&r, run_name).as_bytes())?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_at_k_is_the_binomial_ratio() {
        // 1 − C(n−c, k)/C(n, k) by the binomials themselves.
        let binom = |n: usize, k: usize| -> f64 {
            if k > n {
                return 0.0;
            }
            (0..k).map(|i| (n - i) as f64 / (i + 1) as f64).product()
        };
        for n in 1..8 {
            for c in 0..=n {
                for k in 1..=n {
                    let direct = 1.0 - binom(n - c, k) / binom(n, k);
                    assert!((pass_at_k(n, c, k) - direct).abs() < 1e-12, "{n} {c} {k}");
                }
            }
        }
    }
}
