//! The build: recipe → source → per-database `compile-slot` stage (lower, execute, verify),
//! cached in the store → emit.
//!
//! The compile stage of one database is a pure function of: the stage version, the recipe knobs
//! it reads, the question records of that database, the SQLite file's bytes and the column
//! descriptions. Databases run in parallel (rayon), and so do the questions of one database.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::corpus::{self, BadRecord, Descriptions, Question};
use crate::recipe::{Recipe, ResolvedSource, SourceManifest};
use crate::sql::{self, schema::Schema};
use crate::store::{Lookup, StageKey, Store, hash_file};
use crate::tools::catalog::{KeyDescription, slot_tools};
use crate::tools::executor::Executor;
use crate::tools::table::{self, safe_name};
use crate::tools::{Call, ToolSpec};
use crate::verify::{Answer, answers_match};

/// Version of the compile stage; bump when its output for the same inputs changes.
pub const COMPILE_VERSION: u32 = 1;

/// Fingerprint of the running toolforge build: blake3 of its executable, so that any code
/// change invalidates stage results even when a `*_VERSION` bump was forgotten.
pub fn code_fingerprint() -> &'static str {
    static FP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FP.get_or_init(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| hash_file(&p).ok())
            .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string())
    })
}

/// One verified example (a dataset row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Example {
    /// `<dataset>/<source item id>`.
    pub id: String,
    /// Dataset (recipe) name.
    pub dataset: String,
    /// Split.
    pub split: String,
    /// Database id.
    pub db_id: String,
    /// The request text.
    pub input: String,
    /// BIRD evidence.
    pub evidence: Option<String>,
    /// Gold SQL.
    pub sql: String,
    /// Gold calls, the join step first.
    pub output: Vec<Call>,
    /// The SQL result.
    pub gold_answer: Answer,
    /// Whether the answer is ordered (the SQL has ORDER BY).
    pub ordered: bool,
    /// This instance's tool specs.
    pub tools: Vec<ToolSpec>,
    /// The joined table's columns with descriptions and types.
    pub key_values_and_descriptions: Vec<KeyDescription>,
    /// BIRD difficulty.
    pub difficulty: Option<String>,
}

/// A question that did not become an example.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drop {
    /// Would-be example id.
    pub id: String,
    /// Database id.
    pub db_id: String,
    /// Reason code: `db_missing`, `db_invalid`, `sql_error`, `parse_error`, `schema_mismatch`,
    /// `unsupported:<construct>`, `execution_error`, `mismatch`, `empty_gold_answer`.
    pub reason: String,
    /// Human detail.
    pub detail: String,
}

/// The compile stage's output for one database.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DbOutcome {
    /// Verified examples, in question order.
    pub examples: Vec<Example>,
    /// Dropped questions, in question order.
    pub drops: Vec<Drop>,
}

/// Everything a build produced, for the emitters.
#[derive(Debug, Clone)]
pub struct Build {
    /// The recipe.
    pub recipe: Recipe,
    /// The resolved source.
    pub source: ResolvedSource,
    /// Per database, in db order.
    pub outcomes: BTreeMap<String, DbOutcome>,
    /// Questions per database (attempted).
    pub attempted: BTreeMap<String, usize>,
    /// Skipped input records.
    pub bad_records: Vec<BadRecord>,
    /// blake3 of each source input (questions file, databases), for the manifest.
    pub source_hashes: BTreeMap<String, String>,
    /// Digest of all stage keys: changes whenever any output could.
    pub build_key: String,
    /// Stages served from the store / recomputed.
    pub cache_hits: usize,
    /// Stages recomputed.
    pub cache_misses: usize,
}

/// Errors that stop a build (bad recipe, missing corpus, unreadable question file, store IO).
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Recipe or source problem.
    #[error(transparent)]
    Recipe(#[from] crate::recipe::RecipeError),
    /// Corpus file problem.
    #[error(transparent)]
    Corpus(#[from] corpus::CorpusError),
    /// Store problem.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The project root of a recipe file (`<root>/recipes/<name>.toml`).
pub fn project_root(recipe_path: &Path) -> PathBuf {
    let dir = recipe_path.parent().unwrap_or(Path::new("."));
    let root = if dir.file_name().is_some_and(|n| n == "recipes") {
        dir.parent().unwrap_or(Path::new("."))
    } else {
        dir
    };
    if root.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        root.to_path_buf()
    }
}

/// Reads a recipe and locates its source corpus (`<root>/sources/<source>.toml`).
pub fn load_recipe(recipe_path: &Path) -> Result<(Recipe, ResolvedSource), BuildError> {
    let recipe = Recipe::load(recipe_path)?;
    let root = project_root(recipe_path);
    let manifest = SourceManifest::load(&root.join("sources").join(format!("{}.toml", recipe.source)))?;
    let source = manifest.resolve(&root)?;
    Ok((recipe, source))
}

/// Runs the compile stages of a recipe (from the store where possible).
pub fn compile(recipe_path: &Path, store_override: Option<&Path>, progress: bool) -> Result<Build, BuildError> {
    let (recipe, source) = load_recipe(recipe_path)?;
    let root = project_root(recipe_path);
    let (questions, bad_records) = corpus::read_questions(&source.questions, &source.manifest.format)?;
    let spider = match &source.tables {
        Some(p) => corpus::spider_descriptions(p)?,
        None => BTreeMap::new(),
    };
    let store_dir = store_override
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root.join(recipe.store.clone().unwrap_or("out/.store".into())));
    let store = Store::open(store_dir)?;
    let mut by_db: BTreeMap<String, Vec<Question>> = BTreeMap::new();
    for q in questions {
        by_db.entry(q.db_id.clone()).or_default().push(q);
    }
    let mut source_hashes = BTreeMap::new();
    source_hashes.insert("questions".to_string(), hash_file(&source.questions)?);
    let bar = progress_bar(progress, by_db.len() as u64);
    let results: Vec<(String, DbOutcome, String, Option<String>, bool)> = by_db
        .par_iter()
        .map(|(db_id, qs)| {
            let db_dir = source.databases.join(db_id);
            let db_path = db_dir.join(format!("{db_id}.sqlite"));
            let db_hash = hash_file(&db_path).ok();
            let descriptions = spider.get(db_id).cloned().unwrap_or_else(|| corpus::bird_descriptions(&db_dir));
            let key = StageKey {
                stage: "compile-slot".into(),
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
                if let Ok(outcome) = serde_json::from_slice::<DbOutcome>(&bytes) {
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
    let attempted = by_db.iter().map(|(db, qs)| (db.clone(), qs.len())).collect();
    let recipe_json = serde_json::to_vec(&recipe).expect("serialise");
    let mut h = blake3::Hasher::new();
    h.update(&recipe_json);
    h.update(&serde_json::to_vec(&bad_records).expect("serialise"));
    for d in &digests {
        h.update(d.as_bytes());
    }
    h.update(env!("CARGO_PKG_VERSION").as_bytes());
    Ok(Build {
        recipe,
        source,
        outcomes,
        attempted,
        bad_records,
        source_hashes,
        build_key: h.finalize().to_hex().to_string(),
        cache_hits: hits,
        cache_misses: misses,
    })
}

fn progress_bar(enabled: bool, len: u64) -> indicatif::ProgressBar {
    if !enabled || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} databases {elapsed}")
            .expect("template"),
    );
    bar.set_prefix("compile");
    bar
}

fn drop_all(recipe: &Recipe, qs: &[Question], reason: &str, detail: &str) -> DbOutcome {
    DbOutcome {
        examples: vec![],
        drops: qs
            .iter()
            .map(|q| Drop {
                id: format!("{}/{}", recipe.name, q.id),
                db_id: q.db_id.clone(),
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
) -> DbOutcome {
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
    let results: Vec<Result<Example, Drop>> = qs
        .par_iter()
        .map_init(
            || table::open_read_only(db_path),
            |conn, q| {
                let id = format!("{}/{}", recipe.name, q.id);
                let drop = |reason: String, detail: String| Drop {
                    id: id.clone(),
                    db_id: q.db_id.clone(),
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
                    split: recipe.split.clone(),
                    db_id: q.db_id.clone(),
                    input: q.question.clone(),
                    evidence: q.evidence.clone(),
                    sql: q.sql.clone(),
                    output: lowered.calls,
                    gold_answer: gold,
                    ordered,
                    tools: slot_tools(Some(&keys)),
                    key_values_and_descriptions: keys,
                    difficulty: q.difficulty.clone(),
                })
            },
        )
        .collect();
    let mut out = DbOutcome::default();
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
