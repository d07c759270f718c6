//! `default_flip`: a stated default changes — a boolean `d` becomes `!d`; an enum's default
//! becomes the next choice of the enum (REST's `sort_order` `"asc"` ↔ `"desc"`). A_new states
//! the new default (REST: as the query parameter's default, which `serve` binds when the
//! argument is omitted).
//!
//! Migration: the old default made explicit when the call omits the argument (quiet: the old
//! call stays valid but would silently change meaning). Un-migration: an omitted argument takes
//! the *new* default (what A_new means by omitting it).

use serde_json::{Map, Value, json};

use super::{Change, Rng};

/// The flipped default of a property: `!d` for a boolean default, the enum's next choice
/// (cyclically) for a default among at least two choices; `None` otherwise.
pub fn flipped(p: &Value) -> Option<Value> {
    let d = p.get("default")?;
    if let Some(b) = d.as_bool() {
        return Some(json!(!b));
    }
    let choices = p["enum"].as_array().filter(|c| c.len() >= 2)?;
    let i = choices.iter().position(|c| c == d)?;
    Some(choices[(i + 1) % choices.len()].clone())
}

/// One parameter of `ps` not in `taken` whose default can flip ([`flipped`]).
pub(super) fn propose(ps: &[(String, Value)], taken: &[String], rng: &mut Rng) -> Vec<Change> {
    let el: Vec<(String, Value, Value)> = ps
        .iter()
        .filter(|(n, _)| !taken.contains(n))
        .filter_map(|(n, p)| flipped(p).map(|new| (n.clone(), p["default"].clone(), new)))
        .collect();
    if el.is_empty() {
        vec![]
    } else {
        let (parameter, old, new) = el[rng.below(el.len())].clone();
        vec![Change::DefaultFlip { parameter, old, new }]
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
