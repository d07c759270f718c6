//! OpenAI's fine-tuning form of a trajectory line computed from the line's **text** (issue 46):
//! the same bytes as [`super::export::to_openai`] serialised, without parsing the line into a
//! `serde_json::Value` tree and serialising that tree again.
//!
//! A trajectory line is compact JSON written by `serde_json` (the default form, [`super`]), so
//! every field the OpenAI form copies unchanged — `tools` (a SEL row's toolkit is most of the
//! line), a message's `role`/`content`/`tool_call_id`, a call's `id`/`name`, the sidecar's `id`,
//! `gold_answer` and `faults` — is copied as its text (`serde_json::value::RawValue`): the text
//! `serde_json` would write for the value it holds, since writing is deterministic and every
//! number it writes reads back as the same number (`float_roundtrip`). Only a call's object
//! `arguments` is re-encoded, as a JSON string of its text, which is what
//! `Value::String(arguments.to_string())` writes.
//!
//! A line this reader does not take (not an object, a duplicate key, a message or call that is
//! not an object) goes through [`super::export::to_openai`], so the output never depends on
//! which path ran.

use serde::Deserialize;
use serde_json::value::RawValue;

/// `Some(raw)` for a field that is present, `null` included (`Option`'s own reading maps `null`
/// to `None`; the `Value` path tells a present `tool_calls: null` from a missing one).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct Trajectory<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    messages: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    tools: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    gold_answer: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    faults: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct Message<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    role: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    content: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    tool_call_id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    tool_calls: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct ToolCall<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    function: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct Function<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    name: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    arguments: Option<&'a RawValue>,
}

/// Why the text path declined a line (it then goes through the `Value` path).
struct Declined;

impl From<serde_json::Error> for Declined {
    fn from(_: serde_json::Error) -> Declined {
        Declined
    }
}

/// The text of a field, `null` when absent (what indexing a `Value` by a missing key gives).
fn text<'a>(raw: Option<&'a RawValue>) -> &'a str {
    raw.map_or("null", RawValue::get)
}

/// `raw` read as struct `T` when it is a JSON object, `T::default()` (every field absent) when it
/// is another value — what indexing a non-object `Value` gives. Errors: a duplicate key.
fn object<'a, T: Deserialize<'a> + Default>(raw: Option<&'a RawValue>) -> Result<T, Declined> {
    match raw {
        Some(r) if r.get().starts_with('{') => Ok(serde_json::from_str(r.get())?),
        _ => Ok(T::default()),
    }
}

/// The elements of `raw` when it is a JSON array, none otherwise.
fn elements<'a>(raw: Option<&'a RawValue>) -> Result<Vec<&'a RawValue>, Declined> {
    match raw {
        Some(r) if r.get().starts_with('[') => Ok(serde_json::from_str(r.get())?),
        _ => Ok(Vec::new()),
    }
}

/// The string `raw` holds, when it is a JSON string.
fn string(raw: Option<&RawValue>) -> Option<String> {
    raw.filter(|r| r.get().starts_with('"'))
        .and_then(|r| serde_json::from_str(r.get()).ok())
}

/// Trajectory line `line` (the default form's JSON text) in OpenAI's fine-tuning format, and
/// the tail of its sidecar line after `{"line":0` (`,"id":…,"gold_answer":…,"faults":…}`): the
/// bytes [`super::export::to_openai`] of the parsed line serialises to. Errors: `line` is not
/// JSON.
pub fn openai_text(line: &str) -> anyhow::Result<(String, String)> {
    if let Ok(out) = from_text(line) {
        return Ok(out);
    }
    let t: serde_json::Value = serde_json::from_str(line)?;
    let (openai, sidecar) = super::export::to_openai(&t, 0);
    let sidecar = sidecar.to_string();
    let tail = sidecar
        .strip_prefix("{\"line\":0")
        .ok_or_else(|| anyhow::anyhow!("sidecar line without its line number first: {sidecar}"))?;
    Ok((openai.to_string(), tail.to_string()))
}

fn from_text(line: &str) -> Result<(String, String), Declined> {
    if !line.starts_with('{') {
        return Err(Declined);
    }
    let t: Trajectory = serde_json::from_str(line)?;
    let mut out = String::with_capacity(line.len());
    out.push_str("{\"messages\":[");
    let mut parallel = false;
    for (i, m) in elements(t.messages)?.into_iter().enumerate() {
        let m: Message = object(Some(m))?;
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"role\":");
        out.push_str(text(m.role));
        match string(m.role).as_deref() {
            Some("tool") => {
                out.push_str(",\"tool_call_id\":");
                out.push_str(text(m.tool_call_id));
                out.push_str(",\"content\":");
                out.push_str(text(m.content));
            }
            Some("assistant") if m.tool_calls.is_some() => {
                if string(m.content).is_some_and(|c| !c.is_empty()) {
                    out.push_str(",\"content\":");
                    out.push_str(text(m.content));
                }
                out.push_str(",\"tool_calls\":[");
                let calls = elements(m.tool_calls)?;
                parallel |= calls.len() > 1;
                for (j, c) in calls.into_iter().enumerate() {
                    let c: ToolCall = object(Some(c))?;
                    let f: Function = object(c.function)?;
                    if j > 0 {
                        out.push(',');
                    }
                    out.push_str("{\"id\":");
                    out.push_str(text(c.id));
                    out.push_str(",\"type\":\"function\",\"function\":{\"name\":");
                    out.push_str(text(f.name));
                    out.push_str(",\"arguments\":");
                    // `arguments_text`: a string kept, any other value as its JSON text.
                    match f.arguments.filter(|a| a.get().starts_with('"')) {
                        Some(a) => out.push_str(a.get()),
                        None => out.push_str(&serde_json::to_string(text(f.arguments))?),
                    }
                    out.push_str("}}");
                }
                out.push(']');
            }
            _ => {
                out.push_str(",\"content\":");
                out.push_str(text(m.content));
            }
        }
        out.push('}');
    }
    out.push_str("],\"tools\":");
    out.push_str(text(t.tools));
    out.push_str(",\"parallel_tool_calls\":");
    out.push_str(if parallel { "true" } else { "false" });
    out.push('}');
    let sidecar = format!(
        ",\"id\":{},\"gold_answer\":{},\"faults\":{}}}",
        text(t.id),
        text(t.gold_answer),
        text(t.faults)
    );
    Ok((out, sidecar))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The `Value` path's bytes: [`super::super::export::to_openai`] serialised.
    fn by_value(line: &str) -> (String, String) {
        let t: serde_json::Value = serde_json::from_str(line).unwrap();
        let (o, s) = super::super::export::to_openai(&t, 0);
        let s = s.to_string();
        (o.to_string(), s.strip_prefix("{\"line\":0").unwrap().to_string())
    }

    #[test]
    fn the_text_path_writes_the_bytes_the_value_path_writes() {
        let lines = [
            json!({"id": "d/1", "messages": [
                {"role": "system", "content": "s \"quoted\" é\n\u{1}"},
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "abc123def", "type": "function",
                    "function": {"name": "get_x", "arguments": {"city": "Pa\"ris", "n": 2, "f": 0.1, "big": 1e300, "neg": -3, "l": [1.5, null, true]}}}]},
                {"role": "tool", "tool_call_id": "abc123def", "name": "get_x", "content": "[[1]]"},
                {"role": "assistant", "content": "ok", "tool_calls": [
                    {"id": "a", "function": {"name": "f", "arguments": "{\"x\":1}"}},
                    {"id": "b", "function": {"name": "g"}}, 7, {"function": [1, 2]}]},
                {"role": "assistant", "tool_calls": null},
                {"role": "assistant", "content": "The answer is 1."},
                {"content": "no role"}, 3, {"role": 5, "content": {"a": 1}}],
                "tools": [{"type": "function", "function": {"name": "get_x", "description": "d", "parameters": {"type": "object"}}}],
                "gold_answer": "[[1]]", "faults": [{"kind": "timeout"}]})
            .to_string(),
            json!({"messages": "not a list"}).to_string(),
            json!({}).to_string(),
            json!({"id": null, "messages": [], "tools": null, "extra": {"k": [1, 2]}}).to_string(),
            // A duplicate key: declined by the text path, the `Value` path's bytes still.
            r#"{"id":"a","id":"b","messages":[]}"#.to_string(),
            r#"[1,2]"#.to_string(),
        ];
        for line in &lines {
            assert_eq!(openai_text(line).unwrap(), by_value(line), "{line}");
        }
        assert!(openai_text("not json").is_err());
    }
}
