//! Shared by the variants tests: building a recipe twice (byte-identical outputs), executing
//! call sequences (SLOT/SEL through the executor, REST through the endpoint), HTTP helpers
//! for the live server.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use toolforge::dataset::{Build, Example};
use toolforge::pipeline::{build_and_emit, compile};
use toolforge::tools::executor::Executor;
use toolforge::tools::rest::{Endpoint, Limits};
use toolforge::tools::{Call, ToolSpec};
use toolforge::variants::drift::{Drift, Scope, ToolDrift};
use toolforge::verify::answers_match;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn spider_dbs() -> PathBuf {
    root().join("../shared/corpora/spider/database")
}

/// Builds `recipe` twice (same store, two output roots), checks the outputs are byte-identical,
/// and returns the in-memory build and the output directory.
pub fn build(recipe: &str, tmp: &Path) -> (Build, PathBuf) {
    let path = root().join("recipes").join(format!("{recipe}.toml"));
    let store = tmp.join("store");
    build_and_emit(&path, Some(&tmp.join("out1")), Some(&store), false).unwrap();
    build_and_emit(&path, Some(&tmp.join("out2")), Some(&store), false).unwrap();
    let (a, b) = (tmp.join("out1").join(recipe), tmp.join("out2").join(recipe));
    let files = crate::tree::files(&a);
    assert!(files.keys().any(|f| f.ends_with("tools/drift.json")));
    crate::tree::assert_same_files(&files, &crate::tree::files(&b), "two builds");
    let build = compile(&path, Some(&store), false).unwrap();
    eprintln!(
        "{recipe}: {}",
        serde_json::to_string_pretty(&build.stats["variants"]).unwrap()
    );
    (build, a)
}

pub fn meta<'e>(e: &'e Example, key: &str) -> &'e Value {
    &e.meta.as_ref().unwrap()[key]
}

pub fn drift_of(build: &Build) -> Drift {
    serde_json::from_slice(&build.extra_files["tools/drift.json"]).unwrap()
}

/// Executes a call sequence (SLOT/SEL through the executor, REST through the endpoint) and
/// compares with `gold`.
pub struct Runner {
    format: String,
    executor: Executor,
    endpoints: HashMap<(String, String), Endpoint>,
    conns: HashMap<String, rusqlite::Connection>,
}

impl Runner {
    pub fn new(build: &Build) -> Runner {
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

    pub fn reproduces(&mut self, e: &Example, calls: &[Call]) -> bool {
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
    pub fn distractor_answers(&mut self, parent: &Example, db: &str, name: &str, tools: &[ToolSpec]) -> bool {
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
        if self.format == "slot" {
            // SLOT: the gold in SEL form, the distractor getter in place of each gold getter.
            let sel = toolforge::tools::sel::bind(&parent.output);
            return (0..sel.len()).filter(|&i| sel[i].name.starts_with("get_")).any(|i| {
                let mut calls = sel.clone();
                calls[i].name = name.to_string();
                self.reproduces(parent, &calls)
            });
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

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

pub fn post(agent: &ureq::Agent, url: &str, body: &Value) -> (u16, Value) {
    let mut resp = agent.post(url).send_json(body).unwrap();
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_json().unwrap_or(Value::Null))
}

pub fn get(agent: &ureq::Agent, url: &str, args: &serde_json::Map<String, Value>) -> (u16, Value) {
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

pub fn required_names(schema: &Value) -> Vec<String> {
    schema["required"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// One A_new call to a drifted REST endpoint on the live server at `base`: `POST` with the
/// arguments as a JSON body after verb evolution, else `GET` with them as query parameters.
pub fn call_endpoint(
    agent: &ureq::Agent,
    base: &str,
    d: &ToolDrift,
    args: &serde_json::Map<String, Value>,
) -> (u16, Value) {
    let url = format!("{base}{}", d.path_new.as_ref().unwrap());
    if d.is_post() {
        post(agent, &url, &Value::Object(args.clone()))
    } else {
        get(agent, &url, args)
    }
}

/// The drift a drift row's calls are checked against: its own A_new under per-instance drift
/// (SLOT/SEL), else the dataset's (`tools/drift.json`, REST).
pub fn drift_for<'d>(drift: &'d Drift, row: &Example) -> std::borrow::Cow<'d, Drift> {
    match drift.scope {
        Scope::Instance => std::borrow::Cow::Owned(
            Drift::of_instance(&drift.format, &row.tools, &meta(row, "variant")).expect("drift row with a change log"),
        ),
        Scope::Tool => std::borrow::Cow::Borrowed(drift),
    }
}

/// Every drifted tool of a build: the dataset's (per tool), or every drift row's (per instance).
pub fn all_drifted_tools(build: &Build) -> Vec<ToolDrift> {
    let drift = drift_of(build);
    if drift.scope == Scope::Tool {
        return drift.tools;
    }
    build
        .groups
        .values()
        .flat_map(|o| &o.examples)
        .filter(|e| toolforge::variants::is_variant(e) && meta(e, "variant_kind") == "drift")
        .flat_map(|e| drift_for(&drift, e).into_owned().tools)
        .collect()
}

/// Every example of `build`, and the originals (rows that are not variants) by id.
pub fn examples_and_parents(build: &Build) -> (Vec<&Example>, HashMap<&str, &Example>) {
    let examples: Vec<&Example> = build.groups.values().flat_map(|o| &o.examples).collect();
    let parents = examples
        .iter()
        .filter(|e| !toolforge::variants::is_variant(e))
        .map(|e| (e.id.as_str(), *e))
        .collect();
    (examples, parents)
}
