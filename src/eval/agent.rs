//! Agent mode: a tool-calling loop against the live tools (Live API-Bench's interactive
//! setting). The framework runs the setup step ([`Runner::open_session`]); then, up to
//! `max_steps` times, the model answers and its calls are run in-process with `serve`'s
//! semantics ([`Runner::live_call`]: SLOT/SEL sessions, REST endpoints, A_new under drift); each
//! call's output (or the error a server would answer) goes back to the model. In the *prompt*
//! tool format the first call in the text ([`parse_calls`]) runs and its result is the next user
//! message; in the *native* format ([`ToolFormat::Native`]: `tools` sent, `tool_calls` read)
//! every call of the answer runs in order and each result is a `tool` message with the call's
//! `tool_call_id`, the `k`-th call that ran labelled `OUT_k`. A turn without a call ends the
//! episode (the model's answer).
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
//!
//! **Open world** (`--open-world`, [`super::open_world`]): the model is given only
//! `search_tools` and `call_tool`; a search is answered from the dataset's whole catalog and
//! recorded in [`Episode::searches`] (it is no prediction call), and a `call_tool` (or a call of
//! a catalog tool by name) resolved to the row's tool runs as above.
//!
//! Every episode keeps its **turns** ([`Episode::turns`]: the messages after the system prompt,
//! the model's answers and each tool result as the model saw it), written to `predictions.jsonl`
//! and shown by the run's page.

use serde::Serialize;
use serde_json::{Value, json};

use super::execute::Runner;
use super::open_world::{OpenWorld, Search};
use super::predictions::parse_call;
use super::prompt::{ToolFormat, agent_messages, openai_tools, parse_calls};
use super::rows::EvalRow;
use crate::llm::{Llm, Message, block_on};
use crate::tools::{Call, ToolSpec};

/// Most characters of one tool output shown to the model (a `search_tools` answer is shown
/// whole).
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
    /// Open world: the `search_tools` calls made, in order.
    pub searches: Vec<Search>,
    /// The messages after the system prompt (module docs).
    pub turns: Vec<Message>,
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

/// How an episode is run: the model's turn limit, request seed, tool format ([`ToolFormat`]),
/// solved examples, and the open world (`None`: the row's own tools are given).
#[derive(Clone, Copy)]
pub struct Setting<'a> {
    /// Most model turns.
    pub max_steps: usize,
    /// Request seed of every turn.
    pub seed: u64,
    /// How the tools reach the model and its calls come back.
    pub format: ToolFormat,
    /// Solved examples in the prompt.
    pub shots: &'a [&'a EvalRow],
    /// Open-world mode: the searchable catalog.
    pub world: Option<&'a OpenWorld>,
}

/// Runs one episode (module docs) over `tools` (the row's toolkit; ignored in the open world,
/// where the model gets [`OpenWorld::tools`]).
pub fn episode(llm: &Llm, runner: &Runner, row: &EvalRow, tools: &[ToolSpec], setting: Setting) -> Episode {
    let mut out = Episode::default();
    let mut session = match runner.open_session(row) {
        Ok(s) => s,
        Err(e) => {
            out.stopped = Some(format!("setup: {e}"));
            out.stop_reason = StopReason::Error;
            return out;
        }
    };
    let open_tools;
    let tools = match setting.world {
        Some(_) => {
            open_tools = OpenWorld::tools();
            &open_tools[..]
        }
        None => tools,
    };
    let mut messages = agent_messages(row, tools, setting.format, setting.shots);
    if setting.world.is_some() {
        messages[0].content.push_str(OpenWorld::NOTE);
    }
    turns(llm, runner, row, tools, setting, &mut session, &mut messages, &mut out);
    out.turns = messages.split_off(1);
    out
}

/// The model's turns of an episode, from `messages` (module docs).
#[allow(clippy::too_many_arguments)]
fn turns(
    llm: &Llm,
    runner: &Runner,
    row: &EvalRow,
    tools: &[ToolSpec],
    setting: Setting,
    session: &mut crate::tools::executor::Session,
    messages: &mut Vec<Message>,
    out: &mut Episode,
) {
    let Setting {
        max_steps,
        seed,
        format,
        world,
        ..
    } = setting;
    let offered = match format {
        ToolFormat::Native => openai_tools(tools),
        ToolFormat::Prompt => vec![],
    };
    let mut previous: Option<Call> = None;
    let mut made = 0usize;
    loop {
        if out.steps == max_steps {
            out.stopped = Some("step limit".into());
            out.stop_reason = StopReason::StepLimit;
            return;
        }
        out.steps += 1;
        let answer = match block_on(llm.chat_with_tools(messages, &offered, seed)) {
            Ok(c) => c,
            Err(e) => {
                out.stopped = Some(format!("llm: {e}"));
                out.stop_reason = StopReason::Error;
                return;
            }
        };
        // The turn's calls, each with the id its result answers (native) or none (prompt: the
        // first call in the text, its result a user message).
        let (calls, ids): (Vec<Result<Call, String>>, Vec<Option<String>>) = match format {
            ToolFormat::Prompt => {
                let call = parse_calls(&answer.text).and_then(|c| c.into_iter().next());
                messages.push(Message::new("assistant", answer.text.clone()));
                call.map(|c| (vec![Ok(c)], vec![None])).unwrap_or_default()
            }
            ToolFormat::Native => {
                let ids: Vec<Option<String>> = answer
                    .tool_calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        Some(
                            c["id"]
                                .as_str()
                                .map_or_else(|| format!("call_{made}_{i}"), String::from),
                        )
                    })
                    .collect();
                let calls: Vec<Result<Call, String>> = answer.tool_calls.iter().map(|c| parse_call(c, 0)).collect();
                let mut m = Message::new("assistant", answer.text.clone());
                m.tool_calls = answer
                    .tool_calls
                    .iter()
                    .zip(&ids)
                    .map(|(c, id)| {
                        let mut c = c.clone();
                        c["id"] = json!(id);
                        c
                    })
                    .collect();
                messages.push(m);
                (calls, ids)
            }
        };
        if calls.is_empty() {
            out.answer = Some(answer.text);
            return;
        }
        made += ids.len();
        for (call, id) in calls.into_iter().zip(ids) {
            let text = match call {
                // A native call the model wrote malformed (no name, arguments not an object):
                // its error goes back like a failed call's.
                Err(e) => {
                    out.failed_calls += 1;
                    observation("", &Err(e))
                }
                Ok(mut call) => {
                    if previous
                        .as_ref()
                        .is_some_and(|p: &Call| p.name == call.name && p.arguments == call.arguments)
                    {
                        out.stopped = Some(format!("repeated call {}", call.name));
                        out.stop_reason = StopReason::RepeatedCall;
                        return;
                    }
                    previous = Some(call.clone());
                    match world.map(|w| open_call(w, row, &call)) {
                        Some(OpenCall::Search(Ok((answer, search)))) => {
                            // Whole (at most 20 tools): the schemas are what the model calls with.
                            out.searches.push(search);
                            format!("Result of search_tools: {answer}")
                        }
                        Some(OpenCall::Search(Err(e)) | OpenCall::Refused(e)) => {
                            out.failed_calls += 1;
                            observation("", &Err(e))
                        }
                        resolved => {
                            if let Some(OpenCall::Tool(c)) = resolved {
                                call = c;
                            }
                            if format == ToolFormat::Native
                                || call.label.is_empty()
                                || call.label == format!("{}_0", call.name)
                                || call.label == "call_tool_0"
                            {
                                call.label = format!("OUT_{}", out.calls.len());
                            }
                            let result = step(runner, row, session, &call);
                            if result.is_ok() {
                                out.calls.push(call.clone());
                            } else {
                                out.failed_calls += 1;
                            }
                            observation(&call.label, &result)
                        }
                    }
                }
            };
            messages.push(match id {
                None => Message::new("user", text),
                Some(id) => Message {
                    role: "tool".into(),
                    content: text,
                    tool_call_id: Some(id),
                    ..Message::default()
                },
            });
        }
    }
}

/// What an open-world call is.
enum OpenCall {
    /// A `search_tools` call: the answer and the search, or the argument error.
    Search(Result<(Value, Search), String>),
    /// A tool call resolved to the row's tool (its name as the tool runs).
    Tool(Call),
    /// A call that cannot run (unknown tool, another database's tool, bad `call_tool`).
    Refused(String),
}

/// Reads an open-world call (module docs of [`super::open_world`]): `search_tools`,
/// `call_tool {"name", "arguments", "label"?}`, or a catalog tool by name.
fn open_call(world: &OpenWorld, row: &EvalRow, call: &Call) -> OpenCall {
    if call.name == "search_tools" {
        return OpenCall::Search(world.search(&call.arguments));
    }
    let (name, arguments, label) = if call.name == "call_tool" {
        let Some(name) = call.arguments.get("name").and_then(Value::as_str) else {
            return OpenCall::Refused("call_tool: name: field required (a tool name search_tools returned)".into());
        };
        let arguments = match call.arguments.get("arguments") {
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(Value::String(s)) => match serde_json::from_str(s) {
                Ok(Value::Object(m)) => m,
                _ => return OpenCall::Refused("call_tool: arguments: must be a JSON object".into()),
            },
            Some(_) => return OpenCall::Refused("call_tool: arguments: must be a JSON object".into()),
        };
        let label = call
            .arguments
            .get("label")
            .and_then(Value::as_str)
            .map_or_else(|| call.label.clone(), String::from);
        (name, arguments, label)
    } else {
        (call.name.as_str(), call.arguments.clone(), call.label.clone())
    };
    match world.resolve(name, row) {
        Ok(id) => OpenCall::Tool(Call {
            name: world.tool_name(&id).to_string(),
            arguments,
            label,
        }),
        Err(e) => OpenCall::Refused(e),
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
