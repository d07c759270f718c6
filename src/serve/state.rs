//! The server's state, shared by the HTTP routes ([`super::http`]) and the MCP server
//! ([`super::mcp`]): the loaded [`Toolkit`] of a built dataset, the [`ServeConfig`] limits, the
//! read-only connection pool, the SLOT/SEL sessions (LRU-capped), and the blocking cores both
//! interfaces call — `run_endpoint`, `open_session`, `run_tool` — which report failures as
//! a `CallError` (HTTP status and message; FastAPI's `{"detail": message}` body over HTTP, a
//! tool error over MCP).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value as Json, json};

use super::budget::{Held, SessionBudget};
use crate::emit::{database_root, read_manifest, read_rows};
use crate::tools::executor::{Executor, Session, Value, value_json};
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
    /// Budget of a session's join steps (rows estimated before materialising, bytes while
    /// materialising; the time limit is `timeout`).
    pub max_join_rows: u64,
    /// Bytes a join step's table may take while materialising.
    pub max_join_bytes: usize,
    /// Whether `POST /sessions {"arguments"}` may run joins other than the dataset's setup steps.
    pub allow_ad_hoc_joins: bool,
    /// Budget of one session's results ([`super::budget`]).
    pub session_budget: SessionBudget,
    /// Limits of the HTTP server's connections ([`super::listen`]).
    pub connections: super::listen::ConnectionLimits,
    /// Bearer token every request must carry, when set ([`super::exposure`]).
    pub token: Option<String>,
    /// Host names accepted in `Host` besides the loopback names and the bound address.
    pub allowed_hosts: Vec<String>,
    /// Origins a browser page may call the server from (CORS; empty: none, `*`: any).
    pub cors_origins: Vec<String>,
    /// Most open MCP-over-HTTP sessions (`initialize` past it gets 503, [`super::mcp::limit_sessions`]).
    pub max_mcp_sessions: usize,
    /// Idle time after which rmcp closes an MCP-over-HTTP session.
    pub mcp_session_idle: Duration,
    /// Whether requests may ask for a fault (`X-Toolforge-Fault`, [`super::faults`]); a
    /// `fault_rate` above 0 enables it too.
    pub faults: bool,
    /// Open-world mode (ToolGym): MCP `tools/list` shows only `search_tools` and `call_tool`
    /// (and `create_session`), every catalog tool still callable ([`super::search`]).
    pub open_world: bool,
    /// Time without a request after which the server lets go of its pooled SQLite connections
    /// and the cached joins no session holds ([`AppState::release_idle`]); `None`: never.
    pub release_idle: Option<Duration>,
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
            max_join_rows: 5_000_000,
            max_join_bytes: 512 << 20,
            allow_ad_hoc_joins: false,
            session_budget: SessionBudget {
                max_results: 256,
                max_bytes: 64 << 20,
            },
            connections: Default::default(),
            token: None,
            allowed_hosts: Vec::new(),
            cors_origins: Vec::new(),
            faults: false,
            max_mcp_sessions: 1_000,
            mcp_session_idle: Duration::from_secs(300),
            open_world: false,
            release_idle: Some(Duration::from_secs(5)),
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
    /// Each example's setup steps (its join step, then its additional setup steps), by example
    /// id (SLOT/SEL sessions).
    pub setups: HashMap<String, Vec<Call>>,
    /// The join shapes of the dataset's setup steps ([`join_shape`]): the only joins
    /// `POST /sessions {"arguments"}` runs unless ad-hoc joins are allowed.
    pub join_shapes: std::collections::HashSet<String>,
    /// Schema drift (`tools/drift.json`), when the dataset has it: the server then enforces
    /// A_new — drifted REST endpoints answer at their A_new path with A_new query parameters,
    /// drifted tools under their A_new name with A_new arguments (JSON Schema validation, 422
    /// in FastAPI's shape naming the field), and calls are un-migrated before they run
    /// ([`crate::variants::drift`]).
    pub drift: Option<crate::variants::drift::Drift>,
    /// Per-instance drift (SLOT/SEL, scope `instance`): the A_new of each drift row, by row id,
    /// enforced in the sessions opened for that id (`POST /sessions {"id": "<row id>"}`); a
    /// session of any other row runs A_old.
    pub instances: HashMap<String, crate::variants::drift::Drift>,
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
        let catalog = crate::retrieval::catalog(dir)?;
        let mut instances = HashMap::new();
        let (endpoints, openapi, setups) = if format == "rest" {
            let endpoints: Vec<Endpoint> = serde_json::from_value(read("tools/endpoints.json")?)?;
            (endpoints, read("tools/openapi.json")?, HashMap::new())
        } else {
            let rows = read_rows(dir)?;
            instances = super::drift::instances(&format, &rows);
            let setups = rows
                .into_iter()
                .filter_map(|r| {
                    let (setup, _) = crate::tools::setup_and_calls(
                        r.initialization_step.as_ref(),
                        &r.additional_setup_steps,
                        &r.output,
                    );
                    let setup: Vec<Call> = setup.into_iter().cloned().collect();
                    (!setup.is_empty()).then(|| (r.id.clone(), setup))
                })
                .collect();
            (
                vec![],
                crate::tools::openapi::tools_document(&name, env!("CARGO_PKG_VERSION"), &catalog),
                setups,
            )
        };
        let drift: Option<crate::variants::drift::Drift> = if dir.join("tools/drift.json").is_file() {
            Some(serde_json::from_value(read("tools/drift.json")?).context("parsing tools/drift.json")?)
        } else {
            None
        };
        // Under drift the server documents what it enforces: A_new.
        let openapi = match (&drift, format.as_str()) {
            (Some(d), "rest") => crate::variants::drift::a_new_document(&openapi, d),
            _ => openapi,
        };
        let join_shapes = setups.values().flatten().map(|c| join_shape(&c.arguments)).collect();
        Ok(Toolkit {
            join_shapes,
            instances,
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
    /// The dataset's tools.
    pub(crate) toolkit: Toolkit,
    /// Limits and address.
    pub(crate) config: ServeConfig,
    executor: Executor,
    pool: Mutex<HashMap<String, Vec<rusqlite::Connection>>>,
    /// Live SLOT/SEL sessions by id, with their last use.
    pub(crate) sessions: Mutex<HashMap<String, (Instant, Arc<Mutex<Held>>)>>,
    /// The drift row each session was opened for, when that row has a per-instance A_new (session
    /// id → row id; entries of ended sessions are pruned as sessions are opened).
    pub(crate) session_rows: Mutex<HashMap<String, String>>,
    /// Request counter (session ids, default labels, the fault draw).
    pub(crate) counter: std::sync::atomic::AtomicU64,
    /// The `search_tools` index, built on first use ([`super::search`]).
    pub(crate) search_index: std::sync::OnceLock<crate::retrieval::ToolIndex>,
}

/// The state as axum and rmcp hold it.
pub(crate) type Shared = Arc<AppState>;

/// FastAPI's error response: `status` with body `{"detail": message}`.
pub(crate) fn detail(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({"detail": message.into()}))).into_response()
}

impl AppState {
    /// `message` without the server's absolute database root (an error never shows where the
    /// server's files are): the root, as given and canonical, becomes `<databases>`.
    pub(crate) fn redact(&self, message: String) -> String {
        let root = &self.toolkit.database_root;
        let mut out = message;
        for r in [Some(root.clone()), root.canonicalize().ok()].into_iter().flatten() {
            let text = r.display().to_string();
            if !text.is_empty() && text != "." {
                out = out.replace(&text, "<databases>");
            }
        }
        out
    }

    fn connection(&self, db: &str) -> Result<rusqlite::Connection, CallError> {
        if let Some(c) = self.pool.lock().expect("pool").get_mut(db).and_then(Vec::pop) {
            return Ok(c);
        }
        let path = self.toolkit.database_root.join(db).join(format!("{db}.sqlite"));
        crate::tools::table::open_read_only(&path).map_err(|e| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                self.redact(format!("database {db} unavailable: {e}")),
            )
        })
    }

    /// Lets go of what a load filled and nothing in use needs (the trimmer calls it once the
    /// server has been quiet for [`ServeConfig::release_idle`], [`super::trim`]): the pooled
    /// SQLite connections (each with its page cache and prepared statements; the next request
    /// opens one again) and the cached joins no session holds
    /// ([`crate::tools::join_cache::release_unheld`]). Live sessions are untouched.
    pub(crate) fn release_idle(&self) {
        self.pool.lock().expect("pool").clear();
        crate::tools::join_cache::release_unheld();
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
        RunError::Database(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            state.redact(format!("query failed: {e}")),
        ),
    })
}

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
    let table = crate::tools::table::join_at_within(&path, &tables, &conditions, budget).map_err(|e| match e {
        JoinRefused::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, e.to_string()),
        JoinRefused::Failed(m) => invalid(state.redact(format!("join step on {rel}: {m}"))),
        _ => (StatusCode::PAYLOAD_TOO_LARGE, e.to_string()),
    })?;
    let table = Value::Table(table);
    let out = value_json(&table, 5);
    session.insert(&setup.label, table);
    Ok(out)
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
    held.check_inputs(&call, budget)
        .map_err(|m| (StatusCode::PAYLOAD_TOO_LARGE, m))?;
    if let Err(e) = state.executor.step(&mut held.session, &call) {
        return Err((StatusCode::UNPROCESSABLE_ENTITY, state.redact(e)));
    }
    held.admit(&call.label, labelled, budget)
        .map_err(|m| (StatusCode::PAYLOAD_TOO_LARGE, m))?;
    let output = held
        .session
        .get(&call.label)
        .map(|v| value_json(v, state.config.max_rows));
    Ok(json!({"label": call.label, "output": output}))
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
/// Whether `name` is a tool of the toolkit (SEL: also any per-column getter `get_<column>s`).
pub(crate) fn known_tool(toolkit: &Toolkit, name: &str) -> bool {
    toolkit.catalog.iter().any(|t| t.name == name)
        || (toolkit.format == "sel" && name.starts_with("get_") && name.to_lowercase().ends_with('s'))
}

/// The shared state over a loaded toolkit.
pub(crate) fn shared(toolkit: Toolkit, config: ServeConfig) -> Shared {
    let executor = Executor::new(&toolkit.database_root);
    Arc::new(AppState {
        toolkit,
        config,
        executor,
        pool: Mutex::new(HashMap::new()),
        sessions: Mutex::new(HashMap::new()),
        session_rows: Mutex::new(HashMap::new()),
        counter: std::sync::atomic::AtomicU64::new(0),
        search_index: std::sync::OnceLock::new(),
    })
}
