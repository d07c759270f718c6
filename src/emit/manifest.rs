//! The manifest emitter: `MANIFEST.json`, the no-op check against it ([`up_to_date`]), and
//! reading a built dataset's manifest back ([`read_manifest`], [`database_root`]).
//!
//! `MANIFEST.json` schema: `{"dataset", "recipe", "format", "toolforge_version", "build_key",
//! "recipe_hash" (blake3 of the recipe file), "source" (source name), "source_hashes": {input
//! file: blake3}, "databases" (SQL families only, see [`databases_reference`]), "files": {relative
//! path: blake3 of every other file of the dataset}}`. The
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
        "databases": databases_reference(build),
        "files": files,
    })
}

/// How to find the databases of a built SQL-family dataset from wherever it is copied:
/// `{"source", "env", "search_paths", "database_dir"}` — the source name, the environment variable
/// naming the corpus root, the corpus search paths relative to a project root (as in
/// `sources/<source>.toml`), and the database directory relative to the corpus root. Never an
/// absolute path, so the manifest is byte-identical across machines. `null` for families without
/// databases.
fn databases_reference(build: &Build) -> serde_json::Value {
    let m = &build.source.manifest;
    if m.database_dirs.is_empty() {
        return serde_json::Value::Null;
    }
    let database_dir = build
        .source
        .databases
        .strip_prefix(&build.source.root)
        .ok()
        .and_then(Path::to_str)
        .unwrap_or_default()
        .replace('\\', "/");
    json!({
        "source": m.name,
        "env": m.env,
        "search_paths": m.search_paths,
        "database_dir": database_dir,
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
    // Files in parallel: a no-op rebuild is mostly this check (issue 17). Each file is hashed
    // as it is read, never held whole (sel-spider-variants' JSONL is 600 MB).
    use rayon::prelude::*;
    let files: Vec<(&String, &serde_json::Value)> = files.iter().collect();
    files.par_iter().all(|(name, hash)| {
        std::fs::File::open(dir.join(name))
            .and_then(|f| blake3::Hasher::new().update_reader(f).map(|h| h.finalize()))
            .is_ok_and(|h| hash.as_str() == Some(h.to_hex().as_str()))
    })
}

/// The built dataset's `MANIFEST.json`.
pub fn read_manifest(dir: &Path) -> Result<serde_json::Value> {
    let bytes =
        std::fs::read(dir.join("MANIFEST.json")).with_context(|| format!("{}: not a built dataset", dir.display()))?;
    Ok(serde_json::from_slice(&bytes)?)
}

/// The database root of a built dataset, tried in order: `databases` if given; the recipe's
/// source when the dataset sits in a project's `out/` (`<project>/out/<name>`); the manifest's
/// `databases` reference (`databases_reference`): `$env`, then each search path relative to the
/// dataset's grandparent and to the current directory. The error names every place tried and
/// the `--databases DIR` override.
pub fn database_root(dir: &Path, databases: Option<&Path>) -> Result<PathBuf> {
    if let Some(d) = databases {
        return Ok(d.to_path_buf());
    }
    let manifest = read_manifest(dir)?;
    let recipe = manifest["recipe"].as_str().context("MANIFEST.json: no recipe")?;
    let root = dir.parent().and_then(Path::parent).unwrap_or(Path::new("."));
    let recipe_path = root.join("recipes").join(format!("{recipe}.toml"));
    if let Ok((_, source)) = crate::recipe::load_with_source(&recipe_path) {
        return Ok(source.databases);
    }
    let mut tried = vec![recipe_path.display().to_string()];
    let reference = &manifest["databases"];
    if reference.is_object() {
        let database_dir = reference["database_dir"].as_str().unwrap_or_default();
        let env = reference["env"].as_str().unwrap_or_default();
        let mut corpus_roots = Vec::new();
        if let Some(v) = Some(env).filter(|e| !e.is_empty()).and_then(std::env::var_os) {
            corpus_roots.push(PathBuf::from(v));
        }
        let bases = [root.to_path_buf(), PathBuf::from(".")];
        for p in reference["search_paths"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p.as_str())
        {
            corpus_roots.extend(bases.iter().map(|b| b.join(p)));
        }
        for corpus in corpus_roots {
            let candidate = corpus.join(database_dir);
            if candidate.is_dir() {
                return Ok(candidate);
            }
            tried.push(candidate.display().to_string());
        }
    }
    anyhow::bail!(
        "{}: cannot locate the databases of source {} (tried {}); set ${} or pass --databases DIR",
        dir.display(),
        reference["source"].as_str().unwrap_or("?"),
        tried.join(", "),
        reference["env"].as_str().unwrap_or("<source env>")
    )
}
