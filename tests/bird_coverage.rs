//! BIRD mini-dev construct coverage (issue 27's acceptance method, `just bird-coverage`): the
//! 500 gold queries of `../shared/corpora/bird/dev_databases/mini_dev_sqlite.json` built with the
//! ten absent databases rebuilt empty from `mini_dev_sqlite_tables.json` and empty/degenerate
//! answers kept, so only the lowering decides whether a row is kept. `scripts/bird_coverage.py`
//! does the building; this test runs it with the test build's executable and prints the figure.

use std::path::PathBuf;
use std::process::Command;

/// SLOT coverage floor (percent of the 500 gold queries): the coverage reached so far (460 / 500
/// on 2026-11-27, with row-wise expressions and SQLite's scalar functions, derived tables, CTEs,
/// EXISTS, scalar subqueries and LIMIT … OFFSET), so a change that loses constructs fails; issue
/// 27's target is 90.
const SLOT_FLOOR: f64 = 92.0;

fn coverage(format: &str, floor: f64) -> serde_json::Value {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("coverage.json");
    let out = Command::new("python3")
        .arg(root.join("scripts/bird_coverage.py"))
        .args(["--toolforge", env!("CARGO_BIN_EXE_toolforge"), "--format", format])
        .arg("--json")
        .arg(&json)
        .args(["--min-percent", &floor.to_string()])
        .output()
        .expect("python3 runs scripts/bird_coverage.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "BIRD mini-dev {format} coverage below {floor}% (or the build failed):\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

#[test]
fn bird_mini_dev_slot_coverage_meets_the_floor_and_every_drop_is_named() {
    let report = coverage("slot", SLOT_FLOOR);
    assert_eq!(report["attempted"], 500);
    for d in report["dropped_list"].as_array().unwrap() {
        let reason = d["reason"].as_str().unwrap_or_default();
        assert!(!reason.is_empty(), "a drop without a reason: {d}");
    }
}
