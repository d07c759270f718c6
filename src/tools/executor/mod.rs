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
mod aggregate;
mod args;
mod calculate;
mod case;
mod cells;
mod combine;
pub mod estimate;
mod filter;
mod group;
pub mod limits;
mod preview;
mod retrieve;
mod scalar;
mod sort;
mod timevalue;
mod transform;

pub use self::aggregate::AGGREGATION_TYPES;
pub use self::cells::{Like, like};
pub use self::estimate::{Estimate, value_bytes};
pub use self::limits::{Limits, StepError};
pub use self::preview::{Preview, json_len};

use std::collections::HashMap;
use std::path::PathBuf;

use arrow_array::{Array, ArrayRef, RecordBatch};
use serde_json::Value as Json;

use self::aggregate::aggregate_data;
use self::args::Args;
use self::calculate::calculate;
use self::combine::{combine_data, concatenate_data};
use self::filter::filter_data;
use self::group::group_data_by;
use self::retrieve::{retrieve_data, select_unique_values, truncate};
use self::sort::sort_data;
use self::transform::transform_data;
use super::table::{self, JoinCondition, datums};
use super::{Call, sink_calls};
use crate::verify::{Answer, Datum};

/// A grouped table: row indices per group, groups in first-appearance order.
#[derive(Debug, Clone)]
pub struct Grouped {
    /// The table that was grouped.
    pub table: RecordBatch,
    /// The grouping columns (one, or several for a multi-key GROUP BY).
    pub keys: Vec<String>,
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

    /// Removes and returns the output stored under `label` (the live server's session budget
    /// drops old results, [`crate::serve`]).
    pub fn remove(&mut self, label: &str) -> Option<Value> {
        self.outputs.remove(label)
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
///
/// [`Preview`] writes the same text without building the tree (the live server's answers).
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
        Value::Grouped(g) => {
            serde_json::json!({"grouped_by": match g.keys.as_slice() { [one] => serde_json::json!(one), several => serde_json::json!(several) }, "groups": g.groups.len()})
        }
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
        self.step_within(session, call, &Limits::NONE)
            .map_err(|e| e.to_string())
    }

    /// [`Executor::step`] under `limits` (the live server, [`limits`]): the arguments are
    /// checked against the argument limits, the output's upper bound ([`estimate`]) against
    /// the output budget before anything is built, and the operators' loops stop at the
    /// deadline or when cancelled.
    pub fn step_within<'s>(
        &self,
        session: &'s mut Session,
        call: &Call,
        limits: &Limits,
    ) -> Result<&'s Value, StepError> {
        if limits.check_arguments {
            limits::check_arguments(&call.name, &call.arguments)?;
        }
        let label = call.label.clone();
        let call = self.unbound(call, &session.outputs);
        if let Some(max) = limits.max_output_bytes {
            let e = estimate::estimate(&call, &session.outputs);
            if e.grows && e.output > max {
                return Err(StepError::OverBudget {
                    tool: call.name.clone(),
                    estimate: e.output,
                    max,
                });
            }
        }
        let (value, stopped) = limits::watched(limits, || self.call(&call, &session.outputs));
        let value = match (value, stopped) {
            (_, Some(why)) => return Err(why),
            (Err(m), None) => return Err(StepError::Invalid(m)),
            (Ok(v), None) => v,
        };
        session.outputs.insert(label.clone(), value);
        Ok(&session.outputs[&label])
    }

    /// The bounds of `call` over `session`'s outputs, computed before it runs ([`estimate`]).
    pub fn estimate(&self, session: &Session, call: &Call) -> Estimate {
        estimate::estimate(&self.unbound(call, &session.outputs), &session.outputs)
    }

    /// `call` with a SEL name unbound to its SLOT tool and arguments ([`super::sel::unbind`]).
    fn unbound<'c>(&self, call: &'c Call, env: &HashMap<String, Value>) -> std::borrow::Cow<'c, Call> {
        if call.name.starts_with("initialize") || SLOT_TOOLS.contains(&call.name.as_str()) {
            std::borrow::Cow::Borrowed(call)
        } else {
            std::borrow::Cow::Owned(super::sel::unbind(call, &source_columns(call, env)))
        }
    }

    /// Executes `calls` in order and returns the final answer (see the module docs).
    pub fn run(&self, calls: &[Call]) -> Result<Answer, ExecError> {
        self.run_with_setup(&[], calls)
    }

    /// Runs the instance's setup calls (the join steps: `initialization_step`, then
    /// `additional_setup_steps`, see [`crate::tools::setup_and_calls`]), then `calls`, and
    /// returns the final answer built from `calls`' sinks (setup calls are never part of the
    /// answer). An error in a setup call has index 0 and its tool name.
    pub fn run_with_setup(&self, setup: &[&Call], calls: &[Call]) -> Result<Answer, ExecError> {
        let mut session = Session::default();
        for call in setup {
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
        let sinks = sink_calls(calls);
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

    /// Runs `call` (already unbound, [`Executor::unbound`]) over `env`.
    fn call(&self, call: &Call, env: &HashMap<String, Value>) -> R<Value> {
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
        table::join_at(&path, &tables, &conds).map(Value::Table)
    }
}

/// The column names of the table a call's `data_source` refers to (empty when it is not a
/// table): what a SEL getter `get_<plural>` is unbound against.
fn source_columns(call: &Call, env: &HashMap<String, Value>) -> Vec<String> {
    let table = match call
        .arguments
        .get("data_source")
        .and_then(crate::tools::as_label_ref)
        .and_then(|l| env.get(l))
    {
        Some(Value::Table(t)) => t.schema(),
        Some(Value::Grouped(g)) => g.table.schema(),
        _ => return vec![],
    };
    table.fields().iter().map(|f| f.name().clone()).collect()
}
