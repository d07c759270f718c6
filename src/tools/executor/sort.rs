//! `sort_data`: a stable sort on one column, or on an earlier row-aligned list (`by_values`: an
//! `ORDER BY a - b` computed by `calculate`), NULL first ascending and last descending (SQLite);
//! descending by default like the reference.

use super::args::{Args, column, kind};
use super::cells::*;
use super::{R, Value};
use crate::tools::table::datums;

/// `sort_data(data_source, key_name | by_values, ascending=false)` → the table stably sorted by
/// the column, or by `by_values`, the `$LABEL$` of a list with one value per row (NULL first
/// ascending, last descending).
pub(super) fn sort_data(args: &Args) -> R<Value> {
    let t = args.table("data_source")?;
    let ascending = args.bool_or("ascending", false)?;
    let cells = match args.opt("by_values") {
        Some(_) if args.opt("key_name").is_some() => {
            return Err("give either `key_name` or `by_values`, not both".into());
        }
        Some(_) => match args.value("by_values")? {
            Value::Column(a) if a.len() == t.num_rows() => datums(a.as_ref()),
            Value::Column(a) => {
                return Err(format!(
                    "`by_values` has {} values for a table of {} rows (it must be row-aligned)",
                    a.len(),
                    t.num_rows()
                ));
            }
            other => return Err(format!("`by_values` must be a list, got {}", kind(other))),
        },
        None => datums(column(t, args.str("key_name")?)?.1.as_ref()),
    };
    let mut rows: Vec<u32> = (0..t.num_rows() as u32).collect();
    rows.sort_by(|&a, &b| {
        let o = sql_order(&cells[a as usize], &cells[b as usize]);
        if ascending { o } else { o.reverse() }
    });
    take(t, &rows).map(Value::Table)
}
