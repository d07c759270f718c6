//! JSON-RPC 2.0 frame checks in front of the MCP server (issue 31 D8), over stdio and over
//! streamable HTTP alike: rmcp drops a frame it cannot parse without a reply, and answers a
//! malformed `tools/call` with −32601; the JSON-RPC 2.0 specification (§5.1) requires
//!
//! - **−32700 Parse error**, `id: null`: the frame is not JSON (truncated, not UTF-8, nested
//!   past serde_json's depth limit, a number out of range);
//! - **−32600 Invalid Request**: JSON that is not a request object — not an object (MCP has no
//!   batches since 2025-06-18), `jsonrpc` not `"2.0"`, `method` not a string, an `id` that is
//!   not a string, an integer or null; `id` is the request's when it is a valid one, else null;
//! - **−32602 Invalid params**: `tools/call` whose `params` is not an object, whose `name` is
//!   missing or not a string, or whose `arguments` is present and not an object.
//!
//! Responses (frames with `result` or `error` and no `method`) pass through, as do valid frames.

use serde_json::{Value as Json, json};

/// The JSON-RPC error response for `frame` when it is not a valid request or notification
/// (module docs), else `None` (the frame goes on to rmcp).
pub fn check_frame(frame: &[u8]) -> Option<Json> {
    let value: Json = match serde_json::from_slice(frame) {
        Ok(v) => v,
        Err(e) => return Some(error(Json::Null, -32700, format!("Parse error: {e}"))),
    };
    let Json::Object(o) = &value else {
        return Some(error(
            Json::Null,
            -32600,
            "Invalid Request: a frame must be one JSON-RPC object (no batches)".into(),
        ));
    };
    let id = match o.get("id") {
        None => Json::Null,
        // JSON-RPC allows a null id but discourages it; MCP forbids it (a request's id "MUST
        // NOT be null"): refused, the reply's `id` null as for any id that cannot be used.
        Some(Json::Null) if o.contains_key("method") => {
            return Some(error(
                Json::Null,
                -32600,
                "Invalid Request: `id` must not be null (MCP); use a string or an integer".into(),
            ));
        }
        Some(Json::Null) => Json::Null,
        Some(Json::String(s)) => Json::String(s.clone()),
        Some(Json::Number(n)) if n.is_i64() || n.is_u64() => Json::Number(n.clone()),
        Some(_) => {
            return Some(error(
                Json::Null,
                -32600,
                "Invalid Request: `id` must be a string, an integer or null".into(),
            ));
        }
    };
    if o.get("jsonrpc") != Some(&json!("2.0")) {
        return Some(error(id, -32600, "Invalid Request: `jsonrpc` must be \"2.0\"".into()));
    }
    let method = match o.get("method") {
        Some(Json::String(m)) => m.as_str(),
        Some(_) => return Some(error(id, -32600, "Invalid Request: `method` must be a string".into())),
        // A response from the client (to a server request): rmcp's to judge.
        None if o.contains_key("result") || o.contains_key("error") => return None,
        None => return Some(error(id, -32600, "Invalid Request: `method` is missing".into())),
    };
    if method == "tools/call" {
        let params = o.get("params");
        let problem = match params {
            Some(Json::Object(p)) => match (p.get("name"), p.get("arguments")) {
                (None, _) => Some("`params.name` is missing"),
                (Some(n), _) if !n.is_string() => Some("`params.name` must be a string"),
                (_, Some(a)) if !a.is_object() && !a.is_null() => Some("`params.arguments` must be an object"),
                _ => None,
            },
            _ => Some("`params` must be an object with `name`"),
        };
        if let Some(p) = problem {
            return Some(error(id, -32602, format!("Invalid params: {p}")));
        }
    }
    None
}

/// The JSON-RPC error for a frame sent before the session is initialised: a request other than
/// `initialize` or `ping` (MCP lifecycle: the client's first request is `initialize`); `None`
/// for anything else (notifications, responses pass).
pub fn before_initialize(frame: &[u8]) -> Option<Json> {
    let value: Json = serde_json::from_slice(frame).ok()?;
    let method = value.get("method")?.as_str()?;
    let id = value.get("id")?;
    (method != "initialize" && method != "ping").then(|| {
        error(
            id.clone(),
            -32600,
            format!("Invalid Request: `{method}` before `initialize`; initialise the session first"),
        )
    })
}

/// Whether `frame` is an `initialize` request.
pub fn is_initialize(frame: &[u8]) -> bool {
    serde_json::from_slice::<Json>(frame)
        .ok()
        .is_some_and(|v| v.get("method").and_then(Json::as_str) == Some("initialize"))
}

/// The JSON-RPC id of `frame` when it has a usable one (a string or an integer), else null.
pub fn frame_id(frame: &[u8]) -> Json {
    match serde_json::from_slice::<Json>(frame)
        .ok()
        .and_then(|v| v.get("id").cloned())
    {
        Some(id @ Json::String(_)) => id,
        Some(Json::Number(n)) if n.is_i64() || n.is_u64() => Json::Number(n),
        _ => Json::Null,
    }
}

/// Checks the body of every `POST /mcp` ([`check_frame`]) before rmcp reads it: a frame that is
/// not a valid request gets HTTP 400 with the JSON-RPC error response as its body; so does a
/// request other than `initialize` without an `Mcp-Session-Id` ([`before_initialize`]).
pub(crate) async fn http_frames(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    use axum::response::IntoResponse as _;
    if req.method() != axum::http::Method::POST || req.uri().path() != "/mcp" {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, 64 * 1024).await {
        Ok(b) => b,
        Err(_) => {
            let e = error(
                Json::Null,
                -32700,
                "Parse error: the body is over 64 KiB or unreadable".into(),
            );
            return (axum::http::StatusCode::PAYLOAD_TOO_LARGE, axum::Json(e)).into_response();
        }
    };
    if let Some(e) = check_frame(&bytes) {
        return (axum::http::StatusCode::BAD_REQUEST, axum::Json(e)).into_response();
    }
    if !parts.headers.contains_key("mcp-session-id") {
        if let Some(e) = before_initialize(&bytes) {
            return (axum::http::StatusCode::BAD_REQUEST, axum::Json(e)).into_response();
        }
    }
    next.run(axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// The JSON-RPC error response with `id`, `code` and `message`.
pub(crate) fn error(id: Json, code: i64, message: String) -> Json {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_frames_get_the_specs_error_codes() {
        let code = |f: &[u8]| check_frame(f).map(|e| (e["error"]["code"].as_i64().unwrap(), e["id"].clone()));
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let big_id = format!(r#"{{"jsonrpc":"2.0","id":{},"method":"ping"}}"#, "9".repeat(10_000));
        for f in [
            &b"{\"jsonrpc\": \"2.0\", \"id\": 1"[..],
            b"not json",
            b"\xff\xfe",
            deep.as_bytes(),
        ] {
            assert_eq!(
                code(f),
                Some((-32700, Json::Null)),
                "{}",
                String::from_utf8_lossy(&f[..f.len().min(40)])
            );
        }
        assert!(
            matches!(code(big_id.as_bytes()), Some((-32700 | -32600, Json::Null))),
            "a 10,000-digit id is refused"
        );
        assert_eq!(code(b"[1]"), Some((-32600, Json::Null)));
        assert_eq!(
            code(br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#),
            Some((-32600, json!(3)))
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":3,"method":5}"#),
            Some((-32600, json!(3)))
        );
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            Some((-32600, Json::Null))
        );
        for params in [r#"{}"#, r#"{"name":5}"#, r#"{"name":"x","arguments":[1]}"#, r#"[]"#] {
            let f = format!(r#"{{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{params}}}"#);
            assert_eq!(code(f.as_bytes()), Some((-32602, json!("a"))), "{params}");
        }
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}"#),
            None
        );
        assert_eq!(code(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#), None);
        assert_eq!(
            code(br#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#),
            Some((-32600, Json::Null))
        );
        let early = before_initialize(br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"x"}}"#);
        assert_eq!(
            early.map(|e| (e["error"]["code"].clone(), e["id"].clone())),
            Some((json!(-32600), json!(4)))
        );
        assert_eq!(
            before_initialize(br#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#),
            None
        );
        assert_eq!(frame_id(br#"{"id":"a"}"#), json!("a"));
        assert_eq!(frame_id(b"{}"), Json::Null);
        assert_eq!(code(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#), None);
    }
}
