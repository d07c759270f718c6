//! Issue 47 D2 and D4 against the real server process on 127.0.0.1 under `ulimit -v 2 GiB`,
//! default flags unless named: one memory budget for the whole server — sessions each within
//! their own budget, and joins each accepted on their own, cannot together take the process
//! past it (idle sessions are ended least recently used first, else 503 with `Retry-After`) —
//! and slow request bodies are cut off like slow heads while the health check keeps answering.

#[path = "serve_support/mod.rs"]
mod serve_support;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;

use serve_support::{Prober, Server, agent, city_copies, post};

fn dataset() -> PathBuf {
    serve_support::slot_spider("serve_memory")
}

fn serve(flags: &[&str]) -> Server {
    serve_support::serve(&dataset(), flags)
}

/// One test of this file at a time: each loads its server to the budget, and RSS and timing
/// are measured.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Sessions on `slot-spider/787` each keep one labelled result of about 40 MiB (the join
/// concatenated with itself), each within the 64 MiB session budget: the server (default
/// budget: a quarter of `ulimit -v`, 488 MiB) ends the least recently used idle sessions as it
/// fills and never aborts (with 60 such sessions it aborted at session 34; 24 sessions fill the
/// budget twice over, in a third of the time); every call is answered 200 or 503 with
/// `Retry-After`; ended sessions answer 404; after the sessions end, RSS falls back. (`--max-rows
/// 10` only shortens the answers' previews.)
#[test]
fn sessions_of_large_results_share_one_server_budget() {
    let _one = one_at_a_time();
    let mut server = serve(&["--max-rows", "10"]);
    let base = server.base();
    let prober = Prober::start(&server.addr);
    let mut sessions = Vec::new();
    let mut peak = 0;
    for i in 0..24 {
        let (s, b) = post(&base, "/sessions", &json!({"id": "slot-spider/787"}));
        assert!(s == 200 || s == 503, "session {i}: {s} {b}");
        if s != 200 {
            continue;
        }
        let sid = b["session_id"].as_str().unwrap().to_string();
        let start = format!("${}$", b["label"].as_str().unwrap());
        let resp = agent()
            .post(format!("{base}/tools/concatenate_data"))
            .send_json(json!({"session_id": sid, "label": "keep",
                "arguments": {"data_source_1": start, "data_source_2": start}}))
            .unwrap();
        let status = resp.status().as_u16();
        assert!(status == 200 || status == 503, "session {i}: {status}");
        if status == 503 {
            assert!(
                resp.headers().get("retry-after").is_some(),
                "session {i}: no Retry-After"
            );
        }
        sessions.push(sid);
        peak = peak.max(server.rss_mib());
        assert!(server.running(), "the server exited at session {i}");
    }
    let probed = prober.stop();
    eprintln!("24 sessions: peak RSS {peak} MiB; health checks {probed:?}");
    assert!(probed.failures.is_empty(), "{probed:?}");
    // The first sessions were ended to make room.
    let (s, b) = post(
        &base,
        "/tools/retrieve_data",
        &json!({"session_id": sessions[0], "arguments": {"data_source": "$keep$", "key_name": "country_Name"}}),
    );
    assert_eq!(s, 404, "{b}");
    for sid in &sessions {
        let _ = agent().delete(format!("{base}/sessions/{sid}")).call();
    }
    let rss = server.settles_under(100, Duration::from_secs(12));
    eprintln!("RSS {rss} MiB after the sessions ended");
    assert!(rss < 100, "{rss} MiB");
    assert!(server.running());
}

/// Four ad-hoc joins at once, each within `--max-join-rows` and `--max-join-mib` on its own
/// (a cross product of two copies of world_1's `city`, 16.6M rows) but together past the
/// server's budget: each is refused (413 past its own budget, 503 past the server's) and the
/// server never aborts (it did).
#[test]
fn concurrent_joins_are_held_to_one_server_budget() {
    let _one = one_at_a_time();
    let mut server = serve(&[
        "--allow-ad-hoc-joins",
        "--max-join-rows",
        "20000000",
        "--timeout-ms",
        "60000",
    ]);
    let base = server.base();
    let prober = Prober::start(&server.addr);
    let joins: Vec<_> = (0..4)
        .map(|i| {
            let base = base.clone();
            std::thread::spawn(move || {
                post(
                    &base,
                    "/sessions",
                    &json!({"arguments": city_copies(2, &format!("j{i}_"))}),
                )
            })
        })
        .collect();
    for j in joins {
        let (s, b) = j.join().unwrap();
        assert!(s == 413 || s == 503, "{s} {b}");
    }
    let probed = prober.stop();
    eprintln!("four joins: {probed:?}");
    assert!(server.running(), "the server exited");
    assert!(probed.failures.is_empty(), "{probed:?}");
    let rss = server.settles_under(100, Duration::from_secs(12));
    assert!(rss < 100, "{rss} MiB");
}

/// 1,000 connections (the issue used 4,100; the mechanism is the same, and 1,000 stays within
/// a test's file limit and seconds) send a complete head with `Content-Length: 60000`, then one
/// body byte every 500 ms: with `--body-timeout-ms 2000` each is answered 400 and closed within
/// the limit plus 2 s (they were never closed), and the health check answers throughout.
#[test]
fn slow_request_bodies_are_closed_and_health_answers_throughout() {
    let _one = one_at_a_time();
    let mut server = serve(&["--body-timeout-ms", "2000"]);
    let prober = Prober::start(&server.addr);
    let head = "POST /tools/filter_data HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n";
    let started = Instant::now();
    let mut slow: Vec<TcpStream> = (0..1000)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).unwrap();
            s.write_all(head.as_bytes()).unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect();
    let mut closed = vec![false; slow.len()];
    let mut answers = Vec::new();
    while started.elapsed() < Duration::from_secs(6) && closed.iter().any(|c| !c) {
        for (i, s) in slow.iter_mut().enumerate() {
            if closed[i] {
                continue;
            }
            let mut buf = [0u8; 4096];
            match s.read(&mut buf) {
                Ok(0) => closed[i] = true,
                Ok(n) => answers.push(
                    String::from_utf8_lossy(&buf[..n])
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                ),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let _ = s.write_all(b" ");
                }
                Err(_) => closed[i] = true,
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let took = started.elapsed();
    let probed = prober.stop();
    let open = closed.iter().filter(|c| !**c).count();
    eprintln!(
        "slow bodies: {open} open after {took:?}; health {probed:?}; answers {:?}",
        &answers[..answers.len().min(3)]
    );
    assert_eq!(open, 0, "{open} slow bodies still open after {took:?}");
    assert!(
        answers.iter().all(|a| a.starts_with("HTTP/1.1 400")),
        "{:?}",
        &answers[..answers.len().min(5)]
    );
    assert!(probed.checks > 10 && probed.failures.is_empty(), "{probed:?}");
    assert!(probed.slowest < Duration::from_millis(500), "{probed:?}");
    assert!(server.running());
}
