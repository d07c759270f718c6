//! The join step's result as a record batch, built at about its final size (issue 17).
//!
//! Each column accumulates its cells in one growing vector of the narrowest representation its
//! cells so far allow: a NULL count while it has held only NULLs; `i64` values (8 bytes a cell)
//! while its non-NULL cells are integers; `f64` values while they are reals; 16-byte cells once
//! it mixes integers and reals (the text rendering of `1` and `1.0` differs, and an integer above
//! 2^53 has no exact `f64`, so both are kept until the column's type is known); UTF-8 bytes
//! with `i32` offsets while its non-NULL cells are text; and, once it holds numbers and text
//! together, each cell as a [`Datum`] of its own storage class (≈ 32 bytes a cell plus the text;
//! such columns are rare), which becomes the union of [`super::mixed`]. NULLs are a validity
//! bitmap beside the values.
//! Room for the rows the join is expected to have is reserved up front (the caller's estimate:
//! the first table's row count), so a large column is allocated once instead of growing by
//! doubling, whose copies leave freed blocks the C allocator keeps. When SQLite has returned the
//! last row, each vector becomes its Arrow array without a copy
//! ([`ScalarBuffer`] and [`Buffer::from_vec`] take the allocation over), one column at a time.
//!
//! Peak memory of one join step is therefore ≈ the final table (8 bytes per numeric cell, the
//! text bytes plus 4 per text cell, a bit per cell for NULLs), plus 16 bytes per cell of the
//! columns mixing integers and reals, plus the unused capacity of the growing vectors: large
//! vectors grow by doubling, but a large allocation is mapped pages and its untouched tail is
//! not resident, so the resident cost of growth is one copy at most of the one vector being
//! reallocated. The previous accumulation (every numeric cell as a 16-byte value, converted to
//! its Arrow array while still alive) cost about twice the final table.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use rusqlite::types::ValueRef;

use super::JoinError;
use crate::verify::Datum;

/// Rows between two reports of the bytes held so far to [`materialise`]'s `grown`.
pub const REPORT_ROWS: usize = 1 << 16;

/// Runs the join SQL and builds the record batch (typing of [`super`]). `rows_hint` is the rows
/// the join is expected to have (room for them is reserved after the first row, and for text
/// bytes at the first report, at the rate of those rows), so that a large column is allocated
/// once instead of growing by doubling: only an estimate, the vectors grow past it as needed and
/// are shrunk to their length at the end. `grown` is told the
/// bytes the columns' cells take every [`REPORT_ROWS`] rows (the join cache's gate on oversize joins,
/// [`crate::tools::join_cache`]).
pub fn materialise(
    conn: &rusqlite::Connection,
    sql: &str,
    names: &[String],
    rows_hint: usize,
    grown: &mut dyn FnMut(usize),
) -> Result<RecordBatch, JoinError> {
    let err = |source| JoinError::Sqlite {
        path: sql.to_string(),
        source,
    };
    let mut stmt = conn.prepare(sql).map_err(err)?;
    let n = stmt.column_count();
    let mut columns: Vec<Column> = (0..n).map(|_| Column::Nulls(0)).collect();
    let mut rows = stmt.query([]).map_err(err)?;
    let mut count = 0usize;
    while let Some(row) = rows.next().map_err(err)? {
        for (i, column) in columns.iter_mut().enumerate() {
            column.push(row.get_ref(i).expect("column index"));
        }
        count += 1;
        if count == 1 || count == REPORT_ROWS {
            columns.iter_mut().for_each(|c| c.reserve(rows_hint, count));
        }
        if count % REPORT_ROWS == 0 {
            grown(columns.iter().map(Column::bytes).sum());
        }
    }
    drop(rows);
    drop(stmt);
    // `into_iter` hands each column to `finish` and frees what it does not reuse before the next.
    let arrays: Vec<ArrayRef> = columns.into_iter().map(Column::finish).collect();
    Ok(super::batch_of_arrays(names, arrays, count))
}

/// A numeric cell of a column mixing integers and reals.
#[derive(Clone, Copy)]
enum Num {
    Null,
    Int(i64),
    Real(f64),
}

impl Num {
    fn real(self) -> Option<f64> {
        match self {
            Num::Null => None,
            Num::Int(i) => Some(i as f64),
            Num::Real(r) => Some(r),
        }
    }
}

/// One column under construction, in the narrowest representation of its cells so far.
enum Column {
    /// Only NULLs, this many.
    Nulls(usize),
    /// Integers (a NULL holds 0 and is cleared in `valid`).
    Ints { values: Vec<i64>, valid: NullBufferBuilder },
    /// Reals (a NULL holds 0.0 and is cleared in `valid`).
    Reals { values: Vec<f64>, valid: NullBufferBuilder },
    /// Integers and reals.
    Mixed(Vec<Num>),
    /// Text: the cells' bytes, end offsets after a leading 0.
    Text {
        offsets: Vec<i32>,
        bytes: Vec<u8>,
        valid: NullBufferBuilder,
    },
    /// Numbers and text: each cell as a datum of its own storage class (a union at the end,
    /// [`super::mixed`]).
    Cells(Vec<Datum>),
}

/// A validity builder starting with `nulls` NULLs.
fn nulls(nulls: usize) -> NullBufferBuilder {
    let mut b = NullBufferBuilder::new(nulls);
    b.append_n_nulls(nulls);
    b
}

impl Column {
    fn push(&mut self, value: ValueRef<'_>) {
        let value = match value {
            ValueRef::Real(r) if r.is_nan() => ValueRef::Null,
            v => v,
        };
        match (&mut *self, value) {
            (Column::Nulls(n), ValueRef::Null) => *n += 1,
            (Column::Ints { values, valid }, ValueRef::Null) => {
                values.push(0);
                valid.append_null();
            }
            (Column::Ints { values, valid }, ValueRef::Integer(i)) => {
                values.push(i);
                valid.append_non_null();
            }
            (Column::Reals { values, valid }, ValueRef::Null) => {
                values.push(0.0);
                valid.append_null();
            }
            (Column::Reals { values, valid }, ValueRef::Real(r)) => {
                values.push(r);
                valid.append_non_null();
            }
            (Column::Mixed(cells), v @ (ValueRef::Null | ValueRef::Integer(_) | ValueRef::Real(_))) => {
                cells.push(match v {
                    ValueRef::Integer(i) => Num::Int(i),
                    ValueRef::Real(r) => Num::Real(r),
                    _ => Num::Null,
                })
            }
            (Column::Text { offsets, bytes, valid }, v @ (ValueRef::Null | ValueRef::Text(_) | ValueRef::Blob(_))) => {
                match v {
                    ValueRef::Text(t) => {
                        bytes.extend_from_slice(String::from_utf8_lossy(t).as_bytes());
                        valid.append_non_null();
                    }
                    ValueRef::Blob(b) => {
                        for x in b {
                            bytes.extend_from_slice(format!("{x:02x}").as_bytes());
                        }
                        valid.append_non_null();
                    }
                    _ => valid.append_null(),
                }
                offsets.push(i32::try_from(bytes.len()).expect("join step column text over 2 GiB"));
            }
            (Column::Cells(cells), v) => cells.push(super::datum_from_sqlite(v)),
            // A cell the representation cannot hold: widen it, then push the cell again.
            (_, v) => {
                self.widen(v);
                self.push(v);
            }
        }
    }

    /// The next representation, able to hold `v`: integers or reals after NULLs, both after
    /// one of them, text after NULLs, datums after numbers and text met.
    fn widen(&mut self, v: ValueRef<'_>) {
        let text = matches!(v, ValueRef::Text(_) | ValueRef::Blob(_));
        *self = match (std::mem::replace(self, Column::Nulls(0)), text) {
            (Column::Nulls(n), false) if matches!(v, ValueRef::Integer(_)) => Column::Ints {
                values: vec![0; n],
                valid: nulls(n),
            },
            (Column::Nulls(n), false) => Column::Reals {
                values: vec![0.0; n],
                valid: nulls(n),
            },
            (Column::Ints { values, valid }, false) => Column::Mixed(
                values
                    .into_iter()
                    .enumerate()
                    .map(|(i, x)| if valid.is_valid(i) { Num::Int(x) } else { Num::Null })
                    .collect(),
            ),
            (Column::Reals { values, valid }, false) => Column::Mixed(
                values
                    .into_iter()
                    .enumerate()
                    .map(|(i, x)| if valid.is_valid(i) { Num::Real(x) } else { Num::Null })
                    .collect(),
            ),
            (Column::Nulls(n), true) => {
                let mut valid = NullBufferBuilder::new(n);
                valid.append_n_nulls(n);
                Column::Text {
                    offsets: vec![0; n + 1],
                    bytes: Vec::new(),
                    valid,
                }
            }
            // Numbers and text: every cell so far as a datum of its own class.
            (old, _) => Column::Cells(old.into_datums()),
        };
    }

    /// The cells so far, in order, as datums (the column is becoming [`Column::Cells`]).
    fn into_datums(self) -> Vec<Datum> {
        let valid_at = |valid: &NullBufferBuilder, i: usize| valid.is_valid(i);
        match self {
            Column::Nulls(n) => vec![Datum::Null; n],
            Column::Ints { values, valid } => values
                .into_iter()
                .enumerate()
                .map(|(i, x)| {
                    if valid_at(&valid, i) {
                        Datum::Int(x)
                    } else {
                        Datum::Null
                    }
                })
                .collect(),
            Column::Reals { values, valid } => values
                .into_iter()
                .enumerate()
                .map(|(i, x)| {
                    if valid_at(&valid, i) {
                        Datum::Real(x)
                    } else {
                        Datum::Null
                    }
                })
                .collect(),
            Column::Mixed(cells) => cells
                .into_iter()
                .map(|n| match n {
                    Num::Null => Datum::Null,
                    Num::Int(i) => Datum::Int(i),
                    Num::Real(r) => Datum::Real(r),
                })
                .collect(),
            Column::Text { offsets, bytes, valid } => (0..offsets.len() - 1)
                .map(|i| {
                    if valid_at(&valid, i) {
                        Datum::Text(
                            String::from_utf8_lossy(&bytes[offsets[i] as usize..offsets[i + 1] as usize]).into_owned(),
                        )
                    } else {
                        Datum::Null
                    }
                })
                .collect(),
            Column::Cells(cells) => cells,
        }
    }

    /// Reserves room for `rows` cells in all (text bytes at the rate of the `seen` rows so far).
    fn reserve(&mut self, rows: usize, seen: usize) {
        let more = rows.saturating_sub(seen);
        match self {
            Column::Nulls(_) => {}
            Column::Ints { values, .. } => values.reserve(more),
            Column::Reals { values, .. } => values.reserve(more),
            Column::Mixed(cells) => cells.reserve(more),
            Column::Cells(cells) => cells.reserve(more),
            Column::Text { offsets, bytes, .. } => {
                offsets.reserve(more);
                if seen >= REPORT_ROWS {
                    bytes.reserve(bytes.len() / seen * more);
                }
            }
        }
    }

    /// Bytes the column's cells take (values and offsets; the validity bitmap is left out).
    fn bytes(&self) -> usize {
        match self {
            Column::Nulls(_) => 0,
            Column::Ints { values, .. } => values.len() * 8,
            Column::Reals { values, .. } => values.len() * 8,
            Column::Mixed(cells) => cells.len() * std::mem::size_of::<Num>(),
            Column::Cells(cells) => {
                let text: usize = cells
                    .iter()
                    .map(|d| if let Datum::Text(t) = d { t.len() } else { 0 })
                    .sum();
                cells.len() * std::mem::size_of::<Datum>() + text
            }
            Column::Text { offsets, bytes, .. } => offsets.len() * 4 + bytes.len(),
        }
    }

    /// The column as its Arrow array (module docs), reusing its vectors' allocations.
    fn finish(self) -> ArrayRef {
        match self {
            Column::Nulls(n) => Arc::new(StringArray::new_null(n)),
            Column::Ints { mut values, mut valid } => {
                values.shrink_to_fit();
                Arc::new(Int64Array::new(ScalarBuffer::from(values), valid.finish()))
            }
            Column::Reals { mut values, mut valid } => {
                values.shrink_to_fit();
                Arc::new(Float64Array::new(ScalarBuffer::from(values), valid.finish()))
            }
            Column::Mixed(cells) => Arc::new(cells.into_iter().map(Num::real).collect::<Float64Array>()),
            Column::Cells(cells) => super::array_from_datums(&cells),
            Column::Text {
                mut offsets,
                mut bytes,
                mut valid,
            } => {
                offsets.shrink_to_fit();
                bytes.shrink_to_fit();
                let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
                Arc::new(StringArray::new(offsets, Buffer::from_vec(bytes), valid.finish()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{batch_from_columns, datums, query_rows};
    use super::*;

    /// Cells of one column, in row order, as SQL literals.
    const COLUMNS: &[(&str, &[&str])] = &[
        ("text_first", &["'a'", "1", "2.5", "NULL", "3", "4.0", "x'0aff'"]),
        ("text_last", &["1", "2.5", "NULL", "3", "4.0", "1e20", "'z'"]),
        ("ints", &["1", "NULL", "-3", "9007199254740993", "5", "6", "7"]),
        ("ints_then_reals", &["1", "2", "3", "4", "5.5", "6", "0.1"]),
        (
            "reals_then_ints",
            &["1.5", "2.0", "NULL", "4", "5", "9007199254740993", "7"],
        ),
        ("all_null", &["NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "NULL"]),
        (
            "late_nulls",
            &["NULL", "NULL", "NULL", "NULL", "NULL", "NULL", "'late'"],
        ),
        (
            "blob_mid",
            &["NULL", "2", "x'00'", "NULL", "1.0", "'t'", "0.30000000000000004"],
        ),
        (
            "nan_free_reals",
            &["1e300", "-0.0", "2.0", "NULL", "1e15", "123456789.125", "1e-7"],
        ),
    ];

    fn database(rows: usize) -> (tempfile::TempDir, rusqlite::Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = rusqlite::Connection::open(dir.path().join("t.sqlite")).unwrap();
        let names: Vec<&str> = COLUMNS.iter().map(|(n, _)| *n).collect();
        conn.execute_batch(&format!("CREATE TABLE t ({});", names.join(", ")))
            .unwrap();
        for r in 0..rows {
            let cells: Vec<&str> = COLUMNS.iter().map(|(_, c)| c[r % c.len()]).collect();
            conn.execute_batch(&format!("INSERT INTO t VALUES ({});", cells.join(", ")))
                .unwrap();
        }
        (dir, conn)
    }

    /// The old whole-column path: every cell as a datum, then [`batch_from_columns`].
    fn reference(conn: &rusqlite::Connection, sql: &str, names: &[String]) -> RecordBatch {
        let rows = query_rows(conn, sql).unwrap();
        let columns = (0..names.len())
            .map(|c| rows.iter().map(|r| r[c].clone()).collect())
            .collect();
        batch_from_columns(names, columns)
    }

    fn assert_same(got: &RecordBatch, want: &RecordBatch, what: &str) {
        assert_eq!(got.schema(), want.schema(), "{what}");
        assert_eq!(got.num_rows(), want.num_rows(), "{what}");
        for (i, (g, w)) in got.columns().iter().zip(want.columns()).enumerate() {
            assert_eq!(datums(g.as_ref()), datums(w.as_ref()), "{what}: column {i}");
        }
    }

    #[test]
    fn materialisation_types_and_renders_like_whole_datum_columns() {
        let names: Vec<String> = COLUMNS.iter().map(|(n, _)| n.to_string()).collect();
        let (_dir, conn) = database(7);
        // Every prefix of the rows (so each column's text, reals or NULLs come first, last, or
        // not at all; zero rows is the empty result), in both orders (text-first columns become
        // text-last, integers-then-reals become reals-then-integers).
        for order in ["ASC", "DESC"] {
            for limit in 0..=7 {
                let sql = format!("SELECT * FROM t ORDER BY rowid {order} LIMIT {limit}");
                let got = materialise(&conn, &sql, &names, 3, &mut |_| {}).unwrap();
                assert_same(&got, &reference(&conn, &sql, &names), &format!("{order} {limit}"));
            }
        }
    }

    #[test]
    fn a_large_join_step_matches_whole_columns_and_reports_its_growth() {
        let names: Vec<String> = COLUMNS.iter().map(|(n, _)| n.to_string()).collect();
        let (_dir, conn) = database(0);
        // Integers turning into reals past the first report, text only in the last row.
        let n = 2 * REPORT_ROWS + 5;
        conn.execute_batch(&format!(
            "INSERT INTO t (ints, ints_then_reals, text_last, late_nulls)
             WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < {n})
             SELECT i, CASE WHEN i > {REPORT_ROWS} THEN i * 0.5 ELSE i END,
                    CASE WHEN i = {n} THEN 'end' ELSE i * 1.0 END, NULL FROM s;"
        ))
        .unwrap();
        let sql = "SELECT * FROM t";
        let mut sizes = Vec::new();
        let got = materialise(&conn, sql, &names, 10, &mut |b| sizes.push(b)).unwrap();
        assert_same(&got, &reference(&conn, sql, &names), "large");
        assert_eq!(sizes.len(), 2, "told every REPORT_ROWS rows");
        assert!(sizes[0] > 0 && sizes[1] > sizes[0], "{sizes:?}");
    }
}
