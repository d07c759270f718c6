//! `default_flip`: a boolean default `d` becomes `!d`.
//!
//! Migration: the old default made explicit when the call omits the argument (quiet: the old
//! call stays valid but would silently change meaning). Un-migration: an omitted argument takes
//! the *new* default (what A_new means by omitting it).

use serde_json::{Map, Value, json};

use super::{Change, Rng};

/// One boolean-defaulted parameter of `ps` not in `taken`.
pub(super) fn propose(ps: &[(String, Value)], taken: &[String], rng: &mut Rng) -> Vec<Change> {
    let el: Vec<(String, bool)> = ps
        .iter()
        .filter(|(n, _)| !taken.contains(n))
        .filter_map(|(n, p)| p["default"].as_bool().map(|d| (n.clone(), d)))
        .collect();
    if el.is_empty() {
        vec![]
    } else {
        let (n, d) = el[rng.below(el.len())].clone();
        vec![Change::DefaultFlip {
            parameter: n,
            old: json!(d),
            new: json!(!d),
        }]
    }
}

/// A_new: the new default.
pub(super) fn apply(properties: &mut Map<String, Value>, parameter: &str, new: &Value) {
    if let Some(p) = properties.get_mut(parameter) {
        p["default"] = new.clone();
    }
}

/// Migration and un-migration alike: an omitted argument gets `value` (migration: the A_old
/// default; un-migration: the A_new default).
pub(super) fn fill(args: &mut Map<String, Value>, parameter: &str, value: &Value) {
    if !args.contains_key(parameter) {
        args.insert(parameter.to_string(), value.clone());
    }
}
