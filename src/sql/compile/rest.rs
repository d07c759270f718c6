//! The REST family's part of the per-database compile stage: endpoints shared out per database
//! and renamed across databases, the categorical columns an optional filter may expose, and the
//! REST report numbers and files (`tools/endpoints.json`, the OpenAPI documents).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::toolkit::ratio;
use crate::dataset::{Build, Example, Outcome};
use crate::sql::{rest::Template, schema::Schema};
use crate::tools::rest::{Endpoint, qualify_across_databases};
use crate::tools::shown::Shown;
use crate::tools::table;
use crate::tools::{ToolSpec, Toolkit};

/// REST sharing numbers of one database.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub(super) struct RestCounts {
    /// Distinct parameterised SQL texts (lower-cased): the endpoint count of sharing by text.
    pub(super) by_text: usize,
    /// Questions served by an endpoint whose SQL text differs from their own (same normal form).
    pub(super) merged: usize,
    /// Questions whose normal form matched an endpoint that did not reproduce their result.
    pub(super) merge_rejected: usize,
}

/// Makes REST function names unique across the catalog ([`qualify_across_databases`]) and
/// renames the gold calls, labels, operation ids and toolkits of the examples to match.
pub(super) fn rename_across_databases(endpoints: &mut [Endpoint], outcomes: &mut BTreeMap<String, Outcome>) {
    let renames = qualify_across_databases(endpoints);
    if renames.is_empty() {
        return;
    }
    for (db, outcome) in outcomes.iter_mut() {
        let new = |name: &str| renames.get(&(db.clone(), name.to_string())).cloned();
        // One renamed toolkit per shared toolkit (the database's rows share one); the memo holds
        // the original too, so its address (the key) stays taken while the memo lives.
        let mut renamed: HashMap<usize, (Toolkit, Toolkit)> = HashMap::new();
        for e in &mut outcome.examples {
            for call in &mut e.output {
                if let Some(n) = new(&call.name) {
                    call.label = format!("{n}_0");
                    call.name = n.clone();
                    if let Some(meta) = e.meta.as_mut() {
                        meta["endpoint"]["operation_id"] = json!(n);
                    }
                }
            }
            let (_, tools) = renamed.entry(e.tools.id()).or_insert_with(|| {
                let mut tools = e.tools.clone();
                if !tools.iter().any(|t| new(&t.name).is_some()) {
                    return (e.tools.clone(), tools);
                }
                for t in tools.iter_mut() {
                    if let Some(n) = new(&t.name) {
                        t.name = n;
                    }
                }
                (e.tools.clone(), tools)
            });
            e.tools = tools.clone();
        }
    }
}

/// REST: the shown results of the examples in `outcomes` whose gold call's response the compile
/// stage kept (`responses`, by example id), under the calls' final names
/// ([`crate::tools::shown::Shown::of_rest`]).
pub(super) fn rest_shown_calls(
    outcomes: &BTreeMap<String, Outcome>,
    mut responses: std::collections::HashMap<String, String>,
    max_rows: usize,
) -> Vec<(String, Shown)> {
    let mut out = Vec::new();
    for e in outcomes.values().flat_map(|o| &o.examples) {
        if let Some(text) = responses.remove(&e.id) {
            out.push((e.id.clone(), Shown::of_rest(&e.output, vec![text], max_rows)));
        }
    }
    out
}

/// REST: catalog = every endpoint; `tools/endpoints.json` (with SQL), the combined and
/// per-database OpenAPI documents; endpoint counts.
pub(super) fn rest_summary(build: &mut Build, endpoints: &[Endpoint], counts: RestCounts) {
    build.catalog = endpoints.iter().map(Endpoint::tool_spec).collect();
    let version = env!("CARGO_PKG_VERSION");
    let all: Vec<&Endpoint> = endpoints.iter().collect();
    let title = format!("{} tools", build.recipe.name);
    build
        .extra_files
        .insert("tools/endpoints.json".into(), pretty(&json!(endpoints)));
    build.extra_files.insert(
        "tools/openapi.json".into(),
        pretty(&crate::tools::openapi::document(&title, version, &all)),
    );
    let mut per_db: BTreeMap<&str, Vec<&Endpoint>> = BTreeMap::new();
    for e in endpoints {
        per_db.entry(e.db_id.as_str()).or_default().push(e);
    }
    for (db, eps) in &per_db {
        let doc = crate::tools::openapi::document(&format!("{} {db} tools", build.recipe.name), version, eps);
        build
            .extra_files
            .insert(format!("tools/openapi/{db}.json"), pretty(&doc));
        let tools: Vec<ToolSpec> = eps.iter().map(|e| e.tool_spec()).collect();
        build.extra_files.insert(
            format!("tools/functions/{db}.json"),
            pretty(&crate::tools::functions_json(&tools)),
        );
    }
    let examples: Vec<&Example> = build.groups.values().flat_map(|o| &o.examples).collect();
    let empty = examples
        .iter()
        .filter(|e| e.gold_answer.as_ref().is_some_and(Vec::is_empty))
        .count();
    build.stats.insert("endpoints".into(), json!(endpoints.len()));
    build.stats.insert(
        "questions_per_endpoint".into(),
        json!(ratio(examples.len(), endpoints.len(), 2)),
    );
    build.stats.insert(
        "parameters_per_endpoint".into(),
        json!(ratio(
            endpoints.iter().map(|e| e.parameters.len()).sum(),
            endpoints.len(),
            2
        )),
    );
    build.stats.insert("examples_with_empty_answer".into(), json!(empty));
    // Distinguishability: endpoints whose summary no other endpoint of their database has.
    let mut summaries: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for e in endpoints {
        *summaries.entry((e.db_id.as_str(), e.summary.as_str())).or_default() += 1;
    }
    let unique = endpoints
        .iter()
        .filter(|e| summaries[&(e.db_id.as_str(), e.summary.as_str())] == 1)
        .count();
    build.stats.insert(
        "parameterless_endpoints".into(),
        json!(endpoints.iter().filter(|e| e.parameters.is_empty()).count()),
    );
    build
        .stats
        .insert("distinguishability".into(), json!(ratio(unique, endpoints.len(), 4)));
    build
        .stats
        .insert("endpoints_if_shared_by_sql_text".into(), json!(counts.by_text));
    build
        .stats
        .insert("questions_merged_by_normal_form".into(), json!(counts.merged));
    build
        .stats
        .insert("merges_rejected_by_execution".into(), json!(counts.merge_rejected));
}

pub(super) fn pretty(v: &serde_json::Value) -> Vec<u8> {
    let mut b = serde_json::to_vec_pretty(v).expect("serialisable");
    b.push(b'\n');
    b
}

/// The categorical columns of one database's tables, for [`crate::sql::expose`]'s optional
/// filter: a table's is counted the first time a question asks for it ([`Categorical::pick`]),
/// then shared by the database's questions.
#[derive(Default)]
pub(super) struct Categorical(Mutex<Counted>);

/// What [`Categorical`] has read of its database so far.
#[derive(Default)]
struct Counted {
    /// A connection of its own and the database's tables (`sqlite_master`, type `table`):
    /// lower-cased name → name; `None` when the database does not open.
    tables: Option<Option<(rusqlite::Connection, BTreeMap<String, String>)>>,
    /// The tables asked for so far (lower-cased) and their categorical column, if any.
    picked: HashMap<String, Option<(String, &'static str)>>,
}

impl Categorical {
    /// The categorical column of `table` (any case) of the database at `db_path`, and its
    /// OpenAPI type: the column with 2 to 50 distinct non-NULL values, text columns before
    /// others, fewest values first (first in declaration order on a tie); `None` for a table
    /// without one or not in the database.
    pub(super) fn pick(&self, db_path: &Path, schema: &Schema, table: &str) -> Option<(String, &'static str)> {
        let key = table.to_lowercase();
        let mut counted = self.0.lock().expect("categorical columns");
        if let Some(known) = counted.picked.get(&key) {
            return known.clone();
        }
        let tables = counted.tables.get_or_insert_with(|| {
            let conn = table::open_read_only(db_path).ok()?;
            let names: BTreeMap<String, String> = conn
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .and_then(|mut st| {
                    st.query_map([], |r| r.get::<_, String>(0))?
                        .collect::<Result<Vec<_>, _>>()
                })
                .unwrap_or_default()
                .into_iter()
                .map(|t| (t.to_lowercase(), t))
                .collect();
            Some((conn, names))
        });
        let found = tables
            .as_ref()
            .and_then(|(conn, names)| categorical_column(conn, schema, names.get(&key)?));
        counted.picked.insert(key, found.clone());
        found
    }
}

/// The categorical column of the database table `t` ([`Categorical::pick`]).
fn categorical_column(conn: &rusqlite::Connection, schema: &Schema, t: &str) -> Option<(String, &'static str)> {
    let (name, cols) = schema.table(t)?;
    let counts = distinct_counts(conn, name, cols);
    let mut best: Option<((bool, i64), String, &'static str)> = None;
    for (c, n) in cols.iter().zip(counts) {
        let Some(n) = n else { continue };
        let kind = schema.dtype(name, c);
        let rank = (kind != "string", n);
        if (2..=MAX_CATEGORIES).contains(&n) && best.as_ref().is_none_or(|(r, _, _)| rank < *r) {
            best = Some((rank, c.clone(), kind));
        }
    }
    best.map(|(_, c, kind)| (c, kind))
}

/// A categorical column has at most this many distinct non-NULL values.
const MAX_CATEGORIES: i64 = 50;

/// The number of distinct non-NULL values of each of `table`'s `columns`, counted up to
/// [`MAX_CATEGORIES`]` + 1` (a column with more reads `MAX_CATEGORIES + 1`: SQLite stops reading
/// it there, which is all the choice of a categorical column needs); `None` where SQLite cannot
/// count one. One statement for all of them, or one per column when that fails (then a column
/// that fails alone is `None`, the others counted).
fn distinct_counts(conn: &rusqlite::Connection, table: &str, columns: &[String]) -> Vec<Option<i64>> {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let count = |c: &String| {
        let (c, t) = (quote(c), quote(table));
        format!(
            "(SELECT count(*) FROM (SELECT DISTINCT {c} FROM {t} WHERE {c} IS NOT NULL LIMIT {}))",
            MAX_CATEGORIES + 1
        )
    };
    let all = format!("SELECT {}", columns.iter().map(count).collect::<Vec<_>>().join(", "));
    let together = conn.query_row(&all, [], |r| {
        (0..columns.len())
            .map(|i| r.get::<_, i64>(i))
            .collect::<Result<Vec<_>, _>>()
    });
    match together {
        Ok(counts) if !columns.is_empty() => counts.into_iter().map(Some).collect(),
        _ => columns
            .iter()
            .map(|c| {
                let sql = format!("SELECT {}", count(c));
                conn.query_row(&sql, [], |r| r.get::<_, i64>(0)).ok()
            })
            .collect(),
    }
}

/// An unnamed endpoint running `template`'s SQL (for verification before naming).
pub(super) fn rest_endpoint(db_id: &str, template: &Template) -> Endpoint {
    Endpoint {
        db_id: db_id.into(),
        name: String::new(),
        path: String::new(),
        summary: String::new(),
        sql: template.sql.clone(),
        parameters: template.parameters.clone(),
        ordered: template.ordered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The capped counts of every column equal one full `count(DISTINCT …)` query per column,
    /// cut at `MAX_CATEGORIES + 1`, on every table of every Spider dev database.
    #[test]
    fn capped_distinct_counts_equal_full_counts_cut_at_the_cap() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/spider/database");
        let mut checked = 0;
        for db in std::fs::read_dir(&root).unwrap() {
            let db = db.unwrap().path();
            let id = db.file_name().unwrap().to_string_lossy().to_string();
            let Ok(conn) = table::open_read_only(&db.join(format!("{id}.sqlite"))) else {
                continue;
            };
            let Ok(schema) = Schema::load(&conn) else { continue };
            let tables: Vec<String> = conn
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
                .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())
                .unwrap();
            for t in tables {
                let Some((name, cols)) = schema.table(&t) else { continue };
                let one_each: Vec<Option<i64>> = cols
                    .iter()
                    .map(|c| {
                        let sql = format!(
                            "SELECT count(DISTINCT \"{}\") FROM \"{}\"",
                            c.replace('"', "\"\""),
                            name.replace('"', "\"\"")
                        );
                        conn.query_row(&sql, [], |r| r.get::<_, i64>(0))
                            .ok()
                            .map(|n| n.min(MAX_CATEGORIES + 1))
                    })
                    .collect();
                assert_eq!(distinct_counts(&conn, name, cols), one_each, "{id}.{name}");
                checked += cols.len();
            }
        }
        assert!(checked > 400, "{checked} columns");
    }
}
