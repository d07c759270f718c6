//! The HTTP details of issue 18, each against the real server on 127.0.0.1 over a real build:
//! 413 for an oversized GET body, FastAPI's JSON 405, 422 `detail` lists for malformed JSON and
//! non-JSON bodies, pydantic v2's integer rules, `session_expired` answered on REST, no absolute
//! path in an error, and `..` in a database path rejected as traversal.

use std::path::PathBuf;

use serde_json::{Value, json};
use toolforge::serve::{ServeConfig, Toolkit, spawn};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn serve(recipe: &str, tmp: &std::path::Path) -> String {
    toolforge::pipeline::build_and_emit(
        &root().join(format!("recipes/{recipe}.toml")),
        Some(&tmp.join("out")),
        Some(&tmp.join("store")),
        false,
    )
    .unwrap();
    let dbs = root().join("../shared/corpora/spider/database");
    let addr = spawn(
        Toolkit::load(&tmp.join("out").join(recipe), Some(&dbs)).unwrap(),
        // Fault injection is opt-in (issue 31); the REST test asks for one.
        ServeConfig {
            faults: true,
            ..ServeConfig::default()
        },
    )
    .unwrap();
    format!("http://{addr}")
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

fn read(mut r: ureq::http::Response<ureq::Body>) -> (u16, Value) {
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[test]
fn slot_server_bodies_are_checked_like_fastapi() {
    let tmp = tempfile::tempdir().unwrap();
    let base = serve("slot-spider", tmp.path());
    let a = agent();
    let post = |body: &str, ct: &str| {
        read(
            a.post(format!("{base}/sessions"))
                .header("content-type", ct)
                .send(body)
                .unwrap(),
        )
    };
    let (s, b) = post("{\"id\": ", "application/json");
    assert_eq!((s, b["detail"][0]["type"].clone()), (422, json!("json_invalid")), "{b}");
    assert_eq!(b["detail"][0]["loc"][0], "body");
    let (s, b) = post("{\"id\": \"x\"}", "text/plain");
    assert_eq!(
        (s, b["detail"][0]["type"].clone()),
        (422, json!("model_attributes_type")),
        "{b}"
    );
    let (s, b) = post("[1]", "application/json");
    assert_eq!(
        (s, b["detail"][0]["type"].clone()),
        (422, json!("model_attributes_type")),
        "{b}"
    );
    let (s, b) = post("{}", "application/json");
    assert_eq!((s, b["detail"][0]["type"].clone()), (422, json!("missing")), "{b}");
    // `..` is rejected as traversal; other bad paths never show the server's absolute root.
    let traversal = r#"{"arguments": {"database_path": "../spider/database/world_1/world_1.sqlite", "condition_sequence": [], "alias_to_table_dict": {}}}"#;
    let (s, b) = post(traversal, "application/json");
    assert_eq!(s, 422);
    assert!(b["detail"].as_str().unwrap().contains("path traversal"), "{b}");
    let absent = r#"{"arguments": {"database_path": "nope/nope.sqlite", "condition_sequence": [], "alias_to_table_dict": {"t": "x"}}}"#;
    let (s, b) = post(absent, "application/json");
    assert_eq!(s, 422);
    let text = b["detail"].as_str().unwrap();
    assert!(
        text.contains("<databases>/nope/nope.sqlite")
            && !text.contains("/work/")
            && !text.contains(&*root().to_string_lossy()),
        "{b}"
    );
    // A tool call missing its fields: a detail list naming each.
    let (s, b) = read(
        a.post(format!("{base}/tools/filter_data"))
            .send_json(json!({"label": 5}))
            .unwrap(),
    );
    assert_eq!(s, 422);
    let locs: Vec<Value> = b["detail"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["loc"].clone())
        .collect();
    assert_eq!(
        locs,
        vec![
            json!(["body", "session_id"]),
            json!(["body", "arguments"]),
            json!(["body", "label"])
        ]
    );
    // The OpenAPI document describes the 404, 413 and 422 bodies.
    let (_, doc) = read(a.get(format!("{base}/openapi.json")).call().unwrap());
    let responses = &doc["paths"]["/sessions"]["post"]["responses"];
    for code in ["200", "404", "413", "422"] {
        assert!(responses.get(code).is_some(), "{code} undocumented: {responses}");
    }
}

#[test]
fn rest_server_limits_methods_integers_and_faults() {
    let tmp = tempfile::tempdir().unwrap();
    let base = serve("rest-spider", tmp.path());
    let a = agent();
    // 413 on a GET with a 100 KB body (every route).
    let (s, _) = read(
        a.get(format!("{base}/healthz"))
            .force_send_body()
            .send(vec![b'a'; 100_000])
            .unwrap(),
    );
    assert_eq!(s, 413);
    // 405 with FastAPI's JSON body and the Allow header.
    let r = agent().post(format!("{base}/healthz")).send_empty().unwrap();
    assert_eq!(r.headers().get("allow").and_then(|v| v.to_str().ok()), Some("GET,HEAD"));
    assert_eq!(read(r), (405, json!({"detail": "Method Not Allowed"})));
    // pydantic v2 integers: 1_000 and 1.0 are integers, 1e3 is not.
    let path = "/v1/spider/battle_death/battle/id_and_name_by_min_killed_per_id";
    let get = |v: &str| {
        read(
            agent()
                .get(format!("{base}{path}"))
                .query("min_killed", v)
                .call()
                .unwrap(),
        )
    };
    assert_eq!(get("1_000").0, 200);
    assert_eq!(get("1.0").0, 200);
    assert_eq!(get("99999999999999999999999").0, 200);
    let (s, b) = get("1e3");
    assert_eq!((s, b["detail"][0]["type"].clone()), (422, json!("int_parsing")));
    // An integer beyond i64 as a LIMIT (`limit` parameter of a literal-free endpoint) is bound
    // saturated, never as a float: SQLite answered "datatype mismatch" (500), found by
    // schemathesis once REST endpoints exposed `limit`.
    let limit_path = "/v1/spider/singer/singer/name_sorted_by_net_worth_millions_desc";
    // A negative one is below the parameter's `minimum: 0` (FastAPI's `Query(ge=0)`): 422.
    for (v, want) in [("217286164365862436864", 200), ("-3718906617312974384564011008", 422)] {
        let (s, b) = read(
            agent()
                .get(format!("{base}{limit_path}"))
                .query("limit", v)
                .call()
                .unwrap(),
        );
        assert_eq!(s, want, "limit={v}: {b}");
        if want == 422 {
            assert_eq!(b["detail"][0]["type"], "greater_than_equal", "{b}");
        }
    }
    // An injected session_expired answers REST with the fault (401), not a normal 200.
    let r = agent()
        .get(format!("{base}{path}"))
        .query("min_killed", "1")
        .header("x-toolforge-fault", "session_expired")
        .call()
        .unwrap();
    assert_eq!(
        r.headers()
            .get("x-toolforge-fault-injected")
            .and_then(|v| v.to_str().ok()),
        Some("session_expired")
    );
    assert_eq!(read(r).0, 401);
}
