//! Emitters: every file of `out/<recipe>/` from one [`Build`].
//!
//! | file                          | content                                                        |
//! |-------------------------------|----------------------------------------------------------------|
//! | `data/<split>.parquet`        | one row per example, schema below                              |
//! | `data/<split>.jsonl`          | the same rows as JSON lines                                    |
//! | `tools/functions.json`        | dataset-level catalog, OpenAI function format                  |
//! | `report/verification.json`    | attempted / verified per database, drops with reason codes     |
//! | `README.md`                   | dataset card with a Hugging Face YAML header                   |
//! | `MANIFEST.json`               | blake3 of every file, build key, source hashes, version        |
//!
//! Row schema (the same for every family; `?` = null where the family has no such field):
//! `id, dataset, split, db_id?, input, evidence?, sql?` (strings),
//! `output: list<struct<name, arguments (JSON text), label>>` (what a model predicts),
//! `initialization_step?` (JSON text `{name, arguments, label}`: the setup call the framework runs
//! first, SLOT/SEL's join step), `gold_answer?` (JSON text: list of rows), `ordered` (bool), `tools` (JSON text: this instance's tool specs),
//! `key_values_and_descriptions` (JSON text), `difficulty?`, `meta?` (JSON text; variant rows
//! hold `variant_of`, `variant_kind` and `variant` there, see [`crate::variants`]).
//! Family-specific files (e.g. `tools/openapi.json`) come from [`Build::extra_files`].
//!
//! The directory is written as a whole into a sibling temp directory and renamed into place, so
//! a failed build never leaves a half-written dataset. A rebuild whose build key and files match
//! the existing `MANIFEST.json` writes nothing.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use arrow_array::{ArrayRef, BooleanArray, ListArray, RecordBatch, StringArray, StructArray};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Fields, Schema};
use rayon::prelude::*;
use serde_json::json;

use crate::dataset::{Build, Example};
use crate::pipeline::{compile, load_recipe, project_root};
use crate::tools::Call;
use crate::tools::executor::Executor;
use crate::verify::Answer;

fn call_fields() -> Fields {
    Fields::from(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("arguments", DataType::Utf8, false),
        Field::new("label", DataType::Utf8, false),
    ])
}

fn row_schema() -> Schema {
    let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
    Schema::new(vec![
        s("id", false),
        s("dataset", false),
        s("split", false),
        s("db_id", true),
        s("input", false),
        s("evidence", true),
        s("sql", true),
        Field::new(
            "output",
            DataType::List(Arc::new(Field::new("item", DataType::Struct(call_fields()), false))),
            false,
        ),
        s("initialization_step", true),
        s("gold_answer", true),
        Field::new("ordered", DataType::Boolean, false),
        s("tools", false),
        s("key_values_and_descriptions", false),
        s("difficulty", true),
        s("meta", true),
    ])
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("serialisable")
}

/// A row with its JSON-text fields serialised once (for both Parquet and JSONL).
pub struct EncodedRow<'a> {
    example: &'a Example,
    arguments: Vec<String>,
    initialization_step: Option<String>,
    gold_answer: Option<String>,
    tools: Arc<str>,
    keys: String,
    meta: Option<String>,
}

/// Serialises the JSON-text fields of `examples`; [`ToolSpec::reference`]s are written as the
/// `catalog` spec of their name. Identical toolkits (common in seq datasets, where rows share the
/// catalog's specs) are serialised once.
///
/// [`ToolSpec::reference`]: crate::tools::ToolSpec::reference
pub fn encode_rows<'a>(examples: &[&'a Example], catalog: &[crate::tools::ToolSpec]) -> Vec<EncodedRow<'a>> {
    let by_name: std::collections::HashMap<&str, &crate::tools::ToolSpec> =
        catalog.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut memo: std::collections::HashMap<Vec<&str>, Vec<(&[crate::tools::ToolSpec], Arc<str>)>> =
        std::collections::HashMap::new();
    examples
        .iter()
        .map(|e| {
            let names: Vec<&str> = e.tools.iter().map(|t| t.name.as_str()).collect();
            let seen = memo.entry(names).or_default();
            let tools = match seen.iter().find(|(t, _)| *t == e.tools.as_slice()) {
                Some((_, s)) => s.clone(),
                None => {
                    let resolved: Vec<&crate::tools::ToolSpec> = e
                        .tools
                        .iter()
                        .map(|t| match by_name.get(t.name.as_str()) {
                            Some(spec) if t.is_reference() => *spec,
                            _ => t,
                        })
                        .collect();
                    let s: Arc<str> = to_json(&resolved).into();
                    if seen.len() == 8 {
                        seen.remove(0);
                    }
                    seen.push((&e.tools, s.clone()));
                    s
                }
            };
            EncodedRow {
                example: e,
                arguments: e.output.iter().map(|c| to_json(&c.arguments)).collect(),
                initialization_step: e.initialization_step.as_ref().map(to_json),
                gold_answer: e.gold_answer.as_ref().map(to_json),
                tools,
                keys: to_json(&e.key_values_and_descriptions),
                meta: e.meta.as_ref().map(to_json),
            }
        })
        .collect()
}

/// The rows as an Arrow record batch (schema in the module docs).
pub fn record_batch(rows: &[EncodedRow]) -> RecordBatch {
    fn strs<'r>(rows: &'r [EncodedRow], f: &dyn for<'x> Fn(&'x EncodedRow<'r>) -> &'x str) -> ArrayRef {
        Arc::new(rows.iter().map(|r| Some(f(r))).collect::<StringArray>())
    }
    fn opt<'r>(rows: &'r [EncodedRow], f: &dyn for<'x> Fn(&'x EncodedRow<'r>) -> Option<&'x str>) -> ArrayRef {
        Arc::new(rows.iter().map(|r| f(r)).collect::<StringArray>())
    }
    let calls: Vec<(&Call, &str)> = rows
        .iter()
        .flat_map(|r| r.example.output.iter().zip(r.arguments.iter().map(String::as_str)))
        .collect();
    let call_arrays: Vec<ArrayRef> = vec![
        Arc::new(
            calls
                .iter()
                .map(|(c, _)| Some(c.name.as_str()))
                .collect::<StringArray>(),
        ),
        Arc::new(calls.iter().map(|(_, a)| Some(*a)).collect::<StringArray>()),
        Arc::new(
            calls
                .iter()
                .map(|(c, _)| Some(c.label.as_str()))
                .collect::<StringArray>(),
        ),
    ];
    let structs = StructArray::new(call_fields(), call_arrays, None);
    let offsets = OffsetBuffer::from_lengths(rows.iter().map(|r| r.example.output.len()));
    let output = ListArray::new(
        Arc::new(Field::new("item", DataType::Struct(call_fields()), false)),
        offsets,
        Arc::new(structs),
        None,
    );
    let columns: Vec<ArrayRef> = vec![
        strs(rows, &|r| &r.example.id),
        strs(rows, &|r| &r.example.dataset),
        strs(rows, &|r| &r.example.split),
        opt(rows, &|r| r.example.db_id.as_deref()),
        strs(rows, &|r| &r.example.input),
        opt(rows, &|r| r.example.evidence.as_deref()),
        opt(rows, &|r| r.example.sql.as_deref()),
        Arc::new(output),
        opt(rows, &|r| r.initialization_step.as_deref()),
        opt(rows, &|r| r.gold_answer.as_deref()),
        Arc::new(rows.iter().map(|r| Some(r.example.ordered)).collect::<BooleanArray>()),
        strs(rows, &|r| &r.tools),
        strs(rows, &|r| &r.keys),
        opt(rows, &|r| r.example.difficulty.as_deref()),
        opt(rows, &|r| r.meta.as_deref()),
    ];
    RecordBatch::try_new(Arc::new(row_schema()), columns).expect("schema matches columns")
}

fn parquet_bytes(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_created_by("toolforge".into())
        .build();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut buf, batch.schema(), Some(props))?;
    writer.write(batch)?;
    writer.close()?;
    Ok(buf)
}

#[derive(serde::Serialize)]
struct JsonCall<'a> {
    name: &'a str,
    arguments: &'a str,
    label: &'a str,
}

#[derive(serde::Serialize)]
struct JsonRow<'a> {
    id: &'a str,
    dataset: &'a str,
    split: &'a str,
    db_id: Option<&'a str>,
    input: &'a str,
    evidence: Option<&'a str>,
    sql: Option<&'a str>,
    output: Vec<JsonCall<'a>>,
    initialization_step: Option<&'a str>,
    gold_answer: Option<&'a str>,
    ordered: bool,
    tools: &'a str,
    key_values_and_descriptions: &'a str,
    difficulty: Option<&'a str>,
    meta: Option<&'a str>,
}

/// The rows as JSON lines, the same fields and JSON-text encodings as the Parquet columns.
fn jsonl_bytes(rows: &[EncodedRow]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in rows {
        let e = r.example;
        let row = JsonRow {
            id: &e.id,
            dataset: &e.dataset,
            split: &e.split,
            db_id: e.db_id.as_deref(),
            input: &e.input,
            evidence: e.evidence.as_deref(),
            sql: e.sql.as_deref(),
            output: e
                .output
                .iter()
                .zip(&r.arguments)
                .map(|(c, a)| JsonCall {
                    name: &c.name,
                    arguments: a,
                    label: &c.label,
                })
                .collect(),
            initialization_step: r.initialization_step.as_deref(),
            gold_answer: r.gold_answer.as_deref(),
            ordered: e.ordered,
            tools: &r.tools,
            key_values_and_descriptions: &r.keys,
            difficulty: e.difficulty.as_deref(),
            meta: r.meta.as_deref(),
        };
        serde_json::to_writer(&mut out, &row).expect("serialisable");
        out.push(b'\n');
    }
    out
}

/// Counts for the report and summary.
struct Counts {
    attempted: usize,
    verified: usize,
    per_group: BTreeMap<String, (usize, usize, BTreeMap<String, usize>)>,
    per_split: BTreeMap<String, usize>,
    reasons: BTreeMap<String, usize>,
}

fn counts(build: &Build) -> Counts {
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
    c
}

fn report(build: &Build, c: &Counts) -> serde_json::Value {
    let drops: Vec<_> = build.groups.values().flat_map(|o| &o.drops).collect();
    json!({
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
        "stats": build.stats.iter().filter(|(k, _)| k.as_str() != "llm_run").map(|(k, v)| (k.clone(), v.clone())).collect::<serde_json::Map<_, _>>(),
        "bad_record_list": build.bad_records,
        "dropped_list": drops,
    })
}

/// What the card says about a family's `output` and how it was checked.
fn family_paragraph(format: &str) -> &'static str {
    match format {
        "slot" => {
            "Each example's `output` is a sequence of SLOT tool calls; `initialization_step` is the setup call the framework runs before them (`initialize_active_data`, label `starting_table_var`: it materialises the query's joins and is not part of the tools given to a model). Calls refer to earlier outputs as `$LABEL$`. The final answer is the zip of the outputs no later call refers to. Only examples whose calls, run by toolforge's own executor, reproduce the gold SQL result on SQLite are kept (rows compared as a multiset, or in order when the SQL has ORDER BY; 1 == 1.0; reals within 1e-9 relative); `gold_answer` is the SQL result."
        }
        "sel" => {
            "Each example's `output` is a sequence of SEL tool calls: the SLOT sequence with categorical arguments bound into function names (`select_data_equal_to`, `sort_data_descending`, `compute_data_count`, one `get_<column>` getter per column of the joined table), so every instance carries its own toolkit in `tools`. Verified like SLOT: the calls, executed on the real database, reproduce the gold SQL result; `gold_answer` is the SQL result."
        }
        "rest" => {
            "Each example's `output` is one call of a GET endpoint synthesised from the gold SQL: its literals became typed query parameters, and questions that differ only in literal values share an endpoint. `tools` holds the endpoints of the example's database; `tools/openapi.json` is the FastAPI-equivalent OpenAPI 3.1 document and `tools/endpoints.json` the parameterised SQL behind each endpoint (what `toolforge serve` runs with bound parameters). Kept only when the call reproduces the gold SQL result; `gold_answer` is that result."
        }
        "catalog" => {
            "Each row is a ToolGym task skeleton over one seeded tool bundle: `tools` is the bundle (OpenAI function format), `meta.reference_tools` names each tool's server and role, `output` is empty and `input` a template sentence until an LLM endpoint writes the task. The normalised catalog is in `tools/functions.json` and `tools/mcp.json`; every schema fix and rejected tool is in `report/`."
        }
        "bfcl" => {
            "Each row is a BFCL question with its functions in `tools` (BFCL types mapped to JSON Schema) and one gold call in `output` chosen from the acceptable values; `meta` keeps every acceptable value and the row's gold-lint findings (unknown parameters, enum violations, type mismatches)."
        }
        _ => {
            "Each example's `output` is the sequence of API calls annotated in the source, converted by the rules in `report/verification.json` (`stats`); every call validates against its tool's JSON Schema in `tools`. Calls refer to earlier outputs as `$LABEL$`."
        }
    }
}

/// The Hugging Face `license:` identifier of a manifest's license text: the SPDX-style id when
/// the text names a known license (`CC BY-SA 4.0` → `cc-by-sa-4.0`), else `other`.
fn hf_license(text: &str) -> String {
    let id: String = text
        .split([';', '(', ','])
        .next()
        .unwrap_or_default()
        .trim()
        .to_lowercase()
        .replace(' ', "-");
    let known = [
        "mit",
        "apache-2.0",
        "cc-by-4.0",
        "cc-by-sa-4.0",
        "cc-by-nc-4.0",
        "cc-by-nc-sa-4.0",
        "cc0-1.0",
        "bsd-3-clause",
        "gpl-3.0",
        "odc-by",
    ];
    match id.as_str() {
        "cc0" => "cc0-1.0".into(),
        _ if known.contains(&id.as_str()) => id,
        _ => "other".into(),
    }
}

fn card(build: &Build, c: &Counts) -> String {
    let m = &build.source.manifest;
    let license = hf_license(&m.license);
    let mut s = String::new();
    let tag = match build.recipe.format.as_str() {
        "seq" => "api-sequences",
        "catalog" => "mcp",
        "bfcl" => "function-calling-evaluation",
        _ => "text-to-sql",
    };
    let _ = writeln!(
        s,
        "---\nlicense: {license}\npretty_name: {}\ntask_categories:\n- text-generation\ntags:\n- tool-calling\n- function-calling\n- {tag}\nconfigs:\n- config_name: default\n  data_files:",
        build.recipe.name
    );
    for split in c.per_split.keys() {
        let _ = writeln!(s, "  - split: {split}\n    path: data/{split}.parquet");
    }
    let _ = writeln!(s, "dataset_info:\n  features:");
    for f in row_schema().fields() {
        match f.data_type() {
            DataType::List(_) => {
                let _ = writeln!(
                    s,
                    "  - name: {}\n    list:\n    - name: name\n      dtype: string\n    - name: arguments\n      dtype: string\n    - name: label\n      dtype: string",
                    f.name()
                );
            }
            DataType::Boolean => {
                let _ = writeln!(s, "  - name: {}\n    dtype: bool", f.name());
            }
            _ => {
                let _ = writeln!(s, "  - name: {}\n    dtype: string", f.name());
            }
        }
    }
    let _ = writeln!(s, "  splits:");
    for (split, n) in &c.per_split {
        let _ = writeln!(s, "  - name: {split}\n    num_examples: {n}");
    }
    let _ = writeln!(s, "---\n");
    let _ = writeln!(s, "# {}\n\n{}\n", build.recipe.name, build.recipe.description);
    let _ = writeln!(
        s,
        "Built by toolforge {} from **{}** ({}, {}).\n",
        env!("CARGO_PKG_VERSION"),
        m.title,
        m.homepage,
        m.license
    );
    let _ = writeln!(
        s,
        "- items attempted: {}\n- examples kept: {} ({:.1}%)\n- skipped input records: {}\n",
        c.attempted,
        c.verified,
        pct(c.verified, c.attempted),
        build.bad_records.len()
    );
    let _ = writeln!(
        s,
        "{} Drops and their reasons are in `report/verification.json`.\n",
        family_paragraph(&build.recipe.format)
    );
    if let Some(v) = build.stats.get("variants") {
        let _ = writeln!(
            s,
            "Variant rows (`meta.variant_of` = parent id, `meta.variant_kind`, details in `meta.variant`): {}. Their `tools` are the specs each was generated against; for `drift`, `output` is the gold migrated to A_new and `tools/drift.json` holds A_old, A_new and the change log per tool (`toolforge serve` enforces A_new).\n",
            v["rows"]
        );
    }
    let _ = writeln!(s, "## Source citation\n\n```bibtex\n{}\n```", m.citation.trim());
    s
}

fn pct(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { 100.0 * a as f64 / b as f64 }
}

fn summary(build: &Build, c: &Counts, out_dir: &Path, wrote: bool, secs: f64) -> String {
    let mut s = String::new();
    let (items, verb) = match build.recipe.format.as_str() {
        "seq" => ("items", "converted"),
        "catalog" => ("bundles", "sampled"),
        "bfcl" => ("questions", "converted"),
        _ => ("questions", "verified"),
    };
    let _ = writeln!(
        s,
        "{}: {}/{} {items} {verb} ({:.1}%) in {:.2} s [{} stages from the store, {} computed]",
        build.recipe.name,
        c.verified,
        c.attempted,
        pct(c.verified, c.attempted),
        secs,
        build.cache_hits,
        build.cache_misses
    );
    let _ = writeln!(s, "  per {} ({verb}/attempted):", build.group_kind);
    for (g, (a, v, _)) in &c.per_group {
        let _ = writeln!(s, "    {g:<32} {v:>6}/{a:<6} {:>5.1}%", pct(*v, *a));
    }
    let mut reasons: Vec<_> = c.reasons.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let _ = writeln!(s, "  dropped by reason:");
    for (r, n) in reasons {
        let _ = writeln!(s, "    {r:<40} {n:>6}");
    }
    for (k, v) in &build.stats {
        let _ = writeln!(s, "  {k}: {v}");
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
    s
}

/// OpenAI function-calling format of a catalog: `[{"type": "function", "function": {...}}]`.
pub fn functions_json(catalog: &[crate::tools::ToolSpec]) -> serde_json::Value {
    json!(
        catalog
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect::<Vec<_>>()
    )
}

/// Builds a recipe and writes `out/<name>/`; returns the human summary.
pub fn build_and_emit(
    recipe_path: &Path,
    out_root: Option<&Path>,
    store: Option<&Path>,
    progress: bool,
) -> Result<String> {
    let start = Instant::now();
    let root = project_root(recipe_path);
    let out_root = out_root.map(Path::to_path_buf).unwrap_or_else(|| root.join("out"));
    if let Some((recipe, key)) = crate::pipeline::quick_build_key(recipe_path)? {
        let out_dir = out_root.join(&recipe.name);
        if up_to_date(&out_dir, &key) {
            return up_to_date_summary(&out_dir, &recipe.name, start.elapsed().as_secs_f64());
        }
    }
    let build = compile(recipe_path, store, progress)?;
    let out_dir = out_root.join(&build.recipe.name);
    let c = counts(&build);
    if up_to_date(&out_dir, &build.build_key) {
        return Ok(summary(&build, &c, &out_dir, false, start.elapsed().as_secs_f64()));
    }
    let mut by_split: BTreeMap<&str, Vec<&Example>> = BTreeMap::new();
    for e in build.groups.values().flat_map(|o| &o.examples) {
        by_split.entry(e.split.as_str()).or_default().push(e);
    }
    let staging = Staging::new(&out_dir)?;
    let trajectories = Trajectories::new(&build)?;
    // Splits in parallel; each file is written as soon as it exists, so at most a split's
    // files are in memory at once.
    let split_files: Vec<Vec<(String, String)>> = by_split
        .par_iter()
        .map(|(split, examples)| -> Result<Vec<(String, String)>> {
            let rows = encode_rows(examples, &build.catalog);
            let (parquet, jsonl) = rayon::join(|| parquet_bytes(&record_batch(&rows)), || jsonl_bytes(&rows));
            let mut written = vec![
                staging.put(&format!("data/{split}.parquet"), &parquet?)?,
                staging.put(&format!("data/{split}.jsonl"), &jsonl)?,
            ];
            if let Some(t) = &trajectories {
                let (clean, faulted) = t.write(examples)?;
                written.push(staging.put(&format!("trajectories/{split}.jsonl"), &clean)?);
                written.push(staging.put(&format!("trajectories/{split}.faults.jsonl"), &faulted)?);
            }
            Ok(written)
        })
        .collect::<Result<_>>()?;
    let mut hashes: BTreeMap<String, String> = split_files.into_iter().flatten().collect();
    let mut put = |rel: &str, bytes: &[u8]| -> Result<()> {
        let (k, v) = staging.put(rel, bytes)?;
        hashes.insert(k, v);
        Ok(())
    };
    put("tools/functions.json", &pretty(&functions_json(&build.catalog)))?;
    put("report/verification.json", &pretty(&report(&build, &c)))?;
    put("README.md", card(&build, &c).as_bytes())?;
    for (k, v) in &build.extra_files {
        put(k, v)?;
    }
    let manifest = json!({
        "dataset": build.recipe.name,
        "recipe": build.recipe.name,
        "format": build.recipe.format,
        "toolforge_version": env!("CARGO_PKG_VERSION"),
        "build_key": build.build_key,
        "recipe_hash": blake3::hash(&std::fs::read(recipe_path)?).to_hex().to_string(),
        "source": build.source.manifest.name,
        "source_hashes": build.source_hashes,
        "files": hashes,
    });
    staging.put("MANIFEST.json", &pretty(&manifest))?;
    staging.finish()?;
    let text = summary(&build, &c, &out_dir, true, start.elapsed().as_secs_f64());
    // Freeing a large build's many small allocations takes seconds; do it off the caller's path.
    std::thread::spawn(move || drop(build));
    Ok(text)
}

/// The summary of an output found up to date without loading its stages (from its report).
fn up_to_date_summary(out_dir: &Path, name: &str, secs: f64) -> Result<String> {
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(out_dir.join("report/verification.json"))?)?;
    Ok(format!(
        "{name}: {}/{} items kept, checked in {secs:.2} s [no stage work]\n  up to date: {}",
        report["kept"],
        report["attempted"],
        out_dir.display()
    ))
}

fn pretty(v: &serde_json::Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("serialisable");
    b.push(b'\n');
    b
}

/// Whether `dir` holds a complete build with this build key (every file's hash checks out).
fn up_to_date(dir: &Path, build_key: &str) -> bool {
    let Ok(bytes) = std::fs::read(dir.join("MANIFEST.json")) else {
        return false;
    };
    let Ok(m) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return false;
    };
    if m["build_key"] != build_key {
        return false;
    }
    let Some(files) = m["files"].as_object() else {
        return false;
    };
    files.iter().all(|(name, hash)| {
        std::fs::read(dir.join(name)).is_ok_and(|b| hash.as_str() == Some(blake3::hash(&b).to_hex().as_str()))
    })
}

/// The trajectory writer of an executable build (SLOT, SEL, REST); `None` for other families.
struct Trajectories<'b> {
    build: &'b Build,
    executor: Executor,
    endpoints: HashMap<(String, String), crate::tools::rest::Endpoint>,
}

impl<'b> Trajectories<'b> {
    fn new(build: &'b Build) -> Result<Option<Trajectories<'b>>> {
        if !["slot", "sel", "rest"].contains(&build.recipe.format.as_str()) {
            return Ok(None);
        }
        let endpoints = match build.extra_files.get("tools/endpoints.json") {
            Some(bytes) => serde_json::from_slice::<Vec<crate::tools::rest::Endpoint>>(bytes)?
                .into_iter()
                .map(|e| ((e.db_id.clone(), e.name.clone()), e))
                .collect(),
            None => HashMap::new(),
        };
        Ok(Some(Trajectories {
            build,
            executor: Executor::new(&build.source.databases),
            endpoints,
        }))
    }

    /// The clean and faulted JSON lines of one split's examples (in example order).
    fn write(&self, examples: &[&Example]) -> Result<(Vec<u8>, Vec<u8>)> {
        let catalog: HashMap<&str, &crate::tools::ToolSpec> =
            self.build.catalog.iter().map(|t| (t.name.as_str(), t)).collect();
        let runner = if self.build.recipe.format == "rest" {
            crate::trajectory::Runner::Rest(&self.endpoints, &self.build.source.databases)
        } else {
            crate::trajectory::Runner::Tools(&self.executor)
        };
        let cfg = &self.build.recipe.trajectories;
        // Variant rows (drifted, obfuscated, … calls) are not directly executable; trajectories
        // cover the verified examples themselves.
        let originals: Vec<&&Example> = examples
            .iter()
            .filter(|e| e.meta.as_ref().is_none_or(|m| m.get("variant_of").is_none()))
            .collect();
        let lines: Vec<(String, Option<String>)> = originals
            .par_iter()
            .map_init(
                || None,
                |conn, e| {
                    let (clean, faulted) = crate::trajectory::trajectories(e, &catalog, &runner, cfg, conn)
                        .map_err(|m| anyhow::anyhow!("{}: trajectory: {m}", e.id))?;
                    Ok((clean.to_string(), faulted.map(|f| f.to_string())))
                },
            )
            .collect::<Result<_>>()?;
        let (mut clean, mut faulted) = (Vec::new(), Vec::new());
        for (c, f) in lines {
            clean.extend_from_slice(c.as_bytes());
            clean.push(b'\n');
            if let Some(f) = f {
                faulted.extend_from_slice(f.as_bytes());
                faulted.push(b'\n');
            }
        }
        Ok((clean, faulted))
    }
}

/// A dataset directory under construction: files go into a sibling temp directory, which
/// [`Staging::finish`] swaps into place; dropped unfinished, it is removed.
struct Staging {
    dir: PathBuf,
    tmp: PathBuf,
    done: bool,
}

impl Staging {
    fn new(dir: &Path) -> Result<Staging> {
        let parent = dir.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        Ok(Staging {
            dir: dir.to_path_buf(),
            tmp,
            done: false,
        })
    }

    /// Writes one file; returns (relative path, blake3 hex).
    fn put(&self, rel: &str, bytes: &[u8]) -> Result<(String, String)> {
        let path = self.tmp.join(rel);
        std::fs::create_dir_all(path.parent().expect("has parent"))
            .with_context(|| format!("creating {}", path.display()))?;
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        let mut h = blake3::Hasher::new();
        if bytes.len() > 1 << 20 {
            h.update_rayon(bytes);
        } else {
            h.update(bytes);
        }
        Ok((rel.to_string(), h.finalize().to_hex().to_string()))
    }

    /// Replaces the dataset directory by the staged one.
    fn finish(mut self) -> Result<()> {
        let old = self.tmp.with_extension("old");
        if self.dir.exists() {
            std::fs::rename(&self.dir, &old).with_context(|| format!("moving {} aside", self.dir.display()))?;
        }
        std::fs::rename(&self.tmp, &self.dir)
            .with_context(|| format!("renaming {} to {}", self.tmp.display(), self.dir.display()))?;
        let _ = std::fs::remove_dir_all(&old);
        self.done = true;
        Ok(())
    }
}

impl std::ops::Drop for Staging {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// One row of a built dataset, as read back from its Parquet files.
#[derive(Debug, Clone)]
pub struct StoredRow {
    /// Example id.
    pub id: String,
    /// Database id, if any.
    pub db_id: Option<String>,
    /// Gold calls.
    pub output: Vec<Call>,
    /// The setup call (`initialization_step` column; absent in datasets built before it).
    pub initialization_step: Option<Call>,
    /// Gold answer, if the family has one.
    pub gold_answer: Option<Answer>,
    /// Whether the answer is ordered.
    pub ordered: bool,
    /// For a variant row (`meta.variant_of`), its parent's id.
    pub variant_of: Option<String>,
    /// Tie runs of an ordered gold answer (`meta.order_ties`, [`crate::verify::compare`]).
    pub ties: Option<Vec<usize>>,
}

fn string_column<'b>(batch: &'b RecordBatch, file: &Path, name: &str) -> Result<&'b StringArray> {
    batch
        .column_by_name(name)
        .with_context(|| format!("{}: no column {name}", file.display()))?
        .as_any()
        .downcast_ref::<StringArray>()
        .with_context(|| format!("{}: column {name} is not text", file.display()))
}

/// Reads every row of `dir/data/*.parquet` (files in name order).
pub fn read_rows(dir: &Path) -> Result<Vec<StoredRow>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("data"))
        .with_context(|| format!("{}: not a built dataset (no data/)", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(&file).with_context(|| format!("opening {}", file.display()))?,
        )?
        .build()?;
        for batch in reader {
            let batch = batch?;
            let ids = string_column(&batch, &file, "id")?;
            let dbs = string_column(&batch, &file, "db_id")?;
            let gold = string_column(&batch, &file, "gold_answer")?;
            let meta = string_column(&batch, &file, "meta")?;
            let init = string_column(&batch, &file, "initialization_step").ok();
            let ordered = batch
                .column_by_name("ordered")
                .and_then(|c| c.as_any().downcast_ref::<BooleanArray>())
                .with_context(|| format!("{}: no boolean column ordered", file.display()))?;
            let output = batch
                .column_by_name("output")
                .and_then(|c| c.as_any().downcast_ref::<ListArray>())
                .with_context(|| format!("{}: no list column output", file.display()))?;
            for r in 0..batch.num_rows() {
                let calls = output.value(r);
                let calls = calls.as_any().downcast_ref::<StructArray>().context("output items")?;
                let get = |i: usize| {
                    calls
                        .column(i)
                        .as_any()
                        .downcast_ref::<StringArray>()
                        .context("output field")
                };
                let (names, args, labels) = (get(0)?, get(1)?, get(2)?);
                let seq: Vec<Call> = (0..arrow_array::Array::len(calls))
                    .map(|i| {
                        Ok(Call {
                            name: names.value(i).into(),
                            arguments: serde_json::from_str(args.value(i))?,
                            label: labels.value(i).into(),
                        })
                    })
                    .collect::<Result<_, serde_json::Error>>()?;
                let null = |a: &StringArray| arrow_array::Array::is_null(a, r);
                out.push(StoredRow {
                    id: ids.value(r).into(),
                    db_id: (!null(dbs)).then(|| dbs.value(r).to_string()),
                    output: seq,
                    initialization_step: match init.filter(|c| !null(c)) {
                        Some(c) => Some(serde_json::from_str(c.value(r))?),
                        None => None,
                    },
                    gold_answer: if null(gold) {
                        None
                    } else {
                        Some(serde_json::from_str(gold.value(r))?)
                    },
                    ordered: ordered.value(r),
                    ties: if null(meta) {
                        None
                    } else {
                        crate::verify::ties_from_meta(Some(&serde_json::from_str(meta.value(r))?))
                    },
                    variant_of: if null(meta) {
                        None
                    } else {
                        serde_json::from_str::<serde_json::Value>(meta.value(r))?["variant_of"]
                            .as_str()
                            .map(String::from)
                    },
                });
            }
        }
    }
    Ok(out)
}

/// The built dataset's `MANIFEST.json`.
pub fn read_manifest(dir: &Path) -> Result<serde_json::Value> {
    let bytes =
        std::fs::read(dir.join("MANIFEST.json")).with_context(|| format!("{}: not a built dataset", dir.display()))?;
    Ok(serde_json::from_slice(&bytes)?)
}

/// The database root of a built dataset: `databases` if given, else its recipe's source.
pub fn database_root(dir: &Path, databases: Option<&Path>) -> Result<PathBuf> {
    if let Some(d) = databases {
        return Ok(d.to_path_buf());
    }
    let manifest = read_manifest(dir)?;
    let recipe = manifest["recipe"].as_str().context("MANIFEST.json: no recipe")?;
    let root = dir.parent().and_then(Path::parent).unwrap_or(Path::new("."));
    let recipe_path = root.join("recipes").join(format!("{recipe}.toml"));
    let (_, source) = load_recipe(&recipe_path).with_context(|| {
        format!(
            "{}: cannot locate the databases through {}; pass --databases DIR",
            dir.display(),
            recipe_path.display()
        )
    })?;
    Ok(source.databases)
}

/// Reads `dir/data/*.parquet` back and re-executes each row's calls through the executor (SLOT,
/// SEL) and compares with its `gold_answer`; rows without a gold answer are skipped. Returns
/// (passed, failed). REST datasets are verified through the live server instead
/// ([`crate::serve::verify_live`]).
pub fn reverify(dir: &Path, databases: Option<&Path>) -> Result<(usize, usize)> {
    let executor = Executor::new(database_root(dir, databases)?);
    let (mut ok, mut bad) = (0, 0);
    for row in read_rows(dir)? {
        let Some(expected) = &row.gold_answer else { continue };
        if row.variant_of.is_some() {
            continue; // variant rows run only through their migration (tests/variants.rs)
        }
        let (setup, calls) = crate::tools::setup_and_calls(row.initialization_step.as_ref(), &row.output);
        match executor.run_with_setup(setup, calls) {
            Ok(got) => match crate::verify::compare(expected, &got, row.ordered, row.ties.as_deref()) {
                Ok(()) => ok += 1,
                Err(d) => {
                    eprintln!("{}: answer differs from gold_answer: {d}", row.id);
                    bad += 1;
                }
            },
            Err(e) => {
                eprintln!("{}: {e}", row.id);
                bad += 1;
            }
        }
    }
    Ok((ok, bad))
}
