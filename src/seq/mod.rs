//! API-BLEND sequence datasets (`seq` recipes): SeqATIS, SeqSNIPS, SeqTopV2, SeqSGD, SeqMultiWOZ
//! converted from the real annotations.
//!
//! Each source format has one converter module with the same two entry points:
//! `inputs(&ResolvedSource) -> Vec<PathBuf>` (every file the conversion reads, hashed into the
//! stage key) and `convert(&ResolvedSource, split: Option<&str>) -> Result<Conversion, CorpusError>`.
//! The whole conversion is one store stage keyed by the recipe and the input hashes. The stage
//! keeps each row's toolkit as references to the catalog; [`compile`] then drops rows identical
//! to an earlier row of their split but for id and meta (`duplicate_row`: SGD dialogues that
//! convert to one templated request and its calls) and resolves the references to the
//! catalog's full specs, so the rows and the trajectories carry every tool's JSON Schema.
//!
//! # `ordered`
//!
//! [`Example::ordered`](crate::dataset::Example) says whether the order of the gold calls is
//! part of the answer. The rule, per family:
//!
//! - **SeqTopV2**: true exactly when a call consumes an earlier call's result (an argument is a
//!   `$label$` reference to a nested intent's call), so the calls must run in dependency order.
//! - **SeqSGD, SeqMultiWOZ**: true on every row with two or more calls: they are the calls the
//!   system executed, in dialogue order (a booking follows the search that found its venue).
//! - **SeqATIS, SeqSNIPS**: false: the clauses of a MixATIS/MixSNIPS utterance are independent
//!   requests joined by "and"; no call reads another's result and any order serves the user.
//!   The output still lists them in utterance order.
//!
//! A single-call row is never `ordered` (there is nothing to order).

pub mod multiwoz;
pub mod nlu;
pub mod request;
pub mod sgd;
pub mod stats;
pub mod topv2;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::corpus::{BadRecord, CorpusError};
use crate::dataset::{Build, BuildError, Outcome, SplitStage, build_key, code_fingerprint, hash_inputs, split_build};
use crate::recipe::{Recipe, ResolvedSource};
use crate::store::{StageKey, Store};
use crate::tools::ToolSpec;

/// Version of the seq conversion stage; bump when its output for the same inputs changes.
pub const SEQ_VERSION: u32 = 2;

pub use crate::recipe::seq::SeqKnobs;

/// What a converter produces.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversion {
    /// Outcomes per split (`train`, `dev`, `test`, …), examples in source order.
    pub splits: BTreeMap<String, Outcome>,
    /// Skipped malformed input records (file, record index, what was expected).
    pub bad_records: Vec<BadRecord>,
    /// The dataset-level tool catalog.
    pub catalog: Vec<ToolSpec>,
    /// Report numbers (calls per example, arguments per call, ungrounded values, …).
    pub stats: serde_json::Map<String, serde_json::Value>,
    /// SGD and MultiWOZ: the multi-turn dialogue trajectories (issue 45).
    #[serde(default)]
    pub dialogues: Option<crate::dataset::dialogue::Dialogues>,
}

fn inputs(source: &ResolvedSource) -> Vec<PathBuf> {
    match source.manifest.format.as_str() {
        "mixatis" | "mixsnips" => nlu::inputs(source),
        "topv2" => topv2::inputs(source),
        "sgd" => sgd::inputs(source),
        "multiwoz" => multiwoz::inputs(source),
        _ => vec![source.questions.clone()],
    }
}

fn convert(source: &ResolvedSource, split: Option<&str>, knobs: &SeqKnobs) -> Result<Conversion, CorpusError> {
    match source.manifest.format.as_str() {
        "mixatis" | "mixsnips" => nlu::convert(source, split),
        "topv2" => topv2::convert(source, split),
        "sgd" => sgd::convert_with(source, split, knobs),
        "multiwoz" => multiwoz::convert_with(source, split, knobs),
        other => Err(CorpusError::Malformed {
            path: source.root.clone(),
            message: format!("no seq converter for source format {other:?}"),
        }),
    }
}

/// The stage key of a seq recipe and the hash of each input file (relative path → blake3).
fn stage_key(recipe: &Recipe, source: &ResolvedSource) -> Result<(StageKey, BTreeMap<String, String>), BuildError> {
    let source_hashes = hash_inputs(source, &inputs(source))?;
    let key = StageKey {
        stage: format!("seq-{}", source.manifest.format),
        version: SEQ_VERSION,
        config: serde_json::json!({"dataset": recipe.name, "split": recipe.split, "code": code_fingerprint(), "knobs": recipe.seq.clone().unwrap_or_default().conversion_key()}),
        inputs: source_hashes.values().cloned().collect(),
    };
    Ok((key, source_hashes))
}

/// The build key of a seq recipe, computed from the input hashes alone (no conversion), so an
/// up-to-date output is recognised without loading the stage. Bad records are a function of the
/// inputs, so the stage digest covers them.
pub fn quick_build_key(recipe: &Recipe, source: &ResolvedSource) -> Result<String, BuildError> {
    let (key, _) = stage_key(recipe, source)?;
    Ok(build_key(recipe, &[], &[key.digest()]))
}

/// Whether the recipe's requests are LLM-written (a dialogue source and a resolvable endpoint),
/// so the build key depends on the answers and cannot be known from the inputs alone.
pub fn writes_requests(recipe: &Recipe, source: &ResolvedSource) -> bool {
    matches!(source.manifest.format.as_str(), "sgd" | "multiwoz")
        && crate::llm::resolve(&recipe.seq.clone().unwrap_or_default().llm.unwrap_or_default()).is_ok()
}

/// Replaces every row's toolkit of references ([`ToolSpec::reference`], how the converters and
/// the store keep the dataset's API list) by the catalog's full specs, so the rows' `tools` and
/// the trajectories carry each tool's JSON Schema (issue 45), not its name. The rows sharing a
/// toolkit (by its names) share the resolved one ([`crate::tools::Toolkit::id`]): one list per
/// distinct toolkit, each serialised once by the emitters. A reference the catalog lacks stays a
/// reference.
fn resolve_references(splits: &mut BTreeMap<String, Outcome>, catalog: &[ToolSpec]) {
    let by_name: std::collections::HashMap<&str, &ToolSpec> = catalog.iter().map(|t| (t.name.as_str(), t)).collect();
    // By the list of names: a conversion read back from the store gives every row its own list.
    let mut resolved: std::collections::HashMap<Vec<String>, crate::tools::Toolkit> = std::collections::HashMap::new();
    for e in splits.values_mut().flat_map(|o| &mut o.examples) {
        if !e.tools.has_references() {
            continue;
        }
        let names: Vec<String> = e.tools.names().map(str::to_string).collect();
        let full = resolved.entry(names).or_insert_with(|| {
            e.tools
                .iter()
                .map(|t| match by_name.get(t.name.as_str()) {
                    Some(spec) if t.is_reference() => (*spec).clone(),
                    _ => t.clone(),
                })
                .collect()
        });
        e.tools = full.clone();
    }
}

/// Runs (or loads from the store) the conversion of a seq recipe.
pub fn compile(recipe: Recipe, source: ResolvedSource, store: &Store) -> Result<Build, BuildError> {
    let (key, source_hashes) = stage_key(&recipe, &source)?;
    let digest = key.digest();
    // An entry that does not decode is removed and recomputed (`Store::load`).
    let stored = store.load(&key, |b| {
        serde_json::from_slice::<Conversion>(b).map_err(|e| e.to_string())
    });
    let hit = stored.is_some();
    let conversion = match stored {
        Some(c) => c,
        None => {
            if !store.claim(&key, "conversion") {
                return Err(BuildError::Unclaimed { stage: key.stage });
            }
            let c = convert(
                &source,
                recipe.split.as_deref(),
                &recipe.seq.clone().unwrap_or_default(),
            )?;
            store.put(&key, &serde_json::to_vec(&c).expect("serialise"))?;
            c
        }
    };
    let build_key = build_key(&recipe, &[], &[digest]);
    let dialogues = conversion.dialogues.map(|mut d| {
        for t in d.splits.values_mut().flatten() {
            t.id = format!("{}/{}", recipe.name, t.id);
        }
        for drop in d.drops.values_mut().flatten() {
            drop.id = format!("{}/{}", recipe.name, drop.id);
        }
        d
    });
    let mut build = split_build(
        recipe,
        source,
        SplitStage {
            splits: conversion.splits,
            bad_records: conversion.bad_records,
            catalog: conversion.catalog,
            extra_files: BTreeMap::new(),
            stats: conversion.stats,
            source_hashes,
            build_key,
            hit,
        },
    );
    // Two source items can convert to the same row (SGD dialogues to one templated request and
    // its calls): one is kept, the others are drops (`duplicate_row`).
    for (split, outcome) in build.groups.iter_mut() {
        outcome.drop_exact_duplicates(split);
    }
    resolve_references(&mut build.groups, &build.catalog);
    if let Some(d) = &dialogues {
        // After the ids got their dataset prefix: the report names dropped dialogues by id.
        build.stats.insert("dialogue_trajectories".into(), d.counts());
        build
            .stats
            .insert("dialogue_trajectory_drop_examples".into(), d.drop_examples());
    }
    build.dialogues = dialogues;
    Ok(build)
}
