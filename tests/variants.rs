//! Variants (issue 5) on real data: every SLOT / SEL / REST instance of Spider dev.
//!
//! - drift: every migrated gold call validates against its A_new spec (jsonschema) and the
//!   un-migrated sequence executes to the parent's `gold_answer` (SLOT/SEL through
//!   `Executor::run`, REST through `Endpoint::execute` on a read-only connection); every old call
//!   a loud change touched is rejected under A_new;
//! - obfuscate / shortlist / distractors keep the gold executable and the only correct answer;
//! - perturb keeps every gold value (the check holds for every accepted row);
//! - the live server rejects old-style calls with a FastAPI 422 naming the field and accepts
//!   the migrated ones;
//! - two builds are byte-identical.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolforge::dataset::{Build, Example};
use toolforge::pipeline::build_and_emit;
use toolforge::pipeline::compile;
use toolforge::serve::{ServeConfig, Toolkit, spawn};
use toolforge::tools::executor::Executor;
use toolforge::tools::rest::{Endpoint, Limits};
use toolforge::tools::{Call, ToolSpec};
use toolforge::variants::distractors::{Features, signature_similarity};
use toolforge::variants::drift::{Change, Drift, ToolDrift, fastapi_errors, unmigrate};
use toolforge::variants::obfuscate::{deobfuscate, identifiers, surviving_identifiers};
use toolforge::variants::perturb::preserves_values;
use toolforge::variants::{gold_tool_names, gold_value_texts, is_variant};
use toolforge::verify::answers_match;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn spider_dbs() -> PathBuf {
    root().join("../shared/corpora/spider/database")
}

/// Builds `recipe` twice (same store, two output roots), checks the outputs are byte-identical,
/// and returns the in-memory build and the output directory.
fn build(recipe: &str, tmp: &Path) -> (Build, PathBuf) {
    let path = root().join("recipes").join(format!("{recipe}.toml"));
    let store = tmp.join("store");
    build_and_emit(&path, Some(&tmp.join("out1")), Some(&store), false).unwrap();
    build_and_emit(&path, Some(&tmp.join("out2")), Some(&store), false).unwrap();
    let (a, b) = (tmp.join("out1").join(recipe), tmp.join("out2").join(recipe));
    let mut files = Vec::new();
    let mut stack = vec![a.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p)
            } else {
                files.push(p.strip_prefix(&a).unwrap().to_path_buf())
            }
        }
    }
    assert!(files.iter().any(|f| f.ends_with("tools/drift.json")));
    for f in &files {
        assert!(
            std::fs::read(a.join(f)).unwrap() == std::fs::read(b.join(f)).unwrap(),
            "{} differs between builds",
            f.display()
        );
    }
    let build = compile(&path, Some(&store), false).unwrap();
    eprintln!(
        "{recipe}: {}",
        serde_json::to_string_pretty(&build.stats["variants"]).unwrap()
    );
    (build, a)
}

fn meta<'e>(e: &'e Example, key: &str) -> &'e Value {
    &e.meta.as_ref().unwrap()[key]
}

fn drift_of(build: &Build) -> Drift {
    serde_json::from_slice(&build.extra_files["tools/drift.json"]).unwrap()
}

/// Executes a call sequence (SLOT/SEL through the executor, REST through the endpoint) and
/// compares with `gold`.
struct Runner {
    format: String,
    executor: Executor,
    endpoints: HashMap<(String, String), Endpoint>,
    conns: HashMap<String, rusqlite::Connection>,
}

impl Runner {
    fn new(build: &Build) -> Runner {
        let endpoints = build
            .extra_files
            .get("tools/endpoints.json")
            .map(|b| serde_json::from_slice::<Vec<Endpoint>>(b).unwrap())
            .unwrap_or_default()
            .into_iter()
            .map(|e| ((e.db_id.clone(), e.name.clone()), e))
            .collect();
        Runner {
            format: build.recipe.format.clone(),
            executor: Executor::new(spider_dbs()),
            endpoints,
            conns: HashMap::new(),
        }
    }

    fn reproduces(&mut self, e: &Example, calls: &[Call]) -> bool {
        let gold = e.gold_answer.as_ref().unwrap();
        if self.format != "rest" {
            return self
                .executor
                .run_with_setup(
                    &toolforge::tools::setup_and_calls(e.initialization_step.as_ref(), &e.additional_setup_steps, &[])
                        .0,
                    calls,
                )
                .is_ok_and(|got| {
                    let ties = toolforge::verify::ties_from_meta(e.meta.as_ref());
                    toolforge::verify::answers_match_ties(gold, &got, e.ordered, ties.as_deref())
                });
        }
        let db = e.db_id.clone().unwrap();
        let ep = &self.endpoints[&(db.clone(), calls[0].name.clone())];
        let conn = self.conns.entry(db.clone()).or_insert_with(|| {
            toolforge::tools::table::open_read_only(&spider_dbs().join(&db).join(format!("{db}.sqlite"))).unwrap()
        });
        let values = ep.arguments_from_json(&calls[0].arguments).unwrap();
        let got = ep.execute(conn, &values, Limits::default()).unwrap();
        answers_match(gold, &got, ep.ordered)
    }
}

impl Runner {
    /// Whether the distractor `name` (of database `db`, spec in `tools`) gives `parent`'s gold
    /// answer when called with the gold arguments mapped onto it: REST, the gold call's
    /// arguments it has a parameter for; SEL, in place of a gold getter call with the same
    /// parameter names.
    fn distractor_answers(&mut self, parent: &Example, db: &str, name: &str, tools: &[ToolSpec]) -> bool {
        let gold = parent.gold_answer.as_ref().unwrap();
        if self.format == "rest" {
            let ep = self.endpoints[&(db.to_string(), name.to_string())].clone();
            let args: serde_json::Map<String, Value> = parent.output[0]
                .arguments
                .iter()
                .filter(|(k, _)| ep.parameters.iter().any(|p| &p.name == *k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let Ok(values) = ep.arguments_from_json(&args) else {
                return false;
            };
            let conn = self.conns.entry(db.to_string()).or_insert_with(|| {
                toolforge::tools::table::open_read_only(&spider_dbs().join(db).join(format!("{db}.sqlite"))).unwrap()
            });
            return ep
                .execute(conn, &values, Limits::default())
                .is_ok_and(|got| answers_match(gold, &got, ep.ordered));
        }
        let keys = |t: &ToolSpec| {
            t.parameters["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        };
        let spec = tools.iter().find(|t| t.name == name).unwrap();
        (0..parent.output.len()).any(|i| {
            let g = &parent.output[i];
            let same_keys = parent
                .tools
                .iter()
                .find(|t| t.name == g.name)
                .is_some_and(|t| keys(t) == keys(spec));
            if !same_keys || !g.name.starts_with("get_") {
                return false;
            }
            let mut calls = parent.output.clone();
            calls[i].name = name.to_string();
            self.reproduces(parent, &calls)
        })
    }
}

/// Every property of every variant row of a build; returns rows per kind.
fn check_variants(build: &Build) -> BTreeMap<String, usize> {
    let drift = drift_of(build);
    let rest = build.recipe.format == "rest";
    let examples: Vec<&Example> = build.groups.values().flat_map(|o| &o.examples).collect();
    let parents: HashMap<&str, &Example> = examples
        .iter()
        .filter(|e| !is_variant(e))
        .map(|e| (e.id.as_str(), *e))
        .collect();
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
                    match drift.by_new_name(db, &c.name) {
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
                }
                assert!(runner.reproduces(v, &v.output), "{}", v.id);
                // Issue 16: same database first; never an unrelated one; none answers.
                let same = detail["same_database_candidates"].as_bool().unwrap();
                for d in detail["distractors"].as_array().unwrap() {
                    let from_own = d["db_id"].as_str() == v.db_id.as_deref();
                    assert_eq!(from_own, same, "{}: {d}", v.id);
                    *kinds
                        .entry(
                            if from_own {
                                "distractors_same_db"
                            } else {
                                "distractors_related_db"
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
                let case = detail["perturbation"] == "case";
                let values = gold_value_texts(&v.output);
                assert!(
                    preserves_values(&parent.input, &v.input, &values, case).is_ok(),
                    "{}",
                    v.id
                );
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

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

fn post(agent: &ureq::Agent, url: &str, body: &Value) -> (u16, Value) {
    let mut resp = agent.post(url).send_json(body).unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_json().unwrap_or(Value::Null))
}

fn get(agent: &ureq::Agent, url: &str, args: &serde_json::Map<String, Value>) -> (u16, Value) {
    let mut req = agent.get(url);
    for (k, v) in args {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        req = req.query(k, &text);
    }
    let mut resp = req.call().unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_json().unwrap_or(Value::Null))
}

/// SLOT/SEL live server: replays drift rows; the old form of a loud call whose tool keeps its
/// name gets 422 naming a field, the migrated one 200; renamed-away tools are 404.
fn check_live_tools(build: &Build, dir: &Path, max_rows: usize) {
    let toolkit = Toolkit::load(dir, Some(&spider_dbs())).unwrap();
    assert!(toolkit.drift.is_some());
    let addr = spawn(toolkit, ServeConfig::default()).unwrap();
    let base = format!("http://{addr}");
    let agent = agent();
    let examples: Vec<&Example> = build.groups.values().flat_map(|o| &o.examples).collect();
    let parents: HashMap<&str, &Example> = examples
        .iter()
        .filter(|e| !is_variant(e))
        .map(|e| (e.id.as_str(), *e))
        .collect();
    let (mut rejected, mut not_found, mut rows) = (0, 0, 0);
    for v in examples
        .iter()
        .filter(|e| is_variant(e) && meta(e, "variant_kind") == "drift")
        .take(max_rows)
    {
        let parent = parents[meta(v, "variant_of").as_str().unwrap()];
        let (s, body) = post(&agent, &format!("{base}/sessions"), &json!({"id": parent.id}));
        assert_eq!(s, 200, "{body}");
        let sid = body["session_id"].as_str().unwrap().to_string();
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
        "{}: live drift rows {rows}; old calls 422 {rejected}, 404 {not_found}",
        build.recipe.name
    );
    assert!(rejected > 0 && rows > 0);
}

fn required_names(schema: &Value) -> Vec<String> {
    schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
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
fn check_drift_keeps_functionality(build: &Build, dir: &Path) -> (usize, usize, usize) {
    let drift = drift_of(build);
    let violations: Vec<(Option<String>, String, Vec<String>)> = drift
        .tools
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
        if rest {
            let c = &v.output[0];
            let d = drift.by_new_name(db, &c.name).unwrap();
            assert!(
                fastapi_errors(&d.new.parameters, &c.arguments, "query").is_empty(),
                "{}",
                v.id
            );
            let url = format!("{base}{}", d.path_new.as_ref().unwrap());
            let (s, body) = get(&agent, &url, &c.arguments);
            assert_eq!(s, 200, "{}: {body}", v.id);
            let got: toolforge::verify::Answer = serde_json::from_value(body).unwrap();
            assert!(answers_match(gold, &got, v.ordered), "{}", v.id);
            answers += 1;
            for (what, args) in omissions(&d.new.parameters, &c.arguments) {
                let (s, body) = get(&agent, &url, &args);
                assert_eq!(s, 200, "{}: A_new-valid call without {what} refused: {body}", v.id);
                omitted += 1;
            }
            continue;
        }
        let (s, body) = post(
            &agent,
            &format!("{base}/sessions"),
            &json!({"id": meta(v, "variant_of")}),
        );
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
        drift.tools.len()
    );
    assert!(answers > 0);
    (drift.tools.len(), answers, omitted)
}

#[test]
fn slot_spider_variants() {
    let tmp = tempfile::tempdir().unwrap();
    let (build, dir) = build("slot-spider-variants", tmp.path());
    let kinds = check_variants(&build);
    assert!(kinds["perturb"] > 0 && kinds["drift"] > 0 && kinds["shortlist"] > 0);
    assert!(!kinds.contains_key("distractors"));
    check_live_tools(&build, &dir, usize::MAX);
    check_drift_keeps_functionality(&build, &dir);
    // The report still counts compiled examples only.
    let report: Value = serde_json::from_slice(&std::fs::read(dir.join("report/verification.json")).unwrap()).unwrap();
    assert_eq!(
        report["attempted"].as_u64().unwrap(),
        report["kept"].as_u64().unwrap() + report["dropped"].as_u64().unwrap()
    );
}

#[test]
fn sel_spider_variants() {
    let tmp = tempfile::tempdir().unwrap();
    let (build, dir) = build("sel-spider-variants", tmp.path());
    let kinds = check_variants(&build);
    assert!(kinds["distractors"] > 0 && kinds["drift"] > 0);
    check_live_tools(&build, &dir, 200);
    check_drift_keeps_functionality(&build, &dir);
}

#[test]
fn rest_spider_variants() {
    let tmp = tempfile::tempdir().unwrap();
    let (build, dir) = build("rest-spider-variants", tmp.path());
    let kinds = check_variants(&build);
    assert!(kinds["distractors"] > 0 && kinds["drift"] > 0);
    let drift = drift_of(&build);
    assert!(
        drift
            .tools
            .iter()
            .all(|t| !t.changes.iter().any(|c| matches!(c, Change::NestedObject { .. })))
    );
    // Live: every drift row at its A_new path; old parameter names → 422 naming the field.
    let toolkit = Toolkit::load(&dir, Some(&spider_dbs())).unwrap();
    let addr = spawn(toolkit, ServeConfig::default()).unwrap();
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
        let path = d.path_new.as_ref().unwrap();
        let (s, body) = get(&agent, &format!("http://{addr}{path}"), &c.arguments);
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
        let parent_args = &v.output[0].arguments;
        // Only a required parameter is "missing" under its old name: an optional one (a REST
        // `limit` / `sort_order` with a default) is read as omitted, as FastAPI does.
        let required = |name: &str| {
            d.new.parameters["required"]
                .as_array()
                .is_some_and(|r| r.iter().any(|x| x == name))
        };
        if let Some((from, to)) = renames
            .iter()
            .find(|(_, to)| parent_args.contains_key(to.as_str()) && required(to))
        {
            // The old-style call: the parameter under its A_old name.
            let mut old = parent_args.clone();
            let val = old.remove(to.as_str()).unwrap();
            old.insert(from.to_string(), val);
            let (s, body) = get(&agent, &format!("http://{addr}{path}"), &old);
            assert_eq!(s, 422, "{}: {body}", v.id);
            assert!(
                body["detail"].as_array().unwrap().contains(
                    &json!({"type": "missing", "loc": ["query", to], "msg": "Field required", "input": null})
                ),
                "{body}"
            );
            rejected += 1;
        }
        if d.path_new != d.path_old {
            let (s, _) = get(
                &agent,
                &format!("http://{addr}{}", d.path_old.as_ref().unwrap()),
                &c.arguments,
            );
            assert_eq!(s, 404);
        }
    }
    eprintln!("rest-spider-variants: live drift rows ok {ok}, old-style rejected {rejected}");
    assert!(ok > 0 && rejected > 0);
    check_drift_keeps_functionality(&build, &dir);
    tonnage_is_enforced_as_a_new_states(&drift, &addr.to_string());
}

/// Issue 16 regression: in rest-spider-variants `tonnage` of battle_death's "killed and injured
/// by tonnage" endpoint (path `/v1/spider/battle_death/death/killed_and_injured_by_tonnage` when
/// the issue was filed) was optional in A_new, yet `serve` answered 422 "Field required" without
/// it. The server's answer without it must agree with A_new: 422 `missing` exactly when A_new
/// requires it, else 200.
fn tonnage_is_enforced_as_a_new_states(drift: &Drift, addr: &str) {
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
    let url = format!("http://{addr}{}", d.path_new.as_ref().unwrap());
    let (s, body) = get(&agent(), &url, &serde_json::Map::new());
    let a_new_requires = required_names(&d.new.parameters).contains(&name);
    eprintln!(
        "tonnage regression: {} A_new requires {name}: {a_new_requires}; GET without it: {s}",
        d.path_new.as_ref().unwrap()
    );
    if a_new_requires {
        assert_eq!(s, 422, "{body}");
        assert_eq!(body["detail"][0]["loc"], json!(["query", name]), "{body}");
    } else {
        assert_eq!(s, 200, "A_new leaves {name} optional but serve refuses: {body}");
    }
    let mut args = serde_json::Map::new();
    args.insert(name, json!("8"));
    let (s, body) = get(&agent(), &url, &args);
    assert_eq!(s, 200, "{body}");
}
