//! Training-mix recipes (`format = "mix"`, [`MixRecipe`]): built datasets' trajectory files
//! joined into one training corpus by `crate::mix`. A mix names no source corpus, so it is its
//! own model beside [`super::Recipe`]; [`is_mix`] tells them apart before either is parsed.
//!
//! ```toml
//! name = "train-mix"
//! description = "…"
//! format = "mix"
//! seed = 0                              # the shuffle and the weight/cap samples
//! tokenizer = "path/to/tokenizer.json"  # optional: real token counts in the card
//!
//! [[sources]]
//! recipe = "seq-atis"   # a recipe of recipes/, built into out/<recipe>/
//! split = "train"       # default "train"
//! kind = "request"      # or "dialogue" (trajectories/dialogue/<split>.jsonl); default "request"
//! weight = 0.5          # share of the source's kept rows taken, 0 < weight <= 1 (default 1)
//! cap = 10000           # at most this many rows of the source (optional)
//! optional = true       # built without this split (its corpus has none): left out, named
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::RecipeError;

/// A training mix: sources (built datasets' splits) and how many rows each gives.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixRecipe {
    /// Mix name, also the output directory `out/<name>/`.
    pub name: String,
    /// One line for the card.
    pub description: String,
    /// Always `"mix"`.
    pub format: String,
    /// Seed of the deterministic shuffle and of each source's weight/cap sample (default 0).
    #[serde(default)]
    pub seed: u64,
    /// A Hugging Face `tokenizer.json` (relative to the project root): the card then also gives
    /// real token counts.
    #[serde(default)]
    pub tokenizer: Option<PathBuf>,
    /// The sources, in priority order: of two duplicate rows the one of the earlier source stays.
    pub sources: Vec<MixSource>,
}

/// One `[[sources]]` entry of a mix.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixSource {
    /// The recipe whose built output is read (`out/<recipe>/trajectories/<split>.jsonl`).
    pub recipe: String,
    /// The split read (default `train`).
    #[serde(default = "train")]
    pub split: String,
    /// Which trajectories: `request` (default: `trajectories/<split>.jsonl`, one per row) or
    /// `dialogue` (`trajectories/dialogue/<split>.jsonl`, SGD / MultiWOZ dialogues).
    #[serde(default)]
    pub kind: TrajectoryKind,
    /// Share of the source's rows kept after de-duplication and decontamination (a seeded
    /// sample), 0 < weight <= 1; default 1. Up-sampling (weight > 1) is refused: it would put
    /// duplicate rows into a de-duplicated mix (a trainer's epochs do that openly).
    #[serde(default = "one")]
    pub weight: f64,
    /// At most this many rows of the source (after the weight; a seeded sample).
    #[serde(default)]
    pub cap: Option<usize>,
    /// A built source without this split at all (no `data/<split>.jsonl`: its corpus holds
    /// none, e.g. MultiWOZ's train dialogues absent) is left out and named in the card instead
    /// of failing the build (default false). A source not built, or built without trajectories,
    /// fails either way.
    #[serde(default)]
    pub optional: bool,
}

/// The trajectory files a mix source reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrajectoryKind {
    /// `trajectories/<split>.jsonl`.
    #[default]
    Request,
    /// `trajectories/dialogue/<split>.jsonl`.
    Dialogue,
}

impl TrajectoryKind {
    /// The file of `split` under a dataset's directory.
    pub fn file(self, split: &str) -> String {
        match self {
            TrajectoryKind::Request => format!("trajectories/{split}.jsonl"),
            TrajectoryKind::Dialogue => format!("trajectories/dialogue/{split}.jsonl"),
        }
    }
}

fn train() -> String {
    "train".into()
}

fn one() -> f64 {
    1.0
}

/// Whether the recipe file at `path` is a mix (`format = "mix"`); false for any file that is not
/// TOML with that key (its own loader reports what is wrong with it).
pub fn is_mix(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| toml::from_str::<toml::Table>(&t).ok())
        .is_some_and(|t| t.get("format").and_then(|f| f.as_str()) == Some("mix"))
}

impl MixRecipe {
    /// Reads and validates a mix recipe. Errors name the file and the key.
    pub fn load(path: &Path) -> Result<MixRecipe, RecipeError> {
        let text = std::fs::read_to_string(path).map_err(|source| RecipeError::Io {
            path: path.into(),
            source,
        })?;
        let recipe: MixRecipe = toml::from_str(&text).map_err(|e| RecipeError::Invalid {
            path: path.into(),
            message: e.to_string(),
        })?;
        let invalid = |message: String| RecipeError::Invalid {
            path: path.into(),
            message,
        };
        if recipe.format != "mix" {
            return Err(invalid(format!("key `format`: {:?}, expected \"mix\"", recipe.format)));
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if recipe.name != stem {
            return Err(invalid(format!(
                "key `name`: {:?} must equal the file name {stem:?}",
                recipe.name
            )));
        }
        if recipe.sources.is_empty() {
            return Err(invalid(
                "key `sources`: a mix needs at least one [[sources]] entry".into(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, s) in recipe.sources.iter().enumerate() {
            let at = format!("sources[{i}] ({} {})", s.recipe, s.split);
            if !(s.weight > 0.0 && s.weight <= 1.0) {
                return Err(invalid(format!(
                    "{at}: key `weight`: {} is outside 0 < weight <= 1 (the share of the source's rows kept; up-sampling would repeat rows in a de-duplicated mix)",
                    s.weight
                )));
            }
            if s.cap == Some(0) {
                return Err(invalid(format!(
                    "{at}: key `cap`: 0 would take no row; leave the source out"
                )));
            }
            if !seen.insert((s.recipe.clone(), s.split.clone(), s.kind)) {
                return Err(invalid(format!("{at}: named twice")));
            }
        }
        Ok(recipe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn mix_recipe_defaults_and_checks() {
        let (_d, p) =
            write("name = \"m\"\ndescription = \"d\"\nformat = \"mix\"\n[[sources]]\nrecipe = \"seq-atis\"\n");
        assert!(is_mix(&p));
        let m = MixRecipe::load(&p).unwrap();
        assert_eq!(
            (m.sources[0].split.as_str(), m.sources[0].weight, m.seed),
            ("train", 1.0, 0)
        );
        let (_d, p) =
            write("name = \"m\"\ndescription = \"d\"\nformat = \"mix\"\n[[sources]]\nrecipe = \"a\"\nweight = 2.0\n");
        let err = MixRecipe::load(&p).unwrap_err().to_string();
        assert!(
            err.contains("m.toml") && err.contains("weight") && err.contains("sources[0]"),
            "{err}"
        );
        let (_d, p) =
            write("name = \"m\"\ndescription = \"d\"\nformat = \"mix\"\n[[sources]]\nrecipe = \"a\"\nwieght = 1\n");
        let err = MixRecipe::load(&p).unwrap_err().to_string();
        assert!(err.contains("wieght"), "{err}");
        let (_d, p) = write("name = \"m\"\ndescription = \"d\"\nformat = \"slot\"\nsource = \"s\"\n");
        assert!(!is_mix(&p));
    }
}
