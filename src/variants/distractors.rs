//! `distractors` ([`DistractorPool`]; Robustness of Agentic Function Calling, toolkit
//! expansion): k related tools from the same dataset catalog that are not in the instance's
//! toolkit, ranked by [`relatedness`] to the gold tools (name, description, parameter
//! signature); a candidate whose [`signature_similarity`] to any gold tool reaches the recipe
//! threshold is dropped, so the gold tools stay the only correct answer. Pools: REST, the
//! endpoints of the other databases; SEL, the column getters of other instances (other
//! tables); SLOT has none (every instance already holds the whole SLOT catalog), so no row.
//! Preserves: the gold calls and answer; the parent's tools keep their relative order, the
//! distractors are inserted at seeded positions.

use std::collections::BTreeSet;

use serde_json::json;

use super::{DistractorsConfig, Rng, variant_row};
use crate::dataset::{Build, Example};
use crate::tools::ToolSpec;
use crate::tools::rest::Endpoint;

/// The similarity features of a tool.
#[derive(Debug, Clone)]
pub struct Features {
    name: BTreeSet<String>,
    description: BTreeSet<String>,
    signature: BTreeSet<String>,
}

impl Features {
    /// Name tokens (split on `_`), description words (lower case, 3+ letters), and the
    /// signature `parameter:type` set.
    pub fn of(t: &ToolSpec) -> Features {
        let name = t
            .name
            .to_lowercase()
            .split('_')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
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

/// The distractor candidates of a dataset (module docs).
pub struct DistractorPool {
    format: String,
    /// (database, tool, features), in catalog order.
    candidates: Vec<(Option<String>, ToolSpec, Features)>,
}

impl DistractorPool {
    /// Collects the pool of `build` (REST: `tools/endpoints.json`; SEL: every instance's
    /// getters, first occurrence of each name; SLOT: empty).
    pub fn new(build: &Build) -> DistractorPool {
        let format = build.recipe.format.clone();
        let mut candidates = Vec::new();
        match format.as_str() {
            "rest" => {
                let endpoints: Vec<Endpoint> = build
                    .extra_files
                    .get("tools/endpoints.json")
                    .and_then(|b| serde_json::from_slice(b).ok())
                    .unwrap_or_default();
                for ep in endpoints {
                    let t = ep.tool_spec();
                    let f = Features::of(&t);
                    candidates.push((Some(ep.db_id.clone()), t, f));
                }
            }
            "sel" => {
                let catalog: BTreeSet<&str> = build.catalog.iter().map(|t| t.name.as_str()).collect();
                let mut seen = BTreeSet::new();
                for e in build.groups.values().flat_map(|o| &o.examples) {
                    for t in &e.tools {
                        if !catalog.contains(t.name.as_str()) && seen.insert(t.name.clone()) {
                            candidates.push((e.db_id.clone(), t.clone(), Features::of(t)));
                        }
                    }
                }
            }
            _ => {}
        }
        DistractorPool { format, candidates }
    }

    /// The distractors variant of `e` (`None` when the pool has no usable candidate) and how
    /// many candidates were dropped as near-identical to a gold tool.
    pub fn variant(&self, e: &Example, cfg: &DistractorsConfig, seed: u64, _format: &str) -> (Option<Example>, usize) {
        let in_toolkit: BTreeSet<&str> = e.tools.iter().map(|t| t.name.as_str()).collect();
        let gold: Vec<Features> = e
            .tools
            .iter()
            .filter(|t| e.output.iter().any(|c| c.name == t.name))
            .map(Features::of)
            .collect();
        if gold.is_empty() || cfg.k == 0 {
            return (None, 0);
        }
        let mut dropped = 0;
        let mut scored: Vec<(f64, &ToolSpec)> = Vec::new();
        let mut names = BTreeSet::new();
        for (db, t, f) in &self.candidates {
            if in_toolkit.contains(t.name.as_str()) || (self.format == "rest" && db == &e.db_id) {
                continue;
            }
            if gold
                .iter()
                .any(|g| signature_similarity(f, g) >= cfg.max_signature_similarity)
            {
                dropped += 1;
                continue;
            }
            let score = gold.iter().map(|g| relatedness(f, g)).fold(0.0, f64::max);
            scored.push((score, t));
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.name.cmp(&b.1.name)));
        let mut chosen: Vec<(f64, ToolSpec)> = Vec::new();
        for (s, t) in scored {
            if chosen.len() == cfg.k {
                break;
            }
            if names.insert(t.name.clone()) {
                chosen.push((s, t.clone()));
            }
        }
        if chosen.is_empty() {
            return (None, dropped);
        }
        let mut rng = Rng::new(seed, &["distractors", &e.id]);
        let mut tools = e.tools.clone();
        for (_, t) in &chosen {
            let at = rng.below(tools.len() + 1);
            tools.insert(at, t.clone());
        }
        let detail = json!({
            "distractors": chosen.iter().map(|(s, t)| json!({"name": t.name, "relatedness": (s * 1000.0).round() / 1000.0})).collect::<Vec<_>>(),
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
}
