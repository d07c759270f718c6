//! Agent mode: a tool-calling loop against the live tools (Live API-Bench's interactive
//! setting). The framework runs the setup step ([`Runner::open_session`]); then, up to
//! `max_steps` times, the model answers, the first call in its text ([`parse_calls`]) is run
//! in-process with `serve`'s semantics ([`Runner::live_call`]: SLOT/SEL sessions, REST endpoints,
//! A_new under drift) and its output (or the error a server would answer) goes back as the next
//! user message. A turn without a call ends the episode (the model's answer).
//!
//! Every episode ends with a [`StopReason`] (Live API-Bench Table 4 counts them): `answered` (a
//! turn without a call), `step_limit` (`max_steps` turns without an answer), `repeated_call`
//! (the model made the same call, name and arguments, as its previous one: the tools are
//! deterministic, so the loop would only repeat), `error` (the setup step or a request failed).
//! Only an `answered` episode is finished: completion needs it ([`crate::eval::score`]).
//!
//! The prediction is the sequence of calls that **ran successfully**, in order: a failed call is
//! the model's to repair, and is reported as an error but not kept. Every model turn is one
//! cached chat request, so an episode replays from the store without requests (tool outputs are
//! deterministic).

use serde::Serialize;

use super::execute::Runner;
use super::prompt::{agent_messages, parse_calls};
use super::rows::EvalRow;
use crate::llm::{Llm, Message, block_on};
use crate::tools::{Call, ToolSpec};

/// Most characters of one tool output shown to the model.
pub const OBSERVATION_CHARS: usize = 1500;

/// What one episode did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Episode {
    /// The calls that ran, in order (the prediction).
    pub calls: Vec<Call>,
    /// Model turns taken.
    pub steps: usize,
    /// Calls that failed (the error went back to the model).
    pub failed_calls: usize,
    /// The model's closing text, when it answered without a call.
    pub answer: Option<String>,
    /// Why the episode stopped early (`llm: …`, `setup: …`, `step limit`, `repeated call …`).
    pub stopped: Option<String>,
    /// How the episode ended (module docs).
    pub stop_reason: StopReason,
}

/// How an agent episode ended (module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model answered (a turn without a call): the only finished episode.
    #[default]
    Answered,
    /// `max_steps` turns without an answer.
    StepLimit,
    /// The same call as the previous one.
    RepeatedCall,
    /// The setup step or a request failed.
    Error,
}

impl StopReason {
    /// The name written in `predictions.jsonl` (`answered`, `step_limit`, `repeated_call`,
    /// `error`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Answered => "answered",
            StopReason::StepLimit => "step_limit",
            StopReason::RepeatedCall => "repeated_call",
            StopReason::Error => "error",
        }
    }
}

fn observation(label: &str, result: &Result<serde_json::Value, String>) -> String {
    let text = match result {
        Ok(v) => format!("Result of {label}: {v}"),
        Err(e) => format!("Error: {e}"),
    };
    text.chars().take(OBSERVATION_CHARS).collect()
}

/// Runs one episode (module docs); `seed` is the request seed of every turn.
pub fn episode(llm: &Llm, runner: &Runner, row: &EvalRow, tools: &[ToolSpec], max_steps: usize, seed: u64) -> Episode {
    let mut out = Episode::default();
    let mut session = match runner.open_session(row) {
        Ok(s) => s,
        Err(e) => {
            out.stopped = Some(format!("setup: {e}"));
            out.stop_reason = StopReason::Error;
            return out;
        }
    };
    let mut messages = agent_messages(row, tools);
    let mut previous: Option<Call> = None;
    loop {
        if out.steps == max_steps {
            out.stopped = Some("step limit".into());
            out.stop_reason = StopReason::StepLimit;
            return out;
        }
        out.steps += 1;
        let text = match block_on(llm.chat(&messages, seed)) {
            Ok(c) => c.text,
            Err(e) => {
                out.stopped = Some(format!("llm: {e}"));
                out.stop_reason = StopReason::Error;
                return out;
            }
        };
        let call = parse_calls(&text).and_then(|c| c.into_iter().next());
        messages.push(Message {
            role: "assistant".into(),
            content: text.clone(),
        });
        let Some(mut call) = call else {
            out.answer = Some(text);
            return out;
        };
        if previous
            .as_ref()
            .is_some_and(|p: &Call| p.name == call.name && p.arguments == call.arguments)
        {
            out.stopped = Some(format!("repeated call {}", call.name));
            out.stop_reason = StopReason::RepeatedCall;
            return out;
        }
        previous = Some(call.clone());
        if call.label.is_empty() || call.label == format!("{}_0", call.name) {
            call.label = format!("OUT_{}", out.calls.len());
        }
        let result = step(runner, row, &mut session, &call);
        if result.is_ok() {
            out.calls.push(call.clone());
        } else {
            out.failed_calls += 1;
        }
        messages.push(Message {
            role: "user".into(),
            content: observation(&call.label, &result),
        });
    }
}

/// One tool step of an episode without the model: what agent mode costs per step besides the
/// model's time (the benchmark times this).
pub fn step(
    runner: &Runner,
    row: &EvalRow,
    session: &mut crate::tools::executor::Session,
    call: &Call,
) -> Result<serde_json::Value, String> {
    runner.live_call(row, session, call)
}

/// What [`replay`] measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Replay {
    /// Rows replayed.
    pub rows: usize,
    /// Tool steps taken.
    pub steps: usize,
    /// Steps whose call failed.
    pub failed_steps: usize,
    /// Wall time of everything but a model: session setup, parsing the call from text,
    /// running it, rendering the observation.
    pub seconds: f64,
}

/// Replays each row's gold calls through the agent loop without a model (each call rendered
/// as a model would write it, parsed back, run live, its observation rendered): a check of the
/// live tools and the measure of agent mode's per-step overhead (`just bench`).
pub fn replay(runner: &Runner, rows: &[&EvalRow]) -> Replay {
    let t = std::time::Instant::now();
    let mut out = Replay::default();
    for row in rows {
        out.rows += 1;
        let Ok(mut session) = runner.open_session(row) else {
            out.failed_steps += row.gold.len();
            continue;
        };
        for gold in &row.gold {
            let text =
                serde_json::json!({"name": gold.name, "arguments": gold.arguments, "label": gold.label}).to_string();
            let call = parse_calls(&text)
                .and_then(|c| c.into_iter().next())
                .expect("a rendered call parses");
            let result = step(runner, row, &mut session, &call);
            out.steps += 1;
            out.failed_steps += result.is_err() as usize;
            std::hint::black_box(observation(&call.label, &result));
        }
    }
    out.seconds = t.elapsed().as_secs_f64();
    out
}
