//! Injected faults of the trajectory corpora and the recovery an agent that understood the error
//! performs (ToolGym's state controller: tool-level, state-level and constraint-level faults).
//!
//! | kind                | tool message                                   | recovery                                        |
//! |---------------------|------------------------------------------------|-------------------------------------------------|
//! | `timeout`           | error, no answer within 5000 ms                | says so, calls again                            |
//! | `rate_limit`        | 429 with `retry_after_s`                       | waits `Retry-After` seconds, calls again        |
//! | `unavailable`       | 503 with `retry_after_s`                       | backs off `Retry-After` seconds, calls again    |
//! | `truncated_result`  | the result cut in half                         | notices the cut, queries again                  |
//! | `corrupted_result`  | the result garbled                             | notices the garbling, queries again             |
//! | `session_expired`   | session ended, active table reloaded (SLOT/SEL) | re-runs its earlier calls in the new session   |
//! | `constraint_changed`| from this call on, results show at most 1 row  | answers from what it got, says so, states total |
//!
//! `constraint_changed` is ToolGym's constraint-level fault as `toolforge serve` injects it: the
//! environment's row limit drops to 1 row per response mid-task, each later result says so in a
//! `constraint` field ([`constrain`]), and the agent's answer lists only the rows it was shown,
//! with the total and the reason.
//!
//! Every recovery starts with a short assistant message saying what happened and what it does;
//! the waits are recorded in the trajectory's `faults` (`waited_s`).

use serde_json::{Value as Json, json};

/// Fault kinds, in the order the seeded choice indexes them (also the kinds `toolforge serve`
/// injects, see [`crate::serve`]).
pub const FAULT_KINDS: [&str; 7] = [
    "timeout",
    "rate_limit",
    "unavailable",
    "truncated_result",
    "corrupted_result",
    "session_expired",
    "constraint_changed",
];

/// The `Retry-After` seconds of a rate-limit or unavailable fault (1–5, seeded by `draw`).
pub fn retry_after(draw: u64) -> u64 {
    1 + draw % 5
}

/// The tool message content of a tool- or state-level fault at a call whose real result is `real`.
pub fn fault_content(kind: &str, real: &str, retry_after_s: u64) -> String {
    match kind {
        "timeout" => json!({"error": {"type": "timeout", "message": "the tool did not answer within 5000 ms"}}).to_string(),
        "rate_limit" => json!({"error": {"type": "rate_limit", "status": 429, "message": format!("too many requests; retry after {retry_after_s} s"), "retry_after_s": retry_after_s}}).to_string(),
        "unavailable" => json!({"error": {"type": "unavailable", "status": 503, "message": format!("the service is temporarily unavailable; retry after {retry_after_s} s"), "retry_after_s": retry_after_s}}).to_string(),
        "truncated_result" => {
            let cut = real.char_indices().nth(real.chars().count() / 2).map_or(0, |(i, _)| i);
            real[..cut].to_string()
        }
        "corrupted_result" => {
            let garbled: String = real.chars().map(|c| if c.is_ascii_digit() || c == '"' { '\u{fffd}' } else { c }).collect();
            format!("\u{fffd}{garbled}")
        }
        _ => json!({"error": {"type": "session_expired", "message": "the session expired; a new session was opened with the active table reloaded, earlier labels are gone"}}).to_string(),
    }
}

/// The assistant's short message before its recovery call (see the module table).
pub fn recovery_text(kind: &str, retry_after_s: u64) -> String {
    match kind {
        "timeout" => "The call timed out without an answer; I'll try it once more.".into(),
        "rate_limit" => format!(
            "The service is rate-limiting me (429). I'll wait {retry_after_s} s, as its Retry-After asks, and retry."
        ),
        "unavailable" => format!(
            "The service is temporarily unavailable (503). I'll back off {retry_after_s} s, as its Retry-After asks, and retry."
        ),
        "truncated_result" => "That result was cut off mid-way, so I can't rely on it; I'll query again.".into(),
        "corrupted_result" => "That result came back garbled, so I can't rely on it; I'll query again.".into(),
        _ => "The session expired and my earlier results are gone; I'll redo those steps in the new session.".into(),
    }
}

/// The `constraint` note of a result under the changed row limit (same text as `toolforge serve`).
pub const CONSTRAINT_NOTE: &str = "the server's row limit changed to 1 row per response mid-task";

/// A result (JSON text: SLOT/SEL `{"label", "output"}` or REST rows / `{"rows", …}`) as the
/// server returns it after the row limit dropped to 1: at most one row or value, the total kept,
/// plus `"constraint": CONSTRAINT_NOTE`.
pub fn constrain(result: &str) -> String {
    fn first(v: &Json) -> Vec<Json> {
        v.as_array()
            .map(|a| a.iter().take(1).cloned().collect())
            .unwrap_or_default()
    }
    let v: Json = serde_json::from_str(result).unwrap_or(Json::Null);
    let limited = |o: &Json| -> Json {
        match o {
            Json::Array(a) => json!({"values": first(o), "total": a.len(), "truncated": a.len() > 1}),
            Json::Object(m) if m.contains_key("values") => {
                let mut m = m.clone();
                m.insert("values".into(), Json::Array(first(&o["values"])));
                m.insert("truncated".into(), json!(o["total"].as_u64().unwrap_or(0) > 1));
                Json::Object(m)
            }
            Json::Object(m) if m.contains_key("rows") => {
                let total = o["total_rows"].as_u64().unwrap_or(0);
                let mut m = m.clone();
                m.insert("rows".into(), Json::Array(first(&o["rows"])));
                m.insert("truncated".into(), json!(total > 1));
                Json::Object(m)
            }
            other => other.clone(),
        }
    };
    let mut out = match &v {
        // REST rows.
        Json::Array(rows) => json!({"rows": first(&v), "total_rows": rows.len(), "truncated": rows.len() > 1}),
        Json::Object(m) if m.contains_key("label") => {
            let mut m = m.clone();
            m.insert("output".into(), limited(&v["output"]));
            Json::Object(m)
        }
        other => limited(other),
    };
    if let Json::Object(m) = &mut out {
        m.insert("constraint".into(), json!(CONSTRAINT_NOTE));
    }
    out.to_string()
}

/// What the answer says when the row limit cut it (before the rows it lists).
pub fn constraint_answer_prefix() -> &'static str {
    "The server's row limit dropped to 1 row per response mid-task, so I can only list what it returned. "
}
