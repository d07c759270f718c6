//! Live API-Bench §4.1.1: position-aware intent and slot scores.
//!
//! *Intent*: the predicted call at position `i` matches when its name equals the gold call's
//! name at position `i`; `tp` = matched positions, P = tp / predicted calls, R = tp / gold calls.
//! *Slot*, conditional on the matched intent: over the matched positions only, a predicted
//! argument is a true positive when the gold call at that position has the same argument name
//! with an equal value ([`super::value_eq`]); P = tp / predicted arguments of matched calls,
//! R = tp / gold arguments of matched calls. No matched position: slot P = R = F1 = 0 (1 when
//! both sequences are empty).

use super::{Prf, value_eq};
use crate::tools::Call;

/// Position-aware intent P/R/F1 (module docs).
pub fn intent_prf(gold: &[Call], pred: &[Call]) -> Prf {
    let tp = gold.iter().zip(pred).filter(|(g, p)| g.name == p.name).count();
    Prf::from_counts(tp, pred.len(), gold.len())
}

/// Slot P/R/F1 conditional on the matched intent (module docs).
pub fn slot_prf(gold: &[Call], pred: &[Call]) -> Prf {
    if gold.is_empty() && pred.is_empty() {
        return Prf::from_counts(0, 0, 0);
    }
    let (mut tp, mut np, mut ng, mut matched) = (0, 0, 0, 0);
    for (g, p) in gold.iter().zip(pred).filter(|(g, p)| g.name == p.name) {
        matched += 1;
        np += p.arguments.len();
        ng += g.arguments.len();
        tp += p
            .arguments
            .iter()
            .filter(|(k, v)| g.arguments.get(*k).is_some_and(|w| value_eq(v, w)))
            .count();
    }
    if matched == 0 {
        return Prf::default();
    }
    Prf::from_counts(tp, np, ng)
}
