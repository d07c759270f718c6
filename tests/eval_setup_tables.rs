//! Issue 49 D2: completion does not count a setup table as part of the answer. A row with
//! `additional_setup_steps` has several framework-loaded tables; a prediction that reads a column
//! from the first table instead of the second (both hold it) leaves the second unreferenced. The
//! live server (`toolforge serve`, one session per row) answers such a sequence with the last
//! call's output; eval must complete exactly the rows the server's answer matches the gold on.
//! The judge is the server over HTTP, not the evaluator's executor.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolforge::eval::predictions::{self, line};
use toolforge::eval::rows::{EvalRow, EvalSet};
use toolforge::eval::score::{score, select};
use toolforge::pipeline::build_and_emit;
use toolforge::serve::{ServeConfig, Toolkit, spawn};
use toolforge::tools::{Call, as_label_ref};
use toolforge::verify::{Answer, Datum, answers_match};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn spider_dbs() -> PathBuf {
    root().join("../shared/corpora/spider/database")
}

fn build(recipe: &str, tmp: &Path) -> PathBuf {
    let out = tmp.join("out");
    build_and_emit(
        &root().join("recipes").join(format!("{recipe}.toml")),
        Some(&out),
        Some(&tmp.join("store")),
        false,
    )
    .unwrap();
    out.join(recipe)
}

/// `v` with every whole-string reference to a label in `from` replaced by `to`.
fn redirect(v: &Value, from: &[&str], to: &str) -> Value {
    if as_label_ref(v).is_some_and(|l| from.contains(&l)) {
        return Value::String(format!("${to}$"));
    }
    match v {
        Value::Array(a) => Value::Array(a.iter().map(|x| redirect(x, from, to)).collect()),
        Value::Object(m) => Value::Object(m.iter().map(|(k, x)| (k.clone(), redirect(x, from, to))).collect()),
        other => other.clone(),
    }
}

/// The row's gold calls reading the first setup table wherever they read a later one; `None`
/// when they read no later one.
fn from_first_table(row: &EvalRow) -> Option<Vec<Call>> {
    let later: Vec<&str> = row.setup.iter().skip(1).map(|c| c.label.as_str()).collect();
    let first = row.setup.first()?.label.as_str();
    let calls: Vec<Call> = row
        .gold
        .iter()
        .map(|c| Call {
            arguments: c
                .arguments
                .iter()
                .map(|(k, v)| (k.clone(), redirect(v, &later, first)))
                .collect(),
            ..c.clone()
        })
        .collect();
    (calls != row.gold).then_some(calls)
}

/// Whether the last call is the sequence's only sink (no later call reads it, every other call
/// is read): then the server's last output is the whole answer.
fn one_sink(calls: &[Call]) -> bool {
    let read = |label: &str| {
        calls.iter().any(|c| {
            let text = Value::Object(c.arguments.clone()).to_string();
            text.contains(&format!("\"${label}$\""))
        })
    };
    let (last, rest) = calls.split_last().unwrap();
    !read(&last.label) && rest.iter().all(|c| read(&c.label))
}

/// The live server's verdict on `calls` for `row`: a session opened from the row's id, each call
/// over HTTP, the last output compared with `gold_answer` (`false` on any error status).
fn server_accepts(agent: &ureq::Agent, base: &str, row: &EvalRow, calls: &[Call]) -> bool {
    let post = |path: &str, body: &Value| -> (u16, Value) {
        let mut resp = agent.post(format!("{base}{path}")).send_json(body).unwrap();
        (
            resp.status().as_u16(),
            resp.body_mut().read_json().unwrap_or(Value::Null),
        )
    };
    let (s, session) = post("/sessions", &json!({"id": row.id}));
    assert_eq!(s, 200, "{}: {session}", row.id);
    let sid = session["session_id"].as_str().unwrap().to_string();
    let mut last = Value::Null;
    for c in calls {
        let (s, out) = post(
            &format!("/tools/{}", c.name),
            &json!({"session_id": sid, "arguments": c.arguments, "label": c.label}),
        );
        if s != 200 {
            return false;
        }
        last = out["output"].clone();
    }
    let datum = |v: &Value| -> Datum { serde_json::from_value(v.clone()).unwrap() };
    let got: Answer = match &last {
        Value::Array(items) => items
            .iter()
            .map(|x| match x {
                Value::Array(cells) => cells.iter().map(datum).collect(),
                one => vec![datum(one)],
            })
            .collect(),
        Value::Object(t) => {
            assert_ne!(t.get("truncated"), Some(&json!(true)), "{}: output truncated", row.id);
            t["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_array().unwrap().iter().map(datum).collect())
                .collect()
        }
        scalar => vec![vec![datum(scalar)]],
    };
    answers_match(row.gold_answer.as_ref().unwrap(), &got, row.ordered)
}

#[test]
fn unreferenced_setup_table_is_not_part_of_the_answer() {
    let tmp = tempfile::tempdir().unwrap();
    for recipe in ["slot-spider", "sel-spider", "slot-spider-variants"] {
        let dir = build(recipe, tmp.path());
        let set = EvalSet::load(&dir, Some(&spider_dbs())).unwrap();
        let config = ServeConfig {
            max_rows: 1_000_000,
            ..ServeConfig::default()
        };
        let addr = spawn(Toolkit::load(&dir, Some(&spider_dbs())).unwrap(), config).unwrap();
        let base = format!("http://{addr}");
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let with_setup: Vec<&EvalRow> = set
            .rows
            .iter()
            .filter(|r| r.setup.len() > 1)
            .filter(|r| !matches!(r.variant_kind(), Some("obfuscate" | "drift")))
            .collect();
        let cases: Vec<(&EvalRow, Vec<Call>)> = with_setup
            .iter()
            .filter_map(|r| Some((*r, from_first_table(r)?)))
            .filter(|(_, calls)| one_sink(calls))
            .collect();
        let text: String = cases.iter().map(|(r, calls)| line(&r.id, calls) + "\n").collect();
        let rows = select(&set, None, None);
        let scored = score(&set, &rows, &predictions::parse(&text));
        let (mut accepted, mut agree) = (0, 0);
        for (row, calls) in &cases {
            let server = server_accepts(&agent, &base, row, calls);
            let r = scored.rows.iter().find(|x| x.id == row.id).unwrap();
            accepted += server as usize;
            assert_eq!(
                r.completion,
                Some(server),
                "{}: eval {:?}, server {server}; {:?}",
                row.id,
                r.completion,
                r.errors
            );
            agree += 1;
        }
        eprintln!(
            "{recipe}: {} rows with additional setup steps, {} read the first table instead, the server accepts {accepted}; eval agrees on {agree}/{}",
            with_setup.len(),
            cases.len(),
            cases.len()
        );
        assert!(accepted > 0, "{recipe}: no accepted prediction to check");
        if recipe == "slot-spider-variants" {
            assert!(
                cases
                    .iter()
                    .any(|(r, _)| r.id == "slot-spider-variants/98/perturb-narrative"),
                "the issue's row is checked"
            );
        }
    }
}
