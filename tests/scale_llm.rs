//! The LLM rate limit under sharding (issue 34 item 6): `requests_per_second` is the provider's
//! limit, shared by every shard running at once, so shard I/N paces its requests at
//! `requests_per_second / N`. Two shards of a paraphrase recipe with `requests_per_second = 20`
//! send their requests at the same time to an OpenAI stub (tests/openai_stub), whose arrival
//! times are the judge: no 1 s window holds more than 20 requests, plus a burst tolerance of one
//! request per shard (each shard's pacing lets its first request start at once, so a window
//! that begins just before a shard's slot can hold ⌊20/N⌋ + 1 of its requests).

#[path = "scale/llm_project.rs"]
mod llm_project;
mod openai_stub;
mod tree;

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const RATE: f64 = 20.0;
const SHARDS: usize = 2;
const EXAMPLES: usize = 30;
const N: usize = 2;

/// The most request arrivals in any window of `width` (`times` in any order).
fn busiest_window(times: &[Instant], width: Duration) -> usize {
    let mut t = times.to_vec();
    t.sort();
    (0..t.len())
        .map(|i| t[i..].iter().take_while(|x| x.duration_since(t[i]) < width).count())
        .max()
        .unwrap_or(0)
}

#[test]
fn two_shards_share_one_llm_rate_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let times = Arc::new(Mutex::new(Vec::new()));
    let stub = llm_project::paraphrase_stub(times.clone());
    let recipe = llm_project::project(
        tmp.path(),
        "proj",
        EXAMPLES,
        N,
        &format!("max_concurrency = 8\nrequests_per_second = {RATE}"),
    );
    let store = tmp.path().join("store");
    let shard = |i: usize, endpoint: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_toolforge"));
        c.arg("build")
            .arg(&recipe)
            .args(["--quiet", "--store"])
            .arg(&store)
            .args(["--shard", &format!("{i}/{SHARDS}")])
            .env_remove("OPENAI_BASE_URL")
            .env_remove("TOOLFORGE_STORE")
            .env("OPENAI_API_KEY", "sk-test");
        if let Some(url) = endpoint {
            c.env("OPENAI_BASE_URL", url);
        }
        c
    };
    // Round one without an endpoint: every compile item into the store, no LLM request.
    for i in 0..SHARDS {
        let out = shard(i, None).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(times.lock().unwrap().is_empty());
    // Round two: both shards at once, each sending its share of the requests.
    let url = stub.base_url();
    let children: Vec<_> = (0..SHARDS)
        .map(|i| {
            shard(i, Some(&url))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut texts = Vec::new();
    for (i, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{text}");
        texts.push((i, text));
    }
    let times = times.lock().unwrap().clone();
    assert_eq!(
        times.len(),
        EXAMPLES * N,
        "every request sent once, by one of the shards"
    );
    let busiest = busiest_window(&times, Duration::from_secs(1));
    let first = *times.iter().min().unwrap();
    let span = times.iter().max().unwrap().duration_since(first).as_secs_f64();
    eprintln!(
        "{} requests from {SHARDS} shards over {span:.2} s; busiest 1 s window: {busiest}",
        times.len()
    );
    assert!(
        busiest <= RATE as usize + SHARDS,
        "{busiest} requests in one second from {SHARDS} shards with requests_per_second = {RATE}"
    );
    assert_eq!(stub.bodies.lock().unwrap().len(), times.len());
    for (i, text) in texts {
        assert!(
            text.contains(&format!(
                "llm: shard {i}/{SHARDS} paces its requests at {} req/s",
                RATE / SHARDS as f64
            )),
            "the shard says its share of the limit: {text}"
        );
    }
}

/// A variants recipe whose paraphrases are accepted, sharded (N = 2, rounds until no shard asks
/// for another) and merged, equals its single build byte for byte (the judge). Before, the
/// paraphrase rows went to the end of their database, so a database of several question batches
/// became one unit for its trajectory segment, computed by one round-two shard from its partial
/// build — which held only its own batches' variant rows: the merge silently lost the other
/// shard's rows (Spider dev, 100 paraphrased examples: 9,292 rows single, 8,955 merged).
#[test]
fn variants_with_accepted_paraphrases_sharded_equal_a_single_build() {
    let tmp = tempfile::tempdir().unwrap();
    let stub = llm_project::paraphrase_stub(Arc::new(Mutex::new(Vec::new())));
    let recipe = llm_project::project_with(
        tmp.path(),
        "proj",
        100,
        1,
        "obfuscate = true\n\n[variants.perturb]\nkinds = [\"case\", \"punctuation\"]",
        "max_concurrency = 8",
    );
    let url = stub.base_url();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_toolforge"))
            .arg("build")
            .arg(&recipe)
            .arg("--quiet")
            .args(args)
            .env_remove("TOOLFORGE_STORE")
            .env("OPENAI_BASE_URL", &url)
            .env("OPENAI_API_KEY", "sk-test")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{args:?}: {text}");
        text
    };
    let single = tmp.path().join("single");
    let single_store = tmp.path().join("single-store");
    run(&[
        "--no-html",
        "--out",
        single.to_str().unwrap(),
        "--store",
        single_store.to_str().unwrap(),
    ]);
    let store = tmp.path().join("store");
    let store = store.to_str().unwrap();
    let mut rounds = 0;
    loop {
        rounds += 1;
        let texts: Vec<String> = (0..SHARDS)
            .map(|i| run(&["--store", store, "--shard", &format!("{i}/{SHARDS}")]))
            .collect();
        if !texts.iter().any(|t| t.contains(toolforge::pipeline::ROUND_TWO)) {
            break;
        }
        // Three rounds: compile items; each shard's share of the requests (the first shard
        // waits for the second's answers); the waiting shard's segments. A fourth only when a
        // request failed for good (the stub answers every one).
        assert!(rounds < 4, "round {rounds} still asked for another: {texts:?}");
    }
    let merged = tmp.path().join("merged");
    run(&[
        "--no-html",
        "--out",
        merged.to_str().unwrap(),
        "--store",
        store,
        "--merge",
        "2",
    ]);
    tree::assert_same_tree(&single.join("llm-scale"), &merged.join("llm-scale"));
}
