//! Recipes (`recipes/<name>.toml`) and source manifests (`sources/<name>.toml`).
//!
//! Both are read with serde's `deny_unknown_fields`, so a misspelt key is an error naming the
//! file, the line and the allowed keys; values with a fixed set (`format`) are checked and the
//! error lists the allowed values.

pub mod catalog;
pub mod mix;
pub mod seq;
pub mod variants;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Errors reading a recipe or source manifest, or resolving a corpus root.
#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    /// The file cannot be read.
    #[error("cannot read {path}")]
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
    /// A recipe name that is not a file and not `<project>/recipes/<name>.toml`.
    #[error(
        "unknown recipe {name:?}{}; available recipes in {}: {}",
        nearest.as_ref().map(|n| format!(" (did you mean {n:?}?)")).unwrap_or_default(),
        dir.display(),
        available.join(", ")
    )]
    UnknownRecipe {
        /// The name asked for.
        name: String,
        /// The `recipes/` folder searched.
        dir: PathBuf,
        /// Every recipe name there, sorted.
        available: Vec<String>,
        /// The closest available name (Jaro–Winkler ≥ 0.8), if any.
        nearest: Option<String>,
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
    /// Keep verified questions whose gold answer is degenerate — a single 0, a single
    /// NULL, or every cell NULL (default false: like an empty answer, any call sequence that
    /// filters everything away reproduces it; reason code `degenerate_gold_answer`).
    #[serde(default)]
    pub keep_degenerate_answers: bool,
    /// SLOT/SEL: which tool pool the gold calls may use (`tool_pool = "extended" | "reference"`,
    /// default `extended`). `reference` keeps only sequences the Live API-Bench reference tools
    /// (IBM's `invocable_api_hub`) execute faithfully, rewriting `LIKE '%text%'` as `contains`;
    /// the others are dropped as `outside_reference_pool` ([`crate::tools::reference`]). Not
    /// serialised when `extended`, so recipes without it keep their build keys.
    #[serde(default, skip_serializing_if = "ToolPool::is_extended")]
    pub tool_pool: ToolPool,
    /// Store directory (default `out/.store`), relative to the project root.
    #[serde(default)]
    pub store: Option<PathBuf>,
    /// `[variants]`: extra rows derived after the compile stage (see [`crate::variants`]).
    /// Not serialised when absent, so recipes without it keep their build keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variants: Option<variants::VariantsConfig>,
    /// `catalog` recipes: bundle sampling knobs (`[catalog]` table, see [`catalog::CatalogKnobs`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catalog: Option<catalog::CatalogKnobs>,
    /// `seq` recipes: conversion knobs and the request writer's endpoint (`[seq]` table, see
    /// [`seq::SeqKnobs`]). Not serialised when absent, so recipes without it keep their build keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<seq::SeqKnobs>,
    /// Trajectory corpus settings (executable families); defaults when absent.
    #[serde(default)]
    pub trajectories: TrajectoryConfig,
}

/// The tool pool of a SLOT/SEL recipe (knob `tool_pool`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolPool {
    /// toolforge's SLOT tools: the reference's plus grouped aggregates, `calculate`,
    /// `combine_data`, membership and `not_like` filters (see [`crate::tools::pool`]).
    #[default]
    Extended,
    /// Only calls the reference tools execute faithfully ([`crate::tools::reference`]).
    Reference,
}

impl ToolPool {
    /// Whether this is the default pool.
    pub fn is_extended(&self) -> bool {
        *self == ToolPool::Extended
    }
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
    /// Size cap of one trajectory: characters of its conversation (the JSON text of `messages`;
    /// the `tools` list, the instance's fixed toolkit, does not count); a trajectory over it is
    /// not written and is counted under `over_size_cap` in the report, per reason and per group.
    pub max_chars: usize,
    /// Cap on a trajectory's estimated tokens — the characters of its OpenAI-format line, its
    /// messages and tools, over 4 —: a longer trajectory is dropped whole (never truncated) and
    /// counted under `over_token_cap`, per group (database or split), in the report and the card.
    /// None (the default): no cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<usize>,
}

impl Default for TrajectoryConfig {
    fn default() -> Self {
        TrajectoryConfig {
            fault_rate: 0.25,
            seed: 0,
            max_rows: 20,
            max_chars: 64_000,
            max_tokens: None,
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
        if mix::is_mix(path) {
            return Err(RecipeError::Invalid {
                path: path.into(),
                message: "format \"mix\": a training mix of built datasets (no source, rows or tools of its own); only `toolforge build` reads it".into(),
            });
        }
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
        if recipe.tool_pool == ToolPool::Reference && !matches!(recipe.format.as_str(), "slot" | "sel") {
            return Err(RecipeError::Invalid {
                path: path.into(),
                message: format!(
                    "key `tool_pool`: \"reference\" applies to formats \"slot\" and \"sel\", not {:?}",
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
    /// whose presence identifies the root). A name may hold `*` wildcards (any run of characters
    /// except `/`, e.g. `BFCL_v4_*.json`, `*.json`): the first matching file in name order is used.
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
            let Some(questions) = self.questions.iter().find_map(|q| first_match(root, q)) else {
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

/// The project root of a recipe file (`<root>/recipes/<name>.toml`).
pub fn project_root(recipe_path: &Path) -> PathBuf {
    let dir = recipe_path.parent().unwrap_or(Path::new("."));
    let root = if dir.file_name().is_some_and(|n| n == "recipes") {
        dir.parent().unwrap_or(Path::new("."))
    } else {
        dir
    };
    if root.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        root.to_path_buf()
    }
}

/// The project root for recipe names: the nearest ancestor of the working directory holding
/// `recipes/` and `Cargo.toml`, else `$TOOLFORGE_ROOT`, else the checkout toolforge was built
/// from (so an installed `toolforge` finds its recipes from any directory).
pub fn find_project_root() -> PathBuf {
    let is_root = |d: &Path| d.join("recipes").is_dir() && d.join("Cargo.toml").is_file();
    if let Ok(cwd) = std::env::current_dir() {
        if let Some(d) = cwd.ancestors().find(|d| is_root(d)) {
            return d.to_path_buf();
        }
    }
    if let Some(root) = std::env::var_os("TOOLFORGE_ROOT") {
        return PathBuf::from(root);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The recipe names (file stems) in `<root>/recipes/`, sorted.
pub fn available_recipes(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("recipes"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.sort();
    names
}

/// Resolves a recipe argument: an existing file path as given; otherwise a name looked up as
/// `recipes/<name>.toml` (a `.toml` suffix and a `recipes/` prefix are allowed) under
/// [`find_project_root`]. An unknown name is [`RecipeError::UnknownRecipe`], listing the
/// available recipes and the nearest name.
pub fn resolve_recipe(arg: &str) -> Result<PathBuf, RecipeError> {
    let p = PathBuf::from(arg);
    if p.is_file() {
        return Ok(p);
    }
    let root = find_project_root();
    let name = arg.strip_prefix("recipes/").unwrap_or(arg);
    let name = name.strip_suffix(".toml").unwrap_or(name);
    let path = root.join("recipes").join(format!("{name}.toml"));
    if path.is_file() {
        return Ok(path);
    }
    let available = available_recipes(&root);
    let nearest = available
        .iter()
        .map(|a| (strsim::jaro_winkler(name, a), a))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, a)| a.clone());
    Err(RecipeError::UnknownRecipe {
        name: arg.to_string(),
        dir: root.join("recipes"),
        available,
        nearest,
    })
}

/// Reads a recipe and locates its source corpus: the manifest `<root>/sources/<source>.toml`
/// ([`project_root`]), resolved with [`SourceManifest::resolve`].
pub fn load_with_source(recipe_path: &Path) -> Result<(Recipe, ResolvedSource), RecipeError> {
    let recipe = Recipe::load(recipe_path)?;
    let root = project_root(recipe_path);
    let manifest = SourceManifest::load(&root.join("sources").join(format!("{}.toml", recipe.source)))?;
    let source = manifest.resolve(&root)?;
    Ok((recipe, source))
}

/// `root/<pattern>` when it is a file; for a pattern with `*` in its last component, the first
/// file (in name order) of its directory whose name matches.
fn first_match(root: &Path, pattern: &str) -> Option<PathBuf> {
    let path = root.join(pattern);
    let name = path.file_name()?.to_str()?.to_string();
    if !name.contains('*') {
        return path.is_file().then_some(path);
    }
    let dir = path.parent()?;
    let mut hits: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| wildcard(&name, n))
        })
        .collect();
    hits.sort();
    hits.into_iter().next()
}

/// Whether the file name `text` matches `pattern` as a shell glob (`glob` crate: `*`, `?`,
/// `[...]`; a malformed pattern matches nothing).
pub fn wildcard(pattern: &str, text: &str) -> bool {
    glob::Pattern::new(pattern).is_ok_and(|p| p.matches(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_question_names() {
        assert!(wildcard("BFCL_v4_*.json", "BFCL_v4_live_simple.json"));
        assert!(!wildcard("BFCL_v4_*.json", "BFCL_v3_simple.json"));
        assert!(wildcard("*.json", "a.json") && !wildcard("*.json", "a.jsonl"));
        assert!(wildcard("a*b*c", "abc") && wildcard("a*b*c", "axxbyyc") && !wildcard("a*b*c", "acb"));
        assert!(!wildcard("ab*ba", "aba"));
    }

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
    fn unknown_recipe_lists_available_and_nearest() {
        let err = resolve_recipe("slot-brid").unwrap_err().to_string();
        assert!(err.contains("did you mean \"slot-bird\""), "{err}");
        assert!(err.contains("slot-spider") && err.contains("seq-atis"), "{err}");
        assert!(!err.contains("os error"), "{err}");
    }

    #[test]
    fn recipe_names_resolve_from_any_directory() {
        // From the crate root (the test's working directory); other directories: tests/build.rs.
        let p = resolve_recipe("slot-bird").unwrap();
        assert!(p.is_absolute() && p.ends_with("recipes/slot-bird.toml"), "{p:?}");
        assert!(resolve_recipe("slot-bird.toml").unwrap() == p);
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

    #[test]
    fn negative_min_relatedness_names_the_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.toml");
        std::fs::write(
            &path,
            "name = \"r\"\ndescription = \"d\"\nformat = \"rest\"\nsource = \"s\"\nsplit = \"dev\"\n\
             [variants.distractors]\nmin_relatedness = -0.5\n",
        )
        .unwrap();
        let err = format!("{:#}", Recipe::load(&path).unwrap_err());
        assert!(
            err.contains("r.toml") && err.contains("variants.distractors.min_relatedness") && err.contains("-0.5"),
            "{err}"
        );
    }
}
