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
use super::memory::ServerMemory;
use crate::emit::{database_root, read_manifest, read_rows};
use crate::tools::executor::Executor;
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
    /// The server-wide memory budget in bytes, shared by sessions' results, cached joins and
    /// calls in flight ([`super::memory`]).
    pub max_server_bytes: usize,
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
            max_server_bytes: super::memory::default_budget(),
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
    pub(crate) executor: Executor,
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
    /// The server-wide memory budget ([`super::memory`]).
    pub(crate) memory: Arc<ServerMemory>,
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

/// Runs REST endpoint `index` with validated `values` (blocking: SQLite). The rows are counted
/// in the server's memory budget as the query produces them ([`Endpoint::execute_within`]):
/// the answer comes with the reservation holding its bytes (503 when the budget cannot hold
/// more now, 413 past the whole budget, [`super::reply`]).
pub(crate) fn run_endpoint(
    state: &AppState,
    index: usize,
    values: &[Json],
) -> Result<(crate::verify::Answer, super::memory::Reservation), CallError> {
    let ep = &state.toolkit.endpoints[index];
    let mut conn = state.connection(&ep.db_id)?;
    let limits = Limits {
        timeout: state.config.timeout,
        max_rows: state.config.max_rows,
    };
    let mut held = state.memory.empty();
    let mut refused: Option<CallError> = None;
    let mut admit = |bytes: usize| match super::reply::grow_answer(state, &mut held, bytes, "the result", None) {
        Ok(()) => true,
        Err(e) => {
            refused = Some(e);
            false
        }
    };
    let r = ep.execute_within(&mut conn, values, limits, &mut admit);
    state.give_back(&ep.db_id, conn);
    match r {
        Ok(rows) => Ok((rows, held)),
        Err(RunError::NotAdmitted(_)) => Err(refused.unwrap_or_else(|| super::sessions::server_busy(state, 0))),
        Err(RunError::Timeout(ms)) => Err((
            StatusCode::GATEWAY_TIMEOUT,
            format!("the query ran longer than the {ms} ms limit"),
        )),
        Err(RunError::TooLarge(n)) => Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the result has more than {n} rows (response-size cap); narrow the parameters"),
        )),
        Err(RunError::Database(e)) => Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            state.redact(format!("query failed: {e}")),
        )),
    }
}

pub(crate) use super::sessions::{CancelOnDrop, ToolAnswer, join_shape, open_session, run_tool, tool_reply};

/// Whether `name` is a tool of the toolkit (SEL: also any per-column getter `get_<column>s`).
pub(crate) fn known_tool(toolkit: &Toolkit, name: &str) -> bool {
    toolkit.catalog.iter().any(|t| t.name == name)
        || (toolkit.format == "sel" && name.starts_with("get_") && name.to_lowercase().ends_with('s'))
}

/// The shared state over a loaded toolkit.
pub(crate) fn shared(toolkit: Toolkit, config: ServeConfig) -> Shared {
    let config_bytes = config.max_server_bytes;
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
        memory: ServerMemory::new(config_bytes),
    })
}
