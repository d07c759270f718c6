//! Issue 27's acceptance for "text order never decides a kept answer", on Spider dev: every
//! Spider dev database is rebuilt with each number-like TEXT column declared NUMERIC (a copy via
//! SQLite: CREATE TABLE with NUMERIC affinity, INSERT … SELECT — SQLite itself converts the
//! number-like text), and the gold SQL of every row kept by slot-spider, sel-spider and
//! rest-spider is run on the copy: its answer must equal the row's gold answer (cells by value,
//! a number-like text equal to its number). Which columns are number-like is decided by SQLite
//! here too (a column whose copy under NUMERIC affinity holds a cell of another storage class
//! than the original), independently of the build's own rule (`sql::numeric_reading`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toolforge::pipeline::build_and_emit;
use toolforge::tools::table::{open_read_only, query_rows};
use toolforge::verify::{Datum, compare, ties_from_meta};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// Copies the database `src` to `dst` with every number-like TEXT column declared NUMERIC;
/// returns those columns (`table.column`).
fn numeric_copy(src: &Path, dst: &Path) -> Vec<String> {
    let conn = rusqlite::Connection::open(dst).unwrap();
    conn.execute("ATTACH DATABASE ?1 AS orig", [src.to_str().unwrap()])
        .unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM orig.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut numeric = Vec::new();
    for t in tables {
        let columns: Vec<(String, String)> = conn
            .prepare(&format!("PRAGMA orig.table_info({})", quote(&t)))
            .unwrap()
            .query_map([], |r| {
                Ok((r.get(1)?, r.get::<_, Option<String>>(2)?.unwrap_or_default()))
            })
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let names: Vec<String> = columns.iter().map(|(c, _)| quote(c)).collect();
        let create = |is_numeric: &dyn Fn(&str) -> bool| {
            let decl: Vec<String> = columns
                .iter()
                .map(|(c, ty)| format!("{} {}", quote(c), if is_numeric(c) { "NUMERIC" } else { ty }))
                .collect();
            conn.execute_batch(&format!(
                "DROP TABLE IF EXISTS main.{t}; CREATE TABLE main.{t} ({}); INSERT INTO main.{t} ({n}) SELECT {n} FROM orig.{t}",
                decl.join(", "),
                t = quote(&t),
                n = names.join(", ")
            ))
            .unwrap();
        };
        // Every text-holding column NUMERIC, then kept so only where SQLite converted a cell.
        create(&|_| true);
        let converted: Vec<String> = columns
            .iter()
            .map(|(c, _)| c.clone())
            .filter(|c| {
                let sql = format!(
                    "SELECT count(*) FROM (SELECT rowid AS r, typeof({c}) AS ty FROM main.{t}) AS n \
                     JOIN (SELECT rowid AS r, typeof({c}) AS ty FROM orig.{t}) AS o USING (r) \
                     WHERE o.ty = 'text' AND n.ty IN ('integer', 'real')",
                    c = quote(c),
                    t = quote(&t)
                );
                conn.query_row(&sql, [], |r| r.get::<_, i64>(0)).unwrap_or(0) > 0
            })
            .collect();
        create(&|c| converted.iter().any(|x| x == c));
        numeric.extend(converted.into_iter().map(|c| format!("{t}.{c}")));
    }
    conn.execute_batch("DETACH DATABASE orig").unwrap();
    numeric
}

/// A cell by value: number-like text as its number.
fn by_value(rows: &[Vec<Datum>]) -> Vec<Vec<Datum>> {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|d| match d {
                    Datum::Text(s) => match (s.trim().parse::<i64>(), s.trim().parse::<f64>()) {
                        (Ok(i), _) => Datum::Int(i),
                        (_, Ok(x)) if x.is_finite() => Datum::Real(x),
                        _ => d.clone(),
                    },
                    d => d.clone(),
                })
                .collect()
        })
        .collect()
}

#[test]
fn spider_dev_kept_answers_do_not_change_when_number_like_text_is_read_as_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let databases = root().join("../shared/corpora/spider/database");
    let copies = tmp.path().join("numeric");
    let mut dbs: BTreeMap<String, (PathBuf, rusqlite::Connection)> = BTreeMap::new();
    let mut numeric_columns = 0;
    for recipe in ["slot-spider", "sel-spider", "rest-spider"] {
        let out = tmp.path().join("out");
        build_and_emit(
            &root().join(format!("recipes/{recipe}.toml")),
            Some(&out),
            Some(&tmp.path().join("store")),
            false,
        )
        .unwrap();
        let dir = out.join(recipe);
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("report/verification.json")).unwrap()).unwrap();
        let (mut checked, mut changed) = (0, Vec::new());
        for line in std::fs::read_to_string(dir.join("data/dev.jsonl")).unwrap().lines() {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let db = row["db_id"].as_str().unwrap().to_string();
            let (_, conn) = dbs.entry(db.clone()).or_insert_with(|| {
                std::fs::create_dir_all(&copies).unwrap();
                let path = copies.join(format!("{db}.sqlite"));
                numeric_columns += numeric_copy(&databases.join(&db).join(format!("{db}.sqlite")), &path).len();
                let conn = open_read_only(&path).unwrap();
                (path, conn)
            });
            let gold: Vec<Vec<Datum>> = serde_json::from_str(row["gold_answer"].as_str().unwrap()).unwrap();
            let meta = row["meta"].as_str().map(|m| serde_json::from_str(m).unwrap());
            let ties = ties_from_meta(meta.as_ref());
            let sql = row["sql"].as_str().unwrap();
            let got = query_rows(conn, sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
            checked += 1;
            if let Err(d) = compare(
                &by_value(&gold),
                &by_value(&got),
                row["ordered"].as_bool().unwrap(),
                ties.as_deref(),
            ) {
                changed.push(format!("{}: {sql}: {d}", row["id"]));
            }
        }
        let dropped = &report["dropped_list"];
        let named = |n: &str| {
            dropped
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["id"] == format!("{recipe}/{n}"))
                .map(|d| d["reason"].as_str().unwrap().to_string())
        };
        println!(
            "{recipe}: {checked} kept rows re-run on the NUMERIC copies, {} changed; rows 169/170: {:?}/{:?}",
            changed.len(),
            named("169"),
            named("170")
        );
        assert!(
            changed.is_empty(),
            "{recipe}: answers read by text order:\n{}",
            changed.join("\n")
        );
        assert!(checked > 800, "{recipe}: {checked} rows");
        for n in ["169", "170"] {
            assert_eq!(named(n).as_deref(), Some("affinity_sensitive"), "{recipe}/{n}");
        }
    }
    println!(
        "{numeric_columns} number-like TEXT columns declared NUMERIC over {} databases",
        dbs.len()
    );
    assert!(numeric_columns > 0);
}
