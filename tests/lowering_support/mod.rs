//! The lowering tests' shared judge: lower one SQL query against a fixture database, run the
//! calls on the executor, and compare with what real SQLite answers on the same database
//! (`verify::answers_match`, order-sensitive when the query has an `ORDER BY`).

#![allow(dead_code)]

use std::path::Path;

use toolforge::sql::{self, plan::QueryPlan, schema::Schema, slot::Lowered};
use toolforge::tools::executor::Executor;
use toolforge::tools::table::{open_read_only, query_rows};
use toolforge::verify::answers_match;

/// Parses and lowers `sql_text` against the schema of `<dir>/<db>` (`db` relative, as in a row:
/// `zoo/zoo.sqlite`).
pub fn lower(dir: &Path, db: &str, sql_text: &str) -> Result<(QueryPlan, Lowered), sql::LowerError> {
    let conn = open_read_only(&dir.join(db)).unwrap();
    let schema = Schema::load(&conn).unwrap();
    sql::parse(sql_text).and_then(|stmt| {
        let plan = sql::plan::build(&stmt, &schema)?;
        let lowered = sql::slot::lower(&plan, db)?;
        Ok((plan, lowered))
    })
}

/// Lowers `sql_text`, checks every label is unique, runs the calls and asserts they give
/// SQLite's answer; returns the lowering. Panics with the query, both answers and the calls.
pub fn check(dir: &Path, db: &str, sql_text: &str) -> Lowered {
    let (plan, lowered) = lower(dir, db, sql_text).unwrap_or_else(|e| panic!("{sql_text}: {e}"));
    let mut labels: Vec<&str> = std::iter::once(&lowered.setup)
        .chain(&lowered.additional_setup)
        .chain(&lowered.calls)
        .map(|c| c.label.as_str())
        .collect();
    let n = labels.len();
    labels.sort();
    labels.dedup();
    assert_eq!(labels.len(), n, "{sql_text}: every label is unique");
    let conn = open_read_only(&dir.join(db)).unwrap();
    let gold = query_rows(&conn, sql_text).unwrap();
    let setup: Vec<&toolforge::tools::Call> = std::iter::once(&lowered.setup)
        .chain(&lowered.additional_setup)
        .collect();
    let got = Executor::new(dir)
        .run_with_setup(&setup, &lowered.calls)
        .unwrap_or_else(|e| panic!("{sql_text}: {e}\n calls {:#?}", lowered.calls));
    assert!(
        answers_match(&gold, &got, !plan.order_by.is_empty()),
        "{sql_text}\n gold {gold:?}\n got {got:?}\n calls {:#?}",
        lowered.calls
    );
    lowered
}

/// The drop reason code of `sql_text`, or `lowered`.
pub fn reason(dir: &Path, db: &str, sql_text: &str) -> String {
    match lower(dir, db, sql_text) {
        Ok(_) => "lowered".into(),
        Err(e) => e.reason(),
    }
}
