//! `required_swap`: an optional property with a default becomes required, or a required property
//! that states a default becomes optional.
//!
//! Functionality is kept (DynamicToolBench: "A_new = T(A_old) … without altering
//! functionality"): a required property is only made optional when its schema states a default,
//! which A_new keeps, so omitting it in A_new means exactly what passing that default meant in
//! A_old. A required input without a default (a filter value, a data source) is never made
//! optional: A_new would accept calls nothing can run.
//!
//! Migration: optional → required makes the A_old default explicit when the call omits it
//! (loud); required → optional changes nothing (quiet: the old call stays valid). Un-migration:
//! required → optional fills an omitted argument with the stated default (the A_old endpoint
//! requires it).

use serde_json::Value;

use super::{Change, Rng};

/// One parameter of `ps` not in `taken` with a stated default: a required one (→ optional) or an
/// optional one (→ required).
pub(super) fn propose(ps: &[(String, Value)], req: &[String], taken: &[String], rng: &mut Rng) -> Vec<Change> {
    let el: Vec<(String, bool, Option<Value>)> = ps
        .iter()
        .filter(|(n, _)| !taken.contains(n))
        .filter_map(|(n, p)| p.get("default").map(|d| (n.clone(), !req.contains(n), Some(d.clone()))))
        .collect();
    if el.is_empty() {
        vec![]
    } else {
        let (parameter, now_required, default) = el[rng.below(el.len())].clone();
        vec![Change::RequiredSwap {
            parameter,
            now_required,
            default,
        }]
    }
}

/// A_new: `required` with the parameter added or removed.
pub(super) fn apply(req: &mut Vec<String>, parameter: &str, now_required: bool) {
    if now_required {
        if !req.iter().any(|r| r == parameter) {
            req.push(parameter.to_string());
        }
    } else {
        req.retain(|r| r != parameter);
    }
}

/// Migration; `true` when the default was made explicit (loud).
pub(super) fn migrate(
    args: &mut serde_json::Map<String, Value>,
    parameter: &str,
    now_required: bool,
    default: &Option<Value>,
) -> bool {
    if let (true, Some(d)) = (now_required, default) {
        if !args.contains_key(parameter) {
            args.insert(parameter.to_string(), d.clone());
            return true;
        }
    }
    false
}

/// Un-migration: required → optional gives an omitted argument its stated default.
pub(super) fn unmigrate(
    args: &mut serde_json::Map<String, Value>,
    parameter: &str,
    now_required: bool,
    default: &Option<Value>,
) {
    if let (false, Some(d)) = (now_required, default) {
        if !args.contains_key(parameter) {
            args.insert(parameter.to_string(), d.clone());
        }
    }
}
