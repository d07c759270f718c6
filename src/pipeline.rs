//! The build: recipe → source → compile stages (cached in the store) → [`Build`] → emit.
//!
//! What a dataset row is ([`Example`]), what a dropped input is ([`Drop`]) and what a build
//! hands to the emitters ([`Build`]) are shared by every dataset family; the families differ only
//! in their compile stage:
//!
//! - [`crate::text2sql`]: `slot`, `sel`, `rest` recipes over BIRD/Spider (one stage per database);
//! - [`crate::seq`]: `seq` recipes over the API-BLEND sources (one stage per source).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::corpus::{self, BadRecord};
use crate::recipe::{Recipe, ResolvedSource, SourceManifest};
use crate::store::hash_file;
use crate::tools::catalog::KeyDescription;
use crate::tools::{Call, ToolSpec};
use crate::verify::Answer;

/// Fingerprint of the running toolforge build: blake3 of its executable, so that any code
/// change invalidates stage results even when a `*_VERSION` bump was forgotten.
pub fn code_fingerprint() -> &'static str {
    static FP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FP.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| hash_file(&p).ok())
            .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string())
    })
}

/// One dataset row. Fields a family does not have stay `None`/empty (e.g. a SeqATIS row has no
/// `db_id`, `sql` or `gold_answer`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Example {
    /// `<dataset>/<source item id>`.
    pub id: String,
    /// Dataset (recipe) name.
    pub dataset: String,
    /// Split (`train`, `dev`, `test`, … as in the source).
    pub split: String,
    /// Database id (text-to-SQL families).
    pub db_id: Option<String>,
    /// The request text.
    pub input: String,
    /// BIRD evidence.
    pub evidence: Option<String>,
    /// Gold SQL (text-to-SQL families).
    pub sql: Option<String>,
    /// Gold calls, in execution order (SLOT/SEL: the join step first).
    pub output: Vec<Call>,
    /// The verified answer: the SQL result (text-to-SQL families).
    pub gold_answer: Option<Answer>,
    /// Whether the answer is ordered (the SQL has ORDER BY).
    pub ordered: bool,
    /// This instance's tool specs.
    pub tools: Vec<ToolSpec>,
    /// The joined table's columns with descriptions and types (SLOT/SEL).
    pub key_values_and_descriptions: Vec<KeyDescription>,
    /// BIRD difficulty.
    pub difficulty: Option<String>,
    /// Family-specific annotations as a JSON object (e.g. source intents, per-call execution
    /// checks); `None` when there are none.
    pub meta: Option<serde_json::Value>,
}

/// An input item that did not become an example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drop {
    /// Would-be example id.
    pub id: String,
    /// The group it belongs to: database id (text-to-SQL) or split (seq).
    pub group: String,
    /// Reason code, e.g. `db_missing`, `unsupported:subquery`, `mismatch`,
    /// `clause_intent_mismatch`; the family's module documents its codes.
    pub reason: String,
    /// Human detail.
    pub detail: String,
}

/// The compile output of one group (a database or a split).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Examples, in input order.
    pub examples: Vec<Example>,
    /// Dropped items, in input order.
    pub drops: Vec<Drop>,
    /// Items attempted.
    pub attempted: usize,
}

/// Everything a build produced, for the emitters.
#[derive(Debug, Clone)]
pub struct Build {
    /// The recipe.
    pub recipe: Recipe,
    /// The resolved source.
    pub source: ResolvedSource,
    /// What a group is: `database` or `split`.
    pub group_kind: &'static str,
    /// Outcomes per group, in group order.
    pub groups: BTreeMap<String, Outcome>,
    /// Skipped input records.
    pub bad_records: Vec<BadRecord>,
    /// blake3 of each source input, for the manifest.
    pub source_hashes: BTreeMap<String, String>,
    /// Digest of all stage keys: changes whenever any output could.
    pub build_key: String,
    /// Stages served from the store.
    pub cache_hits: usize,
    /// Stages recomputed.
    pub cache_misses: usize,
    /// The dataset-level tool catalog (`tools/functions.json`).
    pub catalog: Vec<ToolSpec>,
    /// Family-specific files, path under `out/<name>/` → bytes (e.g. `tools/openapi.json`).
    pub extra_files: BTreeMap<String, Vec<u8>>,
    /// Family-specific report numbers (`report/verification.json` → `stats`), also printed.
    pub stats: serde_json::Map<String, serde_json::Value>,
}

/// Errors that stop a build (bad recipe, missing corpus, unreadable input file, store IO).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Recipe or source problem.
    #[error(transparent)]
    Recipe(#[from] crate::recipe::RecipeError),
    /// Corpus file problem.
    #[error(transparent)]
    Corpus(#[from] corpus::CorpusError),
    /// Store problem.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Recipe and source do not fit together.
    #[error("recipe {recipe}: format {format:?} cannot be built from source {source_name} (format {source_format:?})")]
    Mismatch {
        /// Recipe name.
        recipe: String,
        /// Recipe format.
        format: String,
        /// Source name.
        source_name: String,
        /// Source format.
        source_format: String,
    },
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

/// Reads a recipe and locates its source corpus (`<root>/sources/<source>.toml`).
pub fn load_recipe(recipe_path: &Path) -> Result<(Recipe, ResolvedSource), BuildError> {
    let recipe = Recipe::load(recipe_path)?;
    let root = project_root(recipe_path);
    let manifest = SourceManifest::load(&root.join("sources").join(format!("{}.toml", recipe.source)))?;
    let source = manifest.resolve(&root)?;
    Ok((recipe, source))
}

/// Runs the compile stages of a recipe (from the store where possible), then the variants stage
/// when the recipe has a `[variants]` section.
pub fn compile(recipe_path: &Path, store_override: Option<&Path>, progress: bool) -> Result<Build, BuildError> {
    let (recipe, source) = load_recipe(recipe_path)?;
    let root = project_root(recipe_path);
    let store_dir = store_override
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.join(recipe.store.clone().unwrap_or("out/.store".into())));
    let store = crate::store::Store::open(store_dir)?;
    let sql_source = crate::recipe::is_sql_source(&source.manifest.format);
    let mut build = match (recipe.format.as_str(), sql_source) {
        ("slot" | "sel" | "rest", true) => crate::text2sql::compile(recipe, source, &store, progress)?,
        ("seq", false) => crate::seq::compile(recipe, source, &store)?,
        ("catalog" | "bfcl", false) => crate::catalog::compile(recipe, source, &store)?,
        _ => {
            return Err(BuildError::Mismatch {
                recipe: recipe.name.clone(),
                format: recipe.format.clone(),
                source_name: source.manifest.name.clone(),
                source_format: source.manifest.format.clone(),
            });
        }
    };
    // ToolGym task synthesis for MCP bundles (an LLM endpoint, else skipped with one line).
    if build.recipe.format == "catalog" {
        let llm = build.recipe.catalog.as_ref().and_then(|k| k.llm.clone());
        crate::catalog::synthesis::apply(&mut build, llm.as_ref(), &store);
    }
    // The variants stage: after compile, on the verified examples.
    if let Some(cfg) = build.recipe.variants.clone() {
        crate::variants::apply(&mut build, &cfg);
        if let Some(p) = &cfg.paraphrase {
            crate::variants::paraphrase::apply(&mut build, p, cfg.llm.as_ref(), &store);
        }
    }
    Ok(build)
}

/// The build key when it can be known without running the stages (seq recipes: from the input
/// hashes), so an up-to-date output is recognised cheaply; `None` for families whose stages are
/// cheap to load (text-to-SQL).
pub fn quick_build_key(recipe_path: &Path) -> Result<Option<(Recipe, String)>, BuildError> {
    let (recipe, source) = load_recipe(recipe_path)?;
    if recipe.format != "seq" || crate::recipe::is_sql_source(&source.manifest.format) {
        return Ok(None);
    }
    let key = crate::seq::quick_build_key(&recipe, &source)?;
    Ok(Some((recipe, key)))
}

/// blake3 of each input file, keyed by its path relative to the corpus root.
pub fn hash_inputs(source: &ResolvedSource, files: &[PathBuf]) -> Result<BTreeMap<String, String>, BuildError> {
    let mut out = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&source.root).unwrap_or(f).display().to_string();
        out.insert(rel, hash_file(f)?);
    }
    Ok(out)
}

/// The stage output of a family whose groups are splits and whose whole conversion is one
/// store stage (seq, catalog), with what the build records about it.
pub struct SplitStage {
    /// Outcomes per split; ids without the dataset prefix.
    pub splits: BTreeMap<String, Outcome>,
    /// Skipped input records.
    pub bad_records: Vec<BadRecord>,
    /// The dataset-level catalog.
    pub catalog: Vec<ToolSpec>,
    /// Family files (path under `out/<name>/` → bytes).
    pub extra_files: BTreeMap<String, Vec<u8>>,
    /// Report numbers.
    pub stats: serde_json::Map<String, serde_json::Value>,
    /// Input hashes ([`hash_inputs`]).
    pub source_hashes: BTreeMap<String, String>,
    /// The build key.
    pub build_key: String,
    /// Whether the stage came from the store.
    pub hit: bool,
}

/// Assembles the [`Build`] of a [`SplitStage`]: every example and drop id gets the
/// `<dataset>/` prefix, every example its dataset and split names.
pub fn split_build(recipe: Recipe, source: ResolvedSource, stage: SplitStage) -> Build {
    let mut groups = stage.splits;
    for (split, outcome) in groups.iter_mut() {
        for e in &mut outcome.examples {
            e.dataset = recipe.name.clone();
            e.split = split.clone();
            e.id = format!("{}/{}", recipe.name, e.id);
        }
        for d in &mut outcome.drops {
            d.id = format!("{}/{}", recipe.name, d.id);
        }
    }
    Build {
        recipe,
        source,
        group_kind: "split",
        groups,
        bad_records: stage.bad_records,
        source_hashes: stage.source_hashes,
        build_key: stage.build_key,
        cache_hits: stage.hit as usize,
        cache_misses: (!stage.hit) as usize,
        catalog: stage.catalog,
        extra_files: stage.extra_files,
        stats: stage.stats,
    }
}

/// Digest over the recipe, the bad records and the stage digests: the build key.
pub fn build_key(recipe: &Recipe, bad_records: &[BadRecord], digests: &[String]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(&serde_json::to_vec(recipe).expect("serialise"));
    h.update(&serde_json::to_vec(bad_records).expect("serialise"));
    for d in digests {
        h.update(d.as_bytes());
    }
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    h.finalize().to_hex().to_string()
}

/// A progress bar on stderr (hidden when disabled or stderr is not a terminal).
pub fn progress_bar(enabled: bool, len: u64, what: &str) -> indicatif::ProgressBar {
    if !enabled || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(&format!("{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {what} {{elapsed}}"))
            .expect("template"),
    );
    bar.set_prefix("compile");
    bar
}
