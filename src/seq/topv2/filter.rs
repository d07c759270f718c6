//! The SeqTopV2 row filters (API-BLEND §3.2), applied after lowering and before the catalog is
//! fixed. Each turns a kept row into a [`Drop`] with its own reason code:
//!
//! 1. `conflicting_gold`: the utterance occurs with two or more different gold call sequences
//!    anywhere in TOPv2 (any split), e.g. "Cancel all alarms" (39 rows, one of them labelled
//!    `create_alarm`). No row of it can be trusted, so every row of it goes.
//! 2. `duplicate_utterance`: a row whose utterance already gave a row of the same split; the
//!    first one (file order: domains alphabetically, then line order) is kept.
//! 3. `seen_in_earlier_split`: an `eval` row whose utterance is kept in `train`, or a `test` row
//!    whose utterance is kept in `train` or `eval`, so no evaluation request is a training one.
//!
//! Utterances are compared case-insensitively with whitespace collapsed
//! ([`crate::tools::check::normalise`]); gold sequences by tool, label, parameter and normalised
//! value. The walk is sequential in split order (`train`, `eval`, `test`), so the result does
//! not depend on thread scheduling.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{FileResult, Row, SPLITS};
use crate::dataset::Drop;
use crate::tools::check::normalise;

/// The gold of a kept row as one comparable string.
fn signature(row: &Row) -> Option<(String, String)> {
    let Row::Kept { utterance, calls, .. } = row else {
        return None;
    };
    let mut sig = String::new();
    for c in calls {
        sig.push_str(&c.call.tool);
        sig.push('(');
        for (p, v) in &c.call.args {
            sig.push_str(p);
            sig.push('=');
            sig.push_str(&normalise(v));
            sig.push(';');
        }
        sig.push_str(")->");
        sig.push_str(&c.label);
        sig.push('|');
    }
    Some((normalise(utterance), sig))
}

/// Applies the three filters in place (module docs).
pub(super) fn apply(results: &mut [FileResult]) {
    let mut golds: HashMap<String, BTreeSet<String>> = HashMap::new();
    for r in results.iter() {
        for row in &r.rows {
            if let Some((u, sig)) = signature(row) {
                golds.entry(u).or_default().insert(sig);
            }
        }
    }
    // Utterance → (split, id) of the row that kept it.
    let mut kept: HashMap<String, (String, String)> = HashMap::new();
    for split in SPLITS {
        let order: Vec<usize> = (0..results.len()).filter(|&i| results[i].split == split).collect();
        for i in order {
            let r = &mut results[i];
            for row in r.rows.iter_mut() {
                let Some((u, _)) = signature(row) else { continue };
                let Row::Kept {
                    id, utterance, parse, ..
                } = &*row
                else {
                    continue;
                };
                let n = golds[&u].len();
                let drop = if n > 1 {
                    Some((
                        "conflicting_gold",
                        format!("the utterance has {n} different gold call sequences in TOPv2"),
                    ))
                } else {
                    match kept.get(&u) {
                        Some((s, first)) if s == split => {
                            Some(("duplicate_utterance", format!("same utterance as {first}")))
                        }
                        Some((s, first)) => Some((
                            "seen_in_earlier_split",
                            format!("the utterance is already in split {s} ({first})"),
                        )),
                        None => {
                            kept.insert(u, (split.to_string(), id.clone()));
                            None
                        }
                    }
                };
                if let Some((reason, detail)) = drop {
                    *row = Row::Dropped(Drop {
                        id: id.clone(),
                        group: split.to_string(),
                        reason: reason.into(),
                        detail,
                        question: utterance.clone(),
                        source: Drop::source_text(parse),
                    });
                }
            }
        }
    }
}

/// Drops per reason code of the filters, per split (for the report).
pub(super) fn counts(results: &[FileResult]) -> BTreeMap<String, BTreeMap<String, usize>> {
    let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for r in results {
        for row in &r.rows {
            if let Row::Dropped(d) = row {
                *out.entry(r.split.clone())
                    .or_default()
                    .entry(d.reason.clone())
                    .or_insert(0) += 1;
            }
        }
    }
    out
}
