//! The dialogue trajectories emitter (issue 45, item 2): SGD's and MultiWOZ's multi-turn
//! dialogues ([`crate::dataset::dialogue`], grounded by the seq stage) as chat trajectories under
//! `trajectories/dialogue/`, beside the single-request rows:
//!
//! - `trajectories/dialogue/<split>.jsonl`: `{"id", "messages", "tools"}` in the Hugging Face /
//!   TRL chat convention of [`super::trajectories`]: `messages` = the system prompt, then every
//!   turn of the corpus dialogue in order — a user turn as a `user` message; a system turn as, for
//!   each call the system made there, an `assistant` message with one `tool_calls` entry
//!   (`content` `""`, `arguments` a JSON object, a 9-character id) and a `tool` message
//!   (`tool_call_id`, `name`, `content`: the result's JSON text), then the system's utterance as
//!   an `assistant` message. `tools`: the dialogue's API list as OpenAI functions, each schema in
//!   the trajectories' form ([`super::trajectories::schema`]: `required` and
//!   `additionalProperties` stated at every object level).
//! - `trajectories/dialogue/openai/<split>.jsonl`: the same lines in OpenAI's fine-tuning format
//!   ([`super::trajectories::to_openai`]: only `messages`, `tools`, `parallel_tool_calls`).
//! - `trajectories/dialogue/<split>.gold.jsonl`: the turn-level gold, one line per trajectory
//!   line, for scoring a model turn by turn: `{"line", "id", "turns": [{"turn" (0-based index of
//!   the system turn in the corpus dialogue), "message" (index in `messages` of the turn's first
//!   assistant message: the model is given `messages[..message]`), "calls": [{"name",
//!   "arguments" (JSON text, as the rows' `output`), "tool_call_id"}] ([] where the system made
//!   no call), "reply" (the system's utterance)}]}`, one entry per system turn.
//! - `trajectories/dialogue/README.md`: the card of these files as a dataset of its own
//!   (configs and features; `load_dataset("<dir>/trajectories/dialogue")`).
//!
//! Config names carry the recipe and a digest of the files' content, so two recipes' folders
//! (both named `dialogue`) or an older build's files never share a `datasets` cache entry.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Value as Json, json};

use super::card::OPENAI_FEATURES;
use super::trajectories::{call_id, to_openai, tools_json};
use crate::dataset::Build;
use crate::dataset::dialogue::{Dialogue, Dialogues, Speaker};
use crate::tools::ToolSpec;

/// The folder of the dialogue files under `out/<recipe>/`.
pub const DIR: &str = "trajectories/dialogue";

/// The `features` of the default config (`<split>.jsonl`).
pub const DIALOGUE_FEATURES: &str = "  - name: id
    dtype: string
  - name: messages
    list:
    - name: role
      dtype: string
    - name: content
      dtype: string
    - name: tool_calls
      list:
      - name: id
        dtype: string
      - name: type
        dtype: string
      - name: function
        struct:
        - name: name
          dtype: string
        - name: arguments
          dtype: json
    - name: tool_call_id
      dtype: string
    - name: name
      dtype: string
  - name: tools
    list: json
";

/// The `features` of the gold sidecar (`<split>.gold.jsonl`).
pub const GOLD_FEATURES: &str = "  - name: line
    dtype: int64
  - name: id
    dtype: string
  - name: turns
    list:
    - name: turn
      dtype: int64
    - name: message
      dtype: int64
    - name: calls
      list:
      - name: name
        dtype: string
      - name: arguments
        dtype: string
      - name: tool_call_id
        dtype: string
    - name: reply
      dtype: string
";

/// One dialogue's trajectory line (default form) and its gold line.
fn lines(d: &Dialogue, tools: &str, line: usize) -> (String, Json) {
    let mut messages = vec![json!({"role": "system", "content": d.system})];
    let mut gold = Vec::new();
    let mut n = 0;
    let mut system_turn = 0;
    for turn in &d.turns {
        if turn.speaker == Speaker::User {
            messages.push(json!({"role": "user", "content": turn.text}));
            continue;
        }
        let first = messages.len();
        let mut calls = Vec::new();
        for c in &turn.calls {
            let id = call_id(&d.id, n);
            n += 1;
            let arguments = Json::Object(c.arguments.clone());
            messages.push(json!({"role": "assistant", "content": "", "tool_calls": [{"id": id, "type": "function", "function": {"name": c.name, "arguments": arguments}}]}));
            messages.push(json!({"role": "tool", "tool_call_id": id, "name": c.name, "content": c.result.to_string()}));
            calls.push(json!({"name": c.name, "arguments": arguments.to_string(), "tool_call_id": id}));
        }
        messages.push(json!({"role": "assistant", "content": turn.text}));
        gold.push(json!({"turn": system_turn, "message": first, "calls": calls, "reply": turn.text}));
        system_turn += 1;
    }
    let id = Json::String(d.id.clone());
    let line_text = format!(
        "{{\"id\":{id},\"messages\":{},\"tools\":{tools}}}",
        Json::Array(messages)
    );
    (line_text, json!({"line": line, "id": id, "turns": gold}))
}

/// Every file of the dialogue trajectories of `build` (path under `out/<recipe>/` → bytes);
/// nothing when the build has none.
pub(super) fn files(build: &Build) -> Vec<(String, Vec<u8>)> {
    let Some(dialogues) = &build.dialogues else {
        return Vec::new();
    };
    let catalog: HashMap<&str, &ToolSpec> = build.catalog.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut memo: HashMap<&[String], String> = HashMap::new();
    let mut out = Vec::new();
    let mut digest = blake3::Hasher::new();
    for (split, kept) in &dialogues.splits {
        let (mut default, mut openai, mut gold) = (String::new(), String::new(), String::new());
        for (i, d) in kept.iter().enumerate() {
            let tools = memo.entry(d.tools.as_slice()).or_insert_with(|| {
                let refs: Vec<ToolSpec> = d.tools.iter().map(|t| ToolSpec::reference(t)).collect();
                tools_json(&refs, &catalog)
            });
            let (line, g) = lines(d, tools, i);
            let parsed: Json = serde_json::from_str(&line).expect("a line we wrote");
            let _ = writeln!(openai, "{}", to_openai(&parsed, i).0);
            let _ = writeln!(default, "{line}");
            let _ = writeln!(gold, "{g}");
        }
        for (path, text) in [
            (format!("{DIR}/{split}.jsonl"), default),
            (format!("{DIR}/openai/{split}.jsonl"), openai),
            (format!("{DIR}/{split}.gold.jsonl"), gold),
        ] {
            digest.update(path.as_bytes());
            digest.update(text.as_bytes());
            out.push((path, text.into_bytes()));
        }
    }
    let digest = digest.finalize().to_hex()[..8].to_string();
    out.push((format!("{DIR}/README.md"), card(build, dialogues, &digest).into_bytes()));
    out
}

/// The config names of the dialogue card: `<recipe>-dialogue[-openai|-gold]-<digest>`.
fn config_names(recipe: &str, digest: &str) -> [(String, &'static str, &'static str); 3] {
    [
        (format!("{recipe}-dialogue-{digest}"), "", ".jsonl"),
        (format!("{recipe}-dialogue-openai-{digest}"), "openai/", ".jsonl"),
        (format!("{recipe}-dialogue-gold-{digest}"), "", ".gold.jsonl"),
    ]
}

/// `trajectories/dialogue/README.md` (module docs).
fn card(build: &Build, dialogues: &Dialogues, digest: &str) -> String {
    let name = &build.recipe.name;
    let configs = config_names(name, digest);
    let mut s = String::from("---\nconfigs:\n");
    for (i, (config, dir, ext)) in configs.iter().enumerate() {
        let _ = writeln!(s, "- config_name: {config}");
        if i == 0 {
            let _ = writeln!(s, "  default: true");
        }
        let _ = writeln!(s, "  data_files:");
        for split in dialogues.splits.keys() {
            let _ = writeln!(s, "  - split: {split}\n    path: {dir}{split}{ext}");
        }
    }
    let _ = writeln!(s, "dataset_info:");
    for ((config, _, _), features) in configs.iter().zip([DIALOGUE_FEATURES, OPENAI_FEATURES, GOLD_FEATURES]) {
        let _ = write!(s, "- config_name: {config}\n  features:\n{features}");
    }
    let _ = writeln!(s, "---\n\n# {name} dialogue trajectories\n");
    let _ = writeln!(s, "{}", paragraph(dialogues));
    let _ = writeln!(
        s,
        "Configs (the names carry a digest of these files, so a `datasets` cache never serves another build's rows): `{}` (default: `load_dataset(\"<dir>/trajectories/dialogue\")`), `{}` (OpenAI's fine-tuning format), `{}` (the turn-level gold).",
        configs[0].0, configs[1].0, configs[2].0
    );
    let _ = writeln!(s, "\n{}", super::card::DATASETS_3X_PARAGRAPH);
    s
}

/// What the dataset card (`README.md`) and the dialogue card say about the dialogue
/// trajectories; `None` when the build has none.
pub(super) fn card_paragraph(build: &Build) -> Option<String> {
    build.dialogues.as_ref().map(paragraph)
}

fn paragraph(dialogues: &Dialogues) -> String {
    let mut s = String::from(
        "## Dialogue trajectories\n\nBeside the single-request rows (API-BLEND's shape), the corpus dialogues themselves as multi-turn chat trajectories in `trajectories/dialogue/` (`load_dataset(\"<dir>/trajectories/dialogue\")`): every user and system turn in order; at a system turn where the system made a service call, an assistant message with the call (canonical arguments), a tool message with its result, then the system's utterance as the assistant's reply. `<split>.jsonl` follows the Hugging Face / TRL chat convention of the other trajectories (`arguments` a JSON object, `content` `\"\"` beside a call, 9-character call ids, tool schemas stating `required` and `additionalProperties` at every level); `openai/<split>.jsonl` is OpenAI's fine-tuning format; `<split>.gold.jsonl` gives, line by line, each system turn's calls (name, arguments as JSON text, call id), the index of its first assistant message and its reply, so a model can be scored turn by turn. A dialogue with a call that cannot be grounded is dropped whole, never written half-grounded.\n\nRules:\n\n",
    );
    for r in &dialogues.rules {
        let _ = writeln!(s, "- {r}");
    }
    let _ = writeln!(
        s,
        "\n| split | dialogues | kept | dropped by reason |\n|---|---:|---:|---|"
    );
    if let Json::Object(counts) = dialogues.counts() {
        for (split, c) in counts {
            let reasons: Vec<String> = c["dropped_by_reason"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(r, n)| format!("`{r}` {n}"))
                .collect();
            let _ = writeln!(
                s,
                "| {split} | {} | {} | {} |",
                c["attempted"],
                c["kept"],
                if reasons.is_empty() {
                    "—".into()
                } else {
                    reasons.join(", ")
                }
            );
        }
    }
    s
}
