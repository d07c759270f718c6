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
//!   slots, and the booked entity in the intent's entity slot (`restaurant-name`, `hotel-name`,
//!   `train-trainid`): the booked entry's name / trainID, else the last entity the system offered
//!   for the domain, in the database's spelling; a belief-state name of another entity is
//!   replaced by it (`booking.rs`; counted in `booked_entity`). The booked entry is kept in
//!   `meta.bookings`.
//! - **Order and labels**: by turn, a search before a booking of the same turn, then domain
//!   order; labels `<tool>_<n>`.
//! - **Execution**: `find_` calls of restaurant, hotel, attraction, train and hospital run over
//!   the databases (normalised string equality; train `leaveat` ≤ departure time, `arriveby` ≥
//!   arrival time). One rule keeps or drops a search, applied both ways (`db::verify`): the
//!   database's result must agree with what the system said in the episode. The entity the
//!   system offered (the booked entity, else the last `Name`/`Id` of a
//!   `<Domain>-Inform/Recommend/Select/OfferBook(ed)` act) must be among the results (names
//!   compared with [`norm`], prefix-tolerant: `db::same_entity`; `a|b` alternatives in a value
//!   match either); without an offer, the results are empty exactly when the system said
//!   `<Domain>-NoOffer`. Statuses in `meta.verification`: `verified`, `verified_no_offer` (no
//!   results, and the system said so), `verified_named` (results, the entity the user named
//!   among them), `verified_results` (results; the system neither named one nor said there was
//!   none), `entity_not_in_results`, `offered_entity_not_in_db`, `no_offer_but_results`,
//!   `no_results_without_no_offer`, `not_executable` (bus and taxi have no database; a time that
//!   does not parse). A search that is not verified (any other status) is left out of the gold by
//!   default and counted by status (`unverified_calls_removed`); the recipe knob
//!   `[seq] keep_unverified_calls = true` keeps it, flagged. A dialogue left without calls is
//!   dropped (`no_verified_call`).
//! - **Database spelling**: a free-text value (name, food; train departure/destination) is
//!   replaced by the database's spelling when exactly one database value is equal after [`norm`],
//!   within a small edit distance (`cafe uno` → `caffe uno`), or (names) a unique prefix match
//!   (`Databases::canonical`; counted in `values_normalised_to_db`). The ontology is not used for
//!   this: `ontology21.json` is collected from the annotations and holds the misspellings too.
//! - **Train ids**: `book_train`'s entity slot is `train-trainid` (a toolforge extension: the 2.2
//!   intent has no such slot, so the booking did not say which train).
//! - **Order**: `ordered` is true on every row with two or more calls (dialogue order).
//! - **Request**: the deterministic `templates/seq-multiwoz-request.j2` rendering of the calls;
//!   no LLM paraphrase yet.
//! - **Tools of an instance**: every domain's tools (the whole schema, in schema order: API-BLEND
//!   §5.7.2 gives the model the dataset's API list, not the gold set); `meta.domains` names the
//!   domains whose belief state the dialogue ever filled.
//!
//! Drop reasons: `no_service_call`, `no_verified_call`, `value_outside_schema`, `schema_violation`,
//! `template_error`. Malformed dialogue records are bad records (file, record index, message).
//!
//! The ConvLab-3 unified format and the 2.2 frames format are not read (the corpus has a
//! 10-dialogue ConvLab sample of `train` and no 2.2 dialogue files).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

mod booking;
mod db;
mod dialogue;
mod schema;
#[cfg(test)]
mod tests;
mod text;
mod trajectory;

use db::{Databases, verify};
use dialogue::{Event, Turn, events, parse_dialogue};
use schema::{Intent, Schema, load_schema};
use text::render_request;

pub use db::norm;

use super::stats::SeqStats;
use super::{Conversion, SeqKnobs};
use crate::corpus::{BadRecord, CorpusError};
use crate::dataset::{Drop, Example, Outcome};
use crate::recipe::ResolvedSource;
use crate::tools::check::Checker;
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

/// The request template (minijinja).
const REQUEST_TEMPLATE: &str = include_str!("../../../templates/seq-multiwoz-request.j2");

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

/// Counters over a split's conversion.
#[derive(Default)]
struct Counters {
    finds: usize,
    books: usize,
    statuses: BTreeMap<String, usize>,
    duplicate_finds: usize,
    values_normalised: usize,
    unmapped_slot_values: usize,
    /// Values replaced by the database's spelling ([`Databases::canonical`]).
    values_normalised_db: usize,
    db_samples: BTreeSet<String>,
    /// `find_*` calls left out of the gold because the database does not verify them, by status.
    unverified_removed: BTreeMap<String, usize>,
    /// Booking events by what [`booking::add_booked_entity`] did (`added`, `replaced`, `kept`,
    /// `absent`).
    booked_entity: BTreeMap<String, usize>,
}

impl Counters {
    fn merge_removed(&mut self, local: &Counters) {
        for (k, v) in &local.unverified_removed {
            *self.unverified_removed.entry(k.clone()).or_insert(0) += v;
        }
        for (k, v) in &local.booked_entity {
            *self.booked_entity.entry(k.clone()).or_insert(0) += v;
        }
    }
}

enum Converted {
    Example(Box<Example>),
    Drop(Drop),
}

/// Builds the call arguments of an event: 2.2 names, enum-normalised values, schema slot order.
fn arguments(
    event: &Event,
    intent: &Intent,
    dbs: &Databases,
    counters: &mut Counters,
) -> Result<Map<String, Value>, String> {
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
                    Some(_) => value.clone(),
                    None => {
                        let suffix = name.split_once('-').map(|(_, s)| s).unwrap_or(&name);
                        match dbs.canonical(&event.domain, suffix, value) {
                            Some(canon) => {
                                counters.values_normalised_db += 1;
                                if counters.db_samples.len() < 30 {
                                    counters.db_samples.insert(format!("{name}: {value} -> {canon}"));
                                }
                                canon
                            }
                            None => value.clone(),
                        }
                    }
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
    keep_unverified: bool,
) -> Converted {
    let id = format!("{split}/{dial_id}");
    let drop = |reason: &str, detail: String| {
        Converted::Drop(Drop {
            id: id.clone(),
            group: split.to_string(),
            reason: reason.into(),
            detail,
            question: String::new(),
            // The slot states of the dialogue's turns: `domain slot=value, …` per turn.
            source: Drop::source_text(
                &turns
                    .iter()
                    .map(|t| {
                        t.semi
                            .iter()
                            .chain(&t.book)
                            .filter(|(_, slots)| !slots.is_empty())
                            .map(|(d, slots)| {
                                let s: Vec<String> = slots.iter().map(|(k, v)| format!("{k}={v}")).collect();
                                format!("{d} {}", s.join(", "))
                            })
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                    .collect::<Vec<_>>()
                    .join(" | "),
            ),
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
        let mut args = match arguments(e, intent, dbs, &mut local) {
            Ok(a) => a,
            Err(detail) => return drop("value_outside_schema", detail),
        };
        if e.kind == 1 {
            *local
                .booked_entity
                .entry(format!("{:?}", booking::add_booked_entity(e, intent, turns, dbs, &mut args)).to_lowercase())
                .or_insert(0) += 1;
        }
        if args.is_empty() {
            continue;
        }
        let check = (e.kind == 0).then(|| verify(e, &args, turns, dbs));
        if let Some(v) = &check {
            let status = v["status"].as_str().unwrap_or_default();
            if !status.starts_with("verified") && !keep_unverified {
                *local.unverified_removed.entry(status.to_string()).or_insert(0) += 1;
                continue;
            }
        }
        let n = counts.entry(tool.clone()).or_insert(0);
        *n += 1;
        let label = format!("{tool}_{n}");
        if let Some(mut v) = check {
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
        let removed: usize = local.unverified_removed.values().sum();
        if removed > 0 {
            counters.merge_removed(&local);
            return drop(
                "no_verified_call",
                format!("dialogue {dial_id}: its {removed} search(es) are not verified by the databases"),
            );
        }
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
    counters.values_normalised_db += local.values_normalised_db;
    counters.db_samples.extend(local.db_samples.iter().cloned());
    counters.merge_removed(&local);
    let removed: usize = local.unverified_removed.values().sum();
    Converted::Example(Box::new(Example {
        id,
        split: split.to_string(),
        input,
        ordered: calls.len() > 1,
        output: calls,
        tools: tools.into(),
        meta: Some(json!({
            "dialogue_id": dial_id,
            "source_split": source_split,
            "domains": touched,
            "request": "template",
            "verification": verification,
            "bookings": bookings,
            "unverified_calls_removed": removed,
        })),
        ..Example::default()
    }))
}

/// Converts the source (only `split` when given) with the default knobs.
pub fn convert(source: &ResolvedSource, split: Option<&str>) -> Result<Conversion, CorpusError> {
    convert_with(source, split, &SeqKnobs::default())
}

/// Converts the source (only `split` when given); `knobs.keep_unverified_calls` keeps the
/// searches the databases do not verify.
pub fn convert_with(source: &ResolvedSource, split: Option<&str>, knobs: &SeqKnobs) -> Result<Conversion, CorpusError> {
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
    let all_tools: Vec<String> = conversion.catalog.iter().map(|t| t.name.clone()).collect();
    let mut dialogue_set = crate::dataset::dialogue::Dialogues {
        rules: trajectory::RULES.iter().map(|r| r.to_string()).collect(),
        ..Default::default()
    };
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
            match trajectory::dialogue(rec, dial_id, &turns, sp, &schema, &dbs, &checker, all_tools.clone()) {
                Ok(t) => dialogue_set.splits.entry(sp.to_string()).or_default().push(t),
                Err(d) => dialogue_set.drops.entry(sp.to_string()).or_default().push(d),
            }
            match convert_dialogue(
                dial_id,
                &turns,
                sp,
                source_split,
                &schema,
                &dbs,
                &checker,
                &mut counters,
                knobs.keep_unverified_calls,
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
    // Every `verified*` status is a kept search (`db::verify`).
    let verified: usize = counters
        .statuses
        .iter()
        .filter(|(k, _)| k.starts_with("verified"))
        .map(|(_, n)| n)
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
            "free-text values (name, food; train departure/destination) replaced by the database's spelling when one database value is equal after normalisation, within a small edit distance, or (names) a unique prefix match",
            "find calls executed over MultiWOZ_2.1/db and kept when the result agrees with the system (meta.verification): the offered or booked entity among the results; without an offer, no results exactly when the system said <Domain>-NoOffer; a search the databases do not verify is left out of the gold (recipe [seq] keep_unverified_calls = true keeps it, flagged); a dialogue left with no call is dropped (no_verified_call)",
            "book_<domain> names the booked entity (restaurant-name, hotel-name, train-trainid: an extension of the 2.2 schema): the booked entry's name or trainID, else the last entity the system offered for the domain, in the database's spelling; a belief-state name of another entity is replaced (booked_entity counts)",
            "ordered: true on every row with two or more calls (dialogue order)",
            "instance tools: every domain's tools (the dataset's API list, API-BLEND §5.7.2)",
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
    let removed: usize = counters.unverified_removed.values().sum();
    s.insert(
        "find_verified_share_before_removal".into(),
        json!(ratio(verified, counters.finds + removed)),
    );
    s.insert(
        "find_verified_share_of_executable".into(),
        json!(ratio(verified, executable)),
    );
    s.insert("duplicate_finds".into(), json!(counters.duplicate_finds));
    s.insert("values_normalised".into(), json!(counters.values_normalised));
    s.insert("values_normalised_to_db".into(), json!(counters.values_normalised_db));
    s.insert("values_normalised_to_db_samples".into(), json!(counters.db_samples));
    s.insert(
        if knobs.keep_unverified_calls {
            "unverified_calls_kept"
        } else {
            "unverified_calls_removed"
        }
        .into(),
        json!(counters.unverified_removed),
    );
    s.insert("unmapped_slot_values".into(), json!(counters.unmapped_slot_values));
    s.insert("booked_entity".into(), json!(counters.booked_entity));
    s.insert("tools".into(), json!(conversion.catalog.len()));
    s.insert("paper_sizes".into(), super::stats::paper_sizes(&PAPER_SIZES));
    s.insert("dialogue_trajectories".into(), dialogue_set.counts());
    conversion.stats = s;
    conversion.dialogues = Some(dialogue_set);
    Ok(conversion)
}
