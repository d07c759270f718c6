//! ToolGym task synthesis: with an LLM endpoint configured (`[catalog.llm]` or the environment,
//! [`crate::llm`]), each bundle row's template `input` is replaced by an LLM-written task and its
//! constraints (`tool_count`, `server_diversity`, `sequence_order`, `data_coverage`,
//! `trade_off`). Prompt: `templates/task.j2`; every request and answer is cached in the store, so
//! a rebuild is offline and byte-identical.
//!
//! An answer is accepted when it holds a JSON object with a non-empty `task` string and a
//! `constraints` list whose entries have a known `type` and a `description`; otherwise the row
//! keeps its template input and the rejection is counted by reason (`not_json`, `empty_task`,
//! `bad_constraints`, `llm_error:<code>`). Accounting `attempted = accepted + rejected` is in
//! `stats.synthesis`; no endpoint → `stats.synthesis` says it was skipped.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::dataset::Build;
use crate::llm::{self, Completion, Llm, LlmConfig, LlmError, Message};
use crate::store::Store;

/// The prompt template.
pub const TEMPLATE: &str = include_str!("../../templates/task.j2");

/// The constraint types a task may carry (ToolGym).
pub const CONSTRAINT_TYPES: [&str; 5] = [
    "tool_count",
    "server_diversity",
    "sequence_order",
    "data_coverage",
    "trade_off",
];

fn tool_lines(tools: &[Value]) -> String {
    tools
        .iter()
        .map(|t| {
            format!(
                "- {}: {} — {}",
                t["server"].as_str().unwrap_or_default(),
                t["tool"].as_str().unwrap_or_default(),
                t["description"].as_str().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The chat messages asking for a task over `tools` (`{server, tool, description}` objects).
pub fn prompt(tools: &[Value], min_tools: usize, min_servers: usize) -> Vec<Message> {
    llm::render_chat(
        "task.j2",
        TEMPLATE,
        minijinja::context! { tools => tool_lines(tools), min_tools => min_tools, min_servers => min_servers },
    )
}

/// The task and constraints in an answer, or the rejection reason.
pub fn parse(answer: &str) -> Result<(String, Vec<Value>), &'static str> {
    let start = answer.find('{').ok_or("not_json")?;
    let end = answer.rfind('}').ok_or("not_json")?;
    let v: Value = serde_json::from_str(answer.get(start..=end).ok_or("not_json")?).map_err(|_| "not_json")?;
    let task = v["task"]
        .as_str()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or("empty_task")?;
    let constraints = v["constraints"].as_array().ok_or("bad_constraints")?;
    let ok = !constraints.is_empty()
        && constraints.iter().all(|c| {
            c["type"].as_str().is_some_and(|t| CONSTRAINT_TYPES.contains(&t))
                && c["description"].as_str().is_some_and(|d| !d.trim().is_empty())
        });
    if !ok {
        return Err("bad_constraints");
    }
    Ok((task.to_string(), constraints.clone()))
}

/// Rewrites the bundle rows' `input` with synthesised tasks (module doc).
pub fn apply(build: &mut Build, llm_cfg: Option<&LlmConfig>, store: &Store) {
    let default = LlmConfig::default();
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
    let mut jobs: Vec<(String, usize, Vec<Message>)> = Vec::new();
    for (g, o) in &build.groups {
        for (i, e) in o.examples.iter().enumerate() {
            let tools: Vec<Value> = e
                .meta
                .as_ref()
                .and_then(|m| m["reference_tools"].as_array())
                .into_iter()
                .flatten()
                .map(|r| {
                    let name = r["function"].as_str().or(r["tool"].as_str()).unwrap_or_default();
                    let description = e
                        .tools
                        .iter()
                        .find(|t| t.name == name)
                        .map(|t| t.description.clone())
                        .unwrap_or_default();
                    json!({"server": r["server"], "tool": r["tool"], "description": description})
                })
                .collect();
            let servers: std::collections::BTreeSet<String> = tools.iter().map(|t| t["server"].to_string()).collect();
            jobs.push((g.clone(), i, prompt(&tools, tools.len().min(3), servers.len().min(2))));
        }
    }
    let results: Vec<Result<Completion, LlmError>> =
        llm::chat_all(llm, jobs.iter().map(|(_, _, m)| (m.clone(), seed)).collect());
    let mut by_reason: BTreeMap<String, usize> = BTreeMap::new();
    let mut accepted = 0usize;
    let mut answers = blake3::Hasher::new();
    for ((g, i, _), res) in jobs.iter().zip(&results) {
        let e = &mut build.groups.get_mut(g).expect("group").examples[*i];
        let verdict = match res {
            Err(err) => Err(format!("llm_error:{}", err.code)),
            Ok(c) => {
                answers.update(c.text.as_bytes());
                parse(&c.text).map_err(String::from)
            }
        };
        match verdict {
            Ok((task, constraints)) => {
                accepted += 1;
                e.input = task;
                if let Some(Value::Object(m)) = e.meta.as_mut() {
                    m.insert("constraints".into(), json!(constraints));
                    m.insert("synthesised".into(), json!(true));
                }
            }
            Err(reason) => *by_reason.entry(reason).or_insert(0) += 1,
        }
    }
    let attempted = jobs.len();
    build.stats.insert(
        "synthesis".into(),
        json!({"attempted": attempted, "accepted": accepted, "rejected": attempted - accepted, "rejected_by_reason": by_reason, "template": "templates/task.j2"}),
    );
    let mut h = blake3::Hasher::new();
    h.update(build.build_key.as_bytes());
    h.update(answers.finalize().as_bytes());
    build.build_key = h.finalize().to_hex().to_string();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_parsed_or_rejected_with_a_reason() {
        let ok = r#"Sure: {"task": "Find flights and book a hotel.", "constraints": [{"type": "tool_count", "description": "Use at least three tools."}]}"#;
        let (task, c) = parse(ok).unwrap();
        assert_eq!((task.as_str(), c.len()), ("Find flights and book a hotel.", 1));
        assert_eq!(parse("no json here"), Err("not_json"));
        assert_eq!(parse(r#"{"task": " ", "constraints": []}"#), Err("empty_task"));
        assert_eq!(
            parse(r#"{"task": "x", "constraints": [{"type": "vibes", "description": "d"}]}"#),
            Err("bad_constraints")
        );
        let p = prompt(&[json!({"server": "s", "tool": "t", "description": "d"})], 1, 1);
        assert_eq!(p.len(), 2);
        assert!(p[1].content.contains("- s: t — d"), "{}", p[1].content);
    }
}
