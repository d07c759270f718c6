//! Who may reach the server (issue 31, exposure), checked on every route before anything else:
//!
//! - **Host** ([`allowed_host`]): a request whose `Host` names another host than the loopback
//!   names (`localhost`, `127.0.0.1`, `::1`), the address the server is bound to, or one given
//!   with `--allowed-host` is refused with 421 Misdirected Request — the defence against DNS
//!   rebinding, which `/mcp` (rmcp) already had. A request without `Host` (HTTP/1.0) passes;
//!   one with two `Host` fields is 400; an absolute-form target's authority is held to the
//!   same rule as `Host`.
//! - **Token**: with `--token` (or `TOOLFORGE_TOKEN`) set, every request must carry
//!   `Authorization: Bearer <token>` (the scheme name in any case), else 401 with `WWW-Authenticate: Bearer`. The comparison
//!   is of BLAKE3 hashes (constant time in the token).
//! - Binding a non-loopback address without a token prints a warning ([`warn_if_exposed`]).
//! - **CORS** is off unless asked for: `--cors-origin ORIGIN` (repeatable, `*` for any) answers
//!   browsers' preflight requests and adds `Access-Control-Allow-Origin` for those origins
//!   ([`cors_layer`], tower-http's `CorsLayer`). Without it a page on another origin cannot
//!   read the server's answers, which is the safe default for a server that runs tools.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use super::state::{ServeConfig, Shared, detail};

/// Whether the authority in a `Host` header (`name[:port]`, `[v6]:port`) names this server
/// under `config` (module docs).
pub fn allowed_host(host: &str, config: &ServeConfig) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(n, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                n
            } else {
                host
            }
        }),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    ["localhost", "127.0.0.1", "::1"].contains(&name.as_str())
        || (!config.addr.ip().is_unspecified() && name == config.addr.ip().to_string())
        || config.allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(&name))
}

/// The middleware of the module docs.
pub(super) async fn guard(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let mut hosts = req.headers().get_all(header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        // RFC 9112 §3.2: a request with more than one Host field is answered 400.
        return detail(StatusCode::BAD_REQUEST, "more than one Host header");
    }
    let misdirected = || {
        detail(
            StatusCode::MISDIRECTED_REQUEST,
            "the Host header names another server (DNS rebinding defence; start the server with --allowed-host NAME to accept it)",
        )
    };
    if let Some(host) = host {
        if !host.to_str().is_ok_and(|h| allowed_host(h, &state.config)) {
            return misdirected();
        }
    }
    // An absolute-form target (`GET http://evil.example/…`) names the host it is for, which
    // takes the place of `Host` (RFC 9112 §3.2.2): held to the same rule.
    if let Some(authority) = req.uri().authority() {
        if !allowed_host(authority.as_str().rsplit('@').next().unwrap_or_default(), &state.config) {
            return misdirected();
        }
    }
    if let Some(token) = &state.config.token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_credentials)
            .unwrap_or_default();
        if blake3::hash(given.trim().as_bytes()) != blake3::hash(token.as_bytes()) {
            let mut r = detail(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token (Authorization: Bearer <token>)",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    next.run(req).await
}

/// The credentials of an `Authorization` value of the `Bearer` scheme, whose name is
/// case-insensitive (RFC 9110 §11.1): `bearer abc` and `BEARER abc` give `abc`.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(credentials)
}

/// The CORS policy of the module docs for `origins` (`None` when the list is empty: no CORS
/// headers at all). Methods: GET, POST, DELETE, OPTIONS; request headers: `Authorization`,
/// `Content-Type`, `Mcp-Session-Id`, `Mcp-Protocol-Version`, `X-Toolforge-Fault`; the
/// `Mcp-Session-Id` response header is exposed (the MCP streamable-HTTP transport reads it).
/// Errors: an origin that is not a valid header value is skipped with a warning.
pub fn cors_layer(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{HeaderName, Method};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| match HeaderValue::from_str(o.trim_end_matches('/')) {
                    Ok(v) => Some(v),
                    Err(_) => {
                        eprintln!("warning: --cors-origin {o:?} is not a valid origin; skipped");
                        None
                    }
                }),
        )
    };
    let headers = [
        "authorization",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
        "x-toolforge-fault",
    ]
    .map(HeaderName::from_static);
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
            .allow_headers(headers)
            .expose_headers([HeaderName::from_static("mcp-session-id")]),
    )
}

/// Prints a warning on standard error when `config` binds a non-loopback address without a token.
pub fn warn_if_exposed(config: &ServeConfig) {
    if !config.addr.ip().is_loopback() && config.token.is_none() {
        eprintln!(
            "WARNING: toolforge serve is bound to {} (not loopback) WITHOUT a token: anyone who can reach this address can run the tools. Set --token or TOOLFORGE_TOKEN.",
            config.addr
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_host_headers_are_told_apart_from_this_servers_names() {
        let mut config = ServeConfig::default();
        for ok in ["127.0.0.1:8000", "localhost", "LOCALHOST:1", "[::1]:80", "localhost."] {
            assert!(allowed_host(ok, &config), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8000",
            "127.0.0.1.evil.example",
            "localhost:80@x",
        ] {
            assert!(!allowed_host(bad, &config), "{bad}");
        }
        config.allowed_hosts = vec!["tools.lan".into()];
        assert!(allowed_host("tools.lan:8000", &config));
        config.addr = ([10, 0, 0, 5], 8000).into();
        assert!(allowed_host("10.0.0.5:8000", &config));
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for v in ["Bearer abc", "bearer abc", "BEARER abc"] {
            assert_eq!(bearer_credentials(v), Some("abc"), "{v}");
        }
        assert_eq!(bearer_credentials("Basic abc"), None);
        assert_eq!(bearer_credentials("Bearerabc"), None);
    }
}
