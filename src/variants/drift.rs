//! `drift`: DynamicToolBench schema drift, A_new = T(A_old), over [`ToolSpec`] JSON Schemas, with
//! a migration of every gold call from A_old to A_new and the reverse un-migration the executor
//! (and `toolforge serve`) uses, so a migrated call executes to the same answer.
//!
//! The six operators ([`OPERATORS`]), each recorded as a [`Change`] in the tool's change log:
//!
//! | operator             | schema change (A_old → A_new)                                   | migration of a gold call                    |
//! |----------------------|-----------------------------------------------------------------|---------------------------------------------|
//! | `endpoint_evolution` | function `f` → `f_v2`; REST path `/v1/…` → `/v2/…`              | call name → `f_v2`                          |
//! | `parameter_rename`   | property renamed through [`SYNONYMS`] (token-wise), else snake_case → camelCase | argument key renamed          |
//! | `type_drift`         | `integer` / `number` / `boolean` property → `string` (default too) | value written as text (`-1` → `"-1"`)    |
//! | `required_swap`      | a required property becomes optional, or an optional one with a default becomes required | optional→required: the old default made explicit when absent |
//! | `default_flip`       | a boolean default `d` becomes `!d`                              | the old default made explicit when absent   |
//! | `nested_object`      | related properties ([`GROUPS`]) moved into one object property (not for REST GET: query strings are flat) | those arguments moved into the object |
//!
//! Each parameter gets at most one of `type_drift`, `required_swap`, `default_flip`; renaming and
//! nesting compose with them. Every drifted A_new schema has `additionalProperties: false` (a
//! strict new version: an old argument name is an error, FastAPI's `extra_forbidden`).
//! Un-migration ([`unmigrate`]) inverts the migration and gives omitted A_new arguments their
//! A_new meaning (a flipped default is filled with the *new* default).
//!
//! Which changes break an old call ([`Migrated::loud`]): all but `default_flip` and
//! `required→optional`, which leave an old call valid under A_new (a flipped default silently
//! changes its meaning; that is why the migration makes it explicit).
//!
//! The dataset's drift ([`Drift`], `tools/drift.json`) holds, per tool, A_old, A_new and the
//! change log; `toolforge serve` enforces A_new with it ([`Drift::check_body`],
//! [`Drift::check_query`]), answering old-style calls with FastAPI-shaped 422 errors.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{DriftConfig, Rng, variant_row};
use crate::dataset::{Build, Example};
use crate::tools::rest::Endpoint;
use crate::tools::{Call, ToolSpec};

/// The six DynamicToolBench drift operators.
pub const OPERATORS: [&str; 6] = [
    "endpoint_evolution",
    "parameter_rename",
    "type_drift",
    "required_swap",
    "default_flip",
    "nested_object",
];

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

/// Related parameters `nested_object` groups: (object name, members by A_old name).
pub const GROUPS: &[(&str, &[&str])] = &[
    ("criterion", &["key_name", "value", "condition"]),
    ("options", &["distinct", "limit"]),
    ("operands", &["operand_a", "operand_b"]),
    ("transformation", &["operation_type", "operation_args"]),
];

/// One entry of a tool's change log. Parameter names are A_old names except in
/// [`Change::NestedObject`], whose members are named as in A_new (after renaming).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "operator", rename_all = "snake_case")]
pub enum Change {
    /// `endpoint_evolution`: the function (and REST path) got a new version.
    EndpointEvolution {
        /// A_old function name.
        name_old: String,
        /// A_new function name.
        name_new: String,
        /// REST: A_old path.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        path_old: Option<String>,
        /// REST: A_new path.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        path_new: Option<String>,
    },
    /// `parameter_rename`.
    ParameterRename {
        /// A_old name.
        from: String,
        /// A_new name.
        to: String,
    },
    /// `type_drift`: the parameter's type became `string`.
    TypeDrift {
        /// A_old name.
        parameter: String,
        /// A_old type (`integer`, `number`, `boolean`).
        from: String,
    },
    /// `required_swap`.
    RequiredSwap {
        /// A_old name.
        parameter: String,
        /// `true`: optional → required (the A_old default is made explicit); `false`: required
        /// → optional.
        now_required: bool,
        /// optional → required: the A_old default.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        default: Option<Value>,
    },
    /// `default_flip`: a boolean default negated.
    DefaultFlip {
        /// A_old name.
        parameter: String,
        /// A_old default.
        old: Value,
        /// A_new default.
        new: Value,
    },
    /// `nested_object`: members moved into one object property.
    NestedObject {
        /// The object property.
        group: String,
        /// Members, A_new names, in A_old order.
        members: Vec<String>,
    },
}

impl Change {
    /// The operator name ([`OPERATORS`]).
    pub fn operator(&self) -> &'static str {
        match self {
            Change::EndpointEvolution { .. } => "endpoint_evolution",
            Change::ParameterRename { .. } => "parameter_rename",
            Change::TypeDrift { .. } => "type_drift",
            Change::RequiredSwap { .. } => "required_swap",
            Change::DefaultFlip { .. } => "default_flip",
            Change::NestedObject { .. } => "nested_object",
        }
    }
}

/// One drifted tool: A_old, A_new and the change log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDrift {
    /// REST: the endpoint's database (function names are unique per database only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub db_id: Option<String>,
    /// REST: A_old route path.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path_old: Option<String>,
    /// REST: A_new route path.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path_new: Option<String>,
    /// A_old (the spec a model is shown).
    pub old: ToolSpec,
    /// A_new (what execution enforces).
    pub new: ToolSpec,
    /// The change log.
    pub changes: Vec<Change>,
}

impl ToolDrift {
    /// The A_new name of the A_old parameter `old` (renamed through the change log).
    pub fn new_parameter_name(&self, old: &str) -> String {
        self.changes
            .iter()
            .find_map(|c| match c {
                Change::ParameterRename { from, to } if from == old => Some(to.clone()),
                _ => None,
            })
            .unwrap_or_else(|| old.to_string())
    }

    /// Errors the A_old endpoint reported on an un-migrated call (`loc` `[where, old name]`),
    /// renamed to the A_new parameter names the caller used.
    pub fn errors_in_new_names(&self, errors: Vec<Value>) -> Vec<Value> {
        errors
            .into_iter()
            .map(|mut e| {
                if let Some(name) = e["loc"][1].as_str().map(|n| self.new_parameter_name(n)) {
                    e["loc"][1] = json!(name);
                }
                e
            })
            .collect()
    }
}

fn props(schema: &Value) -> Vec<(String, Value)> {
    schema["properties"]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

fn required(schema: &Value) -> Vec<String> {
    schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

fn single_type(p: &Value) -> Option<&str> {
    p["type"]
        .as_str()
        .filter(|t| matches!(*t, "integer" | "number" | "boolean"))
}

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

/// Draws the change log of one tool (module docs). `rest`: a GET endpoint (no nesting; the path
/// is versioned too).
pub fn plan_tool(spec: &ToolSpec, path: Option<&str>, cfg: &DriftConfig, rng: &mut Rng) -> Vec<Change> {
    let on = |op: &str| cfg.operators.iter().any(|o| o == op);
    let ps = props(&spec.parameters);
    let req = required(&spec.parameters);
    // Which operators are applicable, with the change each would make.
    let mut taken: Vec<String> = Vec::new(); // parameters given a value-level change
    let mut order: Vec<&str> = OPERATORS.to_vec();
    rng.shuffle(&mut order);
    let mut chosen: Vec<Change> = Vec::new();
    let mut fallback: Option<Vec<Change>> = None;
    for op in order {
        if !on(op) {
            continue;
        }
        let changes: Vec<Change> = match op {
            "endpoint_evolution" => vec![Change::EndpointEvolution {
                name_old: spec.name.clone(),
                name_new: format!("{}_v2", spec.name),
                path_old: path.map(String::from),
                path_new: path.map(|p| p.replacen("/v1/", "/v2/", 1)),
            }],
            "type_drift" => {
                let el: Vec<(String, String)> = ps
                    .iter()
                    .filter(|(n, _)| !taken.contains(n))
                    .filter_map(|(n, p)| single_type(p).map(|t| (n.clone(), t.to_string())))
                    .collect();
                pick_some(&el, rng)
                    .into_iter()
                    .map(|(parameter, from)| Change::TypeDrift { parameter, from })
                    .collect()
            }
            "default_flip" => {
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
            "required_swap" => {
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
            "parameter_rename" => {
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
            _ => {
                // nested_object; members named after renaming, applied later
                if path.is_some() {
                    vec![]
                } else {
                    let has = |name: &str| ps.iter().any(|(n, _)| n.as_str() == name);
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
            }
        };
        if changes.is_empty() {
            continue;
        }
        if rng.chance(cfg.rate) {
            for c in &changes {
                if let Change::TypeDrift { parameter, .. }
                | Change::DefaultFlip { parameter, .. }
                | Change::RequiredSwap { parameter, .. } = c
                {
                    taken.push(parameter.clone());
                }
            }
            chosen.extend(changes);
        } else if fallback.is_none() {
            fallback = Some(changes.clone());
        }
    }
    if chosen.is_empty() {
        chosen = fallback.unwrap_or_default();
    }
    // Nest members are named as in A_new.
    let renames: HashMap<String, String> = chosen
        .iter()
        .filter_map(|c| match c {
            Change::ParameterRename { from, to } => Some((from.clone(), to.clone())),
            _ => None,
        })
        .collect();
    for c in &mut chosen {
        if let Change::NestedObject { members, .. } = c {
            for m in members.iter_mut() {
                if let Some(r) = renames.get(m) {
                    *m = r.clone();
                }
            }
        }
    }
    // Canonical order: the order migration applies them.
    chosen.sort_by_key(|c| {
        OPERATORS
            .iter()
            .position(|o| *o == c.operator())
            .map(|i| [2, 1, 0, 0, 0, 3][i])
            .unwrap_or(9)
    });
    chosen
}

/// Each element with probability 1/2, at least one (empty in, empty out).
fn pick_some<T: Clone>(items: &[T], rng: &mut Rng) -> Vec<T> {
    if items.is_empty() {
        return vec![];
    }
    let mut out: Vec<T> = items.iter().filter(|_| rng.chance(0.5)).cloned().collect();
    if out.is_empty() {
        out.push(items[rng.below(items.len())].clone());
    }
    out
}

fn stringify(v: &Value) -> Value {
    match v {
        Value::Bool(b) => json!(b.to_string()),
        Value::Number(n) => json!(n.to_string()),
        other => other.clone(),
    }
}

fn parse_back(v: &Value, from: &str) -> Result<Value, String> {
    let Value::String(s) = v else { return Ok(v.clone()) };
    let t = s.trim();
    let parsed = match from {
        "boolean" => match t.to_ascii_lowercase().as_str() {
            "true" => Some(json!(true)),
            "false" => Some(json!(false)),
            _ => None,
        },
        "integer" => t.parse::<i64>().ok().map(Value::from),
        _ => t
            .parse::<i64>()
            .ok()
            .map(Value::from)
            .or_else(|| t.parse::<f64>().ok().filter(|f| f.is_finite()).map(Value::from)),
    };
    parsed.ok_or_else(|| format!("{s:?} is not a valid {from}"))
}

fn rename_key(map: &Map<String, Value>, from: &str, to: &str) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| (if k == from { to.to_string() } else { k.clone() }, v.clone()))
        .collect()
}

/// A_new of a tool: `changes` applied to A_old (a per-instance spec keeps its enums).
pub fn apply_schema(spec: &ToolSpec, changes: &[Change]) -> ToolSpec {
    let mut new = spec.clone();
    let mut properties: Map<String, Value> = new.parameters["properties"].as_object().cloned().unwrap_or_default();
    let mut req = required(&new.parameters);
    for c in changes {
        match c {
            Change::EndpointEvolution {
                name_new,
                path_old,
                path_new,
                ..
            } => {
                new.name = name_new.clone();
                if let (Some(a), Some(b)) = (path_old, path_new) {
                    new.description = new.description.replace(a.as_str(), b);
                }
            }
            Change::TypeDrift { parameter, from } => {
                if let Some(p) = properties.get_mut(parameter) {
                    p["type"] = json!("string");
                    if let Some(d) = p.get("default").cloned() {
                        p["default"] = stringify(&d);
                    }
                    let desc = p["description"].as_str().unwrap_or_default().to_string();
                    p["description"] = json!(format!("{desc} (a {from} written as a string)").trim().to_string());
                }
            }
            Change::DefaultFlip { parameter, new: d, .. } => {
                if let Some(p) = properties.get_mut(parameter) {
                    p["default"] = d.clone();
                }
            }
            Change::RequiredSwap {
                parameter,
                now_required,
                ..
            } => {
                if *now_required {
                    if !req.contains(parameter) {
                        req.push(parameter.clone());
                    }
                } else {
                    req.retain(|r| r != parameter);
                }
            }
            Change::ParameterRename { from, to } => {
                properties = rename_key(&properties, from, to);
                for r in req.iter_mut() {
                    if *r == *from {
                        *r = to.clone();
                    }
                }
            }
            Change::NestedObject { group, members } => {
                let (mut out, inner) = split_group(&properties, group, members);
                let inner_req: Vec<String> = members.iter().filter(|m| req.contains(m)).cloned().collect();
                let any_req = !inner_req.is_empty();
                req.retain(|r| !members.contains(r));
                if any_req {
                    req.push(group.clone());
                }
                out.insert(
                    group.clone(),
                    json!({"type": "object", "description": format!("Grouped parameters: {}.", members.join(", ")), "properties": inner, "required": inner_req, "additionalProperties": false}),
                );
                properties = out;
            }
        }
    }
    new.parameters =
        json!({"type": "object", "properties": properties, "required": req, "additionalProperties": false});
    new
}

/// A gold call migrated from A_old to A_new, and whether the old call is invalid under A_new.
#[derive(Debug, Clone, PartialEq)]
pub struct Migrated {
    /// The A_new call.
    pub call: Call,
    /// Whether a loud change (module docs) touched this call, so the old call fails A_new.
    pub loud: bool,
}

/// Rewrites an A_old call into A_new (the migration table in the module docs).
pub fn migrate(call: &Call, changes: &[Change]) -> Migrated {
    let mut args = call.arguments.clone();
    let mut name = call.name.clone();
    let mut loud = false;
    for c in changes {
        match c {
            Change::TypeDrift { parameter, .. } => {
                if let Some(v) = args.get_mut(parameter).filter(|v| !v.is_null() && !v.is_string()) {
                    *v = stringify(v);
                    loud = true;
                }
            }
            Change::DefaultFlip { parameter, old, .. } => {
                if !args.contains_key(parameter) {
                    args.insert(parameter.clone(), old.clone());
                }
            }
            Change::RequiredSwap {
                parameter,
                now_required: true,
                default: Some(d),
            } => {
                if !args.contains_key(parameter) {
                    args.insert(parameter.clone(), d.clone());
                    loud = true;
                }
            }
            Change::RequiredSwap { .. } => {}
            Change::ParameterRename { from, to } => {
                if args.contains_key(from) {
                    args = rename_key(&args, from, to);
                    loud = true;
                }
            }
            Change::NestedObject { group, members } => {
                let (mut out, inner) = split_group(&args, group, members);
                if !inner.is_empty() {
                    out.insert(group.clone(), Value::Object(inner));
                    loud = true;
                }
                args = out;
            }
            Change::EndpointEvolution { name_new, .. } => {
                name = name_new.clone();
                loud = true;
            }
        }
    }
    Migrated {
        call: Call {
            name,
            arguments: args,
            label: call.label.clone(),
        },
        loud,
    }
}

/// Rewrites an A_new call back into the A_old call the executor runs (the inverse of
/// [`migrate`]; an omitted flipped default takes its A_new value). Errors: a nested group that
/// is not an object, or a drifted value that does not parse as its A_old type.
pub fn unmigrate(call: &Call, changes: &[Change]) -> Result<Call, String> {
    let mut args = call.arguments.clone();
    let mut name = call.name.clone();
    for c in changes.iter().rev() {
        match c {
            Change::EndpointEvolution { name_old, .. } => name = name_old.clone(),
            Change::NestedObject { group, .. } => {
                if let Some(v) = args.get(group).cloned() {
                    let Value::Object(inner) = v else {
                        return Err(format!("argument `{group}` must be an object"));
                    };
                    let mut out = Map::new();
                    for (k, v) in &args {
                        if k == group {
                            for (ik, iv) in &inner {
                                out.insert(ik.clone(), iv.clone());
                            }
                        } else {
                            out.insert(k.clone(), v.clone());
                        }
                    }
                    args = out;
                }
            }
            Change::ParameterRename { from, to } => {
                if args.contains_key(to) {
                    args = rename_key(&args, to, from);
                }
            }
            Change::DefaultFlip { parameter, new, .. } => {
                if !args.contains_key(parameter) {
                    args.insert(parameter.clone(), new.clone());
                }
            }
            Change::RequiredSwap { .. } => {}
            Change::TypeDrift { parameter, from } => {
                if let Some(v) = args.get(parameter) {
                    let back = parse_back(v, from).map_err(|e| format!("argument `{parameter}`: {e}"))?;
                    args.insert(parameter.clone(), back);
                }
            }
        }
    }
    Ok(Call {
        name,
        arguments: args,
        label: call.label.clone(),
    })
}

fn schema_at<'s>(schema: &'s Value, path: &[String]) -> &'s Value {
    let mut s = schema;
    for seg in path {
        s = &s["properties"][seg];
    }
    s
}

fn type_message(t: &str) -> (&'static str, &'static str) {
    match t {
        "string" => ("string_type", "Input should be a valid string"),
        "integer" => ("int_type", "Input should be a valid integer"),
        "number" => ("float_type", "Input should be a valid number"),
        "boolean" => ("bool_type", "Input should be a valid boolean"),
        "object" => ("dict_type", "Input should be a valid dictionary"),
        "array" => ("list_type", "Input should be a valid list"),
        _ => ("type_error", "Input has the wrong type"),
    }
}

/// Validates `args` against a JSON Schema with the `jsonschema` crate and reports every error in
/// FastAPI's shape: `{"type", "loc": [loc0, field…], "msg", "input"}` (`missing`,
/// `extra_forbidden`, `<type>_type`, `enum`, else `value_error`). `loc0` is `body` or `query`.
/// An invalid schema is one `value_error` entry (never expected: A_new schemas are generated).
pub fn fastapi_errors(schema: &Value, args: &Map<String, Value>, loc0: &str) -> Vec<Value> {
    let validator = match jsonschema::validator_for(schema) {
        Ok(v) => v,
        Err(e) => {
            return vec![
                json!({"type": "value_error", "loc": [loc0], "msg": format!("invalid schema: {e}"), "input": null}),
            ];
        }
    };
    let instance = Value::Object(args.clone());
    let mut out = Vec::new();
    for e in validator.iter_errors(&instance) {
        let path: Vec<String> = e
            .instance_path()
            .as_str()
            .split('/')
            .skip(1)
            .map(|s| s.replace("~1", "/").replace("~0", "~"))
            .collect();
        let inst: &Value = e.instance();
        let mut loc: Vec<Value> = vec![json!(loc0)];
        loc.extend(path.iter().map(|p| json!(p)));
        match e.kind() {
            jsonschema::error::ValidationErrorKind::Required { property } => {
                loc.push(property.clone());
                out.push(json!({"type": "missing", "loc": loc, "msg": "Field required", "input": null}));
            }
            jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
                for u in unexpected {
                    let mut l = loc.clone();
                    l.push(json!(u));
                    out.push(json!({"type": "extra_forbidden", "loc": l, "msg": "Extra inputs are not permitted", "input": inst[u.as_str()]}));
                }
            }
            jsonschema::error::ValidationErrorKind::Type { .. } => {
                let t = schema_at(schema, &path)["type"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let (ty, msg) = type_message(&t);
                out.push(json!({"type": ty, "loc": loc, "msg": msg, "input": inst}));
            }
            jsonschema::error::ValidationErrorKind::Enum { options } => {
                let opts: Vec<String> = options
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|o| format!("'{}'", o.as_str().unwrap_or_default()))
                            .collect()
                    })
                    .unwrap_or_default();
                let msg = match opts.split_last() {
                    Some((last, rest)) if !rest.is_empty() => format!("Input should be {} or {last}", rest.join(", ")),
                    _ => format!("Input should be {}", opts.join("")),
                };
                out.push(json!({"type": "enum", "loc": loc, "msg": msg, "input": inst}));
            }
            _ => out.push(json!({"type": "value_error", "loc": loc, "msg": e.to_string(), "input": inst})),
        }
    }
    out
}

/// The drift of a whole dataset: `tools/drift.json`, and what `toolforge serve` enforces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    /// Dataset format (`slot`, `sel`, `rest`).
    pub format: String,
    /// The seed the drift was drawn with.
    pub seed: u64,
    /// Every drifted tool of the dataset catalog (REST: every endpoint, with its database).
    pub tools: Vec<ToolDrift>,
}

impl Drift {
    /// Draws the drift of every catalog tool (SLOT/SEL: `build.catalog`; REST: the endpoints of
    /// `tools/endpoints.json`), one seeded stream per tool (seed, `drift`, db, name).
    pub fn plan(build: &Build, cfg: &DriftConfig, seed: u64) -> Drift {
        let format = build.recipe.format.clone();
        let mut tools = Vec::new();
        if format == "rest" {
            let endpoints: Vec<Endpoint> = build
                .extra_files
                .get("tools/endpoints.json")
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or_default();
            for ep in endpoints {
                let spec = ep.tool_spec();
                let mut rng = Rng::new(seed, &["drift", &ep.db_id, &ep.name]);
                let changes = plan_tool(&spec, Some(ep.path.as_str()), cfg, &mut rng);
                if changes.is_empty() {
                    continue;
                }
                let path_new = changes.iter().find_map(|c| match c {
                    Change::EndpointEvolution { path_new, .. } => path_new.clone(),
                    _ => None,
                });
                tools.push(ToolDrift {
                    db_id: Some(ep.db_id.clone()),
                    path_new: Some(path_new.unwrap_or_else(|| ep.path.clone())),
                    path_old: Some(ep.path.clone()),
                    new: apply_schema(&spec, &changes),
                    old: spec,
                    changes,
                });
            }
        } else {
            for spec in &build.catalog {
                let mut rng = Rng::new(seed, &["drift", &spec.name]);
                let changes = plan_tool(spec, None, cfg, &mut rng);
                if changes.is_empty() {
                    continue;
                }
                tools.push(ToolDrift {
                    db_id: None,
                    path_old: None,
                    path_new: None,
                    new: apply_schema(spec, &changes),
                    old: spec.clone(),
                    changes,
                });
            }
        }
        Drift { format, seed, tools }
    }

    /// The `tools/drift.json` document.
    pub fn document(&self) -> Value {
        serde_json::to_value(self).expect("serialisable")
    }

    /// Tools changed per operator.
    pub fn operator_counts(&self) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for t in &self.tools {
            let mut ops: Vec<&str> = t.changes.iter().map(Change::operator).collect();
            ops.dedup();
            for o in ops {
                *out.entry(o).or_insert(0) += 1;
            }
        }
        out
    }

    /// The drift of the A_old tool `name` (REST: of database `db`).
    pub fn by_old_name(&self, db: Option<&str>, name: &str) -> Option<&ToolDrift> {
        self.tools
            .iter()
            .find(|t| t.old.name == name && (self.format != "rest" || t.db_id.as_deref() == db))
    }

    /// The drift of the A_new tool `name` (REST: of database `db`).
    pub fn by_new_name(&self, db: Option<&str>, name: &str) -> Option<&ToolDrift> {
        self.tools
            .iter()
            .find(|t| t.new.name == name && (self.format != "rest" || t.db_id.as_deref() == db))
    }

    /// The drift variant of `e`: `tools` = A_old (the parent's), `output` = every call migrated,
    /// `meta.variant` = {`tools_new`: the instance's A_new specs, `changes`: change log per
    /// drifted tool of the toolkit, `loud_calls`: indexes of calls an A_new validator rejects in
    /// their old form}. `None` when no call changed.
    pub fn variant(&self, e: &Example) -> Option<Example> {
        let db = e.db_id.as_deref();
        let mut changes_log = Map::new();
        let tools_new: Vec<ToolSpec> = e
            .tools
            .iter()
            .map(|t| match self.by_old_name(db, &t.name) {
                Some(d) => {
                    changes_log.insert(t.name.clone(), json!(d.changes));
                    apply_schema(t, &d.changes)
                }
                None => t.clone(),
            })
            .collect();
        let mut output = Vec::new();
        let mut loud = Vec::new();
        let mut changed = false;
        for (i, c) in e.output.iter().enumerate() {
            match self.by_old_name(db, &c.name) {
                Some(d) => {
                    let m = migrate(c, &d.changes);
                    changed |= m.call != *c;
                    if m.loud {
                        loud.push(i);
                    }
                    output.push(m.call);
                }
                None => output.push(c.clone()),
            }
        }
        if !changed {
            return None;
        }
        let mut row = variant_row(
            e,
            "drift",
            "drift",
            json!({"tools_new": tools_new, "changes": changes_log, "loud_calls": loud}),
        );
        row.output = output;
        Some(row)
    }

    /// `POST /tools/{name}` under A_new (SLOT/SEL). `Ok(Some(call))`: the arguments validate
    /// against A_new; the A_old call to execute. `Ok(None)`: the tool is not drifted (run as is).
    /// `Err(None)`: `name` is an A_old name that no longer exists (404). `Err(Some(detail))`:
    /// FastAPI's 422 `detail` list, `loc` `["body", field…]`.
    pub fn check_body(
        &self,
        name: &str,
        args: &Map<String, Value>,
        label: &str,
    ) -> Result<Option<Call>, Option<Vec<Value>>> {
        let Some(d) = self.by_new_name(None, name) else {
            return if self.tools.iter().any(|t| t.old.name == name && t.new.name != name) {
                Err(None)
            } else {
                Ok(None)
            };
        };
        let errors = fastapi_errors(&d.new.parameters, args, "body");
        if !errors.is_empty() {
            return Err(Some(errors));
        }
        let call = Call {
            name: name.into(),
            arguments: args.clone(),
            label: label.into(),
        };
        unmigrate(&call, &d.changes).map(Some).map_err(|m| {
            Some(vec![
                json!({"type": "value_error", "loc": ["body"], "msg": m, "input": Value::Object(args.clone())}),
            ])
        })
    }

    /// A REST GET under A_new: the query pairs of the drifted endpoint `d` typed by A_new
    /// (integer / number parsed as FastAPI does; unknown names ignored, as FastAPI does), validated
    /// with `jsonschema`, then un-migrated. Returns the A_old arguments, or the 422 `detail` list
    /// (`loc` `["query", field]`).
    pub fn check_query(d: &ToolDrift, pairs: &[(String, String)]) -> Result<Map<String, Value>, Vec<Value>> {
        let mut args = Map::new();
        let mut errors = Vec::new();
        for (name, p) in props(&d.new.parameters) {
            let Some(raw) = pairs.iter().rev().find(|(k, _)| *k == name).map(|(_, v)| v) else {
                continue;
            };
            let t = p["type"].as_str().unwrap_or("string");
            let v = match t {
                "integer" => raw.trim().parse::<i64>().ok().map(Value::from),
                "number" => raw
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .map(Value::from),
                _ => Some(json!(raw)),
            };
            match v {
                Some(v) => {
                    args.insert(name, v);
                }
                None => {
                    let (ty, msg) = if t == "integer" {
                        (
                            "int_parsing",
                            "Input should be a valid integer, unable to parse string as an integer",
                        )
                    } else {
                        (
                            "float_parsing",
                            "Input should be a valid number, unable to parse string as a number",
                        )
                    };
                    errors.push(json!({"type": ty, "loc": ["query", name], "msg": msg, "input": raw}));
                }
            }
        }
        errors.extend(
            fastapi_errors(&d.new.parameters, &args, "query")
                .into_iter()
                .filter(|e| e["type"] != "int_type" && e["type"] != "float_type"),
        );
        if !errors.is_empty() {
            return Err(errors);
        }
        let call = Call {
            name: d.new.name.clone(),
            arguments: args.clone(),
            label: String::new(),
        };
        unmigrate(&call, &d.changes)
            .map(|c| c.arguments)
            .map_err(|m| vec![json!({"type": "value_error", "loc": ["query"], "msg": m, "input": Value::Object(args)})])
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ToolSpec {
        ToolSpec {
            name: "retrieve_data".into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {
                "data_source": {"type": "string"},
                "key_name": {"type": "string", "enum": ["a", "b"]},
                "distinct": {"type": "boolean", "default": false},
                "limit": {"type": "integer", "default": -1},
            }, "required": ["data_source", "key_name"]}),
            output_parameters: json!({}),
        }
    }

    fn call(args: Value) -> Call {
        Call {
            name: "retrieve_data".into(),
            arguments: args.as_object().unwrap().clone(),
            label: "L".into(),
        }
    }

    fn roundtrip(changes: &[Change], args: Value) -> (Migrated, Vec<Value>, Vec<Value>) {
        let new = apply_schema(&spec(), changes);
        let old = call(args);
        let m = migrate(&old, changes);
        let ok = fastapi_errors(&new.parameters, &m.call.arguments, "body");
        let bad = fastapi_errors(&new.parameters, &old.arguments, "body");
        let back = unmigrate(&m.call, changes).unwrap();
        // Un-migration gives back the old call (explicit defaults aside).
        for (k, v) in &old.arguments {
            assert_eq!(back.arguments.get(k), Some(v), "{k}");
        }
        assert_eq!(back.name, old.name);
        (m, ok, bad)
    }

    #[test]
    fn endpoint_evolution_renames_the_function_and_path() {
        let c = Change::EndpointEvolution {
            name_old: "retrieve_data".into(),
            name_new: "retrieve_data_v2".into(),
            path_old: None,
            path_new: None,
        };
        let (m, ok, _) = roundtrip(&[c], json!({"data_source": "$t$", "key_name": "a"}));
        assert_eq!(m.call.name, "retrieve_data_v2");
        assert!(ok.is_empty() && m.loud);
        let mut rest = spec();
        rest.description = "x (GET /v1/s/db/t/r)".into();
        let c = Change::EndpointEvolution {
            name_old: "f".into(),
            name_new: "f_v2".into(),
            path_old: Some("/v1/s/db/t/r".into()),
            path_new: Some("/v2/s/db/t/r".into()),
        };
        assert_eq!(apply_schema(&rest, &[c]).description, "x (GET /v2/s/db/t/r)");
    }

    #[test]
    fn rename_moves_the_key_and_old_name_is_extra_forbidden() {
        let c = Change::ParameterRename {
            from: "key_name".into(),
            to: "column".into(),
        };
        let (m, ok, bad) = roundtrip(&[c], json!({"data_source": "$t$", "key_name": "a"}));
        assert_eq!(m.call.arguments["column"], "a");
        assert!(ok.is_empty());
        assert!(
            bad.contains(
                &json!({"type": "missing", "loc": ["body", "column"], "msg": "Field required", "input": null})
            ),
            "{bad:?}"
        );
        assert!(
            bad.iter()
                .any(|e| e["type"] == "extra_forbidden" && e["loc"] == json!(["body", "key_name"]))
        );
        assert_eq!(renamed("country_name"), Some("nation_title".into()));
        assert_eq!(renamed("zz_top"), Some("zzTop".into()));
        assert_eq!(renamed("zz"), None);
    }

    #[test]
    fn type_drift_writes_values_as_text() {
        let c = Change::TypeDrift {
            parameter: "limit".into(),
            from: "integer".into(),
        };
        let (m, ok, bad) = roundtrip(&[c.clone()], json!({"data_source": "$t$", "key_name": "a", "limit": 3}));
        assert_eq!(m.call.arguments["limit"], "3");
        assert!(ok.is_empty());
        assert_eq!(bad[0]["type"], "string_type");
        assert_eq!(bad[0]["loc"], json!(["body", "limit"]));
        assert_eq!(
            apply_schema(&spec(), &[c.clone()]).parameters["properties"]["limit"]["default"],
            "-1"
        );
        let bad_text = call(json!({"data_source": "$t$", "key_name": "a", "limit": "x"}));
        assert!(unmigrate(&bad_text, &[c]).is_err());
    }

    #[test]
    fn required_swaps_both_ways() {
        let c = Change::RequiredSwap {
            parameter: "limit".into(),
            now_required: true,
            default: Some(json!(-1)),
        };
        let (m, ok, bad) = roundtrip(&[c], json!({"data_source": "$t$", "key_name": "a"}));
        assert_eq!(m.call.arguments["limit"], -1);
        assert!(ok.is_empty() && m.loud);
        assert_eq!(bad[0]["loc"], json!(["body", "limit"]));
        let c = Change::RequiredSwap {
            parameter: "key_name".into(),
            now_required: false,
            default: None,
        };
        let new = apply_schema(&spec(), &[c.clone()]);
        assert_eq!(new.parameters["required"], json!(["data_source"]));
        let (m, _, bad) = roundtrip(&[c], json!({"data_source": "$t$", "key_name": "a"}));
        assert!(!m.loud && bad.is_empty());
    }

    #[test]
    fn default_flip_makes_the_old_default_explicit() {
        let c = Change::DefaultFlip {
            parameter: "distinct".into(),
            old: json!(false),
            new: json!(true),
        };
        let (m, ok, bad) = roundtrip(&[c.clone()], json!({"data_source": "$t$", "key_name": "a"}));
        assert_eq!(m.call.arguments["distinct"], false);
        assert!(ok.is_empty() && bad.is_empty() && !m.loud);
        // An A_new call that omits it means the new default.
        let back = unmigrate(&call(json!({"data_source": "$t$", "key_name": "a"})), &[c]).unwrap();
        assert_eq!(back.arguments["distinct"], true);
    }

    #[test]
    fn nesting_groups_members_after_renaming() {
        let changes = vec![
            Change::ParameterRename {
                from: "limit".into(),
                to: "max_results".into(),
            },
            Change::NestedObject {
                group: "options".into(),
                members: vec!["distinct".into(), "max_results".into()],
            },
        ];
        let (m, ok, bad) = roundtrip(
            &changes,
            json!({"data_source": "$t$", "key_name": "a", "distinct": true, "limit": 2}),
        );
        assert_eq!(m.call.arguments["options"], json!({"distinct": true, "max_results": 2}));
        assert!(ok.is_empty(), "{ok:?}");
        assert!(bad.iter().any(|e| e["loc"] == json!(["body", "distinct"])));
        let wrong = fastapi_errors(
            &apply_schema(&spec(), &changes).parameters,
            &json!({"data_source": "$t$", "key_name": "c", "options": {"distinct": 1}})
                .as_object()
                .unwrap()
                .clone(),
            "body",
        );
        assert!(
            wrong
                .iter()
                .any(|e| e["type"] == "enum" && e["loc"] == json!(["body", "key_name"])),
            "{wrong:?}"
        );
        assert!(
            wrong
                .iter()
                .any(|e| e["type"] == "bool_type" && e["loc"] == json!(["body", "options", "distinct"])),
            "{wrong:?}"
        );
    }

    #[test]
    fn served_drift_enforces_a_new() {
        let changes = vec![
            Change::TypeDrift {
                parameter: "limit".into(),
                from: "integer".into(),
            },
            Change::ParameterRename {
                from: "key_name".into(),
                to: "column".into(),
            },
        ];
        let mut renamed_away = spec();
        renamed_away.name = "sort_data".into();
        let gone = vec![Change::EndpointEvolution {
            name_old: "sort_data".into(),
            name_new: "sort_data_v2".into(),
            path_old: None,
            path_new: None,
        }];
        let drift = Drift {
            format: "slot".into(),
            seed: 0,
            tools: vec![
                ToolDrift {
                    db_id: None,
                    path_old: None,
                    path_new: None,
                    new: apply_schema(&spec(), &changes),
                    old: spec(),
                    changes,
                },
                ToolDrift {
                    db_id: None,
                    path_old: None,
                    path_new: None,
                    new: apply_schema(&renamed_away, &gone),
                    old: renamed_away,
                    changes: gone,
                },
            ],
        };
        let args = |v: Value| v.as_object().unwrap().clone();
        let err = drift
            .check_body(
                "retrieve_data",
                &args(json!({"data_source": "$t$", "key_name": "a", "limit": 2})),
                "L",
            )
            .unwrap_err()
            .unwrap();
        assert!(
            err.contains(
                &json!({"type": "missing", "loc": ["body", "column"], "msg": "Field required", "input": null})
            ),
            "{err:?}"
        );
        assert!(err.contains(&json!({"type": "string_type", "loc": ["body", "limit"], "msg": "Input should be a valid string", "input": 2})), "{err:?}");
        let ok = drift
            .check_body(
                "retrieve_data",
                &args(json!({"data_source": "$t$", "column": "a", "limit": "2"})),
                "L",
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            ok.arguments,
            args(json!({"data_source": "$t$", "key_name": "a", "limit": 2}))
        );
        assert_eq!(drift.check_body("sort_data", &args(json!({})), "L"), Err(None));
        assert_eq!(drift.check_body("group_data_by", &args(json!({})), "L"), Ok(None));
        let q = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect::<Vec<_>>()
        };
        let d = &drift.tools[0];
        let err = Drift::check_query(d, &q(&[("data_source", "$t$"), ("key_name", "a")])).unwrap_err();
        assert_eq!(
            err,
            vec![json!({"type": "missing", "loc": ["query", "column"], "msg": "Field required", "input": null})]
        );
        let ok = Drift::check_query(d, &q(&[("data_source", "$t$"), ("column", "a"), ("limit", "5")])).unwrap();
        assert_eq!(ok["limit"], 5);
        assert_eq!(
            d.errors_in_new_names(vec![json!({"loc": ["query", "key_name"]})]),
            vec![json!({"loc": ["query", "column"]})]
        );
    }

    #[test]
    fn plans_are_seeded_and_canonically_ordered() {
        let cfg = DriftConfig {
            operators: OPERATORS.iter().map(|s| s.to_string()).collect(),
            rate: 0.5,
        };
        let a = plan_tool(&spec(), None, &cfg, &mut Rng::new(1, &["x"]));
        let b = plan_tool(&spec(), None, &cfg, &mut Rng::new(1, &["x"]));
        assert_eq!(a, b);
        assert!(!a.is_empty());
        let new = apply_schema(&spec(), &a);
        assert!(jsonschema::validator_for(&new.parameters).is_ok());
        let one = DriftConfig {
            operators: vec!["nested_object".into()],
            rate: 0.0,
        };
        assert!(plan_tool(&spec(), Some("/v1/x"), &one, &mut Rng::new(1, &["x"])).is_empty());
    }
}
