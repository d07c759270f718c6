//! ToolGym task synthesis (ToolGym §2.2: generate, check, revise): with an LLM endpoint
//! configured (`[catalog.llm]` or the environment, [`crate::llm`]), each bundle row gets an
//! LLM-written request (`input`), its constraints (`tool_count`, `server_diversity`,
//! `sequence_order`, `data_coverage`, `trade_off`) and the reference calls that complete it
//! (`output`).
//!
//! 1. **Generate**: `templates/task.j2` lists the bundle's tools (OpenAI name, server,
//!    description cut to [`MAX_DESCRIPTION_CHARS`], parameters) and asks for `{task, constraints,
//!    calls: [{name, arguments}]}`.
//! 2. **Check** ([`check`]), every failure a reason `<code>: <detail>`: `not_json`, `empty_task`,
//!    `bad_constraints` (empty, or an entry without a known `type` and a `description`),
//!    `no_calls`, `unknown_tool` (a call to a tool outside the bundle), `invalid_arguments`
//!    (JSON Schema validation of the call), `too_few_tools` / `too_few_servers` (fewer distinct
//!    tools / servers than asked), `ungrounded_value` (a string argument that is neither in the
//!    task text nor an `enum` value of its parameter).
//! 3. **Revise once**: a failed answer is sent back with the checker's reasons
//!    (`templates/task_revise.j2`, appended after the answer as an assistant turn); the revision
//!    is checked the same way. An answer that passes (first or revised) replaces the row's
//!    template `input`, fills `output` with its calls and `meta` with `constraints`,
//!    `synthesised: true` and `revised`; otherwise the row keeps its skeleton and is counted
//!    under the first reason code of its last check (or `llm_error:<code>`).
//!
//! Accounting in `stats.synthesis`: `attempted = accepted + rejected`, `accepted =
//! accepted_first_try + accepted_after_revision`, `revision_requests` (= LLM requests of step 3),
//! `rejected_by_reason` (sums to `rejected`) and `first_check_failures` (every reason code of
//! the first checks). Every request and answer is cached in the store, so a rebuild is offline
//! and byte-identical; no endpoint → `stats.synthesis` says it was skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::dataset::{Build, Example};
use crate::llm::{self, Completion, Llm, LlmConfig, LlmError, Message};
use crate::store::Store;
use crate::tools::check::Checker;
use crate::tools::{Call, ToolSpec};

/// The generation prompt.
pub const TEMPLATE: &str = include_str!("../../templates/task.j2");
/// The revision prompt (the checker's reasons).
pub const REVISE_TEMPLATE: &str = include_str!("../../templates/task_revise.j2");

/// The constraint types a task may carry (ToolGym).
pub const CONSTRAINT_TYPES: [&str; 5] = [
    "tool_count",
    "server_diversity",
    "sequence_order",
    "data_coverage",
    "trade_off",
];

/// What a task must satisfy: the bundle's tools, the server of each, and the minimum distinct
/// tools and servers its calls use.
pub struct Spec<'a> {
    /// The bundle's tools (OpenAI form).
    pub tools: &'a [ToolSpec],
    /// Server of each tool, by function name.
    pub servers: BTreeMap<String, String>,
    /// Minimum distinct tools called.
    pub min_tools: usize,
    /// Minimum distinct servers called.
    pub min_servers: usize,
}

/// An accepted task.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The request text.
    pub task: String,
    /// The constraints, as written.
    pub constraints: Vec<Value>,
    /// The reference calls, in order.
    pub calls: Vec<Call>,
}

/// Longest tool description put in a prompt, in characters (some MCP descriptions are pages long).
pub const MAX_DESCRIPTION_CHARS: usize = 300;

/// A description on one line, cut to [`MAX_DESCRIPTION_CHARS`] (with `…`).
fn short(description: &str) -> String {
    let one_line = description.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

fn tool_lines(spec: &Spec) -> String {
    spec.tools
        .iter()
        .map(|t| {
            let required: Vec<&str> = t.parameters["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let params: Vec<String> = t.parameters["properties"]
                .as_object()
                .map(|p| {
                    p.iter()
                        .map(|(k, s)| {
                            let ty = s["type"].as_str().unwrap_or("any");
                            let req = if required.contains(&k.as_str()) {
                                ", required"
                            } else {
                                ""
                            };
                            format!("{k} ({ty}{req})")
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "- {} [{}]: {}; parameters: {}",
                t.name,
                spec.servers.get(&t.name).map(String::as_str).unwrap_or_default(),
                short(&t.description),
                if params.is_empty() {
                    "none".to_string()
                } else {
                    params.join(", ")
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The chat messages asking for a task over the bundle.
pub fn prompt(spec: &Spec) -> Vec<Message> {
    llm::render_chat(
        "task.j2",
        TEMPLATE,
        minijinja::context! { tools => tool_lines(spec), min_tools => spec.min_tools, min_servers => spec.min_servers },
    )
}

/// The revision request: the first prompt, the failed answer, and the checker's reasons.
pub fn revise_prompt(first: &[Message], answer: &str, reasons: &[String]) -> Vec<Message> {
    let mut m = first.to_vec();
    m.push(Message::new("assistant", answer));
    let lines = reasons.iter().map(|r| format!("- {r}")).collect::<Vec<_>>().join("\n");
    m.extend(llm::render_chat(
        "task_revise.j2",
        REVISE_TEMPLATE,
        minijinja::context! { reasons => lines },
    ));
    m
}

/// The reason code of a reason (`<code>: <detail>`).
pub fn code(reason: &str) -> &str {
    reason.split(':').next().unwrap_or(reason)
}

/// Checks an answer (module doc, step 2); `Err` holds every failed check as `<code>: <detail>`.
pub fn check(answer: &str, spec: &Spec, checker: &Checker) -> Result<Task, Vec<String>> {
    let parsed = answer
        .find('{')
        .zip(answer.rfind('}'))
        .and_then(|(s, e)| answer.get(s..=e))
        .and_then(|j| serde_json::from_str::<Value>(j).ok())
        .filter(Value::is_object);
    let Some(v) = parsed else {
        return Err(vec!["not_json: the answer holds no JSON object".into()]);
    };
    let mut reasons = Vec::new();
    let task = v["task"].as_str().map(str::trim).unwrap_or_default().to_string();
    if task.is_empty() {
        reasons.push("empty_task: `task` is missing or empty".into());
    }
    let constraints = v["constraints"].as_array().cloned().unwrap_or_default();
    let constraints_ok = !constraints.is_empty()
        && constraints.iter().all(|c| {
            c["type"].as_str().is_some_and(|t| CONSTRAINT_TYPES.contains(&t))
                && c["description"].as_str().is_some_and(|d| !d.trim().is_empty())
        });
    if !constraints_ok {
        reasons.push(format!(
            "bad_constraints: give 1 to 3 constraints, each with a `type` among {CONSTRAINT_TYPES:?} and a `description`"
        ));
    }
    let mut calls = Vec::new();
    for c in v["calls"].as_array().into_iter().flatten() {
        let name = c["name"].as_str().unwrap_or_default().to_string();
        let arguments = c["arguments"].as_object().cloned().unwrap_or_else(Map::new);
        let call = Call {
            name: name.clone(),
            arguments,
            label: String::new(),
        };
        if !spec.tools.iter().any(|t| t.name == name) {
            reasons.push(format!("unknown_tool: {name:?} is not one of the listed tools"));
            continue;
        }
        if let Err(e) = checker.validate(&call) {
            reasons.push(format!("invalid_arguments: {e}"));
        }
        for (arg, value) in checker.ungrounded(&call, &task) {
            reasons.push(format!(
                "ungrounded_value: {name}.{arg} = {value:?} does not appear in the task"
            ));
        }
        calls.push(call);
    }
    if calls.is_empty() && !reasons.iter().any(|r| code(r) == "unknown_tool") {
        reasons.push("no_calls: `calls` is missing or empty".into());
    }
    let used: BTreeSet<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    if used.len() < spec.min_tools {
        reasons.push(format!(
            "too_few_tools: the calls use {} distinct tools, at least {} needed",
            used.len(),
            spec.min_tools
        ));
    }
    let servers: BTreeSet<&str> = used
        .iter()
        .filter_map(|n| spec.servers.get(*n))
        .map(String::as_str)
        .collect();
    if servers.len() < spec.min_servers {
        reasons.push(format!(
            "too_few_servers: the calls use tools of {} servers, at least {} needed",
            servers.len(),
            spec.min_servers
        ));
    }
    if reasons.is_empty() {
        Ok(Task {
            task,
            constraints,
            calls,
        })
    } else {
        Err(reasons)
    }
}

/// The spec of a bundle row: its tools, their servers (from `meta.reference_tools`), and the
/// minima (3 tools, 2 servers, or fewer when the bundle has fewer).
fn row_spec(e: &Example) -> Spec<'_> {
    let servers: BTreeMap<String, String> = e
        .meta
        .as_ref()
        .and_then(|m| m["reference_tools"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["function"].as_str()?.to_string(), r["server"].as_str()?.to_string())))
        .collect();
    let distinct: BTreeSet<&String> = servers.values().collect();
    Spec {
        tools: &e.tools,
        min_tools: e.tools.len().min(3),
        min_servers: distinct.len().min(2),
        servers,
    }
}

type Outcome = Result<Task, Vec<String>>;

fn judge(res: &Result<Completion, LlmError>, spec: &Spec, checker: &Checker, answers: &mut blake3::Hasher) -> Outcome {
    match res {
        Err(err) => Err(vec![format!("llm_error:{}", err.code)]),
        Ok(c) => {
            answers.update(c.text.as_bytes());
            check(&c.text, spec, checker)
        }
    }
}

/// Completion length when the recipe has no `[catalog.llm]` table: a task, its constraints and
/// five calls need about 300 tokens (the generic default, 96, cuts the JSON short).
pub const DEFAULT_MAX_TOKENS: u32 = 512;

/// Generates, checks and revises the bundle rows' tasks (module doc).
pub fn apply(build: &mut Build, llm_cfg: Option<&LlmConfig>, store: &Store) {
    let default = LlmConfig {
        max_tokens: DEFAULT_MAX_TOKENS,
        ..LlmConfig::default()
    };
    let resolved = match llm::resolve(llm_cfg.unwrap_or(&default)) {
        Ok(r) => r,
        Err(u) => {
            build.stats.insert(
                "synthesis".into(),
                json!(format!("{u}; rows keep a template input and the reference tools")),
            );
            return;
        }
    };
    let seed = resolved.cfg.seed;
    let llm = Arc::new(Llm::new(resolved, store.clone()));
    let rows: Vec<(String, usize)> = build
        .groups
        .iter()
        .flat_map(|(g, o)| (0..o.examples.len()).map(move |i| (g.clone(), i)))
        .collect();
    let example = |build: &Build, (g, i): &(String, usize)| build.groups[g].examples[*i].clone();
    let prompts: Vec<Vec<Message>> = rows.iter().map(|r| prompt(&row_spec(&example(build, r)))).collect();
    let first = llm::chat_all(llm.clone(), prompts.iter().map(|m| (m.clone(), seed)).collect());
    let mut answers = blake3::Hasher::new();
    let mut first_failures: BTreeMap<String, usize> = BTreeMap::new();
    let mut outcomes: Vec<(Outcome, bool)> = Vec::new();
    let mut revisions: Vec<(usize, Vec<Message>)> = Vec::new();
    for (j, (r, res)) in rows.iter().zip(&first).enumerate() {
        let e = example(build, r);
        let spec = row_spec(&e);
        let checker = Checker::new(&e.tools);
        let verdict = match &checker {
            Ok(c) => judge(res, &spec, c, &mut answers),
            Err(m) => Err(vec![format!("invalid_schema: {m}")]),
        };
        if let Err(reasons) = &verdict {
            for c in reasons.iter().map(|r| code(r)).collect::<BTreeSet<_>>() {
                *first_failures.entry(c.to_string()).or_insert(0) += 1;
            }
            if let (Ok(c), Ok(_)) = (res, &checker) {
                revisions.push((j, revise_prompt(&prompts[j], &c.text, reasons)));
            }
        }
        outcomes.push((verdict, false));
    }
    let second = llm::chat_all(llm, revisions.iter().map(|(_, m)| (m.clone(), seed)).collect());
    for ((j, _), res) in revisions.iter().zip(&second) {
        let e = example(build, &rows[*j]);
        let checker = Checker::new(&e.tools).expect("compiled in the first round");
        outcomes[*j] = (judge(res, &row_spec(&e), &checker, &mut answers), true);
    }
    let (mut first_ok, mut revised_ok) = (0usize, 0usize);
    let mut by_reason: BTreeMap<String, usize> = BTreeMap::new();
    for ((g, i), (verdict, revised)) in rows.iter().zip(outcomes) {
        let e = &mut build.groups.get_mut(g).expect("group").examples[*i];
        match verdict {
            Ok(t) => {
                if revised {
                    revised_ok += 1;
                } else {
                    first_ok += 1;
                }
                e.input = t.task;
                e.output = t.calls;
                if let Some(Value::Object(m)) = e.meta.as_mut() {
                    m.insert("constraints".into(), json!(t.constraints));
                    m.insert("synthesised".into(), json!(true));
                    m.insert("revised".into(), json!(revised));
                    m.remove("synthesis");
                }
            }
            Err(reasons) => {
                *by_reason.entry(code(&reasons[0]).to_string()).or_insert(0) += 1;
            }
        }
    }
    let attempted = rows.len();
    let accepted = first_ok + revised_ok;
    build.stats.insert(
        "synthesis".into(),
        json!({
            "attempted": attempted,
            "accepted": accepted,
            "accepted_first_try": first_ok,
            "accepted_after_revision": revised_ok,
            "revision_requests": revisions.len(),
            "rejected": attempted - accepted,
            "rejected_by_reason": by_reason,
            "first_check_failures": first_failures,
            "templates": ["templates/task.j2", "templates/task_revise.j2"],
        }),
    );
    build.fold_into_key(answers.finalize().as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, props: Value) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: format!("{name} things"),
            parameters: json!({"type": "object", "properties": props, "required": ["q"]}),
            output_parameters: json!({}),
        }
    }

    #[test]
    fn answers_are_checked_with_every_reason() {
        let tools = [
            tool("search_papers", json!({"q": {"type": "string"}})),
            tool(
                "get_weather",
                json!({"q": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}),
            ),
        ];
        let spec = Spec {
            tools: &tools,
            servers: BTreeMap::from([
                ("search_papers".into(), "arxiv".into()),
                ("get_weather".into(), "weather".into()),
            ]),
            min_tools: 2,
            min_servers: 2,
        };
        let checker = Checker::new(&tools).unwrap();
        let ok = r#"Sure: {"task": "Find papers on glaciers and the weather in Bern.", "constraints": [{"type": "tool_count", "description": "Use two tools."}],
            "calls": [{"name": "search_papers", "arguments": {"q": "glaciers"}}, {"name": "get_weather", "arguments": {"q": "Bern", "unit": "c"}}]}"#;
        let t = check(ok, &spec, &checker).unwrap();
        assert_eq!(t.calls.len(), 2);
        assert_eq!(t.calls[1].name, "get_weather");
        assert_eq!(
            check("no json here", &spec, &checker).unwrap_err()[0],
            "not_json: the answer holds no JSON object"
        );
        let bad = r#"{"task": "Find papers on glaciers.", "constraints": [{"type": "vibes", "description": "d"}],
            "calls": [{"name": "search_papers", "arguments": {"q": "volcanoes"}}, {"name": "fly", "arguments": {}}]}"#;
        let codes: Vec<String> = check(bad, &spec, &checker)
            .unwrap_err()
            .iter()
            .map(|r| code(r).to_string())
            .collect();
        assert_eq!(
            codes,
            [
                "bad_constraints",
                "ungrounded_value",
                "unknown_tool",
                "too_few_tools",
                "too_few_servers"
            ]
        );
        let invalid = r#"{"task": "t", "constraints": [{"type": "trade_off", "description": "d"}], "calls": [{"name": "search_papers", "arguments": {}}]}"#;
        let r = check(invalid, &spec, &checker).unwrap_err();
        assert_eq!(code(&r[0]), "invalid_arguments", "{r:?}");
        let p = prompt(&spec);
        assert_eq!(p.len(), 2);
        assert!(
            p[1].content.contains(
                "- get_weather [weather]: get_weather things; parameters: q (string, required), unit (string)"
            ),
            "{}",
            p[1].content
        );
        let rp = revise_prompt(&p, "{}", &["no_calls: x".into()]);
        assert_eq!(rp.len(), 4);
        assert_eq!((rp[2].role.as_str(), rp[3].role.as_str()), ("assistant", "user"));
        assert!(rp[3].content.contains("- no_calls: x"));
    }
}
