//! The build driver: recipe → source → compile (one family: [`crate::sql::compile`] for `slot`/`sel`/`rest`,
//! [`crate::seq`], [`crate::catalog`]) → variants → [`Build`] → emitters ([`crate::emit`]).
//! Dispatch only: the row and build types live in [`crate::dataset`], below every family; the
//! files are written by [`crate::emit::write`]. [`build_and_emit`] is the `toolforge build` entry
//! point.

use std::path::Path;
use std::time::Instant;

use anyhow::Result;

use crate::dataset::{Build, BuildError};
use crate::recipe::{Recipe, ResolvedSource};

pub use crate::recipe::project_root;

/// Reads a recipe and locates its source corpus (`<root>/sources/<source>.toml`); see
/// [`crate::recipe::load_with_source`].
pub fn load_recipe(recipe_path: &Path) -> Result<(Recipe, ResolvedSource), BuildError> {
    Ok(crate::recipe::load_with_source(recipe_path)?)
}

/// Runs the compile stages of a recipe (from the store where possible), then the variants stage
/// when the recipe has a `[variants]` section.
pub fn compile(recipe_path: &Path, store_override: Option<&Path>, progress: bool) -> Result<Build, BuildError> {
    let (recipe, source) = load_recipe(recipe_path)?;
    let root = project_root(recipe_path);
    let store = crate::store::Store::open(store_dir(&root, &recipe, store_override))?;
    let sql_source = crate::recipe::is_sql_source(&source.manifest.format);
    let mut build = match (recipe.format.as_str(), sql_source) {
        ("slot" | "sel" | "rest", true) => crate::sql::compile::compile(recipe, source, &store, progress)?,
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
    // Corrupt store entries met by the compile stages: named in the summary, kept out of the
    // files (a rebuild must give the same bytes).
    let dirty = store.dirty();
    if !dirty.is_empty() {
        let list: Vec<String> = dirty.iter().map(ToString::to_string).collect();
        build.stats.insert(
            crate::store::REPAIRED_STAT.into(),
            format!("{} corrupt entries recomputed: {}", dirty.len(), list.join("; ")).into(),
        );
    }
    // ToolGym task synthesis for MCP bundles (an LLM endpoint, else skipped with one line).
    if build.recipe.format == "catalog" {
        let llm = build.recipe.catalog.as_ref().and_then(|k| k.llm.clone());
        crate::catalog::synthesis::apply(&mut build, llm.as_ref(), &store);
    }
    // SeqSGD / SeqMultiWOZ requests written by an LLM (an endpoint, else the template stays).
    if build.recipe.format == "seq" && matches!(build.source.manifest.format.as_str(), "sgd" | "multiwoz") {
        let llm = build.recipe.seq.as_ref().and_then(|k| k.llm.clone());
        crate::seq::request::apply(&mut build, llm.as_ref(), &store);
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

/// The store directory of a recipe: `store_override`, else the recipe's `store`, else
/// `<project>/out/.store`.
fn store_dir(root: &Path, recipe: &Recipe, store_override: Option<&Path>) -> std::path::PathBuf {
    store_override
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.join(recipe.store.clone().unwrap_or("out/.store".into())))
}

/// The build key when it can be known without running the stages (seq recipes: from the input
/// hashes), so an up-to-date output is recognised cheaply; `None` for families whose stages are
/// cheap to load (text-to-SQL).
pub fn quick_build_key(recipe_path: &Path) -> Result<Option<(Recipe, String)>, BuildError> {
    let (recipe, source) = load_recipe(recipe_path)?;
    if recipe.format != "seq"
        || crate::recipe::is_sql_source(&source.manifest.format)
        || crate::seq::writes_requests(&recipe, &source)
    {
        return Ok(None);
    }
    let key = crate::seq::quick_build_key(&recipe, &source)?;
    Ok(Some((recipe, key)))
}

/// Builds a recipe and writes `out/<name>/` (default output root `<project>/out`); returns the
/// human summary ([`crate::emit::report::summary`]). An output that is already up to date is
/// recognised from its manifest and left untouched.
pub fn build_and_emit(
    recipe_path: &Path,
    out_root: Option<&Path>,
    store: Option<&Path>,
    progress: bool,
) -> Result<String> {
    let start = Instant::now();
    let root = project_root(recipe_path);
    let out_root = out_root.map(Path::to_path_buf).unwrap_or_else(|| root.join("out"));
    if let Some((recipe, key)) = quick_build_key(recipe_path)? {
        let out_dir = out_root.join(&recipe.name);
        if crate::emit::manifest::up_to_date(&out_dir, &key) {
            return crate::emit::report::up_to_date_summary(&out_dir, &recipe.name, start.elapsed().as_secs_f64());
        }
    }
    let build = compile(recipe_path, store, progress)?;
    let out_dir = out_root.join(&build.recipe.name);
    let emit_store = crate::store::Store::open(store_dir(&root, &build.recipe, store)).ok();
    let wrote = crate::emit::write_cached(&build, &out_dir, recipe_path, emit_store.as_ref())?;
    let text = crate::emit::report::summary(&build, &out_dir, wrote, start.elapsed().as_secs_f64());
    // Freeing a large build's many small allocations takes seconds; do it off the caller's path.
    std::thread::spawn(move || drop(build));
    Ok(text)
}
