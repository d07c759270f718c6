//! The per-kind properties of every variant row of a build (drift, obfuscate, shortlist,
//! distractors, perturb).

use std::collections::BTreeMap;

use serde_json::json;
use toolforge::dataset::Build;
use toolforge::tools::ToolSpec;
use toolforge::variants::distractors::{Features, signature_similarity};
use toolforge::variants::drift::{fastapi_errors, unmigrate};
use toolforge::variants::obfuscate::{deobfuscate, identifiers, surviving_identifiers};
use toolforge::variants::perturb::preserves_values;
use toolforge::variants::{gold_tool_names, gold_value_texts, is_variant};

use crate::support::{Runner, drift_for, drift_of, meta};

/// Every property of every variant row of a build; returns rows per kind.
pub fn check_variants(build: &Build) -> BTreeMap<String, usize> {
    let drift = drift_of(build);
    let rest = build.recipe.format == "rest";
    let (examples, parents) = crate::support::examples_and_parents(build);
    let mut runner = Runner::new(build);
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let (mut loud_checked, mut changes_seen) = (0, BTreeMap::<&str, usize>::new());
    let mut invalid_in_a_old = 0;
    let threshold = build
        .recipe
        .variants
        .as_ref()
        .unwrap()
        .distractors
        .as_ref()
        .map(|d| d.max_signature_similarity);
    for v in examples.iter().filter(|e| is_variant(e)) {
        let parent = parents[meta(v, "variant_of").as_str().unwrap()];
        let kind = meta(v, "variant_kind").as_str().unwrap();
        *kinds.entry(kind.into()).or_insert(0) += 1;
        let detail = meta(v, "variant");
        assert_eq!(v.gold_answer, parent.gold_answer);
        match kind {
            "drift" => {
                assert_eq!(v.tools, parent.tools, "{}: the model sees A_old", v.id);
                let new: Vec<ToolSpec> = serde_json::from_value(detail["tools_new"].clone()).unwrap();
                let db = v.db_id.as_deref();
                let mut back = Vec::new();
                for (c, old) in v.output.iter().zip(&parent.output) {
                    match new.iter().find(|t| t.name == c.name) {
                        Some(spec) => {
                            let errors = fastapi_errors(&spec.parameters, &c.arguments, "body");
                            // A gold call that is already invalid under A_old (SLOT
                            // `aggregate_data` counting rows with `key_name: ""`, outside the
                            // instance enum) stays invalid in the same way; every other one
                            // must validate under A_new.
                            let a_old = parent.tools.iter().find(|t| t.name == old.name).unwrap();
                            if fastapi_errors(&a_old.parameters, &old.arguments, "body").is_empty() {
                                assert!(
                                    errors.is_empty(),
                                    "{}: migrated {} invalid under A_new: {errors:?}",
                                    v.id,
                                    c.name
                                );
                            } else {
                                invalid_in_a_old += 1;
                            }
                        }
                        None => assert_eq!(c.name, "initialize_active_data", "{}", v.id),
                    }
                    match drift_for(&drift, v).by_new_name(db, &c.name) {
                        Some(d) => {
                            for ch in &d.changes {
                                *changes_seen.entry(ch.operator()).or_insert(0) += 1;
                            }
                            back.push(unmigrate(c, &d.changes).unwrap())
                        }
                        None => back.push(c.clone()),
                    }
                }
                assert!(
                    runner.reproduces(v, &back),
                    "{}: un-migrated calls do not reproduce gold",
                    v.id
                );
                for i in detail["loud_calls"].as_array().unwrap() {
                    let old = &parent.output[i.as_u64().unwrap() as usize];
                    if let Some(spec) = new.iter().find(|t| t.name == old.name) {
                        let errors = fastapi_errors(&spec.parameters, &old.arguments, "body");
                        assert!(!errors.is_empty(), "{}: old {} accepted under A_new", v.id, old.name);
                    }
                    loud_checked += 1;
                }
            }
            "obfuscate" => {
                assert!(v.tools.iter().all(|t| t.name.starts_with("FUNC_")));
                let calls = deobfuscate(&v.output, &detail["mapping"]);
                assert_eq!(calls, parent.output);
                // Issue 16: no original tool / parameter / path identifier or gold label left.
                let ids = identifiers(parent);
                let left = surviving_identifiers(v, &ids);
                assert!(left.is_empty(), "{}: original identifiers survive: {left:?}", v.id);
                *kinds.entry("obfuscate_identifiers_checked".into()).or_insert(0) += ids.len();
                assert!(runner.reproduces(v, &calls), "{}", v.id);
            }
            "shortlist" => {
                assert!(v.tools.len() < parent.tools.len());
                for g in gold_tool_names(parent) {
                    assert!(v.tools.iter().any(|t| t.name == g), "{}: gold {g} missing", v.id);
                }
                assert!(v.tools.iter().all(|t| parent.tools.contains(t)));
                assert!(runner.reproduces(v, &v.output), "{}", v.id);
            }
            "distractors" => {
                let added: Vec<&ToolSpec> = v.tools.iter().filter(|t| !parent.tools.contains(t)).collect();
                assert!(!added.is_empty() && added.len() <= 5);
                assert_eq!(v.tools.len(), parent.tools.len() + added.len());
                let gold: Vec<Features> = parent
                    .tools
                    .iter()
                    .filter(|t| gold_tool_names(parent).contains(&t.name))
                    .map(Features::of)
                    .collect();
                for a in &added {
                    assert!(
                        !parent.tools.iter().any(|t| t.name == a.name),
                        "{}: name clash {}",
                        v.id,
                        a.name
                    );
                    for g in &gold {
                        assert!(signature_similarity(&Features::of(a), g) < threshold.unwrap());
                    }
                    // SLOT: a getter of a column the instance's own table lacks.
                    assert!(
                        !parent
                            .key_values_and_descriptions
                            .iter()
                            .any(|k| toolforge::tools::sel::getter_name(&k.key_name) == a.name),
                        "{}: distractor {} reads a column of the instance's table",
                        v.id,
                        a.name
                    );
                }
                assert!(runner.reproduces(v, &v.output), "{}", v.id);
                // Issue 30 item 4: ranked by the retrieval index's BM25, none under the
                // minimum relatedness, the score in the row; none answers.
                let min = detail["min_relatedness"].as_f64().unwrap();
                let drawn = detail["distractors"].as_array().unwrap();
                for pair in drawn.windows(2) {
                    assert!(
                        pair[0]["bm25"].as_f64() >= pair[1]["bm25"].as_f64(),
                        "{}: {pair:?}",
                        v.id
                    );
                }
                for d in drawn {
                    assert!(d["relatedness"].as_f64().unwrap() >= min, "{}: {d}", v.id);
                    *kinds
                        .entry(
                            if d["db_id"].as_str() == v.db_id.as_deref() {
                                "distractors_same_db"
                            } else {
                                "distractors_other_db"
                            }
                            .into(),
                        )
                        .or_insert(0) += 1;
                    let name = d["name"].as_str().unwrap();
                    let db = d["db_id"].as_str().unwrap();
                    assert!(
                        !runner.distractor_answers(parent, db, name, &v.tools),
                        "{}: distractor {name} answers the question",
                        v.id
                    );
                }
            }
            "perturb" => {
                assert_ne!(v.input, parent.input);
                assert_eq!(detail["original_input"], json!(parent.input));
                let values = gold_value_texts(&v.output);
                assert!(preserves_values(&parent.input, &v.input, &values).is_ok(), "{}", v.id);
                assert_eq!(v.output, parent.output);
            }
            other => panic!("unknown kind {other}"),
        }
    }
    eprintln!(
        "{}: rows {kinds:?}; loud old calls checked {loud_checked}; changes on executed calls {changes_seen:?}; gold calls already invalid under A_old {invalid_in_a_old}",
        build.recipe.name
    );
    assert!(loud_checked > 0);
    // Every parent gets its obfuscate row; the report keeps counting only compiled examples.
    assert_eq!(kinds["obfuscate"], parents.len());
    let _ = rest;
    kinds
}
