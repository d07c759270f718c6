//! Reading values out of a table: `retrieve_data` (a column as a list, first values per group on
//! a grouped table), `select_unique_values` (distinct values in first-appearance order) and
//! `truncate` (the first n values of a list).

use super::args::{Args, column, kind};
use super::cells::*;
use super::{R, Value};
use crate::tools::table::{array_from_datums, datum_at, datums};

/// `retrieve_data(data_source, key_name, distinct=false, limit=-1)` → list: the column's values
/// (first occurrences only when `distinct`), then the first `limit` of them (`-1`: all). On a
/// grouped table: the column's value in each group's first row (the group key for the key).
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
    if let Some(n) = args.limit()? {
        values.truncate(n);
    }
    Ok(Value::Column(array_from_datums(&values)))
}

/// `truncate(truncate_array, n)` (SEL) → the first `n` values of a list.
pub(super) fn truncate(args: &Args) -> R<Value> {
    let n = args.json("n")?.as_u64().ok_or("`n` must be a non-negative integer")? as usize;
    match args.value("truncate_array")? {
        Value::Column(a) => Ok(Value::Column(a.slice(0, n.min(a.len())))),
        other => Err(format!("`truncate_array` must be a list, got {}", kind(other))),
    }
}

/// `select_unique_values(unique_array)` → the list's distinct values, first occurrences in order.
pub(super) fn select_unique_values(args: &Args) -> R<Value> {
    let values = match args.value("unique_array")? {
        Value::Column(a) => datums(a.as_ref()),
        other => return Err(format!("`unique_array` must be a list, got {}", kind(other))),
    };
    Ok(Value::Column(array_from_datums(&distinct_datums(values))))
}
