//! API-BLEND §5.4: sequence metrics over the called APIs, order-free except LCS-F1.
//!
//! - **API-F1**: the predicted and gold API names as multisets; tp = size of their intersection.
//! - **Parameter-F1**: the (parameter name, value) pairs of all calls as multisets (values
//!   compared by [`super::canonical`], so `1 == 1.0`); tp = size of the intersection. When
//!   neither side has a pair (every call takes no argument, or no call), the row scores 1 only
//!   when both sides made calls or both made none, else 0: an empty prediction never earns
//!   credit for a gold call (rest-spider: 305 / 1,012 gold calls take no argument), nor does a
//!   spurious zero-argument call on a row with no gold call.
//! - **LCS-F1** (§5.4): per row, LCS precision = lcs / predicted calls and recall = lcs / gold
//!   calls, with lcs the length of the longest common subsequence of the two name sequences; the
//!   dataset's LCS-F1 is the F1 of the *mean* precision and the *mean* recall
//!   ([`crate::eval::score::summarise`]). The per-row F1 [`lcs_prf`] returns, averaged over rows,
//!   is our earlier variant, reported beside it as `lcs_f1_row_mean`.
//! - **Exact match**: same length and the same name and equal arguments position by position;
//!   on a row whose call order is free ([`Order::Free`]), the two sequences equal as multisets of
//!   (name, arguments). Labels are ignored.
//!
//! Calls are compared with their `$label$` references resolved ([`super::labels`]).

use std::collections::HashMap;

use super::intent::Order;
use super::{Prf, canonical, value_eq};
use crate::tools::Call;

fn multiset_overlap<T: std::hash::Hash + Eq>(gold: Vec<T>, pred: Vec<T>) -> (usize, usize, usize) {
    let (ng, np) = (gold.len(), pred.len());
    let mut counts: HashMap<T, usize> = HashMap::new();
    for g in gold {
        *counts.entry(g).or_insert(0) += 1;
    }
    let mut tp = 0;
    for p in pred {
        if let Some(c) = counts.get_mut(&p).filter(|c| **c > 0) {
            *c -= 1;
            tp += 1;
        }
    }
    (tp, np, ng)
}

/// API-F1 (module docs).
pub fn api_prf(gold: &[Call], pred: &[Call]) -> Prf {
    let (tp, np, ng) = multiset_overlap(
        gold.iter().map(|c| c.name.as_str()).collect(),
        pred.iter().map(|c| c.name.as_str()).collect(),
    );
    Prf::from_counts(tp, np, ng)
}

/// Parameter-F1 over (name, value) pairs (module docs).
pub fn parameter_prf(gold: &[Call], pred: &[Call]) -> Prf {
    let pairs = |calls: &[Call]| -> Vec<(String, String)> {
        calls
            .iter()
            .flat_map(|c| c.arguments.iter().map(|(k, v)| (k.clone(), canonical(v))))
            .collect()
    };
    let (tp, np, ng) = multiset_overlap(pairs(gold), pairs(pred));
    if np == 0 && ng == 0 && gold.is_empty() != pred.is_empty() {
        return Prf::default();
    }
    Prf::from_counts(tp, np, ng)
}

/// Length of the longest common subsequence of two name sequences.
pub fn lcs_len(a: &[&str], b: &[&str]) -> usize {
    let mut prev = vec![0usize; b.len() + 1];
    for x in a {
        let mut cur = vec![0usize; b.len() + 1];
        for (j, y) in b.iter().enumerate() {
            cur[j + 1] = if x == y { prev[j] + 1 } else { prev[j + 1].max(cur[j]) };
        }
        prev = cur;
    }
    prev[b.len()]
}

/// LCS precision and recall of one row, with their per-row F1 (module docs).
pub fn lcs_prf(gold: &[Call], pred: &[Call]) -> Prf {
    let g: Vec<&str> = gold.iter().map(|c| c.name.as_str()).collect();
    let p: Vec<&str> = pred.iter().map(|c| c.name.as_str()).collect();
    Prf::from_counts(lcs_len(&g, &p), p.len(), g.len())
}

/// Exact match (module docs).
pub fn exact_match(gold: &[Call], pred: &[Call], order: Order) -> bool {
    if order == Order::Free {
        let key = |c: &Call| {
            (
                c.name.clone(),
                canonical(&serde_json::Value::Object(c.arguments.clone())),
            )
        };
        let (tp, np, ng) = multiset_overlap(gold.iter().map(key).collect(), pred.iter().map(key).collect());
        return tp == np && tp == ng;
    }
    gold.len() == pred.len()
        && gold.iter().zip(pred).all(|(g, p)| {
            g.name == p.name
                && value_eq(
                    &serde_json::Value::Object(g.arguments.clone()),
                    &serde_json::Value::Object(p.arguments.clone()),
                )
        })
}
