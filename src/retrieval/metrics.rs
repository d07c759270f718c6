//! Retrieval metrics of one ranking against its relevant set, binary relevance, as BEIR reports
//! them (trec_eval's definitions, Thakur et al. 2021 §4; Järvelin & Kekäläinen 2002 for nDCG):
//!
//! - Recall@k = |relevant ∩ top k| / |relevant|;
//! - nDCG@k = DCG@k / IDCG@k, DCG@k = Σ_{i=1..k} rel_i / log2(i + 1), IDCG@k the DCG of the
//!   ideal ranking (min(k, |relevant|) relevant items first);
//! - MRR = 1 / rank of the first relevant item in the ranking given (0 when none is in it).
//!
//! A query with no relevant item is not scored (the caller leaves it out and counts it); a query
//! the run has no ranking for scores 0 on every metric. [`Summary`] is the mean over queries.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Recall@k of `ranking` (best first) against `relevant` (non-empty).
pub fn recall_at(ranking: &[&str], relevant: &BTreeSet<&str>, k: usize) -> f64 {
    if relevant.is_empty() {
        return 0.0;
    }
    let found = distinct(ranking).take(k).filter(|d| relevant.contains(*d)).count();
    found as f64 / relevant.len() as f64
}

/// nDCG@k of `ranking` against `relevant`, binary gains.
pub fn ndcg_at(ranking: &[&str], relevant: &BTreeSet<&str>, k: usize) -> f64 {
    let gain = |i: usize| 1.0 / ((i + 2) as f64).log2();
    let dcg: f64 = distinct(ranking)
        .take(k)
        .enumerate()
        .filter(|(_, d)| relevant.contains(*d))
        .map(|(i, _)| gain(i))
        .sum();
    let idcg: f64 = (0..k.min(relevant.len())).map(gain).sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

/// Reciprocal rank of the first relevant item of `ranking` (0 when none is in it).
pub fn reciprocal_rank(ranking: &[&str], relevant: &BTreeSet<&str>) -> f64 {
    distinct(ranking)
        .position(|d| relevant.contains(d))
        .map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// The ranking with repeated items after their first occurrence skipped (trec_eval keeps one
/// score per document).
fn distinct<'a>(ranking: &'a [&'a str]) -> impl Iterator<Item = &'a str> + 'a {
    let mut seen = BTreeSet::new();
    ranking.iter().copied().filter(move |d| seen.insert(*d))
}

/// The mean metrics over a set of queries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Queries scored (those with at least one relevant item).
    pub queries: usize,
    /// Mean Recall@1.
    #[serde(rename = "recall@1")]
    pub recall_1: f64,
    /// Mean Recall@5.
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    /// Mean Recall@10.
    #[serde(rename = "recall@10")]
    pub recall_10: f64,
    /// Mean nDCG@10.
    #[serde(rename = "ndcg@10")]
    pub ndcg_10: f64,
    /// Mean reciprocal rank.
    pub mrr: f64,
}

/// Scores `run` (query id → ranking, best first) against `qrels` (query id → relevant ids);
/// queries of `qrels` without a ranking in `run` score 0, queries with no relevant id are left
/// out.
pub fn summarise(qrels: &BTreeMap<String, BTreeSet<String>>, run: &BTreeMap<String, Vec<String>>) -> Summary {
    let mut sums = [0.0f64; 5];
    let mut n = 0usize;
    for (q, rel) in qrels {
        if rel.is_empty() {
            continue;
        }
        n += 1;
        let rel: BTreeSet<&str> = rel.iter().map(String::as_str).collect();
        let ranking: Vec<&str> = run
            .get(q)
            .map(|r| r.iter().map(String::as_str).collect())
            .unwrap_or_default();
        sums[0] += recall_at(&ranking, &rel, 1);
        sums[1] += recall_at(&ranking, &rel, 5);
        sums[2] += recall_at(&ranking, &rel, 10);
        sums[3] += ndcg_at(&ranking, &rel, 10);
        sums[4] += reciprocal_rank(&ranking, &rel);
    }
    let mean = |s: f64| if n == 0 { 0.0 } else { s / n as f64 };
    Summary {
        queries: n,
        recall_1: mean(sums[0]),
        recall_5: mean(sums[1]),
        recall_10: mean(sums[2]),
        ndcg_10: mean(sums[3]),
        mrr: mean(sums[4]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set<'a>(items: &[&'a str]) -> BTreeSet<&'a str> {
        items.iter().copied().collect()
    }

    #[test]
    fn hand_computed_recall_ndcg_and_mrr() {
        // Relevant {a, c}; ranking x a y c: hits at ranks 2 and 4.
        let ranking = ["x", "a", "y", "c"];
        let rel = set(&["a", "c"]);
        assert_eq!(recall_at(&ranking, &rel, 1), 0.0);
        assert_eq!(recall_at(&ranking, &rel, 2), 0.5);
        assert_eq!(recall_at(&ranking, &rel, 10), 1.0);
        assert_eq!(reciprocal_rank(&ranking, &rel), 0.5);
        // DCG = 1/log2(3) + 1/log2(5) = 0.63093 + 0.43068; IDCG = 1 + 1/log2(3) = 1.63093.
        let expected = (1.0 / 3f64.log2() + 1.0 / 5f64.log2()) / (1.0 + 1.0 / 3f64.log2());
        assert!((ndcg_at(&ranking, &rel, 10) - expected).abs() < 1e-12);
        assert!((ndcg_at(&ranking, &rel, 10) - 0.650921).abs() < 1e-6);
        // nDCG@2 = (1/log2 3) / (1 + 1/log2 3) = 0.63093 / 1.63093.
        assert!((ndcg_at(&ranking, &rel, 2) - 0.386853).abs() < 1e-6);
        // Nothing relevant retrieved.
        assert_eq!(reciprocal_rank(&["x", "y"], &rel), 0.0);
        assert_eq!(ndcg_at(&["x", "y"], &rel, 10), 0.0);
    }

    #[test]
    fn repeated_items_count_once() {
        let rel = set(&["a", "b"]);
        assert_eq!(recall_at(&["a", "a", "b"], &rel, 2), 1.0);
        assert_eq!(ndcg_at(&["a", "a", "b"], &rel, 2), 1.0);
    }

    #[test]
    fn the_gold_ranking_scores_one_on_every_metric() {
        let qrels: BTreeMap<String, BTreeSet<String>> = [
            ("q1".to_string(), ["t1".to_string()].into()),
            ("q2".to_string(), ["t2".to_string(), "t3".to_string()].into()),
        ]
        .into();
        let run = qrels
            .iter()
            .map(|(q, r)| (q.clone(), r.iter().cloned().chain(["zz".to_string()]).collect()))
            .collect();
        let s = summarise(&qrels, &run);
        assert_eq!(s.queries, 2);
        // Recall@1 of q2 is 1/2 (two relevant tools, one slot): the gold ranking's own bound.
        assert_eq!(s.recall_1, 0.75);
        assert_eq!((s.recall_5, s.recall_10, s.ndcg_10, s.mrr), (1.0, 1.0, 1.0, 1.0));
    }

    #[test]
    fn a_query_without_a_ranking_scores_zero_and_one_without_relevant_items_is_left_out() {
        let qrels: BTreeMap<String, BTreeSet<String>> = [
            ("q1".to_string(), ["t1".to_string()].into()),
            ("q2".to_string(), ["t2".to_string()].into()),
            ("q3".to_string(), BTreeSet::new()),
        ]
        .into();
        let run = [("q1".to_string(), vec!["t1".to_string()])].into();
        let s = summarise(&qrels, &run);
        assert_eq!(s.queries, 2);
        assert_eq!((s.recall_1, s.ndcg_10, s.mrr), (0.5, 0.5, 0.5));
    }
}
