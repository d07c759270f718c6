//! The report pages (issue 33): every build writes `report/index.html` with its data files,
//! listed in the manifest and byte-identical across builds; `--no-html` leaves them out and a
//! later build without the flag adds them; the summary names the page; every dataset row is
//! on the page once; every eval run writes its page with the rows that failed a check. (The
//! pages in a real browser: tests/browser/test_pages.py.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use toolforge::pipeline::{BuildOptions, build};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

const PAGE_FILES: [&str; 4] = [
    "report/index.html",
    "report/data.js",
    "report/rows.js",
    "report/rows/0.js",
];

fn build_into(recipe: &str, out: &Path, store: &Path, no_html: bool) -> String {
    let opts = BuildOptions {
        out_root: Some(out.to_path_buf()),
        store: Some(store.to_string_lossy().into_owned()),
        no_html,
        ..Default::default()
    };
    build(&root().join("recipes").join(format!("{recipe}.toml")), &opts).unwrap()
}

fn manifest_files(dir: &Path) -> Value {
    let m: Value = serde_json::from_slice(&std::fs::read(dir.join("MANIFEST.json")).unwrap()).unwrap();
    m["files"].clone()
}

/// The JSON inside `JSON.parse('…')` of a page's data script (the JS string's escapes undone).
fn js_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("JSON.parse('").unwrap() + "JSON.parse('".len();
    let inner = &text[start..text.rfind("')").unwrap()];
    let mut json = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        json.push(if c == '\\' { chars.next().unwrap() } else { c });
    }
    serde_json::from_str(&json).unwrap()
}

#[test]
fn build_page_is_in_the_manifest_and_byte_identical_across_builds() {
    let tmp = tempfile::tempdir().unwrap();
    let (out1, out2) = (tmp.path().join("out1"), tmp.path().join("out2"));
    let summary = build_into("rest-spider-variants", &out1, &tmp.path().join("store1"), false);
    // A fresh store: every stage computed again, the page must come out the same.
    build_into("rest-spider-variants", &out2, &tmp.path().join("store2"), false);
    let (d1, d2) = (out1.join("rest-spider-variants"), out2.join("rest-spider-variants"));
    assert!(
        summary.contains(&format!("page: {}", d1.join("report/index.html").display())),
        "{summary}"
    );
    let files = manifest_files(&d1);
    for f in PAGE_FILES {
        let bytes = std::fs::read(d1.join(f)).unwrap();
        assert!(bytes == std::fs::read(d2.join(f)).unwrap(), "{f} differs across builds");
        assert_eq!(files[f], blake3::hash(&bytes).to_hex().as_str(), "{f} in MANIFEST.json");
    }
    // No network: nothing the page loads comes from elsewhere than its own directory.
    let html = std::fs::read_to_string(d1.join("report/index.html")).unwrap();
    for remote in ["http://", "https://", "//cdn", "fetch("] {
        assert!(!html.contains(remote), "the page refers to {remote}");
    }
}

#[test]
fn no_html_build_writes_no_page_and_a_later_build_adds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, store) = (tmp.path().join("out"), tmp.path().join("store"));
    let summary = build_into("slot-spider", &out, &store, true);
    let dir = out.join("slot-spider");
    for f in PAGE_FILES {
        assert!(!dir.join(f).exists(), "{f} written with --no-html");
        assert!(manifest_files(&dir).get(f).is_none(), "{f} in the manifest");
    }
    assert!(!summary.contains("page:"), "{summary}");
    // The same build without the flag is not up to date: it writes the page.
    let summary = build_into("slot-spider", &out, &store, false);
    assert!(summary.contains("page:"), "{summary}");
    for f in PAGE_FILES {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
}

#[test]
fn page_rows_hold_every_dataset_row_once() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    build_into("slot-spider-variants", &out, &tmp.path().join("store"), false);
    let dir = out.join("slot-spider-variants");
    let mut jsonl_ids = Vec::new();
    for entry in std::fs::read_dir(dir.join("data")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            for line in std::fs::read_to_string(&path).unwrap().lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                jsonl_ids.push(v["id"].as_str().unwrap().to_string());
            }
        }
    }
    // The search index: one entry per row, ids without the "<dataset>/" prefix.
    let index = js_json(&dir.join("report/rows.js"));
    let page_ids: Vec<String> = index
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("slot-spider-variants/{}", r[0].as_str().unwrap()))
        .collect();
    assert_eq!(page_ids.len(), jsonl_ids.len());
    assert_eq!(
        page_ids.iter().collect::<BTreeSet<_>>(),
        jsonl_ids.iter().collect::<BTreeSet<_>>()
    );
    // The chunks: the same rows in the same order; every variant row names a parent on the
    // page, and a drift row carries a schema diff.
    let mut rows = Vec::new();
    for n in 0.. {
        let path = dir.join(format!("report/rows/{n}.js"));
        if !path.exists() {
            break;
        }
        rows.extend(js_json(&path).as_array().unwrap().clone());
    }
    let chunk_ids: Vec<String> = rows.iter().map(|r| r["i"].as_str().unwrap().to_string()).collect();
    assert_eq!(chunk_ids, page_ids);
    let ids: BTreeSet<&String> = page_ids.iter().collect();
    let mut drift = 0;
    for r in rows.iter().filter(|r| r.get("x").is_some()) {
        assert!(ids.contains(&r["x"]["of"].as_str().unwrap().to_string()), "{}", r["i"]);
        if r["x"]["kind"] == "drift" {
            drift += 1;
            assert!(
                !r["x"]["schema"].as_array().unwrap().is_empty(),
                "{}: no schema diff",
                r["i"]
            );
        }
    }
    assert!(drift > 0, "no drift row");
}

#[test]
fn eval_run_page_lists_the_rows_that_failed_a_check() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    build_into("slot-spider", &out, &tmp.path().join("store"), false);
    let dir = out.join("slot-spider");
    // Gold calls, every third row with its last call removed.
    let text = std::fs::read_to_string(dir.join("data/dev.jsonl")).unwrap();
    let mut preds = String::new();
    for (i, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).unwrap();
        let mut calls: Vec<Value> = v["output"].as_array().unwrap().clone();
        if i % 3 == 0 && calls.len() > 1 {
            calls.pop();
        }
        preds.push_str(&serde_json::json!({"id": v["id"], "output": calls}).to_string());
        preds.push('\n');
    }
    let pred_path = tmp.path().join("preds.jsonl");
    std::fs::write(&pred_path, preds).unwrap();
    let evals = tmp.path().join("eval");
    let status = Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(["eval", "score"])
        .arg(&dir)
        .arg(&pred_path)
        .arg("--out")
        .arg(&evals)
        .args(["--run", "r"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    let run = evals.join("r");
    let html = std::fs::read_to_string(run.join("index.html")).unwrap();
    let start = html.find(r#"id="tf-data">"#).unwrap() + r#"id="tf-data">"#.len();
    let data: Value = serde_json::from_str(&html[start..start + html[start..].find("</script>").unwrap()]).unwrap();
    // The failures are exactly the rows whose rows.jsonl result failed a check.
    let failed: BTreeSet<String> = std::fs::read_to_string(run.join("rows.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| {
            r["exact_match"] == false
                || r["status"] != "scored"
                || !r["errors"].as_array().unwrap().is_empty()
                || ["completion", "bfcl_ast", "irrelevance", "drift_pass"]
                    .iter()
                    .any(|k| r[*k] == false)
        })
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    let listed: BTreeSet<String> = data["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect();
    assert!(!failed.is_empty());
    assert_eq!(listed, failed);
    let report: Value = serde_json::from_slice(&std::fs::read(run.join("report.json")).unwrap()).unwrap();
    for m in data["metrics"].as_array().unwrap() {
        assert_eq!(
            m["mean"],
            report["totals"]["metrics"][m["key"].as_str().unwrap()]["mean"]
        );
    }
}

#[test]
fn drop_examples_show_the_dropped_question_and_its_gold_sql() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    build_into("slot-spider", &out, &tmp.path().join("store"), false);
    let dir = out.join("slot-spider");
    // The independent record: Spider's dev.json, by position.
    let dev: Value =
        serde_json::from_slice(&std::fs::read(root().join("../shared/corpora/spider/dev.json")).unwrap()).unwrap();
    let report: Value = serde_json::from_slice(&std::fs::read(dir.join("report/verification.json")).unwrap()).unwrap();
    let drops = report["dropped_list"].as_array().unwrap();
    assert!(!drops.is_empty());
    for d in drops {
        let n: usize = d["id"].as_str().unwrap().rsplit('/').next().unwrap().parse().unwrap();
        assert_eq!(d["question"], dev[n]["question"], "{d}");
        assert_eq!(d["source"], dev[n]["query"], "{d}");
    }
    // The page's examples carry them: every reason's examples.
    let data = js_json(&dir.join("report/data.js"));
    let examples = data["drop_examples"].as_object().unwrap();
    assert_eq!(examples.len(), report["dropped_by_reason"].as_object().unwrap().len());
    for (reason, list) in examples {
        for e in list.as_array().unwrap() {
            assert!(!e["question"].as_str().unwrap().is_empty(), "{reason}: {e}");
            assert!(!e["source"].as_str().unwrap().is_empty(), "{reason}: {e}");
        }
    }
}

#[test]
fn comparison_page_shows_the_comparison_as_html_tables_with_each_runs_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    build_into("slot-spider", &out, &tmp.path().join("store"), false);
    let dir = out.join("slot-spider");
    // Gold calls, every other row with no call: a run with known failures.
    let text = std::fs::read_to_string(dir.join("data/dev.jsonl")).unwrap();
    let mut preds = String::new();
    for (i, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line).unwrap();
        let calls = if i % 2 == 0 {
            v["output"].clone()
        } else {
            serde_json::json!([])
        };
        preds.push_str(&serde_json::json!({"id": v["id"], "output": calls}).to_string());
        preds.push('\n');
    }
    let pred_path = tmp.path().join("preds.jsonl");
    std::fs::write(&pred_path, preds).unwrap();
    let evals = tmp.path().join("eval");
    let run = |args: &[&std::ffi::OsStr]| {
        let o = Command::new(env!("CARGO_BIN_EXE_toolforge"))
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    run(&[
        "eval".as_ref(),
        "score".as_ref(),
        dir.as_os_str(),
        pred_path.as_os_str(),
        "--out".as_ref(),
        evals.as_os_str(),
        "--run".as_ref(),
        "half".as_ref(),
    ]);
    let compare = tmp.path().join("compare");
    let half = evals.join("half");
    run(&[
        "eval".as_ref(),
        "report".as_ref(),
        half.as_os_str(),
        half.as_os_str(),
        "--out".as_ref(),
        compare.as_os_str(),
        "--html".as_ref(),
    ]);
    let html = std::fs::read_to_string(compare.join("index.html")).unwrap();
    assert!(!html.contains("<pre"), "the comparison is not preformatted text");
    // The first table is the row-weighted means: one row per run, each run's own totals.
    let start = html
        .find(r#"<table class="compare-table""#)
        .expect("a comparison table");
    let table = &html[start..start + html[start..].find("</table>").unwrap()];
    let cells = |row: &str, tag: &str| -> Vec<String> {
        row.split(&format!("<{tag}"))
            .skip(1)
            .filter(|c| c.starts_with('>') || c.starts_with(' '))
            .map(|c| c[c.find('>').unwrap() + 1..c.find(&format!("</{tag}>")).unwrap()].to_string())
            .collect()
    };
    let (head, body) = table.split_at(table.find("<tbody>").unwrap());
    let header = cells(head, "th");
    let rows: Vec<Vec<String>> = body.split("<tr>").skip(1).map(|r| cells(r, "td")).collect();
    assert_eq!(rows.len(), 2, "{table}");
    let report: Value = serde_json::from_slice(&std::fs::read(half.join("report.json")).unwrap()).unwrap();
    let headers: std::collections::BTreeMap<&str, &str> = [("Completion", "completion"), ("EM", "exact_match")].into();
    for row in &rows {
        assert_eq!(row[1], report["rows"].to_string());
        for (h, key) in &headers {
            let i = header
                .iter()
                .position(|x| x == h)
                .unwrap_or_else(|| panic!("{h} in {header:?}"));
            let want = format!(
                "{:.1}",
                report["totals"]["metrics"][key]["mean"].as_f64().unwrap() * 100.0
            );
            assert_eq!(row[i], want, "{h}");
        }
    }
    // The page and compare.md come from one document: compare.json.
    let doc: Value = serde_json::from_slice(&std::fs::read(compare.join("compare.json")).unwrap()).unwrap();
    let tables = doc.as_array().unwrap().iter().filter(|b| b["kind"] == "table").count();
    assert_eq!(html.matches(r#"<table class="compare-table""#).count(), tables);
}
