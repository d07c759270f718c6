//! The reference tool pool: the SLOT calls the Live API-Bench reference tools (IBM's
//! `invocable_api_hub`, `slot_filling_sql_tools.py` and `sql_tools.py`, run by its harness)
//! execute faithfully — recipe knob `tool_pool = "reference"`.
//!
//! The reference's harness passes every table between calls as a CSV file
//! (`add_read_from_file_decorator`: each tool reads its input with `pandas.read_csv` and writes
//! its table output with `to_csv`), so a column's type is what `read_csv` infers from the text of
//! the call's *input table*, not SQLite's; its tools are pandas code with their own rules. The
//! checks below therefore look at each call's input table, as the project's executor computes
//! it. A sequence is in the reference pool when all of these hold (each rule names the
//! reference behaviour it avoids):
//! - one join step, no `additional_setup_steps` (the reference's harness holds one active table,
//!   so subqueries and set operations over further joined tables are outside the pool);
//! - the join step joins `INNER` only (the reference ignores the join type), each table on one
//!   condition (the reference merges the right-hand table of every condition: [`joins`]), on key
//!   columns of one kind (pandas refuses to merge a text column with a numeric one);
//! - every call is `filter_data`, `sort_data`, `retrieve_data` or `aggregate_data` reading a
//!   non-empty table (the join step's output or a filter's, sort's or concatenation's; the
//!   reference indexes the first cell or asserts a non-empty input), or `concatenate_data`: the
//!   reference cannot aggregate grouped data and has no `calculate`, `combine_data` or membership
//!   filter, and its `select_unique_values` takes one list (so DISTINCT over several columns,
//!   `select_unique_values` of several lists, is outside the pool; so are the `is_in` filters
//!   that keep several per-group aggregates aligned under HAVING, which need grouping anyway). An OR (`combine_data(operation="either")`) becomes the reference's
//!   `concatenate_data` when no row satisfies both branches on this data; otherwise it would
//!   repeat those rows and the sequence is outside the pool;
//! - numbers stored as text (read back as numbers: `'2016'` becomes `2016`) are never returned,
//!   compared with a text value, aggregated with `min`/`max`, or sorted unless their text order is
//!   their numeric order; text that `read_csv` reads as NaN (`""`, `NULL`, `NA`, `None`, …) is
//!   never returned, aggregated, sorted, or filtered other than by (in)equality with another value;
//!   `True`/`False` text (read back as booleans) is not used at all;
//! - `filter_data`: a comparison (`equal_to` … `less_than_equal_to`) or `contains` whose value has
//!   the column's kind (a number, or the `$LABEL$` of a numeric aggregate, for a numeric column;
//!   text, or an integer the reference turns into text when the first cell is text, for a text
//!   column); `not_equal_to` only on a column without NULLs (pandas keeps NULL rows); `contains`
//!   only on a text column. `like` is not faithful (the reference's `compare_like_pattern` gets
//!   its arguments swapped: the cell is used as the pattern), so `LIKE '%text%'` is rewritten as
//!   `contains` `text` when `text` is ASCII without wildcards or regex metacharacters (pandas
//!   `str.contains` is a regex test; SQLite's LIKE is ASCII case-insensitive like `contains`);
//!   other `like` and `not_like` are outside the pool;
//! - `sort_data` with an explicit `ascending`; ascending only on a column without NULLs (pandas
//!   puts NaN last in both directions, SQLite first when ascending);
//! - `aggregate_data`: `count` (with a key only on a column without NULLs: the reference counts
//!   list entries), `sum`/`mean` on a numeric column, `min`/`max` on a numeric column whose result
//!   is an integer (the reference casts it to `int`); `distinct` only without NULLs.
//!
//! Every kept row is still verified against SQLite as usual; `tests/reference/replay.py` replays
//! them through IBM's own tools. SEL rows of the pool are these sequences bound into SEL under
//! IBM's names ([`sel`]); [`decisions`] records, for every SLOT/SEL tool, whether it is in the
//! pool and why.

use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use serde_json::{Value as Json, json};

pub mod decisions;
mod joins;
pub mod sel;

use self::joins::check_joins;
use super::executor::{Executor, Session, Value};
use super::pool::COMPARISONS;
use super::table::datums;
use super::{Call, as_label_ref};
use crate::verify::Datum;

/// Strings `pandas.read_csv` reads as NaN by default (`na_values`, pandas 2.3).
const PANDAS_NA: [&str; 19] = [
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA",
    "NULL", "NaN", "None", "n/a", "nan", "null",
];

/// A column's kind as the reference's tools see it after the CSV hand-off.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Integer,
    Real,
    Text,
}

/// Restricts a lowered SLOT sequence to the reference pool (rules in the module docs): returns
/// the calls, with `LIKE '%text%'` filters rewritten as `contains` and ORs of disjoint branches
/// as `concatenate_data`, or why the sequence is
/// outside the pool, naming the call and its argument form (a drop detail for reason code
/// `outside_reference_pool`). `setup` is the sequence's join step, run here on `executor`;
/// a sequence with `additional_setup` steps (subqueries or set operations over further joined
/// tables) is outside the pool: the reference's tools hold one active table.
pub fn restrict(
    executor: &Executor,
    setup: &Call,
    additional_setup: &[Call],
    calls: &[Call],
) -> Result<Vec<Call>, String> {
    if let Some(extra) = additional_setup.first() {
        return Err(format!(
            "setup step `{}`: a second joined table (the reference's initialize_active_data holds one active table)",
            extra.label
        ));
    }
    check_joins(setup)?;
    let mut session = Session::default();
    let Value::Table(joined) = executor
        .step(&mut session, setup)
        .map_err(|e| format!("join step: {e}"))?
        .clone()
    else {
        return Err("the join step did not produce a table".into());
    };
    check_join_kinds(setup, &joined)?;
    let mut out = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let at = |why: String| format!("call {i} `{}` ({}): {why}", call.name, call.label);
        let call = rewrite_like(call.clone());
        let call = rewrite_disjoint_or(executor, &session, call).map_err(at)?;
        check_call(&call, &session).map_err(at)?;
        executor.step(&mut session, &call).map_err(at)?;
        out.push(call);
    }
    Ok(out)
}

/// `<alias>.<column>` of a join condition as the joined table's column name.
fn joined_column(setup: &Call, qualified: &str) -> Option<String> {
    let (alias, column) = qualified.split_once('.')?;
    let table = setup
        .arguments
        .get("alias_to_table_dict")?
        .get(alias)?
        .get("modified_table_name")?
        .as_str()?;
    Some(super::table::safe_name(table, column))
}

fn check_join_kinds(setup: &Call, joined: &RecordBatch) -> Result<(), String> {
    let conditions = setup.arguments.get("condition_sequence").and_then(Json::as_array);
    for c in conditions.into_iter().flatten() {
        let sides: Vec<Option<String>> = (0..2)
            .map(|k| c.get(k).and_then(Json::as_str).and_then(|q| joined_column(setup, q)))
            .collect();
        let kinds: Vec<Option<bool>> = sides
            .iter()
            .map(|s| {
                let a = joined.column_by_name(s.as_deref()?)?;
                Some(a.data_type() == &DataType::Utf8)
            })
            .collect();
        if let [Some(a), Some(b)] = kinds.as_slice() {
            if a != b {
                return Err(format!(
                    "join step: condition {c} joins a text column with a numeric one (pandas refuses to merge them)"
                ));
            }
        }
    }
    Ok(())
}

/// `LIKE '%text%'` as `contains` `text` (module docs); any other call unchanged.
fn rewrite_like(mut call: Call) -> Call {
    if call.name != "filter_data" || call.arguments.get("condition") != Some(&json!("like")) {
        return call;
    }
    let Some(pattern) = call.arguments.get("value").and_then(Json::as_str) else {
        return call;
    };
    let inner = pattern
        .strip_prefix('%')
        .and_then(|p| p.strip_suffix('%'))
        .unwrap_or_default();
    let plain = !inner.is_empty() && inner.is_ascii() && !inner.chars().any(|c| "%_.^$*+?{}[]\\|()".contains(c));
    if plain {
        let inner = inner.to_string();
        call.arguments.insert("value".into(), json!(inner));
        call.arguments.insert("condition".into(), json!("contains"));
    }
    call
}

/// A column of a call's input table as the reference's tool reads it back from CSV.
struct CsvColumn {
    /// Its kind after `read_csv`.
    kind: Kind,
    /// Numbers stored as text (`read_csv` turns them into numbers; SQLite keeps text).
    from_text: bool,
    /// SQL NULL cells.
    nulls: usize,
    /// A text cell `read_csv` reads as NaN (`""`, `"NULL"`, `"NA"`, …), if any.
    na_text: Option<String>,
    /// The cells as datums.
    values: Vec<Datum>,
}

/// How the reference reads column `key` of `table` (the input of a call) after the CSV hand-off.
fn csv_column(table: &RecordBatch, key: &str) -> Result<CsvColumn, String> {
    let a = table
        .column_by_name(key)
        .ok_or_else(|| format!("`{key}` is not a column of its input table"))?;
    let values = datums(a.as_ref());
    let nulls = a.null_count();
    let (kind, from_text, na_text) = match a.data_type() {
        DataType::Int64 => (Kind::Integer, false, None),
        DataType::Float64 => (Kind::Real, false, None),
        _ => {
            let texts: Vec<&str> = values
                .iter()
                .filter_map(|d| if let Datum::Text(t) = d { Some(t.as_str()) } else { None })
                .collect();
            let na_text = texts.iter().find(|v| PANDAS_NA.contains(v)).map(|v| v.to_string());
            let rest: Vec<&str> = texts.into_iter().filter(|v| !PANDAS_NA.contains(v)).collect();
            if !rest.is_empty() && rest.iter().all(|v| *v == "True" || *v == "False") {
                return Err(format!(
                    "`{key}` holds True/False text, which the reference reads back as booleans"
                ));
            }
            if rest.is_empty() {
                (Kind::Real, false, na_text)
            } else if rest.iter().all(|v| v.parse::<i64>().is_ok()) {
                (Kind::Integer, true, na_text)
            } else if rest.iter().all(|v| v.parse::<f64>().is_ok()) {
                (Kind::Real, true, na_text)
            } else {
                (Kind::Text, false, na_text)
            }
        }
    };
    Ok(CsvColumn {
        kind,
        from_text,
        nulls,
        na_text,
        values,
    })
}

impl CsvColumn {
    fn numeric(&self) -> bool {
        self.kind != Kind::Text
    }

    /// Why the column differs from SQLite's for any use: numbers stored as text, or text read as NaN.
    fn retyped(&self, key: &str) -> Option<String> {
        if self.from_text {
            return Some(format!(
                "`{key}` holds numbers stored as text, which the reference's CSV hand-off reads as numbers"
            ));
        }
        self.na_text
            .as_ref()
            .map(|v| format!("`{key}` holds the text {v:?}, which the reference's CSV hand-off reads as NaN"))
    }

    /// Whether sorting the numbers stored as text by their text (SQLite) gives their numeric order.
    fn text_order_is_numeric(&self) -> bool {
        let mut texts: Vec<&str> = self
            .values
            .iter()
            .filter_map(|d| if let Datum::Text(t) = d { Some(t.as_str()) } else { None })
            .collect();
        texts.sort_unstable();
        texts.dedup();
        let numbers: Vec<f64> = texts.iter().filter_map(|t| t.parse::<f64>().ok()).collect();
        numbers.len() == texts.len() && numbers.windows(2).all(|w| w[0] < w[1])
    }
}

fn key<'c>(call: &'c Call) -> Option<&'c str> {
    call.arguments
        .get("key_name")
        .and_then(Json::as_str)
        .filter(|k| !k.is_empty())
}

/// `combine_data(operation="either")` (an OR of filters of one table) as the reference's
/// `concatenate_data` when no row satisfies both branches on this data (the either-table then
/// has as many rows as both inputs together); otherwise why not. Any other call unchanged.
fn rewrite_disjoint_or(executor: &Executor, session: &Session, call: Call) -> Result<Call, String> {
    if call.name != "combine_data" || call.arguments.get("operation") != Some(&json!("either")) {
        return Ok(call);
    }
    let rows = |name: &str| match call
        .arguments
        .get(name)
        .and_then(as_label_ref)
        .and_then(|l| session.get(l))
    {
        Some(Value::Table(t)) => Some(t.num_rows()),
        _ => None,
    };
    let (Some(a), Some(b)) = (rows("data_source_1"), rows("data_source_2")) else {
        return Err("an OR over lists (the reference has no combine_data)".into());
    };
    let mut scratch = session.clone();
    let either = match executor.step(&mut scratch, &call)? {
        Value::Table(t) => t.num_rows(),
        _ => return Err("an OR that is not a table".into()),
    };
    if either != a + b {
        return Err(format!(
            "an OR whose branches both hold {} rows (the reference's concatenate_data would repeat them)",
            a + b - either
        ));
    }
    let Json::Object(arguments) =
        json!({"data_source_1": call.arguments["data_source_1"], "data_source_2": call.arguments["data_source_2"]})
    else {
        unreachable!("an object")
    };
    Ok(Call {
        name: "concatenate_data".into(),
        arguments,
        label: call.label,
    })
}

/// Whether `call` (after the rewrites) is in the reference pool, given the earlier outputs.
fn check_call(call: &Call, session: &Session) -> Result<(), String> {
    if call.name == "concatenate_data" {
        return Ok(());
    }
    if call
        .arguments
        .get("offset")
        .and_then(Json::as_i64)
        .is_some_and(|m| m > 0)
    {
        return Err("an OFFSET (the reference's tools take only a limit)".into());
    }
    if !matches!(
        call.name.as_str(),
        "filter_data" | "sort_data" | "retrieve_data" | "aggregate_data"
    ) {
        return Err(match call.name.as_str() {
            "group_data_by" => {
                "grouping (the reference tools cannot aggregate grouped data; their group_data_by takes one key)".into()
            }
            "combine_data" => "a set operation (the reference has no combine_data)".into(),
            "select_unique_values" => {
                "distinct rows of several lists (DISTINCT over several columns; the reference's select_unique_values takes one list)".into()
            }
            other => format!("`{other}` is not a reference tool"),
        });
    }
    let source = call
        .arguments
        .get("data_source")
        .and_then(as_label_ref)
        .ok_or("no `data_source` label")?;
    // Every earlier call is in the pool, so a table is the join step's output or a filter's,
    // sort's or concatenation's.
    let table = match session.get(source) {
        Some(Value::Table(t)) => t,
        _ => {
            return Err(format!(
                "`data_source` ${source}$ is not a table (the reference reads tables from CSV files)"
            ));
        }
    };
    let needs_rows = |what: &str| {
        if table.num_rows() == 0 {
            Err(format!("{what} reads an empty table (the reference fails on one)"))
        } else {
            Ok(())
        }
    };
    let column = match key(call) {
        Some(k) => Some((k, csv_column(table, k)?)),
        None => None,
    };
    match (call.name.as_str(), column) {
        ("sort_data", _) if call.arguments.contains_key("by_values") => {
            Err(decisions::why("sort_data.by_values").into())
        }
        ("filter_data", _) if call.arguments.contains_key("other_key_name") => {
            Err(decisions::why("filter_data.other_key_name").into())
        }
        ("filter_data", Some((k, col))) => {
            needs_rows("filter_data")?;
            filter_rule(call, k, &col, session)
        }
        ("sort_data", Some((k, col))) => {
            needs_rows("sort_data")?;
            let Some(ascending) = call.arguments.get("ascending").and_then(Json::as_bool) else {
                return Err("no explicit `ascending` (the reference defaults to descending)".into());
            };
            if let Some(why) = col.na_text.as_ref().and(col.retyped(k)) {
                return Err(why);
            }
            if col.from_text && !col.text_order_is_numeric() {
                return Err(format!(
                    "sorting `{k}`, numbers stored as text whose text order is not their numeric order (the reference sorts them as numbers)"
                ));
            }
            if ascending && col.nulls > 0 {
                return Err(format!(
                    "sorting `{k}` ascending, which holds NULLs (pandas puts NaN last, SQLite first)"
                ));
            }
            Ok(())
        }
        ("retrieve_data", Some((k, col))) if col.from_text => Err(col.retyped(k).unwrap_or_default()),
        ("retrieve_data", Some((k, col))) => {
            // Text read back as NaN matters only where it is among the values returned.
            let distinct = call.arguments.get("distinct").and_then(Json::as_bool).unwrap_or(false);
            let limit = call.arguments.get("limit").and_then(Json::as_i64).unwrap_or(-1);
            let mut seen: Vec<&Datum> = Vec::new();
            for v in &col.values {
                if !distinct || !seen.contains(&v) {
                    seen.push(v);
                }
            }
            let returned = if limit >= 0 {
                &seen[..seen.len().min(limit as usize)]
            } else {
                &seen[..]
            };
            match returned
                .iter()
                .find(|v| matches!(v, Datum::Text(t) if PANDAS_NA.contains(&t.as_str())))
            {
                Some(v) => Err(format!(
                    "`{k}` returns the text {v:?}, which the reference's CSV hand-off reads as NaN"
                )),
                None => Ok(()),
            }
        }
        ("aggregate_data", column) => {
            let agg = call
                .arguments
                .get("aggregation_type")
                .and_then(Json::as_str)
                .unwrap_or_default();
            let Some((k, col)) = column else {
                return if agg == "count" {
                    Ok(())
                } else {
                    Err(format!("`{agg}` without a key_name"))
                };
            };
            needs_rows("a keyed aggregate_data")?;
            if let Some(v) = &col.na_text {
                return Err(format!(
                    "`{agg}` of `{k}`, which holds the text {v:?} (read back as NaN by the reference)"
                ));
            }
            let distinct = call.arguments.get("distinct").and_then(Json::as_bool).unwrap_or(false);
            match agg {
                "count" if col.nulls > 0 => Err(format!(
                    "`count` of `{k}`, which holds NULLs (the reference counts every entry)"
                )),
                "count" => Ok(()),
                _ if distinct && col.nulls > 0 => Err(format!("distinct `{agg}` of `{k}`, which holds NULLs")),
                "sum" | "mean" if col.numeric() => Ok(()),
                "min" | "max" if col.numeric() && !col.from_text => {
                    let numbers = col.values.iter().filter_map(Datum::as_f64);
                    let extreme = if agg == "min" {
                        numbers.fold(f64::INFINITY, f64::min)
                    } else {
                        numbers.fold(f64::NEG_INFINITY, f64::max)
                    };
                    if extreme.fract() == 0.0 {
                        Ok(())
                    } else {
                        Err(format!(
                            "`{agg}` of `{k}` is {extreme}, not an integer (the reference casts min/max to int)"
                        ))
                    }
                }
                other => Err(format!(
                    "`{other}` of `{k}`, a {} column (the reference computes it differently)",
                    if col.from_text {
                        "numbers-as-text"
                    } else if col.numeric() {
                        "numeric"
                    } else {
                        "text"
                    }
                )),
            }
        }
        _ => Err("no `key_name`".into()),
    }
}

/// `filter_data` on column `k` (read back as `col`) of a non-empty table.
fn filter_rule(call: &Call, k: &str, col: &CsvColumn, session: &Session) -> Result<(), String> {
    let condition = call
        .arguments
        .get("condition")
        .and_then(Json::as_str)
        .unwrap_or_default();
    let value = call.arguments.get("value").unwrap_or(&Json::Null);
    let is_na_text = value.as_str().is_some_and(|v| PANDAS_NA.contains(&v));
    if condition == "contains" {
        if col.numeric() || !value.is_string() {
            return Err("`contains` on a numeric column or with a non-text value".into());
        }
        return col.retyped(k).map_or(Ok(()), Err);
    }
    if !COMPARISONS.contains(&condition) {
        return Err(format!(
            "condition `{condition}` (the reference runs {COMPARISONS:?} and contains; its like swaps pattern and text)"
        ));
    }
    if condition == "not_equal_to" && col.nulls > 0 {
        return Err(format!(
            "`not_equal_to` on `{k}`, which holds NULLs (the reference keeps NULL rows)"
        ));
    }
    let ordering = !matches!(condition, "equal_to" | "not_equal_to");
    if col.na_text.is_some() && (ordering || is_na_text) {
        return Err(col.retyped(k).unwrap_or_default());
    }
    let fits = match value {
        Json::String(_) => match as_label_ref(value) {
            Some(l) => col.numeric() && matches!(session.get(l), Some(Value::Scalar(Datum::Int(_) | Datum::Real(_)))),
            None => !col.numeric(),
        },
        // The reference turns an integer into text when the column's first cell is text.
        Json::Number(n) => {
            col.numeric() || (n.is_i64() || n.is_u64()) && matches!(col.values.first(), Some(Datum::Text(_)))
        }
        _ => false,
    };
    if !fits {
        return Err(format!(
            "value {value} against the {} column `{k}` (pandas compares them differently from SQLite)",
            if col.from_text {
                "numbers-as-text"
            } else if col.numeric() {
                "numeric"
            } else {
                "text"
            }
        ));
    }
    Ok(())
}
