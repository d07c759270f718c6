//! `distractors` ([`DistractorPool`]; Robustness of Agentic Function Calling, toolkit
//! expansion with tools *semantically related, not functionally equivalent*): k tools that are
//! not in the instance's toolkit, from the request's domain first.
//!
//! - **Where from**: the instance's own database (REST: its other endpoints; SEL: the column
//!   getters of its other tables; SLOT: SEL-style column getters `get_<key>s` of the columns the
//!   database's other instances join, none of the instance's own table — every instance already
//!   holds the whole SLOT catalog, so its distractors are getters it cannot use) whenever that
//!   database has a usable candidate; only when it has none, the databases related to it by
//!   schema/entity similarity ([`db_similarity`] > 0: Jaccard of the databases' entity
//!   vocabularies, the name tokens of their tools that occur in at most a quarter of the
//!   databases). A candidate from an unrelated database (similarity 0) is never added.
//! - **Ranking**: [`relatedness`] to the gold tools (name tokens without `_<n>` de-duplication
//!   suffixes, description words, parameter signature; SLOT: to the getters of the columns the
//!   gold calls read, [`crate::tools::sel::bind`]).
//! - **Filter**: a candidate whose [`signature_similarity`] to a gold tool reaches the recipe's
//!   `max_signature_similarity` (default 0.8, the paper's embedding threshold applied to this
//!   Jaccard) is dropped as near-identical; so is one that answers the question when called with
//!   the gold arguments mapped onto it (`DistractorPool::answers_question`, executed on the
//!   database), so the gold tools stay the only correct answer.
//!
//! Preserves: the gold calls and answer; the parent's tools keep their relative order, the
//! distractors are inserted at seeded positions.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::{DistractorsConfig, Rng, variant_row};
use crate::dataset::{Build, Example};
use crate::tools::executor::Executor;
use crate::tools::rest::{Endpoint, Limits};
use crate::tools::{Call, ToolSpec};

/// The similarity features of a tool.
#[derive(Debug, Clone)]
pub struct Features {
    name: BTreeSet<String>,
    description: BTreeSet<String>,
    signature: BTreeSet<String>,
}

impl Features {
    /// Name tokens (split on `_`, without a trailing `_<n>` de-duplication suffix or any
    /// all-digit token), description words (lower case, 3+ letters), and the signature
    /// `parameter:type` set.
    pub fn of(t: &ToolSpec) -> Features {
        let name = name_tokens(&t.name);
        let description = t
            .description
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() >= 3)
            .map(String::from)
            .collect();
        let signature = t.parameters["properties"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| format!("{k}:{}", v["type"])).collect())
            .unwrap_or_default();
        Features {
            name,
            description,
            signature,
        }
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

/// How related a candidate is to a gold tool: 0.5 · J(name tokens) + 0.3 · J(description words)
/// + 0.2 · J(signature), J = Jaccard.
pub fn relatedness(a: &Features, b: &Features) -> f64 {
    0.5 * jaccard(&a.name, &b.name)
        + 0.3 * jaccard(&a.description, &b.description)
        + 0.2 * jaccard(&a.signature, &b.signature)
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

/// Schema/entity similarity of two databases: Jaccard of their entity vocabularies (module docs).
pub fn db_similarity(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    jaccard(a, b)
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
    /// Database → entity vocabulary.
    vocab: BTreeMap<String, BTreeSet<String>>,
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
    /// table, one per database and name) and the databases' vocabularies.
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
        // Entity vocabularies: name tokens in at most a quarter of the databases.
        let mut tokens: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for c in &candidates {
            if let Some(db) = &c.db {
                tokens
                    .entry(db.clone())
                    .or_default()
                    .extend(c.features.name.iter().cloned());
            }
        }
        let mut df: HashMap<&str, usize> = HashMap::new();
        for set in tokens.values() {
            for t in set {
                *df.entry(t.as_str()).or_insert(0) += 1;
            }
        }
        let max_df = (tokens.len() / 4).max(1);
        let vocab = tokens
            .iter()
            .map(|(db, set)| {
                (
                    db.clone(),
                    set.iter().filter(|t| df[t.as_str()] <= max_df).cloned().collect(),
                )
            })
            .collect();
        DistractorPool {
            candidates,
            vocab,
            databases: build.source.databases.clone(),
            catalog,
            format: build.recipe.format.clone(),
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

    /// The distractors variant of `e` (`None` when the pool has no usable candidate) and the
    /// candidates dropped as near-identical to a gold tool or answering the question.
    pub fn variant(&self, e: &Example, cfg: &DistractorsConfig, seed: u64) -> (Option<Example>, Dropped) {
        let mut in_toolkit: BTreeSet<String> = e.tools.iter().map(|t| t.name.clone()).collect();
        let gold: Vec<Features> = if self.format == "slot" {
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
                .map(|t| Features::of(&t))
                .collect()
        } else {
            e.tools
                .iter()
                .filter(|t| e.output.iter().any(|c| c.name == t.name))
                .map(Features::of)
                .collect()
        };
        if gold.is_empty() || cfg.k == 0 {
            return (None, Dropped::default());
        }
        let own = e
            .db_id
            .as_ref()
            .and_then(|d| self.vocab.get(d))
            .cloned()
            .unwrap_or_default();
        let mut near_identical = 0;
        // (same database, database similarity, relatedness, candidate).
        let mut scored: Vec<(bool, f64, f64, &Candidate)> = Vec::new();
        for c in &self.candidates {
            if in_toolkit.contains(&c.tool.name) {
                continue;
            }
            let same_db = c.db.is_some() && c.db == e.db_id;
            let db_sim = match (&c.db, same_db) {
                (_, true) => 1.0,
                (Some(d), false) => db_similarity(&own, self.vocab.get(d).unwrap_or(&BTreeSet::new())),
                (None, false) => 0.0,
            };
            if db_sim <= 0.0 {
                continue;
            }
            if gold
                .iter()
                .any(|g| signature_similarity(&c.features, g) >= cfg.max_signature_similarity)
            {
                near_identical += 1;
                continue;
            }
            let score = gold.iter().map(|g| relatedness(&c.features, g)).fold(0.0, f64::max);
            scored.push((same_db, db_sim, score, c));
        }
        let have_same_db = scored.iter().any(|s| s.0);
        scored.retain(|s| s.0 == have_same_db);
        scored.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then(b.2.total_cmp(&a.2))
                .then(a.3.tool.name.cmp(&b.3.tool.name))
                .then(a.3.db.cmp(&b.3.db))
        });
        let executor = Executor::new(&self.databases);
        let mut names = BTreeSet::new();
        let mut chosen: Vec<(f64, &Candidate)> = Vec::new();
        let mut answering = 0usize;
        for (_, _, s, c) in scored {
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
            chosen.push((s, c));
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
        for (_, c) in &chosen {
            let at = rng.below(tools.len() + 1);
            tools.insert(at, c.tool.clone());
        }
        let detail = json!({
            "distractors": chosen.iter().map(|(s, c)| json!({
                "name": c.tool.name,
                "db_id": c.db,
                "source": if have_same_db { "same_database" } else { "related_database" },
                "relatedness": (s * 1000.0).round() / 1000.0,
            })).collect::<Vec<_>>(),
            "same_database_candidates": have_same_db,
            "dropped_answering_the_question": answering,
            "max_signature_similarity": cfg.max_signature_similarity,
        });
        let mut row = variant_row(e, "distractors", "distractors", detail);
        row.tools = tools;
        (Some(row), dropped)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::variants::fixtures::tool;

    #[test]
    fn similarity_measures() {
        let a = Features::of(&tool("get_singer_name", &[("country", "string")]));
        let b = Features::of(&tool("get_singer_name", &[("country", "string")]));
        let c = Features::of(&tool("get_stadium_capacity", &[("year", "integer")]));
        assert!((signature_similarity(&a, &b) - 1.0).abs() < 1e-12);
        assert!(signature_similarity(&a, &c) < 0.3);
        assert!(relatedness(&a, &b) > relatedness(&a, &c));
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
        assert_eq!(relatedness(&a, &b), relatedness(&a, &c));
    }
}
