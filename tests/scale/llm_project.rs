//! A small LLM recipe for the scale-out tests: SLOT over Spider dev with the paraphrase stage
//! (no `base_url`: the endpoint comes from OPENAI_BASE_URL), in a project of its own, and an
//! OpenAI stub (tests/openai_stub) answering every paraphrase request deterministically while
//! logging when each request arrived.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::json;

use crate::openai_stub;

/// Writes `<tmp>/<dir>/recipes/llm-scale.toml` (paraphrase `n` per example over the first
/// `examples` examples, `llm` lines appended to `[variants.llm]`) and `sources/spider-dev.toml`
/// pointing at ../shared/corpora/spider. Returns the recipe path.
pub fn project(tmp: &Path, dir: &str, examples: usize, n: usize, llm: &str) -> PathBuf {
    project_with(tmp, dir, examples, n, "", llm)
}

/// [`project`] with `variants` (lines of the `[variants]` table and further `[variants.*]`
/// tables, e.g. other operators) written before the paraphrase table.
pub fn project_with(tmp: &Path, dir: &str, examples: usize, n: usize, variants: &str, llm: &str) -> PathBuf {
    let proj = tmp.join(dir);
    std::fs::create_dir_all(proj.join("recipes")).unwrap();
    std::fs::create_dir_all(proj.join("sources")).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spider = root.join("../shared/corpora/spider");
    let src = std::fs::read_to_string(root.join("sources/spider-dev.toml")).unwrap();
    let src: Vec<String> = src
        .lines()
        .map(|l| {
            if l.starts_with("search_paths") {
                format!("search_paths = [{:?}]", spider.display().to_string())
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(proj.join("sources/spider-dev.toml"), src.join("\n")).unwrap();
    let path = proj.join("recipes/llm-scale.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"llm-scale\"\ndescription = \"scale-out LLM test\"\nformat = \"slot\"\nsource = \"spider-dev\"\nsplit = \"dev\"\n\n[variants]\nseed = 1\n{variants}\n\n[variants.paraphrase]\nn = {n}\nmax_examples = {examples}\n\n[variants.llm]\nmodel = \"stub\"\nmax_attempts = 2\ninitial_backoff_ms = 10\n{llm}\n"
        ),
    )
    .unwrap();
    path
}

/// A stub answering `Rewrite: <request>` with `Please tell me: <request>` (a paraphrase that
/// keeps every value, so it is accepted), pushing each request's arrival time to `times`.
pub fn paraphrase_stub(times: Arc<Mutex<Vec<Instant>>>) -> openai_stub::Stub {
    openai_stub::start(move |body| {
        times.lock().unwrap().push(Instant::now());
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or("");
        let request = last.strip_prefix("Rewrite: ").unwrap_or(last);
        let message = json!({"role": "assistant", "content": format!("Please tell me: {request}")});
        (200, openai_stub::completion(message))
    })
}
