//! Text-to-SQL families (`slot`, `sel`, `rest`): one compile stage per database (lower,
//! execute, verify), cached in the store.
//!
//! The compile stage of one database is a pure function of: the stage version, the recipe knobs
//! it reads, the question records of that database, the SQLite file's bytes and the column
//! descriptions. Databases run in parallel (rayon), and so do the questions of one database.
//!
//! - `slot`: plan → SLOT calls ([`crate::sql::slot`]) → executor → compare with the SQL result.
//! - `sel`: the SLOT calls bound into SEL tools ([`crate::tools::sel`]), executed the same way.
//! - `rest`: the gold SQL parameterised ([`crate::sql::rest`]), run with the question's values
//!   bound and compared with the SQL result; questions of one database whose parameterised SQL
//!   is the same share one endpoint ([`crate::tools::rest::name_endpoints`]).
//!
//! Drop reason codes: `db_missing`, `db_invalid`, `sql_error`, `parse_error`, `schema_mismatch`,
//! `unsupported:<construct>`, `execution_error`, `mismatch`, `empty_gold_answer`, and the answers
//! that cannot verify anything ([`crate::sql::gold`]), the same for SLOT, SEL and REST (issue
//! 27): `degenerate_gold_answer` (a single 0, a single NULL, every cell NULL; kept with the
//! recipe knob `keep_degenerate_answers`), `tie_ambiguous_limit` (the LIMIT cut falls inside a
//! tie, so the gold rows are the engine's arbitrary pick), `affinity_sensitive` (the answer
//! changes when number-like text is read as numbers, [`crate::sql::numeric_reading`]; for
//! SLOT/SEL also a filter comparing number-like text with a number), SLOT/SEL's
//! `aggregate_over_text` and `arithmetic_over_text` (SUM/AVG or arithmetic over text cells such
//! as dates, whose numeric prefix SQLite reads), `bare_column_tie` (a bare column whose
//! row is SQLite's pick: beside a MIN/MAX whose extreme is tied, or varying within a group,
//! [`crate::sql::extreme`]), and under `tool_pool = "reference"`
//! `outside_reference_pool` (a call the reference tools do not execute faithfully,
//! [`crate::tools::reference`]). The gold-answer drops come before the lowering
//! ones, so "informative" = attempted minus `empty_gold_answer`, `degenerate_gold_answer`,
//! `tie_ambiguous_limit`, `affinity_sensitive`, `aggregate_over_text`, `bare_column_tie` (the last
//! two need the query's plan: `bare_column_tie` is found once the plan builds, before lowering,
//! in every family; `aggregate_over_text` after lowering, so it counts among the
//! attempted-but-not-informative only when the query lowers).

use std::collections::BTreeMap;
use std::path::Path;

use rayon::prelude::*;
use serde_json::json;

use crate::corpus::{Descriptions, Question};
use crate::dataset::{Build, BuildError, Drop, Example, Outcome, build_key};
use crate::progress::progress_bar;
use crate::recipe::{Recipe, ResolvedSource, ToolPool};
use crate::sql::{self, rest::Template, schema::Schema};
use crate::store::{Scope, Store};
use crate::tools::executor::{Executor, Session, Value};
use crate::tools::pool::{KeyDescription, slot_tools};
use crate::tools::reference;
use crate::tools::rest::{Endpoint, name_endpoints};
use crate::tools::sel::bind;
use crate::tools::table;
use crate::tools::{Call, Toolkit};
use crate::verify::{self, Answer};

mod batch;
mod endpoints;
mod key;
mod plan;
mod rest;
mod same_sql;
mod stage;
mod toolkit;

pub use self::key::quick_build_key;
pub use self::plan::plan;

use self::rest::{RestCounts, rename_across_databases, rest_shown_calls, rest_summary};
use self::stage::DbStage;
use self::toolkit::{Toolkits, key_descriptions, toolkit};

/// Version of the compile stage; bump when its output (or its stored form) for the same inputs
/// changes. 7: toolkits stored as a table of distinct specs ([`crate::tools::spec_table`]).
/// 8: the normalisation pass, bare ORDER BY columns checked before lowering (issue 48).
pub const COMPILE_VERSION: u32 = 8;

/// Runs the compile stages of a text-to-SQL recipe, one per item (a batch of a database's
/// questions, [`batch`]), from the store where possible; a shard computes the items the store's
/// assignment gives it ([`plan::items`], [`Store::assign`]) and hashes only their databases.
///
/// Errors: the questions or `tables.json` do not read; a shard's own database differs from the
/// stored plan ([`BuildError::StalePlan`]).
pub fn compile(recipe: Recipe, source: ResolvedSource, store: &Store, progress: bool) -> Result<Build, BuildError> {
    // The questions are read while the questions file and the executable (the stage keys'
    // `code`) are hashed.
    let (inputs, questions_hash) = rayon::join(
        || key::inputs(&source),
        || {
            crate::dataset::code_fingerprint();
            key::file_hash(&source.questions)
        },
    );
    let key::Inputs {
        by_db,
        bad_records,
        spider,
    } = inputs?;
    let questions_hash = questions_hash?;
    let mut source_hashes = BTreeMap::new();
    source_hashes.insert("questions".to_string(), questions_hash.clone());
    // The items (question batches) and their estimated costs, placed over the shards before any
    // file is hashed; the plan entry (if any) gives or checks the database hashes.
    let (batches, items) = plan::items(&recipe, &source, &by_db);
    store.assign(&items);
    let planned = match store.scope() {
        Scope::All => None,
        _ => plan::read(store, &plan::plan_key(&recipe, &source, &questions_hash)),
    };
    // Another shard's item by the plan is neither hashed nor read here; the databases of the
    // others are hashed once each, before the items run (no lock held across rayon work).
    let ours: Vec<bool> = batches.iter().map(|b| !store.leaves(&b.name)).collect();
    let dbs: std::collections::BTreeSet<&str> = batches
        .iter()
        .zip(&ours)
        .filter(|(_, o)| **o)
        .map(|(b, _)| b.db_id)
        .collect();
    // The databases of this shard's own items (by the assignment; every one outside a sharded
    // build): hashed and checked against the plan. Another shard's, read in round two, take
    // the plan's hash.
    let own: std::collections::BTreeSet<&str> = batches
        .iter()
        .filter(|b| store.owns(&b.name))
        .map(|b| b.db_id)
        .collect();
    let paths: BTreeMap<String, std::path::PathBuf> = dbs
        .into_iter()
        .map(|d| (d.to_string(), key::db_path(&source, d)))
        .collect();
    let listed = paths
        .iter()
        .map(|(d, p)| (d.clone(), p.clone(), own.contains(d.as_str())));
    let hashes = plan::hashes(store, planned.as_ref(), listed.collect())?;
    // A shard that hashed every database (round two, no plan stored) stores the plan.
    if matches!(store.scope(), Scope::Shard { .. }) && planned.is_none() && hashes.len() == by_db.len() {
        plan::store_from_shard(
            store,
            &plan::plan_key(&recipe, &source, &questions_hash),
            &hashes,
            &paths,
        );
    }
    let bar = progress_bar(progress, batches.len() as u64, "items");
    // Largest item first (estimated cost), from one queue the threads take from as they free up
    // (`par_bridge`): the longest stages start first and the threads finish together. By name,
    // Spider dev's largest database came last and ran alone (issue 17).
    let mut order: Vec<(usize, &batch::Batch)> = batches.iter().enumerate().collect();
    order.sort_by_key(|(i, _)| std::cmp::Reverse(items[*i].cost));
    type Done = (usize, DbStage, String, Option<String>, bool, (Shown, RestShown));
    let mut results: Vec<Done> = order
        .into_iter()
        .par_bridge()
        .filter_map(|(i, b)| {
            let db_id = b.db_id;
            if !ours[i] {
                bar.inc(1);
                return None;
            }
            let db_hash = hashes.get(db_id).cloned().flatten();
            let key::DbKey {
                db_path,
                db_hash,
                descriptions,
                key,
            } = key::db_key(&recipe, &source, &spider, db_id, &b.questions, db_hash);
            let digest = key.digest();
            // An entry that does not decode is removed and recomputed below (`Store::load`).
            let decode = |b: &[u8]| DbStage::decode(b).ok_or_else(|| "not a database stage".to_string());
            if let Some(stage) = store.load(&key, decode) {
                bar.inc(1);
                return Some((i, stage, digest, db_hash, true, Default::default()));
            }
            // Another shard's item (`--shard`), or one a merge did not find (`--merge`).
            if !store.claim(&key, &b.name) {
                bar.inc(1);
                return None;
            }
            let qs = &b.questions;
            let (stage, shown, rest_shown) =
                compile_db(&recipe, &source, db_id, qs, &db_path, db_hash.is_some(), &descriptions);
            let (bytes, stage) = stage.encode();
            let _ = store.put(&key, &bytes);
            bar.inc(1);
            Some((i, stage, digest, db_hash, false, (shown, rest_shown)))
        })
        .collect();
    results.sort_by_key(|r| r.0);
    bar.finish_and_clear();
    let mut parts: BTreeMap<String, Vec<DbStage>> = BTreeMap::new();
    let mut items: BTreeMap<String, Vec<crate::dataset::ItemRef>> = BTreeMap::new();
    let mut digests = Vec::new();
    let (mut hits, mut misses) = (0, 0);
    let mut shown = std::collections::HashMap::new();
    let mut rest_shown = std::collections::HashMap::new();
    for (i, stage, digest, db_hash, hit, (db_shown, db_rest_shown)) in results {
        let db = batches[i].db_id.to_string();
        shown.extend(db_shown);
        rest_shown.extend(db_rest_shown);
        if let Some(h) = db_hash {
            source_hashes.insert(format!("database/{db}"), h);
        }
        if hit {
            hits += 1
        } else {
            misses += 1
        }
        items.entry(db.clone()).or_default().push(crate::dataset::ItemRef {
            name: batches[i].name.clone(),
            digest: digest.clone(),
            examples: stage.outcome.examples.len(),
        });
        digests.push(digest);
        parts.entry(db).or_default().push(stage);
    }
    let mut outcomes = BTreeMap::new();
    let mut endpoints: Vec<Endpoint> = Vec::new();
    let mut counts = RestCounts::default();
    for (db, parts) in parts {
        let stage = batch::assemble(parts, &by_db[&db], &recipe.name);
        endpoints.extend(stage.endpoints);
        counts.by_text += stage.rest.by_text;
        counts.merged += stage.rest.merged;
        counts.merge_rejected += stage.rest.merge_rejected;
        outcomes.insert(db, stage.outcome);
    }
    if recipe.format == "rest" {
        rename_across_databases(&mut endpoints, &mut outcomes);
        shown.extend(rest_shown_calls(&outcomes, rest_shown, recipe.trajectories.max_rows));
    }
    let key = build_key(&recipe, &bad_records, &digests);
    let mut build = Build {
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
        shown,
        items,
        variant_rows_counted: None,
        dialogues: None,
    };
    match build.recipe.format.as_str() {
        "sel" => toolkit::sel_summary(&mut build),
        "rest" => rest_summary(&mut build, &endpoints, counts),
        _ => {}
    }
    Ok(build)
}

/// What the compile stage of one database showed of its examples' results, by example id
/// ([`Build::shown`]).
type Shown = Vec<(String, crate::tools::shown::Shown)>;

/// The response each REST example's gold call showed when the compile stage verified it, by
/// example id (made [`crate::tools::shown::Shown`] once the calls have their final names).
type RestShown = Vec<(String, String)>;

/// What one question compiled to, before REST endpoints are shared.
#[derive(Clone)]
enum Compiled {
    Calls {
        setup: Call,
        additional_setup: Vec<Call>,
        ties: Option<Vec<usize>>,
        calls: Vec<Call>,
        tools: Toolkit,
        keys: Vec<KeyDescription>,
        gold: Answer,
        ordered: bool,
        shown: Option<crate::tools::shown::Shown>,
    },
    Rest {
        template: Template,
        gold: Answer,
        /// The gold answer's tie runs ([`sql::gold::OrderFacts`]).
        ties: Option<Vec<usize>>,
        /// The execution that verified it, whose response the trajectory shows.
        ran: endpoints::Ran,
    },
}

/// Whether the database at `path` is large: its file is more than a quarter of the join cache's
/// budget ([`crate::tools::join_cache::budget`]), so a join of its tables may not fit the budget
/// (an Arrow join of a fact table with its dimensions takes about three times the file's bytes;
/// `benches/synth.py`). Its questions run one at a time ([`large_database_lane`]).
fn large_database(path: &Path) -> bool {
    let budget = crate::tools::join_cache::budget() as u64;
    budget > 0 && std::fs::metadata(path).is_ok_and(|m| m.len() > budget / 4)
}

/// The process-wide lane of large databases: held while one compiles its questions, one at a
/// time, so at most one oversize join is in use by the compile stage (issue 17: at 5M trips on
/// 2 threads, two were, 1.05 GiB). Never held across rayon work.
fn large_database_lane() -> std::sync::MutexGuard<'static, ()> {
    static LANE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LANE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Lowers, executes and verifies every question of one database; also returns what the
/// verification showed of each SLOT/SEL example's results and each REST example's response by id
/// (not stored: the trajectories emitter's).
fn compile_db(
    recipe: &Recipe,
    source: &ResolvedSource,
    db_id: &str,
    qs: &[Question],
    db_path: &Path,
    exists: bool,
    descriptions: &Descriptions,
) -> (DbStage, Shown, RestShown) {
    if !exists {
        let detail = format!("database file {} is absent", db_path.display());
        return (
            DbStage::drop_all(recipe, qs, "db_missing", &detail),
            Vec::new(),
            Vec::new(),
        );
    }
    let schema = table::check_sqlite_file(db_path)
        .and_then(|()| {
            table::open_read_only(db_path)
                .and_then(|c| Schema::load(&c))
                .map_err(|e| e.to_string())
        })
        .and_then(|s| {
            if s.is_empty() {
                Err("it holds no table".into())
            } else {
                Ok(s)
            }
        });
    let schema = match schema {
        Ok(s) => s,
        Err(e) => {
            let detail = format!("{}: not a readable SQLite database: {e}", db_path.display());
            return (
                DbStage::drop_all(recipe, qs, "db_invalid", &detail),
                Vec::new(),
                Vec::new(),
            );
        }
    };
    let executor = Executor::new(&source.databases);
    let rest_db = endpoints::Database {
        db_id,
        db_path,
        schema: &schema,
        descriptions,
        categorical: Default::default(),
    };
    let max_rows = recipe.trajectories.max_rows;
    let rel_db = format!("{db_id}/{db_id}.sqlite");
    let format = recipe.format.as_str();
    let toolkits = Toolkits::default();
    // One computation per distinct gold SQL text ([`same_sql`]).
    let same = same_sql::SameSql::of(qs);
    let compile_one = |(conn, numeric): &mut (
        rusqlite::Result<rusqlite::Connection>,
        sql::numeric_reading::NumericReading,
    ),
                       q: &Question|
     -> Result<Compiled, Drop> {
        let drop = |reason: String, detail: String| Drop {
            id: format!("{}/{}", recipe.name, q.id),
            group: q.db_id.clone(),
            reason,
            detail,
            question: q.question.clone(),
            source: Drop::source_text(&q.sql),
        };
        let conn = conn.as_mut().map_err(|e| drop("db_invalid".into(), e.to_string()))?;
        let gold = table::query_rows(conn, &q.sql).map_err(|e| drop("sql_error".into(), e.to_string()))?;
        // The gold-answer classification, the same for every family (issue 27).
        if gold.is_empty() && !recipe.keep_empty_answers {
            return Err(drop("empty_gold_answer".into(), "the gold SQL returns no rows".into()));
        }
        if let Some(what) = verify::degenerate(&gold).filter(|_| !gold.is_empty()) {
            if !recipe.keep_degenerate_answers {
                return Err(drop(
                    "degenerate_gold_answer".into(),
                    format!("the gold answer is {what}: any call sequence that computes nothing reproduces it"),
                ));
            }
        }
        let stmt = sql::parse(&q.sql).map_err(|e| drop(e.reason(), e.to_string()))?;
        sql::gold::subquery_ties(conn, &stmt).map_err(|d| drop("tie_ambiguous_limit".into(), d))?;
        let order =
            sql::gold::order_ties_with(conn, &stmt, Some(&gold)).map_err(|d| drop("tie_ambiguous_limit".into(), d))?;
        numeric
            .check(&stmt, &q.sql, &gold, order.ties.as_deref())
            .map_err(|d| drop("affinity_sensitive".into(), d))?;
        if format == "rest" {
            // SQLite's pick of a bare column's row, where the planner reads the query.
            if let Ok(plan) = sql::plan::build(&stmt, &schema) {
                sql::extreme::extreme_row_ties(conn, &stmt, &plan).map_err(|d| drop("bare_column_tie".into(), d))?;
            }
            return endpoints::compile_question(conn, &rest_db, &stmt, (gold, order.ties), max_rows, &drop);
        }
        let plan = sql::plan::build(&stmt, &schema).map_err(|e| drop(e.reason(), e.to_string()))?;
        // Before lowering, as for REST: one storage-order rule, one reason, every family.
        sql::extreme::extreme_row_ties(conn, &stmt, &plan).map_err(|d| drop("bare_column_tie".into(), d))?;
        let lowered = sql::slot::lower(&plan, &rel_db).map_err(|e| drop(e.reason(), e.to_string()))?;
        let mut lowered = lowered;
        if recipe.tool_pool == ToolPool::Reference {
            let restrict = if format == "sel" {
                reference::sel::restrict
            } else {
                reference::restrict
            };
            lowered.calls = restrict(&executor, &lowered.setup, &lowered.additional_setup, &lowered.calls)
                .map_err(|d| drop("outside_reference_pool".into(), d))?;
        }
        let calls = if format == "sel" && recipe.tool_pool == ToolPool::Reference {
            reference::sel::bind(&lowered.calls)
        } else if format == "sel" {
            bind(&lowered.calls)
        } else {
            lowered.calls
        };
        let (setup, additional_setup) = (lowered.setup, lowered.additional_setup);
        let mut session = Session::default();
        let mut joined = Vec::new();
        for step in std::iter::once(&setup).chain(&additional_setup) {
            let table = executor
                .step(&mut session, step)
                .map_err(|e| drop("execution_error".into(), format!("join step {}: {e}", step.label)))?;
            if let Value::Table(t) = table {
                joined.push((step.label.clone(), t.clone()));
            }
        }
        if let Some(d) = sql::gold::affinity_sensitive(&plan, &joined) {
            return Err(drop("affinity_sensitive".into(), d));
        }
        if let Some(d) = sql::gold::aggregate_over_text(&plan, &joined) {
            return Err(drop("aggregate_over_text".into(), d));
        }
        if let Some(d) = sql::gold::arithmetic_over_text(&plan, &joined) {
            return Err(drop("arithmetic_over_text".into(), d));
        }
        let candidate = executor
            .run_in(&mut session, &calls)
            .map_err(|e| drop("execution_error".into(), e.to_string()))?;
        let ordered = !plan.order_by.is_empty();
        verify::compare(&gold, &candidate, ordered, order.ties.as_deref()).map_err(|d| drop("mismatch".into(), d))?;
        let steps: Vec<&Call> = std::iter::once(&setup).chain(&additional_setup).collect();
        let shown = crate::tools::shown::Shown::of_session(&session, &steps, &calls, recipe.trajectories.max_rows);
        let keys = key_descriptions(&plan, &schema, descriptions);
        let tools = if format == "sel" && recipe.tool_pool == ToolPool::Reference {
            reference::sel::tools(Some(&keys)).into()
        } else {
            toolkit(&toolkits, &keys, format == "sel")
        };
        Ok(Compiled::Calls {
            setup,
            additional_setup,
            ties: order.ties,
            calls,
            tools,
            keys,
            gold,
            ordered,
            shown,
        })
    };
    let firsts = same.firsts(qs);
    // Every worker's numeric reading shares the database's number-like column scans.
    let scans = sql::numeric_reading::NumberLikeScans::default();
    let results: Vec<Result<Compiled, Drop>> = if large_database(db_path) {
        // One question at a time, one large database at a time: each question's join may be
        // larger than the join cache's budget, and two of them (one per thread) would double the
        // peak. No rayon work runs under the lane, so no thread waits for it while holding it.
        let _lane = large_database_lane();
        let mut conns = (
            table::open_read_only(db_path),
            sql::numeric_reading::NumericReading::sharing(db_path, scans.clone()),
        );
        firsts.iter().map(|q| compile_one(&mut conns, q)).collect()
    } else {
        firsts
            .par_iter()
            .map_init(
                || {
                    (
                        table::open_read_only(db_path),
                        sql::numeric_reading::NumericReading::sharing(db_path, scans.clone()),
                    )
                },
                |conns, q| compile_one(conns, q),
            )
            .collect()
    };
    let results = same.spread(results, qs, &recipe.name);
    let mut results = results;
    let mut conn = table::open_read_only(db_path).ok();
    let (templates, rest_counts) = endpoints::share(&mut results, db_id, conn.as_mut(), max_rows);
    let endpoints = name_endpoints(&source.manifest.format, db_id, &templates.iter().collect::<Vec<_>>());
    let db_tools: Toolkit = endpoints.iter().map(Endpoint::tool_spec).collect();
    let split = recipe.split.clone().unwrap_or_default();
    let mut out = Outcome {
        attempted: qs.len(),
        ..Outcome::default()
    };
    let mut shown_of = Vec::new();
    let mut rest_shown = Vec::new();
    for (q, r) in qs.iter().zip(results) {
        let base = Example {
            id: format!("{}/{}", recipe.name, q.id),
            dataset: recipe.name.clone(),
            split: split.clone(),
            db_id: Some(q.db_id.clone()),
            input: q.question.clone(),
            evidence: q.evidence.clone(),
            sql: Some(q.sql.clone()),
            difficulty: q.difficulty.clone(),
            ..Example::default()
        };
        match r {
            Err(d) => out.drops.push(d),
            Ok(Compiled::Calls {
                setup,
                additional_setup,
                ties,
                calls,
                tools,
                keys,
                gold,
                ordered,
                shown,
            }) => {
                if let Some(s) = shown {
                    shown_of.push((base.id.clone(), s));
                }
                out.examples.push(Example {
                    output: calls,
                    initialization_step: Some(setup),
                    additional_setup_steps: additional_setup,
                    meta: ties.map(|t| json!({"order_ties": t})),
                    gold_answer: Some(gold),
                    ordered,
                    tools,
                    key_values_and_descriptions: keys,
                    ..base
                })
            }
            Ok(Compiled::Rest {
                template,
                gold,
                ties,
                ran,
            }) => {
                let (example, text) =
                    endpoints::example(base, (template, gold, ties, ran), &templates, &endpoints, &db_tools);
                if let Some(text) = text {
                    rest_shown.push((example.id.clone(), text));
                }
                out.examples.push(example)
            }
        }
    }
    let stage = DbStage {
        outcome: out,
        endpoints,
        rest: rest_counts,
    };
    (stage, shown_of, rest_shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_file_over_a_quarter_of_the_join_budget_is_large() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.sqlite");
        let quarter = crate::tools::join_cache::budget() as u64 / 4;
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(quarter).unwrap();
        assert!(!large_database(&path));
        file.set_len(quarter + 1).unwrap();
        assert!(large_database(&path), "sparse file of {} bytes", quarter + 1);
        assert!(!large_database(&dir.path().join("absent.sqlite")));
    }
}
