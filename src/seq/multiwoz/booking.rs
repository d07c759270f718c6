//! The booked entity of a `book_<domain>` call: which venue or train the booking books.
//!
//! Rule (one for every domain whose bookings book a database entity):
//!
//! - **Which entity**: the new `booked` entry's key (`name`; `trainID` for trains) when the entry
//!   has one, else the last entity the system offered for the domain up to the booking's turn
//!   (a `<Domain>-Inform/Recommend/Select/OfferBook(ed)` act's `Name` / `Id`, [`Turn::offers`]).
//!   A booking with neither (a taxi: its booked entry is a car, not a database entity) carries
//!   none.
//! - **Where**: the intent's entity slot ([`entity_slot`]): the 2.2 `<domain>-name` slot
//!   (`restaurant-name`, `hotel-name`) or, for trains, `train-trainid` (a toolforge extension:
//!   2.2's `book_train` has no train slot).
//! - **Spelling**: the database's ([`Databases::canonical`]), as for every free-text value.
//! - **Belief-state name**: kept when it names the same entity ([`same_entity`]); replaced by the
//!   booked entity when it names another (the user asked about one venue and booked another, or
//!   a typo the database cannot match: PMUL1635's "wartworth" for "warkworth house"). Before
//!   this rule, 211 / 1,028 restaurant and hotel bookings of dev and test did not say which venue
//!   they booked although the search had returned several.

use serde_json::{Map, Value, json};

use super::db::{Databases, booked_entity, norm, same_entity};
use super::dialogue::{Event, Turn};
use super::schema::{Intent, TRAIN_ID};

/// What [`add_booked_entity`] did to a booking's arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Entity {
    /// The entity slot was empty and now holds the booked entity.
    Added,
    /// The belief state named another entity; replaced by the booked one.
    Replaced,
    /// The belief state already named the booked entity.
    Kept,
    /// The domain books no entity, or the dialogue names none.
    Absent,
}

/// The slot of `intent` (a `book_<domain>` intent) that names the booked entity: `<domain>-name`
/// when the intent has it, `train-trainid` for trains; `None` for a domain without one (taxi).
pub(super) fn entity_slot(domain: &str, intent: &Intent) -> Option<String> {
    let name = format!("{domain}-name");
    if intent.slots.contains(&name) {
        return Some(name);
    }
    (domain == "train" && intent.slots.iter().any(|s| s == TRAIN_ID)).then(|| TRAIN_ID.to_string())
}

/// The entity a booking event books (module docs): its booked entry's key, else the last entity
/// the system offered for the domain up to the booking's turn.
pub(super) fn booked(event: &Event, turns: &[Turn]) -> Option<String> {
    let domain = event.domain.as_str();
    event
        .booked
        .as_ref()
        .and_then(|b| booked_entity(domain, b))
        .or_else(|| {
            turns[..=event.pos.min(turns.len().saturating_sub(1))]
                .iter()
                .flat_map(|t| &t.offers)
                .filter(|(d, _)| d == domain)
                .map(|(_, n)| n.clone())
                .next_back()
        })
}

/// Puts the booked entity of `event` into `args` (module docs), the arguments kept in the
/// intent's slot order.
pub(super) fn add_booked_entity(
    event: &Event,
    intent: &Intent,
    turns: &[Turn],
    dbs: &Databases,
    args: &mut Map<String, Value>,
) -> Entity {
    let (Some(slot), Some(entity)) = (entity_slot(&event.domain, intent), booked(event, turns)) else {
        return Entity::Absent;
    };
    let outcome = match args.get(&slot).and_then(Value::as_str) {
        Some(v) if same_entity(&norm(v), &entity) => return Entity::Kept,
        Some(_) => Entity::Replaced,
        None => Entity::Added,
    };
    let suffix = slot.split_once('-').map_or(slot.as_str(), |(_, s)| s);
    let value = dbs.canonical(&event.domain, suffix, &entity).unwrap_or(entity);
    args.insert(slot, json!(value));
    let ordered: Map<String, Value> = intent
        .slots
        .iter()
        .filter_map(|s| args.remove(s).map(|v| (s.clone(), v)))
        .collect();
    *args = ordered;
    outcome
}
