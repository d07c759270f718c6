//! The predictions file: JSON Lines, one object per row,
//!
//! ```json
//! {"id": "slot-spider/491", "output": [{"name": "filter_data", "arguments": {...}, "label": "FILTERED_DF_0"}, ...]}
//! {"id": "bfcl/simple_python_0", "tool_calls": [{"type": "function", "function": {"name": "calc_area", "arguments": "{\"base\": 10}"}}]}
//! ```
//!
//! - `output`: our row format (`arguments` an object or a JSON string; `label` optional, default
//!   `<name>_<i>`);
//! - `tool_calls`: OpenAI's assistant-message shape, `function.arguments` a JSON string; the label
//!   is `function.label` if given, else the tool call `id`, else `<name>_<i>`. The `k`-th
//!   well-formed call (from 0) also answers to `OUT_k`, the label toolforge's native-calling
//!   prompt asks the model to refer to it by ([`crate::eval::prompt`]): a whole-string reference
//!   `"$OUT_k$"` is resolved to that call's label unless a call of the line is itself labelled
//!   `OUT_k` ([`resolve_out_refs`]);
//! - neither key, or an empty list: the model made no call;
//! - `failed` (a string, `eval run`): the request for this row failed (refused connection, 401,
//!   500 after the retries, …) and the model gave no answer: the row is *failed*, not scored as
//!   no call — excluded from every metric and counted ([`Prediction::failed`]);
//! - `stop_reason` (agent runs): how the episode ended; only `answered` is finished, so any other
//!   fails completion ([`Prediction::stop_reason`]).
//!
//! Nothing here is fatal: a line that is not JSON or has no `id` is a [`Problem`] (`malformed_line`),
//! a second line for the same id is `duplicate_id` (the first one counts), an id the dataset does not
//! have is `unknown_id`, and a call without a name or with arguments that are not a JSON object is
//! `malformed_call` (that call is dropped from the sequence, the rest is scored). Rows of the
//! dataset without a line are counted as missing by the scorer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::tools::Call;

/// One problem found in a predictions file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    /// `malformed_line`, `duplicate_id`, `unknown_id`, `malformed_call`.
    pub kind: String,
    /// 1-based line number.
    pub line: usize,
    /// The row id, when known.
    pub id: Option<String>,
    /// What is wrong.
    pub detail: String,
}

/// One row's prediction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prediction {
    /// The predicted calls, malformed ones dropped.
    pub calls: Vec<Call>,
    /// Problems of this row's calls (`malformed_call`), for its per-row result.
    pub problems: Vec<String>,
    /// Why the request failed, when it did (module docs): no answer to score.
    pub failed: Option<String>,
    /// How an agent episode ended (`stop_reason`: `answered`, `step_limit`, `repeated_call`,
    /// `error`; [`crate::eval::agent::StopReason`]); `None` for a direct prediction.
    pub stop_reason: Option<String>,
    /// `parsed: false` (`eval run` direct mode): the answer held no call list the reader could
    /// take, a format error ([`crate::eval::taxonomy`]).
    pub unparsed: bool,
}

/// A parsed predictions file.
#[derive(Debug, Default)]
pub struct Predictions {
    /// Predictions by id (first line per id).
    pub by_id: BTreeMap<String, Prediction>,
    /// Every problem, in line order (unknown ids are added by the scorer, which knows the rows).
    pub problems: Vec<Problem>,
}

fn parse_arguments(v: &Value) -> Result<Map<String, Value>, String> {
    match v {
        Value::Object(m) => Ok(m.clone()),
        Value::Null => Ok(Map::new()),
        Value::String(s) if s.trim().is_empty() => Ok(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(other) => Err(format!("arguments {other} are not a JSON object")),
            Err(e) => Err(format!(
                "arguments are not JSON ({e}): {}",
                s.chars().take(80).collect::<String>()
            )),
        },
        other => Err(format!("arguments {other} are not an object")),
    }
}

/// Parses one call in either shape (module docs); `i` is its position.
pub fn parse_call(v: &Value, i: usize) -> Result<Call, String> {
    let (name, args, label) = match v.get("function") {
        Some(f) => (
            &f["name"],
            &f["arguments"],
            f["label"].as_str().or_else(|| v["id"].as_str()),
        ),
        None => (&v["name"], &v["arguments"], v["label"].as_str()),
    };
    let name = name
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| format!("call {i} has no name"))?;
    let arguments = parse_arguments(args).map_err(|e| format!("call {i} `{name}`: {e}"))?;
    Ok(Call {
        name: name.to_string(),
        arguments,
        label: label.map(String::from).unwrap_or_else(|| format!("{name}_{i}")),
    })
}

/// Parses the calls of one line's value (`output` or `tool_calls`).
pub fn parse_prediction(v: &Value) -> Prediction {
    let list = v
        .get("output")
        .filter(|x| !x.is_null())
        .or_else(|| v.get("tool_calls").filter(|x| !x.is_null()));
    let mut out = Prediction {
        failed: v["failed"].as_str().map(String::from),
        stop_reason: v["stop_reason"].as_str().map(String::from),
        unparsed: v["parsed"] == Value::Bool(false),
        ..Prediction::default()
    };
    match list {
        None => {}
        Some(Value::Array(items)) => {
            for (i, c) in items.iter().enumerate() {
                match parse_call(c, i) {
                    Ok(call) => out.calls.push(call),
                    Err(e) => out.problems.push(e),
                }
            }
            if v.get("output").is_none_or(Value::is_null) {
                resolve_out_refs(&mut out.calls);
            }
        }
        Some(other) => out.problems.push(format!(
            "the calls are not a list: {}",
            other.to_string().chars().take(80).collect::<String>()
        )),
    }
    out
}

/// Rewrites every whole-string reference `"$OUT_k$"` in `calls`' arguments (at any depth) to the
/// label of the `k`-th call, for each `k` no call is itself labelled `OUT_k` (module docs: the
/// native-calling prompt's positional labels, which OpenAI's `tool_calls` have no field for).
pub fn resolve_out_refs(calls: &mut [Call]) {
    let labels: std::collections::BTreeSet<String> = calls.iter().map(|c| c.label.clone()).collect();
    let positional: BTreeMap<String, String> = calls
        .iter()
        .enumerate()
        .map(|(k, c)| (format!("OUT_{k}"), c.label.clone()))
        .filter(|(out, _)| !labels.contains(out))
        .collect();
    if positional.is_empty() {
        return;
    }
    fn rename(v: &mut Value, names: &BTreeMap<String, String>) {
        if let Some(new) = crate::tools::as_label_ref(v).and_then(|l| names.get(l)) {
            *v = Value::String(format!("${new}$"));
            return;
        }
        match v {
            Value::Array(a) => a.iter_mut().for_each(|x| rename(x, names)),
            Value::Object(m) => m.values_mut().for_each(|x| rename(x, names)),
            _ => {}
        }
    }
    for c in calls.iter_mut() {
        c.arguments.values_mut().for_each(|x| rename(x, &positional));
    }
}

/// Parses a whole predictions file (module docs).
pub fn parse(text: &str) -> Predictions {
    let mut out = Predictions::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let problem = |kind: &str, id: Option<String>, detail: String| Problem {
            kind: kind.into(),
            line: i + 1,
            id,
            detail,
        };
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                out.problems
                    .push(problem("malformed_line", None, format!("not JSON: {e}")));
                continue;
            }
        };
        let Some(id) = v.get("id").and_then(Value::as_str).map(String::from) else {
            out.problems
                .push(problem("malformed_line", None, "no string `id`".into()));
            continue;
        };
        if out.by_id.contains_key(&id) {
            out.problems.push(problem(
                "duplicate_id",
                Some(id),
                "a later line for the same id is ignored".into(),
            ));
            continue;
        }
        let p = parse_prediction(&v);
        for e in &p.problems {
            out.problems
                .push(problem("malformed_call", Some(id.clone()), e.clone()));
        }
        out.by_id.insert(id, p);
    }
    out
}

/// Serialises calls in our `output` format (`arguments` as objects), one predictions line.
pub fn line(id: &str, calls: &[Call]) -> String {
    let output: Vec<Value> = calls
        .iter()
        .map(|c| serde_json::json!({"name": c.name, "arguments": c.arguments, "label": c.label}))
        .collect();
    serde_json::json!({"id": id, "output": output}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_shapes_and_every_problem_kind() {
        let text = [
            r#"{"id": "a", "output": [{"name": "f", "arguments": {"x": 1}, "label": "L"}]}"#,
            r#"{"id": "b", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "g", "arguments": "{\"y\": \"z\"}"}}]}"#,
            r#"{"id": "c", "tool_calls": [{"type": "function", "function": {"name": "g", "arguments": "{not json"}}, {"function": {"arguments": "{}"}}, {"function": {"name": "h", "arguments": "{}"}}]}"#,
            "not json at all",
            r#"{"output": []}"#,
            r#"{"id": "a", "output": []}"#,
            r#"{"id": "d"}"#,
        ]
        .join("\n");
        let p = parse(&text);
        assert_eq!(p.by_id["a"].calls[0].label, "L");
        assert_eq!(p.by_id["a"].calls[0].arguments["x"], 1);
        assert_eq!(p.by_id["b"].calls[0].label, "call_1");
        assert_eq!(p.by_id["b"].calls[0].arguments["y"], "z");
        assert_eq!(p.by_id["c"].calls.len(), 1);
        assert_eq!(p.by_id["c"].calls[0].label, "h_2");
        assert!(p.by_id["d"].calls.is_empty());
        let kinds: Vec<(&str, usize)> = p.problems.iter().map(|x| (x.kind.as_str(), x.line)).collect();
        assert_eq!(
            kinds,
            [
                ("malformed_call", 3),
                ("malformed_call", 3),
                ("malformed_line", 4),
                ("malformed_line", 5),
                ("duplicate_id", 6)
            ]
        );
    }
}
