//! `toolforge serve`: the live tool server of a built dataset (axum on tokio).
//!
//! | route                      | what                                                                 |
//! |----------------------------|----------------------------------------------------------------------|
//! | `GET <endpoint path>`      | REST datasets: run the endpoint's SQL with the query parameters bound; 200 with the rows (JSON array of arrays), 422 with FastAPI's `{"detail": [...]}` for missing or mistyped parameters |
//! | `POST /sessions`           | SLOT/SEL: run an instance's join step (`{"id": "<example id>"}` or `{"arguments": {<initialize_active_data arguments>}}`), returns `{"session_id", "label", "output"}` |
//! | `POST /tools/{name}`       | SLOT/SEL: `{"session_id", "arguments", "label"?}` runs one tool in the session; `$LABEL$` arguments refer to earlier outputs of that session |
//! | `DELETE /sessions/{id}`    | end a session                                                        |
//! | `GET /openapi.json`        | the dataset's OpenAPI document                                       |
//! | `GET /healthz`             | `{"status": "ok", ...}`                                              |
//! | `/mcp`                     | the same tools over MCP, streamable HTTP ([`crate::mcp`]); `--mcp` serves MCP on stdio instead |
//!
//! When the dataset has schema drift (`tools/drift.json`), A_new is enforced on the HTTP routes:
//! see [`Toolkit::drift`].
//!
//! Anything else is 404 `{"detail": "Not Found"}` (FastAPI's body).
//!
//! **Fault injection** (ToolGym's state controller, the same kinds as the trajectory corpora):
//! a request to a tool or endpoint with header `X-Toolforge-Fault: <kind>`, or a random share
//! `--fault-rate` of them, gets the fault instead of (or on top of) its answer: `timeout` (504),
//! `rate_limit` (429 with `Retry-After: 1`), `unavailable` (503), `truncated_result` /
//! `corrupted_result` (200 with the body cut in half / garbled), `session_expired` (the session is
//! ended, 404). The response carries `X-Toolforge-Fault-Injected: <kind>`. Databases are opened
//! read-only; every query runs under a time limit (504 past it) and a row cap (413 past it);
//! request bodies over 64 KiB get 413 and URIs over 8 KiB get 414. SIGINT/SIGTERM stop
//! accepting connections and let running requests finish.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value as Json, json};

use crate::emit::{database_root, read_manifest, read_rows};
use crate::tools::executor::{Executor, Session, value_json};
use crate::tools::rest::{Endpoint, Limits, RunError};
use crate::tools::{Call, ToolSpec};

/// Server limits and address.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Bind address (default 127.0.0.1:8000).
    pub addr: SocketAddr,
    /// Per-query time limit.
    pub timeout: Duration,
    /// Most rows a REST response or a tool output preview carries.
    pub max_rows: usize,
    /// Most live sessions; the least recently used is ended past it.
    pub max_sessions: usize,
    /// Share of tool/endpoint requests (0–1) that get a random injected fault.
    pub fault_rate: f64,
    /// Seed of the random fault choice.
    pub fault_seed: u64,
}

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig {
            addr: ([127, 0, 0, 1], 8000).into(),
            timeout: Limits::default().timeout,
            max_rows: Limits::default().max_rows,
            max_sessions: 1_000,
            fault_rate: 0.0,
            fault_seed: 0,
        }
    }
}

/// What a built dataset serves.
pub struct Toolkit {
    /// Dataset name.
    pub name: String,
    /// Dataset format (`slot`, `sel`, `rest`).
    pub format: String,
    /// REST endpoints.
    pub endpoints: Vec<Endpoint>,
    /// The dataset-level tool catalog.
    pub catalog: Vec<ToolSpec>,
    /// The OpenAPI document served at `/openapi.json`.
    pub openapi: Json,
    /// Directory holding `<db>/<db>.sqlite`.
    pub database_root: PathBuf,
    /// Each example's join step, by example id (SLOT/SEL sessions).
    pub setups: HashMap<String, Call>,
    /// Schema drift (`tools/drift.json`), when the dataset has it: the server then enforces
    /// A_new — drifted REST endpoints answer at their A_new path with A_new query parameters,
    /// drifted tools under their A_new name with A_new arguments (JSON Schema validation, 422
    /// in FastAPI's shape naming the field), and calls are un-migrated before they run
    /// ([`crate::variants::drift`]).
    pub drift: Option<crate::variants::drift::Drift>,
}

impl Toolkit {
    /// Loads a built dataset directory (`out/<recipe>`); `databases` overrides the database root.
    pub fn load(dir: &Path, databases: Option<&Path>) -> Result<Toolkit> {
        let manifest = read_manifest(dir)?;
        let format = manifest["format"].as_str().unwrap_or("slot").to_string();
        let name = manifest["dataset"].as_str().unwrap_or_default().to_string();
        if !["slot", "sel", "rest"].contains(&format.as_str()) {
            bail!("{}: format {format:?} has no executable tools to serve", dir.display());
        }
        let read = |rel: &str| -> Result<Json> {
            let p = dir.join(rel);
            serde_json::from_slice(&std::fs::read(&p).with_context(|| format!("reading {}", p.display()))?)
                .with_context(|| format!("parsing {}", p.display()))
        };
        let functions = read("tools/functions.json")?;
        let catalog: Vec<ToolSpec> = functions
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| ToolSpec {
                        name: f["function"]["name"].as_str().unwrap_or_default().into(),
                        description: f["function"]["description"].as_str().unwrap_or_default().into(),
                        parameters: f["function"]["parameters"].clone(),
                        output_parameters: json!({}),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let (endpoints, openapi, setups) = if format == "rest" {
            let endpoints: Vec<Endpoint> = serde_json::from_value(read("tools/endpoints.json")?)?;
            (endpoints, read("tools/openapi.json")?, HashMap::new())
        } else {
            let setups = read_rows(dir)?
                .into_iter()
                .filter_map(|r| {
                    let (setup, _) = crate::tools::setup_and_calls(r.initialization_step.as_ref(), &r.output);
                    Some((r.id.clone(), setup?.clone()))
                })
                .collect();
            (
                vec![],
                crate::openapi::tools_document(&name, env!("CARGO_PKG_VERSION"), &catalog),
                setups,
            )
        };
        let drift = if dir.join("tools/drift.json").is_file() {
            Some(serde_json::from_value(read("tools/drift.json")?).context("parsing tools/drift.json")?)
        } else {
            None
        };
        Ok(Toolkit {
            drift,
            name,
            format,
            endpoints,
            catalog,
            openapi,
            database_root: database_root(dir, databases)?,
            setups,
        })
    }
}

/// The server's shared state (HTTP handlers and the MCP server).
pub(crate) struct AppState {
    pub(crate) toolkit: Toolkit,
    config: ServeConfig,
    executor: Executor,
    pool: Mutex<HashMap<String, Vec<rusqlite::Connection>>>,
    sessions: Mutex<HashMap<String, (Instant, Arc<Mutex<Session>>)>>,
    counter: std::sync::atomic::AtomicU64,
}

pub(crate) type Shared = Arc<AppState>;

fn detail(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({"detail": message.into()}))).into_response()
}

impl AppState {
    fn connection(&self, db: &str) -> Result<rusqlite::Connection, CallError> {
        if let Some(c) = self.pool.lock().expect("pool").get_mut(db).and_then(Vec::pop) {
            return Ok(c);
        }
        let path = self.toolkit.database_root.join(db).join(format!("{db}.sqlite"));
        crate::tools::table::open_read_only(&path).map_err(|e| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("database {db} unavailable: {e}"),
            )
        })
    }

    fn give_back(&self, db: &str, conn: rusqlite::Connection) {
        let mut pool = self.pool.lock().expect("pool");
        let v = pool.entry(db.to_string()).or_default();
        if v.len() < 16 {
            v.push(conn);
        }
    }
}

/// A failed tool or endpoint call: HTTP status and message (the MCP server reports the message
/// as a tool error).
pub(crate) type CallError = (StatusCode, String);

/// Runs REST endpoint `index` with validated `values` (blocking: SQLite).
pub(crate) fn run_endpoint(
    state: &AppState,
    index: usize,
    values: &[Json],
) -> Result<crate::verify::Answer, CallError> {
    let ep = &state.toolkit.endpoints[index];
    let mut conn = state.connection(&ep.db_id)?;
    let limits = Limits {
        timeout: state.config.timeout,
        max_rows: state.config.max_rows,
    };
    let r = ep.execute(&mut conn, values, limits);
    state.give_back(&ep.db_id, conn);
    r.map_err(|e| match e {
        RunError::Timeout(ms) => (
            StatusCode::GATEWAY_TIMEOUT,
            format!("the query ran longer than the {ms} ms limit"),
        ),
        RunError::TooLarge(n) => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the result has more than {n} rows (response-size cap); narrow the parameters"),
        ),
        RunError::Database(e) => (StatusCode::INTERNAL_SERVER_ERROR, format!("query failed: {e}")),
    })
}

/// Opens a SLOT/SEL session from `{"id"}` or `{"arguments"}` (blocking: runs the join step).
pub(crate) fn open_session(state: &AppState, body: &Json) -> Result<Json, CallError> {
    let setup = if let Some(id) = body.get("id").and_then(Json::as_str) {
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
        Call {
            name: "initialize_active_data".into(),
            arguments: args.clone(),
            label: "starting_table_var".into(),
        }
    } else {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            "body must be {\"id\": <example id>} or {\"arguments\": {<initialize_active_data arguments>}}".into(),
        ));
    };
    let db_path = setup
        .arguments
        .get("database_path")
        .and_then(Json::as_str)
        .unwrap_or_default();
    if !safe_database_path(db_path) {
        return Err((
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("database_path {db_path:?} must be a relative path to a .sqlite file inside the database root"),
        ));
    }
    let mut session = Session::default();
    let out = state
        .executor
        .step(&mut session, &setup)
        .map(|v| value_json(v, 5))
        .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e))?;
    let id = session_id(state);
    let mut sessions = state.sessions.lock().expect("sessions");
    if sessions.len() >= state.config.max_sessions {
        if let Some(oldest) = sessions.iter().min_by_key(|(_, (t, _))| *t).map(|(k, _)| k.clone()) {
            sessions.remove(&oldest);
        }
    }
    sessions.insert(id.clone(), (Instant::now(), Arc::new(Mutex::new(session))));
    Ok(json!({"session_id": id, "label": setup.label, "output": out}))
}

/// Runs one SLOT/SEL tool in a session (blocking); `label` defaults to `<name>_<n>`.
pub(crate) fn run_tool(
    state: &AppState,
    name: &str,
    session_id: &str,
    arguments: serde_json::Map<String, Json>,
    label: Option<String>,
) -> Result<Json, CallError> {
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
    let mut session = session.lock().expect("session");
    match state.executor.step(&mut session, &call) {
        Ok(v) => Ok(json!({"label": call.label, "output": value_json(v, state.config.max_rows)})),
        Err(e) => Err((StatusCode::UNPROCESSABLE_ENTITY, e)),
    }
}

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

fn known_tool(toolkit: &Toolkit, name: &str) -> bool {
    toolkit.catalog.iter().any(|t| t.name == name)
        || (toolkit.format == "sel" && name.starts_with("get_") && name.ends_with('s'))
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

/// Injects the fault a request asks for (header) or draws (`fault_rate`); see the module doc.
async fn inject_fault(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let is_tool = path.starts_with("/tools/") || state.toolkit.endpoints.iter().any(|e| e.path == path);
    if !is_tool {
        return next.run(req).await;
    }
    let asked = req
        .headers()
        .get("x-toolforge-fault")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let kind = match asked {
        Some(k) if crate::trajectory::FAULT_KINDS.contains(&k.as_str()) => Some(k),
        Some(k) => {
            return detail(
                StatusCode::BAD_REQUEST,
                format!("unknown fault {k:?}; one of {:?}", crate::trajectory::FAULT_KINDS),
            );
        }
        None if state.config.fault_rate > 0.0 => {
            let n = state.counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let h = blake3::hash(format!("{}:{n}", state.config.fault_seed).as_bytes());
            let x = u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"));
            ((x % 1_000_000) as f64 / 1_000_000.0 < state.config.fault_rate).then(|| {
                let kinds = &crate::trajectory::FAULT_KINDS;
                kinds[((x >> 32) % kinds.len() as u64) as usize].to_string()
            })
        }
        None => None,
    };
    let Some(kind) = kind else {
        return next.run(req).await;
    };
    let mut resp = match kind.as_str() {
        "timeout" => detail(
            StatusCode::GATEWAY_TIMEOUT,
            "the tool did not answer in time (injected fault)",
        ),
        "rate_limit" => {
            let mut r = detail(
                StatusCode::TOO_MANY_REQUESTS,
                "too many requests; retry after 1 s (injected fault)",
            );
            r.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("1"));
            r
        }
        "unavailable" => detail(
            StatusCode::SERVICE_UNAVAILABLE,
            "the service is temporarily unavailable (injected fault)",
        ),
        "session_expired" => {
            let (parts, body) = req.into_parts();
            let bytes = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
            let sid = serde_json::from_slice::<Json>(&bytes)
                .ok()
                .and_then(|b| b["session_id"].as_str().map(String::from));
            match sid {
                Some(sid) => {
                    state.sessions.lock().expect("sessions").remove(&sid);
                    detail(
                        StatusCode::NOT_FOUND,
                        format!("session {sid:?} expired (injected fault); create a new one with POST /sessions"),
                    )
                }
                None => {
                    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                        .await
                }
            }
        }
        _ => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let out = if kind == "truncated_result" {
                let cut = text.char_indices().nth(text.chars().count() / 2).map_or(0, |(i, _)| i);
                text[..cut].to_string()
            } else {
                let garbled: String = text
                    .chars()
                    .map(|c| if c.is_ascii_digit() || c == '"' { '\u{fffd}' } else { c })
                    .collect();
                format!("\u{fffd}{garbled}")
            };
            parts.headers.remove(axum::http::header::CONTENT_LENGTH);
            Response::from_parts(parts, axum::body::Body::from(out))
        }
    };
    resp.headers_mut().insert(
        "x-toolforge-fault-injected",
        axum::http::HeaderValue::from_str(&kind).expect("ascii kind"),
    );
    resp
}

async fn limit_uri(req: Request, next: Next) -> Response {
    if req.uri().to_string().len() > 8192 {
        return detail(StatusCode::URI_TOO_LONG, "request URI longer than 8192 bytes");
    }
    next.run(req).await
}

/// The shared state over a loaded toolkit.
pub(crate) fn state(toolkit: Toolkit, config: ServeConfig) -> Shared {
    let executor = Executor::new(&toolkit.database_root);
    Arc::new(AppState {
        toolkit,
        config,
        executor,
        pool: Mutex::new(HashMap::new()),
        sessions: Mutex::new(HashMap::new()),
        counter: std::sync::atomic::AtomicU64::new(0),
    })
}

/// The server's routes over a loaded toolkit (the MCP streamable-HTTP endpoint at `/mcp`).
pub fn router(toolkit: Toolkit, config: ServeConfig) -> Router {
    let state = state(toolkit, config);
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
        .nest_service("/mcp", crate::mcp::streamable_http(state.clone()))
        .fallback(|| async { detail(StatusCode::NOT_FOUND, "Not Found") })
        .layer(middleware::from_fn_with_state(state.clone(), inject_fault))
        .layer(DefaultBodyLimit::max(64 * 1024))
        .layer(middleware::from_fn(limit_uri))
        .with_state(state)
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// Serves `toolkit` on `config.addr` until SIGINT/SIGTERM; prints the bound address first (one
/// line, `listening on http://<addr>`), so `--port 0` can be used by tests.
pub fn run(toolkit: Toolkit, config: ServeConfig) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.addr)
            .await
            .with_context(|| format!("binding {}", config.addr))?;
        let addr = listener.local_addr()?;
        println!(
            "toolforge serve: {} ({}, {} endpoints, {} tools) listening on http://{addr}",
            toolkit.name,
            toolkit.format,
            toolkit.endpoints.len(),
            toolkit.catalog.len()
        );
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        axum::serve(listener, router(toolkit, config))
            .with_graceful_shutdown(shutdown_signal())
            .await?;
        eprintln!("toolforge serve: stopped");
        Ok(())
    })
}

/// Starts the server on an ephemeral 127.0.0.1 port in a background thread; returns its address.
/// The server lives as long as the process.
pub fn spawn(toolkit: Toolkit, mut config: ServeConfig) -> Result<SocketAddr> {
    config.addr = ([127, 0, 0, 1], 0).into();
    let listener = std::net::TcpListener::bind(config.addr)?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let _ = axum::serve(listener, router(toolkit, config)).await;
        });
    });
    Ok(addr)
}

/// Verifies every row of a built REST dataset through the live server: starts it on 127.0.0.1,
/// sends each gold call as an HTTP GET with its arguments as query parameters, and compares the
/// response rows with `gold_answer`. Returns (passed, failed).
pub fn verify_live(dir: &Path, databases: Option<&Path>) -> Result<(usize, usize)> {
    let toolkit = Toolkit::load(dir, databases)?;
    if toolkit.format != "rest" {
        bail!("{}: verify_live is for REST datasets", dir.display());
    }
    // Function names are unique per database.
    let paths: HashMap<(String, String), String> = toolkit
        .endpoints
        .iter()
        .map(|e| ((e.db_id.clone(), e.name.clone()), e.path.clone()))
        .collect();
    let rows = read_rows(dir)?;
    let addr = spawn(toolkit, ServeConfig::default())?;
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let (mut ok, mut bad) = (0, 0);
    for row in rows {
        let (Some(call), Some(gold)) = (row.output.first(), &row.gold_answer) else {
            continue;
        };
        if row.variant_of.is_some() {
            continue;
        }
        let Some(path) = paths.get(&(row.db_id.clone().unwrap_or_default(), call.name.clone())) else {
            eprintln!("{}: no endpoint {}", row.id, call.name);
            bad += 1;
            continue;
        };
        let mut req = agent.get(format!("http://{addr}{path}"));
        for (k, v) in &call.arguments {
            let text = match v {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            };
            req = req.query(k, &text);
        }
        let result = req.call().map_err(anyhow::Error::from).and_then(|mut resp| {
            let status = resp.status();
            let body: Json = resp.body_mut().read_json()?;
            if status != 200 {
                bail!("HTTP {status}: {body}");
            }
            Ok(serde_json::from_value::<crate::verify::Answer>(body)?)
        });
        match result {
            Ok(got) if crate::verify::answers_match(gold, &got, row.ordered) => ok += 1,
            Ok(_) => {
                eprintln!("{}: live response differs from gold_answer", row.id);
                bad += 1;
            }
            Err(e) => {
                eprintln!("{}: {e:#}", row.id);
                bad += 1;
            }
        }
    }
    Ok((ok, bad))
}
