//! A_new enforcement under schema drift (`tools/drift.json`, [`crate::variants::drift`]): what
//! the HTTP routes ([`super::http`]) do differently when the dataset is drifted.
//!
//! - REST ([`endpoint_drift`], [`rest_arguments`]; the routes in [`super::http`]): a drifted endpoint answers at its A_new path only. `GET`: the
//!   query parameters typed and validated against A_new ([`Drift::check_query`]). `POST` after
//!   verb evolution (a `nested_object` change): the JSON body validated against A_new, nested
//!   objects included ([`Drift::check_json`]); the old shape is refused — a `GET` with 405
//!   `{"detail": "Method Not Allowed"}`, a flat body with 422 naming the fields. The valid A_new
//!   call is un-migrated into the A_old arguments the endpoint's SQL binds (an omitted flipped
//!   default takes its A_new value).
//! - SLOT/SEL ([`tool_call`]): `POST /tools/{name}` with an A_new name and A_new arguments
//!   ([`Drift::check_body`]); an A_old name that no longer exists is 404. Drift is per instance
//!   (scope `instance`, [`crate::variants::drift::Scope`]): a session opened for a drift row's id
//!   ([`remember_session`]) enforces that row's A_new ([`instances`]); any other session runs
//!   A_old. A dataset drifted per tool (older files) enforces its one A_new in every session.
//!
//! - MCP ([`super::mcp`]) enforces the same A_new: a drifted REST endpoint is listed and called
//!   under its A_new name and input schema (arguments checked like a `POST` body); SLOT/SEL
//!   `tools/call` goes through [`check_tool_call`] in the call's session, and `create_session`
//!   with a drift row's id enforces that row's A_new ([`remember_session`]).
//!
//! Errors are FastAPI-shaped 422s (`{"detail": [{"type", "loc", "msg", "input"}]}`).

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value as Json, json};

use super::state::{Shared, detail};
use crate::variants::drift::{Drift, Scope, ToolDrift};

fn unprocessable(errors: Vec<Json>) -> Response {
    (
        StatusCode::UNPROCESSABLE_ENTITY,
        axum::Json(json!({ "detail": errors })),
    )
        .into_response()
}

/// The drift of REST endpoint `index`, when it is drifted: its A_new path (`path_new`) and
/// method ([`ToolDrift::is_post`]) are the route's.
pub(super) fn endpoint_drift(state: &Shared, index: usize) -> Option<Arc<ToolDrift>> {
    let ep = &state.toolkit.endpoints[index];
    state
        .toolkit
        .drift
        .as_ref()
        .and_then(|d| d.by_old_name(Some(&ep.db_id), &ep.name))
        .map(|d| Arc::new(d.clone()))
}

/// An A_new request to a drifted REST endpoint.
pub(super) enum NewRequest {
    /// `GET`: the query pairs.
    Query(Vec<(String, String)>),
    /// `POST` (verb evolution): the JSON body object.
    Body(Map<String, Json>),
}

/// The bound A_old values endpoint `index` runs with for a valid A_new request (the A_new check,
/// un-migration, then the endpoint's own check reported in A_new parameter names), or the 422
/// `detail` list.
pub(super) fn rest_arguments(
    state: &Shared,
    index: usize,
    d: &ToolDrift,
    req: NewRequest,
) -> Result<Vec<Json>, Vec<Json>> {
    let args = match req {
        NewRequest::Query(pairs) => Drift::check_query(d, &pairs),
        NewRequest::Body(body) => Drift::check_json(d, &body),
    };
    let ep = &state.toolkit.endpoints[index];
    args.and_then(|a| ep.arguments_from_json(&a).map_err(|e| d.errors_in_new_names(e)))
}

/// The per-instance A_new of every drift row of `rows` (row id → its drift), for a SLOT/SEL
/// dataset drifted per instance.
pub(super) fn instances(format: &str, rows: &[crate::emit::StoredRow]) -> HashMap<String, Drift> {
    rows.iter()
        .filter_map(|r| {
            let (tools, variant) = r.drift.as_ref()?;
            Some((r.id.clone(), Drift::of_instance(format, tools, variant)?))
        })
        .collect()
}

/// Records that session `session_id` was opened for row `row_id`, when that row has a
/// per-instance A_new; prunes the records of ended sessions.
pub(super) fn remember_session(state: &Shared, session_id: &str, row_id: &str) {
    if !state.toolkit.instances.contains_key(row_id) {
        return;
    }
    let mut rows = state.session_rows.lock().expect("session rows");
    rows.insert(session_id.to_string(), row_id.to_string());
    if rows.len() > 2 * state.config.max_sessions {
        let live = state.sessions.lock().expect("sessions");
        rows.retain(|sid, _| live.contains_key(sid));
    }
}

/// The A_new a session enforces: its row's (per instance), else the dataset's (per tool).
fn session_drift<'s>(state: &'s Shared, session_id: Option<&str>) -> Option<std::borrow::Cow<'s, Drift>> {
    if let Some(row) = session_id.and_then(|sid| state.session_rows.lock().expect("session rows").get(sid).cloned()) {
        return state.toolkit.instances.get(&row).map(std::borrow::Cow::Borrowed);
    }
    state
        .toolkit
        .drift
        .as_ref()
        .filter(|d| d.scope == Scope::Tool)
        .map(std::borrow::Cow::Borrowed)
}

/// Why a SLOT/SEL call is refused under drift ([`check_tool_call`]).
pub(super) enum Refused {
    /// An A_old name that no longer exists in the session's A_new (the message).
    NotFound(String),
    /// A_new arguments that do not validate (FastAPI-shaped `detail` entries).
    Invalid(Vec<Json>),
}

/// A SLOT/SEL call under drift, in session `session_id` (HTTP `POST /tools/{name}` and MCP
/// `tools/call` alike): `Ok((name, arguments))` of the A_old call to run (unchanged when the
/// session's A_new does not drift the tool), else why it is refused.
pub(super) fn check_tool_call(
    state: &Shared,
    session_id: Option<&str>,
    name: String,
    arguments: Map<String, Json>,
) -> Result<(String, Map<String, Json>), Refused> {
    let Some(d) = session_drift(state, session_id) else {
        return Ok((name, arguments));
    };
    match d.check_body(&name, &arguments, "") {
        Ok(Some(old)) => Ok((old.name, old.arguments)),
        Ok(None) => Ok((name, arguments)),
        Err(None) => Err(Refused::NotFound(format!(
            "no tool named {name:?} in {}",
            state.toolkit.name
        ))),
        Err(Some(errors)) => Err(Refused::Invalid(errors)),
    }
}

/// [`check_tool_call`] for the HTTP route: a refusal as the 404 or 422 response.
pub(super) fn tool_call(
    state: &Shared,
    session_id: Option<&str>,
    name: String,
    arguments: Map<String, Json>,
) -> Result<(String, Map<String, Json>), Response> {
    check_tool_call(state, session_id, name, arguments).map_err(|r| match r {
        Refused::NotFound(m) => detail(StatusCode::NOT_FOUND, m),
        Refused::Invalid(errors) => unprocessable(errors),
    })
}

/// Whether `name` is an A_new tool name in session `session_id`.
pub(super) fn is_a_new_tool(state: &Shared, session_id: Option<&str>, name: &str) -> bool {
    session_drift(state, session_id).is_some_and(|d| d.by_new_name(None, name).is_some())
}
