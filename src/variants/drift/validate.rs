//! The A_new validator `toolforge serve` enforces under drift: [`fastapi_errors`] (JSON Schema
//! validation with the `jsonschema` crate, errors in FastAPI's 422 shape), [`Drift::check_body`]
//! (`POST /tools/{name}`), [`Drift::check_query`] (a REST GET) and [`Drift::check_json`] (a
//! REST POST after verb evolution), each un-migrating a valid A_new call into the A_old call to
//! run.

use serde_json::{Map, Value, json};

use super::{Drift, ToolDrift, props, unmigrate};
use crate::tools::Call;

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
            jsonschema::error::ValidationErrorKind::Pattern { pattern } => out.push(json!({
                "type": "string_pattern_mismatch", "loc": loc,
                "msg": format!("String should match pattern '{pattern}'"), "input": inst,
                "ctx": {"pattern": pattern},
            })),
            _ => out.push(json!({"type": "value_error", "loc": loc, "msg": e.to_string(), "input": inst})),
        }
    }
    out
}

impl Drift {
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

    /// A REST `POST` under A_new (verb evolution, [`ToolDrift::is_post`]): the JSON body of the
    /// drifted endpoint `d` validated against A_new with `jsonschema` (`loc` `["body", field…]`,
    /// nested members included), then un-migrated. Returns the A_old arguments, or the 422
    /// `detail` list.
    pub fn check_json(d: &ToolDrift, body: &Map<String, Value>) -> Result<Map<String, Value>, Vec<Value>> {
        let errors = fastapi_errors(&d.new.parameters, body, "body");
        if !errors.is_empty() {
            return Err(errors);
        }
        let call = Call {
            name: d.new.name.clone(),
            arguments: body.clone(),
            label: String::new(),
        };
        unmigrate(&call, &d.changes).map(|c| c.arguments).map_err(|m| {
            vec![json!({"type": "value_error", "loc": ["body"], "msg": m, "input": Value::Object(body.clone())})]
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
                "integer" => crate::tools::lax::int(raw),
                "number" => crate::tools::lax::float(raw).map(Value::from),
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
