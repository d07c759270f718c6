//! `eval report` (issue 28, item 6): runs compared on their common rows, with paired
//! bootstrap intervals of the differences, McNemar's exact test for completion, BFCL's
//! unweighted category mean beside the row-weighted one, and charts whose legend names every
//! run in full. Runs over different rows are refused unless `--allow-different-rows` is given.
//! Two runs are scored from prediction files on 20 slot-spider rows: the gold on every row
//! (completion 100%), and the gold on 10 rows with no call on the other 10 (50%); every
//! expected figure below is computed by hand from that construction.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use toolforge::eval::predictions::line;
use toolforge::eval::rows::EvalSet;
use toolforge::pipeline::build_and_emit;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn toolforge(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolforge"))
        .args(args)
        .output()
        .unwrap()
}

fn score(dataset: &Path, preds: &Path, out: &Path, run: &str, limit: &str) {
    let dbs = root().join("../shared/corpora/spider/database");
    let o = toolforge(&[
        "eval",
        "score",
        dataset.to_str().unwrap(),
        preds.to_str().unwrap(),
        "--run",
        run,
        "--limit",
        limit,
        "--out",
        out.to_str().unwrap(),
        "--databases",
        dbs.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn report_pairs_runs_on_common_rows_with_intervals_mcnemar_and_category_means() {
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
    let set = EvalSet::load(&dataset, Some(&root().join("../shared/corpora/spider/database"))).unwrap();
    let rows: Vec<_> = set.rows.iter().take(20).collect();
    let gold: String = rows.iter().map(|r| line(&r.id, &r.gold) + "\n").collect();
    // The second run answers the odd rows with no call.
    let half: String = rows
        .iter()
        .enumerate()
        .map(|(i, r)| line(&r.id, if i % 2 == 0 { &r.gold } else { &[] }) + "\n")
        .collect();
    std::fs::write(tmp.join("gold.jsonl"), gold).unwrap();
    std::fs::write(tmp.join("half.jsonl"), half).unwrap();
    let eval = tmp.join("eval");
    let long_a = "baseline-gold-predictions-with-a-long-run-name";
    let long_b = "half-answered-predictions-with-a-long-run-name";
    score(&dataset, &tmp.join("gold.jsonl"), &eval, long_a, "20");
    score(&dataset, &tmp.join("half.jsonl"), &eval, long_b, "20");
    score(&dataset, &tmp.join("half.jsonl"), &eval, "fewer", "10");
    let (a, b, c) = (eval.join(long_a), eval.join(long_b), eval.join("fewer"));
    let out = tmp.join("compare");

    // Different row sets: refused, then compared on the 10 common rows when allowed.
    let o = toolforge(&[
        "eval",
        "report",
        a.to_str().unwrap(),
        c.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("different rows") && err.contains("--allow-different-rows"),
        "{err}"
    );
    let o = toolforge(&[
        "eval",
        "report",
        a.to_str().unwrap(),
        c.to_str().unwrap(),
        "--allow-different-rows",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("on 10 common rows"));

    let o = toolforge(&[
        "eval",
        "report",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.contains("2 runs on 20 common rows"), "{md}");
    // Completion 100 → 50: a difference of −50 points, its paired interval printed.
    let diff = md
        .lines()
        .find(|l| l.starts_with("| Completion | "))
        .unwrap_or_else(|| panic!("no completion difference in\n{md}"));
    let cells: Vec<&str> = diff.split('|').map(str::trim).collect();
    assert_eq!(cells[2], "-50.0", "{diff}");
    let (lo, hi) = cells[3]
        .trim_matches(|c| c == '[' || c == ']')
        .split_once(", ")
        .unwrap();
    let (lo, hi): (f64, f64) = (lo.parse().unwrap(), hi.parse().unwrap());
    assert!(lo < -50.0 && -50.0 < hi && hi < 0.0, "{diff}");
    // McNemar: b = 10 discordant rows (baseline right), c = 0: p = 2 · 0.5^10 = 0.001953.
    assert!(
        md.contains("McNemar exact test, completion: b = 10 (baseline right, run wrong), c = 0 (run right, baseline wrong), p = 0.0020: significant at 0.05."),
        "{md}"
    );
    // BFCL's unweighted category mean (category = database here), by hand: per database the
    // share of its rows the second run answered, then the plain mean over databases.
    let mut per_db: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        let e = per_db.entry(r.db_id.as_deref().unwrap()).or_default();
        e.0 += (i % 2 == 0) as u8 as f64;
        e.1 += 1.0;
    }
    let want = per_db.values().map(|(k, n)| k / n).sum::<f64>() / per_db.len() as f64 * 100.0;
    let want_line = format!("| Completion | 50.0 | {want:.1} | {} |", per_db.len());
    assert!(
        md.lines().any(|l| l.contains(long_b) && l.ends_with(&want_line)),
        "{want_line} in\n{md}"
    );
    // Chart: numbered bars, every run's full name in the legend.
    let svg = std::fs::read_to_string(out.join("charts/completion.svg")).unwrap();
    assert!(svg.contains(&format!("1. {long_a} (")), "legend names run 1 in full");
    assert!(svg.contains(&format!("2. {long_b} (")), "legend names run 2 in full");
    assert!(!svg.contains('…'), "no name cut");
    assert!(
        svg.contains("[") && svg.contains("50.0"),
        "the interval and the value in the legend"
    );

    // The run's own report: the error taxonomy of the half run counts the missing calls.
    let report = std::fs::read_to_string(b.join("report.md")).unwrap();
    let missing: usize = rows
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, r)| r.gold.len())
        .sum();
    assert!(report.contains("## Error taxonomy"), "{report}");
    assert!(
        report.contains(&format!("| missing_call | {missing} | 10 |")),
        "{report}"
    );
}
