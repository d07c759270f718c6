//! `toolforge serve`: the live tool server of a built dataset (axum on tokio), in four parts:
//! [`state`] (the loaded toolkit, sessions, limits and the blocking cores), [`http`] (the axum
//! routes), [`mcp`] (the rmcp server over the same state) and [`faults`] (injected faults).
//! `http` and `mcp` both use `state` and never each other; this module composes them.
//!
//! | route                      | what                                                                 |
//! |----------------------------|----------------------------------------------------------------------|
//! | `GET <endpoint path>`      | REST datasets: run the endpoint's SQL with the query parameters bound; 200 with the rows (JSON array of arrays), 422 with FastAPI's `{"detail": [...]}` for missing or mistyped parameters |
//! | `POST /sessions`           | SLOT/SEL: run an instance's join step (`{"id": "<example id>"}` or `{"arguments": {<initialize_active_data arguments>}}`), returns `{"session_id", "label", "output"}` |
//! | `POST /tools/{name}`       | SLOT/SEL: `{"session_id", "arguments", "label"?}` runs one tool in the session; `$LABEL$` arguments refer to earlier outputs of that session |
//! | `DELETE /sessions/{id}`    | end a session                                                        |
//! | `GET /openapi.json`        | the dataset's OpenAPI document                                       |
//! | `GET /healthz`             | `{"status": "ok", ...}`                                              |
//! | `GET`/`POST /search_tools` | `query`, `top_k` (query string or JSON body): the best tools by BM25 with their input schemas and scores ([`search`]) |
//! | `/mcp`                     | the same tools over MCP, streamable HTTP ([`mcp`]); `--mcp` serves MCP on stdio instead |
//!
//! When the dataset has schema drift (`tools/drift.json`), A_new is enforced on the HTTP routes
//! (`drift.rs`; [`Toolkit::drift`]): drifted REST endpoints at their A_new path and method (`POST`
//! with a JSON body after verb evolution), drifted tools under their A_new names; `/openapi.json`
//! is the A_new document.
//!
//! Anything else is 404 `{"detail": "Not Found"}` (FastAPI's body).
//!
//! **Fault injection**: see [`faults`]. Databases are opened
//! read-only; every query runs under a time limit (504 past it) and a row cap (413 past it);
//! request bodies over 64 KiB get 413 and URIs over 8 KiB get 414.
//!
//! **Budgets** (issue 31): a session's join steps are estimated before they are materialised
//! and refused past `--max-join-rows` / `--max-join-mib` / `--timeout-ms` (413/504; over MCP the
//! JSON-RPC error [`mcp::REFUSED`]); `POST /sessions {"arguments"}` runs only the dataset's own
//! join shapes unless `--allow-ad-hoc-joins` (403); a session keeps at most
//! `--max-session-results` results and `--max-session-mib` MiB ([`budget`]); joined tables are
//! shared through the process's byte-bounded cache (`--join-cache-mib`,
//! [`crate::tools::join_cache`]), each session's clone released with the session. Issue 47:
//! every tool call is bounded before it is built (argument limits, its output's upper bound
//! against the session's budget, its working memory reserved from one server-wide budget,
//! `--max-server-mib`, [`memory`]; 413, or 503 with `Retry-After`), runs under `--timeout-ms`
//! inside the operators' loops and stops when its client leaves ([`sessions`]).
//!
//! **Connections** ([`listen`]): `--max-connections`, a header-read/idle timeout, a body-read
//! timeout with a minimum rate ([`body`]), a keep-alive
//! request limit, and on SIGINT/SIGTERM a graceful shutdown that stops within
//! `--shutdown-deadline-ms` whatever the clients do.
//!
//! **Memory after load** ([`trim`]): freed memory is handed back once requests have stopped for
//! 2 s; after `--release-idle-secs` of quiet the pooled SQLite connections and the cached joins
//! no session holds are let go of first; glibc keeps one malloc arena per core.

pub mod body;
pub mod budget;
mod drift;
pub mod exposure;
pub mod faults;
pub mod flags;
pub mod http;
pub mod jsonrpc;
pub mod listen;
pub mod mcp;
pub mod memory;
mod reply;
pub mod search;
mod sessions;
pub mod state;
pub mod trim;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::middleware;
use serde_json::Value as Json;

use crate::emit::read_rows;
use state::detail;
pub use state::{ServeConfig, Toolkit};

/// The server's routes over a loaded toolkit: [`http`]'s tool routes, the MCP streamable-HTTP
/// endpoint at `/mcp` ([`mcp`]), FastAPI's 404 fallback, then the layers every request passes:
/// fault injection ([`faults`]), the 64 KiB body limit and the 8 KiB URI limit, the exposure
/// guard, and outermost the opt-in CORS policy ([`exposure::cors_layer`]).
pub fn router(toolkit: Toolkit, config: ServeConfig) -> Router {
    app(state::shared(toolkit, config))
}

/// [`router`] over a state already made (so [`run`] can hand the state to the trimmer too).
fn app(state: state::Shared) -> Router {
    let (mcp_service, mcp_sessions) = mcp::streamable_http(state.clone());
    let max_mcp = state.config.max_mcp_sessions;
    let app = http::routes(&state)
        .nest_service("/mcp", mcp_service)
        .fallback(|| async { detail(StatusCode::NOT_FOUND, "Not Found") })
        .layer(middleware::from_fn_with_state(state.clone(), faults::inject_fault))
        .layer(middleware::from_fn(
            move |req: axum::extract::Request, next: middleware::Next| {
                mcp::limit_sessions(mcp_sessions.clone(), max_mcp, req, next)
            },
        ))
        .layer(middleware::from_fn(jsonrpc::http_frames))
        .layer(DefaultBodyLimit::max(64 * 1024))
        .layer(middleware::from_fn(http::limit_uri))
        .layer(middleware::from_fn_with_state(state.clone(), exposure::guard));
    let cors = exposure::cors_layer(&state.config.cors_origins);
    let app = app.with_state(state);
    // Outermost, so a browser's preflight (which carries no token) is answered by the policy.
    match cors {
        Some(layer) => app.layer(layer),
        None => app,
    }
}

/// The most threads running blocking work (queries, join steps) at once; more requests wait.
const MAX_BLOCKING_THREADS: usize = 32;

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

/// The server's tokio runtime. Blocking work (SQLite, the join step) is bounded by the cores; a
/// small pool keeps a burst of requests from starting hundreds of threads, and a blocking thread
/// ends after [`trim::QUIET`] without work (with it the join step's connection it kept).
pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(MAX_BLOCKING_THREADS)
        .thread_keep_alive(trim::QUIET)
        .enable_all()
        .build()
}

/// Serves `toolkit` on `config.addr` until SIGINT/SIGTERM; prints the bound address first (one
/// line, `listening on http://<addr>`), so `--port 0` can be used by tests.
pub fn run(toolkit: Toolkit, config: ServeConfig) -> Result<()> {
    trim::limit_arenas();
    let rt = runtime()?;
    let served = rt.block_on(async move {
        let listener = listen::bind(config.addr, config.connections.max_connections)
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
        exposure::warn_if_exposed(&config);
        let limits = config.connections;
        let state = state::shared(toolkit, config);
        let quiet = state.clone();
        trim::spawn_trimmer(state.config.release_idle, move || quiet.release_idle());
        listen::serve(listener, app(state), limits, shutdown_signal()).await;
        eprintln!("toolforge serve: stopped");
        Ok::<(), anyhow::Error>(())
    });
    // Blocking work still running past the shutdown deadline (a long query) is not waited for.
    rt.shutdown_background();
    served
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
            .max_blocking_threads(MAX_BLOCKING_THREADS)
            .enable_all()
            .build()
            .expect("tokio runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let limits = config.connections;
            listen::serve(listener, router(toolkit, config), limits, std::future::pending()).await;
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
            Ok(got) => match crate::verify::compare(gold, &got, row.ordered, row.ties.as_deref()) {
                Ok(()) => ok += 1,
                Err(d) => {
                    eprintln!("{}: live response differs from gold_answer: {d}", row.id);
                    bad += 1;
                }
            },
            Err(e) => {
                eprintln!("{}: {e:#}", row.id);
                bad += 1;
            }
        }
    }
    Ok((ok, bad))
}
