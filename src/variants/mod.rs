//! The `variants` stage: extra rows derived from the verified examples of any dataset, after the
//! compile stage (DESIGN.md "Variants"; DynamicToolBench; Robustness of Agentic Function Calling).
//!
//! A recipe opts in with a `[variants]` section ([`VariantsConfig`]); each sub-table enables one
//! operator. Every variant row is an [`Example`] in its parent's split and group, with id
//! `<parent id>/<kind>[-<sub>]` and `meta` holding (besides the parent's meta):
//!
//! | key            | value                                                                  |
//! |----------------|------------------------------------------------------------------------|
//! | `variant_of`   | the parent example id                                                  |
//! | `variant_kind` | `perturb`, `drift`, `distractors`, `obfuscate`, `shortlist`            |
//! | `variant`      | kind-specific detail: the perturbation, the drift change log and A_new tool specs, the distractors added, the obfuscation mapping, the shortlist fraction |
//!
//! The row's `tools` are the specs the variant was generated against (what a model is shown:
//! A_old for drift, the expanded / obfuscated / shortlisted toolkit otherwise); `output` is the
//! gold for that row (migrated to A_new for drift, renamed for obfuscation) and `gold_answer` is
//! the parent's. Operators ([`perturb`], [`drift`], [`distractors`], [`obfuscate`](mod@obfuscate), [`shortlist`](mod@shortlist)) are pure and seeded: the random
//! stream of an operator on an example is a function of the recipe seed, the operator and the
//! example id only ([`Rng::new`]), so builds are byte-identical and adding rows elsewhere never
//! changes a variant. Counts go to `Build::stats["variants"]`. A whole build computes the stage
//! afresh; sharded builds store each group's rows and counts as one item ([`stored`]), computed
//! by the shard owning the group and only read by the merge ([`apply_with`]).

pub mod distractors;
pub mod drift;
#[cfg(test)]
mod fixtures;
pub mod obfuscate;
pub mod paraphrase;
pub mod perturb;
pub mod shortlist;
pub mod stored;

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

pub use crate::recipe::variants::{
    DistractorsConfig, DriftConfig, PERTURBATIONS, ParaphraseConfig, PerturbConfig, ShortlistConfig, VariantsConfig,
};

use crate::dataset::{Build, Example};
use crate::tools::{Call, as_label_ref};

/// A small deterministic random stream (SplitMix64) seeded from blake3 of the recipe seed and
/// a list of parts (operator, example id, …).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The stream for `seed` and `parts`.
    pub fn new(seed: u64, parts: &[&str]) -> Rng {
        let mut h = blake3::Hasher::new();
        h.update(&seed.to_le_bytes());
        for p in parts {
            h.update(p.as_bytes());
            h.update(&[0]);
        }
        let b = h.finalize();
        Rng(u64::from_le_bytes(b.as_bytes()[..8].try_into().expect("8 bytes")))
    }

    /// The stream whose SplitMix64 state is `state` (no hashing: a fixed, documented seed such
    /// as the bootstrap's in `eval::stats`).
    pub fn from_state(state: u64) -> Rng {
        Rng(state)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }

    /// A seeded Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

/// The texts of every gold argument value of `calls` (strings that are not `$LABEL$`
/// references, numbers in their shortest text forms: `500` for 500.0), recursively through
/// arrays and objects; `initialize_active_data` (the setup step) is skipped.
pub fn gold_value_texts(calls: &[Call]) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(_) if as_label_ref(v).is_some() => {}
            Value::String(s) if !s.trim().is_empty() => out.push(s.clone()),
            Value::Number(n) => {
                if let Some(f) = n.as_f64() {
                    if f.fract() == 0.0 && f.abs() < 1e15 {
                        out.push(format!("{}", f as i64));
                    } else {
                        out.push(n.to_string());
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for c in calls.iter().filter(|c| c.name != "initialize_active_data") {
        for v in c.arguments.values() {
            walk(v, &mut out);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The names of the tools of `e.tools` its gold calls use, in toolkit order.
pub fn gold_tool_names(e: &Example) -> Vec<String> {
    e.tools
        .iter()
        .filter(|t| e.output.iter().any(|c| c.name == t.name))
        .map(|t| t.name.clone())
        .collect()
}

/// A variant row of `parent`: id `<parent>/<suffix>`, `meta` = parent meta + `variant_of`,
/// `variant_kind`, `variant` (detail).
pub fn variant_row(parent: &Example, suffix: &str, kind: &str, detail: Value) -> Example {
    let mut meta: Map<String, Value> = parent
        .meta
        .as_ref()
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta.insert("variant_of".into(), json!(parent.id));
    meta.insert("variant_kind".into(), json!(kind));
    meta.insert("variant".into(), detail);
    Example {
        id: format!("{}/{suffix}", parent.id),
        meta: Some(Value::Object(meta)),
        ..parent.clone()
    }
}

/// Whether a row is a variant (its `meta` has `variant_of`).
pub fn is_variant(e: &Example) -> bool {
    e.meta.as_ref().is_some_and(|m| m.get("variant_of").is_some())
}

fn bump(stats: &mut BTreeMap<String, usize>, key: impl Into<String>) {
    *stats.entry(key.into()).or_insert(0) += 1;
}

/// Runs every enabled operator over the build's examples, appends the variant rows to their
/// parent's group (after the group's examples, in parent order), adds `tools/drift.json` when
/// drift is enabled, and records counts in `build.stats["variants"]`. Nothing is stored; see
/// [`apply_with`].
pub fn apply(build: &mut Build, cfg: &VariantsConfig) {
    apply_with(build, cfg, None);
}

/// [`apply`], each group's variant rows and counts a store item ([`stored`], issue 34): read
/// from `store` when it holds them, otherwise computed when the store's scope lets this build
/// compute the group ([`crate::store::Store::claim`] by group name; stored when the scope is a
/// shard's, for the merge) and left out when it does not (another shard's group; in a merge the
/// item is then named missing). What reads the whole build — the drift plan (recomputed: one
/// pass over the catalog) and the distractor pool (built only when a group is computed here) —
/// is not stored.
pub fn apply_with(build: &mut Build, cfg: &VariantsConfig, store: Option<&crate::store::Store>) {
    let seed = cfg.seed;
    let format = build.recipe.format.clone();
    let mut extra = serde_json::Map::new();

    let drift_plan = cfg.drift.as_ref().map(|d| drift::Drift::plan(build, d, seed));
    if let Some(plan) = &drift_plan {
        build.extra_files.insert("tools/drift.json".into(), {
            let mut b = serde_json::to_vec_pretty(&plan.document()).expect("serialisable");
            b.push(b'\n');
            b
        });
        if let Some(old) = build
            .extra_files
            .get("tools/openapi.json")
            .filter(|_| format == "rest")
            .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        {
            let mut b = serde_json::to_vec_pretty(&drift::a_new_document(&old, plan)).expect("serialisable");
            b.push(b'\n');
            build.extra_files.insert("tools/openapi_new.json".into(), b);
        }
        extra.insert("drift_operators".into(), json!(plan.operator_counts()));
        extra.insert("drifted_tools".into(), json!(plan.tools.len()));
    }
    let pool: std::sync::OnceLock<Option<distractors::DistractorPool>> = std::sync::OnceLock::new();
    let mut total = stored::GroupVariants::default();
    // Each group's units — its question batches ([`Build::item_runs`]: a shard draws a large
    // database's variants batch by batch, issue 34), else the group itself — and, for each unit
    // computed or read here, (its item's index, its variant rows).
    type UnitRows = (Option<usize>, Vec<Example>);
    let mut by_group: Vec<(String, Vec<UnitRows>)> = Vec::new();
    // A merge that reads no row ([`Build::variant_rows_counted`]) counts the stored rows by split.
    let mut counted = build.variant_rows_counted.take();
    for (group, outcome) in &build.groups {
        let units: Vec<(String, Option<usize>, std::ops::Range<usize>)> = match build.item_runs(group) {
            Some(runs) => runs
                .into_iter()
                .enumerate()
                .map(|(n, (item, range))| (item.name.clone(), Some(n), range))
                .collect(),
            None => vec![(group.clone(), None, 0..outcome.examples.len())],
        };
        let mut rows_of = Vec::new();
        for (unit, item, range) in units {
            let key = stored::key(build, &unit);
            // A shard neither reads nor computes another shard's unit: reading every stored
            // unit made a round-two shard's work grow with the units the shards before it had
            // stored.
            let shard = store.filter(|s| matches!(s.scope(), crate::store::Scope::Shard { .. }));
            if shard.is_some_and(|s| !crate::dataset::claim_group(s, &key, &unit)) {
                continue;
            }
            let examples = &outcome.examples[range.clone()];
            let found = match (store, counted.as_mut()) {
                (Some(s), Some(by_unit)) => s.load(&key, stored::GroupVariants::decode_counts).map(|(v, n)| {
                    by_unit.insert(unit.clone(), n);
                    v
                }),
                (s, _) => s.and_then(|s| s.load(&key, |b| stored::GroupVariants::decode(b, examples))),
            };
            let variants = match found {
                Some(v) => v,
                None if shard.is_none() && store.is_some_and(|s| !crate::dataset::claim_group(s, &key, &unit)) => {
                    continue;
                }
                None => {
                    let pool = pool.get_or_init(|| {
                        cfg.distractors
                            .as_ref()
                            .map(|_| distractors::DistractorPool::new(build))
                    });
                    let v = group_variants(examples, cfg, &format, drift_plan.as_ref(), pool.as_ref());
                    if let Some(s) = store.filter(|s| matches!(s.scope(), crate::store::Scope::Shard { .. })) {
                        let _ = s.put(&key, &v.encode(examples));
                    }
                    v
                }
            };
            total.add(&variants);
            rows_of.push((item, variants.rows));
        }
        by_group.push((group.clone(), rows_of));
    }
    // Each unit's variant rows right after its examples (a batch's after the batch's).
    for (group, rows_of) in by_group {
        build.insert_after_runs(&group, rows_of);
    }
    build.variant_rows_counted = counted;
    let mut v = serde_json::Map::new();
    v.insert("seed".into(), json!(seed));
    v.insert("rows".into(), json!(total.counts));
    v.insert("not_generated".into(), json!(total.rejected));
    if cfg.distractors.is_some() {
        v.insert(
            "distractor_candidates_dropped".into(),
            json!({"near_identical": total.near_identical, "answering_the_question": total.answering}),
        );
    }
    if drift_plan.as_ref().is_some_and(|p| p.scope == drift::Scope::Instance) {
        extra.insert("drift_scope".into(), json!("instance"));
        extra.insert("drift_operators".into(), json!(total.instance_ops));
        extra.insert("drifted_tools".into(), json!(total.instance_tools));
    }
    v.extend(extra);
    build.stats.insert("variants".into(), Value::Object(v));
}

/// The variant rows and counts of one group's `examples` (its verified examples; rows already
/// variants are skipped), every enabled operator in turn per example.
fn group_variants(
    examples: &[Example],
    cfg: &VariantsConfig,
    format: &str,
    drift_plan: Option<&drift::Drift>,
    pool: Option<&distractors::DistractorPool>,
) -> stored::GroupVariants {
    let seed = cfg.seed;
    let mut out = stored::GroupVariants::default();
    let (counts, rejected) = (&mut out.counts, &mut out.rejected);
    let rows = &mut out.rows;
    for e in examples.iter().filter(|e| !is_variant(e)) {
        if let Some(p) = &cfg.perturb {
            for kind in &p.kinds {
                match perturb::variant(e, kind, seed) {
                    Ok(v) => {
                        bump(counts, "perturb");
                        rows.push(v);
                    }
                    Err(reason) => bump(rejected, format!("{kind}:{reason}")),
                }
            }
        }
        if let (Some(plan), Some(d_cfg)) = (drift_plan, &cfg.drift) {
            let drawn = match plan.scope {
                drift::Scope::Instance => {
                    let inst = drift::plan_instance(e, d_cfg, seed, format);
                    for (op, n) in inst.operator_counts() {
                        *out.instance_ops.entry(op.to_string()).or_insert(0) += n;
                    }
                    out.instance_tools += inst.tools.len();
                    inst.variant(e)
                }
                drift::Scope::Tool => plan.variant(e),
            };
            match drawn {
                Some(v) => {
                    bump(counts, "drift");
                    rows.push(v)
                }
                None => bump(rejected, "drift:no_drifted_call"),
            }
        }
        if let (Some(d), Some(pool)) = (&cfg.distractors, pool) {
            let (v, dropped) = pool.variant(e, d, seed);
            out.near_identical += dropped.near_identical;
            out.answering += dropped.answering;
            match v {
                Some(v) => {
                    bump(counts, "distractors");
                    rows.push(v)
                }
                None => bump(rejected, "distractors:no_candidate"),
            }
        }
        if cfg.obfuscate {
            bump(counts, "obfuscate");
            rows.push(obfuscate::obfuscate(e));
        }
        if let Some(s) = &cfg.shortlist {
            // Two fractions can draw the same toolkit (a small toolkit rounds both up to its gold
            // tools): the row is written once, for the first fraction, the others counted.
            let mut drawn: Vec<(f64, Vec<String>)> = Vec::new();
            for f in &s.fractions {
                let pct = (f * 100.0).round();
                match shortlist::shortlist(e, *f, seed) {
                    Some(v) => {
                        let names: Vec<String> = v.tools.names().map(str::to_string).collect();
                        if let Some((first, _)) = drawn.iter().find(|(_, n)| *n == names) {
                            bump(
                                rejected,
                                format!("shortlist_{pct}:same_as_shortlist_{}", (first * 100.0).round()),
                            );
                            continue;
                        }
                        drawn.push((*f, names));
                        bump(counts, "shortlist");
                        rows.push(v)
                    }
                    None => bump(rejected, format!("shortlist_{pct}:not_smaller_than_toolkit")),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<crate::recipe::Recipe, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.toml");
        std::fs::write(
            &path,
            format!("name = \"r\"\ndescription = \"d\"\nformat = \"slot\"\nsource = \"s\"\nsplit = \"dev\"\n{text}"),
        )
        .unwrap();
        crate::recipe::Recipe::load(&path).map_err(|e| e.to_string())
    }

    #[test]
    fn recipe_section_defaults_and_errors() {
        let r = load("[variants]\nseed = 3\n[variants.drift]\n[variants.perturb]\n").unwrap();
        let v = r.variants.unwrap();
        assert_eq!(v.seed, 3);
        assert_eq!(v.drift.unwrap().operators.len(), 6);
        assert_eq!(v.perturb.unwrap().kinds, PERTURBATIONS.map(String::from).to_vec());
        assert!(v.shortlist.is_none() && !v.obfuscate);
        let err = load("[variants.drift]\noperators = [\"rename\"]\n").unwrap_err();
        assert!(
            err.contains("variants.drift.operators") && err.contains("parameter_rename"),
            "{err}"
        );
        let err = load("[variants.drift]\nweights = { rename = 0.5 }\n").unwrap_err();
        assert!(
            err.contains("variants.drift.weights") && err.contains("rename"),
            "{err}"
        );
        let r = load("[variants.drift]\nrate = 0.2\nweights = { type_drift = 0.9 }\n").unwrap();
        let d = r.variants.unwrap().drift.unwrap();
        assert_eq!((d.probability("type_drift"), d.probability("default_flip")), (0.9, 0.2));
        let err = load("[variants]\nsede = 1\n").unwrap_err();
        assert!(err.contains("sede"), "{err}");
        assert!(
            load("[variants.shortlist]\nfractions = [1.5]\n")
                .unwrap_err()
                .contains("fractions")
        );
        assert!(load("").unwrap().variants.is_none());
    }

    #[test]
    fn rng_is_seeded_by_parts() {
        let mut a = Rng::new(1, &["x", "y"]);
        let mut b = Rng::new(1, &["x", "y"]);
        let mut c = Rng::new(1, &["xy"]);
        let (x, y, z) = (a.next_u64(), b.next_u64(), c.next_u64());
        assert_eq!(x, y);
        assert_ne!(x, z);
        assert!((0..100).all(|_| a.below(7) < 7));
    }

    /// Issue 45: a toolkit of 4 tools with one gold tool shortlists to the gold tool alone at 10%
    /// and at 25%; slot-spider-variants held 361 such exact duplicates. One row, the other counted.
    #[test]
    fn equal_shortlists_of_two_fractions_are_written_once_and_counted() {
        let cfg = VariantsConfig {
            shortlist: Some(crate::recipe::variants::ShortlistConfig {
                fractions: vec![0.1, 0.25, 0.5],
            }),
            ..VariantsConfig::default()
        };
        let out = group_variants(&[fixtures::example()], &cfg, "slot", None, None);
        let ids: Vec<&str> = out.rows.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["d/1/shortlist-10", "d/1/shortlist-50"]);
        assert_eq!(out.counts["shortlist"], 2);
        assert_eq!(out.rejected["shortlist_25:same_as_shortlist_10"], 1);
    }
}
