//! The tool parameter schemas as the trajectory files show them: one keyword set and one JSON
//! type per keyword across every tool, row and file of a recipe (issue 29, item 7), so an Arrow
//! reader (`datasets`, pyarrow) infers one type per field of `tools` — clean and faulted files,
//! parents and variant rows together.
//!
//! Two rules, applied at every object level of a tool's `parameters` (the top level and each
//! object-typed property, e.g. a drift `nested_object` group):
//!
//! - **`required` and `additionalProperties` are always stated**: `required: []` when absent, and
//!   `additionalProperties` JSON Schema's default (`true`, Draft 2020-12 Core §10.3.2.3) made
//!   explicit when absent. A drifted A_new schema keeps its `false` (a strict new version), so
//!   the key and its type no longer depend on whether a tool drifted.
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
/// that is not an object schema with `properties` is returned unchanged.
pub fn shown_parameters(parameters: &Json) -> Json {
    let Json::Object(schema) = parameters else {
        return parameters.clone();
    };
    let mut out = schema.clone();
    if let Some(Json::Object(properties)) = schema.get("properties") {
        let shown: Map<String, Json> = properties.iter().map(|(k, p)| (k.clone(), shown_property(p))).collect();
        out.insert("properties".into(), Json::Object(shown));
        out.entry("required").or_insert_with(|| Json::Array(Vec::new()));
        out.entry("additionalProperties").or_insert(Json::Bool(true));
    }
    Json::Object(out)
}

/// One property: its nested object schema in the same form, its `default` moved to its
/// description.
fn shown_property(p: &Json) -> Json {
    let Json::Object(_) = p else { return p.clone() };
    let mut shown = shown_parameters(p);
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
}
