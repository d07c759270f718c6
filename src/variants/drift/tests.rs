//! Unit tests of the drift operators, migration and the A_new validator.

use super::*;
use crate::tools::Call;

fn spec() -> ToolSpec {
    ToolSpec {
        name: "retrieve_data".into(),
        description: "d".into(),
        parameters: json!({"type": "object", "properties": {
            "data_source": {"type": "string"},
            "key_name": {"type": "string", "enum": ["a", "b"]},
            "distinct": {"type": "boolean", "default": false},
            "limit": {"type": "integer", "default": -1},
        }, "required": ["data_source", "key_name"]}),
        output_parameters: json!({}),
    }
}

fn call(args: Value) -> Call {
    Call {
        name: "retrieve_data".into(),
        arguments: args.as_object().unwrap().clone(),
        label: "L".into(),
    }
}

fn roundtrip(changes: &[Change], args: Value) -> (Migrated, Vec<Value>, Vec<Value>) {
    let new = apply_schema(&spec(), changes);
    let old = call(args);
    let m = migrate(&old, changes);
    let ok = fastapi_errors(&new.parameters, &m.call.arguments, "body");
    let bad = fastapi_errors(&new.parameters, &old.arguments, "body");
    let back = unmigrate(&m.call, changes).unwrap();
    // Un-migration gives back the old call (explicit defaults aside).
    for (k, v) in &old.arguments {
        assert_eq!(back.arguments.get(k), Some(v), "{k}");
    }
    assert_eq!(back.name, old.name);
    (m, ok, bad)
}

#[test]
fn endpoint_evolution_renames_the_function_and_path() {
    let c = Change::EndpointEvolution {
        name_old: "retrieve_data".into(),
        name_new: "retrieve_data_v2".into(),
        path_old: None,
        path_new: None,
    };
    let (m, ok, _) = roundtrip(&[c], json!({"data_source": "$t$", "key_name": "a"}));
    assert_eq!(m.call.name, "retrieve_data_v2");
    assert!(ok.is_empty() && m.loud);
    let mut rest = spec();
    rest.description = "x (GET /v1/s/db/t/r)".into();
    let c = Change::EndpointEvolution {
        name_old: "f".into(),
        name_new: "f_v2".into(),
        path_old: Some("/v1/s/db/t/r".into()),
        path_new: Some("/v2/s/db/t/r".into()),
    };
    assert_eq!(apply_schema(&rest, &[c]).description, "x (GET /v2/s/db/t/r)");
}

#[test]
fn rename_moves_the_key_and_old_name_is_extra_forbidden() {
    let c = Change::ParameterRename {
        from: "key_name".into(),
        to: "column".into(),
    };
    let (m, ok, bad) = roundtrip(&[c], json!({"data_source": "$t$", "key_name": "a"}));
    assert_eq!(m.call.arguments["column"], "a");
    assert!(ok.is_empty());
    assert!(
        bad.contains(&json!({"type": "missing", "loc": ["body", "column"], "msg": "Field required", "input": null})),
        "{bad:?}"
    );
    assert!(
        bad.iter()
            .any(|e| e["type"] == "extra_forbidden" && e["loc"] == json!(["body", "key_name"]))
    );
    assert_eq!(renamed("country_name"), Some("nation_title".into()));
    assert_eq!(renamed("zz_top"), Some("zzTop".into()));
    assert_eq!(renamed("zz"), None);
}

#[test]
fn type_drift_writes_values_as_text() {
    let c = Change::TypeDrift {
        parameter: "limit".into(),
        from: "integer".into(),
    };
    let (m, ok, bad) = roundtrip(&[c.clone()], json!({"data_source": "$t$", "key_name": "a", "limit": 3}));
    assert_eq!(m.call.arguments["limit"], "3");
    assert!(ok.is_empty());
    assert_eq!(bad[0]["type"], "string_type");
    assert_eq!(bad[0]["loc"], json!(["body", "limit"]));
    assert_eq!(
        apply_schema(&spec(), &[c.clone()]).parameters["properties"]["limit"]["default"],
        "-1"
    );
    let bad_text = call(json!({"data_source": "$t$", "key_name": "a", "limit": "x"}));
    assert!(unmigrate(&bad_text, &[c]).is_err());
}

#[test]
fn required_swaps_both_ways() {
    let c = Change::RequiredSwap {
        parameter: "limit".into(),
        now_required: true,
        default: Some(json!(-1)),
    };
    let (m, ok, bad) = roundtrip(&[c], json!({"data_source": "$t$", "key_name": "a"}));
    assert_eq!(m.call.arguments["limit"], -1);
    assert!(ok.is_empty() && m.loud);
    assert_eq!(bad[0]["loc"], json!(["body", "limit"]));
    // Required → optional only for a property that states a default; un-migration fills it.
    let c = Change::RequiredSwap {
        parameter: "limit".into(),
        now_required: false,
        default: Some(json!(-1)),
    };
    let mut with_required_limit = spec();
    with_required_limit.parameters["required"] = json!(["data_source", "key_name", "limit"]);
    let new = apply_schema(&with_required_limit, &[c.clone()]);
    assert_eq!(new.parameters["required"], json!(["data_source", "key_name"]));
    assert_eq!(new.parameters["properties"]["limit"]["default"], -1);
    let omitted = call(json!({"data_source": "$t$", "key_name": "a"}));
    assert_eq!(unmigrate(&omitted, &[c]).unwrap().arguments["limit"], -1);
}

/// Issue 16: `required_swap` made `filter_data.data_source` (and SEL getters' every input)
/// optional with no default, so A_new accepted calls nothing could run.
#[test]
fn required_swap_never_makes_an_input_without_default_optional() {
    let ps = props(&spec().parameters);
    let req = required(&spec().parameters);
    for seed in 0..200 {
        let mut rng = Rng::new(seed, &["t"]);
        for c in required_swap::propose(&ps, &req, &[], &mut rng) {
            let Change::RequiredSwap {
                parameter,
                now_required,
                default,
            } = c
            else {
                unreachable!()
            };
            assert!(default.is_some(), "{parameter}");
            assert!(now_required, "{parameter}: required without default made optional");
        }
    }
}

#[test]
fn default_flip_makes_the_old_default_explicit() {
    let c = Change::DefaultFlip {
        parameter: "distinct".into(),
        old: json!(false),
        new: json!(true),
    };
    let (m, ok, bad) = roundtrip(&[c.clone()], json!({"data_source": "$t$", "key_name": "a"}));
    assert_eq!(m.call.arguments["distinct"], false);
    assert!(ok.is_empty() && bad.is_empty() && !m.loud);
    // An A_new call that omits it means the new default.
    let back = unmigrate(&call(json!({"data_source": "$t$", "key_name": "a"})), &[c]).unwrap();
    assert_eq!(back.arguments["distinct"], true);
}

#[test]
fn nesting_groups_members_after_renaming() {
    let changes = vec![
        Change::ParameterRename {
            from: "limit".into(),
            to: "max_results".into(),
        },
        Change::NestedObject {
            group: "options".into(),
            members: vec!["distinct".into(), "max_results".into()],
        },
    ];
    let (m, ok, bad) = roundtrip(
        &changes,
        json!({"data_source": "$t$", "key_name": "a", "distinct": true, "limit": 2}),
    );
    assert_eq!(m.call.arguments["options"], json!({"distinct": true, "max_results": 2}));
    assert!(ok.is_empty(), "{ok:?}");
    assert!(bad.iter().any(|e| e["loc"] == json!(["body", "distinct"])));
    let wrong = fastapi_errors(
        &apply_schema(&spec(), &changes).parameters,
        &json!({"data_source": "$t$", "key_name": "c", "options": {"distinct": 1}})
            .as_object()
            .unwrap()
            .clone(),
        "body",
    );
    assert!(
        wrong
            .iter()
            .any(|e| e["type"] == "enum" && e["loc"] == json!(["body", "key_name"])),
        "{wrong:?}"
    );
    assert!(
        wrong
            .iter()
            .any(|e| e["type"] == "bool_type" && e["loc"] == json!(["body", "options", "distinct"])),
        "{wrong:?}"
    );
}

#[test]
fn served_drift_enforces_a_new() {
    let changes = vec![
        Change::TypeDrift {
            parameter: "limit".into(),
            from: "integer".into(),
        },
        Change::ParameterRename {
            from: "key_name".into(),
            to: "column".into(),
        },
    ];
    let mut renamed_away = spec();
    renamed_away.name = "sort_data".into();
    let gone = vec![Change::EndpointEvolution {
        name_old: "sort_data".into(),
        name_new: "sort_data_v2".into(),
        path_old: None,
        path_new: None,
    }];
    let drift = Drift {
        format: "slot".into(),
        seed: 0,
        scope: Scope::Tool,
        tools: vec![
            ToolDrift {
                method: None,
                db_id: None,
                path_old: None,
                path_new: None,
                new: apply_schema(&spec(), &changes),
                old: spec(),
                changes,
            },
            ToolDrift {
                method: None,
                db_id: None,
                path_old: None,
                path_new: None,
                new: apply_schema(&renamed_away, &gone),
                old: renamed_away,
                changes: gone,
            },
        ],
    };
    let args = |v: Value| v.as_object().unwrap().clone();
    let err = drift
        .check_body(
            "retrieve_data",
            &args(json!({"data_source": "$t$", "key_name": "a", "limit": 2})),
            "L",
        )
        .unwrap_err()
        .unwrap();
    assert!(
        err.contains(&json!({"type": "missing", "loc": ["body", "column"], "msg": "Field required", "input": null})),
        "{err:?}"
    );
    assert!(err.contains(&json!({"type": "string_type", "loc": ["body", "limit"], "msg": "Input should be a valid string", "input": 2})), "{err:?}");
    let ok = drift
        .check_body(
            "retrieve_data",
            &args(json!({"data_source": "$t$", "column": "a", "limit": "2"})),
            "L",
        )
        .unwrap()
        .unwrap();
    assert_eq!(
        ok.arguments,
        args(json!({"data_source": "$t$", "key_name": "a", "limit": 2}))
    );
    assert_eq!(drift.check_body("sort_data", &args(json!({})), "L"), Err(None));
    assert_eq!(drift.check_body("group_data_by", &args(json!({})), "L"), Ok(None));
    let q = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    };
    let d = &drift.tools[0];
    let err = Drift::check_query(d, &q(&[("data_source", "$t$"), ("key_name", "a")])).unwrap_err();
    assert_eq!(
        err,
        vec![json!({"type": "missing", "loc": ["query", "column"], "msg": "Field required", "input": null})]
    );
    let ok = Drift::check_query(d, &q(&[("data_source", "$t$"), ("column", "a"), ("limit", "5")])).unwrap();
    assert_eq!(ok["limit"], 5);
    assert_eq!(
        d.errors_in_new_names(vec![json!({"loc": ["query", "key_name"]})]),
        vec![json!({"loc": ["query", "column"]})]
    );
}

#[test]
fn plans_are_seeded_and_canonically_ordered() {
    let cfg = DriftConfig {
        operators: OPERATORS.iter().map(|s| s.to_string()).collect(),
        rate: 0.5,
        weights: Default::default(),
    };
    let a = plan_tool(&spec(), None, &cfg, &mut Rng::new(1, &["x"]));
    let b = plan_tool(&spec(), None, &cfg, &mut Rng::new(1, &["x"]));
    assert_eq!(a, b);
    assert!(!a.is_empty());
    let new = apply_schema(&spec(), &a);
    assert!(jsonschema::validator_for(&new.parameters).is_ok());
    let one = DriftConfig {
        operators: vec!["nested_object".into()],
        rate: 0.0,
        weights: Default::default(),
    };
    // REST: the filter parameters nested as `criteria` (the paging `limit` stays a top-level
    // member of the JSON body).
    assert_eq!(
        plan_tool(&spec(), Some("/v1/x"), &one, &mut Rng::new(1, &["x"])),
        vec![Change::NestedObject {
            group: "criteria".into(),
            members: vec!["data_source".into(), "key_name".into(), "distinct".into()],
        }]
    );
    // The operator mix: weight 1 applies an operator to every tool it can change, weight 0
    // never (unless it is the only applicable one: a tool gets at least one change).
    let mix = DriftConfig {
        operators: vec!["parameter_rename".into(), "type_drift".into()],
        rate: 0.5,
        weights: [("type_drift".to_string(), 1.0), ("parameter_rename".to_string(), 0.0)]
            .into_iter()
            .collect(),
    };
    for seed in 0..50 {
        let ops: Vec<&str> = plan_tool(&spec(), None, &mix, &mut Rng::new(seed, &["x"]))
            .iter()
            .map(Change::operator)
            .collect();
        assert!(
            ops.contains(&"type_drift") && !ops.contains(&"parameter_rename"),
            "{ops:?}"
        );
    }
}

#[test]
fn default_flip_moves_an_enum_default_to_the_next_choice() {
    let p = json!({"type": "string", "enum": ["asc", "desc"], "default": "asc"});
    assert_eq!(default_flip::flipped(&p), Some(json!("desc")));
    assert_eq!(
        default_flip::flipped(&json!({"type": "boolean", "default": true})),
        Some(json!(false))
    );
    assert_eq!(default_flip::flipped(&json!({"type": "integer", "default": 1})), None);
    assert_eq!(
        default_flip::flipped(&json!({"type": "string", "enum": ["a"], "default": "a"})),
        None
    );
}

#[test]
fn rest_nesting_is_verb_evolution_with_a_json_body() {
    let ep = ToolSpec {
        name: "get_x".into(),
        description: "Rows (GET /v1/s/db/t/x)".into(),
        parameters: json!({"type": "object", "properties": {
            "name": {"type": "string"},
            "limit": {"type": "integer", "default": 1},
            "sort_order": {"type": "string", "enum": ["asc", "desc"], "default": "asc"},
        }, "required": ["name"]}),
        output_parameters: json!({}),
    };
    let changes = vec![
        Change::DefaultFlip {
            parameter: "sort_order".into(),
            old: json!("asc"),
            new: json!("desc"),
        },
        Change::NestedObject {
            group: "criteria".into(),
            members: vec!["name".into()],
        },
    ];
    let new = apply_schema(&ep, &changes);
    assert_eq!(new.description, "Rows (POST /v1/s/db/t/x)");
    assert_eq!(new.parameters["required"], json!(["criteria"]));
    assert_eq!(new.parameters["properties"]["sort_order"]["default"], "desc");
    let d = ToolDrift {
        db_id: Some("db".into()),
        path_old: Some("/v1/s/db/t/x".into()),
        path_new: Some("/v1/s/db/t/x".into()),
        method: Some("POST".into()),
        old: ep,
        new,
        changes,
    };
    let args = |v: Value| v.as_object().unwrap().clone();
    // The old flat shape is refused naming the fields; the nested one un-migrates, an omitted
    // flipped default taking its A_new value.
    let err = Drift::check_json(&d, &args(json!({"name": "a"}))).unwrap_err();
    assert!(
        err.iter()
            .any(|e| e["type"] == "extra_forbidden" && e["loc"] == json!(["body", "name"])),
        "{err:?}"
    );
    assert!(
        err.iter()
            .any(|e| e["type"] == "missing" && e["loc"] == json!(["body", "criteria"])),
        "{err:?}"
    );
    let old = Drift::check_json(&d, &args(json!({"criteria": {"name": "a"}, "limit": 3}))).unwrap();
    assert_eq!(old, args(json!({"name": "a", "limit": 3, "sort_order": "desc"})));
}

/// Issue 29: `endpoint_evolution` appended `_v2` to names already at 64 characters (458 of
/// 10,921 rest-spider-variants trajectories, 464 / 864 drift rows' `tools_new`), over OpenAI's
/// function-name limit. The versioned name stays within 64, drops whole words only, keeps the
/// last word (the one that tells sibling endpoints apart) and is numbered on a collision.
#[test]
fn versioned_names_fit_sixty_four_characters_whole_words_and_stay_unique() {
    use super::endpoint_evolution::versioned;
    assert_eq!(versioned("filter_data", 0), "filter_data_v2");
    let long = "get_flights_flightno_and_airline_by_destairport_sorted_by_flightno_via_sourceairport";
    let v = versioned(long, 0);
    assert!(
        v.len() <= 64 && v.ends_with("_sourceairport_v2") && v.starts_with("get_flights_"),
        "{v}"
    );
    let words: Vec<&str> = long.split('_').collect();
    assert!(
        v.trim_end_matches("_v2").split('_').all(|w| words.contains(&w)),
        "a word was cut: {v}"
    );
    let exactly_64 = format!("get_{}", "a_".repeat(30));
    let exactly_64 = &exactly_64[..64];
    assert!(versioned(exactly_64, 0).len() <= 64);
    assert!(versioned(long, 3).ends_with("_3_v2") && versioned(long, 3).len() <= 64);

    // Two endpoints whose versioned names would collide get distinct names.
    let spec = |name: &str| ToolSpec {
        name: name.into(),
        description: String::new(),
        parameters: json!({"type": "object", "properties": {}}),
        output_parameters: json!({}),
    };
    let a = "get_flights_flightno_and_airline_by_destairport_sorted_by_flightno_x_sourceairport";
    let b = "get_flights_flightno_and_airline_by_destairport_sorted_by_flightno_y_sourceairport";
    assert_eq!(versioned(a, 0), versioned(b, 0), "the fixture must collide");
    let mut drift = Drift {
        format: "slot".into(),
        seed: 0,
        scope: Scope::Instance,
        tools: [a, b]
            .iter()
            .map(|n| ToolDrift::of_tool(&spec(n), super::endpoint_evolution::propose(&spec(n), None)))
            .collect(),
    };
    drift.unique_new_names([a, b].into_iter());
    let new: Vec<&str> = drift.tools.iter().map(|t| t.new.name.as_str()).collect();
    assert_ne!(new[0], new[1]);
    for t in &drift.tools {
        assert!(t.new.name.len() <= 64, "{}", t.new.name);
        let Change::EndpointEvolution { name_new, .. } = &t.changes[0] else {
            panic!()
        };
        assert_eq!(name_new, &t.new.name, "change log and A_new agree");
    }
}
