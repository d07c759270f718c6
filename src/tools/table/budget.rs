//! The join step under a budget, for joins a client asks for (the live server's sessions,
//! issue 31 D1): the rows are estimated before anything is materialised, and the step is
//! refused — never aborted by a failed allocation — past a row budget, a byte budget or a time
//! limit.
//!
//! - **Estimate** ([`estimate_rows`]): a join without conditions is a cross product, whose rows
//!   are exactly the product of its tables' row counts (`SELECT count(*)` of each table, cheap).
//!   When that product is within the row budget it bounds the join whatever its conditions (an
//!   equi-join has at most the cross product's rows); otherwise a join with conditions is
//!   counted by SQLite itself (`SELECT count(*) FROM (<join SQL>)`), under the time limit.
//! - **Bytes**: while materialising, the columns' bytes are reported every
//!   [`super::materialise::REPORT_ROWS`] rows; past the byte budget SQLite is interrupted (its
//!   progress handler), so the overshoot is at most one report's rows.
//! - **Time**: the same progress handler interrupts counting and materialising at the deadline.
//!
//! A refused join is not cached; a join within budget is cached and shared like any join step
//! ([`crate::tools::join_cache`]).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arrow_array::RecordBatch;

use super::{JoinCondition, JoinTable, join_sql, materialise, quote, reuse, rows_hint};

/// Limits of one client-requested join step.
#[derive(Debug, Clone, Copy)]
pub struct JoinBudget {
    /// Most rows the joined table may have (estimated before materialising).
    pub max_rows: u64,
    /// Most bytes the joined table's cells may take while materialising.
    pub max_bytes: usize,
    /// Wall-clock limit of estimating and materialising together.
    pub timeout: Duration,
}

/// Why a budgeted join step was not run to the end.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JoinRefused {
    /// The estimate is over the row budget (nothing was materialised).
    #[error(
        "the join would have {estimate} rows, over the server's join budget of {max} rows (--max-join-rows); join fewer or smaller tables, or add join conditions"
    )]
    TooManyRows {
        /// Estimated rows.
        estimate: u64,
        /// The budget.
        max: u64,
    },
    /// The table under construction grew past the byte budget (it was dropped).
    #[error(
        "the joined table grew past the server's join budget of {max_mib} MiB (--max-join-mib); join fewer or narrower tables"
    )]
    TooManyBytes {
        /// The budget in MiB.
        max_mib: usize,
    },
    /// The caller's `admit` refused the table's growth (the live server's memory budget,
    /// [`crate::serve::memory`]); the table was dropped.
    #[error(
        "the joined table grew past what the server's memory budget holds now ({0} MiB, --max-server-mib); retry later"
    )]
    ServerBusy(usize),
    /// Estimating or materialising ran past the time limit.
    #[error("the join step ran longer than the {0} ms limit (--timeout-ms)")]
    Timeout(u128),
    /// The join itself failed (unknown table or column, unreadable file).
    #[error("{0}")]
    Failed(String),
}

/// The rows of the join of `tables` under `conditions` ([`join_sql`]'s `sql`): exact for a join
/// without conditions (the product of the tables' row counts), else that product when it is at
/// most `max_rows` (an upper bound), else SQLite's count of the join (module docs). Runs under
/// whatever progress handler `conn` has.
pub fn estimate_rows(
    conn: &rusqlite::Connection,
    tables: &[JoinTable],
    conditions: &[JoinCondition],
    sql: &str,
    max_rows: u64,
) -> rusqlite::Result<u64> {
    let mut product: u64 = 1;
    for t in tables {
        let n: i64 = conn.query_row(&format!("SELECT count(*) FROM {}", quote(&t.table)), [], |r| r.get(0))?;
        product = product.saturating_mul(u64::try_from(n).unwrap_or(0));
    }
    if conditions.is_empty() || product <= max_rows {
        return Ok(product);
    }
    let n: i64 = conn.query_row(&format!("SELECT count(*) FROM ({sql})"), [], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// [`super::join_at`] under `budget`: the same cached, shared join step, but estimated first and
/// refused past the budget (module docs). A cached join is returned as is. `admit` is asked
/// for each growth of the table under construction (its bytes so far); `false` stops it
/// ([`JoinRefused::ServerBusy`] with `busy_mib`).
pub fn join_at_within(
    path: &Path,
    tables: &[JoinTable],
    conditions: &[JoinCondition],
    budget: JoinBudget,
    admit: &mut dyn FnMut(usize) -> bool,
    busy_mib: usize,
) -> Result<RecordBatch, JoinRefused> {
    let description = format!("{tables:?}\u{1f}{conditions:?}");
    let key = crate::tools::join_cache::JoinKey::new(path, &description);
    let mut refused: Option<JoinRefused> = None;
    let mut busy = false;
    let made = crate::tools::join_cache::get_or_try_insert(Some(key), |grown| {
        reuse::with_connection(path, |conn| {
            let deadline = Instant::now() + budget.timeout;
            let over = Arc::new(AtomicBool::new(false));
            let stop = over.clone();
            let _ = conn.progress_handler(
                1000,
                Some(move || stop.load(Ordering::Relaxed) || Instant::now() > deadline),
            );
            let result = (|| {
                let (sql, names) = join_sql(conn, tables, conditions).map_err(|e| e.to_string())?;
                let estimate =
                    estimate_rows(conn, tables, conditions, &sql, budget.max_rows).map_err(|e| e.to_string())?;
                if estimate > budget.max_rows {
                    refused = Some(JoinRefused::TooManyRows {
                        estimate,
                        max: budget.max_rows,
                    });
                    return Err(String::new());
                }
                let hint = rows_hint(conn, tables).min(usize::try_from(estimate).unwrap_or(usize::MAX));
                materialise::materialise(conn, &sql, &names, hint, &mut |bytes| {
                    grown(bytes);
                    if bytes > budget.max_bytes {
                        over.store(true, Ordering::Relaxed);
                    } else if !admit(bytes) {
                        busy = true;
                        over.store(true, Ordering::Relaxed);
                    }
                })
                .map_err(|e| e.to_string())
            })();
            let _ = conn.progress_handler(0, None::<fn() -> bool>);
            if result.is_err() && refused.is_none() {
                if busy {
                    refused = Some(JoinRefused::ServerBusy(busy_mib));
                } else if over.load(Ordering::Relaxed) {
                    refused = Some(JoinRefused::TooManyBytes {
                        max_mib: budget.max_bytes >> 20,
                    });
                } else if Instant::now() > deadline {
                    refused = Some(JoinRefused::Timeout(budget.timeout.as_millis()));
                }
            }
            result
        })
    });
    made.map_err(|message| refused.take().unwrap_or(JoinRefused::Failed(message)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database(rows: usize) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.sqlite");
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
             INSERT INTO t SELECT i, 'name ' || i FROM n;"
        ))
        .unwrap();
        (dir, path)
    }

    fn copies(n: usize) -> Vec<JoinTable> {
        (0..n)
            .map(|i| JoinTable {
                alias: format!("t{i}"),
                table: "t".into(),
                prefix: format!("t_{i}"),
            })
            .collect()
    }

    const ROOMY: JoinBudget = JoinBudget {
        max_rows: 1_000_000,
        max_bytes: 1 << 30,
        timeout: Duration::from_secs(30),
    };

    #[test]
    fn a_cross_join_past_the_row_budget_is_refused_before_materialising() {
        let (_dir, path) = database(2000);
        // Three copies without conditions: 8e9 rows, refused from the counts alone (instantly).
        let started = Instant::now();
        let got = join_at_within(&path, &copies(3), &[], ROOMY, &mut |_| true, 0);
        assert_eq!(
            got.unwrap_err(),
            JoinRefused::TooManyRows {
                estimate: 8_000_000_000,
                max: 1_000_000
            }
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        // The estimate of an equi-join is its real row count (SQLite's own count as the judge).
        let conn = rusqlite::Connection::open(&path).unwrap();
        let on = vec![JoinCondition("t0.id".into(), "t1.id".into(), "INNER".into())];
        let (sql, _) = join_sql(&conn, &copies(2), &on).unwrap();
        let real: i64 = conn
            .query_row(&format!("SELECT count(*) FROM ({sql})"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(estimate_rows(&conn, &copies(2), &on, &sql, 10).unwrap(), real as u64);
        let within = join_at_within(&path, &copies(2), &on, ROOMY, &mut |_| true, 0).unwrap();
        assert_eq!(within.num_rows() as i64, real);
    }

    #[test]
    fn a_join_past_the_byte_budget_or_the_time_limit_is_refused() {
        let (_dir, path) = database(400);
        // 160,000 rows (within the row budget) of 4 columns: past a 1 MiB byte budget.
        let small_bytes = JoinBudget {
            max_bytes: 1 << 20,
            ..ROOMY
        };
        assert_eq!(
            join_at_within(&path, &copies(2), &[], small_bytes, &mut |_| true, 0).unwrap_err(),
            JoinRefused::TooManyBytes { max_mib: 1 }
        );
        // A join with a condition whose count runs past a 1 ms limit (the third copy joins
        // without one: 64e6 rows to count).
        let on = vec![JoinCondition("t0.id".into(), "t1.id".into(), "INNER".into())];
        let (_big, big_path) = database(8000);
        let tight = JoinBudget {
            max_rows: 10,
            timeout: Duration::from_millis(1),
            ..ROOMY
        };
        assert_eq!(
            join_at_within(&big_path, &copies(3), &on, tight, &mut |_| true, 0).unwrap_err(),
            JoinRefused::Timeout(1)
        );
        // Nothing refused was cached: the same join within budget runs.
        assert_eq!(
            join_at_within(&path, &copies(2), &[], ROOMY, &mut |_| true, 0)
                .unwrap()
                .num_rows(),
            160_000
        );
    }
}
