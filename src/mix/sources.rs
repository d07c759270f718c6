//! What a mix reads: each source's trajectory file (scanned, [`scan`]: one [`Row`] per line, the
//! line's bytes kept in the file's) and the evaluation texts of every buildable dataset
//! built in the output root ([`eval_index`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Deserialize;

use super::MixError;
use super::text::{EvalIndex, normalise};
use crate::recipe::mix::{MixSource, TrajectoryKind};
use crate::recipe::{Recipe, available_recipes};

/// One trajectory line of a source, as the mix judges it.
#[derive(Debug, Clone)]
pub struct Row {
    /// The trajectory's `id`.
    pub id: String,
    /// Byte range of the line (without its newline) in the source file.
    pub span: (usize, usize),
    /// The user text: the request (the dataset row's `input`) of a single-request trajectory,
    /// else its user turns joined by newlines.
    pub user: String,
    /// [`normalise`]d `user`.
    pub normal: String,
    /// Tool calls of the assistant messages.
    pub calls: usize,
    /// User messages.
    pub user_turns: usize,
    /// Characters of the line (the default export's JSON text).
    pub chars: usize,
}

/// A line that is not a trajectory: its 1-based number and why.
#[derive(Debug, Clone)]
pub struct BadLine {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// A source's trajectory file, read, and its rows.
pub struct Scanned {
    /// The file read.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// The trajectories, in file order.
    pub rows: Vec<Row>,
    /// The lines skipped.
    pub bad: Vec<BadLine>,
}

#[derive(Deserialize)]
struct Light {
    id: String,
    messages: Vec<LightMessage>,
}

#[derive(Deserialize)]
struct LightMessage {
    role: String,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<serde::de::IgnoredAny>>,
}

#[derive(Deserialize)]
struct RowInput {
    id: String,
    input: String,
}

/// Why a recipe cannot give trajectories, by format (`None`: it can).
pub fn untrainable(format: &str) -> Option<&'static str> {
    match format {
        "bfcl" => Some(
            "BFCL is an evaluation set: its questions are held out for scoring, and no tool executes its calls, so it has no trajectories (its splits are decontaminated against instead)",
        ),
        "catalog" => Some(
            "an MCP tool catalog has no executable back end here, so there are no tool results to train on and it writes no trajectories",
        ),
        _ => None,
    }
}

/// Where a source's rows are.
pub enum Located {
    /// The trajectory file.
    File(PathBuf),
    /// An optional source built without the split at all: why it is left out.
    Absent(String),
}

/// Checks that `s` names a recipe with trajectories that is built in `out_root`; returns the
/// trajectory file. Errors: unknown recipe, a mix, a family without trajectories, not built.
pub fn locate(root: &Path, out_root: &Path, mix: &str, s: &MixSource) -> Result<Located, MixError> {
    let path = root.join("recipes").join(format!("{}.toml", s.recipe));
    if !path.is_file() {
        return Err(MixError::Source {
            mix: mix.into(),
            source_name: s.recipe.clone(),
            message: format!(
                "no recipe {} (available: {})",
                path.display(),
                available_recipes(root).join(", ")
            ),
        });
    }
    if crate::recipe::mix::is_mix(&path) {
        return Err(MixError::Source {
            mix: mix.into(),
            source_name: s.recipe.clone(),
            message: "is itself a mix; name its sources instead".into(),
        });
    }
    let recipe = Recipe::load(&path)?;
    if let Some(why) = untrainable(&recipe.format) {
        return Err(MixError::Source {
            mix: mix.into(),
            source_name: s.recipe.clone(),
            message: format!("has no trajectories: {why}"),
        });
    }
    let dir = out_root.join(&s.recipe);
    let file = dir.join(s.kind.file(&s.split));
    if file.is_file() {
        return Ok(Located::File(file));
    }
    let data = dir.join("data").join(format!("{}.jsonl", s.split));
    if s.optional && dir.join("MANIFEST.json").is_file() && !data.is_file() {
        return Ok(Located::Absent(format!(
            "built without split {:?} (no {}: its corpus holds none here)",
            s.split,
            data.display()
        )));
    }
    let message = if !dir.join("MANIFEST.json").is_file() {
        format!(
            "is not built ({} not found); build it first: `toolforge build {}`",
            dir.display(),
            s.recipe
        )
    } else {
        let mut have: Vec<String> = std::fs::read_dir(file.parent().unwrap_or(&dir))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| n.strip_suffix(".jsonl").map(str::to_string))
            .filter(|n| !n.contains('.'))
            .collect();
        have.sort();
        format!(
            "has no {} trajectories of split {:?} ({} not found; such splits built: [{}]); rebuild it with `toolforge build {}`{}",
            format!("{:?}", s.kind).to_lowercase(),
            s.split,
            file.display(),
            have.join(", "),
            s.recipe,
            if recipe.split.as_ref().is_some_and(|x| x != &s.split) {
                format!(
                    " (its recipe builds split {:?} only)",
                    recipe.split.as_deref().unwrap_or_default()
                )
            } else {
                String::new()
            }
        )
    };
    Err(MixError::Source {
        mix: mix.into(),
        source_name: s.recipe.clone(),
        message,
    })
}

/// The `input` of every row of `data/<split>.jsonl`, by id (empty when the file is absent; bad
/// lines are skipped: the trajectory's own user turns then stand in).
fn inputs(path: &Path) -> HashMap<String, String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return HashMap::new();
    };
    text.par_lines()
        .filter_map(|l| serde_json::from_str::<RowInput>(l).ok())
        .map(|r| (r.id, r.input))
        .collect()
}

/// Reads one source's trajectory file `file` (rows in file order; a line that is not a
/// trajectory is a [`BadLine`], never an abort).
pub fn scan(file: &Path, data: Option<&Path>) -> Result<Scanned, MixError> {
    let io = |e: std::io::Error| MixError::Io {
        path: file.into(),
        message: e.to_string(),
    };
    let bytes = std::fs::read(file).map_err(io)?;
    let inputs = data.map(inputs).unwrap_or_default();
    let mut spans = Vec::new();
    let mut start = 0;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' {
            spans.push((start, i));
            start = i + 1;
        }
    }
    if start < bytes.len() {
        spans.push((start, bytes.len()));
    }
    let judged: Vec<Result<Row, BadLine>> = spans
        .par_iter()
        .enumerate()
        .map(|(n, &(a, b))| row(&bytes[a..b], (a, b), &inputs).map_err(|reason| BadLine { line: n + 1, reason }))
        .collect();
    let (mut rows, mut bad) = (Vec::new(), Vec::new());
    for j in judged {
        match j {
            Ok(r) => rows.push(r),
            Err(b) => bad.push(b),
        }
    }
    Ok(Scanned {
        path: file.into(),
        bytes,
        rows,
        bad,
    })
}

/// Judges one line.
fn row(line: &[u8], span: (usize, usize), inputs: &HashMap<String, String>) -> Result<Row, String> {
    let text = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_string())?;
    if text.trim().is_empty() {
        return Err("empty line".into());
    }
    let t: Light = serde_json::from_str(text).map_err(|e| format!("not a trajectory: {e}"))?;
    let users: Vec<&str> = t
        .messages
        .iter()
        .filter(|m| m.role == "user")
        .map(|m| m.content.as_deref().unwrap_or_default())
        .collect();
    if users.is_empty() {
        return Err(format!("{}: no user message", t.id));
    }
    let user = match (users.len(), inputs.get(&t.id)) {
        // The first user turn may add context after the request (SLOT/SEL: the loaded tables).
        (1, Some(input)) if users[0].starts_with(input.as_str()) => input.clone(),
        _ => users.join("\n"),
    };
    let calls = t
        .messages
        .iter()
        .filter_map(|m| m.tool_calls.as_ref())
        .map(Vec::len)
        .sum();
    Ok(Row {
        normal: normalise(&user),
        user,
        id: t.id,
        span,
        calls,
        user_turns: users.len(),
        chars: text.chars().count(),
    })
}

/// Whether `split` of a dataset of `format` is an evaluation split: every split of BFCL (an
/// evaluation set), every split but `train` of the others.
pub fn is_eval_split(format: &str, split: &str) -> bool {
    format == "bfcl" || split != "train"
}

/// What was checked against: per dataset its evaluation splits' row counts, or why it was not.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct EvalCoverage {
    /// Built datasets: split → rows read.
    pub checked: BTreeMap<String, BTreeMap<String, usize>>,
    /// Built datasets with training splits only (nothing to check against).
    pub no_eval_split: Vec<String>,
    /// Buildable datasets whose evaluation splits were not available, with the reason.
    pub unavailable: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct EvalRow {
    input: String,
}

/// The evaluation texts of every dataset the project's recipes build (mixes aside) that is built
/// in `out_root`: the `input` of every row of each evaluation split (`data/<split>.jsonl`,
/// [`is_eval_split`]); the others are named in [`EvalCoverage::unavailable`].
pub fn eval_index(root: &Path, out_root: &Path) -> (EvalIndex, EvalCoverage) {
    let mut index = EvalIndex::default();
    let mut cov = EvalCoverage::default();
    for name in available_recipes(root) {
        let path = root.join("recipes").join(format!("{name}.toml"));
        if crate::recipe::mix::is_mix(&path) {
            continue;
        }
        let recipe = match Recipe::load(&path) {
            Ok(r) => r,
            Err(e) => {
                cov.unavailable.insert(name, format!("recipe unreadable: {e}"));
                continue;
            }
        };
        let data = out_root.join(&name).join("data");
        if !out_root.join(&name).join("MANIFEST.json").is_file() {
            cov.unavailable
                .insert(name.clone(), format!("not built (`toolforge build {name}`)"));
            continue;
        }
        let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(&data)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter_map(|p| {
                let split = p.file_name()?.to_str()?.strip_suffix(".jsonl")?.to_string();
                Some((split, p))
            })
            .filter(|(split, _)| is_eval_split(&recipe.format, split))
            .collect();
        files.sort();
        if files.is_empty() {
            cov.no_eval_split.push(name);
            continue;
        }
        let mut splits = BTreeMap::new();
        for (split, p) in files {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let inputs: Vec<String> = text
                .par_lines()
                .filter_map(|l| serde_json::from_str::<EvalRow>(l).ok())
                .map(|r| r.input)
                .collect();
            splits.insert(split.clone(), inputs.len());
            for i in &inputs {
                index.add(i);
            }
            // The split's dialogues (SGD / MultiWOZ), their user turns joined as a mix row's are.
            let dialogues = out_root.join(&name).join(TrajectoryKind::Dialogue.file(&split));
            if let Ok(text) = std::fs::read_to_string(&dialogues) {
                let users: Vec<String> = text
                    .par_lines()
                    .filter_map(|l| row(l.as_bytes(), (0, 0), &HashMap::new()).ok())
                    .map(|r| r.user)
                    .collect();
                splits.insert(format!("{split} (dialogues)"), users.len());
                for u in &users {
                    index.add(u);
                }
            }
        }
        cov.checked.insert(name, splits);
    }
    (index, cov)
}
