//! Splitting a multi-intent utterance into one clause per intent: connector candidates
//! (`and also`, `and then`, `and`, `,`), the single-intent reference corpus that confirms a
//! split, and the slot tags rebuilt for MixSNIPS train.

#[allow(unused_imports)]
use super::*;

/// Reference sentences of one split: `(tokens joined by spaces, intent)` → distinct tag lists.
#[derive(Debug, Default)]
pub(super) struct Reference {
    pub(super) sentences: HashMap<(String, String), Vec<Vec<String>>>,
}

impl Reference {
    pub(super) fn from_records(records: &[Record]) -> Reference {
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

    pub(super) fn tags(&self, tokens: &[String], intent: &str) -> Option<&Vec<Vec<String>>> {
        self.sentences.get(&(tokens.join(" "), intent.to_string()))
    }
}

/// A clause split: the `[start, end)` token ranges of the connectors.
type Split = Vec<(usize, usize)>;

/// Connector occurrences of `tokens` (tagged `O` when `tags` are given). `and also` yields both
/// `and also` and `and`: a clause may itself start with `also` (MixATIS train line 4132, "… ap80
/// and also give me …" is confirmed by ATIS only as "ap80" | "and" | "also give me …").
pub(super) fn connectors(tokens: &[String], tags: Option<&[String]>) -> Vec<(usize, usize)> {
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
pub(super) fn splits(n: usize, k: usize, conns: &[(usize, usize)]) -> Vec<Split> {
    pub(super) fn go(
        n: usize,
        need: usize,
        from: usize,
        conns: &[(usize, usize)],
        cur: &mut Split,
        out: &mut Vec<Split>,
    ) {
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
pub(super) fn clauses(n: usize, split: &Split) -> Vec<(usize, usize)> {
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
pub(super) enum Splitting {
    Done { split: Split, method: &'static str },
    Dropped { reason: &'static str, detail: String },
}

/// Splits a record into one clause per intent (module docs, "Clause splitting").
pub(super) fn split_record(
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
pub(super) fn reconstruct_tags(
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
pub(super) fn chunks(tags: &[String], a: usize, b: usize) -> Vec<(String, usize, usize)> {
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
