//! The HTTP routes (axum) over the shared state ([`super::state`]); the table of routes is in the
//! [`crate::serve`] module doc. Handlers parse and check the request (FastAPI-shaped 422s, A_new
//! under drift), then run the blocking core on tokio's blocking pool.
//!
//! Request bodies are read as FastAPI reads a pydantic-model body: a body that is empty, not
//! `application/json`, not JSON or not an object is a 422 with FastAPI's `detail` list
//! (`missing`, `model_attributes_type`, `json_invalid`); so are missing or mistyped fields.
//! Every route answers 413 to a body over 64 KiB (GET included) and 405 with
//! `{"detail": "Method Not Allowed"}` and an `Allow` header, as FastAPI does.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value as Json, json};

use super::reply::Reply;
use super::state::{
    CallError, CancelOnDrop, Shared, detail, known_tool, open_session, run_endpoint, run_tool, tool_reply,
};

fn respond(result: Result<Result<Response, CallError>, tokio::task::JoinError>) -> Response {
    // The blocking work has ended: activity for the trimmer, as a request's arrival is.
    super::trim::request_seen();
    match result {
        Ok(Ok(r)) => r,
        Ok(Err((status, message))) => {
            let mut r = detail(status, message);
            // The server's memory budget is full for now ([`super::memory`]).
            if status == StatusCode::SERVICE_UNAVAILABLE {
                r.headers_mut().insert(
                    axum::http::header::RETRY_AFTER,
                    axum::http::HeaderValue::from_static("1"),
                );
            }
            r
        }
        Err(e) => detail(StatusCode::INTERNAL_SERVER_ERROR, format!("handler failed: {e}")),
    }
}

/// `GET <endpoint path>` of a REST endpoint without drift (under drift: [`super::drift`]).
async fn rest_endpoint(state: Shared, index: usize, query: QueryResult) -> Response {
    let Ok(Query(pairs)) = query else {
        return detail(StatusCode::BAD_REQUEST, "malformed query string");
    };
    match state.toolkit.endpoints[index].arguments_from_query(&pairs) {
        Ok(values) => run_endpoint_response(state, index, values).await,
        Err(errors) => unprocessable(errors),
    }
}

type QueryResult = Result<Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>;

/// A drifted REST endpoint ([`super::drift`]): `Ok(query)` for an A_new `GET`, `Err((headers,
/// body))` for an A_new `POST` (verb evolution).
async fn drifted_endpoint(
    state: Shared,
    index: usize,
    d: Arc<crate::variants::drift::ToolDrift>,
    request: Result<QueryResult, (HeaderMap, Bytes)>,
) -> Response {
    let req = match request {
        Ok(Ok(Query(pairs))) => super::drift::NewRequest::Query(pairs),
        Ok(Err(_)) => return detail(StatusCode::BAD_REQUEST, "malformed query string"),
        Err((headers, bytes)) => match json_object(&headers, &bytes) {
            Ok(b) => super::drift::NewRequest::Body(b),
            Err(r) => return r,
        },
    };
    match super::drift::rest_arguments(&state, index, &d, req) {
        Ok(values) => run_endpoint_response(state, index, values).await,
        Err(errors) => unprocessable(errors),
    }
}

/// Runs REST endpoint `index` with bound `values` on the blocking pool: 200 with the rows, or
/// the error response.
async fn run_endpoint_response(state: Shared, index: usize, values: Vec<Json>) -> Response {
    respond(
        tokio::task::spawn_blocking(move || {
            // The rows stay counted until their text is written (both held at the peak).
            let (rows, _held) = run_endpoint(&state, index, &values)?;
            Reply::json(&state, &rows, "the result", None).map(Reply::into_response)
        })
        .await,
    )
}

/// The most bytes a request body may have (413 past it, on every route).
pub(super) const MAX_BODY: usize = 64 * 1024;

/// A FastAPI-shaped 422: `{"detail": [{"type", "loc", "msg", "input", "ctx"?}]}`.
fn unprocessable(errors: Vec<Json>) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        axum::Json(json!({ "detail": errors })),
    )
        .into_response()
}

fn field_error(kind: &str, loc: &[&str], msg: &str, input: &Json) -> Json {
    json!({"type": kind, "loc": loc, "msg": msg, "input": input})
}

/// A JSON object request body, checked as FastAPI checks a pydantic-model body (module docs);
/// the error is the 422 response.
fn json_object(headers: &HeaderMap, bytes: &Bytes) -> Result<serde_json::Map<String, Json>, Response> {
    if bytes.is_empty() {
        return Err(unprocessable(vec![field_error(
            "missing",
            &["body"],
            "Field required",
            &Json::Null,
        )]));
    }
    // FastAPI's test: `application/json` or `application/*+json`, parameters ignored.
    let is_json = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
            essence
                .split_once('/')
                .is_some_and(|(t, sub)| t == "application" && (sub == "json" || sub.ends_with("+json")))
        });
    let not_object = |input: Json| {
        unprocessable(vec![field_error(
            "model_attributes_type",
            &["body"],
            "Input should be a valid dictionary or object to extract fields from",
            &input,
        )])
    };
    if !is_json {
        return Err(not_object(Json::String(String::from_utf8_lossy(bytes).into_owned())));
    }
    match serde_json::from_slice::<Json>(bytes) {
        Ok(Json::Object(o)) => Ok(o),
        Ok(other) => Err(not_object(other)),
        Err(e) => {
            // FastAPI's `loc` is ["body", <character offset of the error>].
            let text = String::from_utf8_lossy(bytes);
            let offset: usize = text
                .lines()
                .take(e.line().saturating_sub(1))
                .map(|l| l.chars().count() + 1)
                .sum::<usize>()
                + e.column().saturating_sub(1);
            Err(unprocessable(vec![json!({
                "type": "json_invalid",
                "loc": ["body", offset],
                "msg": "JSON decode error",
                "input": {},
                "ctx": {"error": e.to_string()}
            })]))
        }
    }
}

async fn create_session(State(state): State<Shared>, headers: HeaderMap, bytes: Bytes) -> Response {
    let body = match json_object(&headers, &bytes) {
        Ok(b) => Json::Object(b),
        Err(r) => return r,
    };
    let (id, arguments) = (body.get("id"), body.get("arguments"));
    if id.is_none() && arguments.is_none() {
        return unprocessable(vec![field_error(
            "missing",
            &["body", "id"],
            "Field required (or `arguments`)",
            &body,
        )]);
    }
    if let Some(v) = id.filter(|v| !v.is_string()) {
        return unprocessable(vec![field_error(
            "string_type",
            &["body", "id"],
            "Input should be a valid string",
            v,
        )]);
    }
    if let Some(v) = arguments.filter(|v| !v.is_object()) {
        return unprocessable(vec![field_error(
            "dict_type",
            &["body", "arguments"],
            "Input should be a valid dictionary",
            v,
        )]);
    }
    let st = state.clone();
    respond(
        tokio::task::spawn_blocking(move || {
            open_session(&st, &body).map(|v| {
                // Under per-instance drift the session enforces its row's A_new.
                if let (Some(sid), Some(row)) = (v["session_id"].as_str(), body.get("id").and_then(Json::as_str)) {
                    super::drift::remember_session(&st, sid, row);
                }
                axum::Json(v).into_response()
            })
        })
        .await,
    )
}

async fn delete_session(State(state): State<Shared>, UrlPath(id): UrlPath<String>) -> Response {
    match state.sessions.lock().expect("sessions").remove(&id) {
        Some(_) => axum::Json(json!({"deleted": id})).into_response(),
        None => detail(StatusCode::NOT_FOUND, format!("unknown session {id:?}")),
    }
}
async fn call_tool(
    State(state): State<Shared>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let body = match json_object(&headers, &bytes) {
        Ok(b) => Json::Object(b),
        Err(r) => return r,
    };
    let mut errors = Vec::new();
    match body.get("session_id") {
        None => errors.push(field_error("missing", &["body", "session_id"], "Field required", &body)),
        Some(v) if !v.is_string() => errors.push(field_error(
            "string_type",
            &["body", "session_id"],
            "Input should be a valid string",
            v,
        )),
        _ => {}
    }
    match body.get("arguments") {
        None => errors.push(field_error("missing", &["body", "arguments"], "Field required", &body)),
        Some(v) if !v.is_object() => errors.push(field_error(
            "dict_type",
            &["body", "arguments"],
            "Input should be a valid dictionary",
            v,
        )),
        _ => {}
    }
    if let Some(v) = body.get("label").filter(|v| !v.is_string()) {
        errors.push(field_error(
            "string_type",
            &["body", "label"],
            "Input should be a valid string",
            v,
        ));
    }
    if !errors.is_empty() {
        return unprocessable(errors);
    }
    let sid_arg = body.get("session_id").and_then(Json::as_str);
    if !super::drift::is_a_new_tool(&state, sid_arg, &name) && !known_tool(&state.toolkit, &name) {
        return detail(
            StatusCode::NOT_FOUND,
            format!("no tool named {name:?} in {}", state.toolkit.name),
        );
    }
    let Some(sid) = body.get("session_id").and_then(Json::as_str).map(String::from) else {
        return detail(
            StatusCode::UNPROCESSABLE_ENTITY,
            "missing session_id (create one with POST /sessions)",
        );
    };
    let Some(arguments) = body.get("arguments").and_then(Json::as_object).cloned() else {
        return detail(StatusCode::UNPROCESSABLE_ENTITY, "missing arguments object");
    };
    // Under drift: A_new arguments validated, then the A_old call runs.
    let (name, arguments) = match super::drift::tool_call(&state, Some(&sid), name, arguments) {
        Ok(call) => call,
        Err(r) => return r,
    };
    let label = body.get("label").and_then(Json::as_str).map(String::from);
    let st = state.clone();
    // Dropped with this handler (a client that disconnects): the call stops at its next check.
    let (_cancel, flag) = CancelOnDrop::new();
    respond(
        tokio::task::spawn_blocking(move || {
            run_tool(&st, &name, &sid, arguments, label, Some(flag), tool_reply(&st, &sid)).map(Reply::into_response)
        })
        .await,
    )
}
/// 414 for request URIs over 8 KiB; 413 for bodies over [`MAX_BODY`] on every route and method
/// (a declared `Content-Length`, or a streamed body read up to the limit).
pub(super) async fn limit_uri(req: Request, next: Next) -> Response {
    if req.uri().to_string().len() > 8192 {
        return detail(StatusCode::URI_TOO_LONG, "request URI longer than 8192 bytes");
    }
    // The unread body is left on the wire: the connection is closed after the answer, so a
    // client's next request does not land in the middle of it.
    // Over MCP the 413 carries a JSON-RPC error (id null: the body is not read), which MCP
    // clients surface as the error; a bare `{"detail"}` became "Server returned an error response".
    let mcp = req.uri().path() == "/mcp";
    let too_large = move || {
        let message = format!("request body larger than {MAX_BODY} bytes");
        let mut r = if mcp {
            let e = super::jsonrpc::error(Json::Null, -32600, format!("Invalid Request: {message}"));
            (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(e)).into_response()
        } else {
            detail(StatusCode::PAYLOAD_TOO_LARGE, message)
        };
        r.headers_mut().insert(
            axum::http::header::CONNECTION,
            axum::http::HeaderValue::from_static("close"),
        );
        r
    };
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return too_large();
    }
    if declared.is_none() && req.headers().contains_key(axum::http::header::TRANSFER_ENCODING) {
        let (parts, body) = req.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
            return too_large();
        };
        return json_405(
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await,
        );
    }
    json_405(next.run(req).await)
}

/// axum's 405s have an empty body; FastAPI's is `{"detail": "Method Not Allowed"}` (the `Allow`
/// header is kept).
fn json_405(resp: Response) -> Response {
    if resp.status() != StatusCode::METHOD_NOT_ALLOWED {
        return resp;
    }
    let allow = resp.headers().get(axum::http::header::ALLOW).cloned();
    let mut out = detail(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    if let Some(a) = allow {
        out.headers_mut().insert(axum::http::header::ALLOW, a);
    }
    out
}

/// The tool routes over `state`: one route per REST endpoint (`GET`; under drift its A_new path
/// and method, [`super::drift::endpoint_drift`]),
/// `/healthz`, `/openapi.json`, `/sessions`, `/sessions/{id}`, `/tools/{name}`. The caller adds
/// MCP, the fallback and the limit layers ([`crate::serve::router`]).
pub(super) fn routes(state: &Shared) -> Router<Shared> {
    let mut app: Router<Shared> = Router::new();
    for (i, ep) in state.toolkit.endpoints.iter().enumerate() {
        app = match super::drift::endpoint_drift(state, i) {
            None => app.route(
                &ep.path,
                get(move |State(st): State<Shared>, q| rest_endpoint(st, i, q)),
            ),
            Some(d) => {
                let path = d.path_new.clone().unwrap_or_else(|| ep.path.clone());
                if d.is_post() {
                    app.route(
                        &path,
                        post(move |State(st): State<Shared>, headers: HeaderMap, bytes: Bytes| {
                            drifted_endpoint(st, i, d.clone(), Err((headers, bytes)))
                        }),
                    )
                } else {
                    app.route(
                        &path,
                        get(move |State(st): State<Shared>, q| drifted_endpoint(st, i, d.clone(), Ok(q))),
                    )
                }
            }
        };
    }
    let health = {
        let st = state.clone();
        move || async move {
            axum::Json(
                json!({"status": "ok", "dataset": st.toolkit.name, "format": st.toolkit.format, "endpoints": st.toolkit.endpoints.len(), "tools": st.toolkit.catalog.len()}),
            )
        }
    };
    let openapi = {
        let st = state.clone();
        move || async move { axum::Json(st.toolkit.openapi.clone()) }
    };
    app.route("/healthz", get(health))
        .route("/openapi.json", get(openapi))
        .route("/sessions", post(create_session))
        .route("/sessions/{id}", axum::routing::delete(delete_session))
        .route("/tools/{name}", post(call_tool))
        .route("/search_tools", get(search_get).post(search_post))
}

/// `search_tools` ([`super::search`]) on the blocking pool: 200 with the hits, 422 `{"detail"}`
/// for an invalid argument.
async fn search(state: Shared, args: serde_json::Map<String, Json>) -> Response {
    let result = tokio::task::spawn_blocking(move || super::search::search_tools(&state, &args)).await;
    match result {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(m)) => detail(StatusCode::UNPROCESSABLE_ENTITY, m),
        Err(e) => detail(StatusCode::INTERNAL_SERVER_ERROR, format!("handler failed: {e}")),
    }
}

/// `GET /search_tools?query=…&top_k=…`.
async fn search_get(State(state): State<Shared>, query: QueryResult) -> Response {
    let Ok(Query(pairs)) = query else {
        return detail(StatusCode::BAD_REQUEST, "malformed query string");
    };
    search(state, pairs.into_iter().map(|(k, v)| (k, Json::String(v))).collect()).await
}

/// `POST /search_tools {"query", "top_k"}`.
async fn search_post(State(state): State<Shared>, headers: HeaderMap, bytes: Bytes) -> Response {
    match json_object(&headers, &bytes) {
        Ok(args) => search(state, args).await,
        Err(r) => r,
    }
}
