//! `distractors` ([`DistractorPool`]; Robustness of Agentic Function Calling, toolkit
//! expansion with tools *semantically related, not functionally equivalent*): up to k tools that
//! are not in the instance's toolkit, the most related to its gold tools in the whole catalog.
//!
//! - **Where from**: the whole catalog of the dataset (REST: every endpoint of every database;
//!   SEL: the column getters of every instance, one per database and name; SLOT: SEL-style
//!   column getters `get_<key>s` of every instance's joined table, one per database and name —
//!   every SLOT instance already holds the whole SLOT catalog, so its distractors are getters it
//!   cannot use), minus the instance's toolkit (and, SLOT, the getters of its own columns).
//! - **Ranking**: the project's one relatedness, the BM25 ranking of [`crate::tools::index`]
//!   (issue 32 item 5: the ranking `search_tools` answers with), over the catalog's tool names
//!   (split into words), descriptions and parameters. The query is the indexed text
//!   ([`crate::tools::index::document`]) of the gold tools (REST: the gold endpoint;
//!   SEL/SLOT: the getters of the columns the gold calls read, by getter call or `key_name`), as index tokens, without the tokens found in the tools
//!   of more than a quarter of the databases: those name what every domain has (`sorted`,
//!   `count`, `per`, `desc`, `returns`), not the gold's topic — its tables and columns —, and
//!   summed over a long query they outweighed it (battle_death's `ship` endpoints drew
//!   `get_people_name_and_birth_date_sorted_by_name`). A gold tool made only of such tokens has
//!   no topic to relate to: no distractors row. A candidate's **relatedness** is its BM25 score over the
//!   score of the best-scoring gold tool itself (in the same index, so 1.0 ≈ as related as the
//!   gold tool is to itself); candidates below the recipe's `min_relatedness` (default
//!   [`crate::recipe::variants::DEFAULT_MIN_RELATEDNESS`]) are never drawn, so an instance with
//!   no related tool gets no distractors row (`distractors:no_candidate`) rather than unrelated
//!   ones. Ties: tool name, then database.
//! - **Filter**: a candidate whose [`signature_similarity`] to a gold tool reaches the recipe's
//!   `max_signature_similarity` (default 0.8, the paper's embedding threshold applied to this
//!   Jaccard) is dropped as near-identical; so is one that answers the question when called with
//!   the gold arguments mapped onto it (`DistractorPool::answers_question`, executed on the
//!   database), so the gold tools stay the only correct answer.
//!
//! Each drawn distractor is recorded in the row (`meta.variant.distractors[]`) with its `db_id`,
//! raw `bm25` score and `relatedness`.
//!
//! Preserves: the gold calls and answer; the parent's tools keep their relative order, the
//! distractors are inserted at seeded positions.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::{DistractorsConfig, Rng, variant_row};
use crate::dataset::{Build, Example};
use crate::tools::executor::Executor;
use crate::tools::index::ToolIndex;
use crate::tools::rest::{Endpoint, Limits};
use crate::tools::{Call, ToolSpec};

/// The signature features of a tool (for the near-identical filter).
#[derive(Debug, Clone)]
pub struct Features {
    name: BTreeSet<String>,
    signature: BTreeSet<String>,
}

impl Features {
    /// Name tokens (split on `_`, without a trailing `_<n>` de-duplication suffix or any
    /// all-digit token) and the signature `parameter:type` set.
    pub fn of(t: &ToolSpec) -> Features {
        let name = name_tokens(&t.name);
        let signature = t.parameters["properties"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| format!("{k}:{}", v["type"])).collect())
            .unwrap_or_default();
        Features { name, signature }
    }
}

/// The name tokens of a tool name: lower case, split on `_`, all-digit tokens (the `_2` of a
/// de-duplicated name) dropped.
pub fn name_tokens(name: &str) -> BTreeSet<String> {
    name.to_lowercase()
        .split('_')
        .filter(|s| !s.is_empty() && !s.chars().all(|c| c.is_ascii_digit()))
        .map(String::from)
        .collect()
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let inter = a.intersection(b).count() as f64;
    inter / ((a.len() + b.len()) as f64 - inter)
}

/// Signature similarity: Jaccard of (name tokens ∪ `parameter:type` set). 1.0 means the same
/// name and parameters, i.e. a functionally equivalent tool for a model.
pub fn signature_similarity(a: &Features, b: &Features) -> f64 {
    let x: BTreeSet<String> = a
        .name
        .iter()
        .map(|n| format!("n:{n}"))
        .chain(a.signature.iter().cloned())
        .collect();
    let y: BTreeSet<String> = b
        .name
        .iter()
        .map(|n| format!("n:{n}"))
        .chain(b.signature.iter().cloned())
        .collect();
    jaccard(&x, &y)
}

/// One candidate: its database, spec, features and (REST) endpoint.
struct Candidate {
    db: Option<String>,
    tool: ToolSpec,
    features: Features,
    endpoint: Option<Endpoint>,
}

/// The distractor candidates of a dataset (module docs).
pub struct DistractorPool {
    /// In catalog order; one per (database, name).
    candidates: Vec<Candidate>,
    /// The BM25 index over the candidates' tools, in candidate order.
    index: ToolIndex,
    /// (database, tool name) → candidate position.
    position: HashMap<(Option<String>, String), usize>,
    /// Index tokens found in the tools of more than a quarter of the databases (module docs):
    /// left out of the query.
    shared: HashSet<String>,
    /// The SQLite databases (`<root>/<db>/<db>.sqlite`).
    databases: PathBuf,
    /// SEL: the catalog tool names (not getters).
    catalog: BTreeSet<String>,
    /// Dataset format (`slot`, `sel`, `rest`).
    format: String,
}

/// Whether a SEL call name is a column getter (`get_<key>s`).
fn is_getter_name(name: &str) -> bool {
    name.starts_with("get_") && name.ends_with('s')
}

/// Why distractor candidates were dropped, counted over a build.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Signature similarity to a gold tool at or over the threshold.
    pub near_identical: usize,
    /// Executed with the gold arguments mapped, gives the gold answer.
    pub answering: usize,
}

impl DistractorPool {
    /// Collects the pool of `build` (REST: `tools/endpoints.json`; SEL: every instance's
    /// getters, one per database and name; SLOT: a getter per column of every instance's joined
    /// table, one per database and name) and indexes it.
    pub fn new(build: &Build) -> DistractorPool {
        let catalog: BTreeSet<String> = build.catalog.iter().map(|t| t.name.clone()).collect();
        let mut candidates = Vec::new();
        match build.recipe.format.as_str() {
            "rest" => {
                let endpoints: Vec<Endpoint> = build
                    .extra_files
                    .get("tools/endpoints.json")
                    .and_then(|b| serde_json::from_slice(b).ok())
                    .unwrap_or_default();
                for ep in endpoints {
                    let t = ep.tool_spec();
                    candidates.push(Candidate {
                        db: Some(ep.db_id.clone()),
                        features: Features::of(&t),
                        tool: t,
                        endpoint: Some(ep),
                    });
                }
            }
            "sel" => {
                let mut seen = BTreeSet::new();
                for e in build.groups.values().flat_map(|o| &o.examples) {
                    for t in &e.tools {
                        if !catalog.contains(&t.name) && seen.insert((e.db_id.clone(), t.name.clone())) {
                            candidates.push(Candidate {
                                db: e.db_id.clone(),
                                tool: t.clone(),
                                features: Features::of(t),
                                endpoint: None,
                            });
                        }
                    }
                }
            }
            "slot" => {
                let mut seen = BTreeSet::new();
                for e in build.groups.values().flat_map(|o| &o.examples) {
                    for k in &e.key_values_and_descriptions {
                        let t = crate::tools::sel::getter(&k.key_name, &k.description, &k.dtype);
                        if seen.insert((e.db_id.clone(), t.name.clone())) {
                            candidates.push(Candidate {
                                db: e.db_id.clone(),
                                features: Features::of(&t),
                                tool: t,
                                endpoint: None,
                            });
                        }
                    }
                }
            }
            _ => {}
        }
        DistractorPool::of_candidates(
            candidates,
            build.source.databases.clone(),
            catalog,
            build.recipe.format.clone(),
        )
    }

    /// The pool of `candidates` (one per database and name), indexed.
    fn of_candidates(
        candidates: Vec<Candidate>,
        databases: PathBuf,
        catalog: BTreeSet<String>,
        format: String,
    ) -> DistractorPool {
        let index = ToolIndex::build(candidates.iter().map(|c| c.tool.clone()).collect());
        let position = candidates
            .iter()
            .enumerate()
            .map(|(i, c)| ((c.db.clone(), c.tool.name.clone()), i))
            .collect();
        let mut domains: HashMap<String, BTreeSet<Option<&str>>> = HashMap::new();
        for c in &candidates {
            for t in index.tokens(&crate::tools::index::document(&c.tool)) {
                domains.entry(t).or_default().insert(c.db.as_deref());
            }
        }
        let databases_seen = candidates
            .iter()
            .map(|c| c.db.as_deref())
            .collect::<BTreeSet<_>>()
            .len();
        let max_domains = (databases_seen / 4).max(1);
        let shared = domains
            .into_iter()
            .filter(|(_, d)| d.len() > max_domains)
            .map(|(t, _)| t)
            .collect();
        DistractorPool {
            candidates,
            index,
            position,
            shared,
            databases,
            catalog,
            format,
        }
    }

    /// Whether candidate `c` answers `e`'s question when called with `e`'s gold arguments mapped
    /// onto it (executed on the database). REST: the gold call's arguments whose names `c` has
    /// (a required parameter left without one: `c` cannot be called that way, `false`). SEL:
    /// `c` in place of each gold getter call with the same parameter names, the sequence run
    /// from the setup step. Compared with the gold answer as verification does.
    fn answers_question(&self, c: &Candidate, e: &Example, executor: &Executor) -> bool {
        let Some(gold) = e.gold_answer.as_ref() else {
            return false;
        };
        let ties = crate::verify::ties_from_meta(e.meta.as_ref());
        let same = |got: &crate::verify::Answer, ordered: bool| {
            crate::verify::answers_match_ties(gold, got, ordered, ties.as_deref())
        };
        if let Some(ep) = &c.endpoint {
            let Some(call) = e.output.first() else { return false };
            let args: Map<String, Value> = call
                .arguments
                .iter()
                .filter(|(k, _)| ep.parameters.iter().any(|p| &p.name == *k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let Ok(values) = ep.arguments_from_json(&args) else {
                return false;
            };
            let path = self.databases.join(&ep.db_id).join(format!("{}.sqlite", ep.db_id));
            let Ok(mut conn) = crate::tools::table::open_read_only(&path) else {
                return false;
            };
            return ep
                .execute(&mut conn, &values, Limits::default())
                .is_ok_and(|got| same(&got, ep.ordered));
        }
        let keys = |t: &ToolSpec| -> BTreeSet<String> {
            t.parameters["properties"]
                .as_object()
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        };
        let ck = keys(&c.tool);
        let (setup, calls) =
            crate::tools::setup_and_calls(e.initialization_step.as_ref(), &e.additional_setup_steps, &e.output);
        if self.format == "slot" {
            // The gold in SEL form; the candidate getter in place of each gold getter.
            let sel = crate::tools::sel::bind(calls);
            return (0..sel.len()).filter(|&i| is_getter_name(&sel[i].name)).any(|i| {
                let mut swapped = sel.clone();
                swapped[i].name = c.tool.name.clone();
                executor
                    .run_with_setup(&setup, &swapped)
                    .is_ok_and(|got| same(&got, e.ordered))
            });
        }
        for (i, g) in calls.iter().enumerate() {
            let is_getter = !self.catalog.contains(&g.name);
            let same_keys = e.tools.iter().find(|t| t.name == g.name).is_some_and(|t| keys(t) == ck);
            if !is_getter || !same_keys {
                continue;
            }
            let mut swapped: Vec<Call> = calls.to_vec();
            swapped[i].name = c.tool.name.clone();
            if executor
                .run_with_setup(&setup, &swapped)
                .is_ok_and(|got| same(&got, e.ordered))
            {
                return true;
            }
        }
        false
    }

    /// The distractors variant of `e` (`None` when no candidate is at least `min_relatedness`
    /// related and answers nothing) and the candidates dropped as near-identical to a gold tool
    /// or answering the question.
    pub fn variant(&self, e: &Example, cfg: &DistractorsConfig, seed: u64) -> (Option<Example>, Dropped) {
        let mut in_toolkit: BTreeSet<String> = e.tools.iter().map(|t| t.name.clone()).collect();
        let gold_tools: Vec<ToolSpec> = if self.format == "slot" {
            // SLOT: the instance's own columns are usable (never distractors); the gold is
            // compared as the getters of the columns its calls read.
            in_toolkit.extend(
                e.key_values_and_descriptions
                    .iter()
                    .map(|k| crate::tools::sel::getter_name(&k.key_name)),
            );
            let (_, calls) =
                crate::tools::setup_and_calls(e.initialization_step.as_ref(), &e.additional_setup_steps, &e.output);
            let read: BTreeSet<String> = crate::tools::sel::bind(calls)
                .into_iter()
                .map(|c| c.name)
                .filter(|n| is_getter_name(n))
                .collect();
            e.key_values_and_descriptions
                .iter()
                .map(|k| crate::tools::sel::getter(&k.key_name, &k.description, &k.dtype))
                .filter(|t| read.contains(&t.name))
                .collect()
        } else {
            // SEL: the getters the gold calls, and those of the columns its `key_name`
            // arguments read (a filter or aggregate names its column, calling no getter).
            let read: BTreeSet<String> = e
                .output
                .iter()
                .filter_map(|c| c.arguments.get("key_name").and_then(Value::as_str))
                .map(crate::tools::sel::getter_name)
                .collect();
            e.tools
                .iter()
                .filter(|t| read.contains(&t.name) || e.output.iter().any(|c| c.name == t.name))
                .cloned()
                .collect()
        };
        if gold_tools.is_empty() || cfg.k == 0 {
            return (None, Dropped::default());
        }
        let gold: Vec<Features> = gold_tools.iter().map(Features::of).collect();
        // The query: the gold tools of the candidates' kind (SEL: its getters, not the generic
        // catalog tools every instance shares), all of them when none is.
        let of_kind: Vec<&ToolSpec> = gold_tools.iter().filter(|t| !self.catalog.contains(&t.name)).collect();
        let query_tools: Vec<&ToolSpec> = if of_kind.is_empty() {
            gold_tools.iter().collect()
        } else {
            of_kind
        };
        let query: Vec<String> = query_tools
            .iter()
            .flat_map(|t| self.index.tokens(&crate::tools::index::document(t)))
            .filter(|t| !self.shared.contains(t))
            .collect();
        if query.is_empty() {
            return (None, Dropped::default());
        }
        let scores = self.index.scores_of_tokens(&query);
        // The gold tools' own scores (each is in the catalog); the best of them is 1.0.
        let own = query_tools
            .iter()
            .filter_map(|t| self.position.get(&(e.db_id.clone(), t.name.clone())))
            .map(|&i| scores[i])
            .fold(0f32, f32::max);
        let own = if own > 0.0 {
            own
        } else {
            scores.iter().copied().fold(0f32, f32::max)
        };
        if own <= 0.0 {
            return (None, Dropped::default());
        }
        let mut near_identical = 0;
        // (bm25, relatedness, candidate).
        let mut scored: Vec<(f32, f64, &Candidate)> = Vec::new();
        for (i, c) in self.candidates.iter().enumerate() {
            if in_toolkit.contains(&c.tool.name) || scores[i] <= 0.0 {
                continue;
            }
            let relatedness = f64::from(scores[i]) / f64::from(own);
            if relatedness < cfg.min_relatedness {
                continue;
            }
            if gold
                .iter()
                .any(|g| signature_similarity(&c.features, g) >= cfg.max_signature_similarity)
            {
                near_identical += 1;
                continue;
            }
            scored.push((scores[i], relatedness, c));
        }
        scored.sort_by(|a, b| {
            b.0.total_cmp(&a.0)
                .then(a.2.tool.name.cmp(&b.2.tool.name))
                .then(a.2.db.cmp(&b.2.db))
        });
        let executor = Executor::new(&self.databases);
        let mut names = BTreeSet::new();
        let mut chosen: Vec<(f32, f64, &Candidate)> = Vec::new();
        let mut answering = 0usize;
        for (bm25, r, c) in scored {
            if chosen.len() == cfg.k {
                break;
            }
            if names.contains(&c.tool.name) {
                continue;
            }
            if self.answers_question(c, e, &executor) {
                answering += 1;
                continue;
            }
            names.insert(c.tool.name.clone());
            chosen.push((bm25, r, c));
        }
        let dropped = Dropped {
            near_identical,
            answering,
        };
        if chosen.is_empty() {
            return (None, dropped);
        }
        let mut rng = Rng::new(seed, &["distractors", &e.id]);
        let mut tools = e.tools.clone();
        for (_, _, c) in &chosen {
            let at = rng.below(tools.len() + 1);
            tools.insert(at, c.tool.clone());
        }
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        let detail = json!({
            "distractors": chosen.iter().map(|(bm25, r, c)| json!({
                "name": c.tool.name,
                "db_id": c.db,
                "bm25": round(f64::from(*bm25)),
                "relatedness": round(*r),
            })).collect::<Vec<_>>(),
            "ranking": "bm25",
            "min_relatedness": cfg.min_relatedness,
            "dropped_answering_the_question": answering,
            "max_signature_similarity": cfg.max_signature_similarity,
        });
        let mut row = variant_row(e, "distractors", "distractors", detail);
        row.tools = tools;
        (Some(row), dropped)
    }
}

#[cfg(test)]
mod tests;
