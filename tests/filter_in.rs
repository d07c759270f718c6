//! `filter_data` with `is_in` / `not_in` (SQL's `[NOT] IN (…)`) judged by SQLite itself:
//! the executor's rows equal SQLite's for columns of every affinity (TEXT, INTEGER, REAL, and a
//! NUMERIC column mixing numbers and text) against a list mixing integers, reals, numeric and
//! other text and NULL; and a list as long as the largest Spider table (wta_1's 20,662
//! players) is looked up in linear time (the list was scanned once per row: quadratic).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use toolforge::tools::Call;
use toolforge::tools::executor::Executor;
use toolforge::tools::table::{open_read_only, query_rows};

fn call(name: &str, label: &str, arguments: Value) -> Call {
    Call {
        name: name.into(),
        arguments: arguments.as_object().cloned().unwrap_or_else(Map::new),
        label: label.into(),
    }
}

/// The join step of one table `table` of `db` (relative to the root), labelled `label`.
fn join(db: &str, table: &str, label: &str) -> Call {
    call(
        "initialize_active_data",
        label,
        json!({"database_path": db, "condition_sequence": [],
            "alias_to_table_dict": {table: {"original_table_name": table, "modified_table_name": table}}}),
    )
}

/// The executor's `SELECT <table>.<id> FROM <table> WHERE <column> [NOT] IN (SELECT <list
/// column> FROM <list table>)`: the rows' `id` values.
fn executor_ids(
    root: &Path,
    db: &str,
    (table, column, id): (&str, &str, &str),
    (list_table, list_column): (&str, &str),
    condition: &str,
) -> Vec<Vec<toolforge::verify::Datum>> {
    let setup = [join(db, table, "t"), join(db, list_table, "l")];
    let setup: Vec<&Call> = setup.iter().collect();
    let calls = [
        call(
            "retrieve_data",
            "list",
            json!({"data_source": "$l$", "key_name": format!("{list_table}_{list_column}")}),
        ),
        call(
            "filter_data",
            "kept",
            json!({"data_source": "$t$", "key_name": format!("{table}_{column}"), "value": "$list$", "condition": condition}),
        ),
        call(
            "retrieve_data",
            "ids",
            json!({"data_source": "$kept$", "key_name": format!("{table}_{id}")}),
        ),
    ];
    Executor::new(root).run_with_setup(&setup, &calls).unwrap()
}

/// Every affinity against a mixed list, `IN` and `NOT IN`, against SQLite's own answer.
#[test]
fn is_in_and_not_in_match_sqlite_over_mixed_types() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("mix")).unwrap();
    let db = dir.path().join("mix/mix.sqlite");
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "CREATE TABLE t (id INTEGER PRIMARY KEY, txt TEXT, num INTEGER, re REAL, mixed NUMERIC);
         INSERT INTO t VALUES
           (1, '1', 1, 1.0, 1), (2, '1.0', 2, 2.5, 'abc'), (3, ' 1', 10, 0.0, 2.5),
           (4, 'abc', -3, -0.0, '1'), (5, '2.5', 0, 1e20, NULL), (6, NULL, NULL, NULL, 'x1'),
           (7, '10', 7, 7.0, 10), (8, '-3', 3, 3.25, -3), (9, '', 1000000, 0.5, ''),
           (10, '0', 2, 100000000000000000000.0, 0);
         CREATE TABLE l (id INTEGER PRIMARY KEY, v);
         INSERT INTO l (v) VALUES (1), ('2'), (2.5), ('abc'), ('10'), (-3), (0.0), ('1e20'), ('x1'), (7.0), ('');
         CREATE TABLE ln (id INTEGER PRIMARY KEY, v);
         INSERT INTO ln (v) SELECT v FROM l;
         INSERT INTO ln (v) VALUES (NULL);",
    )
    .unwrap();
    drop(c);
    let conn = open_read_only(&db).unwrap();
    // SQLite's judge takes the list's values as literals: the column's affinity applies to
    // each (a number is compared with a TEXT column as its text, a numeric text with a numeric
    // column as a number), as the executor compares. (Against `IN (SELECT v …)` of a column
    // without a declared type SQLite converts neither side.)
    let literals = "1, '2', 2.5, 'abc', '10', -3, 0.0, '1e20', 'x1', 7.0, ''";
    for column in ["txt", "num", "re", "mixed"] {
        for list in ["l", "ln"] {
            for (condition, op) in [("is_in", "IN"), ("not_in", "NOT IN")] {
                let values = if list == "ln" {
                    format!("{literals}, NULL")
                } else {
                    literals.to_string()
                };
                let sql = format!("SELECT id FROM t WHERE {column} {op} ({values})");
                let gold = query_rows(&conn, &sql).unwrap();
                let got = executor_ids(
                    dir.path(),
                    "mix/mix.sqlite",
                    ("t", column, "id"),
                    (list, "v"),
                    condition,
                );
                assert!(
                    toolforge::verify::answers_match(&gold, &got, false),
                    "{sql}: executor {got:?}, SQLite {gold:?}"
                );
            }
        }
    }
}

/// wta_1's players filtered by a list of all 20,662 of their last names, and by a list of 64:
/// SQLite's rows, in well under a second (the scan per row took seconds for the long list).
#[test]
fn is_in_over_the_largest_table_is_linear_and_matches_sqlite() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpora/spider/database");
    let conn = open_read_only(&root.join("wta_1/wta_1.sqlite")).unwrap();
    let setup = [join("wta_1/wta_1.sqlite", "players", "p")];
    let setup: Vec<&Call> = setup.iter().collect();
    for limit in [64, -1] {
        let calls = [
            call(
                "retrieve_data",
                "names",
                json!({"data_source": "$p$", "key_name": "players_last_name", "limit": limit}),
            ),
            call(
                "filter_data",
                "kept",
                json!({"data_source": "$p$", "key_name": "players_last_name", "value": "$names$", "condition": "is_in"}),
            ),
            call(
                "retrieve_data",
                "ids",
                json!({"data_source": "$kept$", "key_name": "players_player_id"}),
            ),
        ];
        let started = Instant::now();
        let got = Executor::new(&root).run_with_setup(&setup, &calls).unwrap();
        let took = started.elapsed();
        let sql =
            format!("SELECT player_id FROM players WHERE last_name IN (SELECT last_name FROM players LIMIT {limit})");
        let gold = query_rows(&conn, &sql).unwrap();
        eprintln!("{limit} values: {} rows in {took:?}", got.len());
        assert!(toolforge::verify::answers_match(&gold, &got, false), "{sql}");
        assert!(gold.len() >= 64, "{}", gold.len());
        assert!(took < Duration::from_millis(1500), "{limit} values: {took:?}");
    }
}
