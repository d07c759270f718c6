//! What the live-server test files share (`tests/serve_budgets.rs`, `serve_connections.rs`,
//! `serve_exposure.rs`, `serve_hostile.rs`, `mcp_frames.rs`): the project root, datasets built
//! once per test process, and the real server process — `toolforge serve` under
//! `ulimit -v 2 GiB` (issue 31's hostile setting) on an ephemeral 127.0.0.1 port, with its RSS,
//! its stderr and a health check on a new connection. Included with
//! `#[path = "serve_support/mod.rs"] mod serve_support;` (each file uses a part of it).
#![allow(dead_code)]

use std::io::{BufRead as _, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Spider's databases.
pub fn spider_databases() -> PathBuf {
    root().join("../shared/corpora/spider/database")
}

/// `recipe` built once per test process under `CARGO_TARGET_TMPDIR/<name>` (removed with
/// `target/`, and emptied first, so no run leaves a directory in /tmp); `name` is the test file's.
fn built(cell: &'static OnceLock<PathBuf>, recipe: &str, name: &str) -> PathBuf {
    cell.get_or_init(|| {
        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{recipe}"));
        let _ = std::fs::remove_dir_all(&tmp);
        toolforge::pipeline::build_and_emit(
            &root().join(format!("recipes/{recipe}.toml")),
            Some(&tmp.join("out")),
            Some(&tmp.join("store")),
            false,
        )
        .unwrap();
        tmp.join("out").join(recipe)
    })
    .clone()
}

/// slot-spider, built once per test process (see [`built`]).
pub fn slot_spider(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    built(&DIR, "slot-spider", name)
}

/// rest-spider, built once per test process (see [`built`]).
pub fn rest_spider(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    built(&DIR, "rest-spider", name)
}

/// A database root (made once per test process and `pad` under `CARGO_TARGET_TMPDIR`, named
/// after the test file `name`) holding a copy of Spider's wta_1 whose 20,662
/// `players.first_name` cells each carry `pad` more characters of random upper-case hex
/// (SQLite's `randomblob`): large answers, and texts no two alike (serve it with `serve_on`).
pub fn padded_wta(name: &str, pad: usize) -> PathBuf {
    static DIRS: std::sync::Mutex<Vec<(usize, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut dirs = DIRS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, d)) = dirs.iter().find(|(p, _)| *p == pad) {
        return d.clone();
    }
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-wta-{pad}"));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("wta_1")).unwrap();
    let db = root.join("wta_1/wta_1.sqlite");
    std::fs::copy(spider_databases().join("wta_1/wta_1.sqlite"), &db).unwrap();
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            &format!(
                "UPDATE players SET first_name = first_name || substr(hex(randomblob({})), 1, {pad})",
                pad / 2 + 1
            ),
            [],
        )
        .unwrap();
    dirs.push((pad, root.clone()));
    root
}

/// `initialize_active_data` arguments of wta_1's `players` table alone (an ad-hoc join: serve
/// with `--allow-ad-hoc-joins`).
pub fn players_join() -> serde_json::Value {
    serde_json::json!({"database_path": "wta_1/wta_1.sqlite", "condition_sequence": [],
        "alias_to_table_dict": {"p": {"original_table_name": "players", "modified_table_name": "players"}}})
}

/// A `toolforge serve` process (killed on drop): its `host:port`, and its stderr line by line.
pub struct Server {
    pub child: Child,
    /// `127.0.0.1:<port>` (or the bound address printed).
    pub addr: String,
    stderr: Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `http://<addr>`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The port.
    pub fn port(&self) -> String {
        self.addr.rsplit(':').next().unwrap_or_default().to_string()
    }

    /// The server's resident memory in MiB.
    pub fn rss_mib(&self) -> u64 {
        rss_mib(self.child.id())
    }

    /// The server's RSS in MiB once it is under `mib` (polled every 250 ms), or the last
    /// reading when `wait` passes first.
    pub fn settles_under(&self, mib: u64, wait: Duration) -> u64 {
        let started = Instant::now();
        loop {
            let rss = self.rss_mib();
            if rss < mib || started.elapsed() > wait {
                return rss;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The next line the server writes to stderr, if one comes within `wait`.
    pub fn stderr_line(&self, wait: Duration) -> Option<String> {
        self.stderr.recv_timeout(wait).ok()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

fn quoted(words: &[&str]) -> String {
    words
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The shell line that runs `toolforge serve <dir> --databases <spider> <args>` under
/// `ulimit -v 2 GiB` (`exec`, so the child's pid is the server's).
fn serve_script(dir: &Path, args: &[&str]) -> String {
    serve_script_on(dir, &spider_databases(), args)
}

/// [`serve_script`] with the databases under `databases`.
fn serve_script_on(dir: &Path, databases: &Path, args: &[&str]) -> String {
    format!(
        "ulimit -v 2097152; exec '{}' serve '{}' --databases '{}' {}",
        env!("CARGO_BIN_EXE_toolforge"),
        dir.display(),
        databases.display(),
        quoted(args)
    )
}

/// `toolforge serve` of the built dataset `dir` on an ephemeral 127.0.0.1 port with `flags`,
/// under `ulimit -v 2 GiB`, `TOOLFORGE_TOKEN` unset; returns once it prints its address.
pub fn serve(dir: &Path, flags: &[&str]) -> Server {
    serve_on(dir, &spider_databases(), flags)
}

/// [`serve`] with the databases under `databases` (`--databases`) instead of Spider's.
pub fn serve_on(dir: &Path, databases: &Path, flags: &[&str]) -> Server {
    let mut args = vec!["--port", "0"];
    args.extend_from_slice(flags);
    let mut child = Command::new("sh")
        .args(["-c", &serve_script_on(dir, databases, &args)])
        .env_remove("TOOLFORGE_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .split("listening on http://")
        .nth(1)
        .unwrap_or_else(|| panic!("no listening line: {line:?}"))
        .to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    Server {
        child,
        addr,
        stderr: rx,
    }
}

/// `toolforge serve <dir> --mcp <flags>` (MCP over stdio) under `ulimit -v 2 GiB`, stdin and
/// stdout piped.
pub fn serve_mcp_stdio(dir: &Path, flags: &[&str]) -> Child {
    let mut args = vec!["--mcp"];
    args.extend_from_slice(flags);
    Command::new("sh")
        .args(["-c", &serve_script(dir, &args)])
        .env_remove("TOOLFORGE_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Resident memory of process `pid` in MiB, from `/proc/<pid>/status`.
pub fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        >> 10
}

/// `GET /healthz` on a new connection to `addr`: the status line and the time to the whole
/// answer (a failed connection is an empty status line).
pub fn health(addr: &str) -> (String, Duration) {
    let started = Instant::now();
    let Ok(mut s) = TcpStream::connect(addr) else {
        return (String::new(), started.elapsed());
    };
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    (text.lines().next().unwrap_or_default().to_string(), started.elapsed())
}

/// A health check run every 20 ms on a new connection in the background, from [`Prober::start`]
/// until [`Prober::stop`]: the acceptance's "a health check answers within 100 ms throughout".
pub struct Prober {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(Vec<Duration>, Vec<String>)>,
}

/// What a [`Prober`] saw: checks run, the slowest one, the 99th percentile, and the status lines
/// that were not 200.
#[derive(Debug)]
pub struct Probed {
    pub checks: usize,
    pub slowest: Duration,
    pub p99: Duration,
    pub failures: Vec<String>,
}

impl Prober {
    /// Starts probing `addr`.
    pub fn start(addr: &str) -> Prober {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, addr) = (stop.clone(), addr.to_string());
        let thread = std::thread::spawn(move || {
            let (mut took, mut failures) = (Vec::new(), Vec::new());
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let (status, t) = health(&addr);
                took.push(t);
                if !status.contains(" 200") {
                    failures.push(status);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (took, failures)
        });
        Prober { stop, thread }
    }

    /// Stops probing; what was seen.
    pub fn stop(self) -> Probed {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (mut took, failures) = self.thread.join().unwrap();
        took.sort();
        let at = |q: f64| {
            took.get(((took.len() as f64 * q) as usize).min(took.len().saturating_sub(1)))
                .copied()
        };
        Probed {
            checks: took.len(),
            slowest: took.last().copied().unwrap_or_default(),
            p99: at(0.99).unwrap_or_default(),
            failures,
        }
    }
}

/// An HTTP client that returns every status (no error for 4xx/5xx), 60 s timeout.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// `POST <base><path>` with a JSON body: the status and the JSON answer (`null` if not JSON).
pub fn post(base: &str, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let mut resp = agent().post(format!("{base}{path}")).send_json(body).unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_json().unwrap_or(serde_json::Value::Null))
}

/// `initialize_active_data` arguments joining `n` copies of world_1's `city` table, each under
/// its own prefix (`<prefix><i>`), without conditions: a cross product of `n` tables.
pub fn city_copies(n: usize, prefix: &str) -> serde_json::Value {
    let aliases: serde_json::Map<String, serde_json::Value> = (0..n)
        .map(|i| {
            (
                format!("c{i}"),
                serde_json::json!({"original_table_name": "city", "modified_table_name": format!("{prefix}{i}")}),
            )
        })
        .collect();
    serde_json::json!({"database_path": "world_1/world_1.sqlite", "condition_sequence": [], "alias_to_table_dict": aliases})
}

/// Posts one JSON-RPC message to `<base>/mcp` (streamable HTTP); returns the HTTP status, the
/// session header and the JSON payload (from an SSE `data:` line or a JSON body), if any.
pub fn mcp_rpc(
    base: &str,
    session: Option<&str>,
    body: &serde_json::Value,
) -> (u16, Option<String>, Option<serde_json::Value>) {
    let mut req = agent()
        .post(format!("{base}/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json");
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let mut resp = req.send(body.to_string()).unwrap();
    let status = resp.status().as_u16();
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let payload = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| d.starts_with('{'))
        .and_then(|d| serde_json::from_str(d).ok())
        .or_else(|| serde_json::from_str(&text).ok());
    (status, sid, payload)
}

/// An initialised MCP-over-HTTP session on `base`: its `mcp-session-id`.
pub fn mcp_session(base: &str) -> String {
    let (status, sid, init) = mcp_rpc(
        base,
        None,
        &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(status, 200, "{init:?}");
    let sid = sid.expect("mcp-session-id");
    mcp_rpc(
        base,
        Some(&sid),
        &serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    sid
}
