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
//! `and then` and `,` (whole tokens; `and also` also counts as `and`, see `connectors`). For an example with `k` intents, a *split* is `k - 1`
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
//! joined by spaces. Labels are `<tool>_<n>`. An example's `tools` are every intent of the corpus
//! (API-BLEND §5.7.2: the model is given "the possible list of APIs and parameters … from the
//! original dataset's API specifications", so API detection stays the model's task): one shared
//! [`Toolkit`](crate::tools::Toolkit) of [`ToolSpec::reference`](crate::tools::ToolSpec::reference)s
//! to the catalog (`tools/functions.json`), the same list in every row, resolved to the catalog's
//! specs when written.
//!
//! Drop reason codes: `clause_intent_mismatch`, `ambiguous_split`, `no_tags`,
//! `ambiguous_tags`, `schema_invalid` (a call failing its own schema: a bug, never expected).

mod clause;
mod read;
pub(super) mod shape;

use clause::*;
pub use read::inputs;
use read::*;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use self::shape::{RawCall, Shapes, identifier, labels, words};
use super::Conversion;
use super::stats::SeqStats;
use crate::corpus::{BadRecord, CorpusError};
use crate::dataset::{Drop, Example, Outcome};
use crate::recipe::ResolvedSource;
use crate::tools::check::Checker;

/// The splits of the Mix corpora, in order.
const SPLITS: [&str; 3] = ["train", "dev", "test"];

/// Connectors between clauses, as token sequences.
const CONNECTORS: [&[&str]; 4] = [&["and", "also"], &["and", "then"], &["and"], &[","]];

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
                question: record.tokens.join(" "),
                source: record_source(&record),
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
    let api_list = dataset_api_list(&catalog);
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
                question: p.record.tokens.join(" "),
                source: record_source(&p.record),
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
        let example = Example {
            id,
            split: p.split.clone(),
            input,
            output,
            tools: api_list.clone(),
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
        dialogues: None,
    })
}

/// The dataset's API list: a reference to every catalog tool, in catalog order, as one shared
/// toolkit (cloning it copies a pointer).
pub(super) fn dataset_api_list(catalog: &[crate::tools::ToolSpec]) -> crate::tools::Toolkit {
    catalog
        .iter()
        .map(|t| crate::tools::ToolSpec::reference(&t.name))
        .collect()
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

/// A source record as a drop shows it: each token with its tag (`word:TAG`; the word alone
/// without tags), then the intents (`#`-joined, as the AGIF files write them).
fn record_source(record: &read::Record) -> String {
    let words: Vec<String> = match &record.tags {
        Some(tags) => record
            .tokens
            .iter()
            .zip(tags)
            .map(|(w, t)| format!("{w}:{t}"))
            .collect(),
        None => record.tokens.clone(),
    };
    Drop::source_text(&format!("{} => {}", words.join(" "), record.intents.join("#")))
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
