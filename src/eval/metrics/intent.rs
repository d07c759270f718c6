//! Live API-Bench §4.1.1: intent and slot scores.
//!
//! *Intent* (§4.1.1, "position-aware"): the predicted call at position `i` matches when its name
//! equals the gold call's name at position `i`; `tp` = matched positions, P = tp / predicted
//! calls, R = tp / gold calls. On a row whose call order is free ([`Order::Free`]: BFCL
//! `parallel`, MixATIS/MixSNIPS clauses — the row's `ordered` is false), calls are matched in
//! any order: first as BFCL's `parallel_function_checker_no_order` matches them (each gold call,
//! in order, takes the first unmatched predicted call equal to it), then each gold call left
//! takes an unmatched predicted call of its name (the one agreeing on the most arguments, then
//! differing on the fewest, the first on ties); `tp` = matched gold calls. On a text-to-SQL row
//! (SLOT/SEL/REST) `ordered` states whether the *answer's rows* are ordered (an ORDER BY), not
//! the calls: its calls form a program whose steps read earlier steps' outputs, and stay
//! position-aware whatever `ordered` says (`EvalRow::calls_unordered`). So the gold with its
//! calls reversed scores intent only where a name stands at its gold position (slot-spider:
//! intent F1 31.0); the order-free view of the same names is API-BLEND's API-F1
//! ([`super::blend::api_prf`]: 100 on that prediction), reported beside intent, and LCS-F1 is
//! the order-aware sequence score (60.9).
//!
//! *Slot* (§4.1.1: slots are scored "conditional on the correct intent"; a model is "not
//! penalized for missing ground-truth intents", as Table 3 confirms: Llama-3.1-8B intent recall
//! 0.09, slot F1 0.61): over the matched calls only, a predicted argument is a true positive when
//! the matched gold call has the same argument name with an equal value ([`super::value_eq`]);
//! P = tp / predicted arguments of matched calls, R = tp / gold arguments of matched calls (a
//! matched pair of zero-argument calls is P = R = F1 = 1: nothing to get wrong). A row with no
//! matched call has no slot score (`None`): it is excluded from the slot means and counted
//! (the means' `n`). Our earlier variant, which scored such a row 0 (1 when both sequences are
//! empty), is kept beside it as [`slot_prf_all_rows`] (`slot_*_all_rows`), never instead.
//!
//! Calls are compared with their `$label$` references resolved ([`super::labels`]).

use super::{Prf, value_eq};
use crate::tools::Call;

/// Whether a row's call order is part of its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Position by position (Live API-Bench's position-aware matching).
    Positional,
    /// Any order (BFCL's no-order matching).
    Free,
}

/// Arguments of `p` equal to the same-named argument of `g`.
fn agreeing(g: &Call, p: &Call) -> usize {
    p.arguments
        .iter()
        .filter(|(k, v)| g.arguments.get(*k).is_some_and(|w| value_eq(v, w)))
        .count()
}

/// The matched (gold index, predicted index) pairs under `order` (module docs), in gold order.
pub fn align(gold: &[Call], pred: &[Call], order: Order) -> Vec<(usize, usize)> {
    match order {
        Order::Positional => (0..gold.len().min(pred.len()))
            .filter(|&i| gold[i].name == pred[i].name)
            .map(|i| (i, i))
            .collect(),
        Order::Free => {
            let mut used = vec![false; pred.len()];
            let mut gold_of: Vec<Option<usize>> = vec![None; gold.len()];
            // Pass 1 (BFCL's no-order check): each gold call takes the first unmatched predicted
            // call equal to it (name and arguments).
            for (i, g) in gold.iter().enumerate() {
                let equal = |p: &Call| {
                    p.name == g.name && agreeing(g, p) == p.arguments.len() && p.arguments.len() == g.arguments.len()
                };
                if let Some(j) = (0..pred.len()).find(|&j| !used[j] && equal(&pred[j])) {
                    used[j] = true;
                    gold_of[i] = Some(j);
                }
            }
            // Pass 2: each gold call left takes the unmatched predicted call of its name that
            // agrees on the most arguments, then differs on the fewest (the first on ties).
            let left: Vec<usize> = (0..gold.len()).filter(|&i| gold_of[i].is_none()).collect();
            for i in left {
                let g = &gold[i];
                let key = |j: usize| {
                    let a = agreeing(g, &pred[j]);
                    (
                        a,
                        std::cmp::Reverse(g.arguments.len() + pred[j].arguments.len() - 2 * a),
                    )
                };
                let best = (0..pred.len()).filter(|&j| !used[j] && pred[j].name == g.name).fold(
                    None,
                    |best: Option<usize>, j| match best {
                        Some(b) if key(b) >= key(j) => best,
                        _ => Some(j),
                    },
                );
                if let Some(j) = best {
                    used[j] = true;
                    gold_of[i] = Some(j);
                }
            }
            gold_of
                .iter()
                .enumerate()
                .filter_map(|(i, j)| Some((i, (*j)?)))
                .collect()
        }
    }
}

/// Intent P/R/F1 (module docs).
pub fn intent_prf(gold: &[Call], pred: &[Call], order: Order) -> Prf {
    Prf::from_counts(align(gold, pred, order).len(), pred.len(), gold.len())
}

/// Slot P/R/F1 over the matched calls; `None` when no call matched (module docs).
pub fn slot_prf(gold: &[Call], pred: &[Call], order: Order) -> Option<Prf> {
    let pairs = align(gold, pred, order);
    if pairs.is_empty() {
        return None;
    }
    let (mut tp, mut np, mut ng) = (0, 0, 0);
    for (i, j) in pairs {
        np += pred[j].arguments.len();
        ng += gold[i].arguments.len();
        tp += agreeing(&gold[i], &pred[j]);
    }
    Some(Prf::from_counts(tp, np, ng))
}

/// Our earlier slot variant, reported beside [`slot_prf`] as `slot_*_all_rows`: a row with no
/// matched call scores 0 (1 when both sequences are empty) instead of being excluded.
pub fn slot_prf_all_rows(gold: &[Call], pred: &[Call], order: Order) -> Prf {
    if gold.is_empty() && pred.is_empty() {
        return Prf::from_counts(0, 0, 0);
    }
    slot_prf(gold, pred, order).unwrap_or_default()
}
