//! `aggregate_data`: `min`, `max`, `sum`, `mean`, `count`, `std`, `argmin`, `argmax` over a
//! table's column, a list, or each group of a grouped table; NULLs are skipped.

use std::cmp::Ordering;

use serde_json::Value as Json;

use super::args::{Args, column};
use super::cells::*;
use super::{R, Value};
use crate::tools::table::{batch_from_columns, datum_at, datums};
use crate::verify::Datum;

pub(super) fn aggregate(values: Vec<Datum>, how: &str, count_rows: bool) -> R<Datum> {
    if how == "count" && count_rows {
        return Ok(Datum::Int(values.len() as i64));
    }
    let present: Vec<Datum> = values.into_iter().filter(|d| !matches!(d, Datum::Null)).collect();
    // SQLite's sum/avg read text as its numeric value, and non-numeric text as 0.
    let numbers = || -> R<Vec<f64>> {
        Ok(present
            .iter()
            .map(|d| {
                d.as_f64()
                    .unwrap_or_else(|| cell_text(d).and_then(|t| t.trim().parse().ok()).unwrap_or(0.0))
            })
            .collect())
    };
    Ok(match how {
        "count" => Datum::Int(present.len() as i64),
        "sum" if present.is_empty() => Datum::Null,
        "sum" if present.iter().all(|d| matches!(d, Datum::Int(_))) => {
            let mut ints = present.iter().map(|d| if let Datum::Int(i) = d { *i } else { 0 });
            ints.try_fold(0i64, |a, b| a.checked_add(b))
                .map(Datum::Int)
                .ok_or("integer overflow in `sum`")?
        }
        "sum" => Datum::real(numbers()?.iter().sum()),
        "mean" | "std" if present.is_empty() => Datum::Null,
        "mean" => {
            let xs = numbers()?;
            Datum::real(xs.iter().sum::<f64>() / xs.len() as f64)
        }
        "std" => {
            let xs = numbers()?;
            let m = xs.iter().sum::<f64>() / xs.len() as f64;
            Datum::real((xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64).sqrt())
        }
        "min" | "max" | "argmin" | "argmax" => {
            let want = if how.ends_with("min") {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            let mut best: Option<(usize, &Datum)> = None;
            for (i, d) in present.iter().enumerate() {
                if best.is_none_or(|(_, b)| sql_order(d, b) == want) {
                    best = Some((i, d));
                }
            }
            match (best, how.starts_with("arg")) {
                (None, _) => Datum::Null,
                (Some((i, _)), true) => Datum::Int(i as i64),
                (Some((_, d)), false) => d.clone(),
            }
        }
        other => return Err(unknown_aggregation(other)),
    })
}

/// The `aggregation_type` values `aggregate_data` accepts.
pub const AGGREGATION_TYPES: [&str; 8] = ["min", "max", "sum", "mean", "count", "std", "argmin", "argmax"];

pub(super) fn unknown_aggregation(how: &str) -> String {
    format!(
        "unknown aggregation_type `{how}`; expected one of {}",
        AGGREGATION_TYPES.map(|t| format!("`{t}`")).join(", ")
    )
}

/// `aggregate_data(data_source, aggregation_type, key_name="", distinct=false, limit=-1)`:
/// `min`, `max`, `sum`, `mean`, `count`, `std` (population), `argmin`/`argmax` (0-based position
/// of the first extreme). NULLs are skipped; `count` with an empty `key_name` counts rows; `sum`,
/// `mean` of nothing is NULL. Over a table or list → a single value; over a grouped table → a
/// table with one row per group: the group's first row plus a column named after
/// `aggregation_type`.
pub(super) fn aggregate_data(args: &Args) -> R<Value> {
    let how = args.str("aggregation_type")?;
    if !AGGREGATION_TYPES.contains(&how) {
        return Err(unknown_aggregation(how));
    }
    let key = args.opt("key_name").and_then(Json::as_str).filter(|k| !k.is_empty());
    let distinct = args.bool_or("distinct", false)?;
    let limit = args.limit()?;
    let prepare = |mut values: Vec<Datum>| {
        if distinct {
            values = distinct_datums(values);
        }
        if let Some(n) = limit {
            values.truncate(n);
        }
        values
    };
    let values = match args.value("data_source")? {
        Value::Grouped(g) => {
            let col = key.map(|k| column(&g.table, k)).transpose()?;
            let mut results = Vec::new();
            for rows in &g.groups {
                super::limits::checkpoint()?;
                let values = rows
                    .iter()
                    .map(|&r| col.map_or(Datum::Null, |(_, c)| datum_at(c.as_ref(), r as usize)))
                    .collect();
                results.push(aggregate(prepare(values), how, key.is_none())?);
            }
            let firsts: Vec<u32> = g.groups.iter().map(|rows| rows[0]).collect();
            let first_rows = take(&g.table, &firsts)?;
            let mut names: Vec<String> = first_rows.schema().fields().iter().map(|f| f.name().clone()).collect();
            let mut columns: Vec<Vec<Datum>> = first_rows.columns().iter().map(|a| datums(a.as_ref())).collect();
            names.push(how.to_string());
            columns.push(results);
            return Ok(Value::Table(batch_from_columns(&names, columns)));
        }
        Value::Column(a) => datums(a.as_ref()),
        _ if key.is_none() && how != "count" => return Err(format!("`{how}` needs a key_name")),
        Value::Table(t) => match key {
            Some(k) => datums(column(t, k)?.1.as_ref()),
            None => {
                return Ok(Value::Scalar(aggregate(
                    prepare(vec![Datum::Null; t.num_rows()]),
                    how,
                    true,
                )?));
            }
        },
        Value::Scalar(d) => vec![d.clone()],
    };
    Ok(Value::Scalar(aggregate(prepare(values), how, false)?))
}
