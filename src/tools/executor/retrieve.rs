//! Reading values out of a table: `retrieve_data` (a column as a list, first values per group on
//! a grouped table), `select_unique_values` (distinct values, or distinct rows of row-aligned
//! lists, in first-appearance order) and
//! `truncate` (the first n values of a list).

use super::args::{Args, column, kind};
use super::cells::*;
use super::{R, Value};
use crate::tools::table::{array_from_datums, datum_at, datums};

/// `retrieve_data(data_source, key_name, distinct=false, limit=-1, offset=0)` → list: the column's
/// values (first occurrences only when `distinct`), the first `offset` of them skipped, then the
/// first `limit` of the rest (`-1`: all) — SQL's `LIMIT limit OFFSET offset`. On a grouped table:
/// the column's value in each group's first row (the group key for the key).
pub(super) fn retrieve_data(args: &Args) -> R<Value> {
    let key = args.str("key_name")?;
    let mut values = match args.value("data_source")? {
        Value::Grouped(g) => {
            let (_, col) = column(&g.table, key)?;
            g.groups
                .iter()
                .map(|rows| datum_at(col.as_ref(), rows[0] as usize))
                .collect()
        }
        Value::Table(t) => datums(column(t, key)?.1.as_ref()),
        Value::Column(a) => datums(a.as_ref()),
        Value::Scalar(d) => vec![d.clone()],
    };
    if args.bool_or("distinct", false)? {
        values = distinct_datums(values);
    }
    values.drain(..args.offset()?.min(values.len()));
    if let Some(n) = args.limit()? {
        values.truncate(n);
    }
    Ok(Value::Column(array_from_datums(&values)))
}

/// `truncate(truncate_array, n, offset=0)` (SEL) → `n` values of a list from position `offset`
/// (the first `offset` skipped, SQL's OFFSET).
pub(super) fn truncate(args: &Args) -> R<Value> {
    let n = args.json("n")?.as_u64().ok_or("`n` must be a non-negative integer")? as usize;
    let offset = args.offset()?;
    match args.value("truncate_array")? {
        Value::Column(a) => {
            let start = offset.min(a.len());
            Ok(Value::Column(a.slice(start, n.min(a.len() - start))))
        }
        other => Err(format!("`truncate_array` must be a list, got {}", kind(other))),
    }
}

/// `select_unique_values(unique_array)` → the list's distinct values, first occurrences in order.
/// With `unique_array` a list of `$LABEL$`s of row-aligned lists (the columns of `SELECT DISTINCT
/// a, b`), a table of their distinct rows (cells compared as in grouping: numbers by value, NULL
/// equals NULL), first occurrences in order, columns named as in `combine_data`.
/// `offset` (default 0) skips the first distinct values or rows, then `limit` (default -1, all)
/// keeps the first `limit` of the rest.
pub(super) fn select_unique_values(args: &Args) -> R<Value> {
    let limit = args.limit()?.unwrap_or(usize::MAX);
    let offset = args.offset()?;
    if args.json("unique_array")?.is_array() {
        let (names, rows) = super::combine::combine_input(args, "unique_array")?;
        let mut seen = std::collections::HashSet::new();
        let rows: Vec<Vec<crate::verify::Datum>> = rows
            .into_iter()
            .take_while(|_| super::limits::live())
            .filter(|r| seen.insert(r.iter().map(datum_key).collect::<Vec<_>>()))
            .skip(offset)
            .take(limit)
            .collect();
        let columns = (0..names.len())
            .map(|i| rows.iter().map(|r| r[i].clone()).collect())
            .collect();
        return Ok(Value::Table(crate::tools::table::batch_from_columns(&names, columns)));
    }
    let values = match args.value("unique_array")? {
        Value::Column(a) => datums(a.as_ref()),
        other => return Err(format!("`unique_array` must be a list, got {}", kind(other))),
    };
    let mut values = distinct_datums(values);
    values.drain(..offset.min(values.len()));
    values.truncate(limit);
    Ok(Value::Column(array_from_datums(&values)))
}
