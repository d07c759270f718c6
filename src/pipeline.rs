//! The build driver: recipe → source → compile (one family: [`crate::sql::compile`] for `slot`/`sel`/`rest`,
//! [`crate::seq`], [`crate::catalog`]) → variants → [`Build`]. Dispatch only: the row and build
//! types live in [`crate::dataset`], below every family.

use std::path::{Path, PathBuf};

use crate::dataset::{Build, BuildError};
use crate::recipe::{Recipe, ResolvedSource, SourceManifest};

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
