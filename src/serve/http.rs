//! The HTTP routes (axum) over the shared state ([`super::state`]); the table of routes is in the
//! [`crate::serve`] module doc. Handlers parse and check the request (FastAPI-shaped 422s, A_new
//! under drift), then run the blocking core on tokio's blocking pool.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path as UrlPath, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value as Json, json};

use super::state::{CallError, Shared, detail, known_tool, open_session, run_endpoint, run_tool};

fn respond(result: Result<Result<Response, CallError>, tokio::task::JoinError>) -> Response {
    match result {
        Ok(Ok(r)) => r,
        Ok(Err((status, message))) => detail(status, message),
        Err(e) => detail(StatusCode::INTERNAL_SERVER_ERROR, format!("handler failed: {e}")),
    }
}

async fn rest_endpoint(
    state: Shared,
    index: usize,
    drift: Option<Arc<crate::variants::drift::ToolDrift>>,
    query: Result<Query<Vec<(String, String)>>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let Ok(Query(pairs)) = query else {
        return detail(StatusCode::BAD_REQUEST, "malformed query string");
    };
    let ep = &state.toolkit.endpoints[index];
    let checked = match &drift {
        // A_new: typed and validated against the drifted schema, then un-migrated.
        Some(d) => crate::variants::drift::Drift::check_query(d, &pairs).and_then(|args| {
            ep.arguments_from_json(&args)
                .map_err(|errors| d.errors_in_new_names(errors))
        }),
        None => ep.arguments_from_query(&pairs),
    };
    let values = match checked {
        Ok(v) => v,
        Err(errors) => {
            return (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(json!({"detail": errors}))).into_response();
        }
    };
    let st = state.clone();
    respond(
        tokio::task::spawn_blocking(move || {
            run_endpoint(&st, index, &values).map(|rows| axum::Json(rows).into_response())
        })
        .await,
    )
}

async fn create_session(
    State(state): State<Shared>,
    body: Result<axum::Json<Json>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match body {
        Ok(axum::Json(b)) => b,
        Err(e) => return detail(e.status(), e.body_text()),
    };
    let st = state.clone();
    respond(tokio::task::spawn_blocking(move || open_session(&st, &body).map(|v| axum::Json(v).into_response())).await)
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
    body: Result<axum::Json<Json>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let body = match body {
        Ok(axum::Json(b)) => b,
        Err(e) => return detail(e.status(), e.body_text()),
    };
    let drifted = state
        .toolkit
        .drift
        .as_ref()
        .is_some_and(|d| d.by_new_name(None, &name).is_some());
    if !drifted && !known_tool(&state.toolkit, &name) {
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
    let Some(mut arguments) = body.get("arguments").and_then(Json::as_object).cloned() else {
        return detail(StatusCode::UNPROCESSABLE_ENTITY, "missing arguments object");
    };
    // Under drift: A_new arguments validated, then the A_old call runs.
    let mut name = name;
    if let Some(d) = &state.toolkit.drift {
        match d.check_body(&name, &arguments, "") {
            Ok(Some(old)) => {
                name = old.name;
                arguments = old.arguments;
            }
            Ok(None) => {}
            Err(None) => {
                return detail(
                    StatusCode::NOT_FOUND,
                    format!("no tool named {name:?} in {}", state.toolkit.name),
                );
            }
            Err(Some(errors)) => {
                return (StatusCode::UNPROCESSABLE_ENTITY, axum::Json(json!({"detail": errors}))).into_response();
            }
        }
    }
    let label = body.get("label").and_then(Json::as_str).map(String::from);
    let st = state.clone();
    respond(
        tokio::task::spawn_blocking(move || {
            run_tool(&st, &name, &sid, arguments, label).map(|v| axum::Json(v).into_response())
        })
        .await,
    )
}
/// 414 for request URIs over 8 KiB.
pub(super) async fn limit_uri(req: Request, next: Next) -> Response {
    if req.uri().to_string().len() > 8192 {
        return detail(StatusCode::URI_TOO_LONG, "request URI longer than 8192 bytes");
    }
    next.run(req).await
}

/// The tool routes over `state`: one `GET` per REST endpoint (its A_new path under drift),
/// `/healthz`, `/openapi.json`, `/sessions`, `/sessions/{id}`, `/tools/{name}`. The caller adds
/// MCP, the fallback and the limit layers ([`crate::serve::router`]).
pub(super) fn routes(state: &Shared) -> Router<Shared> {
    let mut app: Router<Shared> = Router::new();
    for (i, ep) in state.toolkit.endpoints.iter().enumerate() {
        let drift = state
            .toolkit
            .drift
            .as_ref()
            .and_then(|d| d.by_old_name(Some(&ep.db_id), &ep.name))
            .map(|d| Arc::new(d.clone()));
        let path = drift
            .as_ref()
            .and_then(|d| d.path_new.clone())
            .unwrap_or_else(|| ep.path.clone());
        app = app.route(
            &path,
            get(move |State(st): State<Shared>, q| rest_endpoint(st, i, drift.clone(), q)),
        );
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
}
