//! The manifest emitter: `MANIFEST.json`, the no-op check against it ([`up_to_date`]), and
//! reading a built dataset's manifest back ([`read_manifest`], [`database_root`]).
//!
//! `MANIFEST.json` schema: `{"dataset", "recipe", "format", "toolforge_version", "build_key",
//! "recipe_hash" (blake3 of the recipe file), "source" (source name), "source_hashes": {input
//! file: blake3}, "files": {relative path: blake3 of every other file of the dataset}}`. The
//! `build_key` covers the recipe, the bad records and every stage digest (which include the code
//! fingerprint, see [`crate::dataset::code_fingerprint`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

use crate::dataset::Build;

/// The `MANIFEST.json` document of `build` with the blake3 `files` of its other files.
pub(super) fn manifest(build: &Build, recipe_hash: &str, files: &BTreeMap<String, String>) -> serde_json::Value {
    json!({
        "dataset": build.recipe.name,
        "recipe": build.recipe.name,
        "format": build.recipe.format,
        "toolforge_version": env!("CARGO_PKG_VERSION"),
        "build_key": build.build_key,
        "recipe_hash": recipe_hash,
        "source": build.source.manifest.name,
        "source_hashes": build.source_hashes,
        "files": files,
    })
}

/// Whether `dir` holds a complete build with this build key (every file's hash checks out).
pub fn up_to_date(dir: &Path, build_key: &str) -> bool {
    let Ok(bytes) = std::fs::read(dir.join("MANIFEST.json")) else {
        return false;
    };
    let Ok(m) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return false;
    };
    if m["build_key"] != build_key {
        return false;
    }
    let Some(files) = m["files"].as_object() else {
        return false;
    };
    files.iter().all(|(name, hash)| {
        std::fs::read(dir.join(name)).is_ok_and(|b| hash.as_str() == Some(blake3::hash(&b).to_hex().as_str()))
    })
}

/// The built dataset's `MANIFEST.json`.
pub fn read_manifest(dir: &Path) -> Result<serde_json::Value> {
    let bytes =
        std::fs::read(dir.join("MANIFEST.json")).with_context(|| format!("{}: not a built dataset", dir.display()))?;
    Ok(serde_json::from_slice(&bytes)?)
}

/// The database root of a built dataset: `databases` if given, else its recipe's source.
pub fn database_root(dir: &Path, databases: Option<&Path>) -> Result<PathBuf> {
    if let Some(d) = databases {
        return Ok(d.to_path_buf());
    }
    let manifest = read_manifest(dir)?;
    let recipe = manifest["recipe"].as_str().context("MANIFEST.json: no recipe")?;
    let root = dir.parent().and_then(Path::parent).unwrap_or(Path::new("."));
    let recipe_path = root.join("recipes").join(format!("{recipe}.toml"));
    let (_, source) = crate::recipe::load_with_source(&recipe_path).with_context(|| {
        format!(
            "{}: cannot locate the databases through {}; pass --databases DIR",
            dir.display(),
            recipe_path.display()
        )
    })?;
    Ok(source.databases)
}
