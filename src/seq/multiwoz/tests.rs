//! Unit tests of the MultiWOZ conversion on real dialogues of ../shared/corpora/multiwoz.

use super::db::{Databases, Execution, minutes, norm, verify};
use super::dialogue::*;
use super::schema::*;
use super::*;
use crate::corpus::read_json;
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

/// The example of a val dialogue, unverified searches kept (flagged).
fn example(f: &Fixture, id: &str) -> Example {
    example_with(f, id, true)
}

fn example_with(f: &Fixture, id: &str, keep_unverified: bool) -> Example {
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
        keep_unverified,
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
    // Issue 30: the booking names the hotel it booked (the booked entry's name), not the
    // belief state's typo.
    assert_eq!(book.arguments["hotel-name"], "warkworth house");
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
    let dbs = Databases::load(&corpus()).unwrap();
    assert_eq!(
        arguments(&ev("night club"), intent, &dbs, &mut c).unwrap()["attraction-type"],
        "nightclub"
    );
    assert_eq!(c.values_normalised, 1);
    assert!(
        arguments(&ev("church"), intent, &dbs, &mut c)
            .unwrap_err()
            .contains("church")
    );
}

#[test]
fn free_text_values_take_the_database_spelling() {
    let dbs = Databases::load(&corpus()).unwrap();
    // Issue 15: "cafe uno" found nothing; the database spells it "caffe uno".
    assert_eq!(
        dbs.canonical("restaurant", "name", "cafe uno").as_deref(),
        Some("caffe uno")
    );
    assert_eq!(
        dbs.canonical("restaurant", "name", "pizza hut fenditton").as_deref(),
        Some("pizza hut fen ditton")
    );
    assert_eq!(
        dbs.canonical("restaurant", "food", "portugese").as_deref(),
        Some("portuguese")
    );
    assert_eq!(
        dbs.canonical("restaurant", "name", "charlie").as_deref(),
        Some("charlie chan")
    );
    // Already the database's spelling, or two places in one mention: left alone.
    assert_eq!(dbs.canonical("restaurant", "name", "caffe uno"), None);
    assert_eq!(
        dbs.canonical("restaurant", "name", "de luca cucina and bar riverside brasserie"),
        None
    );
    assert_eq!(dbs.canonical("restaurant", "booktime", "18:00"), None);
    let caffe = Map::from_iter([("restaurant-name".to_string(), json!("caffe uno"))]);
    assert!(matches!(dbs.find("restaurant", &caffe), Execution::Rows(r) if r.len() == 1));
}

#[test]
fn unverified_searches_are_left_out_of_the_gold_by_default() {
    let f = fixture();
    // PMUL1635: the hotel search does not return the booked hotel (entity_not_in_results).
    let kept = example_with(&f, "PMUL1635", true);
    assert!(kept.meta.as_ref().unwrap()["verification"][0]["status"] == "entity_not_in_results");
    let e = example_with(&f, "PMUL1635", false);
    let meta = e.meta.unwrap();
    assert!(
        meta["verification"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| v["status"].as_str().unwrap().starts_with("verified")),
        "{meta}"
    );
    assert!(meta["unverified_calls_removed"].as_u64().unwrap() >= 1);
    assert_eq!(e.output.len() + 1, kept.output.len());
}

/// Issue 30 item 5: one rule keeps a search, applied both ways: without an offered entity, the
/// database's result must be empty exactly when the system said `<Domain>-NoOffer`. Was: an
/// empty result kept on a NoOffer, a non-empty one without a named entity dropped
/// (`no_offered_entity`).
#[test]
fn search_without_offer_kept_exactly_when_results_and_no_offer_agree() {
    let dbs = Databases::load(&corpus()).unwrap();
    let event = Event {
        pos: 0,
        kind: 0,
        domain: "restaurant".into(),
        values: vec![],
        span: (0, 0),
        booked: None,
    };
    let turns = |no_offer: bool| {
        vec![Turn {
            no_offer: if no_offer { vec!["restaurant".into()] } else { vec![] },
            ..Turn::default()
        }]
    };
    let args = |area: &str| Map::from_iter([("restaurant-area".to_string(), json!(area))]);
    let status = |area: &str, no_offer: bool| verify(&event, &args(area), &turns(no_offer), &dbs)["status"].clone();
    assert_eq!(status("centre", false), "verified_results");
    assert_eq!(status("centre", true), "no_offer_but_results");
    assert_eq!(status("atlantis", true), "verified_no_offer");
    assert_eq!(status("atlantis", false), "no_results_without_no_offer");
}

/// Issue 30 item 5: a booking whose belief state names no venue names the booked one (the
/// booked entry, else the system's last offer of the domain), in the database's spelling.
#[test]
fn booking_names_the_booked_entity_from_the_entry_or_the_systems_offer() {
    let schema = load_schema(&schema_path(&corpus())).unwrap();
    let dbs = Databases::load(&corpus()).unwrap();
    let intent = &schema.intents["book_restaurant"];
    let event = |booked: Option<Value>| Event {
        pos: 1,
        kind: 1,
        domain: "restaurant".into(),
        values: vec![],
        span: (1, 1),
        booked,
    };
    let turns = vec![
        Turn {
            offers: vec![("restaurant".into(), "Cafe Uno".into())],
            ..Turn::default()
        },
        Turn::default(),
    ];
    let mut args = Map::from_iter([("restaurant-bookpeople".to_string(), json!("2"))]);
    let e = event(Some(json!({"name": "the golden wok", "reference": "X"})));
    assert_eq!(
        booking::add_booked_entity(&e, intent, &turns, &dbs, &mut args),
        booking::Entity::Added
    );
    assert_eq!(args["restaurant-name"], "golden wok");
    assert_eq!(args.keys().next().unwrap(), "restaurant-name", "schema slot order");
    // No name in the entry: the system's last offer, in the database's spelling.
    let mut args = Map::new();
    let e = event(Some(json!({"reference": "X"})));
    assert_eq!(
        booking::add_booked_entity(&e, intent, &turns, &dbs, &mut args),
        booking::Entity::Added
    );
    assert_eq!(args["restaurant-name"], "caffe uno");
    // Another venue in the belief state is replaced; the same one kept.
    let mut args = Map::from_iter([("restaurant-name".to_string(), json!("pizza hut city centre"))]);
    let e = event(Some(json!({"name": "golden wok"})));
    assert_eq!(
        booking::add_booked_entity(&e, intent, &turns, &dbs, &mut args),
        booking::Entity::Replaced
    );
    assert_eq!(args["restaurant-name"], "golden wok");
    assert_eq!(
        booking::add_booked_entity(&e, intent, &turns, &dbs, &mut args),
        booking::Entity::Kept
    );
    // A taxi books no database entity.
    let taxi = Event {
        domain: "taxi".into(),
        ..event(Some(json!({"type": "toyota", "phone": "0"})))
    };
    let mut args = Map::new();
    let intent = &schema.intents["book_taxi"];
    assert_eq!(
        booking::add_booked_entity(&taxi, intent, &turns, &dbs, &mut args),
        booking::Entity::Absent
    );
}
