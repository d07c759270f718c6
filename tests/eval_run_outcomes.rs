//! Failures are not answers (issue 28, item 4 of the issue / 3 of the brief): `eval run`
//! against a local OpenAI-compatible server on 127.0.0.1 that fails every request (HTTP 500,
//! after the retries) records every row as failed — in no metric, counted, listed first in the
//! report — and exits non-zero; the same run pointed at a working server then retries exactly
//! those rows and scores them. Agent episodes end with a stop reason, and only an answered
//! episode completes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use toolforge::eval::rows::EvalSet;
use toolforge::pipeline::build_and_emit;

mod eval_support;
mod openai_stub;

use eval_support::gold_answers;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn eval_run(dataset: &Path, base_url: &str, ids: &str, out: &Path, store: &Path) -> Output {
    eval_run_with(dataset, base_url, ids, out, store, &[])
}

fn eval_run_with(dataset: &Path, base_url: &str, ids: &str, out: &Path, store: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(["eval", "run"])
        .arg(dataset)
        .args([
            "--model",
            "stub",
            "--quiet",
            "--run",
            "r",
            "--concurrency",
            "2",
            "--ids",
            ids,
        ])
        .args(extra)
        .args(["--base-url", base_url])
        .arg("--databases")
        .arg(root().join("../shared/corpora/spider/database"))
        .arg("--out")
        .arg(out)
        .arg("--store")
        .arg(store)
        .env("OPENAI_API_KEY", "test")
        .output()
        .unwrap()
}

fn report(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("r").join("report.json")).unwrap()).unwrap()
}

#[test]
fn failed_requests_are_recorded_as_failed_excluded_counted_and_retried_on_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let (dataset, set) = slot_spider(tmp);
    let ids = ["slot-spider/491", "slot-spider/492"];
    let (out, store) = (tmp.join("eval"), tmp.join("llm-store"));

    // 1. Every request fails.
    let failing = openai_stub::start(|_| (500, json!({"error": {"message": "down"}})));
    let o = eval_run(&dataset, &failing.base_url(), &ids.join(","), &out, &store);
    assert!(!o.status.success(), "a run with failed rows exits non-zero");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("2 of 2 rows failed"), "{stderr}");
    let r = report(&out);
    assert_eq!(
        (r["rows"].as_u64(), r["failed"].as_u64(), r["scored"].as_u64()),
        (Some(2), Some(2), Some(0))
    );
    assert_eq!(r["failed_ids"], json!(ids));
    assert_eq!(r["totals"]["failed"], 2);
    assert!(
        r["totals"]["metrics"].as_object().unwrap().is_empty(),
        "no metric over failed rows: {}",
        r["totals"]["metrics"]
    );
    let md = std::fs::read_to_string(out.join("r/report.md")).unwrap();
    let first = md.lines().find(|l| !l.is_empty() && !l.starts_with('#')).unwrap();
    assert!(first.starts_with("**2 of 2 rows failed**"), "{first}");
    let rows: Vec<Value> = std::fs::read_to_string(out.join("r/rows.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(rows.iter().all(|r| r["status"] == "failed"));
    assert!(
        rows[0]["errors"][0].as_str().unwrap().contains("request failed"),
        "{}",
        rows[0]["errors"]
    );
    assert!(failing.bodies.lock().unwrap().len() >= 2);

    // 2. The same run against a working server: both rows retried and answered with the gold.
    let answers: HashMap<String, String> = gold_answers(&set, &ids).into_iter().collect();
    let working = openai_stub::start(move |body| {
        let text: String = body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_str())
            .collect();
        let answer = answers
            .iter()
            .find(|(q, _)| text.contains(q.as_str()))
            .map(|(_, a)| a.clone())
            .unwrap_or_else(|| "[]".into());
        (
            200,
            openai_stub::completion(json!({"role": "assistant", "content": answer})),
        )
    });
    let o = eval_run(&dataset, &working.base_url(), &ids.join(","), &out, &store);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = report(&out);
    assert_eq!((r["failed"].as_u64(), r["scored"].as_u64()), (Some(0), Some(2)));
    assert_eq!(r["accounting"]["rows_run"], 2, "the failed rows were retried");
    assert_eq!(r["totals"]["metrics"]["completion"], json!({"mean": 1.0, "n": 2}));
    assert_eq!(r["totals"]["metrics"]["exact_match"]["mean"], 1.0);
    assert_eq!(working.bodies.lock().unwrap().len(), 2);
    let preds = std::fs::read_to_string(out.join("r/predictions.jsonl")).unwrap();
    assert_eq!(
        preds.lines().count(),
        2,
        "each row's retried line replaces its failed one"
    );
    assert!(!preds.contains("\"failed\""));
}

fn slot_spider(tmp: &Path) -> (PathBuf, EvalSet) {
    build_and_emit(
        &root().join("recipes/slot-spider.toml"),
        Some(&tmp.join("out")),
        Some(&tmp.join("store")),
        false,
    )
    .unwrap();
    let dataset = tmp.join("out/slot-spider");
    let set = EvalSet::load(&dataset, Some(&root().join("../shared/corpora/spider/database"))).unwrap();
    (dataset, set)
}

#[test]
fn agent_completion_needs_an_answered_episode_and_every_stop_reason_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let (dataset, set) = slot_spider(tmp);
    let id = "slot-spider/491";
    let gold: Vec<String> = set
        .rows
        .iter()
        .find(|r| r.id == id)
        .unwrap()
        .gold
        .iter()
        .map(|c| json!({"name": c.name, "arguments": c.arguments, "label": c.label}).to_string())
        .collect();
    assert_eq!(gold.len(), 2);
    // The model's k-th turn (k = assistant messages so far): the gold's k-th call, then (when
    // `answer`) a closing text; or (when `repeat`) the first call again and again.
    let stub = |answer: bool, repeat: bool| {
        let gold = gold.clone();
        openai_stub::start(move |body| {
            let k = body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "assistant")
                .count();
            let text = match (repeat, gold.get(k)) {
                (true, _) => gold[0].clone(),
                (false, Some(c)) => c.clone(),
                (false, None) if answer => "There are 4 such ships.".into(),
                (false, None) => gold[1].clone(),
            };
            (
                200,
                openai_stub::completion(json!({"role": "assistant", "content": text})),
            )
        })
    };
    let run = |name: &str, answer: bool, repeat: bool, steps: &str| -> Value {
        let s = stub(answer, repeat);
        let out = tmp.join(name);
        let o = eval_run_with(
            &dataset,
            &s.base_url(),
            id,
            &out,
            &out.join("store"),
            &["--mode", "agent", "--max-steps", steps],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let rows = std::fs::read_to_string(out.join("r/rows.jsonl")).unwrap();
        let row: Value = serde_json::from_str(rows.lines().next().unwrap()).unwrap();
        let r = report(&out);
        assert_eq!(r["stop_reasons"].as_object().unwrap().len(), 1);
        assert!(
            std::fs::read_to_string(out.join("r/report.md"))
                .unwrap()
                .contains("## Agent stop reasons")
        );
        row
    };
    // Both gold calls ran, then the step limit: the right calls, but no finished answer.
    let row = run("limit", false, false, "2");
    assert_eq!(row["stop_reason"], "step_limit");
    assert_eq!(row["exact_match"], true, "the calls themselves are the gold");
    assert_eq!(row["completion"], false, "an unfinished episode does not complete");
    // The same calls, then an answer: complete.
    let row = run("answered", true, false, "3");
    assert_eq!(
        (row["stop_reason"].as_str(), row["completion"].as_bool()),
        (Some("answered"), Some(true))
    );
    // The first call repeated: the episode stops at the repeat.
    let row = run("repeat", false, true, "5");
    assert_eq!(
        (row["stop_reason"].as_str(), row["completion"].as_bool()),
        (Some("repeated_call"), Some(false))
    );
    assert_eq!(row["predicted_calls"], 1);
}

/// The answer in `answers` whose request is in the body's messages.
fn answer_for(answers: &[(String, String)], body: &Value) -> Option<String> {
    let text: String = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .collect();
    answers
        .iter()
        .find(|(q, _)| text.contains(q.as_str()))
        .map(|(_, a)| a.clone())
}

/// Issue 49 D3: a malformed response body (cut off; JSON that is no completion) is retried like an
/// HTTP 500, not taken as the row's final failure.
#[test]
fn malformed_response_body_is_retried_like_a_server_error() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let (dataset, set) = slot_spider(tmp);
    let ids = ["slot-spider/491", "slot-spider/492"];
    let answers = gold_answers(&set, &ids);
    // Per request body: the first answer is a cut-off body, the second JSON without choices,
    // the third the gold.
    let seen = std::sync::Mutex::new(HashMap::<String, usize>::new());
    let stub = openai_stub::start_raw(move |body| {
        let mut seen = seen.lock().unwrap();
        let n = seen.entry(body.to_string()).or_default();
        *n += 1;
        match *n {
            1 => (
                200,
                r#"{"id": "chatcmpl-x", "choices": [{"index": 0, "mess"#.to_string(),
            ),
            2 => (
                200,
                json!({"id": "chatcmpl-x", "object": "chat.completion"}).to_string(),
            ),
            _ => (
                200,
                openai_stub::completion(json!({"role": "assistant", "content": answer_for(&answers, body).unwrap()}))
                    .to_string(),
            ),
        }
    });
    let (out, store) = (tmp.join("eval"), tmp.join("llm-store"));
    let o = eval_run(&dataset, &stub.base_url(), &ids.join(","), &out, &store);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = report(&out);
    eprintln!("malformed bodies: accounting {}", r["accounting"]);
    assert_eq!((r["failed"].as_u64(), r["scored"].as_u64()), (Some(0), Some(2)));
    assert_eq!(
        r["accounting"]["retries"], 4,
        "two malformed bodies per row, each retried"
    );
    assert_eq!(r["totals"]["metrics"]["completion"], json!({"mean": 1.0, "n": 2}));
    assert_eq!(stub.bodies.lock().unwrap().len(), 6);
}

/// Issue 49 D3: `--timeout` bounds each attempt (a row that never answers in time is failed after
/// the retries, not after 600 s each); a failed row's `rows.jsonl` line carries no score at all
/// (absent, not 0); the table's `Rows` column counts the rows the means cover and says how many
/// failed.
#[test]
fn timeout_flag_bounds_each_attempt_and_failed_rows_carry_no_score() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let (dataset, set) = slot_spider(tmp);
    let ids = ["slot-spider/491", "slot-spider/492"];
    let answers = gold_answers(&set, &ids);
    let slow = answers[0].0.clone();
    // The first row's request is answered only after 4 s; the second at once with its gold.
    let stub = openai_stub::start(move |body| {
        if body.to_string().contains(&slow) {
            std::thread::sleep(std::time::Duration::from_secs(4));
        }
        let answer = answer_for(&answers, body).unwrap();
        (
            200,
            openai_stub::completion(json!({"role": "assistant", "content": answer})),
        )
    });
    let (out, store) = (tmp.join("eval"), tmp.join("llm-store"));
    let started = std::time::Instant::now();
    let o = eval_run_with(
        &dataset,
        &stub.base_url(),
        &ids.join(","),
        &out,
        &store,
        &["--timeout", "1"],
    );
    let took = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&o.stderr);
    eprintln!("--timeout 1: the run took {took:.1} s; {stderr}");
    assert!(!o.status.success(), "a run with a failed row exits non-zero");
    assert!(stderr.contains("1 of 2 rows failed"), "{stderr}");
    // 5 attempts of 1 s and the backoff between them (0.5 + 1 + 2 + 4 s): far below 600 s.
    assert!(took < 60.0, "took {took} s");
    let r = report(&out);
    assert_eq!(r["failed_ids"], json!([ids[0]]));
    assert_eq!(r["totals"]["metrics"]["completion"], json!({"mean": 1.0, "n": 1}));
    let rows: Vec<Value> = std::fs::read_to_string(out.join("r/rows.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[0]["status"], "failed");
    assert!(
        rows[0]["errors"][0].as_str().unwrap().contains("timeout"),
        "{}",
        rows[0]["errors"]
    );
    for field in toolforge::eval::score::SCORE_FIELDS {
        assert!(rows[0].get(field).is_none(), "failed row has {field}: {}", rows[0]);
    }
    assert_eq!(rows[1]["status"], "scored");
    assert_eq!(rows[1]["completion"], true);
    assert_eq!(rows[1]["intent"]["f1"], 1.0);
    // The table: the means cover 1 row, 1 failed.
    let md = std::fs::read_to_string(out.join("r/report.md")).unwrap();
    let line = md.lines().find(|l| l.starts_with("| stub |")).unwrap();
    assert!(line.starts_with("| stub | 1 (1 failed) |"), "{line}");
    // `eval report` still reads the run back.
    let cmp = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(["eval", "report"])
        .arg(out.join("r"))
        .arg("--out")
        .arg(tmp.join("cmp"))
        .output()
        .unwrap();
    assert!(cmp.status.success(), "{}", String::from_utf8_lossy(&cmp.stderr));
}
