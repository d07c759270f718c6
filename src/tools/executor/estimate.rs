//! Upper bounds of what a call allocates, computed from its inputs and arguments **before** it
//! runs (issue 47 D1): the live server refuses a call whose output could pass its budget, and
//! reserves the call's working memory from the server-wide budget, instead of finding out after
//! the allocation (or an abort).
//!
//! Two bounds per call ([`Estimate`]):
//! - **output**: the bytes of the output value as Arrow arrays. Only the operators that can
//!   grow data or copy a whole table have a tight one ([`Estimate::grows`]): `transform_data`
//!   (by operation: `replace` Σ cells (len + matches × (|replacement| − |pattern|)), `concat`
//!   the two sides' text, `strftime` 12 bytes per format character per row, `case` the longest
//!   THEN/ELSE per row, any other operation the column's text plus 32 bytes per row),
//!   `group_data_by` (4 bytes per row plus 24 per group, the table being shared),
//!   `select_unique_values`, `concatenate_data`, `combine_data` (at most every input row),
//!   `sort_data` (a copy of the table). The others' outputs are at most their inputs (a filter,
//!   a column, an aggregate); their bound is the input's size and is only reserved.
//! - **working**: the output plus the transient copies the operator makes on the way: cells
//!   as `Datum`s ([`DATUM`] bytes each plus their text), group keys (40 bytes per key cell plus
//!   its text, per row), row vectors of set operations, CASE's per-condition tables.
//!
//! A text bound of a column is its Arrow memory plus 32 bytes per cell (a number rendered as
//! text); every `$LABEL$` named is counted as often as it is named (each is copied).

use std::collections::HashMap;

use arrow_array::cast::AsArray as _;
use arrow_array::{Array, RecordBatch};
use serde_json::Value as Json;

use super::Value;
use super::args::column;
use crate::tools::{Call, as_label_ref};
use crate::verify::Datum;

/// Bytes of one cell as a `Datum` (its text apart).
pub const DATUM: usize = std::mem::size_of::<Datum>();
/// Bytes of one group or distinct key cell (`(u8, u64, String)`, its text apart).
const KEY: usize = 40;
/// Bytes a number takes rendered as text, at most.
const NUMBER_TEXT: usize = 32;

/// The bounds of one call (module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimate {
    /// Upper bound of the output's bytes.
    pub output: usize,
    /// Upper bound of the bytes the call holds at its peak (output included).
    pub working: usize,
    /// Whether the operator can grow data or copies whole inputs (its `output` is checked
    /// against the output budget before it runs).
    pub grows: bool,
}

/// Bytes a tool output holds: its Arrow arrays' memory (a grouped table: its table plus 4 bytes
/// per grouped row index and 24 per group), 32 for a single value.
pub fn value_bytes(v: &Value) -> usize {
    match v {
        Value::Table(t) => t.get_array_memory_size(),
        Value::Column(a) => a.get_array_memory_size(),
        Value::Grouped(g) => g.table.get_array_memory_size() + g.groups.iter().map(|x| 4 * x.len() + 24).sum::<usize>(),
        Value::Scalar(_) => 32,
    }
}

/// Upper bound of an array's cells as text.
fn text(a: &dyn Array) -> usize {
    a.get_array_memory_size()
        .saturating_add(NUMBER_TEXT.saturating_mul(a.len()))
}

/// Upper bound of an array's cells as `Datum`s.
fn datums(a: &dyn Array) -> usize {
    text(a).saturating_add(DATUM.saturating_mul(a.len()))
}

fn table_datums(t: &RecordBatch) -> usize {
    t.columns()
        .iter()
        .map(|c| datums(c.as_ref()))
        .fold(0, usize::saturating_add)
}

/// Upper bound of a value's cells as `Datum`s (the form most operators copy their input into).
fn value_datums(v: &Value) -> usize {
    match v {
        Value::Table(t) => table_datums(t),
        Value::Column(a) => datums(a.as_ref()),
        Value::Grouped(g) => table_datums(&g.table).saturating_add(value_bytes(v)),
        Value::Scalar(_) => DATUM + NUMBER_TEXT,
    }
}

/// Every `$LABEL$` the arguments name (in lists too), once per mention, resolved.
fn inputs<'e>(call: &Call, env: &'e HashMap<String, Value>) -> Vec<&'e Value> {
    fn walk<'e>(v: &Json, env: &'e HashMap<String, Value>, out: &mut Vec<&'e Value>) {
        match v {
            Json::Array(items) => items.iter().for_each(|i| walk(i, env, out)),
            Json::Object(o) => o.values().for_each(|i| walk(i, env, out)),
            other => out.extend(as_label_ref(other).and_then(|l| env.get(l))),
        }
    }
    let mut out = Vec::new();
    call.arguments.values().for_each(|v| walk(v, env, &mut out));
    out
}

fn table_of<'e>(call: &Call, env: &'e HashMap<String, Value>, name: &str) -> Option<&'e RecordBatch> {
    match call.arguments.get(name).and_then(as_label_ref).and_then(|l| env.get(l)) {
        Some(Value::Table(t)) => Some(t),
        Some(Value::Grouped(g)) => Some(&g.table),
        _ => None,
    }
}

/// The bounds of `call` (SLOT names; SEL calls are unbound first) over the outputs `env`.
pub fn estimate(call: &Call, env: &HashMap<String, Value>) -> Estimate {
    let all: Vec<&Value> = inputs(call, env);
    let in_datums = all.iter().map(|v| value_datums(v)).fold(0, usize::saturating_add);
    let in_bytes = all.iter().map(|v| value_bytes(v)).fold(0, usize::saturating_add);
    let sum = |xs: &[usize]| xs.iter().copied().fold(0, usize::saturating_add);
    match call.name.as_str() {
        "transform_data" => table_of(call, env, "data_source").map_or_else(Estimate::default, |t| transform(call, t)),
        "group_data_by" => {
            let Some(t) = table_of(call, env, "data_source") else {
                return Estimate::default();
            };
            let n = t.num_rows();
            let keys: Vec<&str> = match call.arguments.get("key_name") {
                Some(Json::String(k)) => vec![k.as_str()],
                Some(Json::Array(ks)) => ks.iter().filter_map(Json::as_str).collect(),
                _ => vec![],
            };
            let key_text = sum(&keys
                .iter()
                .filter_map(|k| column(t, k).ok())
                .map(|(_, c)| text(c.as_ref()))
                .collect::<Vec<_>>());
            let output = n.saturating_mul(4 + 24);
            let index = n
                .saturating_mul(KEY.saturating_mul(keys.len()).saturating_add(72))
                .saturating_add(key_text);
            Estimate {
                output,
                working: output.saturating_add(index),
                grows: true,
            }
        }
        // Rows of the inputs (each cell a Datum, each row a Vec), the distinct-key set, the
        // output table.
        "select_unique_values" | "concatenate_data" | "combine_data" => {
            let rows: usize = all.iter().map(|v| rows_of(v)).fold(0, usize::saturating_add);
            let output = in_bytes.saturating_add(rows.saturating_mul(16));
            let keys = in_datums.saturating_add(rows.saturating_mul(KEY + 24));
            Estimate {
                output,
                working: sum(&[in_datums, in_datums, rows.saturating_mul(24), keys, output]),
                grows: true,
            }
        }
        "sort_data" => {
            let Some(t) = table_of(call, env, "data_source") else {
                return Estimate::default();
            };
            let output = t.get_array_memory_size().saturating_add(4 * t.num_rows());
            let key = call
                .arguments
                .get("key_name")
                .and_then(Json::as_str)
                .and_then(|k| column(t, k).ok())
                .map_or(in_datums, |(_, c)| datums(c.as_ref()));
            Estimate {
                output,
                working: sum(&[output, key, 4 * t.num_rows()]),
                grows: true,
            }
        }
        "truncate" => Estimate::default(),
        // The rows kept (4 bytes each) and the table taken; a list compared against as Datums.
        "filter_data" => {
            let Some(t) = table_of(call, env, "data_source") else {
                return Estimate::default();
            };
            let output = t.get_array_memory_size().saturating_add(4 * t.num_rows());
            let list = match call
                .arguments
                .get("value")
                .and_then(as_label_ref)
                .and_then(|l| env.get(l))
            {
                Some(v) => value_datums(v),
                None => 0,
            };
            Estimate {
                output,
                working: output.saturating_add(list),
                grows: false,
            }
        }
        // One column as Datums, the result as Datums and as Arrow.
        "retrieve_data" | "aggregate_data" => {
            let grouped = matches!(
                call.arguments
                    .get("data_source")
                    .and_then(as_label_ref)
                    .and_then(|l| env.get(l)),
                Some(Value::Grouped(_))
            );
            // A grouped aggregate builds a table of the groups' first rows: the generic bound.
            let one_column = !(grouped && call.name == "aggregate_data");
            let col = table_of(call, env, "data_source").filter(|_| one_column).and_then(|t| {
                let key = call.arguments.get("key_name").and_then(Json::as_str)?;
                column(t, key).ok().map(|(_, c)| datums(c.as_ref()))
            });
            match col {
                Some(c) => Estimate {
                    output: c,
                    working: c.saturating_mul(3),
                    grows: false,
                },
                None => Estimate {
                    output: in_bytes,
                    working: sum(&[in_datums, in_datums, in_bytes]),
                    grows: false,
                },
            }
        }
        // Outputs at most their inputs: a filter (rows taken), a column, an aggregate, an
        // elementwise calculation; the inputs as Datums, the output as Datums and as Arrow.
        _ => Estimate {
            output: in_bytes,
            working: sum(&[in_datums, in_datums, in_bytes]),
            grows: false,
        },
    }
}

fn rows_of(v: &Value) -> usize {
    match v {
        Value::Table(t) => t.num_rows(),
        Value::Column(a) => a.len(),
        Value::Grouped(g) => g.table.num_rows(),
        Value::Scalar(_) => 1,
    }
}

/// `transform_data`'s bounds: the written column's text by operation (module docs).
fn transform(call: &Call, t: &RecordBatch) -> Estimate {
    let n = t.num_rows();
    let empty = serde_json::Map::new();
    let op = call
        .arguments
        .get("operation_type")
        .and_then(Json::as_str)
        .unwrap_or("");
    let op_args = call
        .arguments
        .get("operation_args")
        .and_then(Json::as_object)
        .unwrap_or(&empty);
    let arg_text = |name: &str| match op_args.get(name) {
        Some(Json::String(s)) => s.len(),
        Some(other) => other.to_string().len(),
        None => 0,
    };
    let col = call
        .arguments
        .get("key_name")
        .and_then(Json::as_str)
        .and_then(|k| column(t, k).ok())
        .map(|(_, c)| c.clone());
    let col_text = col.as_ref().map_or(0, |c| text(c.as_ref()));
    let out_text = match op {
        "replace" => {
            let (pattern, replacement) = (
                op_args.get("pattern").and_then(Json::as_str).unwrap_or(""),
                arg_text("replacement"),
            );
            let growth = replacement.saturating_sub(pattern.len());
            match (col.as_ref().and_then(|c| c.as_string_opt::<i32>()), pattern.is_empty()) {
                (_, true) => col_text,
                // Exact: each cell's matches.
                (Some(s), false) => s.iter().flatten().fold(0usize, |acc, cell| {
                    acc.saturating_add(cell.len())
                        .saturating_add(cell.matches(pattern).count().saturating_mul(growth))
                        .saturating_add(NUMBER_TEXT)
                }),
                // Any cell text: at most one match per pattern length.
                (None, false) => col_text.saturating_add((col_text / pattern.len()).saturating_mul(growth)),
            }
        }
        "arithmetic" if op_args.get("operator").and_then(Json::as_str) == Some("concat") => {
            let other = match op_args.get("other_key_name").and_then(Json::as_str) {
                Some(k) => column(t, k).map_or(0, |(_, c)| text(c.as_ref())),
                None => n.saturating_mul(arg_text("value").saturating_add(NUMBER_TEXT)),
            };
            col_text.saturating_add(other)
        }
        "strftime" => n.saturating_mul(12usize.saturating_mul(arg_text("format")).saturating_add(8)),
        "case" => {
            // The longest literal THEN/ELSE, or a column's text, per row; each condition is a
            // filter of the numbered table (a copy of it).
            let spec = Json::Object(op_args.clone()).to_string();
            let text_json = spec.len();
            let conditions = spec.matches("condition").count().max(1);
            let numbered = t.get_array_memory_size().saturating_add(8 * n);
            return Estimate {
                output: n.saturating_mul(text_json.saturating_add(DATUM)),
                working: n
                    .saturating_mul(text_json.saturating_add(3 * DATUM))
                    .saturating_add(numbered.saturating_mul(conditions.saturating_add(1))),
                grows: true,
            };
        }
        _ => col_text,
    };
    // The input column as Datums, the output as Datums and as an Arrow column.
    let output = out_text.saturating_add(16 * n);
    let working = col
        .as_ref()
        .map_or(0, |c| datums(c.as_ref()))
        .saturating_add(out_text.saturating_add(DATUM * n))
        .saturating_add(output);
    Estimate {
        output,
        working,
        grows: true,
    }
}
