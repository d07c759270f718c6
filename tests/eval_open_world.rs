//! `eval run --mode agent --open-world` (issue 32 item 4) — PLUMBING, against a SCRIPTED
//! OpenAI-compatible endpoint (tests/openai_stub), not a model: the script searches with the
//! row's request, calls the gold endpoint through `call_tool` and answers. (The run against a
//! real model server is in tests/eval_llm.rs.)
//!
//! Checked against what the script itself saw, never against the evaluator's own numbers: the
//! model is offered only `search_tools` and `call_tool` and no catalog tool; the retrieval
//! metrics of the report equal the ones computed here by hand from the hits the script was
//! shown and the relevant tool read from `toolforge retrieval`'s `qrels/<split>.tsv`; the rows
//! complete (their answers executed on SQLite against the verified `gold_answer`); an unknown
//! tool is refused with an error the model sees and is no prediction call; every episode's
//! turns are saved and the page's failure browser carries them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use toolforge::pipeline::build_and_emit;

mod openai_stub;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `toolforge retrieval DATASET` into `out`: the relevant corpus ids of every query (every split).
fn qrels_of(dataset: &Path, out: &Path) -> BTreeMap<String, Vec<String>> {
    let o = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .arg("retrieval")
        .arg(dataset)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let name = dataset.file_name().unwrap().to_string_lossy();
    // Every split's judgements (`qrels/<split>.tsv`, one file per split of the rows).
    let mut qrels: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let dir = out.join(format!("{name}-retrieval/qrels"));
    for f in std::fs::read_dir(&dir).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_none_or(|e| e != "tsv") {
            continue;
        }
        for l in std::fs::read_to_string(&f).unwrap().lines().skip(1) {
            let c: Vec<&str> = l.split('\t').collect();
            qrels.entry(c[0].to_string()).or_default().push(c[1].to_string());
        }
    }
    assert!(!qrels.is_empty(), "no judgements in {}", dir.display());
    // The written corpus holds identical documents once (`copies` lists the merged ids, e.g. a
    // `<db>__combine_data` the same in every database); the open world keeps every copy, so a
    // row's relevant tool is the judged id or one of its copies — `own_database` picks the row's.
    let corpus = std::fs::read_to_string(out.join(format!("{name}-retrieval/corpus.jsonl"))).unwrap();
    let mut copies: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for l in corpus.lines() {
        let d: Value = serde_json::from_str(l).unwrap();
        let same = d["copies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string());
        copies.insert(d["_id"].as_str().unwrap().to_string(), same.collect());
    }
    for ids in qrels.values_mut() {
        let extra: Vec<String> = ids.iter().flat_map(|id| copies[id].clone()).collect();
        ids.extend(extra);
    }
    qrels
}

/// The relevant ids of a row of database `db`: those qualified by `db` (`<db>__<name>`) or not
/// qualified at all (a copy of another database's identical tool is not this row's tool).
fn own_database(ids: &[String], db: &str) -> Vec<String> {
    ids.iter()
        .filter(|id| id.starts_with(&format!("{db}__")) || !id.contains("__"))
        .cloned()
        .collect()
}

/// Recall@1/5/10, nDCG@10 and MRR of `hits` against `relevant`, by their textbook definitions
/// (binary relevance; BEIR / trec_eval).
fn by_hand(hits: &[String], relevant: &[String]) -> [f64; 5] {
    let rel = |h: &String| relevant.contains(h);
    let recall = |k: usize| hits.iter().take(k).filter(|h| rel(h)).count() as f64 / relevant.len() as f64;
    let dcg: f64 = hits
        .iter()
        .take(10)
        .enumerate()
        .filter(|(_, h)| rel(h))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let idcg: f64 = (0..relevant.len().min(10)).map(|i| 1.0 / ((i + 2) as f64).log2()).sum();
    let mrr = hits.iter().position(rel).map_or(0.0, |i| 1.0 / (i + 1) as f64);
    [recall(1), recall(5), recall(10), dcg / idcg, mrr]
}

/// The report's open-world metrics equal the means of `want` (one entry per row, one search
/// each).
fn assert_metrics(ow: &Value, want: &[[f64; 5]]) {
    for ranking in ["by_row", "by_search"] {
        let s = &ow[ranking];
        assert_eq!(s["queries"], want.len(), "{ranking}");
        for (i, k) in ["recall@1", "recall@5", "recall@10", "ndcg@10", "mrr"]
            .iter()
            .enumerate()
        {
            let mean = want.iter().map(|w| w[i]).sum::<f64>() / want.len() as f64;
            let got = s[*k].as_f64().unwrap();
            assert!((got - mean).abs() < 1e-9, "{ranking} {k}: {got} vs {mean}");
        }
    }
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A JSON value the dataset file keeps as JSON text.
fn parsed(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap(),
        other => other.clone(),
    }
}

/// The page's data block (`<script id="tf-data">`).
fn page_data(run: &Path) -> Value {
    let html = std::fs::read_to_string(run.join("index.html")).unwrap();
    let start = html.find(r#"id="tf-data">"#).unwrap() + r#"id="tf-data">"#.len();
    serde_json::from_str(&html[start..start + html[start..].find("</script>").unwrap()]).unwrap()
}

#[test]
fn open_world_agent_searches_then_calls_and_its_searches_are_scored_against_the_gold_tools() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    build_and_emit(
        &root().join("recipes/rest-spider.toml"),
        Some(&tmp.join("out")),
        Some(&tmp.join("store")),
        false,
    )
    .unwrap();
    let dataset = tmp.join("out/rest-spider");
    // The relevant tool of each row, from the retrieval dataset's files.
    let qrels: BTreeMap<String, String> = qrels_of(&dataset, &tmp.join("retrieval"))
        .into_iter()
        .map(|(q, mut d)| (q, d.remove(0)))
        .collect();
    // Five rows over several databases.
    let rows = jsonl(&dataset.join("data/dev.jsonl"));
    let picked: Vec<&Value> = rows.iter().step_by(97).take(5).collect();
    let refused = picked[1]["id"].as_str().unwrap().to_string();
    // The script: by request text, the gold call (or, for `refused`, an unknown tool).
    let script: BTreeMap<String, (String, Value, bool)> = picked
        .iter()
        .map(|r| {
            let gold = &parsed(&r["output"])[0];
            let id = r["id"].as_str().unwrap();
            (
                r["input"].as_str().unwrap().to_string(),
                (qrels[id].clone(), parsed(&gold["arguments"]), id == refused),
            )
        })
        .collect();
    // What each row's search showed the script: request → hit names, best first.
    let shown: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
    let seen = shown.clone();
    let answers = script.clone();
    let stub = openai_stub::start(move |body| {
        let msgs = body["messages"].as_array().unwrap();
        let request = msgs[1]["content"].as_str().unwrap().to_string();
        let (gold_id, args, refuse) = answers[&request].clone();
        let last = msgs.last().unwrap();
        let call = |name: &str, arguments: Value| {
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{}", msgs.len()), "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}}]})
        };
        let message = match (last["role"].as_str(), last["content"].as_str()) {
            (Some("user"), _) => call("search_tools", json!({"query": request, "top_k": 10})),
            (Some("tool"), Some(text)) if text.starts_with("Result of search_tools: ") => {
                let answer: Value = serde_json::from_str(&text["Result of search_tools: ".len()..]).unwrap();
                let hits: Vec<String> = answer["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["name"].as_str().unwrap().to_string())
                    .collect();
                seen.lock().unwrap().insert(request.clone(), hits);
                let name = if refuse { "no_such_tool".to_string() } else { gold_id };
                call("call_tool", json!({"name": name, "arguments": args}))
            }
            _ => json!({"role": "assistant", "content": "Done."}),
        };
        (200, openai_stub::completion(message))
    });
    let ids: Vec<&str> = picked.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let out = tmp.join("eval");
    let o = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(["eval", "run"])
        .arg(&dataset)
        .args([
            "--model",
            "script",
            "--mode",
            "agent",
            "--open-world",
            "--tool-format",
            "native",
        ])
        .args(["--quiet", "--run", "ow", "--concurrency", "1", "--ids", &ids.join(",")])
        .args(["--base-url", &stub.base_url()])
        .arg("--databases")
        .arg(root().join("../shared/corpora/spider/database"))
        .arg("--out")
        .arg(&out)
        .arg("--store")
        .arg(out.join("store"))
        .env("OPENAI_API_KEY", "test")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("eval: open world:"));

    // Only search_tools and call_tool are offered; no catalog tool is shown.
    for body in stub.bodies.lock().unwrap().iter() {
        let names: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["search_tools", "call_tool"]);
        let system = body["messages"][0]["content"].as_str().unwrap();
        for (gold_id, _, _) in script.values() {
            assert!(
                !system.contains(gold_id.rsplit("__").next().unwrap()),
                "{gold_id} shown"
            );
        }
    }

    // Completion: every row but the refused one, judged on SQLite.
    let results = jsonl(&out.join("ow/rows.jsonl"));
    for r in &results {
        let want = r["id"] != refused.as_str();
        assert_eq!(r["completion"].as_bool(), Some(want), "{r}");
    }

    // The retrieval metrics, by hand from what the searches showed: one relevant tool per row.
    let shown = shown.lock().unwrap();
    let want: Vec<[f64; 5]> = picked
        .iter()
        .map(|r| {
            by_hand(
                &shown[r["input"].as_str().unwrap()],
                &[qrels[r["id"].as_str().unwrap()].clone()],
            )
        })
        .collect();
    let report: Value = serde_json::from_slice(&std::fs::read(out.join("ow/report.json")).unwrap()).unwrap();
    let ow = &report["open_world"];
    assert_eq!(ow["rows"], picked.len());
    assert_eq!(ow["searches"], picked.len());
    assert_eq!(ow["rows_searching"], picked.len());
    assert_metrics(ow, &want);
    let r10: f64 = want.iter().map(|w| w[2]).sum();
    assert!(
        r10 > 0.0,
        "BM25 over the request finds some gold endpoint in its top 10"
    );
    assert!(
        std::fs::read_to_string(out.join("ow/report.md"))
            .unwrap()
            .contains("## Open world")
    );

    // The refused call: the model saw the error, no call was predicted; its turns are saved and
    // the page's failure browser shows them with its search.
    let preds = jsonl(&out.join("ow/predictions.jsonl"));
    let line = preds.iter().find(|p| p["id"] == refused.as_str()).unwrap();
    assert_eq!(line["output"], json!([]));
    assert_eq!(line["failed_calls"], 1);
    let turns = line["turns"].as_array().unwrap();
    let roles: Vec<&str> = turns.iter().map(|t| t["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant", "tool", "assistant"]);
    assert!(
        turns[4]["content"]
            .as_str()
            .unwrap()
            .contains("404: no tool named \"no_such_tool\"")
    );
    let data = page_data(&out.join("ow"));
    let failure = data["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == refused.as_str())
        .expect("the refused row is a failure");
    assert_eq!(failure["turns"], line["turns"]);
    assert_eq!(failure["searches"][0]["hits"].as_array().unwrap().len(), 10);
    assert_eq!(data["open_world"], report["open_world"]);
}

/// SLOT (prompt format, the calls as text): each database has its own SLOT tools, so a name is
/// shared and the catalog names it `<db_id>__<name>`; the script calls every gold call through
/// `call_tool` by that id, labels in the arguments, and the rows complete on SQLite.
#[test]
fn open_world_slot_calls_by_database_qualified_name_complete_in_the_prompt_format() {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    build_and_emit(
        &root().join("recipes/slot-spider.toml"),
        Some(&tmp.join("out")),
        Some(&tmp.join("store")),
        false,
    )
    .unwrap();
    let dataset = tmp.join("out/slot-spider");
    let qrels = qrels_of(&dataset, &tmp.join("retrieval"));
    let rows = jsonl(&dataset.join("data/dev.jsonl"));
    let picked: Vec<&Value> = rows
        .iter()
        .filter(|r| parsed(&r["output"]).as_array().unwrap().len() >= 2)
        .step_by(53)
        .take(3)
        .collect();
    // By request: the gold calls, each named by its corpus id (`<db>__<name>`, a valid function
    // name: what a model calls through `call_tool`).
    let script: BTreeMap<String, Vec<Value>> = picked
        .iter()
        .map(|r| {
            let ids = &own_database(&qrels[r["id"].as_str().unwrap()], r["db_id"].as_str().unwrap());
            let calls = parsed(&r["output"])
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    let name = c["name"].as_str().unwrap();
                    let id = format!("{}__{name}", r["db_id"].as_str().unwrap());
                    assert!(ids.contains(&id), "{id} not among the relevant ids {ids:?}: a SLOT tool is per database");
                    assert!(id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') && id.len() <= 64, "{id}: not a function name");
                    json!({"name": "call_tool", "arguments": {"name": id, "arguments": parsed(&c["arguments"]), "label": c["label"]}})
                })
                .collect();
            (r["input"].as_str().unwrap().to_string(), calls)
        })
        .collect();
    let shown: Arc<Mutex<BTreeMap<String, Vec<String>>>> = Arc::default();
    let seen = shown.clone();
    let stub = openai_stub::start(move |body| {
        let msgs = body["messages"].as_array().unwrap();
        let request = msgs[1]["content"].as_str().unwrap().to_string();
        let turn = msgs.iter().filter(|m| m["role"] == "assistant").count();
        if turn == 1 {
            let text = msgs[3]["content"].as_str().unwrap();
            let answer: Value = serde_json::from_str(&text["Result of search_tools: ".len()..]).unwrap();
            let hits = answer["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string());
            seen.lock().unwrap().insert(request.clone(), hits.collect());
        }
        let calls = &script[&request];
        let text = match turn {
            0 => json!({"name": "search_tools", "arguments": {"query": request, "top_k": 10}}).to_string(),
            k if k <= calls.len() => calls[k - 1].to_string(),
            _ => "Done.".to_string(),
        };
        (
            200,
            openai_stub::completion(json!({"role": "assistant", "content": text})),
        )
    });
    let ids: Vec<&str> = picked.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let out = tmp.join("eval");
    let o = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(["eval", "run"])
        .arg(&dataset)
        .args([
            "--model",
            "script",
            "--mode",
            "agent",
            "--open-world",
            "--max-steps",
            "12",
        ])
        .args(["--quiet", "--run", "ow", "--concurrency", "1", "--ids", &ids.join(",")])
        .args(["--base-url", &stub.base_url()])
        .arg("--databases")
        .arg(root().join("../shared/corpora/spider/database"))
        .arg("--out")
        .arg(&out)
        .arg("--store")
        .arg(out.join("store"))
        .env("OPENAI_API_KEY", "test")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // No request lists a tool: the prompt names only search_tools and call_tool.
    for body in stub.bodies.lock().unwrap().iter() {
        let system = body["messages"][0]["content"].as_str().unwrap();
        assert!(system.contains("\"name\":\"search_tools\"") && system.contains("\"name\":\"call_tool\""));
        assert!(!system.contains("\"name\":\"filter_data\""), "a SLOT tool is listed");
    }
    for r in jsonl(&out.join("ow/rows.jsonl")) {
        assert_eq!(
            (r["completion"].as_bool(), r["exact_match"].as_bool()),
            (Some(true), Some(true)),
            "{r}"
        );
    }
    let shown = shown.lock().unwrap();
    let want: Vec<[f64; 5]> = picked
        .iter()
        .map(|r| {
            let relevant = own_database(&qrels[r["id"].as_str().unwrap()], r["db_id"].as_str().unwrap());
            by_hand(&shown[r["input"].as_str().unwrap()], &relevant)
        })
        .collect();
    let report: Value = serde_json::from_slice(&std::fs::read(out.join("ow/report.json")).unwrap()).unwrap();
    assert_metrics(&report["open_world"], &want);
}
