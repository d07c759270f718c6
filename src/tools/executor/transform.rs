//! `transform_data`: a column replaced by its `substring`, `abs` or `datetime` component, by a
//! row-wise SQLite expression or scalar function (`scalar.rs`, `timevalue.rs`), or written with a
//! row-wise `case` value (`case.rs`).

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};

use serde_json::Value as Json;

use super::args::{Args, column};
use super::case::case_column;
use super::cells::*;
use super::limits::live;
use super::scalar::{binary, cast, numeric, round, text_function};
use super::timevalue::{julianday, strftime};
use super::{R, Value};
use crate::tools::table::{array_from_datums, datums};
use crate::verify::Datum;

/// `transform_data(data_source, key_name, operation_type, operation_args)` → the table with
/// the column replaced: `substring {start_index, end_index}` (0-based, end exclusive, on
/// characters, a negative start counting from the end; numbers are first rendered as text), `abs`, `datetime {pattern: "%Y"|"%m"|"%d"}`
/// (the component of an ISO date as text, NULL when the cell is not a date), `case {when:
/// [{conditions, then}], else}` (SQL's searched CASE, [`case_column`]; `key_name` is the column
/// written: replaced when the table has it, else added last). SQLite's row-wise expressions
/// and scalar functions, with its semantics (`scalar.rs`, `timevalue.rs`; NULL in, NULL out):
/// `arithmetic {operator: add|subtract|multiply|divide|concat, other_key_name | value}` (the
/// cell `<operator>` the same row's `other_key_name` cell or the value), `cast {type:
/// integer|real|numeric|text}`, `round {digits}`, `length`, `upper`, `lower`, `instr
/// {substring}`, `replace {pattern, replacement}`, `trim {characters, side}`, `julianday`,
/// `strftime {format}`. With `output_key_name` the result is written to that column (replaced
/// when the table has it, else added last) and `key_name` is left as it was.
pub(super) fn transform_data(args: &Args) -> R<Value> {
    let t = args.table("data_source")?;
    let op = args.str("operation_type")?;
    let empty = serde_json::Map::new();
    let op_args = args.opt("operation_args").and_then(Json::as_object).unwrap_or(&empty);
    if op == "case" {
        let key = args.str("key_name")?;
        let out = case_column(t, op_args)?;
        let idx = column(t, key).map(|(i, _)| i).ok();
        return replace_column(t, idx.unwrap_or(t.num_columns()), key, out);
    }
    let (idx, col) = column(t, args.str("key_name")?)?;
    let int_arg = |name: &str| op_args.get(name).and_then(Json::as_i64);
    let cells = datums(col.as_ref());
    let out: Vec<Datum> = match op {
        "substring" => {
            let start_index = int_arg("start_index").unwrap_or(0);
            let end = int_arg("end_index");
            cells
                .iter()
                .take_while(|_| live())
                .map(|c| match cell_text(c) {
                    None => Datum::Null,
                    Some(s) => {
                        let chars: Vec<char> = s.chars().collect();
                        // A negative start counts from the end (Python's slice).
                        let start = if start_index < 0 {
                            (chars.len() as i64 + start_index).max(0) as usize
                        } else {
                            start_index as usize
                        };
                        let end = end.map_or(chars.len(), |e| (e.max(0) as usize).min(chars.len()));
                        Datum::Text(
                            chars
                                .get(start.min(end)..end)
                                .map(|c| c.iter().collect())
                                .unwrap_or_default(),
                        )
                    }
                })
                .collect()
        }
        "abs" => cells
            .iter()
            .take_while(|_| live())
            .map(|c| match c {
                Datum::Int(i) => i.checked_abs().map_or(Datum::Real((*i as f64).abs()), Datum::Int),
                Datum::Real(r) => Datum::Real(r.abs()),
                // SQLite: text is read as a real (`ABS('-5')` = 5.0).
                Datum::Text(s) => Datum::real(numeric(s).as_f64().unwrap_or(0.0).abs()),
                Datum::Null => Datum::Null,
            })
            .collect(),
        "arithmetic" => {
            let operator = op_args
                .get("operator")
                .and_then(Json::as_str)
                .ok_or("`arithmetic` needs an `operator`")?;
            let other: Vec<Datum> = match (
                op_args.get("other_key_name").and_then(Json::as_str),
                op_args.get("value"),
            ) {
                (Some(k), _) => datums(column(t, k)?.1.as_ref()),
                (None, Some(v)) => vec![json_to_datum(v)?; cells.len()],
                (None, None) => return Err("`arithmetic` needs `other_key_name` or `value`".into()),
            };
            cells
                .iter()
                .take_while(|_| live())
                .zip(&other)
                .map(|(x, y)| binary(x, y, operator))
                .collect::<R<Vec<Datum>>>()?
        }
        "cast" => {
            let to = op_args
                .get("type")
                .and_then(Json::as_str)
                .ok_or("`cast` needs a `type`")?;
            cells
                .iter()
                .take_while(|_| live())
                .map(|c| cast(c, to))
                .collect::<R<Vec<Datum>>>()?
        }
        "round" => {
            let digits = int_arg("digits").unwrap_or(0);
            cells.iter().take_while(|_| live()).map(|c| round(c, digits)).collect()
        }
        "length" | "upper" | "lower" | "instr" | "replace" | "trim" => cells
            .iter()
            .take_while(|_| live())
            .map(|c| text_function(c, op, op_args))
            .collect::<R<Vec<Datum>>>()?,
        "julianday" => cells.iter().take_while(|_| live()).map(julianday).collect(),
        "strftime" => {
            let format = op_args
                .get("format")
                .and_then(Json::as_str)
                .ok_or("`strftime` needs a `format`")?;
            cells
                .iter()
                .take_while(|_| live())
                .map(|c| strftime(format, c))
                .collect()
        }
        "datetime" => {
            let pattern = op_args.get("pattern").and_then(Json::as_str).unwrap_or("%Y");
            let range = match pattern {
                "%Y" => 0..4,
                "%m" => 5..7,
                "%d" => 8..10,
                other => return Err(format!("unsupported datetime pattern `{other}`")),
            };
            cells
                .iter()
                .take_while(|_| live())
                .map(|c| match c {
                    Datum::Text(s) if is_iso_date(s) => Datum::Text(s[range.clone()].to_string()),
                    _ => Datum::Null,
                })
                .collect()
        }
        other => return Err(format!("unknown operation_type `{other}`")),
    };
    // `output_key_name`: the column written (new, or replaced when the table has it).
    match args.opt("output_key_name").and_then(Json::as_str) {
        Some(name) => {
            let idx = column(t, name).map(|(i, _)| i).unwrap_or(t.num_columns());
            replace_column(t, idx, name, out)
        }
        None => {
            let name = t.schema().field(idx).name().clone();
            replace_column(t, idx, &name, out)
        }
    }
}

/// `t` with column `idx` replaced by `out` (named `name`), or `out` added last when `idx` is the
/// column count.
fn replace_column(t: &RecordBatch, idx: usize, name: &str, out: Vec<Datum>) -> R<Value> {
    let mut columns: Vec<ArrayRef> = t.columns().to_vec();
    let mut names: Vec<String> = t.schema().fields().iter().map(|f| f.name().clone()).collect();
    if idx == columns.len() {
        columns.push(array_from_datums(&out));
        names.push(name.to_string());
    } else {
        columns[idx] = array_from_datums(&out);
    }
    let fields: Vec<arrow_schema::Field> = names
        .iter()
        .zip(&columns)
        .map(|(n, c)| arrow_schema::Field::new(n, c.data_type().clone(), true))
        .collect();
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(t.num_rows()));
    RecordBatch::try_new_with_options(Arc::new(arrow_schema::Schema::new(fields)), columns, &options)
        .map(Value::Table)
        .map_err(|e| e.to_string())
}

pub(super) fn is_iso_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b[..4].iter().chain(&b[5..7]).chain(&b[8..10]).all(u8::is_ascii_digit)
}
