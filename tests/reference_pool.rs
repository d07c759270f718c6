//! `tool_pool = "reference"` (issue 11, item 6): the kept rows use only the call forms the Live
//! API-Bench reference tools execute faithfully, the others are dropped with their own reason
//! code, and the knob is refused where it means nothing. The replay through IBM's own tools is
//! tests/reference/replay.py (the package is not on PyPI).

use std::path::{Path, PathBuf};

use toolforge::emit::reverify;
use toolforge::pipeline::build_and_emit;
use toolforge::recipe::Recipe;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Every kept row of `dir` as JSON objects.
fn rows(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("data/dev.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn reference_pool_keeps_only_reference_call_forms_rewrites_like_and_reports_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, store) = (tmp.path().join("out"), tmp.path().join("store"));
    let recipe = root().join("recipes/slot-spider-reference.toml");
    build_and_emit(&recipe, Some(&out), Some(&store), false).unwrap();
    let dir = out.join("slot-spider-reference");
    let report = read_json(&dir.join("report/verification.json"));
    assert_eq!(report["attempted"], 1034);
    let kept = report["kept"].as_u64().unwrap();
    assert!(kept >= 450, "reference pool keeps {kept}/1034");
    let outside = report["dropped_by_reason"]["outside_reference_pool"]
        .as_u64()
        .unwrap_or(0);
    assert!(outside > 100, "outside_reference_pool drops: {outside}");
    // Every such drop names the call (or setup step) and why it is outside the pool; rows
    // whose subquery or set operation reads a further joined table are outside (one active
    // table in the reference's harness).
    let mut further = 0;
    for d in report["dropped_list"].as_array().unwrap() {
        if d["reason"] == "outside_reference_pool" {
            let detail = d["detail"].as_str().unwrap();
            assert!(
                detail.starts_with("call ")
                    || detail.starts_with("join step")
                    || detail.starts_with("setup step `starting_table_var_"),
                "{detail}"
            );
            further += usize::from(detail.starts_with("setup step"));
        }
    }
    assert!(further > 0, "no row with a further joined table was refused");
    let comparisons = [
        "equal_to",
        "not_equal_to",
        "greater_than",
        "less_than",
        "greater_than_equal_to",
        "less_than_equal_to",
        "contains",
    ];
    let rows = rows(&dir);
    assert_eq!(rows.len() as u64, kept);
    for row in &rows {
        let setup: serde_json::Value = serde_json::from_str(row["initialization_step"].as_str().unwrap()).unwrap();
        for c in setup["arguments"]["condition_sequence"].as_array().unwrap() {
            assert_eq!(c[2], "INNER", "{}", row["id"]);
        }
        // The reference's harness holds one active table: no further setup steps.
        assert_eq!(row["additional_setup_steps"], "[]", "{}", row["id"]);
        for call in row["output"].as_array().unwrap() {
            let name = call["name"].as_str().unwrap();
            assert!(
                [
                    "filter_data",
                    "sort_data",
                    "retrieve_data",
                    "aggregate_data",
                    "concatenate_data"
                ]
                .contains(&name),
                "{}: {name}",
                row["id"]
            );
            let args: serde_json::Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
            if name == "filter_data" {
                let condition = args["condition"].as_str().unwrap();
                assert!(comparisons.contains(&condition), "{}: {condition}", row["id"]);
                assert!(!args["value"].is_null(), "{}", row["id"]);
            }
            if name == "aggregate_data" {
                let agg = args["aggregation_type"].as_str().unwrap();
                assert!(
                    ["count", "sum", "mean", "min", "max"].contains(&agg),
                    "{}: {agg}",
                    row["id"]
                );
            }
        }
    }
    // slot-spider/39: `SELECT name, country FROM singer WHERE song_name LIKE '%Hey%'`. The
    // reference's `like` swaps pattern and text, so the row is only replayable as `contains`.
    let row = rows
        .iter()
        .find(|r| r["id"] == "slot-spider-reference/39")
        .expect("row 39 kept");
    let first: serde_json::Value = serde_json::from_str(row["output"][0]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        (&first["condition"], &first["value"]),
        (&serde_json::json!("contains"), &serde_json::json!("Hey"))
    );
    // An OR whose branches share no row is the reference's concatenate_data; one whose branches
    // overlap is dropped, naming the rows both hold.
    let concatenated = rows
        .iter()
        .filter(|r| {
            r["output"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["name"] == "concatenate_data")
        })
        .count();
    assert!(concatenated > 0, "no OR kept as concatenate_data");
    // The rows still verify against SQLite, and the card says which pool they use.
    let (ok, bad) = reverify(&dir, Some(&root().join("../shared/corpora/spider/database"))).unwrap();
    assert_eq!((ok, bad), (kept as usize, 0));
    let card = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        card.contains("Tool pool: **reference**"),
        "card lacks the pool paragraph"
    );
}

/// SEL under `tool_pool = "reference"` (no pool before: 75 of its 482 rows called
/// `compute_data_<agg>_distinct` or English-plural getters that IBM's sequencing harness does not
/// have). Kept rows call only in-pool SEL tools under IBM's names (`get_<column>s`,
/// `compute_data_<agg>` with `distinct`), each offered by the row's toolkit; drops name the SEL
/// call outside the pool; the rows still verify. tests/reference/replay.py replays them through
/// IBM's own sequencing tools.
#[test]
fn sel_reference_pool_uses_ibm_sequencing_names_and_names_the_sel_call_in_drops() {
    use toolforge::tools::reference::decisions;
    let tmp = tempfile::tempdir().unwrap();
    let (out, store) = (tmp.path().join("out"), tmp.path().join("store"));
    let recipe = root().join("recipes/sel-spider-reference.toml");
    build_and_emit(&recipe, Some(&out), Some(&store), false).unwrap();
    let dir = out.join("sel-spider-reference");
    let report = read_json(&dir.join("report/verification.json"));
    let kept = report["kept"].as_u64().unwrap();
    assert!(kept >= 450, "reference pool keeps {kept}/1034");
    let slot_calls = [
        "`filter_data` (",
        "`sort_data` (",
        "`retrieve_data` (",
        "`aggregate_data` (",
        "`combine_data` (",
    ];
    for d in report["dropped_list"].as_array().unwrap() {
        let detail = d["detail"].as_str().unwrap();
        if d["reason"] == "outside_reference_pool" && detail.starts_with("call ") {
            assert!(
                !slot_calls.iter().any(|s| detail.contains(s)),
                "names a SLOT call: {detail}"
            );
        }
    }
    let rows = rows(&dir);
    assert_eq!(rows.len() as u64, kept);
    let json = |v: &serde_json::Value| -> serde_json::Value { serde_json::from_str(v.as_str().unwrap()).unwrap() };
    for row in &rows {
        let keys: Vec<String> = json(&row["key_values_and_descriptions"])
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["key_name"].as_str().unwrap().to_string())
            .collect();
        let pattern = |name: &str| {
            if keys.iter().any(|k| name == format!("get_{k}s")) {
                "get_<column>s".to_string()
            } else {
                name.to_string()
            }
        };
        let tools: Vec<String> = json(&row["tools"])
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect();
        for t in &tools {
            let d = decisions::sel(&pattern(t)).unwrap_or_else(|| panic!("{}: tool {t} undecided", row["id"]));
            assert!(d.in_pool, "{}: toolkit offers {t}, outside the pool", row["id"]);
        }
        for call in row["output"].as_array().unwrap() {
            let name = call["name"].as_str().unwrap();
            assert!(
                tools.iter().any(|t| t == name),
                "{}: {name} not in its toolkit",
                row["id"]
            );
            if name.starts_with("compute_data_") {
                assert!(
                    json(&call["arguments"])["distinct"].is_boolean(),
                    "{}: {name}",
                    row["id"]
                );
            }
        }
    }
    let by_id = |id: &str| {
        rows.iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id} kept"))
    };
    // sel-spider/502: `SELECT count(DISTINCT RESULT) FROM battle`.
    let call = &by_id("sel-spider-reference/502")["output"][0];
    assert_eq!(call["name"], "compute_data_count");
    assert_eq!(json(&call["arguments"])["distinct"], true);
    // sel-spider/2: `SELECT name, country, age FROM singer ORDER BY age DESC`.
    let names: Vec<&str> = by_id("sel-spider-reference/2")["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "sort_data_descending",
            "get_singer_Names",
            "get_singer_Countrys",
            "get_singer_Ages"
        ]
    );
    let (ok, bad) = reverify(&dir, Some(&root().join("../shared/corpora/spider/database"))).unwrap();
    assert_eq!((ok, bad), (kept as usize, 0));
    let card = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(card.contains("get_<column>s"), "card lacks the SEL naming paragraph");
}

#[test]
fn tool_pool_reference_is_refused_outside_slot_and_sel() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("rest-reference.toml");
    std::fs::write(
        &path,
        "name = \"rest-reference\"\ndescription = \"x\"\nformat = \"rest\"\nsource = \"spider-dev\"\nsplit = \"dev\"\ntool_pool = \"reference\"\n",
    )
    .unwrap();
    let err = Recipe::load(&path).unwrap_err().to_string();
    assert!(err.contains("tool_pool") && err.contains("rest"), "{err}");
    std::fs::write(
        &path,
        "name = \"rest-reference\"\ndescription = \"x\"\nformat = \"slot\"\nsource = \"spider-dev\"\nsplit = \"dev\"\ntool_pool = \"ibm\"\n",
    )
    .unwrap();
    let err = Recipe::load(&path).unwrap_err().to_string();
    assert!(err.contains("tool_pool") || err.contains("unknown variant"), "{err}");
}
