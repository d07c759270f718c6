//! Fault injection on the HTTP routes (ToolGym's state controller, the same kinds as the
//! trajectory corpora, [`crate::emit::trajectories::FAULT_KINDS`]): a request to a tool or
//! endpoint with header `X-Toolforge-Fault: <kind>`, or a random share `--fault-rate` of them
//! (seeded by `--fault-seed`), gets the fault instead of (or on top of) its answer: `timeout`
//! (504), `rate_limit` (429 with `Retry-After: 1`), `unavailable` (503 with `Retry-After: 2`),
//! `truncated_result` / `corrupted_result` (200 with the body cut in half / garbled),
//! `session_expired` (SLOT/SEL: the session is ended, 404; REST: 401), and the constraint-level `constraint_changed`
//! (the server's row limit drops to 1 mid-task: 200 with
//! `{"rows": [first row], "total_rows": n, "truncated": true, "constraint": …}` and header
//! `X-Toolforge-Constraint: max_rows=1`). The response carries
//! `X-Toolforge-Fault-Injected: <kind>`; an unknown kind is 400. Only a server started with
//! `--faults` (or a `--fault-rate` above 0) injects any; otherwise the header is ignored.

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value as Json;

use super::state::{Shared, detail};

/// Injects the fault a request asks for (header) or draws (`fault_rate`); see the module doc.
pub(super) async fn inject_fault(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let is_tool = path.starts_with("/tools/") || state.toolkit.endpoints.iter().any(|e| e.path == path);
    // Faults are an opt-in of the operator (`--faults` or `--fault-rate`), never of a client.
    let enabled = state.config.faults || state.config.fault_rate > 0.0;
    if !is_tool || !enabled {
        return next.run(req).await;
    }
    let asked = req
        .headers()
        .get("x-toolforge-fault")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let kind = match asked {
        Some(k) if crate::emit::trajectories::FAULT_KINDS.contains(&k.as_str()) => Some(k),
        Some(k) => {
            return detail(
                StatusCode::BAD_REQUEST,
                format!(
                    "unknown fault {k:?}; one of {:?}",
                    crate::emit::trajectories::FAULT_KINDS
                ),
            );
        }
        None if state.config.fault_rate > 0.0 => {
            let n = state.counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let h = blake3::hash(format!("{}:{n}", state.config.fault_seed).as_bytes());
            let x = u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"));
            ((x % 1_000_000) as f64 / 1_000_000.0 < state.config.fault_rate).then(|| {
                let kinds = &crate::emit::trajectories::FAULT_KINDS;
                kinds[((x >> 32) % kinds.len() as u64) as usize].to_string()
            })
        }
        None => None,
    };
    let Some(kind) = kind else {
        return next.run(req).await;
    };
    let mut resp = match kind.as_str() {
        "timeout" => detail(
            StatusCode::GATEWAY_TIMEOUT,
            "the tool did not answer in time (injected fault)",
        ),
        "rate_limit" => {
            let mut r = detail(
                StatusCode::TOO_MANY_REQUESTS,
                "too many requests; retry after 1 s (injected fault)",
            );
            r.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("1"));
            r
        }
        "unavailable" => {
            let mut r = detail(
                StatusCode::SERVICE_UNAVAILABLE,
                "the service is temporarily unavailable; retry after 2 s (injected fault)",
            );
            r.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from_static("2"));
            r
        }
        "constraint_changed" => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
            let v: Json = serde_json::from_slice(&bytes).unwrap_or(Json::Null);
            // REST rows, or a SLOT/SEL `{"label", "output"}` whose output is limited alike.
            let limited = match v {
                Json::Array(rows) => serde_json::json!({
                    "rows": rows.iter().take(1).collect::<Vec<_>>(), "total_rows": rows.len(), "truncated": rows.len() > 1,
                    "constraint": "the server's row limit changed to 1 row per response mid-task (injected fault)"
                }),
                Json::Object(mut m) => {
                    m.insert(
                        "constraint".into(),
                        "the server's row limit changed to 1 row per response mid-task (injected fault)".into(),
                    );
                    Json::Object(m)
                }
                other => other,
            };
            parts.headers.remove(axum::http::header::CONTENT_LENGTH);
            parts.headers.insert(
                "x-toolforge-constraint",
                axum::http::HeaderValue::from_static("max_rows=1"),
            );
            Response::from_parts(parts, axum::body::Body::from(limited.to_string()))
        }
        // REST endpoints have no session: the fault is an expired credential, 401.
        "session_expired" if !path.starts_with("/tools/") => detail(
            StatusCode::UNAUTHORIZED,
            "the session expired (injected fault); authenticate again and repeat the request",
        ),
        "session_expired" => {
            let (parts, body) = req.into_parts();
            let bytes = axum::body::to_bytes(body, 64 * 1024).await.unwrap_or_default();
            let sid = serde_json::from_slice::<Json>(&bytes)
                .ok()
                .and_then(|b| b["session_id"].as_str().map(String::from));
            match sid {
                Some(sid) => {
                    state.sessions.lock().expect("sessions").remove(&sid);
                    detail(
                        StatusCode::NOT_FOUND,
                        format!("session {sid:?} expired (injected fault); create a new one with POST /sessions"),
                    )
                }
                None => {
                    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                        .await
                }
            }
        }
        _ => {
            let resp = next.run(req).await;
            let (mut parts, body) = resp.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let out = if kind == "truncated_result" {
                let cut = text.char_indices().nth(text.chars().count() / 2).map_or(0, |(i, _)| i);
                text[..cut].to_string()
            } else {
                let garbled: String = text
                    .chars()
                    .map(|c| if c.is_ascii_digit() || c == '"' { '\u{fffd}' } else { c })
                    .collect();
                format!("\u{fffd}{garbled}")
            };
            parts.headers.remove(axum::http::header::CONTENT_LENGTH);
            Response::from_parts(parts, axum::body::Body::from(out))
        }
    };
    resp.headers_mut().insert(
        "x-toolforge-fault-injected",
        axum::http::HeaderValue::from_str(&kind).expect("ascii kind"),
    );
    resp
}
