//! SGD dialogues as multi-turn dialogue trajectories (issue 45, item 2; written by
//! `emit::dialogue` to `trajectories/dialogue/`).
//!
//! Rules (pinned by `tests/seq_dialogue_trajectories.rs` and, from the corpus files read
//! independently, `tests/consumer/test_dialogue_trajectories.py`):
//!
//! - **Turns**: every turn of the dialogue in order, its `utterance` as it is: a `USER` turn is a
//!   user message, a `SYSTEM` turn the assistant's reply.
//! - **Calls**: at a system turn, each frame holding a `service_call` (in frame order) gives one
//!   call before the reply: the tool `<Service>_<Intent>` of the seq rows (`tool_name`) with the
//!   call's canonical `parameters` as arguments, and as its result the frame's `service_results`
//!   exactly as the corpus holds them (a list of rows, each an object of strings; `[]` when the
//!   service found nothing or a transaction failed — the system's reply then says so). Unlike the
//!   single-request rows, a failed call and a repeated call stay: they are what the system did
//!   at that turn, and the reply that follows refers to them.
//! - **Tools**: the single-request row's API list (every intent of the dialogue's services and
//!   of their domains' other services, `instance_tools`).
//! - **Drops** (the whole dialogue, never half-grounded): `no_service_call` (no call to ground:
//!   as for the rows), `unknown_tool` (a call whose service or method is not in the schemas),
//!   `schema_violation` (a call failing its tool's JSON Schema), `missing_service_results` (a
//!   call without a `service_results` list), `call_in_user_turn` (a `service_call` in a user
//!   frame), `turns_not_alternating` (the dialogue does not start with the user or two turns of
//!   one speaker follow each other: chat templates require alternation), `missing_utterance`.

use serde_json::Value;

use super::Schema;
use super::dialogue::Dialogue as Parsed;
use super::schema::tool_name;
use crate::dataset::Drop;
use crate::dataset::dialogue::{Dialogue, GroundedCall, Speaker, Turn};
use crate::tools::Call;
use crate::tools::check::Checker;

/// The rules in words (the card and `report/verification.json`).
pub(super) const RULES: [&str; 4] = [
    "every USER and SYSTEM turn in order, utterances as the corpus has them",
    "at a system turn, one tool call per frame with a service_call (frame order): <Service>_<Intent> with the call's canonical parameters; its result is the frame's service_results as the corpus holds them ([] when nothing was found or a transaction failed); failed and repeated calls stay",
    "tools: every intent of the dialogue's services and of their domains' other services (as the single-request rows)",
    "a dialogue with a call that cannot be grounded is dropped whole: no_service_call, unknown_tool, schema_violation, missing_service_results, call_in_user_turn, turns_not_alternating, missing_utterance",
];

/// The dialogue trajectory of record `rec` (parsed as `parsed`), or the reason it is dropped.
pub(super) fn dialogue(
    rec: &Value,
    parsed: &Parsed,
    split: &str,
    schema: &Schema,
    checker: &Checker,
    tools: Vec<String>,
) -> Result<Dialogue, Drop> {
    let id = format!("{split}/{}", parsed.id);
    let drop = |reason: &str, detail: String| Drop {
        id: id.clone(),
        group: split.to_string(),
        reason: reason.into(),
        detail,
        question: String::new(),
        source: String::new(),
    };
    let known = |name: &str| schema.services.values().flatten().any(|t| t.name == name);
    let mut turns = Vec::new();
    for (ti, turn) in rec["turns"].as_array().into_iter().flatten().enumerate() {
        let speaker = match turn["speaker"].as_str() {
            Some("USER") => Speaker::User,
            Some("SYSTEM") => Speaker::System,
            other => return Err(drop("turns_not_alternating", format!("turn {ti}: speaker {other:?}"))),
        };
        let expected = if ti % 2 == 0 { Speaker::User } else { Speaker::System };
        if speaker != expected {
            return Err(drop(
                "turns_not_alternating",
                format!("turn {ti} is a {speaker:?} turn where a {expected:?} turn was due"),
            ));
        }
        let Some(text) = turn["utterance"].as_str() else {
            return Err(drop("missing_utterance", format!("turn {ti} has no utterance")));
        };
        let mut calls = Vec::new();
        for frame in turn["frames"].as_array().into_iter().flatten() {
            let Some(sc) = frame.get("service_call") else { continue };
            if speaker == Speaker::User {
                return Err(drop(
                    "call_in_user_turn",
                    format!("turn {ti}: a user frame holds a service_call"),
                ));
            }
            let service = frame["service"].as_str().unwrap_or_default();
            let method = sc["method"].as_str().unwrap_or_default();
            let name = tool_name(service, method);
            if !known(&name) {
                return Err(drop(
                    "unknown_tool",
                    format!("turn {ti}: service call {service}.{method} is not in the schemas"),
                ));
            }
            let arguments = sc["parameters"].as_object().cloned().unwrap_or_default();
            let call = Call {
                name,
                arguments,
                label: String::new(),
            };
            if let Err(e) = checker.validate(&call) {
                return Err(drop("schema_violation", format!("turn {ti}: {e}")));
            }
            let Some(result) = frame.get("service_results").filter(|r| r.is_array()) else {
                return Err(drop(
                    "missing_service_results",
                    format!("turn {ti}: {service}.{method} has no service_results list"),
                ));
            };
            calls.push(GroundedCall {
                name: call.name,
                arguments: call.arguments,
                result: result.clone(),
            });
        }
        turns.push(Turn {
            speaker,
            text: text.to_string(),
            calls,
        });
    }
    if !turns.iter().any(|t| !t.calls.is_empty()) {
        return Err(drop(
            "no_service_call",
            format!("dialogue {} executed no service call", parsed.id),
        ));
    }
    let services: Vec<&str> = parsed.services.iter().map(String::as_str).collect();
    Ok(Dialogue {
        id,
        system: system_prompt(&services),
        tools,
        turns,
    })
}

/// The system prompt of an SGD dialogue: the services it is about.
fn system_prompt(services: &[&str]) -> String {
    format!(
        "You are a virtual assistant for these services: {}. Talk with the user turn by turn; when a request needs a service, call its tool with the canonical values and answer from the result.",
        services.join(", ")
    )
}
