//! What a model is shown, and how its text is read back into calls.
//!
//! Both modes use plain chat messages (system / user / assistant), so any OpenAI-compatible
//! endpoint works, including servers without native tool calling. Tools are listed compactly,
//! one per line: `name(param: type [one of a|b|…], …): description` (descriptions cut to their
//! first sentence, at most 160 characters; enums to 12 values), so that instance toolkits fit a
//! small model's context.
//!
//! Reading calls back ([`parse_calls`]): the first JSON value in the text that is a list of calls,
//! an object with `tool_calls` or `calls`, or one call object (`{"name", "arguments"}`); fenced
//! code blocks and `<tool_call>…</tool_call>` tags are looked through. Text without any call is no
//! call (the model's answer), never an error.

use serde_json::Value;

use super::predictions::parse_call;
use super::rows::EvalRow;
use crate::llm::Message;
use crate::tools::{Call, ToolSpec};

fn first_sentence(s: &str) -> String {
    let end = s.find(". ").map_or(s.len(), |i| i + 1);
    s[..end].chars().take(160).collect()
}

fn type_of(p: &Value) -> String {
    let mut t = p["type"].as_str().unwrap_or("any").to_string();
    if let Some(e) = p["enum"].as_array() {
        let vals: Vec<String> = e
            .iter()
            .take(12)
            .map(|v| v.as_str().map_or(v.to_string(), String::from))
            .collect();
        t += &format!(" one of {}{}", vals.join("|"), if e.len() > 12 { "|…" } else { "" });
    }
    t
}

/// One line per tool (module docs).
pub fn tool_lines(tools: &[ToolSpec]) -> String {
    tools
        .iter()
        .map(|t| {
            let req: Vec<&str> = t.parameters["required"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let params: Vec<String> = t.parameters["properties"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, p)| {
                            format!(
                                "{k}{}: {}",
                                if req.contains(&k.as_str()) { "" } else { "?" },
                                type_of(p)
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "- {}({}): {}",
                t.name,
                params.join(", "),
                first_sentence(&t.description)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the framework loaded for the row: the joined table `$starting_table_var$`, and for rows
/// with `additional_setup_steps` each further table under its label with the tables it joins.
fn data_note(row: &EvalRow) -> String {
    let Some(first) = row.setup.first() else {
        return String::new();
    };
    let mut note = format!("The data is already loaded: refer to it as \"${}$\".", first.label);
    for s in &row.setup[1..] {
        let tables: Vec<&str> = s.arguments["alias_to_table_dict"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, t)| t["original_table_name"].as_str())
            .collect();
        note.push_str(&format!(
            " Table(s) {} are loaded as \"${}$\".",
            tables.join(", "),
            s.label
        ));
    }
    note + " Give each call a \"label\"; a later call refers to an earlier output as \"$LABEL$\".\n"
}

/// The direct-mode prompt: the whole sequence at once, as a JSON list.
pub fn direct_messages(row: &EvalRow, tools: &[ToolSpec]) -> Vec<Message> {
    vec![
        Message {
            role: "system".into(),
            content: format!(
                "You call tools. Tools:\n{}\n{}Answer with only a JSON list of calls, e.g. [{{\"name\": \"tool\", \"arguments\": {{\"param\": \"value\"}}, \"label\": \"OUT_0\"}}]. Answer [] if no tool fits.",
                tool_lines(tools),
                data_note(row)
            ),
        },
        Message {
            role: "user".into(),
            content: row.input.clone(),
        },
    ]
}

/// The agent-mode opening: one call per turn, tool results come back as user messages.
pub fn agent_messages(row: &EvalRow, tools: &[ToolSpec]) -> Vec<Message> {
    vec![
        Message {
            role: "system".into(),
            content: format!(
                "You call tools one at a time. Tools:\n{}\n{}To call a tool, answer with only one JSON object: {{\"name\": \"tool\", \"arguments\": {{...}}, \"label\": \"OUT_0\"}}. You will get its result. When you have the answer, reply with the answer as plain text.",
                tool_lines(tools),
                data_note(row)
            ),
        },
        Message {
            role: "user".into(),
            content: row.input.clone(),
        },
    ]
}

/// Every top-level JSON value embedded in `text` (objects and arrays), in order.
fn json_values(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'{' || bytes[i] == b'[' {
            let mut stream = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
            if let Some(Ok(v)) = stream.next() {
                i += stream.byte_offset();
                out.push(v);
                continue;
            }
        }
        i += 1;
    }
    out
}

fn calls_in(v: &Value) -> Option<Vec<Call>> {
    let list = match v {
        Value::Array(a) => a.clone(),
        Value::Object(o) if o.contains_key("tool_calls") => o["tool_calls"].as_array()?.clone(),
        Value::Object(o) if o.contains_key("calls") => o["calls"].as_array()?.clone(),
        Value::Object(o) if o.contains_key("name") || o.contains_key("function") => vec![v.clone()],
        _ => return None,
    };
    let calls: Vec<Call> = list
        .iter()
        .enumerate()
        .filter_map(|(i, c)| parse_call(c, i).ok())
        .collect();
    (!calls.is_empty() || list.is_empty()).then_some(calls)
}

/// The calls in a model's text (module docs); `None` when the text holds no call list or call.
pub fn parse_calls(text: &str) -> Option<Vec<Call>> {
    json_values(text).iter().find_map(calls_in)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_calls_from_model_text() {
        let t = "Sure!\n```json\n[{\"name\": \"f\", \"arguments\": {\"x\": 1}, \"label\": \"A\"}]\n```";
        let c = parse_calls(t).unwrap();
        assert_eq!((c[0].name.as_str(), c[0].label.as_str()), ("f", "A"));
        let c = parse_calls("<tool_call>{\"name\": \"g\", \"arguments\": \"{\\\"y\\\": 2}\"}</tool_call>").unwrap();
        assert_eq!(c[0].arguments["y"], 2);
        assert_eq!(parse_calls("[]").unwrap(), vec![]);
        assert!(parse_calls("The answer is 4.").is_none());
        assert!(parse_calls("{\"answer\": 4}").is_none());
    }
}
