//! A 2.1 dialogue as system turns ([`Turn`]: belief state, booked entries, offers) and the
//! search / booking events read off the belief-state changes ([`events`]).

use std::collections::BTreeMap;

use serde_json::Value;

use super::DOMAINS;
use super::schema::Schema;

/// The system-turn view of a 2.1 dialogue the conversion reads.
#[derive(Debug, Default, Clone)]
pub(super) struct Turn {
    /// Position of the system turn in `log`.
    pub(super) log_index: usize,
    /// Per domain: set `semi` slots (2.1 names) with their values, in file order.
    pub(super) semi: BTreeMap<String, Vec<(String, String)>>,
    /// Per domain: set `book` slots.
    pub(super) book: BTreeMap<String, Vec<(String, String)>>,
    /// Per domain: the `booked` entries.
    pub(super) booked: BTreeMap<String, Vec<Value>>,
    /// Entities the system offers in this turn: (domain, name or train id).
    pub(super) offers: Vec<(String, String)>,
    /// Domains for which the system says `<Domain>-NoOffer` in this turn.
    pub(super) no_offer: Vec<String>,
}

impl Turn {
    /// `domain`'s search constraints at this turn: its set `semi` slots but `dontcare`, in file
    /// order.
    pub(super) fn constraints(&self, domain: &str) -> Vec<(String, String)> {
        let slots = self.semi.get(domain).into_iter().flatten();
        slots.filter(|(_, v)| v != "dontcare").cloned().collect()
    }
}

pub(super) fn is_set(value: &str) -> bool {
    !matches!(value.trim(), "" | "not mentioned" | "none")
}

pub(super) fn parse_dialogue(rec: &Value) -> Result<Vec<Turn>, String> {
    let log = rec["log"].as_array().ok_or("missing array field `log`")?;
    let mut turns = Vec::new();
    for (i, entry) in log.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
        let meta = entry["metadata"]
            .as_object()
            .ok_or_else(|| format!("log[{i}] (system turn) has no `metadata` object"))?;
        let mut turn = Turn {
            log_index: i,
            ..Turn::default()
        };
        for (domain, state) in meta {
            let part = |name: &str| -> Vec<(String, String)> {
                state[name]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.trim().to_string())))
                    .filter(|(_, v)| is_set(v))
                    .collect()
            };
            turn.semi.insert(domain.clone(), part("semi"));
            turn.book.insert(domain.clone(), part("book"));
            let booked = state["book"]["booked"].as_array().cloned().unwrap_or_default();
            turn.booked.insert(domain.clone(), booked);
        }
        if let Some(acts) = entry["dialog_act"].as_object() {
            for (act, pairs) in acts {
                let Some((dom, kind)) = act.split_once('-') else {
                    continue;
                };
                let dom = dom.to_lowercase();
                if kind == "NoOffer" {
                    turn.no_offer.push(dom.clone());
                }
                if !matches!(kind, "Inform" | "Recommend" | "Select" | "OfferBook" | "OfferBooked") {
                    continue;
                }
                for pair in pairs.as_array().into_iter().flatten() {
                    let (Some(slot), Some(value)) = (pair[0].as_str(), pair[1].as_str()) else {
                        continue;
                    };
                    let wanted = if dom == "train" { "Id" } else { "Name" };
                    if slot == wanted && is_set(value) && value != "?" {
                        turn.offers.push((dom.clone(), value.to_string()));
                    }
                }
            }
        }
        turns.push(turn);
    }
    Ok(turns)
}

/// What one call does, before it becomes a [`Call`].
#[derive(Debug, Clone)]
pub(super) struct Event {
    /// Position in `turns` where the call goes.
    pub(super) pos: usize,
    /// 0 = search, 1 = booking.
    pub(super) kind: u8,
    pub(super) domain: String,
    /// 2.1 (part, slot, value) triples.
    pub(super) values: Vec<(String, String, String)>,
    /// Searches: the episode's turn span (inclusive) and the booked entity that ended it.
    pub(super) span: (usize, usize),
    pub(super) booked: Option<Value>,
}

/// A search episode in progress.
pub(super) struct Episode {
    pub(super) start: usize,
    pub(super) constraints: Vec<(String, String)>,
}

/// Whether `new` overwrites a constraint of `old` with another value.
pub(super) fn overwrites(old: &[(String, String)], new: &[(String, String)]) -> bool {
    new.iter().any(|(k, v)| old.iter().any(|(k2, v2)| k == k2 && v != v2))
}

/// The search and booking events of a dialogue, in call order; and the duplicate finds skipped.
pub(super) fn events(turns: &[Turn], schema: &Schema) -> (Vec<Event>, usize) {
    let mut out: Vec<Event> = Vec::new();
    let mut duplicates = 0;
    let last = turns.len().saturating_sub(1);
    for domain in DOMAINS {
        let searchable = schema.intents.contains_key(&format!("find_{domain}"));
        let bookable = schema.intents.contains_key(&format!("book_{domain}"));
        let mut open: Option<Episode> = None;
        let mut finds: Vec<Event> = Vec::new();
        let mut booked_len = 0;
        let mut after_booking: Option<Vec<(String, String)>> = None;
        let close = |ep: Episode, end: usize, booked: Option<Value>, finds: &mut Vec<Event>| {
            finds.push(Event {
                pos: ep.start,
                kind: 0,
                domain: domain.to_string(),
                values: ep
                    .constraints
                    .into_iter()
                    .map(|(k, v)| ("semi".to_string(), k, v))
                    .collect(),
                span: (ep.start, end),
                booked,
            });
        };
        for (k, turn) in turns.iter().enumerate() {
            let cur = turn.constraints(domain);
            if searchable && !cur.is_empty() {
                match open.as_mut() {
                    // After a booking the state keeps the booked search's constraints: only a
                    // change starts a new search.
                    None if after_booking.as_ref() == Some(&cur) => {}
                    None => {
                        open = Some(Episode {
                            start: k,
                            constraints: cur,
                        })
                    }
                    Some(ep) if ep.constraints == cur => {}
                    Some(ep) if overwrites(&ep.constraints, &cur) => {
                        let ended = std::mem::replace(
                            ep,
                            Episode {
                                start: k,
                                constraints: cur,
                            },
                        );
                        close(ended, k.saturating_sub(1), None, &mut finds);
                    }
                    Some(ep) => ep.constraints = cur,
                }
            }
            let booked = turn.booked.get(domain).map(Vec::as_slice).unwrap_or_default();
            if booked.len() > booked_len {
                for entity in &booked[booked_len..] {
                    if let Some(ep) = open.take() {
                        after_booking = Some(ep.constraints.clone());
                        close(ep, k, Some(entity.clone()), &mut finds);
                    }
                    if bookable {
                        let mut values: Vec<(String, String, String)> = turn
                            .semi
                            .get(domain)
                            .into_iter()
                            .flatten()
                            .map(|(s, v)| ("semi".to_string(), s.clone(), v.clone()))
                            .collect();
                        values.extend(
                            turn.book
                                .get(domain)
                                .into_iter()
                                .flatten()
                                .map(|(s, v)| ("book".to_string(), s.clone(), v.clone())),
                        );
                        out.push(Event {
                            pos: k,
                            kind: 1,
                            domain: domain.to_string(),
                            values: values.into_iter().filter(|(_, _, v)| v != "dontcare").collect(),
                            span: (k, k),
                            booked: Some(entity.clone()),
                        });
                    }
                }
                booked_len = booked.len();
            }
        }
        if let Some(ep) = open.take() {
            close(ep, last, None, &mut finds);
        }
        let mut seen: Vec<Vec<(String, String, String)>> = Vec::new();
        for f in finds {
            if seen.contains(&f.values) {
                duplicates += 1;
                continue;
            }
            seen.push(f.values.clone());
            out.push(f);
        }
    }
    let rank = |d: &str| DOMAINS.iter().position(|x| *x == d).unwrap_or(DOMAINS.len());
    out.sort_by_key(|e| (e.pos, e.kind, rank(&e.domain)));
    (out, duplicates)
}
