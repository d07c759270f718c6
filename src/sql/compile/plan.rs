//! The plan of a sharded text-to-SQL build (issue 34 item 3): every database file's hash,
//! computed once (`toolforge build RECIPE --plan`) and stored, so a shard hashes only its own
//! databases and a merge hashes none.
//!
//! The plan entry is a store entry (stage `plan-<format>`) keyed by the recipe (its canonical
//! JSON), the source manifest's name and format, the code fingerprint and the blake3 of the
//! questions file: every process of one build computes the key from what it reads anyway, and a
//! changed recipe, corpus questions or executable finds no plan. Its payload lists each
//! database's file length and blake3 ([`PlanEntry`]).
//!
//! Who trusts it: a shard hashes its own databases itself and fails when one differs from the
//! plan ([`hashes`]: the file is named with the hint to re-plan), so a stale plan never
//! gives a shard's own item a stale key; a merge takes the plan's hash of a database whose length
//! is the planned one (it reads entries only: a changed file it would not notice is a changed
//! file no shard computed), and hashes the others.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::batch::Batch;
use crate::corpus::Question;
use crate::dataset::{BuildError, code_fingerprint};
use crate::recipe::{Recipe, ResolvedSource};
use crate::store::plan::{Assignment, Item};
use crate::store::{Scope, StageKey, Store};

/// Version of the plan entry's layout.
const PLAN_VERSION: u32 = 1;

/// One database file as planned: its length and blake3 (`None`: it did not read).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(super) struct PlannedFile {
    pub bytes: u64,
    pub hash: Option<String>,
}

/// The payload of a plan entry: every database's file, by database id.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct PlanEntry {
    pub databases: BTreeMap<String, PlannedFile>,
}

/// The key of the plan entry of `recipe` over `source` whose questions file hashes to
/// `questions_hash` (module docs).
pub(super) fn plan_key(recipe: &Recipe, source: &ResolvedSource, questions_hash: &str) -> StageKey {
    let recipe_json = serde_json::to_vec(recipe).expect("serialise");
    StageKey {
        stage: format!("plan-{}", recipe.format),
        version: PLAN_VERSION,
        config: json!({"recipe": blake3::hash(&recipe_json).to_hex().to_string(), "source": source.manifest.name, "format": source.manifest.format, "code": code_fingerprint()}),
        inputs: vec![questions_hash.to_string()],
    }
}

/// Reads the plan entry under `key` (one store read), `None` when there is none or it does not
/// decode (then it is removed, [`Store::load`]).
pub(super) fn read(store: &Store, key: &StageKey) -> Option<PlanEntry> {
    store.load(key, |b| serde_json::from_slice(b).map_err(|e| e.to_string()))
}

/// Stores the plan entry of `hashes` (every database of the build, `paths` their files) under
/// `key` when none is stored: what a shard that had to hash every database itself (a round-two
/// shard without `--plan`) leaves for the other shards and the merge, so they hash only their
/// own ("or the first shard", issue 34 item 3). Put-if-absent; every writer writes the same
/// bytes. A failed write is only a lost shortcut (the store records the error).
pub(super) fn store_from_shard(
    store: &Store,
    key: &StageKey,
    hashes: &BTreeMap<String, Option<String>>,
    paths: &BTreeMap<String, PathBuf>,
) {
    let entry = entry_of(hashes, paths);
    let _ = store.put(key, &serde_json::to_vec(&entry).expect("serialise"));
}

/// The plan entry of the database `hashes` (by database id), each file's length read from its
/// path in `paths` (0 when absent or unreadable).
fn entry_of(hashes: &BTreeMap<String, Option<String>>, paths: &BTreeMap<String, PathBuf>) -> PlanEntry {
    let databases = hashes
        .iter()
        .map(|(db_id, hash)| {
            let bytes = paths.get(db_id).map_or(0, |p| file_len(p));
            (
                db_id.clone(),
                PlannedFile {
                    bytes,
                    hash: hash.clone(),
                },
            )
        })
        .collect();
    PlanEntry { databases }
}

/// The length of the file at `path` (0 when it cannot be read).
pub(super) fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The hashes of the databases `dbs` (id, file, whether this shard owns an item of it) this
/// build computes or reads items of, each file hashed once, in parallel, and checked against or
/// taken from the plan `plan` as the store's scope says (module docs): a merge, and a shard
/// reading another shard's database (round two), take the plan's hash of a file with the
/// planned length; a shard's own database is hashed and checked; every hash made is counted
/// ([`Store::note_hashed`]). `None` for a file that does not read.
///
/// Errors: a shard's own database that differs from the plan ([`BuildError::StalePlan`], naming
/// the file and saying to re-plan).
pub(super) fn hashes(
    store: &Store,
    plan: Option<&PlanEntry>,
    dbs: Vec<(String, PathBuf, bool)>,
) -> Result<BTreeMap<String, Option<String>>, BuildError> {
    dbs.into_par_iter()
        .map(|(db_id, path, own)| {
            let planned = plan.and_then(|p| p.databases.get(&db_id));
            if store.scope() == Scope::StoredOnly || !own {
                if let Some(p) = planned.filter(|p| p.bytes == file_len(&path)) {
                    return Ok((db_id, p.hash.clone()));
                }
            }
            let hash = super::key::file_hash(&path).ok();
            if hash.is_some() {
                store.note_hashed(file_len(&path));
            }
            match planned {
                Some(p) if matches!(store.scope(), Scope::Shard { .. }) && p.hash != hash => {
                    Err(BuildError::StalePlan {
                        detail: format!(
                            "{}: the file is not the one planned (blake3 {} in the plan, {} now); re-plan with `toolforge build RECIPE --plan` before running the shards",
                            path.display(),
                            short(p.hash.as_deref()),
                            short(hash.as_deref())
                        ),
                        path,
                    })
                }
                _ => Ok((db_id, hash)),
            }
        })
        .collect()
}

fn short(h: Option<&str>) -> String {
    h.map_or_else(|| "none (unreadable)".into(), |h| format!("{}…", &h[..12.min(h.len())]))
}

/// Question-equivalents a batch costs beyond its questions (opening the database, loading its
/// schema, the numeric-reading copies of its tables), measured on Spider dev (CPU of each
/// database alone, one item against batches of 16: wta_1 +0.035 s a batch, 5 questions' worth;
/// world_1 and car_1 about 4).
const BATCH_OVERHEAD: u64 = 4;

/// The stage items of a build ([`super::batch`]: every database's question batches, in database
/// then batch order) and each one's estimated cost: the database file's bytes (a stat, no
/// hashing; at least 1) × (the batch's questions + [`BATCH_OVERHEAD`]). Measured on Spider dev,
/// a database's CPU is about 7e-9 s × bytes × questions (4e-9 to 1.4e-8 over its 20 databases).
pub(super) fn items<'q>(
    recipe: &Recipe,
    source: &ResolvedSource,
    by_db: &'q BTreeMap<String, Vec<Question>>,
) -> (Vec<Batch<'q>>, Vec<Item>) {
    let whole = recipe.format == "rest";
    let mut batches = Vec::new();
    let mut items = Vec::new();
    for (db_id, qs) in by_db {
        let bytes = file_len(&super::key::db_path(source, db_id)).max(1);
        for b in super::batch::batches(db_id, qs, whole) {
            items.push(Item {
                name: b.name.clone(),
                group: db_id.clone(),
                cost: bytes.saturating_mul(b.questions.len() as u64 + BATCH_OVERHEAD),
            });
            batches.push(b);
        }
    }
    (batches, items)
}

/// `toolforge build RECIPE --plan [--shards N]`: hashes every database file of the recipe's
/// source once, stores the plan entry (replacing an older one under the same key: a database
/// may have changed) and returns what it did with the assignment over `shards` shards: each
/// shard's items and estimated cost, the worst over the average, then one line per item
/// (`item <name> database <db> shard <s> cost <c> digest <key digest>`).
///
/// Errors: the questions or `tables.json` do not read; the store write fails.
pub fn plan(recipe: &Recipe, source: &ResolvedSource, store: &Store, shards: u64) -> Result<String, BuildError> {
    let inputs = super::key::inputs(source)?;
    let questions_hash = super::key::file_hash(&source.questions)?;
    let paths: BTreeMap<String, PathBuf> = inputs
        .by_db
        .keys()
        .map(|db_id| (db_id.clone(), super::key::db_path(source, db_id)))
        .collect();
    let hashes: BTreeMap<String, Option<String>> = paths
        .par_iter()
        .map(|(db_id, path)| {
            let hash = super::key::file_hash(path).ok();
            if hash.is_some() {
                store.note_hashed(file_len(path));
            }
            (db_id.clone(), hash)
        })
        .collect();
    let entry = entry_of(&hashes, &paths);
    let key = plan_key(recipe, source, &questions_hash);
    store.replace(&key, &serde_json::to_vec(&entry).expect("serialise"))?;
    let (batches, items) = items(recipe, source, &inputs.by_db);
    let a = Assignment::pack(&items, shards);
    let digests: Vec<String> = batches
        .par_iter()
        .map(|b| {
            let hash = entry.databases.get(b.db_id).and_then(|f| f.hash.clone());
            super::key::db_key(recipe, source, &inputs.spider, b.db_id, &b.questions, hash)
                .key
                .digest()
        })
        .collect();
    let mut lines = vec![format!(
        "plan of {}: {} databases hashed ({} bytes), {} items; stored in {} as {} {}…",
        recipe.name,
        entry.databases.len(),
        store.hashed(),
        items.len(),
        store.describe(),
        key.stage,
        &key.digest()[..12]
    )];
    for (s, load) in a.loads().iter().enumerate() {
        let n = a.items().values().filter(|&&x| x == s as u64).count();
        lines.push(format!("shard {s}/{shards}: {n} items, estimated cost {load}"));
    }
    lines.push(format!(
        "worst/average shard (estimated cost): {:.3}",
        a.worst_over_average()
    ));
    for (it, digest) in items.iter().zip(&digests) {
        let s = a.shard(&it.name).unwrap_or(0);
        lines.push(format!(
            "item {} database {} shard {s} cost {} digest {digest}",
            it.name, it.group, it.cost
        ));
    }
    Ok(lines.join("\n"))
}
