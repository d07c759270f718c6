//! `required_swap`: a required property becomes optional, or an optional one with a default
//! becomes required.
//!
//! Migration: optional → required makes the A_old default explicit when the call omits it
//! (loud); required → optional changes nothing (quiet: the old call stays valid). Un-migration:
//! nothing to undo.

use serde_json::Value;

use super::{Change, Rng};

/// One parameter of `ps` not in `taken`: a required one, or an optional one with a default.
pub(super) fn propose(ps: &[(String, Value)], req: &[String], taken: &[String], rng: &mut Rng) -> Vec<Change> {
    let el: Vec<(String, bool, Option<Value>)> = ps
        .iter()
        .filter(|(n, _)| !taken.contains(n))
        .filter_map(|(n, p)| {
            if req.contains(n) {
                Some((n.clone(), false, None))
            } else {
                p.get("default").map(|d| (n.clone(), true, Some(d.clone())))
            }
        })
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
