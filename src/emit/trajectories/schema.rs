//! The tool parameter schemas as the trajectory files show them: one keyword set and one JSON
//! type per keyword across every tool, row and file of a recipe (issue 29, item 7), so an Arrow
//! reader (`datasets`, pyarrow) infers one type per field of `tools` — clean and faulted files,
//! parents and variant rows together.
//!
//! Two rules, applied to every schema at every depth of a tool's `parameters` (the top level,
//! each property, array `items` and `prefixItems`, the branches of `anyOf`/`oneOf`/`allOf`,
//! `not`, `additionalProperties`, `patternProperties` and `$defs`/`definitions`):
//!
//! - **`additionalProperties` is always stated on an object schema** (`type` `object`, or one
//!   with `properties`), nested ones included: JSON Schema's default (`true`, Draft 2020-12 Core
//!   §10.3.2.3) made explicit when absent — chat templates read it on every object parameter
//!   (Command R+'s renders `{"type": "object"}` as `Dict[str, <additionalProperties>]` and fails
//!   with `UndefinedError` when it is missing: every SLOT/SEL row's `operation_args`, issue 45).
//!   A drifted A_new schema keeps its `false` (a strict new version), so the key and its type no
//!   longer depend on whether a tool drifted. **`required` is stated on every schema with
//!   `properties`** (`[]` when absent), and the top level is always an object schema with
//!   `properties`.
//! - **A property's `default` is stated in its description** (`… Default: -1.`, the value's
//!   JSON text), not as the `default` keyword: a default has its property's type, and one
//!   parameter name has different types in different tools of a recipe (`type_drift` writes
//!   `limit`'s `-1` as `"-1"`; obfuscated `ARG_<n>` names are reused across tools), so `default`
//!   would be a field whose type changes from tool to tool. `default` is an annotation that
//!   never affects validation (Draft 2020-12 Validation §9.2), OpenAI's strict structured outputs
//!   do not accept it, and every chat template renders the description, so nothing a model
//!   reads is lost.
//!
//! The rows' `tools` (Parquet), `tools/*.json` and the served schemas keep the specs unchanged;
//! only the trajectories' view is rewritten.

use serde_json::{Map, Value as Json};

/// `parameters` (a tool's JSON Schema object) in the trajectories' form (module docs). Anything
/// that is not a JSON object is returned unchanged.
pub fn shown_parameters(parameters: &Json) -> Json {
    let Json::Object(_) = parameters else {
        return parameters.clone();
    };
    let mut out = shown_schema(parameters);
    let o = out.as_object_mut().expect("an object stays an object");
    if is_object_schema(o) {
        o.entry("properties").or_insert_with(|| Json::Object(Map::new()));
        o.entry("required").or_insert_with(|| Json::Array(Vec::new()));
    }
    out
}

/// Whether a schema describes objects: `type` `object` (or a list holding it), or `properties`.
fn is_object_schema(o: &Map<String, Json>) -> bool {
    let typed = match o.get("type") {
        Some(Json::String(t)) => t == "object",
        Some(Json::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    };
    typed || o.contains_key("properties")
}

/// One schema and every subschema under it in the trajectories' form (module docs).
fn shown_schema(schema: &Json) -> Json {
    let Json::Object(o) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (k, v) in o {
        let shown = match (k.as_str(), v) {
            ("properties", Json::Object(ps)) => {
                Json::Object(ps.iter().map(|(name, p)| (name.clone(), shown_property(p))).collect())
            }
            ("patternProperties" | "$defs" | "definitions" | "dependentSchemas", Json::Object(ps)) => {
                Json::Object(ps.iter().map(|(name, p)| (name.clone(), shown_schema(p))).collect())
            }
            ("items" | "prefixItems" | "anyOf" | "oneOf" | "allOf", Json::Array(list)) => {
                Json::Array(list.iter().map(shown_schema).collect())
            }
            (
                "items"
                | "additionalProperties"
                | "not"
                | "contains"
                | "additionalItems"
                | "unevaluatedProperties"
                | "unevaluatedItems"
                | "propertyNames"
                | "if"
                | "then"
                | "else",
                Json::Object(_),
            ) => shown_schema(v),
            _ => v.clone(),
        };
        out.insert(k.clone(), shown);
    }
    if is_object_schema(&out) {
        if out.contains_key("properties") {
            out.entry("required").or_insert_with(|| Json::Array(Vec::new()));
        }
        out.entry("additionalProperties").or_insert(Json::Bool(true));
    }
    Json::Object(out)
}

/// One property: its schema in the same form, its `default` moved to its description.
fn shown_property(p: &Json) -> Json {
    let Json::Object(_) = p else { return p.clone() };
    let mut shown = shown_schema(p);
    let o = shown.as_object_mut().expect("an object stays an object");
    if let Some(d) = o.remove("default") {
        let description = o
            .get("description")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .trim_end();
        let sentence = format!("Default: {d}.");
        let text = if description.is_empty() {
            sentence
        } else {
            format!("{description} {sentence}")
        };
        o.insert("description".into(), Json::String(text));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The JSON type of every keyword path under `properties.<name>` (property names are where
    /// tools differ), as an Arrow reader would type the field.
    fn keyword_types(schema: &Json, path: &str, out: &mut Vec<(String, &'static str)>) {
        let kind = match schema {
            Json::Null => "null",
            Json::Bool(_) => "bool",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        };
        out.push((path.to_string(), kind));
        if let Json::Object(o) = schema {
            for (k, v) in o {
                keyword_types(v, &format!("{path}.{k}"), out);
            }
        }
    }

    #[test]
    fn drifted_and_plain_tools_share_one_keyword_set_and_one_type_per_keyword() {
        // The same parameter `limit` in a plain tool and in a type-drifted strict A_new (as
        // `type_drift` and `apply_schema` write them), and a nested group.
        let plain = json!({"type": "object", "properties": {
            "limit": {"type": "integer", "description": "Keep the first `limit` values.", "default": -1}}});
        let drifted = json!({"type": "object", "properties": {
            "limit": {"type": "string", "pattern": "^-?[0-9]+$", "description": "Keep the first `limit` values (an integer written as a string).", "default": "-1"},
            "options": {"type": "object", "properties": {"distinct": {"type": "boolean", "default": false}}, "required": [], "additionalProperties": false}},
            "required": ["limit"], "additionalProperties": false});
        let (a, b) = (shown_parameters(&plain), shown_parameters(&drifted));
        let mut types = std::collections::HashMap::new();
        for s in [&a, &b] {
            let mut seen = Vec::new();
            keyword_types(s, "", &mut seen);
            for (path, kind) in seen {
                let before = types.insert(path.clone(), kind);
                assert!(before.is_none_or(|k| k == kind), "{path}: {before:?} vs {kind}");
            }
        }
        assert_eq!(a["additionalProperties"], json!(true));
        assert_eq!(a["required"], json!([]));
        assert_eq!(b["additionalProperties"], json!(false));
        assert_eq!(
            b["properties"]["options"]["properties"]["distinct"]["description"],
            json!("Default: false.")
        );
        // The default is still stated, as its JSON text, after the description.
        assert_eq!(
            a["properties"]["limit"]["description"],
            json!("Keep the first `limit` values. Default: -1.")
        );
        assert_eq!(
            b["properties"]["limit"]["description"],
            json!("Keep the first `limit` values (an integer written as a string). Default: \"-1\".")
        );
        assert!(b["properties"]["limit"].get("default").is_none());
    }

    /// Issue 45: Command R+'s template reads `additionalProperties` on every object parameter;
    /// a nested `{"type": "object"}` (SLOT's `operation_args`) had none.
    #[test]
    fn every_object_schema_at_every_depth_states_additional_properties() {
        let p = json!({"type": "object", "properties": {
            "operation_args": {"type": "object", "description": "Arguments."},
            "rows": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}}},
            "either": {"anyOf": [{"type": "string"}, {"type": "object"}]},
            "strict": {"type": "object", "additionalProperties": false},
            "map": {"type": "object", "additionalProperties": {"type": "object"}}}});
        let s = shown_parameters(&p);
        let props = &s["properties"];
        assert_eq!(props["operation_args"]["additionalProperties"], json!(true));
        assert!(
            props["operation_args"].get("required").is_none(),
            "no properties, no required"
        );
        assert_eq!(props["rows"]["items"]["additionalProperties"], json!(true));
        assert_eq!(props["rows"]["items"]["required"], json!([]));
        assert_eq!(
            props["rows"]["items"]["properties"]["a"]["description"],
            json!("Default: \"x\".")
        );
        assert_eq!(props["either"]["anyOf"][1]["additionalProperties"], json!(true));
        assert!(props["either"]["anyOf"][0].get("additionalProperties").is_none());
        assert_eq!(props["strict"]["additionalProperties"], json!(false));
        assert_eq!(
            props["map"]["additionalProperties"]["additionalProperties"],
            json!(true)
        );
        // A tool without parameters still gets the four top-level keywords.
        assert_eq!(
            shown_parameters(&json!({"type": "object"})),
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": true})
        );
    }
}
