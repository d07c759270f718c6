//! Combining two tables or column lists: `concatenate_data` (rows of both, no de-duplication)
//! and `combine_data` with SQL set semantics (`union`, `union_all`, `intersect`, `except`) or
//! the `either` of an OR of two filters (a row matching both branches appears once).

use std::collections::HashMap;

use serde_json::Value as Json;

use super::args::{Args, column, kind};
use super::cells::*;
use super::{R, Value};
use crate::tools::as_label_ref;
use crate::tools::table::{batch_from_columns, datums};
use crate::verify::Datum;

/// `concatenate_data(data_source_1, data_source_2)` → the rows of the first table, then the
/// rows of the second (same columns; no de-duplication).
pub(super) fn concatenate_data(args: &Args) -> R<Value> {
    let a = args.table("data_source_1")?;
    let b = args.table("data_source_2")?;
    if b.num_columns() != a.num_columns() {
        return Err("tables to concatenate have different columns".into());
    }
    let names: Vec<String> = a.schema().fields().iter().map(|f| f.name().clone()).collect();
    let mut columns = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let (_, bc) = column(b, name)?;
        let mut cells = datums(a.column(i).as_ref());
        cells.extend(datums(bc.as_ref()));
        columns.push(cells);
    }
    Ok(Value::Table(batch_from_columns(&names, columns)))
}

/// The rows of a `combine_data` input: a table's rows, or the zip of a list of `$LABEL$`s of
/// lists / single values (a single value counts as a one-row column).
pub(super) fn combine_input(args: &Args, name: &str) -> R<(Vec<String>, Vec<Vec<Datum>>)> {
    let v = args.json(name)?;
    let columns: Vec<(String, Vec<Datum>)> = match v {
        Json::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let label = as_label_ref(item).ok_or_else(|| format!("`{name}` items must be $LABEL$ references"))?;
                let cells = match args.env.get(label) {
                    Some(Value::Column(a)) => datums(a.as_ref()),
                    Some(Value::Scalar(d)) => vec![d.clone()],
                    Some(other) => return Err(format!("`{name}`: `{label}` must be a list, got {}", kind(other))),
                    None => return Err(format!("`{name}`: no earlier output labelled `{label}`")),
                };
                Ok((format!("column_{i}"), cells))
            })
            .collect::<R<_>>()?,
        _ => match args.value(name)? {
            Value::Table(t) => t
                .schema()
                .fields()
                .iter()
                .zip(t.columns())
                .map(|(f, a)| (f.name().clone(), datums(a.as_ref())))
                .collect(),
            Value::Column(a) => vec![("column_0".into(), datums(a.as_ref()))],
            Value::Scalar(d) => vec![("column_0".into(), vec![d.clone()])],
            other => return Err(format!("`{name}` must be a table or lists, got {}", kind(other))),
        },
    };
    let n = columns.first().map_or(0, |c| c.1.len());
    if columns.iter().any(|c| c.1.len() != n) {
        return Err(format!("`{name}`: the lists have different lengths"));
    }
    let names = columns.iter().map(|c| c.0.clone()).collect();
    let rows = (0..n)
        .map(|r| columns.iter().map(|c| c.1[r].clone()).collect())
        .collect();
    Ok((names, rows))
}

/// `combine_data(data_source_1, data_source_2, operation)` (toolforge extension) → a table: each
/// source is a table or a list of `$LABEL$`s of lists (its columns); both have the same number
/// of columns, and rows compare cell by cell as in grouping (numbers by value, NULL equals
/// NULL). `union`: the distinct rows of both; `union_all`: every row of the first, then of the
/// second; `intersect`: the distinct rows of the first that the second holds; `except`: the
/// distinct rows of the first that the second lacks; `either`: every row of the first, then the
/// rows of the second beyond the number of times the first holds them (two filters of one table
/// combined as an OR). Rows keep first-appearance order; columns are named after the first.
pub(super) fn combine_data(args: &Args) -> R<Value> {
    let (names, a) = combine_input(args, "data_source_1")?;
    let (_, b) = combine_input(args, "data_source_2")?;
    if a.first().zip(b.first()).is_some_and(|(x, y)| x.len() != y.len()) {
        return Err("the sources to combine have different numbers of columns".into());
    }
    let key = |r: &Vec<Datum>| r.iter().map(datum_key).collect::<Vec<_>>();
    let op = args.str("operation")?;
    let mut out: Vec<Vec<Datum>> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let in_b: std::collections::HashSet<_> = b.iter().map(key).collect();
    match op {
        "union_all" => out = a.into_iter().chain(b).collect(),
        "union" => {
            for r in a.into_iter().chain(b) {
                super::limits::checkpoint()?;
                if seen.insert(key(&r)) {
                    out.push(r);
                }
            }
        }
        "intersect" | "except" => {
            for r in a {
                super::limits::checkpoint()?;
                let k = key(&r);
                if in_b.contains(&k) == (op == "intersect") && seen.insert(k) {
                    out.push(r);
                }
            }
        }
        "either" => {
            let mut count: HashMap<Vec<(u8, u64, String)>, usize> = HashMap::new();
            for r in &a {
                *count.entry(key(r)).or_insert(0) += 1;
            }
            out = a;
            for r in b {
                super::limits::checkpoint()?;
                match count.get_mut(&key(&r)) {
                    Some(n) if *n > 0 => *n -= 1,
                    _ => out.push(r),
                }
            }
        }
        other => return Err(format!("unknown operation `{other}`")),
    }
    let columns: Vec<Vec<Datum>> = (0..names.len())
        .map(|c| out.iter().map(|r| r[c].clone()).collect())
        .collect();
    Ok(Value::Table(batch_from_columns(&names, columns)))
}
