//! Trajectories of variant rows (issue 16 item 5): what a model sees changes with the variant
//! (perturb, paraphrase: the request; drift: the tools and calls under A_new; distractors,
//! shortlist: the toolkit; obfuscate: names, arguments and labels), while the tool results do
//! not — every variant keeps the gold answer and its calls run to the same results. So a variant
//! row's trajectory is its parent's clean trajectory ([`super::trajectories`], real results)
//! rewritten:
//!
//! - `id`: the variant row's id; the `user` message: the variant's request (and hint);
//! - `tools`: the variant row's tools (for `drift`, A_new — `meta.variant.tools_new` — so every
//!   call shown validates against the tools shown); the setup step excluded;
//! - each assistant tool call: the variant's call (name and arguments) at the same position;
//!   each SLOT/SEL tool message keeps its output under the variant call's label, and the system
//!   prompt names renamed labels (obfuscation) as the variant does;
//! - the final answer and `gold_answer`: the parent's; `faults`: `[]` (variant rows get no
//!   faulted copy).
//!
//! A variant whose model calls do not pair one-to-one with its parent's, or whose parent has no
//! written clean trajectory, gets none.

use std::collections::HashMap;

use serde_json::{Value as Json, json};

use super::setup_and_calls;
use crate::dataset::Example;
use crate::tools::ToolSpec;

/// Skip reason of a variant row whose model calls do not pair one-to-one with its parent's.
pub const UNPAIRED_CALLS: &str = "variant_calls_unpaired";

/// The trajectory of variant row `v` from its parent `parent` and the parent's clean trajectory
/// `parent_trajectory` (module docs). Errors (skip reasons): [`UNPAIRED_CALLS`], or
/// [`super::OVER_SIZE_CAP`] when the JSON line would exceed `max_chars`.
pub fn variant_trajectory(
    v: &Example,
    parent: &Example,
    parent_trajectory: &Json,
    catalog: &HashMap<&str, &ToolSpec>,
    max_chars: usize,
) -> Result<Json, &'static str> {
    let (_, vcalls) = setup_and_calls(v);
    let (_, pcalls) = setup_and_calls(parent);
    if vcalls.len() != pcalls.len() {
        return Err(UNPAIRED_CALLS);
    }
    let labels: Vec<(&str, &str)> = pcalls
        .iter()
        .zip(vcalls)
        .filter(|(p, v)| p.label != v.label)
        .map(|(p, v)| (p.label.as_str(), v.label.as_str()))
        .collect();
    let mut messages = parent_trajectory["messages"].as_array().ok_or(UNPAIRED_CALLS)?.clone();
    let mut call = 0usize;
    let mut tool = 0usize;
    for m in messages.iter_mut() {
        match m["role"].as_str() {
            Some("system") => {
                let mut text = m["content"].as_str().unwrap_or_default().to_string();
                for (p, v) in &labels {
                    text = text.replace(&format!("${p}$"), &format!("${v}$"));
                }
                m["content"] = json!(text);
            }
            Some("user") => {
                m["content"] = json!(match &v.evidence {
                    Some(ev) if !ev.is_empty() => format!("{}\nHint: {ev}", v.input),
                    _ => v.input.clone(),
                });
            }
            Some("assistant") if m.get("tool_calls").is_some() => {
                let c = vcalls.get(call).ok_or(UNPAIRED_CALLS)?;
                m["tool_calls"][0]["function"] =
                    json!({"name": c.name, "arguments": Json::Object(c.arguments.clone()).to_string()});
                call += 1;
            }
            Some("tool") => {
                let c = vcalls.get(tool).ok_or(UNPAIRED_CALLS)?;
                let content = m["content"].as_str().unwrap_or_default();
                if let Ok(Json::Object(mut o)) = serde_json::from_str::<Json>(content) {
                    if o.contains_key("label") {
                        o.insert("label".into(), json!(c.label));
                        m["content"] = json!(Json::Object(o).to_string());
                    }
                }
                tool += 1;
            }
            _ => {}
        }
    }
    if call != vcalls.len() {
        return Err(UNPAIRED_CALLS);
    }
    let shown: Vec<ToolSpec> = match v.meta.as_ref().and_then(|m| m["variant_kind"].as_str()) {
        Some("drift") => v
            .meta
            .as_ref()
            .and_then(|m| serde_json::from_value(m["variant"]["tools_new"].clone()).ok())
            .ok_or(UNPAIRED_CALLS)?,
        _ => v.tools.clone(),
    };
    let tools: Vec<Json> = shown
        .iter()
        .map(|t| match catalog.get(t.name.as_str()) {
            Some(s) if t.is_reference() => *s,
            _ => t,
        })
        .filter(|s| s.name != "initialize_active_data")
        .map(|s| json!({"type": "function", "function": {"name": s.name, "description": s.description, "parameters": s.parameters}}))
        .collect();
    let record = json!({"id": v.id, "messages": messages, "tools": tools, "gold_answer": parent_trajectory["gold_answer"], "faults": []});
    if record.to_string().len() > max_chars {
        return Err(super::OVER_SIZE_CAP);
    }
    Ok(record)
}
