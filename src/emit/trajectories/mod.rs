//! The trajectories emitter: `trajectories/<split>.jsonl` and `trajectories/<split>.faults.jsonl`,
//! fine-tuning trajectory corpora of the executable families (SLOT, SEL, REST), with ToolGym-style
//! injected faults ([`faults`]).
//!
//! One trajectory per example, in the OpenAI chat fine-tuning format:
//! `{"id", "messages": [system, user, (assistant with one tool_call, tool)…, assistant answer],
//! "tools": [OpenAI functions], "gold_answer", "faults": []}`. Each assistant message makes one
//! call (`content` is `""` — never null, which chat templates such as SmolLM2's and Qwen's reject
//! — or a short recovery sentence; `tool_calls: [{"id", "type": "function", "function": {"name",
//! "arguments" (JSON text)}}]`, the id 9 alphanumeric characters as Mistral's template requires)
//! because later calls need earlier results; each `tool` message holds the **real result** of
//! executing the call on the data:
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
//! stated as another loaded table under its label (`$starting_table_var_2$`, …).
//!
//! The final assistant message is the answer read back from the shown results ([`answer`]): it
//! never contains a value no tool message showed, and when a result was cut it states the total
//! and which rows it lists. A trajectory whose JSON line exceeds `max_chars` characters is not
//! written; the skip is counted by reason in `report/verification.json` (`trajectories`).
//!
//! Variant rows (issue 16) get a clean trajectory rewritten from their parent's ([`variants`]):
//! the variant's request, tools and calls over the same real results.

pub mod answer;
pub mod cached;
pub mod faults;
mod prompt;
pub mod variants;

use prompt::{ToolsText, active_table, system_prompt};

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{Context, Result};
use rayon::prelude::*;
use serde_json::{Value as Json, json};

use crate::dataset::{Build, Example, Outcome};
use crate::recipe::TrajectoryConfig;
use crate::tools::executor::{Executor, Session, value_json};
use crate::tools::rest::{Endpoint, Limits};
use crate::tools::shown::{Shown, rest_result_text, result_text};
use crate::tools::{Call, ToolSpec};

pub use faults::FAULT_KINDS;

/// Skip reason of a trajectory over the size cap.
pub const OVER_SIZE_CAP: &str = "over_size_cap";
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

fn assistant_call(id: &str, c: &Call, text: &str) -> Json {
    json!({"role": "assistant", "content": text, "tool_calls": [{"id": id, "type": "function", "function": {"name": c.name, "arguments": Json::Object(c.arguments.clone()).to_string()}}]})
}

fn tool_message(id: &str, content: &str) -> Json {
    json!({"role": "tool", "tool_call_id": id, "content": content})
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

/// The trajectories of `e` (see [`Built`]). `tools` gives its toolkit's text; `known`
/// is what the compile stage showed of `e`'s results ([`Build::shown`]), if anything; `conn`
/// caches a REST connection as (database, connection). Errors: a call that does not execute
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
    let user = match &e.evidence {
        Some(ev) if !ev.is_empty() => format!("{}\nHint: {ev}", e.input),
        _ => e.input.clone(),
    };
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
        json!({"role": "user", "content": user}),
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
    let gold = serde_json::to_string(e.gold_answer.as_deref().unwrap_or_default()).expect("serialisable");
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
        let record = format!(
            "{{\"id\":{id},\"messages\":{},\"tools\":{tools},\"gold_answer\":{gold},\"faults\":{faults}}}",
            Json::Array(messages)
        );
        // The cap is on the whole JSON line (messages, tools and the gold answer alike).
        (record.len() <= cfg.max_chars).then_some(record)
    };
    let mut built = Built::default();
    let mut clean = head.clone();
    for (i, (c, r)) in calls.iter().zip(&results).enumerate() {
        let id = call_id(&e.id, i);
        clean.push(assistant_call(&id, c, ""));
        clean.push(tool_message(&id, r));
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
                &if i >= at { faults::constrain(r) } else { r.clone() },
            ));
        }
        let record = json!([{"kind": kind, "call_index": at, "recovery": "answer_within_new_limit"}]);
        return finish(m, record, Some(at));
    }
    for (c, r) in calls.iter().zip(results).take(at) {
        let cid = id();
        m.push(assistant_call(&cid, c, ""));
        m.push(tool_message(&cid, r));
    }
    let wait = faults::retry_after(draw(cfg.seed, &e.id, "retry_after"));
    let fid = id();
    m.push(assistant_call(&fid, &calls[at], ""));
    m.push(tool_message(&fid, &faults::fault_content(kind, &results[at], wait)));
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
        m.push(tool_message(&cid, r));
    }
    let mut record = json!({"kind": kind, "call_index": at, "tool_call_id": fid, "recovery": recovery});
    if matches!(kind, "rate_limit" | "unavailable") {
        record["waited_s"] = json!(wait);
    }
    finish(m, json!([record]), None)
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
                    let text = m["content"].as_str().unwrap_or_default();
                    let value = if text.is_empty() { blocks.join("\n") } else { format!("{text}\n{}", blocks.join("\n")) };
                    conv.push(json!({"from": "gpt", "value": value}));
                }
                None => conv.push(json!({"from": "gpt", "value": m["content"]})),
            },
            _ => {}
        }
    }
    json!({"id": t["id"], "conversations": conv, "faults": t["faults"]})
}

/// The trajectory writer of an executable build (SLOT, SEL, REST); `None` for other families.
pub(super) struct Trajectories<'b> {
    build: &'b Build,
    executor: Executor,
    endpoints: HashMap<(String, String), crate::tools::rest::Endpoint>,
}

impl<'b> Trajectories<'b> {
    /// The writer of `build`, `None` when its family is not executable.
    pub(super) fn new(build: &'b Build) -> Result<Option<Trajectories<'b>>> {
        if !["slot", "sel", "rest"].contains(&build.recipe.format.as_str()) {
            return Ok(None);
        }
        let endpoints = match build.extra_files.get("tools/endpoints.json") {
            Some(bytes) => serde_json::from_slice::<Vec<crate::tools::rest::Endpoint>>(bytes)?
                .into_iter()
                .map(|e| ((e.db_id.clone(), e.name.clone()), e))
                .collect(),
            None => HashMap::new(),
        };
        Ok(Some(Trajectories {
            build,
            executor: Executor::new(&build.source.databases),
            endpoints,
        }))
    }

    /// Writes `trajectories/<split>.jsonl` (clean) and `trajectories/<split>.faults.jsonl` of
    /// every split in `splits` into `staging`; returns the trajectories not written, counted by
    /// reason, and each file's (path, hash).
    ///
    /// The groups are taken in order, a window of groups (about [`WINDOW_EXAMPLES`] verified
    /// examples) at a time: a window's lines are computed — read from the store where it holds
    /// them ([`cached::GroupLines`]), otherwise executed, groups and examples in parallel — while
    /// the previous window's are written, so a build never holds all its trajectories at once
    /// (5,742 Spider-train SEL rows: 430 MB of lines, issue 17). Within each file, examples come
    /// in group order, then in their group's order (the rows' order). Variant rows get a clean
    /// trajectory rewritten from their parent's ([`variants`]); a variant's parent is in its
    /// group ([`crate::variants`] adds variants beside their parent).
    pub(super) fn write_files(
        &self,
        splits: &[&str],
        store: Option<&crate::store::Store>,
        staging: &super::Staging,
    ) -> Result<(Skipped, Vec<(String, String)>)> {
        let mut files: BTreeMap<&str, [super::StagedFile; 2]> = BTreeMap::new();
        for split in splits {
            let clean = staging.create(&format!("trajectories/{split}.jsonl"))?;
            let faulted = staging.create(&format!("trajectories/{split}.faults.jsonl"))?;
            files.insert(split, [clean, faulted]);
        }
        let tools = ToolsText::new(&self.build.catalog);
        let runner = if self.build.recipe.format == "rest" {
            Runner::Rest(&self.endpoints, &self.build.source.databases)
        } else {
            Runner::Tools(&self.executor)
        };
        let cfg = &self.build.recipe.trajectories;
        let stored = cached::GroupLines::new(self.build, store);
        let compute = |originals: &[&Example]| -> Result<Vec<cached::Line>> {
            originals
                .par_iter()
                .map_init(
                    || None,
                    |conn, e| {
                        trajectories(e, &tools, &runner, cfg, self.build.shown.get(&e.id), conn)
                            .map(cached::Line::from)
                            .map_err(|m| anyhow::anyhow!("{}: trajectory: {m}", e.id))
                    },
                )
                .collect()
        };
        let window_lines = |window: &Window| -> Result<Vec<Vec<cached::Line>>> {
            window
                .par_iter()
                .map(|(group, outcome)| {
                    let originals: Vec<&Example> =
                        outcome.examples.iter().filter(|e| cached::is_original(e)).collect();
                    stored.of(group, &originals, compute)
                })
                .collect()
        };
        let mut skipped = Skipped::new();
        let mut write_window = |window: &Window, lines: Vec<Vec<cached::Line>>| -> Result<()> {
            for ((_, outcome), lines) in window.iter().zip(lines) {
                self.write_group(outcome, &lines, &mut files, &mut skipped)?;
            }
            Ok(())
        };
        let groups: Vec<(&String, &Outcome)> = self.build.groups.iter().collect();
        let mut previous: Option<(&Window, Vec<Vec<cached::Line>>)> = None;
        for window in windows(&groups) {
            let (wrote, lines) = rayon::join(
                || previous.take().map_or(Ok(()), |(w, l)| write_window(w, l)),
                || window_lines(window),
            );
            wrote?;
            previous = Some((window, lines?));
        }
        if let Some((w, l)) = previous {
            write_window(w, l)?;
        }
        let mut written = Vec::new();
        for [clean, faulted] in files.into_values() {
            written.push(clean.finish()?);
            written.push(faulted.finish()?);
        }
        Ok((skipped, written))
    }

    /// Writes one group's lines (`lines`: one per verified example, in order) to the files of
    /// each example's split, counting skips into `skipped`.
    fn write_group(
        &self,
        outcome: &Outcome,
        lines: &[cached::Line],
        files: &mut BTreeMap<&str, [super::StagedFile; 2]>,
        skipped: &mut Skipped,
    ) -> Result<()> {
        use std::io::Write;
        let originals = outcome.examples.iter().filter(|e| cached::is_original(e));
        let by_example: HashMap<*const Example, &cached::Line> =
            originals.clone().map(|e| e as *const Example).zip(lines).collect();
        let parents: HashMap<(&str, &str), (&Example, &cached::Line)> = originals
            .zip(lines)
            .map(|(e, l)| ((e.split.as_str(), e.id.as_str()), (e, l)))
            .collect();
        let catalog: HashMap<&str, &ToolSpec> = self.build.catalog.iter().map(|t| (t.name.as_str(), t)).collect();
        let max_chars = self.build.recipe.trajectories.max_chars;
        for e in &outcome.examples {
            let Some([clean, faulted]) = files.get_mut(e.split.as_str()) else {
                continue;
            };
            let variant_line;
            let line = if cached::is_original(e) {
                by_example[&(e as *const Example)]
            } else {
                let parent = e.meta.as_ref().and_then(|m| m["variant_of"].as_str());
                let Some((p, Some(t))) = parent
                    .and_then(|id| parents.get(&(e.split.as_str(), id)))
                    .map(|(p, l)| (p, l.clean.as_ref()))
                else {
                    continue;
                };
                let t: Json = serde_json::from_str(t)?;
                let v = variants::variant_trajectory(e, p, &t, &catalog, max_chars);
                variant_line = cached::Line {
                    skipped: v.as_ref().err().map(|r| r.to_string()).into_iter().collect(),
                    clean: v.ok().map(|t| t.to_string()),
                    faulted: None,
                };
                &variant_line
            };
            for (text, file) in [(&line.clean, clean), (&line.faulted, faulted)] {
                if let Some(t) = text {
                    (file.w.write_all(t.as_bytes()).and_then(|()| file.w.write_all(b"\n")))
                        .with_context(|| format!("writing {}", file.path.display()))?;
                }
            }
            for r in &line.skipped {
                *skipped.entry(r.clone()).or_default() += 1;
            }
        }
        Ok(())
    }
}

/// Trajectories not written, counted by reason.
type Skipped = BTreeMap<String, usize>;

/// Consecutive groups of a build, by name, in order ([`windows`]).
type Window<'a> = [(&'a String, &'a Outcome)];

/// Verified examples per window of [`Trajectories::write_files`]: enough to keep both threads
/// busy, few enough that a window's lines stay small (a SEL line carries its ~61 tools: 40 KB).
pub const WINDOW_EXAMPLES: usize = 512;

/// `groups` cut into consecutive windows of about [`WINDOW_EXAMPLES`] examples: a window ends
/// with the group that reaches it, so only its last group takes it past the size.
fn windows<'g, 'a>(groups: &'g Window<'a>) -> impl Iterator<Item = &'g Window<'a>> {
    let mut rest = groups;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut n = 0;
        let mut end = 0;
        while end < rest.len() && n < WINDOW_EXAMPLES {
            n += rest[end].1.examples.len();
            end += 1;
        }
        let (window, tail) = rest.split_at(end);
        rest = tail;
        Some(window)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_the_groups_in_order_about_window_examples_each() {
        let sizes = [0, 3, 700, 1, 200, 200, 200, 5, 0, 1200, 600];
        let names: Vec<String> = (0..sizes.len()).map(|i| format!("g{i:02}")).collect();
        let outcomes: Vec<Outcome> = sizes
            .iter()
            .map(|&n| Outcome {
                examples: vec![Example::default(); n],
                ..Outcome::default()
            })
            .collect();
        let groups: Vec<(&String, &Outcome)> = names.iter().zip(&outcomes).collect();
        let cut: Vec<&[(&String, &Outcome)]> = windows(&groups).collect();
        // Every group once, in order.
        let flat: Vec<&String> = cut.iter().flat_map(|w| w.iter().map(|(g, _)| *g)).collect();
        assert_eq!(flat, names.iter().collect::<Vec<_>>());
        let counts: Vec<usize> = cut
            .iter()
            .map(|w| w.iter().map(|(_, o)| o.examples.len()).sum())
            .collect();
        assert_eq!(counts, vec![703, 601, 1205, 600]);
        // A window holds more than WINDOW_EXAMPLES only through its last group.
        for w in &cut {
            let before_last: usize = w[..w.len() - 1].iter().map(|(_, o)| o.examples.len()).sum();
            assert!(before_last < WINDOW_EXAMPLES, "{before_last}");
        }
        assert_eq!(windows(&[]).count(), 0);
    }
}
