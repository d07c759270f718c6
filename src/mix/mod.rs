//! Training mixes (`format = "mix"` recipes, [`crate::recipe::mix`]): the trajectory files of
//! built datasets joined into one training corpus, `out/<mix>/`.
//!
//! [`build`] reads each source's default trajectory export (`out/<recipe>/trajectories/<split>.jsonl`;
//! a line that is not a trajectory is skipped and counted), then, in source order and file order:
//! 1. **decontaminates**: a row whose user text ([`sources::Row::user`]) has the normal form
//!    ([`text::normalise`]: case, punctuation, whitespace) of any evaluation text — the `input` of
//!    every row of every evaluation split (every split but `train`; every BFCL split) of every
//!    dataset the project's recipes build that is built in the output root — is dropped and
//!    counted; the datasets whose evaluation splits were not available are named;
//! 2. **de-duplicates**: a row whose user text equals an earlier row's (of an earlier source, or
//!    earlier in the same one) exactly, else in normal form, is dropped and counted as an exact or
//!    a normalised duplicate, so the first source named keeps the row;
//! 3. takes each source's **weight** (share, 0–1) and **cap** (rows) as a seeded sample;
//! 4. **shuffles** the rows deterministically (sorted by BLAKE3 of the seed and the row's id);
//!
//! and writes the three exports ([`write`]: Hugging Face / TRL, OpenAI with its sidecar,
//! ShareGPT), the card `README.md` ([`card`]) and `report/mix.json` (every number of the card).
//! The 13-gram overlap figure (GPT-3, Llama 2) is reported per source before and after; it
//! drops nothing. The output is byte-identical for the same inputs and seed.

pub mod card;
pub mod sources;
pub mod text;
mod tokens;
mod write;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::recipe::RecipeError;
use crate::recipe::mix::{MixRecipe, MixSource};
use sources::{Row, Scanned};

/// The split the mix's rows are written to.
pub const SPLIT: &str = "train";

/// Why a mix cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum MixError {
    /// The mix recipe, or a source's recipe, is unreadable or invalid.
    #[error(transparent)]
    Recipe(#[from] RecipeError),
    /// A source cannot be used: unknown, without trajectories, or not built.
    #[error("mix {mix}: source {source_name} {message}")]
    Source {
        /// The mix.
        mix: String,
        /// The source's recipe name.
        source_name: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// A file cannot be read or written.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        message: String,
    },
}

/// A 13-gram overlap figure: rows with at least 13 words, and of those the ones sharing a word
/// 13-gram with an evaluation text.
#[derive(Debug, Default, Clone, Copy, Serialize)]
pub struct Overlap {
    /// Rows with a 13-gram (13 words or more).
    pub measured: usize,
    /// Of those, rows sharing one with an evaluation text.
    pub overlapping: usize,
}

/// Counts of the rows a mix took (a source's, or the whole mix's).
#[derive(Debug, Default, Clone, Serialize)]
pub struct Shape {
    /// Rows.
    pub rows: usize,
    /// Characters of the rows' JSON lines over 4, summed.
    pub tokens_chars4: u64,
    /// Real token counts of the same text, when a tokenizer is given.
    pub tokens_tokenizer: Option<u64>,
    /// Tokens (chars/4) of the longest row, the median and the 99th percentile row.
    pub tokens_max: u64,
    /// Median row (chars/4).
    pub tokens_p50: u64,
    /// 99th percentile row (chars/4).
    pub tokens_p99: u64,
    /// Tool calls, summed.
    pub calls: u64,
    /// Rows with more than one user turn.
    pub dialogues: usize,
    /// User turns of those rows, summed.
    pub dialogue_turns: u64,
}

/// One source's account.
#[derive(Debug, Default, Clone, Serialize)]
pub struct SourceStats {
    /// The recipe.
    pub recipe: String,
    /// The split read.
    pub split: String,
    /// The trajectory files read.
    pub kind: crate::recipe::mix::TrajectoryKind,
    /// Weight and cap asked for.
    pub weight: f64,
    /// Cap asked for.
    pub cap: Option<usize>,
    /// Lines read.
    pub lines: usize,
    /// Lines that are not trajectories (skipped), and the first few with their line and reason.
    pub bad_lines: usize,
    /// The first bad lines (`<line>: <reason>`).
    pub bad_examples: Vec<String>,
    /// Trajectories read (chars/4 tokens beside).
    pub read: usize,
    /// chars/4 tokens read.
    pub tokens_read: u64,
    /// Dropped: user text equal to an evaluation text in normal form.
    pub contaminated: usize,
    /// The first contaminated rows' ids.
    pub contaminated_examples: Vec<String>,
    /// Dropped: same user text as an earlier row.
    pub duplicates_exact: usize,
    /// Dropped: same normal form as an earlier row (not the same text).
    pub duplicates_normalised: usize,
    /// Rows left after decontamination and de-duplication.
    pub kept: usize,
    /// chars/4 tokens of those.
    pub tokens_kept: u64,
    /// 13-gram overlap of the rows read and of the rows kept.
    pub ngram_read: Overlap,
    /// See [`Self::ngram_read`].
    pub ngram_kept: Overlap,
    /// The rows the weight and cap took, written to the mix.
    pub taken: Shape,
}

/// Everything `report/mix.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct MixReport {
    /// The mix.
    pub name: String,
    /// Shuffle and sample seed.
    pub seed: u64,
    /// Per source, in recipe order.
    pub sources: Vec<SourceStats>,
    /// The whole mix.
    pub total: Shape,
    /// What the rows were decontaminated against.
    pub evaluation: sources::EvalCoverage,
    /// Distinct evaluation texts (normal forms).
    pub evaluation_texts: usize,
    /// The tokenizer file, when given.
    pub tokenizer: Option<String>,
    /// Optional sources left out (`<recipe> <split>` → why).
    pub left_out: std::collections::BTreeMap<String, String>,
    /// BLAKE3 of each source file read (`<recipe>/<split>` → hex).
    pub inputs: std::collections::BTreeMap<String, String>,
}

/// A stable 64-bit draw for `parts` under `seed` (BLAKE3).
fn draw(seed: u64, parts: &[&str]) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(&seed.to_le_bytes());
    for p in parts {
        h.update(p.as_bytes());
        h.update(&[0x1f]);
    }
    u64::from_le_bytes(h.finalize().as_bytes()[..8].try_into().expect("8 bytes"))
}

/// The decontamination and de-duplication pass over every source's rows, in order: per source
/// the indices of the rows kept.
fn judge(scanned: &[Scanned], eval: &text::EvalIndex, stats: &mut [SourceStats]) -> Vec<Vec<usize>> {
    let mut exact: HashSet<&str> = HashSet::new();
    let mut normal: HashSet<&str> = HashSet::new();
    let mut kept = Vec::new();
    for (s, st) in scanned.iter().zip(stats.iter_mut()) {
        let overlaps: Vec<Option<bool>> = {
            use rayon::prelude::*;
            s.rows.par_iter().map(|r| eval.overlaps(&r.user)).collect()
        };
        let mut keep = Vec::new();
        for (i, (r, o)) in s.rows.iter().zip(&overlaps).enumerate() {
            st.read += 1;
            st.tokens_read += r.chars as u64 / 4;
            count_overlap(&mut st.ngram_read, *o);
            if eval.contains(&r.normal) {
                st.contaminated += 1;
                if st.contaminated_examples.len() < 5 {
                    st.contaminated_examples.push(r.id.clone());
                }
                continue;
            }
            if !exact.insert(&r.user) {
                st.duplicates_exact += 1;
                continue;
            }
            if !normal.insert(&r.normal) {
                st.duplicates_normalised += 1;
                continue;
            }
            st.kept += 1;
            st.tokens_kept += r.chars as u64 / 4;
            count_overlap(&mut st.ngram_kept, *o);
            keep.push(i);
        }
        kept.push(keep);
    }
    kept
}

fn count_overlap(o: &mut Overlap, v: Option<bool>) {
    if let Some(hit) = v {
        o.measured += 1;
        o.overlapping += usize::from(hit);
    }
}

/// The seeded sample of a source's kept rows its weight and cap allow (in file order).
fn sample(seed: u64, src: &MixSource, rows: &[Row], kept: Vec<usize>) -> Vec<usize> {
    let want = ((src.weight * kept.len() as f64).round() as usize).min(src.cap.unwrap_or(usize::MAX));
    if want >= kept.len() {
        return kept;
    }
    let mut order: Vec<(u64, usize)> = kept
        .into_iter()
        .map(|i| (draw(seed, &["sample", &src.recipe, &src.split, &rows[i].id]), i))
        .collect();
    order.sort_unstable();
    let mut taken: Vec<usize> = order.into_iter().take(want).map(|(_, i)| i).collect();
    taken.sort_unstable();
    taken
}

/// The [`Shape`] of `rows` (chars/4 per row; real token counts beside when given).
fn shape<'a>(rows: impl Iterator<Item = &'a Row>, real: Option<u64>) -> Shape {
    let mut s = Shape {
        tokens_tokenizer: real,
        ..Shape::default()
    };
    let mut lengths = Vec::new();
    for r in rows {
        let t = r.chars as u64 / 4;
        s.rows += 1;
        s.tokens_chars4 += t;
        lengths.push(t);
        s.calls += r.calls as u64;
        if r.user_turns > 1 {
            s.dialogues += 1;
            s.dialogue_turns += r.user_turns as u64;
        }
    }
    lengths.sort_unstable();
    let at = |q: f64| {
        lengths
            .get(((lengths.len() as f64 * q).ceil() as usize).saturating_sub(1))
            .copied()
            .unwrap_or(0)
    };
    s.tokens_max = lengths.last().copied().unwrap_or(0);
    s.tokens_p50 = at(0.5);
    s.tokens_p99 = at(0.99);
    s
}

/// Builds the mix at `recipe_path` into `<out_root>/<name>/` (default output root
/// `<project>/out`); returns the summary printed by `toolforge build`.
///
/// Errors: the recipe; a source that is unknown, a family without trajectories (`bfcl`,
/// `mcp-tools`: why), or not built (which recipe to build); the tokenizer file; IO.
pub fn build(recipe_path: &Path, out_root: Option<&Path>) -> anyhow::Result<String> {
    let start = Instant::now();
    let recipe = MixRecipe::load(recipe_path)?;
    let root = crate::recipe::project_root(recipe_path);
    let out_root = out_root.map(Path::to_path_buf).unwrap_or_else(|| root.join("out"));
    // Every source checked before any is read: the first error names what to build.
    let mut used: Vec<(&MixSource, PathBuf)> = Vec::new();
    let mut left_out = std::collections::BTreeMap::new();
    for s in &recipe.sources {
        match sources::locate(&root, &out_root, &recipe.name, s)? {
            sources::Located::File(f) => used.push((s, f)),
            sources::Located::Absent(why) => {
                left_out.insert(format!("{} {}", s.recipe, s.split), why);
            }
        }
    }
    let tokenizer = recipe
        .tokenizer
        .as_ref()
        .map(|p| tokens::Counter::load(&root.join(p)))
        .transpose()?;
    let scanned: Vec<Scanned> = used
        .iter()
        .map(|&(s, ref f)| {
            // A request trajectory's request is its data row's `input`; a dialogue has no row.
            let data = match s.kind {
                crate::recipe::mix::TrajectoryKind::Request => {
                    Some(out_root.join(&s.recipe).join("data").join(format!("{}.jsonl", s.split)))
                }
                crate::recipe::mix::TrajectoryKind::Dialogue => None,
            };
            sources::scan(f, data.as_deref())
        })
        .collect::<Result<_, _>>()?;
    let (eval, coverage) = sources::eval_index(&root, &out_root);
    let mut stats: Vec<SourceStats> = used
        .iter()
        .zip(&scanned)
        .map(|(&(s, _), sc)| SourceStats {
            recipe: s.recipe.clone(),
            split: s.split.clone(),
            kind: s.kind,
            weight: s.weight,
            cap: s.cap,
            lines: sc.rows.len() + sc.bad.len(),
            bad_lines: sc.bad.len(),
            bad_examples: sc
                .bad
                .iter()
                .take(5)
                .map(|b| format!("{}: {}", b.line, b.reason))
                .collect(),
            ..SourceStats::default()
        })
        .collect();
    let kept = judge(&scanned, &eval, &mut stats);
    // Per source the rows taken, then every row in the seeded shuffle's order.
    let mut order: Vec<(u64, usize, usize)> = Vec::new();
    for (si, ((&(src, _), sc), keep)) in used.iter().zip(&scanned).zip(kept).enumerate() {
        for i in sample(recipe.seed, src, &sc.rows, keep) {
            order.push((draw(recipe.seed, &["shuffle", &sc.rows[i].id]), si, i));
        }
    }
    order.sort_unstable();
    let lines: Vec<&[u8]> = order
        .iter()
        .map(|&(_, si, i)| {
            let (a, b) = scanned[si].rows[i].span;
            &scanned[si].bytes[a..b]
        })
        .collect();
    let real: Option<Vec<u64>> = tokenizer.as_ref().map(|t| t.count_all(&lines)).transpose()?;
    let mut real_by_source: HashMap<usize, u64> = HashMap::new();
    if let Some(real) = &real {
        for (&(_, si, _), n) in order.iter().zip(real) {
            *real_by_source.entry(si).or_default() += n;
        }
    }
    for (si, st) in stats.iter_mut().enumerate() {
        let rows = order
            .iter()
            .filter(|o| o.1 == si)
            .map(|&(_, si, i)| &scanned[si].rows[i]);
        st.taken = shape(
            rows,
            real.as_ref().map(|_| real_by_source.get(&si).copied().unwrap_or(0)),
        );
    }
    let total = shape(
        order.iter().map(|&(_, si, i)| &scanned[si].rows[i]),
        real.as_ref().map(|r| r.iter().sum()),
    );
    let report = MixReport {
        name: recipe.name.clone(),
        seed: recipe.seed,
        sources: stats,
        total,
        evaluation: coverage,
        evaluation_texts: eval.len(),
        tokenizer: recipe.tokenizer.as_ref().map(|p| p.display().to_string()),
        left_out,
        inputs: used
            .iter()
            .zip(&scanned)
            .map(|(&(s, _), sc)| {
                (
                    format!("{}/{}", s.recipe, s.split),
                    blake3::hash(&sc.bytes).to_hex().to_string(),
                )
            })
            .collect(),
    };
    let out_dir = out_root.join(&recipe.name);
    write::write(&out_dir, &recipe, &lines, &report, recipe_path)?;
    Ok(card::summary(&report, &out_dir, start.elapsed().as_secs_f64()))
}
