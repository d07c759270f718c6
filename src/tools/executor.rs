//! The SLOT tool executor: runs a gold call sequence over Arrow record batches.
//!
//! Each call's output is stored under its label; an argument `"$LABEL$"` is replaced by that
//! output. The only SQLite use is the join step (`initialize_active_data`), so verification
//! (SQL on SQLite vs calls here) does not depend on the SQL engine computing the answer twice.
//!
//! Semantics (Live API-Bench reference tools, with SQL's NULL rules where pandas differs):
//! - comparisons skip NULLs (`not_equal_to` too); a JSON `null` value means `IS NULL` with
//!   `equal_to` and `IS NOT NULL` with `not_equal_to`;
//! - numbers compare by value; a numeric string against a numeric column compares as a number,
//!   a number against a text column compares as text (SQLite affinity);
//! - `contains` is a case-insensitive substring test (no regex); `like` is SQL `LIKE`
//!   (`%`, `_`, ASCII case-insensitive);
//! - sorts are stable; NULL sorts before every value (SQLite), so first ascending, last
//!   descending; `sort_data` defaults to descending like the reference;
//! - groups and distinct values keep first-appearance order;
//! - a `filter_data` value may be the `$LABEL$` of an earlier single value (a scalar subquery's
//!   chain) or, with `is_in`/`not_in`, of an earlier list (`[NOT] IN (SELECT …)`, SQL's NULL
//!   rules: `not_in` a list holding NULL keeps no row);
//! - `combine_data` combines two tables, or two lists of columns, as SQL set operations do
//!   (`union`, `intersect`, `except` keep distinct rows; `union_all` keeps every row) or as an
//!   OR of two filters of one table does (`either`: each row as often as in the input holding it
//!   more often, so a row matching both branches appears once).
//!
//! The **final answer** of a sequence is built from the outputs nobody refers to (the sink
//! calls), in call order: each contributes columns (a list one, a scalar one of length 1, a
//! table all of its columns), and the columns are zipped into rows.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, UInt32Array};
use serde_json::Value as Json;

use super::table::{self, JoinCondition, array_from_datums, batch_from_columns, datum_at, datums};
use super::{Call, as_label_ref};
use crate::verify::{Answer, Datum};

/// A grouped table: row indices per group, groups in first-appearance order.
#[derive(Debug, Clone)]
pub struct Grouped {
    /// The table that was grouped.
    pub table: RecordBatch,
    /// The grouping column.
    pub key: String,
    /// Row indices of each group.
    pub groups: Vec<Vec<u32>>,
}

/// The output of a tool call.
#[derive(Debug, Clone)]
pub enum Value {
    /// A table (join step, filter, sort, transform, concatenate, grouped aggregate).
    Table(RecordBatch),
    /// The output of `group_data_by`.
    Grouped(Grouped),
    /// A list of values (`retrieve_data`, `select_unique_values`, elementwise `calculate`).
    Column(ArrayRef),
    /// One value (`aggregate_data` over a table or list, `calculate` on scalars).
    Scalar(Datum),
}

/// An execution error: which call failed and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("call {index} `{tool}`: {message}")]
pub struct ExecError {
    /// 0-based position of the call in the sequence.
    pub index: usize,
    /// The tool name.
    pub tool: String,
    /// What went wrong.
    pub message: String,
}

type R<T> = Result<T, String>;

/// The SLOT tool names the executor runs directly (SEL names are mapped by [`super::sel::unbind`]).
const SLOT_TOOLS: [&str; 12] = [
    "combine_data",
    "filter_data",
    "retrieve_data",
    "aggregate_data",
    "sort_data",
    "group_data_by",
    "transform_data",
    "select_unique_values",
    "concatenate_data",
    "calculate",
    "truncate",
    "initialize_active_data",
];

/// The outputs of a call sequence so far, by label: the state of one live-server session.
#[derive(Debug, Clone, Default)]
pub struct Session {
    outputs: HashMap<String, Value>,
}

impl Session {
    /// Stores `value` under `label` as if a call had produced it (the live server shares one
    /// joined table between the sessions of a database and join: a [`Value`] clone shares the
    /// Arrow buffers).
    pub fn insert(&mut self, label: &str, value: Value) {
        self.outputs.insert(label.to_string(), value);
    }

    /// The output stored under `label`.
    pub fn get(&self, label: &str) -> Option<&Value> {
        self.outputs.get(label)
    }
}

/// A tool output as JSON for a client (the live server and trajectories):
/// - a table: `{"columns": [...], "rows": [[...]], "total_rows": n, "truncated": bool}` with at
///   most `max_rows` rows;
/// - a list: an array when it has at most `max_rows` values, else
///   `{"values": [first max_rows], "total": n, "truncated": true}`;
/// - a value: itself; a grouped table: `{"grouped_by": key, "groups": n}`.
pub fn value_json(v: &Value, max_rows: usize) -> Json {
    let cell = |d: Datum| serde_json::to_value(d).unwrap_or(Json::Null);
    match v {
        Value::Scalar(d) => cell(d.clone()),
        Value::Column(a) => {
            // Only the shown head is converted: a whole joined table as `Datum`s would be a
            // transient copy per call (the live server's memory per thread, issue 18).
            let head = a.slice(0, a.len().min(max_rows));
            let values: Vec<Json> = datums(head.as_ref()).into_iter().map(cell).collect();
            if a.len() <= max_rows {
                Json::Array(values)
            } else {
                serde_json::json!({"values": values, "total": a.len(), "truncated": true})
            }
        }
        Value::Table(t) => {
            let head = t.slice(0, t.num_rows().min(max_rows));
            let cols: Vec<Vec<Datum>> = head.columns().iter().map(|a| datums(a.as_ref())).collect();
            let rows: Vec<Json> = (0..head.num_rows())
                .map(|r| Json::Array(cols.iter().map(|c| cell(c[r].clone())).collect()))
                .collect();
            serde_json::json!({
                "columns": t.schema().fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>(),
                "rows": rows,
                "total_rows": t.num_rows(),
                "truncated": t.num_rows() > max_rows,
            })
        }
        Value::Grouped(g) => serde_json::json!({"grouped_by": g.key, "groups": g.groups.len()}),
    }
}

/// Runs call sequences; `database_root` resolves the join step's relative `database_path`.
#[derive(Debug, Clone)]
pub struct Executor {
    database_root: PathBuf,
}

impl Executor {
    /// An executor resolving `database_path` arguments against `database_root`.
    pub fn new(database_root: impl Into<PathBuf>) -> Executor {
        Executor {
            database_root: database_root.into(),
        }
    }

    /// Executes one call (SLOT or SEL) against the outputs in `session` and stores its output
    /// under the call's label. Errors say what is wrong with which argument.
    pub fn step<'s>(&self, session: &'s mut Session, call: &Call) -> Result<&'s Value, String> {
        let value = self.call(call, &session.outputs)?;
        session.outputs.insert(call.label.clone(), value);
        Ok(&session.outputs[&call.label])
    }

    /// Executes `calls` in order and returns the final answer (see the module docs).
    pub fn run(&self, calls: &[Call]) -> Result<Answer, ExecError> {
        self.run_with_setup(None, calls)
    }

    /// Runs the instance's setup call (the join step, `initialization_step`) when given, then
    /// `calls`, and returns the final answer built from `calls`' sinks (the setup call is never
    /// part of the answer). An error in the setup call has index 0 and its tool name.
    pub fn run_with_setup(&self, setup: Option<&Call>, calls: &[Call]) -> Result<Answer, ExecError> {
        let mut session = Session::default();
        if let Some(call) = setup {
            self.step(&mut session, call).map_err(|message| ExecError {
                index: 0,
                tool: call.name.clone(),
                message,
            })?;
        }
        self.run_in(&mut session, calls)
    }

    /// Runs `calls` in `session` (whose earlier outputs, e.g. the setup's, they may read) and
    /// returns the final answer built from `calls`' sinks.
    pub fn run_in(&self, session: &mut Session, calls: &[Call]) -> Result<Answer, ExecError> {
        for (index, call) in calls.iter().enumerate() {
            let err = |message: String| ExecError {
                index,
                tool: call.name.clone(),
                message,
            };
            self.step(session, call).map_err(err)?;
        }
        let env = &session.outputs;
        let referenced: Vec<&str> = calls
            .iter()
            .flat_map(|c| c.arguments.values())
            .flat_map(|v| match v {
                Json::Array(items) => items.iter().collect::<Vec<_>>(),
                other => vec![other],
            })
            .filter_map(as_label_ref)
            .collect();
        let sinks: Vec<&Call> = calls
            .iter()
            .filter(|c| !referenced.contains(&c.label.as_str()))
            .collect();
        let mut columns: Vec<Vec<Datum>> = Vec::new();
        for call in &sinks {
            match &env[&call.label] {
                Value::Column(a) => columns.push(datums(a.as_ref())),
                Value::Scalar(d) => columns.push(vec![d.clone()]),
                Value::Table(t) => columns.extend(t.columns().iter().map(|a| datums(a.as_ref()))),
                Value::Grouped(_) => {
                    return Err(ExecError {
                        index: calls.len().saturating_sub(1),
                        tool: call.name.clone(),
                        message: "a grouped table cannot be a final answer".into(),
                    });
                }
            }
        }
        let rows = columns.first().map_or(0, Vec::len);
        if columns.iter().any(|c| c.len() != rows) {
            let lens: Vec<usize> = columns.iter().map(Vec::len).collect();
            return Err(ExecError {
                index: calls.len().saturating_sub(1),
                tool: "answer".into(),
                message: format!("answer columns have different lengths {lens:?}"),
            });
        }
        Ok((0..rows)
            .map(|r| columns.iter().map(|c| c[r].clone()).collect())
            .collect())
    }

    fn call(&self, call: &Call, env: &HashMap<String, Value>) -> R<Value> {
        let unbound;
        let call = if call.name.starts_with("initialize") || SLOT_TOOLS.contains(&call.name.as_str()) {
            call
        } else {
            unbound = super::sel::unbind(call);
            &unbound
        };
        let args = Args {
            map: &call.arguments,
            env,
        };
        match call.name.as_str() {
            "initialize_active_data" => self.initialize_active_data(&args),
            "filter_data" => filter_data(&args),
            "retrieve_data" => retrieve_data(&args),
            "aggregate_data" => aggregate_data(&args),
            "sort_data" => sort_data(&args),
            "group_data_by" => group_data_by(&args),
            "transform_data" => transform_data(&args),
            "select_unique_values" => select_unique_values(&args),
            "concatenate_data" => concatenate_data(&args),
            "combine_data" => combine_data(&args),
            "calculate" => calculate(&args),
            "truncate" => truncate(&args),
            other => Err(format!("unknown tool `{other}`")),
        }
    }

    fn initialize_active_data(&self, args: &Args) -> R<Value> {
        let conds: Vec<JoinCondition> = serde_json::from_value(args.json("condition_sequence")?.clone())
            .map_err(|e| format!("condition_sequence: {e}"))?;
        let aliases = args
            .json("alias_to_table_dict")?
            .as_object()
            .ok_or("`alias_to_table_dict` must be an object")?;
        let tables = table::join_tables(aliases).map_err(|e| e.to_string())?;
        let rel = args.str("database_path")?;
        let path = self.database_root.join(rel);
        let conn = table::open_read_only(Path::new(&path)).map_err(|e| format!("{}: {e}", path.display()))?;
        table::initialize_active_data(&conn, &tables, &conds)
            .map(Value::Table)
            .map_err(|e| e.to_string())
    }
}

/// Argument access with label resolution.
struct Args<'a> {
    map: &'a serde_json::Map<String, Json>,
    env: &'a HashMap<String, Value>,
}

impl Args<'_> {
    fn json(&self, name: &str) -> R<&Json> {
        self.map.get(name).ok_or_else(|| format!("missing argument `{name}`"))
    }
    fn opt(&self, name: &str) -> Option<&Json> {
        self.map.get(name).filter(|v| !v.is_null())
    }
    fn str(&self, name: &str) -> R<&str> {
        self.json(name)?
            .as_str()
            .ok_or_else(|| format!("argument `{name}` must be a string"))
    }
    fn bool_or(&self, name: &str, default: bool) -> R<bool> {
        match self.opt(name) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| format!("argument `{name}` must be a boolean")),
        }
    }
    fn limit(&self) -> R<Option<usize>> {
        match self.opt("limit") {
            None => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if n < 0 => Ok(None),
                Some(n) => Ok(Some(n as usize)),
                None => Err("argument `limit` must be an integer (-1 for no limit)".into()),
            },
        }
    }
    fn value(&self, name: &str) -> R<&Value> {
        let v = self.json(name)?;
        let label = as_label_ref(v).ok_or_else(|| format!("argument `{name}` must be a $LABEL$ reference"))?;
        self.env
            .get(label)
            .ok_or_else(|| format!("argument `{name}`: no earlier output labelled `{label}`"))
    }
    fn table(&self, name: &str) -> R<&RecordBatch> {
        match self.value(name)? {
            Value::Table(t) => Ok(t),
            other => Err(format!("argument `{name}` must be a table, got {}", kind(other))),
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Table(_) => "a table",
        Value::Grouped(_) => "a grouped table",
        Value::Column(_) => "a list",
        Value::Scalar(_) => "a single value",
    }
}

/// Finds a column by name: exact match first, then ASCII case-insensitive (as the reference).
fn column<'t>(t: &'t RecordBatch, key: &str) -> R<(usize, &'t ArrayRef)> {
    let schema = t.schema();
    let idx = schema
        .index_of(key)
        .ok()
        .or_else(|| schema.fields().iter().position(|f| f.name().eq_ignore_ascii_case(key)))
        .ok_or_else(|| format!("no column `{key}`"))?;
    Ok((idx, t.column(idx)))
}

fn json_to_datum(v: &Json) -> R<Datum> {
    Ok(match v {
        Json::Null => Datum::Null,
        Json::Bool(b) => Datum::Int(*b as i64),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Datum::Int(i),
            None => Datum::real(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Datum::Text(s.clone()),
        other => return Err(format!("value must be a string, number or null, got {other}")),
    })
}

/// SQL ordering of a cell against a comparison value, `None` when the cell is NULL.
fn compare(cell: &Datum, value: &Datum) -> Option<Ordering> {
    match (cell, value) {
        (Datum::Null, _) | (_, Datum::Null) => None,
        (Datum::Text(a), Datum::Text(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
        (Datum::Text(a), n) => Some(a.as_bytes().cmp(table::number_text(n)?.as_bytes())),
        (n, Datum::Text(b)) => match b.trim().parse::<f64>() {
            Ok(y) => n.as_f64()?.partial_cmp(&y),
            Err(_) => Some(Ordering::Less),
        },
        (a, b) => a.as_f64()?.partial_cmp(&b.as_f64()?),
    }
}

/// SQL `LIKE`: `%` any run, `_` one character, ASCII case-insensitive, no escape character.
pub fn like(text: &str, pattern: &str) -> bool {
    fn go(t: &[char], p: &[char]) -> bool {
        match p.split_first() {
            None => t.is_empty(),
            Some(('%', rest)) => (0..=t.len()).any(|i| go(&t[i..], rest)),
            Some(('_', rest)) => !t.is_empty() && go(&t[1..], rest),
            Some((c, rest)) => t.first().is_some_and(|x| x.eq_ignore_ascii_case(c)) && go(&t[1..], rest),
        }
    }
    let t: Vec<char> = text.chars().collect();
    let mut p: Vec<char> = Vec::new();
    for c in pattern.chars() {
        if !(c == '%' && p.last() == Some(&'%')) {
            p.push(c);
        }
    }
    go(&t, &p)
}

fn cell_text(d: &Datum) -> Option<String> {
    match d {
        Datum::Null => None,
        Datum::Text(t) => Some(t.clone()),
        n => table::number_text(n),
    }
}

fn take(t: &RecordBatch, rows: &[u32]) -> R<RecordBatch> {
    let idx = UInt32Array::from(rows.to_vec());
    arrow_select::take::take_record_batch(t, &idx).map_err(|e| e.to_string())
}

/// `filter_data(data_source, key_name, value, condition)` → table of the rows whose `key_name`
/// cell satisfies `condition` against `value`; conditions `equal_to`, `not_equal_to`,
/// `greater_than`, `less_than`, `greater_than_equal_to`, `less_than_equal_to`, `contains`,
/// `like`, `not_like`, and `is_in`/`not_in` against a list. `value` may be the `$LABEL$` of an
/// earlier single value; a NULL one (an empty subquery) matches no row, as in SQL.
fn filter_data(args: &Args) -> R<Value> {
    let t = args.table("data_source")?;
    let (_, col) = column(t, args.str("key_name")?)?;
    let condition = args.str("condition")?;
    if condition == "is_in" || condition == "not_in" {
        let list = match args.value("value")? {
            Value::Column(a) => datums(a.as_ref()),
            Value::Scalar(d) => vec![d.clone()],
            other => return Err(format!("`{condition}` needs a list as `value`, got {}", kind(other))),
        };
        let has_null = list.iter().any(|d| matches!(d, Datum::Null));
        let member = |c: &Datum| list.iter().any(|v| compare(c, v) == Some(Ordering::Equal));
        let rows: Vec<u32> = (0..t.num_rows())
            .filter(|&r| {
                let c = datum_at(col.as_ref(), r);
                match condition {
                    "is_in" => member(&c),
                    _ => !matches!(c, Datum::Null) && !has_null && !member(&c),
                }
            })
            .map(|r| r as u32)
            .collect();
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
        ("like", v) => {
            let pattern = cell_text(v).ok_or("`like` needs a pattern")?;
            Box::new(move |c| cell_text(c).is_some_and(|s| like(&s, &pattern)))
        }
        ("not_like", v) => {
            let pattern = cell_text(v).ok_or("`not_like` needs a pattern")?;
            Box::new(move |c| cell_text(c).is_some_and(|s| !like(&s, &pattern)))
        }
        (other, _) => return Err(format!("unknown condition `{other}`")),
    };
    let rows: Vec<u32> = (0..t.num_rows())
        .filter(|&r| test(&datum_at(col.as_ref(), r)))
        .map(|r| r as u32)
        .collect();
    take(t, &rows).map(Value::Table)
}

fn distinct_datums(values: Vec<Datum>) -> Vec<Datum> {
    let mut seen: Vec<Datum> = Vec::new();
    let mut keys = std::collections::HashSet::new();
    for v in values {
        if keys.insert(datum_key(&v)) {
            seen.push(v);
        }
    }
    seen
}

/// A hashable identity for distinct/grouping: numbers by value, text by bytes, NULL one value.
fn datum_key(d: &Datum) -> (u8, u64, String) {
    match d {
        Datum::Null => (0, 0, String::new()),
        Datum::Int(i) => (1, (*i as f64).to_bits(), String::new()),
        Datum::Real(r) => (1, (r + 0.0).to_bits(), String::new()),
        Datum::Text(t) => (2, 0, t.clone()),
    }
}

/// `retrieve_data(data_source, key_name, distinct=false, limit=-1)` → list: the column's values
/// (first occurrences only when `distinct`), then the first `limit` of them (`-1`: all). On a
/// grouped table: the column's value in each group's first row (the group key for the key).
fn retrieve_data(args: &Args) -> R<Value> {
    let key = args.str("key_name")?;
    let mut values = match args.value("data_source")? {
        Value::Grouped(g) => {
            let (_, col) = column(&g.table, key)?;
            g.groups
                .iter()
                .map(|rows| datum_at(col.as_ref(), rows[0] as usize))
                .collect()
        }
        Value::Table(t) => datums(column(t, key)?.1.as_ref()),
        Value::Column(a) => datums(a.as_ref()),
        Value::Scalar(d) => vec![d.clone()],
    };
    if args.bool_or("distinct", false)? {
        values = distinct_datums(values);
    }
    if let Some(n) = args.limit()? {
        values.truncate(n);
    }
    Ok(Value::Column(array_from_datums(&values)))
}

fn aggregate(values: Vec<Datum>, how: &str, count_rows: bool) -> R<Datum> {
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

/// The `aggregation_type` values [`aggregate_data`] accepts.
pub const AGGREGATION_TYPES: [&str; 8] = ["min", "max", "sum", "mean", "count", "std", "argmin", "argmax"];

fn unknown_aggregation(how: &str) -> String {
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
fn aggregate_data(args: &Args) -> R<Value> {
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

/// SQLite's ordering of values: NULL < numbers < text.
fn sql_order(a: &Datum, b: &Datum) -> Ordering {
    match (a, b) {
        (Datum::Null, Datum::Null) => Ordering::Equal,
        (Datum::Null, _) => Ordering::Less,
        (_, Datum::Null) => Ordering::Greater,
        (Datum::Text(x), Datum::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Datum::Text(_), _) => Ordering::Greater,
        (_, Datum::Text(_)) => Ordering::Less,
        (x, y) => x.as_f64().unwrap_or(0.0).total_cmp(&y.as_f64().unwrap_or(0.0)),
    }
}

/// `sort_data(data_source, key_name, ascending=false)` → the table stably sorted by the column
/// (NULL first ascending, last descending).
fn sort_data(args: &Args) -> R<Value> {
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

/// `group_data_by(data_source, key_name)` → grouped table; NULL keys form one group; groups in
/// first-appearance order.
fn group_data_by(args: &Args) -> R<Value> {
    let t = args.table("data_source")?;
    let key = args.str("key_name")?;
    let (idx, col) = column(t, key)?;
    let mut index: HashMap<(u8, u64, String), usize> = HashMap::new();
    let mut groups: Vec<Vec<u32>> = Vec::new();
    for r in 0..t.num_rows() {
        let k = datum_key(&datum_at(col.as_ref(), r));
        let g = *index.entry(k).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(r as u32);
    }
    let key = t.schema().field(idx).name().clone();
    Ok(Value::Grouped(Grouped {
        table: t.clone(),
        key,
        groups,
    }))
}

/// `transform_data(data_source, key_name, operation_type, operation_args)` → the table with
/// the column replaced: `substring {start_index, end_index}` (0-based, end exclusive, on
/// characters; numbers are first rendered as text), `abs`, `datetime {pattern: "%Y"|"%m"|"%d"}`
/// (the component of an ISO date as text, NULL when the cell is not a date).
fn transform_data(args: &Args) -> R<Value> {
    let t = args.table("data_source")?;
    let (idx, col) = column(t, args.str("key_name")?)?;
    let op = args.str("operation_type")?;
    let empty = serde_json::Map::new();
    let op_args = args.opt("operation_args").and_then(Json::as_object).unwrap_or(&empty);
    let int_arg = |name: &str| op_args.get(name).and_then(Json::as_i64);
    let cells = datums(col.as_ref());
    let out: Vec<Datum> = match op {
        "substring" => {
            let start = int_arg("start_index").unwrap_or(0).max(0) as usize;
            let end = int_arg("end_index");
            cells
                .iter()
                .map(|c| match cell_text(c) {
                    None => Datum::Null,
                    Some(s) => {
                        let chars: Vec<char> = s.chars().collect();
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
            .map(|c| match c {
                Datum::Int(i) => Datum::Int(i.abs()),
                Datum::Real(r) => Datum::Real(r.abs()),
                _ => Datum::Null,
            })
            .collect(),
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
                .map(|c| match c {
                    Datum::Text(s) if is_iso_date(s) => Datum::Text(s[range.clone()].to_string()),
                    _ => Datum::Null,
                })
                .collect()
        }
        other => return Err(format!("unknown operation_type `{other}`")),
    };
    let mut columns: Vec<ArrayRef> = t.columns().to_vec();
    columns[idx] = array_from_datums(&out);
    let fields: Vec<arrow_schema::Field> = t
        .schema()
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| arrow_schema::Field::new(f.name(), c.data_type().clone(), true))
        .collect();
    let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(t.num_rows()));
    RecordBatch::try_new_with_options(Arc::new(arrow_schema::Schema::new(fields)), columns, &options)
        .map(Value::Table)
        .map_err(|e| e.to_string())
}

fn is_iso_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b[..4].iter().chain(&b[5..7]).chain(&b[8..10]).all(u8::is_ascii_digit)
}

/// `truncate(truncate_array, n)` (SEL) → the first `n` values of a list.
fn truncate(args: &Args) -> R<Value> {
    let n = args.json("n")?.as_u64().ok_or("`n` must be a non-negative integer")? as usize;
    match args.value("truncate_array")? {
        Value::Column(a) => Ok(Value::Column(a.slice(0, n.min(a.len())))),
        other => Err(format!("`truncate_array` must be a list, got {}", kind(other))),
    }
}

/// `select_unique_values(unique_array)` → the list's distinct values, first occurrences in order.
fn select_unique_values(args: &Args) -> R<Value> {
    let values = match args.value("unique_array")? {
        Value::Column(a) => datums(a.as_ref()),
        other => return Err(format!("`unique_array` must be a list, got {}", kind(other))),
    };
    Ok(Value::Column(array_from_datums(&distinct_datums(values))))
}

/// `concatenate_data(data_source_1, data_source_2)` → the rows of the first table, then the
/// rows of the second (same columns; no de-duplication).
fn concatenate_data(args: &Args) -> R<Value> {
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
fn combine_input(args: &Args, name: &str) -> R<(Vec<String>, Vec<Vec<Datum>>)> {
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
fn combine_data(args: &Args) -> R<Value> {
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
                if seen.insert(key(&r)) {
                    out.push(r);
                }
            }
        }
        "intersect" | "except" => {
            for r in a {
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

/// `calculate(operand_a, operand_b, operator)` (toolforge extension): `add`, `subtract`,
/// `multiply`, `divide` on numbers, single values or lists (elementwise; a single value is
/// broadcast). Operands are numbers or `$LABEL$` references. Integers stay integers except under
/// `divide`, which is always real division; division by zero and NULL operands give NULL.
fn calculate(args: &Args) -> R<Value> {
    // An operand's values, and whether it is a single value (a number or a scalar output).
    let operand = |name: &str| -> R<(Vec<Datum>, bool)> {
        let v = args.json(name)?;
        if as_label_ref(v).is_none() {
            return Ok((vec![json_to_datum(v)?], true));
        }
        match args.value(name)? {
            Value::Scalar(d) => Ok((vec![d.clone()], true)),
            Value::Column(a) => Ok((datums(a.as_ref()), false)),
            other => Err(format!("`{name}` must be a number or a list, got {}", kind(other))),
        }
    };
    let ((a, a_scalar), (b, b_scalar)) = (operand("operand_a")?, operand("operand_b")?);
    let op = args.str("operator")?;
    let scalar = a_scalar && b_scalar;
    let n = a.len().max(b.len());
    if !(a.len() == n || a.len() == 1) || !(b.len() == n || b.len() == 1) {
        return Err(format!("operands have lengths {} and {}", a.len(), b.len()));
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let (x, y) = (&a[i.min(a.len() - 1)], &b[i.min(b.len() - 1)]);
        out.push(arith(x, y, op)?);
    }
    if scalar {
        Ok(Value::Scalar(out.pop().unwrap_or(Datum::Null)))
    } else {
        Ok(Value::Column(array_from_datums(&out)))
    }
}

fn arith(x: &Datum, y: &Datum, op: &str) -> R<Datum> {
    let (Some(fx), Some(fy)) = (x.as_f64(), y.as_f64()) else {
        if matches!(x, Datum::Null) || matches!(y, Datum::Null) {
            return Ok(Datum::Null);
        }
        return Err(format!("`calculate` needs numbers, got {x:?} and {y:?}"));
    };
    if let (Datum::Int(a), Datum::Int(b)) = (x, y) {
        let r = match op {
            "add" => a.checked_add(*b),
            "subtract" => a.checked_sub(*b),
            "multiply" => a.checked_mul(*b),
            _ => None,
        };
        if let Some(r) = r {
            return Ok(Datum::Int(r));
        }
    }
    Ok(match op {
        "add" => Datum::real(fx + fy),
        "subtract" => Datum::real(fx - fy),
        "multiply" => Datum::real(fx * fy),
        "divide" if fy == 0.0 => Datum::Null,
        "divide" => Datum::real(fx / fy),
        other => return Err(format!("unknown operator `{other}`")),
    })
}
