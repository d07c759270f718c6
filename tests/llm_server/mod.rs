//! The local LLM test server (tests/llm-server: node-llama-cpp + SmolLM2 on 127.0.0.1), shared
//! by the integration tests that need a real OpenAI-compatible endpoint (`tests/llm.rs`,
//! `tests/eval_llm.rs`, `tests/seq_requests.rs`). Included with `mod llm_server;`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::Value;

/// The running server; killed on drop.
pub struct Server {
    pub pid: u32,
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.pid.to_string()).status();
    }
}

/// Starts the server through `tests/llm-server/setup.sh --start` with its log (and request log)
/// under `tmp`; `env` adds variables (e.g. `INJECT_STATUS=429` to inject one failure). `None`,
/// after a loud skip line naming `test`, when `TOOLFORGE_LLM_SKIP` is set (`.ci/run` sets it when
/// the optional server cannot be installed) or node/npm/python3 are missing.
pub fn start(test: &str, tmp: &Path, env: &[(&str, &str)]) -> Option<Server> {
    if !available(test) {
        return None;
    }
    let t = Instant::now();
    let out = Command::new("bash")
        .arg(setup_script())
        .arg("--start")
        .env("TOOLFORGE_LLM_LOG", tmp.join("server.log"))
        .env("TOOLFORGE_LLM_REQUEST_LOG", tmp.join("requests.jsonl"))
        .envs(env.iter().copied())
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "setup.sh failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let get = |k: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("setup.sh printed no {k}=: {stdout}"))
            .to_string()
    };
    eprintln!("llm server up in {:.1} s", t.elapsed().as_secs_f64());
    Some(Server {
        pid: get("PID").parse().unwrap(),
        port: get("PORT").parse().unwrap(),
    })
}

/// Whether the server can be set up here; when not, prints a loud skip line naming `test`
/// (`TOOLFORGE_LLM_SKIP` set by `.ci/run`, or node/npm/python3 missing).
pub fn available(test: &str) -> bool {
    if let Ok(why) = std::env::var("TOOLFORGE_LLM_SKIP") {
        eprintln!("\n\n!!!!! SKIPPING {test}: {why} !!!!!\n\n");
        return false;
    }
    for tool in ["node", "npm", "python3"] {
        if Command::new(tool).arg("--version").output().is_err() {
            eprintln!(
                "\n\n!!!!! SKIPPING {test}: `{tool}` is not installed, so tests/llm-server/setup.sh cannot run !!!!!\n\n"
            );
            return false;
        }
    }
    true
}

/// `tests/llm-server/setup.sh`.
pub fn setup_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/llm-server/setup.sh")
}

/// The server's `/stats` (`{"requests": n, …}`).
pub fn stats(port: u16) -> Value {
    ureq::get(&format!("http://127.0.0.1:{port}/stats"))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap()
}

/// Chat requests the server has answered so far.
#[allow(dead_code)]
pub fn requests(port: u16) -> u64 {
    stats(port)["requests"].as_u64().unwrap()
}

/// A project root `tmp/<dir>` with the Spider source and the recipe `llm-paraphrase` (`variants`
/// appended). The recipe name is the same in every project so the compile stage is shared.
#[allow(dead_code)]
pub fn project(tmp: &Path, dir: &str, variants: &str) -> PathBuf {
    let name = "llm-paraphrase";
    let proj = tmp.join(dir);
    std::fs::create_dir_all(proj.join("recipes")).unwrap();
    std::fs::create_dir_all(proj.join("sources")).unwrap();
    let spider = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/spider");
    let src = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("sources/spider-dev.toml")).unwrap();
    let src = src
        .lines()
        .map(|l| {
            if l.starts_with("search_paths") {
                format!("search_paths = [{:?}]", spider.display().to_string())
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(proj.join("sources/spider-dev.toml"), src).unwrap();
    let path = proj.join("recipes").join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\ndescription = \"LLM paraphrase test\"\nformat = \"slot\"\nsource = \"spider-dev\"\nsplit = \"dev\"\n\n[variants]\nseed = 1\n{variants}"
        ),
    )
    .unwrap();
    path
}
