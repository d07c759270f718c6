//! Tool-catalog datasets: the MCP registry (`catalog` recipes over `mcp` sources) with ToolGym
//! task skeletons, and BFCL questions with linted gold (`bfcl` recipes over `bfcl` sources).
//!
//! - [`schema`]: normalising parameter schemas to what function-calling APIs accept, validation;
//! - [`mcp`]: LiveMCPBench / Smithery / `tools/list` ingest, rejection reasons, deduplication,
//!   `tools/mcp.json`;
//! - [`bundles`]: seeded, similarity-based tool bundles round-robin across servers;
//! - [`bfcl`]: BFCL category files (every official single-turn category by its file name), type
//!   mapping; [`bfcl_gold`]: gold choice and lint; [`bfcl_lang`]: the Java and JavaScript
//!   categories under BFCL's type rules.
//!
//! The build summary prints counts only; every list (rejected, deduplicated and fixed tools, lint
//! findings) goes to a report file (`report/catalog_fixes.json`, `report/bfcl_lint.json`).
//!
//! Like [`crate::seq`], the whole conversion is one store stage keyed by the recipe (with its
//! `[catalog]` knobs), the input hashes and the code fingerprint.
//!
//! Rows of an MCP build are task skeletons, one per bundle: `tools` = the bundle (ToolSpecs in
//! OpenAI form), `meta.reference_tools` = `[{server, tool, function, role, score}]`, `output` =
//! `[]` (no calls yet) and `input` = a deterministic template sentence: synthesising the request
//! needs an LLM endpoint, which the project does not have yet (stated in `stats`). Bundles are
//! the unit a ToolGym task is written over, which is why they, not single tools, are the rows;
//! the tool catalog itself is `tools/functions.json` + `tools/mcp.json`.

pub mod bfcl;
pub mod bfcl_gold;
pub mod bfcl_lang;
pub mod bundles;
pub mod mcp;
pub mod schema;
pub mod synthesis;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::corpus::{BadRecord, CorpusError};
use crate::dataset::{
    Build, BuildError, Example, Outcome, SplitStage, build_key, code_fingerprint, hash_inputs, split_build,
};
use crate::recipe::{Recipe, ResolvedSource};
use crate::store::{StageKey, Store};
use crate::tools::ToolSpec;

/// Version of the catalog conversion stage; bump when its output for the same inputs changes.
pub const CATALOG_VERSION: u32 = 3;

pub use crate::recipe::catalog::CatalogKnobs;

/// What a catalog conversion produces (stored as one stage result).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversion {
    /// Outcomes per split.
    pub splits: BTreeMap<String, Outcome>,
    /// Skipped malformed input records.
    pub bad_records: Vec<BadRecord>,
    /// The dataset-level catalog (`tools/functions.json`).
    pub catalog: Vec<ToolSpec>,
    /// Extra files (path under `out/<name>/` → UTF-8 text).
    pub extra_files: BTreeMap<String, String>,
    /// Report numbers.
    pub stats: serde_json::Map<String, Value>,
}

fn inputs(source: &ResolvedSource) -> Vec<std::path::PathBuf> {
    match source.manifest.format.as_str() {
        "bfcl" => bfcl::inputs(&source.root),
        _ => mcp::inputs(&source.root),
    }
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("serialise");
    s.push('\n');
    s
}

fn count<'a>(it: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for k in it {
        *m.entry(k.to_string()).or_insert(0) += 1;
    }
    m
}

/// The MCP conversion: ingest, normalise, deduplicate, sample bundles.
pub fn convert_mcp(source: &ResolvedSource, knobs: &CatalogKnobs) -> Result<Conversion, CorpusError> {
    let ing = mcp::ingest(&mcp::inputs(&source.root), &source.root)?;
    let catalog: Vec<ToolSpec> = ing
        .tools
        .iter()
        .map(|t| ToolSpec {
            name: t.function.clone(),
            description: t.description.clone(),
            parameters: t.input_schema.clone(),
            output_parameters: json!({}),
        })
        .collect();
    let sampling = bundles::Sampling {
        seed: knobs.seed,
        bundles: knobs.bundles,
        size: knobs.bundle_size,
        min_servers: knobs.min_servers,
        max_seeds: knobs.max_seeds,
        min_similarity: knobs.min_similarity,
    };
    let (drawn, dropped) = bundles::sample(&ing.tools, &sampling);
    let mut outcome = Outcome {
        attempted: knobs.bundles,
        ..Default::default()
    };
    for b in &drawn {
        let refs: Vec<Value> = b
            .members
            .iter()
            .map(|m| {
                let t = &ing.tools[m.tool];
                json!({"server": t.server, "tool": t.name, "function": t.function, "role": m.role, "score": (m.score * 1e6).round() / 1e6, "shared": m.shared})
            })
            .collect();
        let seeds: Vec<String> = b
            .members
            .iter()
            .filter(|m| m.role == "seed")
            .map(|m| format!("{} ({})", ing.tools[m.tool].function, ing.tools[m.tool].server))
            .collect();
        let servers: std::collections::BTreeSet<&str> =
            b.members.iter().map(|m| ing.tools[m.tool].server.as_str()).collect();
        outcome.examples.push(Example {
            id: format!("bundle-{:05}", b.index),
            input: format!(
                "[task skeleton, request not synthesised] Complete a task that uses {} with the tools offered.",
                seeds.join(" and ")
            ),
            tools: b.members.iter().map(|m| catalog[m.tool].clone()).collect(),
            meta: Some(json!({
                "bundle": b.index,
                "seed": knobs.seed,
                "servers": servers,
                "reference_tools": refs,
                "synthesis": "pending: the request text needs an LLM endpoint",
            })),
            ..Default::default()
        });
    }
    for (b, reason, detail) in &dropped {
        outcome.drops.push(crate::dataset::Drop {
            id: format!("bundle-{b:05}"),
            group: knobs.split.clone(),
            reason: reason.clone(),
            detail: detail.clone(),
            // A bundle that could not be drawn has no request and no members.
            ..Default::default()
        });
    }
    let fixes_by_kind = count(ing.tools.iter().flat_map(|t| t.fixes.iter().map(|f| f.kind.as_str())));
    let tools_fixed = ing
        .tools
        .iter()
        .filter(|t| t.fixes.iter().any(|f| !f.kind.starts_with("name_")))
        .count();
    let covered: std::collections::BTreeSet<usize> =
        drawn.iter().flat_map(|b| b.members.iter().map(|m| m.tool)).collect();
    let mut stats = serde_json::Map::new();
    let mut put = |k: &str, v: Value| {
        stats.insert(k.into(), v);
    };
    put("servers", json!(ing.servers.len()));
    put(
        "servers_by_shape",
        json!(count(ing.servers.iter().map(|s| s.shape.as_str()))),
    );
    put("tools_in", json!(ing.tools_in));
    put("tools_rejected", json!(ing.rejected.len()));
    put(
        "rejected_by_reason",
        json!(count(ing.rejected.iter().map(|r| r.reason.as_str()))),
    );
    put("tools_deduplicated", json!(ing.duplicates.len()));
    put(
        "tools_merged_from_other_servers",
        json!(ing.duplicates.iter().filter(|d| d.server != d.kept_server).count()),
    );
    put(
        "tools_with_server_aliases",
        json!(ing.tools.iter().filter(|t| !t.aliases.is_empty()).count()),
    );
    put("tools_emitted", json!(ing.tools.len()));
    put("tools_with_schema_fixes", json!(tools_fixed));
    put("fixes_by_kind", json!(fixes_by_kind));
    put(
        "lists",
        json!("report/catalog_fixes.json (fixed: per tool, server, tool, function, fixes; rejected; deduplicated)"),
    );
    put("bundles_requested", json!(knobs.bundles));
    put("bundles_emitted", json!(drawn.len()));
    put("bundle_knobs", json!(knobs));
    put("bundle_tools_covered", json!(covered.len()));
    put("bundle_similarity", similarity_stats(&drawn, knobs.min_similarity));
    put(
        "bundle_mean_servers",
        json!(if drawn.is_empty() {
            0.0
        } else {
            let s: usize = drawn
                .iter()
                .map(|b| {
                    b.members
                        .iter()
                        .map(|m| &ing.tools[m.tool].server)
                        .collect::<std::collections::BTreeSet<_>>()
                        .len()
                })
                .sum();
            (s as f64 / drawn.len() as f64 * 1000.0).round() / 1000.0
        }),
    );
    put(
        "synthesis",
        json!(
            "not done: task request text needs an LLM endpoint (none configured); rows carry a template input and the reference tools"
        ),
    );
    let fix_list: Vec<Value> = ing
        .tools
        .iter()
        .filter(|t| !t.fixes.is_empty())
        .map(|t| json!({"server": t.server, "tool": t.name, "function": t.function, "fixes": t.fixes}))
        .collect();
    let mut extra_files = BTreeMap::new();
    extra_files.insert("tools/mcp.json".to_string(), pretty(&mcp::mcp_json(&ing)));
    extra_files.insert(
        "report/catalog_fixes.json".to_string(),
        pretty(&json!({"fixed": fix_list, "rejected": ing.rejected, "deduplicated": ing.duplicates})),
    );
    Ok(Conversion {
        splits: BTreeMap::from([(knobs.split.clone(), outcome)]),
        bad_records: ing.bad_records,
        catalog,
        extra_files,
        stats,
    })
}

/// Cosine-to-first-seed statistics of the bundle members other than the first seed: `{floor,
/// members, below_floor, min, median, mean}` (rounded to 1e-4).
fn similarity_stats(drawn: &[bundles::Bundle], floor: f64) -> Value {
    let mut s: Vec<f64> = drawn
        .iter()
        .flat_map(|b| b.members.iter().skip(1).map(|m| m.score))
        .collect();
    s.sort_by(f64::total_cmp);
    let r = |x: f64| (x * 1e4).round() / 1e4;
    let median = if s.is_empty() { 0.0 } else { s[s.len() / 2] };
    let mean = if s.is_empty() {
        0.0
    } else {
        s.iter().sum::<f64>() / s.len() as f64
    };
    json!({
        "floor": floor,
        "members": s.len(),
        "below_floor": s.iter().filter(|x| **x < floor).count(),
        "min": r(s.first().copied().unwrap_or(0.0)),
        "median": r(median),
        "mean": r(mean),
    })
}

/// The BFCL conversion: rows, catalog (distinct functions; a name offered with different schemas
/// gets `__2`, `__3`, … in the catalog only) and lint stats.
pub fn convert_bfcl(source: &ResolvedSource) -> Result<Conversion, CorpusError> {
    let out = bfcl::convert(&source.root)?;
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let mut variants = 0;
    let catalog: Vec<ToolSpec> = out
        .functions
        .iter()
        .map(|(spec, _)| {
            let n = used.entry(spec.name.clone()).or_insert(0);
            *n += 1;
            let mut s = spec.clone();
            if *n > 1 {
                variants += 1;
                s.name = mcp::sanitise_name(&format!("{}__{}", spec.name, n));
            }
            s
        })
        .collect();
    let by_kind = count(out.findings.iter().map(|f| f.kind.as_str()));
    let questions_with_findings: std::collections::BTreeSet<&str> =
        out.findings.iter().map(|f| f.id.as_str()).collect();
    let mut stats = serde_json::Map::new();
    stats.insert("questions".into(), json!(out.questions));
    stats.insert("functions_distinct".into(), json!(out.functions.len()));
    stats.insert("catalog_name_variants".into(), json!(variants));
    stats.insert("schema_fixes_by_kind".into(), json!(out.fixes_by_kind));
    stats.insert("lint_findings".into(), json!(out.findings.len()));
    stats.insert("lint_questions_affected".into(), json!(questions_with_findings.len()));
    stats.insert("lint_by_kind".into(), json!(by_kind));
    stats.insert("lint_list".into(), json!("report/bfcl_lint.json"));
    // Per-category sizes (rows kept), to compare with the official files' question counts.
    let sizes: BTreeMap<&str, usize> = out.splits.iter().map(|(c, o)| (c.as_str(), o.examples.len())).collect();
    stats.insert("category_sizes".into(), json!(sizes));
    if !out.gold_invalid_kept.is_empty() {
        stats.insert("gold_invalid_kept".into(), json!(out.gold_invalid_kept));
    }
    if !out.files_skipped.is_empty() {
        stats.insert("files_skipped".into(), json!(out.files_skipped));
    }
    if !out.id_category_mismatch.is_empty() {
        stats.insert("id_category_mismatch".into(), json!(out.id_category_mismatch));
    }
    let report = json!({"lint_by_kind": by_kind, "findings": out.findings, "files_skipped": out.files_skipped});
    Ok(Conversion {
        splits: out.splits,
        bad_records: out.bad_records,
        catalog,
        extra_files: BTreeMap::from([("report/bfcl_lint.json".to_string(), pretty(&report))]),
        stats,
    })
}

/// Runs (or loads from the store) the conversion of a `catalog` or `bfcl` recipe.
///
/// Errors: [`BuildError::Mismatch`] when the recipe format does not fit the source format
/// (`catalog` needs `mcp`, `bfcl` needs `bfcl`); corpus and store errors.
pub fn compile(recipe: Recipe, source: ResolvedSource, store: &Store) -> Result<Build, BuildError> {
    let fits = matches!(
        (recipe.format.as_str(), source.manifest.format.as_str()),
        ("catalog", "mcp") | ("bfcl", "bfcl")
    );
    if !fits {
        return Err(BuildError::Mismatch {
            recipe: recipe.name.clone(),
            format: recipe.format.clone(),
            source_name: source.manifest.name.clone(),
            source_format: source.manifest.format.clone(),
        });
    }
    let knobs = recipe.catalog.clone().unwrap_or_default();
    let source_hashes = hash_inputs(&source, &inputs(&source))?;
    let key = StageKey {
        stage: format!("catalog-{}", source.manifest.format),
        version: CATALOG_VERSION,
        config: json!({"dataset": recipe.name, "knobs": knobs, "files": source_hashes.keys().collect::<Vec<_>>(), "code": code_fingerprint()}),
        inputs: source_hashes.values().cloned().collect(),
    };
    let digest = key.digest();
    let run = || match source.manifest.format.as_str() {
        "bfcl" => convert_bfcl(&source),
        _ => convert_mcp(&source, &knobs),
    };
    // An entry that does not decode is removed and recomputed (`Store::load`).
    let stored = store.load(&key, |b| {
        serde_json::from_slice::<Conversion>(b).map_err(|e| e.to_string())
    });
    if stored.is_none() && !store.claim(&key, "conversion") {
        return Err(BuildError::Unclaimed { stage: key.stage });
    }
    let (conversion, hit) = match stored {
        Some(c) => (c, true),
        None => (run()?, false),
    };
    if !hit {
        store.put(&key, &serde_json::to_vec(&conversion).expect("serialise"))?;
    }
    let build_key = build_key(&recipe, &conversion.bad_records, &[digest]);
    Ok(split_build(
        recipe,
        source,
        SplitStage {
            splits: conversion.splits,
            bad_records: conversion.bad_records,
            catalog: conversion.catalog,
            extra_files: conversion
                .extra_files
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()))
                .collect(),
            stats: conversion.stats,
            source_hashes,
            build_key,
            hit,
        },
    ))
}
