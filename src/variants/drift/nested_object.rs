//! `nested_object`: related properties moved into one object property. SLOT/SEL: a group of
//! [`GROUPS`] with at least two members present (the group name free). REST: the endpoint's
//! filter parameters (all but the paging ones, [`REST_PAGING`]) become one object `criteria`,
//! else `limit` + `sort_order` become `paging`; a query string is flat, so the A_new endpoint
//! takes a JSON body: **verb evolution GET → POST** ([`super::ToolDrift::method`]; `serve`
//! answers the old GET with 405 and a flat body with 422). Members are named as in A_new (after
//! renaming) and keep their A_old order; the object takes the first member's position, and is
//! required when any member was.
//!
//! Migration: those arguments moved into the object (loud when any is present). Un-migration:
//! the object's members moved back to the top level (an error when the group is not an object).

use serde_json::{Map, Value, json};

use super::Change;

/// Related parameters `nested_object` groups: (object name, members by A_old name).
pub const GROUPS: &[(&str, &[&str])] = &[
    ("criterion", &["key_name", "value", "other_key_name", "condition"]),
    ("options", &["distinct", "limit"]),
    ("operands", &["operand_a", "operand_b"]),
    ("transformation", &["operation_type", "operation_args"]),
];

/// The paging parameters of a REST endpoint (`sql::expose`): grouped as `paging`, never into
/// `criteria`.
pub const REST_PAGING: &[&str] = &["limit", "sort_order"];

/// The group name of a REST endpoint's filter parameters.
pub const REST_CRITERIA: &str = "criteria";

/// SLOT/SEL: the first group of [`GROUPS`] with two members among `ps`. REST (`rest`): the
/// filter parameters as `criteria` (at least one), else both paging parameters as `paging`.
pub(super) fn propose(ps: &[(String, Value)], rest: bool) -> Vec<Change> {
    let has = |name: &str| ps.iter().any(|(n, _)| n.as_str() == name);
    let group = |group: &str, members: Vec<String>| Change::NestedObject {
        group: group.to_string(),
        members,
    };
    if rest {
        let filters: Vec<String> = ps
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| !REST_PAGING.contains(&n.as_str()))
            .collect();
        return if !filters.is_empty() && !has(REST_CRITERIA) {
            vec![group(REST_CRITERIA, filters)]
        } else if REST_PAGING.iter().all(|p| has(p)) && !has("paging") {
            let paging = ps
                .iter()
                .map(|(n, _)| n.clone())
                .filter(|n| REST_PAGING.contains(&n.as_str()));
            vec![group("paging", paging.collect())]
        } else {
            vec![]
        };
    }
    let mut out = vec![];
    for &(group, members) in GROUPS {
        if members.iter().filter(|m| has(m)).count() >= 2 && !has(group) {
            out.push(Change::NestedObject {
                group: group.to_string(),
                members: ps
                    .iter()
                    .filter(|(n, _)| members.contains(&n.as_str()))
                    .map(|(n, _)| n.clone())
                    .collect(),
            });
            break;
        }
    }
    out
}

/// Splits `map` for nested-object grouping: the entries named in `members` (the inner object)
/// and the rest, where a `null` placeholder for `group` stands at the first member's position.
fn split_group(map: &Map<String, Value>, group: &str, members: &[String]) -> (Map<String, Value>, Map<String, Value>) {
    let mut inner = Map::new();
    let mut out = Map::new();
    for (k, v) in map {
        if members.contains(k) {
            if inner.is_empty() {
                out.insert(group.to_string(), Value::Null);
            }
            inner.insert(k.clone(), v.clone());
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    (out, inner)
}

/// A_new: the members moved into the object property `group`.
pub(super) fn apply(properties: &mut Map<String, Value>, req: &mut Vec<String>, group: &str, members: &[String]) {
    let (mut out, inner) = split_group(properties, group, members);
    let inner_req: Vec<String> = members.iter().filter(|m| req.contains(m)).cloned().collect();
    let any_req = !inner_req.is_empty();
    req.retain(|r| !members.contains(r));
    if any_req {
        req.push(group.to_string());
    }
    out.insert(
        group.to_string(),
        json!({"type": "object", "description": format!("Grouped parameters: {}.", members.join(", ")), "properties": inner, "required": inner_req, "additionalProperties": false}),
    );
    *properties = out;
}

/// Migration; `true` when any member was moved (loud).
pub(super) fn migrate(args: &mut Map<String, Value>, group: &str, members: &[String]) -> bool {
    let (mut out, inner) = split_group(args, group, members);
    let loud = !inner.is_empty();
    if loud {
        out.insert(group.to_string(), Value::Object(inner));
    }
    *args = out;
    loud
}

/// Un-migration.
pub(super) fn unmigrate(args: &mut Map<String, Value>, group: &str) -> Result<(), String> {
    if let Some(v) = args.get(group).cloned() {
        let Value::Object(inner) = v else {
            return Err(format!("argument `{group}` must be an object"));
        };
        let mut out = Map::new();
        for (k, v) in args.iter() {
            if k == group {
                for (ik, iv) in &inner {
                    out.insert(ik.clone(), iv.clone());
                }
            } else {
                out.insert(k.clone(), v.clone());
            }
        }
        *args = out;
    }
    Ok(())
}
