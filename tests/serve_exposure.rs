//! Who may reach the live server (issue 31, exposure), against the real server process on
//! 127.0.0.1: with `--token` every route without the bearer token gets 401; a foreign `Host`
//! gets 421 on every route; binding a non-loopback address without a token prints a warning;
//! a client cannot inject faults unless the server was started with `--faults`. Each server runs
//! under `ulimit -v 2 GiB` (`serve_support::serve`).

#[path = "serve_support/mod.rs"]
mod serve_support;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use serve_support::Server;

/// `toolforge serve` on slot-spider (built once for this file) under `ulimit -v 2 GiB`.
fn serve(flags: &[&str]) -> Server {
    serve_support::serve(&serve_support::slot_spider("serve_exposure"), flags)
}

/// One raw HTTP/1.1 request to 127.0.0.1 (`Host` and extra headers as given): the status code.
fn status(port: &str, method: &str, path: &str, headers: &[(&str, &str)]) -> u16 {
    let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = if method == "POST" { "{}" } else { "" };
    req.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    raw(port, &req)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

const ROUTES: [(&str, &str); 6] = [
    ("GET", "/healthz"),
    ("GET", "/openapi.json"),
    ("POST", "/sessions"),
    ("POST", "/tools/filter_data"),
    ("DELETE", "/sessions/x"),
    ("POST", "/mcp"),
];

#[test]
fn every_route_needs_the_bearer_token_when_one_is_set() {
    let server = serve(&["--token", "s3cret"]);
    for (m, p) in ROUTES {
        let local = ("Host", "127.0.0.1");
        assert_eq!(status(&server.port(), m, p, &[local]), 401, "{m} {p} without a token");
        assert_eq!(
            status(&server.port(), m, p, &[local, ("Authorization", "Bearer wrong")]),
            401,
            "{m} {p} with a wrong token"
        );
        assert_ne!(
            status(&server.port(), m, p, &[local, ("Authorization", "Bearer s3cret")]),
            401,
            "{m} {p} with the token"
        );
    }
}

#[test]
fn a_foreign_host_header_is_refused_on_every_route() {
    let server = serve(&[]);
    for (m, p) in ROUTES {
        let got = status(&server.port(), m, p, &[("Host", "evil.example:8000")]);
        assert!(got == 421 || got == 403, "{m} {p}: {got}");
        let got = status(
            &server.port(),
            m,
            p,
            &[("Host", &format!("localhost:{}", server.port()))],
        );
        assert!(got != 421 && got != 403, "{m} {p}: {got}");
    }
}

/// Issue 47's minor items: `bearer` in any case is the Bearer scheme (RFC 9110 §11.1); two
/// `Host` fields are 400 (RFC 9112 §3.2); an absolute-form target naming another host is held
/// to the Host rule (421), one naming this server is served.
#[test]
fn bearer_in_any_case_two_hosts_and_absolute_form_targets() {
    let server = serve(&["--token", "s3cret"]);
    let local = ("Host", "127.0.0.1");
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let auth = format!("{scheme} s3cret");
        assert_eq!(
            status(&server.port(), "GET", "/healthz", &[local, ("Authorization", &auth)]),
            200,
            "{scheme}"
        );
    }
    let token = ("Authorization", "Bearer s3cret");
    assert_eq!(
        status(
            &server.port(),
            "GET",
            "/healthz",
            &[local, ("Host", "127.0.0.1"), token]
        ),
        400,
        "two Host headers"
    );
    assert_eq!(
        status(
            &server.port(),
            "GET",
            "/healthz",
            &[local, ("Host", "evil.example"), token]
        ),
        400,
        "two different Host headers"
    );
    assert_eq!(
        status(&server.port(), "GET", "http://evil.example/healthz", &[local, token]),
        421,
        "absolute-form target naming another host"
    );
    let own = format!("http://127.0.0.1:{}/healthz", server.port());
    assert_eq!(status(&server.port(), "GET", &own, &[local, token]), 200, "{own}");
}

#[test]
fn a_non_loopback_bind_without_a_token_prints_a_warning() {
    let server = serve(&["--host", "0.0.0.0"]);
    let line = server.stderr_line(Duration::from_secs(10)).unwrap();
    assert!(line.contains("WARNING") && line.contains("token"), "{line}");
    let quiet = serve(&["--host", "0.0.0.0", "--token", "t"]);
    assert_eq!(quiet.stderr_line(Duration::from_millis(500)), None);
}

#[test]
fn clients_cannot_inject_faults_unless_the_server_enables_them() {
    let plain = serve(&[]);
    let fault = [("Host", "127.0.0.1"), ("X-Toolforge-Fault", "timeout")];
    // A call without a session: 422 from the tool route, not the injected 504.
    assert_eq!(status(&plain.port(), "POST", "/tools/filter_data", &fault), 422);
    let enabled = serve(&["--faults"]);
    assert_eq!(status(&enabled.port(), "POST", "/tools/filter_data", &fault), 504);
}

#[test]
fn delete_session_is_in_the_openapi_document() {
    let server = serve(&[]);
    let mut s = TcpStream::connect(format!("127.0.0.1:{}", server.port())).unwrap();
    s.write_all(b"GET /openapi.json HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let body = text.split("\r\n\r\n").nth(1).unwrap();
    let doc: serde_json::Value = serde_json::from_str(body).unwrap();
    let delete = &doc["paths"]["/sessions/{id}"]["delete"];
    assert!(
        delete["responses"]["200"].is_object() && delete["responses"]["404"].is_object(),
        "{delete}"
    );
}

/// One raw request (the whole text as given) and the whole response text.
fn raw(port: &str, request: &str) -> String {
    let mut s = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text
}

/// The value of response header `name` (case-insensitive), if present.
fn header<'a>(response: &'a str, name: &str) -> Option<&'a str> {
    let head = response.split("\r\n\r\n").next().unwrap_or_default();
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// CORS is opt-in (issue 31 item 3): without `--cors-origin` neither a simple request nor a
/// preflight from a browser page gets `Access-Control-Allow-Origin`; with it, the listed origin
/// (and only it) does, and the preflight names the methods and headers a client needs.
#[test]
fn cors_headers_only_for_origins_the_server_was_started_with() {
    let preflight = "OPTIONS /tools/filter_data HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://app.example\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization, content-type\r\nConnection: close\r\n\r\n";
    let simple = |origin: &str| {
        format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: {origin}\r\nConnection: close\r\n\r\n")
    };
    let plain = serve(&[]);
    assert_eq!(
        header(
            &raw(&plain.port(), &simple("http://app.example")),
            "access-control-allow-origin"
        ),
        None
    );
    assert_eq!(
        header(&raw(&plain.port(), preflight), "access-control-allow-origin"),
        None
    );

    let open = serve(&["--cors-origin", "http://app.example"]);
    let r = raw(&open.port(), &simple("http://app.example"));
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(header(&r, "access-control-allow-origin"), Some("http://app.example"));
    let r = raw(&open.port(), &simple("http://evil.example"));
    assert_eq!(header(&r, "access-control-allow-origin"), None, "{r}");
    let r = raw(&open.port(), preflight);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(header(&r, "access-control-allow-origin"), Some("http://app.example"));
    let methods = header(&r, "access-control-allow-methods")
        .unwrap_or_default()
        .to_ascii_uppercase();
    assert!(methods.contains("POST") && methods.contains("DELETE"), "{r}");
    let headers = header(&r, "access-control-allow-headers")
        .unwrap_or_default()
        .to_ascii_lowercase();
    assert!(
        headers.contains("authorization") && headers.contains("mcp-session-id"),
        "{r}"
    );
}

/// A request URI over 8 KiB gets 414 with a JSON `detail` body (the documented error shape) up to
/// 64 KiB. Past that hyper refuses the head before any handler runs, with its own fixed limits
/// (documented in README): a URI over 64 KiB is a 414 and a head over its ~408 KiB buffer a
/// 431, both without a body and with the connection closed. Either way the server keeps serving.
#[test]
fn long_uris_get_414_with_a_json_detail_body() {
    let server = serve(&[]);
    let get = |len: usize| {
        raw(
            &server.port(),
            &format!(
                "GET /healthz?x={} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                "a".repeat(len)
            ),
        )
    };
    for len in [8_200usize, 20_000, 65_000] {
        let r = get(len);
        assert!(r.starts_with("HTTP/1.1 414"), "{len}: {}", &r[..r.len().min(200)]);
        let body = r.split("\r\n\r\n").nth(1).unwrap_or_default();
        let json: serde_json::Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{len}: {e}: {r:?}"));
        assert!(json["detail"].is_string(), "{len}: {body}");
    }
    for (len, code) in [(100_000usize, "414"), (1_000_000, "431")] {
        let r = get(len);
        assert!(
            r.starts_with(&format!("HTTP/1.1 {code}")),
            "{len}: {}",
            &r[..r.len().min(200)]
        );
    }
    assert_eq!(status(&server.port(), "GET", "/healthz", &[("Host", "127.0.0.1")]), 200);
}
