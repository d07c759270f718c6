//! The trajectory exports besides the default Hugging Face / TRL files: OpenAI's fine-tuning
//! format ([`to_openai`], `trajectories/openai/`) and the ShareGPT / Hermes rendering
//! ([`to_sharegpt`], `toolforge trajectories --format sharegpt`), and the OpenAI format with
//! each tool's `parameters` as JSON text ([`to_openai_text`], `--format openai-text`), the form
//! `datasets` 3.x can load.
//!
//! OpenAI's chat fine-tuning format with tools (platform.openai.com/docs/guides/fine-tuning,
//! "Fine-tuning with function calling"): each line holds only `messages`, `tools` and
//! `parallel_tool_calls`; an assistant call's `function.arguments` is JSON **text**; a tool
//! message is `{"role": "tool", "tool_call_id", "content"}` (no `name`); an assistant message that
//! only calls has no `content`. Our own fields (`id`, `gold_answer`, `faults`) go to a sidecar,
//! one line per trajectory line: `{"line": n (0-based line of the trajectory file), "id",
//! "gold_answer", "faults"}`.

use serde_json::{Map, Value as Json, json};

/// The fields of a trajectory that [`to_openai`] moves to the sidecar, in order.
pub const SIDECAR_FIELDS: [&str; 3] = ["id", "gold_answer", "faults"];

/// A call's `arguments` as JSON text: an object is serialised, text (an older line) kept.
fn arguments_text(a: &Json) -> Json {
    match a {
        Json::String(s) => Json::String(s.clone()),
        other => Json::String(other.to_string()),
    }
}

/// A call's `arguments` as an object: text is parsed (`Null` when it is not JSON), an object kept.
fn arguments_object(a: &Json) -> Json {
    match a {
        Json::String(s) => serde_json::from_str(s).unwrap_or(Json::Null),
        other => other.clone(),
    }
}

/// Trajectory `t` (the default form, [`super`]) in OpenAI's fine-tuning format, and its sidecar
/// line for line number `line` (module docs). Messages keep their order and text; only the keys
/// OpenAI defines are written (`parallel_tool_calls` is `true` exactly when an assistant message
/// makes several calls: a seq row's independent calls, [`super::calls`]).
pub fn to_openai(t: &Json, line: usize) -> (Json, Json) {
    let messages: Vec<Json> = t["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let mut out = Map::new();
            out.insert("role".into(), m["role"].clone());
            match m["role"].as_str() {
                Some("tool") => {
                    out.insert("tool_call_id".into(), m["tool_call_id"].clone());
                    out.insert("content".into(), m["content"].clone());
                }
                Some("assistant") if m.get("tool_calls").is_some() => {
                    if m["content"].as_str().is_some_and(|c| !c.is_empty()) {
                        out.insert("content".into(), m["content"].clone());
                    }
                    let calls: Vec<Json> = m["tool_calls"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|c| {
                            json!({"id": c["id"], "type": "function", "function": {
                                "name": c["function"]["name"],
                                "arguments": arguments_text(&c["function"]["arguments"])}})
                        })
                        .collect();
                    out.insert("tool_calls".into(), Json::Array(calls));
                }
                _ => {
                    out.insert("content".into(), m["content"].clone());
                }
            }
            Json::Object(out)
        })
        .collect();
    // `true` exactly when an assistant message makes several calls (seq rows' independent calls).
    let parallel = messages
        .iter()
        .any(|m| m["tool_calls"].as_array().is_some_and(|c| c.len() > 1));
    let trajectory = json!({"messages": messages, "tools": t["tools"], "parallel_tool_calls": parallel});
    let mut sidecar = Map::new();
    sidecar.insert("line".into(), json!(line));
    for k in SIDECAR_FIELDS {
        sidecar.insert(k.into(), t[k].clone());
    }
    (trajectory, Json::Object(sidecar))
}

/// Trajectory `t` as [`to_openai`] writes it, with each tool's `function.parameters` (a JSON
/// Schema object) as its JSON **text**: `{"messages", "tools": [{"type", "function": {"name",
/// "description", "parameters": "<JSON text>"}}], "parallel_tool_calls"}`.
///
/// Why (issue 45): Arrow holds `tools` as a list of structs, so a reader without `datasets`'
/// `Json` feature (3.x) types `parameters` as a struct of every parameter name of every tool —
/// each tool comes back padded with the others' parameters as `null`, and a file whose later
/// 10 MB chunk names a parameter the first chunk lacks cannot be cast at all (rest-spider's
/// `openai/dev.jsonl`). As text, every tool has one Arrow type. This is not OpenAI's format
/// (it wants an object): a consumer parses it back (`json.loads`) before rendering.
pub fn to_openai_text(t: &Json) -> Json {
    let (mut line, _) = to_openai(t, 0);
    for tool in line["tools"].as_array_mut().into_iter().flatten() {
        if let Some(f) = tool.get_mut("function").and_then(Json::as_object_mut)
            && let Some(p) = f.get_mut("parameters")
            && !p.is_string()
        {
            *p = Json::String(p.to_string());
        }
    }
    line
}

/// A trajectory in the ShareGPT / Hermes function-calling style that open fine-tuning stacks
/// read: `{"id", "conversations": [{"from": "system"|"human"|"gpt"|"tool", "value"}], "faults"}`,
/// tools in `<tools>` in the system turn, calls as `<tool_call>{"name", "arguments"}</tool_call>`
/// (arguments an object), results as `<tool_response>…</tool_response>`.
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
                            let args = arguments_object(&c["function"]["arguments"]);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn trajectory() -> Json {
        json!({"id": "d/1", "messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "abc123def", "type": "function",
                "function": {"name": "get_x", "arguments": {"city": "Paris", "n": 2}}}]},
            {"role": "tool", "tool_call_id": "abc123def", "name": "get_x", "content": "[[1]]"},
            {"role": "assistant", "content": "The answer is 1."}],
            "tools": [{"type": "function", "function": {"name": "get_x", "description": "d", "parameters": {"type": "object"}}}],
            "gold_answer": "[[1]]", "faults": []})
    }

    #[test]
    fn openai_lines_hold_only_openai_keys_with_arguments_as_text() {
        let (line, sidecar) = to_openai(&trajectory(), 7);
        let keys: Vec<&String> = line.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["messages", "tools", "parallel_tool_calls"]);
        let call = &line["messages"][2];
        assert!(
            call.get("content").is_none(),
            "a call-only assistant message has no content"
        );
        let args = call["tool_calls"][0]["function"]["arguments"].as_str().unwrap();
        assert_eq!(
            serde_json::from_str::<Json>(args).unwrap(),
            json!({"city": "Paris", "n": 2})
        );
        let tool: Vec<&String> = line["messages"][3].as_object().unwrap().keys().collect();
        assert_eq!(tool, ["role", "tool_call_id", "content"]);
        assert_eq!(
            sidecar,
            json!({"line": 7, "id": "d/1", "gold_answer": "[[1]]", "faults": []})
        );
    }

    #[test]
    fn parallel_tool_calls_is_true_exactly_when_a_message_makes_several_calls() {
        let mut t = trajectory();
        assert_eq!(to_openai(&t, 0).0["parallel_tool_calls"], json!(false));
        let call = t["messages"][2]["tool_calls"][0].clone();
        t["messages"][2]["tool_calls"] = json!([call.clone(), call]);
        assert_eq!(to_openai(&t, 0).0["parallel_tool_calls"], json!(true));
    }

    #[test]
    fn openai_text_lines_carry_each_tools_parameters_as_json_text() {
        let t = trajectory();
        let line = to_openai_text(&t);
        let (openai, _) = to_openai(&t, 0);
        assert_eq!(line["messages"], openai["messages"]);
        assert_eq!(line["parallel_tool_calls"], openai["parallel_tool_calls"]);
        let p = line["tools"][0]["function"]["parameters"].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Json>(p).unwrap(), json!({"type": "object"}));
        assert_eq!(line["tools"][0]["function"]["name"], json!("get_x"));
        // (idempotent: text stays the same text)
        let mut again = t.clone();
        again["tools"] = line["tools"].clone();
        assert_eq!(to_openai_text(&again)["tools"], line["tools"]);
    }

    #[test]
    fn sharegpt_calls_carry_arguments_as_objects_from_either_form() {
        let t = trajectory();
        let (openai, _) = to_openai(&t, 0);
        let mut with_text = t.clone();
        with_text["messages"] = openai["messages"].clone();
        for t in [t, with_text] {
            let gpt = to_sharegpt(&t)["conversations"][2]["value"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(gpt.contains(r#""arguments":{"city":"Paris","n":2}"#), "{gpt}");
        }
    }
}
