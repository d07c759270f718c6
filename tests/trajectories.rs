//! Trajectory corpora: every trajectory of slot-spider, sel-spider and rest-spider replayed —
//! each tool message equals the re-executed result, each faulted trajectory recovers, and every
//! trajectory ends at the example's gold answer.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolforge::emit::{build_and_emit, read_rows};
use toolforge::tools::Call;
use toolforge::tools::executor::{Executor, Session, value_json};
use toolforge::tools::rest::{Endpoint, Limits};
use toolforge::trajectory::{answer_text, to_sharegpt};
use toolforge::verify::{Answer, answers_match, answers_match_ties};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dbs() -> PathBuf {
    root().join("../shared/corpora/spider/database")
}

fn build(recipe: &str, tmp: &Path) -> PathBuf {
    let out = tmp.join("out");
    build_and_emit(
        &root().join(format!("recipes/{recipe}.toml")),
        Some(&out),
        Some(&tmp.join("store")),
        false,
    )
    .unwrap();
    out.join(recipe)
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Replays one trajectory: the framework's setup call (`initialization_step`, SLOT/SEL) first and
/// again after an expired session, then the model's calls; returns the calls after the last
/// setup (the effective sequence).
fn replay(t: &Value, run: &mut dyn FnMut(&Call, &mut Session) -> String) -> Vec<Call> {
    let setup: Option<Call> = serde_json::from_value(t["initialization_step"].clone()).unwrap();
    let faults: HashMap<&str, &str> = t["faults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["tool_call_id"].as_str().unwrap(), f["kind"].as_str().unwrap()))
        .collect();
    let messages = t["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[1]["role"], "user");
    let mut session = Session::default();
    if let Some(s) = &setup {
        run(s, &mut session);
    }
    let mut effective: Vec<Call> = Vec::new();
    let mut i = 2;
    while i + 1 < messages.len() {
        let call = &messages[i]["tool_calls"][0];
        let result = &messages[i + 1];
        assert_eq!(result["role"], "tool");
        assert_eq!(result["tool_call_id"], call["id"]);
        let id = call["id"].as_str().unwrap();
        let name = call["function"]["name"].as_str().unwrap().to_string();
        let arguments = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        let content = result["content"].as_str().unwrap();
        match faults.get(id) {
            Some(&"session_expired") => {
                session = Session::default();
                if let Some(s) = &setup {
                    run(s, &mut session);
                }
                effective.clear();
            }
            Some(_) => {}
            None => {
                let label = serde_json::from_str::<Value>(content)
                    .ok()
                    .and_then(|v| v["label"].as_str().map(String::from))
                    .unwrap_or_else(|| format!("{name}_0"));
                let c = Call { name, arguments, label };
                assert_ne!(
                    c.name, "initialize_active_data",
                    "the setup is the framework's, not a model call"
                );
                assert_eq!(run(&c, &mut session), content, "{} {id}", t["id"]);
                effective.push(c);
            }
        }
        i += 2;
    }
    assert_eq!(messages.last().unwrap()["role"], "assistant");
    effective
}

#[test]
fn every_trajectory_replays_to_its_gold_answer() {
    let tmp = tempfile::tempdir().unwrap();
    for recipe in ["slot-spider", "sel-spider", "rest-spider"] {
        let dir = build(recipe, tmp.path());
        let gold: HashMap<String, (Answer, bool, Option<Vec<usize>>)> = read_rows(&dir)
            .unwrap()
            .into_iter()
            .map(|r| (r.id, (r.gold_answer.unwrap(), r.ordered, r.ties)))
            .collect();
        let executor = Executor::new(dbs());
        let endpoints: HashMap<(String, String), Endpoint> = std::fs::read(dir.join("tools/endpoints.json"))
            .ok()
            .map(|b| serde_json::from_slice::<Vec<Endpoint>>(&b).unwrap())
            .unwrap_or_default()
            .into_iter()
            .map(|e| ((e.db_id.clone(), e.name.clone()), e))
            .collect();
        let clean = lines(&dir.join("trajectories/dev.jsonl"));
        let faulted = lines(&dir.join("trajectories/dev.faults.jsonl"));
        assert_eq!(clean.len(), gold.len(), "{recipe}: one clean trajectory per example");
        assert!(faulted.len() * 10 >= clean.len(), "{recipe}: {} faulted", faulted.len());
        let mut kinds: HashMap<String, usize> = HashMap::new();
        for t in clean.iter().chain(&faulted) {
            let id = t["id"].as_str().unwrap();
            let (want, ordered, ties) = &gold[id];
            let db = id_db(&dir, id);
            let mut run = |c: &Call, s: &mut Session| -> String {
                if recipe == "rest-spider" {
                    let ep = &endpoints[&(db.clone(), c.name.clone())];
                    let values = ep.arguments_from_json(&c.arguments).unwrap();
                    let mut conn =
                        toolforge::tools::table::open_read_only(&dbs().join(&db).join(format!("{db}.sqlite"))).unwrap();
                    let rows = ep.execute(&mut conn, &values, Limits::default()).unwrap();
                    if rows.len() > 20 {
                        json!({"rows": rows[..20], "total_rows": rows.len(), "truncated": true}).to_string()
                    } else {
                        serde_json::to_string(&rows).unwrap()
                    }
                } else {
                    let v = executor.step(s, c).unwrap();
                    json!({"label": c.label, "output": value_json(v, 20)}).to_string()
                }
            };
            let effective = replay(t, &mut run);
            let setup: Option<Call> = serde_json::from_value(t["initialization_step"].clone()).unwrap();
            assert_eq!(setup.is_some(), recipe != "rest-spider", "{id}");
            assert!(
                t["tools"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|f| f["function"]["name"] != "initialize_active_data"),
                "{id}: the setup step is not a tool given to the model"
            );
            for f in t["faults"].as_array().unwrap() {
                *kinds.entry(f["kind"].as_str().unwrap().into()).or_default() += 1;
            }
            // The effective calls end at the gold answer; so does the final message.
            if recipe != "rest-spider" {
                let got = executor.run_with_setup(setup.as_ref(), &effective).unwrap();
                assert!(answers_match_ties(want, &got, *ordered, ties.as_deref()), "{id}");
            }
            assert_eq!(
                t["messages"].as_array().unwrap().last().unwrap()["content"],
                answer_text(want),
                "{id}"
            );
            let g: Answer = serde_json::from_value(t["gold_answer"].clone()).unwrap();
            assert!(answers_match(want, &g, *ordered));
        }
        let expected_kinds = if recipe == "rest-spider" { 5 } else { 6 };
        assert_eq!(kinds.len(), expected_kinds, "{recipe}: {kinds:?}");
        // ShareGPT/Hermes rendering keeps every turn.
        let s = to_sharegpt(&faulted[0]);
        assert_eq!(
            s["conversations"].as_array().unwrap().len(),
            faulted[0]["messages"].as_array().unwrap().len()
        );
        assert!(s["conversations"][0]["value"].as_str().unwrap().contains("<tools>"));
    }
}

fn id_db(dir: &Path, id: &str) -> String {
    thread_local! {
        static DBS: std::cell::RefCell<HashMap<String, String>> = Default::default();
    }
    DBS.with(|m| {
        let mut m = m.borrow_mut();
        if m.is_empty() || !m.contains_key(id) {
            for r in read_rows(dir).unwrap() {
                m.insert(r.id, r.db_id.unwrap_or_default());
            }
        }
        m[id].clone()
    })
}
