//! LLM stages through the Batch API (issue 19 item 5) and LLM requests shared out by shards
//! (issue 19 item 2), against the REAL local LLM server (`tests/llm-server`: node-llama-cpp +
//! SmolLM2 on 127.0.0.1), whose Batch API routes (`/v1/files`, `/v1/batches`) run each line on
//! the same model.
//!
//! Asserted:
//! - a batch build sends no live request; a build stopped (SIGKILL) while it waits for the batch
//!   resumes the same batch when re-run (one batch submitted, not two);
//! - a line the batch answers with an error is reported (`llm_error:batch_http_500`) and not
//!   cached; the next build submits a batch of only those lines; a malformed line in the output
//!   file (the server writes one first) is skipped without losing the other answers;
//! - batch and live answers are interchangeable: a live build over the same store sends nothing
//!   and writes the same data files;
//! - `--shard I/N` builds of a recipe with paraphrases: a shard that lacks other shards' compile
//!   items says its LLM requests wait; once every compile item is in the store each shard sends
//!   only its share, every request is sent exactly once across the shards, and the merge writes
//!   the dataset from the store alone.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;
use toolforge::pipeline::{build_and_emit, compile};

mod llm_server;
mod tree;

use llm_server::project;

const EXAMPLES: usize = 4;
const N: usize = 2;

fn llm_table(port: u16, batch: bool) -> String {
    format!(
        "[variants.paraphrase]\nn = {N}\nmax_examples = {EXAMPLES}\n\n[variants.llm]\nbase_url = \"http://127.0.0.1:{port}/v1\"\nmodel = \"smollm2-135m-instruct\"\ntemperature = 0.8\nseed = 7\nmax_tokens = 48\nmax_attempts = 4\ninitial_backoff_ms = 20\ntimeout_secs = 60\nbatch = {batch}\nbatch_poll_secs = 0.2\n"
    )
}

/// The first example paraphrased (the first original in group order).
fn first_question(tmp: &Path) -> String {
    let plain = project(
        tmp,
        "plain",
        &format!("[variants.paraphrase]\nn = 1\nmax_examples = {EXAMPLES}\n"),
    );
    let b = compile(&plain, Some(&tmp.join("store")), false).unwrap();
    b.groups
        .values()
        .flat_map(|o| &o.examples)
        .next()
        .unwrap()
        .input
        .clone()
}

#[test]
fn paraphrases_through_the_batch_api_resume_retry_failed_lines_and_match_live_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let store = tmp.join("store");
    let question = first_question(tmp);
    let Some(server) = llm_server::start(
        "the LLM batch test",
        tmp,
        &[
            ("BATCH_DELAY_MS", "2500"),
            ("BATCH_FAIL_MATCH", question.as_str()),
            ("BATCH_BAD_LINE", "1"),
        ],
    ) else {
        return;
    };
    let port = server.port;
    let recipe = project(tmp, "batch", &llm_table(port, true));

    // 1. A build stopped while it waits for its batch.
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .arg("build")
        .arg(&recipe)
        .arg("--quiet")
        .arg("--store")
        .arg(&store)
        .arg("--out")
        .arg(tmp.join("out-killed"))
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        seen.push(line.clone());
        if line.contains("submitted") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        seen.iter()
            .any(|l| l.contains(&format!("submitted {} requests", EXAMPLES * N))),
        "{seen:?}"
    );
    let s = llm_server::stats(port);
    assert_eq!(
        (s["batches"].as_u64(), s["requests"].as_u64()),
        (Some(1), Some(0)),
        "{s}"
    );

    // 2. Re-run: the same batch is resumed; the failing prompt's lines are reported, not cached.
    let b1 = compile(&recipe, Some(&store), false).unwrap();
    let s = llm_server::stats(port);
    eprintln!(
        "after resume: server {s}\nllm_run {}\nparaphrase {:#}",
        b1.stats["llm_run"], b1.stats["paraphrase"]
    );
    assert_eq!(
        s["batches"], 1,
        "the stopped build's batch was resumed, not submitted again"
    );
    assert_eq!(s["requests"], 0, "no live request in batch mode");
    assert_eq!(s["batch_lines"], EXAMPLES * N);
    assert_eq!(b1.stats["llm_run"]["batches"], 0);
    assert_eq!(b1.stats["llm_run"]["failed"], N);
    assert_eq!(
        b1.stats["paraphrase"]["rejected_by_reason"]["llm_error:batch_http_500"],
        N
    );
    assert_eq!(b1.stats["paraphrase"]["attempted"], EXAMPLES * N);

    // 3. The next build submits a batch of only the failed lines.
    let b2 = compile(&recipe, Some(&store), false).unwrap();
    let s = llm_server::stats(port);
    assert_eq!(s["batches"], 2);
    assert_eq!(s["batch_lines"], EXAMPLES * N + N);
    assert_eq!(b2.stats["llm_run"]["batch_requests"], N);
    assert_eq!(b2.stats["llm_run"]["failed"], 0);
    assert_eq!(b2.stats["llm_run"]["from_store"], EXAMPLES * N - N);
    assert!(
        b2.stats["paraphrase"]["rejected_by_reason"]
            .get("llm_error:batch_http_500")
            .is_none()
    );

    // 4. Batch answers serve a live build (same store keys): nothing sent, same data files.
    let live = project(tmp, "live", &llm_table(port, false));
    build_and_emit(&recipe, Some(&tmp.join("out-batch")), Some(&store), false).unwrap();
    build_and_emit(&live, Some(&tmp.join("out-live")), Some(&store), false).unwrap();
    assert_eq!(llm_server::stats(port), s, "a rebuild contacted the server");
    let data = |o: &str| tree::files(&tmp.join(o).join("llm-paraphrase/data"));
    let (fb, fl) = (data("out-batch"), data("out-live"));
    assert!(!fb.is_empty());
    tree::assert_same_files(&fb, &fl, "batch vs live data files");
    let report = |o: &str| -> Value {
        serde_json::from_slice(&std::fs::read(tmp.join(o).join("llm-paraphrase/report/verification.json")).unwrap())
            .unwrap()
    };
    assert_eq!(
        report("out-batch")["stats"]["paraphrase"],
        report("out-live")["stats"]["paraphrase"]
    );
}

fn toolforge(args: &[&str], recipe: &Path, store: &Path) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .arg("build")
        .arg(recipe)
        .args(["--quiet", "--store"])
        .arg(store)
        .args(args)
        .output()
        .unwrap();
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[test]
fn sharded_builds_send_each_llm_request_once_in_a_second_round() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let Some(server) = llm_server::start("the sharded LLM test", tmp, &[]) else {
        return;
    };
    let port = server.port;
    let recipe = project(tmp, "sharded", &llm_table(port, false));
    let store = tmp.join("shared-store");

    // Round one, shards one after the other: each computes only its own compile items (it
    // reads no other shard's entry) and says its later stages wait; no request is sent.
    for i in 0..2 {
        let (ok, text) = toolforge(&["--shard", &format!("{i}/2")], &recipe, &store);
        assert!(ok && text.contains(toolforge::pipeline::ROUND_TWO), "{text}");
    }
    assert_eq!(llm_server::stats(port)["completions"], 0);

    // A merge now names the LLM answers it lacks.
    let early = tmp.join("out-early");
    let (ok, text) = toolforge(&["--merge", "2", "--out", early.to_str().unwrap()], &recipe, &store);
    assert!(!ok && text.contains("llm-chat"), "{text}");

    // Round two: every compile item is stored; shard 0 sends only its share, and its
    // trajectories (keyed by the build key, which the answers fold into) wait for shard 1's
    // answers; shard 1 then sends its share and finds every answer.
    let (ok, text) = toolforge(&["--shard", "0/2"], &recipe, &store);
    assert!(ok && text.contains(toolforge::pipeline::ROUND_TWO), "{text}");
    let first = llm_server::stats(port)["completions"].as_u64().unwrap() as usize;
    assert!(
        first > 0 && first < EXAMPLES * N,
        "shard 0 sends only its share: {first}"
    );
    let (ok, text) = toolforge(&["--shard", "1/2"], &recipe, &store);
    assert!(ok && !text.contains(toolforge::pipeline::ROUND_TWO), "{text}");
    // Round three: shard 0's trajectories, now that every answer is stored.
    let (ok, text) = toolforge(&["--shard", "0/2"], &recipe, &store);
    assert!(ok && !text.contains(toolforge::pipeline::ROUND_TWO), "{text}");
    let s = llm_server::stats(port);
    assert_eq!(
        s["completions"],
        EXAMPLES * N,
        "each request sent exactly once across the shards: {s}"
    );

    // The merge writes the dataset from the store alone.
    let out = tmp.join("out");
    let (ok, text) = toolforge(&["--merge", "2", "--out", out.to_str().unwrap()], &recipe, &store);
    assert!(ok, "{text}");
    assert_eq!(llm_server::stats(port), s, "the merge contacted the server");
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("llm-paraphrase/report/verification.json")).unwrap()).unwrap();
    assert_eq!(report["stats"]["paraphrase"]["attempted"], EXAMPLES * N);
    assert!(
        report["stats"]["paraphrase"]["rejected_by_reason"]
            .get("llm_error:unclaimed")
            .is_none()
    );
}
