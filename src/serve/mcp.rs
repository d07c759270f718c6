//! The recipe's tools over the Model Context Protocol (rmcp): `toolforge serve RECIPE --mcp`
//! (stdio) and `/mcp` on the HTTP server (streamable HTTP), backed by the same handlers as the
//! HTTP routes (the blocking cores of [`super::state`]; this module never uses [`super::http`]).
//!
//! Tools: REST datasets list every endpoint (input schema = its query parameters; a name shared
//! by several databases is qualified `<db_id>__<name>`). SLOT/SEL datasets list
//! `create_session` (`{"id"}` of an example, or `{"arguments"}` of a join step) and every tool of
//! the catalog with two extra arguments, `session_id` (required) and `label` (optional).
//!
//! `search_tools` and `call_tool` ([`super::search`]) answer in every mode; under
//! `--open-world` they (and `create_session`) are the only tools listed, every catalog tool
//! still routed by name.
//!
//! A call's result is a JSON object, sent as `structuredContent` and, serialised, as the one text
//! block (MCP 2025-06-18, tools/call "Structured Content": `structuredContent` is an object, and a
//! tool with an `outputSchema` must conform to it; the Python SDK client validates it). REST rows
//! (a JSON array of arrays on the HTTP route) are wrapped as `{"result": [[…], …]}`, the key the
//! Python SDK's FastMCP uses for non-object results; SLOT/SEL results are already objects
//! (`{"label", "output"}`, `create_session` adds `session_id`). Every tool declares the matching
//! `outputSchema`. A failed call is a tool error (`isError: true`) whose text says why.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use rmcp::ErrorData;
use rmcp::handler::server::ServerHandler;
use rmcp::model::ErrorCode;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value as Json, json};

use super::memory::Reservation;
use super::search::Runs;
use super::state::{
    AppState, CallError, CancelOnDrop, ServeConfig, Shared, ToolAnswer, Toolkit, open_session, run_endpoint, run_tool,
};
use crate::tools::executor::{Value, value_json};

/// What an MCP tool name runs.
#[derive(Clone)]
enum Target {
    Endpoint(usize),
    /// A REST endpoint under schema drift: called with its A_new arguments.
    DriftedEndpoint(usize, Arc<crate::variants::drift::ToolDrift>),
    Session,
    Tool(String),
    /// `search_tools` ([`super::search`]).
    Search,
    /// `call_tool {"name", "arguments"}`: resolved to the named tool's target before running.
    Route,
}

/// The MCP server over a loaded toolkit.
#[derive(Clone)]
pub struct McpServer {
    state: Shared,
    tools: Arc<Vec<Tool>>,
    targets: Arc<HashMap<String, Target>>,
}

fn object(v: Json) -> Arc<Map<String, Json>> {
    Arc::new(v.as_object().cloned().unwrap_or_default())
}

/// The `outputSchema` of a REST endpoint: `{"result": [[cell, …], …]}`.
fn rest_output_schema() -> Arc<Map<String, Json>> {
    object(json!({"type": "object", "properties": {
        "result": {"type": "array", "items": {"type": "array"}, "description": "The endpoint's rows, each an array of cells."}
    }, "required": ["result"]}))
}

/// The `outputSchema` of a SLOT/SEL tool (`with_session` adds `session_id` for `create_session`).
fn session_output_schema(with_session: bool) -> Arc<Map<String, Json>> {
    let mut props = json!({
        "label": {"type": "string", "description": "The label later calls refer to as $label$."},
        "output": {"description": "The tool's output (a table is its first rows)."}
    });
    let mut required = vec![json!("label"), json!("output")];
    if with_session {
        props["session_id"] = json!({"type": "string", "description": "The session to pass to every tool."});
        required.push(json!("session_id"));
    }
    object(json!({"type": "object", "properties": props, "required": required}))
}

/// A result as MCP structured content: objects as they are, anything else as `{"result": v}`.
fn structured(v: Json) -> Map<String, Json> {
    match v {
        Json::Object(m) => m,
        other => Map::from_iter([("result".to_string(), other)]),
    }
}

impl McpServer {
    /// Lists the toolkit's tools (see the module doc).
    pub(crate) fn new(state: Shared) -> McpServer {
        let mut tools = Vec::new();
        let mut targets = HashMap::new();
        let rest = state.toolkit.format == "rest";
        let open_world = state.config.open_world;
        if !rest {
            let mut session = Tool::new(
                "create_session",
                "Run an example's join step and open a session; returns session_id and the first rows of the joined table (label starting_table_var).",
                object(json!({"type": "object", "properties": {
                    "id": {"type": "string", "description": "Example id whose join step to run."},
                    "arguments": {"type": "object", "description": "initialize_active_data arguments (instead of id)."}
                }})),
            );
            session.output_schema = Some(session_output_schema(true));
            tools.push(session);
            targets.insert("create_session".to_string(), Target::Session);
        }
        // Every catalog tool is routed; the open world lists none of them (found by search).
        for listed in super::search::listing(&state.toolkit) {
            let spec = listed.spec;
            let target = match listed.runs {
                Runs::Endpoint(i) => Target::Endpoint(i),
                Runs::DriftedEndpoint(i, d) => Target::DriftedEndpoint(i, d),
                Runs::Tool(name) => Target::Tool(name),
            };
            if !open_world {
                let mut tool = Tool::new(
                    spec.name.clone(),
                    spec.description.clone(),
                    object(spec.parameters.clone()),
                );
                tool.output_schema = Some(if rest {
                    rest_output_schema()
                } else {
                    session_output_schema(false)
                });
                tools.push(tool);
            }
            targets.insert(spec.name, target);
        }
        // `search_tools` and `call_tool` answer in both modes unless a catalog tool has the
        // name; the open world lists them.
        for (spec, target) in [
            (super::search::search_tools_spec(), Target::Search),
            (super::search::call_tool_spec(), Target::Route),
        ] {
            if targets.contains_key(&spec.name) {
                continue;
            }
            if open_world {
                tools.push(Tool::new(spec.name.clone(), spec.description, object(spec.parameters)));
            }
            targets.insert(spec.name, target);
        }
        McpServer {
            state,
            tools: Arc::new(tools),
            targets: Arc::new(targets),
        }
    }

    fn call(
        state: &Shared,
        target: &Target,
        args: Map<String, Json>,
        cancel: Arc<AtomicBool>,
    ) -> Result<(Json, Option<Reservation>), ErrorData> {
        McpServer::call_inner(state, target, args, cancel).map_err(|(status, message)| refusal(status, message))
    }

    /// [`McpServer::call`]'s work: a failure is the HTTP status it would have (`None` for a tool
    /// error of the arguments) and the message.
    fn call_inner(
        state: &Shared,
        target: &Target,
        mut args: Map<String, Json>,
        cancel: Arc<AtomicBool>,
    ) -> Result<(Json, Option<Reservation>), (Option<u16>, String)> {
        let refused = |(st, m): CallError| (Some(st.as_u16()), m);
        let rows_answer = |i: usize, values: Vec<Json>| {
            let (rows, _rows_held) = run_endpoint(state, i, &values)?;
            let cells = rows.iter().map(|r| r.len() + 1).sum::<usize>() + 1;
            let held = answer_reservation(state, &rows, cells, None)?;
            Ok::<_, CallError>((json!(rows), Some(held)))
        };
        match target {
            Target::Endpoint(i) => {
                let values = state.toolkit.endpoints[*i]
                    .arguments_from_json(&args)
                    .map_err(|errors| (None, json!({"detail": errors}).to_string()))?;
                rows_answer(*i, values).map_err(refused)
            }
            Target::DriftedEndpoint(i, d) => {
                let values = super::drift::rest_arguments(state, *i, d, super::drift::NewRequest::Body(args))
                    .map_err(|errors| (None, json!({"detail": errors}).to_string()))?;
                rows_answer(*i, values).map_err(refused)
            }
            Target::Session => {
                let row = args.get("id").and_then(Json::as_str).map(String::from);
                let v = open_session(state, &Json::Object(args)).map_err(|(st, m)| (Some(st.as_u16()), m))?;
                // Under per-instance drift the session enforces its row's A_new.
                if let (Some(sid), Some(row)) = (v["session_id"].as_str(), row) {
                    super::drift::remember_session(state, sid, &row);
                }
                Ok((v, None))
            }
            Target::Tool(name) => {
                let sid = args
                    .remove("session_id")
                    .and_then(|v| v.as_str().map(String::from))
                    .ok_or((None, "missing session_id (call create_session first)".to_string()))?;
                let label = args.remove("label").and_then(|v| v.as_str().map(String::from));
                let (name, args) =
                    super::drift::check_tool_call(state, Some(&sid), name.clone(), args).map_err(|r| match r {
                        super::drift::Refused::NotFound(m) => (None, m),
                        super::drift::Refused::Invalid(errors) => (None, json!({"detail": errors}).to_string()),
                    })?;
                let render = |label: &str, output: Option<&Value>| {
                    let answer = ToolAnswer::new(state, label, output);
                    let held = answer_reservation(
                        state,
                        &answer,
                        preview_values(output, state.config.max_rows),
                        Some(sid.as_str()),
                    )?;
                    let output = output.map(|v| value_json(v, state.config.max_rows));
                    Ok((json!({"label": label, "output": output}), Some(held)))
                };
                run_tool(state, &name, &sid, args, label, Some(cancel), render).map_err(refused)
            }
            Target::Search => super::search::search_tools(state, &args)
                .map(|v| (v, None))
                .map_err(|m| (None, m)),
            // Resolved in `call_tool`; a route to a route is not a tool.
            Target::Route => Err((None, "call_tool cannot call itself".to_string())),
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let mut implementation = Implementation::default();
        implementation.name = "toolforge".into();
        implementation.version = env!("CARGO_PKG_VERSION").into();
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(implementation)
            .with_instructions(format!(
                "Tools of the toolforge dataset {} ({}).",
                self.state.toolkit.name, self.state.toolkit.format
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        super::trim::request_seen();
        let mut args = request.arguments.unwrap_or_default();
        let mut name = request.name.to_string();
        let mut via_route = false;
        if matches!(self.targets.get(name.as_str()), Some(Target::Route)) {
            let Some(Json::String(routed)) = args.get("name").cloned() else {
                return Ok(
                    CallToolResult::error(vec![ContentBlock::text("call_tool: name (a string) is required")]).into(),
                );
            };
            args = match args.remove("arguments") {
                None | Some(Json::Null) => Map::new(),
                Some(Json::Object(m)) => m,
                Some(_) => {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(
                        "call_tool: arguments must be an object",
                    )])
                    .into());
                }
            };
            name = routed;
            via_route = true;
        }
        // A tool renamed by a session's per-instance drift is not in the listing (which is A_old:
        // the row carries its A_new tools); it is callable in that session.
        let sid = args.get("session_id").and_then(Json::as_str);
        let target = match self.targets.get(name.as_str()) {
            Some(Target::Route) if via_route => None,
            Some(t) => Some(t.clone()),
            None if super::drift::is_a_new_tool(&self.state, sid, &name) => Some(Target::Tool(name.clone())),
            None => None,
        };
        let target = match target {
            Some(t) => t,
            // A model's call through call_tool naming no tool is an error it can read and fix.
            None if via_route => {
                let m = format!("call_tool: no tool named {name:?}; find tools with search_tools");
                return Ok(CallToolResult::error(vec![ContentBlock::text(m)]).into());
            }
            None => {
                return Err(ErrorData::invalid_params(format!("no tool named {name:?}"), None));
            }
        };
        let state = self.state.clone();
        // Dropped with this future (the request cancelled, the client gone): the call stops.
        let (_cancel, flag) = CancelOnDrop::new();
        let result = tokio::task::spawn_blocking(move || McpServer::call(&state, &target, args, flag))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        super::trim::request_seen();
        // Held until the result is handed to rmcp ([`answer_reservation`]).
        let (result, _held) = match result {
            Ok((v, held)) => (Ok(v), held),
            Err(e) => (Err(e), None),
        };
        Ok(match result {
            Ok(v) => {
                let v = Json::Object(structured(v));
                let mut r = CallToolResult::success(vec![ContentBlock::text(v.to_string())]);
                r.structured_content = Some(v);
                r
            }
            Err(e) if e.code == ErrorCode(REFUSED) => return Err(e),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(e.message.into_owned())]),
        }
        .into())
    }
}

/// The server's budget reserved for an MCP answer of `answer`'s JSON text with about
/// `values` JSON values ([`super::reply`]'s rule; 413 past the whole budget, 503 when it cannot
/// be held now): the answer is built as a `serde_json::Value` tree (`values` ×
/// `size_of::<Value>()` plus its text), then as text content, as structured content and as
/// rmcp's JSON-RPC message of both — four times the text. Held until the call hands its result
/// to rmcp, which writes the message.
fn answer_reservation<T: serde::Serialize + ?Sized>(
    state: &AppState,
    answer: &T,
    values: usize,
    caller: Option<&str>,
) -> Result<Reservation, CallError> {
    let text = crate::tools::executor::json_len(answer);
    let bytes = values
        .saturating_mul(std::mem::size_of::<Json>())
        .saturating_add(text.saturating_mul(4));
    super::reply::reserve_answer(state, bytes, "the answer", caller)
}

/// About how many JSON values `output`'s preview of at most `max_rows` rows holds.
fn preview_values(output: Option<&Value>, max_rows: usize) -> usize {
    match output {
        Some(Value::Table(t)) => t.num_rows().min(max_rows) * (t.num_columns() + 1) + t.num_columns() + 8,
        Some(Value::Column(a)) => a.len().min(max_rows) + 4,
        _ => 4,
    }
}

/// The JSON-RPC error code of a call the server refuses for its budgets (an implementation-defined
/// server error, −32000 to −32099 in JSON-RPC 2.0): the request was well formed but is over a
/// limit (join rows or bytes, a session's results, the time limit, a join shape not served, the
/// server's memory budget); `data.status` is the HTTP status the same request gets over HTTP
/// (403, 413, 503, 504).
pub const REFUSED: i32 = -32001;

/// A failed call over MCP: a budget refusal (HTTP 403, 413, 503, 504) is the JSON-RPC error
/// [`REFUSED`], as the same request is a 4xx/5xx over HTTP; any other failure is a tool error
/// (`isError: true`) the model can read and correct.
fn refusal(status: Option<u16>, message: String) -> ErrorData {
    match status {
        Some(s @ (403 | 413 | 503 | 504)) => ErrorData::new(ErrorCode(REFUSED), message, Some(json!({"status": s}))),
        _ => ErrorData::new(ErrorCode::INTERNAL_ERROR, message, None),
    }
}

/// The session manager of the streamable-HTTP MCP service (rmcp's in-memory one).
pub(crate) type McpSessions = rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// The streamable-HTTP MCP service mounted at `/mcp` of the HTTP server, and its session manager
/// (whose sessions [`limit_sessions`] counts). A session idle for `config.mcp_session_idle` is
/// closed by rmcp.
pub(crate) fn streamable_http(
    state: Shared,
) -> (
    rmcp::transport::streamable_http_server::tower::StreamableHttpService<McpServer, McpSessions>,
    Arc<McpSessions>,
) {
    let mut manager = McpSessions::default();
    manager.session_config.keep_alive = Some(state.config.mcp_session_idle);
    let manager = Arc::new(manager);
    let server = McpServer::new(state);
    let service = rmcp::transport::streamable_http_server::tower::StreamableHttpService::new(
        move || Ok(server.clone()),
        manager.clone(),
        Default::default(),
    );
    (service, manager)
}

/// Refuses a `POST /mcp` that would open a new MCP session (no `Mcp-Session-Id` header) while
/// `max` sessions are open: 503 with the JSON-RPC error [`REFUSED`] (issue 31 D5). Concurrent
/// `initialize` requests can pass the check together, so the count can exceed `max` by the
/// requests in flight.
pub(crate) async fn limit_sessions(
    manager: Arc<McpSessions>,
    max: usize,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    let opens = req.method() == axum::http::Method::POST
        && req.uri().path() == "/mcp"
        && !req.headers().contains_key("mcp-session-id");
    if opens && manager.sessions.read().await.len() >= max {
        // The reply carries the request's id (the body is in memory: `jsonrpc::http_frames`
        // read it, at most 64 KiB).
        let (_, body) = req.into_parts();
        let bytes = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
        let e = super::jsonrpc::error(
            super::jsonrpc::frame_id(&bytes),
            REFUSED.into(),
            format!(
                "{max} MCP sessions are open, the server's limit (--max-mcp-sessions); end one (DELETE /mcp) or wait for an idle one to expire"
            ),
        );
        return (axum::http::StatusCode::SERVICE_UNAVAILABLE, axum::Json(e)).into_response();
    }
    next.run(req).await
}

/// Longest stdio frame read (a longer line is answered −32700 and skipped).
const MAX_FRAME: usize = 16 << 20;

/// Serves the toolkit over MCP on stdin/stdout until the client closes the stream. Every frame
/// read is checked first ([`super::jsonrpc::check_frame`]): a malformed one is answered with the
/// JSON-RPC error here (rmcp would drop it without a reply), the others go to rmcp; both write
/// whole lines to stdout under one lock.
pub fn run_stdio(toolkit: Toolkit, config: ServeConfig) -> anyhow::Result<()> {
    use rmcp::ServiceExt as _;
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    super::trim::limit_arenas();
    let rt = super::runtime()?;
    rt.block_on(async move {
        let state = super::state::shared(toolkit, config);
        let quiet = state.clone();
        super::trim::spawn_trimmer(state.config.release_idle, move || quiet.release_idle());
        let server = McpServer::new(state);
        let (rmcp_in, mut feed) = tokio::io::duplex(1 << 16);
        let (drain, rmcp_out) = tokio::io::duplex(1 << 16);
        let stdout = Arc::new(tokio::sync::Mutex::new(tokio::io::stdout()));
        let out = stdout.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(drain);
            let mut line = Vec::new();
            while lines.read_until(b'\n', &mut line).await.is_ok_and(|n| n > 0) {
                let mut o = out.lock().await;
                if o.write_all(&line).await.is_err() || o.flush().await.is_err() {
                    break;
                }
                line.clear();
            }
        });
        tokio::spawn(async move {
            let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
            // Requests before `initialize` are answered −32600 here (rmcp's answer was a
            // confusing −32602), [`super::jsonrpc::before_initialize`].
            let mut initialized = false;
            let mut line = Vec::new();
            loop {
                line.clear();
                let mut over = false;
                // One line, at most MAX_FRAME bytes of it kept.
                loop {
                    let Ok(chunk) = stdin.fill_buf().await else { return };
                    if chunk.is_empty() {
                        break;
                    }
                    let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
                        Some(i) => (i + 1, true),
                        None => (chunk.len(), false),
                    };
                    if line.len() + take <= MAX_FRAME {
                        line.extend_from_slice(&chunk[..take]);
                    } else {
                        over = true;
                    }
                    stdin.consume(take);
                    if done {
                        break;
                    }
                }
                if line.is_empty() && !over {
                    break; // end of input
                }
                let frame = line.trim_ascii();
                if frame.is_empty() && !over {
                    continue;
                }
                let reply = if over {
                    Some(super::jsonrpc::error(
                        Json::Null,
                        -32700,
                        format!("Parse error: frame over {MAX_FRAME} bytes"),
                    ))
                } else {
                    super::jsonrpc::check_frame(frame).or_else(|| match initialized {
                        true => None,
                        false => {
                            let early = super::jsonrpc::before_initialize(frame);
                            initialized = super::jsonrpc::is_initialize(frame);
                            early
                        }
                    })
                };
                match reply {
                    Some(e) => {
                        let mut o = stdout.lock().await;
                        let _ = o.write_all(format!("{e}\n").as_bytes()).await;
                        let _ = o.flush().await;
                    }
                    None => {
                        if feed.write_all(frame).await.is_err() || feed.write_all(b"\n").await.is_err() {
                            return;
                        }
                    }
                }
            }
            // `feed` dropped: rmcp sees the end of its input.
        });
        let running = server.serve((rmcp_in, rmcp_out)).await?;
        running.waiting().await?;
        Ok(())
    })
}
