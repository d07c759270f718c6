//! Connection limits of the live server (issue 31 D4), against the real server process on
//! 127.0.0.1 under `ulimit -v 2 GiB`: 2,000 idle connections and 500 slow-header connections
//! (one byte every 200 ms) keep the server under 300 MiB while a health check on a new connection
//! answers within 100 ms; the header-read timeout closes idle, slow and kept-alive connections;
//! SIGTERM stops the server within its shutdown deadline with a half-sent request open. Every
//! loop is bounded in count and time.

#[path = "serve_support/mod.rs"]
mod serve_support;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serve_support::{Server, health};

/// `toolforge serve` on rest-spider (built once for this file) under `ulimit -v 2 GiB`.
fn serve(flags: &[&str]) -> Server {
    serve_support::serve(&serve_support::rest_spider("serve_connections"), flags)
}

/// Whether the server has closed `s` (a read returns end of stream or a reset within `wait`).
fn closed(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 256];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {
                return false;
            }
            Err(_) => return true,
        }
    }
}

#[test]
fn idle_and_slow_header_connections_are_bounded_and_timed_out() {
    let server = serve(&["--header-timeout-ms", "3000"]);
    let idle_rss = server.rss_mib();
    let mut idle: Vec<TcpStream> = (0..2000).map(|_| TcpStream::connect(&server.addr).unwrap()).collect();
    let mut slow: Vec<TcpStream> = (0..500)
        .map(|_| {
            let mut s = TcpStream::connect(&server.addr).unwrap();
            s.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
            s
        })
        .collect();
    // One header byte every 200 ms on every slow connection, for 2 s; the health check and
    // the RSS are taken throughout.
    let mut worst = Duration::ZERO;
    let mut peak = 0;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        for s in &mut slow {
            let _ = s.write_all(b"X");
        }
        let (status, took) = health(&server.addr);
        assert!(status.contains("200"), "{status:?}");
        worst = worst.max(took);
        peak = peak.max(server.rss_mib());
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "connections: RSS {idle_rss} MiB idle, peak {peak} MiB with 2,000 idle + 500 slow-header connections; slowest health check {worst:?}"
    );
    assert!(peak < 300, "{peak} MiB");
    assert!(worst < Duration::from_millis(100), "{worst:?}");
    // Past the 3 s header-read timeout every one of them is closed by the server.
    std::thread::sleep(Duration::from_millis(1500));
    let open_idle = idle
        .iter_mut()
        .map(|s| closed(s, Duration::from_millis(5)))
        .filter(|c| !c)
        .count();
    let open_slow = slow
        .iter_mut()
        .map(|s| closed(s, Duration::from_millis(5)))
        .filter(|c| !c)
        .count();
    assert_eq!(
        (open_idle, open_slow),
        (0, 0),
        "connections still open after the timeout"
    );
    // A kept-alive connection is closed once idle past the timeout too.
    let mut kept = TcpStream::connect(&server.addr).unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut b = [0u8; 512];
    kept.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    assert!(kept.read(&mut b).unwrap() > 0);
    assert!(
        closed(&mut kept, Duration::from_secs(6)),
        "kept-alive connection not closed"
    );
}

#[test]
fn connections_past_the_maximum_are_closed_and_sigterm_stops_within_the_deadline() {
    let mut server = serve(&[
        "--max-connections",
        "50",
        "--header-timeout-ms",
        "60000",
        "--shutdown-deadline-ms",
        "1000",
    ]);
    let held: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(&server.addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(300));
    // The 51st is accepted and closed at once.
    let mut extra = TcpStream::connect(&server.addr).unwrap();
    let _ = extra.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert!(closed(&mut extra, Duration::from_secs(2)), "51st connection served");
    drop(held);
    std::thread::sleep(Duration::from_millis(300));
    assert!(health(&server.addr).0.contains("200"));
    // A half-sent request open; SIGTERM stops the server within the 1 s deadline.
    let mut half = TcpStream::connect(&server.addr).unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let term = Instant::now();
    assert!(
        Command::new("kill")
            .args(["-TERM", &server.child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let mut status = None;
    while term.elapsed() < Duration::from_secs(5) {
        if let Some(s) = server.child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = term.elapsed();
    assert!(status.is_some(), "still running {took:?} after SIGTERM");
    assert!(took < Duration::from_millis(2000), "{took:?}");
}
