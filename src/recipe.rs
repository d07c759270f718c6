//! Recipes (`recipes/<name>.toml`) and source manifests (`sources/<name>.toml`).
//!
//! Both are read with serde's `deny_unknown_fields`, so a misspelt key is an error naming the
//! file, the line and the allowed keys; values with a fixed set (`format`) are checked and the
//! error lists the allowed values.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Errors reading a recipe or source manifest, or resolving a corpus root.
#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The IO error.
        source: std::io::Error,
    },
    /// The TOML is malformed, has an unknown key or a wrong type (toml's message names the line).
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What was expected.
        message: String,
    },
    /// No corpus root was found.
    #[error(
        "source {name}: no corpus found; looked in {tried}. Download it from {download} or set {env}=/path/to/root"
    )]
    NotFound {
        /// Source name.
        name: String,
        /// The paths tried.
        tried: String,
        /// Official download location.
        download: String,
        /// The override variable.
        env: String,
    },
}

/// The dataset formats a recipe can build: `slot`, `sel` and `rest` from text-to-SQL sources;
/// `seq` (API-BLEND sequences) from NLU and dialogue sources; `catalog` (MCP tool catalog and
/// bundles) from `mcp` sources; `bfcl` from BFCL.
pub const FORMATS: [&str; 6] = ["slot", "sel", "rest", "seq", "catalog", "bfcl"];

/// Source record formats: text-to-SQL (`bird`, `spider`) and API-BLEND sources (`mixatis`,
/// `mixsnips`, `topv2`, `sgd`, `multiwoz`), MCP tool definitions (`mcp`) and BFCL (`bfcl`).
pub const SOURCE_FORMATS: [&str; 9] = [
    "bird", "spider", "mixatis", "mixsnips", "topv2", "sgd", "multiwoz", "mcp", "bfcl",
];

/// Whether a source format holds text-to-SQL questions over SQLite databases.
pub fn is_sql_source(format: &str) -> bool {
    matches!(format, "bird" | "spider")
}

/// A recipe: which dataset to build from which source.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Dataset name, also the output directory `out/<name>/`.
    pub name: String,
    /// One line for the dataset card.
    pub description: String,
    /// Dataset format; one of [`FORMATS`].
    pub format: String,
    /// Source manifest name (`sources/<source>.toml`).
    pub source: String,
    /// Text-to-SQL sources: the split name of the question file (e.g. `dev`), required.
    /// Seq sources: build only this split (default: every split of the source).
    #[serde(default)]
    pub split: Option<String>,
    /// Keep verified questions whose gold answer is empty (default false: an empty answer
    /// verifies any call sequence that filters everything away, so it proves little).
    #[serde(default)]
    pub keep_empty_answers: bool,
    /// SLOT/SEL: keep verified questions whose gold answer is degenerate — a single 0, a single
    /// NULL, or every cell NULL (default false: like an empty answer, any call sequence that
    /// filters everything away reproduces it; reason code `degenerate_gold_answer`).
    #[serde(default)]
    pub keep_degenerate_answers: bool,
    /// Store directory (default `out/.store`), relative to the project root.
    #[serde(default)]
    pub store: Option<PathBuf>,
    /// `[variants]`: extra rows derived after the compile stage (see [`crate::variants`]).
    /// Not serialised when absent, so recipes without it keep their build keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variants: Option<crate::variants::VariantsConfig>,
    /// `catalog` recipes: bundle sampling knobs (`[catalog]` table, see `catalog::CatalogKnobs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<crate::catalog::CatalogKnobs>,
    /// Trajectory corpus settings (executable families); defaults when absent.
    #[serde(default)]
    pub trajectories: TrajectoryConfig,
}

/// `[trajectories]` of a recipe: how `out/<name>/trajectories/` is written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrajectoryConfig {
    /// Share of examples (0–1) that also get a faulted trajectory in `<split>.faults.jsonl`.
    pub fault_rate: f64,
    /// Seed of the fault choice (which examples, which fault, at which call).
    pub seed: u64,
    /// Rows of a table (values of a list) shown in a tool message; the rest is cut and the total
    /// stated.
    pub max_rows: usize,
}

impl Default for TrajectoryConfig {
    fn default() -> Self {
        TrajectoryConfig {
            fault_rate: 0.25,
            seed: 0,
            max_rows: 20,
        }
    }
}

fn read_toml<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, RecipeError> {
    let text = std::fs::read_to_string(path).map_err(|source| RecipeError::Io {
        path: path.into(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| RecipeError::Invalid {
        path: path.into(),
        message: e.to_string(),
    })
}

impl Recipe {
    /// Reads and validates a recipe file.
    pub fn load(path: &Path) -> Result<Recipe, RecipeError> {
        let recipe: Recipe = read_toml(path)?;
        if !FORMATS.contains(&recipe.format.as_str()) {
            return Err(RecipeError::Invalid {
                path: path.into(),
                message: format!(
                    "key `format`: unknown value {:?}, expected one of {FORMATS:?}",
                    recipe.format
                ),
            });
        }
        let sql_format = matches!(recipe.format.as_str(), "slot" | "sel" | "rest");
        if sql_format && recipe.split.is_none() {
            return Err(RecipeError::Invalid {
                path: path.into(),
                message: format!(
                    "key `split`: required for format {:?} (the question file's split, e.g. \"dev\")",
                    recipe.format
                ),
            });
        }
        if let Some(message) = recipe.variants.as_ref().and_then(|v| v.validate().err()) {
            return Err(RecipeError::Invalid {
                path: path.into(),
                message,
            });
        }
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if recipe.name != stem {
            return Err(RecipeError::Invalid {
                path: path.into(),
                message: format!("key `name`: {:?} must equal the file name {stem:?}", recipe.name),
            });
        }
        Ok(recipe)
    }
}

/// A source manifest: where a corpus officially lives and where to find it locally.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceManifest {
    /// Source name (the file stem).
    pub name: String,
    /// Record format, one of [`SOURCE_FORMATS`].
    pub format: String,
    /// Human title.
    pub title: String,
    /// Official home page.
    pub homepage: String,
    /// Official download location(s).
    pub download: String,
    /// License of the corpus.
    pub license: String,
    /// BibTeX citation.
    pub citation: String,
    /// Expected layout under the root.
    pub layout: String,
    /// Environment variable overriding the search paths.
    pub env: String,
    /// Candidate roots, relative to the project root; the first holding a questions file wins.
    pub search_paths: Vec<String>,
    /// Candidate question files under the root, in order of preference (for seq sources: files
    /// whose presence identifies the root).
    pub questions: Vec<String>,
    /// Candidate database directories under the root (holding `<db>/<db>.sqlite`).
    #[serde(default)]
    pub database_dirs: Vec<String>,
    /// Spider-style `tables.json` (column names used as descriptions), if any.
    #[serde(default)]
    pub tables: Option<String>,
}

/// A corpus located on disk.
#[derive(Debug, Clone)]
pub struct ResolvedSource {
    /// The manifest.
    pub manifest: SourceManifest,
    /// The corpus root directory.
    pub root: PathBuf,
    /// The questions file (for seq sources: the marker file found).
    pub questions: PathBuf,
    /// The directory holding `<db>/<db>.sqlite`.
    pub databases: PathBuf,
    /// `tables.json`, when the manifest names one and it exists.
    pub tables: Option<PathBuf>,
}

impl SourceManifest {
    /// Reads a source manifest.
    pub fn load(path: &Path) -> Result<SourceManifest, RecipeError> {
        let m: SourceManifest = read_toml(path)?;
        if !SOURCE_FORMATS.contains(&m.format.as_str()) {
            return Err(RecipeError::Invalid {
                path: path.into(),
                message: format!(
                    "key `format`: unknown value {:?}, expected one of {SOURCE_FORMATS:?}",
                    m.format
                ),
            });
        }
        Ok(m)
    }

    /// Finds the corpus: `$<env>` if set, else the first search path (relative to
    /// `project_root`) holding one of the question files.
    pub fn resolve(&self, project_root: &Path) -> Result<ResolvedSource, RecipeError> {
        let candidates: Vec<PathBuf> = match std::env::var_os(&self.env) {
            Some(root) => vec![PathBuf::from(root)],
            None => self.search_paths.iter().map(|p| project_root.join(p)).collect(),
        };
        for root in &candidates {
            let Some(questions) = self.questions.iter().map(|q| root.join(q)).find(|p| p.is_file()) else {
                continue;
            };
            let databases = self
                .database_dirs
                .iter()
                .map(|d| root.join(d))
                .find(|d| d.is_dir())
                .unwrap_or_else(|| root.clone());
            let tables = self.tables.as_ref().map(|t| root.join(t)).filter(|p| p.is_file());
            return Ok(ResolvedSource {
                manifest: self.clone(),
                root: root.clone(),
                questions,
                databases,
                tables,
            });
        }
        Err(RecipeError::NotFound {
            name: self.name.clone(),
            tried: candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            download: self.download.clone(),
            env: self.env.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.toml");
        std::fs::write(
            &path,
            "name = \"r\"\ndescription = \"d\"\nformat = \"slot\"\nsource = \"s\"\nsplit = \"dev\"\nfromat = 1\n",
        )
        .unwrap();
        let err = Recipe::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("r.toml") && err.contains("fromat") && err.contains("line 6"),
            "{err}"
        );
    }

    #[test]
    fn unknown_format_lists_allowed_values() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.toml");
        std::fs::write(
            &path,
            "name = \"r\"\ndescription = \"d\"\nformat = \"slotty\"\nsource = \"s\"\nsplit = \"dev\"\n",
        )
        .unwrap();
        let err = Recipe::load(&path).unwrap_err().to_string();
        assert!(err.contains("slotty") && err.contains("[\"slot\", \"sel\""), "{err}");
    }
}
