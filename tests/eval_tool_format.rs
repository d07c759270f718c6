//! What the model sees and how its calls come back (issue 28, item 3): `eval run
//! --tool-format native` sends the full toolkit as the request's `tools` (OpenAI function
//! schema) and reads the answer's `tool_calls` (agent mode answering each call with a `tool`
//! message carrying its `tool_call_id`); `--tool-format prompt` lists the full specification in
//! the system prompt and reads the text. A local OpenAI-compatible server (tests/openai_stub)
//! answers the gold both ways; each is scored in its mode as the gold (exact match,
//! completion), and the logged request bodies show what was sent. `--shots K` adds K solved
//! train examples.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use toolforge::eval::rows::{EvalRow, EvalSet};
use toolforge::pipeline::build_and_emit;

mod openai_stub;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
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

fn eval_run(dataset: &Path, base_url: &str, ids: &str, out: &Path, extra: &[&str]) -> Output {
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
            "1",
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
        .arg(out.join("store"))
        .env("OPENAI_API_KEY", "test")
        .output()
        .unwrap()
}

fn rows_of(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("r/rows.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The row's gold calls as a model told "the k-th call's output is `$OUT_k$`" writes them:
/// every `"$<gold label>$"` string renamed by hand, each call as OpenAI's `tool_calls` entry.
fn native_gold(row: &EvalRow) -> Vec<Value> {
    let mut text: Vec<String> = row
        .gold
        .iter()
        .map(|c| Value::Object(c.arguments.clone()).to_string())
        .collect();
    for (k, c) in row.gold.iter().enumerate() {
        for t in text.iter_mut().skip(k + 1) {
            *t = t.replace(&format!("\"${}$\"", c.label), &format!("\"$OUT_{k}$\""));
        }
    }
    row.gold
        .iter()
        .zip(text)
        .enumerate()
        .map(|(k, (c, args))| json!({"id": format!("call_{k}"), "type": "function", "function": {"name": c.name, "arguments": args}}))
        .collect()
}

/// The row's `tools` as the dataset file holds them (read without our reader; the file keeps
/// them as JSON text).
fn file_tools(dataset: &Path, id: &str) -> Vec<Value> {
    for f in std::fs::read_dir(dataset.join("data")).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        for l in text.lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            if v["id"] == id {
                // The row holds its toolkit as JSON text.
                let tools: Value = match &v["tools"] {
                    Value::String(t) => serde_json::from_str(t).unwrap(),
                    other => other.clone(),
                };
                return tools.as_array().unwrap().clone();
            }
        }
    }
    panic!("{id} not in the dataset")
}

#[test]
fn native_tool_calls_and_text_calls_are_each_scored_in_their_tool_format() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let (dataset, set) = slot_spider(tmp);
    let id = "slot-spider/491";
    let row = set.rows.iter().find(|r| r.id == id).unwrap();
    assert_eq!(row.gold.len(), 2, "two calls, the second referring to the first");
    let calls = native_gold(row);
    assert!(calls[1].to_string().contains("$OUT_0$"), "{}", calls[1]);

    // Native: the stub answers with tool_calls and a null content (what OpenAI's API returns).
    let answer_native = calls.clone();
    let native = openai_stub::start(move |_| {
        (
            200,
            openai_stub::completion(json!({"role": "assistant", "content": null, "tool_calls": answer_native})),
        )
    });
    let out = tmp.join("native");
    let o = eval_run(&dataset, &native.base_url(), id, &out, &["--tool-format", "native"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = &rows_of(&out)[0];
    assert_eq!(
        (
            r["status"].as_str(),
            r["exact_match"].as_bool(),
            r["completion"].as_bool()
        ),
        (Some("scored"), Some(true), Some(true)),
        "{r}"
    );
    let body = native.bodies.lock().unwrap()[0].clone();
    let sent = body["tools"].as_array().expect("tools in the request body");
    let want = file_tools(&dataset, id);
    let want_names: Vec<&Value> = want.iter().map(|t| &t["name"]).collect();
    let sent_names: Vec<&Value> = sent.iter().map(|t| &t["function"]["name"]).collect();
    assert_eq!(sent_names, want_names);
    for (s, w) in sent.iter().zip(&want) {
        assert_eq!(s["type"], "function");
        assert_eq!(s["function"]["description"], w["description"], "whole description");
        assert_eq!(s["function"]["parameters"], w["parameters"], "whole schema");
    }

    // Prompt: the same calls as text, and no `tools` in the request.
    let text = Value::Array(
        row.gold
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.arguments, "label": c.label}))
            .collect(),
    )
    .to_string();
    let prompt = openai_stub::start(move |_| {
        (
            200,
            openai_stub::completion(json!({"role": "assistant", "content": text})),
        )
    });
    let out = tmp.join("prompt");
    let o = eval_run(&dataset, &prompt.base_url(), id, &out, &["--tool-format", "prompt"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = &rows_of(&out)[0];
    assert_eq!(
        (r["exact_match"].as_bool(), r["completion"].as_bool()),
        (Some(true), Some(true)),
        "{r}"
    );
    assert!(prompt.bodies.lock().unwrap()[0].get("tools").is_none());

    // A text answer in native mode is the model's answer, not calls: no call predicted.
    let out = tmp.join("native-text");
    let o = eval_run(&dataset, &prompt.base_url(), id, &out, &["--tool-format", "native"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = &rows_of(&out)[0];
    assert_eq!(
        (r["predicted_calls"].as_u64(), r["completion"].as_bool()),
        (Some(0), Some(false)),
        "{r}"
    );
}

#[test]
fn native_agent_answers_each_tool_call_with_a_tool_message_and_completes() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let (dataset, set) = slot_spider(tmp);
    let id = "slot-spider/491";
    let row = set.rows.iter().find(|r| r.id == id).unwrap();
    let calls = native_gold(row);
    // Turn k (k = assistant messages so far): the gold's k-th call, then a closing answer.
    let stub = openai_stub::start(move |body| {
        let k = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        let message = match calls.get(k) {
            Some(c) => json!({"role": "assistant", "content": null, "tool_calls": [c]}),
            None => json!({"role": "assistant", "content": "There are 4 such ships."}),
        };
        (200, openai_stub::completion(message))
    });
    let out = tmp.join("agent");
    let o = eval_run(
        &dataset,
        &stub.base_url(),
        id,
        &out,
        &["--tool-format", "native", "--mode", "agent", "--max-steps", "5"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = &rows_of(&out)[0];
    assert_eq!(
        (
            r["stop_reason"].as_str(),
            r["exact_match"].as_bool(),
            r["completion"].as_bool()
        ),
        (Some("answered"), Some(true), Some(true)),
        "{r}"
    );
    let bodies = stub.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 3, "two calls, one answer");
    let last = bodies[2]["messages"].as_array().unwrap();
    let tool_msgs: Vec<&Value> = last.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_msgs.len(), 2);
    assert_eq!(tool_msgs[0]["tool_call_id"], "call_0");
    assert_eq!(tool_msgs[1]["tool_call_id"], "call_1");
    assert!(tool_msgs[0]["content"].as_str().unwrap().starts_with("Result of OUT_0"));
    let assistant: Vec<&Value> = last.iter().filter(|m| m["role"] == "assistant").collect();
    assert_eq!(assistant[0]["tool_calls"][0]["id"], "call_0");
    assert!(
        bodies
            .iter()
            .all(|b| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
    );
}

#[test]
fn prompt_shows_every_enum_value_and_whole_descriptions_of_the_toolkit() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let (dataset, _) = slot_spider(tmp);
    // slot-spider/499's gold needs the column `death_killed`: it must be in the prompt.
    let id = "slot-spider/499";
    let stub = openai_stub::start(|_| {
        (
            200,
            openai_stub::completion(json!({"role": "assistant", "content": "[]"})),
        )
    });
    let out = tmp.join("prompt");
    let o = eval_run(&dataset, &stub.base_url(), id, &out, &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let body = stub.bodies.lock().unwrap()[0].clone();
    let system = body["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(system.contains("death_killed"), "the gold's column is shown");
    let mut enums = 0;
    for t in file_tools(&dataset, id) {
        assert!(
            system.contains(&t["description"].to_string()[1..]),
            "{} description",
            t["name"]
        );
        for (name, p) in t["parameters"]["properties"].as_object().unwrap() {
            if let Some(d) = p["description"].as_str() {
                assert!(
                    system.contains(&Value::from(d).to_string()),
                    "{}.{name} description",
                    t["name"]
                );
            }
            for v in p["enum"].as_array().into_iter().flatten() {
                assert!(system.contains(&v.to_string()), "{}.{name} enum value {v}", t["name"]);
                enums += 1;
            }
        }
    }
    assert!(enums > 12, "a toolkit with more enum values than the old cut ({enums})");
}

#[test]
fn shots_put_k_train_examples_in_the_prompt_and_are_refused_without_a_train_split() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let (dataset, _) = slot_spider(tmp);
    let stub = openai_stub::start(|_| {
        (
            200,
            openai_stub::completion(json!({"role": "assistant", "content": "[]"})),
        )
    });
    // slot-spider is Spider dev only: no train rows, so --shots is refused with the reason.
    let out = tmp.join("noshots");
    let o = eval_run(&dataset, &stub.base_url(), "slot-spider/491", &out, &["--shots", "3"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("0 train rows"));
    // A train split: the dataset's own rows relabelled `train` (a copy of the build).
    let train = tmp.join("train");
    std::fs::create_dir_all(train.join("data")).unwrap();
    for e in std::fs::read_dir(&dataset).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::copy(&p, train.join(p.file_name().unwrap())).unwrap();
        }
    }
    let _ = std::fs::create_dir_all(train.join("tools"));
    for e in std::fs::read_dir(dataset.join("tools")).into_iter().flatten() {
        let p = e.unwrap().path();
        std::fs::copy(&p, train.join("tools").join(p.file_name().unwrap())).unwrap();
    }
    let mut inputs = Vec::new();
    for f in std::fs::read_dir(dataset.join("data")).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_none_or(|x| x != "jsonl") {
            continue;
        }
        let text: String = std::fs::read_to_string(&f)
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                v["split"] = json!("train");
                inputs.push(v["input"].as_str().unwrap().to_string());
                v.to_string() + "\n"
            })
            .collect();
        std::fs::write(train.join("data").join(f.file_name().unwrap()), text).unwrap();
    }
    let out = tmp.join("shots");
    let o = eval_run(
        &dataset,
        &stub.base_url(),
        "slot-spider/491,slot-spider/492",
        &out,
        &["--shots", "3", "--shots-from", train.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bodies = stub.bodies.lock().unwrap();
    assert_eq!(bodies.len(), 2, "the refused run made no request");
    let systems: Vec<String> = bodies
        .iter()
        .map(|b| b["messages"][0]["content"].as_str().unwrap().to_string())
        .collect();
    for s in &systems {
        assert_eq!(s.matches("\nRequest: ").count(), 3, "three examples");
        let shown = inputs.iter().filter(|q| s.contains(&format!("Request: {q}\n"))).count();
        assert!(shown >= 3, "the examples are train requests");
    }
}
