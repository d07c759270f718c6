//! FastAPI-equivalent OpenAPI 3.1 documents for REST endpoints: the document FastAPI's
//! `app.openapi()` returns for `@app.get(path, summary=…)` handlers whose parameters are
//! `name: T = Query(..., description=…)` — operation ids from `generate_unique_id`, pydantic
//! parameter titles, `200` "Successful Response" / `422` "Validation Error" responses and the
//! `HTTPValidationError` / `ValidationError` components — so a client or harness written against
//! the papers' FastAPI servers works unchanged. `tests/conformance/` compares with real FastAPI.

use serde_json::{Map, Value as Json, json};

use crate::tools::rest::{Endpoint, title};

/// The validation-error component schemas, as FastAPI (0.115+, pydantic 2) declares them.
pub fn validation_components() -> Json {
    json!({
        "HTTPValidationError": {
            "properties": {
                "detail": {"items": {"$ref": "#/components/schemas/ValidationError"}, "type": "array", "title": "Detail"}
            },
            "type": "object",
            "title": "HTTPValidationError"
        },
        "ValidationError": {
            "properties": {
                "loc": {"items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}, "type": "array", "title": "Location"},
                "msg": {"type": "string", "title": "Message"},
                "type": {"type": "string", "title": "Error Type"}
            },
            "type": "object",
            "required": ["loc", "msg", "type"],
            "title": "ValidationError"
        }
    })
}

/// The path item of one endpoint (`{"get": {...}}`).
pub fn operation(ep: &Endpoint) -> Json {
    let mut op = Map::new();
    op.insert("summary".into(), json!(ep.summary));
    op.insert("operationId".into(), json!(ep.operation_id()));
    if !ep.parameters.is_empty() {
        op.insert(
            "parameters".into(),
            json!(ep.parameters.iter().map(|p| json!({
                "name": p.name,
                "in": "query",
                "required": true,
                "schema": {"type": p.kind, "description": p.description, "title": title(&p.name)},
                "description": p.description,
            })).collect::<Vec<_>>()),
        );
    }
    let mut responses = Map::new();
    responses.insert(
        "200".into(),
        json!({"description": "Successful Response", "content": {"application/json": {"schema": {}}}}),
    );
    if !ep.parameters.is_empty() {
        responses.insert("422".into(), json!({"description": "Validation Error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/HTTPValidationError"}}}}));
    }
    op.insert("responses".into(), Json::Object(responses));
    json!({"get": op})
}

/// An OpenAPI 3.1 document for `endpoints` (in the given order, as FastAPI keeps route order).
pub fn document(title: &str, version: &str, endpoints: &[&Endpoint]) -> Json {
    let paths: Map<String, Json> = endpoints.iter().map(|ep| (ep.path.clone(), operation(ep))).collect();
    let mut doc = json!({
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
    });
    if endpoints.iter().any(|e| !e.parameters.is_empty()) {
        doc["components"] = json!({"schemas": validation_components()});
    }
    doc
}
