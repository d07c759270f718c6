//! SLOT/SEL sessions, the blocking cores both interfaces call for them (split from
//! [`super::state`], which re-exports them): `open_session` (the join step under the join budget
//! and the server's memory budget), `run_tool` (a tool call refused before it is built past the
//! session's budget or the server's, run under `--timeout-ms` and stopped when its client goes
//! away), the server-wide reservation with the eviction of idle sessions
//! ([`super::memory`]), and the checks of a join step's arguments.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::StatusCode;
use serde_json::{Value as Json, json};

use super::budget::Held;
use super::memory::Reservation;
use super::state::{AppState, CallError, known_tool};
use crate::tools::Call;
use crate::tools::executor::{Preview, Session, StepError, Value, value_json};

/// Opens a SLOT/SEL session from `{"id"}` or `{"arguments"}` (blocking: runs the join step, and
/// for an example with `additional_setup_steps` those too, each stored under its label). Answers
/// `{session_id, label, output}` of the join step, plus `additional_setup_steps: [{label, output}]`
/// when the example has further setup steps.
pub(crate) fn open_session(state: &AppState, body: &Json) -> Result<Json, CallError> {
    let setups = if let Some(id) = body.get("id").and_then(Json::as_str) {
        match state.toolkit.setups.get(id) {
            Some(c) => c.clone(),
            None => {
                return Err((
                    StatusCode::NOT_FOUND,
                    format!("no example with id {id:?} in {}", state.toolkit.name),
                ));
            }
        }
    } else if let Some(args) = body.get("arguments").and_then(Json::as_object) {
        database_file(state, args)?;
        if !state.config.allow_ad_hoc_joins && !state.toolkit.join_shapes.contains(&join_shape(args)) {
            return Err((
                StatusCode::FORBIDDEN,
                format!(
                    "this join is not one of the setup steps of {} (the server runs only those; start it with --allow-ad-hoc-joins to run others)",
                    state.toolkit.name
                ),
            ));
        }
        vec![Call {
            name: "initialize_active_data".into(),
            arguments: args.clone(),
            label: "starting_table_var".into(),
        }]
    } else {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            "body must be {\"id\": <example id>} or {\"arguments\": {<initialize_active_data arguments>}}".into(),
        ));
    };
    let mut session = Session::default();
    let mut outs = Vec::new();
    for setup in &setups {
        outs.push(run_setup(state, &mut session, setup)?);
    }
    let id = session_id(state);
    let mut sessions = state.sessions.lock().expect("sessions");
    if sessions.len() >= state.config.max_sessions {
        if let Some(oldest) = sessions.iter().min_by_key(|(_, (t, _))| *t).map(|(k, _)| k.clone()) {
            sessions.remove(&oldest);
        }
    }
    sessions.insert(id.clone(), (Instant::now(), Arc::new(Mutex::new(Held::new(session)))));
    let mut answer = json!({"session_id": id, "label": setups[0].label, "output": outs[0]});
    if setups.len() > 1 {
        answer["additional_setup_steps"] = setups[1..]
            .iter()
            .zip(&outs[1..])
            .map(|(s, o)| json!({"label": s.label, "output": o}))
            .collect();
    }
    Ok(answer)
}

/// A join step's shape: its database path, tables and conditions as canonical JSON (what
/// tells two join steps apart; ad-hoc joins are checked against the dataset's shapes).
pub fn join_shape(arguments: &serde_json::Map<String, Json>) -> String {
    serde_json::to_string(&[
        arguments.get("database_path"),
        arguments.get("condition_sequence"),
        arguments.get("alias_to_table_dict"),
    ])
    .unwrap_or_default()
}

/// The database file a join step's `database_path` names: 422 when the path is not a relative
/// `.sqlite` path inside the root ([`check_path`]) or no such file exists (the message shows the
/// root as `<databases>`).
fn database_file(state: &AppState, arguments: &serde_json::Map<String, Json>) -> Result<PathBuf, CallError> {
    check_path(arguments)?;
    let rel = arguments
        .get("database_path")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let path = state.toolkit.database_root.join(rel);
    if !path.is_file() {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            state.redact(format!("{}: no such database file", path.display())),
        ));
    }
    Ok(path)
}

/// Rejects a `database_path` that is not a relative `.sqlite` path inside the root (422).
fn check_path(arguments: &serde_json::Map<String, Json>) -> Result<(), CallError> {
    let db_path = arguments
        .get("database_path")
        .and_then(Json::as_str)
        .unwrap_or_default();
    if db_path.split(['/', '\\']).any(|c| c == "..") {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("database_path {db_path:?} is rejected: `..` would leave the database root (path traversal)"),
        ));
    }
    if !safe_database_path(db_path) {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("database_path {db_path:?} must be a relative path to a .sqlite file inside the database root"),
        ));
    }
    Ok(())
}

/// Runs one setup step into `session` and returns its first rows as JSON. A join step runs
/// under the join budget ([`crate::tools::table::join_at_within`]: 413 past the rows or bytes,
/// 504 past `--timeout-ms`, 422 for a join that fails) and shares the process's cached table
/// ([`crate::tools::join_cache`], bounded by bytes; a session's clone is released with it).
fn run_setup(state: &AppState, session: &mut Session, setup: &Call) -> Result<Json, CallError> {
    if setup.name != "initialize_active_data" {
        let v = state
            .executor
            .step(session, setup)
            .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, state.redact(e)))?;
        return Ok(value_json(v, 5));
    }
    let invalid = |m: String| (StatusCode::UNPROCESSABLE_ENTITY, m);
    let conditions: Vec<crate::tools::table::JoinCondition> =
        serde_json::from_value(setup.arguments.get("condition_sequence").cloned().unwrap_or(Json::Null))
            .map_err(|e| invalid(format!("condition_sequence: {e}")))?;
    let aliases = setup
        .arguments
        .get("alias_to_table_dict")
        .and_then(Json::as_object)
        .ok_or_else(|| invalid("`alias_to_table_dict` must be an object".into()))?;
    if let Some(c) = conditions
        .iter()
        .find(|c| !["INNER", "LEFT"].iter().any(|k| c.2.eq_ignore_ascii_case(k)))
    {
        return Err(invalid(format!(
            "condition_sequence: join type {:?} is not one of INNER, LEFT",
            c.2
        )));
    }
    let tables = crate::tools::table::join_tables(aliases).map_err(|e| invalid(e.to_string()))?;
    let path = database_file(state, &setup.arguments)?;
    let rel = setup
        .arguments
        .get("database_path")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let budget = crate::tools::table::JoinBudget {
        max_rows: state.config.max_join_rows,
        max_bytes: state.config.max_join_bytes,
        timeout: state.config.timeout,
    };
    use crate::tools::table::JoinRefused;
    // The table's growth is reserved from the server's budget while it is built; once cached
    // it is counted as a held join ([`crate::tools::join_cache::held_bytes`]).
    let mut growing = state.memory.empty();
    let mut admit = |bytes: usize| {
        while !growing.resize(bytes) {
            if !end_idle_session(state, None) {
                return false;
            }
        }
        true
    };
    let busy_mib = state.memory.limit() >> 20;
    let made = crate::tools::table::join_at_within(&path, &tables, &conditions, budget, &mut admit, busy_mib);
    drop(growing);
    let table = made.map_err(|e| match e {
        JoinRefused::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, e.to_string()),
        JoinRefused::ServerBusy(_) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        JoinRefused::Failed(m) => invalid(state.redact(format!("join step on {rel}: {m}"))),
        _ => (StatusCode::PAYLOAD_TOO_LARGE, e.to_string()),
    })?;
    let table = Value::Table(table);
    let out = value_json(&table, 5);
    session.insert(&setup.label, table);
    Ok(out)
}

/// Runs one SLOT/SEL tool in a session (blocking); `label` defaults to `<name>_<n>`. The call
/// runs under the session's output budget, the argument limits, `--timeout-ms` and `cancel`
/// (set when the client went away) ([`crate::tools::executor::limits`]). `render` makes the
/// answer from the label and the output while the session is still held (HTTP: the counted
/// JSON text, [`tool_reply`]; MCP: its JSON value).
pub(crate) fn run_tool<T>(
    state: &AppState,
    name: &str,
    session_id: &str,
    arguments: serde_json::Map<String, Json>,
    label: Option<String>,
    cancel: Option<Arc<AtomicBool>>,
    render: impl FnOnce(&str, Option<&Value>) -> Result<T, CallError>,
) -> Result<T, CallError> {
    if !known_tool(&state.toolkit, name) {
        return Err((
            StatusCode::NOT_FOUND,
            format!("no tool named {name:?} in {}", state.toolkit.name),
        ));
    }
    let session = {
        let mut sessions = state.sessions.lock().expect("sessions");
        match sessions.get_mut(session_id) {
            Some((t, s)) => {
                *t = Instant::now();
                s.clone()
            }
            None => {
                return Err((
                    StatusCode::NOT_FOUND,
                    format!("unknown or expired session {session_id:?}"),
                ));
            }
        }
    };
    let labelled = label.is_some();
    let label = label.unwrap_or_else(|| {
        format!(
            "{name}_{}",
            state.counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        )
    });
    let call = Call {
        name: name.to_string(),
        arguments,
        label,
    };
    let mut held = session.lock().expect("session");
    let budget = state.config.session_budget;
    if let Err(e) = crate::tools::executor::limits::check_arguments(&call.name, &call.arguments) {
        return Err(step_refusal(state, e));
    }
    // Before anything is built: an output past the session's budget, or a working set past the
    // whole server's, is 413; a working set the server cannot hold now is 503.
    let estimate = state.executor.estimate(&held.session, &call);
    if estimate.grows && estimate.output > budget.max_bytes {
        return Err(step_refusal(
            state,
            StepError::OverBudget {
                tool: call.name.clone(),
                estimate: estimate.output,
                max: budget.max_bytes,
            },
        ));
    }
    if estimate.working > state.memory.limit() {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "`{}` could hold up to {} MiB while it runs, over the server's memory budget of {} MiB (--max-server-mib); narrow the call",
                call.name,
                estimate.working >> 20,
                state.memory.limit() >> 20
            ),
        ));
    }
    let reserved = reserve(state, estimate.working, Some(session_id))?;
    let limits = crate::tools::executor::Limits {
        max_output_bytes: Some(budget.max_bytes),
        check_arguments: true,
        deadline: Some(Instant::now() + state.config.timeout),
        cancel,
    };
    if let Err(e) = state.executor.step_within(&mut held.session, &call, &limits) {
        return Err(step_refusal(state, e));
    }
    held.admit(&call.label, labelled, budget, Some(reserved))
        .map_err(|m| (StatusCode::PAYLOAD_TOO_LARGE, m))?;
    render(&call.label, held.session.get(&call.label))
}

/// A tool call's answer, `{"label", "output"}`, with the output's preview
/// ([`crate::tools::executor::Preview`], at most `--max-rows` rows).
#[derive(serde::Serialize)]
pub(crate) struct ToolAnswer<'a> {
    label: &'a str,
    output: Option<Preview<'a>>,
}

impl<'a> ToolAnswer<'a> {
    /// The answer of the call labelled `label` with output `output`.
    pub(crate) fn new(state: &AppState, label: &'a str, output: Option<&'a Value>) -> ToolAnswer<'a> {
        ToolAnswer {
            label,
            output: output.map(|value| Preview {
                value,
                max_rows: state.config.max_rows,
            }),
        }
    }
}

/// [`run_tool`]'s `render` for HTTP: the answer's JSON text, counted in the server's budget
/// until it is sent ([`super::reply`]).
pub(crate) fn tool_reply(
    state: &AppState,
    session_id: &str,
) -> impl FnOnce(&str, Option<&Value>) -> Result<super::reply::Reply, CallError> {
    move |label, output| {
        super::reply::Reply::json(
            state,
            &ToolAnswer::new(state, label, output),
            "the tool's answer",
            Some(session_id),
        )
    }
}

/// `bytes` reserved from the server's budget ([`super::memory`]): past it, the least recently
/// used idle sessions other than `caller`'s are ended one at a time, then the cached joins no
/// session holds let go of; when that is not enough, 503 (the response carries `Retry-After`).
pub(crate) fn reserve(state: &AppState, bytes: usize, caller: Option<&str>) -> Result<Reservation, CallError> {
    let mut r = state.memory.empty();
    grow(state, &mut r, bytes, caller)?;
    Ok(r)
}

/// Makes `r` hold `bytes`, ending idle sessions and letting go of unheld cached joins as
/// [`reserve`] does; 503 when that is not enough (`r` unchanged).
pub(crate) fn grow(state: &AppState, r: &mut Reservation, bytes: usize, caller: Option<&str>) -> Result<(), CallError> {
    let mut released_cache = false;
    while !r.resize(bytes) {
        if end_idle_session(state, caller) {
            continue;
        }
        if !released_cache {
            released_cache = true;
            if crate::tools::join_cache::release_unheld() > 0 {
                continue;
            }
        }
        return Err(server_busy(state, bytes));
    }
    Ok(())
}

/// The 503 of a request the server's memory budget cannot hold now.
pub(crate) fn server_busy(state: &AppState, bytes: usize) -> CallError {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "the server is at its memory budget of {} MiB (--max-server-mib; {} MiB in use) and this call needs up to {} MiB; retry later",
            state.memory.limit() >> 20,
            state.memory.used() >> 20,
            bytes >> 20
        ),
    )
}

/// Ends the least recently used session that is not `caller`'s and is not running a call;
/// `false` when there is none.
fn end_idle_session(state: &AppState, caller: Option<&str>) -> bool {
    let mut sessions = state.sessions.lock().expect("sessions");
    let victim = sessions
        .iter()
        .filter(|(id, (_, s))| Some(id.as_str()) != caller && s.try_lock().is_ok())
        .min_by_key(|(_, (t, _))| *t)
        .map(|(k, _)| k.clone());
    victim.is_some_and(|k| sessions.remove(&k).is_some())
}

/// A call the executor refused or stopped, as the HTTP status and message a client gets: 413
/// past the output budget (`--max-session-mib`) or an argument limit, 504 past `--timeout-ms`,
/// 422 for wrong arguments.
fn step_refusal(state: &AppState, e: StepError) -> CallError {
    match e {
        StepError::Invalid(m) => (StatusCode::UNPROCESSABLE_ENTITY, state.redact(m)),
        e @ StepError::OverBudget { .. } => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{e}: the session's budget (--max-session-mib); narrow the call"),
        ),
        StepError::ArgumentTooLarge(m) => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("{m} (the server's argument limits, `toolforge serve --help`)"),
        ),
        StepError::TimedOut => (
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "the call ran longer than the {} ms limit (--timeout-ms) and was stopped",
                state.config.timeout.as_millis()
            ),
        ),
        StepError::Cancelled => (StatusCode::SERVICE_UNAVAILABLE, "the call was cancelled".into()),
    }
}

/// Sets its flag when dropped: held by an async handler, so the blocking call it started sees
/// the handler go away (the client disconnected, or the answer was sent) and stops.
pub(crate) struct CancelOnDrop(pub(crate) Arc<AtomicBool>);

impl CancelOnDrop {
    /// A new guard and the flag to hand to the blocking call.
    pub(crate) fn new() -> (CancelOnDrop, Arc<AtomicBool>) {
        let flag = Arc::new(AtomicBool::new(false));
        (CancelOnDrop(flag.clone()), flag)
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn session_id(state: &AppState) -> String {
    let n = state.counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    blake3::hash(format!("{n}:{nanos}:{}", std::process::id()).as_bytes()).to_hex()[..24].to_string()
}

/// A relative `<db>/<db>.sqlite`-style path inside the database root (no `..`, not absolute).
fn safe_database_path(p: &str) -> bool {
    let path = Path::new(p);
    !p.is_empty()
        && path.is_relative()
        && path.components().all(|c| matches!(c, std::path::Component::Normal(_)))
        && p.ends_with(".sqlite")
}
