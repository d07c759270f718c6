//! BFCL's relevance and irrelevance detection, the two categories without a reference call.
//!
//! - Irrelevance (`BFCL_v4_irrelevance.json`, `meta.expected` = `"no_call"` or no gold call):
//!   no offered function fits the request, so the right answer is no call; the row passes when
//!   the prediction has no (well-formed) call.
//! - Relevance (`BFCL_v4_live_relevance.json`, `meta.expected` = `"any_call"`): some offered
//!   function fits but BFCL publishes no reference call, so the row passes when the prediction
//!   makes at least one call (BFCL's `relevance_checker`: any non-empty decoded output).
//!
//! Rows with gold calls are neither (`None`).

use crate::tools::Call;

/// What a row without gold calls expects, from its `meta.expected` (`"any_call"` → relevance,
/// anything else → irrelevance).
fn expects_a_call(expected: Option<&str>) -> bool {
    expected == Some("any_call")
}

/// Irrelevance: `Some(pass)` for a row without gold calls that expects no call, `None` otherwise.
pub fn irrelevance(gold: &[Call], pred: &[Call], expected: Option<&str>) -> Option<bool> {
    (gold.is_empty() && !expects_a_call(expected)).then_some(pred.is_empty())
}

/// Relevance: `Some(pass)` for a row whose `meta.expected` is `"any_call"`, `None` otherwise.
pub fn relevance(gold: &[Call], pred: &[Call], expected: Option<&str>) -> Option<bool> {
    (gold.is_empty() && expects_a_call(expected)).then_some(!pred.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> Call {
        Call {
            name: "f".into(),
            arguments: serde_json::Map::new(),
            label: String::new(),
        }
    }

    #[test]
    fn live_relevance_rows_pass_on_any_call_and_fail_on_none() {
        let any = Some("any_call");
        assert_eq!(relevance(&[], &[call()], any), Some(true));
        assert_eq!(relevance(&[], &[], any), Some(false));
        assert_eq!(
            irrelevance(&[], &[], any),
            None,
            "a relevance row is not an irrelevance row"
        );
        assert_eq!(irrelevance(&[], &[], Some("no_call")), Some(true));
        assert_eq!(irrelevance(&[], &[call()], None), Some(false));
        assert_eq!(relevance(&[], &[call()], None), None);
        assert_eq!(relevance(&[call()], &[call()], any), None);
    }
}
