//! The trajectory files' part of the cards: `trajectories/README.md` (configs, declared
//! features) and the paragraphs the dataset card and it share — what the trajectories hold, the
//! config names to load them by, their length distribution and the `max_tokens` cap —, and what
//! the cards of the families without trajectories say instead ([`no_trajectories`]).
//!
//! Each export's config is named after the dataset and the bytes of its files
//! ([`TrajectorySummary::config_names`]): `datasets` (4.x, 5.x) caches a local folder by the
//! folder's name (`trajectories`, every recipe's) and its config, never by the files' contents,
//! so with one config name for every recipe a second recipe's folder loaded another recipe's
//! rows, and a rebuilt folder the old rows (issue 45).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::dataset::Build;

/// The `features` of config `default` of `trajectories/README.md` (the default trajectory files,
/// [`crate::emit::trajectories`]):
/// one Arrow type per field across every row and file of a recipe. A call's `arguments` and each
/// `tools` entry are JSON objects whose keys differ from tool to tool, so they are declared as
/// `datasets`' `Json` type (`dtype: json`, the versions that have it — 5.x and the newest 4.x:
/// stored as JSON text in Arrow, decoded back to the object on access); `gold_answer` is its
/// JSON text (a string, as in the Parquet rows: its cells mix numbers and text); the rest are
/// plain strings, integers and structs, `null` where a message or fault lacks a key.
/// `tests/consumer/test_trajectory_arrow_schema.py` pins the Arrow schema every file infers to
/// these features.
pub const TRAJECTORY_FEATURES: &str = "  - name: id
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
  - name: gold_answer
    dtype: string
  - name: faults
    list:
    - name: kind
      dtype: string
    - name: call_index
      dtype: int64
    - name: tool_call_id
      dtype: string
    - name: recovery
      dtype: string
    - name: waited_s
      dtype: int64
";

/// The `features` of config `openai` of `trajectories/README.md` (`trajectories/openai/`,
/// [`crate::emit::trajectories::export`]): `arguments` is JSON text there, `tools` as in
/// [`TRAJECTORY_FEATURES`].
pub const OPENAI_FEATURES: &str = "  - name: messages
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
          dtype: string
    - name: tool_call_id
      dtype: string
  - name: tools
    list: json
  - name: parallel_tool_calls
    dtype: bool
";

/// Whether `build` writes trajectory files: the executable families, and `seq` (the gold calls
/// only, [`crate::emit::trajectories::calls`]). `catalog` and `bfcl` do not ([`no_trajectories`]).
pub(crate) fn has_trajectories(build: &Build) -> bool {
    ["slot", "sel", "rest", "seq"].contains(&build.recipe.format.as_str())
}

/// Why a family writes no trajectories (the dataset card and the build summary say it), `None`
/// for the families that write them.
pub fn no_trajectories(format: &str) -> Option<&'static str> {
    match format {
        "bfcl" => Some(
            "This dataset has no trajectories: BFCL is an evaluation set (its questions and acceptable answers are what models are scored on, so training on them would contaminate the leaderboard), and its functions have no executable back end here, so there is no tool result a trajectory could show.",
        ),
        "catalog" => Some(
            "This dataset has no trajectories: the MCP tools are schemas from public registries with no executable back end here (toolforge runs none of their servers), and a bundle's task has no gold calls until an LLM endpoint writes it; a trajectory would have to invent both the calls and their results.",
        ),
        _ => None,
    }
}

/// What [`crate::emit::trajectories`] wrote, for the cards: the content digest naming the
/// configs, whether faulted files exist, every clean trajectory's length, the cap and its drops.
#[derive(Debug, Clone, Default)]
pub struct TrajectorySummary {
    /// The first 12 hex digits of a blake3 over every trajectory file's path and hash.
    pub digest: String,
    /// Whether `<split>.faults.jsonl` files were written (the executable families).
    pub faults: bool,
    /// Split → the estimated tokens of each clean trajectory ([`tokens`]), in file order.
    pub tokens: BTreeMap<String, Vec<u32>>,
    /// The recipe's `[trajectories] max_tokens`.
    pub max_tokens: Option<usize>,
    /// Group (database or split) → trajectories dropped by `max_tokens` (`over_token_cap`).
    pub over_cap: BTreeMap<String, usize>,
}

/// A trajectory's estimated tokens: the characters of its OpenAI-format line (its messages and
/// tools, what a model is given) over 4, rounded up.
pub fn tokens(chars: usize) -> u32 {
    chars.div_ceil(4).min(u32::MAX as usize) as u32
}

impl TrajectorySummary {
    /// The digest of `written`'s trajectory files (relative path, blake3 hex).
    pub fn digest_of(written: &BTreeMap<String, String>) -> String {
        let mut h = blake3::Hasher::new();
        for (path, hash) in written.iter().filter(|(p, _)| p.starts_with("trajectories/")) {
            h.update(path.as_bytes());
            h.update(b"\0");
            h.update(hash.as_bytes());
            h.update(b"\n");
        }
        h.finalize().to_hex()[..12].to_string()
    }

    /// The config names of the default and the OpenAI export of `recipe`'s trajectories:
    /// `<recipe>-<digest>` and `<recipe>-openai-<digest>`, unique to the dataset and its files.
    pub fn config_names(&self, recipe: &str) -> (String, String) {
        (
            format!("{recipe}-{}", self.digest),
            format!("{recipe}-openai-{}", self.digest),
        )
    }
}

/// p50, p90, p99 and max of `v` (nearest rank), `None` when empty.
fn percentiles(v: &[u32]) -> Option<[u32; 4]> {
    let mut s = v.to_vec();
    s.sort_unstable();
    let at = |p: usize| s[(p * s.len()).div_ceil(100).max(1) - 1];
    (!s.is_empty()).then(|| [at(50), at(90), at(99), s[s.len() - 1]])
}

/// `trajectories/README.md`: a card whose YAML header declares the trajectory files as their own
/// dataset — the default export (the Hugging Face / TRL files, [`TRAJECTORY_FEATURES`], marked
/// `default: true`) and the OpenAI export (`openai/`, [`OPENAI_FEATURES`]), each under its
/// [`TrajectorySummary::config_names`], a `<split>` (and for the executable families a
/// `<split>_faults`) split each — so `load_dataset("<dir>/trajectories")` loads every file with
/// one type per field. Not configs of the root card: `datasets` infers one file format per
/// repository from its first config (the Parquet rows), and would read the JSONL files as Parquet.
pub(crate) fn trajectories_card(build: &Build, splits: &[&String], t: &TrajectorySummary) -> String {
    let (default, openai) = t.config_names(&build.recipe.name);
    let mut s = String::from("---\nconfigs:\n");
    for (config, dir) in [(&default, ""), (&openai, "openai/")] {
        let _ = writeln!(s, "- config_name: {config}");
        if dir.is_empty() {
            let _ = writeln!(s, "  default: true");
        }
        let _ = writeln!(s, "  data_files:");
        for split in splits {
            let _ = writeln!(s, "  - split: {split}\n    path: {dir}{split}.jsonl");
            if t.faults {
                let _ = writeln!(s, "  - split: {split}_faults\n    path: {dir}{split}.faults.jsonl");
            }
        }
    }
    let _ = write!(
        s,
        "dataset_info:\n- config_name: {default}\n  features:\n{TRAJECTORY_FEATURES}- config_name: {openai}\n  features:\n{OPENAI_FEATURES}---\n\n# {} trajectories\n\n",
        build.recipe.name
    );
    let _ = writeln!(s, "{}", paragraph(build, t));
    s
}

/// The `## Trajectories` section of both cards: what the files hold, how to load them, and
/// their lengths.
pub(crate) fn paragraph(build: &Build, t: &TrajectorySummary) -> String {
    let (default, openai) = t.config_names(&build.recipe.name);
    let calls_only = build.recipe.format == "seq";
    let mut s = String::from("## Trajectories\n\n");
    if calls_only {
        s.push_str(CALLS_ONLY_INTRO);
    } else {
        s.push_str(EXECUTED_INTRO);
    }
    let _ = write!(
        s,
        "\n\n- `trajectories/<split>{faults}.jsonl` (`load_dataset(\"<dir>/trajectories\")`, config `{default}`, the default; `trajectories/README.md` declares the features): the Hugging Face / TRL chat convention, what `tokenizer.apply_chat_template(messages, tools=tools)` and TRL's `SFTTrainer` read: `messages` (`tool_calls[].function.arguments` a JSON object; tool messages with `name` and `tool_call_id`), `tools` (OpenAI function schemas, each tool's full JSON Schema), and `id`, `gold_answer`, `faults`. `arguments` and `tools` are declared `json` (`datasets`' `Json` feature: 5.x and the newest 4.x), so every file of the recipe loads with one type per field; `gold_answer` is {gold}.\n- `trajectories/openai/<split>{faults}.jsonl` (`load_dataset(\"<dir>/trajectories\", \"{openai}\")`): OpenAI's fine-tuning format exactly (each line only `messages`, `tools`, `parallel_tool_calls`; arguments as JSON text; tool messages without `name`), with `id`, `gold_answer` and `faults` in the sidecar `trajectories/openai/<split>{faults}.meta.jsonl`, one line per trajectory line (`line`: its 0-based line number).\n\nThe config names end in a digest of the trajectory files: `datasets` caches a local folder by its name and config, not by the files' contents, so each build's files get their own cache entry (a folder whose files were edited by hand needs `download_mode=\"force_redownload\"`).\n\n",
        faults = if t.faults { "[.faults]" } else { "" },
        gold = if calls_only {
            "`null` (nothing executes, so there is no answer)"
        } else {
            "the SQL result's JSON text, as in the Parquet rows"
        },
    );
    s.push_str(SCHEMA_PARAGRAPH);
    s.push_str("\n\n");
    s.push_str(DATASETS_3X_PARAGRAPH);
    if !calls_only {
        s.push_str("\n\nThe final answer is one sentence with the values the tools showed (integers as integers, other numbers with the fewest decimals that keep them equal to the gold answer within 1e-9 relative).");
    }
    s.push_str(&lengths(t));
    s
}

/// The length table of the clean trajectories per split and what `max_tokens` dropped.
fn lengths(t: &TrajectorySummary) -> String {
    let mut s = String::from(
        "\n\n### Lengths\n\nEstimated tokens per clean trajectory (characters of its OpenAI-format line — messages and tools — over 4):\n\n| split | trajectories | p50 | p90 | p99 | max |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for (split, v) in &t.tokens {
        match percentiles(v) {
            Some([p50, p90, p99, max]) => {
                let _ = writeln!(s, "| {split} | {} | {p50} | {p90} | {p99} | {max} |", v.len());
            }
            None => {
                let _ = writeln!(s, "| {split} | 0 | | | | |");
            }
        }
    }
    let dropped: usize = t.over_cap.values().sum();
    match t.max_tokens {
        None => s.push_str("\nNo `max_tokens` cap (`[trajectories] max_tokens` in the recipe drops longer trajectories whole, never truncating one).\n"),
        Some(cap) => {
            let _ = write!(
                s,
                "\n`max_tokens = {cap}`: {dropped} trajectories over it were dropped whole (never truncated)"
            );
            if dropped == 0 {
                s.push_str(".\n");
            } else {
                s.push_str(", by group:\n\n| group | dropped |\n|---|---:|\n");
                for (g, n) in &t.over_cap {
                    let _ = writeln!(s, "| {g} | {n} |");
                }
            }
        }
    }
    s
}

/// What the executable families' trajectories are.
const EXECUTED_INTRO: &str = "Two exports of the same chat trajectories (real tool results; `<split>` clean, `<split>.faults` with one injected fault and its recovery each):";

/// What the calls-only (seq) trajectories are, and why they end with the calls.
const CALLS_ONLY_INTRO: &str = "One trajectory per kept row of every split: the system message, the user's request, then the gold calls in order as assistant `tool_calls` (independent calls together in one message; when a call consumes an earlier call's result — a TopV2 nested intent's `$label$`, an SGD or MultiWOZ call made after the previous one — one call per message, each followed by a `tool` message holding only `{\"label\": …}`, the label the later call passes as `\"$label$\"`). **The trajectory ends with the calls: no tool result and no final answer.** This dataset has no executable back end — the corpus annotates what the user asked for, never what a service answered — and toolforge invents no tool result; trained with an assistant-only loss, a model learns to choose the tools, fill their arguments from the request and order the calls. Nothing runs, so there are no faulted copies. Two exports:";

/// What `datasets` 3.x can and cannot read of a trajectory folder, and the route that works
/// there (issue 45; measured by tests/datasets_versions: 3.6.0, the newest 4.x and 5.x). Shared
/// by the recipe, dialogue and mix cards.
pub const DATASETS_3X_PARAGRAPH: &str = "**`datasets` 3.x** (measured with 3.6.0; the newest 4.x and 5.x load every config exactly): it has no `Json` feature, so no config of this card loads there (3.6 parses every config's features, and the card declares `tools`, and the default export's call `arguments`, as `json`: objects whose keys and value types change from tool to tool and call to call, which no single Arrow type holds). Its plain JSON loader (`load_dataset(\"json\", data_files=…)`) does not give the OpenAI files back either: it types `tools[].function.parameters` as one struct of every parameter name of every tool, so each tool comes back padded with the other tools' parameters as `null`, and a file whose later 10 MB chunk names a parameter its first chunk lacks (rest-spider's `openai/dev.jsonl`, the SGD files, the variant recipes) cannot be cast at all. The route for 3.x: `toolforge trajectories <dir> --format openai-text -o x.jsonl` (`<dir>` the dataset, a `trajectories/dialogue` folder or a mix; faulted rows to `x.faults.jsonl`) writes OpenAI's format with each tool's `parameters` as JSON text (call arguments are text already): one Arrow type per field, and 3.6 loads every row as written; parse `parameters` back (`json.loads`) before `apply_chat_template`. What remains with 3.x: a message's absent keys come back `None` (Arrow structs; drop them before rendering — true of every version), and the default export (arguments as objects) does not load at all; `--format sharegpt` (every field text) also loads.";

/// What every trajectory's tool schemas state.
const SCHEMA_PARAGRAPH: &str = "Every tool schema in the trajectories states `additionalProperties` at every depth (every object schema, nested ones included: JSON Schema's default `true` made explicit, a strict schema keeps its `false`; chat templates such as Command R+'s read it on every object parameter) and `required` on every object with `properties`, and a parameter's default in its description (`Default: -1.`) rather than as the `default` keyword, whose type would change from tool to tool (a type-drifted `limit` defaults to `\"-1\"`): so each field of `tools` has one type across the recipe.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_and_the_digest_follows_the_files() {
        assert_eq!(percentiles(&[]), None);
        assert_eq!(percentiles(&[7]), Some([7, 7, 7, 7]));
        let v: Vec<u32> = (1..=200).rev().collect();
        assert_eq!(percentiles(&v), Some([100, 180, 198, 200]));
        assert_eq!(tokens(0), 0);
        assert_eq!(tokens(9), 3);
        let mut w = BTreeMap::new();
        w.insert("trajectories/dev.jsonl".to_string(), "a".to_string());
        w.insert("data/dev.jsonl".to_string(), "b".to_string());
        let d = TrajectorySummary::digest_of(&w);
        assert_eq!(d.len(), 12);
        w.insert("data/dev.jsonl".to_string(), "c".to_string());
        assert_eq!(TrajectorySummary::digest_of(&w), d, "only trajectory files count");
        w.insert("trajectories/dev.jsonl".to_string(), "z".to_string());
        assert_ne!(TrajectorySummary::digest_of(&w), d);
    }
}
