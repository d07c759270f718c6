//! MixATIS / MixSNIPS (`mixatis`, `mixsnips` sources) → SeqATIS / SeqSNIPS: one call per intent
//! of a multi-intent utterance, its arguments the IOB slot chunks of that intent's clause.
//!
//! # Input
//!
//! Per split (`train`, `dev`, `test`) either the AGIF file `<split>.txt` (`token TAG` lines, an
//! intent line `a#b`, a blank line) or the GL-GIN directory `<split>/{seq.in, seq.out, label}`
//! (one example per line; `seq.out` may be missing, as for MixSNIPS train). Malformed records
//! (a token line without tag, a record without intent line, token/tag count mismatch) become
//! [`BadRecord`]s and are skipped.
//!
//! The single-intent *reference corpus* the Mix sentences were built from (ATIS for MixATIS,
//! SNIPS for MixSNIPS, AGIF format) is read from `$TOOLFORGE_ATIS` / `$TOOLFORGE_SNIPS` or the
//! sibling directory `<root>/../atis` / `<root>/../snips`, when present. Each Mix split was
//! built from the reference split of the same name.
//!
//! # Clause splitting
//!
//! The Mix corpora join single-intent sentences with the connectors `and`, `and also`,
//! `and then` and `,` (whole tokens; `and also` also counts as `and`, see [`connectors`]). For an example with `k` intents, a *split* is `k - 1`
//! ordered, non-overlapping connector occurrences leaving `k` non-empty clauses; clause `i`
//! belongs to intent `i`. When tags are known, a connector must be tagged `O` (a connector
//! inside a slot value, e.g. "between 10 am and 2 pm" is tagged `O` too, so this alone does not
//! decide). The rule, by token index:
//!
//! 1. exactly one split → taken (`split_method = "conjunction"`);
//! 2. several → the unique one whose every clause is a reference sentence with that clause's
//!    intent (`split_method = "reference_match"`);
//! 3. otherwise the example is dropped: `clause_intent_mismatch` (no split at all: fewer
//!    connectors than intents require) or `ambiguous_split` (several splits, none or several
//!    confirmed by the reference). Nothing is guessed.
//!
//! Since connectors are `O`, no slot chunk can straddle a clause boundary.
//!
//! # MixSNIPS train tags
//!
//! MixSNIPS train has no `seq.out`. Its tags are rebuilt clause by clause: a clause's tags are
//! those of the reference train sentence with the same tokens and intent, connectors are `O`.
//! A clause not found → drop `no_tags`; found with differing tag sequences → drop
//! `ambiguous_tags`. The same method is run on dev/test (ignoring their tags while splitting)
//! and compared with the gold tags: `stats.tag_reconstruction`.
//!
//! # Output
//!
//! Tools are the intents (`identifier`: `atis_flight`, `PlayMusic` → `play_music`), parameters
//! the slot types (`fromloc.city_name` → `fromloc_city_name`), values the exact token spans
//! joined by spaces. Labels are `<tool>_<n>`. An example's `tools` are the specs of the tools it
//! calls (the whole catalog is `tools/functions.json`): a full catalog per row would repeat up to
//! 18 specs with ~80 parameters in every one of 40k rows, and API-BLEND evaluates the sequence,
//! not tool retrieval; distractors can be drawn from the catalog downstream.
//!
//! Drop reason codes: `clause_intent_mismatch`, `ambiguous_split`, `no_tags`,
//! `ambiguous_tags`, `schema_invalid` (a call failing its own schema: a bug, never expected).

pub(super) mod shape;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use self::shape::{RawCall, Shapes, identifier, labels, words};
use super::Conversion;
use super::check::{Checker, SeqStats};
use crate::corpus::{BadRecord, CorpusError};
use crate::dataset::{Drop, Example, Outcome};
use crate::recipe::ResolvedSource;

/// The splits of the Mix corpora, in order.
const SPLITS: [&str; 3] = ["train", "dev", "test"];

/// Connectors between clauses, as token sequences.
const CONNECTORS: [&[&str]; 4] = [&["and", "also"], &["and", "then"], &["and"], &[","]];

/// One example as read from the source.
#[derive(Debug, Clone, PartialEq)]
struct Record {
    /// 0-based record index in its file(s).
    index: usize,
    tokens: Vec<String>,
    /// IOB tags, one per token; `None` when the split has no tag file.
    tags: Option<Vec<String>>,
    /// Intents in clause order.
    intents: Vec<String>,
}

/// Where a split's records come from.
#[derive(Debug, Clone)]
enum SplitFiles {
    Agif(PathBuf),
    GlGin {
        seq_in: PathBuf,
        seq_out: Option<PathBuf>,
        label: PathBuf,
    },
}

impl SplitFiles {
    fn paths(&self) -> Vec<PathBuf> {
        match self {
            SplitFiles::Agif(p) => vec![p.clone()],
            SplitFiles::GlGin { seq_in, seq_out, label } => {
                let mut v = vec![seq_in.clone()];
                v.extend(seq_out.clone());
                v.push(label.clone());
                v
            }
        }
    }
}

fn split_files(root: &Path, split: &str) -> Option<SplitFiles> {
    let agif = root.join(format!("{split}.txt"));
    if agif.is_file() {
        return Some(SplitFiles::Agif(agif));
    }
    let dir = root.join(split);
    let seq_in = dir.join("seq.in");
    let label = dir.join("label");
    if seq_in.is_file() && label.is_file() {
        let seq_out = Some(dir.join("seq.out")).filter(|p| p.is_file());
        return Some(SplitFiles::GlGin { seq_in, seq_out, label });
    }
    None
}

/// The reference corpus root (`atis` or `snips`), when present.
fn reference_root(source: &ResolvedSource) -> Option<PathBuf> {
    let (env, dir) = match source.manifest.format.as_str() {
        "mixatis" => ("TOOLFORGE_ATIS", "atis"),
        _ => ("TOOLFORGE_SNIPS", "snips"),
    };
    let candidates = match std::env::var_os(env) {
        Some(p) => vec![PathBuf::from(p)],
        None => vec![source.root.join("..").join(dir)],
    };
    candidates
        .into_iter()
        .find(|p| SPLITS.iter().any(|s| p.join(format!("{s}.txt")).is_file()))
}

fn corpus_name(source: &ResolvedSource) -> &'static str {
    if source.manifest.format == "mixatis" {
        "ATIS"
    } else {
        "SNIPS"
    }
}

/// Every file the conversion reads.
pub fn inputs(source: &ResolvedSource) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = SPLITS
        .iter()
        .filter_map(|s| split_files(&source.root, s))
        .flat_map(|f| f.paths())
        .collect();
    if let Some(r) = reference_root(source) {
        files.extend(
            SPLITS
                .iter()
                .map(|s| r.join(format!("{s}.txt")))
                .filter(|p| p.is_file()),
        );
    }
    files
}

/// Reads an AGIF file: `token TAG` lines, an intent line, a blank line.
fn read_agif(path: &Path, bad: &mut Vec<BadRecord>) -> Result<Vec<Record>, CorpusError> {
    let text = crate::corpus::read_text(path)?;
    Ok(parse_agif(&text, &path.display().to_string(), bad))
}

fn parse_agif(text: &str, file: &str, bad: &mut Vec<BadRecord>) -> Vec<Record> {
    let mut out = Vec::new();
    let mut index = 0;
    let (mut tokens, mut tags) = (Vec::new(), Vec::new());
    let mut error: Option<String> = None;
    let mut start_line = 1;
    let flush_bad = |index: &mut usize, message: String, bad: &mut Vec<BadRecord>| {
        bad.push(BadRecord {
            file: file.to_string(),
            record: *index,
            message,
        });
        *index += 1;
    };
    for (n, line) in text.lines().enumerate() {
        // Invalid UTF-8 in a token or intent line: the whole record is bad (flushed at its end).
        if let Some(message) = crate::corpus::invalid_line(line) {
            error.get_or_insert(format!("line {}: {message}", n + 1));
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.len() {
            0 => {
                if !tokens.is_empty() || error.is_some() {
                    let msg = error.take().unwrap_or_else(|| {
                        format!(
                            "line {}: record starting at line {start_line} has no intent line",
                            n + 1
                        )
                    });
                    flush_bad(&mut index, msg, bad);
                    tokens.clear();
                    tags.clear();
                }
                start_line = n + 2;
            }
            1 => {
                if let Some(msg) = error.take() {
                    flush_bad(&mut index, msg, bad);
                } else if tokens.is_empty() {
                    flush_bad(
                        &mut index,
                        format!("line {}: intent line {:?} without tokens", n + 1, fields[0]),
                        bad,
                    );
                } else {
                    out.push(Record {
                        index,
                        tokens: std::mem::take(&mut tokens),
                        tags: Some(std::mem::take(&mut tags)),
                        intents: fields[0].split('#').map(str::to_string).collect(),
                    });
                    index += 1;
                }
                tokens.clear();
                tags.clear();
                start_line = n + 2;
            }
            2 => {
                tokens.push(fields[0].to_string());
                tags.push(fields[1].to_string());
            }
            _ => {
                if error.is_none() {
                    error = Some(format!(
                        "line {}: expected `token TAG`, found {} fields",
                        n + 1,
                        fields.len()
                    ));
                }
            }
        }
    }
    if !tokens.is_empty() || error.is_some() {
        let msg =
            error.unwrap_or_else(|| format!("record starting at line {start_line} has no intent line (end of file)"));
        flush_bad(&mut index, msg, bad);
    }
    out
}

/// Reads a GL-GIN split: line `i` of `seq.in`, `seq.out` (optional) and `label` is record `i`.
fn read_glgin(
    seq_in: &Path,
    seq_out: Option<&Path>,
    label: &Path,
    bad: &mut Vec<BadRecord>,
) -> Result<Vec<Record>, CorpusError> {
    let read = |p: &Path| crate::corpus::read_text(p);
    let ins = read(seq_in)?;
    let outs = seq_out.map(read).transpose()?;
    let labels = read(label)?;
    let ins: Vec<&str> = ins.lines().collect();
    let labels: Vec<&str> = labels.lines().collect();
    let outs: Option<Vec<&str>> = outs.as_deref().map(|o| o.lines().collect());
    let file = seq_in.display().to_string();
    let n = ins.len().max(labels.len()).max(outs.as_ref().map_or(0, Vec::len));
    let mut records = Vec::new();
    for i in 0..n {
        let tokens: Vec<String> = ins
            .get(i)
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let intent = labels.get(i).map(|l| l.trim()).unwrap_or("");
        let tags: Option<Vec<String>> = outs.as_ref().map(|o| {
            o.get(i)
                .map(|l| l.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default()
        });
        if tokens.is_empty() && intent.is_empty() && tags.as_ref().is_none_or(Vec::is_empty) {
            continue;
        }
        let invalid = [ins.get(i), labels.get(i), outs.as_ref().and_then(|o| o.get(i))]
            .into_iter()
            .flatten()
            .find_map(|l| crate::corpus::invalid_line(l));
        let problem = if let Some(message) = invalid {
            Some(message)
        } else if tokens.is_empty() {
            Some("no tokens in seq.in".to_string())
        } else if intent.is_empty() || intent.contains(char::is_whitespace) {
            Some(format!("label line {intent:?} is not one `#`-joined intent list"))
        } else {
            tags.as_ref()
                .filter(|t| t.len() != tokens.len())
                .map(|t| format!("{} tokens but {} tags in seq.out", tokens.len(), t.len()))
        };
        match problem {
            Some(message) => records_bad(bad, &file, i, message),
            None => records.push(Record {
                index: i,
                tokens,
                tags,
                intents: intent.split('#').map(str::to_string).collect(),
            }),
        }
    }
    Ok(records)
}

fn records_bad(bad: &mut Vec<BadRecord>, file: &str, i: usize, message: String) {
    bad.push(BadRecord {
        file: file.to_string(),
        record: i,
        message: format!("line {}: {message}", i + 1),
    });
}

/// Reference sentences of one split: `(tokens joined by spaces, intent)` → distinct tag lists.
#[derive(Debug, Default)]
struct Reference {
    sentences: HashMap<(String, String), Vec<Vec<String>>>,
}

impl Reference {
    fn from_records(records: &[Record]) -> Reference {
        let mut sentences: HashMap<(String, String), Vec<Vec<String>>> = HashMap::new();
        for r in records {
            let key = (r.tokens.join(" "), r.intents.join("#"));
            let tags = r.tags.clone().unwrap_or_default();
            let entry = sentences.entry(key).or_default();
            if !entry.contains(&tags) {
                entry.push(tags);
            }
        }
        Reference { sentences }
    }

    fn tags(&self, tokens: &[String], intent: &str) -> Option<&Vec<Vec<String>>> {
        self.sentences.get(&(tokens.join(" "), intent.to_string()))
    }
}

/// A clause split: the `[start, end)` token ranges of the connectors.
type Split = Vec<(usize, usize)>;

/// Connector occurrences of `tokens` (tagged `O` when `tags` are given). `and also` yields both
/// `and also` and `and`: a clause may itself start with `also` (MixATIS train line 4132, "… ap80
/// and also give me …" is confirmed by ATIS only as "ap80" | "and" | "also give me …").
fn connectors(tokens: &[String], tags: Option<&[String]>) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for i in 0..tokens.len() {
        for c in CONNECTORS {
            let end = i + c.len();
            if end <= tokens.len()
                && tokens[i..end].iter().zip(c.iter()).all(|(t, w)| t == w)
                && tags.is_none_or(|t| t[i..end].iter().all(|x| x == "O"))
            {
                out.push((i, end));
            }
        }
    }
    out
}

/// Every split of `n` tokens into `k` non-empty clauses at connector occurrences.
fn splits(n: usize, k: usize, conns: &[(usize, usize)]) -> Vec<Split> {
    fn go(n: usize, need: usize, from: usize, conns: &[(usize, usize)], cur: &mut Split, out: &mut Vec<Split>) {
        if need == 0 {
            if cur.last().is_none_or(|&(_, e)| e < n) {
                out.push(cur.clone());
            }
            return;
        }
        for &(s, e) in conns {
            if s > from && e < n {
                cur.push((s, e));
                go(n, need - 1, e, conns, cur, out);
                cur.pop();
            }
        }
    }
    let mut out = Vec::new();
    if k == 0 {
        return out;
    }
    // `from` is the first token the next clause may use; a clause needs one token, so a
    // connector must start after it (`s > from` with the initial `from` below meaning s >= 1).
    let mut cur = Vec::new();
    if k == 1 {
        out.push(cur);
        return out;
    }
    for &(s, e) in conns {
        if s >= 1 && e < n {
            cur.push((s, e));
            go(n, k - 2, e, conns, &mut cur, &mut out);
            cur.pop();
        }
    }
    out
}

/// Clause ranges of a split of `n` tokens.
fn clauses(n: usize, split: &Split) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for &(s, e) in split {
        out.push((start, s));
        start = e;
    }
    out.push((start, n));
    out
}

/// The outcome of splitting one record.
#[derive(Debug, Clone, PartialEq)]
enum Splitting {
    Done { split: Split, method: &'static str },
    Dropped { reason: &'static str, detail: String },
}

/// Splits a record into one clause per intent (module docs, "Clause splitting").
fn split_record(
    tokens: &[String],
    tags: Option<&[String]>,
    intents: &[String],
    reference: Option<&Reference>,
) -> Splitting {
    let k = intents.len();
    let conns = connectors(tokens, tags);
    let candidates = splits(tokens.len(), k, &conns);
    match candidates.len() {
        0 => Splitting::Dropped {
            reason: "clause_intent_mismatch",
            detail: format!(
                "{k} intents ({}) but the {} connector(s) found cannot make {k} non-empty clauses",
                intents.join("#"),
                conns.len()
            ),
        },
        1 => Splitting::Done {
            split: candidates.into_iter().next().expect("one"),
            method: "conjunction",
        },
        n => {
            let confirmed: Vec<&Split> = match reference {
                Some(r) => candidates
                    .iter()
                    .filter(|s| {
                        clauses(tokens.len(), s)
                            .iter()
                            .zip(intents)
                            .all(|(&(a, b), intent)| r.tags(&tokens[a..b], intent).is_some())
                    })
                    .collect(),
                None => Vec::new(),
            };
            if confirmed.len() == 1 {
                Splitting::Done {
                    split: confirmed[0].clone(),
                    method: "reference_match",
                }
            } else {
                Splitting::Dropped {
                    reason: "ambiguous_split",
                    detail: format!(
                        "{n} possible clause splits for {k} intents, {} confirmed by the reference corpus{}",
                        confirmed.len(),
                        if reference.is_none() {
                            " (reference corpus not available)"
                        } else {
                            ""
                        }
                    ),
                }
            }
        }
    }
}

/// Rebuilds the tags of a split record from the reference: `Ok(tags)` or a drop.
fn reconstruct_tags(
    tokens: &[String],
    intents: &[String],
    split: &Split,
    reference: &Reference,
) -> Result<Vec<String>, (&'static str, String)> {
    let mut tags = vec!["O".to_string(); tokens.len()];
    for (i, (&(a, b), intent)) in clauses(tokens.len(), split).iter().zip(intents).enumerate() {
        match reference.tags(&tokens[a..b], intent).map(Vec::as_slice) {
            None | Some([]) => {
                return Err((
                    "no_tags",
                    format!(
                        "clause {} {:?} ({intent}) is not a reference sentence",
                        i + 1,
                        tokens[a..b].join(" ")
                    ),
                ));
            }
            Some([one]) if one.len() == b - a => tags[a..b].clone_from_slice(one),
            Some([_]) => {
                return Err((
                    "no_tags",
                    format!("clause {} reference tags have the wrong length", i + 1),
                ));
            }
            Some(many) => {
                return Err((
                    "ambiguous_tags",
                    format!(
                        "clause {} {:?} has {} different tag sequences in the reference",
                        i + 1,
                        tokens[a..b].join(" "),
                        many.len()
                    ),
                ));
            }
        }
    }
    Ok(tags)
}

/// IOB chunks of `tags[a..b]`: `(slot type, start, end)`. An `I-x` that does not continue an
/// `x` chunk starts one (conlleval convention).
fn chunks(tags: &[String], a: usize, b: usize) -> Vec<(String, usize, usize)> {
    let mut out: Vec<(String, usize, usize)> = Vec::new();
    let mut open = false;
    for i in a..b {
        let t = tags[i].as_str();
        if let Some(ty) = t.strip_prefix("B-") {
            out.push((ty.to_string(), i, i + 1));
            open = true;
        } else if let Some(ty) = t.strip_prefix("I-") {
            match out.last_mut() {
                Some(last) if open && last.0 == ty && last.2 == i => last.2 = i + 1,
                _ => {
                    out.push((ty.to_string(), i, i + 1));
                    open = true;
                }
            }
        } else {
            open = false;
        }
    }
    out
}

/// An example before the catalog is fixed.
struct Pending {
    split: String,
    record: Record,
    tags: Vec<String>,
    tags_source: String,
    clause_ranges: Vec<(usize, usize)>,
    method: &'static str,
    calls: Vec<RawCall>,
}

/// Tag-reconstruction agreement on one split with gold tags.
#[derive(Debug, Default)]
struct Agreement {
    examples: usize,
    reconstructed: usize,
    exact: usize,
    tokens: usize,
    tokens_agreeing: usize,
}

/// Converts the source (only `split` when given).
pub fn convert(source: &ResolvedSource, split: Option<&str>) -> Result<Conversion, CorpusError> {
    let corpus = corpus_name(source);
    let mut bad = Vec::new();
    let reference_root = reference_root(source);
    let mut splits_out: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut shapes = Shapes::default();
    let mut agreement: BTreeMap<String, Agreement> = BTreeMap::new();
    let mut methods: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut intent_counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut found_any = false;

    for s in SPLITS.iter().filter(|s| split.is_none_or(|want| want == **s)) {
        let Some(files) = split_files(&source.root, s) else {
            continue;
        };
        found_any = true;
        let records = match &files {
            SplitFiles::Agif(p) => read_agif(p, &mut bad)?,
            SplitFiles::GlGin { seq_in, seq_out, label } => read_glgin(seq_in, seq_out.as_deref(), label, &mut bad)?,
        };
        let reference = match &reference_root {
            Some(r) if r.join(format!("{s}.txt")).is_file() => {
                let mut ref_bad = Vec::new();
                let recs = read_agif(&r.join(format!("{s}.txt")), &mut ref_bad)?;
                bad.extend(ref_bad);
                Some(Reference::from_records(&recs))
            }
            _ => None,
        };
        let outcome = splits_out.entry(s.to_string()).or_default();
        let agree = agreement.entry(s.to_string()).or_default();
        for record in records {
            outcome.attempted += 1;
            let id = format!("{s}/{}", record.index);
            let drop = |reason: &str, detail: String| Drop {
                id: id.clone(),
                group: s.to_string(),
                reason: reason.to_string(),
                detail,
            };
            // Validation of the reconstruction on splits with gold tags.
            if let (Some(gold), Some(r)) = (&record.tags, &reference) {
                agree.examples += 1;
                if let Splitting::Done { split, .. } = split_record(&record.tokens, None, &record.intents, Some(r))
                    && let Ok(tags) = reconstruct_tags(&record.tokens, &record.intents, &split, r)
                {
                    agree.reconstructed += 1;
                    agree.exact += (&tags == gold) as usize;
                    agree.tokens += gold.len();
                    agree.tokens_agreeing += tags.iter().zip(gold).filter(|(a, b)| a == b).count();
                }
            }
            let (split_at, method) = match split_record(
                &record.tokens,
                record.tags.as_deref(),
                &record.intents,
                reference.as_ref(),
            ) {
                Splitting::Done { split, method } => (split, method),
                Splitting::Dropped { reason, detail } => {
                    outcome.drops.push(drop(reason, detail));
                    continue;
                }
            };
            let (tags, tags_source) = match &record.tags {
                Some(t) => (t.clone(), "source".to_string()),
                None => match &reference {
                    None => {
                        outcome.drops.push(drop(
                            "no_tags",
                            format!("split has no tag file and no {corpus} reference corpus was found"),
                        ));
                        continue;
                    }
                    Some(r) => match reconstruct_tags(&record.tokens, &record.intents, &split_at, r) {
                        Ok(t) => (t, format!("reconstructed from {} {s}", corpus.to_lowercase())),
                        Err((reason, detail)) => {
                            outcome.drops.push(drop(reason, detail));
                            continue;
                        }
                    },
                },
            };
            let clause_ranges = clauses(record.tokens.len(), &split_at);
            let mut calls = Vec::new();
            for (&(a, b), intent) in clause_ranges.iter().zip(&record.intents) {
                let tool = identifier(intent);
                shapes.tool(&tool, || {
                    format!(
                        "{} ({corpus} intent `{intent}`).",
                        capitalise(&words(&tool.replace("atis_", "")))
                    )
                });
                let mut args = Vec::new();
                for (slot, x, y) in chunks(&tags, a, b) {
                    let param = identifier(&slot);
                    shapes.param(&tool, &param, || {
                        format!(
                            "{} ({corpus} slot `{slot}`): the words of the request naming it.",
                            capitalise(&words(&param))
                        )
                    });
                    args.push((param, record.tokens[x..y].join(" ")));
                }
                let call = RawCall { tool, args };
                shapes.observe(&call);
                calls.push(call);
                *intent_counts.entry(intent.clone()).or_insert(0) += 1;
            }
            *methods.entry(method).or_insert(0) += 1;
            pending.push(Pending {
                split: s.to_string(),
                record,
                tags,
                tags_source,
                clause_ranges,
                method,
                calls,
            });
        }
    }
    if !found_any {
        return Err(CorpusError::Malformed {
            path: source.root.clone(),
            message: match split {
                Some(s) => format!("no `{s}.txt` or `{s}/seq.in` + `{s}/label` under the corpus root"),
                None => "no split files (`<split>.txt` or `<split>/seq.in`) under the corpus root".into(),
            },
        });
    }

    let catalog = shapes.catalog();
    let checker = Checker::new(&catalog).map_err(|message| CorpusError::Malformed {
        path: source.root.clone(),
        message,
    })?;
    let mut stats = SeqStats::default();
    for p in pending {
        let id = format!("{}/{}", p.split, p.record.index);
        let outcome = splits_out.get_mut(&p.split).expect("split entry");
        let labels = labels(p.calls.iter().map(|c| c.tool.as_str()));
        let output: Vec<_> = p.calls.iter().zip(labels).map(|(c, l)| shapes.call(c, l)).collect();
        if let Some(err) = output.iter().find_map(|c| checker.validate(c).err()) {
            outcome.drops.push(Drop {
                id,
                group: p.split.clone(),
                reason: "schema_invalid".into(),
                detail: err,
            });
            continue;
        }
        let input = p.record.tokens.join(" ");
        let meta = json!({
            "intents": p.record.intents,
            "tags": p.tags,
            "tags_source": p.tags_source,
            "clauses": p.clause_ranges.iter().map(|&(a, b)| json!({"start": a, "end": b, "text": p.record.tokens[a..b].join(" ")})).collect::<Vec<_>>(),
            "connectors": p.clause_ranges.windows(2).map(|w| p.record.tokens[w[0].1..w[1].0].join(" ")).collect::<Vec<_>>(),
            "split_method": p.method,
        });
        let tools = instance_tools(&catalog, &output);
        let example = Example {
            id,
            split: p.split.clone(),
            input,
            output,
            tools,
            meta: Some(meta),
            ..Example::default()
        };
        stats.add(&example, &checker);
        outcome.examples.push(example);
    }

    let mut stats = stats.into_json();
    stats.insert("split_method".into(), json!(methods));
    stats.insert("calls_by_intent".into(), json!(intent_counts));
    stats.insert(
        "reference_corpus".into(),
        json!(
            reference_root
                .as_ref()
                .map(|_| format!("{} {{train,dev,test}}.txt", corpus.to_lowercase()))
        ),
    );
    let rate = |a: usize, b: usize| {
        if b == 0 {
            Value::Null
        } else {
            json!((a as f64 / b as f64 * 10000.0).round() / 10000.0)
        }
    };
    let recon: serde_json::Map<String, Value> = agreement
        .iter()
        .filter(|(_, a)| a.examples > 0)
        .map(|(s, a)| {
            (
                s.clone(),
                json!({"examples": a.examples, "reconstructed": a.reconstructed, "exact_match": a.exact,
                       "exact_match_rate": rate(a.exact, a.examples), "token_agreement": rate(a.tokens_agreeing, a.tokens)}),
            )
        })
        .collect();
    stats.insert("tag_reconstruction".into(), Value::Object(recon));
    let untagged: Vec<&String> = splits_out
        .keys()
        .filter(|s| split_files(&source.root, s).is_some_and(|f| matches!(f, SplitFiles::GlGin { seq_out: None, .. })))
        .collect();
    for s in untagged {
        let o = &splits_out[s];
        let kept = o.examples.len();
        stats.insert(
            format!("tag_reconstruction_{s}_yield"),
            json!({"attempted": o.attempted, "kept": kept, "rate": rate(kept, o.attempted)}),
        );
    }
    Ok(Conversion {
        splits: splits_out,
        bad_records: bad,
        catalog,
        stats,
    })
}

/// References to the catalog tools `calls` use, in first-use order.
pub(super) fn instance_tools(
    catalog: &[crate::tools::ToolSpec],
    calls: &[crate::tools::Call],
) -> Vec<crate::tools::ToolSpec> {
    let mut out: Vec<crate::tools::ToolSpec> = Vec::new();
    for c in calls {
        if !out.iter().any(|t| t.name == c.name)
            && let Some(t) = catalog.iter().find(|t| t.name == c.name)
        {
            out.push(crate::tools::ToolSpec::reference(&t.name));
        }
    }
    out
}

/// `s` with its first character upper-cased.
pub(super) fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// Distinct values of a list, in first-seen order (test helper).
#[cfg(test)]
fn distinct<T: Clone + Eq + std::hash::Hash>(v: &[T]) -> Vec<T> {
    let mut seen = std::collections::HashSet::new();
    v.iter().filter(|x| seen.insert((*x).clone())).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn agif_records_and_bad_records() {
        let text = "a O\nb B-x\nI1#I2\n\nc O\n\nd O e\nI3\n\nf O\nI4\n";
        let mut bad = Vec::new();
        let recs = parse_agif(text, "f.txt", &mut bad);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].intents, vec!["I1", "I2"]);
        assert_eq!((recs[1].index, recs[1].tokens.clone()), (3, toks("f")));
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert!(
            bad[0].message.contains("no intent line") && bad[0].message.contains("line 5"),
            "{bad:?}"
        );
        assert_eq!(bad[1].record, 2);
        assert!(bad[1].message.contains("line 7"), "{bad:?}");
    }

    #[test]
    fn splits_enumerate_non_empty_clauses() {
        let t = toks("a and b , c and also d");
        let c = connectors(&t, None);
        assert_eq!(c, vec![(1, 2), (3, 4), (5, 7), (5, 6)]);
        assert_eq!(splits(t.len(), 2, &c).len(), 4);
        assert_eq!(splits(t.len(), 3, &c).len(), 5);
        assert_eq!(splits(t.len(), 1, &c), vec![Vec::<(usize, usize)>::new()]);
        // a connector at either end leaves an empty clause
        let t = toks("and b");
        assert!(splits(t.len(), 2, &connectors(&t, None)).is_empty());
        assert_eq!(distinct(&[1, 1, 2]), vec![1, 2]);
    }

    #[test]
    fn chunks_follow_iob() {
        let tags = toks("O B-a I-a B-a I-b O I-c");
        assert_eq!(
            chunks(&tags, 0, 7),
            vec![
                ("a".into(), 1, 3),
                ("a".into(), 3, 4),
                ("b".into(), 4, 5),
                ("c".into(), 6, 7)
            ]
        );
    }
}
