//! Trajectories of the families without an executable back end (`seq`: SeqATIS, SeqSNIPS,
//! SeqTopV2, and the single-request rows of SeqSGD and SeqMultiWOZ; issue 45): the gold calls,
//! and no tool result, because there is none to show — the corpora annotate what the user asked
//! for (intents and slots, semantic parses, the dialogue's service calls), never what a service
//! answered for that request, and inventing a result would teach a model values no tool gave.
//!
//! One trajectory per kept row, in the same line format as the executable families'
//! ([`super`]: `{"id", "messages", "tools", "gold_answer", "faults"}`, the same three exports):
//!
//! - `system`: [`SYSTEM_PROMPT`], the same for every row;
//! - `user`: the row's request (the utterance; SGD/MultiWOZ the written request);
//! - the calls in gold order, as assistant messages with `tool_calls` ([`turns`]): an unordered
//!   row's calls (independent requests: ATIS/SNIPS clauses, TopV2 without nesting) in one
//!   message; an ordered row's (a TopV2 call consuming a nested intent's `$label$`, an SGD or
//!   MultiWOZ call made after the one before it) one per message, each message but the last
//!   followed by one `tool` message per call whose content is only `{"label": L}` — the label
//!   the later call refers to as `"$L$"`, standing for the result the corpus does not hold;
//! - nothing after the last calls: no tool message, no final answer (there is no result to read
//!   one from). An assistant-only loss learns the calls and their order.
//!
//! `tools` is the row's toolkit with every spec's full JSON Schema ([`super::schema`]'s form),
//! the dataset's API list (issue 30), each distinct toolkit serialised once per build
//! ([`super::prompt::ToolsText`]); `gold_answer` is `null` and `faults` `[]` (nothing runs, so
//! nothing can fail: no `.faults.jsonl` files).

use serde_json::{Value as Json, json};

use super::{Built, OVER_SIZE_CAP, call_id, tool_message};
use crate::dataset::Example;
use crate::recipe::TrajectoryConfig;
use crate::tools::{Call, as_label_ref};

/// The system message of every calls-only trajectory.
pub const SYSTEM_PROMPT: &str = "You fulfil the user's request by calling the tools you are given, with the values the request states. Make every call the request needs, in the order the request states them. When a call needs the result of an earlier call, make it after that call's tool message and pass the result as \"$LABEL$\", the label the tool message names.";

/// Whether `c` consumes the result of one of `earlier` (an argument, or an item of an array
/// argument, is its `$label$`).
fn consumes(c: &Call, earlier: &[&Call]) -> bool {
    c.arguments
        .values()
        .flat_map(|v| match v {
            Json::Array(items) => items.iter().collect::<Vec<_>>(),
            other => vec![other],
        })
        .filter_map(as_label_ref)
        .any(|l| earlier.iter().any(|p| p.label == l))
}

/// The calls of `e` cut into assistant turns, in gold order: a call starts a new turn when the
/// row is `ordered` or when it consumes a result of the current turn's calls (module docs).
pub fn turns(e: &Example) -> Vec<Vec<&Call>> {
    let mut turns: Vec<Vec<&Call>> = Vec::new();
    for c in &e.output {
        match turns.last_mut() {
            Some(turn) if !e.ordered && !consumes(c, turn) => turn.push(c),
            _ => turns.push(vec![c]),
        }
    }
    turns
}

/// The calls-only trajectory of `e` with `tools` (its toolkit's JSON text) under `cfg`'s size cap
/// ([`Built`]; never a faulted copy).
pub(super) fn calls_trajectory(e: &Example, tools: &str, cfg: &TrajectoryConfig) -> Built {
    if e.output.is_empty() {
        return Built {
            skipped: vec![super::NO_MODEL_CALLS],
            ..Built::default()
        };
    }
    let mut messages = vec![
        json!({"role": "system", "content": SYSTEM_PROMPT}),
        json!({"role": "user", "content": super::request_text(e)}),
    ];
    let turns = turns(e);
    let mut n = 0usize;
    for (t, turn) in turns.iter().enumerate() {
        let ids: Vec<String> = turn
            .iter()
            .map(|_| {
                n += 1;
                call_id(&e.id, n - 1)
            })
            .collect();
        let calls: Vec<Json> = turn
            .iter()
            .zip(&ids)
            .map(|(c, id)| json!({"id": id, "type": "function", "function": {"name": c.name, "arguments": Json::Object(c.arguments.clone())}}))
            .collect();
        messages.push(json!({"role": "assistant", "content": "", "tool_calls": calls}));
        if t + 1 < turns.len() {
            for (c, id) in turn.iter().zip(&ids) {
                messages.push(tool_message(id, &c.name, &json!({"label": c.label}).to_string()));
            }
        }
    }
    let messages = Json::Array(messages).to_string();
    if messages.chars().count() > cfg.max_chars {
        return Built {
            skipped: vec![OVER_SIZE_CAP],
            ..Built::default()
        };
    }
    let id = serde_json::to_string(&e.id).expect("serialisable");
    Built {
        clean: Some(format!(
            "{{\"id\":{id},\"messages\":{messages},\"tools\":{tools},\"gold_answer\":null,\"faults\":[]}}"
        )),
        ..Built::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Map;

    fn call(name: &str, label: &str, args: Json) -> Call {
        Call {
            name: name.into(),
            arguments: args.as_object().cloned().unwrap_or_else(Map::new),
            label: label.into(),
        }
    }

    fn example(output: Vec<Call>, ordered: bool) -> Example {
        Example {
            id: "seq-x/train/1".into(),
            input: "get me home and the weather there".into(),
            output,
            ordered,
            ..Example::default()
        }
    }

    fn roles(line: &str) -> Vec<(String, usize)> {
        let t: Json = serde_json::from_str(line).unwrap();
        t["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let calls = m["tool_calls"].as_array().map_or(0, Vec::len);
                (m["role"].as_str().unwrap().to_string(), calls)
            })
            .collect()
    }

    #[test]
    fn independent_calls_share_one_turn_and_a_consumer_comes_after_its_producers_tool_message() {
        let cfg = TrajectoryConfig::default();
        let a = call("get_location_home", "get_location_home_1", json!({}));
        let b = call(
            "get_weather",
            "get_weather_1",
            json!({"location": "$get_location_home_1$"}),
        );
        let c = call("get_time", "get_time_1", json!({"zone": "here"}));
        // Unordered, independent: one assistant message with both calls, nothing after it.
        let line = calls_trajectory(&example(vec![a.clone(), c.clone()], false), "[]", &cfg)
            .clean
            .unwrap();
        assert_eq!(
            roles(&line),
            [("system".into(), 0), ("user".into(), 0), ("assistant".into(), 2)]
        );
        // A consumer (TopV2 nesting): after the producer's tool message, which holds only its label.
        let line = calls_trajectory(&example(vec![a, b, c], true), "[]", &cfg)
            .clean
            .unwrap();
        assert_eq!(
            roles(&line),
            [
                ("system".into(), 0),
                ("user".into(), 0),
                ("assistant".into(), 1),
                ("tool".into(), 0),
                ("assistant".into(), 1),
                ("tool".into(), 0),
                ("assistant".into(), 1)
            ]
        );
        let t: Json = serde_json::from_str(&line).unwrap();
        assert_eq!(t["messages"][3]["content"], json!(r#"{"label":"get_location_home_1"}"#));
        assert_eq!(
            t["messages"][3]["tool_call_id"],
            t["messages"][2]["tool_calls"][0]["id"]
        );
        assert_eq!(t["gold_answer"], Json::Null);
        assert_eq!(t["faults"], json!([]));
        // Unordered with a reference still waits for the producer's turn.
        let e = example(
            vec![
                call("get_location_home", "get_location_home_1", json!({})),
                call(
                    "get_weather",
                    "get_weather_1",
                    json!({"location": ["$get_location_home_1$"]}),
                ),
            ],
            false,
        );
        assert_eq!(turns(&e).len(), 2);
    }

    #[test]
    fn a_row_without_calls_or_over_the_cap_is_skipped_with_its_reason() {
        let mut cfg = TrajectoryConfig::default();
        let built = calls_trajectory(&example(vec![], false), "[]", &cfg);
        assert!(built.clean.is_none());
        assert_eq!(built.skipped, [super::super::NO_MODEL_CALLS]);
        cfg.max_chars = 10;
        let built = calls_trajectory(&example(vec![call("f", "f_1", json!({}))], false), "[]", &cfg);
        assert_eq!(built.skipped, [OVER_SIZE_CAP]);
    }
}
