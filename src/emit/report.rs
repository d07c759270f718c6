//! The report emitter: `report/verification.json`, and the human build summary (whose last
//! line names the page, `report/index.html`, when there is one).
//!
//! `report/verification.json` schema: `{"dataset", "format", "attempted", "kept", "dropped",
//! "per_split": {split: rows}, "bad_records": n, "dropped_by_reason": {reason: n},
//! "group_kind": "database" | "split" | …, "per_group": {group: {"attempted", "kept",
//! "dropped_by_reason"}}, "stats": {family numbers, `variants`; never `llm_run`},
//! "bad_record_list": [{"file", "record", "message"}], "dropped_list": [{"id", "reason", "detail", …}],
//! "trajectories" (families with trajectories: executable and seq): {"skipped_by_reason":
//! {reason: n}, "skipped_by_group": {group: {reason: n}}}}`. The summary of a family without
//! trajectories (BFCL, MCP catalogs) says why it has none ([`super::card::no_trajectories`]).
//! `llm_run` and `store_repaired` (corrupt store entries recomputed) are printed, never written.
//! `attempted = kept + dropped` counts compiled examples; variant rows are not counted as kept.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde_json::json;

use crate::dataset::Build;

/// Counts for the report and summary.
pub(super) struct Counts {
    pub(super) attempted: usize,
    pub(super) verified: usize,
    pub(super) per_group: BTreeMap<String, (usize, usize, BTreeMap<String, usize>)>,
    pub(super) per_split: BTreeMap<String, usize>,
    pub(super) reasons: BTreeMap<String, usize>,
}

/// The counts of a build (report, card and summary).
pub(super) fn counts(build: &Build) -> Counts {
    let mut c = Counts {
        attempted: 0,
        verified: 0,
        per_group: BTreeMap::new(),
        per_split: BTreeMap::new(),
        reasons: BTreeMap::new(),
    };
    for (group, o) in &build.groups {
        let attempted = o.attempted;
        for e in &o.examples {
            *c.per_split.entry(e.split.clone()).or_insert(0) += 1;
        }
        let mut reasons = BTreeMap::new();
        for d in &o.drops {
            *reasons.entry(d.reason.clone()).or_insert(0) += 1;
            *c.reasons.entry(d.reason.clone()).or_insert(0) += 1;
        }
        // Variant rows are extra rows, not verified inputs: `attempted = kept + dropped` counts
        // the compiled examples only.
        let kept = o.examples.iter().filter(|e| !crate::variants::is_variant(e)).count();
        c.attempted += attempted;
        c.verified += kept;
        c.per_group.insert(group.clone(), (attempted, kept, reasons));
    }
    // Variant rows a merge counted without reading them (they are in its stored segments).
    for (split, n) in build
        .variant_rows_counted
        .iter()
        .flatten()
        .flat_map(|(_, by_split)| by_split)
    {
        *c.per_split.entry(split.clone()).or_insert(0) += n;
    }
    c
}

/// The `report/verification.json` document (module docs); `trajectories` (executable families:
/// `{"skipped_by_reason": {reason: n}, "skipped_by_group": {group: {reason: n}}}`) is added when
/// given.
pub(super) fn report(build: &Build, c: &Counts, trajectories: Option<serde_json::Value>) -> serde_json::Value {
    let drops: Vec<_> = build.groups.values().flat_map(|o| &o.drops).collect();
    let mut doc = json!({
        "dataset": build.recipe.name,
        "format": build.recipe.format,
        "attempted": c.attempted,
        "kept": c.verified,
        "per_split": c.per_split,
        "dropped": c.attempted - c.verified,
        "bad_records": build.bad_records.len(),
        "dropped_by_reason": c.reasons,
        "group_kind": build.group_kind,
        "per_group": c.per_group.iter().map(|(g, (a, v, r))| (g.clone(), json!({"attempted": a, "kept": v, "dropped_by_reason": r}))).collect::<serde_json::Map<_, _>>(),
        // `llm_run` (requests made vs answers from the store) differs between a build and its
        // rebuild: printed in the summary, kept out of the files.
        "stats": build.stats.iter().filter(|(k, _)| !matches!(k.as_str(), "llm_run" | crate::store::REPAIRED_STAT)).map(|(k, v)| (k.clone(), v.clone())).collect::<serde_json::Map<_, _>>(),
        "bad_record_list": build.bad_records,
        "dropped_list": drops,
    });
    if let Some(t) = trajectories {
        doc["trajectories"] = t;
    }
    doc
}

/// `a` as a percentage of `b` (0 when `b` is 0).
pub(super) fn pct(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 }
}

/// The groups (databases) whose questions were all dropped as `db_missing`, with their counts.
fn missing_databases(c: &Counts) -> Vec<(String, usize)> {
    c.per_group
        .iter()
        .filter_map(|(g, (_, _, reasons))| reasons.get("db_missing").map(|n| (g.clone(), *n)))
        .collect()
}

/// The human summary of a build: counts per group, drops by reason, stats, bad records, and
/// whether `out_dir` was written (`wrote`) or found up to date; `secs` is the wall time so far.
pub fn summary(build: &Build, out_dir: &Path, wrote: bool, secs: f64) -> String {
    let c = &counts(build);
    let mut s = String::new();
    let (items, verb) = match build.recipe.format.as_str() {
        "seq" => ("items", "converted"),
        "catalog" => ("bundles", "sampled"),
        "bfcl" => ("questions", "converted"),
        _ => ("questions", "verified"),
    };
    // Questions whose database is absent are not a yield problem: count them apart.
    let missing = missing_databases(c);
    let n_missing: usize = missing.iter().map(|(_, n)| n).sum();
    let present = c.attempted - n_missing;
    let _ = writeln!(
        s,
        "{}: {}/{} {items} {verb} ({:.1}%){} in {:.2} s [{} stages from the store, {} computed]",
        build.recipe.name,
        c.verified,
        present,
        pct(c.verified, present),
        if n_missing > 0 {
            format!(" with their database present; {n_missing} more are db_missing")
        } else {
            String::new()
        },
        secs,
        build.cache_hits,
        build.cache_misses
    );
    if n_missing > 0 {
        let m = &build.source.manifest;
        let names: Vec<&str> = missing.iter().map(|(g, _)| g.as_str()).collect();
        let _ = writeln!(
            s,
            "  db_missing: {n_missing} questions over {} absent databases ({}): download {} and set {}=/path/to/root",
            names.len(),
            names.join(", "),
            m.download,
            m.env
        );
    }
    let _ = writeln!(s, "  per {} ({verb}/attempted):", build.group_kind);
    for (g, (a, v, _)) in &c.per_group {
        let _ = writeln!(s, "    {g:<32} {v:>6}/{a:<6} {:>5.1}%", pct(*v, *a));
    }
    let mut reasons: Vec<_> = c.reasons.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    if !reasons.is_empty() {
        let _ = writeln!(s, "  dropped by reason:");
    }
    for (r, n) in reasons {
        let _ = writeln!(s, "    {r:<40} {n:>6}");
    }
    for (k, v) in &build.stats {
        match v.as_str() {
            Some(text) if k == crate::store::REPAIRED_STAT => {
                let _ = writeln!(s, "  {k}: {text}");
            }
            _ => {
                let _ = writeln!(s, "  {k}: {v}");
            }
        }
    }
    if let Some(why) = super::card::no_trajectories(&build.recipe.format) {
        // Wrapped: the summary prints no line over 300 characters (tests/catalogs.rs).
        let _ = writeln!(s, "  trajectories: none.");
        let mut line = String::new();
        for word in why.split(' ') {
            if !line.is_empty() && line.len() + word.len() > 96 {
                let _ = writeln!(s, "    {line}");
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        let _ = writeln!(s, "    {line}");
    }
    if !build.bad_records.is_empty() {
        let _ = writeln!(s, "  skipped {} bad input records:", build.bad_records.len());
        for b in build.bad_records.iter().take(10) {
            let _ = writeln!(s, "    {} record {}: {}", b.file, b.record, b.message);
        }
    }
    let _ = write!(
        s,
        "  {} {}",
        if wrote { "wrote" } else { "up to date:" },
        out_dir.display()
    );
    s.push_str(&page_line(out_dir));
    s
}

/// `\n  page: <out_dir>/report/index.html` when the dataset has its page (not built with
/// `--no-html`), else nothing.
fn page_line(out_dir: &Path) -> String {
    let page = out_dir.join(super::PAGE);
    if page.is_file() {
        format!("\n  page: {}", page.display())
    } else {
        String::new()
    }
}

/// The summary of an output found up to date without loading its stages (from its report).
pub fn up_to_date_summary(out_dir: &Path, name: &str, secs: f64) -> Result<String> {
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(out_dir.join("report/verification.json"))?)?;
    Ok(format!(
        "{name}: {}/{} items kept, checked in {secs:.2} s [no stage work]\n  up to date: {}{}",
        report["kept"],
        report["attempted"],
        out_dir.display(),
        page_line(out_dir)
    ))
}
