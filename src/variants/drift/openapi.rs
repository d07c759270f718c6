//! The A_new OpenAPI document of a drifted REST dataset (`tools/openapi_new.json`, and what
//! `toolforge serve` answers at `/openapi.json` under drift): the A_old document
//! (`tools/openapi.json`, [`crate::tools::openapi::document`]) with every drifted endpoint at
//! its A_new path, named by its A_new function name, and its A_new arguments — query
//! parameters for a `GET`, a required JSON `requestBody` whose schema is the A_new parameters
//! (nested objects included) for a `POST` after verb evolution ([`super::nested_object`]).

use serde_json::{Map, Value, json};

use super::{Drift, ToolDrift, props, required};
use crate::tools::rest::title;

/// The A_new operation of `d` from its A_old operation `old` (summary and responses kept).
fn operation(d: &ToolDrift, old: &Value) -> Value {
    let mut op = Map::new();
    op.insert("summary".into(), old["summary"].clone());
    op.insert("operationId".into(), json!(d.new.name));
    let schema = &d.new.parameters;
    if d.is_post() {
        let mut body = schema.clone();
        body["title"] = json!(format!("{}Body", title(&d.new.name).replace(' ', "")));
        op.insert(
            "requestBody".into(),
            json!({"required": true, "content": {"application/json": {"schema": body}}}),
        );
    } else {
        let req = required(schema);
        let params: Vec<Value> = props(schema)
            .into_iter()
            .map(|(name, mut s)| {
                let description = s["description"].clone();
                s["title"] = json!(title(&name));
                json!({"name": name, "in": "query", "required": req.contains(&name), "schema": s, "description": description})
            })
            .collect();
        if !params.is_empty() {
            op.insert("parameters".into(), json!(params));
        }
    }
    op.insert("responses".into(), old["responses"].clone());
    let method = if d.is_post() { "post" } else { "get" };
    json!({ method: op })
}

/// `old` (an A_old REST OpenAPI document) with every endpoint `drift` changes rewritten to A_new
/// (module docs); paths keep their order. A document without `paths` is returned unchanged.
pub fn a_new_document(old: &Value, drift: &Drift) -> Value {
    let Some(paths) = old["paths"].as_object() else {
        return old.clone();
    };
    let mut out = Map::new();
    for (path, item) in paths {
        match drift
            .tools
            .iter()
            .find(|t| t.path_old.as_deref() == Some(path.as_str()))
        {
            Some(d) => {
                let new_path = d.path_new.clone().unwrap_or_else(|| path.clone());
                out.insert(new_path, operation(d, &item["get"]));
            }
            None => {
                out.insert(path.clone(), item.clone());
            }
        }
    }
    let mut doc = old.clone();
    doc["paths"] = Value::Object(out);
    doc
}
