//! Schema drift on the live server (issue 16 item 1): old-style calls refused, migrated golds
//! accepted and reproducing the gold answer, A_new-valid calls accepted, REST verb evolution
//! (GET → POST with a nested JSON body) and flipped defaults enforced.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use serde_json::{Value, json};
use toolforge::dataset::{Build, Example};
use toolforge::serve::{ServeConfig, Toolkit, spawn};
use toolforge::variants::drift::{Change, Drift, Scope, ToolDrift, fastapi_errors};
use toolforge::variants::is_variant;
use toolforge::verify::answers_match;

use crate::support::{
    agent, all_drifted_tools, call_endpoint, drift_for, drift_of, get, meta, post, required_names, spider_dbs,
};

/// SLOT/SEL live server: replays drift rows; the old form of a loud call whose tool keeps its
/// name gets 422 naming a field, the migrated one 200; renamed-away tools are 404.
pub fn check_live_tools(build: &Build, dir: &Path, max_rows: usize) {
    let toolkit = Toolkit::load(dir, Some(&spider_dbs())).unwrap();
    assert!(toolkit.drift.is_some() && !toolkit.instances.is_empty());
    let addr = spawn(toolkit, ServeConfig::default()).unwrap();
    let base = format!("http://{addr}");
    let agent = agent();
    let (examples, parents) = crate::support::examples_and_parents(build);
    let (mut rejected, mut not_found, mut rows, mut a_old_sessions) = (0, 0, 0, 0);
    for v in examples
        .iter()
        .filter(|e| is_variant(e) && meta(e, "variant_kind") == "drift")
        .take(max_rows)
    {
        let parent = parents[meta(v, "variant_of").as_str().unwrap()];
        // Per-instance drift: the session of the drift row enforces its A_new; the parent's
        // session runs A_old (its gold calls accepted as they are).
        let (s, body) = post(&agent, &format!("{base}/sessions"), &json!({"id": v.id}));
        assert_eq!(s, 200, "{body}");
        let sid = body["session_id"].as_str().unwrap().to_string();
        if a_old_sessions < 20 {
            let (s, body) = post(&agent, &format!("{base}/sessions"), &json!({"id": parent.id}));
            assert_eq!(s, 200, "{body}");
            let psid = body["session_id"].as_str().unwrap().to_string();
            for c in &parent.output {
                let (s, body) = post(
                    &agent,
                    &format!("{base}/tools/{}", c.name),
                    &json!({"session_id": psid, "arguments": c.arguments, "label": c.label}),
                );
                assert_eq!(
                    s, 200,
                    "{}: A_old gold refused in the parent's session: {body}",
                    parent.id
                );
            }
            a_old_sessions += 1;
        }
        let loud: Vec<u64> = meta(v, "variant")["loud_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        for (i, c) in v.output.iter().enumerate() {
            let old = &parent.output[i];
            if loud.contains(&(i as u64)) {
                let (s, body) = post(
                    &agent,
                    &format!("{base}/tools/{}", old.name),
                    &json!({"session_id": sid, "arguments": old.arguments, "label": old.label}),
                );
                if old.name == c.name {
                    assert_eq!(s, 422, "{}: old call {} accepted: {body}", v.id, old.name);
                    let d = &body["detail"][0];
                    assert_eq!(d["loc"][0], "body");
                    assert!(d["loc"][1].as_str().is_some_and(|f| !f.is_empty()), "{body}");
                    assert!(d["type"].is_string() && d["msg"].is_string());
                    rejected += 1;
                } else {
                    assert_eq!(s, 404, "{}: {body}", v.id);
                    not_found += 1;
                }
            }
            let (s, body) = post(
                &agent,
                &format!("{base}/tools/{}", c.name),
                &json!({"session_id": sid, "arguments": c.arguments, "label": c.label}),
            );
            assert_eq!(s, 200, "{}: migrated {} rejected: {body}", v.id, c.name);
        }
        rows += 1;
    }
    eprintln!(
        "{}: live drift rows {rows}; old calls 422 {rejected}, 404 {not_found}; parent sessions running A_old {a_old_sessions}",
        build.recipe.name
    );
    assert!(rejected > 0 && rows > 0);
}

/// The A_old-required inputs of a drifted tool that A_new leaves optional without a default
/// (A_new names): A_new accepts calls without them that the A_old executor cannot run.
fn optional_without_default(t: &ToolDrift) -> Vec<String> {
    let new = &t.new.parameters;
    let top_req = required_names(new);
    let mut out = Vec::new();
    for o in required_names(&t.old.parameters) {
        let n = t.new_parameter_name(&o);
        let (prop, req) = match new["properties"].get(&n) {
            Some(p) => (p.clone(), top_req.contains(&n)),
            None => {
                // Moved into a `nested_object` group.
                let Some((g, gs)) = new["properties"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .find(|(_, gs)| gs["properties"].get(&n).is_some())
                else {
                    out.push(n);
                    continue;
                };
                (
                    gs["properties"][&n].clone(),
                    top_req.contains(g) && required_names(gs).contains(&n),
                )
            }
        };
        if !req && prop.get("default").is_none() {
            out.push(n);
        }
    }
    out
}

/// The A_new-optional arguments of `args` (top level, and one level into nested groups): the
/// arguments left out one at a time, as (description, arguments).
fn omissions(schema: &Value, args: &serde_json::Map<String, Value>) -> Vec<(String, serde_json::Map<String, Value>)> {
    let req = required_names(schema);
    let mut out = Vec::new();
    for (k, v) in args {
        if !req.contains(k) {
            let mut a = args.clone();
            a.remove(k);
            out.push((k.clone(), a));
        }
        if let (Some(inner), Some(gs)) = (v.as_object(), schema["properties"].get(k)) {
            let inner_req = required_names(gs);
            for ik in inner.keys().filter(|ik| !inner_req.contains(ik)) {
                let mut a = args.clone();
                a[k].as_object_mut().unwrap().remove(ik);
                out.push((format!("{k}.{ik}"), a));
            }
        }
    }
    out
}

/// Issue 16 item 1, over every drift row of a build on the live server (`serve` on 127.0.0.1):
/// 0 drifted tools whose A_new leaves optional, without a default, an input A_old requires;
/// every migrated gold call validates against A_new and runs (200) at its A_new name / path,
/// the last call giving the gold answer (REST: every row; SLOT/SEL: rows whose answer is the
/// last call's one column); every A_new-valid call made by leaving out one A_new-optional
/// argument is accepted by the server's A_new check (no validation 422). Returns (drifted tools,
/// answers compared, omissions accepted).
pub fn check_drift_keeps_functionality(build: &Build, dir: &Path) -> (usize, usize, usize) {
    let drift = drift_of(build);
    let tools = all_drifted_tools(build);
    let violations: Vec<(Option<String>, String, Vec<String>)> = tools
        .iter()
        .map(|t| (t.db_id.clone(), t.old.name.clone(), optional_without_default(t)))
        .filter(|(_, _, v)| !v.is_empty())
        .collect();
    assert!(
        violations.is_empty(),
        "{}: {} drifted tools leave a needed input optional without a default: {:?}",
        build.recipe.name,
        violations.len(),
        &violations[..violations.len().min(5)]
    );
    let rest = build.recipe.format == "rest";
    let addr = spawn(Toolkit::load(dir, Some(&spider_dbs())).unwrap(), ServeConfig::default()).unwrap();
    let base = format!("http://{addr}");
    let agent = agent();
    let is_validation_422 = |s: u16, body: &Value| s == 422 && body["detail"].is_array();
    let (mut answers, mut omitted) = (0, 0);
    for v in build
        .groups
        .values()
        .flat_map(|o| &o.examples)
        .filter(|e| is_variant(e) && meta(e, "variant_kind") == "drift")
    {
        let db = v.db_id.as_deref();
        let gold = v.gold_answer.as_ref().unwrap();
        let drift = drift_for(&drift, v);
        if rest {
            let c = &v.output[0];
            let d = drift.by_new_name(db, &c.name).unwrap();
            assert!(
                fastapi_errors(&d.new.parameters, &c.arguments, "query").is_empty(),
                "{}",
                v.id
            );
            let (s, body) = call_endpoint(&agent, &base, d, &c.arguments);
            assert_eq!(s, 200, "{}: {body}", v.id);
            let got: toolforge::verify::Answer = serde_json::from_value(body).unwrap();
            assert!(answers_match(gold, &got, v.ordered), "{}", v.id);
            answers += 1;
            for (what, args) in omissions(&d.new.parameters, &c.arguments) {
                let (s, body) = call_endpoint(&agent, &base, d, &args);
                assert_eq!(s, 200, "{}: A_new-valid call without {what} refused: {body}", v.id);
                omitted += 1;
            }
            continue;
        }
        let (s, body) = post(&agent, &format!("{base}/sessions"), &json!({"id": v.id}));
        assert_eq!(s, 200, "{body}");
        let sid = body["session_id"].as_str().unwrap().to_string();
        let mut last = Value::Null;
        for (i, c) in v.output.iter().enumerate() {
            if let Some(d) = drift.by_new_name(db, &c.name) {
                for (k, (what, args)) in omissions(&d.new.parameters, &c.arguments).into_iter().enumerate() {
                    assert!(fastapi_errors(&d.new.parameters, &args, "body").is_empty());
                    let (s, body) = post(
                        &agent,
                        &format!("{base}/tools/{}", c.name),
                        &json!({"session_id": sid, "arguments": args, "label": format!("probe_{i}_{k}")}),
                    );
                    assert!(
                        !is_validation_422(s, &body),
                        "{}: A_new-valid {} without {what} refused: {body}",
                        v.id,
                        c.name
                    );
                    omitted += 1;
                }
            }
            let (s, body) = post(
                &agent,
                &format!("{base}/tools/{}", c.name),
                &json!({"session_id": sid, "arguments": c.arguments, "label": c.label}),
            );
            assert_eq!(s, 200, "{}: migrated {} refused: {body}", v.id, c.name);
            last = body["output"].clone();
        }
        let Some(final_call) = v.output.last() else { continue };
        let referenced = v.output.iter().any(|c| {
            c.arguments
                .values()
                .any(|a| a.as_str() == Some(&format!("${}$", final_call.label)))
        });
        if referenced || gold.first().is_none_or(|r| r.len() != 1) {
            continue;
        }
        // A one-column answer: a list of values or one value (a table output is not compared).
        let items = match last {
            Value::Array(items) => items,
            scalar => vec![scalar],
        };
        let Some(got) = items
            .into_iter()
            .map(|x| serde_json::from_value(x).ok().map(|d| vec![d]))
            .collect::<Option<toolforge::verify::Answer>>()
        else {
            continue;
        };
        let ties = toolforge::verify::ties_from_meta(v.meta.as_ref());
        assert!(
            toolforge::verify::answers_match_ties(gold, &got, v.ordered, ties.as_deref()),
            "{}: migrated gold over HTTP does not give the gold answer",
            v.id
        );
        answers += 1;
    }
    eprintln!(
        "{}: drifted tools {}, needed inputs optional without default 0; migrated golds compared with the gold answer over HTTP {answers}; A_new-valid omissions accepted {omitted}",
        build.recipe.name,
        tools.len()
    );
    assert!(answers > 0);
    (tools.len(), answers, omitted)
}

/// Issue 16 regression: in rest-spider-variants `tonnage` of battle_death's "killed and injured
/// by tonnage" endpoint (path `/v1/spider/battle_death/death/killed_and_injured_by_tonnage` when
/// the issue was filed) was optional in A_new, yet `serve` answered 422 "Field required" without
/// it. The server's answer without it must agree with A_new: 422 `missing` exactly when A_new
/// requires it, else 200.
pub fn tonnage_is_enforced_as_a_new_states(drift: &Drift, addr: &str) {
    let d = drift
        .tools
        .iter()
        .find(|t| {
            t.db_id.as_deref() == Some("battle_death")
                && t.path_old.as_deref().is_some_and(|p| p.contains("killed_and_injured"))
                && t.old.parameters["properties"].get("tonnage").is_some()
        })
        .expect("battle_death killed-and-injured-by-tonnage endpoint drifted");
    let name = d.new_parameter_name("tonnage");
    let base = format!("http://{addr}");
    // Where A_new has it: top level, or inside a nested group (verb evolution to POST).
    let props = d.new.parameters["properties"].as_object().unwrap();
    let group = props
        .iter()
        .find(|(_, g)| g["properties"].get(&name).is_some())
        .map(|(g, _)| g.clone());
    let (schema, a_new_requires, first) = match &group {
        None => (
            props[&name].clone(),
            required_names(&d.new.parameters).contains(&name),
            name.clone(),
        ),
        Some(g) => (
            props[g]["properties"][&name].clone(),
            required_names(&d.new.parameters).contains(g) && required_names(&props[g]).contains(&name),
            g.clone(),
        ),
    };
    let (s, body) = call_endpoint(&agent(), &base, d, &serde_json::Map::new());
    eprintln!(
        "tonnage regression: {} {} A_new requires {name}: {a_new_requires}; without it: {s}",
        d.method.as_deref().unwrap_or("GET"),
        d.path_new.as_ref().unwrap()
    );
    let loc0 = if d.is_post() { "body" } else { "query" };
    if a_new_requires {
        assert_eq!(s, 422, "{body}");
        assert_eq!(body["detail"][0]["loc"], json!([loc0, first]), "{body}");
    } else {
        assert_eq!(s, 200, "A_new leaves {name} optional but serve refuses: {body}");
    }
    let value = match schema["type"].as_str() {
        Some("integer") | Some("number") => json!(8),
        _ => json!("8"),
    };
    let mut args = serde_json::Map::new();
    match &group {
        None => {
            args.insert(name, value);
        }
        Some(g) => {
            args.insert(g.clone(), json!({ name: value }));
        }
    }
    let (s, body) = call_endpoint(&agent(), &base, d, &args);
    assert_eq!(s, 200, "{body}");
}
/// REST live: every drift row's migrated call at its A_new path and method gives the gold
/// answer; the old-style call (a required parameter under its A_old name) is a 422 `missing`
/// naming the A_new field; the A_old path is 404 when the path was versioned.
pub fn check_rest_live(build: &Build, base: &str) {
    let drift = drift_of(build);
    let agent = agent();
    let (mut ok, mut rejected) = (0, 0);
    for v in build
        .groups
        .values()
        .flat_map(|o| &o.examples)
        .filter(|e| is_variant(e) && meta(e, "variant_kind") == "drift")
    {
        let c = &v.output[0];
        let d = drift.by_new_name(v.db_id.as_deref(), &c.name).unwrap();
        let (s, body) = call_endpoint(&agent, base, d, &c.arguments);
        assert_eq!(s, 200, "{}: {body}", v.id);
        let got: toolforge::verify::Answer = serde_json::from_value(body).unwrap();
        assert!(
            answers_match(v.gold_answer.as_ref().unwrap(), &got, v.ordered),
            "{}",
            v.id
        );
        ok += 1;
        let renames: Vec<(&String, &String)> = d
            .changes
            .iter()
            .filter_map(|ch| match ch {
                Change::ParameterRename { from, to } => Some((from, to)),
                _ => None,
            })
            .collect();
        // Only a required top-level parameter is "missing" under its old name: an optional one
        // (a REST `limit` / `sort_order` with a default) is read as omitted, as FastAPI does.
        let required = |name: &str| required_names(&d.new.parameters).iter().any(|r| r == name);
        if let Some((from, to)) = renames
            .iter()
            .find(|(_, to)| c.arguments.contains_key(to.as_str()) && required(to))
        {
            let mut old = c.arguments.clone();
            let val = old.remove(to.as_str()).unwrap();
            old.insert(from.to_string(), val);
            let (s, body) = call_endpoint(&agent, base, d, &old);
            assert_eq!(s, 422, "{}: {body}", v.id);
            let loc0 = if d.is_post() { "body" } else { "query" };
            assert!(
                body["detail"]
                    .as_array()
                    .unwrap()
                    .contains(&json!({"type": "missing", "loc": [loc0, to], "msg": "Field required", "input": null})),
                "{body}"
            );
            rejected += 1;
        }
        if d.path_new != d.path_old {
            let (s, _) = get(&agent, &format!("{base}{}", d.path_old.as_ref().unwrap()), &c.arguments);
            assert_eq!(s, 404);
        }
    }
    eprintln!("rest-spider-variants: live drift rows ok {ok}, old-style rejected {rejected}");
    assert!(ok > 0 && rejected > 0);
}

/// Issue 16 item 2, REST: verb evolution and flipped defaults on the live server.
/// - Every endpoint with a `nested_object` change is `POST` in A_new: the A_new OpenAPI document
///   (`tools/openapi_new.json`, served at `/openapi.json`) has a `requestBody` whose schema has
///   the nested object; the old shape is refused — `GET` with the A_old query 405, a flat JSON
///   body 422 naming the fields (`extra_forbidden` for a moved member, `missing` for the group
///   when required); the migrated nested body is accepted (checked per row in
///   [`check_rest_live`]).
/// - Every `default_flip` is stated as the A_new default (query parameter or body property), and
///   the server binds it: the A_new call without the parameter answers as the call passing the
///   new default explicitly.
pub fn check_verb_evolution(build: &Build, dir: &Path, base: &str) {
    let drift = drift_of(build);
    let agent = agent();
    let served: Value = agent
        .get(&format!("{base}/openapi.json"))
        .call()
        .unwrap()
        .body_mut()
        .read_json()
        .unwrap();
    let file: Value = serde_json::from_slice(&std::fs::read(dir.join("tools/openapi_new.json")).unwrap()).unwrap();
    assert_eq!(served, file, "/openapi.json under drift is the A_new document");
    let rows: HashMap<(Option<String>, String), &Example> = build
        .groups
        .values()
        .flat_map(|o| &o.examples)
        .filter(|e| is_variant(e) && meta(e, "variant_kind") == "drift")
        .map(|e| ((e.db_id.clone(), e.output[0].name.clone()), e))
        .collect();
    let (mut posts, mut flips, mut flips_live) = (0, 0, 0);
    for d in &drift.tools {
        let path = d.path_new.as_ref().unwrap();
        let nested = d.changes.iter().find_map(|c| match c {
            Change::NestedObject { group, members } => Some((group.clone(), members.clone())),
            _ => None,
        });
        assert_eq!(d.is_post(), nested.is_some(), "{path}");
        let item = &file["paths"][path];
        let row = rows.get(&(d.db_id.clone(), d.new.name.clone()));
        if let Some((group, members)) = &nested {
            posts += 1;
            assert!(item.get("get").is_none(), "{path}: {item}");
            let schema = &item["post"]["requestBody"]["content"]["application/json"]["schema"];
            assert_eq!(schema["properties"][group]["type"], "object", "{path}: {item}");
            assert_eq!(item["post"]["operationId"], json!(d.new.name));
            if let Some(v) = row {
                // The old shape: the A_old query on GET, the members flat in a JSON body.
                let parent_args = &v.output[0].arguments;
                let (s, body) = get(&agent, &format!("{base}{path}"), parent_args);
                assert_eq!(
                    (s, body["detail"].as_str()),
                    (405, Some("Method Not Allowed")),
                    "{path}"
                );
                let mut flat = parent_args.clone();
                if let Some(Value::Object(inner)) = flat.remove(group) {
                    flat.extend(inner);
                }
                let present: Vec<&String> = members.iter().filter(|m| flat.contains_key(m.as_str())).collect();
                if !present.is_empty() {
                    let (s, body) = post(&agent, &format!("{base}{path}"), &Value::Object(flat.clone()));
                    assert_eq!(s, 422, "{path}: flat body accepted: {body}");
                    let detail = body["detail"].as_array().unwrap();
                    for m in present {
                        assert!(
                            detail.contains(&json!({"type": "extra_forbidden", "loc": ["body", m], "msg": "Extra inputs are not permitted", "input": flat[m.as_str()]})),
                            "{path}: {body}"
                        );
                    }
                }
            }
        } else {
            assert!(item.get("get").is_some(), "{path}: {item}");
        }
        for c in &d.changes {
            let Change::DefaultFlip { parameter, new, .. } = c else {
                continue;
            };
            flips += 1;
            let name = d.new_parameter_name(parameter);
            let stated = d.new.parameters["properties"]
                .get(&name)
                .or_else(|| {
                    d.new.parameters["properties"]
                        .as_object()
                        .unwrap()
                        .values()
                        .find_map(|g| g["properties"].get(&name))
                })
                .unwrap();
            assert_eq!(&stated["default"], new, "{path}: A_new states the new default");
            let Some(v) = row else { continue };
            let args = &v.output[0].arguments;
            let top = args.contains_key(&name);
            if !top {
                continue;
            }
            // Omitted: the server binds the new default, as the explicit call does.
            let mut without = args.clone();
            without.remove(&name);
            let mut explicit = without.clone();
            explicit.insert(name.clone(), new.clone());
            let a = call_endpoint(&agent, base, d, &without);
            let b = call_endpoint(&agent, base, d, &explicit);
            assert_eq!(a.0, 200, "{path}: {}", a.1);
            assert_eq!(a, b, "{path}: omitted {name} does not bind the A_new default");
            flips_live += 1;
        }
    }
    eprintln!(
        "rest-spider-variants: POST endpoints (verb evolution) {posts}, default flips {flips} (checked live {flips_live})"
    );
    assert!(posts > 0 && flips > 0 && flips_live > 0);
}

/// Issue 16 item 2, SLOT/SEL: drift is drawn per instance — the same tool gets different A_new
/// in different rows (distinct change logs per tool name), and each row's A_new is a function
/// of its own id (its stream), with the configured operators only. Returns (drift rows, tools
/// with more than one A_new).
pub fn check_per_instance(build: &Build) -> (usize, usize) {
    let drift = drift_of(build);
    assert_eq!(drift.scope, Scope::Instance);
    assert!(
        drift.tools.is_empty(),
        "per-instance drift keeps no dataset-level A_new"
    );
    let mut logs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut rows = 0;
    for v in build
        .groups
        .values()
        .flat_map(|o| &o.examples)
        .filter(|e| is_variant(e) && meta(e, "variant_kind") == "drift")
    {
        rows += 1;
        for t in drift_for(&drift, v).tools.iter() {
            logs.entry(t.old.name.clone())
                .or_default()
                .insert(serde_json::to_string(&t.changes).unwrap());
        }
    }
    let varied = logs.values().filter(|l| l.len() > 1).count();
    eprintln!(
        "{}: per-instance drift rows {rows}; distinct A_new per tool {:?}",
        build.recipe.name,
        logs.iter()
            .map(|(k, v)| (k.as_str(), v.len()))
            .collect::<BTreeMap<_, _>>()
    );
    assert!(rows > 0 && varied > 0);
    (rows, varied)
}
