//! SeqSGD / SeqMultiWOZ requests written by an LLM (issue 15, API-BLEND §3.1) against a REAL
//! OpenAI-compatible server on 127.0.0.1 (`tests/llm-server/setup.sh --start`, SmolLM2-135M, as
//! in tests/llm.rs), on a few real dialogues of each corpus:
//!
//! - every row is either LLM-written and passes `request::check` against its gold calls, or keeps
//!   its template request; attempted = accepted + rejected, rejections by reason;
//! - a rebuild makes no request (answers from the store) and its rows are byte-identical;
//! - the offline fallback reads as a sentence: no "..", no `with <slot> <value>` list.

use std::path::{Path, PathBuf};

use serde_json::Value;
use toolforge::pipeline::compile;
use toolforge::seq::request::check;

mod llm_server;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The running server; killed on drop.
/// A project with `sources/<source>.toml` pointing at `corpus` and a recipe `seq-<source>-llm`.
fn project(tmp: &Path, source: &str, corpus: &Path, seq_table: &str) -> PathBuf {
    let proj = tmp.join(format!("proj-{source}"));
    std::fs::create_dir_all(proj.join("recipes")).unwrap();
    std::fs::create_dir_all(proj.join("sources")).unwrap();
    let src = std::fs::read_to_string(root().join(format!("sources/{source}.toml"))).unwrap();
    let src: Vec<String> = src
        .lines()
        .map(|l| {
            if l.starts_with("search_paths") {
                format!("search_paths = [{:?}]", corpus.display().to_string())
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(proj.join(format!("sources/{source}.toml")), src.join("\n")).unwrap();
    let name = format!("seq-{source}-llm");
    let path = proj.join(format!("recipes/{name}.toml"));
    std::fs::write(
        &path,
        format!("name = \"{name}\"\ndescription = \"request writer test\"\nformat = \"seq\"\nsource = \"{source}\"\nsplit = \"dev\"\n{seq_table}"),
    )
    .unwrap();
    path
}

/// SGD dev with the first `n` dialogues of `dialogues_001.json`.
fn sgd_subset(tmp: &Path, n: usize) -> PathBuf {
    let src = root().join("../shared/corpora/sgd/dev");
    let dst = tmp.join("sgd/dev");
    std::fs::create_dir_all(&dst).unwrap();
    std::fs::copy(src.join("schema.json"), dst.join("schema.json")).unwrap();
    let all: Vec<Value> = serde_json::from_slice(&std::fs::read(src.join("dialogues_001.json")).unwrap()).unwrap();
    std::fs::write(dst.join("dialogues_001.json"), serde_json::to_vec(&all[..n]).unwrap()).unwrap();
    tmp.join("sgd")
}

/// MultiWOZ val with its first `n` dialogues, the 2.2 schema and the databases.
fn multiwoz_subset(tmp: &Path, n: usize) -> PathBuf {
    let src = root().join("../shared/corpora/multiwoz");
    let dst = tmp.join("multiwoz");
    std::fs::create_dir_all(dst.join("MultiWOZ_2.1/db")).unwrap();
    std::fs::create_dir_all(dst.join("MultiWOZ_2.2")).unwrap();
    std::fs::copy(
        src.join("MultiWOZ_2.2/schema.json"),
        dst.join("MultiWOZ_2.2/schema.json"),
    )
    .unwrap();
    for e in std::fs::read_dir(src.join("MultiWOZ_2.1/db")).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dst.join("MultiWOZ_2.1/db").join(p.file_name().unwrap())).unwrap();
    }
    let all: serde_json::Map<String, Value> =
        serde_json::from_slice(&std::fs::read(src.join("MultiWOZ_2.1/val.json")).unwrap()).unwrap();
    let some: serde_json::Map<String, Value> = all.into_iter().take(n).collect();
    std::fs::write(dst.join("MultiWOZ_2.1/val.json"), serde_json::to_vec(&some).unwrap()).unwrap();
    dst
}

fn surface(meta: &Value) -> Vec<(String, String)> {
    meta["surface_forms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["canonical"].as_str().unwrap().to_string(),
                s["said"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn seq_requests_written_by_a_real_llm_pass_the_value_check_and_rebuild_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    // Offline first: no endpoint → template requests that read as sentences.
    for (source, corpus) in [("sgd", sgd_subset(tmp, 3)), ("multiwoz", multiwoz_subset(tmp, 3))] {
        let recipe = project(tmp, source, &corpus, "");
        let b = compile(&recipe, Some(&tmp.join(format!("store-offline-{source}"))), false).unwrap();
        assert!(
            b.stats["request_writer"].as_str().unwrap().contains("template"),
            "{}",
            b.stats["request_writer"]
        );
        for e in &b.groups["dev"].examples {
            assert!(!e.input.contains(".."), "{}", e.input);
            assert!(
                !e.input.contains(" with where to ") && !e.input.contains("with intent "),
                "{}",
                e.input
            );
            assert!(e.input.ends_with('.'), "{}", e.input);
        }
    }
    let Some(server) = llm_server::start("the seq request-writer test", tmp, &[]) else {
        return;
    };
    let port = server.port;
    let llm = format!(
        "\n[seq.llm]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"smollm2-135m-instruct\"\ntemperature = 0.7\nseed = 3\nmax_tokens = 120\nmax_concurrency = 2\nmax_attempts = 3\ninitial_backoff_ms = 20\ntimeout_secs = 120\n"
    );
    for (source, corpus) in [("sgd", sgd_subset(tmp, 3)), ("multiwoz", multiwoz_subset(tmp, 3))] {
        let recipe = project(tmp, source, &corpus, &llm);
        let store = tmp.join(format!("store-{source}"));
        let before = llm_server::requests(port);
        let b = compile(&recipe, Some(&store), false).unwrap();
        let w = &b.stats["request_writer"];
        eprintln!("{source}: {w:#}");
        let rows = &b.groups["dev"].examples;
        assert!(llm_server::requests(port) > before, "no request reached the server");
        assert_eq!(w["attempted"].as_u64().unwrap() as usize, rows.len());
        let (acc, rej) = (w["accepted"].as_u64().unwrap(), w["rejected"].as_u64().unwrap());
        assert_eq!(acc + rej, rows.len() as u64);
        let by_reason: u64 = w["rejected_by_reason"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert_eq!(by_reason, rej);
        let mut llm_rows = 0;
        for e in rows {
            let meta = e.meta.clone().unwrap();
            if meta["request"] == "llm" {
                llm_rows += 1;
                assert_eq!(check(&e.input, &e.output, &surface(&meta)), Ok(()), "{}", e.id);
                assert!(meta["template_request"].is_string());
            } else {
                assert_eq!(meta["request"], "template");
            }
        }
        assert_eq!(llm_rows as u64, acc);
        // Rebuild: every answer from the store, same rows.
        let mid = llm_server::requests(port);
        let again = compile(&recipe, Some(&store), false).unwrap();
        assert_eq!(llm_server::requests(port), mid, "a rebuild must not query the server");
        assert_eq!(again.groups["dev"].examples, b.groups["dev"].examples);
        assert_eq!(again.build_key, b.build_key);
    }
}
