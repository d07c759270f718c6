//! The mix's card (`README.md`: a Hugging Face YAML header declaring the three exports as configs
//! `<mix>-<digest>` (the default), `<mix>-openai-<digest>`, `<mix>-sharegpt-<digest>` with their
//! features ([`config_names`]), then every number of
//! [`super::MixReport`] as tables) and the summary `toolforge build` prints.

use std::fmt::Write as _;
use std::path::Path;

use super::{MixReport, Overlap, SPLIT, Shape};
use crate::emit::card::{OPENAI_FEATURES, TRAJECTORY_FEATURES};
use crate::recipe::mix::MixRecipe;

/// The `features` of config `sharegpt` ([`crate::emit::trajectories::to_sharegpt`]).
const SHAREGPT_FEATURES: &str = "  - name: id
    dtype: string
  - name: conversations
    list:
    - name: from
      dtype: string
    - name: value
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

fn ratio(a: u64, b: usize) -> String {
    if b == 0 {
        "–".into()
    } else {
        format!("{:.2}", a as f64 / b as f64)
    }
}

fn overlap(o: &Overlap) -> String {
    if o.measured == 0 {
        "– (no row of 13+ words)".into()
    } else {
        format!(
            "{} / {} ({:.1}%)",
            o.overlapping,
            o.measured,
            100.0 * o.overlapping as f64 / o.measured as f64
        )
    }
}

fn tokens(s: &Shape) -> String {
    match s.tokens_tokenizer {
        Some(real) => format!("{} ({} real)", s.tokens_chars4, real),
        None => s.tokens_chars4.to_string(),
    }
}

fn turns(s: &Shape) -> String {
    if s.dialogues == 0 {
        "– (single request)".into()
    } else {
        format!("{} ({} dialogues)", ratio(s.dialogue_turns, s.dialogues), s.dialogues)
    }
}

/// The config names of the mix's three exports — default, OpenAI, ShareGPT —:
/// `<mix>-<digest>`, `<mix>-openai-<digest>`, `<mix>-sharegpt-<digest>`, `digest` that of its
/// trajectory files ([`crate::emit::card::TrajectorySummary::digest_of`]). `datasets` (4.x, 5.x)
/// caches a local folder by its name and the config name: names unique to the mix and its files
/// keep a cache from serving another mix's or an earlier build's rows (issue 45).
pub fn config_names(mix: &str, digest: &str) -> [String; 3] {
    [
        format!("{mix}-{digest}"),
        format!("{mix}-openai-{digest}"),
        format!("{mix}-sharegpt-{digest}"),
    ]
}

/// `README.md` of the mix; `digest` names its configs ([`config_names`]).
pub fn card(recipe: &MixRecipe, r: &MixReport, digest: &str) -> String {
    let mut s = String::from("---\nconfigs:\n");
    let names = config_names(&r.name, digest);
    for (i, (config, dir)) in names.iter().zip(["", "openai/", "sharegpt/"]).enumerate() {
        let default = if i == 0 { "\n  default: true" } else { "" };
        let _ = writeln!(
            s,
            "- config_name: {config}{default}\n  data_files:\n  - split: {SPLIT}\n    path: trajectories/{dir}{SPLIT}.jsonl"
        );
    }
    let _ = writeln!(s, "dataset_info:");
    for (config, features) in names
        .iter()
        .zip([TRAJECTORY_FEATURES, OPENAI_FEATURES, SHAREGPT_FEATURES])
    {
        let _ = write!(s, "- config_name: {config}\n  features:\n{features}");
    }
    let _ = write!(
        s,
        "tags:\n- tool-calling\n- function-calling\n- training-mix\ntask_categories:\n- text-generation\n---\n\n# {}\n\n{}\n\n",
        r.name, recipe.description
    );
    let t = &r.total;
    let _ = writeln!(
        s,
        "A training mix of {} trajectories from {} sources (split `{SPLIT}`), de-duplicated across sources, decontaminated against the evaluation splits of every dataset toolforge builds that was built, and shuffled with seed {}.\n",
        t.rows,
        r.sources.len(),
        r.seed
    );
    s.push_str("## Totals\n\n| rows | tokens (chars/4) | real tokens | tokens per row p50 / p99 / max (chars/4) | calls per row | turns per dialogue |\n|---|---|---|---|---|---|\n");
    let real = match (t.tokens_tokenizer, &r.tokenizer) {
        (Some(n), Some(p)) => format!("{n} (`{p}`)"),
        _ => "not counted (no `tokenizer` in the recipe)".into(),
    };
    let _ = writeln!(
        s,
        "| {} | {} | {real} | {} / {} / {} | {} | {} |\n",
        t.rows,
        t.tokens_chars4,
        t.tokens_p50,
        t.tokens_p99,
        t.tokens_max,
        ratio(t.calls, t.rows),
        turns(t)
    );
    s.push_str("Tokens are characters of each row's JSON line (the default export) over 4; real tokens, when the recipe names a `tokenizer.json`, are that tokenizer's count of the same text, without special tokens and without a chat template (whose markup adds a few tokens per message). Turns per dialogue: user turns of the rows that have more than one.\n\n");
    s.push_str("## Sources, before and after\n\n| source | split | weight | cap | rows read (tokens) | not trajectories | contaminated | exact duplicates | normalised duplicates | kept (tokens) | taken (tokens) | calls per row | turns per dialogue | 13-gram overlap, read | 13-gram overlap, kept |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for x in &r.sources {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} ({}) | {} ({}) | {} | {} | {} | {} |",
            x.recipe,
            match x.kind {
                crate::recipe::mix::TrajectoryKind::Request => x.split.clone(),
                crate::recipe::mix::TrajectoryKind::Dialogue => format!("{} (dialogues)", x.split),
            },
            x.weight,
            x.cap.map(|c| c.to_string()).unwrap_or_else(|| "–".into()),
            x.read,
            x.tokens_read,
            x.bad_lines,
            x.contaminated,
            x.duplicates_exact,
            x.duplicates_normalised,
            x.kept,
            x.tokens_kept,
            x.taken.rows,
            tokens(&x.taken),
            ratio(x.taken.calls, x.taken.rows),
            turns(&x.taken),
            overlap(&x.ngram_read),
            overlap(&x.ngram_kept),
        );
    }
    for (source, why) in &r.left_out {
        let _ = writeln!(s, "\nLeft out (optional): {source}: {why}.");
    }
    s.push_str("\nIn order: a row is **contaminated** when its user text (the request; a dialogue's user turns joined) equals an evaluation text in normal form — lower case, apostrophes removed, every other character that is not a letter or digit a word break, words joined by one space, so case, punctuation and whitespace perturbations match; a **duplicate** when an earlier row of the mix (an earlier source, or earlier in the same one) has the same user text (exact) or the same normal form (normalised): the first source named keeps it. The weight (share) and cap then take a seeded sample of the rows kept. The **13-gram overlap** (as in the GPT-3 and Llama 2 contamination reports) counts the rows of 13 or more words sharing a word 13-gram with an evaluation text — read, and kept after the normal-form drop; it is reported, not used to drop rows.\n\n");
    s.push_str("## Decontaminated against\n\nEvery evaluation split (every split but `train`; every BFCL split) of every dataset the project's recipes build, where built (the `input` of each row of `data/<split>.jsonl`):\n\n| dataset | evaluation splits (rows) |\n|---|---|\n");
    for (name, splits) in &r.evaluation.checked {
        let list: Vec<String> = splits.iter().map(|(k, v)| format!("{k} ({v})")).collect();
        let _ = writeln!(s, "| {name} | {} |", list.join(", "));
    }
    let _ = writeln!(s, "\n{} distinct evaluation texts.\n", r.evaluation_texts);
    if !r.evaluation.no_eval_split.is_empty() {
        let _ = writeln!(
            s,
            "Built with training splits only (nothing to check against): {}.\n",
            r.evaluation.no_eval_split.join(", ")
        );
    }
    if r.evaluation.unavailable.is_empty() {
        s.push_str("Every buildable dataset's evaluation splits were available.\n\n");
    } else {
        s.push_str("**Not checked** (evaluation splits not available):\n\n");
        for (name, why) in &r.evaluation.unavailable {
            let _ = writeln!(s, "- {name}: {why}");
        }
        s.push('\n');
    }
    let _ = write!(
        s,
        "## Files\n\n- `trajectories/train.jsonl` (`load_dataset(\"<dir>\")`, config `{}`, marked default): the rows as their datasets wrote them, the Hugging Face / TRL chat convention (`messages`, `tools`, `id`, …), shuffled; a row's `id` names its dataset (`<dataset>/<item>`).\n- `trajectories/openai/train.jsonl` (config `{}`): OpenAI's fine-tuning format exactly, with `id`, `gold_answer` and `faults` in the sidecar `train.meta.jsonl` (`line`: the 0-based line).\n- `trajectories/sharegpt/train.jsonl` (config `{}`): ShareGPT / Hermes function calling (tools in `<tools>`, calls in `<tool_call>`, results in `<tool_response>`).\n- `report/mix.json`: every number above; `MANIFEST.json`: BLAKE3 of every file and of each source file read.\n\nThe config names carry a digest of the trajectory files, so a `datasets` cache never serves another build's rows.\n",
        names[0], names[1], names[2]
    );
    s.push('\n');
    s.push_str(crate::emit::card::DATASETS_3X_PARAGRAPH);
    s.push('\n');
    s
}

/// The lines `toolforge build` prints for a mix.
pub fn summary(r: &MixReport, out_dir: &Path, secs: f64) -> String {
    let mut s = format!(
        "{}: {} rows from {} sources ({} tokens chars/4){} → {} in {secs:.1}s\n",
        r.name,
        r.total.rows,
        r.sources.len(),
        r.total.tokens_chars4,
        r.total
            .tokens_tokenizer
            .map(|n| format!(", {n} real tokens"))
            .unwrap_or_default(),
        out_dir.display()
    );
    for x in &r.sources {
        let _ = writeln!(
            s,
            "  {} {}: read {}, contaminated {}, duplicates {} exact + {} normalised, kept {}, taken {}{}",
            x.recipe,
            x.split,
            x.read,
            x.contaminated,
            x.duplicates_exact,
            x.duplicates_normalised,
            x.kept,
            x.taken.rows,
            if x.bad_lines > 0 {
                format!(
                    ", {} lines not trajectories (first: {})",
                    x.bad_lines,
                    x.bad_examples.join("; ")
                )
            } else {
                String::new()
            }
        );
    }
    for (source, why) in &r.left_out {
        let _ = writeln!(s, "  {source}: left out (optional): {why}");
    }
    if !r.evaluation.unavailable.is_empty() {
        let names: Vec<&str> = r.evaluation.unavailable.keys().map(String::as_str).collect();
        let _ = writeln!(
            s,
            "  evaluation splits not available (not decontaminated against): {}",
            names.join(", ")
        );
    }
    s.trim_end().to_string()
}
