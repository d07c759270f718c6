//! `transform_data(operation_type="case")`: SQL's searched `CASE WHEN c1 THEN v1 [WHEN …] [ELSE
//! e] END` (and `IIF(c, a, b)`) as a row-wise column.
//!
//! Each WHEN's condition is a disjunction of AND-ed `filter_data` conditions, evaluated with
//! `filter_data`'s own semantics (SQL's NULL rule: a comparison with a NULL cell is not true, so
//! the row falls through to the next WHEN, as in SQL). A row takes the THEN of the first WHEN it
//! satisfies, else the ELSE (NULL when absent). A THEN/ELSE is a literal `{"value": v}` or the
//! row's cell of a column `{"key_name": k}`.

use std::collections::{HashMap, HashSet};

use arrow_array::{ArrayRef, RecordBatch};
use serde_json::{Map, Value as Json, json};

use super::args::{Args, column};
use super::cells::json_to_datum;
use super::filter::filter_data;
use super::{R, Value};
use crate::tools::table::{array_from_datums, datum_at, datums};
use crate::tools::{as_label_ref, label_ref};
use crate::verify::Datum;

/// The label and column name under which a condition's rows are found (never a table column:
/// joined-table columns are `<prefix>_<column>`).
const SOURCE: &str = "__case_source__";
const ROW: &str = "__case_row__";

/// The CASE column of `t` for `operation_args` `{"when": [{"conditions": [[cond, …], …], "then":
/// cell}, …], "else": cell}` (see the module doc); one value per row of `t`.
pub(super) fn case_column(t: &RecordBatch, op_args: &Map<String, Json>) -> R<Vec<Datum>> {
    let whens = op_args
        .get("when")
        .and_then(Json::as_array)
        .filter(|w| !w.is_empty())
        .ok_or("`case` needs `when`: a non-empty list of {conditions, then}")?;
    // The table with its row numbers, so each condition is `filter_data` itself.
    let numbered = with_row_numbers(t)?;
    let mut env = HashMap::new();
    env.insert(SOURCE.to_string(), Value::Table(numbered));
    let mut out: Vec<Option<Datum>> = vec![None; t.num_rows()];
    for when in whens {
        let branches = when
            .get("conditions")
            .and_then(Json::as_array)
            .filter(|b| !b.is_empty())
            .ok_or("a `when` needs `conditions`: a non-empty list of AND-ed condition lists")?;
        let mut matched: HashSet<usize> = HashSet::new();
        for branch in branches {
            let conds = branch
                .as_array()
                .filter(|c| !c.is_empty())
                .ok_or("each `conditions` entry is a non-empty list of conditions")?;
            let mut rows: Option<HashSet<usize>> = None;
            for c in conds {
                let these = condition_rows(c, &env)?;
                rows = Some(match rows {
                    None => these,
                    Some(r) => r.intersection(&these).copied().collect(),
                });
            }
            matched.extend(rows.unwrap_or_default());
        }
        let then = when.get("then").ok_or("a `when` needs `then`")?;
        for r in matched {
            if out[r].is_none() {
                out[r] = Some(cell(t, then, r)?);
            }
        }
    }
    let otherwise = op_args.get("else");
    out.into_iter()
        .enumerate()
        .map(|(r, d)| match (d, otherwise) {
            (Some(d), _) => Ok(d),
            (None, Some(e)) => cell(t, e, r),
            (None, None) => Ok(Datum::Null),
        })
        .collect()
}

fn with_row_numbers(t: &RecordBatch) -> R<RecordBatch> {
    let rows: Vec<Datum> = (0..t.num_rows()).map(|r| Datum::Int(r as i64)).collect();
    let mut columns: Vec<ArrayRef> = t.columns().to_vec();
    columns.push(array_from_datums(&rows));
    let mut fields: Vec<arrow_schema::Field> = t
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    fields.push(arrow_schema::Field::new(
        ROW,
        columns[columns.len() - 1].data_type().clone(),
        true,
    ));
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(t.num_rows()));
    RecordBatch::try_new_with_options(
        std::sync::Arc::new(arrow_schema::Schema::new(fields)),
        columns,
        &options,
    )
    .map_err(|e| e.to_string())
}

/// The row numbers satisfying one condition `{key_name, condition, value | other_key_name}`.
fn condition_rows(c: &Json, env: &HashMap<String, Value>) -> R<HashSet<usize>> {
    let Some(c) = c.as_object() else {
        return Err(format!("a condition is an object, got {c}"));
    };
    if c.get("value").and_then(as_label_ref).is_some() {
        return Err("a `case` condition compares with a literal or a column, not a `$LABEL$`".into());
    }
    let mut map = c.clone();
    map.insert("data_source".into(), json!(label_ref(SOURCE)));
    let Value::Table(rows) = filter_data(&Args { map: &map, env })? else {
        unreachable!("filter_data returns a table")
    };
    let (_, numbers) = column(&rows, ROW)?;
    Ok(datums(numbers.as_ref())
        .into_iter()
        .filter_map(|d| match d {
            Datum::Int(i) => Some(i as usize),
            _ => None,
        })
        .collect())
}

/// A THEN/ELSE at row `r`: `{"value": v}` or `{"key_name": k}`.
fn cell(t: &RecordBatch, spec: &Json, r: usize) -> R<Datum> {
    if let Some(k) = spec.get("key_name").and_then(Json::as_str) {
        return Ok(datum_at(column(t, k)?.1.as_ref(), r));
    }
    match spec.get("value") {
        Some(v) => json_to_datum(v),
        None => Err(format!(
            "a THEN/ELSE is {{\"value\": v}} or {{\"key_name\": k}}, got {spec}"
        )),
    }
}
