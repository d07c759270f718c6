//! TOPv2 (`topv2` source) → SeqTopV2: each bracketed semantic parse becomes a sequence of calls.
//!
//! # Input
//!
//! `<root>/{domain}_{split}.tsv` (`split` ∈ `train`, `eval`, `test`; split names are kept as in
//! the source, so the dev split is `eval`), a header line, then `domain \t utterance \t
//! semantic_parse` rows. A row without three fields or whose parse does not parse is a
//! [`BadRecord`] (record = 0-based data row, message names the line) and a `parse_error` drop.
//!
//! # Rules
//!
//! The parse (`[IN:GET_WEATHER [SL:LOCATION Boston ] ]`) is read by a recursive-descent parser
//! into a tree of intents, slots and words (`parse`); then (`lower`):
//!
//! - any `IN:UNSUPPORTED*` intent anywhere → the row is dropped (`unsupported_intent`);
//! - each intent is one call, tool name = the intent lower-cased (`IN:GET_LOCATION_HOME` →
//!   `get_location_home`), one parameter per slot (`SL:DATE_TIME` → `date_time`), arguments in
//!   utterance order; names are compared whole, so `GET_LOCATION` and `GET_LOCATION_HOME` are
//!   different tools;
//! - a slot holding only words → the utterance text they cover (raw characters, e.g. `doctor's`
//!   where the parse has `doctor 's`);
//! - a slot holding one nested intent → that intent is lowered first, as an *earlier* call, and
//!   the argument is its `$label$`: the sequence is in dependency order (post-order), siblings
//!   in utterance order;
//! - repeated intents stay separate calls; a slot repeated in one intent (`[SL:DATE_TIME 7am ]
//!   and [SL:DATE_TIME 8am ]`) → the row is dropped (`repeated_slot`): API-BLEND's calls hold one
//!   value per slot (its SeqTopV2 script keys a call's arguments by slot name), and keeping only
//!   the first value would make a gold call that does less than the request asks;
//! - a slot holding both a nested intent and words (3 rows) → `mixed_slot`; a slot holding
//!   nothing → `empty_slot`; an intent directly inside an intent or a slot inside a slot →
//!   `unexpected_nesting`. Nothing is guessed.
//!
//! Then the rows are filtered as API-BLEND §3.2 filters SeqTopV2 (`filter`, one reason code
//! each, in this order): `conflicting_gold` (the utterance has two different gold call
//! sequences anywhere in TOPv2: every row of it goes), `duplicate_utterance` (a later row of the
//! same split with the same utterance), `seen_in_earlier_split` (an `eval` utterance already in
//! `train`, a `test` utterance already in `train` or `eval`). Utterances are compared
//! case-insensitively with whitespace collapsed.
//!
//! `ordered` is true exactly when a call consumes an earlier call's result (a `$label$`
//! argument): the nested intent must run first.
//!
//! Labels are `<tool>_<n>`, `n` counting calls of that tool in the example from 1.
//! `tools` of an example are every intent of its domain (API-BLEND §5.7.2: the dataset's API
//! list, not the gold set): the tools called by any kept row of that domain in any split, in
//! catalog order, one shared toolkit of references per domain; `tools/functions.json` holds all
//! tools and each tool's description lists its domains.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::json;

use super::Conversion;
use super::nlu::shape::{RawCall, Shapes, identifier, words};
use super::stats::SeqStats;
use crate::corpus::{BadRecord, CorpusError};
use crate::dataset::{Drop, Example, Outcome};
use crate::recipe::ResolvedSource;
use crate::tools::check::Checker;
use crate::tools::label_ref;

mod filter;
mod parse;
#[cfg(test)]
mod tests;

use parse::align;
pub(crate) use parse::{Frame, Node, Tree, parse};

/// The TOPv2 split names, in the order the cross-split filter walks them.
pub(super) const SPLITS: [&str; 3] = ["train", "eval", "test"];

/// Published SeqTopV2 sizes (API-BLEND Table 1: train, dev, test), for the report.
const PAPER_SIZES: [(&str, usize); 3] = [("train", 94_458), ("eval", 13_477), ("test", 6_095)];

/// One lowered call with its source names.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Lowered {
    pub call: RawCall,
    pub label: String,
    pub intent: String,
    /// `(parameter, source slot name)` per argument.
    pub slots: Vec<(String, String)>,
}

/// Why a tree cannot be lowered: reason code and detail.
pub(crate) type Refusal = (&'static str, String);

fn has_unsupported(f: &Frame) -> Option<&str> {
    if f.name.starts_with("UNSUPPORTED") {
        return Some(&f.name);
    }
    f.children.iter().find_map(|c| match c {
        Node::Intent(g) | Node::Slot(g) => has_unsupported(g),
        Node::Word(_) => None,
    })
}

/// Lowers a tree to calls in dependency order (module docs, "Rules").
pub(crate) fn lower(tree: &Tree, utterance: &str) -> Result<(Vec<Lowered>, bool), Refusal> {
    if let Some(name) = has_unsupported(&tree.root) {
        return Err(("unsupported_intent", format!("the parse contains IN:{name}")));
    }
    let spans = align(utterance, &tree.words);
    let mut out = Vec::new();
    let mut counts: HashMap<String, usize> = HashMap::new();
    lower_intent(&tree.root, tree, spans.as_deref(), utterance, &mut out, &mut counts)?;
    Ok((out, spans.is_some()))
}

fn lower_intent(
    f: &Frame,
    tree: &Tree,
    spans: Option<&[(usize, usize)]>,
    utterance: &str,
    out: &mut Vec<Lowered>,
    counts: &mut HashMap<String, usize>,
) -> Result<String, Refusal> {
    let tool = identifier(&f.name);
    let mut args = Vec::new();
    let mut slots = Vec::new();
    for child in &f.children {
        let slot = match child {
            Node::Word(_) => continue,
            Node::Intent(g) => {
                return Err((
                    "unexpected_nesting",
                    format!("IN:{} directly inside IN:{}", g.name, f.name),
                ));
            }
            Node::Slot(s) => s,
        };
        let word_ix: Vec<usize> = slot
            .children
            .iter()
            .filter_map(|c| if let Node::Word(i) = c { Some(*i) } else { None })
            .collect();
        let nested: Vec<&Frame> = slot
            .children
            .iter()
            .filter_map(|c| if let Node::Intent(g) = c { Some(g) } else { None })
            .collect();
        if let Some(Node::Slot(g)) = slot.children.iter().find(|c| matches!(c, Node::Slot(_))) {
            return Err((
                "unexpected_nesting",
                format!("SL:{} directly inside SL:{}", g.name, slot.name),
            ));
        }
        let value = match (word_ix.as_slice(), nested.as_slice()) {
            ([], []) => {
                return Err((
                    "empty_slot",
                    format!("SL:{} of IN:{} holds no words", slot.name, f.name),
                ));
            }
            ([], [g]) => label_ref(&lower_intent(g, tree, spans, utterance, out, counts)?),
            (w, []) => {
                let (first, last) = (w[0], w[w.len() - 1]);
                match spans {
                    Some(s) => utterance[s[first].0..s[last].1].to_string(),
                    None => tree.words[first..=last].join(" "),
                }
            }
            _ => {
                return Err((
                    "mixed_slot",
                    format!(
                        "SL:{} of IN:{} holds {} nested intent(s) and {} word(s)",
                        slot.name,
                        f.name,
                        nested.len(),
                        word_ix.len()
                    ),
                ));
            }
        };
        let param = identifier(&slot.name);
        if slots.iter().any(|(p, _)| *p == param) {
            return Err((
                "repeated_slot",
                format!("SL:{} appears more than once in IN:{}", slot.name, f.name),
            ));
        }
        slots.push((param.clone(), slot.name.clone()));
        args.push((param, value));
    }
    let n = counts.entry(tool.clone()).or_insert(0);
    *n += 1;
    let label = format!("{tool}_{n}");
    out.push(Lowered {
        call: RawCall { tool, args },
        label: label.clone(),
        intent: f.name.clone(),
        slots,
    });
    Ok(label)
}

/// The TSV files of the requested splits, sorted by name.
fn tsv_files(root: &Path, split: Option<&str>) -> Vec<(PathBuf, String, String)> {
    let mut files = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return files;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".tsv") else {
            continue;
        };
        let Some((domain, s)) = stem.rsplit_once('_') else {
            continue;
        };
        if SPLITS.contains(&s) && split.is_none_or(|w| w == s) {
            files.push((e.path(), domain.to_string(), s.to_string()));
        }
    }
    files.sort();
    files
}

/// Every file the conversion reads.
pub fn inputs(source: &ResolvedSource) -> Vec<PathBuf> {
    tsv_files(&source.root, None).into_iter().map(|(p, _, _)| p).collect()
}

/// A row's conversion before the catalog is fixed.
pub(super) enum Row {
    Kept {
        id: String,
        utterance: String,
        domain: String,
        parse: String,
        calls: Vec<Lowered>,
        aligned: bool,
    },
    Dropped(Drop),
}

pub(super) struct FileResult {
    pub(super) split: String,
    pub(super) rows: Vec<Row>,
    pub(super) bad: Vec<BadRecord>,
}

fn convert_file(path: &Path, domain: &str, split: &str) -> Result<FileResult, CorpusError> {
    let text = crate::corpus::read_text(path)?;
    Ok(convert_text(&text, &path.display().to_string(), domain, split))
}

fn convert_text(text: &str, file: &str, domain: &str, split: &str) -> FileResult {
    let mut rows = Vec::new();
    let mut bad = Vec::new();
    let mut lines = text.lines().enumerate();
    let mut data_row = 0usize;
    if let Some((_, first)) = lines.clone().next()
        && first.starts_with("domain\t")
    {
        lines.next();
    }
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let row = data_row;
        data_row += 1;
        let id = format!("{split}/{domain}/{row}");
        let fail = |message: String, bad: &mut Vec<BadRecord>| {
            bad.push(BadRecord {
                file: file.to_string(),
                record: row,
                message: format!("line {}: {message}", n + 1),
            });
            Row::Dropped(Drop {
                id: id.clone(),
                group: split.to_string(),
                reason: "parse_error".into(),
                detail: format!("{file} line {}: {message}", n + 1),
                question: String::new(),
                source: Drop::source_text(line),
            })
        };
        if let Some(message) = crate::corpus::invalid_line(line) {
            rows.push(fail(message, &mut bad));
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let [row_domain, utterance, parse_text] = fields.as_slice() else {
            rows.push(fail(
                format!("expected 3 tab-separated fields, found {}", fields.len()),
                &mut bad,
            ));
            continue;
        };
        let tree = match parse(parse_text) {
            Ok(t) => t,
            Err(e) => {
                rows.push(fail(e, &mut bad));
                continue;
            }
        };
        rows.push(match lower(&tree, utterance) {
            Ok((calls, aligned)) => Row::Kept {
                id,
                utterance: utterance.to_string(),
                domain: row_domain.to_string(),
                parse: parse_text.to_string(),
                calls,
                aligned,
            },
            Err((reason, detail)) => Row::Dropped(Drop {
                id,
                group: split.to_string(),
                reason: reason.into(),
                detail,
                question: utterance.to_string(),
                source: Drop::source_text(parse_text),
            }),
        });
    }
    FileResult {
        split: split.to_string(),
        rows,
        bad,
    }
}

/// Converts the source (only `split` when given).
pub fn convert(source: &ResolvedSource, split: Option<&str>) -> Result<Conversion, CorpusError> {
    let files = tsv_files(&source.root, split);
    if files.is_empty() {
        return Err(CorpusError::Malformed {
            path: source.root.clone(),
            message: format!(
                "no `<domain>_{}.tsv` files under the corpus root",
                split.unwrap_or("{train,eval,test}")
            ),
        });
    }
    let results: Vec<FileResult> = files
        .par_iter()
        .map(|(p, d, s)| convert_file(p, d, s))
        .collect::<Result<_, _>>()?;
    Ok(assemble(results))
}

fn assemble(mut results: Vec<FileResult>) -> Conversion {
    filter::apply(&mut results);
    let drops_by_split = filter::counts(&results);
    // Tools, their domains and parameters.
    let mut tool_info: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for r in &results {
        for row in &r.rows {
            if let Row::Kept { domain, calls, .. } = row {
                for c in calls {
                    let e = tool_info
                        .entry(c.call.tool.clone())
                        .or_insert_with(|| (c.intent.clone(), BTreeSet::new()));
                    e.1.insert(domain.clone());
                }
            }
        }
    }
    let mut shapes = Shapes::default();
    for (tool, (intent, domains)) in &tool_info {
        shapes.tool(tool, || {
            let ds: Vec<&str> = domains.iter().map(String::as_str).collect();
            format!(
                "{} (TOPv2 intent `IN:{intent}`; domains: {}).",
                super::nlu::capitalise(&words(tool)),
                ds.join(", ")
            )
        });
    }
    let mut domain_tools: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &results {
        for row in &r.rows {
            if let Row::Kept { calls, domain, .. } = row {
                for c in calls {
                    domain_tools
                        .entry(domain.clone())
                        .or_default()
                        .insert(c.call.tool.clone());
                    for (param, slot) in &c.slots {
                        shapes.param(&c.call.tool, param, || {
                            format!(
                                "{} (TOPv2 slot `SL:{slot}`): the words of the request, or the `$label$` of an earlier call that resolves it.",
                                super::nlu::capitalise(&words(param))
                            )
                        });
                    }
                    shapes.observe(&c.call);
                }
            }
        }
    }
    let catalog = shapes.catalog();
    let checker = Checker::new(&catalog).expect("generated schemas compile");
    let api_lists: HashMap<String, crate::tools::Toolkit> = domain_tools
        .into_iter()
        .map(|(domain, names)| {
            let list = catalog
                .iter()
                .filter(|t| names.contains(&t.name))
                .cloned()
                .collect::<Vec<_>>();
            (domain, super::nlu::dataset_api_list(&list))
        })
        .collect();

    let mut splits: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut bad_records = Vec::new();
    let mut stats = SeqStats::default();
    let mut nested_calls = 0usize;
    let mut repeated_tool_examples = 0usize;
    let mut unaligned = 0usize;
    let mut multi_call = 0usize;
    let mut by_domain: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for r in results {
        bad_records.extend(r.bad);
        let outcome = splits.entry(r.split.clone()).or_default();
        for row in r.rows {
            outcome.attempted += 1;
            let (id, utterance, domain, parse_text, calls, aligned) = match row {
                Row::Dropped(d) => {
                    outcome.drops.push(d);
                    continue;
                }
                Row::Kept {
                    id,
                    utterance,
                    domain,
                    parse,
                    calls,
                    aligned,
                } => (id, utterance, domain, parse, calls, aligned),
            };
            let output: Vec<_> = calls.iter().map(|c| shapes.call(&c.call, c.label.clone())).collect();
            if let Some(err) = output.iter().find_map(|c| checker.validate(c).err()) {
                outcome.drops.push(Drop {
                    id,
                    group: r.split.clone(),
                    reason: "schema_invalid".into(),
                    detail: err,
                    question: utterance,
                    source: Drop::source_text(&parse_text),
                });
                continue;
            }
            nested_calls += output
                .iter()
                .flat_map(|c| c.arguments.values())
                .filter(|v| crate::tools::as_label_ref(v).is_some())
                .count();
            let distinct: BTreeSet<&str> = output.iter().map(|c| c.name.as_str()).collect();
            repeated_tool_examples += (distinct.len() < output.len()) as usize;
            unaligned += (!aligned) as usize;
            let tools = api_lists[&domain].clone();
            *by_domain
                .entry(r.split.clone())
                .or_default()
                .entry(domain.clone())
                .or_insert(0) += 1;
            let ordered = output
                .iter()
                .flat_map(|c| c.arguments.values())
                .any(|v| crate::tools::as_label_ref(v).is_some());
            multi_call += (output.len() > 1) as usize;
            let example = Example {
                id,
                split: r.split.clone(),
                input: utterance,
                ordered,
                output,
                tools,
                meta: Some(json!({
                    "domain": domain,
                    "semantic_parse": parse_text,
                    "intents": calls.iter().map(|c| format!("IN:{}", c.intent)).collect::<Vec<_>>(),
                })),
                ..Example::default()
            };
            stats.add(&example, &checker);
            outcome.examples.push(example);
        }
    }
    let mut drops_by_reason: BTreeMap<String, usize> = BTreeMap::new();
    for d in splits.values().flat_map(|o| &o.drops) {
        *drops_by_reason.entry(d.reason.clone()).or_insert(0) += 1;
    }
    let mut stats = stats.into_json();
    stats.insert("label_reference_arguments".into(), json!(nested_calls));
    stats.insert("examples_with_repeated_tool".into(), json!(repeated_tool_examples));
    stats.insert("examples_with_unaligned_words".into(), json!(unaligned));
    stats.insert("drops_by_reason".into(), json!(drops_by_reason));
    stats.insert("examples_by_split_and_domain".into(), json!(by_domain));
    stats.insert("tools".into(), json!(catalog.len()));
    stats.insert("examples_with_several_calls".into(), json!(multi_call));
    stats.insert("drops_by_split_and_reason".into(), json!(drops_by_split));
    stats.insert("paper_sizes".into(), super::stats::paper_sizes(&PAPER_SIZES));
    Conversion {
        splits,
        bad_records,
        catalog,
        stats,
        dialogues: None,
    }
}
