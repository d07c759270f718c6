//! SGD (`sgd` source, DSTC8 Schema-Guided Dialogue) → SeqSGD.
//!
//! Input: `<root>/{train,dev,test}/schema.json` and `<root>/<split>/dialogues_*.json`.
//!
//! Rules (each pinned by a test below):
//!
//! - **Catalog**: one tool per (service, intent) of the schemas, named `<Service>_<Intent>`
//!   (e.g. `Restaurants_2_ReserveRestaurant`; intent names repeat across services with different
//!   slots, so the service is part of the name). Slots become `string` parameters with the slot
//!   description; `possible_values` become an `enum` only when the slot `is_categorical`;
//!   `required_slots` are `required`, `optional_slots` optional (their default becomes the JSON
//!   Schema `default` unless it is `dontcare`, which means "any" and is the same as omission);
//!   `additionalProperties: false`. `result_slots` are the `output_parameters`. A service defined
//!   in several splits' schemas is taken from the first split (train, dev, test); differing
//!   definitions are counted in `schema_conflicts`.
//! - **Calls**: one call per system-turn `service_call`, in dialogue order, with its canonical
//!   method and parameter values (not the user state's surface forms: "half past 11 in the
//!   morning" is `11:30` in the call). A call identical to the one just before it (the system
//!   re-ran the same query) is collapsed into one (`duplicate_calls_collapsed`). Labels are
//!   `<tool>_<n>` (n counts that tool's calls in the example, from 1).
//! - **Failed calls**: a call the system reported as failed — a `NOTIFY_FAILURE` action in the
//!   system frame that holds the `service_call` ("The reservation could not be made"; 705 of the
//!   16,683 calls in the shared corpus) — is left out of the gold by default and counted
//!   (`failed_calls_removed`, per row `meta.failed_calls_removed`); the recipe knob
//!   `[seq] keep_failed_calls = true` keeps it. Removal happens before the collapse of repeated
//!   calls, so a retry identical to a failed attempt stays one call.
//! - **Order**: `ordered` is true on every row with two or more calls: they are the calls the
//!   system executed, in dialogue order (a booking follows the search that found its venue).
//! - **Request**: the deterministic `templates/seq-sgd-request.j2` rendering of the calls (intent
//!   description + slot names + canonical values), so every value is grounded. There is no LLM
//!   paraphrase yet; `meta.surface_forms` keeps what the user actually said for each canonical
//!   value that differs, for a later paraphrase step.
//! - **Tools of an instance**: every intent of the services the dialogue lists (`services`) plus
//!   every intent of the other services of their domains (`Restaurants_1` lists `Restaurants_2`
//!   too: the domain is the service name before its `_<n>` suffix), in schema order (API-BLEND
//!   §5.7.2: the dataset's API list, not the gold set).
//!
//! Drop reasons: `no_service_call` (the dialogue never executed a call), `only_failed_calls`
//! (every call it executed failed), `unknown_tool` (a call
//! whose service or method is not in the schemas), `schema_violation` (a call failing its JSON
//! Schema). Malformed dialogue records are bad records (file, record index, message).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::{Map, Value, json};

use super::stats::SeqStats;
use crate::tools::check::Checker;
mod dialogue;
mod schema;
#[cfg(test)]
mod tests;
mod text;
mod trajectory;

use dialogue::{Dialogue, ServiceCall, parse_dialogue};
use schema::{Schema, load_schema, tool_name};
use text::render_request;

use super::{Conversion, SeqKnobs};
use crate::corpus::{BadRecord, CorpusError};
use crate::dataset::{Drop, Example, Outcome};
use crate::recipe::ResolvedSource;
use crate::tools::{Call, ToolSpec};

/// The SGD splits, in catalog precedence order.
const SPLITS: [&str; 3] = ["train", "dev", "test"];

/// The request template (minijinja).
const REQUEST_TEMPLATE: &str = include_str!("../../../templates/seq-sgd-request.j2");

/// Published SeqSGD sizes (API-BLEND, train/dev/test), for the report.
const PAPER_SIZES: [(&str, usize); 3] = [("train", 6782), ("dev", 1092), ("test", 1567)];

fn dialogue_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("dialogues_") && n.ends_with(".json"))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// Every file the conversion reads: per split its `schema.json` and dialogue files, sorted.
pub fn inputs(source: &ResolvedSource) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for split in SPLITS {
        let dir = source.root.join(split);
        let schema = dir.join("schema.json");
        if schema.is_file() {
            out.push(schema);
        }
        out.extend(dialogue_files(&dir));
    }
    out.sort();
    out
}

fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).display().to_string()
}

/// What happened to one dialogue.
enum Converted {
    /// The example, calls collapsed, failed calls removed.
    Example(Box<Example>, usize, usize),
    Drop(Drop),
}

fn convert_dialogue(
    d: &Dialogue,
    split: &str,
    file: &str,
    schema: &Schema,
    checker: &Checker,
    keep_failed: bool,
) -> Converted {
    let id = format!("{split}/{}", d.id);
    let drop = |reason: &str, detail: String| {
        Converted::Drop(Drop {
            id: id.clone(),
            group: split.to_string(),
            reason: reason.into(),
            detail,
            question: String::new(),
            source: Drop::source_text(
                &d.calls
                    .iter()
                    .map(|c| format!("{}.{}({})", c.service, c.method, Value::Object(c.parameters.clone())))
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        })
    };
    if d.calls.is_empty() {
        return drop("no_service_call", format!("dialogue {} executed no service call", d.id));
    }
    let known: BTreeSet<String> = schema.services.values().flatten().map(|t| t.name.clone()).collect();
    let mut calls: Vec<Call> = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut collapsed = 0;
    let mut failed = 0;
    let mut last: Option<&ServiceCall> = None;
    for sc in &d.calls {
        if sc.failed && !keep_failed {
            failed += 1;
            continue;
        }
        if last.is_some_and(|l| l.service == sc.service && l.method == sc.method && l.parameters == sc.parameters) {
            collapsed += 1;
            continue;
        }
        last = Some(sc);
        let name = tool_name(&sc.service, &sc.method);
        if !known.contains(&name) {
            return drop(
                "unknown_tool",
                format!("service call {}.{} is not in the schemas", sc.service, sc.method),
            );
        }
        let n = counts.entry(name.clone()).or_insert(0);
        *n += 1;
        let call = Call {
            label: format!("{name}_{n}"),
            name,
            arguments: sc.parameters.clone(),
        };
        if let Err(e) = checker.validate(&call) {
            return drop("schema_violation", e);
        }
        calls.push(call);
    }
    if calls.is_empty() {
        return drop(
            "only_failed_calls",
            format!("every service call of dialogue {} failed ({failed})", d.id),
        );
    }
    let input = match render_request(&calls, schema) {
        Ok(text) => text,
        Err(e) => return drop("template_error", e),
    };
    let tools: Vec<ToolSpec> = instance_tools(d, schema)
        .iter()
        .map(|t| ToolSpec::reference(t))
        .collect();
    let used: BTreeSet<(&str, &str)> = calls
        .iter()
        .flat_map(|c| c.arguments.iter().filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))))
        .collect();
    let surface: Vec<Value> = d
        .surface_forms
        .iter()
        .filter(|(slot, canon, _)| used.contains(&(slot.as_str(), canon.as_str())))
        .map(|(slot, canon, said)| json!({"slot": slot, "canonical": canon, "said": said}))
        .collect();
    let example = Example {
        id,
        split: split.to_string(),
        input,
        ordered: calls.len() > 1,
        output: calls,
        tools: tools.into(),
        meta: Some(json!({
            "dialogue_id": d.id,
            "file": file,
            "services": d.services,
            "request": "template",
            "duplicate_calls_collapsed": collapsed,
            "failed_calls_removed": failed,
            "surface_forms": surface,
        })),
        ..Example::default()
    };
    Converted::Example(Box::new(example), collapsed, failed)
}

/// What one dialogue file gives.
#[derive(Default)]
struct FileOut {
    outcome: Outcome,
    bad: Vec<BadRecord>,
    collapsed: usize,
    failed: usize,
    /// The dialogue trajectories ([`trajectory`]) and their drops.
    dialogues: Vec<crate::dataset::dialogue::Dialogue>,
    dialogue_drops: Vec<Drop>,
}

/// Reads and converts one dialogue file; its JSON is dropped before the next file is read, so
/// peak memory is one parsed file per worker thread, not the whole split.
fn convert_file(
    root: &Path,
    path: &Path,
    split: &str,
    schema: &Schema,
    checker: &Checker,
    keep_failed: bool,
) -> Result<FileOut, CorpusError> {
    let file = rel(root, path);
    let Value::Array(records) = crate::corpus::read_json_lossy(path)? else {
        return Err(CorpusError::Malformed {
            path: path.to_path_buf(),
            message: "expected a JSON array of dialogues".into(),
        });
    };
    let mut out = FileOut::default();
    for (i, rec) in records.iter().enumerate() {
        let d = match crate::corpus::invalid_record(rec).map_or_else(|| parse_dialogue(rec), Err) {
            Ok(d) => d,
            Err(message) => {
                out.bad.push(BadRecord {
                    file: file.clone(),
                    record: i,
                    message,
                });
                continue;
            }
        };
        out.outcome.attempted += 1;
        match trajectory::dialogue(rec, &d, split, schema, checker, instance_tools(&d, schema)) {
            Ok(t) => out.dialogues.push(t),
            Err(drop) => out.dialogue_drops.push(drop),
        }
        match convert_dialogue(&d, split, &file, schema, checker, keep_failed) {
            Converted::Example(e, collapsed, failed) => {
                out.collapsed += collapsed;
                out.failed += failed;
                out.outcome.examples.push(*e);
            }
            Converted::Drop(d) => out.outcome.drops.push(d),
        }
    }
    Ok(out)
}

/// Converts the source (only `split` when given) with the default knobs.
pub fn convert(source: &ResolvedSource, split: Option<&str>) -> Result<Conversion, CorpusError> {
    convert_with(source, split, &SeqKnobs::default())
}

/// Converts the source (only `split` when given); `knobs.keep_failed_calls` keeps the calls the
/// system reported as failed.
pub fn convert_with(source: &ResolvedSource, split: Option<&str>, knobs: &SeqKnobs) -> Result<Conversion, CorpusError> {
    let root = &source.root;
    let schema = load_schema(root, &SPLITS)?;
    let catalog: Vec<ToolSpec> = schema.services.values().flatten().cloned().collect();
    let checker = Checker::new(&catalog).map_err(|message| CorpusError::Malformed {
        path: root.clone(),
        message,
    })?;
    let mut conversion = Conversion {
        catalog,
        ..Conversion::default()
    };
    let mut stats = SeqStats::default();
    let mut collapsed_total = 0;
    let mut failed_total = 0;
    let mut files_per_split = Map::new();
    let mut dialogues = crate::dataset::dialogue::Dialogues {
        rules: trajectory::RULES.iter().map(|r| r.to_string()).collect(),
        ..Default::default()
    };
    for sp in SPLITS.iter().filter(|s| split.is_none_or(|want| want == **s)) {
        let files = dialogue_files(&root.join(sp));
        if files.is_empty() {
            continue;
        }
        files_per_split.insert(sp.to_string(), json!(files.len()));
        let per_file: Vec<FileOut> = files
            .par_iter()
            .map(|f| convert_file(root, f, sp, &schema, &checker, knobs.keep_failed_calls))
            .collect::<Result<_, _>>()?;
        let mut outcome = Outcome::default();
        for f in per_file {
            dialogues.splits.entry(sp.to_string()).or_default().extend(f.dialogues);
            dialogues
                .drops
                .entry(sp.to_string())
                .or_default()
                .extend(f.dialogue_drops);
            conversion.bad_records.extend(f.bad);
            collapsed_total += f.collapsed;
            failed_total += f.failed;
            outcome.attempted += f.outcome.attempted;
            for e in &f.outcome.examples {
                stats.add(e, &checker);
            }
            outcome.examples.extend(f.outcome.examples);
            outcome.drops.extend(f.outcome.drops);
        }
        conversion.splits.insert(sp.to_string(), outcome);
    }
    let mut s = stats.into_json();
    s.insert(
        "rules".into(),
        json!([
            "one call per system-turn service_call, in dialogue order, with its canonical method and parameter values; a call identical to the previous one is collapsed",
            "a call the system reported as failed (NOTIFY_FAILURE in its frame) is left out of the gold (recipe [seq] keep_failed_calls = true keeps it); a dialogue whose calls all failed is dropped (only_failed_calls)",
            "ordered: true on every row with two or more calls (the calls follow dialogue order)",
            "tools: one per schema (service, intent), named <Service>_<Intent>; slots are string parameters, enum only for categorical slots, required from required_slots",
            "instance tools: every intent of the dialogue's services",
            "request: deterministic template over the calls (every value grounded); meta.surface_forms keeps what the user said",
        ]),
    );
    s.insert(
        "request_text".into(),
        json!("template: templates/seq-sgd-request.j2 (deterministic, no LLM paraphrase yet)"),
    );
    s.insert("duplicate_calls_collapsed".into(), json!(collapsed_total));
    s.insert(
        if knobs.keep_failed_calls {
            "failed_calls_kept"
        } else {
            "failed_calls_removed"
        }
        .into(),
        json!(failed_total),
    );
    s.insert("schema_services".into(), json!(schema.services.len()));
    s.insert("schema_conflicts".into(), json!(schema.conflicts));
    s.insert("tools".into(), json!(conversion.catalog.len()));
    s.insert("dialogue_files".into(), Value::Object(files_per_split));
    s.insert("paper_sizes".into(), super::stats::paper_sizes(&PAPER_SIZES));
    s.insert("dialogue_trajectories".into(), dialogues.counts());
    conversion.stats = s;
    conversion.dialogues = Some(dialogues);
    Ok(conversion)
}

/// The API list of a dialogue (names): every intent of the services it lists and of the other
/// services of their domains, in schema order.
fn instance_tools(d: &Dialogue, schema: &Schema) -> Vec<String> {
    let domains: BTreeSet<&str> = d.services.iter().map(|s| service_domain(s)).collect();
    schema
        .services
        .iter()
        .filter(|(s, _)| d.services.contains(*s) || domains.contains(service_domain(s)))
        .flat_map(|(_, tools)| tools.iter().map(|t| t.name.clone()))
        .collect()
}

/// The domain of an SGD service: its name without the `_<n>` version suffix (`Restaurants_2` →
/// `Restaurants`; a name without one is its own domain).
fn service_domain(service: &str) -> &str {
    match service.rsplit_once('_') {
        Some((domain, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => domain,
        _ => service,
    }
}
