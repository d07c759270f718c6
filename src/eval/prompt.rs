//! What a model is shown, and how its answer is read back into calls.
//!
//! The model sees the **full** tool specification in both tool formats ([`ToolFormat`]): every
//! tool's name, whole description and JSON Schema of its arguments (every parameter's type,
//! description and every `enum` value) — nothing cut, since a value the prompt hides is one the
//! model cannot predict.
//! - **prompt** (`--tool-format prompt`): plain chat messages, so any OpenAI-compatible endpoint
//!   works, including servers without native tool calling. The tools are in the system prompt,
//!   one JSON object `{"name", "description", "parameters"}` per line; the model answers in
//!   text, read back by [`parse_calls`].
//! - **native** (`--tool-format native`): the tools go in the request's `tools` as OpenAI
//!   function tools ([`openai_tools`]) and the calls are read from the answer's `tool_calls`
//!   ([`native_calls`]); text is the model's answer, never read for calls. A native call carries
//!   no label: the `k`-th call of the row (counting from 0) is labelled `OUT_k`, and the system
//!   prompt says so.
//!
//! `--shots K` ([`shots`]): the system prompt shows K solved examples from the train split
//! (request and gold calls, labels renamed `OUT_k` as the model is asked to write them).
//!
//! Reading calls back from text ([`parse_calls`]): the first JSON value in the text that is a list
//! of calls, an object with `tool_calls` or `calls`, or one call object (`{"name", "arguments"}`);
//! fenced code blocks and `<tool_call>…</tool_call>` tags are looked through. Text without any
//! call is no call (the model's answer), never an error.

use anyhow::{Result, anyhow};
use serde_json::{Map, Value, json};

use super::predictions::parse_call;
use super::rows::EvalRow;
use crate::llm::Message;
use crate::tools::{Call, ToolSpec, as_label_ref};

/// How the tools reach the model (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolFormat {
    /// `tools` in the request, calls read from `tool_calls`.
    Native,
    /// Tools in the system prompt, calls read from the answer's text.
    #[default]
    Prompt,
}

impl ToolFormat {
    /// `native` or `prompt`; anything else is an error naming both.
    pub fn parse(s: &str) -> Result<ToolFormat> {
        match s {
            "native" => Ok(ToolFormat::Native),
            "prompt" => Ok(ToolFormat::Prompt),
            _ => Err(anyhow!("tool format {s:?}: expected native or prompt")),
        }
    }

    /// The name `--tool-format` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolFormat::Native => "native",
            ToolFormat::Prompt => "prompt",
        }
    }
}

/// A spec's argument schema, an empty object schema when the spec has none.
fn parameters(t: &ToolSpec) -> Value {
    if t.parameters.is_object() {
        t.parameters.clone()
    } else {
        json!({"type": "object", "properties": {}})
    }
}

/// The request's `tools`: each spec as an OpenAI function tool (`{"type": "function",
/// "function": {"name", "description", "parameters"}}`), whole.
pub fn openai_tools(tools: &[ToolSpec]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": parameters(t)}}))
        .collect()
}

/// The prompt format's tool list: one JSON object `{"name", "description", "parameters"}` per
/// line, whole (module docs).
pub fn tool_lines(tools: &[ToolSpec]) -> String {
    tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "parameters": parameters(t)}).to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `calls` with the `k`-th call labelled `OUT_k` and every whole-string reference `$L$` to an
/// earlier call's label renamed with it (labels the calls do not define, such as the setup's
/// `starting_table_var`, are kept).
pub fn relabel(calls: &[Call]) -> Vec<Call> {
    let mut names: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    fn rename(v: &Value, names: &std::collections::HashMap<String, String>) -> Value {
        if let Some(new) = as_label_ref(v).and_then(|l| names.get(l)) {
            return Value::String(format!("${new}$"));
        }
        match v {
            Value::Array(a) => Value::Array(a.iter().map(|x| rename(x, names)).collect()),
            Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), rename(x, names))).collect()),
            other => other.clone(),
        }
    }
    calls
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let arguments: Map<String, Value> = c
                .arguments
                .iter()
                .map(|(a, v)| (a.clone(), rename(v, &names)))
                .collect();
            let label = format!("OUT_{k}");
            names.insert(c.label.clone(), label.clone());
            Call {
                name: c.name.clone(),
                arguments,
                label,
            }
        })
        .collect()
}

/// The calls of a native answer's `tool_calls` (OpenAI's shape); the `i`-th labelled
/// `OUT_{first + i}` (module docs). A call without a name or with arguments that are not a JSON
/// object is dropped.
pub fn native_calls(tool_calls: &[Value], first: usize) -> Vec<Call> {
    tool_calls
        .iter()
        .filter_map(|c| parse_call(c, 0).ok())
        .enumerate()
        .map(|(i, mut c)| {
            c.label = format!("OUT_{}", first + i);
            c
        })
        .collect()
}

/// What the framework loaded for the row: the joined table `$starting_table_var$`, and for rows
/// with `additional_setup_steps` each further table under its label with the tables it joins;
/// then how later calls refer to earlier outputs in `format`.
fn data_note(row: &EvalRow, format: ToolFormat) -> String {
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
    note + match format {
        ToolFormat::Prompt => " Give each call a \"label\"; a later call refers to an earlier output as \"$LABEL$\".\n",
        ToolFormat::Native => {
            " A later call refers to the output of an earlier call as \"$OUT_k$\", k the earlier call's position among your calls, counting from 0.\n"
        }
    }
}

/// The solved examples block of the system prompt (empty without shots).
fn shots_text(shots: &[&EvalRow]) -> String {
    if shots.is_empty() {
        return String::new();
    }
    let mut out = String::from("Solved examples:\n");
    for s in shots {
        let calls: Vec<Value> = relabel(&s.gold)
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.arguments, "label": c.label}))
            .collect();
        out.push_str(&format!("Request: {}\nCalls: {}\n", s.input, Value::Array(calls)));
    }
    out
}

/// The system message's tool list (prompt format only: native sends them as `tools`).
fn tools_text(tools: &[ToolSpec], format: ToolFormat) -> String {
    match format {
        ToolFormat::Prompt => format!(
            "Tools (one JSON object per line; \"parameters\" is the JSON Schema of the arguments):\n{}\n",
            tool_lines(tools)
        ),
        ToolFormat::Native => String::new(),
    }
}

/// The direct-mode prompt: the whole sequence at once (as a JSON list in the prompt format, as
/// tool calls of one answer in the native format).
pub fn direct_messages(row: &EvalRow, tools: &[ToolSpec], format: ToolFormat, shots: &[&EvalRow]) -> Vec<Message> {
    let ask = match format {
        ToolFormat::Prompt => {
            "Answer with only a JSON list of calls, e.g. [{\"name\": \"tool\", \"arguments\": {\"param\": \"value\"}, \"label\": \"OUT_0\"}]. Answer [] if no tool fits."
        }
        ToolFormat::Native => {
            "Make every call the request needs in this one answer (no call runs before you have answered). Make no call if no tool fits."
        }
    };
    vec![
        Message::new(
            "system",
            format!(
                "You call tools. {}{}{}{ask}",
                tools_text(tools, format),
                data_note(row, format),
                shots_text(shots)
            ),
        ),
        Message::new("user", row.input.clone()),
    ]
}

/// The agent-mode opening: one call per turn (prompt format; native: the calls of one answer,
/// in order); each result comes back (a user message, or a `tool` message per call).
pub fn agent_messages(row: &EvalRow, tools: &[ToolSpec], format: ToolFormat, shots: &[&EvalRow]) -> Vec<Message> {
    let ask = match format {
        ToolFormat::Prompt => {
            "To call a tool, answer with only one JSON object: {\"name\": \"tool\", \"arguments\": {...}, \"label\": \"OUT_0\"}. You will get its result. When you have the answer, reply with the answer as plain text."
        }
        ToolFormat::Native => {
            "Call the tools you need; you will get each result. When you have the answer, reply with the answer as plain text."
        }
    };
    vec![
        Message::new(
            "system",
            format!(
                "You call tools one at a time. {}{}{}{ask}",
                tools_text(tools, format),
                data_note(row, format),
                shots_text(shots)
            ),
        ),
        Message::new("user", row.input.clone()),
    ]
}

/// The `k` solved examples of a run (`--shots K`): the rows of `pool` (the train split) with at
/// least one gold call, ranked by the FNV-1a hash of their id (a fixed, seed-free order: the same
/// examples for every row, run and build), the first `k` that are not `row` itself.
pub fn shots<'a>(pool: &[&'a EvalRow], row: &EvalRow, k: usize) -> Vec<&'a EvalRow> {
    let mut ranked: Vec<(u64, &'a EvalRow)> = pool
        .iter()
        .filter(|r| !r.gold.is_empty() && r.id != row.id)
        .map(|r| (fnv1a(&r.id), *r))
        .collect();
    ranked.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
    ranked.into_iter().take(k).map(|(_, r)| r).collect()
}

/// 64-bit FNV-1a of `s`.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
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
