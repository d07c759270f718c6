//! API-BLEND §5.4: sequence metrics over the called APIs, order-free except LCS-F1.
//!
//! - **API-F1**: the predicted and gold API names as multisets; tp = size of their intersection.
//! - **Parameter-F1**: the (parameter name, value) pairs of all calls as multisets (values
//!   compared by [`super::canonical`], so `1 == 1.0`); tp = size of the intersection. When
//!   neither side has a pair (every call takes no argument, or no call), the row scores 1 only
//!   when both sides made calls or both made none, else 0: an empty prediction never earns
//!   credit for a gold call (rest-spider: 305 / 1,012 gold calls take no argument), nor does a
//!   spurious zero-argument call on a row with no gold call. The pairs are pooled over the
//!   row's calls, whatever API carries them (§5.4 counts "parameter name-value pairs", not
//!   pairs within matched APIs): arguments right under a wrong API name are credited here;
//!   whether the API is right is what API-F1 and intent measure.
//! - **Parameter-F1 by API** (our variant, reported beside Parameter-F1 as `parameter_*_by_api`,
//!   never instead): the same over (API name, parameter name, value) triples, so an argument
//!   earns credit only under the API the gold gives it to ([`parameter_prf_by_api`]).
//! - **LCS-F1** (§5.4): per row, LCS precision = lcs / predicted calls and recall = lcs / gold
//!   calls, with lcs the length of the longest common subsequence of the two name sequences; the
//!   dataset's LCS-F1 is the F1 of the *mean* precision and the *mean* recall
//!   ([`crate::eval::score::summarise`]). The per-row F1 [`lcs_prf`] returns, averaged over rows,
//!   is our earlier variant, reported beside it as `lcs_f1_row_mean`.
//! - **Exact match** (ours: §5.4 defines API-F1, Parameter-F1 and LCS-F1, no exact-match
//!   metric): same length and the same name and equal arguments position by position; on a row
//!   whose call order is free ([`Order::Free`]), the two sequences equal as multisets of
//!   (name, arguments). Labels are ignored.
//!
//! Parameter-F1 when neither side has a pair but both made calls (every call takes no argument)
//! is 0/0, which §5.4 leaves undefined; we score it 1 whatever the calls are (no pair to get
//! wrong; whether the calls are right is API-F1's and intent's to say). Issue 49 reports 128
//! such rows where the calls differ.
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

/// Parameter-F1 by API: (API name, parameter name, value) triples as multisets, with
/// [`parameter_prf`]'s conventions for rows without any (module docs).
pub fn parameter_prf_by_api(gold: &[Call], pred: &[Call]) -> Prf {
    let triples = |calls: &[Call]| -> Vec<(String, String, String)> {
        calls
            .iter()
            .flat_map(|c| {
                c.arguments
                    .iter()
                    .map(|(k, v)| (c.name.clone(), k.clone(), canonical(v)))
            })
            .collect()
    };
    let (tp, np, ng) = multiset_overlap(triples(gold), triples(pred));
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn call(name: &str, args: Value) -> Call {
        Call {
            name: name.into(),
            arguments: args.as_object().unwrap().clone(),
            label: String::new(),
        }
    }

    /// Gold `find_flight(from=BOS, to=DEN)`, predicted `find_fare(from=BOS, to=DEN)`: API-BLEND
    /// §5.4's Parameter-F1 pools (name, value) pairs over the row, so both pairs count (P = R = 1);
    /// the by-API variant counts (API, name, value) triples, so none does (0).
    #[test]
    fn arguments_under_a_wrong_api_name_count_in_parameter_f1_but_not_by_api() {
        let gold = [call("find_flight", json!({"from": "BOS", "to": "DEN"}))];
        let pred = [call("find_fare", json!({"to": "DEN", "from": "BOS"}))];
        assert_eq!(parameter_prf(&gold, &pred), Prf::from_counts(2, 2, 2));
        assert_eq!(parameter_prf_by_api(&gold, &pred), Prf::default());
        assert_eq!(api_prf(&gold, &pred), Prf::default());
        // One call right, one renamed: 2 of 4 triples, 4 of 4 pairs.
        let gold2 = [
            gold[0].clone(),
            call("find_fare", json!({"class": "first", "to": "DEN"})),
        ];
        let pred2 = [
            gold[0].clone(),
            call("find_meal", json!({"class": "first", "to": "DEN"})),
        ];
        assert_eq!(parameter_prf(&gold2, &pred2), Prf::from_counts(4, 4, 4));
        let by_api = parameter_prf_by_api(&gold2, &pred2);
        assert_eq!((by_api.p, by_api.r, by_api.f1), (0.5, 0.5, 0.5));
        // An empty prediction earns nothing from zero-argument gold calls in either.
        let bare = [call("list_airlines", json!({}))];
        assert_eq!(parameter_prf_by_api(&bare, &[]), Prf::default());
        assert_eq!(parameter_prf_by_api(&bare, &bare).f1, 1.0);
    }
}
