//! Normalising tool parameter schemas to what function-calling APIs accept, and validating them.
//!
//! [`normalise`] rewrites a tool's `inputSchema` / `parameters` in place and returns one [`Fix`]
//! per change (kind, JSON pointer, detail). The rules, each with the API behaviour behind it:
//!
//! | kind | rule | why |
//! |---|---|---|
//! | `schema_uri_removed` | top-level `$schema` dropped | catalog schemas are read as draft 2020-12 (we emit `prefixItems`); Gemini rejects unknown top-level keys |
//! | `top_type_object_added` | top level without `type` gets `type: object` | OpenAI: "schema must be a JSON Schema of 'type: \"object\"'" |
//! | `top_properties_added` | top-level object without `properties` gets `properties: {}` | OpenAI: "object schema missing properties" |
//! | `type_renamed` | Python/BFCL type names (`dict`, `float`, `int`, `str`, `bool`, `list`, `tuple`) → JSON Schema | meta-schema: `type` must be one of the seven simple types |
//! | `type_any_removed` | `type: any` removed (no constraint) | same |
//! | `duplicate_enum` | repeated `enum` entries removed (first kept) | meta-schema 2019+: `enum` items should be unique; OpenAI rejects |
//! | `duplicate_required` | repeated `required` names removed | meta-schema: `uniqueItems` |
//! | `required_not_in_properties` | `required` names absent from `properties` removed | OpenAI strict mode / Gemini reject |
//! | `required_boolean` | draft-3 `required: true` on a property → the parent's `required` list | meta-schema: `required` is an array |
//! | `tuple_items` | draft-4 `items: [A, B]` → `items: A` when all equal, else `prefixItems` (+ `additionalItems` → `items`) | 2020-12 `items` is one schema; OpenAI rejects arrays |
//! | `array_items_added` | `type: array` without `items` gets `items: {}` | OpenAI: "array schema missing items" |
//! | `enum_moved_to_items` | `enum` of scalars on `type: array` → `items.enum` (when items has none) | an array value can never equal a scalar: every valid call would be rejected |
//! | `draft4_exclusive_bound` | boolean `exclusiveMinimum/Maximum` → numeric form | 2020-12 meta-schema: a number |
//! | `optional_removed` | BFCL's non-standard `optional: bool` on a property removed (`required` already says it) | strict validators reject unknown keywords |
//!
//! [`check`] then runs the meta-schema (`jsonschema::meta::validate`) and compiles a validator
//! (`jsonschema::validator_for`, which also resolves `$ref`s and regex `pattern`s); a failure is a
//! rejection with the validator's message.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// One change [`normalise`] made.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Fix {
    /// Rule code (see the module table).
    pub kind: String,
    /// JSON pointer of the schema node changed (`""` = top level).
    pub pointer: String,
    /// What changed.
    pub detail: String,
}

fn fix(fixes: &mut Vec<Fix>, kind: &str, pointer: &str, detail: String) {
    fixes.push(Fix {
        kind: kind.into(),
        pointer: pointer.into(),
        detail,
    });
}

/// Normalises a tool's top-level parameter schema in place; returns the fixes in document order.
/// A top-level `type` other than `object` is left alone (the caller rejects the tool).
pub fn normalise(schema: &mut Value) -> Vec<Fix> {
    let mut fixes = Vec::new();
    if let Value::Object(top) = schema {
        if top.remove("$schema").is_some() {
            fix(
                &mut fixes,
                "schema_uri_removed",
                "",
                "top-level $schema dropped (catalog schemas are draft 2020-12)".into(),
            );
        }
        if !top.contains_key("type") {
            top.insert("type".into(), json!("object"));
            fix(
                &mut fixes,
                "top_type_object_added",
                "",
                "missing top-level type: object added".into(),
            );
        }
    }
    node(schema, "", &mut fixes);
    if let Value::Object(top) = schema
        && top.get("type") == Some(&json!("object"))
        && !top.contains_key("properties")
    {
        top.insert("properties".into(), json!({}));
        fix(
            &mut fixes,
            "top_properties_added",
            "",
            "object without properties: properties: {} added".into(),
        );
    }
    fixes
}

/// JSON Schema name of a Python/BFCL type name, `Some(None)` for `any`, `None` when already valid
/// or unknown (unknown names are left for the meta-schema to reject).
fn rename_type(t: &str) -> Option<Option<&'static str>> {
    Some(Some(match t {
        "dict" => "object",
        "float" => "number",
        "int" => "integer",
        "str" => "string",
        "bool" => "boolean",
        "list" | "tuple" => "array",
        "any" => return Some(None),
        _ => return None,
    }))
}

fn dedup(values: &mut Vec<Value>) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    let mut removed = Vec::new();
    values.retain(|v| {
        let key = serde_json::to_string(v).expect("serialise");
        if seen.insert(key) {
            true
        } else {
            removed.push(v.clone());
            false
        }
    });
    removed
}

/// Keywords whose value is one schema.
const SCHEMA_KEYS: [&str; 10] = [
    "additionalProperties",
    "additionalItems",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
];
/// Keywords whose value is an array of schemas.
const SCHEMA_ARRAY_KEYS: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords whose value maps names to schemas.
const SCHEMA_MAP_KEYS: [&str; 5] = [
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

fn node(schema: &mut Value, ptr: &str, fixes: &mut Vec<Fix>) {
    let Value::Object(s) = schema else { return };
    // type names
    match s.get("type").cloned() {
        Some(Value::String(t)) => match rename_type(&t) {
            Some(Some(new)) => {
                s.insert("type".into(), json!(new));
                fix(fixes, "type_renamed", ptr, format!("type {t:?} → {new:?}"));
            }
            Some(None) => {
                s.remove("type");
                fix(fixes, "type_any_removed", ptr, "type \"any\" removed".into());
            }
            None => {}
        },
        Some(Value::Array(ts)) => {
            let mut out: Vec<Value> = Vec::new();
            let mut any = false;
            for t in &ts {
                match t.as_str().and_then(rename_type) {
                    Some(Some(new)) => out.push(json!(new)),
                    Some(None) => any = true,
                    None => out.push(t.clone()),
                }
            }
            if any {
                s.remove("type");
                fix(
                    fixes,
                    "type_any_removed",
                    ptr,
                    format!("type {ts:?} contains \"any\": removed"),
                );
            } else if out != ts {
                fix(fixes, "type_renamed", ptr, format!("type {ts:?} → {out:?}"));
                s.insert("type".into(), Value::Array(out));
            }
        }
        _ => {}
    }
    if let Some(Value::Array(values)) = s.get_mut("enum") {
        let removed = dedup(values);
        if !removed.is_empty() {
            fix(
                fixes,
                "duplicate_enum",
                ptr,
                format!("removed repeated enum entries {}", Value::Array(removed)),
            );
        }
    }
    // draft-3 `required: true` on properties → parent's list
    let mut promoted = Vec::new();
    if let Some(Value::Object(props)) = s.get_mut("properties") {
        for (name, p) in props.iter_mut() {
            if let Value::Object(p) = p
                && let Some(Value::Bool(b)) = p.get("required").cloned()
            {
                p.remove("required");
                fix(
                    fixes,
                    "required_boolean",
                    &format!("{ptr}/properties/{name}"),
                    format!("required: {b} moved to the parent's required list"),
                );
                if b {
                    promoted.push(json!(name));
                }
            }
        }
    }
    if !promoted.is_empty() {
        match s.get_mut("required") {
            Some(Value::Array(r)) => r.extend(promoted),
            _ => {
                s.insert("required".into(), Value::Array(promoted));
            }
        }
    }
    if let Some(Value::Array(req)) = s.get_mut("required") {
        let removed = dedup(req);
        if !removed.is_empty() {
            fix(
                fixes,
                "duplicate_required",
                ptr,
                format!("removed repeated required names {}", Value::Array(removed)),
            );
        }
    }
    if s.contains_key("required") {
        let props: Option<Vec<String>> = match s.get("properties") {
            Some(Value::Object(p)) => Some(p.keys().cloned().collect()),
            _ => None,
        };
        // Only where properties are declared (or at the top level): `anyOf: [{required: [a]}, …]`
        // branches and schemas with patternProperties/additionalProperties are left alone.
        let closed = s.get("patternProperties").is_none()
            && !matches!(
                s.get("additionalProperties"),
                Some(Value::Object(_)) | Some(Value::Bool(true))
            );
        let applies = props.is_some() || ptr.is_empty();
        if closed
            && applies
            && let Some(Value::Array(req)) = s.get_mut("required")
        {
            let props = props.unwrap_or_default();
            let mut absent = Vec::new();
            req.retain(|r| match r.as_str() {
                Some(name) if props.iter().any(|p| p == name) => true,
                _ => {
                    absent.push(r.clone());
                    false
                }
            });
            if !absent.is_empty() {
                fix(
                    fixes,
                    "required_not_in_properties",
                    ptr,
                    format!("removed required names without a property {}", Value::Array(absent)),
                );
            }
        }
    }
    if let Some(Value::Array(items)) = s.get("items").cloned() {
        let all_equal = !items.is_empty() && items.iter().all(|i| *i == items[0]);
        if all_equal {
            s.insert("items".into(), items[0].clone());
            fix(
                fixes,
                "tuple_items",
                ptr,
                format!("items array of {} identical schemas → one items schema", items.len()),
            );
        } else {
            s.remove("items");
            let additional = s.remove("additionalItems");
            s.insert("prefixItems".into(), Value::Array(items.clone()));
            if let Some(a) = additional {
                s.insert("items".into(), a);
            }
            fix(
                fixes,
                "tuple_items",
                ptr,
                format!("items array of {} schemas → prefixItems", items.len()),
            );
        }
    } else if s.contains_key("additionalItems") && !s.contains_key("prefixItems") {
        // meaningless without a tuple; 2020-12 drops the keyword
        s.remove("additionalItems");
        fix(
            fixes,
            "tuple_items",
            ptr,
            "additionalItems without a tuple removed".into(),
        );
    }
    let is_array = match s.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
        _ => false,
    };
    if is_array && !s.contains_key("items") && !s.contains_key("prefixItems") {
        s.insert("items".into(), json!({}));
        fix(
            fixes,
            "array_items_added",
            ptr,
            "array without items: items: {} added".into(),
        );
    }
    // an `enum` of scalars on an array lists the allowed *items* (BFCL, some MCP servers)
    if s.get("type") == Some(&json!("array"))
        && let Some(Value::Array(values)) = s.get("enum")
        && !values.is_empty()
        && values.iter().all(|v| !v.is_array())
        && let Some(Value::Object(items)) = s.get("items")
        && !items.contains_key("enum")
    {
        let values = s.remove("enum").expect("checked");
        if let Some(Value::Object(items)) = s.get_mut("items") {
            items.insert("enum".into(), values);
        }
        fix(
            fixes,
            "enum_moved_to_items",
            ptr,
            "enum of scalars on an array moved to its items".into(),
        );
    }
    for (bound, limit) in [("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")] {
        if let Some(Value::Bool(b)) = s.get(bound).cloned() {
            s.remove(bound);
            if b && let Some(n) = s.remove(limit) {
                s.insert(bound.into(), n);
            }
            fix(
                fixes,
                "draft4_exclusive_bound",
                ptr,
                format!("{bound}: {b} (draft 4) → numeric form"),
            );
        }
    }
    if let Some(Value::Bool(_)) = s.get("optional") {
        s.remove("optional");
        fix(
            fixes,
            "optional_removed",
            ptr,
            "non-standard optional keyword removed".into(),
        );
    }
    // recurse
    for k in SCHEMA_KEYS.iter().chain(["items"].iter()) {
        if let Some(v) = s.get_mut(*k) {
            node(v, &format!("{ptr}/{k}"), fixes);
        }
    }
    for k in SCHEMA_ARRAY_KEYS {
        if let Some(Value::Array(vs)) = s.get_mut(k) {
            for (i, v) in vs.iter_mut().enumerate() {
                node(v, &format!("{ptr}/{k}/{i}"), fixes);
            }
        }
    }
    for k in SCHEMA_MAP_KEYS {
        if let Some(Value::Object(m)) = s.get_mut(k) {
            for (name, v) in m.iter_mut() {
                node(v, &format!("{ptr}/{k}/{}", escape(name)), fixes);
            }
        }
    }
}

/// JSON-pointer escaping of one reference token (RFC 6901).
fn escape(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Why a schema is unusable: the meta-schema or the validator compiler refused it.
///
/// Errors: `Err(message)` with the first meta-schema violation (JSON pointer + message) or the
/// compile error (unresolvable `$ref`, bad regex).
pub fn check(schema: &Value) -> Result<(), String> {
    if let Some(uri) = schema.get("$schema") {
        return Err(format!("$schema {uri} still present (normalise first)"));
    }
    let meta = std::panic::catch_unwind(|| {
        jsonschema::meta::validate(schema).map_err(|e| format!("{e} at '{}'", e.instance_path()))
    });
    match meta {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(format!("meta-schema: {e}")),
        Err(_) => return Err("meta-schema could not be resolved".into()),
    }
    jsonschema::validator_for(schema)
        .map(|_| ())
        .map_err(|e| format!("compile: {e}"))
}

/// Canonical JSON text of a schema (object keys sorted at every level), for hashing.
pub fn canonical(value: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(
                    keys.into_iter()
                        .map(|k| (k.clone(), sort(&m[k])))
                        .collect::<Map<_, _>>(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    serde_json::to_string(&sort(value)).expect("serialise")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(f: &[Fix]) -> Vec<&str> {
        f.iter().map(|f| f.kind.as_str()).collect()
    }

    #[test]
    fn duplicate_enum_and_required() {
        let mut s = json!({"type": "object", "properties": {"u": {"type": "string", "enum": ["c", "f", "c"]}}, "required": ["u", "u"]});
        let f = normalise(&mut s);
        assert_eq!(kinds(&f), ["duplicate_required", "duplicate_enum"]);
        assert_eq!(f[1].pointer, "/properties/u");
        assert_eq!(s["properties"]["u"]["enum"], json!(["c", "f"]));
        assert_eq!(s["required"], json!(["u"]));
        check(&s).unwrap();
    }

    #[test]
    fn tuple_items_become_prefix_items_or_one_schema() {
        let mut s = json!({"type": "object", "properties": {
            "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": false},
            "xy": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]}}});
        let f = normalise(&mut s);
        assert_eq!(kinds(&f), ["tuple_items", "tuple_items"]);
        assert_eq!(
            s["properties"]["pair"],
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})
        );
        assert_eq!(s["properties"]["xy"]["items"], json!({"type": "number"}));
        check(&s).unwrap();
    }

    #[test]
    fn missing_top_type_and_properties() {
        let mut s = json!({"properties": {"q": {"type": "string"}}});
        assert_eq!(kinds(&normalise(&mut s)), ["top_type_object_added"]);
        let mut s = json!({"$schema": "http://json-schema.org/draft-07/schema#"});
        assert_eq!(
            kinds(&normalise(&mut s)),
            ["schema_uri_removed", "top_type_object_added", "top_properties_added"]
        );
        assert_eq!(s, json!({"type": "object", "properties": {}}));
    }

    #[test]
    fn required_naming_absent_properties_and_draft3_booleans() {
        let mut s = json!({"type": "object", "properties": {"a": {"type": "string", "required": true}, "b": {"type": "string"}}, "required": ["b", "ghost"]});
        let f = normalise(&mut s);
        assert_eq!(kinds(&f), ["required_boolean", "required_not_in_properties"]);
        assert_eq!(s["required"], json!(["b", "a"]));
        check(&s).unwrap();
    }

    #[test]
    fn python_type_names_array_items_and_draft4_bounds() {
        let mut s = json!({"type": "dict", "properties": {
            "x": {"type": "float", "minimum": 0, "exclusiveMinimum": true},
            "t": {"type": "tuple"}, "v": {"type": "any"}, "o": {"type": "integer", "optional": true}}});
        let f = normalise(&mut s);
        assert_eq!(
            kinds(&f),
            [
                "type_renamed",
                "type_renamed",
                "draft4_exclusive_bound",
                "type_renamed",
                "array_items_added",
                "type_any_removed",
                "optional_removed"
            ]
        );
        assert_eq!(s["properties"]["x"], json!({"type": "number", "exclusiveMinimum": 0}));
        assert_eq!(s["properties"]["t"], json!({"type": "array", "items": {}}));
        check(&s).unwrap();
    }

    #[test]
    fn check_rejects_invalid_schemas() {
        assert!(
            check(&json!({"type": "object", "properties": {"a": {"type": "strng"}}}))
                .unwrap_err()
                .contains("meta-schema")
        );
        assert!(check(&json!({"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}})).is_err());
        assert!(check(&json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}})).is_err());
    }
}
