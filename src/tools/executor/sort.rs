//! `sort_data`: a stable sort on one column, NULL first ascending and last descending
//! (SQLite); descending by default like the reference.

use super::args::{Args, column};
use super::cells::*;
use super::{R, Value};
use crate::tools::table::datums;

/// `sort_data(data_source, key_name, ascending=false)` → the table stably sorted by the column
/// (NULL first ascending, last descending).
pub(super) fn sort_data(args: &Args) -> R<Value> {
    let t = args.table("data_source")?;
    let (_, col) = column(t, args.str("key_name")?)?;
    let ascending = args.bool_or("ascending", false)?;
    let cells = datums(col.as_ref());
    let mut rows: Vec<u32> = (0..t.num_rows() as u32).collect();
    rows.sort_by(|&a, &b| {
        let o = sql_order(&cells[a as usize], &cells[b as usize]);
        if ascending { o } else { o.reverse() }
    });
    take(t, &rows).map(Value::Table)
}
