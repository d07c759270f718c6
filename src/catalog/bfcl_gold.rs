//! BFCL gold: choosing one call from BFCL's acceptable-value lists, and linting those lists
//! against the function schemas (BFCL `possible_answer/` semantics, `ast_checker.py` in
//! `ShishirPatil/gorilla` `berkeley-function-call-leaderboard/bfcl_eval/eval_checker/ast_eval`).
//!
//! A gold call is `{<function>: {<param>: [acceptable values]}}`; a nested `dict` value is itself
//! `{<key>: [acceptable values]}` (also inside lists). `""` and `null` among the acceptable
//! values both mean "may be omitted" (BFCL writes optional parameters either way, e.g.
//! `"filterName": ["", null]`).
//!
//! Chosen call ([`choose`]): per parameter the first acceptable value that is neither `""` nor
//! `null`; the parameter is omitted when it is optional (not `required`) and omission is
//! acceptable; nested dicts the same way.
//!
//! Lint kinds ([`Finding::kind`]), checked over *every* acceptable value except the omission
//! markers, after BFCL's coercions (an integer is acceptable for `float`; a list for `tuple`;
//! anything for `any`): `unknown_parameter` (a gold parameter the schema lacks and that may not
//! be omitted), `missing_required` (a required parameter absent from
//! the gold), `required_may_be_omitted` (`""`/`null` acceptable for a required parameter),
//! `enum_violation`, `type_mismatch`, `malformed_gold` (an acceptable-value list that is not a
//! non-empty list, or a bare value inside a dict gold, which BFCL's `dict_checker` iterates — a
//! string as its characters — so no call passes); the converter adds `unknown_function`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// One lint finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// BFCL question id.
    pub id: String,
    /// Kind (see the module doc).
    pub kind: String,
    /// Function as named in the gold.
    pub function: String,
    /// Parameter path (`a`, `a.b`, `a[1]`; `""` for the function itself).
    pub parameter: String,
    /// Detail: the offending value and the schema's expectation.
    pub detail: String,
}

fn type_ok(v: &Value, ty: &str) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        // BFCL: an int is acceptable for a float parameter
        "number" => v.is_number(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// Whether an acceptable value means "may be omitted" (`""` or `null`).
pub fn is_omit(v: &Value) -> bool {
    v.is_null() || v.as_str() == Some("")
}

/// The `required` names of an object schema.
pub fn required_of(schema: &Value) -> Vec<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Lints one gold parameter map against an object schema (`path` prefixes parameter names);
/// `f(kind, parameter, detail)` receives each finding.
pub fn lint_object(args: &Map<String, Value>, schema: &Value, path: &str, f: &mut dyn FnMut(&str, String, String)) {
    let props = schema.get("properties").and_then(Value::as_object);
    let required = required_of(schema);
    let join = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    for (k, acceptable) in args {
        let p = join(k);
        let Some(prop) = props.and_then(|ps| ps.get(k)) else {
            // a parameter the schema lacks is harmless when the gold lets it be omitted (the
            // chosen call omits it, as BFCL expects a model to)
            let omittable = acceptable.as_array().is_some_and(|l| l.iter().any(is_omit));
            if (props.is_some() || path.is_empty()) && !omittable {
                f(
                    "unknown_parameter",
                    p,
                    format!("not a parameter of the schema (gold {acceptable})"),
                );
            }
            continue;
        };
        let Some(list) = acceptable.as_array().filter(|l| !l.is_empty()) else {
            f(
                "malformed_gold",
                p,
                format!("acceptable values {acceptable} are not a non-empty list"),
            );
            continue;
        };
        if list.iter().any(is_omit) && required.contains(&k.as_str()) {
            f(
                "required_may_be_omitted",
                p.clone(),
                "\"\" or null (omit) is acceptable for a required parameter".into(),
            );
        }
        for v in list.iter().filter(|v| !is_omit(v)) {
            lint_value(v, prop, &p, f);
        }
    }
    for r in required {
        if !args.contains_key(r) {
            f(
                "missing_required",
                join(r),
                "required parameter absent from the gold".into(),
            );
        }
    }
}

fn lint_value(v: &Value, schema: &Value, path: &str, f: &mut dyn FnMut(&str, String, String)) {
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("any");
    if !type_ok(v, ty) {
        f("type_mismatch", path.into(), format!("{v} is not {ty}"));
        return;
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        f(
            "enum_violation",
            path.into(),
            format!("{v} not in {}", Value::Array(e.clone())),
        );
    }
    match v {
        Value::Object(m) if ty == "object" => {
            // nested dict gold: {key: [acceptable]}; a bare value is checked as the only one, and
            // is malformed: BFCL's `dict_checker` iterates it (a string as its characters)
            for (k, x) in m.iter().filter(|(_, x)| !x.is_array()) {
                f(
                    "malformed_gold",
                    format!("{path}.{k}"),
                    format!(
                        "bare value {x} in a dict gold, not a list of acceptable values: BFCL's dict_checker iterates it"
                    ),
                );
            }
            let wrapped: Map<String, Value> = m
                .iter()
                .map(|(k, x)| (k.clone(), if x.is_array() { x.clone() } else { json!([x]) }))
                .collect();
            lint_object(&wrapped, schema, path, f);
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, x) in items.iter().enumerate() {
                    lint_value(x, item_schema, &format!("{path}[{i}]"), f);
                }
            }
        }
        _ => {}
    }
}

/// The chosen value of an acceptable list (see the module doc): `None` = omit. Dicts, also
/// inside lists, hold acceptable lists per key and are chosen recursively.
pub fn choose(list: &Value, schema: &Value, required: bool) -> Option<Value> {
    let Value::Array(list) = list else {
        return Some(list.clone());
    };
    if list.iter().any(is_omit) && !required {
        return None;
    }
    let v = list.iter().find(|v| !is_omit(v))?;
    Some(choose_nested(v, schema))
}

fn choose_nested(v: &Value, schema: &Value) -> Value {
    match v {
        Value::Object(m) if schema.get("type").and_then(Value::as_str) == Some("object") => {
            let req = required_of(schema);
            let mut out = Map::new();
            for (k, x) in m {
                let sub = schema.get("properties").and_then(|p| p.get(k)).unwrap_or(&Value::Null);
                let list = if x.is_array() { x.clone() } else { json!([x]) };
                if let Some(c) = choose(&list, sub, req.contains(&k.as_str())) {
                    out.insert(k.clone(), c);
                }
            }
            Value::Object(out)
        }
        // BFCL nests the acceptable-list format in dicts inside lists too (`list_dict_checker`)
        Value::Array(xs) if schema.get("items").is_some() => {
            Value::Array(xs.iter().map(|x| choose_nested(x, &schema["items"])).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::schema;

    fn lint(args: Value, schema: Value) -> Vec<(String, String)> {
        let mut s = schema;
        schema::normalise(&mut s);
        let mut out = Vec::new();
        lint_object(args.as_object().unwrap(), &s, "", &mut |k, p, _| {
            out.push((k.to_string(), p))
        });
        out
    }

    fn pair(k: &str, p: &str) -> (String, String) {
        (k.into(), p.into())
    }

    #[test]
    fn each_lint_kind() {
        let s = json!({"type": "dict", "properties": {
            "n": {"type": "integer"}, "x": {"type": "float"}, "u": {"type": "string", "enum": ["c", "f"]},
            "d": {"type": "dict", "properties": {"k": {"type": "string"}}}, "l": {"type": "array", "items": {"type": "string"}}},
            "required": ["n", "u"]});
        // int for float is fine (BFCL coercion); "" on an optional parameter is fine
        assert!(lint(json!({"n": [1], "x": [2, 2.5, ""], "u": ["c"]}), s.clone()).is_empty());
        assert_eq!(
            lint(json!({"n": [1], "u": ["c"], "zz": [1]}), s.clone()),
            [pair("unknown_parameter", "zz")]
        );
        // ... unless the gold lets it be omitted (BFCL parallel_multiple_12 `permeability: ["", 0.1]`)
        assert!(lint(json!({"n": [1], "u": ["c"], "zz": ["", 1]}), s.clone()).is_empty());
        assert_eq!(lint(json!({"u": ["c"]}), s.clone()), [pair("missing_required", "n")]);
        assert_eq!(
            lint(json!({"n": [1, ""], "u": ["c"]}), s.clone()),
            [pair("required_may_be_omitted", "n")]
        );
        assert_eq!(
            lint(json!({"n": [1], "u": ["kelvin"]}), s.clone()),
            [pair("enum_violation", "u")]
        );
        assert_eq!(
            lint(json!({"n": [1.5], "u": ["c"]}), s.clone()),
            [pair("type_mismatch", "n")]
        );
        assert_eq!(
            lint(json!({"n": [1], "u": ["c"], "l": [["a", 3]]}), s.clone()),
            [pair("type_mismatch", "l[1]")]
        );
        assert_eq!(
            lint(json!({"n": [1], "u": ["c"], "d": [{"k": [5], "q": ["x"]}]}), s.clone()),
            [pair("type_mismatch", "d.k"), pair("unknown_parameter", "d.q")]
        );
        assert_eq!(lint(json!({"n": 1, "u": ["c"]}), s), [pair("malformed_gold", "n")]);
    }

    /// Issue 15: BFCL writes "may be omitted" as `null` too (374 of 402 findings on
    /// live_simple + live_multiple were `null` counted as a type mismatch).
    #[test]
    fn null_means_may_be_omitted() {
        let s = json!({"type": "dict", "properties": {"botId": {"type": "string"}, "filterName": {"type": "string"},
            "maxResults": {"type": "integer"}}, "required": ["botId"]});
        assert!(
            lint(
                json!({"botId": ["b"], "filterName": ["", null], "maxResults": [null, 50]}),
                s.clone()
            )
            .is_empty()
        );
        assert_eq!(
            lint(json!({"botId": [null, "b"]}), s.clone()),
            [pair("required_may_be_omitted", "botId")]
        );
        let mut n = s.clone();
        schema::normalise(&mut n);
        assert_eq!(choose(&json!(["", null]), &n["properties"]["filterName"], false), None);
        assert_eq!(choose(&json!([null, 50]), &n["properties"]["maxResults"], false), None);
        assert_eq!(
            choose(&json!([null, "b"]), &n["properties"]["botId"], true),
            Some(json!("b"))
        );
    }

    /// Issue 15: `enum` on an array (BFCL live_multiple `models: {type: array, enum: [...]}`) is
    /// moved to its items, so list values validate and are linted item by item.
    #[test]
    fn enum_on_an_array_applies_to_its_items() {
        let s = json!({"type": "dict", "properties": {"models": {"type": "array", "items": {"type": "string"},
            "enum": ["MT10", "MT11"]}}, "required": []});
        assert!(lint(json!({"models": [["MT10", "MT11"], ""]}), s.clone()).is_empty());
        assert_eq!(
            lint(json!({"models": [["MT10", "MT99"]]}), s),
            [pair("enum_violation", "models[1]")]
        );
    }
}
