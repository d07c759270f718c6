//! Unit tests of the SGD conversion on real dialogues of ../shared/corpora/sgd.

use super::dialogue::*;
use super::schema::*;
use super::*;
use crate::corpus::read_json;
use crate::recipe::SourceManifest;

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/sgd")
}

fn source(root: &Path) -> ResolvedSource {
    let manifest = SourceManifest::load(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("sources/sgd.toml")).unwrap();
    ResolvedSource {
        manifest,
        root: root.to_path_buf(),
        questions: root.join("dev/schema.json"),
        databases: root.to_path_buf(),
        tables: None,
    }
}

#[test]
fn real_dialogue_calls_hold_canonical_values_not_surface_forms() {
    let schema = load_schema(&corpus(), &SPLITS).unwrap();
    let catalog: Vec<ToolSpec> = schema.services.values().flatten().cloned().collect();
    let checker = Checker::new(&catalog).unwrap();
    let records = read_json(&corpus().join("dev/dialogues_001.json")).unwrap();
    let d = parse_dialogue(&records[0]).unwrap();
    assert_eq!(d.id, "1_00000");
    let Converted::Example(e, _, _) = convert_dialogue(&d, "dev", "dev/dialogues_001.json", &schema, &checker, false)
    else {
        panic!("dropped")
    };
    let reserve = e
        .output
        .iter()
        .find(|c| c.name == "Restaurants_2_ReserveRestaurant")
        .unwrap();
    assert_eq!(reserve.arguments["time"], "11:30");
    assert_eq!(reserve.arguments["restaurant_name"], "Sino");
    assert!(
        e.input.contains("11:30") && !e.input.contains("half past"),
        "{}",
        e.input
    );
    let meta = e.meta.unwrap();
    assert!(
        meta["surface_forms"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["canonical"] == "11:30" && s["said"] == "half past 11 in the morning"),
        "{meta}"
    );
    assert!(
        e.output
            .iter()
            .all(|c| checker.validate(c).is_ok() && checker.ungrounded(c, &e.input).is_empty())
    );
    assert!(e.tools.iter().any(|t| t.name == "Restaurants_2_FindRestaurants"));
}

#[test]
fn catalog_types_enums_required_and_unique_names() {
    let schema = load_schema(&corpus(), &SPLITS).unwrap();
    let tools: Vec<&ToolSpec> = schema.services.values().flatten().collect();
    let names: BTreeSet<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), tools.len(), "tool names must be unique");
    let reserve = tools
        .iter()
        .find(|t| t.name == "Restaurants_2_ReserveRestaurant")
        .unwrap();
    let p = &reserve.parameters;
    assert!(p["required"].as_array().unwrap().contains(&json!("restaurant_name")));
    // number_of_seats is categorical → enum; restaurant_name is not → no enum.
    assert!(p["properties"]["number_of_seats"]["enum"].is_array(), "{p}");
    assert!(p["properties"]["restaurant_name"].get("enum").is_none());
    assert_eq!(schema.conflicts, 0);
}

#[test]
fn malformed_record_is_a_bad_record_and_callless_dialogue_a_drop() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::copy(corpus().join("dev/schema.json"), dev.join("schema.json")).unwrap();
    let real = read_json(&corpus().join("dev/dialogues_001.json")).unwrap();
    let mut callless = real[0].clone();
    callless["dialogue_id"] = json!("x_1");
    for t in callless["turns"].as_array_mut().unwrap() {
        for f in t["frames"].as_array_mut().unwrap() {
            f.as_object_mut().unwrap().remove("service_call");
        }
    }
    let records = json!([real[0], {"dialogue_id": "x_2", "turns": []}, callless, 7]);
    std::fs::write(dev.join("dialogues_001.json"), serde_json::to_vec(&records).unwrap()).unwrap();
    let c = convert(&source(tmp.path()), None).unwrap();
    let bad: Vec<(String, usize)> = c.bad_records.iter().map(|b| (b.file.clone(), b.record)).collect();
    assert_eq!(
        bad,
        vec![
            ("dev/dialogues_001.json".into(), 1),
            ("dev/dialogues_001.json".into(), 3)
        ]
    );
    let dev = &c.splits["dev"];
    assert_eq!((dev.attempted, dev.examples.len()), (2, 1));
    assert_eq!(dev.drops[0].reason, "no_service_call");
    assert_eq!(dev.drops[0].id, "dev/x_1");
    assert_eq!(c.stats["calls_failing_schema"], 0);
}

#[test]
fn consecutive_identical_calls_are_collapsed() {
    let tmp = tempfile::tempdir().unwrap();
    let dev = tmp.path().join("dev");
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::copy(corpus().join("dev/schema.json"), dev.join("schema.json")).unwrap();
    let real = read_json(&corpus().join("dev/dialogues_001.json")).unwrap();
    let mut d = real[0].clone();
    let turns = d["turns"].as_array_mut().unwrap();
    let with_call = turns
        .iter()
        .position(|t| {
            t["frames"]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f.get("service_call").is_some())
        })
        .unwrap();
    let dup = turns[with_call].clone();
    turns.insert(with_call + 1, dup);
    std::fs::write(
        dev.join("dialogues_001.json"),
        serde_json::to_vec(&json!([real[0], d])).unwrap(),
    )
    .unwrap();
    let c = convert(&source(tmp.path()), Some("dev")).unwrap();
    let ex = &c.splits["dev"].examples;
    assert_eq!(ex[0].output, ex[1].output);
    assert_eq!(c.stats["duplicate_calls_collapsed"], 1);
}
