//! The trajectories emitter: `trajectories/<split>.jsonl` and `trajectories/<split>.faults.jsonl`,
//! fine-tuning trajectory corpora of the executable families (SLOT, SEL, REST), with ToolGym-style
//! injected faults ([`faults`]), and the same trajectories in OpenAI's fine-tuning format under
//! `trajectories/openai/` ([`export`]).
//!
//! One trajectory per example, in the Hugging Face / TRL chat convention (what
//! `tokenizer.apply_chat_template(messages, tools=tools)` and TRL's `SFTTrainer` read):
//! `{"id", "messages": [system, user, (assistant with one tool_call, tool)…, assistant answer],
//! "tools": [OpenAI functions, parameters as [`schema`] shows them], "gold_answer" (the SQL
//! result's JSON text, as in the Parquet rows), "faults": []}`. Each assistant message makes one
//! call (`content` is `""` — never null, which chat templates such as SmolLM2's and Qwen's reject
//! — or a short recovery sentence; `tool_calls: [{"id", "type": "function", "function": {"name",
//! "arguments" (a JSON **object**: templates write it with `tojson`; as text they double-encode
//! it — issue 29)}}]`, the id 9 alphanumeric characters as Mistral's template requires)
//! because later calls need earlier results; each `tool` message (`tool_call_id`, the function's
//! `name`, `content`) holds the **real result** of executing the call on the data:
//! - SLOT/SEL: `{"label": L, "output": …}` — later calls refer to it as `"$L$"`; tables show at
//!   most `max_rows` rows, lists at most `max_rows` values, with the total stated
//!   ([`crate::tools::executor::value_json`]);
//! - REST: the endpoint's response rows; over `max_rows` rows,
//!   `{"rows": [first max_rows], "total_rows": n, "truncated": true}`.
//!
//! The SLOT/SEL setup step (`initialize_active_data`: [`Example::initialization_step`], or
//! `output[0]` in the older row shape) is a framework step, never shown to the model: it is run
//! before the first call and the system prompt states the active table (`$starting_table_var$`,
//! the joined tables, its columns and row count); so are the `additional_setup_steps`, each
//! stated as another loaded table under its label (`$starting_table_var_2$`, …). The first user
//! turn states them again after the request ([`user_turn`]): Mistral-family chat templates drop
//! the system prompt, and it is the only other place a SLOT/SEL trajectory names its columns.
//!
//! The final assistant message is the answer read back from the shown results ([`answer`]): it
//! never contains a value no tool message showed, and when a result was cut it states the total
//! and which rows it lists. A trajectory whose conversation (the JSON text of `messages`; the
//! `tools` list is the instance's fixed toolkit and does not count) exceeds `max_chars`
//! characters is not written; the skip is counted by reason, and by group (database or split), in
//! `report/verification.json` (`trajectories`).
//!
//! Variant rows (issue 16) get a clean trajectory rewritten from their parent's ([`variants`]):
//! the variant's request, tools and calls over the same real results.
//!
//! The files are concatenated from one [`segments::Segment`] per group: the exact bytes each
//! file gets from that group, computed by the shard that owns the group (`--shard`, stored) or
//! by a whole build (not stored), and only read by a merge (issue 34).

pub mod answer;
pub mod cached;
pub mod calls;
pub mod convert;
pub mod export;
pub mod faults;
mod openai_text;
mod prompt;
pub mod schema;
pub mod segments;
pub mod variants;
mod write;

use prompt::{ToolsText, active_table, system_prompt};
pub(crate) use prompt::{request_text, tools_json, user_turn};

use std::collections::HashMap;
use std::path::Path;

use anyhow::Result;
use serde_json::{Value as Json, json};

use crate::dataset::Example;
use crate::recipe::TrajectoryConfig;
use crate::tools::Call;
use crate::tools::executor::{Executor, Session, value_json};
use crate::tools::rest::{Endpoint, Limits};
use crate::tools::shown::{Shown, rest_result_text, result_text};

pub use export::{to_openai, to_openai_text, to_sharegpt};
pub use faults::FAULT_KINDS;
pub(super) use write::Trajectories;

/// Skip reason of a trajectory over the size cap.
pub const OVER_SIZE_CAP: &str = "over_size_cap";
/// Skip reason of a trajectory over `[trajectories] max_tokens` (dropped whole, never truncated).
pub const OVER_TOKEN_CAP: &str = "over_token_cap";
/// Skip reason of a SLOT/SEL example whose only call is the setup step (nothing for the model).
pub const NO_MODEL_CALLS: &str = "no_model_calls";

/// The setup steps of a SLOT/SEL example and the calls the model makes
/// ([`crate::tools::setup_and_calls`]).
pub fn setup_and_calls(e: &Example) -> (Vec<&Call>, &[Call]) {
    crate::tools::setup_and_calls(e.initialization_step.as_ref(), &e.additional_setup_steps, &e.output)
}

/// A tool-call id: 9 alphanumeric characters (Mistral's chat template rule), derived from the
/// example id and the call's position, so rebuilds are byte-identical.
pub fn call_id(example_id: &str, n: usize) -> String {
    let h = blake3::hash(format!("{example_id}\u{1f}{n}").as_bytes());
    h.to_hex()[..9].to_string()
}

/// What executes the calls of one family.
pub enum Runner<'a> {
    /// SLOT/SEL: the Arrow executor.
    Tools(&'a Executor),
    /// REST: the endpoints by (database, function name), and the database root.
    Rest(&'a HashMap<(String, String), Endpoint>, &'a Path),
}

/// Executes the setup step (if any) and `calls` in order; returns the active table (columns and
/// total rows; `Null` without a setup step) and each tool message's content (JSON text).
/// Results the compile stage already showed (`known`, when they are of these steps and this row
/// cap) are taken as they are instead of executing the calls again.
fn execute(
    runner: &Runner,
    e: &Example,
    (setup, calls): (&[&Call], &[Call]),
    known: Option<&Shown>,
    max_rows: usize,
    conn: &mut Option<(String, rusqlite::Connection)>,
) -> Result<(Vec<Json>, Vec<String>), String> {
    match runner {
        _ if known.is_some_and(|k| k.is_of(setup, calls, max_rows)) => {
            let known = known.expect("checked");
            Ok((known.tables.clone(), known.results.clone()))
        }
        Runner::Tools(executor) => {
            let mut session = Session::default();
            let table = setup
                .iter()
                .map(|s| Ok(value_json(executor.step(&mut session, s)?, 0)))
                .collect::<Result<_, String>>()?;
            let results = calls
                .iter()
                .map(|c| {
                    let v = executor.step(&mut session, c)?;
                    Ok(result_text(&c.label, v, max_rows))
                })
                .collect::<Result<_, String>>()?;
            Ok((table, results))
        }
        Runner::Rest(endpoints, root) => {
            let db = e.db_id.clone().unwrap_or_default();
            let results = calls
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
                    Ok(rest_result_text(&rows, max_rows))
                })
                .collect::<Result<_, String>>()?;
            Ok((vec![], results))
        }
    }
}

/// A seeded choice in [0, 2^64) for (seed, id, purpose).
fn draw(seed: u64, id: &str, purpose: &str) -> u64 {
    let h = blake3::hash(format!("{seed}\u{1f}{id}\u{1f}{purpose}").as_bytes());
    u64::from_le_bytes(h.as_bytes()[..8].try_into().expect("8 bytes"))
}

/// The fault of an example's faulted copy, if it gets one: (kind, call index). `calls` is the
/// number of model calls, `rest` whether sessions exist (not for REST), `answer_rows` the rows the
/// answer shows (a constraint change needs at least 2, and comes at or before `last_sink`, the
/// last call whose result is part of the answer).
pub fn fault_plan(
    e: &Example,
    cfg: &TrajectoryConfig,
    rest: bool,
    calls: usize,
    answer_rows: usize,
    last_sink: usize,
) -> Option<(&'static str, usize)> {
    if calls == 0 || (draw(cfg.seed, &e.id, "faulted") % 1_000_000) as f64 >= cfg.fault_rate * 1_000_000.0 {
        return None;
    }
    let kinds: Vec<&'static str> = FAULT_KINDS
        .iter()
        .copied()
        .filter(|k| match *k {
            "session_expired" => !rest && calls >= 2,
            "constraint_changed" => answer_rows >= 2,
            _ => true,
        })
        .collect();
    let kind = kinds[(draw(cfg.seed, &e.id, "kind") % kinds.len() as u64) as usize];
    let at = if kind == "session_expired" {
        1 + (draw(cfg.seed, &e.id, "call") % (calls as u64 - 1)) as usize
    } else if kind == "constraint_changed" {
        (draw(cfg.seed, &e.id, "call") % (last_sink as u64 + 1)) as usize
    } else {
        (draw(cfg.seed, &e.id, "call") % calls as u64) as usize
    };
    Some((kind, at))
}

/// An assistant message making call `c` (id `id`) after `text` (`""` when it says nothing);
/// `arguments` is the JSON object (Hugging Face's convention; [`export::to_openai`] writes it as
/// text).
fn assistant_call(id: &str, c: &Call, text: &str) -> Json {
    json!({"role": "assistant", "content": text, "tool_calls": [{"id": id, "type": "function", "function": {"name": c.name, "arguments": Json::Object(c.arguments.clone())}}]})
}

/// A tool message: the result of call `id` of the function `name` (Hugging Face's convention
/// names the function; Hermes 2 Pro templates fail on a tool message without it — issue 29).
fn tool_message(id: &str, name: &str, content: &str) -> Json {
    json!({"role": "tool", "tool_call_id": id, "name": name, "content": content})
}

/// The trajectories of one example: the clean one and, when the seeded plan gives it one, its
/// faulted copy; each `None` with a skip reason when it is not written.
#[derive(Debug, Default)]
pub struct Built {
    /// The clean trajectory's JSON line (no newline).
    pub clean: Option<String>,
    /// The faulted copy's JSON line.
    pub faulted: Option<String>,
    /// Why a trajectory was not written ([`OVER_SIZE_CAP`], [`NO_MODEL_CALLS`]), one per skip.
    pub skipped: Vec<&'static str>,
}

/// The trajectories of `e` (see [`Built`]). `tools` gives its toolkit's text; `known` is what
/// the compile stage showed of `e`'s results ([`crate::dataset::Build::shown`]), if anything;
/// `conn` caches a REST connection as (database, connection). Errors: a call that does not execute
/// (never for a verified example).
fn trajectories(
    e: &Example,
    tools: &ToolsText,
    runner: &Runner,
    cfg: &TrajectoryConfig,
    known: Option<&Shown>,
    conn: &mut Option<(String, rusqlite::Connection)>,
) -> Result<Built, String> {
    let rest = matches!(runner, Runner::Rest(..));
    let (setup, calls) = setup_and_calls(e);
    if calls.is_empty() {
        return Ok(Built {
            skipped: vec![NO_MODEL_CALLS],
            ..Built::default()
        });
    }
    let (table, results) = execute(runner, e, (&setup, calls), known, cfg.max_rows, conn)?;
    let tools = tools.of(e);
    let active = (!setup.is_empty()).then(|| {
        let parts: Vec<String> = setup
            .iter()
            .zip(&table)
            .enumerate()
            .map(|(i, (s, t))| active_table(s, t, i == 0))
            .collect();
        parts.join(" ")
    });
    let head = vec![
        json!({"role": "system", "content": system_prompt(e, active.as_deref())}),
        json!({"role": "user", "content": user_turn(e, active.as_deref())}),
    ];
    let args: Vec<(&str, Json)> = calls
        .iter()
        .map(|c| (c.label.as_str(), Json::Object(c.arguments.clone())))
        .collect();
    let sinks = answer::sinks(&args);
    let shown_of = |results: &[String]| {
        if rest {
            answer::shown_rest(results.last().expect("a call"))
        } else {
            answer::shown_tools(&sinks.iter().map(|&i| results[i].as_str()).collect::<Vec<_>>())
        }
    };
    let shown = shown_of(&results);
    // `gold_answer` as its JSON text (a JSON string), as in the Parquet rows: its cells mix
    // numbers and text, which no one Arrow list type holds (issue 29, item 7).
    let gold = Json::String(serde_json::to_string(e.gold_answer.as_deref().unwrap_or_default()).expect("serialisable"))
        .to_string();
    let id = serde_json::to_string(&e.id).expect("serialisable");
    // `constrained_from`: the call from which results were limited to one row (constraint fault).
    let finish = |mut messages: Vec<Json>, faults: Json, constrained_from: Option<usize>| -> Option<String> {
        let text = match constrained_from {
            None => answer::answer_text(&shown, None),
            Some(from) => {
                let limited: Vec<String> = results
                    .iter()
                    .enumerate()
                    .map(|(i, r)| if i >= from { faults::constrain(r) } else { r.clone() })
                    .collect();
                let cut = shown_of(&limited);
                let text = answer::answer_text(&cut, None);
                if cut.rows.len() < shown.rows.len() {
                    format!("{}{text}", faults::constraint_answer_prefix())
                } else {
                    text
                }
            }
        };
        messages.push(json!({"role": "assistant", "content": text}));
        // The line of `{"id", "messages", "tools", "gold_answer", "faults"}`, serialised once, its
        // parts in place (the tools and the gold answer are not copied into a JSON tree first).
        let messages = Json::Array(messages).to_string();
        let messages_len = messages.chars().count();
        let record = format!(
            "{{\"id\":{id},\"messages\":{messages},\"tools\":{tools},\"gold_answer\":{gold},\"faults\":{faults}}}"
        );
        // The cap is on the conversation (`messages`), never on `tools`: an instance's toolkit is
        // fixed by its database (a SEL toolkit alone is 50-62K characters on Spider dev), so a cap
        // on the whole line dropped the rows of the databases with many columns (issue 29).
        (messages_len <= cfg.max_chars).then_some(record)
    };
    let mut built = Built::default();
    let mut clean = head.clone();
    for (i, (c, r)) in calls.iter().zip(&results).enumerate() {
        let id = call_id(&e.id, i);
        clean.push(assistant_call(&id, c, ""));
        clean.push(tool_message(&id, &c.name, r));
    }
    built.clean = finish(clean, json!([]), None);
    if built.clean.is_none() {
        built.skipped.push(OVER_SIZE_CAP);
    }
    let last_sink = sinks.iter().copied().max().unwrap_or(0);
    if let Some((kind, at)) = fault_plan(e, cfg, rest, calls.len(), shown.rows.len(), last_sink) {
        built.faulted = faulted(e, &head, calls, &results, kind, at, cfg, &finish);
        if built.faulted.is_none() {
            built.skipped.push(OVER_SIZE_CAP);
        }
    }
    Ok(built)
}

/// The faulted copy: the calls up to `at`, the fault, the recovery, the rest of the calls.
#[allow(clippy::too_many_arguments)]
fn faulted(
    e: &Example,
    head: &[Json],
    calls: &[Call],
    results: &[String],
    kind: &'static str,
    at: usize,
    cfg: &TrajectoryConfig,
    finish: &dyn Fn(Vec<Json>, Json, Option<usize>) -> Option<String>,
) -> Option<String> {
    let mut m = head.to_vec();
    let mut next = 0usize;
    let mut id = || {
        next += 1;
        call_id(&e.id, next - 1)
    };
    if kind == "constraint_changed" {
        // ToolGym's constraint-level fault: from call `at` on, results show at most one row.
        for (i, (c, r)) in calls.iter().zip(results).enumerate() {
            let cid = id();
            m.push(assistant_call(&cid, c, ""));
            m.push(tool_message(
                &cid,
                &c.name,
                &if i >= at { faults::constrain(r) } else { r.clone() },
            ));
        }
        let record = json!([{"kind": kind, "call_index": at, "recovery": "answer_within_new_limit"}]);
        return finish(m, record, Some(at));
    }
    for (c, r) in calls.iter().zip(results).take(at) {
        let cid = id();
        m.push(assistant_call(&cid, c, ""));
        m.push(tool_message(&cid, &c.name, r));
    }
    let wait = faults::retry_after(draw(cfg.seed, &e.id, "retry_after"));
    let fid = id();
    m.push(assistant_call(&fid, &calls[at], ""));
    m.push(tool_message(
        &fid,
        &calls[at].name,
        &faults::fault_content(kind, &results[at], wait),
    ));
    let (recovery, from) = match kind {
        "session_expired" => ("redo_calls_in_new_session", 0),
        "rate_limit" | "unavailable" => ("wait_retry_after_then_retry", at),
        "truncated_result" | "corrupted_result" => ("requery", at),
        _ => ("retry", at),
    };
    for (i, (c, r)) in calls.iter().zip(results).enumerate().skip(from) {
        let text = if i == from {
            faults::recovery_text(kind, wait)
        } else {
            String::new()
        };
        let cid = id();
        m.push(assistant_call(&cid, c, &text));
        m.push(tool_message(&cid, &c.name, r));
    }
    let mut record = json!({"kind": kind, "call_index": at, "tool_call_id": fid, "recovery": recovery});
    if matches!(kind, "rate_limit" | "unavailable") {
        record["waited_s"] = json!(wait);
    }
    finish(m, json!([record]), None)
}
