//! MultiWOZ (`multiwoz` source) → SeqMultiWOZ, with executable search tools.
//!
//! Input: `<root>/MultiWOZ_2.1/{train,val,test}.json` (the original `data.json` layout; `train`
//! is optional), the 2.2 schema `<root>/MultiWOZ_2.2/schema.json` and the domain databases
//! `<root>/MultiWOZ_2.1/db/<domain>_db.json`. Splits are named `train`, `dev` (from `val.json`;
//! `meta.source_split` keeps `val`) and `test`.
//!
//! Rules (each pinned by a test below):
//!
//! - **Catalog**: one tool per 2.2 schema intent (`find_restaurant`, `book_hotel`, `police`, …);
//!   its required/optional slots become `string` parameters named as in 2.2
//!   (`restaurant-pricerange`), `enum` only for categorical slots, `additionalProperties: false`.
//! - **Slot names**: 2.1 belief-state slots map to 2.2 names through [`SLOT_MAP`]: `semi` slots
//!   keep their name lower-cased (`leaveAt` → `train-leaveat`), `book` slots get a `book` prefix
//!   (`people` → `hotel-bookpeople`, `time` → `restaurant-booktime`). A 2.1 slot with no 2.2
//!   slot in that service (`bus` `arriveBy`) is left out and counted (`unmapped_slot_values`).
//! - **Values**: as the belief state holds them; empty, `not mentioned` and `none` mean unset;
//!   `dontcare` is omitted (it is every 2.2 optional slot's default, so omission says the same).
//!   A categorical value outside the 2.2 `possible_values` is mapped to the value it equals once
//!   spaces are removed (`night club` → `nightclub`, counted in `values_normalised`); otherwise
//!   the dialogue is dropped (`value_outside_schema`: `church`, `london`, …).
//! - **Searches**: per domain with a `find_` intent, a *search episode* starts when the domain's
//!   `semi` constraints become non-empty. Added or removed constraints refine the episode; the
//!   episode ends when a constraint is overwritten with another value (a new search), when a
//!   booking of the domain completes, or at the end of the dialogue. Each episode gives one
//!   `find_<domain>` call with the episode's *final* constraints, placed at the episode's first
//!   turn; a find identical to an earlier one of the dialogue is skipped (`duplicate_finds`).
//!   Book slots go to the booking call, not to the search.
//! - **Bookings**: each new entry in a domain's `book.booked` list gives one `book_<domain>`
//!   call at that turn, with the domain's `semi` and `book` values restricted to the intent's
//!   slots. The booked entity (name / trainID) is kept in `meta.bookings`.
//! - **Order and labels**: by turn, a search before a booking of the same turn, then domain
//!   order; labels `<tool>_<n>`.
//! - **Execution**: `find_` calls of restaurant, hotel, attraction, train and hospital run over
//!   the databases (normalised string equality; train `leaveat` ≤ departure time, `arriveby` ≥
//!   arrival time). The entity the system offered in the episode (the booked entity, else the
//!   last `Name`/`Id` of a `<Domain>-Inform/Recommend/Select/OfferBook(ed)` act) must be among
//!   the results (names compared with [`norm`], prefix-tolerant: [`same_entity`]; `a|b`
//!   alternatives in a value match either). Statuses in `meta.verification`: `verified`,
//!   `verified_no_offer` (no results and the system said `<Domain>-NoOffer`), `verified_named`
//!   (no system offer, but the entity the user named is among the results, so it satisfies every
//!   other constraint), `entity_not_in_results`, `offered_entity_not_in_db`,
//!   `no_offered_entity`, `not_executable` (bus and taxi have no database; a time that does not
//!   parse). Unverified calls are kept and flagged, never dropped.
//! - **Request**: the deterministic `templates/seq-multiwoz-request.j2` rendering of the calls;
//!   no LLM paraphrase yet.
//! - **Tools of an instance**: every intent of the services whose belief state the dialogue ever
//!   filled (the domains the user talked about), so unused intents of those services
//!   (`find_` vs `book_`, a taxi that was never booked) are the distractors.
//!
//! Drop reasons: `no_service_call`, `value_outside_schema`, `schema_violation`,
//! `template_error`. Malformed dialogue records are bad records (file, record index, message).
//!
//! The ConvLab-3 unified format and the 2.2 frames format are not read (the corpus has a
//! 10-dialogue ConvLab sample of `train` and no 2.2 dialogue files).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::Conversion;
use super::check::{Checker, SeqStats};
use crate::corpus::{BadRecord, CorpusError, read_json};
use crate::dataset::{Drop, Example, Outcome};
use crate::recipe::ResolvedSource;
use crate::tools::{Call, ToolSpec};

/// Split name → file under `MultiWOZ_2.1/`.
const SPLIT_FILES: [(&str, &str); 3] = [("train", "train.json"), ("dev", "val.json"), ("test", "test.json")];

/// Belief-state domains, in call order within a turn.
const DOMAINS: [&str; 8] = [
    "restaurant",
    "hotel",
    "attraction",
    "train",
    "taxi",
    "hospital",
    "bus",
    "police",
];

/// Domains with a database (`db/<domain>_db.json`) that `find_<domain>` executes over.
const DB_DOMAINS: [&str; 5] = ["restaurant", "hotel", "attraction", "train", "hospital"];

/// 2.1 belief-state slot (part, name) → 2.2 slot suffix (`<domain>-<suffix>`).
pub const SLOT_MAP: [(&str, &str, &str); 18] = [
    ("semi", "pricerange", "pricerange"),
    ("semi", "area", "area"),
    ("semi", "food", "food"),
    ("semi", "name", "name"),
    ("semi", "type", "type"),
    ("semi", "parking", "parking"),
    ("semi", "stars", "stars"),
    ("semi", "internet", "internet"),
    ("semi", "department", "department"),
    ("semi", "leaveAt", "leaveat"),
    ("semi", "arriveBy", "arriveby"),
    ("semi", "destination", "destination"),
    ("semi", "departure", "departure"),
    ("semi", "day", "day"),
    ("book", "people", "bookpeople"),
    ("book", "day", "bookday"),
    ("book", "stay", "bookstay"),
    ("book", "time", "booktime"),
];

/// Human slot phrases for the request text (by 2.2 suffix).
const SLOT_PHRASES: [(&str, &str); 18] = [
    ("pricerange", "price range"),
    ("area", "area"),
    ("food", "food"),
    ("name", "name"),
    ("type", "type"),
    ("parking", "parking"),
    ("stars", "stars"),
    ("internet", "internet"),
    ("department", "department"),
    ("leaveat", "leaving after"),
    ("arriveby", "arriving by"),
    ("destination", "going to"),
    ("departure", "departing from"),
    ("day", "day"),
    ("bookpeople", "number of people"),
    ("bookday", "booking day"),
    ("bookstay", "number of nights"),
    ("booktime", "booking time"),
];

/// The request template (minijinja).
const REQUEST_TEMPLATE: &str = include_str!("../../templates/seq-multiwoz-request.j2");

/// Published SeqMultiWOZ sizes (API-BLEND, train/dev/test), for the report.
const PAPER_SIZES: [(&str, usize); 3] = [("train", 6816), ("dev", 485), ("test", 983)];

/// The 2.2 name of a 2.1 belief-state slot.
pub fn slot_22(domain: &str, part: &str, slot: &str) -> Option<String> {
    SLOT_MAP
        .iter()
        .find(|(p, s, _)| *p == part && *s == slot)
        .map(|(_, _, suffix)| format!("{domain}-{suffix}"))
}

fn schema_path(root: &Path) -> PathBuf {
    root.join("MultiWOZ_2.2/schema.json")
}

fn db_path(root: &Path, domain: &str) -> PathBuf {
    root.join("MultiWOZ_2.1/db").join(format!("{domain}_db.json"))
}

/// Every file the conversion reads: the dialogue files present, the 2.2 schema and the
/// databases, sorted.
pub fn inputs(source: &ResolvedSource) -> Vec<PathBuf> {
    let root = &source.root;
    let mut out: Vec<PathBuf> = SPLIT_FILES
        .iter()
        .map(|(_, f)| root.join("MultiWOZ_2.1").join(f))
        .chain([schema_path(root)])
        .chain(DB_DOMAINS.iter().map(|d| db_path(root, d)))
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

/// One 2.2 intent as a tool, with what the conversion needs of its slots.
struct Intent {
    spec: ToolSpec,
    /// Slot names in schema order (required, then optional).
    slots: Vec<String>,
    /// Categorical slots' possible values.
    enums: BTreeMap<String, Vec<String>>,
}

/// The 2.2 schema: intents by name, services with their intents in schema order.
struct Schema {
    intents: BTreeMap<String, Intent>,
    services: Vec<(String, Vec<String>)>,
}

fn load_schema(path: &Path) -> Result<Schema, CorpusError> {
    let malformed = |message: String| CorpusError::Malformed {
        path: path.into(),
        message,
    };
    let value = read_json(path)?;
    let services = value
        .as_array()
        .ok_or_else(|| malformed("expected a JSON array of services".into()))?;
    let mut schema = Schema {
        intents: BTreeMap::new(),
        services: Vec::new(),
    };
    for s in services {
        let sname = s["service_name"]
            .as_str()
            .ok_or_else(|| malformed("service without service_name".into()))?;
        let sdesc = s["description"].as_str().unwrap_or("");
        let slots: Vec<&Value> = s["slots"].as_array().into_iter().flatten().collect();
        let slot = |name: &str| slots.iter().find(|x| x["name"] == name);
        let mut names = Vec::new();
        for intent in s["intents"].as_array().into_iter().flatten() {
            let iname = intent["name"]
                .as_str()
                .ok_or_else(|| malformed(format!("service {sname}: intent without name")))?;
            let required: Vec<&str> = intent["required_slots"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let optional: Vec<&str> = intent["optional_slots"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.as_str())
                .collect();
            let mut props = Map::new();
            let mut enums = BTreeMap::new();
            let mut order = Vec::new();
            for name in required.iter().chain(&optional) {
                let sl = slot(name).ok_or_else(|| malformed(format!("intent {iname}: unknown slot {name}")))?;
                let mut p = json!({"type": "string", "description": sl["description"].as_str().unwrap_or(name)});
                let values: Vec<String> = sl["possible_values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
                if sl["is_categorical"].as_bool() == Some(true) && !values.is_empty() {
                    p["enum"] = json!(values);
                    enums.insert(name.to_string(), values);
                }
                props.insert(name.to_string(), p);
                order.push(name.to_string());
            }
            let informable: BTreeSet<&str> = required.iter().chain(&optional).copied().collect();
            let outputs: Map<String, Value> = slots
                .iter()
                .filter_map(|x| {
                    let n = x["name"].as_str()?;
                    (!informable.contains(n)).then(|| {
                        (
                            n.to_string(),
                            json!({"type": "string", "description": x["description"]}),
                        )
                    })
                })
                .collect();
            let output_parameters = if intent["is_transactional"].as_bool() == Some(true) {
                json!({"type": "object", "properties": outputs})
            } else {
                json!({"type": "array", "items": {"type": "object", "properties": outputs}})
            };
            let spec = ToolSpec {
                name: iname.to_string(),
                description: format!("{} ({sname}: {sdesc})", intent["description"].as_str().unwrap_or(iname)),
                parameters: json!({"type": "object", "properties": props, "required": required, "additionalProperties": false}),
                output_parameters,
            };
            names.push(iname.to_string());
            schema.intents.insert(
                iname.to_string(),
                Intent {
                    spec,
                    slots: order,
                    enums,
                },
            );
        }
        schema.services.push((sname.to_string(), names));
    }
    Ok(schema)
}

/// The system-turn view of a 2.1 dialogue the conversion reads.
#[derive(Debug, Default, Clone)]
struct Turn {
    /// Position of the system turn in `log`.
    log_index: usize,
    /// Per domain: set `semi` slots (2.1 names) with their values, in file order.
    semi: BTreeMap<String, Vec<(String, String)>>,
    /// Per domain: set `book` slots.
    book: BTreeMap<String, Vec<(String, String)>>,
    /// Per domain: the `booked` entries.
    booked: BTreeMap<String, Vec<Value>>,
    /// Entities the system offers in this turn: (domain, name or train id).
    offers: Vec<(String, String)>,
    /// Domains for which the system says `<Domain>-NoOffer` in this turn.
    no_offer: Vec<String>,
}

fn is_set(value: &str) -> bool {
    !matches!(value.trim(), "" | "not mentioned" | "none")
}

fn parse_dialogue(rec: &Value) -> Result<Vec<Turn>, String> {
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
struct Event {
    /// Position in `turns` where the call goes.
    pos: usize,
    /// 0 = search, 1 = booking.
    kind: u8,
    domain: String,
    /// 2.1 (part, slot, value) triples.
    values: Vec<(String, String, String)>,
    /// Searches: the episode's turn span (inclusive) and the booked entity that ended it.
    span: (usize, usize),
    booked: Option<Value>,
}

/// A search episode in progress.
struct Episode {
    start: usize,
    constraints: Vec<(String, String)>,
}

/// Whether `new` overwrites a constraint of `old` with another value.
fn overwrites(old: &[(String, String)], new: &[(String, String)]) -> bool {
    new.iter().any(|(k, v)| old.iter().any(|(k2, v2)| k == k2 && v != v2))
}

/// The search and booking events of a dialogue, in call order; and the duplicate finds skipped.
fn events(turns: &[Turn], schema: &Schema) -> (Vec<Event>, usize) {
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
            let cur: Vec<(String, String)> = turn
                .semi
                .get(domain)
                .into_iter()
                .flatten()
                .filter(|(_, v)| v != "dontcare")
                .cloned()
                .collect();
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

/// Normalised entity/value string for database comparisons: lower case, `&` → `and`, a leading
/// `the` dropped, only letters and digits kept.
pub fn norm(s: &str) -> String {
    let s = s.trim().to_lowercase().replace('&', " and ");
    let s = s.strip_prefix("the ").unwrap_or(&s);
    s.chars().filter(|c| c.is_alphanumeric()).collect()
}

/// Minutes after midnight of `H:MM`, `HH:MM` (optionally followed by `am`/`pm`).
fn minutes(t: &str) -> Option<u32> {
    let t = t.trim().to_lowercase();
    let (t, pm) = match (t.strip_suffix("pm"), t.strip_suffix("am")) {
        (Some(x), _) => (x.trim().to_string(), true),
        (_, Some(x)) => (x.trim().to_string(), false),
        _ => (t.clone(), false),
    };
    let (h, m) = t.split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    let h = if pm && h < 12 { h + 12 } else { h };
    (h < 24 && m < 60).then_some(h * 60 + m)
}

/// The domain databases.
struct Databases {
    tables: BTreeMap<String, Vec<Value>>,
}

/// The result of executing one search.
enum Execution {
    Rows(Vec<String>),
    NotExecutable(String),
}

impl Databases {
    fn load(root: &Path) -> Result<Databases, CorpusError> {
        let mut tables = BTreeMap::new();
        for d in DB_DOMAINS {
            let p = db_path(root, d);
            if !p.is_file() {
                continue;
            }
            let rows = read_json(&p)?
                .as_array()
                .cloned()
                .ok_or_else(|| CorpusError::Malformed {
                    path: p.clone(),
                    message: "expected a JSON array of entities".into(),
                })?;
            tables.insert(d.to_string(), rows);
        }
        Ok(Databases { tables })
    }

    /// Runs `find_<domain>` with 2.2 arguments; returns the matching entities' key (name, or
    /// trainID) normalised.
    fn find(&self, domain: &str, args: &Map<String, Value>) -> Execution {
        let Some(rows) = self.tables.get(domain) else {
            return Execution::NotExecutable(format!("no database for {domain}"));
        };
        let key = if domain == "train" { "trainID" } else { "name" };
        let mut filters = Vec::new();
        for (arg, value) in args {
            let suffix = arg.split_once('-').map(|(_, s)| s).unwrap_or(arg);
            let value = value.as_str().unwrap_or_default();
            let (field, time) = match (domain, suffix) {
                ("train", "leaveat") => ("leaveAt", true),
                ("train", "arriveby") => ("arriveBy", true),
                (_, s) => (s, false),
            };
            if time {
                let Some(m) = minutes(value) else {
                    return Execution::NotExecutable(format!("{arg}: time {value:?} does not parse"));
                };
                filters.push((field, suffix, None, Some(m)));
            } else {
                // 2.1 writes alternatives as `a|b`: either matches.
                let alternatives: Vec<String> = value
                    .split('|')
                    .map(|a| match norm(a) {
                        v if matches!(suffix, "parking" | "internet") && v == "free" => "yes".into(),
                        v => v,
                    })
                    .collect();
                filters.push((field, suffix, Some(alternatives), None));
            }
        }
        let rows = rows
            .iter()
            .filter(|row| {
                filters.iter().all(|(field, suffix, text, time)| {
                    let cell = row[*field]
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| row[*field].to_string());
                    match (text, time) {
                        (Some(alternatives), _) => alternatives.contains(&norm(&cell)),
                        (None, Some(m)) => {
                            minutes(&cell).is_some_and(|c| if *suffix == "leaveat" { c >= *m } else { c <= *m })
                        }
                        _ => false,
                    }
                })
            })
            .filter_map(|row| row[key].as_str().map(norm))
            .collect();
        Execution::Rows(rows)
    }

    fn contains(&self, domain: &str, entity: &str) -> bool {
        let key = if domain == "train" { "trainID" } else { "name" };
        self.tables.get(domain).is_some_and(|rows| {
            rows.iter()
                .any(|r| r[key].as_str().is_some_and(|n| same_entity(&norm(n), entity)))
        })
    }
}

/// Whether the normalised database key `key` names the entity `mention` (a dialogue-act or
/// booked name): equal after [`norm`], or one a prefix of the other when the shorter has at
/// least 4 characters (`Rosa 's` ~ `rosa's bed and breakfast`, `meze bar restaurant` ~
/// `meze bar`).
fn same_entity(key: &str, mention: &str) -> bool {
    let m = norm(mention);
    let (short, long) = if key.len() <= m.len() {
        (key, m.as_str())
    } else {
        (m.as_str(), key)
    };
    key == m || (short.len() >= 4 && long.starts_with(short))
}

/// The entity name (or train id) of a `booked` entry.
fn booked_entity(domain: &str, entry: &Value) -> Option<String> {
    let key = if domain == "train" { "trainID" } else { "name" };
    entry[key].as_str().filter(|s| is_set(s)).map(str::to_string)
}

/// Verification of one search call.
fn verify(event: &Event, args: &Map<String, Value>, turns: &[Turn], dbs: &Databases) -> Value {
    let domain = event.domain.as_str();
    let rows = match dbs.find(domain, args) {
        Execution::Rows(r) => r,
        Execution::NotExecutable(why) => return json!({"status": "not_executable", "detail": why}),
    };
    let span = &turns[event.span.0..=event.span.1.min(turns.len() - 1)];
    let offered = event
        .booked
        .as_ref()
        .and_then(|b| booked_entity(domain, b))
        .or_else(|| {
            span.iter()
                .flat_map(|t| &t.offers)
                .filter(|(d, _)| d == domain)
                .map(|(_, n)| n.clone())
                .last()
        });
    let named = args
        .iter()
        .find(|(k, _)| k.ends_with("-name"))
        .and_then(|(_, v)| v.as_str())
        .filter(|n| rows.iter().any(|r| same_entity(r, n)));
    let status = match &offered {
        Some(e) if rows.iter().any(|r| same_entity(r, e)) => "verified",
        Some(e) if !dbs.contains(domain, e) => "offered_entity_not_in_db",
        Some(_) => "entity_not_in_results",
        None if rows.is_empty() && span.iter().any(|t| t.no_offer.iter().any(|d| d == domain)) => "verified_no_offer",
        None if named.is_some() => "verified_named",
        None => "no_offered_entity",
    };
    json!({"status": status, "results": rows.len(), "offered": offered})
}

fn phrase(intent: &str) -> String {
    match intent.split_once('_') {
        Some((verb, "attraction")) => format!("{verb} an attraction"),
        Some((verb, obj)) => format!("{verb} a {obj}"),
        None => format!("find the {intent} station"),
    }
}

fn slot_phrase(slot: &str) -> String {
    let suffix = slot.split_once('-').map(|(_, s)| s).unwrap_or(slot);
    SLOT_PHRASES
        .iter()
        .find(|(s, _)| *s == suffix)
        .map(|(_, p)| p.to_string())
        .unwrap_or_else(|| suffix.to_string())
}

fn render_request(calls: &[Call]) -> Result<String, String> {
    let steps: Vec<Value> = calls
        .iter()
        .map(|c| {
            json!({
                "phrase": phrase(&c.name),
                "args": c.arguments.iter().map(|(k, v)| json!({"slot": slot_phrase(k), "value": v})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let mut env = minijinja::Environment::new();
    env.add_template("request", REQUEST_TEMPLATE)
        .map_err(|e| e.to_string())?;
    let tmpl = env.get_template("request").map_err(|e| e.to_string())?;
    tmpl.render(minijinja::value::Serde(json!({"steps": steps})))
        .map_err(|e| e.to_string())
}

/// Counters over a split's conversion.
#[derive(Default)]
struct Counters {
    finds: usize,
    books: usize,
    statuses: BTreeMap<String, usize>,
    duplicate_finds: usize,
    values_normalised: usize,
    unmapped_slot_values: usize,
}

enum Converted {
    Example(Box<Example>),
    Drop(Drop),
}

/// Builds the call arguments of an event: 2.2 names, enum-normalised values, schema slot order.
fn arguments(event: &Event, intent: &Intent, counters: &mut Counters) -> Result<Map<String, Value>, String> {
    let mut by_slot: BTreeMap<String, String> = BTreeMap::new();
    for (part, slot, value) in &event.values {
        match slot_22(&event.domain, part, slot).filter(|s| intent.slots.contains(s)) {
            Some(name) => {
                let value = match intent.enums.get(&name) {
                    Some(allowed) if !allowed.contains(value) => {
                        let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
                        let hit = allowed.iter().find(|a| squash(a) == squash(value)).ok_or_else(|| {
                            format!("{}: {name} = {value:?} is not one of the 2.2 values", intent.spec.name)
                        })?;
                        counters.values_normalised += 1;
                        hit.clone()
                    }
                    _ => value.clone(),
                };
                by_slot.insert(name, value);
            }
            None => counters.unmapped_slot_values += 1,
        }
    }
    Ok(intent
        .slots
        .iter()
        .filter_map(|s| by_slot.get(s).map(|v| (s.clone(), json!(v))))
        .collect())
}

#[allow(clippy::too_many_arguments)]
fn convert_dialogue(
    dial_id: &str,
    turns: &[Turn],
    split: &str,
    source_split: &str,
    schema: &Schema,
    dbs: &Databases,
    checker: &Checker,
    counters: &mut Counters,
) -> Converted {
    let id = format!("{split}/{dial_id}");
    let drop = |reason: &str, detail: String| {
        Converted::Drop(Drop {
            id: id.clone(),
            group: split.to_string(),
            reason: reason.into(),
            detail,
        })
    };
    let (events, duplicates) = events(turns, schema);
    let mut local = Counters::default();
    let mut calls = Vec::new();
    let mut verification = Vec::new();
    let mut bookings = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for e in &events {
        let tool = format!("{}_{}", if e.kind == 0 { "find" } else { "book" }, e.domain);
        let intent = &schema.intents[&tool];
        let args = match arguments(e, intent, &mut local) {
            Ok(a) => a,
            Err(detail) => return drop("value_outside_schema", detail),
        };
        if args.is_empty() {
            continue;
        }
        let n = counts.entry(tool.clone()).or_insert(0);
        *n += 1;
        let label = format!("{tool}_{n}");
        if e.kind == 0 {
            let mut v = verify(e, &args, turns, dbs);
            v["call"] = json!(label);
            let end = e.span.1.min(turns.len() - 1);
            v["log_span"] = json!([turns[e.span.0].log_index, turns[end].log_index]);
            verification.push(v);
        } else {
            bookings.push(json!({"call": label, "booked": e.booked}));
        }
        let call = Call {
            name: tool,
            arguments: args,
            label,
        };
        if let Err(err) = checker.validate(&call) {
            return drop("schema_violation", err);
        }
        calls.push(call);
    }
    if calls.is_empty() {
        return drop(
            "no_service_call",
            format!("dialogue {dial_id}: no search or booking in the belief states"),
        );
    }
    let input = match render_request(&calls) {
        Ok(t) => t,
        Err(e) => return drop("template_error", e),
    };
    let used: BTreeSet<&str> = calls
        .iter()
        .map(|c| c.name.split_once('_').map(|(_, d)| d).unwrap_or(&c.name))
        .collect();
    let touched: BTreeSet<&str> = DOMAINS
        .iter()
        .copied()
        .filter(|d| used.contains(d) || turns.iter().any(|t| t.semi.get(*d).is_some_and(|s| !s.is_empty())))
        .collect();
    let tools: Vec<ToolSpec> = schema
        .services
        .iter()
        .filter(|(s, _)| touched.contains(s.as_str()))
        .flat_map(|(_, intents)| {
            intents
                .iter()
                .map(|i| ToolSpec::reference(&schema.intents[i].spec.name))
        })
        .collect();
    counters.finds += verification.len();
    counters.books += bookings.len();
    for v in &verification {
        *counters
            .statuses
            .entry(v["status"].as_str().unwrap_or_default().to_string())
            .or_insert(0) += 1;
    }
    counters.duplicate_finds += duplicates;
    counters.values_normalised += local.values_normalised;
    counters.unmapped_slot_values += local.unmapped_slot_values;
    Converted::Example(Box::new(Example {
        id,
        split: split.to_string(),
        input,
        output: calls,
        tools,
        meta: Some(json!({
            "dialogue_id": dial_id,
            "source_split": source_split,
            "domains": touched,
            "request": "template",
            "verification": verification,
            "bookings": bookings,
        })),
        ..Example::default()
    }))
}

/// Converts the source (only `split` when given).
pub fn convert(source: &ResolvedSource, split: Option<&str>) -> Result<Conversion, CorpusError> {
    let root = &source.root;
    let schema = load_schema(&schema_path(root))?;
    let dbs = Databases::load(root)?;
    let catalog: Vec<ToolSpec> = schema
        .services
        .iter()
        .flat_map(|(_, intents)| intents.iter().map(|i| schema.intents[i].spec.clone()))
        .collect();
    let checker = Checker::new(&catalog).map_err(|message| CorpusError::Malformed {
        path: schema_path(root),
        message,
    })?;
    let mut conversion = Conversion {
        catalog,
        ..Conversion::default()
    };
    let mut stats = SeqStats::default();
    let mut counters = Counters::default();
    for (sp, file) in SPLIT_FILES.iter().filter(|(s, _)| split.is_none_or(|want| want == *s)) {
        let path = root.join("MultiWOZ_2.1").join(file);
        if !path.is_file() {
            continue;
        }
        let rel = path.strip_prefix(root).unwrap_or(&path).display().to_string();
        let value = crate::corpus::read_json_lossy(&path)?;
        let dialogues = value.as_object().ok_or_else(|| CorpusError::Malformed {
            path: path.clone(),
            message: "expected a JSON object {dialogue id: dialogue}".into(),
        })?;
        let source_split = file.trim_end_matches(".json");
        let mut outcome = Outcome::default();
        for (i, (dial_id, rec)) in dialogues.iter().enumerate() {
            let turns = match crate::corpus::invalid_record(rec).map_or_else(|| parse_dialogue(rec), Err) {
                Ok(t) => t,
                Err(message) => {
                    conversion.bad_records.push(BadRecord {
                        file: rel.clone(),
                        record: i,
                        message: format!("dialogue {dial_id}: {message}"),
                    });
                    continue;
                }
            };
            outcome.attempted += 1;
            let dial_id = dial_id.trim_end_matches(".json");
            match convert_dialogue(
                dial_id,
                &turns,
                sp,
                source_split,
                &schema,
                &dbs,
                &checker,
                &mut counters,
            ) {
                Converted::Example(e) => {
                    stats.add(&e, &checker);
                    outcome.examples.push(*e);
                }
                Converted::Drop(d) => outcome.drops.push(d),
            }
        }
        conversion.splits.insert(sp.to_string(), outcome);
    }
    let ratio = |a: usize, b: usize| {
        if b == 0 {
            0.0
        } else {
            (a as f64 / b as f64 * 10000.0).round() / 10000.0
        }
    };
    let verified: usize = ["verified", "verified_no_offer", "verified_named"]
        .iter()
        .map(|k| counters.statuses.get(*k).copied().unwrap_or(0))
        .sum();
    let executable = counters.finds - counters.statuses.get("not_executable").copied().unwrap_or(0);
    let mut s = stats.into_json();
    s.insert(
        "rules".into(),
        json!([
            "2.1 belief-state slots mapped to 2.2 slot names (semi: lower-cased, book: book-prefixed); empty/not mentioned/none unset, dontcare omitted (the 2.2 default)",
            "find_<domain>: one per search episode (from the first constraint until a constraint is overwritten, a booking of the domain completes, or the dialogue ends) with the episode's final semi constraints, placed at its first turn; identical repeats skipped",
            "book_<domain>: one per new booked entry, with the domain's semi and book values restricted to the intent's slots",
            "categorical values outside the 2.2 possible_values: mapped when equal without spaces, else the dialogue is dropped (value_outside_schema)",
            "find calls executed over MultiWOZ_2.1/db; the offered or booked entity must be among the results (meta.verification; unverified calls are flagged, not dropped)",
            "instance tools: every intent of the services whose belief state the dialogue filled",
            "request: deterministic template over the calls (every value grounded)",
        ]),
    );
    s.insert(
        "request_text".into(),
        json!("template: templates/seq-multiwoz-request.j2 (deterministic, no LLM paraphrase yet)"),
    );
    s.insert(
        "split_names".into(),
        json!({"train": "train.json", "dev": "val.json", "test": "test.json"}),
    );
    s.insert("find_calls".into(), json!(counters.finds));
    s.insert("book_calls".into(), json!(counters.books));
    s.insert("find_verification".into(), json!(counters.statuses));
    s.insert("find_verified_share".into(), json!(ratio(verified, counters.finds)));
    s.insert(
        "find_verified_share_of_executable".into(),
        json!(ratio(verified, executable)),
    );
    s.insert("duplicate_finds".into(), json!(counters.duplicate_finds));
    s.insert("values_normalised".into(), json!(counters.values_normalised));
    s.insert("unmapped_slot_values".into(), json!(counters.unmapped_slot_values));
    s.insert("tools".into(), json!(conversion.catalog.len()));
    s.insert(
        "paper_sizes".into(),
        json!(
            PAPER_SIZES
                .iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect::<Map<_, _>>()
        ),
    );
    conversion.stats = s;
    Ok(conversion)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::SourceManifest;

    fn corpus() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/multiwoz")
    }

    fn source(root: &Path) -> ResolvedSource {
        let manifest =
            SourceManifest::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sources/multiwoz.toml")).unwrap();
        ResolvedSource {
            manifest,
            root: root.to_path_buf(),
            questions: root.join("MultiWOZ_2.1/val.json"),
            databases: root.to_path_buf(),
            tables: None,
        }
    }

    struct Fixture {
        schema: Schema,
        dbs: Databases,
        checker: Checker,
        val: Value,
    }

    fn fixture() -> Fixture {
        let schema = load_schema(&schema_path(&corpus())).unwrap();
        let catalog: Vec<ToolSpec> = schema.intents.values().map(|i| i.spec.clone()).collect();
        Fixture {
            checker: Checker::new(&catalog).unwrap(),
            dbs: Databases::load(&corpus()).unwrap(),
            val: read_json(&corpus().join("MultiWOZ_2.1/val.json")).unwrap(),
            schema,
        }
    }

    fn example(f: &Fixture, id: &str) -> Example {
        let turns = parse_dialogue(&f.val[id]).unwrap();
        match convert_dialogue(
            id,
            &turns,
            "dev",
            "val",
            &f.schema,
            &f.dbs,
            &f.checker,
            &mut Counters::default(),
        ) {
            Converted::Example(e) => *e,
            Converted::Drop(d) => panic!("{d:?}"),
        }
    }

    #[test]
    fn slot_names_map_to_the_22_schema() {
        assert_eq!(
            slot_22("restaurant", "semi", "pricerange").unwrap(),
            "restaurant-pricerange"
        );
        assert_eq!(slot_22("train", "semi", "leaveAt").unwrap(), "train-leaveat");
        assert_eq!(slot_22("train", "semi", "arriveBy").unwrap(), "train-arriveby");
        assert_eq!(slot_22("hotel", "book", "people").unwrap(), "hotel-bookpeople");
        assert_eq!(slot_22("hotel", "book", "stay").unwrap(), "hotel-bookstay");
        assert_eq!(slot_22("restaurant", "book", "time").unwrap(), "restaurant-booktime");
        assert_eq!(slot_22("restaurant", "book", "day").unwrap(), "restaurant-bookday");
        // Every mapped name of the domains with searches exists in the real 2.2 schema.
        let schema = load_schema(&schema_path(&corpus())).unwrap();
        let intent = &schema.intents["find_hotel"];
        for s in ["pricerange", "area", "name", "type", "parking", "stars", "internet"] {
            assert!(intent.slots.contains(&slot_22("hotel", "semi", s).unwrap()), "{s}");
        }
        assert!(
            schema.intents["book_train"]
                .slots
                .contains(&slot_22("train", "book", "people").unwrap())
        );
    }

    #[test]
    fn real_restaurant_search_and_booking_verified_against_the_db() {
        let f = fixture();
        // The first val dialogue whose restaurant booking became `booked`.
        let id = f
            .val
            .as_object()
            .unwrap()
            .iter()
            .find(|(_, d)| {
                d["log"].as_array().unwrap().iter().skip(1).step_by(2).any(|t| {
                    t["metadata"]["restaurant"]["book"]["booked"]
                        .as_array()
                        .is_some_and(|b| !b.is_empty())
                })
            })
            .map(|(k, _)| k.clone())
            .unwrap();
        let e = example(&f, &id);
        let find = e
            .output
            .iter()
            .find(|c| c.name == "find_restaurant")
            .expect("find call");
        let book = e
            .output
            .iter()
            .find(|c| c.name == "book_restaurant")
            .expect("book call");
        let pos = |c: &Call| e.output.iter().position(|x| x == c).unwrap();
        assert!(pos(find) < pos(book), "search before booking");
        assert!(book.arguments.contains_key("restaurant-bookpeople"), "{book:?}");
        assert!(
            e.output
                .iter()
                .all(|c| f.checker.validate(c).is_ok() && f.checker.ungrounded(c, &e.input).is_empty())
        );
        let meta = e.meta.unwrap();
        let v = meta["verification"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["call"] == find.label)
            .unwrap()
            .clone();
        assert_eq!(v["status"], "verified", "{id}: {v} {find:?}");
        assert!(meta["bookings"][0]["booked"]["name"].is_string(), "{meta}");
    }

    #[test]
    fn pinned_dialogue_pmul1635_hotel_booking_and_flagged_search() {
        let f = fixture();
        let e = example(&f, "PMUL1635");
        let names: Vec<&str> = e.output.iter().map(|c| c.name.as_str()).collect();
        assert!(names.starts_with(&["find_hotel", "book_hotel"]), "{names:?}");
        let book = &e.output[1];
        assert_eq!(book.arguments["hotel-bookpeople"], "1");
        assert_eq!(book.arguments["hotel-bookday"], "friday");
        assert_eq!(book.arguments["hotel-bookstay"], "1");
        // The belief state holds the user's typo "wartworth"; the booked entity is
        // "warkworth house": the search runs but cannot return it, and is flagged, not dropped.
        let find = &e.output[0];
        assert_eq!(find.arguments["hotel-name"], "wartworth");
        let meta = e.meta.unwrap();
        assert_eq!(meta["verification"][0]["status"], "entity_not_in_results", "{meta}");
        assert_eq!(meta["verification"][0]["offered"], "warkworth house");
    }

    #[test]
    fn db_execution_filters_strings_and_train_times() {
        let dbs = Databases::load(&corpus()).unwrap();
        let args = |v: Value| v.as_object().unwrap().clone();
        let Execution::Rows(r) = dbs.find(
            "restaurant",
            &args(json!({"restaurant-area": "centre", "restaurant-food": "italian", "restaurant-pricerange": "cheap"})),
        ) else {
            panic!()
        };
        assert!(r.contains(&norm("pizza hut city centre")), "{r:?}");
        let Execution::Rows(r) = dbs.find(
            "train",
            &args(json!({"train-departure": "cambridge", "train-destination": "london kings cross", "train-day": "monday", "train-leaveat": "05:00", "train-arriveby": "06:00"})),
        ) else {
            panic!()
        };
        assert_eq!(r, vec![norm("TR7075")]);
        assert!(matches!(
            dbs.find("train", &args(json!({"train-leaveat": "after lunch"}))),
            Execution::NotExecutable(_)
        ));
        assert!(matches!(
            dbs.find("taxi", &args(json!({}))),
            Execution::NotExecutable(_)
        ));
        assert_eq!(minutes("5:45pm"), Some(17 * 60 + 45));
    }

    #[test]
    fn episodes_refine_then_split_on_overwrite_and_skip_duplicates() {
        let schema = load_schema(&schema_path(&corpus())).unwrap();
        let turn = |semi: &[(&str, &str)]| Turn {
            semi: BTreeMap::from([(
                "restaurant".to_string(),
                semi.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            )]),
            ..Turn::default()
        };
        let turns = vec![
            turn(&[("area", "centre")]),
            turn(&[("area", "centre"), ("food", "thai")]),
            turn(&[("area", "east"), ("food", "thai")]),
            turn(&[("area", "centre"), ("food", "thai")]),
        ];
        let (events, dup) = events(&turns, &schema);
        let got: Vec<(usize, Vec<String>)> = events
            .iter()
            .map(|e| (e.pos, e.values.iter().map(|(_, _, v)| v.clone()).collect()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, vec!["centre".into(), "thai".into()]),
                (2, vec!["east".into(), "thai".into()])
            ]
        );
        assert_eq!(dup, 1);
    }

    #[test]
    fn malformed_dialogue_is_a_bad_record_and_dialogue_without_calls_a_drop() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("MultiWOZ_2.1/db")).unwrap();
        std::fs::create_dir_all(root.join("MultiWOZ_2.2")).unwrap();
        std::fs::copy(schema_path(&corpus()), schema_path(root)).unwrap();
        for d in DB_DOMAINS {
            std::fs::copy(db_path(&corpus(), d), db_path(root, d)).unwrap();
        }
        let val = read_json(&corpus().join("MultiWOZ_2.1/val.json")).unwrap();
        let empty_state = json!({"metadata": {"restaurant": {"semi": {"area": ""}, "book": {"booked": []}}}, "text": "ok", "dialog_act": {}});
        let records = json!({
            "PMUL1635.json": val["PMUL1635"],
            "BAD1.json": {"goal": {}, "log": "not a list"},
            "BAD2.json": {"goal": {}, "log": [{"text": "hi", "metadata": {}}, {"text": "hello"}]},
            "CHAT1.json": {"goal": {}, "log": [{"text": "hi", "metadata": {}}, empty_state]},
        });
        std::fs::write(
            root.join("MultiWOZ_2.1/val.json"),
            serde_json::to_vec(&records).unwrap(),
        )
        .unwrap();
        let c = convert(&source(root), None).unwrap();
        let bad: Vec<(String, usize)> = c.bad_records.iter().map(|b| (b.file.clone(), b.record)).collect();
        assert_eq!(
            bad,
            vec![("MultiWOZ_2.1/val.json".into(), 1), ("MultiWOZ_2.1/val.json".into(), 2)]
        );
        assert!(c.bad_records[1].message.contains("BAD2.json") && c.bad_records[1].message.contains("log[1]"));
        let dev = &c.splits["dev"];
        assert_eq!((dev.attempted, dev.examples.len()), (2, 1));
        assert_eq!(dev.examples[0].id, "dev/PMUL1635");
        assert_eq!(
            (dev.drops[0].id.as_str(), dev.drops[0].reason.as_str()),
            ("dev/CHAT1", "no_service_call")
        );
        assert_eq!(c.stats["calls_failing_schema"], 0);
    }

    #[test]
    fn categorical_values_normalise_to_22_or_drop() {
        let schema = load_schema(&schema_path(&corpus())).unwrap();
        let intent = &schema.intents["find_attraction"];
        let ev = |v: &str| Event {
            pos: 0,
            kind: 0,
            domain: "attraction".into(),
            values: vec![("semi".into(), "type".into(), v.into())],
            span: (0, 0),
            booked: None,
        };
        let mut c = Counters::default();
        assert_eq!(
            arguments(&ev("night club"), intent, &mut c).unwrap()["attraction-type"],
            "nightclub"
        );
        assert_eq!(c.values_normalised, 1);
        assert!(arguments(&ev("church"), intent, &mut c).unwrap_err().contains("church"));
    }
}
