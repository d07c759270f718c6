//! MultiWOZ 2.1 dialogues as multi-turn dialogue trajectories (issue 45, item 2; written by
//! `emit::dialogue` to `trajectories/dialogue/`).
//!
//! The corpus records no service calls: the belief state (`metadata`) of each system turn is
//! what the wizard's database interface queried, and `booked` entries are the bookings made. So
//! the calls are placed where the state says the system acted, with the arguments the seq rows
//! use (`arguments`: 2.2 slot names, schema values, the database's spelling), and grounded:
//!
//! - **Turns**: every `log` entry in order, its `text` as it is: even indices user messages, odd
//!   ones the assistant's replies.
//! - **Searches**: at a system turn, for each domain with a `find_<domain>` tool (domain order of
//!   the seq rows), when the domain's `semi` constraints (set, not `dontcare`) are non-empty and
//!   differ from those of the domain's previous search in the dialogue: one `find_<domain>` call
//!   with the constraints of *that* turn (not, as the single-request rows do, the search
//!   episode's final ones: a dialogue turn must not know what the user says later). Its result is
//!   the database's: `{"total": n, "results": [the first 10 matching rows, as the database file
//!   holds them]}` in database order — a train search constrained by `arriveby` alone lists the
//!   latest arrivals first (closest to the requested time, as a timetable query answers).
//! - **Verification** (the seq stage's rule, `db::verify`, over this one turn): the entity the
//!   system names for the domain at the turn must be among the results (and among the rows
//!   shown), and without one, no results exactly when the system says `<Domain>-NoOffer`.
//! - **Bookings**: each new entry of a domain's `book.booked` list gives one `book_<domain>` call
//!   at that turn (after the searches), the seq rows' arguments (`semi` and `book` values of the
//!   turn restricted to the intent's slots, the booked entity in its slot, `booking.rs`); its
//!   result is the booked entry as the corpus holds it (`{"name", "reference"}`, `{"trainID",
//!   "reference"}`; a taxi's `{"phone", "type"}`). An entry of a restaurant, hotel or train
//!   without a `reference` gets a deterministic one (8 characters of the BLAKE3 of dialogue id,
//!   turn and domain, upper case; none in the shared corpus).
//! - **Tools**: every tool of the 2.2 schema (as the single-request rows).
//! - **Drops** (the whole dialogue, never half-grounded): `failed_booking` (a `*-NoBook` act: the
//!   system reports a booking that failed, and the corpus records no attempt to ground it),
//!   `value_outside_schema`, `schema_violation`, `search_not_executable` (bus: no database; a time
//!   that does not parse), `search_<status>` for a search the database does not verify
//!   (`search_entity_not_in_results`, `search_offered_entity_not_in_db`,
//!   `search_no_offer_but_results`, `search_no_results_without_no_offer`),
//!   `offered_entity_not_shown` (verified, but beyond the 10 rows shown), `no_service_call`,
//!   `missing_utterance`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::db::{Databases, norm, same_entity, verify};
use super::dialogue::{Event, Turn};
use super::schema::Schema;
use super::{Counters, DOMAINS, arguments, booking};
use crate::dataset::Drop;
use crate::dataset::dialogue::{Dialogue, GroundedCall, Speaker, Turn as DialogueTurn};
use crate::tools::Call;
use crate::tools::check::Checker;

/// Most database rows a search's result shows (its `total` gives the count).
pub(super) const SHOWN_ROWS: usize = 10;

/// The rules in words (the card and `report/verification.json`).
pub(super) const RULES: [&str; 5] = [
    "every log entry in order (even: user, odd: system), texts as the corpus has them",
    "find_<domain> at a system turn whose semi constraints for the domain are set and differ from the domain's previous search, with that turn's constraints (2.2 names, schema values, the database's spelling); result {total, results: first 10 database rows} (trains constrained by arriveby alone: latest arrivals first); verified against the turn's dialogue acts (the entity named among the shown results; no results exactly on <Domain>-NoOffer)",
    "book_<domain> per new booked entry at its turn, with the seq rows' arguments; result the booked entry as the corpus holds it (a deterministic reference where a restaurant, hotel or train entry has none)",
    "tools: the whole 2.2 schema (as the single-request rows)",
    "a dialogue with a call that cannot be grounded is dropped whole: failed_booking, value_outside_schema, schema_violation, search_not_executable, search_<verification status>, offered_entity_not_shown, no_service_call, missing_utterance",
];

/// The dialogue trajectory of `rec` (system turns parsed as `turns`), or why it is dropped.
#[allow(clippy::too_many_arguments)]
pub(super) fn dialogue(
    rec: &Value,
    dial_id: &str,
    turns: &[Turn],
    split: &str,
    schema: &Schema,
    dbs: &Databases,
    checker: &Checker,
    tools: Vec<String>,
) -> Result<Dialogue, Drop> {
    let id = format!("{split}/{dial_id}");
    let drop = |reason: &str, detail: String| Drop {
        id: id.clone(),
        group: split.to_string(),
        reason: reason.into(),
        detail,
        question: String::new(),
        source: String::new(),
    };
    let log = rec["log"].as_array().map(Vec::as_slice).unwrap_or_default();
    let mut scratch = Counters::default();
    let mut searched: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
    let mut booked_len: BTreeMap<&str, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, entry) in log.iter().enumerate() {
        let Some(text) = entry["text"].as_str() else {
            return Err(drop("missing_utterance", format!("log[{i}] has no text")));
        };
        if i % 2 == 0 {
            out.push(DialogueTurn {
                speaker: Speaker::User,
                text: text.to_string(),
                calls: vec![],
            });
            continue;
        }
        let k = i / 2;
        let turn = turns
            .get(k)
            .filter(|t| t.log_index == i)
            .ok_or_else(|| drop("missing_utterance", format!("log[{i}]: no system turn parsed")))?;
        let acts = entry["dialog_act"].as_object();
        if let Some(act) = acts
            .into_iter()
            .flatten()
            .map(|(a, _)| a)
            .find(|a| a.ends_with("-NoBook"))
        {
            return Err(drop(
                "failed_booking",
                format!("log[{i}]: {act}: the system reports a failed booking the corpus does not record"),
            ));
        }
        let mut calls = Vec::new();
        for domain in DOMAINS {
            let Some(intent) = schema.intents.get(&format!("find_{domain}")) else {
                continue;
            };
            let cur = turn.constraints(domain);
            if cur.is_empty() || searched.get(domain) == Some(&cur) {
                continue;
            }
            searched.insert(domain, cur.clone());
            let event = Event {
                pos: k,
                kind: 0,
                domain: domain.to_string(),
                values: cur.into_iter().map(|(s, v)| ("semi".to_string(), s, v)).collect(),
                span: (k, k),
                booked: None,
            };
            let args = arguments(&event, intent, dbs, &mut scratch)
                .map_err(|e| drop("value_outside_schema", format!("log[{i}]: {e}")))?;
            if args.is_empty() {
                continue;
            }
            let call = checked(checker, &intent.spec.name, args)
                .map_err(|e| drop("schema_violation", format!("log[{i}]: {e}")))?;
            let rows = dbs
                .matching(domain, &call.arguments)
                .map_err(|e| drop("search_not_executable", format!("log[{i}]: {}: {e}", call.name)))?;
            let check = verify(&event, &call.arguments, turns, dbs);
            let status = check["status"].as_str().unwrap_or_default();
            if !status.starts_with("verified") {
                return Err(drop(
                    &format!("search_{status}"),
                    format!("log[{i}]: {}: {check}", call.name),
                ));
            }
            let shown = shown_rows(domain, &call.arguments, rows.clone());
            if let Some(offered) = check["offered"].as_str() {
                let key = if domain == "train" { "trainID" } else { "name" };
                if !shown
                    .iter()
                    .any(|r| r[key].as_str().is_some_and(|n| same_entity(&norm(n), offered)))
                {
                    return Err(drop(
                        "offered_entity_not_shown",
                        format!(
                            "log[{i}]: {}: {offered} is not among the {SHOWN_ROWS} rows shown of {}",
                            call.name,
                            rows.len()
                        ),
                    ));
                }
            }
            calls.push(GroundedCall {
                name: call.name,
                arguments: call.arguments,
                result: json!({"total": rows.len(), "results": shown}),
            });
        }
        for domain in DOMAINS {
            let booked = turn.booked.get(domain).map(Vec::as_slice).unwrap_or_default();
            let before = booked_len.insert(domain, booked.len()).unwrap_or(0).min(booked.len());
            for entity in &booked[before..] {
                let Some(intent) = schema.intents.get(&format!("book_{domain}")) else {
                    continue;
                };
                let values = ["semi", "book"]
                    .iter()
                    .flat_map(|&part| {
                        let slots = if part == "semi" { &turn.semi } else { &turn.book };
                        slots
                            .get(domain)
                            .into_iter()
                            .flatten()
                            .filter(|(_, v)| v != "dontcare")
                            .map(move |(s, v)| (part.to_string(), s.clone(), v.clone()))
                    })
                    .collect();
                let event = Event {
                    pos: k,
                    kind: 1,
                    domain: domain.to_string(),
                    values,
                    span: (k, k),
                    booked: Some(entity.clone()),
                };
                let mut args = arguments(&event, intent, dbs, &mut scratch)
                    .map_err(|e| drop("value_outside_schema", format!("log[{i}]: {e}")))?;
                booking::add_booked_entity(&event, intent, turns, dbs, &mut args);
                let call = checked(checker, &intent.spec.name, args)
                    .map_err(|e| drop("schema_violation", format!("log[{i}]: {e}")))?;
                calls.push(GroundedCall {
                    name: call.name,
                    arguments: call.arguments,
                    result: booking_result(entity, dial_id, k, domain),
                });
            }
        }
        out.push(DialogueTurn {
            speaker: Speaker::System,
            text: text.to_string(),
            calls,
        });
    }
    if !out.iter().any(|t| !t.calls.is_empty()) {
        return Err(drop(
            "no_service_call",
            format!("dialogue {dial_id}: no search or booking in the belief states"),
        ));
    }
    Ok(Dialogue {
        id,
        system: SYSTEM_PROMPT.to_string(),
        tools,
        turns: out,
    })
}

/// The system prompt of every MultiWOZ dialogue.
const SYSTEM_PROMPT: &str = "You are the Cambridge TownInfo centre's assistant: you help visitors find and book restaurants, hotels, attractions, trains and taxis, and reach the hospital and the police. Talk with the user turn by turn; search or book with the tools when a request needs it and answer from their results.";

/// A call of `name` with `arguments`, validated against its JSON Schema.
fn checked(checker: &Checker, name: &str, arguments: Map<String, Value>) -> Result<Call, String> {
    let call = Call {
        name: name.to_string(),
        arguments,
        label: String::new(),
    };
    checker.validate(&call).map(|()| call)
}

/// The rows a search's result shows (module docs): the first [`SHOWN_ROWS`] in database order,
/// or for a train search constrained by `arriveby` and not `leaveat`, the latest arrivals first.
fn shown_rows(domain: &str, args: &Map<String, Value>, mut rows: Vec<&Value>) -> Vec<Value> {
    if domain == "train" && args.contains_key("train-arriveby") && !args.contains_key("train-leaveat") {
        rows.reverse();
    }
    rows.into_iter().take(SHOWN_ROWS).cloned().collect()
}

/// A booking's result: the booked entry as the corpus holds it, with a deterministic
/// `reference` where a restaurant, hotel or train entry has none (module docs).
fn booking_result(entry: &Value, dial_id: &str, turn: usize, domain: &str) -> Value {
    let mut out = entry.clone();
    if let Some(o) = out.as_object_mut()
        && matches!(domain, "restaurant" | "hotel" | "train")
        && !o.contains_key("reference")
    {
        let h = blake3::hash(format!("{dial_id}\u{1f}{turn}\u{1f}{domain}").as_bytes());
        o.insert("reference".into(), json!(h.to_hex()[..8].to_uppercase()));
    }
    out
}
