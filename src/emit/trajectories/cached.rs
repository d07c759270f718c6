//! The trajectories of a build, one store entry per group (database), like the compile stages
//! (issue 17): an `out/`-only rebuild reads them back and writes the files, it does not execute
//! every call again.
//!
//! An entry is keyed ([`StageKey`], stage `emit-trajectories`) by everything a trajectory is a
//! function of: the group's verified examples (their JSON), the dataset catalog (references
//! resolve through it), the `[trajectories]` knobs, the family, the database file's hash, the
//! REST endpoints (`tools/endpoints.json`) and the code fingerprint. Its payload is the JSON
//! list of [`Line`]s, one per verified example in group order; an entry that does not decode
//! or whose length differs is recomputed.

use std::collections::HashMap;

use anyhow::Result;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::dataset::{Build, Example, code_fingerprint};
use crate::store::{Lookup, StageKey, Store};

/// Version of the stored trajectories; bump when a trajectory's text changes for the same inputs.
pub const EMIT_TRAJECTORIES_VERSION: u32 = 1;

/// One verified example's trajectory lines.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// The clean trajectory's JSON line (no newline), `None` when skipped.
    pub clean: Option<String>,
    /// The faulted copy's JSON line, when the example has one and it is written.
    pub faulted: Option<String>,
    /// Skip reasons ([`super::OVER_SIZE_CAP`], [`super::NO_MODEL_CALLS`]), one per skip.
    pub skipped: Vec<String>,
}

impl From<super::Built> for Line {
    fn from(b: super::Built) -> Line {
        Line {
            clean: b.clean,
            faulted: b.faulted,
            skipped: b.skipped.into_iter().map(str::to_string).collect(),
        }
    }
}

/// Every verified example's [`Line`], by the example's address in `build.groups`.
pub type Lines = HashMap<usize, Line>;

/// Whether an example gets trajectories: verified rows, not variant rows (drifted, obfuscated, …
/// calls are not directly executable).
pub fn is_original(e: &Example) -> bool {
    e.meta.as_ref().is_none_or(|m| m.get("variant_of").is_none())
}

fn hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// The [`Line`]s of every group of `build`, groups in parallel, each read from `store` when it
/// holds them and otherwise computed by `compute` (the group's verified examples in order → one
/// line each) and stored. Errors: `compute`'s.
pub fn group_lines(
    build: &Build,
    store: Option<&Store>,
    compute: impl Fn(&[&Example]) -> Result<Vec<Line>> + Sync,
) -> Result<Lines> {
    let catalog = hex(&serde_json::to_vec(&build.catalog).expect("serialise"));
    let endpoints = build
        .extra_files
        .get("tools/endpoints.json")
        .map_or_else(|| "none".to_string(), |b| hex(b));
    let config =
        json!({"format": build.recipe.format, "trajectories": build.recipe.trajectories, "code": code_fingerprint()});
    let per_group: Vec<Vec<(usize, Line)>> = build
        .groups
        .par_iter()
        .map(|(group, outcome)| -> Result<Vec<(usize, Line)>> {
            let originals: Vec<&Example> = outcome.examples.iter().filter(|e| is_original(e)).collect();
            if originals.is_empty() {
                return Ok(Vec::new());
            }
            let key = StageKey {
                stage: "emit-trajectories".into(),
                version: EMIT_TRAJECTORIES_VERSION,
                config: config.clone(),
                inputs: vec![
                    hex(&serde_json::to_vec(&originals).expect("serialise")),
                    catalog.clone(),
                    build
                        .source_hashes
                        .get(&format!("database/{group}"))
                        .cloned()
                        .unwrap_or_else(|| "none".into()),
                    endpoints.clone(),
                ],
            };
            let stored = store.and_then(|s| match s.get(&key) {
                Lookup::Hit(bytes) => serde_json::from_slice::<Vec<Line>>(&bytes)
                    .ok()
                    .filter(|l| l.len() == originals.len()),
                _ => None,
            });
            let lines = match stored {
                Some(lines) => lines,
                None => {
                    let lines = compute(&originals)?;
                    if let Some(s) = store {
                        let _ = s.put(&key, &serde_json::to_vec(&lines).expect("serialise"));
                    }
                    lines
                }
            };
            Ok(originals
                .iter()
                .map(|e| *e as *const Example as usize)
                .zip(lines)
                .collect())
        })
        .collect::<Result<_>>()?;
    Ok(per_group.into_iter().flatten().collect())
}
