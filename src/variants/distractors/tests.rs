//! Unit tests of [`super`]: relatedness ranking, filters and the drawn rows.

use std::collections::BTreeSet;

use serde_json::json;

use super::*;
use crate::variants::fixtures::tool;

#[test]
fn similarity_measures() {
    let a = Features::of(&tool("get_singer_name", &[("country", "string")]));
    let b = Features::of(&tool("get_singer_name", &[("country", "string")]));
    let c = Features::of(&tool("get_stadium_capacity", &[("year", "integer")]));
    assert!((signature_similarity(&a, &b) - 1.0).abs() < 1e-12);
    assert!(signature_similarity(&a, &c) < 0.3);
    let s = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert!((jaccard(&s(&["a", "b"]), &s(&["b", "c"])) - 1.0 / 3.0).abs() < 1e-12);
}

/// Issue 16: ranking picked up the `_2` de-duplication suffix (`get_conductor_count_2`).
#[test]
fn name_tokens_drop_deduplication_suffixes() {
    let want: BTreeSet<String> = ["get", "conductor", "count"].iter().map(|s| s.to_string()).collect();
    assert_eq!(name_tokens("get_conductor_count_2"), want);
    assert_eq!(name_tokens("get_conductor_count"), want);
    let a = Features::of(&tool("get_conductor_count_2", &[]));
    let b = Features::of(&tool("get_matches_count_2", &[]));
    let c = Features::of(&tool("get_matches_count", &[]));
    assert_eq!(signature_similarity(&a, &b), signature_similarity(&a, &c));
}

fn described(name: &str, description: &str, param: &str) -> ToolSpec {
    let mut t = tool(name, &[(param, "string")]);
    t.description = description.into();
    t
}

/// Issue 30 item 4 / issue 32 item 5: distractors are the catalog's tools most related to
/// the gold tools by the retrieval index's BM25, none under `min_relatedness` (before, a
/// database "related" by a shared generic token gave topic-unrelated tools: world_1 →
/// employee_hire_evaluation), each with its score in the row.
#[test]
fn distractors_are_the_catalogs_bm25_related_tools_never_unrelated_ones() {
    let cand = |db: &str, t: ToolSpec| Candidate {
        db: Some(db.into()),
        features: Features::of(&t),
        tool: t,
        endpoint: None,
    };
    let gold = described(
        "get_country_population_by_continent",
        "Returns the population of each country on a continent.",
        "continent",
    );
    let own = described(
        "get_city_name_by_country",
        "Returns the names of cities of a country.",
        "country",
    );
    let pool = DistractorPool::of_candidates(
        vec![
            cand("world", gold.clone()),
            cand("world", own.clone()),
            cand(
                "atlas",
                described(
                    "get_country_area_by_continent",
                    "Returns the area of each country on a continent.",
                    "continent",
                ),
            ),
            cand(
                "census",
                described(
                    "get_population_by_country",
                    "Returns the population counted in a country.",
                    "country",
                ),
            ),
            cand(
                "hr",
                described(
                    "get_employee_salary_by_department",
                    "Returns the salary of each employee of a department.",
                    "department",
                ),
            ),
            cand(
                "pets",
                described(
                    "get_pet_age_by_owner",
                    "Returns the age of each pet of an owner.",
                    "owner",
                ),
            ),
            cand(
                "music",
                described(
                    "get_song_title_by_artist",
                    "Returns the title of each song of an artist.",
                    "artist",
                ),
            ),
            cand(
                "school",
                described(
                    "get_student_grade_by_course",
                    "Returns the grade of each student in a course.",
                    "course",
                ),
            ),
            cand(
                "shop",
                described(
                    "get_product_price_by_brand",
                    "Returns the price of each product of a brand.",
                    "brand",
                ),
            ),
        ],
        PathBuf::from("/nonexistent"),
        BTreeSet::new(),
        "rest".into(),
    );
    let e = Example {
        id: "d/1".into(),
        db_id: Some("world".into()),
        tools: vec![gold.clone(), own].into(),
        output: vec![Call {
            name: gold.name.clone(),
            arguments: json!({"continent": "Asia"}).as_object().unwrap().clone(),
            label: "L".into(),
        }],
        ..Example::default()
    };
    let cfg = DistractorsConfig {
        k: 5,
        max_signature_similarity: 0.8,
        min_relatedness: 0.3,
    };
    let (row, _) = pool.variant(&e, &cfg, 7);
    let row = row.expect("related candidates exist");
    let drawn = &row.meta.as_ref().unwrap()["variant"]["distractors"];
    let names: BTreeSet<&str> = drawn
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    // Related by `continent` and by `population`; `country` and `returns`, in the tools of
    // more than a quarter of the databases, relate nothing.
    assert_eq!(
        names,
        BTreeSet::from(["get_country_area_by_continent", "get_population_by_country"]),
        "{drawn}"
    );
    for d in drawn.as_array().unwrap() {
        assert!(
            d["relatedness"].as_f64().unwrap() >= 0.3 && d["bm25"].as_f64().unwrap() > 0.0,
            "{d}"
        );
    }
    assert_eq!(row.tools.len(), 4);
    // Nothing related enough: no row rather than unrelated tools.
    let strict = DistractorsConfig {
        min_relatedness: 0.99,
        ..cfg
    };
    assert!(pool.variant(&e, &strict, 7).0.is_none());
}
