//! Issue 47: answers are memory too. A REST endpoint's rows and a tool's output are JSON text the
//! server builds and holds until the client has read it; they are measured before they are
//! written, reserved from the one server budget (`--max-server-mib`) while in flight and given
//! back as they are sent (`src/serve/reply.rs`). Against the real server process on 127.0.0.1
//! under `ulimit -v 2 GiB`, on a copy of Spider's wta_1 whose players' first names are padded
//! (so one answer of thousands of players is tens of MB; `--databases` points the server at it).

#[path = "serve_support/mod.rs"]
mod serve_support;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use serve_support::{Prober, Server, mcp_rpc, mcp_session, post, serve_on};

/// One test of this file at a time: each loads its server to the budget, and RSS is measured.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn padded_databases(pad: usize) -> PathBuf {
    serve_support::padded_wta("serve_answers", pad)
}

/// The rows of `sql` on `db` with `?1` bound to `param`, as the JSON text the server writes
/// (the test's own reading).
fn sqlite_json(db: &Path, sql: &str, param: &str) -> String {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut stmt = c.prepare(sql).unwrap();
    let n = stmt.column_count();
    let rows: Vec<Vec<Value>> = stmt
        .query_map([param], |r| {
            Ok((0..n)
                .map(|i| match r.get_ref(i).unwrap() {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(v) => json!(v),
                    rusqlite::types::ValueRef::Real(v) => json!(v),
                    rusqlite::types::ValueRef::Text(t) => json!(String::from_utf8_lossy(t)),
                    rusqlite::types::ValueRef::Blob(b) => {
                        json!(b.iter().map(|x| format!("{x:02x}")).collect::<String>())
                    }
                })
                .collect())
        })
        .unwrap()
        .map(Result::unwrap)
        .collect();
    serde_json::to_string(&rows).unwrap()
}

/// rest-spider's endpoint listing wta_1 players' first and last names by `hand`, asked for the
/// 14,193 players of hand `U`: its path with the query, and its answer's JSON text on
/// `databases` by SQLite.
fn large_answer(rest: &Path, databases: &Path) -> (String, String) {
    let endpoints: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(rest.join("tools/endpoints.json")).unwrap()).unwrap();
    let e = endpoints
        .iter()
        .find(|e| {
            e["db_id"] == "wta_1"
                && e["path"]
                    .as_str()
                    .unwrap()
                    .ends_with("/first_name_and_last_name_by_hand")
        })
        .expect("rest-spider's first_name_and_last_name_by_hand endpoint");
    let db = databases.join("wta_1/wta_1.sqlite");
    (
        format!("{}?hand=U", e["path"].as_str().unwrap()),
        sqlite_json(&db, e["sql"].as_str().unwrap(), "U"),
    )
}

/// `GET path` on a new connection, the whole answer read: the status line, the `Retry-After`
/// header's presence, the body, and the time to the status line.
fn get_whole(addr: &str, path: &str) -> (String, bool, Vec<u8>, Duration) {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let mut first = [0u8; 1];
    let _ = s.read_exact(&mut first);
    let took = started.elapsed();
    let mut all = first.to_vec();
    let _ = s.read_to_end(&mut all);
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(all.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&all[..split]).to_string();
    let status = head.lines().next().unwrap_or_default().to_string();
    let retry = head.to_ascii_lowercase().contains("\r\nretry-after:");
    (status, retry, all[split..].to_vec(), took)
}

/// Samples the server's RSS every 50 ms until stopped: the peak.
fn peak_rss(
    server: &Server,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<u64>,
) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (flag, pid) = (stop.clone(), server.child.id());
    let t = std::thread::spawn(move || {
        let mut peak = 0;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            if std::path::Path::new(&format!("/proc/{pid}/status")).exists() {
                peak = peak.max(serve_support::rss_mib(pid));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        peak
    });
    (stop, t)
}

/// 24 concurrent requests for a REST answer of ~57 MB (14,193 wta_1 players, first names
/// padded by 4,000 random hex characters), default budget (a quarter of `ulimit -v`) and
/// `--timeout-ms 30000`: the server answers each 200 with the whole answer — byte for byte
/// SQLite's rows — or 503 with `Retry-After` within `--timeout-ms` plus 1 s, the health check answers throughout, the process
/// never aborts and its RSS falls back under 100 MiB. Before, the rows and their text were not
/// counted: 24 answers of ~57 MB each in flight (and their rows, as many again) took the process past its address space.
#[test]
fn concurrent_large_rest_answers_are_held_to_the_server_budget() {
    let _one = one_at_a_time();
    let rest = serve_support::rest_spider("serve_answers");
    let databases = padded_databases(4000);
    let (path, want) = large_answer(&rest, &databases);
    assert!(want.len() > 50 << 20, "{path}: {} bytes", want.len());
    // The query sorts its 14,193 rows of 4 KB; 24 of them at once on two shared cores take
    // longer than the default 5 s.
    let mut server = serve_on(&rest, &databases, &["--timeout-ms", "30000"]);
    let prober = Prober::start(&server.addr);
    let (stop, peak) = peak_rss(&server);
    let answers: Vec<_> = (0..24)
        .map(|_| {
            let (addr, path) = (server.addr.clone(), path.clone());
            std::thread::spawn(move || get_whole(&addr, &path))
        })
        .collect();
    let answers: Vec<_> = answers.into_iter().map(|a| a.join().unwrap()).collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let peak = peak.join().unwrap();
    let probed = prober.stop();
    let ok = answers.iter().filter(|a| a.0.contains(" 200")).count();
    let busy = answers.iter().filter(|a| a.0.contains(" 503")).count();
    eprintln!(
        "{path}: {} MB answers, {ok} × 200, {busy} × 503; peak RSS {peak} MiB; health {probed:?}",
        want.len() >> 20
    );
    assert!(server.running(), "the server exited");
    for (status, retry, body, took) in &answers {
        if status.contains(" 200") {
            assert!(body.as_slice() == want.as_bytes(), "{status}: {} bytes", body.len());
        } else {
            assert!(status.contains(" 503"), "{status}: {}", String::from_utf8_lossy(body));
            assert!(*retry, "{status} without Retry-After");
            assert!(String::from_utf8_lossy(body).contains("--max-server-mib"));
            assert!(*took < Duration::from_secs(31), "{status} after {took:?}");
        }
    }
    assert!(ok >= 1 && busy >= 1, "{ok} answered, {busy} refused");
    assert!(probed.failures.is_empty(), "{probed:?}");
    let rss = server.settles_under(100, Duration::from_secs(12));
    assert!(rss < 100, "{rss} MiB");
    assert!(server.running());
}

/// A tool's answer is counted before it is written: on a session of the padded players (first
/// names padded by 1,500 characters: a list of them is ~31 MB), with `--max-server-mib 180`, the
/// HTTP call listing every first name is answered whole (its text counted, and within the
/// budget), while the same call over MCP — whose answer the server holds four times over (text
/// content, structured content, rmcp's message) — is refused with −32001 and `data.status` 503
/// naming `--max-server-mib`; before, it was built uncounted and sent. With `--max-rows 10` (a
/// short preview) the MCP call is answered.
#[test]
fn tool_answers_are_counted_before_they_are_written() {
    let _one = one_at_a_time();
    let slot = serve_support::slot_spider("serve_answers");
    let databases = padded_databases(1500);
    for (flags, mcp_refused) in [(&["--max-rows", "10"][..], false), (&[][..], true)] {
        // In use: the join (~33 MB) and the HTTP call's output (~27 MB); the MCP call reserves
        // its working memory (92 MiB) while it runs, then its answer (~120 MiB): between them.
        let mut args = vec!["--allow-ad-hoc-joins", "--max-server-mib", "180"];
        args.extend_from_slice(flags);
        let mut server = serve_on(&slot, &databases, &args);
        let (s, b) = post(
            &server.base(),
            "/sessions",
            &json!({"arguments": serve_support::players_join()}),
        );
        assert_eq!(s, 200, "{b}");
        let sid = b["session_id"].as_str().unwrap().to_string();
        let start = format!("${}$", b["label"].as_str().unwrap());
        let arguments = json!({"data_source": start, "key_name": "players_first_name"});
        let mut resp = serve_support::agent()
            .post(format!("{}/tools/retrieve_data", server.base()))
            .send_json(json!({"session_id": sid, "arguments": arguments}))
            .unwrap();
        let s = resp.status().as_u16();
        let b: Value = resp
            .body_mut()
            .with_config()
            .limit(200 << 20)
            .read_json()
            .unwrap_or(Value::Null);
        assert_eq!(s, 200, "{flags:?}: {}", b["detail"]);
        let shown = if mcp_refused {
            &b["output"]
        } else {
            &b["output"]["values"]
        };
        assert_eq!(
            shown.as_array().map(Vec::len),
            Some(if mcp_refused { 20662 } else { 10 }),
            "{flags:?}"
        );
        let mcp = mcp_session(&server.base());
        let mut arguments = arguments.as_object().unwrap().clone();
        arguments.insert("session_id".into(), json!(sid));
        let (_, _, answer) = mcp_rpc(
            &server.base(),
            Some(&mcp),
            &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "retrieve_data", "arguments": arguments}}),
        );
        let answer = answer.unwrap();
        if mcp_refused {
            assert_eq!(answer["error"]["code"], -32001, "{answer}");
            assert_eq!(answer["error"]["data"]["status"], 503, "{answer}");
            assert!(
                answer["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("--max-server-mib"),
                "{answer}"
            );
        } else {
            assert!(answer.get("error").is_none(), "{answer}");
            assert_ne!(answer["result"]["isError"], true, "{answer}");
        }
        assert!(server.running());
    }
}
