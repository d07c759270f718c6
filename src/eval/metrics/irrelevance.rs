//! BFCL's irrelevance category (`BFCL_v4_irrelevance.json`): no offered function fits the
//! request, so the right answer is no call. A row with no gold call passes when the prediction
//! has no (well-formed) call; rows with gold calls are not irrelevance rows (`None`).

use crate::tools::Call;

/// `Some(pass)` for a row without gold calls, `None` otherwise.
pub fn irrelevance(gold: &[Call], pred: &[Call]) -> Option<bool> {
    gold.is_empty().then_some(pred.is_empty())
}
