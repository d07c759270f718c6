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
//! into a tree of intents, slots and words ([`parse`]); then ([`lower`]):
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
//! - repeated intents stay separate calls; a slot repeated in one intent becomes an array of its
//!   values in utterance order (see [`super::nlu::shape`]);
//! - a slot holding both a nested intent and words (3 rows) → `mixed_slot`; a slot holding
//!   nothing → `empty_slot`; an intent directly inside an intent or a slot inside a slot →
//!   `unexpected_nesting`. Nothing is guessed.
//!
//! Labels are `<tool>_<n>`, `n` counting calls of that tool in the example from 1.
//! `tools` of an example are the specs of the tools it calls; `tools/functions.json` holds all
//! tools and each tool's description lists its domains.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde_json::json;

use super::Conversion;
use super::check::{Checker, SeqStats};
use super::nlu::shape::{RawCall, Shapes, identifier, words};
use crate::corpus::{BadRecord, CorpusError};
use crate::dataset::{Drop, Example, Outcome};
use crate::recipe::ResolvedSource;
use crate::tools::label_ref;

/// The TOPv2 split names.
const SPLITS: [&str; 3] = ["train", "eval", "test"];

/// A node of a parse tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// A word: its index among the parse's words.
    Word(usize),
    /// `[IN:NAME ...]`.
    Intent(Frame),
    /// `[SL:NAME ...]`.
    Slot(Frame),
}

/// A bracketed intent or slot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Frame {
    /// The name without the `IN:`/`SL:` prefix.
    pub name: String,
    /// Children in order.
    pub children: Vec<Node>,
}

/// A parsed semantic parse: the root intent and the words in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tree<'a> {
    pub root: Frame,
    pub words: Vec<&'a str>,
}

/// Parses a TOP semantic parse (whitespace-separated tokens; `[IN:X`, `[SL:X` open, `]` closes).
pub(crate) fn parse(text: &str) -> Result<Tree<'_>, String> {
    struct P<'a> {
        toks: Vec<&'a str>,
        pos: usize,
        words: Vec<&'a str>,
    }
    impl<'a> P<'a> {
        /// At an opening token: reads the frame up to its `]`.
        fn frame(&mut self) -> Result<Node, String> {
            let open = self.pos;
            let tok = self.toks[open];
            let label = &tok[1..];
            let (is_intent, name) = if let Some(n) = label.strip_prefix("IN:") {
                (true, n)
            } else if let Some(n) = label.strip_prefix("SL:") {
                (false, n)
            } else {
                return Err(format!("token {}: `{tok}` is neither `[IN:…` nor `[SL:…`", open + 1));
            };
            if name.is_empty() || name.contains(['[', ']']) {
                return Err(format!("token {}: bad label `{tok}`", open + 1));
            }
            self.pos += 1;
            let mut children = Vec::new();
            loop {
                let Some(&t) = self.toks.get(self.pos) else {
                    return Err(format!("`{tok}` opened at token {} is never closed", open + 1));
                };
                if t == "]" {
                    self.pos += 1;
                    break;
                } else if t.starts_with('[') {
                    children.push(self.frame()?);
                } else {
                    children.push(Node::Word(self.words.len()));
                    self.words.push(t);
                    self.pos += 1;
                }
            }
            let frame = Frame {
                name: name.to_string(),
                children,
            };
            Ok(if is_intent {
                Node::Intent(frame)
            } else {
                Node::Slot(frame)
            })
        }
    }
    let mut p = P {
        toks: text.split_whitespace().collect(),
        pos: 0,
        words: Vec::new(),
    };
    match p.toks.first() {
        None => return Err("empty semantic parse".into()),
        Some(t) if !t.starts_with("[IN:") => {
            return Err(format!("the parse must start with an intent `[IN:…`, found `{t}`"));
        }
        _ => {}
    }
    let root = match p.frame()? {
        Node::Intent(f) => f,
        _ => unreachable!("checked above"),
    };
    if p.pos != p.toks.len() {
        return Err(format!(
            "token {}: `{}` after the root intent was closed",
            p.pos + 1,
            p.toks[p.pos]
        ));
    }
    Ok(Tree { root, words: p.words })
}

/// Character spans of `words` in `utterance`, in order (whitespace between them skipped), or
/// `None` when the words do not spell the utterance.
fn align(utterance: &str, words: &[&str]) -> Option<Vec<(usize, usize)>> {
    let mut pos = 0;
    let mut spans = Vec::with_capacity(words.len());
    for w in words {
        let rest = &utterance[pos..];
        let skipped = rest.len() - rest.trim_start().len();
        pos += skipped;
        if !utterance[pos..].starts_with(w) {
            return None;
        }
        spans.push((pos, pos + w.len()));
        pos += w.len();
    }
    Some(spans)
}

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
enum Row {
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

struct FileResult {
    split: String,
    rows: Vec<Row>,
    bad: Vec<BadRecord>,
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

fn assemble(results: Vec<FileResult>) -> Conversion {
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
    for r in &results {
        for row in &r.rows {
            if let Row::Kept { calls, .. } = row {
                for c in calls {
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
    let by_name: HashMap<&str, &crate::tools::ToolSpec> = catalog.iter().map(|t| (t.name.as_str(), t)).collect();

    let mut splits: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut bad_records = Vec::new();
    let mut stats = SeqStats::default();
    let mut nested_calls = 0usize;
    let mut repeated_tool_examples = 0usize;
    let mut unaligned = 0usize;
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
            let mut tools = Vec::new();
            for c in &output {
                if !tools.iter().any(|t: &crate::tools::ToolSpec| t.name == c.name) {
                    tools.push(crate::tools::ToolSpec::reference(&by_name[c.name.as_str()].name));
                }
            }
            *by_domain
                .entry(r.split.clone())
                .or_default()
                .entry(domain.clone())
                .or_insert(0) += 1;
            let example = Example {
                id,
                split: r.split.clone(),
                input: utterance,
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
    Conversion {
        splits,
        bad_records,
        catalog,
        stats,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn calls(parse_text: &str, utterance: &str) -> Result<Vec<(String, String, Value)>, Refusal> {
        let tree = parse(parse_text).expect("parses");
        let (lowered, _) = lower(&tree, utterance)?;
        let mut s = Shapes::default();
        for l in &lowered {
            s.observe(&l.call);
        }
        Ok(lowered
            .iter()
            .map(|l| {
                let c = s.call(&l.call, l.label.clone());
                (c.name, c.label, Value::Object(c.arguments))
            })
            .collect())
    }

    #[test]
    fn parser_errors_say_where() {
        assert!(parse("[IN:A x [SL:B y ]").unwrap_err().contains("never closed"));
        assert!(parse("[IN:A x ] ]").unwrap_err().contains("token 4"));
        assert!(parse("[IN:A [XX:B x ] ]").unwrap_err().contains("neither"));
        assert!(parse("x [IN:A ]").unwrap_err().contains("must start"));
        assert!(parse("").is_err());
    }

    #[test]
    fn nested_intent_is_an_earlier_call_and_names_are_whole() {
        // navigation_train.tsv: GET_LOCATION_HOME nested in a slot of GET_ESTIMATED_DURATION.
        let got = calls(
            "[IN:GET_ESTIMATED_DURATION how long to [SL:DESTINATION [IN:GET_LOCATION_HOME [SL:CONTACT my ] home ] ] from [SL:SOURCE [IN:GET_LOCATION [SL:POINT_ON_MAP the mall ] ] ] ]",
            "how long to my home from the mall",
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                (
                    "get_location_home".into(),
                    "get_location_home_1".into(),
                    json!({"contact": "my"})
                ),
                (
                    "get_location".into(),
                    "get_location_1".into(),
                    json!({"point_on_map": "the mall"})
                ),
                (
                    "get_estimated_duration".into(),
                    "get_estimated_duration_1".into(),
                    json!({"destination": "$get_location_home_1$", "source": "$get_location_1$"})
                ),
            ]
        );
    }

    #[test]
    fn words_map_to_raw_text_and_repeats_stay() {
        let got = calls(
            "[IN:CREATE_REMINDER [SL:TODO my doctor 's appointment ] [SL:DATE_TIME today ] and [SL:DATE_TIME tomorrow ] ]",
            "my  doctor's appointment today and tomorrow",
        )
        .unwrap();
        assert_eq!(
            got[0].2,
            json!({"todo": "my  doctor's appointment", "date_time": ["today", "tomorrow"]})
        );
        let got = calls("[IN:CREATE_REMINDER [SL:TODO x ] ]", "x").unwrap();
        assert_eq!(got[0].2, json!({"todo": "x"}));
        let got = calls(
            "[IN:GET_WEATHER [SL:LOCATION [IN:GET_LOCATION [SL:A x ] ] ] [SL:LOCATION [IN:GET_LOCATION [SL:A y ] ] ] ]",
            "x y",
        )
        .unwrap();
        assert_eq!(
            got.iter().map(|c| c.1.as_str()).collect::<Vec<_>>(),
            vec!["get_location_1", "get_location_2", "get_weather_1"]
        );
    }

    #[test]
    fn refusals() {
        assert_eq!(
            calls("[IN:A [SL:B [IN:UNSUPPORTED_WEATHER x ] ] ]", "x").unwrap_err().0,
            "unsupported_intent"
        );
        assert_eq!(calls("[IN:A [SL:B [IN:C x ] y ] ]", "x y").unwrap_err().0, "mixed_slot");
        assert_eq!(calls("[IN:A [SL:B ] ]", "").unwrap_err().0, "empty_slot");
        assert_eq!(calls("[IN:A [IN:C x ] ]", "x").unwrap_err().0, "unexpected_nesting");
    }

    #[test]
    fn malformed_rows_are_bad_records_with_lines() {
        let text = "domain\tutterance\tsemantic_parse\nweather\tsun\t[IN:GET_WEATHER sun ]\nweather\tbad\t[IN:GET_WEATHER bad\nweather\ttwo fields\n";
        let r = convert_text(text, "w.tsv", "weather", "test");
        assert_eq!(r.bad.len(), 2);
        assert!(
            r.bad[0].message.starts_with("line 3:") && r.bad[0].record == 1,
            "{:?}",
            r.bad
        );
        assert!(r.bad[1].message.starts_with("line 4:"), "{:?}", r.bad);
        let c = assemble(vec![r]);
        let o = &c.splits["test"];
        assert_eq!((o.attempted, o.examples.len(), o.drops.len()), (3, 1, 2));
        assert!(o.drops.iter().all(|d| d.reason == "parse_error"));
    }
}
