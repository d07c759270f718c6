//! ToolGym-style tool bundles: deterministic, seeded samples of related tools across servers.
//!
//! Similarity: each tool is a bag of tokens — its name split at `_ - .` and camelCase
//! boundaries, its description's words (ASCII words of ≥ 2 letters minus a short stop list; every
//! other alphabetic character, e.g. Chinese, as its own token), and its schema signature
//! (`p:<property>` and `t:<type>` of the top-level properties, plus the property names' words).
//! Tokens are weighted by TF-IDF (`idf = ln((N+1)/(df+1)) + 1`) and tools compared by cosine.
//!
//! Bundle `b` of a run with seed `s` (each bundle has its own SplitMix64 stream, so bundle `b` does
//! not depend on how many bundles are drawn):
//!
//! 1. servers (with ≥ 1 tool) are shuffled once with `s`; the primary server is
//!    `order[b mod #servers]` (round-robin), and a uniformly drawn tool of it is the first seed;
//! 2. the number of seeds is drawn from `1..=min(max_seeds, size)`; each further seed is drawn
//!    from the 3 tools most similar to the first seed on servers not yet in the bundle;
//! 3. the rest is filled round-robin across servers: candidates are scored by their best cosine
//!    to any seed, each server's candidates are ranked, servers are ordered by their best
//!    candidate, and each round takes the next candidate of every server in that order;
//! 4. ties break on a hash of (seed, bundle, tool index), never on input order alone.
//!
//! **Similarity floor** (`min_similarity`, default [`DEFAULT_MIN_SIMILARITY`]): a tool can join a
//! bundle (as a further seed or as a related tool) only when its cosine to the first seed is at
//! least the floor, so "related" means sharing weighted vocabulary with the tool the task is
//! built around. 0.1 is the floor because on LiveMCPBench's 527 tools a cosine below it is, in
//! our reading of the pairs, a shared generic word (`get`, `list`, `query`) or one schema type
//! and nothing else (`read_pdf` + `get_sitemap_tree`: 0.04), while pairs above it share a topic
//! word (`search_papers` + `get_paper_details`: 0.27). A draw that cannot be filled to `size`
//! from tools above the floor is redrawn.
//!
//! **Shared entity** (issue 30: 8 / 20 sampled LiveMCPBench bundles held tools matched only on
//! generic tokens): besides the floor, a tool joins only when it shares at least one *entity
//! token* with the first seed — a word of its name, description or parameter names (not a
//! `p:`/`t:` schema marker) of ≥ 3 characters that is neither in [`GENERIC`] (operations and API
//! plumbing: `get`, `list`, `search`, `query`, `data`, `id`, …) nor frequent in the catalog
//! (document frequency above `max(20, N/20)`: a word on more than one tool in twenty says
//! nothing about a topic, whatever it is). Each member records the entity tokens it shares
//! (`shared`, rarest first, at most 5).
//!
//! **Distinct content**: no two members have the same name (case-insensitive) and schema — the
//! ingest already merged content-identical copies, and a copy whose description was reworded
//! is still the same tool to a model, so it never fills a second slot of a bundle.
//!
//! A draw with fewer than `min_servers` distinct servers, too few tools above the floor, or the
//! same tool set as an earlier bundle is redrawn (same primary server, a new RNG stream for the
//! attempt); after 8 failed attempts the bundle is dropped with the last reason
//! (`too_few_servers`, `too_few_related`, `duplicate_bundle`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::mcp::McpTool;

/// Sampling knobs (recipe `[catalog]` table; see [`super::CatalogKnobs`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// RNG seed.
    pub seed: u64,
    /// Bundles to draw.
    pub bundles: usize,
    /// Tools per bundle.
    pub size: usize,
    /// Minimum distinct servers per bundle.
    pub min_servers: usize,
    /// Maximum seed tools per bundle (1–3 in ToolGym).
    pub max_seeds: usize,
    /// The similarity floor: minimum cosine to the first seed of every other member.
    pub min_similarity: f64,
}

/// The default similarity floor (module doc).
pub use crate::recipe::catalog::DEFAULT_MIN_SIMILARITY;

/// One tool of a bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Member {
    /// Index into the catalog.
    pub tool: usize,
    /// `seed` (the task is built around it) or `related` (similar tool, possibly a distractor).
    pub role: String,
    /// Cosine similarity to the first seed (1 for the first seed itself).
    pub score: f64,
    /// Entity tokens shared with the first seed (module doc; empty for the first seed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<String>,
}

/// A drawn bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bundle {
    /// Bundle number `b`.
    pub index: usize,
    /// Members, seeds first.
    pub members: Vec<Member>,
}

/// SplitMix64 (Steele, Lea, Flood 2014): small, seedable, the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const STOP: [&str; 24] = [
    "the", "a", "an", "of", "to", "and", "or", "in", "on", "for", "with", "is", "are", "be", "by", "from", "this",
    "that", "it", "as", "at", "if", "can", "use",
];

fn words(text: &str, out: &mut Vec<String>) {
    let mut cur = String::new();
    let mut prev_lower = false;
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if cur.len() >= 2 && !STOP.contains(&cur.as_str()) {
            out.push(std::mem::take(cur));
        } else {
            cur.clear();
        }
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && prev_lower {
                flush(&mut cur, out);
            }
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
            cur.push(c.to_ascii_lowercase());
        } else {
            flush(&mut cur, out);
            prev_lower = false;
            if c.is_alphabetic() {
                out.push(c.to_string());
            }
        }
    }
    flush(&mut cur, out);
}

/// Generic words: operations and API plumbing that say nothing about what a tool is about
/// (module doc). A word absent here still counts as generic when it is frequent in the catalog.
pub const GENERIC: [&str; 64] = [
    "get",
    "list",
    "set",
    "create",
    "update",
    "delete",
    "remove",
    "add",
    "search",
    "query",
    "find",
    "fetch",
    "read",
    "write",
    "retrieve",
    "info",
    "information",
    "data",
    "details",
    "detail",
    "ids",
    "name",
    "names",
    "type",
    "types",
    "value",
    "values",
    "result",
    "results",
    "string",
    "number",
    "limit",
    "page",
    "offset",
    "count",
    "default",
    "optional",
    "required",
    "return",
    "returns",
    "tool",
    "tools",
    "api",
    "request",
    "response",
    "object",
    "parameter",
    "parameters",
    "param",
    "input",
    "output",
    "text",
    "content",
    "specified",
    "specific",
    "given",
    "new",
    "using",
    "based",
    "all",
    "any",
    "one",
    "more",
    "your",
];

/// The token bag of a tool (see the module doc).
pub fn tokens(t: &McpTool) -> Vec<String> {
    let mut out = Vec::new();
    words(&t.name, &mut out);
    words(&t.description, &mut out);
    if let Some(Value::Object(props)) = t.input_schema.get("properties") {
        for (name, p) in props {
            out.push(format!("p:{}", name.to_lowercase()));
            words(name, &mut out);
            if let Some(ty) = p.get("type").and_then(Value::as_str) {
                out.push(format!("t:{ty}"));
            }
        }
    }
    out
}

/// The catalog's vectors and entity tokens (module doc).
pub struct Index {
    /// Unit-length TF-IDF vector per tool (token id → weight).
    pub vecs: Vec<BTreeMap<usize, f64>>,
    /// Entity token ids per tool.
    pub entities: Vec<BTreeSet<usize>>,
    /// Token text by id.
    pub tokens: Vec<String>,
    /// Document frequency by id.
    pub df: Vec<usize>,
}

impl Index {
    /// Builds the index of a catalog.
    pub fn new(catalog: &[McpTool]) -> Index {
        let bags: Vec<Vec<String>> = catalog.iter().map(tokens).collect();
        let mut ids: HashMap<String, usize> = HashMap::new();
        let mut texts: Vec<String> = Vec::new();
        let idbags: Vec<Vec<usize>> = bags
            .iter()
            .map(|b| {
                b.iter()
                    .map(|tok| {
                        *ids.entry(tok.clone()).or_insert_with(|| {
                            texts.push(tok.clone());
                            texts.len() - 1
                        })
                    })
                    .collect()
            })
            .collect();
        let mut df = vec![0usize; texts.len()];
        for b in &idbags {
            for k in b.iter().collect::<BTreeSet<_>>() {
                df[*k] += 1;
            }
        }
        let frequent = (catalog.len() / 20).max(20);
        let entities = idbags
            .iter()
            .map(|b| {
                b.iter()
                    .copied()
                    .filter(|&k| {
                        let t = texts[k].as_str();
                        !t.contains(':')
                            && t.chars().count() >= 3
                            && !t.chars().all(|c| c.is_ascii_digit())
                            && !GENERIC.contains(&t)
                            && df[k] <= frequent
                    })
                    .collect()
            })
            .collect();
        Index {
            vecs: tfidf(catalog),
            entities,
            tokens: texts,
            df,
        }
    }

    /// Whether tools `a` and `b` share an entity token.
    pub fn shares(&self, a: usize, b: usize) -> bool {
        !self.entities[a].is_disjoint(&self.entities[b])
    }

    /// The entity tokens tools `a` and `b` share, rarest first (ties by text), at most 5.
    pub fn shared(&self, a: usize, b: usize) -> Vec<String> {
        let mut s: Vec<usize> = self.entities[a].intersection(&self.entities[b]).copied().collect();
        s.sort_by(|x, y| {
            self.df[*x]
                .cmp(&self.df[*y])
                .then_with(|| self.tokens[*x].cmp(&self.tokens[*y]))
        });
        s.into_iter().take(5).map(|k| self.tokens[k].clone()).collect()
    }
}

/// Unit-length TF-IDF vectors of the catalog (token id → weight, ids in first-seen order).
pub fn tfidf(catalog: &[McpTool]) -> Vec<BTreeMap<usize, f64>> {
    let mut ids: HashMap<String, usize> = HashMap::new();
    let bags: Vec<BTreeMap<usize, f64>> = catalog
        .iter()
        .map(|t| {
            let mut tf = BTreeMap::new();
            for tok in tokens(t) {
                let n = ids.len();
                *tf.entry(*ids.entry(tok).or_insert(n)).or_insert(0.0) += 1.0;
            }
            tf
        })
        .collect();
    let mut df = vec![0usize; ids.len()];
    for b in &bags {
        for k in b.keys() {
            df[*k] += 1;
        }
    }
    let n = catalog.len() as f64;
    bags.into_iter()
        .map(|b| {
            let mut v: BTreeMap<usize, f64> = b
                .into_iter()
                .map(|(k, tf)| (k, tf * (((n + 1.0) / (df[k] as f64 + 1.0)).ln() + 1.0)))
                .collect();
            let norm = v.values().map(|x| x * x).sum::<f64>().sqrt();
            if norm > 0.0 {
                v.values_mut().for_each(|x| *x /= norm);
            }
            v
        })
        .collect()
}

/// Cosine of two unit vectors.
pub fn cosine(a: &BTreeMap<usize, f64>, b: &BTreeMap<usize, f64>) -> f64 {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    small.iter().filter_map(|(k, x)| large.get(k).map(|y| x * y)).sum()
}

fn tie(seed: u64, bundle: usize, tool: usize) -> u64 {
    Rng(seed ^ (bundle as u64).wrapping_mul(0x9E37_79B9) ^ (tool as u64).wrapping_mul(0x85EB_CA6B)).next()
}

/// Draws the bundles; returns them and the dropped ones as `(bundle, reason, detail)`.
pub fn sample(catalog: &[McpTool], k: &Sampling) -> (Vec<Bundle>, Vec<(usize, String, String)>) {
    let index = Index::new(catalog);
    let vecs = &index.vecs;
    // the content signature of a tool: name (case-insensitive) and schema
    let signature: Vec<(String, String)> = catalog
        .iter()
        .map(|t| (t.name.to_lowercase(), super::schema::canonical(&t.input_schema)))
        .collect();
    let mut servers: Vec<&str> = Vec::new();
    let mut by_server: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, t) in catalog.iter().enumerate() {
        if !by_server.contains_key(t.server.as_str()) {
            servers.push(&t.server);
        }
        by_server.entry(&t.server).or_default().push(i);
    }
    let mut rng = Rng(k.seed);
    for i in (1..servers.len()).rev() {
        servers.swap(i, rng.below(i + 1));
    }
    let mut out = Vec::new();
    let mut drops = Vec::new();
    let mut seen_sets: BTreeSet<Vec<usize>> = BTreeSet::new();
    if servers.is_empty() || k.size == 0 {
        return (
            out,
            (0..k.bundles)
                .map(|b| (b, "empty_catalog".to_string(), "no tools to sample".to_string()))
                .collect(),
        );
    }
    'bundle: for b in 0..k.bundles {
        let mut last = (String::new(), String::new());
        for attempt in 0..ATTEMPTS {
            let mut rng = Rng(k.seed
                ^ (b as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03)
                ^ (attempt as u64).wrapping_mul(0xA076_1D64_78BD_642F));
            let primary = servers[b % servers.len()];
            let pool = &by_server[primary];
            let first = pool[rng.below(pool.len())];
            let n_seeds = 1 + rng.below(k.max_seeds.clamp(1, 3).min(k.size));
            let sim_first: Vec<f64> = vecs.iter().map(|v| cosine(&vecs[first], v)).collect();
            let order_key = |i: usize, score: f64| (std::cmp::Reverse(ordered(score)), tie(k.seed, b, i));
            let mut members = vec![Member {
                tool: first,
                role: "seed".into(),
                score: 1.0,
                shared: Vec::new(),
            }];
            // related to the first seed: above the floor, sharing an entity token
            let related = |i: usize| sim_first[i] >= k.min_similarity && index.shares(first, i);
            let mut signatures: BTreeSet<&(String, String)> = BTreeSet::from([&signature[first]]);
            let mut used_servers: BTreeSet<&str> = BTreeSet::from([primary]);
            // further seeds: one of the 3 tools most similar to the first seed on new servers
            while members.len() < n_seeds {
                let mut near: Vec<usize> = (0..catalog.len())
                    .filter(|&i| {
                        !used_servers.contains(catalog[i].server.as_str())
                            && !signatures.contains(&signature[i])
                            && related(i)
                    })
                    .collect();
                near.sort_by_key(|&i| order_key(i, sim_first[i]));
                near.truncate(3);
                if near.is_empty() {
                    break;
                }
                let i = near[rng.below(near.len())];
                used_servers.insert(&catalog[i].server);
                signatures.insert(&signature[i]);
                members.push(Member {
                    tool: i,
                    role: "seed".into(),
                    score: sim_first[i],
                    shared: index.shared(first, i),
                });
            }
            // related: round-robin across servers by best similarity to any seed
            let chosen: BTreeSet<usize> = members.iter().map(|m| m.tool).collect();
            let score = |i: usize| {
                members
                    .iter()
                    .map(|m| cosine(&vecs[m.tool], &vecs[i]))
                    .fold(0.0, f64::max)
            };
            let mut ranked: BTreeMap<&str, Vec<(usize, f64)>> = BTreeMap::new();
            for (i, t) in catalog.iter().enumerate() {
                if !chosen.contains(&i) && !signatures.contains(&signature[i]) && related(i) {
                    ranked.entry(t.server.as_str()).or_default().push((i, score(i)));
                }
            }
            for list in ranked.values_mut() {
                list.sort_by_key(|&(i, s)| order_key(i, s));
            }
            let mut server_order: Vec<(&str, usize, f64)> = ranked.iter().map(|(s, l)| (*s, l[0].0, l[0].1)).collect();
            server_order.sort_by_key(|&(_, i, s)| order_key(i, s));
            let mut round = 0;
            while members.len() < k.size {
                let mut any = false;
                for (s, _, _) in &server_order {
                    if members.len() >= k.size {
                        break;
                    }
                    if let Some(&(i, _)) = ranked[s].get(round) {
                        any = true;
                        // a second copy of a member (same name and schema) never fills a slot
                        if !signatures.insert(&signature[i]) {
                            continue;
                        }
                        members.push(Member {
                            tool: i,
                            role: "related".into(),
                            score: sim_first[i],
                            shared: index.shared(first, i),
                        });
                        used_servers.insert(&catalog[i].server);
                    }
                }
                if !any {
                    break;
                }
                round += 1;
            }
            if members.len() < k.size {
                last = (
                    "too_few_related".into(),
                    format!(
                        "{} distinct tools with cosine ≥ {} to the first seed and an entity token in common, {} needed",
                        members.len(),
                        k.min_similarity,
                        k.size
                    ),
                );
                continue;
            }
            let distinct: BTreeSet<&str> = members.iter().map(|m| catalog[m.tool].server.as_str()).collect();
            if distinct.len() < k.min_servers {
                last = (
                    "too_few_servers".into(),
                    format!("{} distinct servers < min_servers {}", distinct.len(), k.min_servers),
                );
                continue;
            }
            let set: Vec<usize> = members
                .iter()
                .map(|m| m.tool)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            if !seen_sets.insert(set) {
                last = (
                    "duplicate_bundle".into(),
                    format!("same tool set as an earlier bundle in {ATTEMPTS} attempts"),
                );
                continue;
            }
            out.push(Bundle { index: b, members });
            continue 'bundle;
        }
        drops.push((b, last.0, last.1));
    }
    (out, drops)
}

/// Draws per bundle before it is dropped (each attempt has its own RNG stream).
const ATTEMPTS: usize = 8;

/// Total order on finite scores (rounded to 1e-12 so platform noise cannot reorder ties).
fn ordered(x: f64) -> i64 {
    (x * 1e12).round() as i64
}

#[cfg(test)]
mod tests;
