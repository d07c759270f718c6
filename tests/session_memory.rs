//! Sessions share the immutable joined table (issue 18): 1,000 SLOT sessions on Spider's
//! `world_1` (one join, ~1.2 MB as a table) stay under 200 MB of resident memory, because every
//! session holds a clone of one `Arc`-backed Arrow table instead of its own copy. Real build,
//! real server on 127.0.0.1, RSS from `/proc/<server pid>/status`. `just bench` prints bytes per session
//! (`benches/sessions.sh`).

use std::io::BufRead as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Resident memory of process `pid`, from `/proc/<pid>/status`.
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// The server process; killed on drop.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn thousand_world_1_sessions_share_one_joined_table() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    toolforge::pipeline::build_and_emit(
        &root.join("recipes/slot-spider.toml"),
        Some(&tmp.path().join("out")),
        Some(&tmp.path().join("store")),
        false,
    )
    .unwrap();
    let dir = tmp.path().join("out/slot-spider");
    let ids: Vec<String> = toolforge::emit::read_rows(&dir)
        .unwrap()
        .into_iter()
        .filter(|r| r.db_id.as_deref() == Some("world_1"))
        .map(|r| r.id)
        .collect();
    assert!(!ids.is_empty());
    // The real server in its own process, so its RSS is the sessions' memory alone.
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .arg("serve")
        .arg(&dir)
        .arg("--databases")
        .arg(root.join("../shared/corpora/spider/database"))
        .args(["--port", "0", "--max-sessions", "2000"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let server = Server(child);
    let base = line.trim().split("listening on ").nth(1).unwrap().to_string();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let open = |id: &str| {
        let mut resp = agent
            .post(format!("{base}/sessions"))
            .send_json(serde_json::json!({ "id": id }))
            .unwrap();
        // Reading the body returns the connection to the agent's pool (one keep-alive
        // connection, as a client would use).
        let status = resp.status();
        let body = resp.body_mut().read_to_string().unwrap();
        assert_eq!(status, 200, "{body}");
    };
    // Warm-up: one session per distinct example (every join of world_1 computed once).
    for id in &ids {
        open(id);
    }
    let pid = server.0.id();
    let n = 1000;
    // First 1,000 sessions: the acceptance figure (the whole server under 200 MB).
    for i in 0..n {
        open(&ids[i % ids.len()]);
    }
    let after = rss_bytes(pid);
    // Bytes per session from the next 1,000 (the server's `--max-sessions` keeps all 2,000):
    // the slope once the allocator's per-thread arenas have grown, so it is the sessions' own
    // memory and not the first requests' allocator warm-up, which varies with machine load.
    for i in n..2 * n {
        open(&ids[i % ids.len()]);
    }
    let after_2n = rss_bytes(pid);
    let per_session = after_2n.saturating_sub(after) / n as u64;
    eprintln!(
        "sessions: {n} world_1 sessions, server RSS {} MB; {per_session} bytes per further session",
        after / 1_000_000
    );
    assert!(after < 200_000_000, "server RSS {after} bytes with {n} sessions");
    assert!(
        per_session < 20_000,
        "{per_session} bytes per session: the joined table is copied"
    );
}
