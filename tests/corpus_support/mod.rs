//! Temporary project trees whose `spider-dev` source is a rewritten copy of Spider dev (the
//! "unseen input" tests: re-quoted SQL, retyped or edited databases), so a real build runs on
//! it through `pipeline::build_and_emit`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Spider dev as shipped in `../shared/corpora`.
pub fn spider_corpus() -> PathBuf {
    root().join("../shared/corpora/spider")
}

/// Makes `tmp` a project tree whose `spider-dev` source reads `corpus` (a directory holding
/// `dev.json`, `tables.json` and `database/`), ignoring `TOOLFORGE_SPIDER_DEV`.
pub fn use_spider_corpus(tmp: &Path, corpus: &Path) {
    std::fs::create_dir_all(tmp.join("sources")).unwrap();
    std::fs::create_dir_all(tmp.join("recipes")).unwrap();
    let manifest = std::fs::read_to_string(root().join("sources/spider-dev.toml")).unwrap();
    let manifest: String = manifest
        .lines()
        .map(|l| {
            if l.starts_with("search_paths") {
                format!("search_paths = [{:?}]", corpus.display().to_string())
            } else if l.starts_with("env ") {
                "env = \"TOOLFORGE_REWRITTEN_CORPUS_UNSET\"".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(tmp.join("sources/spider-dev.toml"), manifest).unwrap();
}

/// Copies the project's recipe `name` into the tree `tmp`; returns its path there.
pub fn recipe(tmp: &Path, name: &str) -> PathBuf {
    let path = tmp.join(format!("recipes/{name}.toml"));
    std::fs::copy(root().join(format!("recipes/{name}.toml")), &path).unwrap();
    path
}
