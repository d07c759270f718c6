//! `parameter_rename`: a property renamed through [`SYNONYMS`] (whole name, else token-wise on
//! `_`), else snake_case → camelCase ([`renamed`]); never onto a name the tool already has.
//!
//! Migration: the argument key renamed (loud when the call has it). Un-migration: renamed back.

use serde_json::{Map, Value};

use super::{Change, Rng, pick_some};

/// The curated synonym table of `parameter_rename` (whole names first, then per `_` token).
pub const SYNONYMS: &[(&str, &str)] = &[
    ("key_name", "column"),
    ("data_source", "source"),
    ("value", "target_value"),
    ("condition", "comparison"),
    ("limit", "max_results"),
    ("distinct", "unique"),
    ("ascending", "sort_ascending"),
    ("aggregation_type", "aggregation"),
    ("operation_type", "operation"),
    ("operation_args", "operation_parameters"),
    ("unique_array", "values"),
    ("truncate_array", "values"),
    ("n", "count"),
    ("operand_a", "left_operand"),
    ("operand_b", "right_operand"),
    ("operator", "arithmetic_operator"),
    ("name", "title"),
    ("country", "nation"),
    ("city", "town"),
    ("age", "years"),
    ("year", "yr"),
    ("id", "identifier"),
    ("type", "kind"),
    ("title", "heading"),
    ("language", "lang"),
    ("nationality", "citizenship"),
    ("state", "province"),
    ("date", "day"),
    ("model", "model_name"),
    ("code", "identifier_code"),
    ("number", "num"),
    ("first", "given"),
    ("last", "family"),
    ("min", "minimum"),
    ("max", "maximum"),
    ("count", "total"),
    ("price", "cost"),
    ("weight", "mass"),
    ("height", "stature"),
    ("color", "colour"),
    ("sex", "gender"),
    ("gender", "sex"),
    ("address", "location"),
    ("capacity", "size"),
    ("status", "state"),
    ("description", "details"),
];

fn camel(name: &str) -> String {
    let mut out = String::new();
    for (i, part) in name.split('_').filter(|s| !s.is_empty()).enumerate() {
        if i == 0 {
            out.push_str(part);
        } else {
            let mut c = part.chars();
            if let Some(f) = c.next() {
                out.extend(f.to_uppercase());
                out.push_str(c.as_str());
            }
        }
    }
    out
}

/// The A_new name `parameter_rename` gives `name`: the whole name in [`SYNONYMS`], else each `_`
/// token replaced through it, else camelCase; `None` when nothing changes.
pub fn renamed(name: &str) -> Option<String> {
    let lookup = |s: &str| SYNONYMS.iter().find(|(a, _)| *a == s).map(|(_, b)| b.to_string());
    if let Some(n) = lookup(name) {
        return Some(n);
    }
    let toks: Vec<String> = name
        .split('_')
        .map(|t| lookup(t).unwrap_or_else(|| t.to_string()))
        .collect();
    let joined = toks.join("_");
    if joined != name {
        return Some(joined);
    }
    let c = camel(name);
    (c != name).then_some(c)
}

/// Some of the parameters `ps` that [`renamed`] changes, the new name not already taken.
pub(super) fn propose(ps: &[(String, Value)], rng: &mut Rng) -> Vec<Change> {
    let names: Vec<String> = ps.iter().map(|(n, _)| n.clone()).collect();
    let el: Vec<(String, String)> = names
        .iter()
        .filter_map(|n| renamed(n).map(|r| (n.clone(), r)))
        .filter(|(_, r)| !names.contains(r))
        .collect();
    pick_some(&el, rng)
        .into_iter()
        .map(|(from, to)| Change::ParameterRename { from, to })
        .collect()
}

/// `map` with key `from` renamed `to`, in place (order kept).
pub(super) fn rename_key(map: &Map<String, Value>, from: &str, to: &str) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| (if k == from { to.to_string() } else { k.clone() }, v.clone()))
        .collect()
}

/// A_new: the property renamed, and in `required`.
pub(super) fn apply(properties: &mut Map<String, Value>, req: &mut [String], from: &str, to: &str) {
    *properties = rename_key(properties, from, to);
    for r in req.iter_mut() {
        if *r == *from {
            *r = to.to_string();
        }
    }
}

/// Migration; `true` when the call had the argument (loud).
pub(super) fn migrate(args: &mut Map<String, Value>, from: &str, to: &str) -> bool {
    if args.contains_key(from) {
        *args = rename_key(args, from, to);
        return true;
    }
    false
}

/// Un-migration.
pub(super) fn unmigrate(args: &mut Map<String, Value>, from: &str, to: &str) {
    if args.contains_key(to) {
        *args = rename_key(args, to, from);
    }
}
