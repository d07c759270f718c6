//! `filter_data`: the rows of a table whose cell satisfies a condition against a value, an
//! earlier single value (`$LABEL$`, a scalar subquery's chain) or, with `is_in`/`not_in`, an
//! earlier list, or another column of the same row; comparisons skip NULLs and a JSON `null` value means `IS [NOT] NULL`.

use std::cmp::Ordering;

use arrow_array::{ArrayRef, RecordBatch};
use serde_json::Value as Json;

use super::args::{Args, column, kind};
use super::cells::*;
use super::{R, Value};
use crate::tools::as_label_ref;
use crate::tools::table::{datum_at, datums};
use crate::verify::Datum;

/// `filter_data(data_source, key_name, value | other_key_name, condition)` → table of the rows
/// whose `key_name` cell satisfies `condition` against `value` (or against the row's
/// `other_key_name` cell: [`compare_columns`]); conditions `equal_to`, `not_equal_to`,
/// `greater_than`, `less_than`, `greater_than_equal_to`, `less_than_equal_to`, `contains`,
/// `like`, `not_like` (with an optional one-character `escape`, SQL's `ESCAPE`), and `is_in`/`not_in` against a list. `value` may be the `$LABEL$` of an
/// earlier single value; a NULL one (an empty subquery) matches no row, as in SQL.
pub(super) fn filter_data(args: &Args) -> R<Value> {
    let t = args.table("data_source")?;
    let (_, col) = column(t, args.str("key_name")?)?;
    let compare = comparison_for(col.as_ref());
    let condition = args.str("condition")?;
    if let Some(other) = args.opt("other_key_name") {
        return compare_columns(args, t, col, other, condition);
    }
    if condition == "is_in" || condition == "not_in" {
        let list = match args.value("value")? {
            Value::Column(a) => datums(a.as_ref()),
            Value::Scalar(d) => vec![d.clone()],
            // A one-column table (a set operation over lists: `IN (SELECT … UNION SELECT …)`).
            Value::Table(l) if l.num_columns() == 1 => datums(l.column(0).as_ref()),
            other => return Err(format!("`{condition}` needs a list as `value`, got {}", kind(other))),
        };
        let has_null = list.iter().any(|d| matches!(d, Datum::Null));
        let member = |c: &Datum| list.iter().any(|v| compare(c, v) == Some(Ordering::Equal));
        let rows = rows_where(t.num_rows(), |r| {
            let c = datum_at(col.as_ref(), r);
            match condition {
                "is_in" => member(&c),
                _ => !matches!(c, Datum::Null) && !has_null && !member(&c),
            }
        })?;
        return take(t, &rows).map(Value::Table);
    }
    let value = match args.json("value")? {
        v if as_label_ref(v).is_some() => match args.value("value")? {
            Value::Scalar(d) => d.clone(),
            Value::Column(a) if a.len() == 1 => datum_at(a.as_ref(), 0),
            Value::Column(a) if a.is_empty() => Datum::Null,
            other => return Err(format!("`value` must be a single value, got {}", kind(other))),
        },
        v => json_to_datum(v)?,
    };
    let test: Box<dyn Fn(&Datum) -> bool> = match (condition, &value) {
        (_, Datum::Null) if args.json("value").ok().and_then(as_label_ref).is_some() => Box::new(|_| false),
        ("equal_to", Datum::Null) => Box::new(|c| matches!(c, Datum::Null)),
        ("not_equal_to", Datum::Null) => Box::new(|c| !matches!(c, Datum::Null)),
        ("equal_to", v) => Box::new(move |c| compare(c, v) == Some(Ordering::Equal)),
        ("not_equal_to", v) => Box::new(move |c| compare(c, v).is_some_and(|o| o != Ordering::Equal)),
        ("greater_than", v) => Box::new(move |c| compare(c, v) == Some(Ordering::Greater)),
        ("less_than", v) => Box::new(move |c| compare(c, v) == Some(Ordering::Less)),
        ("greater_than_equal_to", v) => Box::new(move |c| compare(c, v).is_some_and(|o| o != Ordering::Less)),
        ("less_than_equal_to", v) => Box::new(move |c| compare(c, v).is_some_and(|o| o != Ordering::Greater)),
        ("contains", v) => {
            let needle = cell_text(v).ok_or("`contains` needs a value")?.to_lowercase();
            Box::new(move |c| cell_text(c).is_some_and(|s| s.to_lowercase().contains(&needle)))
        }
        ("like" | "not_like", v) => {
            let pattern = cell_text(v).ok_or_else(|| format!("`{condition}` needs a pattern"))?;
            let escape = match args.opt("escape") {
                None => None,
                Some(Json::String(e)) if e.chars().count() == 1 => e.chars().next(),
                Some(other) => return Err(format!("`escape` must be one character, got {other}")),
            };
            let matcher = Like::new(&pattern, escape)?;
            let want = condition == "like";
            Box::new(move |c| cell_text(c).is_some_and(|s| matcher.is_match(&s) == want))
        }
        (other, _) => return Err(format!("unknown condition `{other}`")),
    };
    let rows = rows_where(t.num_rows(), |r| test(&datum_at(col.as_ref(), r)))?;
    take(t, &rows).map(Value::Table)
}

/// `filter_data` with `other_key_name` instead of `value`: the rows whose `key_name` cell
/// satisfies a comparison (`equal_to` … `less_than_equal_to`) against their `other_key_name`
/// cell, as SQL compares two columns ([`compare_cells`]; a NULL on either side never matches).
fn compare_columns(args: &Args, t: &RecordBatch, col: &ArrayRef, other: &Json, condition: &str) -> R<Value> {
    if args.opt("value").is_some() {
        return Err("give either `value` or `other_key_name`, not both".into());
    }
    let other = other.as_str().ok_or("`other_key_name` must be a column name")?;
    let (_, other) = column(t, other)?;
    let holds: fn(Ordering) -> bool = match condition {
        "equal_to" => |o| o == Ordering::Equal,
        "not_equal_to" => |o| o != Ordering::Equal,
        "greater_than" => |o| o == Ordering::Greater,
        "less_than" => |o| o == Ordering::Less,
        "greater_than_equal_to" => |o| o != Ordering::Less,
        "less_than_equal_to" => |o| o != Ordering::Greater,
        c => {
            return Err(format!(
                "`{c}` cannot compare two columns (use a comparison such as `greater_than`)"
            ));
        }
    };
    let rows = rows_where(t.num_rows(), |r| {
        compare_cells(&datum_at(col.as_ref(), r), &datum_at(other.as_ref(), r)).is_some_and(holds)
    })?;
    take(t, &rows).map(Value::Table)
}

/// The rows `0..n` for which `keep` holds, stopping at the call's deadline
/// ([`super::limits::checkpoint`]).
fn rows_where(n: usize, mut keep: impl FnMut(usize) -> bool) -> R<Vec<u32>> {
    let mut rows = Vec::new();
    for r in 0..n {
        super::limits::checkpoint()?;
        if keep(r) {
            rows.push(r as u32);
        }
    }
    Ok(rows)
}
