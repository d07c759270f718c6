//! A tool output as a trajectory's tool message shows it: the same JSON as
//! [`crate::tools::executor::value_json`], read cell by cell for the rows shown only (at most
//! `max_rows`), so a call over a million-row table costs `max_rows` cells, not a copy of the
//! whole table (issue 17).

use arrow_array::Array;
use serde_json::{Value as Json, json};

use crate::tools::executor::Value;
use crate::tools::table::datum_at;
use crate::verify::Datum;

fn cell(d: Datum) -> Json {
    serde_json::to_value(d).unwrap_or(Json::Null)
}

/// `value_json(v, max_rows)`, byte for byte, without materialising the cells that are not shown.
pub fn shown_json(v: &Value, max_rows: usize) -> Json {
    match v {
        Value::Column(a) => {
            let values: Vec<Json> = (0..a.len().min(max_rows))
                .map(|r| cell(datum_at(a.as_ref(), r)))
                .collect();
            if a.len() <= max_rows {
                Json::Array(values)
            } else {
                json!({"values": values, "total": a.len(), "truncated": true})
            }
        }
        Value::Table(t) => {
            let rows: Vec<Json> = (0..t.num_rows().min(max_rows))
                .map(|r| Json::Array(t.columns().iter().map(|c| cell(datum_at(c.as_ref(), r))).collect()))
                .collect();
            json!({
                "columns": t.schema().fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>(),
                "rows": rows,
                "total_rows": t.num_rows(),
                "truncated": t.num_rows() > max_rows,
            })
        }
        other => crate::tools::executor::value_json(other, max_rows),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::executor::value_json;
    use crate::tools::table::{array_from_datums, batch_from_columns};

    #[test]
    fn shown_json_is_value_json() {
        let col = vec![Datum::Int(1), Datum::Null, Datum::Text("x".into()), Datum::Real(2.5)];
        let table = batch_from_columns(&["a".into(), "b".into()], vec![col.clone(), col.clone()]);
        for max_rows in [0, 2, 4, 10] {
            for v in [Value::Table(table.clone()), Value::Column(array_from_datums(&col))] {
                assert_eq!(shown_json(&v, max_rows), value_json(&v, max_rows), "{max_rows}");
            }
        }
    }
}
