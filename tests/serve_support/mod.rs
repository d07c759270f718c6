//! What the live-server test files share (`tests/serve_budgets.rs`, `serve_exposure.rs`,
//! `mcp_frames.rs`): the project root and a dataset built once per test process. Included with
//! `#[path = "serve_support/mod.rs"] mod serve_support;`.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// slot-spider, built once per test process under `CARGO_TARGET_TMPDIR/<name>` (removed with
/// `target/`, and emptied first, so no run leaves a directory in /tmp); `name` is the test file's.
pub fn slot_spider(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        let _ = std::fs::remove_dir_all(&tmp);
        toolforge::pipeline::build_and_emit(
            &root().join("recipes/slot-spider.toml"),
            Some(&tmp.join("out")),
            Some(&tmp.join("store")),
            false,
        )
        .unwrap();
        tmp.join("out/slot-spider")
    })
    .clone()
}
