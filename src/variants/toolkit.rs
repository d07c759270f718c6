//! Toolkit variants: what the model is offered changes, the gold calls do not (except for names
//! under obfuscation).
//!
//! - `distractors` ([`DistractorPool`]; Robustness of Agentic Function Calling, toolkit
//!   expansion): k related tools from the same dataset catalog that are not in the instance's
//!   toolkit, ranked by [`relatedness`] to the gold tools (name, description, parameter
//!   signature); a candidate whose [`signature_similarity`] to any gold tool reaches the recipe
//!   threshold is dropped, so the gold tools stay the only correct answer. Pools: REST, the
//!   endpoints of the other databases; SEL, the column getters of other instances (other
//!   tables); SLOT has none (every instance already holds the whole SLOT catalog), so no row.
//!   Preserves: the gold calls and answer; the parent's tools keep their relative order, the
//!   distractors are inserted at seeded positions.
//! - `obfuscate` ([`obfuscate`]): every toolkit function renamed `FUNC_i` (toolkit order) and its
//!   parameters `ARG_j` (schema order, top level); the gold calls renamed accordingly; the mapping
//!   is kept in `meta.variant` and [`deobfuscate`] maps calls back. Preserves: descriptions,
//!   types, enums, labels and `$LABEL$` references, the setup step.
//! - `shortlist` ([`shortlist`]): a toolkit of `ceil(f · N)` tools of the instance's domain
//!   universe (its `tools`: SLOT/SEL the instance toolkit, REST the database's endpoints), never
//!   fewer than the gold tools, always containing them; the rest drawn with a seeded shuffle,
//!   toolkit order kept. No row when the shortlist would not be smaller than the toolkit.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::{DistractorsConfig, Rng, gold_tool_names, variant_row};
use crate::dataset::{Build, Example};
use crate::tools::rest::Endpoint;
use crate::tools::{Call, ToolSpec};

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

/// The obfuscation mapping of a toolkit: `functions` `FUNC_i` → name, `arguments` `FUNC_i` →
/// {`ARG_j` → parameter}.
pub fn obfuscation_mapping(tools: &[ToolSpec]) -> Value {
    let mut functions = Map::new();
    let mut arguments = Map::new();
    for (i, t) in tools.iter().enumerate() {
        let f = format!("FUNC_{i}");
        functions.insert(f.clone(), json!(t.name));
        let args: Map<String, Value> = t.parameters["properties"]
            .as_object()
            .map(|m| {
                m.keys()
                    .enumerate()
                    .map(|(j, k)| (format!("ARG_{j}"), json!(k)))
                    .collect()
            })
            .unwrap_or_default();
        arguments.insert(f, Value::Object(args));
    }
    json!({"functions": functions, "arguments": arguments})
}

fn invert(m: &Map<String, Value>) -> BTreeMap<String, String> {
    m.iter()
        .map(|(k, v)| (v.as_str().unwrap_or_default().to_string(), k.clone()))
        .collect()
}

/// The obfuscate variant of `e` (module docs).
pub fn obfuscate(e: &Example) -> Example {
    let mapping = obfuscation_mapping(&e.tools);
    let fun_of: BTreeMap<String, String> = invert(mapping["functions"].as_object().expect("object"));
    let tools: Vec<ToolSpec> = e
        .tools
        .iter()
        .map(|t| {
            let f = &fun_of[&t.name];
            let arg_of = invert(mapping["arguments"][f].as_object().expect("object"));
            let mut p = t.parameters.clone();
            if let Some(props) = t.parameters["properties"].as_object() {
                p["properties"] = Value::Object(props.iter().map(|(k, v)| (arg_of[k].clone(), v.clone())).collect());
            }
            if let Some(req) = t.parameters["required"].as_array() {
                p["required"] = json!(
                    req.iter()
                        .map(|r| arg_of.get(r.as_str().unwrap_or_default()).cloned().unwrap_or_default())
                        .collect::<Vec<_>>()
                );
            }
            ToolSpec {
                name: f.clone(),
                parameters: p,
                ..t.clone()
            }
        })
        .collect();
    let output: Vec<Call> = e
        .output
        .iter()
        .map(|c| match fun_of.get(&c.name) {
            Some(f) => {
                let arg_of = invert(mapping["arguments"][f].as_object().expect("object"));
                Call {
                    name: f.clone(),
                    arguments: c
                        .arguments
                        .iter()
                        .map(|(k, v)| (arg_of.get(k).cloned().unwrap_or_else(|| k.clone()), v.clone()))
                        .collect(),
                    label: c.label.clone(),
                }
            }
            None => c.clone(),
        })
        .collect();
    let mut row = variant_row(e, "obfuscate", "obfuscate", json!({"mapping": mapping}));
    row.tools = tools;
    row.output = output;
    row
}

/// Maps obfuscated calls back to the original names with the `mapping` of
/// [`obfuscation_mapping`]; calls of unknown names are returned unchanged.
pub fn deobfuscate(calls: &[Call], mapping: &Value) -> Vec<Call> {
    calls
        .iter()
        .map(|c| match mapping["functions"][&c.name].as_str() {
            Some(name) => Call {
                name: name.into(),
                arguments: c
                    .arguments
                    .iter()
                    .map(|(k, v)| {
                        (
                            mapping["arguments"][&c.name][k].as_str().unwrap_or(k).to_string(),
                            v.clone(),
                        )
                    })
                    .collect(),
                label: c.label.clone(),
            },
            None => c.clone(),
        })
        .collect()
}

/// The shortlist variant of `e` for fraction `f` (module docs), id `<parent>/shortlist-<pct>`.
pub fn shortlist(e: &Example, f: f64, seed: u64) -> Option<Example> {
    let n = e.tools.len();
    let gold = gold_tool_names(e);
    let size = ((f * n as f64).ceil() as usize).max(gold.len()).max(1);
    if size >= n {
        return None;
    }
    let pct = (f * 100.0).round() as u32;
    let mut rng = Rng::new(seed, &["shortlist", &pct.to_string(), &e.id]);
    let mut others: Vec<&str> = e
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| !gold.iter().any(|g| g.as_str() == *n))
        .collect();
    rng.shuffle(&mut others);
    let keep: BTreeSet<&str> = gold
        .iter()
        .map(String::as_str)
        .chain(others.into_iter().take(size - gold.len()))
        .collect();
    let tools: Vec<ToolSpec> = e
        .tools
        .iter()
        .filter(|t| keep.contains(t.name.as_str()))
        .cloned()
        .collect();
    let mut row = variant_row(
        e,
        &format!("shortlist-{pct}"),
        "shortlist",
        json!({"fraction": f, "universe": n, "size": tools.len()}),
    );
    row.tools = tools;
    Some(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, params: &[(&str, &str)]) -> ToolSpec {
        let props: Map<String, Value> = params
            .iter()
            .map(|(n, t)| (n.to_string(), json!({"type": t})))
            .collect();
        ToolSpec {
            name: name.into(),
            description: format!("Get the {name}"),
            parameters: json!({"type": "object", "properties": props, "required": params.iter().map(|p| p.0).collect::<Vec<_>>()}),
            output_parameters: json!({}),
        }
    }

    fn example() -> Example {
        Example {
            id: "d/1".into(),
            tools: vec![
                tool("get_a", &[("x", "string")]),
                tool("get_b", &[("y", "integer"), ("z", "string")]),
                tool("get_c", &[]),
                tool("get_d", &[]),
            ],
            output: vec![Call {
                name: "get_b".into(),
                arguments: json!({"y": 1, "z": "q"}).as_object().unwrap().clone(),
                label: "L".into(),
            }],
            ..Example::default()
        }
    }

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

    #[test]
    fn obfuscation_round_trips() {
        let e = example();
        let o = obfuscate(&e);
        assert_eq!(o.tools[1].name, "FUNC_1");
        assert_eq!(o.output[0].name, "FUNC_1");
        assert_eq!(
            o.output[0].arguments,
            json!({"ARG_0": 1, "ARG_1": "q"}).as_object().unwrap().clone()
        );
        assert_eq!(o.tools[1].parameters["required"], json!(["ARG_0", "ARG_1"]));
        let m = &o.meta.as_ref().unwrap()["variant"]["mapping"];
        assert_eq!(deobfuscate(&o.output, m), e.output);
    }

    #[test]
    fn shortlists_keep_gold() {
        let e = example();
        let s = shortlist(&e, 0.25, 1).unwrap();
        assert_eq!(s.tools.len(), 1);
        assert_eq!(s.tools[0].name, "get_b");
        let s = shortlist(&e, 0.5, 1).unwrap();
        assert_eq!(s.tools.len(), 2);
        assert!(s.tools.iter().any(|t| t.name == "get_b"));
        assert!(shortlist(&e, 0.9, 1).is_none());
    }
}
