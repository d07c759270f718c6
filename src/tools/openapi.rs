//! FastAPI-equivalent OpenAPI 3.1 documents for REST endpoints: the document FastAPI's
//! `app.openapi()` returns for `@app.get(path, summary=…)` handlers whose parameters are
//! `name: T = Query(..., description=…)` — operation ids from `generate_unique_id`, pydantic
//! parameter titles, `200` "Successful Response" / `422` "Validation Error" responses and the
//! `HTTPValidationError` / `ValidationError` components — so a client or harness written against
//! the papers' FastAPI servers works unchanged. `tests/conformance/` compares with real FastAPI.

use serde_json::{Map, Value as Json, json};

use crate::tools::rest::{Endpoint, title};

/// The validation-error component schemas, as FastAPI (0.165, pydantic 2) declares them; our
/// 422 bodies carry `type`, `loc`, `msg` and `input` (no `ctx`: no rule of ours has context).
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
                "type": {"type": "string", "title": "Error Type"},
                "input": {"title": "Input"},
                "ctx": {"type": "object", "title": "Context"}
            },
            "type": "object",
            "required": ["loc", "msg", "type"],
            "title": "ValidationError"
        }
    })
}

/// A query parameter's schema as pydantic writes it: `T` → `{type}`; `Literal[...]` →
/// `{enum, type}`; `Query(ge=m)` → `minimum` after the type; a default → `default` after the description; `Optional[T] = None` →
/// `{anyOf: [{type}, {type: null}]}`.
fn parameter_schema(p: &crate::tools::template::Parameter) -> Json {
    let mut s = Map::new();
    if p.optional && p.default.is_none() {
        s.insert("anyOf".into(), json!([{"type": p.kind}, {"type": "null"}]));
    } else {
        if !p.choices.is_empty() {
            s.insert("enum".into(), json!(p.choices));
        }
        s.insert("type".into(), json!(p.kind));
        if let Some(m) = p.minimum {
            s.insert("minimum".into(), json!(m));
        }
    }
    s.insert("description".into(), json!(p.description));
    if let Some(d) = &p.default {
        s.insert("default".into(), d.clone());
    }
    s.insert("title".into(), json!(title(&p.name)));
    Json::Object(s)
}

/// The path item of one endpoint (`{"get": {...}}`).
pub fn operation(ep: &Endpoint) -> Json {
    let mut op = Map::new();
    op.insert("summary".into(), json!(ep.summary));
    op.insert("operationId".into(), json!(ep.operation_id()));
    if !ep.parameters.is_empty() {
        op.insert(
            "parameters".into(),
            json!(
                ep.parameters
                    .iter()
                    .map(|p| json!({
                        "name": p.name,
                        "in": "query",
                        "required": !p.optional,
                        "schema": parameter_schema(p),
                        "description": p.description,
                    }))
                    .collect::<Vec<_>>()
            ),
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

/// The OpenAPI document of a SLOT/SEL tool server: `POST /sessions` (the join step),
/// `DELETE /sessions/{id}`, and one
/// `POST /tools/<name>` per tool, whose request body carries the session, the tool's arguments
/// (its JSON Schema) and an optional output label. Every response the server gives is described:
/// 200; 404 (unknown session, tool or example id) and 413 (body over 64 KiB, result over the row
/// cap) with `{"detail": <text>}`; 422 with FastAPI's `detail` list (malformed body, missing or
/// mistyped fields) or `{"detail": <text>}` (arguments the tool cannot run with).
pub fn tools_document(title: &str, version: &str, catalog: &[crate::tools::ToolSpec]) -> Json {
    let mut paths = Map::new();
    let error = |description: &str, schema: Json| json!({"description": description, "content": {"application/json": {"schema": schema}}});
    let http_error = json!({"$ref": "#/components/schemas/HTTPError"});
    let post = |name: &str, summary: &str, body: Json| {
        json!({"post": {
            "summary": summary,
            "operationId": format!("{}_post", format!("{name}").chars().map(|c| if c.is_alphanumeric() || c == '_' { c } else { '_' }).collect::<String>()),
            "requestBody": {"required": true, "content": {"application/json": {"schema": body}}},
            "responses": {
                "200": {"description": "Successful Response", "content": {"application/json": {"schema": {}}}},
                "404": error("Unknown session, tool or example id", http_error.clone()),
                "413": error("Request body over 64 KiB, or a result over the row cap", http_error.clone()),
                "422": error("Validation Error: a malformed body, missing or mistyped fields (a `detail` list), or arguments the tool cannot run with (a `detail` text)", json!({"anyOf": [{"$ref": "#/components/schemas/HTTPValidationError"}, http_error.clone()]}))
            }
        }})
    };
    paths.insert(
        "/sessions".into(),
        post(
            "create_session_sessions",
            "Run an instance's join step and open a session",
            // `id` is required in the document: arbitrary `arguments` objects are not join steps
            // the server can run (422), so they are documented as an alternative, not generated.
            json!({"type": "object", "required": ["id"], "properties": {
                "id": {"type": "string", "description": "Example id whose join step to run (404 when the dataset has no such example). Alternatively, send no id and `arguments`: the initialize_active_data arguments of a join step."},
                "arguments": {"type": "object", "description": "initialize_active_data arguments (used when `id` is absent)."}
            }}),
        ),
    );
    // `DELETE /sessions/{id}` ends a session (issue 31: it was served but undocumented).
    paths.insert(
        "/sessions/{id}".into(),
        json!({"delete": {
            "summary": "End a session (its results and its share of the joined table are released)",
            "operationId": "delete_session_sessions__id__delete",
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "title": "Id"}}],
            "responses": {
                "200": {"description": "Successful Response", "content": {"application/json": {"schema": {
                    "type": "object", "required": ["deleted"], "properties": {"deleted": {"type": "string"}}}}}},
                "404": error("Unknown session", http_error.clone())
            }
        }}),
    );
    for t in catalog {
        paths.insert(
            format!("/tools/{}", t.name),
            post(
                &format!("{}_tools_{}", t.name, t.name),
                &t.description,
                json!({"type": "object", "required": ["session_id", "arguments"], "properties": {
                    "session_id": {"type": "string"},
                    "arguments": t.parameters,
                    "label": {"type": "string", "description": "Label for the output; later calls refer to it as $label$."}
                }}),
            ),
        );
    }
    let mut schemas = validation_components();
    schemas["HTTPError"] = json!({
        "properties": {"detail": {"type": "string", "title": "Detail"}},
        "type": "object",
        "required": ["detail"],
        "title": "HTTPError"
    });
    json!({"openapi": "3.1.0", "info": {"title": title, "version": version}, "paths": paths, "components": {"schemas": schemas}})
}
