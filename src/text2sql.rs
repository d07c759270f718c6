//! Text-to-SQL families (`slot`, `sel`, `rest`): one compile stage per database (lower,
//! execute, verify), cached in the store.
//!
//! The compile stage of one database is a pure function of: the stage version, the recipe knobs
//! it reads, the question records of that database, the SQLite file's bytes and the column
//! descriptions. Databases run in parallel (rayon), and so do the questions of one database.

use std::collections::BTreeMap;
use std::path::Path;

use rayon::prelude::*;

use crate::corpus::{self, Descriptions, Question};
use crate::pipeline::{Build, BuildError, Drop, Example, Outcome, build_key, code_fingerprint, progress_bar};
use crate::recipe::{Recipe, ResolvedSource};
use crate::sql::{self, schema::Schema};
use crate::store::{Lookup, StageKey, Store, hash_file};
use crate::tools::catalog::{KeyDescription, slot_tools};
use crate::tools::executor::Executor;
use crate::tools::table::{self, safe_name};
use crate::verify::answers_match;

/// Version of the compile stage; bump when its output for the same inputs changes.
pub const COMPILE_VERSION: u32 = 2;

/// Runs the per-database compile stages of a text-to-SQL recipe (from the store where possible).
pub fn compile(recipe: Recipe, source: ResolvedSource, store: &Store, progress: bool) -> Result<Build, BuildError> {
    let (questions, bad_records) = corpus::read_questions(&source.questions, &source.manifest.format)?;
    let spider = match &source.tables {
        Some(p) => corpus::spider_descriptions(p)?,
        None => BTreeMap::new(),
    };
    let mut by_db: BTreeMap<String, Vec<Question>> = BTreeMap::new();
    for q in questions {
        by_db.entry(q.db_id.clone()).or_default().push(q);
    }
    let mut source_hashes = BTreeMap::new();
    source_hashes.insert("questions".to_string(), hash_file(&source.questions)?);
    let bar = progress_bar(progress, by_db.len() as u64, "databases");
    let results: Vec<(String, Outcome, String, Option<String>, bool)> = by_db
        .par_iter()
        .map(|(db_id, qs)| {
            let db_dir = source.databases.join(db_id);
            let db_path = db_dir.join(format!("{db_id}.sqlite"));
            let db_hash = hash_file(&db_path).ok();
            let descriptions = spider.get(db_id).cloned().unwrap_or_else(|| corpus::bird_descriptions(&db_dir));
            let key = StageKey {
                stage: format!("compile-{}", recipe.format),
                version: COMPILE_VERSION,
                config: serde_json::json!({"dataset": recipe.name, "split": recipe.split, "keep_empty_answers": recipe.keep_empty_answers, "code": code_fingerprint()}),
                inputs: vec![
                    blake3::hash(&serde_json::to_vec(qs).expect("serialise")).to_hex().to_string(),
                    db_hash.clone().unwrap_or_else(|| "missing".into()),
                    blake3::hash(&serde_json::to_vec(&descriptions).expect("serialise")).to_hex().to_string(),
                ],
            };
            let digest = key.digest();
            if let Lookup::Hit(bytes) = store.get(&key) {
                if let Ok(outcome) = serde_json::from_slice::<Outcome>(&bytes) {
                    bar.inc(1);
                    return (db_id.clone(), outcome, digest, db_hash, true);
                }
            }
            let outcome = compile_db(&recipe, &source, db_id, qs, &db_path, db_hash.is_some(), &descriptions);
            let _ = store.put(&key, &serde_json::to_vec(&outcome).expect("serialise"));
            bar.inc(1);
            (db_id.clone(), outcome, digest, db_hash, false)
        })
        .collect();
    bar.finish_and_clear();
    let mut outcomes = BTreeMap::new();
    let mut digests = Vec::new();
    let (mut hits, mut misses) = (0, 0);
    for (db, outcome, digest, db_hash, hit) in results {
        if let Some(h) = db_hash {
            source_hashes.insert(format!("database/{db}"), h);
        }
        if hit {
            hits += 1
        } else {
            misses += 1
        }
        digests.push(digest);
        outcomes.insert(db, outcome);
    }
    let key = build_key(&recipe, &bad_records, &digests);
    Ok(Build {
        recipe,
        source,
        group_kind: "database",
        groups: outcomes,
        bad_records,
        source_hashes,
        build_key: key,
        cache_hits: hits,
        cache_misses: misses,
        catalog: slot_tools(None),
        extra_files: BTreeMap::new(),
        stats: serde_json::Map::new(),
    })
}

fn drop_all(recipe: &Recipe, qs: &[Question], reason: &str, detail: &str) -> Outcome {
    Outcome {
        attempted: qs.len(),
        examples: vec![],
        drops: qs
            .iter()
            .map(|q| Drop {
                id: format!("{}/{}", recipe.name, q.id),
                group: q.db_id.clone(),
                reason: reason.into(),
                detail: detail.into(),
            })
            .collect(),
    }
}

/// Lowers, executes and verifies every question of one database.
fn compile_db(
    recipe: &Recipe,
    source: &ResolvedSource,
    db_id: &str,
    qs: &[Question],
    db_path: &Path,
    exists: bool,
    descriptions: &Descriptions,
) -> Outcome {
    if !exists {
        return drop_all(
            recipe,
            qs,
            "db_missing",
            &format!("database file {} is absent", db_path.display()),
        );
    }
    let schema = match table::open_read_only(db_path).and_then(|c| Schema::load(&c)) {
        Ok(s) => s,
        Err(e) => {
            return drop_all(
                recipe,
                qs,
                "db_invalid",
                &format!("{}: not a readable SQLite database: {e}", db_path.display()),
            );
        }
    };
    let executor = Executor::new(&source.databases);
    let rel_db = format!("{db_id}/{db_id}.sqlite");
    let split = recipe.split.clone().unwrap_or_default();
    let results: Vec<Result<Example, Drop>> = qs
        .par_iter()
        .map_init(
            || table::open_read_only(db_path),
            |conn, q| {
                let id = format!("{}/{}", recipe.name, q.id);
                let drop = |reason: String, detail: String| Drop {
                    id: id.clone(),
                    group: q.db_id.clone(),
                    reason,
                    detail,
                };
                let conn = conn.as_ref().map_err(|e| drop("db_invalid".into(), e.to_string()))?;
                let gold = table::query_rows(conn, &q.sql).map_err(|e| drop("sql_error".into(), e.to_string()))?;
                let stmt = sql::parse(&q.sql).map_err(|e| drop(e.reason(), e.to_string()))?;
                let plan = sql::plan::build(&stmt, &schema).map_err(|e| drop(e.reason(), e.to_string()))?;
                let lowered = sql::slot::lower(&plan, &rel_db).map_err(|e| drop(e.reason(), e.to_string()))?;
                let candidate = executor
                    .run(&lowered.calls)
                    .map_err(|e| drop("execution_error".into(), e.to_string()))?;
                let ordered = !plan.order_by.is_empty();
                if !answers_match(&gold, &candidate, ordered) {
                    return Err(drop(
                        "mismatch".into(),
                        format!("gold {} rows, calls {} rows", gold.len(), candidate.len()),
                    ));
                }
                if gold.is_empty() && !recipe.keep_empty_answers {
                    return Err(drop("empty_gold_answer".into(), "the gold SQL returns no rows".into()));
                }
                let keys = key_descriptions(&plan, &schema, descriptions);
                Ok(Example {
                    id: id.clone(),
                    dataset: recipe.name.clone(),
                    split: split.clone(),
                    db_id: Some(q.db_id.clone()),
                    input: q.question.clone(),
                    evidence: q.evidence.clone(),
                    sql: Some(q.sql.clone()),
                    output: lowered.calls,
                    gold_answer: Some(gold),
                    ordered,
                    tools: slot_tools(Some(&keys)),
                    key_values_and_descriptions: keys,
                    difficulty: q.difficulty.clone(),
                    meta: None,
                })
            },
        )
        .collect();
    let mut out = Outcome {
        attempted: qs.len(),
        ..Outcome::default()
    };
    for r in results {
        match r {
            Ok(e) => out.examples.push(e),
            Err(d) => out.drops.push(d),
        }
    }
    out
}

/// The joined table's columns, in join order, with descriptions and types.
fn key_descriptions(plan: &sql::plan::QueryPlan, schema: &Schema, descriptions: &Descriptions) -> Vec<KeyDescription> {
    let mut out: Vec<KeyDescription> = Vec::new();
    for t in &plan.tables {
        let Some((table, cols)) = schema.table(&t.table) else {
            continue;
        };
        for c in cols {
            let key_name = safe_name(&t.prefix, c);
            if out.iter().any(|k| k.key_name.eq_ignore_ascii_case(&key_name)) {
                continue;
            }
            let description = descriptions
                .get(&table.to_lowercase())
                .and_then(|d| d.get(&c.to_lowercase()))
                .filter(|d| !d.is_empty())
                .cloned()
                .unwrap_or_else(|| format!("{c} of {table}"));
            out.push(KeyDescription {
                key_name,
                description,
                dtype: schema.dtype(table, c).into(),
            });
        }
    }
    out
}
