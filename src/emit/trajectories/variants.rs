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
/// [`super::OVER_SIZE_CAP`] when its `messages` (JSON text) would exceed `max_chars` characters.
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
                // The parent's request replaced by the variant's; what follows it (the active
                // tables, [`super::user_turn`]) kept, with the variant's labels.
                let content = m["content"].as_str().unwrap_or_default();
                let mut rest = content
                    .strip_prefix(super::request_text(parent).as_str())
                    .unwrap_or_default()
                    .to_string();
                for (p, v) in &labels {
                    rest = rest.replace(&format!("${p}$"), &format!("${v}$"));
                }
                m["content"] = json!(format!("{}{rest}", super::request_text(v)));
            }
            Some("assistant") if m.get("tool_calls").is_some() => {
                let c = vcalls.get(call).ok_or(UNPAIRED_CALLS)?;
                m["tool_calls"][0]["function"] =
                    json!({"name": c.name, "arguments": Json::Object(c.arguments.clone())});
                call += 1;
            }
            Some("tool") => {
                let c = vcalls.get(tool).ok_or(UNPAIRED_CALLS)?;
                m["name"] = json!(c.name);
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
        _ => v.tools.to_vec(),
    };
    let tools: Vec<Json> = shown
        .iter()
        .map(|t| match catalog.get(t.name.as_str()) {
            Some(s) if t.is_reference() => *s,
            _ => t,
        })
        .filter(|s| s.name != "initialize_active_data")
        .map(|s| json!({"type": "function", "function": {"name": s.name, "description": s.description, "parameters": super::schema::shown_parameters(&s.parameters)}}))
        .collect();
    let record = json!({"id": v.id, "messages": messages, "tools": tools, "gold_answer": parent_trajectory["gold_answer"], "faults": []});
    // The cap counts the conversation, not the toolkit (as for verified examples' trajectories).
    if record["messages"].to_string().chars().count() > max_chars {
        return Err(super::OVER_SIZE_CAP);
    }
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::Call;

    fn call(name: &str, args: Json, label: &str) -> Call {
        Call {
            name: name.into(),
            arguments: args.as_object().unwrap().clone(),
            label: label.into(),
        }
    }

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "d".into(),
            parameters: json!({"type": "object", "properties": {}}),
            output_parameters: json!({}),
        }
    }

    /// Issue 16 item 5: a variant row's trajectory shows the variant's request, tools, calls and
    /// labels over the parent's real results and answer.
    #[test]
    fn variant_trajectory_shows_the_variant() {
        let parent = Example {
            id: "p".into(),
            input: "How many singers?".into(),
            tools: vec![spec("retrieve_data"), spec("aggregate_data")].into(),
            output: vec![
                call("retrieve_data", json!({"data_source": "$starting_table_var$"}), "A"),
                call("aggregate_data", json!({"data_source": "$A$"}), "B"),
            ],
            ..Example::default()
        };
        let t = json!({"id": "p", "messages": [
            {"role": "system", "content": "Use \"$starting_table_var$\"."},
            {"role": "user", "content": "How many singers?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function", "function": {"name": "retrieve_data", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "{\"label\":\"A\",\"output\":[1,2]}"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "b", "type": "function", "function": {"name": "aggregate_data", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "b", "content": "{\"label\":\"B\",\"output\":2}"},
            {"role": "assistant", "content": "2"}
        ], "tools": [], "gold_answer": [[2]], "faults": []});
        let mut v = parent.clone();
        v.id = "p/obfuscate".into();
        v.input = "how many SINGERS?".into();
        v.meta = Some(json!({"variant_of": "p", "variant_kind": "obfuscate"}));
        v.tools = vec![spec("FUNC_1"), spec("FUNC_2")].into();
        v.output = vec![
            call("FUNC_1", json!({"ARG_1": "$starting_table_var$"}), "VAR_1"),
            call("FUNC_2", json!({"ARG_1": "$VAR_1$"}), "VAR_2"),
        ];
        let out = variant_trajectory(&v, &parent, &t, &HashMap::new(), 100_000).unwrap();
        let m = out["messages"].as_array().unwrap();
        assert_eq!(out["id"], "p/obfuscate");
        assert_eq!(m[1]["content"], "how many SINGERS?");
        assert_eq!(m[4]["tool_calls"][0]["function"]["name"], "FUNC_2");
        assert_eq!(m[5]["name"], "FUNC_2", "the tool message names the variant's function");
        assert_eq!(
            m[4]["tool_calls"][0]["function"]["arguments"],
            json!({"ARG_1": "$VAR_1$"}),
            "arguments stay a JSON object (issue 29)"
        );
        assert_eq!(m[3]["content"], "{\"label\":\"VAR_1\",\"output\":[1,2]}");
        assert_eq!(m[6]["content"], "2");
        let names: Vec<&str> = out["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["FUNC_1", "FUNC_2"]);
        // Calls that do not pair up with the parent's: no trajectory, a named reason.
        v.output.pop();
        assert_eq!(
            variant_trajectory(&v, &parent, &t, &HashMap::new(), 100_000).unwrap_err(),
            UNPAIRED_CALLS
        );
        v.output = parent.output.clone();
        assert_eq!(
            variant_trajectory(&v, &parent, &t, &HashMap::new(), 10).unwrap_err(),
            super::super::OVER_SIZE_CAP
        );
    }
}
