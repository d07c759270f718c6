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
        let set = Members::new(&list, mixes_storage_classes(col.as_ref()));
        let member = |c: &Datum| set.contains(c);
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

/// The values of an `is_in` list as hash sets, so that a cell is looked up in constant time
/// (a scan of the list per row was quadratic: 30,670 rows × 30,670 values took minutes). A
/// cell is a member exactly when [`compare`] (or [`compare_stored`], for a column mixing
/// storage classes) finds it equal to some value of the list:
/// - text equals text byte for byte;
/// - a text cell equals a number's text ([`crate::tools::table::number_text`]: SQLite's text
///   affinity applied to the number), except in a column mixing storage classes, where text
///   never equals a number;
/// - a number equals a number, or a text that reads as one (trimmed, Rust's `f64` syntax),
///   when their `f64` values are equal (`-0.0 = 0.0`; NaN equals nothing);
/// - NULL equals nothing.
struct Members<'a> {
    texts: std::collections::HashSet<&'a [u8]>,
    number_texts: std::collections::HashSet<String>,
    numbers: std::collections::HashSet<u64>,
}

/// `x`'s bits with `-0.0` read as `0.0` (equal under `partial_cmp`); `None` for NaN.
fn number_key(x: f64) -> Option<u64> {
    if x.is_nan() {
        None
    } else if x == 0.0 {
        Some(0f64.to_bits())
    } else {
        Some(x.to_bits())
    }
}

impl<'a> Members<'a> {
    /// The sets of `list`; `stored`: the column mixes storage classes ([`compare_stored`]).
    fn new(list: &'a [Datum], stored: bool) -> Members<'a> {
        let mut m = Members {
            texts: Default::default(),
            number_texts: Default::default(),
            numbers: Default::default(),
        };
        for v in list {
            match v {
                Datum::Null => {}
                Datum::Text(t) => {
                    m.texts.insert(t.as_bytes());
                    if let Some(k) = t.trim().parse::<f64>().ok().and_then(number_key) {
                        m.numbers.insert(k);
                    }
                }
                n => {
                    if !stored {
                        m.number_texts.extend(crate::tools::table::number_text(n));
                    }
                    m.numbers.extend(n.as_f64().and_then(number_key));
                }
            }
        }
        m
    }

    fn contains(&self, cell: &Datum) -> bool {
        match cell {
            Datum::Null => false,
            Datum::Text(t) => self.texts.contains(t.as_bytes()) || self.number_texts.contains(t.as_str()),
            n => n
                .as_f64()
                .and_then(number_key)
                .is_some_and(|k| self.numbers.contains(&k)),
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash sets agree with the scan they replace ([`compare`] / [`compare_stored`] equal to
    /// some value) on every pair of a mixed set of cells and lists.
    #[test]
    fn is_in_sets_agree_with_the_comparison_scan() {
        let values: Vec<Datum> = vec![
            Datum::Null,
            Datum::Int(0),
            Datum::Int(1),
            Datum::Int(-3),
            Datum::Int(9_007_199_254_740_993),
            Datum::Int(9_007_199_254_740_992),
            Datum::Real(0.0),
            Datum::Real(-0.0),
            Datum::Real(1.0),
            Datum::Real(1.5),
            Datum::Real(1e20),
            Datum::Real(f64::INFINITY),
            Datum::Text("1".into()),
            Datum::Text("1.0".into()),
            Datum::Text(" 1 ".into()),
            Datum::Text("1.5".into()),
            Datum::Text("-0".into()),
            Datum::Text("0.0".into()),
            Datum::Text("1e20".into()),
            Datum::Text("100000000000000000000.0".into()),
            Datum::Text("inf".into()),
            Datum::Text("NaN".into()),
            Datum::Text("abc".into()),
            Datum::Text("".into()),
            Datum::Text("-3".into()),
        ];
        for stored in [false, true] {
            let compare: fn(&Datum, &Datum) -> Option<Ordering> = if stored { compare_stored } else { compare };
            for (i, _) in values.iter().enumerate() {
                // Lists: each value alone, every third value, and all.
                let lists: Vec<Vec<Datum>> = vec![
                    vec![values[i].clone()],
                    values.iter().skip(i % 3).step_by(3).cloned().collect(),
                    values.clone(),
                ];
                for list in &lists {
                    let set = Members::new(list, stored);
                    for c in &values {
                        let scan = list.iter().any(|v| compare(c, v) == Some(Ordering::Equal));
                        assert_eq!(set.contains(c), scan, "cell {c:?} in {list:?} (stored: {stored})");
                    }
                }
            }
        }
    }
}
