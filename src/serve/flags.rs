//! The command-line flags of `toolforge serve` that become its [`ServeConfig`]: limits, budgets
//! (issue 31) and exposure. `main.rs` flattens them into the `serve` subcommand.

use std::net::SocketAddr;
use std::time::Duration;

use super::budget::SessionBudget;
use super::listen::ConnectionLimits;
use super::state::ServeConfig;

/// The `serve` flags (each documented in `toolforge serve --help`).
#[derive(Debug, Clone, clap::Args)]
pub struct ServeFlags {
    /// Per-query time limit in milliseconds.
    #[arg(long, default_value_t = 5000)]
    pub timeout_ms: u64,
    /// Most rows in one response.
    #[arg(long, default_value_t = 100_000)]
    pub max_rows: usize,
    /// Most live SLOT/SEL sessions (least recently used ends first).
    #[arg(long, default_value_t = 1000)]
    pub max_sessions: usize,
    /// Share of tool/endpoint requests (0–1) answered with a random injected fault
    /// (a request can also ask for one with header `X-Toolforge-Fault: <kind>`).
    #[arg(long, default_value_t = 0.0)]
    pub fault_rate: f64,
    /// Seed of the random fault choice.
    #[arg(long, default_value_t = 0)]
    pub fault_seed: u64,
    /// Most rows a session's join step may have, estimated before materialising (413 past it).
    #[arg(long, default_value_t = 5_000_000)]
    pub max_join_rows: u64,
    /// Most MiB a session's join step may take while materialising (413 past it).
    #[arg(long, default_value_t = 512)]
    pub max_join_mib: usize,
    /// Let `POST /sessions {"arguments"}` run joins other than the dataset's setup steps
    /// (403 otherwise).
    #[arg(long)]
    pub allow_ad_hoc_joins: bool,
    /// Most tool results a session keeps (the oldest unlabelled are dropped past it).
    #[arg(long, default_value_t = 256)]
    pub max_session_results: usize,
    /// Most MiB a session's tool results hold (the oldest unlabelled are dropped past it, else
    /// the call is refused with 413).
    #[arg(long, default_value_t = 64)]
    pub max_session_mib: usize,
    /// MiB the whole server may hold in sessions' results, joined tables and calls in flight
    /// (past it, idle sessions are ended least recently used first, else 503 with
    /// Retry-After; default: a quarter of the least of the machine's memory, the cgroup's limit
    /// and `ulimit -v`; 0: no server-wide budget, nothing counted — for benchmarks only, a
    /// request can then take the process past what it may allocate).
    #[arg(long)]
    pub max_server_mib: Option<usize>,
    /// MiB of joined tables the server keeps cached between sessions (least recently used
    /// evicted first; default: TOOLFORGE_JOIN_CACHE_MIB, else 256).
    #[arg(long)]
    pub join_cache_mib: Option<usize>,
    /// Most open HTTP connections (more are closed when accepted).
    #[arg(long, default_value_t = 4096)]
    pub max_connections: usize,
    /// Milliseconds a connection has to send a complete request head, counted from when it
    /// starts waiting for one (also the idle timeout of a kept-alive connection).
    #[arg(long, default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// Milliseconds a request body has to arrive once its head is in, extended by a second per
    /// `--body-min-rate` bytes received (a slower body: 400 and the connection closed).
    #[arg(long, default_value_t = 10_000)]
    pub body_timeout_ms: u64,
    /// Bytes per second of a request body that extend `--body-timeout-ms` by a second each
    /// (the minimum transfer rate; 0: no extension).
    #[arg(long, default_value_t = 500)]
    pub body_min_rate: u64,
    /// Most requests one connection carries before it is closed.
    #[arg(long, default_value_t = 10_000)]
    pub max_requests_per_connection: usize,
    /// Milliseconds SIGINT/SIGTERM waits for running requests before the server stops anyway.
    #[arg(long, default_value_t = 5_000)]
    pub shutdown_deadline_ms: u64,
    /// Bearer token every request must carry (`Authorization: Bearer <token>`; 401 without).
    #[arg(long, env = "TOOLFORGE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A host name accepted in the `Host` header besides the loopback names and the bound
    /// address (421 for any other); repeatable.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// An origin whose pages may call the server from a browser (CORS; repeatable, `*` for
    /// any; default: none, so no CORS headers are sent).
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    pub cors_origins: Vec<String>,
    /// Honour `X-Toolforge-Fault` request headers (fault injection for agent testing).
    #[arg(long)]
    pub faults: bool,
    /// Most open MCP-over-HTTP sessions (a new one past it gets 503).
    #[arg(long, default_value_t = 1000)]
    pub max_mcp_sessions: usize,
    /// Seconds after which an idle MCP-over-HTTP session is closed.
    #[arg(long, default_value_t = 300)]
    pub mcp_session_idle_secs: u64,
    /// Open-world mode (ToolGym's setting): MCP `tools/list` shows only `search_tools` and
    /// `call_tool` (and `create_session` for SLOT/SEL); calls are routed to any catalog tool.
    #[arg(long)]
    pub open_world: bool,
    /// Seconds without a request after which the server lets go of what a load filled: its
    /// pooled SQLite connections and the cached joins no session holds (0: never).
    #[arg(long, default_value_t = 5)]
    pub release_idle_secs: u64,
}

impl ServeFlags {
    /// The server configuration these flags give, bound to `addr`. Sets the process's join-cache
    /// budget when `--join-cache-mib` is given ([`crate::tools::join_cache::set_budget`]).
    pub fn config(self, addr: SocketAddr) -> ServeConfig {
        if let Some(mib) = self.join_cache_mib {
            crate::tools::join_cache::set_budget(mib << 20);
        }
        ServeConfig {
            addr,
            timeout: Duration::from_millis(self.timeout_ms),
            max_rows: self.max_rows,
            max_sessions: self.max_sessions,
            fault_rate: self.fault_rate,
            fault_seed: self.fault_seed,
            max_join_rows: self.max_join_rows,
            max_join_bytes: self.max_join_mib << 20,
            allow_ad_hoc_joins: self.allow_ad_hoc_joins,
            session_budget: SessionBudget {
                max_results: self.max_session_results,
                max_bytes: self.max_session_mib << 20,
            },
            max_server_bytes: self
                .max_server_mib
                .map_or_else(super::memory::default_budget, |m| m << 20),
            connections: ConnectionLimits {
                max_connections: self.max_connections,
                header_read_timeout: Duration::from_millis(self.header_timeout_ms),
                max_requests_per_connection: self.max_requests_per_connection,
                shutdown_deadline: Duration::from_millis(self.shutdown_deadline_ms),
                body: super::body::BodyLimits {
                    timeout: Duration::from_millis(self.body_timeout_ms),
                    min_rate: self.body_min_rate,
                },
            },
            token: self.token.filter(|t| !t.is_empty()),
            allowed_hosts: self.allowed_hosts,
            cors_origins: self.cors_origins,
            faults: self.faults,
            max_mcp_sessions: self.max_mcp_sessions,
            mcp_session_idle: Duration::from_secs(self.mcp_session_idle_secs),
            open_world: self.open_world,
            release_idle: (self.release_idle_secs > 0).then(|| Duration::from_secs(self.release_idle_secs)),
        }
    }
}
