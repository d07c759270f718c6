//! Fine-tuning trajectory corpora of the executable families (SLOT, SEL, REST), with ToolGym-style
//! injected faults.
//!
//! One trajectory per example, in the OpenAI chat fine-tuning format:
//! `{"id", "messages": [system, user, (assistant with one tool_call, tool)…, assistant answer],
//! "tools": [OpenAI functions], "initialization_step", "gold_answer", "faults": []}`. SLOT/SEL:
//! the framework runs the row's setup call (`initialization_step`, the join step labelled
//! `starting_table_var`) before the first message; it is recorded in the trajectory (null for
//! REST) but is neither a message nor one of the `tools` (Live API-Bench App. D.1). Each assistant message makes one
//! call (`tool_calls: [{"id": "call_<i>", "type": "function", "function": {"name", "arguments"
//! (JSON text)}}]`) because later calls need earlier results; each `tool` message holds the
//! **real result** of executing the call on the data:
//! - SLOT/SEL: `{"label": L, "output": …}` — later calls refer to it as `"$L$"`; tables show at
//!   most `max_rows` rows, lists at most `max_rows` values, with the total stated
//!   ([`crate::tools::executor::value_json`]);
//! - REST: the endpoint's response rows; over `max_rows` rows,
//!   `{"rows": [first max_rows], "total_rows": n, "truncated": true}`.
//!
//! The final assistant message is the answer: one cell as its text, otherwise the rows as JSON.
//!
//! Faults (ToolGym's state controller, seeded by `seed` and the example id): a `fault_rate` share
//! of the examples also get a faulted copy in `<split>.faults.jsonl` with one fault at one call —
//! tool-level `timeout`, `rate_limit` (429), `unavailable` (503); state-level `truncated_result`,
//! `corrupted_result` (the result text cut or garbled), `session_expired` (SLOT/SEL) — followed by
//! the recovery: the same call again, or for an expired session (the framework re-runs the setup)
//! every earlier call again. The trajectory still ends at the verified answer; `faults` records kind, call index,
//! the faulted `tool_call_id` and the recovery.

use std::collections::HashMap;
use std::path::Path;

use serde_json::{Value as Json, json};

use crate::dataset::Example;
use crate::recipe::TrajectoryConfig;
use crate::tools::executor::{Executor, Session, value_json};
use crate::tools::rest::{Endpoint, Limits};
use crate::tools::{Call, ToolSpec};
use crate::verify::{Answer, Datum};

/// Fault kinds, in the order the seeded choice indexes them.
pub const FAULT_KINDS: [&str; 6] = [
    "timeout",
    "rate_limit",
    "unavailable",
    "truncated_result",
    "corrupted_result",
    "session_expired",
];

/// What executes the calls of one family.
pub enum Runner<'a> {
    /// SLOT/SEL: the Arrow executor.
    Tools(&'a Executor),
    /// REST: the endpoints by (database, function name), and the database root.
    Rest(&'a HashMap<(String, String), Endpoint>, &'a Path),
}

/// The answer as the final assistant message: one cell as its text, else the rows as JSON.
pub fn answer_text(answer: &Answer) -> String {
    match answer.as_slice() {
        [row] if row.len() == 1 => match &row[0] {
            Datum::Text(t) => t.clone(),
            Datum::Null => "null".into(),
            d => serde_json::to_string(d).unwrap_or_default(),
        },
        _ => serde_json::to_string(answer).unwrap_or_default(),
    }
}

fn system_prompt(e: &Example, rest: bool) -> String {
    let db = e.db_id.as_deref().unwrap_or("the");
    if rest {
        format!(
            "You answer questions about the `{db}` database by calling its REST API functions. Call the function that answers the question with the values the question gives, then reply with the answer only."
        )
    } else {
        format!(
            "You answer questions about the `{db}` database by calling tools. The data the question is about is already loaded under the label `starting_table_var`: refer to it as \"$starting_table_var$\". Each tool result is stored under the label shown in the result; refer to an earlier result in a later call as \"$LABEL$\". When the last result answers the question, reply with the answer only."
        )
    }
}

/// Executes `calls` in order, returning each tool message's content (JSON text).
fn execute(
    runner: &Runner,
    e: &Example,
    calls: &[Call],
    max_rows: usize,
    conn: &mut Option<(String, rusqlite::Connection)>,
) -> Result<Vec<String>, String> {
    match runner {
        Runner::Tools(executor) => {
            let mut session = Session::default();
            if let Some(setup) = &e.initialization_step {
                executor.step(&mut session, setup)?;
            }
            calls
                .iter()
                .map(|c| {
                    let v = executor.step(&mut session, c)?;
                    Ok(json!({"label": c.label, "output": value_json(v, max_rows)}).to_string())
                })
                .collect()
        }
        Runner::Rest(endpoints, root) => {
            let db = e.db_id.clone().unwrap_or_default();
            calls
                .iter()
                .map(|c| {
                    let ep = endpoints
                        .get(&(db.clone(), c.name.clone()))
                        .ok_or_else(|| format!("no endpoint {} in {db}", c.name))?;
                    let values = ep
                        .arguments_from_json(&c.arguments)
                        .map_err(|errs| Json::Array(errs).to_string())?;
                    if conn.as_ref().is_none_or(|(d, _)| *d != db) {
                        let path = root.join(&db).join(format!("{db}.sqlite"));
                        *conn = Some((
                            db.clone(),
                            crate::tools::table::open_read_only(&path).map_err(|e| e.to_string())?,
                        ));
                    }
                    let rows = ep
                        .execute(&mut conn.as_mut().expect("opened").1, &values, Limits::default())
                        .map_err(|e| e.to_string())?;
                    Ok(if rows.len() > max_rows {
                        json!({"rows": rows[..max_rows], "total_rows": rows.len(), "truncated": true}).to_string()
                    } else {
                        serde_json::to_string(&rows).unwrap_or_default()
                    })
                })
                .collect()
        }
    }
}

/// A seeded choice in [0, 2^64) for (seed, id, purpose).
fn draw(seed: u64, id: &str, purpose: &str) -> u64 {
    let h = blake3::hash(format!("{seed}\u{1f}{id}\u{1f}{purpose}").as_bytes());
    u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// The fault of an example's faulted copy, if it gets one: (kind, call index).
pub fn fault_plan(e: &Example, cfg: &TrajectoryConfig, rest: bool) -> Option<(&'static str, usize)> {
    let n = e.output.len();
    if n == 0 || (draw(cfg.seed, &e.id, "faulted") % 1_000_000) as f64 >= cfg.fault_rate * 1_000_000.0 {
        return None;
    }
    let kinds: &[&str] = if rest || n < 2 { &FAULT_KINDS[..5] } else { &FAULT_KINDS };
    let kind = kinds[(draw(cfg.seed, &e.id, "kind") % kinds.len() as u64) as usize];
    let at = if kind == "session_expired" {
        1 + (draw(cfg.seed, &e.id, "call") % (n as u64 - 1)) as usize
    } else {
        (draw(cfg.seed, &e.id, "call") % n as u64) as usize
    };
    Some((kind, at))
}

fn fault_content(kind: &str, real: &str) -> String {
    match kind {
        "timeout" => json!({"error": {"type": "timeout", "message": "the tool did not answer within 5000 ms"}}).to_string(),
        "rate_limit" => json!({"error": {"type": "rate_limit", "status": 429, "message": "too many requests; retry after 1 s", "retry_after_s": 1}}).to_string(),
        "unavailable" => json!({"error": {"type": "unavailable", "status": 503, "message": "the service is temporarily unavailable; retry"}}).to_string(),
        "truncated_result" => {
            let cut = real.char_indices().nth(real.chars().count() / 2).map_or(0, |(i, _)| i);
            real[..cut].to_string()
        }
        "corrupted_result" => {
            let garbled: String = real.chars().map(|c| if c.is_ascii_digit() || c == '"' { '\u{fffd}' } else { c }).collect();
            format!("\u{fffd}{garbled}")
        }
        _ => json!({"error": {"type": "session_expired", "message": "the session expired; the data was reloaded as starting_table_var: repeat the earlier calls"}}).to_string(),
    }
}

fn assistant_call(id: &str, c: &Call) -> Json {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": c.name, "arguments": Json::Object(c.arguments.clone()).to_string()}}]})
}

fn tool_message(id: &str, content: &str) -> Json {
    json!({"role": "tool", "tool_call_id": id, "content": content})
}

/// The clean trajectory of `e` and, when the seeded plan gives it one, its faulted copy.
/// `catalog` resolves [`ToolSpec::reference`]s; `conn` caches a REST connection as (database,
/// connection). Errors: a call that does not execute (never for a verified example).
pub fn trajectories(
    e: &Example,
    catalog: &HashMap<&str, &ToolSpec>,
    runner: &Runner,
    cfg: &TrajectoryConfig,
    conn: &mut Option<(String, rusqlite::Connection)>,
) -> Result<(Json, Option<Json>), String> {
    let rest = matches!(runner, Runner::Rest(..));
    let results = execute(runner, e, &e.output, cfg.max_rows, conn)?;
    let mut tools: Vec<Json> = Vec::new();
    for t in &e.tools {
        let spec = match catalog.get(t.name.as_str()) {
            Some(s) if t.is_reference() => *s,
            _ => t,
        };
        tools.push(json!({"type": "function", "function": {"name": spec.name, "description": spec.description, "parameters": spec.parameters}}));
    }
    let user = match &e.evidence {
        Some(ev) if !ev.is_empty() => format!("{}\nHint: {ev}", e.input),
        _ => e.input.clone(),
    };
    let head = vec![
        json!({"role": "system", "content": system_prompt(e, rest)}),
        json!({"role": "user", "content": user}),
    ];
    let answer = e.gold_answer.clone().unwrap_or_default();
    let finish = |mut messages: Vec<Json>, faults: Json| {
        messages.push(json!({"role": "assistant", "content": answer_text(&answer)}));
        json!({"id": e.id, "messages": messages, "tools": tools, "initialization_step": e.initialization_step, "gold_answer": answer, "faults": faults})
    };
    let mut clean = head.clone();
    for (i, (c, r)) in e.output.iter().zip(&results).enumerate() {
        let id = format!("call_{i}");
        clean.push(assistant_call(&id, c));
        clean.push(tool_message(&id, r));
    }
    let faulted = fault_plan(e, cfg, rest).map(|(kind, at)| {
        let mut m = head.clone();
        let mut next = 0usize;
        let mut id = || {
            let s = format!("call_{next}");
            next += 1;
            s
        };
        for (c, r) in e.output.iter().zip(&results).take(at) {
            let i = id();
            m.push(assistant_call(&i, c));
            m.push(tool_message(&i, r));
        }
        let fid = id();
        m.push(assistant_call(&fid, &e.output[at]));
        m.push(tool_message(&fid, &fault_content(kind, &results[at])));
        let recovery = if kind == "session_expired" {
            "rerun_setup"
        } else {
            "retry"
        };
        let from = if kind == "session_expired" { 0 } else { at };
        for (c, r) in e.output.iter().zip(&results).skip(from) {
            let i = id();
            m.push(assistant_call(&i, c));
            m.push(tool_message(&i, r));
        }
        finish(
            m,
            json!([{"kind": kind, "call_index": at, "tool_call_id": fid, "recovery": recovery}]),
        )
    });
    Ok((finish(clean, json!([])), faulted))
}

/// An OpenAI-format trajectory in the ShareGPT / Hermes function-calling style that open
/// fine-tuning stacks read: `{"id", "conversations": [{"from": "system"|"human"|"gpt"|"tool",
/// "value"}]}`, tools in `<tools>` in the system turn, calls as `<tool_call>{"name",
/// "arguments"}</tool_call>`, results as `<tool_response>…</tool_response>`.
pub fn to_sharegpt(t: &Json) -> Json {
    let tools: Vec<Json> = t["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|f| f["function"].clone())
        .collect();
    let mut conv = Vec::new();
    for m in t["messages"].as_array().into_iter().flatten() {
        match m["role"].as_str() {
            Some("system") => conv.push(json!({"from": "system", "value": format!(
                "{}\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{}\n</tools>\nFor each function call return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{{\"name\": <function-name>, \"arguments\": <args-json-object>}}\n</tool_call>",
                m["content"].as_str().unwrap_or_default(),
                tools.iter().map(|t| t.to_string()).collect::<Vec<_>>().join("\n")
            )})),
            Some("user") => conv.push(json!({"from": "human", "value": m["content"]})),
            Some("tool") => conv.push(json!({"from": "tool", "value": format!("<tool_response>\n{}\n</tool_response>", m["content"].as_str().unwrap_or_default())})),
            Some("assistant") => match m["tool_calls"].as_array() {
                Some(calls) => {
                    let blocks: Vec<String> = calls
                        .iter()
                        .map(|c| {
                            let args: Json = serde_json::from_str(c["function"]["arguments"].as_str().unwrap_or("{}")).unwrap_or(Json::Null);
                            format!("<tool_call>\n{}\n</tool_call>", json!({"name": c["function"]["name"], "arguments": args}))
                        })
                        .collect();
                    conv.push(json!({"from": "gpt", "value": blocks.join("\n")}));
                }
                None => conv.push(json!({"from": "gpt", "value": m["content"]})),
            },
            _ => {}
        }
    }
    json!({"id": t["id"], "conversations": conv, "faults": t["faults"]})
}
