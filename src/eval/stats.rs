//! Bootstrap 95% intervals of the metrics over rows (Efron's percentile bootstrap): the rows a
//! metric applies to are resampled with replacement [`RESAMPLES`] times, the metric recomputed
//! on each resample, and the 2.5th and 97.5th percentiles of those values are the interval.
//! Deterministic: the resampling draws from SplitMix64 seeded with [`SEED`], so the same rows
//! give byte-identical intervals on every run and machine.
//!
//! A mean metric is resampled as its per-row values; `lcs_f1` (API-BLEND §5.4: the F1 of the
//! mean LCS precision and the mean LCS recall) resamples the rows' (precision, recall) pairs and
//! recomputes the F1 of the two means on each resample.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::score::RowResult;
use crate::variants::Rng;

/// Resamples per interval.
pub const RESAMPLES: usize = 1000;
/// The seed of the resampling.
pub const SEED: u64 = 0;

/// A 95% interval, in the metric's unit ([0, 1]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// 2.5th percentile.
    pub lo: f64,
    /// 97.5th percentile.
    pub hi: f64,
}

/// Uniform in `0..n` from the project's SplitMix64 stream ([`Rng`]), by Lemire's
/// multiply-shift (the bias is below 2^-40 for n < 2^24).
fn below(rng: &mut Rng, n: usize) -> usize {
    ((rng.next_u64() >> 32) * n as u64 >> 32) as usize
}

/// The 2.5th and 97.5th percentiles (nearest rank) of `values` (sorted here).
fn percentiles(mut values: Vec<f64>) -> Interval {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((q * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1];
    Interval {
        lo: at(0.025),
        hi: at(0.975),
    }
}

/// The percentile-bootstrap interval of `stat` over resamples of `rows` (module docs); `None`
/// for no rows.
pub fn bootstrap<T>(rows: &[T], stat: impl Fn(&mut dyn Iterator<Item = &T>) -> f64) -> Option<Interval> {
    if rows.is_empty() {
        return None;
    }
    let mut rng = Rng::from_state(SEED);
    let n = rows.len();
    let values: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let idx: Vec<usize> = (0..n).map(|_| below(&mut rng, n)).collect();
            stat(&mut idx.iter().map(|&i| &rows[i]))
        })
        .collect();
    Some(percentiles(values))
}

fn mean(it: &mut dyn Iterator<Item = &f64>) -> f64 {
    let (s, n) = it.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    s / n as f64
}

/// The interval of every metric of `rows` (module docs), by metric name; failed rows are in
/// none (as in [`super::score::summarise`]).
pub fn intervals<'a>(rows: impl IntoIterator<Item = &'a RowResult>) -> BTreeMap<String, Interval> {
    let mut per: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut lcs: Vec<(f64, f64)> = Vec::new();
    for r in rows.into_iter().filter(|r| r.status != "failed") {
        for (k, x) in r.values() {
            per.entry(k).or_default().push(x);
        }
        lcs.push((r.lcs.p, r.lcs.r));
    }
    let mut out: BTreeMap<String, Interval> = per
        .iter()
        .filter(|(k, _)| **k != "lcs_f1")
        .filter_map(|(k, v)| Some((k.to_string(), bootstrap(v, mean)?)))
        .collect();
    if let Some(row_mean) = per.get("lcs_f1").and_then(|v| bootstrap(v, mean)) {
        out.insert("lcs_f1_row_mean".into(), row_mean);
    }
    let f1_of_means = |it: &mut dyn Iterator<Item = &(f64, f64)>| {
        let (sp, sr, n) = it.fold((0.0, 0.0, 0usize), |(sp, sr, n), (p, r)| (sp + p, sr + r, n + 1));
        let (p, r) = (sp / n as f64, sr / n as f64);
        if p + r == 0.0 { 0.0 } else { 2.0 * p * r / (p + r) }
    };
    if let Some(i) = bootstrap(&lcs, f1_of_means) {
        out.insert("lcs_f1".into(), i);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_deterministic_and_contain_the_mean() {
        let v: Vec<f64> = (0..200).map(|i| (i % 3 == 0) as u8 as f64).collect();
        let a = bootstrap(&v, mean).unwrap();
        assert_eq!(Some(a), bootstrap(&v, mean));
        let m = mean(&mut v.iter());
        assert!(a.lo < m && m < a.hi, "{a:?} {m}");
        // Binomial p = 0.335, n = 200: standard error 0.0334, so about ±0.065.
        assert!((a.hi - a.lo - 0.131).abs() < 0.03, "{a:?}");
        let c = bootstrap(&[1.0; 5], mean).unwrap();
        assert_eq!((c.lo, c.hi), (1.0, 1.0));
    }
}
